// U(1) MPS construction and conversion: right-canonical form by block LQ, random states in a charge sector, and
// the U(1) form of a dense MPS with definite bond charges.
#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <random>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/mps/u1.hpp"

namespace attnphys::mps {

void right_canonicalize(QMps& psi) {
  const int n = psi.size();
  require(n >= 1, "right_canonicalize: empty MPS");
  for (int i = n - 1; i >= 1; --i) {
    QSiteTensor& a = psi[i];
    QSiteTensor& b = psi[i - 1];
    const QBlockLayout la = a.layout;
    const int nl = la.left.sectors();
    // Per left sector: the group [A(l, 0, .) A(l, 1, .)] (dim x cols, contiguous) = L Q with orthonormal rows Q.
    std::vector<Eigen::MatrixXd> q(nl), l(nl);
    QnIndex mid;
    for (int ls = 0; ls < nl; ++ls) {
      const long rows = la.left.dim[ls], cols = la.group_cols_[ls];
      if (cols == 0 || rows == 0) continue;
      Eigen::Map<const Eigen::MatrixXd> g(a.data.data() + la.group_start_[ls], rows, cols);
      Eigen::HouseholderQR<Eigen::MatrixXd> qr(g.transpose());
      const long k = std::min(rows, cols);
      Eigen::MatrixXd qm = qr.householderQ() * Eigen::MatrixXd::Identity(cols, k);  // cols x k
      Eigen::MatrixXd r = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();   // k x rows
      q[ls] = qm.transpose();
      l[ls] = r.transpose();
      mid.charge.push_back(la.left.charge[ls]);
      mid.dim.push_back(int(k));
    }
    require(mid.sectors() > 0, "right_canonicalize: site ", i, " carries no amplitude (the state is zero)");
    QSiteTensor na, nb;
    na.layout.build(mid, la.right, la.qp);
    na.data.assign(std::size_t(na.layout.size), 0.0);
    for (int m = 0; m < mid.sectors(); ++m) {
      const int ls = la.left.find(mid.charge[m]);
      std::copy(q[ls].data(), q[ls].data() + q[ls].size(), na.data.begin() + na.layout.group_start_[m]);
    }
    const QBlockLayout& lb = b.layout;
    nb.layout.build(lb.left, mid, lb.qp);
    nb.data.assign(std::size_t(nb.layout.size), 0.0);
    for (int ls = 0; ls < lb.left.sectors(); ++ls)
      for (int s = 0; s < lb.np(); ++s) {
        if (lb.offset(ls, s) < 0) continue;
        const int old_r = lb.rsec(ls, s);
        if (mid.find(lb.right.charge[old_r]) < 0) continue;  // a sector with no amplitude to its right
        nb.block(ls, s) = b.block(ls, s) * l[la.left.find(lb.right.charge[old_r])];
      }
    a = std::move(na);
    b = std::move(nb);
  }
  double nrm2 = 0;
  for (double x : psi[0].data) nrm2 += x * x;
  require(nrm2 > 0 && std::isfinite(nrm2), "right_canonicalize: the state has norm ", std::sqrt(nrm2));
  const double inv = 1.0 / std::sqrt(nrm2);
  for (double& x : psi[0].data) x *= inv;
}

namespace {
// C(m, k), capped at cap (the sector sizes only matter up to the bond dimension).
long binomial_capped(int m, int k, long cap) {
  if (k < 0 || k > m) return 0;
  k = std::min(k, m - k);
  double c = 1;
  for (int j = 1; j <= k; ++j) {
    c = c * double(m - k + j) / double(j);
    if (c >= double(cap)) return cap;
  }
  return std::min(cap, long(std::llround(c)));
}
}  // namespace

QMps random_qmps(int n, int chi, int two_sz, unsigned long seed) {
  require(n >= 1, "random MPS: n must be >= 1, got ", n);
  require(chi >= 1, "random MPS: chi must be >= 1, got ", chi);
  require(std::abs(two_sz) <= n && (two_sz + n) % 2 == 0, "random MPS: 2Sz = ", two_sz, " is impossible for ", n,
          " spins 1/2 (|2Sz| <= n with the parity of n)");
  // The charges reachable on bond b (left of site b): |q| <= b with the parity of b, |two_sz - q| <= n - b.
  std::vector<std::vector<int>> dims(n + 1);  // dims[b][k]: dimension of charge -b + 2k on bond b (0: absent)
  auto charge = [](int b, int k) { return -b + 2 * k; };
  for (int b = 0; b <= n; ++b) {
    dims[b].assign(b + 1, 0);
    if (b == 0 || b == n) {
      dims[b][(b + (b == 0 ? 0 : two_sz)) / 2] = 1;
      continue;
    }
    // chi goes round-robin to the sectors nearest the line, each up to its Hilbert-space size (the nearest sectors
    // of neighbouring bonds differ by one charge step, so the bonds stay connected; the pruning below checks it).
    struct Cand {
      int k;
      long cap;
      double dist;
    };
    std::vector<Cand> cand;
    for (int k = 0; k <= b; ++k) {
      const int q = charge(b, k);
      if (std::abs(two_sz - q) > n - b) continue;
      const long cap = std::min(binomial_capped(b, k, chi), binomial_capped(n - b, (n - b + two_sz - q) / 2, chi));
      if (cap > 0) cand.push_back({k, cap, std::abs(q - double(two_sz) * b / n)});
    }
    std::stable_sort(cand.begin(), cand.end(), [](const Cand& x, const Cand& y) { return x.dist < y.dist; });
    long total = 0;
    for (bool grew = true; grew && total < chi;) {
      grew = false;
      for (const auto& c : cand)
        if (total < chi && dims[b][c.k] < c.cap) ++dims[b][c.k], ++total, grew = true;
    }
  }
  // Drop sectors that no neighbouring sector reaches (q on bond b needs q - 1 or q + 1 on bonds b - 1 and b + 1).
  for (bool changed = true; changed;) {
    changed = false;
    for (int b = 1; b < n; ++b)
      for (int k = 0; k <= b; ++k) {
        if (!dims[b][k]) continue;
        // charge(b, k) - 1 = charge(b - 1, k - 1) + ... : on bond b - 1, indices k - 1 (q - 1) and k (q + 1).
        auto at = [&](int bb, int kk) { return kk >= 0 && kk <= bb && dims[bb][kk] > 0; };
        const bool from_left = at(b - 1, k - 1) || at(b - 1, k);
        const bool to_right = at(b + 1, k) || at(b + 1, k + 1);
        if (!from_left || !to_right) dims[b][k] = 0, changed = true;
      }
  }
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  QMps psi;
  auto index = [&](int b) {
    QnIndex x;
    for (int k = 0; k <= b; ++k)
      if (dims[b][k]) x.charge.push_back(charge(b, k)), x.dim.push_back(dims[b][k]);
    require(x.sectors() > 0, "random MPS: no charge sector left on bond ", b);
    return x;
  };
  QnIndex left = index(0);
  for (int i = 0; i < n; ++i) {
    QnIndex right = index(i + 1);
    QSiteTensor t;
    t.layout.build(left, right, {local_charge(0), local_charge(1)});
    t.data.resize(std::size_t(t.layout.size));
    for (double& x : t.data) x = normal(gen);
    psi.sites().push_back(std::move(t));
    left = std::move(right);
  }
  right_canonicalize(psi);
  return psi;
}

std::optional<QMps> qmps_from_dense(const Mps& psi, std::string* reason) {
  auto no = [&](const std::string& why) -> std::optional<QMps> {
    if (reason) *reason = why;
    return std::nullopt;
  };
  const int n = psi.size();
  if (n < 1) return no("the MPS is empty");
  if (psi.local_dim() != 2) return no(msg("U(1) needs spin-1/2 sites, the MPS has d = ", psi.local_dim()));
  if (psi[0].dl != 1 || psi[n - 1].dr != 1) return no("the MPS does not have open ends of dimension 1");
  constexpr int kUnset = 1 << 30;
  // Charge of every bond state; kUnset where the state carries no amplitude from the left.
  std::vector<std::vector<int>> q(n + 1);
  q[0] = {0};
  for (int i = 0; i < n; ++i) {
    const SiteTensor& t = psi[i];
    q[i + 1].assign(t.dr, kUnset);
    for (int r = 0; r < t.dr; ++r)
      for (int s = 0; s < 2; ++s)
        for (int l = 0; l < t.dl; ++l) {
          if (t(l, s, r) == 0.0 || q[i][l] == kUnset) continue;
          const int c = q[i][l] + local_charge(s);
          if (q[i + 1][r] == kUnset) q[i + 1][r] = c;
          else if (q[i + 1][r] != c)
            return no(msg("bond state ", r, " right of site ", i, " mixes the charges 2Sz = ", q[i + 1][r], " and ",
                          c, " (the state has no definite Sz structure)"));
        }
  }
  if (q[n][0] == kUnset) return no("the state is zero");
  // Per bond: sectors in ascending charge and the position of every dense state within its sector.
  std::vector<QnIndex> idx(n + 1);
  std::vector<std::vector<int>> pos(n + 1);
  for (int b = 0; b <= n; ++b) {
    std::vector<int> charges;
    for (int c : q[b])
      if (c != kUnset) charges.push_back(c);
    std::sort(charges.begin(), charges.end());
    charges.erase(std::unique(charges.begin(), charges.end()), charges.end());
    idx[b].charge = charges;
    idx[b].dim.assign(charges.size(), 0);
    pos[b].assign(q[b].size(), -1);
    for (std::size_t st = 0; st < q[b].size(); ++st) {
      if (q[b][st] == kUnset) continue;
      const int sec = idx[b].find(q[b][st]);
      pos[b][st] = idx[b].dim[sec]++;
    }
  }
  QMps out;
  for (int i = 0; i < n; ++i) {
    const SiteTensor& t = psi[i];
    QSiteTensor qt;
    qt.layout.build(idx[i], idx[i + 1], {local_charge(0), local_charge(1)});
    qt.data.assign(std::size_t(qt.layout.size), 0.0);
    for (int l = 0; l < t.dl; ++l) {
      if (q[i][l] == kUnset) continue;
      const int ls = idx[i].find(q[i][l]);
      for (int s = 0; s < 2; ++s) {
        if (qt.layout.offset(ls, s) < 0) continue;
        auto blk = qt.block(ls, s);
        for (int r = 0; r < t.dr; ++r)
          if (q[i + 1][r] == q[i][l] + local_charge(s)) blk(pos[i][l], pos[i + 1][r]) = t(l, s, r);
      }
    }
    out.sites().push_back(std::move(qt));
  }
  return out;
}

}  // namespace attnphys::mps
