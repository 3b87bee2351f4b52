// The DMRG job (DmrgRunConfig / run_dmrg / to_json) and the U(1) tools behind the Python API: random states in a
// charge sector, right-canonical form by block LQ, the U(1) form of a dense MPS, operator-matrix observables.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>

#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/mps/run.hpp"
#include "attnphys/solvers/mps/u1.hpp"

namespace attnphys::mps {
namespace {

double ed_energy(const spin::ChainModel& m) {
  ed::EdOptions o;
  o.tol = 1e-13;
  return ed::exact_ground_state(m, o).energies.at(0);
}

DmrgRunConfig heisenberg_job(int n, int chi) {
  DmrgRunConfig cfg;
  cfg.model.model = spin::ModelKind::Heisenberg;
  cfg.model.n = n;
  cfg.model.bc = spin::Boundary::Open;
  cfg.chi = chi;
  return cfg;
}

TEST(DmrgRun, AutoPicksU1ForSzChainsAndDenseForTheTfimAndBothReachEd) {
  DmrgRunConfig cfg = heisenberg_job(12, 64);
  const DmrgRunResult u = run_dmrg(cfg);
  EXPECT_EQ(u.symmetry, Symmetry::U1);
  const double exact = ed_energy(cfg.model);
  EXPECT_NEAR(u.energy, exact, 1e-9);
  ASSERT_TRUE(u.variance.has_value());
  EXPECT_LT(*u.variance, 1e-9);
  EXPECT_TRUE(u.run.converged) << u.run.convergence_reason;
  ASSERT_EQ(int(u.magnetization.size()), 12);
  for (double m : u.magnetization) EXPECT_NEAR(m, 0.0, 1e-7);
  ASSERT_EQ(int(u.bond_dimensions.size()), 11);
  long entries = 0;
  for (int i = 0; i < 12; ++i)
    entries += 2L * (i == 0 ? 1 : u.bond_dimensions[i - 1]) * (i == 11 ? 1 : u.bond_dimensions[i]);
  EXPECT_EQ(u.n_parameters, entries);

  cfg.symmetry = Symmetry::None;
  const DmrgRunResult d = run_dmrg(cfg);
  EXPECT_EQ(d.symmetry, Symmetry::None);
  EXPECT_NEAR(d.energy, u.energy, 1e-10);

  DmrgRunConfig t;
  t.model.model = spin::ModelKind::Tfim;
  t.model.n = 12;
  t.chi = 32;
  const DmrgRunResult tf = run_dmrg(t);
  EXPECT_EQ(tf.symmetry, Symmetry::None);
  EXPECT_NEAR(tf.energy, 1.0 - 1.0 / std::sin(M_PI / (4 * 12 + 2)), 1e-9);  // critical TFIM, free fermions
  t.symmetry = Symmetry::U1;
  try {
    run_dmrg(t);
    FAIL() << "u1 on the TFIM must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not conserve Sz"), std::string::npos) << e.what();
  }
}

TEST(DmrgRun, ConfigResolvesTheFileThenOverridesAndValidates) {
  OptionSet set;
  DmrgRunConfig cfg;
  cfg.declare(set);
  set.load_string("[model]\nmodel = \"xxz\"\ndelta = 0.5\n[dmrg]\nchi = 20\nsymmetry = \"none\"\n");
  set.set("dmrg.chi=50");
  cfg.resolve();
  EXPECT_EQ(cfg.chi, 50);
  EXPECT_EQ(cfg.symmetry, Symmetry::None);
  EXPECT_EQ(cfg.model.model, spin::ModelKind::Xxz);
  EXPECT_DOUBLE_EQ(cfg.model.delta, 0.5);
  DmrgRunConfig bad = heisenberg_job(8, 0);
  EXPECT_THROW(bad.validate(), Error);
  bad.chi = 4;
  bad.cutoff = std::nan("");
  EXPECT_THROW(bad.validate(), Error);
}

TEST(DmrgRun, ToJsonCarriesEveryField) {
  DmrgRunConfig cfg = heisenberg_job(8, 16);
  cfg.variance = false;
  const std::string j = run_dmrg(cfg).to_json().dump();
  for (const char* key : {"\"model\": \"heisenberg n=8 open J=1\"", "\"variance\": null", "\"symmetry\": \"u1\"",
                          "\"converged\": true", "\"convergence_reason\": null", "\"entropies\": [",
                          "\"magnetization\": [", "\"sweep_energies\": [", "\"bond_dimensions\": [", "\"n_parameters\": "})
    EXPECT_NE(j.find(key), std::string::npos) << key << " missing in " << j;
}

// Every site right of the first is right-orthonormal, the norm is 1 and the charge is the one asked for.
void expect_right_canonical(const QMps& q, double tol = 1e-12) {
  const Mps d = q.to_dense_mps();
  for (int i = 1; i < d.size(); ++i) EXPECT_LT(right_orthonormality_error(d[i]), tol) << "site " << i;
  EXPECT_NEAR(d[0].data.norm(), 1.0, tol);
}

TEST(DmrgRun, RandomU1StatesAreRightCanonicalInTheirSector) {
  for (int n : {1, 2, 5, 8, 13})
    for (int chi : {1, 3, 16})
      for (int two_sz : {n % 2, n % 2 + 2, -n}) {
        if (std::abs(two_sz) > n) continue;
        const QMps q = random_qmps(n, chi, two_sz, 7);
        ASSERT_EQ(q.size(), n);
        EXPECT_EQ(q.total_charge(), two_sz);
        EXPECT_LE(q.max_bond_dimension(), chi);
        expect_right_canonical(q);
        const Eigen::VectorXd v = q.to_dense_mps().to_dense();
        EXPECT_NEAR(v.norm(), 1.0, 1e-12);
        // Only configurations of total 2Sz = two_sz carry amplitude.
        for (long x = 0; x < v.size(); ++x) {
          const int ups = n - __builtin_popcountl(x);
          if (2 * ups - n != two_sz) EXPECT_EQ(v(x), 0.0);
        }
      }
  EXPECT_THROW(random_qmps(6, 4, 1, 1), Error);  // parity
  EXPECT_THROW(random_qmps(6, 0, 0, 1), Error);
  // Deterministic in the seed.
  EXPECT_EQ(random_qmps(10, 8, 0, 3).to_dense_mps().to_dense(), random_qmps(10, 8, 0, 3).to_dense_mps().to_dense());
}

TEST(DmrgRun, RightCanonicalizeKeepsTheState) {
  QMps q = random_qmps(9, 6, 1, 11);
  // Scale and mix the gauge: multiply one site, then canonicalise again; the amplitudes stay (up to the norm).
  for (double& x : q[4].data) x *= 3.0;
  const Eigen::VectorXd before = q.to_dense_mps().to_dense();
  right_canonicalize(q);
  expect_right_canonical(q);
  const Eigen::VectorXd after = q.to_dense_mps().to_dense();
  EXPECT_NEAR((after - before / before.norm()).norm(), 0.0, 1e-12);
}

TEST(DmrgRun, U1FormOfADenseMps) {
  const QMps q = random_qmps(8, 5, 0, 2);
  const Mps d = q.to_dense_mps();
  std::string why;
  const auto back = qmps_from_dense(d, &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(back->bond_dimensions(), q.bond_dimensions());
  const Mps d2 = back->to_dense_mps();
  for (int i = 0; i < d.size(); ++i) EXPECT_EQ(d2[i].data, d[i].data) << "site " << i;
  // A dense state with no definite charges is refused with the reason.
  EXPECT_FALSE(qmps_from_dense(Mps::random(6, 2, 4, 1), &why).has_value());
  EXPECT_NE(why.find("mixes the charges"), std::string::npos) << why;
  // The dense DMRG from Neel keeps the charges exact: its state converts too.
  DmrgRunConfig cfg = heisenberg_job(10, 16);
  cfg.symmetry = Symmetry::None;
  Mps psi = Mps::neel(10);
  dmrg(chain_mpo(cfg.model), psi, default_sweeps(16, 6, 1e-12, 1e-5));
  const auto qd = qmps_from_dense(psi, &why);
  ASSERT_TRUE(qd.has_value()) << why;
  EXPECT_NEAR((qd->to_dense_mps().to_dense() - psi.to_dense()).norm(), 0.0, 0.0);
}

TEST(DmrgRun, OperatorMatrixObservablesEqualTheNamedOnes) {
  const QMps q = random_qmps(7, 6, 1, 5);
  const Mps psi = q.to_dense_mps();
  const Eigen::MatrixXd sz = local_operator("Sz"), sp = local_operator("S+"), sm = local_operator("S-");
  const std::vector<double> a = local_expectations(psi, sz), b = local_expectations(psi, "Sz");
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(a[i], b[i], 1e-13);
  const Eigen::MatrixXd c = correlation_matrix(psi, sp, sm);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 7; ++j) {
      if (i == j) {
        EXPECT_NEAR(c(i, i), local_expectations(psi, Eigen::MatrixXd(sp * sm))[i], 1e-13);
      } else {
        EXPECT_NEAR(c(i, j), correlation(psi, "S+", i, "S-", j), 1e-13) << i << "," << j;
        EXPECT_NEAR(c(i, j), correlation(q, "S+", i, "S-", j), 1e-13) << i << "," << j;
      }
    }
  // Sum of the diagonal of <Sz_i Sz_j> over all i, j is <(Sz_total)^2> = (1/2)^2 in the 2Sz = 1 sector.
  EXPECT_NEAR(correlation_matrix(psi, sz, sz).sum(), 0.25, 1e-12);
}

// The same job gives the same bits whatever else the process has allocated (buffers of the sweep are aligned: with
// heap-aligned ones the rounding followed the heap layout, e.g. the length of the output path of attnphys dmrg).
TEST(DmrgRun, BitIdenticalWhateverTheHeapLayout) {
  const Mpo h = chain_mpo(heisenberg_job(24, 24).model);
  const Sweeps sweeps = default_sweeps(24, 8, 1e-12, 1e-5);
  std::vector<Mps> states;
  std::vector<std::vector<char>> pads;
  for (int run = 0; run < 4; ++run) {
    pads.emplace_back(std::size_t(8 * run + 13));  // shift what malloc hands out next
    QMps q = QMps::neel(24);
    dmrg(h, q, sweeps);
    states.push_back(q.to_dense_mps());
    Mps d = Mps::neel(24);
    dmrg(h, d, sweeps);
    states.push_back(d);
  }
  for (std::size_t k = 2; k < states.size(); ++k)
    for (int i = 0; i < 24; ++i) ASSERT_EQ(states[k][i].data, states[k % 2][i].data) << "run " << k / 2 << " site " << i;
}

}  // namespace
}  // namespace attnphys::mps
