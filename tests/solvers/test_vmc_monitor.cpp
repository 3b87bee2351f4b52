// VMC progress warnings (vmc/monitor.hpp, issue 22 item 4): above a product state's energy, or no improvement for
// K iterations while the state is far from an eigenstate; each once, with what to change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/monitor.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"
#include "attnphys/solvers/vmc/run.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
spin::ChainModel chain(const std::string& model, int n, double h = 1.0) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model), m.n = n, m.bc = spin::Boundary::Open, m.h = h;
  return m;
}
VmcStep step(long it, double e, double err, double v_score, double acceptance = 0, long sweep = 0) {
  VmcStep s;
  s.iteration = it, s.energy = e, s.error = err, s.v_score = v_score, s.acceptance = acceptance, s.sweep = sweep;
  return s;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(VmcMonitor, ProductBoundIsTheBestSimpleProductStateOfTheSector) {
  // Heisenberg, 8 open sites, H = J sum S.S: Neel has 7 bonds of -1/4.
  const auto b = product_state_bound(spin::SpinHamiltonian(chain("heisenberg", 8)), true, 0);
  EXPECT_DOUBLE_EQ(b.energy, -1.75);
  EXPECT_EQ(b.state, "Neel");
  // TFIM -J sum ZZ - h sum X: the ferromagnet (7 bonds of -1) outside a fixed sector, the domain wall (-5) inside.
  spin::SpinHamiltonian t(chain("tfim", 8));
  EXPECT_DOUBLE_EQ(product_state_bound(t).energy, -7.0);
  EXPECT_EQ(product_state_bound(t).state, "all up");
  EXPECT_DOUBLE_EQ(product_state_bound(t, true, 0).energy, -5.0);
  EXPECT_EQ(product_state_bound(t, true, 0).state, "domain wall");
  // Odd chain, 2Sz = 1: Neel (up on the 5 even sites of 9) is in the sector.
  EXPECT_DOUBLE_EQ(product_state_bound(spin::SpinHamiltonian(chain("heisenberg", 9)), true, 1).energy, -2.0);
}

TEST(VmcMonitor, WarnsOnceAboveTheBoundAndOnceOnAPlateau) {
  ProgressMonitor m(ProductBound{-1.75, "Neel"}, ProgressWarningOptions{20, 10, 1e-2});
  std::vector<std::string> all;
  for (long it = 0; it < 60; ++it)
    for (auto& w : m.observe(step(it, 0.3, 0.01, 0.5))) all.push_back(std::to_string(it) + ": " + w);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(contains(all[0], "10: VMC energy 0.3 +- 0.01 at iteration 10 is above that of the product state "
                               "'Neel' (-1.75)"))
      << all[0];
  EXPECT_TRUE(contains(all[0], "ansatz.marshall_sign=on")) << all[0];
  EXPECT_TRUE(contains(all[1], "20: VMC energy has not improved for 20 iterations (best 0.3 at iteration 0) "
                               "while its V-score"))
      << all[1];
  EXPECT_TRUE(contains(all[1], "Lower vmc.lr or raise vmc.diag_shift")) << all[1];
}

TEST(VmcMonitor, QuietWhileImprovingBelowTheBoundOrConverged) {
  ProgressMonitor m(ProductBound{-1.75, "Neel"}, ProgressWarningOptions{20, 10, 1e-2});
  for (long it = 0; it < 100; ++it)  // steadily down from below the bound
    EXPECT_TRUE(m.observe(step(it, -2.0 - 0.01 * it, 0.001, 0.1)).empty()) << it;
  ProgressMonitor c(ProductBound{-1.75, "Neel"}, ProgressWarningOptions{20, 10, 1e-2});
  for (long it = 0; it < 100; ++it)  // converged: flat within the noise, tiny V-score
    EXPECT_TRUE(c.observe(step(it, -3.37 + (it % 2 ? 1e-4 : -1e-4), 1e-3, 1e-5)).empty()) << it;
  // Above the bound but within two error bars of it: not a warning.
  ProgressMonitor e(ProductBound{-1.75, "Neel"}, ProgressWarningOptions{0, 0, 1e-2});
  EXPECT_TRUE(e.observe(step(0, -1.70, 0.05, 0.5)).empty());
}

TEST(VmcMonitor, WarnsOnceWhenTheMetropolisChainsFreeze) {
  ProgressMonitor m(ProductBound{-1.75, "Neel"}, ProgressWarningOptions{0, 0, 1e-2, 3, 1e-3});
  std::vector<std::string> all;
  auto feed = [&](long it, double acceptance, long sweep = 1) {
    for (auto& w : m.observe(step(it, -3.0, 0.01, 0.1, acceptance, sweep)))
      all.push_back(std::to_string(it) + ": " + w);
  };
  for (long it = 0; it < 10; ++it) feed(it, 0.1);
  feed(10, 0), feed(11, 5e-4), feed(12, 0.02);       // two frozen iterations, then a move again: not yet
  for (long it = 13; it < 16; ++it) feed(it, 0, 0);  // exact sampling (sweep 0) has no chains to freeze
  EXPECT_TRUE(all.empty()) << all[0];
  for (long it = 16; it < 30; ++it) feed(it, 0);  // frozen from 16 on: warned at the third, once
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(contains(all[0],
                       "18: the Metropolis chains have accepted no move for 3 iterations (acceptance 0 at "
                       "iteration 18)"))
      << all[0];
  EXPECT_TRUE(contains(all[0], "can fall below the ground state's")) << all[0];
  EXPECT_TRUE(contains(all[0], "vmc.guard_sigmas")) << all[0];
}

TEST(VmcMonitor, TheFrozenHeisenbergRunOfTheStudyIsCaughtThreeIterationsIn) {
  // Issue 20's Heisenberg N = 32 xxxs seed 2 (its log, iterations 296-305, sweep 32): one step blew the
  // wavefunction up (E = 1.8e57 at iteration 299), then every chain stopped in the configuration it had reached and
  // the run "converged" 54 iterations later at -18.02 +- 0.32, below the exact -13.997. The warning comes at 302.
  const double energy[] = {-7.477339489, -7.808185039, -11.87155527, 1.790764957e+57, -18.015625,
                           -18.015625,   -18.015625,   -18.015625,   -18.015625,      -18.015625};
  const double error[] = {0.1138, 0.0905, 1.204, 1.671e+57, 0.3148, 0.3148, 0.3148, 0.3148, 0.3148, 0.3148};
  const double acceptance[] = {0.8406, 0.8830, 0.5128, 0.0336, 0, 0, 0, 0, 0, 0};
  ProgressMonitor m(ProductBound{-7.75, "Neel"});  // (N - 1) / 4 below zero: Neel on 32 open sites
  std::vector<std::string> all;
  for (int k = 0; k < 10; ++k)
    for (auto& w : m.observe(step(296 + k, energy[k], error[k], 0.3, acceptance[k], 32))) all.push_back(w);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(contains(all[0], "for 3 iterations (acceptance 0 at iteration 302)")) << all[0];
}

TEST(VmcMonitor, AFrozenRunSaysSoInItsResultAndOfItsFinalEstimate) {
  // A real RBM whose weights are huge (N(0, 30^2)) has |psi|^2 peaked so sharply that every Metropolis chain climbs
  // to a local maximum and stays: acceptance 0. run_vmc's result (the CLI's JSON "warnings", Python's
  // result["warnings"]) carries the driver's warning and the final estimate's.
  VmcRunConfig cfg;
  OptionSet set;
  cfg.declare(set);
  set.set_all({"model.model=tfim", "model.n=8", "ansatz.kind=rbm", "rbm.complex=false", "rbm.init_std=30",
               "vmc.n_iter=8", "vmc.lr=1e-9", "sampler.n_samples=256", "run.final_samples=1024", "run.reference=none"});
  cfg.apply_defaults(set);
  const auto r = run_vmc(cfg, nullptr);
  ASSERT_EQ(r.history.size(), 8u);
  EXPECT_LE(r.history.back().acceptance, 1e-3);
  EXPECT_LE(r.acceptance, 1e-3);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_TRUE(contains(r.warnings[0], "the Metropolis chains have accepted")) << r.warnings[0];
  EXPECT_TRUE(contains(r.warnings[1], "the final estimate's Metropolis chains accepted")) << r.warnings[1];
  EXPECT_TRUE(contains(r.warnings[1], "not a variational estimate")) << r.warnings[1];
  // The same chain with a small initialisation samples freely: no such warning.
  set.set("rbm.init_std=0.01");
  cfg.apply_defaults(set);
  const auto ok = run_vmc(cfg, nullptr);
  EXPECT_GT(ok.acceptance, 0.05);
  for (const auto& w : ok.warnings) EXPECT_FALSE(contains(w, "Metropolis chains")) << w;
}

TEST(VmcMonitor, TheDriverRaisesTheWarningOfTheStuckRbmOnTheHeisenbergChain) {
  // The case: an RBM on the Heisenberg chain without the Marshall sign sits at positive energies. With a
  // negligible step it stays at the nearly uniform state, an eigenstate of the ferromagnetic multiplet (E = +1.25,
  // zero variance), far above the Neel state's -1.25: the bound warns (once); the plateau warning stays quiet
  // because the V-score is tiny (it is meant for states far from any eigenstate).
  const auto m = chain("heisenberg", 6);
  spin::SpinHamiltonian H(m);
  VmcOptions o;
  o.sampler.n_chains = 16;
  o.sampler.n_samples = 128;
  o.sampler.n_discard = 2;
  o.lr = 1e-9;
  o.plateau_window = 5;
  Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.01, 3});
  VmcDriver<double> d(rbm, H, o);
  const auto hist = d.run(30);
  EXPECT_GT(hist.back().energy, 1.0);
  EXPECT_LT(hist.back().v_score, 1e-2);
  ASSERT_EQ(d.warnings().size(), 1u);
  EXPECT_TRUE(contains(d.warnings()[0], "at iteration 10 is above that of the product state 'Neel' (-1.25)"))
      << d.warnings()[0];
}

// The convergence criterion of vmc.converge_window (issue 20: the study trains every ansatz to a plateau).
TEST(VmcConvergence, PlateauNeedsFlatEnergyAndVarianceOverTwoWindows) {
  ConvergenceCriterion c;
  c.window = 10;
  c.sigmas = 2;
  c.variance_drop = 0.1;
  std::vector<double> e, v;
  auto push = [&](double ei, double vi) { e.push_back(ei), v.push_back(vi); };
  // Flat energy with alternating noise of 1e-3 and a flat variance: converged once 2 W = 20 iterations exist.
  for (int i = 0; i < 19; ++i) push(-5.0 + (i % 2 ? 1e-3 : -1e-3), 0.1);
  EXPECT_FALSE(plateaued(e, v, c));
  push(-5.0 + 1e-3, 0.1);
  EXPECT_TRUE(plateaued(e, v, c));
  // Not before `start` (the end of the diagonal-shift decay).
  c.start = 21;
  EXPECT_FALSE(plateaued(e, v, c));
  c.start = 0;
  // A drop of the last window's mean by 0.01, 10 standard errors (each window's error is 1e-3 / sqrt(10) ≈ 3e-4):
  // still improving.
  std::vector<double> e2(e.begin(), e.begin() + 10), v2(v.begin(), v.begin() + 10);
  for (int i = 0; i < 10; ++i) e2.push_back(e[i] - 0.01), v2.push_back(0.1);
  EXPECT_FALSE(plateaued(e2, v2, c));
  // The same drop within the noise of a noisier trace (scatter 0.05): a plateau.
  std::vector<double> e3;
  for (int i = 0; i < 20; ++i) e3.push_back(-5.0 + (i % 2 ? 0.05 : -0.05) - (i >= 10 ? 0.01 : 0.0));
  EXPECT_TRUE(plateaued(e3, v2, c));
  // A rise of the energy is no improvement: a plateau.
  std::vector<double> e4(e.begin(), e.begin() + 10);
  for (int i = 0; i < 10; ++i) e4.push_back(e[i] + 0.01);
  EXPECT_TRUE(plateaued(e4, v2, c));
  // Flat energy but a variance that fell by 20 % over the last window: not yet.
  std::vector<double> v5(10, 0.1);
  for (int i = 0; i < 10; ++i) v5.push_back(0.08);
  EXPECT_FALSE(plateaued(e, v5, c));
  c.variance_drop = 0.25;  // ... unless a 20 % fall counts as flat
  EXPECT_TRUE(plateaued(e, v5, c));
  // Off, and traces of unequal length.
  c.window = 0;
  EXPECT_FALSE(plateaued(e, v, c));
  c.window = 10;
  EXPECT_THROW(plateaued(e, std::vector<double>(3, 0.1), c), Error);
  // Iterations rejected by the step guard are NaN in the trace and left out: the decision is that of the trace
  // without them. A far-off energy in their place would have hidden the drop of e2 ...
  std::vector<double> e6 = e2, v6 = v2;
  EXPECT_FALSE(plateaued(e6, v6, c));
  e6[15] = e6[17] = std::nan(""), v6[15] = v6[17] = std::nan("");
  EXPECT_FALSE(plateaued(e6, v6, c));
  e6[15] = e6[17] = 1e3, v6[15] = v6[17] = 0.1;
  EXPECT_TRUE(plateaued(e6, v6, c));
  // ... and a flat trace stays flat with NaN holes; a window with more than half of it rejected decides nothing.
  std::vector<double> e7 = e, v7 = v;
  for (int i : {3, 12, 19}) e7[i] = v7[i] = std::nan("");
  EXPECT_TRUE(plateaued(e7, v7, c));
  for (int i : {10, 11, 13, 14, 15}) e7[i] = v7[i] = std::nan("");
  EXPECT_FALSE(plateaued(e7, v7, c));
}

// vmc.converge_two_sided: an excursion (energy or variance up) is no plateau; the one-sided default reads it as one.
TEST(VmcConvergence, TwoSidedPlateauRefusesARiseOfEnergyOrVariance) {
  ConvergenceCriterion c;
  c.window = 10;
  std::vector<double> e, v;
  for (int i = 0; i < 20; ++i) e.push_back(-5.0 + (i % 2 ? 1e-3 : -1e-3)), v.push_back(0.1);
  for (bool two : {false, true}) {
    c.two_sided = two;
    EXPECT_TRUE(plateaued(e, v, c)) << two;  // flat: a plateau either way
    // The last window's energy 0.01 (about 30 standard errors) above the one before.
    std::vector<double> up = e;
    for (int i = 10; i < 20; ++i) up[i] += 0.01;
    EXPECT_EQ(plateaued(up, v, c), !two) << two;
    // ... or below it: still improving, for both.
    std::vector<double> down = e;
    for (int i = 10; i < 20; ++i) down[i] -= 0.01;
    EXPECT_FALSE(plateaued(down, v, c)) << two;
    // A rise within the noise is flat for both (scatter 0.05, each window's error ~0.016; rise 0.01).
    std::vector<double> noisy;
    for (int i = 0; i < 20; ++i) noisy.push_back(-5.0 + (i % 2 ? 0.05 : -0.05) + (i >= 10 ? 0.01 : 0.0));
    EXPECT_TRUE(plateaued(noisy, v, c)) << two;
    // The median variance up 50 % (beyond 1 / (1 - 0.1)) and up 5 % (within it).
    std::vector<double> vup = v, vsmall = v;
    for (int i = 10; i < 20; ++i) vup[i] = 0.15, vsmall[i] = 0.105;
    EXPECT_EQ(plateaued(e, vup, c), !two) << two;
    EXPECT_TRUE(plateaued(e, vsmall, c)) << two;
    // variance_drop = 1 puts no bound on the variance, either way.
    c.variance_drop = 1.0;
    EXPECT_TRUE(plateaued(e, vup, c)) << two;
    c.variance_drop = 0.1;
  }
}

TEST(VmcConvergence, TheDriverStopsAtThePlateauAndAResumedConvergedRunTakesNoStep) {
  // TFIM on 6 open sites with an RBM: SR reaches its plateau well inside 400 iterations; the run stops there, the
  // checkpoint keeps the trace, and a driver resumed from it is converged at once and takes no further step.
  const auto m = chain("tfim", 6);
  spin::SpinHamiltonian H(m);
  VmcOptions o;
  o.sampler.n_chains = 16;
  o.sampler.n_samples = 256;
  o.sampler.n_discard = 4;
  o.lr = 0.05;
  o.diag_shift_steps = 20;
  o.converge_window = 15;
  o.plateau_window = 0;
  const std::string ck = ::testing::TempDir() + "attnphys_converge.h5";
  o.checkpoint_path = ck;
  Rbm<double> rbm(m.n, RbmOptions{1.0, false, true, 0.01, 3});
  VmcDriver<double> d(rbm, H, o);
  const auto hist = d.run(400);
  ASSERT_TRUE(d.converged());
  EXPECT_LT(hist.size(), 400u);
  EXPECT_GE(long(hist.size()), 30);  // not before 2 W = 30 iterations
  EXPECT_EQ(long(d.energy_trace().size()), d.iteration());
  // Converged means close to the ground state here: within 1 % of the exact energy (free fermions).
  const double exact = *ed::reference_energy(m);
  double mean = 0;
  for (long i = d.iteration() - 15; i < d.iteration(); ++i) mean += d.energy_trace()[i] / 15.0;
  EXPECT_LT(mean, 0.99 * exact);
  // One step earlier the trace was not yet converged (the run stopped at the first converged iteration).
  std::vector<double> e(d.energy_trace().begin(), d.energy_trace().end() - 1),
      v(d.variance_trace().begin(), d.variance_trace().end() - 1);
  EXPECT_FALSE(plateaued(e, v, d.convergence_criterion()));

  Rbm<double> rbm2(m.n, RbmOptions{1.0, false, true, 0.01, 99});
  VmcDriver<double> r(rbm2, H, o);
  r.load_checkpoint(ck);
  EXPECT_EQ(r.energy_trace(), d.energy_trace());
  EXPECT_EQ(r.variance_trace(), d.variance_trace());
  EXPECT_TRUE(r.converged());
  EXPECT_TRUE(r.run(50).empty());
  EXPECT_EQ(r.iteration(), d.iteration());
  std::remove(ck.c_str());
}
