// U(1) block-sparse MPS: indices, layouts, MPO charges, block environments and observables.
#include "attnphys/solvers/mps/u1.hpp"

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>

#include "attnphys/core/error.hpp"
#include "dense_ops.hpp"
#include "u1_ops.hpp"

namespace attnphys::mps {

using detail::kNoCharge;

int QnIndex::find(int q) const {
  auto it = std::lower_bound(charge.begin(), charge.end(), q);
  return it != charge.end() && *it == q ? int(it - charge.begin()) : -1;
}

int QnIndex::total() const {
  int t = 0;
  for (int x : dim) t += x;
  return t;
}

int QnIndex::offset(int sector) const {
  int t = 0;
  for (int k = 0; k < sector; ++k) t += dim[k];
  return t;
}

void QBlockLayout::build(const QnIndex& l, const QnIndex& r, const std::vector<int>& qphys) {
  left = l, right = r, qp = qphys;
  const int np = int(qp.size()), nl = left.sectors();
  offset_.assign(std::size_t(nl) * np, -1);
  rsec_.assign(std::size_t(nl) * np, -1);
  colstart_.assign(std::size_t(nl) * np, 0);
  group_start_.assign(nl, 0);
  group_cols_.assign(nl, 0);
  long off = 0;
  for (int ls = 0; ls < nl; ++ls) {
    group_start_[ls] = off;
    long cols = 0;
    for (int p = 0; p < np; ++p) {
      const int rs = right.find(left.charge[ls] + qp[p]);
      if (rs < 0) continue;
      const std::size_t k = std::size_t(ls) * np + p;
      offset_[k] = off;
      rsec_[k] = rs;
      colstart_[k] = cols;
      cols += right.dim[rs];
      off += long(left.dim[ls]) * right.dim[rs];
    }
    group_cols_[ls] = cols;
  }
  size = off;
}

Eigen::Map<Eigen::MatrixXd> QSiteTensor::block(int ls, int s) {
  const long o = layout.offset(ls, s);
  require(o >= 0, "QSiteTensor: block (", ls, ", ", s, ") is not allowed by the charges");
  return {data.data() + o, layout.left.dim[ls], layout.right.dim[layout.rsec(ls, s)]};
}

Eigen::Map<const Eigen::MatrixXd> QSiteTensor::block(int ls, int s) const {
  const long o = layout.offset(ls, s);
  require(o >= 0, "QSiteTensor: block (", ls, ", ", s, ") is not allowed by the charges");
  return {data.data() + o, layout.left.dim[ls], layout.right.dim[layout.rsec(ls, s)]};
}

SiteTensor QSiteTensor::to_dense() const {
  const int d = layout.np();
  SiteTensor t(layout.left.total(), d, layout.right.total());
  for (int ls = 0; ls < layout.left.sectors(); ++ls)
    for (int s = 0; s < d; ++s) {
      if (layout.offset(ls, s) < 0) continue;
      const auto b = block(ls, s);
      const int l0 = layout.left.offset(ls), r0 = layout.right.offset(layout.rsec(ls, s));
      for (long j = 0; j < b.cols(); ++j)
        for (long i = 0; i < b.rows(); ++i) t(l0 + int(i), s, r0 + int(j)) = b(i, j);
    }
  return t;
}

QMps QMps::product_state(const std::vector<int>& states) {
  require(!states.empty(), "a product state needs at least one site");
  QMps psi;
  int q = 0;
  for (int s : states) {
    require(s == 0 || s == 1, "U(1) product state: local state ", s, " is not 0 (up) or 1 (down)");
    QnIndex l{{q}, {1}}, r{{q + local_charge(s)}, {1}};
    QSiteTensor t;
    t.layout.build(l, r, {local_charge(0), local_charge(1)});
    t.data.assign(std::size_t(t.layout.size), 0.0);
    t.block(0, s)(0, 0) = 1.0;
    psi.sites_.push_back(std::move(t));
    q += local_charge(s);
  }
  return psi;
}

QMps QMps::neel(int n) {
  std::vector<int> s(n);
  for (int i = 0; i < n; ++i) s[i] = i % 2;
  return product_state(s);
}

int QMps::total_charge() const {
  require(!sites_.empty(), "an empty MPS has no charge");
  return sites_.back().layout.right.charge.at(0);
}

int QMps::max_bond_dimension() const {
  int m = 1;
  for (const auto& s : sites_) m = std::max(m, s.layout.right.total());
  return m;
}

std::vector<int> QMps::bond_dimensions() const {
  std::vector<int> b;
  for (int i = 0; i + 1 < size(); ++i) b.push_back(sites_[i].layout.right.total());
  return b;
}

Mps QMps::to_dense_mps() const {
  Mps psi;
  for (const auto& s : sites_) psi.sites().push_back(s.to_dense());
  psi.set_center(-1);
  return psi;
}

MpoCharges mpo_charges(const Mpo& w) {
  MpoCharges c;
  const int n = w.size();
  require(n >= 1, "mpo_charges: empty MPO");
  if (w.d != 2) {
    c.reason = msg("U(1) needs spin-1/2 sites (d = 2), the MPO has d = ", w.d);
    return c;
  }
  c.bond.assign(n + 1, {});
  c.bond[0].assign(w.sites[0].wl, kNoCharge);
  c.bond[0][0] = 0;
  for (int i = 0; i < n; ++i) {
    const auto& site = w.sites[i];
    c.bond[i + 1].assign(site.wr, kNoCharge);
    for (const auto& e : site.entries) {
      if (c.bond[i][e.a] == kNoCharge) continue;
      int q = kNoCharge;
      for (int s = 0; s < e.op.cols(); ++s)
        for (int sp = 0; sp < e.op.rows(); ++sp) {
          if (e.op(sp, s) == 0.0) continue;
          const int qe = local_charge(sp) - local_charge(s);
          if (q == kNoCharge) q = qe;
          if (q != qe) {
            c.reason = msg("site ", i, ": an operator of the MPO (states ", e.a, " -> ", e.b,
                           ") changes Sz by more than one amount, so total Sz is not conserved");
            return c;
          }
        }
      if (q == kNoCharge) continue;
      const int d = c.bond[i][e.a] + q;
      int& db = c.bond[i + 1][e.b];
      if (db == kNoCharge) db = d;
      if (db != d) {
        c.reason = msg("site ", i, ": MPO state ", e.b, " is reached with two different Sz charges");
        return c;
      }
    }
  }
  if (c.bond[n][0] != 0 && c.bond[n][0] != kNoCharge) {
    c.reason = msg("the operator changes total 2Sz by ", c.bond[n][0]);
    return c;
  }
  c.bond[n][0] = 0;
  c.ok = true;
  return c;
}

namespace detail {

void QEnv::layout(const QnIndex& b, const std::vector<int>& dmpo, bool left) {
  bond = b;
  w = int(dmpo.size());
  const int ns = b.sectors();
  other_.assign(std::size_t(ns) * w, -1);
  row_.assign(std::size_t(ns) * w, 0);
  m.resize(ns);
  for (int k = 0; k < ns; ++k) {
    int rows = 0;
    for (int a = 0; a < w; ++a) {
      if (dmpo[a] == kNoCharge) continue;
      const int o = b.find(left ? b.charge[k] + dmpo[a] : b.charge[k] - dmpo[a]);
      if (o < 0) continue;
      other_[std::size_t(k) * w + a] = o;
      row_[std::size_t(k) * w + a] = rows;
      rows += b.dim[o];
    }
    m[k].setZero(rows, b.dim[k]);
  }
}

std::vector<QElement> q_elements(const MpoSite& w, const std::vector<int>& dleft) {
  std::vector<QElement> out;
  for (const auto& e : w.entries) {
    if (dleft[e.a] == kNoCharge) continue;
    for (int s = 0; s < e.op.cols(); ++s)
      for (int sp = 0; sp < e.op.rows(); ++sp)
        if (e.op(sp, s) != 0.0) out.push_back({e.a, e.b, sp, s, e.op(sp, s)});
  }
  return out;
}

QEnv boundary_env(const QnIndex& b) {
  require(b.sectors() == 1 && b.dim[0] == 1, "a boundary bond has one state");
  QEnv e;
  e.layout(b, {0}, true);
  e.m[0](0, 0) = 1.0;
  return e;
}

void QEnvWork::update_left(const QEnv& left, const QSiteTensor& a, const MpoSite& w, const std::vector<int>& dl,
                           const std::vector<int>& dr, QEnv& out) {
  const QBlockLayout& la = a.layout;
  const int nl = la.left.sectors(), nr = la.right.sectors(), d = la.np(), wr = int(dr.size());
  // T_k = L_k [A(k, 0, .) A(k, 1, .)]
  toff_.assign(nl, -1);
  long tot = 0;
  for (int k = 0; k < nl; ++k)
    if (la.group_cols_[k] > 0 && left.m[k].rows() > 0) toff_[k] = tot, tot += left.m[k].rows() * la.group_cols_[k];
  double* t = grow(t_, std::size_t(tot));
  for (int k = 0; k < nl; ++k)
    if (toff_[k] >= 0)
      gemm(false, false, left.m[k].rows(), la.group_cols_[k], la.left.dim[k], 1.0, left.m[k].data(),
           a.data.data() + la.group_start_[k], 0.0, t + toff_[k]);
  // U(r, b, s') (dim l' x dim r, l' = sector of Q(r) + D(b) - q(s')) = sum W(a, b)(s', s) T_k[a rows, s columns]
  out.layout(la.right, dr, true);
  uoff_.assign(std::size_t(nr) * wr * d, -1);
  long utot = 0;
  for (int r = 0; r < nr; ++r)
    for (int b = 0; b < wr; ++b) {
      const int bra = out.other(r, b);
      if (bra < 0) continue;
      for (int sp = 0; sp < d; ++sp) {
        const int lp = la.left.find(la.right.charge[bra] - la.qp[sp]);
        if (lp < 0) continue;
        uoff_[(std::size_t(r) * wr + b) * d + sp] = utot;
        utot += long(la.left.dim[lp]) * la.right.dim[r];
      }
    }
  double* u = grow(u_, std::size_t(utot));
  std::fill(u, u + utot, 0.0);
  for (const auto& e : q_elements(w, dl))
    for (int k = 0; k < nl; ++k) {
      if (toff_[k] < 0 || la.offset(k, e.s) < 0) continue;
      const int lp = left.other(k, e.a);
      if (lp < 0) continue;
      const int r = la.rsec(k, e.s);
      const long uo = uoff_[(std::size_t(r) * wr + e.b) * d + e.sp];
      if (uo < 0) continue;
      const long rows = left.m[k].rows();
      Eigen::Map<const Eigen::MatrixXd, 0, Eigen::OuterStride<>> src(
          t + toff_[k] + left.row(k, e.a) + rows * la.colstart(k, e.s), la.left.dim[lp], la.right.dim[r],
          Eigen::OuterStride<>(rows));
      Eigen::Map<Eigen::MatrixXd>(u + uo, la.left.dim[lp], la.right.dim[r]) += e.value * src;
    }
  // out_r[b rows] = sum_s' A(l', s')^T U(r, b, s')
  for (int r = 0; r < nr; ++r)
    for (int b = 0; b < wr; ++b) {
      const int bra = out.other(r, b);
      if (bra < 0) continue;
      for (int sp = 0; sp < d; ++sp) {
        const long uo = uoff_[(std::size_t(r) * wr + b) * d + sp];
        if (uo < 0) continue;
        const int lp = la.left.find(la.right.charge[bra] - la.qp[sp]);
        if (la.offset(lp, sp) < 0) continue;
        const auto ab = a.block(lp, sp);  // dim l' x dim bra
        Eigen::Map<const Eigen::MatrixXd> ub(u + uo, ab.rows(), la.right.dim[r]);
        out.m[r].middleRows(out.row(r, b), ab.cols()).noalias() += ab.transpose() * ub;
      }
    }
}

void QEnvWork::update_right(const QEnv& right, const QSiteTensor& bt, const MpoSite& w, const std::vector<int>& dl,
                            const std::vector<int>& dr, QEnv& out) {
  const QBlockLayout& lb = bt.layout;
  const int nl = lb.left.sectors(), d = lb.np(), wr = int(dr.size()), wl = int(dl.size());
  const auto elems = q_elements(w, dl);
  // T(l, s, c) = B(l, s) R_c(r, r') for the (s, c) the MPO uses.
  toff_.assign(std::size_t(nl) * d * wr, -1);
  std::vector<char> used(std::size_t(d) * wr, 0);
  for (const auto& e : elems) used[std::size_t(e.s) * wr + e.b] = 1;
  long tot = 0;
  for (int l = 0; l < nl; ++l)
    for (int s = 0; s < d; ++s) {
      if (lb.offset(l, s) < 0) continue;
      const int r = lb.rsec(l, s);
      for (int c = 0; c < wr; ++c) {
        if (!used[std::size_t(s) * wr + c] || dr[c] == kNoCharge) continue;
        const int rp = lb.right.find(lb.right.charge[r] + dr[c]);
        if (rp < 0 || right.other(rp, c) != r) continue;
        toff_[(std::size_t(l) * d + s) * wr + c] = tot;
        tot += long(lb.left.dim[l]) * lb.right.dim[rp];
      }
    }
  double* t = grow(t_, std::size_t(tot));
  for (int l = 0; l < nl; ++l)
    for (int s = 0; s < d; ++s)
      for (int c = 0; c < wr; ++c) {
        const long to = lb.offset(l, s) < 0 ? -1 : toff_[(std::size_t(l) * d + s) * wr + c];
        if (to < 0) continue;
        const int r = lb.rsec(l, s), rp = lb.right.find(lb.right.charge[r] + dr[c]);
        const long dimr = lb.right.dim[r], dimrp = lb.right.dim[rp];
        Eigen::Map<Eigen::MatrixXd>(t + to, lb.left.dim[l], dimrp).noalias() =
            bt.block(l, s) * right.m[rp].middleRows(right.row(rp, c), dimr);
      }
  // U(l', a, s') (dim l x dim r', l = sector of Q(l') - D(a), r' = right sector of B(l', s'))
  out.layout(lb.left, dl, false);
  uoff_.assign(std::size_t(nl) * wl * d, -1);
  long utot = 0;
  for (int lp = 0; lp < nl; ++lp)
    for (int a = 0; a < wl; ++a) {
      const int l = out.other(lp, a);
      if (l < 0) continue;
      for (int sp = 0; sp < d; ++sp) {
        if (lb.offset(lp, sp) < 0) continue;
        uoff_[(std::size_t(lp) * wl + a) * d + sp] = utot;
        utot += long(lb.left.dim[l]) * lb.right.dim[lb.rsec(lp, sp)];
      }
    }
  double* u = grow(u_, std::size_t(utot));
  std::fill(u, u + utot, 0.0);
  for (const auto& e : elems)
    for (int l = 0; l < nl; ++l) {
      if (lb.offset(l, e.s) < 0) continue;
      const long to = toff_[(std::size_t(l) * d + e.s) * wr + e.b];
      if (to < 0) continue;
      const int r = lb.rsec(l, e.s), rp = lb.right.find(lb.right.charge[r] + dr[e.b]);
      const int lp = lb.left.find(lb.right.charge[rp] - lb.qp[e.sp]);
      if (lp < 0 || lb.offset(lp, e.sp) < 0 || out.other(lp, e.a) != l) continue;
      const long uo = uoff_[(std::size_t(lp) * wl + e.a) * d + e.sp];
      Eigen::Map<Eigen::MatrixXd>(u + uo, lb.left.dim[l], lb.right.dim[rp]) +=
          e.value * Eigen::Map<const Eigen::MatrixXd>(t + to, lb.left.dim[l], lb.right.dim[rp]);
    }
  // out_l'[a rows] = sum_s' U(l', a, s') B(l', s')^T
  for (int lp = 0; lp < nl; ++lp)
    for (int a = 0; a < wl; ++a) {
      const int l = out.other(lp, a);
      if (l < 0) continue;
      for (int sp = 0; sp < d; ++sp) {
        const long uo = uoff_[(std::size_t(lp) * wl + a) * d + sp];
        if (uo < 0) continue;
        const auto bb = bt.block(lp, sp);
        Eigen::Map<const Eigen::MatrixXd> ub(u + uo, lb.left.dim[l], bb.cols());
        out.m[lp].middleRows(out.row(lp, a), lb.left.dim[l]).noalias() += ub * bb.transpose();
      }
    }
}

double close_envs(const QEnv& left, const QEnv& right) {
  double acc = 0;
  for (int k = 0; k < left.bond.sectors(); ++k) {
    if (left.other(k, 0) != k || right.other(k, 0) != k) continue;
    const auto lb = left.m[k].middleRows(left.row(k, 0), left.bond.dim[k]);    // bra x ket
    const auto rb = right.m[k].middleRows(right.row(k, 0), right.bond.dim[k]);  // ket x bra
    acc += (lb.array() * rb.transpose().array()).sum();
  }
  return acc;
}

}  // namespace detail

namespace {

MpoSite single_site(const Eigen::MatrixXd& op) {
  MpoSite s;
  s.entries.push_back({0, 0, op});
  return s;
}

void require_u1(const MpoCharges& c) {
  require(c.ok, "this operator does not conserve Sz, so it cannot act on a U(1) MPS: ", c.reason);
}

}  // namespace

double expectation(const Mpo& w, const QMps& psi) {
  require(w.size() == psi.size(), "expectation: the MPO has ", w.size(), " sites, the MPS ", psi.size());
  const MpoCharges c = mpo_charges(w);
  require_u1(c);
  detail::QEnvWork work;
  detail::QEnv env = detail::boundary_env(psi[0].layout.left), next, nrm = env, nrm_next;
  const MpoSite id = single_site(Eigen::Matrix2d::Identity());
  const std::vector<int> zero{0};
  for (int i = 0; i < psi.size(); ++i) {
    work.update_left(env, psi[i], w.sites[i], c.bond[i], c.bond[i + 1], next);
    std::swap(env, next);
    work.update_left(nrm, psi[i], id, zero, zero, nrm_next);
    std::swap(nrm, nrm_next);
  }
  return env.m[0](0, 0) / nrm.m[0](0, 0);
}

double variance(const Mpo& h, const QMps& psi) {
  const double e = expectation(h, psi);
  return expectation(mpo_product(h, h), psi) - e * e;
}

std::vector<double> local_expectations(const QMps& psi, const std::string& op) {
  const Eigen::MatrixXd o = local_operator(op);
  require(o(0, 1) == 0.0 && o(1, 0) == 0.0, "local_expectations on a U(1) MPS needs an operator diagonal in Sz (Sz, Z, Id), got ", op);
  const int n = psi.size();
  const std::vector<int> zero{0};
  const MpoSite id = single_site(Eigen::Matrix2d::Identity()), os = single_site(o);
  detail::QEnvWork work;
  std::vector<detail::QEnv> left(n + 1), right(n + 1);  // left[i]: left of site i; right[i]: right of site i - 1
  left[0] = detail::boundary_env(psi[0].layout.left);
  for (int i = 0; i < n; ++i) work.update_left(left[i], psi[i], id, zero, zero, left[i + 1]);
  right[n] = detail::boundary_env(psi[n - 1].layout.right);
  for (int i = n - 1; i >= 0; --i) work.update_right(right[i + 1], psi[i], id, zero, zero, right[i]);
  const double nrm = left[n].m[0](0, 0);
  std::vector<double> out(n);
  detail::QEnv tmp;
  for (int i = 0; i < n; ++i) {
    work.update_left(left[i], psi[i], os, zero, zero, tmp);
    out[i] = detail::close_envs(tmp, right[i + 1]) / nrm;
  }
  return out;
}

double correlation(const QMps& psi, const std::string& op1, int i, const std::string& op2, int j) {
  require(i != j, "correlation: the two sites must differ (got ", i, " twice); use local_expectations");
  AutoMpo a(psi.size());
  a.add(1.0, op1, i, op2, j);
  return expectation(a.to_mpo(), psi);
}

double spin_correlation(const QMps& psi, int i, int j) {
  require(i != j, "spin_correlation: the two sites must differ");
  AutoMpo a(psi.size());
  a.add(1.0, "Sz", i, "Sz", j);
  a.add(0.5, "S+", i, "S-", j);
  a.add(0.5, "S-", i, "S+", j);
  return expectation(a.to_mpo(), psi);
}

std::vector<double> entanglement_entropies(const QMps& in) {
  // A left-to-right sweep of block SVDs: with the sites right of the center right-orthonormal (a state from the
  // U(1) DMRG or a product state), the singular values of each sector at the center are the Schmidt values.
  QMps psi = in;
  const int n = psi.size();
  std::vector<double> out;
  for (int i = 0; i + 1 < n; ++i) {
    QSiteTensor& a = psi[i];
    QSiteTensor& b = psi[i + 1];
    const QBlockLayout& la = a.layout;
    const int nm = la.right.sectors(), d = la.np();
    // Per right sector m: the left-grouped matrix rows (ls, s) with Q(ls) + q(s) = Q(m).
    std::vector<Eigen::MatrixXd> u(nm), svt(nm);
    std::vector<Eigen::VectorXd> sv(nm);
    std::vector<std::vector<std::pair<int, int>>> rows(nm);  // (ls, s)
    double total = 0;
    for (int m = 0; m < nm; ++m) {
      int nrow = 0;
      for (int ls = 0; ls < la.left.sectors(); ++ls)
        for (int s = 0; s < d; ++s)
          if (la.offset(ls, s) >= 0 && la.rsec(ls, s) == m) rows[m].push_back({ls, s}), nrow += la.left.dim[ls];
      Eigen::MatrixXd mat(nrow, la.right.dim[m]);
      int r0 = 0;
      for (auto [ls, s] : rows[m]) mat.middleRows(r0, la.left.dim[ls]) = a.block(ls, s), r0 += la.left.dim[ls];
      Eigen::BDCSVD<Eigen::MatrixXd> svd(mat, Eigen::ComputeThinU | Eigen::ComputeThinV);
      u[m] = svd.matrixU();
      sv[m] = svd.singularValues();
      svt[m] = sv[m].asDiagonal() * svd.matrixV().transpose();
      total += sv[m].squaredNorm();
    }
    double ent = 0;
    for (int m = 0; m < nm; ++m)
      for (long k = 0; k < sv[m].size(); ++k) {
        const double p = sv[m](k) * sv[m](k) / total;
        if (p > 1e-300) ent -= p * std::log(p);
      }
    out.push_back(ent);
    // New bond: sector m keeps min(rows, cols) states; A = U, B <- S V^T B.
    QnIndex mid;
    for (int m = 0; m < nm; ++m)
      if (u[m].cols() > 0) mid.charge.push_back(la.right.charge[m]), mid.dim.push_back(int(u[m].cols()));
    QSiteTensor na, nb;
    na.layout.build(la.left, mid, la.qp);
    na.data.assign(std::size_t(na.layout.size), 0.0);
    nb.layout.build(mid, b.layout.right, b.layout.qp);
    nb.data.assign(std::size_t(nb.layout.size), 0.0);
    for (int m = 0; m < nm; ++m) {
      const int mm = mid.find(la.right.charge[m]);
      if (mm < 0) continue;
      int r0 = 0;
      for (auto [ls, s] : rows[m]) na.block(ls, s) = u[m].middleRows(r0, la.left.dim[ls]), r0 += la.left.dim[ls];
      for (int s = 0; s < d; ++s) {
        if (b.layout.offset(m, s) < 0) continue;
        nb.block(mm, s) = svt[m] * b.block(m, s);
      }
    }
    a = std::move(na);
    b = std::move(nb);
  }
  return out;
}

}  // namespace attnphys::mps
