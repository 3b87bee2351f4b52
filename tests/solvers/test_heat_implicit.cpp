// Crank–Nicolson (1D) and ADI (Peaceman–Rachford 2D, Douglas 3D): exact eigenmode amplification, conservation,
// second order in space and time on manufactured solutions for every boundary type and variable κ.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/random.hpp"
#include "solvers/test_heat_mms.hpp"

using namespace attnphys;
using namespace attnphys::heat;
using namespace attnphys::heat_test;

TEST(HeatImplicit, CnIsOnlyFor1D) {
  auto p = make_problem(2, {8, 8, 1}, {0.1, 0.1, 1}, 1.0, "periodic");
  EXPECT_THROW(fd::HeatStepper(p, fd::Method::CrankNicolson), Error);
  EXPECT_THROW(fd::parse_method("leapfrog"), Error);
}

// A periodic product of sines/cosines is an eigenvector of each L_a: the schemes multiply it by their
// amplification factor R(dt λ_x, dt λ_y, dt λ_z) per step, to round-off.
TEST(HeatImplicit, EigenmodesAreMultipliedByTheSchemesAmplificationFactor) {
  for (int dim = 1; dim <= 3; ++dim) {
    const long n = dim == 3 ? 16 : 32;
    const double h = 1.0 / n, kappa = 0.6, dt = 4e-4, t_end = 4e-3;
    auto p = make_problem(dim, {n, n, n}, {h, h, h}, kappa, "periodic");
    fd::HeatStepper s(p, fd::Method::Adi);
    const int wav[3] = {1, 2, 3};
    const auto e = p.spatial_extents();
    HostView3<double> h0("u0", e[0], e[1], e[2]);
    for (long k = 0; k < e[0]; ++k)
      for (long j = 0; j < e[1]; ++j)
        for (long i = 0; i < e[2]; ++i) {
          double v = std::sin(2 * M_PI * wav[0] * i * h + 0.2);
          if (dim >= 2) v *= std::cos(2 * M_PI * wav[1] * j * h);
          if (dim >= 3) v *= std::sin(2 * M_PI * wav[2] * k * h + 1.0);
          h0(k, j, i) = v;
        }
    View3<double> u("u", e[0], e[1], e[2]);
    Kokkos::deep_copy(u, h0);
    const long steps = s.advance(u, 0.0, t_end, dt);
    ASSERT_EQ(steps, 10);
    double l[3] = {0, 0, 0}, lam = 0, k4 = 0, k2 = 0;
    for (int a = 0; a < dim; ++a) {
      lam += l[a] = -4 * kappa / (h * h) * std::pow(std::sin(M_PI * wav[a] * h), 2);
      k2 += std::pow(2 * M_PI * wav[a], 2);
      k4 += std::pow(2 * M_PI * wav[a], 4);
    }
    double R;
    if (dim == 1) {
      R = (1 + dt * lam / 2) / (1 - dt * lam / 2);
    } else if (dim == 2) {
      R = (1 + dt * l[0] / 2) * (1 + dt * l[1] / 2) / ((1 - dt * l[0] / 2) * (1 - dt * l[1] / 2));
    } else {
      R = 1 + dt * lam / ((1 - dt * l[0] / 2) * (1 - dt * l[1] / 2) * (1 - dt * l[2] / 2));
    }
    const double factor = std::pow(R, steps);
    auto hu = to_host(u);
    double err = 0.0;
    for (std::size_t i = 0; i < hu.size(); ++i) err = std::max(err, std::abs(hu.data()[i] - factor * h0.data()[i]));
    EXPECT_LT(err, 1e-13) << dim << "D";
    // Time error against the semi-discrete decay exp(λt): O(dt²), at most steps·|dtλ|³/6.
    const double semi = std::exp(lam * t_end), z = std::abs(dt * lam);
    EXPECT_LT(std::abs(factor - semi) / semi, steps * z * z * z / 6) << dim << "D";
    // Space error of exp(λt) against exp(-κ|k|²t): κ t Σ k_a⁴ h²/12 to leading order.
    const double exact = std::exp(-kappa * k2 * t_end);
    EXPECT_NEAR((semi - exact) / exact, kappa * t_end * k4 * h * h / 12, 0.05 * kappa * t_end * k4 * h * h / 12)
        << dim << "D";
  }
}

TEST(HeatImplicit, TotalHeatIsConservedWithInsulatedAndPeriodicSides) {
  for (const char* bc : {"neumann", "periodic"})
    for (int dim = 1; dim <= 3; ++dim) {
      const long n = dim == 3 ? 10 : 24;
      auto p = make_problem(dim, {n, n, n}, {0.1, 0.1, 0.1}, 1.3, bc);
      const auto e = p.spatial_extents();
      p.kappa_field = View3<double>("k", e[0], e[1], e[2]);
      fill_uniform(p.kappa_field, 11, 1, 0.1, 2.0);
      fd::HeatStepper s(p, fd::Method::Adi);
      auto u = s.make_state(dim == 3 ? 1 : 3);
      fill_uniform(u, 4, 0, -1.0, 2.0);
      auto sum = [&] {
        auto h = to_host(u);
        double t = 0.0;
        for (std::size_t i = 0; i < h.size(); ++i) t += h.data()[i];
        return t;
      };
      const double before = sum();
      s.advance(u, 0.0, 0.5, 0.05);  // far beyond the FTCS limit
      EXPECT_NEAR(sum(), before, 1e-12 * std::abs(before)) << bc << " " << dim << "D";
    }
}

namespace {

// Observed orders over successive grids; dt = c·h keeps the O(dt²) time error at the same order as O(h²).
std::vector<double> space_orders(const Mms& m, const std::vector<long>& grids, double t_end) {
  std::vector<double> err, orders;
  for (long n : grids)
    err.push_back(mms_error(m, n, t_end, m.dim == 1 ? fd::Method::CrankNicolson : fd::Method::Adi, [](const HeatProblem& p, double) { return 0.25 * p.grid.h[0]; }));
  for (std::size_t i = 0; i + 1 < err.size(); ++i) orders.push_back(std::log2(err[i] / err[i + 1]));
  return orders;
}

}  // namespace

TEST(HeatImplicit, ManufacturedSolutionsConvergeAtSecondOrder) {
  for (BcType bc : {BcType::Periodic, BcType::Dirichlet, BcType::Neumann})
    for (bool var : {false, true})
      for (int dim = 1; dim <= 3; ++dim) {
        const Mms m = mms(dim, bc, var);
        const std::vector<long> grids = dim == 1 ? std::vector<long>{16, 32, 64}
                                        : dim == 2 ? std::vector<long>{16, 32, 64}
                                                   : std::vector<long>{8, 16};
        for (double order : space_orders(m, grids, 0.1)) {
          EXPECT_GT(order, 1.8) << to_string(bc) << " var=" << var << " " << dim << "D";
          EXPECT_LT(order, 2.4) << to_string(bc) << " var=" << var << " " << dim << "D";
        }
      }
}

TEST(HeatImplicit, SecondOrderInTime) {
  for (BcType bc : {BcType::Periodic, BcType::Dirichlet, BcType::Neumann})
    for (int dim = 1; dim <= 3; ++dim) {
      const Mms m = mms(dim, bc, true);
      const long n = dim == 3 ? 10 : 32;
      // (Crank–Nicolson's undamped stiff modes make larger steps pre-asymptotic next to Dirichlet sides.)
      const double d1 = time_self_diff(m, n, 0.2, fd::Method::Adi, 0.005);
      const double d2 = time_self_diff(m, n, 0.2, fd::Method::Adi, 0.0025);
      EXPECT_NEAR(std::log2(d1 / d2), 2.0, 0.2) << to_string(bc) << " " << dim << "D " << d1 << " " << d2;
    }
}
