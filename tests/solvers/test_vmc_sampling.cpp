// Local energies against ED matrix elements, Metropolis samples against |ψ|² (chi-square), chain diagnostics.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/diagnostics.hpp"
#include "attnphys/solvers/vmc/local_energy.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "attnphys/solvers/vmc/sampler.hpp"
#include "attnphys/physics/spin/observables.hpp"

using namespace attnphys;
using namespace attnphys::vmc;
using cplx = std::complex<double>;

namespace {
spin::ChainModel chain(const char* model, int n, const char* bc) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model);
  m.n = n;
  m.bc = spin::parse_boundary(bc);
  m.h = 0.8;
  m.delta = 0.6;
  m.j2 = 0.4;
  return m;
}

View2<double> all_states(int n) {
  View2<double> s("s", 1L << n, n);
  auto h = Kokkos::create_mirror_view(s);
  for (long b = 0; b < (1L << n); ++b) spin::bits_to_spins(spin::Basis(b), n, &h(b, 0));
  Kokkos::deep_copy(s, h);
  return s;
}
}  // namespace

TEST(LocalEnergy, MatchesDenseMatrixElementsForAComplexState) {
  for (auto m : {chain("tfim", 6, "periodic"), chain("xxz", 6, "open"), chain("j1j2", 7, "periodic")}) {
    const int n = m.n;
    TableAnsatz<double> psi(n, 4, 0.7);
    spin::SpinHamiltonian H(m);
    spin::ChainHilbert full(n);
    const auto dense = H.dense(full);
    auto theta = psi.parameters().get_host();
    const long D = 1L << n;
    auto s = all_states(n);
    View1<double> lr("lr", D), li("li", D), er("er", D), ei("ei", D);
    psi.log_psi(s, lr, li);
    local_energy<double>(psi, H, s, lr, li, er, ei, /*chunk=*/5);
    auto her = to_host(er), hei = to_host(ei);
    for (long a = 0; a < D; ++a) {
      cplx e = 0;
      for (long b = 0; b < D; ++b)
        if (dense[a * D + b] != 0) e += dense[a * D + b] * std::exp(cplx(theta[b] - theta[a], theta[D + b] - theta[D + a]));
      EXPECT_NEAR(her(a), e.real(), 1e-10) << m.describe() << " state " << a;
      EXPECT_NEAR(hei(a), e.imag(), 1e-10);
    }
  }
}

TEST(LocalEnergy, IsConstantOnTheExactGroundState) {
  auto m = chain("heisenberg", 8, "periodic");
  ed::EdOptions o;
  o.want_vectors = true;
  auto space = ed::ed_space(m);
  auto res = ed::diagonalize(spin::SpinHamiltonian(m), space, o);
  TableAnsatz<double> psi(8);
  const long D = 256;
  std::vector<double> theta(2 * D, -40.0);  // ~zero amplitude outside the sector
  for (long r = 0; r < space.size(); ++r) {
    const auto s = space.state(r);
    const double a = res.vectors[0][r];
    theta[s] = std::log(std::abs(a));
    theta[D + s] = a < 0 ? M_PI : 0.0;
  }
  psi.parameters().set_host(theta);
  View2<double> s("s", space.size(), 8);
  auto h = Kokkos::create_mirror_view(s);
  for (long r = 0; r < space.size(); ++r) spin::bits_to_spins(space.state(r), 8, &h(r, 0));
  Kokkos::deep_copy(s, h);
  View1<double> lr("lr", space.size()), li("li", space.size()), er("er", space.size()), ei("ei", space.size());
  psi.log_psi(s, lr, li);
  spin::SpinHamiltonian H(m);
  local_energy<double>(psi, H, s, lr, li, er, ei);
  auto her = to_host(er), hei = to_host(ei);
  for (long r = 0; r < space.size(); ++r) {
    if (std::abs(res.vectors[0][r]) < 1e-6) continue;  // ratios to near-nodes amplify rounding
    EXPECT_NEAR(her(r), res.energies[0], 1e-7);
    EXPECT_NEAR(hei(r), 0.0, 1e-7);
  }
}

TEST(LocalEnergy, SpinSpinOperatorGivesExactCorrelations) {
  // Σ_σ |ψ(σ)|² O_loc(σ) over the whole sector is ⟨ψ|S_i·S_j|ψ⟩: check against the exact correlations.
  auto m = chain("j1j2", 8, "periodic");
  ed::EdOptions o;
  o.want_vectors = true;
  auto space = ed::ed_space(m);
  auto res = ed::diagonalize(spin::SpinHamiltonian(m), space, o);
  const auto exact = spin::exact_spin_correlations(space, res.vectors[0]);
  TableAnsatz<double> psi(8, 2, 0.0);
  std::vector<double> theta(512, -40.0);
  for (long r = 0; r < space.size(); ++r) {
    const double a = res.vectors[0][r];
    theta[space.state(r)] = std::max(std::log(std::abs(a)), -40.0);
    theta[256 + space.state(r)] = a < 0 ? M_PI : 0.0;
  }
  psi.parameters().set_host(theta);
  const long D = space.size();
  View2<double> s("s", D, 8);
  auto h = Kokkos::create_mirror_view(s);
  for (long r = 0; r < D; ++r) spin::bits_to_spins(space.state(r), 8, &h(r, 0));
  Kokkos::deep_copy(s, h);
  View1<double> lr("lr", D), li("li", D), er("er", D), ei("ei", D);
  psi.log_psi(s, lr, li);
  for (int j : {1, 2, 4}) {
    local_energy<double>(psi, spin::spin_spin_operator(8, 0, j), s, lr, li, er, ei);
    auto he = to_host(er);
    double c = 0;
    for (long r = 0; r < D; ++r) c += res.vectors[0][r] * res.vectors[0][r] * he(r);
    EXPECT_NEAR(c, exact(0, j), 1e-9) << j;
  }
  EXPECT_THROW(spin::spin_spin_operator(8, 3, 3), Error);
}

namespace {
// Chi-square per degree of freedom of sampled counts against |ψ|² over the states of a space.
double chi2_per_dof(const std::vector<spin::Basis>& states, const std::vector<double>& theta_re, const View2<double>& samples) {
  auto h = to_host(samples);
  std::map<spin::Basis, double> count;
  for (std::size_t b = 0; b < h.extent(0); ++b) count[spin::spins_to_bits(&h(b, 0), int(h.extent(1)))] += 1;
  double z = 0;
  for (auto s : states) z += std::exp(2 * theta_re[s]);
  double chi2 = 0, seen = 0;
  const double M = h.extent(0);
  for (auto s : states) {
    const double expect = M * std::exp(2 * theta_re[s]) / z;
    chi2 += (count[s] - expect) * (count[s] - expect) / expect;
    seen += count[s];
  }
  EXPECT_EQ(seen, M) << "samples outside the allowed states";
  return chi2 / (states.size() - 1);
}
}  // namespace

TEST(MetropolisSampler, LocalAndGlobalMovesSampleBornDistribution) {
  const int n = 4;
  TableAnsatz<double> psi(n, 9, 0.6);
  SamplerOptions o;
  o.n_chains = 256;
  o.n_samples = 256 * 64;
  o.global_flip = 0.25;
  o.sweep_size = 2 * n;
  MetropolisSampler<double> sampler(psi, o, false);
  EXPECT_EQ(sampler.move(), SamplerMove::Local);
  View2<double> samples;
  View1<double> re, im;
  sampler.sample(samples, re, im);
  std::vector<spin::Basis> states;
  for (spin::Basis s = 0; s < 16; ++s) states.push_back(s);
  EXPECT_LT(chi2_per_dof(states, psi.parameters().get_host(), samples), 2.5);
  EXPECT_GT(sampler.acceptance(), 0.1);
}

TEST(MetropolisSampler, ExchangeMovesWithHastingsCorrectionStayInSectorAndSampleBornDistribution) {
  const int n = 6;
  TableAnsatz<double> psi(n, 10, 0.8);
  SamplerOptions o;
  o.n_chains = 256;
  o.n_samples = 256 * 64;
  o.fixed_sz = true;
  o.two_sz = 0;
  o.exchange_distance = 1;  // open chain: n(σ) = number of domain walls varies strongly with σ
  o.n_samples = 256 * 16;
  o.sweep_size = 40 * n;    // nearly independent samples: correlation would inflate chi-square by τ
  MetropolisSampler<double> sampler(psi, o, false);
  EXPECT_EQ(sampler.move(), SamplerMove::Exchange);
  View2<double> samples;
  View1<double> re, im;
  sampler.sample(samples, re, im);
  spin::ChainHilbert sector(n, 0);
  std::vector<spin::Basis> states;
  for (long r = 0; r < sector.size(); ++r) states.push_back(sector.state(r));
  EXPECT_LT(chi2_per_dof(states, psi.parameters().get_host(), samples), 2.5);
}

TEST(MetropolisSampler, DeterministicPerSeed) {
  Rbm<double> psi(8, RbmOptions{1.0, true, true, 0.3, 5});
  SamplerOptions o;
  o.n_chains = 16;
  o.n_samples = 64;
  View2<double> s1, s2, s3;
  View1<double> r, i;
  MetropolisSampler<double>(psi, o, true).sample(s1, r, i);
  MetropolisSampler<double>(psi, o, true).sample(s2, r, i);
  o.seed = 2;
  MetropolisSampler<double>(psi, o, true).sample(s3, r, i);
  auto h1 = to_host(s1), h2 = to_host(s2), h3 = to_host(s3);
  long same12 = 0, same13 = 0;
  for (std::size_t k = 0; k < h1.size(); ++k) {
    same12 += h1.data()[k] == h2.data()[k];
    same13 += h1.data()[k] == h3.data()[k];
  }
  EXPECT_EQ(same12, long(h1.size()));
  EXPECT_LT(same13, long(h1.size()));
}

TEST(ChainDiagnostics, AutocorrelationTimeAndSplitRhat) {
  const long S = 2000, C = 16;
  const double phi = 0.8;  // AR(1): τ = (1 + φ)/(1 − φ) = 9
  std::vector<double> x(S * C);
  for (long c = 0; c < C; ++c) {
    CounterRng r(3, c);
    double v = r.normal() / std::sqrt(1 - phi * phi);
    for (long s = 0; s < S; ++s) {
      v = phi * v + r.normal();
      x[s * C + c] = v;
    }
  }
  auto st = chain_statistics(x, S, C);
  EXPECT_NEAR(st.tau, 9.0, 1.5);
  EXPECT_NEAR(st.variance, 1 / (1 - phi * phi), 0.3);
  EXPECT_NEAR(st.error, std::sqrt(st.variance * st.tau / (S * C)), 1e-12);
  EXPECT_LT(st.r_hat, 1.05);
  for (long c = 0; c < C; ++c)
    for (long s = 0; s < S; ++s) x[s * C + c] += (c % 2) * 3.0;  // chains that disagree
  EXPECT_GT(chain_statistics(x, S, C).r_hat, 1.2);
  EXPECT_NEAR(v_score(10, -2.0, 0.4), 1.0, 1e-15);
}
