// MPS/MPO building blocks: every chain MPO equals the dense Hamiltonian, canonical forms are orthonormal, HDF5
// round trips are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/mps/mpo.hpp"
#include "attnphys/solvers/mps/mps.hpp"
#include "test_mps_dense.hpp"

namespace attnphys::mps {
namespace {

using testing::chain;
using testing::dense_chain_hamiltonian;

void expect_mpo_matches(const spin::ChainModel& m) {
  const Eigen::MatrixXd want = dense_chain_hamiltonian(m);
  const Eigen::MatrixXd got = mpo_to_dense(chain_mpo(m));
  EXPECT_LT((want - got).cwiseAbs().maxCoeff(), 1e-13) << m.describe();
}

TEST(Mpo, ChainsEqualDenseHamiltonians) {
  for (const char* bc : {"open", "periodic"}) {
    expect_mpo_matches(chain("tfim", 7, bc, 1.3, 0.7));
    expect_mpo_matches(chain("xxz", 7, bc, 0.8, 1.0, 0.6));
    expect_mpo_matches(chain("heisenberg", 8, bc));
    expect_mpo_matches(chain("j1j2", 8, bc, 1.0, 1.0, 1.0, 0.3));
  }
}

TEST(Mpo, BondDimensionsOfTheFiniteStateMachine) {
  EXPECT_EQ(chain_mpo(chain("heisenberg", 10, "open")).max_bond_dimension(), 5);
  EXPECT_EQ(chain_mpo(chain("tfim", 10, "open")).max_bond_dimension(), 3);
  EXPECT_EQ(chain_mpo(chain("j1j2", 10, "open")).max_bond_dimension(), 8);
  EXPECT_EQ(chain_mpo(chain("heisenberg", 10, "periodic")).max_bond_dimension(), 8);
}

TEST(Mpo, GeneralTermsAndProducts) {
  // Longer strings and repeated terms: coefficients add, the product MPO is the matrix product.
  AutoMpo a(5);
  a.add(0.3, {{"Sz", 0}, {"X", 2}, {"S+", 4}});
  a.add(0.3, {{"S+", 4}, {"Sz", 0}, {"X", 2}});
  a.add(-1.1, "S-", 1, "Sx", 3).add(0.5, "Z", 2);
  Eigen::MatrixXd want = Eigen::MatrixXd::Zero(32, 32);
  auto site_op = [](const std::string& name, int i) {
    Eigen::MatrixXd m = Eigen::MatrixXd::Ones(1, 1);
    for (int k = 0; k < 5; ++k) {
      Eigen::MatrixXd o = k == i ? Eigen::MatrixXd(local_operator(name)) : Eigen::MatrixXd::Identity(2, 2);
      Eigen::MatrixXd next(m.rows() * 2, m.cols() * 2);
      for (long r = 0; r < m.rows(); ++r)
        for (long c = 0; c < m.cols(); ++c) next.block(2 * r, 2 * c, 2, 2) = m(r, c) * o;
      m = next;
    }
    return m;
  };
  want += 0.6 * site_op("Sz", 0) * site_op("X", 2) * site_op("S+", 4);
  want += -1.1 * site_op("S-", 1) * site_op("Sx", 3) + 0.5 * site_op("Z", 2);
  const Mpo w = a.to_mpo();
  EXPECT_LT((mpo_to_dense(w) - want).cwiseAbs().maxCoeff(), 1e-14);
  EXPECT_LT((mpo_to_dense(mpo_product(w, w)) - want * want).cwiseAbs().maxCoeff(), 1e-13);
  EXPECT_THROW(a.add(1.0, "Sy", 0), Error);
  EXPECT_THROW(a.add(1.0, "Sz", 5), Error);
  EXPECT_THROW(a.add(1.0, "Sz", 1, "Z", 1), Error);
}

TEST(Mps, CanonicalFormsAndOverlaps) {
  Mps psi = Mps::random(9, 2, 6, 42);
  const Eigen::VectorXd v = psi.to_dense();
  EXPECT_NEAR(v.norm(), 1.0, 1e-12);
  for (int c : {0, 4, 8}) {
    psi.canonicalize(c);
    for (int i = 0; i < c; ++i) EXPECT_LT(left_orthonormality_error(psi[i]), 1e-13);
    for (int i = c + 1; i < psi.size(); ++i) EXPECT_LT(right_orthonormality_error(psi[i]), 1e-13);
    // Gauge changes leave the state alone.
    EXPECT_LT((psi.to_dense() - v).cwiseAbs().maxCoeff(), 1e-13);
    EXPECT_NEAR(psi.norm(), 1.0, 1e-13);
  }
  const Mps phi = Mps::random(9, 2, 4, 7);
  EXPECT_NEAR(overlap(psi, phi), v.dot(phi.to_dense()), 1e-13);
  EXPECT_NEAR(overlap(Mps::neel(4), Mps::product_state({0, 1, 0, 1})), 1.0, 0.0);
  EXPECT_EQ(psi.bond_dimensions(), (std::vector<int>{2, 4, 6, 6, 6, 6, 4, 2}));
}

TEST(Mps, Hdf5RoundTrip) {
  Mps psi = Mps::random(7, 2, 5, 3);
  psi.canonicalize(3);
  const std::string path = ::testing::TempDir() + "attnphys_mps_roundtrip.h5";
  save_mps(psi, path);
  const Mps back = load_mps(path);
  ASSERT_EQ(back.size(), psi.size());
  EXPECT_EQ(back.center(), 3);
  for (int i = 0; i < psi.size(); ++i) {
    ASSERT_EQ(back[i].dl, psi[i].dl);
    ASSERT_EQ(back[i].dr, psi[i].dr);
    EXPECT_EQ((back[i].data - psi[i].data).cwiseAbs().maxCoeff(), 0.0);
  }
  std::remove(path.c_str());
  EXPECT_THROW(load_mps(path), Error);
}

}  // namespace
}  // namespace attnphys::mps
