// The autoregressive transformer wavefunction: normalisation by enumeration (full space and fixed-Sz sectors), exact
// samples against |ψ|² (chi-square), per-sample gradients against finite differences, VMC through the driver with
// direct sampling reaching the TFIM ground-state energy, checkpoints, and option errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <unistd.h>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/autoregressive.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
View2<double> all_states(int n) {
  View2<double> s("s", 1L << n, n);
  auto h = Kokkos::create_mirror_view(s);
  for (long b = 0; b < (1L << n); ++b) spin::bits_to_spins(spin::Basis(b), n, &h(b, 0));
  Kokkos::deep_copy(s, h);
  return s;
}

int two_sz_of(spin::Basis b, int n) {
  int ups = 0;
  for (int i = 0; i < n; ++i) ups += (b >> i) & 1;
  return 2 * ups - n;
}

AutoregressiveOptions small(bool fixed = false, int two_sz = 0) {
  AutoregressiveOptions o;
  o.d_model = 8;
  o.n_heads = 2;
  o.n_layers = 2;
  o.d_ff = 16;
  o.fixed_sz = fixed;
  o.two_sz = two_sz;
  o.init_std = 0.5;
  o.seed = 3;
  return o;
}

// Perturbs every parameter (zero biases, unit norm weights) so that no part of the model is trivial.
template <class T>
void perturb(AutoregressiveTransformer<T>& m, std::uint64_t seed, double scale) {
  View1<T> noise("noise", m.n_parameters());
  fill_normal(noise, seed, 77, 0.0, scale);
  auto p = m.parameters().get_host();
  auto hn = to_host(noise);
  for (std::size_t k = 0; k < p.size(); ++k) p[k] += hn(k);
  m.parameters().set_host(p);
}

// |ψ(σ)|² of every basis state (index = bits, bit i = spin i up).
std::vector<double> born(AutoregressiveTransformer<double>& m) {
  const int n = m.n_sites();
  const long D = 1L << n;
  auto s = all_states(n);
  View1<double> re("re", D), im("im", D);
  m.log_psi(s, re, im);
  auto hr = to_host(re), hi = to_host(im);
  std::vector<double> p(D);
  for (long b = 0; b < D; ++b) {
    EXPECT_TRUE(std::isfinite(hi(b))) << "phase of state " << b;
    p[b] = std::exp(2 * hr(b));
  }
  return p;
}

spin::ChainModel tfim(int n) {
  spin::ChainModel m;
  m.model = spin::ModelKind::Tfim;
  m.n = n;
  m.bc = spin::Boundary::Open;
  m.J = 1.0;
  m.h = 1.0;
  return m;
}
}  // namespace

TEST(Autoregressive, NormalisedOverTheFullSpace) {
  for (int n : {6, 7, 8}) {
    for (const char* pos : {"learned", "sinusoidal"}) {
      auto o = small();
      o.positional = parse_enum<AutoregressivePositional>(pos, "positional");
      AutoregressiveTransformer<double> m(n, o);
      perturb(m, n, 0.3);
      const auto p = born(m);
      double z = 0, pmin = 1, pmax = 0;
      for (double v : p) {
        z += v;
        pmin = std::min(pmin, v);
        pmax = std::max(pmax, v);
      }
      EXPECT_NEAR(z, 1.0, 1e-12) << "n = " << n << " " << pos;
      EXPECT_GT(pmax / pmin, 2.0) << "the test state should be far from uniform";
    }
  }
}

TEST(Autoregressive, FixedSzIsNormalisedInTheSectorAndZeroOutside) {
  for (auto [n, two_sz] : std::vector<std::pair<int, int>>{{6, 0}, {7, 1}, {8, -2}, {8, 4}}) {
    AutoregressiveTransformer<double> m(n, small(true, two_sz));
    perturb(m, 10 + n, 0.3);
    int s = 99;
    EXPECT_TRUE(m.fixed_sector(s));
    EXPECT_EQ(s, two_sz);
    const auto p = born(m);
    double inside = 0, outside = 0;
    for (std::size_t b = 0; b < p.size(); ++b) (two_sz_of(b, n) == two_sz ? inside : outside) += p[b];
    EXPECT_NEAR(inside, 1.0, 1e-12) << "n = " << n << " 2Sz = " << two_sz;
    EXPECT_EQ(outside, 0.0);
  }
}

TEST(Autoregressive, ConditionalsAreNormalisedAndCausal) {
  const int n = 7;
  AutoregressiveTransformer<double> m(n, small());
  perturb(m, 5, 0.3);
  // Two configurations that differ only at site 4: the conditionals of sites 0..4 must agree, later ones not.
  View2<double> s("s", 2, n), up("up", 2, n), dn("dn", 2, n);
  auto hs = Kokkos::create_mirror_view(s);
  const double c[n] = {1, -1, -1, 1, 1, -1, 1};
  for (int i = 0; i < n; ++i) hs(0, i) = hs(1, i) = c[i];
  hs(1, 4) = -1;
  Kokkos::deep_copy(s, hs);
  m.conditionals(s, up, dn);
  auto hu = to_host(up), hd = to_host(dn);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < n; ++i) EXPECT_NEAR(std::exp(hu(b, i)) + std::exp(hd(b, i)), 1.0, 1e-14);
  for (int i = 0; i <= 4; ++i) EXPECT_NEAR(hu(0, i), hu(1, i), 1e-13) << "site " << i << " saw the future";
  EXPECT_GT(std::abs(hu(0, 5) - hu(1, 5)), 1e-6);
}

namespace {
// Chi-square of counts against expected counts, bins with fewer than 5 expected merged into one.
std::pair<double, long> chi_square(const std::vector<double>& expected, const std::vector<double>& observed) {
  double chi2 = 0, e_rest = 0, o_rest = 0;
  long bins = 0;
  for (std::size_t k = 0; k < expected.size(); ++k) {
    if (expected[k] < 5) {
      e_rest += expected[k];
      o_rest += observed[k];
      continue;
    }
    chi2 += (observed[k] - expected[k]) * (observed[k] - expected[k]) / expected[k];
    ++bins;
  }
  if (e_rest > 0) {
    chi2 += (o_rest - e_rest) * (o_rest - e_rest) / e_rest;
    ++bins;
  }
  return {chi2, bins - 1};
}
}  // namespace

TEST(Autoregressive, DirectSamplesFollowBornDistribution) {
  for (bool fixed : {false, true}) {
    const int n = 6;
    AutoregressiveTransformer<double> m(n, small(fixed, 0));
    perturb(m, 21, 0.3);
    const auto p = born(m);
    const long M = 10000;
    View2<double> s("s", M, n);
    m.sample_direct(s, 1234, 7);
    auto hs = to_host(s);
    std::vector<double> count(p.size(), 0.0), expect(p.size());
    long outside = 0;
    for (long b = 0; b < M; ++b) {
      const auto bits = spin::spins_to_bits(&hs(b, 0), n);
      count[bits] += 1;
      outside += fixed && two_sz_of(bits, n) != 0;
    }
    EXPECT_EQ(outside, 0);
    for (std::size_t k = 0; k < p.size(); ++k) expect[k] = M * p[k];
    std::vector<double> e2, c2;  // bins: the sector's states when fixed
    for (std::size_t k = 0; k < p.size(); ++k)
      if (!fixed || two_sz_of(k, n) == 0) {
        e2.push_back(expect[k]);
        c2.push_back(count[k]);
      }
    const auto [chi2, dof] = chi_square(e2, c2);
    ASSERT_GT(dof, 10);
    // Mean dof, std sqrt(2 dof): a 5-sigma bound (fixed seed, so the outcome is deterministic).
    EXPECT_LT(chi2, dof + 5 * std::sqrt(2.0 * dof)) << "fixed_sz " << fixed << " dof " << dof;
    // A wrong distribution must fail the same test: compare against the uniform one.
    std::vector<double> uni(e2.size(), double(M) / e2.size());
    EXPECT_GT(chi_square(uni, c2).first, 10 * dof);
  }
}

TEST(Autoregressive, DirectSamplesAreAPureFunctionOfSeedCounterAndRow) {
  const int n = 8;
  AutoregressiveTransformer<double> m(n, small());
  perturb(m, 2, 0.3);
  View2<double> a("a", 50, n), b("b", 7, n), c("c", 50, n);
  m.sample_direct(a, 9, 3);
  m.sample_direct(b, 9, 3);
  m.sample_direct(c, 9, 4);
  auto ha = to_host(a), hb = to_host(b), hc = to_host(c);
  for (int r = 0; r < 7; ++r)
    for (int i = 0; i < n; ++i) EXPECT_EQ(ha(r, i), hb(r, i));
  long differ = 0;
  for (int r = 0; r < 50; ++r)
    for (int i = 0; i < n; ++i) differ += ha(r, i) != hc(r, i);
  EXPECT_GT(differ, 10);
}

TEST(Autoregressive, FloatModelIsNormalisedAndSamples) {
  const int n = 6;
  AutoregressiveTransformer<float> m(n, small(true, 2));
  perturb(m, 4, 0.3f);
  View2<float> s("s", 1L << n, n);
  auto h = Kokkos::create_mirror_view(s);
  for (long b = 0; b < (1L << n); ++b) spin::bits_to_spins(spin::Basis(b), n, &h(b, 0));
  Kokkos::deep_copy(s, h);
  View1<float> re("re", 1L << n), im("im", 1L << n);
  m.log_psi(s, re, im);
  auto hr = to_host(re);
  double z = 0;
  for (long b = 0; b < (1L << n); ++b) z += std::exp(2.0 * hr(b));
  EXPECT_NEAR(z, 1.0, 1e-5);
  View2<float> d("d", 100, n);
  m.sample_direct(d, 1, 0);
  auto hd = to_host(d);
  for (long r = 0; r < 100; ++r) {
    double sz = 0;
    for (int i = 0; i < n; ++i) sz += hd(r, i);
    EXPECT_EQ(sz, 2.0);
  }
}

TEST(Autoregressive, GradientsMatchFiniteDifferences) {
  for (bool fixed : {false, true}) {
    const int n = 6, B = 3;
    AutoregressiveTransformer<double> m(n, small(fixed, 0));
    perturb(m, 8, 0.3);
    View2<double> s("s", B, n);
    m.sample_direct(s, 5, 0);  // in the sector when fixed
    const long P = m.n_parameters();
    View2<double> ore("ore", B, P), oim("oim", B, P);
    // The gradient slot must come back untouched.
    auto& buf = m.parameters();
    fill_normal(buf.grads(), 1, 1);
    const auto grads_before = buf.get_host(Slot::Grads);
    m.log_psi_gradients(s, ore, oim);
    EXPECT_EQ(buf.get_host(Slot::Grads), grads_before);
    auto gre = to_host(ore), gim = to_host(oim);
    auto theta = buf.get_host();
    View1<double> re("re", B), im("im", B);
    const double h = 1e-5;
    std::vector<double> num_re(B * P), num_im(B * P);
    for (long k = 0; k < P; ++k) {
      double fr[2][B], fi[2][B];
      for (int side = 0; side < 2; ++side) {
        auto t = theta;
        t[k] += side ? h : -h;
        buf.set_host(t);
        m.log_psi(s, re, im);
        auto a = to_host(re), b = to_host(im);
        for (int i = 0; i < B; ++i) {
          fr[side][i] = a(i);
          fi[side][i] = b(i);
        }
      }
      for (int i = 0; i < B; ++i) {
        num_re[i * P + k] = (fr[1][i] - fr[0][i]) / (2 * h);
        num_im[i * P + k] = (fi[1][i] - fi[0][i]) / (2 * h);
      }
    }
    buf.set_host(theta);
    for (int i = 0; i < B; ++i) {
      double dre = 0, nre = 0, dim = 0, nim = 0, worst = 0;
      for (long k = 0; k < P; ++k) {
        const double a = gre(i, k), b = num_re[i * P + k], c = gim(i, k), d = num_im[i * P + k];
        dre += (a - b) * (a - b);
        nre += b * b;
        dim += (c - d) * (c - d);
        nim += d * d;
        worst = std::max({worst, std::abs(a - b), std::abs(c - d)});
      }
      EXPECT_GT(nre, 1e-4);
      EXPECT_GT(nim, 1e-4);
      EXPECT_LT(std::sqrt(dre / nre), 1e-6) << "Re, sample " << i << " fixed_sz " << fixed;
      EXPECT_LT(std::sqrt(dim / nim), 1e-6) << "Im, sample " << i << " fixed_sz " << fixed;
      EXPECT_LT(worst, 1e-7) << "sample " << i;
    }
  }
}

namespace {
VmcOptions direct_options() {
  VmcOptions o;
  o.sampler.n_samples = 512;
  o.sampler.seed = 11;
  o.lr = 0.05;
  o.diag_shift = 1e-2;
  o.diag_shift_final = 1e-4;
  o.diag_shift_steps = 100;
  return o;
}
}  // namespace

TEST(Autoregressive, VmcWithDirectSamplingReachesTheTfimGroundStateEnergy) {
  const auto c = tfim(8);
  const double exact = *ed::reference_energy(c);
  EXPECT_NEAR(exact, ed::exact_ground_state(c).energies[0], 1e-9);
  spin::SpinHamiltonian H(c);
  AutoregressiveOptions ao;
  ao.seed = 2;
  ao.d_model = 8;  // small enough that 80 SR iterations take a few seconds on one core
  ao.n_layers = 1;
  ao.d_ff = 16;
  const long iters = 80;
  auto o = direct_options();
  o.sampler.n_samples = 128;
  AutoregressiveTransformer<double> m(c.n, ao);
  VmcDriver<double> driver(m, H, o);
  EXPECT_TRUE(driver.direct_sampling());
  EXPECT_THROW(driver.sampler(), Error);
  const auto t0 = std::chrono::steady_clock::now();
  auto hist = driver.run(iters);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(hist.size(), std::size_t(iters));
  EXPECT_EQ(driver.direct_counter(), std::uint64_t(iters));
  EXPECT_EQ(hist.back().acceptance, 1.0);
  EXPECT_EQ(hist.back().tau, 1.0);
  EXPECT_LT(hist.back().energy, hist.front().energy);
  const auto st = driver.estimate_energy(8192);
  std::printf("[ autoregressive VMC ] N = 8 TFIM: %.8f vs exact %.8f (rel %.2e, error %.1e), %ld iterations in "
              "%.2f s\n",
              st.mean, exact, std::abs(st.mean - exact) / std::abs(exact), st.error, iters, seconds);
  EXPECT_LT(std::abs(st.mean - exact) / std::abs(exact), 1e-3) << st.mean << " vs " << exact;
  EXPECT_GE(st.mean, exact - 5 * st.error - 1e-12);  // variational, within the error bar
}

TEST(Autoregressive, CheckpointRestartsExactlyWithDirectSampling) {
  const auto c = tfim(6);
  spin::SpinHamiltonian H(c);
  const std::string path = (attnphys::test::scratch_dir("vmc_ar") / "ckpt.h5").string();
  auto o = direct_options();
  o.sampler.n_samples = 128;
  o.sampler.move = SamplerMove::Exact;
  AutoregressiveOptions ao;
  ao.d_model = 8;
  AutoregressiveTransformer<double> a(c.n, ao);
  VmcDriver<double> da(a, H, o);
  da.run(3);
  da.save_checkpoint(path);
  auto cont = da.run(3);
  ao.seed = 42;  // a different start, overwritten by the checkpoint
  AutoregressiveTransformer<double> b(c.n, ao);
  VmcDriver<double> db(b, H, o);
  db.load_checkpoint(path);
  EXPECT_EQ(db.iteration(), 3);
  EXPECT_EQ(db.direct_counter(), 3u);
  auto again = db.run(3);
  for (int k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(again[k].energy, cont[k].energy) << "step " << k;
  // A Metropolis run cannot resume from a direct-sampling checkpoint.
  Rbm<double> rbm(c.n, RbmOptions{});
  VmcDriver<double> dr(rbm, H, direct_options());
  try {
    dr.load_checkpoint(path);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exact sampling"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(Autoregressive, FixedSzModelSamplesItsSectorInTheDriver) {
  spin::ChainModel c;
  c.model = spin::ModelKind::Heisenberg;
  c.n = 6;
  c.bc = spin::Boundary::Open;
  spin::SpinHamiltonian H(c);
  AutoregressiveTransformer<double> m(c.n, small(true, 0));
  auto o = direct_options();
  o.sampler.fixed_sz = true;
  o.sampler.two_sz = 0;
  o.sampler.n_samples = 128;
  VmcDriver<double> d(m, H, o);
  const auto hist = d.run(30);
  const double exact = ed::exact_ground_state(c).energies[0];
  EXPECT_LT(hist.back().energy, hist.front().energy);
  const auto st = d.estimate_energy(2048);
  EXPECT_GE(st.mean, exact - 5 * st.error);
  // The sampler's sector must be the model's.
  o.sampler.two_sz = 2;
  EXPECT_THROW(VmcDriver<double>(m, H, o), Error);
  AutoregressiveTransformer<double> free_model(c.n, small());
  o.sampler.two_sz = 0;
  try {
    VmcDriver<double> bad(free_model, H, o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("every sector"), std::string::npos) << e.what();
  }
}

TEST(Autoregressive, BadOptionsGiveClearErrors) {
  auto expect_error = [](auto&& make, const std::string& fragment) {
    try {
      make();
      ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto o = small();
  o.d_model = 10;
  o.n_heads = 3;
  expect_error([&] { AutoregressiveTransformer<double>(6, o); }, "not divisible by n_heads");
  expect_error([&] { AutoregressiveTransformer<double>(7, small(true, 0)); }, "impossible for 7 sites");
  expect_error([&] { AutoregressiveTransformer<double>(6, small(true, 8)); }, "impossible for 6 sites");
  // The conditionals need to know the site: "none" is not a positional encoding of this model.
  expect_error([&] { parse_enum<AutoregressivePositional>("none", "autoregressive.positional"); },
               "autoregressive.positional = 'none': expected one of learned, sinusoidal");
  expect_error([&] { AutoregressiveTransformer<double>(0, small()); }, "at least one site");

  // Options through an OptionSet: keys under "autoregressive.".
  AutoregressiveOptions a;
  OptionSet set;
  a.declare(set);
  set.set("autoregressive.d_model=24");
  set.set("autoregressive.n_heads=4");
  set.set("autoregressive.fixed_sz=true");
  set.set("autoregressive.two_sz=-2");
  EXPECT_EQ(a.d_model, 24);
  EXPECT_EQ(a.n_heads, 4);
  EXPECT_TRUE(a.fixed_sz);
  EXPECT_EQ(a.two_sz, -2);
  EXPECT_THROW(set.set("autoregressive.positional=coords"), Error);

  // move = exact needs a directly sampled model; Metropolis samplers refuse it.
  const auto c = tfim(6);
  spin::SpinHamiltonian H(c);
  Rbm<double> rbm(c.n, RbmOptions{});
  auto vo = direct_options();
  vo.sampler.move = SamplerMove::Exact;
  expect_error([&] { VmcDriver<double>(rbm, H, vo); }, "move = exact");
  expect_error([&] { MetropolisSampler<double>(rbm, vo.sampler, false); }, "exact");
  // ... while other moves keep the Metropolis sampler for the autoregressive model too.
  AutoregressiveTransformer<double> m(c.n, small());
  vo.sampler.move = SamplerMove::Local;
  vo.sampler.n_chains = 16;
  vo.sampler.n_samples = 64;
  VmcDriver<double> metro(m, H, vo);
  EXPECT_FALSE(metro.direct_sampling());
  EXPECT_EQ(metro.sampler().move(), SamplerMove::Local);
}
