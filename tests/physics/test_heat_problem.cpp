// The heat problem refuses bad input with messages that say what to fix.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attnphys/core/random.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"

using namespace attnphys;
using namespace attnphys::heat;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(HeatProblem, UnknownBoundaryTypeIsRefused) {
  const auto m = error_of([] { make_problem(1, {8, 1, 1}, {0.1, 1, 1}, 1.0, "robin"); });
  EXPECT_NE(m.find("unknown boundary type 'robin'"), std::string::npos) << m;
  EXPECT_NE(m.find("periodic, dirichlet or neumann"), std::string::npos) << m;
}

TEST(HeatProblem, NegativeOrNanDiffusivityIsRefused) {
  EXPECT_NE(error_of([] { make_problem(2, {8, 8, 1}, {0.1, 0.1, 1}, -1.0, "periodic"); }).find("kappa"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_problem(1, {8, 1, 1}, {0.1, 1, 1}, std::nan(""), "dirichlet"); }).find("kappa"),
            std::string::npos);
  for (double bad : {-0.5, std::numeric_limits<double>::quiet_NaN()}) {
    auto p = make_problem(2, {6, 5, 1}, {0.1, 0.1, 1}, 1.0, "neumann");
    p.kappa_field = View3<double>("k", 1, 5, 6);
    Kokkos::deep_copy(p.kappa_field, 1.0);
    auto h = to_host(p.kappa_field);
    h(0, 3, 2) = bad;
    Kokkos::deep_copy(p.kappa_field, h);
    const auto m = error_of([&] { p.validate(); });
    EXPECT_NE(m.find("1 negative, NaN or infinite"), std::string::npos) << m;
  }
}

TEST(HeatProblem, EmptyGridIsRefused) {
  const auto m = error_of([] { make_problem(2, {8, 0, 1}, {0.1, 0.1, 1}, 1.0, "periodic"); });
  EXPECT_NE(m.find("0 cells along y"), std::string::npos) << m;
}

TEST(HeatProblem, MismatchedKappaShapeIsRefused) {
  auto p = make_problem(2, {6, 5, 1}, {0.1, 0.1, 1}, 1.0, "periodic");
  p.kappa_field = View3<double>("k", 1, 6, 5);  // transposed
  const auto m = error_of([&] { p.validate(); });
  EXPECT_NE(m.find("kappa field has shape (1, 6, 5), the grid needs (1, 5, 6)"), std::string::npos) << m;
}

TEST(HeatProblem, PeriodicNeedsBothSidesAndThreeCells) {
  auto p = make_problem(1, {8, 1, 1}, {0.1, 1, 1}, 1.0, "periodic");
  p.bc[0][1] = BoundaryCondition::dirichlet(0.0);
  EXPECT_NE(error_of([&] { p.validate(); }).find("both sides"), std::string::npos);
  EXPECT_NE(error_of([] { make_problem(1, {2, 1, 1}, {0.1, 1, 1}, 1.0, "periodic"); }).find("at least 3"),
            std::string::npos);
}

TEST(HeatProblem, CoordinatesFollowTheGridConvention) {
  auto per = make_problem(1, {4, 1, 1}, {0.25, 1, 1}, 1.0, "periodic");
  auto dir = make_problem(1, {4, 1, 1}, {0.25, 1, 1}, 1.0, "dirichlet");
  EXPECT_DOUBLE_EQ(per.coord(0, 1), 0.25);   // x_i = i h
  EXPECT_DOUBLE_EQ(dir.coord(0, 1), 0.375);  // cell centres
  EXPECT_DOUBLE_EQ(dir.grid.length(0), 1.0);
}
