#pragma once
// Dense Hamiltonians of the chain models (the README's conventions) built straight from their definitions (bit i of a basis index,
// counted from the most significant end, is site i; 0 = up), for checking MPOs and DMRG on small chains.
#include <Eigen/Dense>
#include <vector>

#include "attnphys/physics/spin/chain_model.hpp"

namespace attnphys::mps::testing {

inline Eigen::MatrixXd dense_chain_hamiltonian(const spin::ChainModel& m) {
  const int n = m.n;
  const long dim = 1L << n;
  Eigen::MatrixXd h = Eigen::MatrixXd::Zero(dim, dim);
  auto bit = [n](long x, int i) { return int((x >> (n - 1 - i)) & 1); };
  auto flip = [n](long x, int i) { return x ^ (1L << (n - 1 - i)); };
  std::vector<std::pair<int, int>> nn, nnn;
  for (int i = 0; i < (m.periodic() ? n : n - 1); ++i) nn.push_back({i, (i + 1) % n});
  for (int i = 0; i < (m.periodic() ? n : n - 2); ++i) nnn.push_back({i, (i + 2) % n});
  auto exchange = [&](long x, int i, int j, double J, double delta) {
    const double si = bit(x, i) ? -0.5 : 0.5, sj = bit(x, j) ? -0.5 : 0.5;
    h(x, x) += J * delta * si * sj;
    if (bit(x, i) != bit(x, j)) h(flip(flip(x, i), j), x) += 0.5 * J;  // (S+S- + S-S+)/2
  };
  for (long x = 0; x < dim; ++x) {
    if (m.model == spin::ModelKind::Tfim) {
      for (auto [i, j] : nn) h(x, x) += -m.J * (bit(x, i) ? -1.0 : 1.0) * (bit(x, j) ? -1.0 : 1.0);
      for (int i = 0; i < n; ++i) h(flip(x, i), x) += -m.h;
    } else {
      for (auto [i, j] : nn) exchange(x, i, j, m.J, m.anisotropy());
      if (m.model == spin::ModelKind::J1J2)
        for (auto [i, j] : nnn) exchange(x, i, j, m.j2, 1.0);
    }
  }
  return h;
}

inline double dense_ground_energy(const spin::ChainModel& m) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(dense_chain_hamiltonian(m), Eigen::EigenvaluesOnly);
  return es.eigenvalues()(0);
}

inline spin::ChainModel chain(const std::string& model, int n, const std::string& bc, double J = 1.0,
                              double h = 1.0, double delta = 1.0, double j2 = 0.5) {
  spin::ChainModel m;
  m.model = spin::parse_model_kind(model), m.n = n, m.bc = spin::parse_boundary(bc);
  m.J = J, m.h = h, m.delta = delta, m.j2 = j2;
  return m;
}

}  // namespace attnphys::mps::testing
