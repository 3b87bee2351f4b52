// VMC progress warnings (vmc/monitor.hpp, issue 22 item 4): above a product state's energy, or no improvement for
// K iterations while the state is far from an eigenstate; each once, with what to change.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnphys/solvers/vmc/driver.hpp"
#include "attnphys/solvers/vmc/monitor.hpp"
#include "attnphys/solvers/vmc/rbm.hpp"

using namespace attnphys;
using namespace attnphys::vmc;

namespace {
spin::ChainModel chain(const std::string& model, int n, double h = 1.0) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model), m.n = n, m.bc = spin::Boundary::Open, m.h = h;
  return m;
}
VmcStep step(long it, double e, double err, double v_score) {
  VmcStep s;
  s.iteration = it, s.energy = e, s.error = err, s.v_score = v_score;
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
