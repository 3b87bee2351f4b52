// bf16 attention on Intel AMX: see attention_amx.hpp.
//
// Layouts (np = n rounded up to 128; every buffer bf16, zero past n):
//   QS  [nbh, np, 16]        q log2(e) / sqrt(16), rows: the A operand of s = q kᵀ (K = 16 dimensions, 32 bytes a row)
//   KV  [nbh, np/16, 8, 32]  keys in VNNI pairs of dimensions: KV[b][p][2j + t] = k[16b + j][2p + t], the B operand
//                            of s = q kᵀ for 16 keys; VT is the same layout of v (dp = dO vᵀ)
//   VV  [nbh, np/32, 16, 32] values in VNNI pairs of keys: VV[b][p][2c + t] = v[32b + 2p + t][c], the B operand of
//                            o = p v for 32 keys
//   KK  [nbh, np/16, 8, 32]  keys in VNNI pairs of keys: KK[b][p][2c + t] = k[16b + 2p + t][c] (dq = dS k)
//   DO  [nbh, np, 16]        dO rows (dp = dO vᵀ); DOT, QST [nbh, 16, np]: dOᵀ and (q / 4)ᵀ, the A operands of
//                            dvᵀ = dOᵀ p and dkᵀ = (q/4)ᵀ dS (K = 32 queries)
// Scores come in base-2 units (log2 e folded into QS), so every exponential is a 2^x: a degree-5 polynomial on the
// fraction and one VSCALEFPS for the integer part.
// Forward: one work item per (head slice, 16 query rows); key blocks of 128: eight s tiles (16 × 16 float32), the
// online softmax on AVX-512, p rounded to bf16, two p v products into a tile that is added to the float32 output
// rows. Backward: one work item per head slice, key blocks of 16 (dvᵀ and dkᵀ accumulate in two tiles over all
// query blocks of 32), per query block s and dp by tiles, p = exp(s - lse) and dS = p (dp - D) on AVX-512, then
// the three products; dq accumulates in float32 in the output.
// Without AMX (AVX512-BF16: AMD Zen 4/5, Intel Cooper Lake) forward_item_avx512 and backward_item_avx512 compute the
// same products, online softmax and rounding in AVX-512 registers (VDPBF16PS), scheduled for such a core: score
// products interleaved with the softmax, p v in one product per key block; in the backward, query blocks of 64, the
// elementwise part of the next query block written into the dvᵀ and dkᵀ products, whose A operands (dOᵀ, qᵀ) are
// packed in blocks of 64 queries so that their rows sit at fixed offsets, and dq accumulated in place. SoftTiles runs
// the AMX schedule itself in AVX-512 registers (tile_schedule: tests of the AMX algorithm on CPUs without AMX).
#include "attention_amx.hpp"

#include <cmath>
#include <cstring>

#include "attnphys/core/parallel.hpp"

#include "attnphys/core/amx_kernels.hpp"

namespace attnphys::ops::amx {

long forward_scratch(long nbh, long n) {
  const long np = (n + 127) / 128 * 128;
  return 3 * nbh * np * kHeadDim;
}
long backward_scratch(long nbh, long n) {
  const long np = (n + 127) / 128 * 128;
  return 7 * nbh * np * kHeadDim + 4 * nbh * np;  // the seven layouts; per query lse·log2 e and D (float)
}

#ifdef ATTNPHYS_AMX
namespace {

using namespace attnphys::amx::kernels;

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

struct Layout {
  long n, np, nb16, nb32;
  explicit Layout(long n_) : n(n_), np((n_ + 127) / 128 * 128), nb16(np / 16), nb32(np / 32) {}
  long slice() const { return np * kHeadDim; }  // elements of one head slice in every layout
};

// Row r of one head slice (16 floats) times scale, 0 past n.
AMX_FN inline __m512 row16(const float* s, long r, long n, __m512 scale) {
  return r < n ? _mm512_mul_ps(_mm512_loadu_ps(s + r * kHeadDim), scale) : _mm512_setzero_ps();
}
// Rows [np, 16] of src * scale (zero past n).
AMX_FN void pack_rows_slice(std::uint16_t* d, const float* s, float scale, const Layout& L) {
  const __m512 sc = _mm512_set1_ps(scale);
  for (long i = 0; i < L.np; ++i)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i * 16), bf16x16(row16(s, i, L.n, sc)));
}
// Transposed rows of src * scale in blocks of bw queries (bw a multiple of 32 dividing np): d[b][c][j] =
// src[bw b + j][c], [np/bw][16][bw]; bw = np is the plain transpose [16, np] (the A operands of the tiles' dvᵀ and dkᵀ
// products), bw = 64 the AVX-512 backward's (its query blocks: rows 128 bytes apart). VNNI pairs of rows are 32-bit
// pairs (row pair, column); a 16 × 16 transpose of 32 rows at a time gives 32 consecutive entries of each column.
AMX_FN void pack_transposed_slice(std::uint16_t* d, const float* s, float scale, long bw, const Layout& L) {
  const __m512 sc = _mm512_set1_ps(scale);
  alignas(64) std::uint32_t pairs[16][16];
  for (long i0 = 0; i0 < L.np; i0 += 32) {
    for (int p = 0; p < 16; ++p)
      _mm512_store_si512(&pairs[p][0], vnni_pair(row16(s, i0 + 2 * p, L.n, sc), row16(s, i0 + 2 * p + 1, L.n, sc)));
    transpose16(&pairs[0][0], &pairs[0][0]);
    std::uint16_t* blk = d + (i0 / bw) * 16 * bw + i0 % bw;
    for (int c = 0; c < 16; ++c) _mm512_storeu_si512(blk + c * bw, _mm512_load_si512(&pairs[c][0]));
  }
}
// VNNI pairs of dimensions per 16 rows: d[b][p][2j + t] = src[16b + j][2p + t] (the KV layout): row j in bf16 is the
// 8 pairs (p, j); a transpose puts them in rows p.
AMX_FN void pack_dim_pairs_slice(std::uint16_t* d, const float* s, const Layout& L) {
  const __m512 one = _mm512_set1_ps(1.0f);
  alignas(64) std::uint32_t m[16][16];
  for (long b = 0; b < L.nb16; ++b) {
    for (int j = 0; j < 16; ++j)
      _mm512_store_si512(&m[j][0], _mm512_zextsi256_si512(bf16x16(row16(s, 16 * b + j, L.n, one))));
    transpose16(&m[0][0], &m[0][0]);
    for (int p = 0; p < 8; ++p) _mm512_storeu_si512(d + (b * 8 + p) * 32, _mm512_load_si512(&m[p][0]));
  }
}
// VNNI pairs of rows: d[p][2c + t] = src[2p + t][c] over all rows (the VV and KK layouts: the same bytes, read as
// blocks of 32 rows (16 pair rows) or of 16 rows (8 pair rows)).
AMX_FN void pack_row_pairs_slice(std::uint16_t* d, const float* s, const Layout& L) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (long p = 0; p < L.np / 2; ++p)
    _mm512_storeu_si512(d + p * 32, vnni_pair(row16(s, 2 * p, L.n, one), row16(s, 2 * p + 1, L.n, one)));
}

void pack_rows(std::uint16_t* dst, const float* src, float scale, long nbh, const Layout& L) {
  attnphys::parallel_for("attnphys::amx_pack_rows", nbh, [=](long bh) {
    pack_rows_slice(dst + bh * L.slice(), src + bh * L.n * kHeadDim, scale, L);
  });
}
void pack_transposed(std::uint16_t* dst, const float* src, float scale, long bw, long nbh, const Layout& L) {
  attnphys::parallel_for("attnphys::amx_pack_transposed", nbh, [=](long bh) {
    pack_transposed_slice(dst + bh * L.slice(), src + bh * L.n * kHeadDim, scale, bw, L);
  });
}
void pack_dim_pairs(std::uint16_t* dst, const float* src, long nbh, const Layout& L) {
  attnphys::parallel_for("attnphys::amx_pack_dim_pairs", nbh, [=](long bh) {
    pack_dim_pairs_slice(dst + bh * L.slice(), src + bh * L.n * kHeadDim, L);
  });
}
void pack_row_pairs(std::uint16_t* dst, const float* src, long nbh, const Layout& L) {
  attnphys::parallel_for("attnphys::amx_pack_row_pairs", nbh, [=](long bh) {
    pack_row_pairs_slice(dst + bh * L.slice(), src + bh * L.n * kHeadDim, L);
  });
}

// The tile unit the kernels below are written for, in two implementations with the same operations (tile indices
// are template arguments, as AMX encodes them in the instruction): tile t is a 16-row matrix; load<t>(p, stride)
// reads an operand (rows `stride` bytes apart), dp<c, a, b>() is TDPBF16PS (c[m][n] += sum over pairs k of
// a[m][2k] b[k][2n] + a[m][2k + 1] b[k][2n + 1], bf16 in, float32 out), store<t> writes a float32 accumulator.
// AmxTiles: the AMX unit itself. GCC's tile intrinsics are macros that paste the tile number into the instruction
// text, so each operation names its literal tiles: a switch on the template argument (resolved at compile time),
// and for dp the (c, a, b) triples the kernels use.
// clang-format off
#define ATTNPHYS_TILE_SWITCH(T, OP) \
  switch (T) {                       \
    case 0: OP(0); break;            \
    case 1: OP(1); break;            \
    case 2: OP(2); break;            \
    case 3: OP(3); break;            \
    case 4: OP(4); break;            \
    case 5: OP(5); break;            \
    case 6: OP(6); break;            \
    default: OP(7); break;           \
  }
// clang-format on
struct AmxTiles {
  AMX_FN void config(const TileConfig& cfg) {
    AMX_BARRIER();
    _tile_loadconfig(&cfg);
  }
  AMX_FN void release() { _tile_release(); }
  template <int T>
  AMX_FN void zero() {
    static_assert(T >= 0 && T < 8, "AMX has tiles 0-7");
#define ATTNPHYS_OP(t) _tile_zero(t)
    ATTNPHYS_TILE_SWITCH(T, ATTNPHYS_OP)
#undef ATTNPHYS_OP
  }
  template <int T>
  AMX_FN void load(const void* p, long stride) {
    static_assert(T >= 0 && T < 8, "AMX has tiles 0-7");
#define ATTNPHYS_OP(t) TILE_LOAD(t, p, stride)
    ATTNPHYS_TILE_SWITCH(T, ATTNPHYS_OP)
#undef ATTNPHYS_OP
  }
  template <int T>
  AMX_FN void store(void* p, long stride) {
    static_assert(T >= 0 && T < 8, "AMX has tiles 0-7");
#define ATTNPHYS_OP(t) _tile_stored(t, p, stride)
    ATTNPHYS_TILE_SWITCH(T, ATTNPHYS_OP)
#undef ATTNPHYS_OP
    AMX_BARRIER();  // GCC's tile store does not declare the memory it writes: reads of it stay behind
  }
  // store<C>(p, stride) of zero<C>(), dp<C, A, B>() (one fresh product).
  template <int C, int A, int B>
  AMX_FN void product(void* p, long stride) {
    zero<C>();
    dp<C, A, B>();
    store<C>(p, stride);
  }
  template <int C, int A, int B>
  AMX_FN void dp() {
    if constexpr (C == 0 && A == 1 && B == 2)
      _tile_dpbf16ps(0, 1, 2);
    else if constexpr (C == 5 && A == 3 && B == 4)
      _tile_dpbf16ps(5, 3, 4);
    else if constexpr (C == 2 && A == 3 && B == 4)
      _tile_dpbf16ps(2, 3, 4);
    else if constexpr (C == 0 && A == 5 && B == 6)
      _tile_dpbf16ps(0, 5, 6);
    else if constexpr (C == 1 && A == 5 && B == 6)
      _tile_dpbf16ps(1, 5, 6);
    else
      static_assert(C < 0, "AmxTiles::dp: add this (c, a, b) triple");
  }
};
#undef ATTNPHYS_TILE_SWITCH

// acc [16][16] += a [16 rows × K pairs] b [K pair rows × 16 columns]: one VDPBF16PS per (row, pair) with the row's
// pair broadcast from memory, the 16 accumulator rows in registers.
// Fresh: acc starts at 0 (not read), and the rows go to out (rows out_stride bytes apart) instead of acc.
template <int K, bool Fresh = false>
AMX_FN inline void dp_rows(float (&acc)[16][16], const char* a, long sa, const char* b, long sb, char* out = nullptr,
                           long out_stride = 0) {
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = Fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(&acc[i][0]);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
    const __m512bh bv = (__m512bh)_mm512_loadu_si512(b + k * sb);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      // The pair as an embedded broadcast operand of VDPBF16PS (compilers load and broadcast it separately).
      __asm__("vdpbf16ps %2%{1to16%}, %1, %0"
              : "+v"(r[i])
              : "v"(bv), "m"(*reinterpret_cast<const std::int32_t*>(a + i * sa + 4 * k)));
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (Fresh)
      _mm512_storeu_ps(out + i * out_stride, r[i]);
    else
      _mm512_storeu_ps(&acc[i][0], r[i]);
  }
}

// SoftTiles: the same operations in AVX-512 registers with AVX512-BF16 (VDPBF16PS), for CPUs without AMX (AMD
// Zen 4/5, Intel Cooper Lake). Accumulator tiles live in memory, operands are read where load<t> points (the
// kernels below never change an operand between its load and its product). Every tile the kernels use has 16 rows
// of 16 float32 accumulators or 16 operand rows, with K = 8 or 16 pairs (the B operand's rows in the configuration).
struct SoftTiles {
  alignas(64) float acc[8][16][16];
  const char* src[8] = {};
  long stride[8] = {};
  int rows[8] = {};
  AMX_FN void config(const TileConfig& cfg) {
    for (int t = 0; t < 8; ++t) rows[t] = cfg.rows[t];
  }
  AMX_FN void release() {}
  template <int T>
  AMX_FN void zero() {
    for (int i = 0; i < 16; ++i) _mm512_store_ps(&acc[T][i][0], _mm512_setzero_ps());
  }
  template <int T>
  AMX_FN void load(const void* p, long s) {
    src[T] = static_cast<const char*>(p);
    stride[T] = s;
  }
  template <int C, int A, int B>
  AMX_FN void product(void* p, long s) {  // the accumulator stays in registers
    char* d = static_cast<char*>(p);
    if (rows[B] == 8)
      dp_rows<8, true>(acc[C], src[A], stride[A], src[B], stride[B], d, s);
    else
      dp_rows<16, true>(acc[C], src[A], stride[A], src[B], stride[B], d, s);
  }
  template <int C, int A, int B>
  AMX_FN void dp() {
    if (rows[B] == 8)
      dp_rows<8>(acc[C], src[A], stride[A], src[B], stride[B]);
    else
      dp_rows<16>(acc[C], src[A], stride[A], src[B], stride[B]);
  }
  template <int T>
  AMX_FN void store(void* p, long s) {
    char* d = static_cast<char*>(p);
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(d + i * s, _mm512_load_ps(&acc[T][i][0]));
  }
};

// p v of one key block (p rows from p, 128 keys at key j0) into tile 5, stored to pv.
template <class Tiles>
AMX_FN inline void pv_block(Tiles& tl, float (&pv)[16][16], const std::uint16_t* p, const std::uint16_t* vvb, long j0,
                            long valid) {
  tl.template zero<5>();
  for (int h = 0; h < 4; ++h) {
    if (32 * h >= valid) break;  // p and the values are 0 there
    tl.template load<3>(p + 32 * h, 128 * 2);
    tl.template load<4>(vvb + (j0 / 32 + h) * 16 * 32, 64);
    tl.template dp<5, 3, 4>();
  }
  tl.template store<5>(&pv[0][0], 64);
}

// The softmax of one query row of a key block of 128 (the forward's online softmax): the running maximum m (base 2)
// and sum l (16 partial sums), p = 2^(s - m) in bf16 (0 past the valid keys), and alpha, the factor that rescales
// what the row accumulated before this block.
AMX_FN inline void softmax_row(const float* s, std::uint16_t* p, float& m, __m512& l, float& alpha, bool first,
                               bool full, const __mmask16* km, int wlive) {
  constexpr int KW = 8;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  float mt;
  if (full) {
    __m512 mx0 = _mm512_load_ps(s), mx1 = _mm512_load_ps(s + 16);
    for (int w = 2; w < KW; w += 2) {
      mx0 = _mm512_max_ps(mx0, _mm512_load_ps(s + 16 * w));
      mx1 = _mm512_max_ps(mx1, _mm512_load_ps(s + 16 * w + 16));
    }
    mt = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
  } else {
    __m512 mx = ninf;
    for (int w = 0; w < wlive; ++w)
      mx = _mm512_max_ps(mx, _mm512_mask_blend_ps(km[w], ninf, _mm512_load_ps(s + 16 * w)));
    mt = _mm512_reduce_max_ps(mx);
  }
  const float m_new = first || mt > m ? mt : m;
  const __m512 mv = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int w = 0; w < KW; w += 2) {
    __m512 e0, e1;
    if (full) {
      e0 = exp2_16(_mm512_sub_ps(_mm512_load_ps(s + 16 * w), mv));
      e1 = exp2_16(_mm512_sub_ps(_mm512_load_ps(s + 16 * w + 16), mv));
    } else {
      e0 = w < wlive ? _mm512_maskz_mov_ps(km[w], exp2_16(_mm512_sub_ps(_mm512_load_ps(s + 16 * w), mv)))
                     : _mm512_setzero_ps();
      e1 = w + 1 < wlive ? _mm512_maskz_mov_ps(km[w + 1], exp2_16(_mm512_sub_ps(_mm512_load_ps(s + 16 * w + 16), mv)))
                         : _mm512_setzero_ps();
    }
    sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
    _mm512_store_si512(p + 16 * w, bf16x32(e0, e1));
  }
  if (first) {
    l = sum;
    alpha = 1.0f;
  } else if (m_new > m) {
    alpha = std::exp2(m - m_new);
    l = _mm512_fmadd_ps(l, _mm512_set1_ps(alpha), sum);
  } else {
    alpha = 1.0f;
    l = _mm512_add_ps(l, sum);
  }
  m = m_new;
}

template <class Tiles>
AMX_FN void forward_item(float* o, float* lse, const std::uint16_t* qs, const std::uint16_t* kv,
                         const std::uint16_t* vv, const Layout& L, long bh, long i0) {
  constexpr int KB = 128, KW = KB / 16;  // keys per block, vectors (and s tiles) per row of a block
  Tiles tl;
  TileConfig cfg;
  cfg.set(0, 16, 64);  // s tile (16 queries × 16 keys, float32)
  cfg.set(1, 16, 32);  // q rows (16 × 16 dims)
  cfg.set(2, 8, 64);   // keys, VNNI (8 dimension pairs × 16 keys)
  cfg.set(3, 16, 64);  // p rows (16 × 32 keys)
  cfg.set(4, 16, 64);  // values, VNNI (16 key pairs × 16 dims)
  cfg.set(5, 16, 64);  // p v (16 × 16 dims)
  tl.config(cfg);
  tl.template load<1>(qs + bh * L.slice() + i0 * 16, 32);
  // p of a block is written by vector stores and read by tile loads; a tile load right after the stores waits for
  // them to drain, so p v of block b runs after the softmax of block b + 1 (p double-buffered), and the output rows
  // are rescaled one block late: acc = (acc + p_b v) · 2^(m_b - m_(b+1)).
  alignas(64) float s[16][KB];
  alignas(64) std::uint16_t p[2][16][KB];
  alignas(64) float pv[16][16];
  __m512 acc[16], l[16];  // output rows; running sums as 16 partial sums each
  float m[16], alpha[16];  // running maxima (base 2); the rescale of the pending block
  for (int r = 0; r < 16; ++r) {
    acc[r] = l[r] = _mm512_setzero_ps();
    m[r] = 0.0f;
  }
  const std::uint16_t* kvb = kv + bh * L.slice();
  const std::uint16_t* vvb = vv + bh * L.slice();
  long prev_j0 = -1, prev_valid = 0;
  for (long j0 = 0, blk = 0; j0 < L.n; j0 += KB, ++blk) {
    for (int t = 0; t < KW; ++t) {
      tl.template load<2>(kvb + (j0 / 16 + t) * 8 * 32, 64);
      tl.template product<0, 1, 2>(&s[0][t * 16], KB * 4);
    }
    const long valid = L.n - j0 < KB ? L.n - j0 : KB;
    __mmask16 km[KW];
    for (int w = 0; w < KW; ++w) {
      const long v = valid - 16 * w;
      km[w] = v >= 16 ? __mmask16(0xffff) : v <= 0 ? __mmask16(0) : __mmask16((1u << v) - 1u);
    }
    const int wlive = int((valid + 15) / 16);  // vectors with at least one key
    std::uint16_t(&pb)[16][KB] = p[blk & 1];
    const bool full = valid == KB;  // no key past n: no masks (every block but the last, when n % 128 != 0)
    for (int r = 0; r < 16; ++r) softmax_row(&s[r][0], &pb[r][0], m[r], l[r], alpha[r], j0 == 0, full, km, wlive);
    if (prev_j0 >= 0) {  // the previous block's p v, then this block's rescale
      pv_block(tl, pv, &p[(blk - 1) & 1][0][0], vvb, prev_j0, prev_valid);
      for (int r = 0; r < 16; ++r)
        acc[r] = _mm512_mul_ps(_mm512_add_ps(acc[r], _mm512_load_ps(&pv[r][0])), _mm512_set1_ps(alpha[r]));
    }
    prev_j0 = j0;
    prev_valid = valid;
  }
  const long last = (L.n - 1) / KB;
  pv_block(tl, pv, &p[last & 1][0][0], vvb, prev_j0, prev_valid);
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_add_ps(acc[r], _mm512_load_ps(&pv[r][0]));
  tl.release();
  for (int r = 0; r < 16 && i0 + r < L.n; ++r) {
    const long i = i0 + r;
    const float sum = _mm512_reduce_add_ps(l[r]);
    _mm512_storeu_ps(o + (bh * L.n + i) * 16, _mm512_mul_ps(acc[r], _mm512_set1_ps(1.0f / sum)));
    lse[bh * L.n + i] = (m[r] + std::log2(sum)) * kLn2;  // natural log, as the float32 kernels save it
  }
}

// The forward of one work item on AVX512-BF16 without AMX (the same products, online softmax and rounding as
// forward_item, written for AVX-512 registers): the score products of key block b + 1 and the softmax of block b
// alternate in one loop (a score tile, then two softmax rows); p v of a block is one product over its 64 key pairs
// with the accumulator in registers (no tile round trips), and the output rows are rescaled in place (no pipeline lag
// as on the tiles). On a Zen 4 the softmax does not overlap the products however finely it is interleaved (two other
// schedules measured the same or slower), unlike the backward's elementwise part.
AMX_FN void forward_item_avx512(float* o, float* lse, const std::uint16_t* qs, const std::uint16_t* kv,
                                const std::uint16_t* vv, const Layout& L, long bh, long i0) {
  constexpr int KB = 128, KW = KB / 16;
  alignas(64) float s[2][16][KB];
  alignas(64) std::uint16_t p[16][KB];
  alignas(64) float pv[16][16], acc[16][16], unused[16][16];
  __m512 l[16];
  float m[16], alpha[16];
  const char* qrows = reinterpret_cast<const char*>(qs + bh * L.slice() + i0 * 16);
  const std::uint16_t* kvb = kv + bh * L.slice();
  const std::uint16_t* vvb = vv + bh * L.slice();
  const long nblk = (L.n + KB - 1) / KB;
  const auto scores = [&](long blk, int t) {
    dp_rows<8, true>(unused, qrows, 32, reinterpret_cast<const char*>(kvb + (blk * KB / 16 + t) * 8 * 32), 64,
                     reinterpret_cast<char*>(&s[blk & 1][0][t * 16]), KB * 4);
  };
  for (int t = 0; t < KW; ++t) scores(0, t);
  for (long blk = 0; blk < nblk; ++blk) {
    const long j0 = blk * KB, valid = L.n - j0 < KB ? L.n - j0 : KB;
    __mmask16 km[KW];
    for (int w = 0; w < KW; ++w) {
      const long v = valid - 16 * w;
      km[w] = v >= 16 ? __mmask16(0xffff) : v <= 0 ? __mmask16(0) : __mmask16((1u << v) - 1u);
    }
    const int wlive = int((valid + 15) / 16);
    const bool full = valid == KB, next = blk + 1 < nblk;
    for (int t = 0; t < KW; ++t) {
      if (next) scores(blk + 1, t);
      for (int r = 2 * t; r < 2 * t + 2; ++r)
        softmax_row(&s[blk & 1][r][0], &p[r][0], m[r], l[r], alpha[r], blk == 0, full, km, wlive);
    }
    dp_rows<64, true>(unused, reinterpret_cast<const char*>(&p[0][0]), KB * 2,
                      reinterpret_cast<const char*>(vvb + (j0 / 32) * 16 * 32), 64, reinterpret_cast<char*>(&pv[0][0]),
                      64);
    for (int r = 0; r < 16; ++r) {
      const __m512 x = _mm512_load_ps(&pv[r][0]);
      __m512 y = x;
      if (blk > 0) {
        const __m512 a = _mm512_load_ps(&acc[r][0]);
        y = _mm512_fmadd_ps(a, _mm512_set1_ps(alpha[r]), x);
      }
      _mm512_store_ps(&acc[r][0], y);
    }
  }
  for (int r = 0; r < 16 && i0 + r < L.n; ++r) {
    const long i = i0 + r;
    const float sum = _mm512_reduce_add_ps(l[r]);
    _mm512_storeu_ps(o + (bh * L.n + i) * 16, _mm512_mul_ps(_mm512_load_ps(&acc[r][0]), _mm512_set1_ps(1.0f / sum)));
    lse[bh * L.n + i] = (m[r] + std::log2(sum)) * kLn2;
  }
}

template <class Tiles>
AMX_FN void backward_item(float* dq, float* dk, float* dv, const float* lse, const float* rowdot,
                          const std::uint16_t* qs, const std::uint16_t* qst, const std::uint16_t* kv,
                          const std::uint16_t* kk, const std::uint16_t* vt, const std::uint16_t* dob,
                          const std::uint16_t* dot, const Layout& L, long bh) {
  Tiles tl;
  TileConfig cfg;
  cfg.set(0, 16, 64);  // dvᵀ accumulator (16 dims × 16 keys)
  cfg.set(1, 16, 64);  // dkᵀ accumulator
  cfg.set(2, 16, 64);  // scratch product (s, dp, dq rows)
  cfg.set(3, 16, 32);  // A with K = 16: q rows, dO rows, dS rows
  cfg.set(4, 8, 64);   // B with K = 16: KV, VT, KK blocks
  cfg.set(5, 16, 64);  // A with K = 32 queries: dOᵀ, qᵀ
  cfg.set(6, 16, 64);  // B with K = 32 queries: p, dS in VNNI pairs of queries
  tl.config(cfg);
  const long n = L.n, so = bh * L.slice();
  float* dqb = dq + bh * n * 16;
  float* dkb = dk + bh * n * 16;
  float* dvb = dv + bh * n * 16;
  const float* lb = lse + bh * n;
  const float* db = rowdot + bh * n;
  for (long x = 0; x < n * 16; ++x) dqb[x] = 0.0f;
  alignas(64) float s[32][16], dp[32][16], tmp[16][16];
  alignas(64) std::uint16_t pv[16][32], dsv[16][32], dsr[32][16];
  for (long kb = 0; kb * 16 < n; ++kb) {
    const long kvalid = n - kb * 16 < 16 ? n - kb * 16 : 16;
    const __mmask16 km = kvalid >= 16 ? __mmask16(0xffff) : __mmask16((1u << kvalid) - 1u);
    tl.template zero<0>();
    tl.template zero<1>();
    const std::uint16_t* kvk = kv + so + kb * 8 * 32;
    const std::uint16_t* vtk = vt + so + kb * 8 * 32;
    const std::uint16_t* kkk = kk + so + kb * 8 * 32;
    for (long i0 = 0; i0 < n; i0 += 32) {
      tl.template load<4>(kvk, 64);
      for (int h = 0; h < 2; ++h) {
        tl.template load<3>(qs + so + (i0 + 16 * h) * 16, 32);
        tl.template product<2, 3, 4>(&s[16 * h][0], 64);
      }
      tl.template load<4>(vtk, 64);
      for (int h = 0; h < 2; ++h) {
        tl.template load<3>(dob + so + (i0 + 16 * h) * 16, 32);
        tl.template product<2, 3, 4>(&dp[16 * h][0], 64);
      }
      for (int rp = 0; rp < 16; ++rp) {
        __m512 e[2], d[2];
        for (int t = 0; t < 2; ++t) {
          const long i = i0 + 2 * rp + t;
          if (i < n) {
            const __m512 x = _mm512_sub_ps(_mm512_load_ps(&s[2 * rp + t][0]), _mm512_set1_ps(lb[i] * kLog2e));
            e[t] = kvalid == 16 ? exp2_16(x) : _mm512_maskz_mov_ps(km, exp2_16(x));
            d[t] = _mm512_mul_ps(e[t], _mm512_sub_ps(_mm512_load_ps(&dp[2 * rp + t][0]), _mm512_set1_ps(db[i])));
          } else {
            e[t] = d[t] = _mm512_setzero_ps();
          }
          _mm256_store_si256(reinterpret_cast<__m256i*>(&dsr[2 * rp + t][0]), bf16x16(d[t]));
        }
        _mm512_store_si512(&pv[rp][0], vnni_pair(e[0], e[1]));
        _mm512_store_si512(&dsv[rp][0], vnni_pair(d[0], d[1]));
      }
      tl.template load<5>(dot + so + i0, L.np * 2);  // dvᵀ += dOᵀ p
      tl.template load<6>(&pv[0][0], 64);
      tl.template dp<0, 5, 6>();
      tl.template load<5>(qst + so + i0, L.np * 2);  // dkᵀ += (q/4)ᵀ dS
      tl.template load<6>(&dsv[0][0], 64);
      tl.template dp<1, 5, 6>();
      tl.template load<4>(kkk, 64);  // dq rows += dS k (scaled at the end)
      for (int h = 0; h < 2; ++h) {
        tl.template load<3>(&dsr[16 * h][0], 32);
        tl.template product<2, 3, 4>(&tmp[0][0], 64);
        for (int r = 0; r < 16; ++r) {
          const long i = i0 + 16 * h + r;
          if (i >= n) break;
          float* row = dqb + i * 16;
          _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), _mm512_load_ps(&tmp[r][0])));
        }
      }
    }
    tl.template store<0>(&s[0][0], 64);   // dvᵀ [16 dims][16 keys]
    tl.template store<1>(&dp[0][0], 64);  // dkᵀ
    for (long j = 0; j < kvalid; ++j)
      for (int c = 0; c < 16; ++c) {
        dvb[(kb * 16 + j) * 16 + c] = s[c][j];
        dkb[(kb * 16 + j) * 16 + c] = dp[c][j];
      }
  }
  tl.release();
  for (long x = 0; x < n * 16; ++x) dqb[x] *= 0.25f;  // 1 / sqrt(16)
}

// Row `row` of the backward's elementwise part (p = 2^(s - lse), dS = p (dp - D), their bf16 forms): l2 = lse·log2 e
// of the row (1e30 past n: p = 0), dd = D (0 past n). Odd rows complete a VNNI pair with the even row before.
template <bool FullKeys>
AMX_FN inline void bw_row(const float* s, const float* dp, float l2, float dd, __mmask16 km, std::uint16_t* pv,
                          std::uint16_t* dsv, std::uint16_t* dsr, int row, __m512& ep, __m512& dpend) {
  const __m512 x = _mm512_sub_ps(_mm512_load_ps(s + row * 16), _mm512_set1_ps(l2));
  __m512 e = exp2_16(x);
  if (!FullKeys) e = _mm512_maskz_mov_ps(km, e);
  const __m512 d = _mm512_mul_ps(e, _mm512_sub_ps(_mm512_load_ps(dp + row * 16), _mm512_set1_ps(dd)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(dsr + row * 16), bf16x16(d));
  if (row & 1) {
    _mm512_store_si512(pv + (row / 2) * 32, vnni_pair(ep, e));
    _mm512_store_si512(dsv + (row / 2) * 32, vnni_pair(dpend, d));
  } else {
    ep = e;
    dpend = d;
  }
}

// acc [16][16] += a (16 rows, 32 pairs) b (32 pair rows of 64 bytes), as dp_rows<32>, with 32 rows of the next query
// block's elementwise part (rows row0 .. row0 + 31) written between its steps, one row a step.
template <bool FullKeys>
AMX_FN inline void dp32_with_rows(float (&acc)[16][16], const char* a, long sa, const char* b, const float* s,
                                  const float* dp, const float* l2, const float* dd, __mmask16 km, std::uint16_t* pv,
                                  std::uint16_t* dsv, std::uint16_t* dsr, int row0) {
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(&acc[i][0]);
  __m512 ep = _mm512_setzero_ps(), dpend = _mm512_setzero_ps();
  for (int k = 0; k < 32; k += 2) {
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      const __m512bh bv = (__m512bh)_mm512_loadu_si512(b + (k + u) * 64);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        __asm__("vdpbf16ps %2%{1to16%}, %1, %0"
                : "+v"(r[i])
                : "v"(bv), "m"(*reinterpret_cast<const std::int32_t*>(a + i * sa + 4 * (k + u))));
      const int row = row0 + k + u;
      bw_row<FullKeys>(s, dp, l2[row], dd[row], km, pv, dsv, dsr, row, ep, dpend);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_store_ps(&acc[i][0], r[i]);
}

// The backward of one head slice on AVX512-BF16 without AMX: backward_item's algorithm and rounding, its tile
// operations written for AVX-512 registers: query blocks of 64 (dvᵀ and dkᵀ pass through memory once per 64 queries
// instead of 32), the elementwise part of query block b + 1 written into the dvᵀ and dkᵀ products of block b (one row
// per step of 16 VDPBF16PS, so that the core runs both), dq rows accumulated in place by the product, vector
// transposes and clears.
template <bool FullKeys>
AMX_FN void backward_key_block(float* dqb, float (&dvt)[16][16], float (&dkt)[16][16], const float* l2, const float* dd,
                               const std::uint16_t* qs, const std::uint16_t* qst, const std::uint16_t* kvk,
                               const std::uint16_t* kkk, const std::uint16_t* vtk, const std::uint16_t* dob,
                               const std::uint16_t* dot, const Layout& L, long so, __mmask16 km) {
  constexpr int QB = 64;
  const long n = L.n, nqb = (n + QB - 1) / QB;
  alignas(64) float s[QB][16], dp[QB][16], tmp[16][16], unused[16][16];
  alignas(64) std::uint16_t pv[2][QB / 2][32], dsv[2][QB / 2][32], dsr[2][QB][16];
  const auto bytes = [](const void* x) { return reinterpret_cast<const char*>(x); };
  for (int r = 0; r < 16; ++r) {
    _mm512_store_ps(&dvt[r][0], _mm512_setzero_ps());
    _mm512_store_ps(&dkt[r][0], _mm512_setzero_ps());
  }
  // s and dp of the query block at i0 (a macro, not a lambda: a lambda does not carry AMX_FN's instruction sets)
#define ATTNPHYS_SCORES(i0)                                                                \
  do {                                                                                     \
    for (int h = 0; h < QB / 16; ++h) {                                                    \
      dp_rows<8, true>(unused, bytes(qs + so + ((i0) + 16 * h) * 16), 32, bytes(kvk), 64,  \
                       reinterpret_cast<char*>(&s[16 * h][0]), 64);                        \
      dp_rows<8, true>(unused, bytes(dob + so + ((i0) + 16 * h) * 16), 32, bytes(vtk), 64, \
                       reinterpret_cast<char*>(&dp[16 * h][0]), 64);                       \
    }                                                                                      \
  } while (0)
  ATTNPHYS_SCORES(0);
  {
    __m512 ep = _mm512_setzero_ps(), dpend = _mm512_setzero_ps();
    for (int row = 0; row < QB; ++row)
      bw_row<FullKeys>(&s[0][0], &dp[0][0], l2[row], dd[row], km, &pv[0][0][0], &dsv[0][0][0], &dsr[0][0][0], row, ep,
                       dpend);
  }
  for (long qb = 0; qb < nqb; ++qb) {
    const long i0 = qb * QB;
    const int cur = int(qb & 1), nxt = cur ^ 1;
    const bool next = qb + 1 < nqb;
    if (next) ATTNPHYS_SCORES(i0 + QB);
    for (int h = 0; h < QB / 16; ++h) {  // dq rows += dS k (scaled at the end)
      const long r0 = i0 + 16 * h;
      if (r0 >= n) break;
      if (r0 + 16 <= n) {
        dp_rows<8>(*reinterpret_cast<float(*)[16][16]>(dqb + r0 * 16), bytes(&dsr[cur][16 * h][0]), 32, bytes(kkk), 64);
      } else {
        dp_rows<8, true>(unused, bytes(&dsr[cur][16 * h][0]), 32, bytes(kkk), 64, reinterpret_cast<char*>(&tmp[0][0]),
                         64);
        for (long i = r0; i < n; ++i)
          _mm512_storeu_ps(dqb + i * 16, _mm512_add_ps(_mm512_loadu_ps(dqb + i * 16), _mm512_load_ps(&tmp[i - r0][0])));
      }
    }
    if (next) {  // dvᵀ += dOᵀ p, dkᵀ += (q/4)ᵀ dS, with the next block's elementwise part
      const float* l2n = l2 + i0 + QB;
      const float* ddn = dd + i0 + QB;
      dp32_with_rows<FullKeys>(dvt, bytes(dot + so + i0 * 16), 128, bytes(&pv[cur][0][0]), &s[0][0], &dp[0][0], l2n,
                               ddn, km, &pv[nxt][0][0], &dsv[nxt][0][0], &dsr[nxt][0][0], 0);
      dp32_with_rows<FullKeys>(dkt, bytes(qst + so + i0 * 16), 128, bytes(&dsv[cur][0][0]), &s[0][0], &dp[0][0], l2n,
                               ddn, km, &pv[nxt][0][0], &dsv[nxt][0][0], &dsr[nxt][0][0], 32);
    } else {
      dp_rows<QB / 2>(dvt, bytes(dot + so + i0 * 16), 128, bytes(&pv[cur][0][0]), 64);
      dp_rows<QB / 2>(dkt, bytes(qst + so + i0 * 16), 128, bytes(&dsv[cur][0][0]), 64);
    }
  }
#undef ATTNPHYS_SCORES
}

AMX_FN void backward_item_avx512(float* dq, float* dk, float* dv, const float* lse, const float* rowdot,
                                 const std::uint16_t* qs, const std::uint16_t* qst, const std::uint16_t* kv,
                                 const std::uint16_t* kk, const std::uint16_t* vt, const std::uint16_t* dob,
                                 const std::uint16_t* dot, const Layout& L, long bh, float* l2, float* dd) {
  const long n = L.n, so = bh * L.slice();
  float* dqb = dq + bh * n * 16;
  float* dkb = dk + bh * n * 16;
  float* dvb = dv + bh * n * 16;
  for (long i = 0; i < L.np; ++i) {  // per query: lse in base 2 and D; past n, rows whose p and dS are 0
    l2[i] = i < n ? lse[bh * n + i] * kLog2e : 1e30f;
    dd[i] = i < n ? rowdot[bh * n + i] : 0.0f;
  }
  for (long x = 0; x < n * 16; x += 16) _mm512_storeu_ps(dqb + x, _mm512_setzero_ps());
  alignas(64) float dvt[16][16], dkt[16][16];
  for (long kb = 0; kb * 16 < n; ++kb) {
    const long kvalid = n - kb * 16 < 16 ? n - kb * 16 : 16;
    const __mmask16 km = kvalid >= 16 ? __mmask16(0xffff) : __mmask16((1u << kvalid) - 1u);
    const long ko = kb * 8 * 32;
    if (kvalid == 16)
      backward_key_block<true>(dqb, dvt, dkt, l2, dd, qs, qst, kv + so + ko, kk + so + ko, vt + so + ko, dob, dot, L,
                               so, km);
    else
      backward_key_block<false>(dqb, dvt, dkt, l2, dd, qs, qst, kv + so + ko, kk + so + ko, vt + so + ko, dob, dot, L,
                                so, km);
    // dvᵀ, dkᵀ [16 dims][16 keys] to rows of keys
    transpose16(reinterpret_cast<std::uint32_t*>(&dvt[0][0]), reinterpret_cast<const std::uint32_t*>(&dvt[0][0]));
    transpose16(reinterpret_cast<std::uint32_t*>(&dkt[0][0]), reinterpret_cast<const std::uint32_t*>(&dkt[0][0]));
    for (long j = 0; j < kvalid; ++j) {
      _mm512_storeu_ps(dvb + (kb * 16 + j) * 16, _mm512_load_ps(&dvt[j][0]));
      _mm512_storeu_ps(dkb + (kb * 16 + j) * 16, _mm512_load_ps(&dkt[j][0]));
    }
  }
  const __m512 quarter = _mm512_set1_ps(0.25f);  // 1 / sqrt(16)
  for (long x = 0; x < n * 16; x += 16) _mm512_storeu_ps(dqb + x, _mm512_mul_ps(_mm512_loadu_ps(dqb + x), quarter));
}

}  // namespace

void forward(float* o, float* lse, const float* q, const float* k, const float* v, long nbh, long n,
             std::uint16_t* scratch, bool tile_schedule) {
  const Layout L(n);
  std::uint16_t* qs = scratch;
  std::uint16_t* kv = qs + nbh * L.slice();
  std::uint16_t* vv = kv + nbh * L.slice();
  pack_rows(qs, q, 0.25f * kLog2e, nbh, L);
  pack_dim_pairs(kv, k, nbh, L);
  pack_row_pairs(vv, v, nbh, L);
  const long qblocks = (n + 15) / 16;
  if (attnphys::amx::available())
    attnphys::parallel_for("attnphys::attention_amx_forward", nbh * qblocks, [=](long it) {
      forward_item<AmxTiles>(o, lse, qs, kv, vv, L, it / qblocks, (it % qblocks) * 16);
    });
  else if (tile_schedule)
    attnphys::parallel_for("attnphys::attention_bf16_forward_tiles", nbh * qblocks, [=](long it) {
      forward_item<SoftTiles>(o, lse, qs, kv, vv, L, it / qblocks, (it % qblocks) * 16);
    });
  else {
    attnphys::parallel_for("attnphys::attention_bf16_forward", nbh * qblocks, [=](long it) {
      forward_item_avx512(o, lse, qs, kv, vv, L, it / qblocks, (it % qblocks) * 16);
    });
  }
}

void backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
              const float* lse, const float* rowdot, long nbh, long n, std::uint16_t* scratch, bool tile_schedule) {
  const Layout L(n);
  const long sl = nbh * L.slice();
  std::uint16_t *qs = scratch, *qst = qs + sl, *kv = qst + sl, *kk = kv + sl, *vt = kk + sl, *dob = vt + sl,
                *dot = dob + sl;
  // dOᵀ and qᵀ: in one block of np queries for the tiles, in blocks of 64 for the AVX-512 backward
  const long bw = !attnphys::amx::available() && !tile_schedule ? 64 : L.np;
  pack_rows(qs, q, 0.25f * kLog2e, nbh, L);
  pack_transposed(qst, q, 0.25f, bw, nbh, L);
  pack_dim_pairs(kv, k, nbh, L);
  pack_row_pairs(kk, k, nbh, L);
  pack_dim_pairs(vt, v, nbh, L);
  pack_rows(dob, dout, 1.0f, nbh, L);
  pack_transposed(dot, dout, 1.0f, bw, nbh, L);
  float* rows = reinterpret_cast<float*>(dot + sl);
  if (attnphys::amx::available())
    attnphys::parallel_for("attnphys::attention_amx_backward", nbh, [=](long bh) {
      backward_item<AmxTiles>(dq, dk, dv, lse, rowdot, qs, qst, kv, kk, vt, dob, dot, L, bh);
    });
  else if (tile_schedule)
    attnphys::parallel_for("attnphys::attention_bf16_backward_tiles", nbh, [=](long bh) {
      backward_item<SoftTiles>(dq, dk, dv, lse, rowdot, qs, qst, kv, kk, vt, dob, dot, L, bh);
    });
  else
    attnphys::parallel_for("attnphys::attention_bf16_backward", nbh, [=](long bh) {
      backward_item_avx512(dq, dk, dv, lse, rowdot, qs, qst, kv, kk, vt, dob, dot, L, bh, rows + bh * 2 * L.np,
                           rows + bh * 2 * L.np + L.np);
    });
}

// AMX's probe requires AVX512-BF16 too, so AVX512-BF16 alone decides (AMX is then used where it is usable).
bool available() { return attnphys::amx::avx512_bf16_available(); }
std::string unavailable_reason() {
  return available() ? std::string() : attnphys::amx::avx512_bf16_unavailable_reason();
}

#else  // no AMX in this build

bool available() { return false; }
std::string unavailable_reason() { return attnphys::amx::unavailable_reason(); }

void forward(float*, float*, const float*, const float*, const float*, long, long, std::uint16_t*, bool) {}
void backward(float*, float*, float*, const float*, const float*, const float*, const float*, const float*,
              const float*, long, long, std::uint16_t*, bool) {}

#endif

}  // namespace attnphys::ops::amx
