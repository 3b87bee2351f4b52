// Lanczos against dense eigensolvers, and ED against closed-form and Bethe-ansatz energies of the chain models.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/random.hpp"
#include "attnphys/solvers/ed/exact.hpp"

using namespace attnphys;
using namespace attnphys::ed;

namespace {
spin::ChainModel chain(const char* model, int n, const char* bc, double J = 1, double h = 1, double delta = 1,
                       double j2 = 0.5) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model);
  m.n = n;
  m.bc = spin::parse_boundary(bc);
  m.J = J;
  m.h = h;
  m.delta = delta;
  m.j2 = j2;
  return m;
}

Eigen::VectorXd dense_spectrum(const spin::ChainModel& m) {
  const auto space = ed_space(m);
  spin::SpinHamiltonian H(m);
  const auto d = H.dense(space);
  const long n = space.size();
  Eigen::MatrixXd A = Eigen::Map<const Eigen::MatrixXd>(d.data(), n, n);
  return Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(A).eigenvalues();
}
}  // namespace

TEST(Lanczos, MatchesDenseEigenvaluesWithRestartsAndDegeneracy) {
  const int n = 300;
  Eigen::MatrixXd A(n, n);
  CounterRng r(3, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) A(i, j) = A(j, i) = r.uniform() - 0.5;
  // A doubly degenerate lowest level.
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(A);
  Eigen::VectorXd lam = es.eigenvalues();
  lam[1] = lam[0];
  A = es.eigenvectors() * lam.asDiagonal() * es.eigenvectors().transpose();
  LanczosOptions o;
  o.n_states = 4;
  o.krylov_dim = 24;  // forces thick restarts
  o.want_vectors = true;
  auto res = lanczos([&](const double* x, double* y) {
    Eigen::Map<Eigen::VectorXd>(y, n) = A * Eigen::Map<const Eigen::VectorXd>(x, n);
  }, n, o);
  ASSERT_TRUE(res.converged);
  EXPECT_GT(res.restarts, 0);
  // In exact arithmetic one start vector sees one copy of a degenerate level; rounding usually lets the second
  // copy in after restarts. Either way every value is an eigenvalue and the lowest is λ0.
  EXPECT_NEAR(res.values[0], lam[0], 1e-10);
  for (int k = 0; k < 4; ++k) {
    EXPECT_LT((lam.array() - res.values[k]).abs().minCoeff(), 1e-10) << k;
    EXPECT_LT((A * res.vectors[k] - res.values[k] * res.vectors[k]).norm(), 1e-9);
  }
  // Without degeneracy: exactly the four lowest.
  A = es.eigenvectors() * es.eigenvalues().asDiagonal() * es.eigenvectors().transpose();
  o.want_vectors = false;
  res = lanczos([&](const double* x, double* y) {
    Eigen::Map<Eigen::VectorXd>(y, n) = A * Eigen::Map<const Eigen::VectorXd>(x, n);
  }, n, o);
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(res.values[k], es.eigenvalues()[k], 1e-10) << k;
}

TEST(ExactDiagonalization, LanczosAgreesWithDenseSpectrumForEveryModel) {
  for (auto m : {chain("tfim", 8, "open", 1, 0.7), chain("tfim", 7, "periodic", -0.8, 1.3),
                 chain("xxz", 10, "periodic", 1, 1, 0.4), chain("heisenberg", 9, "open"),
                 chain("j1j2", 10, "periodic", 1, 1, 1, 0.3)}) {
    auto dense = dense_spectrum(m);
    EdOptions o;
    o.n_states = 3;
    auto ed = exact_ground_state(m, o);
    ASSERT_TRUE(ed.converged) << m.describe();
    // Degenerate levels may appear once: compare the ground state and check the others are eigenvalues.
    EXPECT_NEAR(ed.energies[0], dense[0], 1e-10) << m.describe();
    for (double e : ed.energies) EXPECT_LT((dense.array() - e).abs().minCoeff(), 1e-9) << m.describe();
  }
}

TEST(ExactDiagonalization, FlipParitySectorHoldsTheGroundStateAndExpandsVectors) {
  for (auto m : {chain("tfim", 7, "open", 0.8, -1.1), chain("tfim", 6, "periodic", -1, 0.6)}) {
    EdOptions o;
    o.want_vectors = true;
    auto with = exact_ground_state(m, o);
    o.use_flip_parity = false;
    auto without = exact_ground_state(m, o);
    EXPECT_EQ(without.sector, "full");
    EXPECT_NE(with.sector, "full");
    EXPECT_NEAR(with.energies[0], without.energies[0], 1e-10) << m.describe();
    // The expanded vector is the full-space eigenvector (up to sign).
    double overlap = 0;
    for (std::size_t k = 0; k < with.vectors[0].size(); ++k) overlap += with.vectors[0][k] * without.vectors[0][k];
    EXPECT_NEAR(std::abs(overlap), 1.0, 1e-9);
  }
}

TEST(ExactDiagonalization, TfimFreeFermionFormulaForAnyCouplings) {
  for (const char* bc : {"open", "periodic"})
    for (int n : {5, 6, 9})
      for (auto [J, h] : std::vector<std::pair<double, double>>{{1, 0.3}, {1, 1}, {1, 2.5}, {-1, 0.7},
                                                                {0.5, -1.3}, {-0.9, -0.4}, {0, 1}}) {
        auto m = chain("tfim", n, bc, J, h);
        auto ref = reference_energy(m);
        ASSERT_TRUE(ref.has_value());
        EXPECT_NEAR(exact_ground_state(m).energies[0], *ref, 1e-10) << m.describe();
      }
}

TEST(ExactDiagonalization, TfimCriticalClosedForms) {
  for (int n : {8, 20, 100}) {
    EXPECT_NEAR(tfim_energy_open(n, 1, 1), 1 - 1 / std::sin(M_PI / (4 * n + 2)), 1e-10);
    EXPECT_NEAR(tfim_energy_periodic(n, 1, 1), -2 / std::sin(M_PI / (2 * n)), 1e-10);
  }
  EXPECT_NEAR(tfim_energy_open(100, 1, 1), -126.961876739681, 1e-9);
  auto ed = exact_ground_state(chain("tfim", 20, "open"));
  EXPECT_NEAR(ed.energies[0], -25.1077971116, 1e-9);
  EXPECT_EQ(ed.sector, "P=+1");
  // Its time is a benchmark's business, not this test's (it had a 60 s bound, which a sanitizer build broke).
}

TEST(ExactDiagonalization, HeisenbergBetheAnsatzValues) {
  struct Case {
    int n;
    const char* bc;
    double e;
  };
  for (auto c : {Case{16, "open", -6.911737146}, Case{16, "periodic", -7.142296361}, Case{20, "open", -8.682473334},
                 Case{20, "periodic", -8.904386530}}) {
    auto ed = exact_ground_state(chain("heisenberg", c.n, c.bc));
    EXPECT_NEAR(ed.energies[0], c.e, 1e-9) << c.n << " " << c.bc;
    EXPECT_EQ(ed.sector, "2Sz=0");
    // xxz at Δ = 1 is the same model.
    if (c.n == 16) EXPECT_NEAR(exact_ground_state(chain("xxz", c.n, c.bc)).energies[0], c.e, 1e-9);
  }
  EXPECT_FALSE(reference_energy(chain("heisenberg", 16, "open")).has_value());
}

// The Bethe-ansatz energy of the periodic chain equals ED for n = 2 mod 4 and 0 mod 4 (the two kinds of quantum
// numbers), for xxz at Δ = 1 and j1j2 at j2 = 0 too, and the n = 100 ring's value (DMRG-free reference of the
// VMC run at that size; the bulk limit 1/4 − ln 2 per site is approached as −πv/(6n²), v = π/2).
TEST(ExactDiagonalization, HeisenbergRingFromTheBetheAnsatz) {
  for (int n : {4, 6, 10, 12, 14, 18}) {
    const auto ed = exact_ground_state(chain("heisenberg", n, "periodic", 1.7));
    const auto ref = reference_energy(chain("heisenberg", n, "periodic", 1.7));
    ASSERT_TRUE(ref.has_value()) << n;
    EXPECT_NEAR(*ref, ed.energies[0], 1e-10) << n;
  }
  EXPECT_NEAR(*reference_energy(chain("heisenberg", 20, "periodic")), -8.9043865299, 1e-9);
  EXPECT_NEAR(*reference_energy(chain("xxz", 10, "periodic")), exact_ground_state(chain("xxz", 10, "periodic")).energies[0], 1e-10);
  EXPECT_NEAR(*reference_energy(chain("j1j2", 10, "periodic", 1, 1, 1, 0.0)),
              exact_ground_state(chain("j1j2", 10, "periodic", 1, 1, 1, 0.0)).energies[0], 1e-10);
  const double e100 = heisenberg_energy_periodic(100, 1.0);
  EXPECT_NEAR(e100, -44.3229570751, 1e-8);
  EXPECT_NEAR(e100 / 100, 0.25 - std::log(2.0) - M_PI * M_PI / (12 * 100.0 * 100.0), 1e-6);
  EXPECT_FALSE(reference_energy(chain("heisenberg", 11, "periodic")).has_value());
  EXPECT_FALSE(reference_energy(chain("heisenberg", 10, "periodic", -1.0)).has_value());
  EXPECT_FALSE(reference_energy(chain("xxz", 10, "periodic", 1, 1, 0.5)).has_value());
}

TEST(ExactDiagonalization, MajumdarGhoshPoint) {
  for (const char* bc : {"periodic", "open"})
    for (int n : {8, 12, 14}) {
      auto m = chain("j1j2", n, bc, 1.3, 1, 1, 0.65);
      auto ref = reference_energy(m);
      ASSERT_TRUE(ref.has_value());
      EXPECT_NEAR(*ref, -3.0 * n * 1.3 / 8, 1e-12);
      EXPECT_NEAR(exact_ground_state(m).energies[0], *ref, 1e-9) << m.describe();
    }
  EXPECT_FALSE(reference_energy(chain("j1j2", 12, "periodic", 1, 1, 1, 0.4)).has_value());
  EXPECT_FALSE(reference_energy(chain("j1j2", 11, "periodic", 1, 1, 1, 0.5)).has_value());
}
