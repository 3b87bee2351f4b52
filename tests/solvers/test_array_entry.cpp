// The array entry points behind the Python functions that take numpy arrays (solvers/src/entry/arrays.cpp): every
// refusal names the argument and what it should be; what passes is converted to views of the arrays' shapes. The
// fuzz target tests/fuzz/fuzz_arrays.cpp drives the same functions with arbitrary input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/entry/arrays.hpp"

using namespace attnphys;
using entry::HostArray;

namespace {

// The message of the attnphys::Error that f throws (fails the test when it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no attnphys::Error thrown";
  return "";
}

std::vector<double> ramp(long n, double scale = 0.1) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) v[std::size_t(i)] = std::sin(scale * double(i));
  return v;
}

}  // namespace

TEST(ArrayEntry, HeatSolveRefusesWrongShapesAndNonFiniteValuesByName) {
  auto u = ramp(64);
  const HostArray u0{u.data(), {8, 8}};
  // A κ of the wrong shape is reported with both shapes (the old message printed "(2,)" for an 8x8 field).
  auto k = ramp(16, 1.0);
  for (auto& x : k) x = 1.5 + x;
  const HostArray kw{k.data(), {4, 4}};
  const std::string m = error_of([&] { entry::heat_solve_call(u0, 0.01, 0.125, &kw, 0, "periodic", "adi", 0); });
  EXPECT_NE(m.find("(8, 8)"), std::string::npos) << m;
  EXPECT_NE(m.find("(4, 4)"), std::string::npos) << m;
  // NaN in u0 and in kappa: the argument and the first index.
  u[9] = std::numeric_limits<double>::quiet_NaN();
  const auto call = entry::heat_solve_call(u0, 0.01, 0.125, nullptr, 1.0, "periodic", "adi", 0);
  const std::string mu = error_of([&] { fd::solve(call.problem, call.u0, call.t_end, call.options); });
  EXPECT_NE(mu.find("1 NaN or infinite"), std::string::npos) << mu;
  EXPECT_NE(mu.find("flat index 9"), std::string::npos) << mu;
  u[9] = 0;
  std::vector<double> kk(64, 1.0);
  kk[63] = std::numeric_limits<double>::infinity();
  const HostArray ka{kk.data(), {8, 8}};
  const std::string mk = error_of([&] { entry::heat_solve_call(u0, 0.01, 0.125, &ka, 0, "periodic", "adi", 0); });
  EXPECT_NE(mk.find("kappa field has 1 negative, NaN or infinite"), std::string::npos) << mk;
  // Rank 0 and rank 4, an empty axis, a bad dx, an unknown boundary or method.
  EXPECT_NE(error_of([&] { entry::heat_solve_call({u.data(), {}}, 0.01, 0.1, nullptr, 1, "periodic", "adi", 0); })
                .find("1-, 2- or 3-dimensional"),
            std::string::npos);
  EXPECT_NE(error_of([&] { entry::heat_solve_call({u.data(), {1, 2, 4, 8}}, 0.01, 0.1, nullptr, 1, "periodic",
                                                  "adi", 0); })
                .find("got 4 dimensions"),
            std::string::npos);
  EXPECT_NE(error_of([&] { entry::heat_solve_call({u.data(), {0, 8}}, 0.01, 0.1, nullptr, 1, "dirichlet", "adi", 0); })
                .find("0 cells along y"),
            std::string::npos);
  EXPECT_NE(error_of([&] { entry::heat_solve_call(u0, 0.01, std::nan(""), nullptr, 1, "periodic", "adi", 0); })
                .find("cell width along x must be positive"),
            std::string::npos);
  EXPECT_THROW(entry::heat_solve_call(u0, 0.01, 0.125, nullptr, 1, "robin", "adi", 0), Error);
  EXPECT_THROW(entry::heat_solve_call(u0, 0.01, 0.125, nullptr, 1, "periodic", "euler", 0), Error);
  EXPECT_THROW(entry::heat_solve_call(u0, 0.01, 0.125, nullptr, -1, "periodic", "adi", 0), Error);
}

TEST(ArrayEntry, HeatSolveCallRunsAndCnBecomesAdiIn2D) {
  auto u = ramp(64);
  const auto c = entry::heat_solve_call({u.data(), {8, 8}}, 0.01, 0.125, nullptr, 1.0, "periodic", "cn", 0);
  EXPECT_EQ(c.options.method, fd::Method::Adi);
  EXPECT_EQ(c.u0.extent(1), 8u);
  EXPECT_EQ(c.u0.extent(2), 8u);
  const auto sol = fd::solve(c.problem, c.u0, c.t_end, c.options);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), sol.u);
  // Periodic diffusion keeps the mean and lowers the maximum.
  double m0 = 0, m1 = 0, max0 = 0, max1 = 0;
  for (long i = 0; i < 64; ++i) {
    m0 += u[std::size_t(i)];
    m1 += h.data()[i];
    max0 = std::max(max0, std::fabs(u[std::size_t(i)]));
    max1 = std::max(max1, std::fabs(h.data()[i]));
  }
  EXPECT_NEAR(m1, m0, 1e-10);
  EXPECT_LT(max1, max0);
}

// t_end / dt beyond 10^12 steps: refused at once with the count (it overflowed the step counter before).
TEST(ArrayEntry, AnEndlessTimeSpanIsRefusedWithItsStepCount) {
  auto u = ramp(16);
  for (const char* method : {"adi", "ftcs"}) {
    const auto c = entry::heat_solve_call({u.data(), {16}}, 1e300, 0.1, nullptr, 1.0, "periodic", method, 1e-3);
    const std::string m = error_of([&] { fd::solve(c.problem, c.u0, c.t_end, c.options); });
    EXPECT_NE(m.find("more than 10^12"), std::string::npos) << method << ": " << m;
  }
}

TEST(ArrayEntry, PairsCheckEveryArrayAgainstTheGridAndConvert) {
  const long S = 3, nx = 4, ny = 2, P = nx * ny;
  auto x = ramp(S * P), y = ramp(S * P, 0.2), c = ramp(P * 2, 0.3), e = ramp(S * P * 2, 0.4);
  std::vector<double> tau{1.0, 2.0, 0.5};
  const HostArray none;
  const auto p = entry::heat_pairs({x.data(), {S, P}}, {y.data(), {S, P}}, {c.data(), {P, 2}}, nx, ny, 1, 2,
                                   {e.data(), {S, P, 2}}, {tau.data(), {S}}, 2);
  EXPECT_EQ(p.count, S);
  EXPECT_EQ(p.points, P);
  EXPECT_EQ(p.extra.extent(2), 2u);
  auto ht = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.tau);
  EXPECT_EQ(ht(1), 2.0);
  auto hy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.targets);
  EXPECT_EQ(hy(2, 5), y[std::size_t(2 * P + 5)]);
  // Trajectories [S, K, P]: the first horizon is the target, the rest go to `later`.
  auto traj = ramp(S * 3 * P, 0.05);
  const auto pt = entry::heat_pairs({x.data(), {S, P}}, {traj.data(), {S, 3, P}}, {c.data(), {P, 2}}, nx, ny, 1, 2,
                                    none, none, 0);
  EXPECT_EQ(pt.steps(), 3);
  auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pt.later);
  EXPECT_EQ(hl(1, 1, 4), traj[std::size_t((1 * 3 + 2) * P + 4)]);

  auto refuse = [&](auto&& f, const char* what) {
    const std::string m = error_of(f);
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, none, {c.data(), {P, 2}}, nx + 1, ny, 1, 2, none, none, 0); },
         "points per sample");
  auto c3 = ramp(P * 3, 0.3);
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, none, {c3.data(), {P, 3}}, nx, ny, 1, 2, none, none, 0); },
         "coords: expected an array of shape (8, 2), got (8, 3)");
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, {y.data(), {S, P - 1}}, {c.data(), {P, 2}}, nx, ny, 1, 2, none,
                                 none, 0); },
         "targets: expected an array of shape (3, 8), got (3, 7)");
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, none, {c.data(), {P, 2}}, nx, ny, 1, 2, none, none, 1); },
         "none were given");
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, none, {c.data(), {P, 2}}, nx, ny, 1, 2,
                                 {e.data(), {S, P, 1}}, none, 2); },
         "channels: expected an array of shape (3, 8, 2), got (3, 8, 1)");
  tau[2] = -1;
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, none, {c.data(), {P, 2}}, nx, ny, 1, 2, none,
                                 {tau.data(), {S}}, 0); },
         "horizons must be positive");
  x[5] = std::numeric_limits<double>::quiet_NaN();
  refuse([&] { entry::heat_pairs({x.data(), {S, P}}, none, {c.data(), {P, 2}}, nx, ny, 1, 2, none, none, 0); },
         "inputs holds 1 non-finite value(s) (NaN or inf), the first at flat index 5");
}

// A cell width whose square underflows, a kappa near the double limit, or a step 10^17 times the stability limit
// gave a non-finite solution without an error; refused now (found by fuzz_arrays).
TEST(ArrayEntry, AnOverflowingDiffusionNumberIsRefused) {
  auto u = ramp(75);
  for (const double dx : {4.2e-309, 3.4e-304}) {
    const std::string m = error_of([&] {
      entry::heat_solve_call({u.data(), {5, 3, 5}}, 3.66e-3, dx, nullptr, 1.0 / 64, "periodic", "adi", 2.44e-4);
    });
    EXPECT_NE(m.find("too small for double precision"), std::string::npos) << dx << ": " << m;
  }
  {
    const auto c = entry::heat_solve_call({u.data(), {5, 3, 5}}, 3.66e-3, 1e-140, nullptr, 1.0 / 64, "periodic",
                                          "adi", 2.44e-4);
    const std::string m = error_of([&] { fd::solve(c.problem, c.u0, c.t_end, c.options); });
    EXPECT_NE(m.find("double precision cannot take such a step"), std::string::npos) << m;
  }
  // kappa 1e20 on Neumann sides: 7e17 limits per step (the fuzzer's case: -inf everywhere); refused. 1e10 runs and
  // keeps the constant field.
  std::vector<double> flat(8, -9.955);
  for (const double kappa : {1e20, 1e10}) {
    const auto c = entry::heat_solve_call({flat.data(), {8, 1}}, 0.0371, 2.36, nullptr, kappa, "neumann", "adi",
                                          0.0381);
    if (kappa > 1e15) {
      EXPECT_THROW(fd::solve(c.problem, c.u0, c.t_end, c.options), Error);
    } else {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), fd::solve(c.problem, c.u0, c.t_end, c.options).u);
      for (std::size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h.data()[i], -9.955, 1e-6);
    }
  }
}
