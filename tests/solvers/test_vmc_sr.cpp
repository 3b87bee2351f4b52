// SR against a dense complex reference, RBM gradients against finite differences, and the VMC driver: reaching the
// ED energy, stopping on a callback or a NaN, restarting from a checkpoint exactly.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <complex>
#include <cstdio>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "attnphys/solvers/vmc/sr.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
template <class V>
Eigen::MatrixXd host_matrix(const V& v) {
  auto h = to_host(v);
  Eigen::MatrixXd m(h.extent(0), h.extent(1));
  for (std::size_t i = 0; i < h.extent(0); ++i)
    for (std::size_t j = 0; j < h.extent(1); ++j) m(i, j) = h(i, j);
  return m;
}

Eigen::VectorXd sr_reference(const Eigen::MatrixXd& ore, const Eigen::MatrixXd& oim, const Eigen::VectorXd& ere,
                             const Eigen::VectorXd& eim, double shift) {
  const long M = ore.rows(), P = ore.cols();
  Eigen::MatrixXcd O(M, P);
  O.real() = ore;
  O.imag() = oim;
  Eigen::VectorXcd E(M);
  E.real() = ere;
  E.imag() = eim;
  O.rowwise() -= O.colwise().mean();
  E.array() -= E.mean();
  Eigen::MatrixXd S = (O.adjoint() * O).real() / double(M);
  Eigen::VectorXd F = (O.adjoint() * E).real() / double(M);
  S.diagonal().array() += shift;
  return S.completeOrthogonalDecomposition().solve(F);
}
}  // namespace

TEST(StochasticReconfiguration, PxPAndMinSrMatchDenseReference) {
  for (auto [M, P] : std::vector<std::pair<long, long>>{{40, 7}, {6, 33}}) {
    View2<double> ore("ore", M, P), oim("oim", M, P);
    View1<double> ere("ere", M), eim("eim", M), d1("d1", P), d2("d2", P), g("g", P);
    fill_normal(ore, 1, 1);
    fill_normal(oim, 1, 2);
    fill_normal(ere, 1, 3);
    fill_normal(eim, 1, 4);
    Eigen::VectorXd ere_h(M), eim_h(M);
    auto he = to_host(ere), hi = to_host(eim);
    for (long m = 0; m < M; ++m) {
      ere_h[m] = he(m);
      eim_h[m] = hi(m);
    }
    for (double shift : {1e-2, 0.0}) {
      const auto ref = sr_reference(host_matrix(ore), host_matrix(oim), ere_h, eim_h, shift);
      auto i1 = sr_direction<double>(ore, oim, ere, eim, shift, SrForm::Pxp, 1e-12, d1, g);
      auto i2 = sr_direction<double>(ore, oim, ere, eim, shift, SrForm::Minsr, 1e-12, d2);
      EXPECT_EQ(i1.form, SrForm::Pxp);
      EXPECT_EQ(i2.form, SrForm::Minsr);
      // Without a shift and with fewer samples than parameters S is singular: the pseudo-inverse takes over.
      if (shift == 0.0 && 2 * M < P) EXPECT_TRUE(i1.used_pinv);
      auto h1 = to_host(d1), h2 = to_host(d2);
      for (long k = 0; k < P; ++k) {
        EXPECT_NEAR(h1(k), ref[k], 1e-8 * (1 + ref.norm())) << M << "x" << P << " shift " << shift;
        EXPECT_NEAR(h2(k), ref[k], 1e-8 * (1 + ref.norm())) << M << "x" << P << " shift " << shift;
      }
      EXPECT_NEAR(i1.grad_norm, l2_norm<double>(Unmanaged1<double>(g.data(), P)), 1e-12);
    }
  }
}

// The complex solve of a holomorphic Jacobian (O of Im w = i O of Re w) is the real P×P solve, column for column;
// a Jacobian that is not holomorphic is refused (nothing written), and so are pairs that miss a column.
TEST(StochasticReconfiguration, HolomorphicSolveMatchesTheRealPxPSolve) {
  const long M = 50, K1 = 6, K2 = 3, K = K1 + K2, P = 2 * K;
  // Layout as the RBM's: [w1_re (K1), w1_im (K1), w2_re (K2), w2_im (K2)].
  std::vector<ComplexBlock> blocks = {{0, K1, K1}, {2 * K1, 2 * K1 + K2, K2}};
  const auto pairs = holomorphic_pairs(blocks, P);
  ASSERT_EQ(long(pairs.re.size()), K);
  EXPECT_TRUE(holomorphic_pairs(blocks, P + 1).empty());  // a real parameter of its own: no pairs
  View2<double> gre("gre", M, K), gim("gim", M, K), ore("ore", M, P), oim("oim", M, P);
  View1<double> ere("ere", M), eim("eim", M), d1("d1", P), d2("d2", P), g("g", P);
  fill_normal(gre, 1, 11);
  fill_normal(gim, 1, 12);
  fill_normal(ere, 1, 13);
  fill_normal(eim, 1, 14);
  {
    auto a = to_host(gre), b = to_host(gim);
    auto r = Kokkos::create_mirror_view(ore), q = Kokkos::create_mirror_view(oim);
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < K; ++k) {
        r(m, pairs.re[k]) = a(m, k), q(m, pairs.re[k]) = b(m, k);   // ∂/∂Re w = G
        r(m, pairs.im[k]) = -b(m, k), q(m, pairs.im[k]) = a(m, k);  // ∂/∂Im w = i G
      }
    Kokkos::deep_copy(ore, r);
    Kokkos::deep_copy(oim, q);
  }
  for (double shift : {1e-2, 1e-4}) {
    SrInfo hol;
    ASSERT_TRUE(sr_direction_holomorphic<double>(ore, oim, ere, eim, shift, pairs, d1, hol));
    EXPECT_TRUE(hol.holomorphic);
    const auto real = sr_direction<double>(ore, oim, ere, eim, shift, SrForm::Pxp, 1e-12, d2, g);
    EXPECT_FALSE(real.holomorphic);
    EXPECT_NEAR(hol.grad_norm, real.grad_norm, 1e-12 * real.grad_norm);
    auto h1 = to_host(d1), h2 = to_host(d2);
    double norm = 0;
    for (long k = 0; k < P; ++k) norm += h2(k) * h2(k);
    for (long k = 0; k < P; ++k) EXPECT_NEAR(h1(k), h2(k), 1e-10 * (1 + std::sqrt(norm))) << "shift " << shift;
  }
  // Break holomorphy in one entry: refused, delta untouched.
  {
    auto q = to_host(oim);
    q(7, pairs.im[2]) += 1e-3;
    Kokkos::deep_copy(oim, q);
  }
  Kokkos::deep_copy(d1, 42.0);
  SrInfo info;
  EXPECT_FALSE(sr_direction_holomorphic<double>(ore, oim, ere, eim, 1e-2, pairs, d1, info));
  EXPECT_EQ(to_host(d1)(0), 42.0);
  EXPECT_FALSE(sr_direction_holomorphic<double>(ore, oim, ere, eim, 1e-2, HolomorphicPairs{}, d1, info));
}

// The complex RBM is holomorphic in its weights: its blocks pair up, its Jacobian passes the check, and the
// complex solve gives the real solve's direction. The real RBM has no pairs.
TEST(StochasticReconfiguration, ComplexRbmTakesTheHolomorphicSolve) {
  const int n = 10, B = 64;
  Rbm<double> rbm(n, RbmOptions{1.0, true, true, 0.3, 5});
  const long P = rbm.n_parameters();
  const auto pairs = holomorphic_pairs(rbm.complex_blocks(), P);
  ASSERT_EQ(2 * long(pairs.re.size()), P);
  Rbm<double> real_rbm(n, RbmOptions{1.0, false, true, 0.3, 5});
  EXPECT_TRUE(holomorphic_pairs(real_rbm.complex_blocks(), real_rbm.n_parameters()).empty());
  View2<double> s("s", B, n), ore("ore", B, P), oim("oim", B, P);
  fill_uniform(s, 7, 0, -1, 1);
  auto hs = to_host(s);
  for (std::size_t k = 0; k < hs.size(); ++k) hs.data()[k] = hs.data()[k] < 0 ? -1 : 1;
  Kokkos::deep_copy(s, hs);
  rbm.log_psi_gradients(s, ore, oim);
  View1<double> ere("ere", B), eim("eim", B), d1("d1", P), d2("d2", P);
  fill_normal(ere, 1, 21);
  fill_normal(eim, 1, 22);
  SrInfo info;
  ASSERT_TRUE(sr_direction_holomorphic<double>(ore, oim, ere, eim, 1e-3, pairs, d1, info));
  sr_direction<double>(ore, oim, ere, eim, 1e-3, SrForm::Pxp, 1e-12, d2);
  auto h1 = to_host(d1), h2 = to_host(d2);
  double norm = 0;
  for (long k = 0; k < P; ++k) norm += h2(k) * h2(k);
  for (long k = 0; k < P; ++k) EXPECT_NEAR(h1(k), h2(k), 1e-9 * (1 + std::sqrt(norm))) << "param " << k;
}

TEST(StochasticReconfiguration, DistinctRowsWithCountsGiveTheUpdateOfEveryRow) {
  // U distinct rows drawn 1..4 times each, interleaved: sr_direction of every row equals sr_direction of the
  // distinct rows with their counts, in both forms, with a shift and through the pseudo-inverse (no shift, fewer
  // rows than parameters); merge_duplicate_samples finds the distinct rows and counts of the sample matrix.
  const long U = 9, N = 6;
  std::vector<long> times(U), order;
  for (long u = 0; u < U; ++u) times[u] = 1 + (u * 5) % 4;
  for (long round = 0; round < 4; ++round)
    for (long u = 0; u < U; ++u)
      if (times[u] > round) order.push_back(u);
  const long M = long(order.size());
  View2<double> spins("spins", M, N);
  {
    auto h = Kokkos::create_mirror_view(spins);
    for (long m = 0; m < M; ++m)
      for (long i = 0; i < N; ++i) h(m, i) = ((order[m] >> i) & 1) ? 1.0 : -1.0;
    Kokkos::deep_copy(spins, h);
  }
  std::vector<long> first, count;
  merge_duplicate_samples<double>(spins, first, count);
  ASSERT_EQ(long(first.size()), U);
  for (long u = 0; u < U; ++u) {
    EXPECT_EQ(order[first[u]], u);  // first occurrences in order
    EXPECT_EQ(count[u], times[u]);
  }
  for (long P : {5L, 40L}) {
    View2<double> dre("dre", U, P), dim("dim", U, P), ore("ore", M, P), oim("oim", M, P);
    View1<double> der("der", U), dei("dei", U), ere("ere", M), eim("eim", M), c("c", U);
    fill_normal(dre, 3, 1);
    fill_normal(dim, 3, 2);
    fill_normal(der, 3, 3);
    fill_normal(dei, 3, 4);
    {
      auto a = to_host(dre), b = to_host(dim);
      auto e = to_host(der), f = to_host(dei);
      auto A = Kokkos::create_mirror_view(ore), B = Kokkos::create_mirror_view(oim);
      auto E = Kokkos::create_mirror_view(ere), F = Kokkos::create_mirror_view(eim);
      auto C = Kokkos::create_mirror_view(c);
      for (long m = 0; m < M; ++m) {
        for (long k = 0; k < P; ++k) {
          A(m, k) = a(order[m], k);
          B(m, k) = b(order[m], k);
        }
        E(m) = e(order[m]);
        F(m) = f(order[m]);
      }
      for (long u = 0; u < U; ++u) C(u) = double(times[u]);
      Kokkos::deep_copy(ore, A);
      Kokkos::deep_copy(oim, B);
      Kokkos::deep_copy(ere, E);
      Kokkos::deep_copy(eim, F);
      Kokkos::deep_copy(c, C);
    }
    for (SrForm form : {SrForm::Pxp, SrForm::Minsr})
      for (double shift : {1e-2, 0.0}) {
        if (shift == 0.0 && P < 2 * U) continue;  // a regular S without a shift: nothing for the pseudo-inverse
        View1<double> d1("d1", P), d2("d2", P), g1("g1", P), g2("g2", P);
        const auto i1 = sr_direction<double>(ore, oim, ere, eim, shift, form, 1e-12, d1, g1);
        const auto i2 = sr_direction<double>(dre, dim, der, dei, shift, form, 1e-12, d2, g2, c);
        EXPECT_EQ(i1.used_pinv, i2.used_pinv);
        auto h1 = to_host(d1), h2 = to_host(d2), k1 = to_host(g1), k2 = to_host(g2);
        double norm = 0;
        for (long k = 0; k < P; ++k) norm = std::max(norm, std::abs(h1(k)));
        ASSERT_GT(norm, 1e-6);
        for (long k = 0; k < P; ++k) {
          EXPECT_NEAR(h2(k), h1(k), 1e-9 * norm) << "P " << P << " form " << int(form) << " shift " << shift;
          EXPECT_NEAR(k2(k), k1(k), 1e-12 * (1 + std::abs(k1(k))));
        }
        EXPECT_NEAR(i2.grad_norm, i1.grad_norm, 1e-12 * (1 + i1.grad_norm));
      }
  }
  // Without the counts the distinct rows alone give a different update (the test above can fail).
  View2<double> o1("o1", 3, 4), o2("o2", 3, 4);
  View1<double> e1("e1", 3), e2("e2", 3), d1("d1", 4), d2("d2", 4), two("two", 3);
  fill_normal(o1, 5, 1);
  fill_normal(o2, 5, 2);
  fill_normal(e1, 5, 3);
  fill_normal(e2, 5, 4);
  Kokkos::deep_copy(two, 1.0);
  Kokkos::deep_copy(Kokkos::subview(two, 0), 3.0);
  sr_direction<double>(o1, o2, e1, e2, 1e-2, SrForm::Pxp, 1e-12, d1);
  sr_direction<double>(o1, o2, e1, e2, 1e-2, SrForm::Pxp, 1e-12, d2, View1<double>(), two);
  auto a = to_host(d1), b = to_host(d2);
  double diff = 0;
  for (long k = 0; k < 4; ++k) diff = std::max(diff, std::abs(a(k) - b(k)));
  EXPECT_GT(diff, 1e-6);
}

TEST(Rbm, GradientsMatchFiniteDifferences) {
  for (bool complex : {true, false}) {
    const int n = 5, B = 3;
    Rbm<double> rbm(n, RbmOptions{1.6, complex, true, 0.4, 3});
    View2<double> s("s", B, n);
    fill_uniform(s, 2, 0, -1, 1);
    auto hs = to_host(s);
    for (std::size_t k = 0; k < hs.size(); ++k) hs.data()[k] = hs.data()[k] < 0 ? -1 : 1;
    Kokkos::deep_copy(s, hs);
    const long P = rbm.n_parameters();
    View2<double> ore("ore", B, P), oim("oim", B, P);
    rbm.log_psi_gradients(s, ore, oim);
    auto gre = to_host(ore), gim = to_host(oim);
    auto theta = rbm.parameters().get_host();
    View1<double> re("re", B), im("im", B);
    const double h = 1e-6;
    for (long k = 0; k < P; ++k) {
      double fr[2][B], fi[2][B];
      for (int side = 0; side < 2; ++side) {
        auto t = theta;
        t[k] += side ? h : -h;
        rbm.parameters().set_host(t);
        rbm.log_psi(s, re, im);
        auto a = to_host(re), b = to_host(im);
        for (int i = 0; i < B; ++i) {
          fr[side][i] = a(i);
          fi[side][i] = b(i);
        }
      }
      for (int i = 0; i < B; ++i) {
        EXPECT_NEAR((fr[1][i] - fr[0][i]) / (2 * h), gre(i, k), 1e-7) << "param " << k;
        EXPECT_NEAR((fi[1][i] - fi[0][i]) / (2 * h), gim(i, k), 1e-7) << "param " << k;
      }
    }
    rbm.parameters().set_host(theta);
  }
}

namespace {
spin::ChainModel tfim8() {
  spin::ChainModel m;
  m.model = spin::ModelKind::Tfim;
  m.n = 8;
  m.bc = spin::Boundary::Open;
  m.h = 1.0;
  return m;
}
VmcOptions quick_options() {
  VmcOptions o;
  o.sampler.n_chains = 64;
  o.sampler.n_samples = 1024;
  o.sampler.n_discard = 4;
  o.lr = 0.05;
  o.diag_shift = 1e-2;
  o.diag_shift_final = 1e-4;
  o.diag_shift_steps = 100;
  return o;
}
}  // namespace

TEST(VmcDriver, RbmReachesTheTfimGroundStateEnergy) {
  const auto m = tfim8();
  const double exact = *ed::reference_energy(m);
  spin::SpinHamiltonian H(m);
  Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.05, 7});
  VmcDriver<double> driver(rbm, H, quick_options());
  auto hist = driver.run(150);
  ASSERT_EQ(hist.size(), 150u);
  EXPECT_LT(hist.back().energy, hist.front().energy);
  const auto st = driver.estimate_energy(16384);
  EXPECT_LT(std::abs(st.mean - exact) / std::abs(exact), 1e-3) << st.mean << " vs " << exact;
  EXPECT_GE(st.mean, exact - 4 * st.error);  // variational, within the error bar
  EXPECT_GT(hist.back().acceptance, 0.05);
}

TEST(VmcDriver, CallbackStopsAndCheckpointRestartsExactly) {
  const auto m = tfim8();
  spin::SpinHamiltonian H(m);
  const std::string path = (attnphys::test::scratch_dir("vmc_sr") / "ckpt.h5").string();
  for (const char* opt : {"sr", "adam"}) {
    auto o = quick_options();
    o.optimizer = parse_enum<VmcOptimizer>(opt, "vmc.optimizer");
    o.lr = std::string(opt) == "adam" ? 0.01 : 0.05;
    o.sampler.n_samples = 256;
    Rbm<double> a(m.n, RbmOptions{1.0, true, true, 0.05, 7});
    VmcDriver<double> da(a, H, o);
    auto first = da.run(10, nullptr, {[](const VmcStep& s) { return s.iteration < 3; }});
    EXPECT_EQ(first.size(), 4u);
    da.save_checkpoint(path);
    auto cont = da.run(3);
    Rbm<double> b(m.n, RbmOptions{1.0, true, true, 0.5, 99});  // different start, overwritten by the checkpoint
    VmcDriver<double> db(b, H, o);
    db.load_checkpoint(path);
    EXPECT_EQ(db.iteration(), 4);
    auto again = db.run(3);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(again[k].iteration, cont[k].iteration);
      EXPECT_DOUBLE_EQ(again[k].energy, cont[k].energy) << opt << " step " << k;
    }
  }
  std::remove(path.c_str());
}

TEST(VmcDriver, AdaptedSweepShortensWhileSamplesStayIndependentReachesTheEnergyAndResumesExactly) {
  // sampler.adapt_sweep: the sweep starts at N = 8 steps and shrinks by 20 % per iteration while the measured
  // autocorrelation time stays <= 1.2, down to N/4 = 2; it grows again where tau > 1.5. The run still reaches the
  // TFIM ground state, and a checkpoint carries the adapted sweep, so a restart continues bit for bit.
  const auto m = tfim8();
  const double exact = *ed::reference_energy(m);
  spin::SpinHamiltonian H(m);
  auto o = quick_options();
  o.sampler.adapt_sweep = true;
  Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.05, 7});
  VmcDriver<double> driver(rbm, H, o);
  auto hist = driver.run(150);
  ASSERT_EQ(hist.size(), 150u);
  EXPECT_EQ(hist.front().sweep, 8);
  long shortest = 8;
  for (std::size_t k = 1; k < hist.size(); ++k) {
    const long prev = hist[k - 1].sweep, now = hist[k].sweep;
    shortest = std::min(shortest, now);
    EXPECT_GE(now, 2);
    EXPECT_LE(now, 16);
    // The rule: shorter after tau <= 1.2, longer after tau > 1.5, else the same (within the bounds).
    if (hist[k - 1].tau <= 1.2) EXPECT_LE(now, prev) << "iteration " << k;
    else if (hist[k - 1].tau > 1.5) EXPECT_GE(now, prev) << "iteration " << k;
    else EXPECT_EQ(now, prev) << "iteration " << k;
  }
  EXPECT_LT(shortest, 8);  // the TFIM chain at h = 1 decorrelates within a quarter sweep here
  const auto st = driver.estimate_energy(16384);
  EXPECT_LT(std::abs(st.mean - exact) / std::abs(exact), 1e-3) << st.mean << " vs " << exact;

  const std::string path = (attnphys::test::scratch_dir("vmc_sr") / "adapt.h5").string();
  Rbm<double> a(m.n, RbmOptions{1.0, true, true, 0.05, 7});
  VmcDriver<double> da(a, H, o);
  da.run(6);
  da.save_checkpoint(path);
  auto cont = da.run(4);
  Rbm<double> b(m.n, RbmOptions{1.0, true, true, 0.5, 99});
  VmcDriver<double> db(b, H, o);
  db.load_checkpoint(path);
  auto again = db.run(4);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(again[k].sweep, cont[k].sweep) << "step " << k;
    EXPECT_DOUBLE_EQ(again[k].energy, cont[k].energy) << "step " << k;
  }
  std::remove(path.c_str());
}

TEST(VmcDriver, MergedDuplicateSamplesGiveTheSameTrajectory) {
  // A real RBM on 8 sites with 1024 samples (at most 256 distinct configurations: many duplicates): five SR steps
  // with vmc.merge_duplicates on and off stay equal, in both SR forms and both SR precisions. With the double
  // (Cholesky) solve they agree to rounding (1e-10 relative). The mixed solve stops its refinement at a 1e-10
  // relative residual, so the merged and unmerged systems (the same matrix, summed in another order) give solutions
  // that differ by up to that residual times the kernel's condition number (diag shift 1e-2 here), and five steps
  // carry it on: 1e-8 relative there (measured: below 1e-10 on an AMD Zen 4 core, 1.7e-10 on an Intel AVX-512 one).
  spin::SpinHamiltonian H(tfim8());
  for (SrPrecision precision : {SrPrecision::Double, SrPrecision::Mixed}) {
    const double tol = precision == SrPrecision::Double ? 1e-10 : 1e-8;
    for (VmcOptimizer opt : {VmcOptimizer::Pxp, VmcOptimizer::Minsr}) {
      std::vector<double> params[2];
      std::vector<double> energies[2];
      for (int merge = 0; merge < 2; ++merge) {
        Rbm<double> rbm(8, RbmOptions{1.0, false, true, 0.1, 3});
        auto o = quick_options();
        o.optimizer = opt;
        o.sr_precision = precision;
        o.merge_duplicates = merge == 1;
        VmcDriver<double> driver(rbm, H, o);
        for (int it = 0; it < 5; ++it) energies[merge].push_back(driver.step().energy);
        params[merge] = rbm.parameters().get_host();
      }
      double w = 0, scale = 0;
      for (std::size_t k = 0; k < params[0].size(); ++k) {
        w = std::max(w, std::abs(params[0][k] - params[1][k]));
        scale = std::max(scale, std::abs(params[0][k]));
      }
      EXPECT_LT(w, tol * scale) << "optimizer " << enum_name(opt) << ", precision " << enum_name(precision);
      for (int it = 0; it < 5; ++it)
        EXPECT_NEAR(energies[0][it], energies[1][it], tol * std::abs(energies[0][it]))
            << "optimizer " << enum_name(opt) << ", precision " << enum_name(precision) << ", step " << it;
    }
  }
}

TEST(VmcDriver, RealRbmWithTheMarshallSignReachesTheHeisenbergGroundState) {
  // rbm.marshall_sign: ψ gains the phase π · N_up(even sites) (the gradients do not change); a real (positive) RBM
  // times that sign reaches the periodic Heisenberg ground state of 8 sites, which a positive wavefunction alone
  // cannot (the same RBM without the sign stays far above: the test can fail).
  spin::ChainModel m;
  m.model = spin::ModelKind::Heisenberg;
  m.n = 8;
  m.bc = spin::Boundary::Periodic;
  const double exact = ed::exact_ground_state(m).energies.at(0);
  {
    Rbm<double> plain(8, RbmOptions{1.0, true, true, 0.3, 4});
    Rbm<double> signed_rbm(8, RbmOptions{1.0, true, true, 0.3, 4, true});
    const long B = 256;
    View2<double> s("s", B, 8);
    auto hs = Kokkos::create_mirror_view(s);
    for (long b = 0; b < B; ++b)
      for (int i = 0; i < 8; ++i) hs(b, i) = ((b >> i) & 1) ? 1.0 : -1.0;
    Kokkos::deep_copy(s, hs);
    View1<double> r1("r1", B), i1("i1", B), r2("r2", B), i2("i2", B);
    plain.log_psi(s, r1, i1);
    signed_rbm.log_psi(s, r2, i2);
    const long P = plain.n_parameters();
    View2<double> a_re("a_re", B, P), a_im("a_im", B, P), b_re("b_re", B, P), b_im("b_im", B, P);
    plain.log_psi_gradients(s, a_re, a_im);
    signed_rbm.log_psi_gradients(s, b_re, b_im);
    auto h1 = to_host(r1), p1 = to_host(i1), h2 = to_host(r2), p2 = to_host(i2);
    for (long b = 0; b < B; ++b) {
      int ups = 0;
      for (int i = 0; i < 8; i += 2) ups += hs(b, i) > 0;
      EXPECT_DOUBLE_EQ(h1(b), h2(b));
      EXPECT_NEAR(std::remainder(p2(b) - p1(b) - M_PI * (ups % 2), 2 * M_PI), 0.0, 1e-12);
    }
    auto ga = to_host(a_re), gb = to_host(b_re), gc = to_host(a_im), gd = to_host(b_im);
    for (long b = 0; b < B; ++b)
      for (long k = 0; k < P; ++k) {
        EXPECT_EQ(ga(b, k), gb(b, k));
        EXPECT_EQ(gc(b, k), gd(b, k));
      }
  }
  spin::SpinHamiltonian H(m);
  double err[2];
  for (int sign = 0; sign < 2; ++sign) {
    Rbm<double> rbm(8, RbmOptions{1.0, false, true, 0.05, 7, sign == 1});
    auto o = quick_options();
    o.sampler.fixed_sz = true;
    o.sampler.periodic = true;
    VmcDriver<double> driver(rbm, H, o);
    driver.run(150);
    const auto st = driver.estimate_energy(16384);
    err[sign] = std::abs(st.mean - exact) / std::abs(exact);
    EXPECT_GE(st.mean, exact - 4 * st.error - 1e-9);
  }
  EXPECT_LT(err[1], 2e-3) << "with the Marshall sign";
  EXPECT_GT(err[0], 5e-2) << "a positive RBM alone";
}

TEST(VmcDriver, NanEnergyStopsWithAClearMessage) {
  const auto m = tfim8();
  spin::SpinHamiltonian H(m);
  Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.05, 7});
  auto p = rbm.parameters().get_host();
  p[0] = NAN;
  rbm.parameters().set_host(p);
  VmcDriver<double> d(rbm, H, quick_options());
  try {
    d.run(2);
    FAIL() << "a NaN energy must stop the run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nan"), std::string::npos) << e.what();
  }
}

// The step guard (vmc.guard_sigmas): a step that makes the energy jump far above the run's lowest, or NaN, is
// rejected. Here the bad steps are made by hand (a callback spoils the parameters after iteration 30, as a runaway SR
// update would); the guard restores the parameters of the lowest energy, raises the diagonal shift tenfold, and the
// run still reaches the ground state. Unguarded, the same NaN stops the run.
TEST(VmcDriver, StepGuardRejectsADivergentStepRestoresTheBestParametersAndTheRunRecovers) {
  const auto m = tfim8();
  const double exact = *ed::reference_energy(m);
  spin::SpinHamiltonian H(m);
  for (const bool nan : {false, true}) {
    Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.05, 7});
    auto o = quick_options();
    o.guard_sigmas = 8;
    o.guard_start = 10;
    VmcDriver<double> driver(rbm, H, o);
    auto spoil = [&](const VmcStep& s) {
      if (s.iteration == 30) {
        auto p = rbm.parameters().get_host();
        for (auto& x : p) x = nan ? NAN : x + 0.7;
        rbm.parameters().set_host(p);
        driver.sampler().refresh();
      }
      return true;
    };
    auto hist = driver.run(150, nullptr, {spoil});
    ASSERT_EQ(hist.size(), 150u);
    long rejected = 0;
    double lowest = 1e300, lowest_err = 0, lowest_var = 0;
    for (const auto& s : hist) {
      if (s.rejected) {
        // Spoiled parameters, chains not yet moved: NaN, or a wild estimate (here -621 +- 614, below the lowest,
        // with a huge variance).
        ++rejected;
        EXPECT_EQ(s.iteration, 31) << (nan ? "NaN" : "jump");
        EXPECT_TRUE(!std::isfinite(s.energy) || s.energy > lowest + 8 * std::hypot(s.error, lowest_err) ||
                    s.variance > kGuardVarianceFactor * lowest_var);
      } else if (s.energy < lowest) {
        lowest = s.energy, lowest_err = s.error, lowest_var = s.variance;
      }
    }
    EXPECT_EQ(rejected, 1);
    EXPECT_EQ(driver.guard_rejections(), 1);
    EXPECT_EQ(driver.guard_shift_factor(), 10.0);
    // The shift after the rejection is ten times its schedule; the iteration after it starts from the restored
    // parameters, whose energy is back near the lowest.
    EXPECT_DOUBLE_EQ(hist[32].diag_shift, 10 * scheduled_diag_shift(o, 32));
    EXPECT_DOUBLE_EQ(hist[29].diag_shift, scheduled_diag_shift(o, 29));
    EXPECT_LT(hist[32].energy, hist[30].energy + 0.5);
    const auto st = driver.estimate_energy(16384);
    EXPECT_LT(std::abs(st.mean - exact) / std::abs(exact), 2e-3) << st.mean << " vs " << exact;
  }
  // Unguarded, or before guard_start, the NaN parameters stop the run with the usual message.
  for (const double sigmas : {0.0, 8.0}) {
    Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.05, 7});
    auto o = quick_options();
    o.guard_sigmas = sigmas;
    o.guard_start = 10;
    VmcDriver<double> driver(rbm, H, o);
    auto spoil = [&](const VmcStep& s) {
      if (s.iteration == 3) {
        auto p = rbm.parameters().get_host();
        p[0] = NAN;
        rbm.parameters().set_host(p);
        driver.sampler().refresh();
      }
      return true;
    };
    EXPECT_THROW(driver.run(10, nullptr, {spoil}), Error) << sigmas;
  }
}

// A guarded run that rejected a step before its checkpoint resumes exactly: the guard's lowest energy, its
// parameters and the shift factor travel in the checkpoint; the log gains a `rejected` column.
TEST(VmcDriver, StepGuardStateResumesExactlyFromACheckpoint) {
  const auto m = tfim8();
  spin::SpinHamiltonian H(m);
  const auto dir = attnphys::test::scratch_dir("vmc_guard");
  const std::string path = (dir / "ckpt.h5").string();
  auto o = quick_options();
  o.sampler.n_samples = 256;
  o.guard_sigmas = 8;
  o.guard_start = 2;
  o.log_path = (dir / "log.csv").string();
  Rbm<double> a(m.n, RbmOptions{1.0, true, true, 0.05, 7});
  VmcDriver<double> da(a, H, o);
  auto spoil = [&](const VmcStep& s) {
    if (s.iteration == 5) {
      auto p = a.parameters().get_host();
      for (auto& x : p) x += 0.7;
      a.parameters().set_host(p);
      da.sampler().refresh();
    }
    return true;
  };
  auto first = da.run(10, nullptr, {spoil});
  ASSERT_EQ(da.guard_rejections(), 1);
  da.save_checkpoint(path);
  auto cont = da.run(4);
  Rbm<double> b(m.n, RbmOptions{1.0, true, true, 0.5, 99});
  VmcDriver<double> db(b, H, o);
  db.load_checkpoint(path);
  EXPECT_EQ(db.guard_rejections(), 1);
  EXPECT_EQ(db.guard_shift_factor(), 10.0);
  auto again = db.run(4);
  for (int k = 0; k < 4; ++k) {
    EXPECT_DOUBLE_EQ(again[k].energy, cont[k].energy) << "step " << k;
    EXPECT_DOUBLE_EQ(again[k].diag_shift, cont[k].diag_shift) << "step " << k;
  }
  // The log (written by run(), resumed from the checkpoint) has the rejected column: 1 on iteration 6 only.
  const auto cols = VmcDriver<double>::log_columns(true);
  EXPECT_EQ(cols.back(), "rejected");
  EXPECT_EQ(VmcDriver<double>::log_columns().size() + 1, cols.size());
  std::FILE* f = std::fopen(o.log_path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[4096];
  ASSERT_NE(std::fgets(line, sizeof line, f), nullptr);
  EXPECT_NE(std::string(line).find(",rejected"), std::string::npos);
  long rows = 0, ones = 0;
  while (std::fgets(line, sizeof line, f)) {
    ++rows;
    std::string l(line);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    if (l.substr(l.rfind(',') + 1) == "1") {
      ++ones;
      EXPECT_EQ(std::stol(l.substr(0, l.find(','))), 6);
    }
  }
  std::fclose(f);
  EXPECT_EQ(rows, 14);
  EXPECT_EQ(ones, 1);
}

// A false alarm: the step at 5 is spoiled, the guard rejects at 6 and restores the lowest energy's parameters, and
// the test spoils those too, as chains stuck in a bad region would leave their estimate bad with no step taken. The
// re-estimate at 7 fails and rebases: the rejection was a false alarm and does not count toward the limit; the
// raised shift stays. The same without the second spoiling: a true rejection, counted.
TEST(VmcDriver, AFalseAlarmDoesNotCountTowardTheLimitAndKeepsTheRaisedShift) {
  const auto m = tfim8();
  spin::SpinHamiltonian H(m);
  for (const bool stuck : {false, true}) {
    auto o = quick_options();
    o.sampler.n_samples = 256;
    o.guard_sigmas = 8;
    o.guard_start = 2;
    Rbm<double> rbm(m.n, RbmOptions{1.0, true, true, 0.05, 7});
    VmcDriver<double> driver(rbm, H, o);
    auto spoil = [&](const VmcStep& s) {
      if (s.iteration == 5 || (stuck && s.rejected)) {
        auto p = rbm.parameters().get_host();
        for (auto& x : p) x += 0.7;
        rbm.parameters().set_host(p);
        driver.sampler().refresh();
      }
      return true;
    };
    const auto hist = driver.run(10, nullptr, {spoil});
    ASSERT_EQ(hist.size(), 10u);
    EXPECT_TRUE(hist[6].rejected) << stuck;
    EXPECT_FALSE(hist[7].rejected) << stuck;
    EXPECT_EQ(driver.guard_rejections(), 1) << stuck;
    EXPECT_EQ(driver.guard_false_alarms(), stuck ? 1 : 0);
    EXPECT_EQ(driver.guard_shift_factor(), 10.0);
    EXPECT_DOUBLE_EQ(hist[8].diag_shift, scheduled_diag_shift(o, 8) * 10) << stuck;
  }
}

// A rejection holds the convergence criterion for a whole window: here the criterion alone (any energy and
// variance count as flat) would stop the run as soon as it may, at 20 iterations.
TEST(VmcDriver, AGuardEventHoldsConvergenceForAWindow) {
  const auto m = tfim8();
  spin::SpinHamiltonian H(m);
  for (const bool spoiled : {false, true}) {
    Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.05, 7});
    auto o = quick_options();
    o.guard_sigmas = 8;
    o.guard_start = 10;
    o.diag_shift_steps = 20;
    o.converge_window = 5;
    o.converge_sigmas = 1e9;
    o.converge_variance_drop = 1;
    VmcDriver<double> driver(rbm, H, o);
    auto spoil = [&](const VmcStep& s) {
      if (spoiled && s.iteration == 18) {
        auto p = rbm.parameters().get_host();
        for (auto& x : p) x += 0.7;
        rbm.parameters().set_host(p);
        driver.sampler().refresh();
      }
      return true;
    };
    if (!spoiled) {
      EXPECT_EQ(driver.run(100, nullptr, {spoil}).size(), 20u);
      continue;
    }
    const auto hist = driver.run(21, nullptr, {spoil});
    ASSERT_EQ(hist.size(), 21u);
    ASSERT_EQ(driver.guard_rejections(), 1);
    EXPECT_TRUE(hist[19].rejected);
    const auto dir = attnphys::test::scratch_dir("vmc_guard_window");
    const std::string path = (dir / "ckpt.h5").string();
    driver.save_checkpoint(path);
    EXPECT_EQ(driver.run(100).size(), 4u);  // iterations 21-24: the window after the rejection at 19 ends at 24
    // A run resumed inside the window keeps waiting for its end.
    Rbm<double> b(m.n, RbmOptions{1.0, false, true, 0.05, 99});
    VmcDriver<double> resumed(b, H, o);
    resumed.load_checkpoint(path);
    EXPECT_EQ(resumed.run(100).size(), 4u);
  }
}

// The guard's decision, replayed on two logged runs (energy, error, variance per iteration; guard_sigmas = 8).
TEST(StepGuard, RejectsARiseAndTakesAFailedReEstimateOfTheLowestAsTheNewLowest) {
  // TFIM N = 128, transformer xxs seed 1 (2026-12-06), iterations 150-182: at 175 the chains found configurations
  // of bad local energy (the variance rose 40x); at 182 the run still lay 8.4 standard errors above its lowest (174).
  const std::vector<GuardEstimate> n128 = {
      {-162.4964, 0.02147, 0.1314}, {-162.5133, 0.013, 0.1311}, {-162.5044, 0.01463, 0.138},
      {-162.5184, 0.01696, 0.1356}, {-162.5367, 0.01324, 0.1302}, {-162.5399, 0.01316, 0.1284},
      {-162.5454, 0.01329, 0.1183}, {-162.5405, 0.01277, 0.1095}, {-162.5279, 0.01353, 0.1191},
      {-162.5269, 0.01199, 0.1262}, {-162.5325, 0.01015, 0.1054}, {-162.5439, 0.01059, 0.1083},
      {-162.5394, 0.01332, 0.1063}, {-162.5231, 0.01085, 0.1141}, {-162.5429, 0.01238, 0.1171},
      {-162.5121, 0.01396, 0.1152}, {-162.5504, 0.01257, 0.1193}, {-162.5292, 0.009959, 0.09438},
      {-162.5353, 0.01026, 0.1011}, {-162.2822, 0.3283, 7.483}, {-162.5334, 0.0169, 0.2545},
      {-162.5473, 0.01145, 0.101}, {-162.5478, 0.01036, 0.09967}, {-162.5413, 0.009494, 0.09231},
      {-162.5567, 0.009392, 0.08835}, {-162.3844, 0.2253, 3.571}, {-162.2344, 0.327, 4.838},
      {-162.1422, 0.2024, 3.011}, {-162.0974, 0.2229, 3.197}, {-161.6088, 0.2171, 5.169}, {-161.9552, 0.1254, 2.467},
      {-162.0578, 0.07204, 2.345}, {-161.8935, 0.07844, 2.269}
  };
  // TFIM N = 64, transformer xxs seed 1 without the guard, iterations 255-281: the rise that ended in a NaN at 292.
  const std::vector<GuardEstimate> n64 = {
      {-80.91496, 0.02491, 0.3706}, {-80.93599, 0.02649, 0.3626}, {-80.99216, 0.02764, 0.413},
      {-80.95115, 0.02742, 0.4561}, {-80.97037, 0.01982, 0.2858}, {-80.96414, 0.0261, 0.2711},
      {-80.9692, 0.02217, 0.2599}, {-81.04962, 0.01898, 0.2076}, {-81.04979, 0.01771, 0.1498},
      {-80.971, 0.02424, 0.2863}, {-80.99418, 0.02554, 0.2594}, {-81.02901, 0.01665, 0.1613},
      {-80.98103, 0.01746, 0.2276}, {-80.99883, 0.02472, 0.2898}, {-80.97737, 0.02326, 0.3519},
      {-80.81296, 0.03933, 0.9572}, {-80.61646, 0.04813, 1.372}, {-80.42906, 0.06506, 1.973},
      {-80.32229, 0.05116, 2.069}, {-80.36734, 0.06523, 1.853}, {-80.32919, 0.06687, 1.757},
      {-80.27622, 0.0538, 1.88}, {-80.59568, 0.04428, 1.168}, {-80.51721, 0.04917, 0.9169},
      {-80.75595, 0.04919, 0.7581}, {-80.55684, 0.04529, 1.894}, {-78.79169, 0.1189, 9.55}
  };

  // Replays a run through the guard (active from the first estimate) and returns the first rejected index (-1: none).
  auto replay = [](const std::vector<GuardEstimate>& run, StepGuardState& g) {
    for (std::size_t k = 0; k < run.size(); ++k) {
      bool lowest = false;
      const auto v = g.observe(8, run[k], true, lowest);
      EXPECT_NE(v, GuardVerdict::Rebase) << k;
      if (v == GuardVerdict::Reject) return long(k);
    }
    return -1L;
  };
  StepGuardState g128;
  EXPECT_EQ(replay(n128, g128), 32);                    // iteration 182
  EXPECT_DOUBLE_EQ(g128.best.energy, n128[24].energy);  // iteration 174
  EXPECT_TRUE(g128.last_rejected);
  // The parameters of 174, restored, estimated at 183 with the chains where 175-182 had taken them (the logged
  // estimate): the first guard rejected this and four more like it, and gave up. It becomes the lowest instead.
  {
    StepGuardState g = g128;
    bool lowest = true;
    EXPECT_EQ(g.observe(8, {-154.2209, 2.194, 196.8}, true, lowest), GuardVerdict::Rebase);
    EXPECT_FALSE(lowest);  // its parameters are the lowest's already
    EXPECT_DOUBLE_EQ(g.best.energy, -154.2209);
    EXPECT_FALSE(g.last_rejected);
    EXPECT_EQ(g.observe(8, {-155.0, 2.0, 150.0}, true, lowest), GuardVerdict::Accept);  // the run goes on from there
    EXPECT_TRUE(lowest);
    EXPECT_EQ(g.observe(8, {-100.0, 1.0, 150.0}, true, lowest), GuardVerdict::Reject);  // and is guarded from there
  }

  StepGuardState g64;
  EXPECT_EQ(replay(n64, g64), 16);             // iteration 271, 8.4 standard errors above the lowest
  EXPECT_EQ(g64.best.energy, n64[8].energy);  // iteration 263
  // What the guarded run estimated at 272 (the lowest's parameters restored): close to the lowest, accepted.
  {
    StepGuardState g = g64;
    bool lowest = false;
    EXPECT_EQ(g.observe(8, {-81.05849, 0.01687, 0.1524}, true, lowest), GuardVerdict::Accept);
    EXPECT_TRUE(lowest);
  }
  // A NaN right after a rejection is rejected all the same.
  {
    StepGuardState g = g64;
    bool lowest = false;
    EXPECT_EQ(g.observe(8, {std::nan(""), 0.1, 8.0}, true, lowest), GuardVerdict::Reject);
  }
  // Not active (before guard_start): nothing is rejected, the lowest is still tracked.
  {
    StepGuardState g = g64;
    g.last_rejected = false;
    bool lowest = false;
    EXPECT_EQ(g.observe(8, {-60.0, 1.0, 100.0}, false, lowest), GuardVerdict::Accept);
    EXPECT_EQ(g.observe(8, {-81.2, 0.01, 0.1}, false, lowest), GuardVerdict::Accept);
    EXPECT_TRUE(lowest);
  }
  // 100 times the lowest's variance rejects even an energy below the lowest.
  {
    StepGuardState g;
    bool lowest = false;
    g.observe(8, {-81.0, 0.01, 0.5}, true, lowest);
    EXPECT_EQ(g.observe(8, {-90.0, 5.0, 49.0}, true, lowest), GuardVerdict::Accept);
    EXPECT_EQ(g.observe(8, {-95.0, 9.0, 4901.0}, true, lowest), GuardVerdict::Reject);
  }
}

// A rejection whose re-estimate rebases was a false alarm and does not count toward the guard's limit. Replayed:
// Heisenberg N = 16, transformer xs seed 2 with the guard (2026-12-06), iterations 78 (the lowest before the guard
// starts at 100) to 185. Near its ground state (variance ~0.007) the chains got stuck for 2-9 iterations at a time
// in configurations of huge local energy (variance 1-3), also with the steps all but frozen (shift factor 1e3 from
// 149 on). The run gave up at 185 (its seventh rejection) at a relative error of ~1e-4.
TEST(StepGuard, ARejectionWhoseReEstimateRebasesDoesNotCountTowardTheLimit) {
  std::vector<GuardEstimate> run = {
      {-6.911238, 0.002844, 0.005485}, {-6.905115, 0.002895, 0.007426}, {-6.90777, 0.002087, 0.004297},
      {-6.905542, 0.003241, 0.01075},  {-6.899623, 0.005341, 0.02871},  {-6.810809, 0.1288, 0.8366},
      {-6.751207, 0.2185, 1.59},       {-6.752822, 0.2188, 1.586},      {-6.74823, 0.219, 1.59},
      {-6.734241, 0.1847, 1.45},       {-6.601918, 0.2907, 2.922},      {-6.624335, 0.2756, 2.587},
      {-6.604514, 0.2901, 2.821},      {-6.640951, 0.247, 2.185},       {-6.613413, 0.2818, 2.775},
      {-6.714621, 0.2226, 1.89},       {-6.54578, 0.3073, 3.398},       {-6.672684, 0.2074, 2.145},
      {-6.787843, 0.1679, 0.9801},     {-6.880201, 0.03371, 0.22},      {-6.763197, 0.1931, 1.385},
      {-6.708058, 0.2193, 1.883},      {-6.681655, 0.2283, 2.256},      {-6.592998, 0.3065, 3.111},
      {-6.589742, 0.307, 3.122},       {-6.673587, 0.2288, 2.281},      {-6.909399, 0.002553, 0.005722},
      {-6.909354, 0.002437, 0.006082}, {-6.830581, 0.06247, 0.5956},    {-6.90639, 0.003395, 0.008567},
      {-6.913195, 0.003371, 0.01014},  {-6.904991, 0.002114, 0.004577}, {-6.908158, 0.003501, 0.01255},
      {-6.740864, 0.168, 1.614},       {-6.595054, 0.3023, 3.038},      {-6.592081, 0.3082, 3.144},
      {-6.714237, 0.2085, 1.864},      {-6.888595, 0.02139, 0.1545},    {-6.900332, 0.006297, 0.0406},
      {-6.697428, 0.2109, 1.969},      {-6.593799, 0.3071, 3.124},      {-6.588886, 0.304, 3.06},
      {-6.785955, 0.106, 1.172},       {-6.850747, 0.06395, 0.618},     {-6.860146, 0.05327, 0.4824},
      {-6.756909, 0.2142, 1.524},      {-6.857203, 0.05954, 0.5322},    {-6.90578, 0.007083, 0.03348},
      {-6.909903, 0.002481, 0.005247}, {-6.911948, 0.00335, 0.007222},  {-6.915095, 0.002473, 0.006262},
      {-6.906617, 0.002612, 0.006205}, {-6.910521, 0.002291, 0.005374}, {-6.909457, 0.002971, 0.009039},
      {-6.908931, 0.00251, 0.005575},  {-6.899282, 0.01245, 0.08844},   {-6.904045, 0.002201, 0.00482},
      {-6.909039, 0.002593, 0.006144}, {-6.71995, 0.1586, 1.645},       {-6.585975, 0.3202, 3.364},
      {-6.646037, 0.2475, 2.558},      {-6.750526, 0.22, 1.604},        {-6.759194, 0.2043, 1.491},
      {-6.910682, 0.00254, 0.006608},  {-6.90494, 0.002584, 0.006839},  {-6.901479, 0.007878, 0.03348},
      {-6.912283, 0.002324, 0.00553},  {-6.908858, 0.002466, 0.005199}, {-6.816502, 0.1028, 0.7523},
      {-6.764863, 0.2029, 1.357},      {-6.907608, 0.002372, 0.005764}, {-6.634445, 0.262, 2.503},
      {-6.614464, 0.2713, 2.627},      {-6.635093, 0.2653, 2.385},      {-6.625747, 0.2713, 2.518},
      {-6.624662, 0.2715, 2.472},      {-6.706618, 0.2004, 1.726},      {-6.807765, 0.1203, 0.8856},
      {-6.905266, 0.003249, 0.01034},  {-6.899447, 0.003686, 0.01013},  {-6.905168, 0.003892, 0.01551},
      {-6.913013, 0.002721, 0.007579}, {-6.907414, 0.002826, 0.008178}, {-6.912593, 0.003134, 0.008664},
      {-6.907984, 0.002788, 0.0076},   {-6.911135, 0.003542, 0.008564}, {-6.908639, 0.00334, 0.007899},
      {-6.911213, 0.002965, 0.008439}, {-6.910281, 0.00339, 0.01034},   {-6.909447, 0.002824, 0.008168},
      {-6.907755, 0.003452, 0.01117},  {-6.905791, 0.003343, 0.008353}, {-6.910846, 0.002323, 0.005525},
      {-6.911596, 0.002589, 0.006866}, {-6.910022, 0.00263, 0.007081},  {-6.909844, 0.002388, 0.00584},
      {-6.903317, 0.00698, 0.04989},   {-6.907602, 0.002762, 0.006936}, {-6.90853, 0.002936, 0.00779},
      {-6.90068, 0.005915, 0.03322},   {-6.904731, 0.00331, 0.009381},  {-6.905174, 0.002759, 0.007208},
      {-6.913921, 0.002965, 0.008159}, {-6.902916, 0.006342, 0.03893},  {-6.91182, 0.002637, 0.00712},
      {-6.904944, 0.002711, 0.007527}, {-6.831624, 0.08238, 0.6241}};
  // Iteration 185, from the give-up message (energy -6.74991 +- 0.214006; its variance was not logged: the energy
  // lies within 8 standard errors, so the variance failed the test, i.e. it was above 100x the lowest's 0.0082).
  run.push_back({-6.74991, 0.214006, 1.5});
  ASSERT_EQ(run.size(), 108u);
  StepGuardState g;
  std::vector<long> rejected, rebased;
  for (std::size_t k = 0; k < run.size(); ++k) {
    const long it = 78 + long(k);
    bool lowest = false;
    const auto v = g.observe(8, run[k], it >= 100, lowest);
    if (v == GuardVerdict::Reject) rejected.push_back(it);
    if (v == GuardVerdict::Rebase) rebased.push_back(it);
  }
  EXPECT_EQ(rejected, (std::vector<long>{100, 106, 111, 136, 146, 149, 185}));  // the log's `rejected` column
  EXPECT_EQ(rebased, (std::vector<long>{101, 112, 137, 147, 150}));
  EXPECT_EQ(g.rejections, 7);
  EXPECT_EQ(g.false_alarms, 5);
  EXPECT_EQ(g.counted_rejections(), 2);  // far from kGuardMaxRejections; counting all seven gave up
  EXPECT_GT(g.rejections, kGuardMaxRejections);
}

// The mixed-precision solve (single-precision Gram matrix and Cholesky as the preconditioner of conjugate gradients
// on the double system) gives the double solve's δ, in both forms, with and without counts, on a Jacobian whose
// columns span four decades (the single-precision factor alone is then far from the solution); a singular system
// that the single-precision factor cannot solve falls back to the double path (and its pseudo-inverse).
TEST(StochasticReconfiguration, MixedPrecisionSolveMatchesTheDoubleSolve) {
  for (auto [M, P] : std::vector<std::pair<long, long>>{{300, 700}, {400, 300}}) {
    View2<double> ore("ore", M, P), oim("oim", M, P);
    View1<double> ere("ere", M), eim("eim", M), d1("d1", P), d2("d2", P), counts("counts", M);
    fill_normal(ore, 1, 21);
    fill_normal(oim, 1, 22);
    fill_normal(ere, 1, 23);
    fill_normal(eim, 1, 24);
    {
      auto a = Kokkos::create_mirror_view(ore), b = Kokkos::create_mirror_view(oim);
      auto c = Kokkos::create_mirror_view(counts);
      Kokkos::deep_copy(a, ore);
      Kokkos::deep_copy(b, oim);
      for (long m = 0; m < M; ++m) {
        c(m) = double(1 + m % 3);
        for (long k = 0; k < P; ++k) {
          const double s = std::pow(10.0, -4.0 * double(k) / double(P));
          a(m, k) *= s;
          b(m, k) *= s;
        }
      }
      Kokkos::deep_copy(ore, a);
      Kokkos::deep_copy(oim, b);
      Kokkos::deep_copy(counts, c);
    }
    for (const bool weighted : {false, true}) {
      const View1<const double> w = weighted ? View1<const double>(counts) : View1<const double>();
      for (double shift : {1e-2, 1e-4}) {
        const auto id = sr_direction<double>(ore, oim, ere, eim, shift, SrForm::Auto, 1e-12, d1, View1<double>(), w,
                                             SrPrecision::Double);
        const auto im = sr_direction<double>(ore, oim, ere, eim, shift, SrForm::Auto, 1e-12, d2, View1<double>(), w,
                                             SrPrecision::Mixed);
        EXPECT_EQ(id.form, im.form);
        EXPECT_EQ(id.refinements, 0);
        EXPECT_GE(im.refinements, 2) << "the single-precision factor alone should not reach 1e-10 here";
        EXPECT_LE(im.residual, 1e-10);
        EXPECT_FALSE(im.used_pinv);
        auto h1 = to_host(d1), h2 = to_host(d2);
        double diff = 0, norm = 0;
        for (long k = 0; k < P; ++k) {
          diff += (h1(k) - h2(k)) * (h1(k) - h2(k));
          norm += h1(k) * h1(k);
        }
        EXPECT_LE(std::sqrt(diff), 1e-8 * std::sqrt(norm)) << M << "x" << P << " shift " << shift << " counts "
                                                           << weighted;
      }
    }
  }
  // No shift and fewer samples than parameters in the P×P form: S is singular, the single-precision Cholesky fails or
  // conjugate gradients cannot reach the tolerance, and the double path's pseudo-inverse gives the answer.
  const long M = 10, P = 40;
  View2<double> ore("ore", M, P), oim("oim", M, P);
  View1<double> ere("ere", M), eim("eim", M), d1("d1", P), d2("d2", P);
  fill_normal(ore, 1, 31);
  fill_normal(oim, 1, 32);
  fill_normal(ere, 1, 33);
  fill_normal(eim, 1, 34);
  const auto id = sr_direction<double>(ore, oim, ere, eim, 0.0, SrForm::Pxp, 1e-12, d1, View1<double>(),
                                       View1<const double>(), SrPrecision::Double);
  const auto im = sr_direction<double>(ore, oim, ere, eim, 0.0, SrForm::Pxp, 1e-12, d2, View1<double>(),
                                       View1<const double>(), SrPrecision::Mixed);
  EXPECT_TRUE(id.used_pinv);
  EXPECT_EQ(im.refinements, 0);
  EXPECT_TRUE(im.used_pinv);
  auto h1 = to_host(d1), h2 = to_host(d2);
  for (long k = 0; k < P; ++k) EXPECT_DOUBLE_EQ(h1(k), h2(k));
}

// A positive definite system so ill-conditioned (five large columns, the rest spanning four decades, λ = 1e-6) that
// the minSR Cholesky solution leaves a residual of ~3e-6, above the 1e-6 at which the pseudo-inverse used to take
// over: conjugate gradients preconditioned by the factor polish it and it is kept, and δ solves the P×P normal
// equations (XᵀX + λ) δ = Xᵀε to 2e-5 (measured 1.2e-5; the pseudo-inverse's δ: 2.4e-5), in both forms.
TEST(StochasticReconfiguration, IllConditionedCholeskySolutionIsPolishedNotPseudoInverted) {
  const long M = 200, P = 600;
  View2<double> ore("ore", M, P), oim("oim", M, P);
  View1<double> ere("ere", M), eim("eim", M), d("d", P);
  fill_normal(ore, 1, 41);
  fill_normal(oim, 1, 42);
  fill_normal(ere, 1, 43);
  fill_normal(eim, 1, 44);
  const double decades = 4, shift = 1e-6;
  {
    auto a = Kokkos::create_mirror_view(ore), b = Kokkos::create_mirror_view(oim);
    Kokkos::deep_copy(a, ore);
    Kokkos::deep_copy(b, oim);
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < P; ++k) {
        const double s = std::pow(10.0, -decades * double(k) / double(P)) * (k < 5 ? 300.0 : 1.0);
        a(m, k) *= s;
        b(m, k) *= s;
      }
    Kokkos::deep_copy(ore, a);
    Kokkos::deep_copy(oim, b);
  }
  Eigen::MatrixXcd O(M, P);
  O.real() = host_matrix(ore);
  O.imag() = host_matrix(oim);
  Eigen::VectorXcd E(M);
  {
    auto he = to_host(ere), hi = to_host(eim);
    for (long m = 0; m < M; ++m) E[m] = {he(m), hi(m)};
  }
  O.rowwise() -= O.colwise().mean();
  E.array() -= E.mean();
  const Eigen::MatrixXd S = (O.adjoint() * O).real() / double(M);
  const Eigen::VectorXd F = (O.adjoint() * E).real() / double(M);
  for (SrForm form : {SrForm::Minsr, SrForm::Pxp}) {
    const auto info = sr_direction<double>(ore, oim, ere, eim, shift, form, 1e-12, d, View1<double>(),
                                           View1<const double>(), SrPrecision::Double);
    Eigen::VectorXd delta(P);
    auto h = to_host(d);
    for (long k = 0; k < P; ++k) delta[k] = h(k);
    const double res = (S * delta + shift * delta - F).norm() / F.norm();
    EXPECT_FALSE(info.used_pinv) << enum_name(form);
    EXPECT_LE(res, 2e-5) << enum_name(form);
  }
}
