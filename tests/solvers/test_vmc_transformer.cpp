// The relative-position transformer ansatz: exact gradients (finite differences, with and without the shift
// symmetrisation, factored and dense attention), translation invariance of the symmetrised periodic state, the
// Marshall sign, the spin-flip and reflection sectors, bad options, and VMC reaching exact ground-state energies.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/complex_math.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/transformer.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
View2<double> random_spins(long B, int n, std::uint64_t seed) {
  View2<double> s("s", B, n);
  fill_uniform(s, seed, 0, -1, 1);
  auto h = to_host(s);
  for (std::size_t k = 0; k < h.size(); ++k) h.data()[k] = h.data()[k] < 0 ? -1 : 1;
  Kokkos::deep_copy(s, h);
  return s;
}

// Perturbs every parameter so that no gradient is trivially zero (norm weights, zero biases, readout biases).
void perturb(ParameterBuffer<double>& buf, std::uint64_t seed, double scale) {
  auto p = buf.get_host();
  View1<double> noise("noise", long(p.size()));
  fill_normal(noise, seed, 5, 0.0, scale);
  auto h = to_host(noise);
  for (std::size_t k = 0; k < p.size(); ++k) p[k] += h(k);
  buf.set_host(p);
}

TransformerAnsatzOptions small(const char* attention, long patch) {
  TransformerAnsatzOptions o;
  o.patch_size = patch;
  o.d_model = 8;
  o.n_heads = 2;
  o.n_layers = 2;
  o.attention = parse_enum<TransformerAttention>(attention, "transformer.attention");
  o.hidden = 5;
  o.init_std = 0.5;
  o.seed = 3;
  return o;
}

double max_fd_error(TransformerAnsatz<double>& psi, const View2<double>& s) {
  const long B = s.extent(0), P = psi.n_parameters();
  View2<double> ore("ore", B, P), oim("oim", B, P);
  psi.log_psi_gradients(s, ore, oim);
  auto gre = to_host(ore), gim = to_host(oim);
  const auto theta = psi.parameters().get_host();
  View1<double> re("re", B), im("im", B);
  const double h = 1e-5;
  double worst = 0, scale = 0;
  for (long k = 0; k < P; ++k)
    for (long b = 0; b < B; ++b) scale = std::max({scale, std::abs(gre(b, k)), std::abs(gim(b, k))});
  for (long k = 0; k < P; ++k) {
    std::vector<double> fr[2], fi[2];
    for (int side = 0; side < 2; ++side) {
      auto t = theta;
      t[k] += side ? h : -h;
      psi.parameters().set_host(t);
      psi.log_psi(s, re, im);
      auto a = to_host(re), c = to_host(im);
      for (long b = 0; b < B; ++b) {
        fr[side].push_back(a(b));
        fi[side].push_back(c(b));
      }
    }
    for (long b = 0; b < B; ++b) {
      double dim = fi[1][b] - fi[0][b];
      dim -= 2 * M_PI * std::round(dim / (2 * M_PI));  // the phase is defined modulo 2π
      worst = std::max(worst, std::abs((fr[1][b] - fr[0][b]) / (2 * h) - gre(b, k)));
      worst = std::max(worst, std::abs(dim / (2 * h) - gim(b, k)));
    }
  }
  psi.parameters().set_host(theta);
  return worst / std::max(scale, 1e-300);
}
}  // namespace

TEST(TransformerAnsatz, GradientsMatchFiniteDifferences) {
  struct Case {
    const char* attention;
    long patch;
    bool periodic, symmetrize, marshall;
  };
  for (const Case& c : {Case{"factored", 2, true, true, false}, Case{"factored", 2, false, true, true},
                        Case{"dense", 2, true, true, true}, Case{"factored", 1, true, false, false},
                        Case{"dense", 4, false, false, false}}) {
    auto o = small(c.attention, c.patch);
    o.symmetrize = c.symmetrize;
    o.marshall_sign = c.marshall;
    TransformerAnsatz<double> psi(8, c.periodic, o);
    perturb(psi.parameters(), 9, 0.1);
    const double err = max_fd_error(psi, random_spins(3, 8, 4));
    EXPECT_LT(err, 1e-6) << c.attention << " patch " << c.patch << " periodic " << c.periodic << " symmetrize "
                         << c.symmetrize;
  }
}

TEST(TransformerAnsatz, ChunkedLogPsiEqualsOnePass) {
  // log ψ in chunks of configurations (the last chunk overlapping the one before) equals one pass over the batch,
  // for a batch that the chunk size does not divide, with and without the shift symmetrisation; and a gradient
  // evaluation in between (which resizes the shared buffers to the whole batch) does not disturb it.
  for (bool periodic : {true, false}) {
    auto o = small("factored", 2);
    TransformerAnsatz<double> one(8, periodic, o);
    o.chunk_tokens = 5 * one.n_shifts() * 4;  // 5 configurations of 4 tokens per shift
    TransformerAnsatz<double> chunked(8, periodic, o);
    perturb(one.parameters(), 9, 0.1);
    chunked.parameters().set_host(one.parameters().get_host());
    const long B = 37;
    const auto s = random_spins(B, 8, 5);
    View1<double> r1("r1", B), i1("i1", B), r2("r2", B), i2("i2", B);
    one.log_psi(s, r1, i1);
    for (int pass = 0; pass < 2; ++pass) {
      chunked.log_psi(s, r2, i2);
      auto a = to_host(r1), b = to_host(i1), c = to_host(r2), d = to_host(i2);
      for (long k = 0; k < B; ++k) {
        EXPECT_NEAR(c(k), a(k), 1e-12) << "periodic " << periodic << " config " << k;
        EXPECT_NEAR(d(k), b(k), 1e-12) << "periodic " << periodic << " config " << k;
      }
      View2<double> ore("ore", 3, chunked.n_parameters()), oim("oim", 3, chunked.n_parameters());
      chunked.log_psi_gradients(random_spins(3, 8, 6), ore, oim);
    }
  }
}

TEST(TransformerAnsatz, LogCoshSumEqualsTheSumOfLogCosh) {
  // The readout's accumulated Σ log cosh (one log and one atan2 per sum) against the per-unit formula: random units,
  // large |x| (cosh overflows a double), units at and next to a node of cosh, and long sums whose products would
  // under- or overflow without rescaling. Im is compared modulo 2π.
  std::vector<std::vector<std::pair<double, double>>> sums;
  View1<double> noise("noise", 2 * 300);
  fill_normal(noise, 7, 0, 0.0, 2.0);
  auto h = to_host(noise);
  for (int K : {1, 2, 16, 300}) {
    std::vector<std::pair<double, double>> v;
    for (int k = 0; k < K; ++k) v.push_back({h(2 * k), h(2 * k + 1)});
    sums.push_back(v);
  }
  sums.push_back({{800.0, 0.3}, {-750.0, 2.0}, {1e-9, -1.0}, {-3.0, 1e-12}});
  sums.push_back(std::vector<std::pair<double, double>>(250, {1e-4, M_PI / 2 - 1e-4}));  // |cosh| ~ 1.4e-4 each
  sums.push_back(std::vector<std::pair<double, double>>(250, {0.5, 0.2}));
  sums.push_back(std::vector<std::pair<double, double>>(250, {-0.5, 1.2}));
  for (std::size_t c = 0; c < sums.size(); ++c) {
    vmc::detail::LogCoshSum acc;
    double re = 0, im = 0;
    for (auto [x, y] : sums[c]) {
      acc.add(x, y);
      double a, b;
      vmc::detail::log_cosh(x, y, a, b);
      re += a;
      im += b;
    }
    double r2, i2;
    acc.finish(r2, i2);
    double dphi = i2 - im;
    dphi -= 2 * M_PI * std::round(dphi / (2 * M_PI));
    EXPECT_NEAR(r2, re, 1e-12 * (1 + std::abs(re))) << "sum " << c;
    long double exact = 0;  // log|cosh z| = ½ log(sinh²x + cos²y) in extended precision, where it does not overflow
    bool small = true;
    for (auto [x, y] : sums[c]) {
      small = small && std::abs(x) < 300;
      exact += 0.5L * std::log(std::pow(std::sinh((long double)x), 2) + std::pow(std::cos((long double)y), 2));
    }
    if (small) EXPECT_NEAR(r2, double(exact), 1e-12 * (1 + std::abs(double(exact)))) << "sum " << c;
    EXPECT_NEAR(dphi, 0.0, 1e-10) << "sum " << c;
  }
  vmc::detail::LogCoshSum node;  // cosh(i π/2) = 0: log 0
  node.add(0.0, M_PI / 2);
  node.add(0.3, 0.1);
  double r, i;
  node.finish(r, i);
  EXPECT_LT(r, -30.0);
}

TEST(TransformerAnsatz, SymmetrisedPeriodicStateIsTranslationInvariant) {
  const int n = 12;
  for (const char* attention : {"factored", "dense"}) {
    auto o = small(attention, 3);
    TransformerAnsatz<double> psi(n, true, o);
    EXPECT_EQ(psi.n_shifts(), 3);
    perturb(psi.parameters(), 2, 0.2);
    const long B = 4;
    auto s = random_spins(B, n, 8);
    auto hs = to_host(s);
    View2<double> t("t", B, n);
    auto ht = Kokkos::create_mirror_view(t);
    for (long b = 0; b < B; ++b)
      for (int i = 0; i < n; ++i) ht(b, i) = hs(b, (i + 1) % n);  // shift by one site (not a whole patch)
    Kokkos::deep_copy(t, ht);
    View1<double> r1("r1", B), i1("i1", B), r2("r2", B), i2("i2", B);
    psi.log_psi(s, r1, i1);
    psi.log_psi(t, r2, i2);
    auto a1 = to_host(r1), b1 = to_host(i1), a2 = to_host(r2), b2 = to_host(i2);
    for (long b = 0; b < B; ++b) {
      EXPECT_NEAR(a1(b), a2(b), 1e-12) << attention;
      EXPECT_NEAR(std::remainder(b1(b) - b2(b), 2 * M_PI), 0.0, 1e-12) << attention;
    }
    // Without the symmetrisation a one-site shift changes ψ (the test above can fail).
    o.symmetrize = false;
    TransformerAnsatz<double> raw(n, true, o);
    raw.parameters().set_host(psi.parameters().get_host());
    raw.log_psi(s, r1, i1);
    raw.log_psi(t, r2, i2);
    auto c1 = to_host(r1), c2 = to_host(r2);
    double diff = 0;
    for (long b = 0; b < B; ++b) diff = std::max(diff, std::abs(c1(b) - c2(b)));
    EXPECT_GT(diff, 1e-6) << attention;
  }
}

TEST(TransformerAnsatz, SpinFlipAndReflectionSectors) {
  // transformer.spin_flip / .reflection = even | odd: ψ(−σ) = χ_F ψ(σ) and ψ(Rσ) = χ_R ψ(σ) (R: i → N−1−i) to
  // rounding, on rings (with the shift symmetrisation, which stays) and open chains, for both attention kinds; the
  // gradients stay exact. Without the options neither holds (the test can fail).
  const int n = 12;
  auto mirror = [&](const View2<double>& s, bool flip, bool reflect) {
    auto hs = to_host(s);
    View2<double> t("t", s.extent(0), n);
    auto ht = Kokkos::create_mirror_view(t);
    for (std::size_t b = 0; b < s.extent(0); ++b)
      for (int i = 0; i < n; ++i) ht(b, i) = (flip ? -1 : 1) * hs(b, reflect ? n - 1 - i : i);
    Kokkos::deep_copy(t, ht);
    return t;
  };
  // Configurations that no flip or reflection combined with a translation maps to themselves (ψ of such a
  // configuration vanishes in an odd sector, where log ψ is rounding noise): random ones, those rejected.
  const long B = 6;
  View2<double> s("s", B, n);
  {
    auto hs = Kokkos::create_mirror_view(s);
    const auto pool = to_host(random_spins(64, n, 8));
    long taken = 0;
    for (long c = 0; c < 64 && taken < B; ++c) {
      bool generic = true;
      for (int j = 0; j < n; ++j)
        for (int g = 1; g < 4; ++g) {
          const bool flip = g & 1, reflect = g & 2;
          bool fixed = true;
          for (int i = 0; i < n; ++i)
            fixed = fixed && pool(c, i) == (flip ? -1 : 1) * pool(c, ((reflect ? n - 1 - i : i) + j) % n);
          generic = generic && !fixed;
        }
      if (!generic) continue;
      for (int i = 0; i < n; ++i) hs(taken, i) = pool(c, i);
      ++taken;
    }
    ASSERT_EQ(taken, B);
    Kokkos::deep_copy(s, hs);
  }
  struct Case {
    const char* attention;
    bool periodic;
    SymmetrySector flip, refl;
  };
  const auto E = SymmetrySector::Even, O = SymmetrySector::Odd, Off = SymmetrySector::Off;
  for (const Case& c : {Case{"factored", true, E, E}, Case{"factored", false, O, E}, Case{"dense", true, E, O},
                        Case{"factored", false, Off, O}, Case{"dense", false, O, Off}, Case{"factored", true, Off, Off}}) {
    auto o = small(c.attention, 2);
    o.spin_flip = c.flip;
    o.reflection = c.refl;
    TransformerAnsatz<double> psi(n, c.periodic, o);
    EXPECT_EQ(psi.n_shifts(), (c.periodic ? 2 : 1) * (c.flip != Off ? 2 : 1) * (c.refl != Off ? 2 : 1));
    perturb(psi.parameters(), 2, 0.2);
    View1<double> r0("r0", B), i0("i0", B), r1("r1", B), i1("i1", B);
    psi.log_psi(s, r0, i0);
    for (int which = 0; which < 2; ++which) {
      const SymmetrySector sector = which == 0 ? c.flip : c.refl;
      psi.log_psi(mirror(s, which == 0, which == 1), r1, i1);
      auto a0 = to_host(r0), b0 = to_host(i0), a1 = to_host(r1), b1 = to_host(i1);
      double damp = 0, dphase = 0;
      const double chi_phase = sector == O ? M_PI : 0.0;
      for (long b = 0; b < B; ++b) {
        damp = std::max(damp, std::abs(a1(b) - a0(b)));
        dphase = std::max(dphase, std::abs(std::remainder(b1(b) - b0(b) - chi_phase, 2 * M_PI)));
      }
      const std::string what = std::string(c.attention) + (c.periodic ? " ring " : " open ") +
                               (which == 0 ? "flip " : "reflection ") + enum_name(sector);
      if (sector == Off) {
        EXPECT_GT(damp + dphase, 1e-6) << what;
      } else {
        EXPECT_LT(damp, 1e-12) << what;
        EXPECT_LT(dphase, 1e-12) << what;
      }
    }
    if (c.flip != Off || c.refl != Off) {
      View2<double> three("three", 3, n);
      Kokkos::deep_copy(three, Kokkos::subview(s, std::make_pair(0, 3), Kokkos::ALL()));
      EXPECT_LT(max_fd_error(psi, three), 1e-6) << c.attention;
    }
  }
}

TEST(TransformerAnsatz, MarshallSignIsTheSublatticeParity) {
  auto o = small("factored", 2);
  TransformerAnsatz<double> plain(6, true, o);
  o.marshall_sign = true;
  TransformerAnsatz<double> signed_psi(6, true, o);
  signed_psi.parameters().set_host(plain.parameters().get_host());
  const long B = 64;
  View2<double> s("s", B, 6);
  auto hs = Kokkos::create_mirror_view(s);
  for (long b = 0; b < B; ++b) spin::bits_to_spins(spin::Basis(b), 6, &hs(b, 0));
  Kokkos::deep_copy(s, hs);
  View1<double> r1("r1", B), i1("i1", B), r2("r2", B), i2("i2", B);
  plain.log_psi(s, r1, i1);
  signed_psi.log_psi(s, r2, i2);
  auto a1 = to_host(r1), b1 = to_host(i1), a2 = to_host(r2), b2 = to_host(i2);
  for (long b = 0; b < B; ++b) {
    int ups = 0;
    for (int i = 0; i < 6; i += 2) ups += hs(b, i) > 0;
    EXPECT_DOUBLE_EQ(a1(b), a2(b));
    EXPECT_NEAR(std::remainder(b2(b) - b1(b) - M_PI * (ups % 2), 2 * M_PI), 0.0, 1e-12);
  }
}

TEST(TransformerAnsatz, BadOptionsAreRefused) {
  auto o = small("factored", 3);
  EXPECT_THROW(TransformerAnsatz<double>(8, true, o), Error);  // 3 does not divide 8
  o = small("factored", 2);
  o.n_heads = 3;
  EXPECT_THROW(TransformerAnsatz<double>(8, true, o), Error);
  // An unknown attention kind is refused where the option is read, naming the choices.
  try {
    small("softmax", 2);
    FAIL() << "attention 'softmax' is not a kind of the transformer ansatz";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'softmax': expected one of factored, dense"), std::string::npos) << e.what();
  }
  try {
    TransformerAnsatz<double>(10, true, small("factored", 4));
    FAIL() << "patch_size 4 does not divide 10: the constructor must refuse it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("patch_size"), std::string::npos) << e.what();
  }
}

namespace {
double vmc_relative_error(spin::ChainModel m, TransformerAnsatzOptions o, long iters, double exact = NAN) {
  const auto ref = ed::reference_energy(m);
  if (std::isnan(exact)) exact = ref ? *ref : ed::exact_ground_state(m).energies.at(0);
  spin::SpinHamiltonian H(m);
  TransformerAnsatz<double> psi(m.n, m.bc == spin::Boundary::Periodic, o);
  VmcOptions v;
  v.sampler.n_chains = 32;
  v.sampler.n_samples = 512;
  v.sampler.n_discard = 4;
  v.sampler.fixed_sz = m.model != spin::ModelKind::Tfim;
  v.sampler.periodic = m.bc == spin::Boundary::Periodic;
  v.lr = 0.05;
  v.diag_shift = 1e-2;
  v.diag_shift_final = 1e-4;
  v.diag_shift_steps = iters;
  VmcDriver<double> driver(psi, H, v);
  driver.run(iters);
  const auto st = driver.estimate_energy(8192);
  EXPECT_GE(st.mean, exact - 5 * st.error - 1e-9);  // variational
  return std::abs(st.mean - exact) / std::abs(exact);
}
}  // namespace

// The final estimate runs its own chains: its acceptance is theirs, not the training sampler's (which a resumed run
// never ran, so `attnphys vmc --resume ... --iters <done>` reported acceptance 0).
TEST(TransformerVmc, EstimateReportsItsOwnChainsAcceptance) {
  spin::ChainModel tfim;
  tfim.model = spin::ModelKind::Tfim;
  tfim.n = 8;
  tfim.bc = spin::Boundary::Open;
  tfim.h = 1.0;
  spin::SpinHamiltonian H(tfim);
  auto o = small("factored", 2);
  o.n_layers = 1;
  o.init_std = 0.05;
  TransformerAnsatz<double> psi(tfim.n, false, o);
  VmcOptions v;
  v.sampler.n_chains = 16;
  v.sampler.n_samples = 256;
  v.sampler.n_discard = 4;
  VmcDriver<double> driver(psi, H, v);
  EXPECT_EQ(driver.estimate_acceptance(), 0.0);
  driver.estimate_energy(2048);
  EXPECT_EQ(driver.sampler().acceptance(), 0.0);  // the run's own chains did not move
  // Near-uniform |psi|^2 (small init): most single flips are accepted.
  EXPECT_GT(driver.estimate_acceptance(), 0.3);
  EXPECT_LE(driver.estimate_acceptance(), 1.0);
  driver.estimate_energy(0);  // the run's chains: their acceptance over this call
  EXPECT_NEAR(driver.estimate_acceptance(), driver.sampler().acceptance(), 1e-15);
  EXPECT_GT(driver.sampler().acceptance(), 0.3);
}

TEST(TransformerVmc, ReachesTfimAndHeisenbergGroundStates) {
  spin::ChainModel tfim;
  tfim.model = spin::ModelKind::Tfim;
  tfim.n = 8;
  tfim.bc = spin::Boundary::Periodic;
  tfim.h = 1.0;
  auto o = small("factored", 2);
  o.n_layers = 1;
  o.init_std = 0.05;
  EXPECT_LT(vmc_relative_error(tfim, o, 80), 2e-3);

  spin::ChainModel heis;
  heis.model = spin::ModelKind::Heisenberg;
  heis.n = 8;
  heis.bc = spin::Boundary::Periodic;
  o.marshall_sign = true;
  EXPECT_LT(vmc_relative_error(heis, o, 80), 2e-3);
}

TEST(TransformerVmc, SpinFlipSectorsGiveTheGroundStateAndTheLowestOddState) {
  // The open critical TFIM: its ground state is even under the spin flip and the reflection; its first excited
  // state (one fermion) is odd under the flip. The even-sector ansatz reaches E0; the odd-flip ansatz, which cannot
  // represent the ground state, reaches E1 (ED in the full space, both states).
  spin::ChainModel tfim;
  tfim.model = spin::ModelKind::Tfim;
  tfim.n = 8;
  tfim.bc = spin::Boundary::Open;
  tfim.h = 1.0;
  ed::EdOptions eo;
  eo.n_states = 2;
  eo.use_flip_parity = false;
  const auto ed = ed::exact_ground_state(tfim, eo);
  ASSERT_EQ(ed.energies.size(), 2u);
  ASSERT_GT(ed.energies[1] - ed.energies[0], 0.1);
  auto o = small("factored", 2);
  o.n_layers = 1;
  o.init_std = 0.05;
  o.spin_flip = SymmetrySector::Even;
  o.reflection = SymmetrySector::Even;
  EXPECT_LT(vmc_relative_error(tfim, o, 80, ed.energies[0]), 2e-3);
  o.spin_flip = SymmetrySector::Odd;
  o.reflection = SymmetrySector::Off;
  EXPECT_LT(vmc_relative_error(tfim, o, 80, ed.energies[1]), 2e-3);
}
