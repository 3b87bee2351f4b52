#include "attnphys/operators/attention_core.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "attnphys/core/parallel.hpp"
#include "attnphys/core/resources.hpp"
#include "attention_amx.hpp"

namespace attnphys::ops {

template <class T, class Space>
T* AttentionScratch<T, Space>::ensure(Buffer& v, long n, const char* label) {
  if (long(v.extent(0)) < n) {
    if (double(n) * sizeof(T) > 256e6)
      require_memory(double(n) * sizeof(T), msg("attention scratch buffer ", label, " (", n, " values)"),
                     "use a smaller batch or fewer tokens");
    v = Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
  }
  return v.data();
}

template <class T, class Space>
std::uint16_t* AttentionScratch<T, Space>::ensure_bf16(long n) {
  if (long(bf16_buf.extent(0)) < n) {
    if (double(n) * 2 > 256e6)
      require_memory(double(n) * 2, msg("bf16 attention scratch (", n, " values)"),
                     "use a smaller batch or fewer tokens");
    bf16_buf = Kokkos::View<std::uint16_t*, HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::attention_bf16")), n);
  }
  return bf16_buf.data();
}

bool bf16_attention_available() { return amx::available(); }
std::string bf16_attention_unavailable_reason() { return amx::unavailable_reason(); }

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
template <class Space>
bool block_reachable(const AttentionMaskOn<Space>& m, long i0, long rows, long j0, long cols, long n) {
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

// In place p[j] = exp(p[j] - mx) (0 where p[j] is the masked mark `lowest`, when Masked), returning their sum: one
// pass with eight partial sums instead of an exp pass and a sum pass.
template <class T, class Masked>
KOKKOS_INLINE_FUNCTION T exp_sum(T* p, long n, T mx, T lowest, Masked) {
  T s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  long j = 0;
  for (; j + 8 <= n; j += 8)
    for (int a = 0; a < 8; ++a) {
      const T x = p[j + a];
      const T e = Masked::value && x == lowest ? T(0) : fast_exp(x - mx);
      p[j + a] = e;
      s[a] += e;
    }
  for (; j < n; ++j) {
    const T x = p[j];
    const T e = Masked::value && x == lowest ? T(0) : fast_exp(x - mx);
    p[j] = e;
    s[0] += e;
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

template <class T, class Space>
bool plain_scores(const ScoreSpec<T, Space>& spec) {
  const auto& m = spec.mask;
  return !m.causal && m.window < 0 && m.key_mask.extent(0) == 0 && spec.rel_bias.extent(0) == 0;
}

// s = scale * q kᵀ on a tile.
template <class T, class Space>
void tile_scores(T* s, const Tile& t, const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k, T scale) {
  const long n = t.n, dh = q.extent(2);
  for (long a = 0; a < t.nbh; ++a) {
    const long bh = t.bh0 + a;
    gemm_on<Space, T>('N', 'T', scale, ConstMatOn<T, Space>(q.data() + (bh * n + t.i0) * dh, t.rows, dh),
                      ConstMatOn<T, Space>(k.data() + (bh * n + t.j0) * dh, t.cols, dh), T(0),
                      MatOn<T, Space>(s + a * t.stride, t.rows, t.cols));
  }
}

// Dense mode, in place on a tile holding every key: scores -> probabilities (bias, mask, softmax); writes lse of
// the tile's rows.
template <class T, class Space>
void tile_softmax(T* s, const Tile& t, const MatOn<T, Space>& lse, const ScoreSpec<T, Space>& spec) {
  const long n = t.n, rows = t.rows, stride = t.stride, bh0 = t.bh0, i0 = t.i0;
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMaskOn<Space> mask = spec.mask;
  const ConstMatOn<T, Space> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0, plain = plain_scores(spec);
  attnphys::parallel_for<Space>(
      "attnphys::attention_softmax", t.nbh * rows, KOKKOS_LAMBDA(long r) {
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
        const T sum = plain ? exp_sum(row, n, mx, lowest, std::false_type())
                            : exp_sum(row, n, mx, lowest, std::true_type());
        const T inv = T(1) / sum;
        for (long j = 0; j < n; ++j) row[j] *= inv;
        lse(bh, i) = mx + math::log(sum);
      }, 16);
}

// Tiled forward, one key block of the online softmax, in place: scores -> exp(s + bias - m_new) (0 where masked)
// with the new running row maxima m_new = max(m_old, block max). The running maxima m (kept in lse until
// online_softmax_finish) and sums l [B*H*N] are updated, and the output rows o [B*H*N, dh] accumulated so far are
// rescaled by exp(m_old - m_new), so that the block's p v can be added to them. Rows whose running maximum is
// still the lowest value have seen no key yet: their l is unset and their o row is zero.
template <class T, class Space>
void tile_online_softmax(T* s, const Tile& t, T* o, const MatOn<T, Space>& m, T* l, long dh,
                         const ScoreSpec<T, Space>& spec) {
  const long n = t.n, rows = t.rows, cols = t.cols, stride = t.stride, bh0 = t.bh0, i0 = t.i0, j0 = t.j0;
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMaskOn<Space> mask = spec.mask;
  const ConstMatOn<T, Space> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0, plain = plain_scores(spec);
  attnphys::parallel_for<Space>(
      "attnphys::attention_online_softmax", t.nbh * rows,
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
        const T sum = plain ? exp_sum(row, cols, m_new, lowest, std::false_type())
                            : exp_sum(row, cols, m_new, lowest, std::true_type());
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
      }, 16);
}

// Tiled forward, after the last key block: o /= l and lse = m + log l; rows that saw no key keep o = 0 and the
// lowest lse (the mark of a fully masked row).
template <class T, class Space>
void online_softmax_finish(T* o, const MatOn<T, Space>& lse, const T* l, long nbh, long n, long dh) {
  attnphys::parallel_for<Space>(
      "attnphys::attention_online_finish", nbh * n, KOKKOS_LAMBDA(long idx) {
        const long bh = idx / n, i = idx % n;
        const T m = lse(bh, i);
        if (m == Kokkos::reduction_identity<T>::max()) return;
        const T sum = l[idx];
        const T inv = T(1) / sum;
        for (long c = 0; c < dh; ++c) o[idx * dh + c] *= inv;
        lse(bh, i) = m + math::log(sum);
      }, 256);
}

// Tiled backward, in place: scores -> probabilities exp(s + bias - lse) with the saved lse (recomputation).
template <class T, class Space>
void tile_recompute(T* s, const Tile& t, const ConstMatOn<T, Space>& lse, const ScoreSpec<T, Space>& spec) {
  const long n = t.n, rows = t.rows, cols = t.cols, stride = t.stride, bh0 = t.bh0, i0 = t.i0, j0 = t.j0;
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMaskOn<Space> mask = spec.mask;
  const ConstMatOn<T, Space> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0, plain = plain_scores(spec);
  attnphys::parallel_for<Space>(
      "attnphys::attention_recompute", t.nbh * rows, KOKKOS_LAMBDA(long r) {
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
      }, 16);
}

// In place: dP -> dS = P ⊙ (dP - rowdot) (the softmax backward); accumulates the relative-bias gradient.
// dp is a scratch tile (row r at r * cols); p may live in the saved probabilities (stride t.stride).
template <class T, class Space>
void tile_softmax_backward(T* ds, const T* p, const Tile& t, const T* rowdot, const MatOn<T, Space>& d_bias,
                           const ScoreSpec<T, Space>& spec) {
  const long n = t.n, rows = t.rows, cols = t.cols, stride = t.stride, bh0 = t.bh0, i0 = t.i0, j0 = t.j0;
  const long heads = spec.heads, max_len = spec.max_len;
  const bool periodic = spec.mask.periodic;
  const bool has_bias = d_bias.extent(0) != 0;
  Kokkos::parallel_for(
      "attnphys::attention_softmax_backward", Kokkos::RangePolicy<Space>(0, t.nbh * rows),
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

// ---------------------------------------------------------------------------------------------------------------
// Fused tiled attention (host builds for AVX2/AVX-512 CPUs). One Kokkos kernel does the whole forward (scores,
// online softmax, p v) and one the whole backward, on register-blocked score tiles: R query rows × L keys at a time
// (L = lanes of one vector register: 16 floats or 8 doubles on AVX-512, 8 or 4 on AVX2), the L keys of a chunk in one vector, so a score tile is R
// vector accumulators over the dh dimensions; keys come transposed (kt [B*H, dh, Np], Np = N rounded up to L, zero
// padding) so that a chunk's dimension c is one vector load. No score block ever leaves L1 and there is no BLAS call
// (the many small gemms of the blocked path cost more in packing and call overhead than in arithmetic at dh ≤ 64).
// Used for the tiled kind when the scores are plain (no mask, no bias) and dh is 1, 2 or 4 vectors; everything
// else takes the blocked path below, which is also the reference the fused kernels are tested against.
#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)) && \
    defined(__GNUC__) && (defined(__AVX2__) || defined(__AVX512F__))
#define ATTNPHYS_FUSED_SDPA 1
namespace fused {
// One vector register of T and the number of vector registers: AVX-512 has 32 of 64 bytes, AVX2 16 of 32. (64-byte
// vectors on an AVX2 target were lowered to stack traffic: a main-job step took 1.6 s on a Zen 3, 0.12 s now.)
#if defined(__AVX512F__)
constexpr int kVecBytes = 64, kVecRegs = 32;
#else
constexpr int kVecBytes = 32, kVecRegs = 16;
#endif
template <class T>
struct Simd {
  typedef T type __attribute__((vector_size(kVecBytes)));
};
template <class T>
constexpr int lanes() {
  return kVecBytes / int(sizeof(T));
}
// Unaligned, aliasing vector loads and stores of one whole vector: one 64-byte instruction each. (A 64-byte
// memcpy was emitted as two 32-byte stores where GCC prefers 256-bit vectors, and the 64-byte load of the same
// score chunk right after them then missed store forwarding.)
template <class V>
struct Unaligned {
  typedef V type __attribute__((aligned(alignof(decltype(V{}[0]))), may_alias));
};
template <class V, class T>
KOKKOS_FORCEINLINE_FUNCTION V load(const T* p) {
  return *reinterpret_cast<const typename Unaligned<V>::type*>(p);
}
template <class V, class T>
KOKKOS_FORCEINLINE_FUNCTION void store(T* p, const V& v) {
  *reinterpret_cast<typename Unaligned<V>::type*>(p) = v;
}
constexpr long kKeys = 128;  // keys per block of the online softmax (a multiple of every lane count)
// Query rows per work item for dh = 2 vectors: with 16 registers, 6 rows give 12 independent accumulators (two
// per FMA pipe and latency) where 4 gave 8.
constexpr int kRows2 = kVecRegs >= 32 ? 4 : 6;

// Horizontal maximum and sum of one vector, as a tree (depth log2 L, not a chain of L dependent operations).
template <class T, class V>
KOKKOS_FORCEINLINE_FUNCTION T hmax(const V& v) {
  constexpr int L = lanes<T>();
  T t[L];
  __builtin_memcpy(t, &v, sizeof(V));
  for (int w = L / 2; w >= 1; w /= 2)
    for (int a = 0; a < w; ++a) t[a] = t[a + w] > t[a] ? t[a + w] : t[a];
  return t[0];
}
template <class T, class V>
KOKKOS_FORCEINLINE_FUNCTION T hsum(const V& v) {
  constexpr int L = lanes<T>();
  T t[L];
  __builtin_memcpy(t, &v, sizeof(V));
  for (int w = L / 2; w >= 1; w /= 2)
    for (int a = 0; a < w; ++a) t[a] += t[a + w];
  return t[0];
}

// fast_exp on one whole vector: the scalar float fast_exp's polynomial (layers.hpp, fast_exp_poly) on all lanes at
// once, so the exponentials of a score chunk stay in registers (a scalar loop into a stack array read back as one
// 64-byte vector stalled on store forwarding: 29 % of the forward's samples on one store). double keeps math::exp
// per lane, as the scalar version does, so double-precision gradient checks stay exact.
}  // namespace fused
template <>
struct FastExpInt<fused::Simd<float>::type> {
  typedef int type __attribute__((vector_size(sizeof(fused::Simd<float>::type))));
  KOKKOS_FORCEINLINE_FUNCTION static type convert(const fused::Simd<float>::type& x) {
    return __builtin_convertvector(x, type);
  }
};
namespace fused {
template <class V>
KOKKOS_FORCEINLINE_FUNCTION V vexp(const V& x, float) {
  return fast_exp_poly(x);
}
template <class V>
KOKKOS_FORCEINLINE_FUNCTION V vexp(const V& x, double) {
  V y;
  for (int a = 0; a < int(sizeof(V) / sizeof(double)); ++a) y[a] = math::exp(x[a]);
  return y;
}

// kt[bh, c, j] = src[bh, j, c] for j < n, 0 for n <= j < np.
template <class T, class Space>
void transpose_padded(T* kt, const T* src, long nbh, long n, long np, long dh) {
  attnphys::parallel_for<Space>(
      "attnphys::attention_fused_transpose", nbh * dh, KOKKOS_LAMBDA(long bc) {
        const long bh = bc / dh, c = bc % dh;
        const T* s = src + bh * n * dh + c;
        T* d = kt + bc * np;
        for (long j = 0; j < n; ++j) d[j] = s[j * dh];
        for (long j = n; j < np; ++j) d[j] = T(0);
      }, 4);
}

// s[r * kKeys + j] = Σ_c a[r][c] · bt[c, j0 + j] for R rows and the `chunks` vector chunks of one key block.
template <class T, int R, int DH>
KOKKOS_FORCEINLINE_FUNCTION void score_block(T* s, const T (&a)[R][DH], const T* bt, long np, long j0, long chunks) {
  using V = typename Simd<T>::type;
  constexpr int L = lanes<T>();
  long ch = 0;
  // Two chunks at a time where the registers allow: 2R independent accumulators instead of R (R chains of
  // dependent FMAs sat at the FMA latency), and each broadcast a[r][c] serves two vectors.
  if constexpr (2 * R + 2 <= kVecRegs) {
    for (; ch + 2 <= chunks; ch += 2) {
      V acc0[R], acc1[R];
      for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = V{};
      const T* col = bt + j0 + ch * L;
      for (int c = 0; c < DH; ++c) {
        const V k0 = load<V>(col + c * np), k1 = load<V>(col + c * np + L);
        for (int r = 0; r < R; ++r) {
          acc0[r] += a[r][c] * k0;
          acc1[r] += a[r][c] * k1;
        }
      }
      for (int r = 0; r < R; ++r) {
        store(s + r * kKeys + ch * L, acc0[r]);
        store(s + r * kKeys + ch * L + L, acc1[r]);
      }
    }
  }
  for (; ch < chunks; ++ch) {
    V acc[R];
    for (int r = 0; r < R; ++r) acc[r] = V{};
    const T* col = bt + j0 + ch * L;
    for (int c = 0; c < DH; ++c) {
      const V kv = load<V>(col + c * np);
      for (int r = 0; r < R; ++r) acc[r] += a[r][c] * kv;
    }
    for (int r = 0; r < R; ++r) store(s + r * kKeys + ch * L, acc[r]);
  }
}

template <class T, class Space, int R, int DH>
void forward(T* o, T* lse, const T* q, const T* kt, const T* v, long nbh, long n, long np) {
  using V = typename Simd<T>::type;
  constexpr int L = lanes<T>(), NV = DH / L;
  const long qblocks = (n + R - 1) / R;
  const T scale = T(1) / std::sqrt(T(DH));
  attnphys::parallel_for<Space>(
      "attnphys::attention_fused_forward", nbh * qblocks, KOKKOS_LAMBDA(long it) {
        const long bh = it / qblocks, i0 = (it % qblocks) * R;
        T qs[R][DH];  // scaled query rows (the last row repeated past n)
        for (int r = 0; r < R; ++r) {
          const long i = i0 + r < n ? i0 + r : n - 1;
          for (int c = 0; c < DH; ++c) qs[r][c] = q[(bh * n + i) * DH + c] * scale;
        }
        V acc[R][NV];  // output rows
        T m[R], l[R];  // running maxima and sums
        for (int r = 0; r < R; ++r) {
          for (int w = 0; w < NV; ++w) acc[r][w] = V{};
          m[r] = l[r] = T(0);
        }
        T s[R * kKeys];
        const T* ktb = kt + bh * DH * np;
        const T* vb = v + bh * n * DH;
        for (long j0 = 0; j0 < n; j0 += kKeys) {
          const long kb = n - j0 < kKeys ? n - j0 : kKeys, chunks = (kb + L - 1) / L;
          score_block<T, R, DH>(s, qs, ktb, np, j0, chunks);
          for (int r = 0; r < R; ++r) {
            T* sr = s + r * kKeys;
            for (long j = kb; j < chunks * L; ++j) sr[j] = sr[0];  // padding: no effect on the maximum
            V mv = load<V>(sr);
            for (long ch = 1; ch < chunks; ++ch) {
              const V x = load<V>(sr + ch * L);
              mv = x > mv ? x : mv;
            }
            const T mt = hmax<T>(mv);
            const T m_new = j0 == 0 || mt > m[r] ? mt : m[r];
            for (long j = kb; j < chunks * L; ++j) sr[j] = m_new - T(200);  // padding: exp gives exactly 0
            V sum = V{};
            for (long ch = 0; ch < chunks; ++ch) {
              const V ev = vexp(load<V>(sr + ch * L) - m_new, T(0));
              store(sr + ch * L, ev);
              sum += ev;
            }
            if (j0 == 0) {
              l[r] = hsum<T>(sum);
            } else {
              const T alpha = fast_exp(m[r] - m_new);
              l[r] = l[r] * alpha + hsum<T>(sum);
              for (int w = 0; w < NV; ++w) acc[r][w] *= alpha;
            }
            m[r] = m_new;
          }
          long j = 0;
          // Two keys at a time into a second set of accumulators (see score_block), where the registers allow.
          if constexpr (2 * R * NV + 2 * NV <= kVecRegs) {
            V acc2[R][NV];
            for (int r = 0; r < R; ++r)
              for (int w = 0; w < NV; ++w) acc2[r][w] = V{};
            for (; j + 2 <= kb; j += 2) {
              const T* vr = vb + (j0 + j) * DH;
              for (int w = 0; w < NV; ++w) {
                const V v0 = load<V>(vr + w * L), v1 = load<V>(vr + DH + w * L);
                for (int r = 0; r < R; ++r) {
                  acc[r][w] += s[r * kKeys + j] * v0;
                  acc2[r][w] += s[r * kKeys + j + 1] * v1;
                }
              }
            }
            for (int r = 0; r < R; ++r)
              for (int w = 0; w < NV; ++w) acc[r][w] += acc2[r][w];
          }
          for (; j < kb; ++j) {
            const T* vr = vb + (j0 + j) * DH;
            for (int w = 0; w < NV; ++w) {
              const V vv = load<V>(vr + w * L);
              for (int r = 0; r < R; ++r) acc[r][w] += s[r * kKeys + j] * vv;
            }
          }
        }
        for (int r = 0; r < R && i0 + r < n; ++r) {
          const long i = i0 + r;
          const T sum = l[r], inv = T(1) / sum;
          for (int w = 0; w < NV; ++w) store(o + (bh * n + i) * DH + w * L, acc[r][w] * inv);
          lse[bh * n + i] = m[r] + math::log(sum);
        }
      });
}

// One work item per head slice: over query blocks of R rows, over key blocks, recompute p = exp(s - lse), then
// dp = dO vᵀ, ds = p (dp - D), dv += pᵀ dO, dk += scale dsᵀ q, dq += scale ds k. dq, dk, dv are written (zeroed
// here); D = rowdot.
template <class T, class Space, int R, int DH>
void backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* kt, const T* vt,
              const T* lse, const T* rowdot, long nbh, long n, long np) {
  using V = typename Simd<T>::type;
  constexpr int L = lanes<T>(), NV = DH / L;
  const T scale = T(1) / std::sqrt(T(DH));
  attnphys::parallel_for<Space>(
      "attnphys::attention_fused_backward", nbh, KOKKOS_LAMBDA(long bh) {
        const T* ktb = kt + bh * DH * np;
        const T* vtb = vt + bh * DH * np;
        const T* kb_rows = k + bh * n * DH;
        T* dkb = dk + bh * n * DH;
        T* dvb = dv + bh * n * DH;
        for (long x = 0; x < n * DH; ++x) dkb[x] = dvb[x] = T(0);
        T p[R * kKeys], ds[R * kKeys];
        for (long i0 = 0; i0 < n; i0 += R) {
          T qs[R][DH], qr[R][DH], dor[R][DH], lr[R], dr[R];
          for (int r = 0; r < R; ++r) {
            const long i = i0 + r < n ? i0 + r : n - 1;
            const bool live = i0 + r < n;  // rows past n contribute nothing (their dO is taken as 0)
            for (int c = 0; c < DH; ++c) {
              qr[r][c] = q[(bh * n + i) * DH + c];
              qs[r][c] = qr[r][c] * scale;
              dor[r][c] = live ? dout[(bh * n + i) * DH + c] : T(0);
            }
            lr[r] = lse[bh * n + i];
            dr[r] = live ? rowdot[bh * n + i] : T(0);
          }
          V dqa[R][NV];
          for (int r = 0; r < R; ++r)
            for (int w = 0; w < NV; ++w) dqa[r][w] = V{};
          for (long j0 = 0; j0 < n; j0 += kKeys) {
            const long kb = n - j0 < kKeys ? n - j0 : kKeys, chunks = (kb + L - 1) / L;
            score_block<T, R, DH>(p, qs, ktb, np, j0, chunks);
            score_block<T, R, DH>(ds, dor, vtb, np, j0, chunks);  // dp = dO vᵀ
            for (int r = 0; r < R; ++r) {
              T* pr = p + r * kKeys;
              T* dsr = ds + r * kKeys;
              for (long ch = 0; ch < chunks; ++ch) {
                const V e = vexp(load<V>(pr + ch * L) - lr[r], T(0));
                store(pr + ch * L, e);
                store(dsr + ch * L, e * (load<V>(dsr + ch * L) - dr[r]) * scale);
              }
            }
            if constexpr (kVecRegs >= 32) {
              // One pass over the keys for dv, dk and dq (the rows' dO and q read from L1 per key).
              for (long j = 0; j < kb; ++j) {
                T* dvr = dvb + (j0 + j) * DH;
                T* dkr = dkb + (j0 + j) * DH;
                const T* kr = kb_rows + (j0 + j) * DH;
                for (int w = 0; w < NV; ++w) {
                  V a = load<V>(dvr + w * L), b = load<V>(dkr + w * L);
                  const V kv = load<V>(kr + w * L);
                  for (int r = 0; r < R; ++r) {
                    V dov, qv;
                    __builtin_memcpy(&dov, &dor[r][w * L], sizeof(V));
                    __builtin_memcpy(&qv, &qr[r][w * L], sizeof(V));
                    a += p[r * kKeys + j] * dov;
                    b += ds[r * kKeys + j] * qv;
                    dqa[r][w] += ds[r * kKeys + j] * kv;
                  }
                  store(dvr + w * L, a);
                  store(dkr + w * L, b);
                }
              }
            } else {
              // 16 registers (AVX2): three passes, each with its R x NV operand block held in registers: dq += ds k
              // (accumulators in dqa), dv += pᵀ dO and dk += dsᵀ q (the rows' dO, then q, in registers). One pass
              // needed more registers than there are and was bound by the reloads of dO and q.
              for (long j = 0; j < kb; ++j) {
                const T* kr = kb_rows + (j0 + j) * DH;
                for (int w = 0; w < NV; ++w) {
                  const V kv = load<V>(kr + w * L);
                  for (int r = 0; r < R; ++r) dqa[r][w] += ds[r * kKeys + j] * kv;
                }
              }
              const auto outer = [&](T* acc, const T (&rows)[R][DH], const T* coef) {
                V rv[R][NV];
                for (int r = 0; r < R; ++r)
                  for (int w = 0; w < NV; ++w) rv[r][w] = load<V>(&rows[r][w * L]);
                for (long j = 0; j < kb; ++j) {
                  T* ar = acc + (j0 + j) * DH;
                  V a[NV];
                  for (int w = 0; w < NV; ++w) a[w] = load<V>(ar + w * L);
                  for (int r = 0; r < R; ++r) {
                    const T c = coef[r * kKeys + j];
                    for (int w = 0; w < NV; ++w) a[w] += c * rv[r][w];
                  }
                  for (int w = 0; w < NV; ++w) store(ar + w * L, a[w]);
                }
              };
              outer(dvb, dor, p);
              outer(dkb, qr, ds);
            }
          }
          for (int r = 0; r < R && i0 + r < n; ++r)
            for (int w = 0; w < NV; ++w) store(dq + (bh * n + i0 + r) * DH + w * L, dqa[r][w]);
        }
      });
}

template <class T, class Space>
bool applies(long dh, const ScoreSpec<T, Space>& spec) {
  constexpr int L = lanes<T>();
  return plain_scores(spec) && (dh == L || dh == 2 * L || dh == 4 * L);
}
template <class T>
long padded(long n) {
  return (n + lanes<T>() - 1) / lanes<T>() * lanes<T>();
}

template <class T, class Space>
void run_forward(const Mat3On<T, Space>& o, const MatOn<T, Space>& lse, const ConstMat3On<T, Space>& q,
                 const ConstMat3On<T, Space>& k, const ConstMat3On<T, Space>& v, AttentionScratch<T, Space>& ws) {
  constexpr int L = lanes<T>();
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2), np = padded<T>(n);
  T* kt = ws.ensure(ws.tile, nbh * dh * np, "attnphys::attention_tile");
  transpose_padded<T, Space>(kt, k.data(), nbh, n, np, dh);
  if (dh == L) forward<T, Space, 8, L>(o.data(), lse.data(), q.data(), kt, v.data(), nbh, n, np);
  else if (dh == 2 * L) forward<T, Space, kRows2, 2 * L>(o.data(), lse.data(), q.data(), kt, v.data(), nbh, n, np);
  else forward<T, Space, 4, 4 * L>(o.data(), lse.data(), q.data(), kt, v.data(), nbh, n, np);
}

template <class T, class Space>
void run_backward(const Mat3On<T, Space>& dq, const Mat3On<T, Space>& dk, const Mat3On<T, Space>& dv,
                  const ConstMat3On<T, Space>& dout, const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k,
                  const ConstMat3On<T, Space>& v, const ConstMatOn<T, Space>& lse, const T* rowdot,
                  AttentionScratch<T, Space>& ws) {
  constexpr int L = lanes<T>();
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2), np = padded<T>(n);
  T* kt = ws.ensure(ws.tile, nbh * dh * np, "attnphys::attention_tile");
  T* vt = ws.ensure(ws.dtile, nbh * dh * np, "attnphys::attention_dtile");
  transpose_padded<T, Space>(kt, k.data(), nbh, n, np, dh);
  transpose_padded<T, Space>(vt, v.data(), nbh, n, np, dh);
  const auto args = [&](auto fn) {
    fn(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), kt, vt, lse.data(), rowdot, nbh, n, np);
  };
  if (dh == L) args(backward<T, Space, 8, L>);
  else if (dh == 2 * L) args(backward<T, Space, kRows2, 2 * L>);
  else args(backward<T, Space, 2, 4 * L>);
}
}  // namespace fused
#endif

long fused_attention_lanes(std::size_t element_bytes) {
#ifdef ATTNPHYS_FUSED_SDPA
  return fused::kVecBytes / long(element_bytes);
#else
  (void)element_bytes;
  return 0;
#endif
}

// The bf16 (AMX / AVX512-BF16) kernels run on the default execution space of a host build only (their threads are the host
// pool's).
template <class Space>
void require_bf16_space(const char* where) {
  require(std::is_same<Space, ExecSpace>::value && host_accessible<Space>(),
          msg(where, ": bf16 attention runs on the default host execution space only; set "
                     "encoder.attention_precision = float32"));
}

// The bf16 kernels' conditions (AttentionScratch::bf16), checked on every call: options validation refuses the
// static ones earlier; a key mask (padding) is only known here.
template <class T, class Space>
void require_bf16(long dh, const ScoreSpec<T, Space>& spec, const char* where) {
  require(std::is_same<T, float>::value, msg(where, ": bf16 attention runs on float32 models only"));
  require(dh == amx::kHeadDim, msg(where, ": bf16 attention needs head width ", amx::kHeadDim,
                                   " (d_model / n_heads), not ", dh, "; set encoder.attention_precision = float32"));
  require(plain_scores(spec), msg(where, ": bf16 attention takes no causal or window mask, key mask (padding) or "
                                         "relative bias; set encoder.attention_precision = float32"));
  require(amx::available(), msg(where, ": bf16 attention cannot run here: ", amx::unavailable_reason(),
                                "; set encoder.attention_precision = float32"));
}

template <class T, class Space>
void sdpa_forward(const Mat3On<T, Space>& o, const Mat3On<T, Space>& p, const MatOn<T, Space>& lse,
                  const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k, const ConstMat3On<T, Space>& v,
                  const ScoreSpec<T, Space>& spec, AttentionScratch<T, Space>& ws) {
  ScopedRegion region("attnphys::sdpa_forward");
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2);
  require(k.extent(1) == q.extent(1) && v.extent(1) == q.extent(1), "sdpa_forward: q, k, v lengths differ");
  const T scale = T(1) / std::sqrt(T(dh));
  if (p.extent(0) != 0) {  // dense: exact softmax over every key, probabilities saved
    require(!ws.bf16, "sdpa_forward: bf16 attention needs encoder.attention = tiled, not dense");
    for (const auto& t : dense_tiles(nbh, n, ws.tile_budget, ws.min_tile_rows)) {
      T* s = p.data() + (t.bh0 * n + t.i0) * n;
      tile_scores<T, Space>(s, t, q, k, scale);
      tile_softmax<T, Space>(s, t, lse, spec);
      for (long a = 0; a < t.nbh; ++a) {
        const long bh = t.bh0 + a;
        gemm_on<Space, T>('N', 'N', T(1), ConstMatOn<T, Space>(s + a * t.stride, t.rows, n),
                          ConstMatOn<T, Space>(v.data() + bh * n * dh, n, dh), T(0),
                          MatOn<T, Space>(o.data() + (bh * n + t.i0) * dh, t.rows, dh));
      }
    }
    return;
  }
  if (ws.bf16) {
    require_bf16_space<Space>("sdpa_forward");
    require_bf16<T>(dh, spec, "sdpa_forward");
    amx::forward(reinterpret_cast<float*>(o.data()), reinterpret_cast<float*>(lse.data()),
                 reinterpret_cast<const float*>(q.data()), reinterpret_cast<const float*>(k.data()),
                 reinterpret_cast<const float*>(v.data()), nbh, n, ws.ensure_bf16(amx::forward_scratch(nbh, n)),
                 ws.bf16_tile_schedule);
    return;
  }
#ifdef ATTNPHYS_FUSED_SDPA
  if (ws.fused && fused::applies<T>(dh, spec)) {
    fused::run_forward<T, Space>(o, lse, q, k, v, ws);
    return;
  }
#endif
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
        tile_scores<T, Space>(s, t, q, k, scale);
        tile_online_softmax<T, Space>(s, t, o.data(), lse, l, dh, spec);
        for (long a = 0; a < ns; ++a) {
          const long bh = bh0 + a;
          gemm_on<Space, T>('N', 'N', T(1), ConstMatOn<T, Space>(s + a * t.stride, r, c),
                            ConstMatOn<T, Space>(v.data() + (bh * n + j0) * dh, c, dh), T(1),
                            MatOn<T, Space>(o.data() + (bh * n + i0) * dh, r, dh));
        }
      }
    }
  }
  online_softmax_finish<T, Space>(o.data(), lse, l, nbh, n, dh);
}

template <class T, class Space>
void attention_scores(const Mat3On<T, Space>& s, const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k) {
  require(s.extent(0) == q.extent(0) && s.extent(1) == q.extent(1) && s.extent(2) == k.extent(1),
          "attention_scores: s must be [B*H, N, N]");
  const long n = q.extent(1);
  tile_scores<T, Space>(s.data(), Tile{0, long(q.extent(0)), 0, n, 0, n, n, n * n}, q, k,
                        T(1) / std::sqrt(T(q.extent(2))));
}

template <class T, class Space>
void row_dot(T* out, const ConstMat3On<T, Space>& a, const ConstMat3On<T, Space>& b) {
  const long rows = long(a.extent(0)) * long(a.extent(1)), dh = a.extent(2);
  const T* pa = a.data();
  const T* pb = b.data();
  attnphys::parallel_for<Space>(
      "attnphys::attention_rowdot", rows, KOKKOS_LAMBDA(long r) {
        T s = 0;
        for (long c = 0; c < dh; ++c) s += pa[r * dh + c] * pb[r * dh + c];
        out[r] = s;
      }, 64);
}

template <class T, class Space>
void sdpa_backward(const Mat3On<T, Space>& dq, const Mat3On<T, Space>& dk, const Mat3On<T, Space>& dv,
                   const MatOn<T, Space>& d_rel_bias, const ConstMat3On<T, Space>& dout, const ConstMat3On<T, Space>& q,
                   const ConstMat3On<T, Space>& k, const ConstMat3On<T, Space>& v, const ConstMat3On<T, Space>& o,
                   const ConstMat3On<T, Space>& p, const ConstMatOn<T, Space>& lse, const ScoreSpec<T, Space>& spec,
                   AttentionScratch<T, Space>& ws) {
  ScopedRegion region("attnphys::sdpa_backward");
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2);
  const T scale = T(1) / std::sqrt(T(dh));
  T* rowdot = ws.ensure(ws.rowdot, nbh * n, "attnphys::attention_rowdot");
  row_dot<T, Space>(rowdot, dout, o);  // D = rowsum(dO ⊙ O)
  if (p.extent(0) != 0) {    // dense: the saved probabilities, tiles of query rows against every key
    require(!ws.bf16, "sdpa_backward: bf16 attention needs encoder.attention = tiled, not dense");
    const auto tiles = dense_tiles(nbh, n, ws.tile_budget, ws.min_tile_rows);
    T* ds = ws.ensure(ws.dtile, tiles[0].nbh * tiles[0].rows * n, "attnphys::attention_dtile");
    for (const auto& t : tiles) {
      const T* s = p.data() + (t.bh0 * n + t.i0) * n;
      const T beta = t.i0 == 0 ? T(0) : T(1);
      const long r = t.rows;
      for (long a = 0; a < t.nbh; ++a) {
        const long bh = t.bh0 + a;
        ConstMatOn<T, Space> dot(dout.data() + (bh * n + t.i0) * dh, r, dh);
        gemm_on<Space, T>('N', 'T', T(1), dot, ConstMatOn<T, Space>(v.data() + bh * n * dh, n, dh), T(0),
                          MatOn<T, Space>(ds + a * r * n, r, n));
        gemm_on<Space, T>('T', 'N', T(1), ConstMatOn<T, Space>(s + a * t.stride, r, n), dot, beta,
                          MatOn<T, Space>(dv.data() + bh * n * dh, n, dh));
      }
      tile_softmax_backward<T, Space>(ds, s, t, rowdot, d_rel_bias, spec);
      for (long a = 0; a < t.nbh; ++a) {
        const long bh = t.bh0 + a;
        ConstMatOn<T, Space> dst(ds + a * r * n, r, n);
        gemm_on<Space, T>('N', 'N', scale, dst, ConstMatOn<T, Space>(k.data() + bh * n * dh, n, dh), T(0),
             MatOn<T, Space>(dq.data() + (bh * n + t.i0) * dh, r, dh));
        gemm_on<Space, T>('T', 'N', scale, dst, ConstMatOn<T, Space>(q.data() + (bh * n + t.i0) * dh, r, dh), beta,
             MatOn<T, Space>(dk.data() + bh * n * dh, n, dh));
      }
    }
    return;
  }
  if (ws.bf16) {
    require_bf16_space<Space>("sdpa_backward");
    require_bf16<T>(dh, spec, "sdpa_backward");
    amx::backward(reinterpret_cast<float*>(dq.data()), reinterpret_cast<float*>(dk.data()),
                  reinterpret_cast<float*>(dv.data()), reinterpret_cast<const float*>(dout.data()),
                  reinterpret_cast<const float*>(q.data()), reinterpret_cast<const float*>(k.data()),
                  reinterpret_cast<const float*>(v.data()), reinterpret_cast<const float*>(lse.data()),
                  reinterpret_cast<const float*>(rowdot), nbh, n, ws.ensure_bf16(amx::backward_scratch(nbh, n)),
                  ws.bf16_tile_schedule);
    return;
  }
#ifdef ATTNPHYS_FUSED_SDPA
  if (ws.fused && fused::applies<T>(dh, spec)) {
    fused::run_backward<T, Space>(dq, dk, dv, dout, q, k, v, lse, rowdot, ws);
    return;
  }
#endif
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
        tile_scores<T, Space>(s, t, q, k, scale);
        tile_recompute<T, Space>(s, t, lse, spec);
        for (long a = 0; a < ns; ++a) {
          const long bh = bh0 + a;
          ConstMatOn<T, Space> dot(dout.data() + (bh * n + i0) * dh, r, dh);
          gemm_on<Space, T>('T', 'N', T(1), ConstMatOn<T, Space>(s + a * t.stride, r, c), dot, T(1),
               MatOn<T, Space>(dv.data() + (bh * n + j0) * dh, c, dh));
          gemm_on<Space, T>('N', 'T', T(1), dot, ConstMatOn<T, Space>(v.data() + (bh * n + j0) * dh, c, dh), T(0),
               MatOn<T, Space>(ds + a * t.stride, r, c));
        }
        tile_softmax_backward<T, Space>(ds, s, t, rowdot, d_rel_bias, spec);
        for (long a = 0; a < ns; ++a) {
          const long bh = bh0 + a;
          ConstMatOn<T, Space> dst(ds + a * t.stride, r, c);
          gemm_on<Space, T>('N', 'N', scale, dst, ConstMatOn<T, Space>(k.data() + (bh * n + j0) * dh, c, dh), T(1),
               MatOn<T, Space>(dq.data() + (bh * n + i0) * dh, r, dh));
          gemm_on<Space, T>('T', 'N', scale, dst, ConstMatOn<T, Space>(q.data() + (bh * n + i0) * dh, r, dh), T(1),
               MatOn<T, Space>(dk.data() + (bh * n + j0) * dh, c, dh));
        }
      }
    }
  }
}

template <class T, class Space>
void sdpa_row(const VecOn<T, Space>& out, const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k,
              const ConstMatOn<T, Space>& lse, const ScoreSpec<T, Space>& spec, long bh, long i) {
  const long n = k.extent(1), dh = q.extent(2), heads = spec.heads, max_len = spec.max_len;
  require(long(out.extent(0)) == n, "sdpa_row: output has ", out.extent(0), " entries, need ", n);
  const T scale = T(1) / std::sqrt(T(dh));
  const AttentionMaskOn<Space> mask = spec.mask;
  const ConstMatOn<T, Space> bias = spec.rel_bias;
  const bool has_bias = bias.extent(0) != 0;
  attnphys::parallel_for<Space>(
      "attnphys::attention_row", n, KOKKOS_LAMBDA(long j) {
        T s = 0;
        for (long c = 0; c < dh; ++c) s += q(bh, i, c) * k(bh, j, c);
        s *= scale;
        if (has_bias) s += bias(bh % heads, relative_index(i, j, n, max_len, mask.periodic));
        const T l = lse(bh, i);
        out(j) =
            mask.allowed(bh / heads, i, j, n) && l != Kokkos::reduction_identity<T>::max() ? math::exp(s - l) : T(0);
      }, 4096);
}

template <class T, class Space>
void factored_forward(const Mat3On<T, Space>& o, const Mat3On<T, Space>& p, const ConstMat3On<T, Space>& v,
                      const ConstMatOn<T, Space>& alpha, const ScoreSpec<T, Space>& spec) {
  ScopedRegion region("attnphys::factored_forward");
  const long nbh = v.extent(0), n = v.extent(1), heads = spec.heads, max_len = spec.max_len;
  const AttentionMaskOn<Space> mask = spec.mask;
  Kokkos::parallel_for(
      "attnphys::factored_forward", Kokkos::MDRangePolicy<Space, Kokkos::Rank<3>>({0, 0, 0}, {nbh, n, n}),
      KOKKOS_LAMBDA(long bh, long i, long j) {
        p(bh, i, j) = mask.allowed(bh / heads, i, j, n)
                          ? alpha(bh % heads, relative_index(i, j, n, max_len, mask.periodic))
                          : T(0);
      });
  batched_gemm_on<Space, T>('N', 'N', T(1), p, v, T(0), o);
}

template <class T, class Space>
void factored_backward(const Mat3On<T, Space>& dv, const MatOn<T, Space>& d_alpha, const ConstMat3On<T, Space>& dout,
                       const ConstMat3On<T, Space>& v, const ConstMat3On<T, Space>& p, const ScoreSpec<T, Space>& spec,
                       AttentionScratch<T, Space>& ws) {
  ScopedRegion region("attnphys::factored_backward");
  const long nbh = v.extent(0), n = v.extent(1), heads = spec.heads, max_len = spec.max_len;
  const AttentionMaskOn<Space> mask = spec.mask;
  Mat3On<T, Space> dp(ws.ensure(ws.dtile, nbh * n * n, "attnphys::attention_dtile"), nbh, n, n);
  batched_gemm_on<Space, T>('N', 'T', T(1), dout, v, T(0), dp);
  batched_gemm_on<Space, T>('T', 'N', T(1), p, dout, T(0), dv);
  Kokkos::parallel_for(
      "attnphys::factored_backward", Kokkos::MDRangePolicy<Space, Kokkos::Rank<3>>({0, 0, 0}, {nbh, n, n}),
      KOKKOS_LAMBDA(long bh, long i, long j) {
        if (mask.allowed(bh / heads, i, j, n))
          Kokkos::atomic_add(&d_alpha(bh % heads, relative_index(i, j, n, max_len, mask.periodic)), dp(bh, i, j));
      });
}

namespace {
// rows [B*N, H*dh] (token-major, heads side by side) <-> per-head blocks [H, N, B*dh] (one [N, B*dh] matrix per head).
// Each work item moves one contiguous run of dh values.
template <class T, class Space>
void rows_to_head_blocks(const Mat3On<T, Space>& blocks, const ConstMatOn<T, Space>& rows, long batch, long n,
                         long heads) {
  const long dh = blocks.extent(2) / batch;
  Kokkos::parallel_for(
      "attnphys::factored_to_blocks", Kokkos::MDRangePolicy<Space, Kokkos::Rank<3>>({0, 0, 0}, {batch, n, heads}),
      KOKKOS_LAMBDA(long b, long j, long h) {
        const T* src = &rows(b * n + j, h * dh);
        T* dst = &blocks(h, j, b * dh);
        for (long c = 0; c < dh; ++c) dst[c] = src[c];
      });
}
template <class T, class Space>
void head_blocks_to_rows(const MatOn<T, Space>& rows, const ConstMat3On<T, Space>& blocks, long batch, long n,
                         long heads) {
  const long dh = blocks.extent(2) / batch;
  Kokkos::parallel_for(
      "attnphys::factored_to_rows", Kokkos::MDRangePolicy<Space, Kokkos::Rank<3>>({0, 0, 0}, {batch, n, heads}),
      KOKKOS_LAMBDA(long b, long i, long h) {
        const T* src = &blocks(h, i, b * dh);
        T* dst = &rows(b * n + i, h * dh);
        for (long c = 0; c < dh; ++c) dst[c] = src[c];
      });
}
template <class T, class Space>
void factored_weights(const Mat3On<T, Space>& p, const ConstMatOn<T, Space>& alpha, long n,
                      const ScoreSpec<T, Space>& spec) {
  const long heads = spec.heads, max_len = spec.max_len;
  const AttentionMaskOn<Space> mask = spec.mask;
  Kokkos::parallel_for(
      "attnphys::factored_weights", Kokkos::MDRangePolicy<Space, Kokkos::Rank<3>>({0, 0, 0}, {heads, n, n}),
      KOKKOS_LAMBDA(long h, long i, long j) {
        p(h, i, j) = mask.allowed(0, i, j, n) ? alpha(h, relative_index(i, j, n, max_len, mask.periodic)) : T(0);
      });
}
}  // namespace

template <class T, class Space>
void factored_rows_forward(const MatOn<T, Space>& out, const FactoredRowsBuffers<T, Space>& buf,
                           const ConstMatOn<T, Space>& in, const ConstMatOn<T, Space>& alpha, long batch, long n,
                           const ScoreSpec<T, Space>& spec) {
  ScopedRegion region("attnphys::factored_rows_forward");
  const long d = in.extent(1), heads = spec.heads, dh = d / heads;
  require(spec.mask.key_mask.extent(0) == 0, "factored_rows_forward: a key mask needs the per-sample path");
  require(long(in.extent(0)) == batch * n && long(out.extent(0)) == batch * n && long(out.extent(1)) == d &&
              long(buf.vt.extent(0)) == heads && long(buf.vt.extent(1)) == n &&
              long(buf.vt.extent(2)) == batch * dh && buf.ot.extent(2) == buf.vt.extent(2) &&
              long(buf.p.extent(0)) == heads && long(buf.p.extent(1)) == n,
          "factored_rows_forward: shapes disagree");
  factored_weights<T, Space>(buf.p, alpha, n, spec);
  rows_to_head_blocks<T, Space>(buf.vt, in, batch, n, heads);
  // One gemm per head over the whole batch: O_h [N, B*dh] = P_h [N, N] V_h [N, B*dh].
  batched_gemm_on<Space, T>('N', 'N', T(1), ConstMat3On<T, Space>(buf.p.data(), heads, n, n),
               ConstMat3On<T, Space>(buf.vt.data(), heads, n, batch * dh), T(0), buf.ot);
  head_blocks_to_rows<T, Space>(out, ConstMat3On<T, Space>(buf.ot.data(), heads, n, batch * dh), batch, n, heads);
}

template <class T, class Space>
void factored_rows_backward(const MatOn<T, Space>& din, const MatOn<T, Space>& d_alpha,
                            const FactoredRowsBuffers<T, Space>& buf, const ConstMatOn<T, Space>& dout, long batch,
                            long n, const ScoreSpec<T, Space>& spec) {
  ScopedRegion region("attnphys::factored_rows_backward");
  const long heads = spec.heads, dh = buf.vt.extent(2) / batch, max_len = spec.max_len;
  require(spec.mask.key_mask.extent(0) == 0, "factored_rows_backward: a key mask needs the per-sample path");
  const AttentionMaskOn<Space> mask = spec.mask;
  // buf.vt and buf.p hold the forward's V blocks and weights; buf.ot is reused for dO blocks, buf.dvt for dV blocks.
  rows_to_head_blocks<T, Space>(buf.ot, dout, batch, n, heads);
  const ConstMat3On<T, Space> dot(buf.ot.data(), heads, n, batch * dh), vt(buf.vt.data(), heads, n, batch * dh);
  if (din.extent(0) != 0) {
    batched_gemm_on<Space, T>('T', 'N', T(1), ConstMat3On<T, Space>(buf.p.data(), heads, n, n), dot, T(0), buf.dvt);
    head_blocks_to_rows<T, Space>(din, ConstMat3On<T, Space>(buf.dvt.data(), heads, n, batch * dh), batch, n, heads);
  }
  // dP_h = dO_h V_hᵀ [N, N], then d_alpha(h, r) += Σ over allowed pairs with relative index r.
  batched_gemm_on<Space, T>('N', 'T', T(1), dot, vt, T(0), buf.dp);
  const auto dp = buf.dp;
  Kokkos::parallel_for(
      "attnphys::factored_rows_dalpha", Kokkos::MDRangePolicy<Space, Kokkos::Rank<3>>({0, 0, 0}, {heads, n, n}),
      KOKKOS_LAMBDA(long h, long i, long j) {
        if (mask.allowed(0, i, j, n))
          Kokkos::atomic_add(&d_alpha(h, relative_index(i, j, n, max_len, mask.periodic)), dp(h, i, j));
      });
}

template <class T, class Space>
void galerkin_forward(const Mat3On<T, Space>& o, const Mat3On<T, Space>& kv, const ConstMat3On<T, Space>& q,
                      const ConstMat3On<T, Space>& kn, const ConstMat3On<T, Space>& vn) {
  ScopedRegion region("attnphys::galerkin_forward");
  const long n = q.extent(1);
  batched_gemm_on<Space, T>('T', 'N', T(1), kn, vn, T(0), kv);
  batched_gemm_on<Space, T>('N', 'N', T(1) / T(n), q,
                            ConstMat3On<T, Space>(kv.data(), kv.extent(0), kv.extent(1), kv.extent(2)), T(0), o);
}

template <class T, class Space>
void galerkin_backward(const Mat3On<T, Space>& dq, const Mat3On<T, Space>& dkn, const Mat3On<T, Space>& dvn,
                       const ConstMat3On<T, Space>& dout, const ConstMat3On<T, Space>& q,
                       const ConstMat3On<T, Space>& kn, const ConstMat3On<T, Space>& vn,
                       const ConstMat3On<T, Space>& kv, AttentionScratch<T, Space>& ws) {
  ScopedRegion region("attnphys::galerkin_backward");
  const long nbh = q.extent(0), n = q.extent(1), dh = q.extent(2);
  Mat3On<T, Space> dkv(ws.ensure(ws.dtile, nbh * dh * dh, "attnphys::attention_dtile"), nbh, dh, dh);
  batched_gemm_on<Space, T>('N', 'T', T(1) / T(n), dout, kv, T(0), dq);
  batched_gemm_on<Space, T>('T', 'N', T(1) / T(n), q, dout, T(0), dkv);
  const ConstMat3On<T, Space> cdkv(dkv.data(), nbh, dh, dh);
  batched_gemm_on<Space, T>('N', 'T', T(1), vn, cdkv, T(0), dkn);
  batched_gemm_on<Space, T>('N', 'N', T(1), kn, cdkv, T(0), dvn);
}

template <class T, class Space>
void split_heads(const Mat3On<T, Space>& out, const ConstMatOn<T, Space>& in, long col0, long batch, long heads) {
  const long n = out.extent(1), dh = out.extent(2);
  require(long(out.extent(0)) == batch * heads && long(in.extent(0)) == batch * n &&
              long(in.extent(1)) >= col0 + heads * dh,
          "split_heads: shapes disagree");
  // One work item per (token, head): a contiguous run of dh values.
  attnphys::parallel_for<Space>(
      "attnphys::split_heads", batch * n * heads, KOKKOS_LAMBDA(long th) {
        const long t = th / heads, h = th % heads, b = t / n, i = t % n;
        const T* src = &in(t, col0 + h * dh);
        T* dst = &out(b * heads + h, i, 0);
        for (long c = 0; c < dh; ++c) dst[c] = src[c];
      }, 1024);
}

template <class T, class Space>
void merge_heads(const MatOn<T, Space>& out, long col0, const ConstMat3On<T, Space>& in, long batch, long heads) {
  const long n = in.extent(1), dh = in.extent(2);
  require(long(in.extent(0)) == batch * heads && long(out.extent(0)) == batch * n &&
              long(out.extent(1)) >= col0 + heads * dh,
          "merge_heads: shapes disagree");
  attnphys::parallel_for<Space>(
      "attnphys::merge_heads", batch * n * heads, KOKKOS_LAMBDA(long th) {
        const long t = th / heads, h = th % heads, b = t / n, i = t % n;
        const T* src = &in(b * heads + h, i, 0);
        T* dst = &out(t, col0 + h * dh);
        for (long c = 0; c < dh; ++c) dst[c] = src[c];
      }, 1024);
}

// Every kernel for T = float and double on every enabled execution space (core/spaces.hpp).
#define ATTNPHYS_INSTANTIATE_ATTENTION_CORE(T, S)                                                                \
  template struct AttentionScratch<T, S>;                                                                        \
  template void sdpa_forward<T, S>(const Mat3On<T, S>&, const Mat3On<T, S>&, const MatOn<T, S>&,                 \
                                   const ConstMat3On<T, S>&, const ConstMat3On<T, S>&, const ConstMat3On<T, S>&, \
                                   const ScoreSpec<T, S>&, AttentionScratch<T, S>&);                             \
  template void sdpa_backward<T, S>(const Mat3On<T, S>&, const Mat3On<T, S>&, const Mat3On<T, S>&,               \
                                    const MatOn<T, S>&, const ConstMat3On<T, S>&, const ConstMat3On<T, S>&,      \
                                    const ConstMat3On<T, S>&, const ConstMat3On<T, S>&, const ConstMat3On<T, S>&, \
                                    const ConstMat3On<T, S>&, const ConstMatOn<T, S>&, const ScoreSpec<T, S>&,   \
                                    AttentionScratch<T, S>&);                                                    \
  template void attention_scores<T, S>(const Mat3On<T, S>&, const ConstMat3On<T, S>&, const ConstMat3On<T, S>&); \
  template void sdpa_row<T, S>(const VecOn<T, S>&, const ConstMat3On<T, S>&, const ConstMat3On<T, S>&,           \
                               const ConstMatOn<T, S>&, const ScoreSpec<T, S>&, long, long);                     \
  template void factored_forward<T, S>(const Mat3On<T, S>&, const Mat3On<T, S>&, const ConstMat3On<T, S>&,       \
                                       const ConstMatOn<T, S>&, const ScoreSpec<T, S>&);                         \
  template void factored_backward<T, S>(const Mat3On<T, S>&, const MatOn<T, S>&, const ConstMat3On<T, S>&,       \
                                        const ConstMat3On<T, S>&, const ConstMat3On<T, S>&,                      \
                                        const ScoreSpec<T, S>&, AttentionScratch<T, S>&);                        \
  template void factored_rows_forward<T, S>(const MatOn<T, S>&, const FactoredRowsBuffers<T, S>&,                \
                                            const ConstMatOn<T, S>&, const ConstMatOn<T, S>&, long, long,        \
                                            const ScoreSpec<T, S>&);                                             \
  template void factored_rows_backward<T, S>(const MatOn<T, S>&, const MatOn<T, S>&,                             \
                                             const FactoredRowsBuffers<T, S>&, const ConstMatOn<T, S>&, long,    \
                                             long, const ScoreSpec<T, S>&);                                      \
  template void galerkin_forward<T, S>(const Mat3On<T, S>&, const Mat3On<T, S>&, const ConstMat3On<T, S>&,       \
                                       const ConstMat3On<T, S>&, const ConstMat3On<T, S>&);                      \
  template void galerkin_backward<T, S>(const Mat3On<T, S>&, const Mat3On<T, S>&, const Mat3On<T, S>&,           \
                                        const ConstMat3On<T, S>&, const ConstMat3On<T, S>&,                      \
                                        const ConstMat3On<T, S>&, const ConstMat3On<T, S>&,                      \
                                        const ConstMat3On<T, S>&, AttentionScratch<T, S>&);                      \
  template void split_heads<T, S>(const Mat3On<T, S>&, const ConstMatOn<T, S>&, long, long, long);               \
  template void merge_heads<T, S>(const MatOn<T, S>&, long, const ConstMat3On<T, S>&, long, long);
#define ATTNPHYS_ATTENTION_CORE_ON(S) \
  ATTNPHYS_INSTANTIATE_ATTENTION_CORE(float, S) ATTNPHYS_INSTANTIATE_ATTENTION_CORE(double, S)
ATTNPHYS_FOR_EACH_SPACE(ATTNPHYS_ATTENTION_CORE_ON)

}  // namespace attnphys::ops
