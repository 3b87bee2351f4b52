#include "attnphys/solvers/mps/observables.hpp"

#include <Eigen/SVD>
#include <cmath>

#include "attnphys/core/error.hpp"
#include "effective_h.hpp"

namespace attnphys::mps {

double expectation(const Mpo& w, const Mps& psi) {
  require(w.size() == psi.size(), "expectation: the MPO has ", w.size(), " sites, the MPS ", psi.size());
  detail::EffectiveH work;
  detail::Env env, next;
  env.m = Eigen::MatrixXd::Ones(1, 1);
  for (int i = 0; i < psi.size(); ++i) {
    work.update_left(env, psi[i], w.sites[i], next);
    std::swap(env, next);
  }
  return env.m(0, 0) / overlap(psi, psi);
}

double variance(const Mpo& h, const Mps& psi) {
  const double e = expectation(h, psi);
  return expectation(mpo_product(h, h), psi) - e * e;
}

std::vector<double> entanglement_entropies(const Mps& in) {
  Mps psi = in;
  psi.canonicalize(0);
  psi.normalize();
  std::vector<double> s;
  for (int i = 0; i + 1 < psi.size(); ++i) {
    auto& a = psi[i];
    auto& b = psi[i + 1];
    Eigen::BDCSVD<Eigen::MatrixXd> svd(a.left(), Eigen::ComputeThinU | Eigen::ComputeThinV);
    const Eigen::VectorXd sv = svd.singularValues();
    double ent = 0;
    for (long k = 0; k < sv.size(); ++k) {
      const double p = sv(k) * sv(k);
      if (p > 1e-300) ent -= p * std::log(p);
    }
    s.push_back(ent);
    // Carry S V^T into the next site so that it holds the center.
    const long k = sv.size();
    Eigen::MatrixXd svt = sv.asDiagonal() * svd.matrixV().transpose();
    Eigen::MatrixXd nb = svt * b.right();
    Eigen::MatrixXd u = svd.matrixU();
    a.dr = int(k);
    a.data = u;
    b.dl = int(k);
    b.data = Eigen::Map<Eigen::MatrixXd>(nb.data(), k * b.d, b.dr);
  }
  return s;
}

std::vector<double> local_expectations(const Mps& in, const std::string& op) {
  const Eigen::MatrixXd o = local_operator(op);
  Mps psi = in;
  psi.canonicalize(0);
  const double nrm2 = psi[0].data.squaredNorm();
  std::vector<double> out;
  for (int i = 0; i < psi.size(); ++i) {
    psi.shift_center(i);
    const auto& a = psi[i];
    double acc = 0;
    for (int r = 0; r < a.dr; ++r)
      for (int sp = 0; sp < a.d; ++sp)
        for (int s = 0; s < a.d; ++s)
          if (o(sp, s) != 0.0)
            acc += o(sp, s) * a.data.col(r).segment(long(a.dl) * sp, a.dl).dot(a.data.col(r).segment(long(a.dl) * s, a.dl));
    out.push_back(acc / nrm2);
  }
  return out;
}

double correlation(const Mps& psi, const std::string& op1, int i, const std::string& op2, int j) {
  require(i != j, "correlation: the two sites must differ (got ", i, " twice); use local_expectations");
  AutoMpo a(psi.size());
  a.add(1.0, op1, i, op2, j);
  return expectation(a.to_mpo(), psi);
}

}  // namespace attnphys::mps
