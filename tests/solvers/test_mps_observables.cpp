// Observables of an MPS against the same quantities of its dense state vector.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>

#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "test_mps_dense.hpp"

namespace attnphys::mps {
namespace {

using testing::chain;
using testing::dense_chain_hamiltonian;

Eigen::MatrixXd site_op(const std::string& name, int i, int n) {
  Eigen::MatrixXd m = Eigen::MatrixXd::Ones(1, 1);
  for (int k = 0; k < n; ++k) {
    Eigen::MatrixXd o = k == i ? Eigen::MatrixXd(local_operator(name)) : Eigen::MatrixXd::Identity(2, 2);
    Eigen::MatrixXd next = Eigen::MatrixXd::Zero(m.rows() * 2, m.cols() * 2);
    for (long r = 0; r < m.rows(); ++r)
      for (long c = 0; c < m.cols(); ++c) next.block(2 * r, 2 * c, 2, 2) = m(r, c) * o;
    m = next;
  }
  return m;
}

TEST(MpsObservables, MatchDenseStateVector) {
  const int n = 8;
  Mps psi = Mps::random(n, 2, 5, 19);
  psi[3].data *= 1.7;  // unnormalised and not canonical: observables normalise
  psi.set_center(-1);
  const Eigen::VectorXd v = psi.to_dense().normalized();
  const auto m = chain("xxz", n, "open", 1.0, 1.0, 0.4);
  const Eigen::MatrixXd h = dense_chain_hamiltonian(m);
  const double e = v.dot(h * v);
  EXPECT_NEAR(expectation(chain_mpo(m), psi), e, 1e-12);
  EXPECT_NEAR(variance(chain_mpo(m), psi), (h * v).squaredNorm() - e * e, 1e-11);

  const std::vector<double> s = entanglement_entropies(psi);
  ASSERT_EQ(int(s.size()), n - 1);
  for (int b = 0; b + 1 < n; ++b) {
    const long rows = 1L << (b + 1);
    Eigen::MatrixXd mat = Eigen::Map<const Eigen::MatrixXd>(v.data(), (1L << n) / rows, rows).transpose();
    const Eigen::VectorXd sv = Eigen::JacobiSVD<Eigen::MatrixXd>(mat).singularValues();
    double want = 0;
    for (long k = 0; k < sv.size(); ++k)
      if (sv(k) > 1e-150) want -= sv(k) * sv(k) * std::log(sv(k) * sv(k));
    EXPECT_NEAR(s[b], want, 1e-11) << "bond " << b;
  }
  const std::vector<double> mz = local_expectations(psi, "Sz");
  const std::vector<double> mx = local_expectations(psi, "X");
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(mz[i], v.dot(site_op("Sz", i, n) * v), 1e-12);
    EXPECT_NEAR(mx[i], v.dot(site_op("X", i, n) * v), 1e-12);
  }
  EXPECT_NEAR(correlation(psi, "Sz", 1, "S+", 6), v.dot(site_op("Sz", 1, n) * site_op("S+", 6, n) * v), 1e-12);
}

TEST(MpsObservables, GroundStateHasZeroVarianceAndSingletCorrelations) {
  const auto m = chain("heisenberg", 10, "open");
  Mps psi = Mps::neel(10);
  SweepParams p;
  p.max_dim = 32, p.cutoff = 1e-14, p.niter = 6;
  const DmrgResult r = dmrg(chain_mpo(m), psi, Sweeps(10, p));
  EXPECT_LT(std::abs(variance(chain_mpo(m), psi)), 1e-9);
  EXPECT_NEAR(expectation(chain_mpo(m), psi), r.energy, 1e-10);
  // <Sz_i> of the singlet is zero up to the triplet (S = 1, Sz = 0) admixture, which is linear in the state's
  // error where the energy is quadratic: 1.4e-10 here after converged sweeps (the rounding of the sweeps).
  for (double mz : local_expectations(psi, "Sz")) EXPECT_NEAR(mz, 0.0, 1e-9);
  // SU(2) singlet: <S+_i S-_j> = 2 <Sz_i Sz_j>.
  EXPECT_NEAR(correlation(psi, "S+", 2, "S-", 7), 2 * correlation(psi, "Sz", 2, "Sz", 7), 1e-9);
  // DMRG's own entropies are those of the returned state.
  const std::vector<double> s = entanglement_entropies(psi);
  for (int b = 0; b < 9; ++b) EXPECT_NEAR(r.entropies[b], s[b], 1e-8);
}

}  // namespace
}  // namespace attnphys::mps
