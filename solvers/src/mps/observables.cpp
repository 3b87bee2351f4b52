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

namespace {
// Sum over s', s of o(s', s) A[s']^T E A[s] (A[s] the dl x dr block of physical index s): E carried one site right.
Eigen::MatrixXd transfer(const SiteTensor& t, const Eigen::MatrixXd& e, const Eigen::MatrixXd& o) {
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(t.dr, t.dr);
  for (int s = 0; s < t.d; ++s) {
    bool any = false;
    for (int sp = 0; sp < t.d; ++sp) any = any || o(sp, s) != 0.0;
    if (!any) continue;
    const Eigen::MatrixXd es = e * t.data.middleRows(long(t.dl) * s, t.dl);  // dl x dr
    for (int sp = 0; sp < t.d; ++sp)
      if (o(sp, s) != 0.0) out.noalias() += o(sp, s) * t.data.middleRows(long(t.dl) * sp, t.dl).transpose() * es;
  }
  return out;
}

void require_operator(const Eigen::MatrixXd& o, int d, const char* what) {
  require(o.rows() == d && o.cols() == d, what, ": the operator is ", o.rows(), " x ", o.cols(), ", the sites have d = ",
          d);
  require(o.allFinite(), what, ": the operator has NaN or infinite entries");
}
}  // namespace

std::vector<double> local_expectations(const Mps& in, const Eigen::MatrixXd& o) {
  require(in.size() >= 1, "local_expectations: empty MPS");
  require_operator(o, in.local_dim(), "local_expectations");
  Mps psi = in;
  psi.canonicalize(0);
  const double nrm2 = psi[0].data.squaredNorm();
  std::vector<double> out;
  for (int i = 0; i < psi.size(); ++i) {
    psi.shift_center(i);
    const auto& a = psi[i];
    const Eigen::MatrixXd one = Eigen::MatrixXd::Identity(a.dl, a.dl);
    out.push_back(transfer(a, one, o).trace() / nrm2);
  }
  return out;
}

Eigen::MatrixXd correlation_matrix(const Mps& in, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  require(in.size() >= 1, "correlation_matrix: empty MPS");
  require_operator(a, in.local_dim(), "correlation_matrix");
  require_operator(b, in.local_dim(), "correlation_matrix");
  const int n = in.size();
  Mps psi = in;
  psi.canonicalize(0);
  const double nrm2 = psi[0].data.squaredNorm();
  const Eigen::MatrixXd ab = a * b, id = Eigen::MatrixXd::Identity(in.local_dim(), in.local_dim());
  Eigen::MatrixXd c(n, n);
  for (int i = 0; i < n; ++i) {
    psi.shift_center(i);  // left of i left-orthonormal, right of i right-orthonormal
    const auto& t = psi[i];
    const Eigen::MatrixXd one = Eigen::MatrixXd::Identity(t.dl, t.dl);
    c(i, i) = transfer(t, one, ab).trace() / nrm2;
    Eigen::MatrixXd ea = transfer(t, one, a), eb = transfer(t, one, b);  // A_i (row i) and B_i (column i) opened
    for (int j = i + 1; j < n; ++j) {
      const auto& u = psi[j];
      c(i, j) = transfer(u, ea, b).trace() / nrm2;  // <A_i B_j>
      c(j, i) = transfer(u, eb, a).trace() / nrm2;  // <A_j B_i>
      if (j + 1 < n) ea = transfer(u, ea, id), eb = transfer(u, eb, id);
    }
  }
  return c;
}

}  // namespace attnphys::mps
