// FTCS: stability limit, eigenmode decay, conservation, maximum principle and convergence orders.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/random.hpp"
#include "solvers/test_heat_mms.hpp"

using namespace attnphys;
using namespace attnphys::heat;
using namespace attnphys::heat_test;

namespace {

View3<double> from_host(const HostView3<double>& h) {
  View3<double> d("u", h.extent(0), h.extent(1), h.extent(2));
  Kokkos::deep_copy(d, h);
  return d;
}

// A rough random state (uniform in [-1, 2]) shaped for the problem, `batch` samples.
View3<double> random_state(const fd::HeatStepper& s, long batch, std::uint64_t seed) {
  auto u = s.make_state(batch);
  fill_uniform(u, seed, 0, -1.0, 2.0);
  return u;
}

double total(const View3<double>& u) {
  double s = 0.0;
  Kokkos::parallel_reduce(
      "sum", Kokkos::RangePolicy<ExecSpace>(0, u.size()), KOKKOS_LAMBDA(const long i, double& a) { a += u.data()[i]; },
      s);
  return s;
}

}  // namespace

TEST(HeatFtcs, StepAboveTheLimitIsRefusedWithTheLimit) {
  auto p = make_problem(2, {16, 16, 1}, {1.0 / 16, 1.0 / 16, 1}, 1.0, "periodic");
  fd::HeatStepper s(p, fd::Method::Ftcs);
  const double limit = 1.0 / (4.0 * 256.0);  // h²/(2 d κ)
  EXPECT_NEAR(s.ftcs_limit(), limit, 1e-15);
  auto u = s.make_state();
  try {
    s.advance(u, 0.0, 0.01, 1.01 * limit);
    FAIL() << "expected the step to be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stability limit dt_max = 0.000976562"), std::string::npos) << e.what();
  }
  // With sub-steps allowed the same request runs and matches explicit small steps exactly.
  fd::HeatStepper sub(p, fd::Method::Ftcs, /*substep=*/true);
  auto a = random_state(s, 1, 3), b = random_state(s, 1, 3);
  sub.step(a, 0.0, 3.5 * limit);
  for (int i = 0; i < 4; ++i) s.step(b, i * 0.875 * limit, 0.875 * limit);
  EXPECT_LT(rms_diff(a, b), 1e-15);
}

TEST(HeatFtcs, EigenmodeDecaysByTheDiscreteFactorAndNearTheExactRate) {
  // u0 = sin(2πk x)·cos(2πm y) on a periodic grid is an eigenvector of the discrete Laplacian.
  const long n = 32;
  const double h = 1.0 / n, kappa = 0.7;
  auto p = make_problem(2, {n, n, 1}, {h, h, 1}, kappa, "periodic");
  fd::HeatStepper s(p, fd::Method::Ftcs);
  HostView3<double> h0("u0", 1, n, n);
  const int kx = 2, my = 3;
  for (long j = 0; j < n; ++j)
    for (long i = 0; i < n; ++i) h0(0, j, i) = std::sin(2 * M_PI * kx * i * h) * std::cos(2 * M_PI * my * j * h);
  auto u = from_host(h0);
  const double dt = 0.5 * s.ftcs_limit(), t_end = 0.01;
  const long steps = s.advance(u, 0.0, t_end, dt);
  const double dts = t_end / steps;
  const double lam = -4 * kappa / (h * h) * (std::pow(std::sin(M_PI * kx * h), 2) + std::pow(std::sin(M_PI * my * h), 2));
  const double discrete = std::pow(1 + dts * lam, steps);
  const double exact = std::exp(-kappa * 4 * M_PI * M_PI * (kx * kx + my * my) * t_end);
  auto hu = to_host(u);
  double err_discrete = 0.0;
  for (long j = 0; j < n; ++j)
    for (long i = 0; i < n; ++i) err_discrete = std::max(err_discrete, std::abs(hu(0, j, i) - discrete * h0(0, j, i)));
  EXPECT_LT(err_discrete, 1e-13);
  // Against exp(-κ|k|²t): the scheme's error is t·(κ²|k|⁴dt/2 - κ Σk_a⁴ h²/12) to leading order.
  const double k2 = 4 * M_PI * M_PI * (kx * kx + my * my);
  const double k4 = std::pow(2 * M_PI, 4) * (std::pow(kx, 4) + std::pow(my, 4));
  const double predicted = exact * t_end * std::abs(kappa * kappa * k2 * k2 * dts / 2 - kappa * k4 * h * h / 12);
  EXPECT_NEAR(discrete - exact, 0.0, 1.3 * predicted + 1e-14);
  EXPECT_GT(std::abs(discrete - exact), 0.5 * predicted);
}

TEST(HeatFtcs, TotalHeatIsConservedWithInsulatedAndPeriodicSides) {
  for (const char* bc : {"neumann", "periodic"})
    for (int dim = 1; dim <= 3; ++dim)
      for (bool var : {false, true}) {
        const long n = dim == 3 ? 10 : 24;
        auto p = make_problem(dim, {n, n, n}, {0.1, 0.1, 0.1}, 1.3, bc);
        if (var) {
          const auto e = p.spatial_extents();
          p.kappa_field = View3<double>("k", e[0], e[1], e[2]);
          fill_uniform(p.kappa_field, 11, 1, 0.1, 2.0);  // rough: a worst case for conservation
        }
        fd::HeatStepper s(p, fd::Method::Ftcs);
        auto u = random_state(s, dim == 3 ? 1 : 3, 5);
        const double before = total(u);
        s.advance(u, 0.0, 200 * s.ftcs_limit(), s.ftcs_limit());
        EXPECT_NEAR(total(u), before, 1e-12 * std::abs(before)) << bc << " " << dim << "D var=" << var;
      }
}

TEST(HeatFtcs, MaximumPrincipleHoldsAtTheLimit) {
  for (const char* bc : {"neumann", "periodic", "dirichlet"})
    for (int dim = 1; dim <= 3; ++dim) {
      const long n = dim == 3 ? 8 : 20;
      auto p = make_problem(dim, {n, n, n}, {0.1, 0.2, 0.15}, 0.9, bc);
      const auto e = p.spatial_extents();
      p.kappa_field = View3<double>("k", e[0], e[1], e[2]);
      fill_uniform(p.kappa_field, 2, 1, 0.05, 1.0);
      fd::HeatStepper s(p, fd::Method::Ftcs);
      auto u = random_state(s, 1, 9);
      auto h0 = to_host(u);
      double lo = std::string(bc) == "dirichlet" ? 0.0 : 1e300, hi = std::string(bc) == "dirichlet" ? 0.0 : -1e300;
      for (std::size_t i = 0; i < h0.size(); ++i) lo = std::min(lo, h0.data()[i]), hi = std::max(hi, h0.data()[i]);
      for (int step = 0; step < 50; ++step) {
        s.step(u, 0.0, s.ftcs_limit());
        auto h = to_host(u);
        for (std::size_t i = 0; i < h.size(); ++i) {
          ASSERT_GE(h.data()[i], lo - 1e-14) << bc << " " << dim << "D step " << step;
          ASSERT_LE(h.data()[i], hi + 1e-14) << bc << " " << dim << "D step " << step;
        }
      }
    }
}

// Spatial order 2 with dt ∝ h² (the time error, O(dt) = O(h²), keeps the same order), each boundary type,
// constant and variable κ; then time order 1 on a fixed grid.
TEST(HeatFtcs, ManufacturedSolutionsConvergeAtSecondOrderInSpace) {
  for (BcType bc : {BcType::Periodic, BcType::Dirichlet, BcType::Neumann})
    for (bool var : {false, true})
      for (int dim : {1, 2}) {
        const Mms m = mms(dim, bc, var);
        std::vector<double> err;
        const std::vector<long> grids = dim == 1 ? std::vector<long>{16, 32, 64} : std::vector<long>{12, 24, 48};
        for (long n : grids)
          err.push_back(mms_error(m, n, 0.01, fd::Method::Ftcs, [](const HeatProblem&, double lim) { return 0.5 * lim; }));
        for (int i = 0; i + 1 < int(err.size()); ++i) {
          const double order = std::log2(err[i] / err[i + 1]);
          EXPECT_GT(order, 1.85) << to_string(bc) << " var=" << var << " " << dim << "D err " << err[i] << " -> "
                                 << err[i + 1];
          EXPECT_LT(order, 2.3) << to_string(bc) << " var=" << var << " " << dim << "D";
        }
      }
}

TEST(HeatFtcs, MixedBoundariesIn3DConvergeAtSecondOrder) {
  Mms m = mms(3, BcType::Dirichlet, true);
  m.bc[1] = {BcType::Neumann, BcType::Dirichlet};
  m.bc[2] = {BcType::Periodic, BcType::Periodic};
  const double e1 = mms_error(m, 8, 0.02, fd::Method::Ftcs, [](const HeatProblem&, double lim) { return 0.5 * lim; });
  const double e2 = mms_error(m, 16, 0.02, fd::Method::Ftcs, [](const HeatProblem&, double lim) { return 0.5 * lim; });
  EXPECT_NEAR(std::log2(e1 / e2), 2.0, 0.3) << e1 << " " << e2;
}

TEST(HeatFtcs, FirstOrderInTime) {
  for (BcType bc : {BcType::Periodic, BcType::Dirichlet, BcType::Neumann}) {
    const Mms m = mms(2, bc, true);
    auto pr = m.problem(16);
    const double dt = fd::HeatStepper(pr, fd::Method::Ftcs).ftcs_limit();
    const double d1 = time_self_diff(m, 16, 0.05, fd::Method::Ftcs, dt);
    const double d2 = time_self_diff(m, 16, 0.05, fd::Method::Ftcs, dt / 2);
    EXPECT_NEAR(std::log2(d1 / d2), 1.0, 0.1) << to_string(bc);
  }
}

TEST(HeatFtcs, TwoStepsPerSweepEqualTwoSingleSteps) {
  // The temporally blocked sweep (level 1 kept in a ring of three slices) against two plain steps, on grids of
  // unequal sides with every boundary type, constant nonzero boundary data (a static forcing), a 2D batch, and the
  // slices split into several chunks (what threads get) including chunks of one or two slices.
  using B = BoundaryCondition;
  struct Case {
    int dim;
    std::array<long, 3> n;
    std::array<std::array<B, 2>, 3> bc;
    long batch;
  };
  const std::vector<Case> cases = {
      {2, {7, 9, 1}, {{{B::periodic(), B::periodic()}, {B::periodic(), B::periodic()}, {}}}, 3},
      {2, {6, 11, 1}, {{{B::dirichlet(1.5), B::neumann(0.3)}, {B::neumann(-0.7), B::dirichlet(0.4)}, {}}}, 2},
      {2, {5, 8, 1}, {{{B::periodic(), B::periodic()}, {B::dirichlet(0.0), B::dirichlet(2.0)}, {}}}, 1},
      {3, {6, 5, 11}, {{{B::periodic(), B::periodic()}, {B::periodic(), B::periodic()}, {B::periodic(), B::periodic()}}}, 1},
      {3, {6, 5, 9}, {{{B::dirichlet(1.0), B::neumann(0.2)}, {B::periodic(), B::periodic()}, {B::neumann(0.5), B::dirichlet(-1.0)}}}, 1},
      {3, {4, 7, 10}, {{{B::neumann(0.0), B::neumann(0.0)}, {B::dirichlet(0.3), B::neumann(0.1)}, {B::periodic(), B::periodic()}}}, 1},
  };
  for (const auto& c : cases) {
    HeatProblem p = make_problem(c.dim, c.n, {1.0 / c.n[0], 1.3 / c.n[1], 0.8 / c.n[2]}, 0.9, "periodic");
    p.bc = c.bc;
    fd::HeatOperator op(p);
    const auto e = op.spatial();
    auto u = View3<double>("u", c.dim == 3 ? e[0] : c.batch, e[1], e[2]);
    fill_uniform(u, 11, 0, -1.0, 2.0);
    View3<double> G("G", e[0], e[1], e[2]);
    op.forcing(G, {{1.0, 0.0, fd::HeatOperator::AllParts}});
    const double dt = 0.9 * op.ftcs_limit();
    View3<double> a("a", u.extent(0), u.extent(1), u.extent(2)), ref("ref", u.extent(0), u.extent(1), u.extent(2));
    op.combine(a, u, u, {dt, dt, dt}, dt, G, 0.0, {});
    op.combine(ref, a, a, {dt, dt, dt}, dt, G, 0.0, {});
    const double scale = rms_diff(ref, View3<double>("zero", u.extent(0), u.extent(1), u.extent(2)));
    ASSERT_GT(scale, 0.1);
    for (long chunks : {0L, 1L, 2L, 3L, 5L})
      for (long band : {0L, 1L, 2L, 3L}) {  // 3D: bands of 1, 2, 3 rows or the cache-sized default (whole plane)
        View3<double> out("out", u.extent(0), u.extent(1), u.extent(2));
        ASSERT_TRUE(op.ftcs_two_steps(out, u, dt, G, chunks, band)) << c.dim << "D";
        EXPECT_LT(rms_diff(out, ref), 1e-13 * scale) << c.dim << "D n = " << c.n[0] << "x" << c.n[1] << "x" << c.n[2]
                                                           << ", chunks " << chunks << ", band " << band;
      }
  }
  // A problem with boundary data needs its forcing: leaving it out is an error, not a silently unforced step.
  {
    HeatProblem p = make_problem(2, {6, 8, 1}, {1.0 / 6, 1.0 / 8, 1}, 1.0, "periodic");
    p.bc[1] = {BoundaryCondition::dirichlet(1.0), BoundaryCondition::dirichlet(0.0)};
    fd::HeatOperator op(p);
    View3<double> u("u", 1, 8, 6), o("o", 1, 8, 6);
    try {
      op.ftcs_two_steps(o, u, 0.5 * op.ftcs_limit(), {});
      ADD_FAILURE() << "expected a missing forcing to be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("pass its forcing"), std::string::npos) << e.what();
    }
  }
  // Where it does not apply it says so and leaves the output alone: 1D, variable κ, fewer than 4 slices.
  auto p1 = make_problem(1, {16, 1, 1}, {1.0 / 16, 1, 1}, 1.0, "periodic");
  fd::HeatOperator op1(p1);
  View3<double> u1("u1", 1, 1, 16), o1("o1", 1, 1, 16);
  EXPECT_FALSE(op1.ftcs_two_steps(o1, u1, 1e-4, {}));
  auto pv = make_problem(2, {8, 8, 1}, {1.0 / 8, 1.0 / 8, 1}, 1.0, "periodic");
  pv.kappa_field = View3<double>("kappa", 1, 8, 8);
  Kokkos::deep_copy(pv.kappa_field, 2.0);
  fd::HeatOperator opv(pv);
  View3<double> u2("u2", 1, 8, 8), o2("o2", 1, 8, 8);
  EXPECT_FALSE(opv.ftcs_two_steps(o2, u2, 1e-4, {}));
  auto p3 = make_problem(2, {8, 3, 1}, {1.0 / 8, 1.0 / 3, 1}, 1.0, "periodic");
  fd::HeatOperator op3(p3);
  View3<double> u3("u3", 1, 3, 8), o3("o3", 1, 3, 8);
  EXPECT_FALSE(op3.ftcs_two_steps(o3, u3, 1e-4, {}));
}
