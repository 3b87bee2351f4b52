// The MPS ansatz behind the VMC interface: log ψ against explicit matrix products (open and periodic, with the sign
// and the Marshall sign), stability for long chains, gradients against central finite differences, VMC with SR
// reaching the ED energy of the critical TFIM, and an MPS copied from DMRG reproducing the DMRG energy exactly.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <chrono>
#include <cmath>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "attnphys/solvers/vmc/mps_ansatz.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
constexpr double kPi = 3.14159265358979323846;

// Every configuration of n spins: bit i of the row index set means σ_i = +1.
View2<double> all_configs(int n) {
  const long D = 1L << n;
  HostView2<double> h("all", D, n);
  for (long k = 0; k < D; ++k)
    for (int i = 0; i < n; ++i) h(k, i) = (k >> i) & 1 ? 1.0 : -1.0;
  View2<double> v("all_dev", D, n);
  Kokkos::deep_copy(v, h);
  return v;
}

// ψ(σ) from the parameters by explicit Eigen matrix products (no rescaling).
double explicit_amplitude(MpsAnsatz<double>& psi, const std::vector<double>& theta, const HostView2<double>& s,
                          long b) {
  const auto& d = psi.bond_dimensions();
  const int n = psi.n_sites();
  Eigen::MatrixXd P = Eigen::MatrixXd::Identity(d[0], d[0]);
  for (int i = 0; i < n; ++i) {
    const int sp = s(b, i) > 0 ? 0 : 1;
    Eigen::MatrixXd A(d[i], d[i + 1]);
    for (int a = 0; a < d[i]; ++a)
      for (int c = 0; c < d[i + 1]; ++c) A(a, c) = theta[psi.site_offset(i) + (long(sp) * d[i] + a) * d[i + 1] + c];
    P = (P * A).eval();
  }
  return P.trace();
}

spin::ChainModel chain(const std::string& model, int n, double h = 1.0) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model);
  m.n = n;
  m.bc = spin::Boundary::Open;
  m.h = h;
  return m;
}
}  // namespace

TEST(MpsAnsatz, BondDimensionsAndParameterCount) {
  EXPECT_EQ(mps_bond_dimensions(6, 4, false), (std::vector<int>{1, 2, 4, 4, 4, 2, 1}));
  EXPECT_EQ(mps_bond_dimensions(3, 4, true), (std::vector<int>{4, 4, 4, 4}));
  MpsAnsatz<double> psi(6, MpsAnsatzOptions{4, false, false, 0.1, 1});
  EXPECT_EQ(psi.n_parameters(), 2 * (2 + 8 + 16 + 16 + 8 + 2));
  EXPECT_EQ(mps_entry_count(psi.bond_dimensions()), psi.n_parameters());
}

TEST(MpsAnsatz, LogPsiEqualsTheExplicitMatrixProduct) {
  for (bool periodic : {false, true})
    for (bool marshall : {false, true}) {
      const int n = 6;
      MpsAnsatz<double> psi(n, MpsAnsatzOptions{3, periodic, marshall, 0.6, 5});
      const auto sigma = all_configs(n);
      const long B = sigma.extent(0);
      View1<double> re("re", B), im("im", B);
      psi.log_psi(sigma, re, im);
      auto hr = to_host(re), hi = to_host(im);
      auto hs = to_host(sigma);
      const auto theta = psi.parameters().get_host();
      int negatives = 0;
      for (long b = 0; b < B; ++b) {
        double amp = explicit_amplitude(psi, theta, hs, b);
        if (marshall) {
          int ups = 0;
          for (int i = 0; i < n; i += 2) ups += hs(b, i) > 0;
          if (ups % 2) amp = -amp;
        }
        negatives += amp < 0;
        EXPECT_NEAR(hr(b), std::log(std::abs(amp)), 1e-12) << "config " << b;
        EXPECT_NEAR(hi(b), amp < 0 ? kPi : 0.0, 1e-12) << "config " << b;
      }
      EXPECT_GT(negatives, 0);  // the signs were exercised
    }
}

TEST(MpsAnsatz, LogPsiIsStableForLongChains) {
  // Scaling every tensor by c multiplies ψ by c^N: log ψ shifts by N log c, far beyond double range here.
  const int n = 200;
  for (bool periodic : {false, true}) {
    MpsAnsatz<double> psi(n, MpsAnsatzOptions{4, periodic, false, 0.3, 2});
    View2<double> s("s", 8, n);
    fill_uniform(s, 3, 0, -1, 1);
    auto hs = to_host(s);
    for (std::size_t k = 0; k < hs.size(); ++k) hs.data()[k] = hs.data()[k] < 0 ? -1 : 1;
    Kokkos::deep_copy(s, hs);
    View1<double> re("re", 8), im("im", 8), re2("re2", 8), im2("im2", 8);
    psi.log_psi(s, re, im);
    auto theta = psi.parameters().get_host();
    for (auto& t : theta) t *= 1e3;
    psi.parameters().set_host(theta);
    psi.log_psi(s, re2, im2);
    auto a = to_host(re), b = to_host(re2), ai = to_host(im), bi = to_host(im2);
    for (int k = 0; k < 8; ++k) {
      ASSERT_TRUE(std::isfinite(a(k)) && std::isfinite(b(k)));
      EXPECT_NEAR(b(k) - a(k), n * std::log(1e3), 1e-9 * n * std::log(1e3));
      EXPECT_EQ(ai(k), bi(k));
    }
  }
}

TEST(MpsAnsatz, GradientsMatchCentralFiniteDifferences) {
  for (bool periodic : {false, true}) {
    const int n = 5, B = 4;
    MpsAnsatz<double> psi(n, MpsAnsatzOptions{3, periodic, true, 0.4, 9});
    View2<double> s("s", B, n);
    fill_uniform(s, 4, 0, -1, 1);
    auto hs = to_host(s);
    for (std::size_t k = 0; k < hs.size(); ++k) hs.data()[k] = hs.data()[k] < 0 ? -1 : 1;
    Kokkos::deep_copy(s, hs);
    const long P = psi.n_parameters();
    View2<double> ore("ore", B, P), oim("oim", B, P);
    psi.log_psi_gradients(s, ore, oim);
    auto gre = to_host(ore), gim = to_host(oim);
    auto theta = psi.parameters().get_host();
    View1<double> re("re", B), im("im", B);
    const double h = 1e-5;
    long nonzero = 0;
    for (long k = 0; k < P; ++k) {
      double f[2][B], ph[2][B];
      for (int side = 0; side < 2; ++side) {
        auto t = theta;
        t[k] += side ? h : -h;
        psi.parameters().set_host(t);
        psi.log_psi(s, re, im);
        auto a = to_host(re), c = to_host(im);
        for (int i = 0; i < B; ++i) {
          f[side][i] = a(i);
          ph[side][i] = c(i);
        }
      }
      for (int i = 0; i < B; ++i) {
        ASSERT_EQ(ph[0][i], ph[1][i]);  // no sign change inside the stencil
        const double fd = (f[1][i] - f[0][i]) / (2 * h);
        EXPECT_NEAR(fd, gre(i, k), 1e-6 * std::max(1.0, std::abs(fd))) << "param " << k << " sample " << i;
        EXPECT_EQ(gim(i, k), 0.0);
        nonzero += gre(i, k) != 0.0;
      }
    }
    EXPECT_GT(nonzero, P);  // every sample has a gradient on its own tensors
    psi.parameters().set_host(theta);
  }
}

TEST(MpsAnsatz, VmcWithSrReachesTheCriticalTfimEnergy) {
  const auto m = chain("tfim", 8);
  const double exact = *ed::reference_energy(m);
  spin::SpinHamiltonian H(m);
  MpsAnsatz<double> psi(m.n, MpsAnsatzOptions{4, false, false, 0.05, 3});
  EXPECT_EQ(psi.n_parameters(), 2 * (2 + 8 + 16 * 4 + 8 + 2));
  VmcOptions o;
  o.sampler.n_chains = 64;
  o.sampler.n_samples = 1024;
  o.sampler.n_discard = 4;
  o.lr = 0.05;
  o.diag_shift = 1e-2;
  o.diag_shift_final = 1e-4;
  o.diag_shift_steps = 100;
  VmcDriver<double> driver(psi, H, o);
  const auto t0 = std::chrono::steady_clock::now();
  auto hist = driver.run(150);
  const auto st = driver.estimate_energy(16384);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(hist.back().energy, hist.front().energy);
  EXPECT_LT(std::abs(st.mean - exact) / std::abs(exact), 1e-3) << st.mean << " vs " << exact;
  EXPECT_GE(st.mean, exact - 4 * st.error);  // variational, within the error bar
  std::printf("MPS chi=4 VMC: E = %.8f ± %.2g (exact %.8f), %.1f s\n", st.mean, st.error, exact, secs);
}

TEST(MpsAnsatz, FromDmrgReproducesTheDmrgEnergyOverAllConfigurations) {
  for (const std::string model : {"heisenberg", "tfim"}) {
    const auto m = chain(model, 10);
    const mps::Mpo h = mps::chain_mpo(m);
    mps::Mps state = model == "tfim" ? mps::Mps::uniform_product(m.n, Eigen::Vector2d(1.0, 1.0)) : mps::Mps::neel(m.n);
    // χ = 4 truncates (the state is not the exact ground state): the copy must reproduce this MPS, not ED.
    mps::dmrg(h, state, mps::default_sweeps(4, 8, 1e-12, 1e-5));
    const double e_dmrg = mps::expectation(h, state) / std::pow(state.norm(), 2);
    auto psi = MpsAnsatz<double>::from_mps(state);
    EXPECT_EQ(psi->n_parameters(), mps_entry_count(state));
    const auto sigma = all_configs(m.n);
    const long D = sigma.extent(0);
    View1<double> re("re", D), im("im", D), er("er", D), ei("ei", D);
    psi->log_psi(sigma, re, im);
    spin::SpinHamiltonian H(m);
    local_energy<double>(*psi, H, sigma, re, im, er, ei);
    auto hr = to_host(re), hi = to_host(im), her = to_host(er);
    // Amplitudes: to_dense has site 0 as the most significant bit and state 0 = up.
    const Eigen::VectorXd dense = state.to_dense();
    double num = 0, den = 0;
    for (long k = 0; k < D; ++k) {
      long idx = 0;
      for (int i = 0; i < m.n; ++i) idx = 2 * idx + (((k >> i) & 1) ? 0 : 1);
      const double amp = std::isinf(hr(k)) ? 0.0 : std::exp(hr(k)) * std::cos(hi(k));
      EXPECT_NEAR(amp, dense(idx), 1e-12) << model << " config " << k;
      if (amp == 0.0) continue;
      num += amp * amp * her(k);
      den += amp * amp;
    }
    EXPECT_NEAR(num / den, e_dmrg, 1e-10 * std::abs(e_dmrg)) << model;
    const double exact = ed::exact_ground_state(m).energies.at(0);
    EXPECT_GT(e_dmrg, exact - 1e-10);  // variational
  }
}
