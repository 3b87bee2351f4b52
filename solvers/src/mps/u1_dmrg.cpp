// Two-site DMRG on U(1) block-sparse MPS: the effective Hamiltonian applied block by block (one GEMM per left
// sector against the left environment, sparse MPO moves of whole blocks, one GEMM per block against the right
// environment), Davidson on the block vector of the target total-Sz sector, density matrices diagonalised per
// middle-bond charge and truncated across sectors by the dense code's multiplet-safe rule.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "davidson.hpp"
#include "dense_ops.hpp"
#include "u1_ops.hpp"

namespace attnphys::mps {

namespace {

using detail::gemm;
using detail::grow;
using detail::QElement;
using detail::QEnv;

const std::vector<int> kSiteCharges{1, -1};
// p = s1 + 2 s2
const std::vector<int> kPairCharges{2, 0, 0, -2};

struct PairElem {
  int a, c, pp, p;
  double value;
};

std::vector<PairElem> pair_elements(const std::vector<QElement>& w1, const std::vector<QElement>& w2) {
  std::map<std::tuple<int, int, int, int>, double> acc;
  for (const auto& e1 : w1)
    for (const auto& e2 : w2)
      if (e1.b == e2.a) acc[{e1.a, e2.b, e1.sp + 2 * e2.sp, e1.s + 2 * e2.s}] += e1.value * e2.value;
  std::vector<PairElem> out;
  for (const auto& [k, v] : acc)
    if (v != 0.0) out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), v});
  return out;
}

// Moves one block of X (strided) into Y (strided): Y += value * X.
struct Move {
  long src, dst;
  int ldsrc, lddst, rows, cols;
  double value;
};

class QEffectiveH {
 public:
  void set_bond(const QEnv& left, const QEnv& right, const std::vector<PairElem>& pairs, const QBlockLayout& th) {
    left_ = &left, right_ = &right, th_ = &th;
    const int nl = th.left.sectors(), np = th.np();
    xoff_.assign(nl, -1);
    long x = 0;
    for (int k = 0; k < nl; ++k)
      if (th.group_cols_[k] > 0 && left.m[k].rows() > 0) xoff_[k] = x, x += left.m[k].rows() * th.group_cols_[k];
    xsize_ = x;
    yoff_.assign(std::size_t(nl) * np, -1);
    long y = 0;
    for (int l = 0; l < nl; ++l)
      for (int p = 0; p < np; ++p) {
        if (th.offset(l, p) < 0) continue;
        yoff_[std::size_t(l) * np + p] = y;
        y += long(th.left.dim[l]) * right.m[th.rsec(l, p)].rows();
      }
    ysize_ = y;
    moves_.clear();
    for (const auto& e : pairs)
      for (int k = 0; k < nl; ++k) {
        if (xoff_[k] < 0 || th.offset(k, e.p) < 0) continue;
        const int lp = left.other(k, e.a);
        if (lp < 0 || th.offset(lp, e.pp) < 0) continue;
        const int r = th.rsec(k, e.p), rp = th.rsec(lp, e.pp);
        if (right.other(rp, e.c) != r) continue;
        const int rows_k = int(left.m[k].rows());
        moves_.push_back({xoff_[k] + left.row(k, e.a) + long(rows_k) * th.colstart(k, e.p),
                          yoff_[std::size_t(lp) * np + e.pp] + long(th.left.dim[lp]) * right.row(rp, e.c), rows_k,
                          th.left.dim[lp], th.left.dim[lp], th.right.dim[r], e.value});
      }
    // Moves into the same destination run one after the other (better locality).
    std::sort(moves_.begin(), moves_.end(), [](const Move& a, const Move& b) { return a.dst < b.dst; });
  }

  void apply(const double* in, double* out) {
    const QBlockLayout& th = *th_;
    const int nl = th.left.sectors(), np = th.np();
    double* x = grow(x_, std::size_t(xsize_));
    for (int k = 0; k < nl; ++k)
      if (xoff_[k] >= 0)
        gemm(false, false, left_->m[k].rows(), th.group_cols_[k], th.left.dim[k], 1.0, left_->m[k].data(),
             in + th.group_start_[k], 0.0, x + xoff_[k]);
    double* y = grow(y_, std::size_t(ysize_));
    std::fill(y, y + ysize_, 0.0);
    for (const Move& mv : moves_) {
      Eigen::Map<const Eigen::MatrixXd, 0, Eigen::OuterStride<>> s(x + mv.src, mv.rows, mv.cols,
                                                                    Eigen::OuterStride<>(mv.ldsrc));
      Eigen::Map<Eigen::MatrixXd, 0, Eigen::OuterStride<>> d(y + mv.dst, mv.rows, mv.cols,
                                                             Eigen::OuterStride<>(mv.lddst));
      d += mv.value * s;
    }
    for (int l = 0; l < nl; ++l)
      for (int p = 0; p < np; ++p) {
        const long o = th.offset(l, p);
        if (o < 0) continue;
        const int rp = th.rsec(l, p);
        gemm(false, false, th.left.dim[l], th.right.dim[rp], right_->m[rp].rows(), 1.0,
             y + yoff_[std::size_t(l) * np + p], right_->m[rp].data(), 0.0, out + o);
      }
  }

 private:
  const QEnv *left_ = nullptr, *right_ = nullptr;
  const QBlockLayout* th_ = nullptr;
  std::vector<long> xoff_, yoff_;
  long xsize_ = 0, ysize_ = 0;
  std::vector<Move> moves_;
  AlignedBuffer x_, y_;
};

// The sectors of the middle bond of a two-site wavefunction: theta as the block-diagonal matrix
// (l, s1) x (s2, r) with one block M_m per charge Q(l) + q(s1) = Q(r) - q(s2).
struct MidSectors {
  std::vector<int> charge;
  std::vector<long> nrow, ncol;
  std::vector<int> rowsec, colsec;    // [ls * 2 + s1], [rs * 2 + s2] -> m or -1
  std::vector<long> rowoff, coloff;   // offset of that row/column group inside its sector

  void build(const QnIndex& left, const QnIndex& right) {
    std::vector<int> lq, rq;
    for (int ls = 0; ls < left.sectors(); ++ls)
      for (int s = 0; s < 2; ++s) lq.push_back(left.charge[ls] + kSiteCharges[s]);
    for (int rs = 0; rs < right.sectors(); ++rs)
      for (int s = 0; s < 2; ++s) rq.push_back(right.charge[rs] - kSiteCharges[s]);
    std::sort(lq.begin(), lq.end());
    std::sort(rq.begin(), rq.end());
    charge.clear();
    std::set_intersection(lq.begin(), lq.end(), rq.begin(), rq.end(), std::back_inserter(charge));
    charge.erase(std::unique(charge.begin(), charge.end()), charge.end());
    auto sec = [this](int q) {
      auto it = std::lower_bound(charge.begin(), charge.end(), q);
      return it != charge.end() && *it == q ? int(it - charge.begin()) : -1;
    };
    nrow.assign(charge.size(), 0);
    ncol.assign(charge.size(), 0);
    rowsec.assign(std::size_t(left.sectors()) * 2, -1);
    rowoff.assign(std::size_t(left.sectors()) * 2, 0);
    colsec.assign(std::size_t(right.sectors()) * 2, -1);
    coloff.assign(std::size_t(right.sectors()) * 2, 0);
    for (int ls = 0; ls < left.sectors(); ++ls)
      for (int s = 0; s < 2; ++s) {
        const int m = sec(left.charge[ls] + kSiteCharges[s]);
        if (m < 0) continue;
        rowsec[ls * 2 + s] = m;
        rowoff[ls * 2 + s] = nrow[m];
        nrow[m] += left.dim[ls];
      }
    for (int rs = 0; rs < right.sectors(); ++rs)
      for (int s = 0; s < 2; ++s) {
        const int m = sec(right.charge[rs] - kSiteCharges[s]);
        if (m < 0) continue;
        colsec[rs * 2 + s] = m;
        coloff[rs * 2 + s] = ncol[m];
        ncol[m] += right.dim[rs];
      }
  }
  int size() const { return int(charge.size()); }
};

double entropy_of(const std::vector<double>& w, int keep) {
  double total = 0, s = 0;
  for (int k = 0; k < keep; ++k) total += std::max(w[k], 0.0);
  for (int k = 0; k < keep; ++k) {
    const double p = std::max(w[k], 0.0) / total;
    if (p > 1e-300) s -= p * std::log(p);
  }
  return s;
}

}  // namespace

DmrgResult dmrg(const Mpo& h, QMps& psi, const Sweeps& sweeps, const DmrgOptions& opt,
                const DmrgObserver& observer) {
  const int n = psi.size();
  require(n >= 2, "DMRG needs at least 2 sites, got ", n);
  require(h.size() == n, "DMRG: the MPO has ", h.size(), " sites but the MPS has ", n);
  require(sweeps.size() >= 1, "DMRG needs at least one sweep");
  const MpoCharges charges = mpo_charges(h);
  require(charges.ok, "U(1) DMRG: the Hamiltonian does not conserve total Sz (", charges.reason,
          "); use the dense DMRG (dmrg.symmetry=none)");
  detail::check_memory(h, sweeps, opt, true);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  {
    Eigen::Map<Eigen::VectorXd> v0(psi[0].data.data(), long(psi[0].data.size()));
    const double nrm = v0.norm();
    require(nrm > 0, "U(1) DMRG: the initial state is zero");
    v0 /= nrm;
  }
  const auto& bond = charges.bond;
  std::vector<std::vector<QElement>> w(n);
  for (int i = 0; i < n; ++i) w[i] = detail::q_elements(h.sites[i], bond[i]);
  std::vector<std::vector<PairElem>> pairs(n - 1);
  for (int i = 0; i + 1 < n; ++i) pairs[i] = pair_elements(w[i], w[i + 1]);

  detail::QEnvWork work;
  std::vector<QEnv> left(n), right(n);  // left[i]: bond left of site i; right[i]: bond right of site i
  left[0] = detail::boundary_env(psi[0].layout.left);
  right[n - 1] = detail::boundary_env(psi[n - 1].layout.right);
  for (int i = n - 1; i > 1; --i) work.update_right(right[i], psi[i], h.sites[i], bond[i], bond[i + 1], right[i - 1]);

  detail::Davidson davidson;
  QEffectiveH heff;
  QBlockLayout th;
  MidSectors mid;
  AlignedBuffer theta_buf, ework;
  std::vector<double> eigw, weights, evals;
  std::vector<int> iwork;
  std::vector<Eigen::MatrixXd> mats, rho, kept_vecs;
  DmrgResult res;
  detail::SweepState st;
  st.entropies.assign(n - 1, 0.0);
  st.previous.assign(n - 1, 0.0);

  for (int sw = 0; sw < sweeps.size(); ++sw) {
    const SweepParams& p = sweeps.params(sw);
    require(p.max_dim >= 1 && p.niter >= 1 && p.cutoff >= 0 && p.noise >= 0, "sweep ", sw,
            ": max_dim and niter must be >= 1, cutoff and noise >= 0");
    double energy = 0, trunc = 0;
    const detail::DavidsonBudget budget = detail::davidson_budget(opt, p, sw, st.previous_truncation);
    for (int dir = 0; dir < 2; ++dir) {
      for (int step = 0; step < n - 1; ++step) {
        const int i = dir == 0 ? step : n - 2 - step;
        const bool to_right = dir == 0;
        QSiteTensor &a = psi[i], &b = psi[i + 1];
        th.build(a.layout.left, b.layout.right, kPairCharges);
        double* theta = grow(theta_buf, std::size_t(th.size));
        std::fill(theta, theta + th.size, 0.0);
        for (int ls = 0; ls < th.left.sectors(); ++ls)
          for (int pp = 0; pp < 4; ++pp) {
            const long o = th.offset(ls, pp);
            if (o < 0) continue;
            const int s1 = pp % 2, s2 = pp / 2;
            if (a.layout.offset(ls, s1) < 0) continue;
            const int ms = a.layout.rsec(ls, s1);
            if (b.layout.offset(ms, s2) < 0) continue;
            const auto ab = a.block(ls, s1);
            const auto bb = b.block(ms, s2);
            gemm(false, false, ab.rows(), bb.cols(), ab.cols(), 1.0, ab.data(), bb.data(), 0.0, theta + o);
          }
        require(th.size > 0, "U(1) DMRG: no two-site block is allowed at bond ", i,
                "; the initial state's total Sz is out of reach");
        heff.set_bond(left[i], right[i + 1], pairs[i], th);
        energy = davidson.solve(th.size, theta, budget.max_iter, budget.tol,
                                [&](const double* in, double* out) { heff.apply(in, out); });
        st.products += davidson.products();
        ++st.bonds;

        // theta as block-diagonal (l s1) x (s2 r): M_m per middle charge.
        mid.build(th.left, th.right);
        const int nm = mid.size();
        mats.resize(nm);
        for (int m = 0; m < nm; ++m) mats[m].setZero(mid.nrow[m], mid.ncol[m]);
        for (int ls = 0; ls < th.left.sectors(); ++ls)
          for (int pp = 0; pp < 4; ++pp) {
            const long o = th.offset(ls, pp);
            if (o < 0) continue;
            const int s1 = pp % 2, s2 = pp / 2, rs = th.rsec(ls, pp);
            const int m = mid.rowsec[ls * 2 + s1];
            mats[m].block(mid.rowoff[ls * 2 + s1], mid.coloff[rs * 2 + s2], th.left.dim[ls], th.right.dim[rs]) =
                Eigen::Map<const Eigen::MatrixXd>(theta + o, th.left.dim[ls], th.right.dim[rs]);
          }
        rho.resize(nm);
        for (int m = 0; m < nm; ++m) {
          const long sz = to_right ? mid.nrow[m] : mid.ncol[m];
          rho[m].resize(sz, sz);
          if (to_right)
            gemm(false, true, sz, sz, mid.ncol[m], 1.0, mats[m].data(), mats[m].data(), 0.0, rho[m].data());
          else
            gemm(true, false, sz, sz, mid.nrow[m], 1.0, mats[m].data(), mats[m].data(), 0.0, rho[m].data());
        }
        if (p.noise > 0.0) {
          // White's perturbation sum_b P_b P_b^T, with P_b = W_i(b) L theta (left) or theta R W_{i+1}(b) (right);
          // P_b maps middle charge m to m + D(b).
          std::map<std::pair<int, int>, Eigen::MatrixXd> pb;
          if (to_right) {
            for (const auto& e : w[i]) {
              const int db = bond[i + 1][e.b];
              if (db == detail::kNoCharge) continue;
              for (int ls = 0; ls < th.left.sectors(); ++ls) {
                const int m = mid.rowsec[ls * 2 + e.s];
                const int lp = left[i].other(ls, e.a);
                if (m < 0 || lp < 0) continue;
                const int mp = mid.rowsec[lp * 2 + e.sp];
                if (mp < 0 || mid.ncol[m] == 0) continue;
                auto& P = pb[{mp, e.b}];
                if (P.size() == 0) P.setZero(mid.nrow[mp], mid.ncol[m]);
                P.middleRows(mid.rowoff[lp * 2 + e.sp], th.left.dim[lp]).noalias() +=
                    e.value * left[i].m[ls].middleRows(left[i].row(ls, e.a), th.left.dim[lp]) *
                    mats[m].middleRows(mid.rowoff[ls * 2 + e.s], th.left.dim[ls]);
              }
            }
            for (auto& [key, P] : pb) rho[key.first].noalias() += p.noise * P * P.transpose();
          } else {
            const QEnv& R = right[i + 1];
            for (const auto& e : w[i + 1]) {
              const int dc = bond[i + 2][e.b];
              if (dc == detail::kNoCharge) continue;
              for (int rs = 0; rs < th.right.sectors(); ++rs) {
                const int m = mid.colsec[rs * 2 + e.s];
                if (m < 0) continue;
                const int rp = th.right.find(th.right.charge[rs] + dc);
                if (rp < 0 || R.other(rp, e.b) != rs) continue;
                const int mp = mid.colsec[rp * 2 + e.sp];
                if (mp < 0 || mid.nrow[m] == 0) continue;
                auto& P = pb[{mp, e.a}];
                if (P.size() == 0) P.setZero(mid.nrow[m], mid.ncol[mp]);
                P.middleCols(mid.coloff[rp * 2 + e.sp], th.right.dim[rp]).noalias() +=
                    e.value * mats[m].middleCols(mid.coloff[rs * 2 + e.s], th.right.dim[rs]) *
                    R.m[rp].middleRows(R.row(rp, e.b), th.right.dim[rs]);
              }
            }
            for (auto& [key, P] : pb) rho[key.first].noalias() += p.noise * P.transpose() * P;
          }
        }
        // Eigen-decomposition per sector, truncation across sectors (multiplet-safe).
        struct Pair {
          double w;
          int m, k;
        };
        std::vector<Pair> all;
        evals.clear();
        std::vector<long> eoff(nm, 0);
        for (int m = 0; m < nm; ++m) {
          const int sz = int(rho[m].rows());
          eoff[m] = long(evals.size());
          evals.resize(evals.size() + sz);
          detail::symmetric_eigen(sz, rho[m].data(), evals.data() + eoff[m], ework, iwork);
          for (int k = sz - 1; k >= 0; --k) all.push_back({evals[eoff[m] + k], m, k});
        }
        require(!all.empty(), "U(1) DMRG: the bond ", i, " has no allowed middle sector");
        std::stable_sort(all.begin(), all.end(), [](const Pair& x, const Pair& y) { return x.w > y.w; });
        weights.resize(all.size());
        for (std::size_t k = 0; k < all.size(); ++k) weights[k] = all[k].w;
        const Truncation t = truncation_rank(weights, p, opt.degeneracy_tol);
        trunc = std::max(trunc, t.discarded);
        st.entropies[i] = entropy_of(weights, t.keep);
        std::vector<int> kept(nm, 0);
        for (int k = 0; k < t.keep; ++k) ++kept[all[k].m];
        QnIndex midx;
        for (int m = 0; m < nm; ++m)
          if (kept[m] > 0) midx.charge.push_back(mid.charge[m]), midx.dim.push_back(kept[m]);
        // Kept eigenvectors of each sector, largest first (symmetric_eigen sorts ascending).
        kept_vecs.resize(nm);
        for (int m = 0; m < nm; ++m) {
          const long sz = rho[m].rows();
          kept_vecs[m].resize(sz, kept[m]);
          for (int j = 0; j < kept[m]; ++j) kept_vecs[m].col(j) = rho[m].col(sz - 1 - j);
        }
        QSiteTensor na, nb;
        na.layout.build(a.layout.left, midx, kSiteCharges);
        na.data.assign(std::size_t(na.layout.size), 0.0);
        nb.layout.build(midx, b.layout.right, kSiteCharges);
        nb.data.assign(std::size_t(nb.layout.size), 0.0);
        for (int m = 0; m < nm; ++m) {
          if (kept[m] == 0) continue;
          const int mm = midx.find(mid.charge[m]);
          // to_right: A = U (left-orthonormal), B = U^T M; to_left: B = V^T (right-orthonormal), A = M V.
          const Eigen::MatrixXd c = to_right ? Eigen::MatrixXd(kept_vecs[m].transpose() * mats[m])
                                             : Eigen::MatrixXd(mats[m] * kept_vecs[m]);
          for (int ls = 0; ls < na.layout.left.sectors(); ++ls)
            for (int s = 0; s < 2; ++s) {
              if (mid.rowsec[ls * 2 + s] != m || na.layout.offset(ls, s) < 0) continue;
              const long ro = mid.rowoff[ls * 2 + s];
              na.block(ls, s) = to_right ? Eigen::MatrixXd(kept_vecs[m].middleRows(ro, na.layout.left.dim[ls]))
                                         : Eigen::MatrixXd(c.middleRows(ro, na.layout.left.dim[ls]));
            }
          for (int s = 0; s < 2; ++s) {
            if (nb.layout.offset(mm, s) < 0) continue;
            const int rs = nb.layout.rsec(mm, s);
            const long co = mid.coloff[rs * 2 + s];
            const int dr = nb.layout.right.dim[rs];
            nb.block(mm, s) = to_right ? Eigen::MatrixXd(c.middleCols(co, dr))
                                       : Eigen::MatrixXd(kept_vecs[m].middleRows(co, dr).transpose());
          }
        }
        a = std::move(na);
        b = std::move(nb);
        // One environment per bond is live: the one on the side the sweep comes from is stale once the bond is
        // done (the sweep back recomputes it), so it is freed (the boundaries stay).
        if (to_right) {
          work.update_left(left[i], a, h.sites[i], bond[i], bond[i + 1], left[i + 1]);
          if (i + 1 < n - 1) right[i + 1] = QEnv{};
        } else {
          work.update_right(right[i + 1], b, h.sites[i + 1], bond[i + 1], bond[i + 2], right[i]);
          if (i > 0) left[i] = QEnv{};
          left[i + 1] = QEnv{};
        }
      }
    }
    if (detail::end_of_sweep(sw, sweeps.size(), p, opt, observer, energy, trunc, psi.max_bond_dimension(),
                             elapsed(), budget.tol, st, res))
      break;
  }
  {
    Eigen::Map<Eigen::VectorXd> v0(psi[0].data.data(), long(psi[0].data.size()));
    v0 /= v0.norm();
  }
  res.energy = res.history.back().energy;
  res.truncation_error = res.history.back().truncation_error;
  res.max_bond_dimension = psi.max_bond_dimension();
  res.entropies = st.entropies;
  res.seconds = elapsed();
  return res;
}

}  // namespace attnphys::mps
