#include "attnphys/operators/attention_core.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnphys::ops {

template <class T>
T* AttentionScratch<T>::ensure(View1<T>& v, long n, const char* label) {
  if (long(v.extent(0)) < n) v = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
  return v.data();
}

// A tile of the score matrix: slices [bh0, bh0 + nbh) × query rows [i0, i0 + rows) × keys [j0, j0 + cols) of n.
// Row r of the tile (slice bh0 + r / rows, query i0 + r % rows) starts at base + (r / rows) * stride +
// (r % rows) * cols: stride is rows * cols in a scratch buffer, n * n inside the saved probabilities of dense mode
// (whose tiles hold every key: j0 = 0, cols = n).
struct Tile {
  long bh0, nbh, i0, rows, j0, cols, n, stride;
};

namespace {
// Dense mode: tiles of (slices × query rows) against every key, in slice-major order (every slice's first tile has
// i0 = 0, which the backward's accumulation relies on).
std::vector<Tile> dense_tiles(long nbh, long n, long budget, long min_rows) {
  const long rows = std::min(n, std::max({1L, min_rows, budget / std::max(1L, n)}));
  const long slices = rows == n ? std::max(1L, std::min(nbh, budget / std::max(1L, n * n))) : 1;
  std::vector<Tile> tiles;
  for (long bh0 = 0; bh0 < nbh; bh0 += slices)
    for (long i0 = 0; i0 < n; i0 += rows) {
      const long r = std::min(rows, n - i0);
      tiles.push_back({bh0, std::min(slices, nbh - bh0), i0, r, 0, n, n, n * n});
    }
  return tiles;
}

// Tiled mode: blocks of slices × query rows × keys holding about `budget` scores, square (side sqrt(budget), at
// least min_rows) when the sequence is longer than that; short sequences take several slices per block.
struct Blocking {
  long slices, rows, cols;
};
Blocking tiled_blocking(long nbh, long n, long budget, long min_rows) {
  budget = std::max(1L, budget);
  long side = std::max(1L, long(std::sqrt(double(budget))));
  while (side > 1 && side * side > budget) --side;
  while ((side + 1) * (side + 1) <= budget) ++side;
  Blocking bl{};
  bl.rows = std::min(n, std::max({1L, min_rows, side}));
  bl.cols = std::min(n, std::max({1L, min_rows, budget / bl.rows}));
  bl.slices = bl.rows == n && bl.cols == n ? std::max(1L, std::min(nbh, budget / std::max(1L, n * n))) : 1;
  return bl;
}

// False when no (query, key) pair of the block can interact under the position masks (causal, window): all its
// probabilities are zero and the block is skipped. The key mask depends on the sample and is left to the kernels.
bool block_reachable(const AttentionMask& m, long i0, long rows, long j0, long cols, long n) {
  if (m.causal && j0 > i0 + rows - 1) return false;
  if (m.window >= 0) {
    // i - j runs over the integers [lo, hi]; the (ring) distance has no interior minimum on either side of 0, so
    // its minimum over the range is 0 (when the range holds 0) or at an end.
    const long lo = i0 - (j0 + cols - 1), hi = i0 + rows - 1 - j0;
    auto dist = [&](long x) {
      x = x < 0 ? -x : x;
      return m.periodic && n - x < x ? n - x : x;
    };
    const long dmin = lo <= 0 && hi >= 0 ? 0 : std::min(dist(lo), dist(hi));
    if (dmin > m.window) return false;
  }
  return true;
}
}  // namespace

// Sums and maxima with eight accumulators: short dependency chains, and the compiler may vectorise them.
template <class T>
KOKKOS_INLINE_FUNCTION T row_max(const T* p, long n) {
  T m[8];
  for (int a = 0; a < 8; ++a) m[a] = Kokkos::reduction_identity<T>::max();
  long j = 0;
  for (; j + 8 <= n; j += 8)
    for (int a = 0; a < 8; ++a) m[a] = p[j + a] > m[a] ? p[j + a] : m[a];
  for (; j < n; ++j) m[0] = p[j] > m[0] ? p[j] : m[0];
  for (int a = 1; a < 8; ++a) m[0] = m[a] > m[0] ? m[a] : m[0];
  return m[0];
}
template <class T>
KOKKOS_INLINE_FUNCTION T row_sum(const T* p, long n) {
  T s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  long j = 0;
  for (; j + 8 <= n; j += 8)
    for (int a = 0; a < 8; ++a) s[a] += p[j + a];
  for (; j < n; ++j) s[0] += p[j];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

template <class T>
bool plain_scores(const ScoreSpec<T>& spec) {
  const auto& m = spec.mask;
  return !m.causal && m.window < 0 && m.key_mask.extent(0) == 0 && spec.rel_bias.extent(0) == 0;
}

// s = scale * q kᵀ on a tile.
template <class T>
void tile_scores(T* s, const Tile& t, const ConstMat3<T>& q, const ConstMat3<T>& k, T scale) {
  const long n = t.n, dh = q.extent(2);
  for (long a = 0; a < t.nbh; ++a) {
    const long bh = t.bh0 + a;
    gemm('N', 'T', scale, ConstMat<T>(q.data() + (bh * n + t.i0) * dh, t.rows, dh),
         ConstMat<T>(k.data() + (bh * n + t.j0) * dh, t.cols, dh), T(0), Mat<T>(s + a * t.stride, t.rows, t.cols));
  }
}

// Dense mode, in place on a tile holding every key: scores -> probabilities (bias, mask, softmax); writes lse of
// the tile's rows.
template <class T>
void tile_softmax(T* s, const Tile& t, const Mat<T>& lse, const ScoreSpec<T>& spec) {
  const long n = t.n, rows = t.rows, stride = t.stride, bh0 = t.bh0, i0 = t.i0;
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMask mask = spec.mask;
  const ConstMat<T> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0, plain = plain_scores(spec);
  Kokkos::parallel_for(
      "attnphys::attention_softmax", Kokkos::RangePolicy<ExecSpace>(0, t.nbh * rows), KOKKOS_LAMBDA(long r) {
        const long bh = bh0 + r / rows, i = i0 + r % rows, b = bh / heads, h = bh % heads;
        T* row = s + (r / rows) * stride + (r % rows) * n;
        const T lowest = Kokkos::reduction_identity<T>::max();  // marks masked keys
        if (!plain) {
          for (long j = 0; j < n; ++j) {
            T x = row[j];
            if (has_bias) x += bias(h, relative_index(i, j, n, max_len, mask.periodic));
            row[j] = mask.allowed(b, i, j, n) ? x : lowest;
          }
        }
        const T mx = row_max(row, n);
        if (mx == lowest) {  // nothing to attend to: the output is zero
          for (long j = 0; j < n; ++j) row[j] = T(0);
          lse(bh, i) = lowest;
          return;
        }
        if (plain) {
          for (long j = 0; j < n; ++j) row[j] = fast_exp(row[j] - mx);
        } else {
          for (long j = 0; j < n; ++j) row[j] = row[j] == lowest ? T(0) : fast_exp(row[j] - mx);
        }
        const T sum = row_sum(row, n);
        const T inv = T(1) / sum;
        for (long j = 0; j < n; ++j) row[j] *= inv;
        lse(bh, i) = mx + math::log(sum);
      });
}

// Tiled forward, one key block of the online softmax, in place: scores -> exp(s + bias - m_new) (0 where masked)
// with the new running row maxima m_new = max(m_old, block max). The running maxima m (kept in lse until
// online_softmax_finish) and sums l [B*H*N] are updated, and the output rows o [B*H*N, dh] accumulated so far are
// rescaled by exp(m_old - m_new), so that the block's p v can be added to them. Rows whose running maximum is
// still the lowest value have seen no key yet: their l is unset and their o row is zero.
template <class T>
void tile_online_softmax(T* s, const Tile& t, T* o, const Mat<T>& m, T* l, long dh, const ScoreSpec<T>& spec) {
  const long n = t.n, rows = t.rows, cols = t.cols, stride = t.stride, bh0 = t.bh0, i0 = t.i0, j0 = t.j0;
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMask mask = spec.mask;
  const ConstMat<T> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0, plain = plain_scores(spec);
  Kokkos::parallel_for(
      "attnphys::attention_online_softmax", Kokkos::RangePolicy<ExecSpace>(0, t.nbh * rows),
      KOKKOS_LAMBDA(long r) {
        const long bh = bh0 + r / rows, i = i0 + r % rows, b = bh / heads, h = bh % heads;
        T* row = s + (r / rows) * stride + (r % rows) * cols;
        const T lowest = Kokkos::reduction_identity<T>::max();  // marks masked keys
        if (!plain) {
          for (long c = 0; c < cols; ++c) {
            const long j = j0 + c;
            T x = row[c];
            if (has_bias) x += bias(h, relative_index(i, j, n, max_len, mask.periodic));
            row[c] = mask.allowed(b, i, j, n) ? x : lowest;
          }
        }
        const T mt = row_max(row, cols);
        if (mt == lowest) {  // no key of this block: nothing changes
          for (long c = 0; c < cols; ++c) row[c] = T(0);
          return;
        }
        const T m_old = m(bh, i);
        const T m_new = m_old > mt ? m_old : mt;
        if (plain) {
          for (long c = 0; c < cols; ++c) row[c] = fast_exp(row[c] - m_new);
        } else {
          for (long c = 0; c < cols; ++c) row[c] = row[c] == lowest ? T(0) : fast_exp(row[c] - m_new);
        }
        const T sum = row_sum(row, cols);
        const long idx = bh * n + i;
        if (m_old == lowest) {
          l[idx] = sum;
        } else {
          const T alpha = fast_exp(m_old - m_new);
          l[idx] = l[idx] * alpha + sum;
          if (alpha != T(1))
            for (long c = 0; c < dh; ++c) o[idx * dh + c] *= alpha;
        }
        m(bh, i) = m_new;
      });
}

// Tiled forward, after the last key block: o /= l and lse = m + log l; rows that saw no key keep o = 0 and the
// lowest lse (the mark of a fully masked row).
template <class T>
void online_softmax_finish(T* o, const Mat<T>& lse, const T* l, long nbh, long n, long dh) {
  Kokkos::parallel_for(
      "attnphys::attention_online_finish", Kokkos::RangePolicy<ExecSpace>(0, nbh * n), KOKKOS_LAMBDA(long idx) {
        const long bh = idx / n, i = idx % n;
        const T m = lse(bh, i);
        if (m == Kokkos::reduction_identity<T>::max()) return;
        const T sum = l[idx];
        const T inv = T(1) / sum;
        for (long c = 0; c < dh; ++c) o[idx * dh + c] *= inv;
        lse(bh, i) = m + math::log(sum);
      });
}

// Tiled backward, in place: scores -> probabilities exp(s + bias - lse) with the saved lse (recomputation).
template <class T>
void tile_recompute(T* s, const Tile& t, const ConstMat<T>& lse, const ScoreSpec<T>& spec) {
  const long n = t.n, rows = t.rows, cols = t.cols, stride = t.stride, bh0 = t.bh0, i0 = t.i0, j0 = t.j0;
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMask mask = spec.mask;
  const ConstMat<T> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0, plain = plain_scores(spec);
  Kokkos::parallel_for(
      "attnphys::attention_recompute", Kokkos::RangePolicy<ExecSpace>(0, t.nbh * rows), KOKKOS_LAMBDA(long r) {
        const long bh = bh0 + r / rows, i = i0 + r % rows, b = bh / heads, h = bh % heads;
        T* row = s + (r / rows) * stride + (r % rows) * cols;
        const T l = lse(bh, i);
        if (plain) {
          for (long c = 0; c < cols; ++c) row[c] = fast_exp(row[c] - l);
          return;
        }
        const bool live = l != Kokkos::reduction_identity<T>::max();
        for (long c = 0; c < cols; ++c) {
          const long j = j0 + c;
          T x = row[c];
          if (has_bias) x += bias(h, relative_index(i, j, n, max_len, mask.periodic));
          row[c] = live && mask.allowed(b, i, j, n) ? fast_exp(x - l) : T(0);
        }
      });
}

// In place: dP -> dS = P ⊙ (dP - rowdot) (the softmax backward); accumulates the relative-bias gradient.
// dp is a scratch tile (row r at r * cols); p may live in the saved probabilities (stride t.stride).
template <class T>
void tile_softmax_backward(T* ds, const T* p, const Tile& t, const T* rowdot, const Mat<T>& d_bias,
                           const ScoreSpec<T>& spec) {
  const long n = t.n, rows = t.rows, cols = t.cols, stride = t.stride, bh0 = t.bh0, i0 = t.i0, j0 = t.j0;
  const long heads = spec.heads, max_len = spec.max_len;
  const bool periodic = spec.mask.periodic;
  const bool has_bias = d_bias.extent(0) != 0;
  Kokkos::parallel_for(
      "attnphys::attention_softmax_backward", Kokkos::RangePolicy<ExecSpace>(0, t.nbh * rows),
      KOKKOS_LAMBDA(long r) {
        const long bh = bh0 + r / rows, i = i0 + r % rows, h = bh % heads;
        const T dot = rowdot[bh * n + i];  // keys and queries share the length n
        T* drow = ds + r * cols;
        const T* prow = p + (r / rows) * stride + (r % rows) * cols;
        for (long c = 0; c < cols; ++c) drow[c] = prow[c] * (drow[c] - dot);
        if (has_bias)
          for (long c = 0; c < cols; ++c)
            if (drow[c] != T(0))
              Kokkos::atomic_add(&d_bias(h, relative_index(i, j0 + c, n, max_len, periodic)), drow[c]);
      });
}

template <class T>
void sdpa_forward(const Mat3<T>& o, const Mat3<T>& p, const Mat<T>& lse, const ConstMat3<T>& q,
                  const ConstMat3<T>& k, const ConstMat3<T>& v, const ScoreSpec<T>& spec, AttentionScratch<T>& ws) {
  ScopedRegion region("attnphys::sdpa_forward");
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2);
  require(k.extent(1) == q.extent(1) && v.extent(1) == q.extent(1), "sdpa_forward: q, k, v lengths differ");
  const T scale = T(1) / std::sqrt(T(dh));
  if (p.extent(0) != 0) {  // dense: exact softmax over every key, probabilities saved
    for (const auto& t : dense_tiles(nbh, n, ws.tile_budget, ws.min_tile_rows)) {
      T* s = p.data() + (t.bh0 * n + t.i0) * n;
      tile_scores(s, t, q, k, scale);
      tile_softmax(s, t, lse, spec);
      for (long a = 0; a < t.nbh; ++a) {
        const long bh = t.bh0 + a;
        gemm('N', 'N', T(1), ConstMat<T>(s + a * t.stride, t.rows, n), ConstMat<T>(v.data() + bh * n * dh, n, dh),
             T(0), Mat<T>(o.data() + (bh * n + t.i0) * dh, t.rows, dh));
      }
    }
    return;
  }
  // Tiled: online softmax over key blocks (FlashAttention-2). o accumulates the unnormalised p v, lse holds the
  // running row maxima and ws.rowdot the running sums until online_softmax_finish.
  const Blocking bl = tiled_blocking(nbh, n, ws.tile_budget, ws.min_tile_rows);
  T* s = ws.ensure(ws.tile, bl.slices * bl.rows * bl.cols, "attnphys::attention_tile");
  T* l = ws.ensure(ws.rowdot, nbh * n, "attnphys::attention_rowdot");
  Kokkos::deep_copy(o, T(0));
  Kokkos::deep_copy(lse, Kokkos::reduction_identity<T>::max());
  for (long bh0 = 0; bh0 < nbh; bh0 += bl.slices) {
    const long ns = std::min(bl.slices, nbh - bh0);
    for (long i0 = 0; i0 < n; i0 += bl.rows) {
      const long r = std::min(bl.rows, n - i0);
      for (long j0 = 0; j0 < n; j0 += bl.cols) {
        const long c = std::min(bl.cols, n - j0);
        if (!block_reachable(spec.mask, i0, r, j0, c, n)) continue;
        const Tile t{bh0, ns, i0, r, j0, c, n, r * c};
        tile_scores(s, t, q, k, scale);
        tile_online_softmax(s, t, o.data(), lse, l, dh, spec);
        for (long a = 0; a < ns; ++a) {
          const long bh = bh0 + a;
          gemm('N', 'N', T(1), ConstMat<T>(s + a * t.stride, r, c), ConstMat<T>(v.data() + (bh * n + j0) * dh, c, dh),
               T(1), Mat<T>(o.data() + (bh * n + i0) * dh, r, dh));
        }
      }
    }
  }
  online_softmax_finish(o.data(), lse, l, nbh, n, dh);
}

template <class T>
void attention_scores(const Mat3<T>& s, const ConstMat3<T>& q, const ConstMat3<T>& k) {
  require(s.extent(0) == q.extent(0) && s.extent(1) == q.extent(1) && s.extent(2) == k.extent(1),
          "attention_scores: s must be [B*H, N, N]");
  const long n = q.extent(1);
  tile_scores(s.data(), Tile{0, long(q.extent(0)), 0, n, 0, n, n, n * n}, q, k, T(1) / std::sqrt(T(q.extent(2))));
}

template <class T>
void row_dot(T* out, const ConstMat3<T>& a, const ConstMat3<T>& b) {
  const long rows = long(a.extent(0)) * long(a.extent(1)), dh = a.extent(2);
  const T* pa = a.data();
  const T* pb = b.data();
  Kokkos::parallel_for(
      "attnphys::attention_rowdot", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(long r) {
        T s = 0;
        for (long c = 0; c < dh; ++c) s += pa[r * dh + c] * pb[r * dh + c];
        out[r] = s;
      });
}

template <class T>
void sdpa_backward(const Mat3<T>& dq, const Mat3<T>& dk, const Mat3<T>& dv, const Mat<T>& d_rel_bias,
                   const ConstMat3<T>& dout, const ConstMat3<T>& q, const ConstMat3<T>& k, const ConstMat3<T>& v,
                   const ConstMat3<T>& o, const ConstMat3<T>& p, const ConstMat<T>& lse, const ScoreSpec<T>& spec,
                   AttentionScratch<T>& ws) {
  ScopedRegion region("attnphys::sdpa_backward");
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2);
  const T scale = T(1) / std::sqrt(T(dh));
  T* rowdot = ws.ensure(ws.rowdot, nbh * n, "attnphys::attention_rowdot");
  row_dot(rowdot, dout, o);  // D = rowsum(dO ⊙ O)
  if (p.extent(0) != 0) {    // dense: the saved probabilities, tiles of query rows against every key
    const auto tiles = dense_tiles(nbh, n, ws.tile_budget, ws.min_tile_rows);
    T* ds = ws.ensure(ws.dtile, tiles[0].nbh * tiles[0].rows * n, "attnphys::attention_dtile");
    for (const auto& t : tiles) {
      const T* s = p.data() + (t.bh0 * n + t.i0) * n;
      const T beta = t.i0 == 0 ? T(0) : T(1);
      const long r = t.rows;
      for (long a = 0; a < t.nbh; ++a) {
        const long bh = t.bh0 + a;
        ConstMat<T> dot(dout.data() + (bh * n + t.i0) * dh, r, dh);
        gemm('N', 'T', T(1), dot, ConstMat<T>(v.data() + bh * n * dh, n, dh), T(0), Mat<T>(ds + a * r * n, r, n));
        gemm('T', 'N', T(1), ConstMat<T>(s + a * t.stride, r, n), dot, beta, Mat<T>(dv.data() + bh * n * dh, n, dh));
      }
      tile_softmax_backward(ds, s, t, rowdot, d_rel_bias, spec);
      for (long a = 0; a < t.nbh; ++a) {
        const long bh = t.bh0 + a;
        ConstMat<T> dst(ds + a * r * n, r, n);
        gemm('N', 'N', scale, dst, ConstMat<T>(k.data() + bh * n * dh, n, dh), T(0),
             Mat<T>(dq.data() + (bh * n + t.i0) * dh, r, dh));
        gemm('T', 'N', scale, dst, ConstMat<T>(q.data() + (bh * n + t.i0) * dh, r, dh), beta,
             Mat<T>(dk.data() + bh * n * dh, n, dh));
      }
    }
    return;
  }
  // Tiled (FlashAttention-2 backward): per key block, over the query blocks, recompute P = exp(S - lse), then
  // dV += Pᵀ dO, dS = P ⊙ (dO Vᵀ - D), dQ += dS K / sqrt(dh), dK += dSᵀ Q / sqrt(dh).
  const Blocking bl = tiled_blocking(nbh, n, ws.tile_budget, ws.min_tile_rows);
  const long tile_size = bl.slices * bl.rows * bl.cols;
  T* s = ws.ensure(ws.tile, tile_size, "attnphys::attention_tile");
  T* ds = ws.ensure(ws.dtile, tile_size, "attnphys::attention_dtile");
  Kokkos::deep_copy(dq, T(0));
  Kokkos::deep_copy(dk, T(0));
  Kokkos::deep_copy(dv, T(0));
  for (long bh0 = 0; bh0 < nbh; bh0 += bl.slices) {
    const long ns = std::min(bl.slices, nbh - bh0);
    for (long j0 = 0; j0 < n; j0 += bl.cols) {
      const long c = std::min(bl.cols, n - j0);
      for (long i0 = 0; i0 < n; i0 += bl.rows) {
        const long r = std::min(bl.rows, n - i0);
        if (!block_reachable(spec.mask, i0, r, j0, c, n)) continue;
        const Tile t{bh0, ns, i0, r, j0, c, n, r * c};
        tile_scores(s, t, q, k, scale);
        tile_recompute(s, t, lse, spec);
        for (long a = 0; a < ns; ++a) {
          const long bh = bh0 + a;
          ConstMat<T> dot(dout.data() + (bh * n + i0) * dh, r, dh);
          gemm('T', 'N', T(1), ConstMat<T>(s + a * t.stride, r, c), dot, T(1),
               Mat<T>(dv.data() + (bh * n + j0) * dh, c, dh));
          gemm('N', 'T', T(1), dot, ConstMat<T>(v.data() + (bh * n + j0) * dh, c, dh), T(0),
               Mat<T>(ds + a * t.stride, r, c));
        }
        tile_softmax_backward(ds, s, t, rowdot, d_rel_bias, spec);
        for (long a = 0; a < ns; ++a) {
          const long bh = bh0 + a;
          ConstMat<T> dst(ds + a * t.stride, r, c);
          gemm('N', 'N', scale, dst, ConstMat<T>(k.data() + (bh * n + j0) * dh, c, dh), T(1),
               Mat<T>(dq.data() + (bh * n + i0) * dh, r, dh));
          gemm('T', 'N', scale, dst, ConstMat<T>(q.data() + (bh * n + i0) * dh, r, dh), T(1),
               Mat<T>(dk.data() + (bh * n + j0) * dh, c, dh));
        }
      }
    }
  }
}

template <class T>
void sdpa_row(const Vec<T>& out, const ConstMat3<T>& q, const ConstMat3<T>& k, const ConstMat<T>& lse,
              const ScoreSpec<T>& spec, long bh, long i) {
  const long n = k.extent(1), dh = q.extent(2), heads = spec.heads, max_len = spec.max_len;
  require(long(out.extent(0)) == n, "sdpa_row: output has ", out.extent(0), " entries, need ", n);
  const T scale = T(1) / std::sqrt(T(dh));
  const AttentionMask mask = spec.mask;
  const ConstMat<T> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0;
  Kokkos::parallel_for(
      "attnphys::attention_row", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long j) {
        T s = 0;
        for (long c = 0; c < dh; ++c) s += q(bh, i, c) * k(bh, j, c);
        s *= scale;
        if (has_bias) s += bias(bh % heads, relative_index(i, j, n, max_len, mask.periodic));
        const T l = lse(bh, i);
        out(j) = mask.allowed(bh / heads, i, j, n) && l != Kokkos::reduction_identity<T>::max() ? math::exp(s - l) : T(0);
      });
}

template <class T>
void factored_forward(const Mat3<T>& o, const Mat3<T>& p, const ConstMat3<T>& v, const ConstMat<T>& alpha,
                      const ScoreSpec<T>& spec) {
  ScopedRegion region("attnphys::factored_forward");
  const long nbh = v.extent(0), n = v.extent(1), heads = spec.heads, max_len = spec.max_len;
  const AttentionMask mask = spec.mask;
  Kokkos::parallel_for(
      "attnphys::factored_forward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {nbh, n, n}),
      KOKKOS_LAMBDA(long bh, long i, long j) {
        p(bh, i, j) = mask.allowed(bh / heads, i, j, n)
                          ? alpha(bh % heads, relative_index(i, j, n, max_len, mask.periodic))
                          : T(0);
      });
  batched_gemm('N', 'N', T(1), p, v, T(0), o);
}

template <class T>
void factored_backward(const Mat3<T>& dv, const Mat<T>& d_alpha, const ConstMat3<T>& dout, const ConstMat3<T>& v,
                       const ConstMat3<T>& p, const ScoreSpec<T>& spec, AttentionScratch<T>& ws) {
  ScopedRegion region("attnphys::factored_backward");
  const long nbh = v.extent(0), n = v.extent(1), heads = spec.heads, max_len = spec.max_len;
  const AttentionMask mask = spec.mask;
  Mat3<T> dp(ws.ensure(ws.dtile, nbh * n * n, "attnphys::attention_dtile"), nbh, n, n);
  batched_gemm('N', 'T', T(1), dout, v, T(0), dp);
  batched_gemm('T', 'N', T(1), p, dout, T(0), dv);
  Kokkos::parallel_for(
      "attnphys::factored_backward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {nbh, n, n}),
      KOKKOS_LAMBDA(long bh, long i, long j) {
        if (mask.allowed(bh / heads, i, j, n))
          Kokkos::atomic_add(&d_alpha(bh % heads, relative_index(i, j, n, max_len, mask.periodic)), dp(bh, i, j));
      });
}

namespace {
// rows [B*N, H*dh] (token-major, heads side by side) <-> per-head blocks [H, N, B*dh] (one [N, B*dh] matrix per head).
// Each work item moves one contiguous run of dh values.
template <class T>
void rows_to_head_blocks(const Mat3<T>& blocks, const ConstMat<T>& rows, long batch, long n, long heads) {
  const long dh = blocks.extent(2) / batch;
  Kokkos::parallel_for(
      "attnphys::factored_to_blocks", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {batch, n, heads}),
      KOKKOS_LAMBDA(long b, long j, long h) {
        const T* src = &rows(b * n + j, h * dh);
        T* dst = &blocks(h, j, b * dh);
        for (long c = 0; c < dh; ++c) dst[c] = src[c];
      });
}
template <class T>
void head_blocks_to_rows(const Mat<T>& rows, const ConstMat3<T>& blocks, long batch, long n, long heads) {
  const long dh = blocks.extent(2) / batch;
  Kokkos::parallel_for(
      "attnphys::factored_to_rows", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {batch, n, heads}),
      KOKKOS_LAMBDA(long b, long i, long h) {
        const T* src = &blocks(h, i, b * dh);
        T* dst = &rows(b * n + i, h * dh);
        for (long c = 0; c < dh; ++c) dst[c] = src[c];
      });
}
template <class T>
void factored_weights(const Mat3<T>& p, const ConstMat<T>& alpha, long n, const ScoreSpec<T>& spec) {
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMask mask = spec.mask;
  Kokkos::parallel_for(
      "attnphys::factored_weights", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {heads, n, n}),
      KOKKOS_LAMBDA(long h, long i, long j) {
        p(h, i, j) = mask.allowed(0, i, j, n) ? alpha(h, relative_index(i, j, n, max_len, mask.periodic)) : T(0);
      });
}
}  // namespace

template <class T>
void factored_rows_forward(const Mat<T>& out, const FactoredRowsBuffers<T>& buf, const ConstMat<T>& in,
                           const ConstMat<T>& alpha, long batch, long n, const ScoreSpec<T>& spec) {
  ScopedRegion region("attnphys::factored_rows_forward");
  const long d = in.extent(1), heads = spec.heads, dh = d / heads;
  require(spec.mask.key_mask.extent(0) == 0, "factored_rows_forward: a key mask needs the per-sample path");
  require(long(in.extent(0)) == batch * n && long(out.extent(0)) == batch * n && long(out.extent(1)) == d &&
              long(buf.vt.extent(0)) == heads && long(buf.vt.extent(1)) == n &&
              long(buf.vt.extent(2)) == batch * dh && buf.ot.extent(2) == buf.vt.extent(2) &&
              long(buf.p.extent(0)) == heads && long(buf.p.extent(1)) == n,
          "factored_rows_forward: shapes disagree");
  factored_weights<T>(buf.p, alpha, n, spec);
  rows_to_head_blocks<T>(buf.vt, in, batch, n, heads);
  // One gemm per head over the whole batch: O_h [N, B*dh] = P_h [N, N] V_h [N, B*dh].
  batched_gemm('N', 'N', T(1), ConstMat3<T>(buf.p.data(), heads, n, n),
               ConstMat3<T>(buf.vt.data(), heads, n, batch * dh), T(0), buf.ot);
  head_blocks_to_rows<T>(out, ConstMat3<T>(buf.ot.data(), heads, n, batch * dh), batch, n, heads);
}

template <class T>
void factored_rows_backward(const Mat<T>& din, const Mat<T>& d_alpha, const FactoredRowsBuffers<T>& buf,
                            const ConstMat<T>& dout, long batch, long n, const ScoreSpec<T>& spec) {
  ScopedRegion region("attnphys::factored_rows_backward");
  const long heads = spec.heads, dh = buf.vt.extent(2) / batch, max_len = spec.max_len;
  require(spec.mask.key_mask.extent(0) == 0, "factored_rows_backward: a key mask needs the per-sample path");
  const AttentionMask mask = spec.mask;
  // buf.vt and buf.p hold the forward's V blocks and weights; buf.ot is reused for dO blocks, buf.dvt for dV blocks.
  rows_to_head_blocks<T>(buf.ot, dout, batch, n, heads);
  const ConstMat3<T> dot(buf.ot.data(), heads, n, batch * dh), vt(buf.vt.data(), heads, n, batch * dh);
  if (din.extent(0) != 0) {
    batched_gemm('T', 'N', T(1), ConstMat3<T>(buf.p.data(), heads, n, n), dot, T(0), buf.dvt);
    head_blocks_to_rows<T>(din, ConstMat3<T>(buf.dvt.data(), heads, n, batch * dh), batch, n, heads);
  }
  // dP_h = dO_h V_hᵀ [N, N], then d_alpha(h, r) += Σ over allowed pairs with relative index r.
  batched_gemm('N', 'T', T(1), dot, vt, T(0), buf.dp);
  const auto dp = buf.dp;
  Kokkos::parallel_for(
      "attnphys::factored_rows_dalpha", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {heads, n, n}),
      KOKKOS_LAMBDA(long h, long i, long j) {
        if (mask.allowed(0, i, j, n))
          Kokkos::atomic_add(&d_alpha(h, relative_index(i, j, n, max_len, mask.periodic)), dp(h, i, j));
      });
}

template <class T>
void galerkin_forward(const Mat3<T>& o, const Mat3<T>& kv, const ConstMat3<T>& q, const ConstMat3<T>& kn,
                      const ConstMat3<T>& vn) {
  ScopedRegion region("attnphys::galerkin_forward");
  const long n = q.extent(1);
  batched_gemm('T', 'N', T(1), kn, vn, T(0), kv);
  batched_gemm('N', 'N', T(1) / T(n), q, ConstMat3<T>(kv.data(), kv.extent(0), kv.extent(1), kv.extent(2)), T(0),
               o);
}

template <class T>
void galerkin_backward(const Mat3<T>& dq, const Mat3<T>& dkn, const Mat3<T>& dvn, const ConstMat3<T>& dout,
                       const ConstMat3<T>& q, const ConstMat3<T>& kn, const ConstMat3<T>& vn,
                       const ConstMat3<T>& kv, AttentionScratch<T>& ws) {
  ScopedRegion region("attnphys::galerkin_backward");
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2);
  Mat3<T> dkv(ws.ensure(ws.dtile, nbh * dh * dh, "attnphys::attention_dtile"), nbh, dh, dh);
  batched_gemm('N', 'T', T(1) / T(n), dout, kv, T(0), dq);
  batched_gemm('T', 'N', T(1) / T(n), q, dout, T(0), dkv);
  const ConstMat3<T> cdkv(dkv.data(), nbh, dh, dh);
  batched_gemm('N', 'T', T(1), vn, cdkv, T(0), dkn);
  batched_gemm('N', 'N', T(1), kn, cdkv, T(0), dvn);
}

template <class T>
void split_heads(const Mat3<T>& out, const ConstMat<T>& in, long col0, long batch, long heads) {
  const long n = out.extent(1), dh = out.extent(2);
  require(long(out.extent(0)) == batch * heads && long(in.extent(0)) == batch * n &&
              long(in.extent(1)) >= col0 + heads * dh,
          "split_heads: shapes disagree");
  Kokkos::parallel_for(
      "attnphys::split_heads", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {batch * n, heads * dh}),
      KOKKOS_LAMBDA(long t, long f) {
        const long b = t / n, i = t % n, h = f / dh, c = f % dh;
        out(b * heads + h, i, c) = in(t, col0 + f);
      });
}

template <class T>
void merge_heads(const Mat<T>& out, long col0, const ConstMat3<T>& in, long batch, long heads) {
  const long n = in.extent(1), dh = in.extent(2);
  require(long(in.extent(0)) == batch * heads && long(out.extent(0)) == batch * n &&
              long(out.extent(1)) >= col0 + heads * dh,
          "merge_heads: shapes disagree");
  Kokkos::parallel_for(
      "attnphys::merge_heads", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {batch * n, heads * dh}),
      KOKKOS_LAMBDA(long t, long f) {
        const long b = t / n, i = t % n, h = f / dh, c = f % dh;
        out(t, col0 + f) = in(b * heads + h, i, c);
      });
}

#define ATTNPHYS_INSTANTIATE_ATTENTION_CORE(T)                                                                   \
  template struct AttentionScratch<T>;                                                                           \
  template void sdpa_forward<T>(const Mat3<T>&, const Mat3<T>&, const Mat<T>&, const ConstMat3<T>&,              \
                                const ConstMat3<T>&, const ConstMat3<T>&, const ScoreSpec<T>&,                   \
                                AttentionScratch<T>&);                                                           \
  template void sdpa_backward<T>(const Mat3<T>&, const Mat3<T>&, const Mat3<T>&, const Mat<T>&,                  \
                                 const ConstMat3<T>&, const ConstMat3<T>&, const ConstMat3<T>&,                  \
                                 const ConstMat3<T>&, const ConstMat3<T>&, const ConstMat3<T>&,                  \
                                 const ConstMat<T>&, const ScoreSpec<T>&, AttentionScratch<T>&);                 \
  template void attention_scores<T>(const Mat3<T>&, const ConstMat3<T>&, const ConstMat3<T>&);              \
  template void sdpa_row<T>(const Vec<T>&, const ConstMat3<T>&, const ConstMat3<T>&, const ConstMat<T>&,         \
                            const ScoreSpec<T>&, long, long);                                                    \
  template void factored_forward<T>(const Mat3<T>&, const Mat3<T>&, const ConstMat3<T>&, const ConstMat<T>&,     \
                                    const ScoreSpec<T>&);                                                        \
  template void factored_backward<T>(const Mat3<T>&, const Mat<T>&, const ConstMat3<T>&, const ConstMat3<T>&,    \
                                     const ConstMat3<T>&, const ScoreSpec<T>&, AttentionScratch<T>&);            \
  template void factored_rows_forward<T>(const Mat<T>&, const FactoredRowsBuffers<T>&, const ConstMat<T>&,        \
                                         const ConstMat<T>&, long, long, const ScoreSpec<T>&);                   \
  template void factored_rows_backward<T>(const Mat<T>&, const Mat<T>&, const FactoredRowsBuffers<T>&,            \
                                          const ConstMat<T>&, long, long, const ScoreSpec<T>&);                  \
  template void galerkin_forward<T>(const Mat3<T>&, const Mat3<T>&, const ConstMat3<T>&, const ConstMat3<T>&,    \
                                    const ConstMat3<T>&);                                                        \
  template void galerkin_backward<T>(const Mat3<T>&, const Mat3<T>&, const Mat3<T>&, const ConstMat3<T>&,        \
                                     const ConstMat3<T>&, const ConstMat3<T>&, const ConstMat3<T>&,              \
                                     const ConstMat3<T>&, AttentionScratch<T>&);                                 \
  template void split_heads<T>(const Mat3<T>&, const ConstMat<T>&, long, long, long);                            \
  template void merge_heads<T>(const Mat<T>&, long, const ConstMat3<T>&, long, long);

ATTNPHYS_INSTANTIATE_ATTENTION_CORE(float)
ATTNPHYS_INSTANTIATE_ATTENTION_CORE(double)

}  // namespace attnphys::ops
