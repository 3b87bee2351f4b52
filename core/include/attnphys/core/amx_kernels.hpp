#pragma once
// Internal: the building blocks of the AMX kernel sources (core/src/amx.cpp, operators/src/attention_amx.cpp).
// Defines ATTNPHYS_AMX on x86-64 host builds with GCC or Clang; everything below exists only then. Functions carry
// their instruction sets as target attributes (AMX_FN), so the rest of the build keeps its own -march, and they
// must only run where attnphys::amx::available() (amx.hpp) says so.
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL))
#define ATTNPHYS_AMX 1
#include <immintrin.h>

#define AMX_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16,fma")))
// GCC's tile loads and _tile_loadconfig are asm statements that do not declare the memory they read: a compiler
// barrier before each keeps the stores that fill their buffers in front of them.
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")
#define TILE_LOAD(t, base, stride) \
  do {                             \
    AMX_BARRIER();                 \
    _tile_loadd(t, base, stride);  \
  } while (0)

namespace attnphys::amx::kernels {

// The 64-byte tile configuration (palette 1): rows and bytes per row of each of the 8 tiles.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
  void set(int t, int r, int bytes) {
    rows[t] = std::uint8_t(r);
    colsb[t] = std::uint16_t(bytes);
  }
};

// 16 floats from p (lanes < count; the rest 0; nothing read past count).
AMX_FN inline __m512 load16(const float* p, long count) {
  if (count >= 16) return _mm512_loadu_ps(p);
  if (count <= 0) return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(__mmask16((1u << count) - 1u), p);
}
// 16 floats in bf16 (round to nearest even), 32 bytes.
AMX_FN inline __m256i bf16x16(__m512 a) { return (__m256i)_mm512_cvtneps_pbh(a); }
// 32 floats in bf16: lanes 0-15 from lo, 16-31 from hi.
AMX_FN inline __m512i bf16x32(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }
// Two float rows as VNNI pairs in bf16: out[2j + t] = (t ? b : a)[j].
AMX_FN inline __m512i vnni_pair(__m512 a, __m512 b) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, bf16x32(a, b));
}
// out[r][c] = in[c][r] for 16 × 16 32-bit values (in and out 64-byte aligned; they may be the same).
AMX_FN inline void transpose16(std::uint32_t* out, const std::uint32_t* in) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(in + 16 * i);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_store_si512(out + 16 * i, r[i]);
}
// 2^t on 16 lanes: round t to the nearest integer k, 2^(t - k) by a degree-3 polynomial on [-0.5, 0.5] fitted for
// the least maximum relative error (7.5e-5, far below bf16's 2^-9 = 2e-3: the kernels round p to bf16 and use the
// float32 values only in sums), times 2^k by VSCALEFPS (0 for t below about -150).
AMX_FN inline __m512 exp2_16(__m512 t) {
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, k);
  __m512 p = _mm512_set1_ps(5.517131e-2f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24261053f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.69326099f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.99992811f));
  return _mm512_scalef_ps(p, k);
}

}  // namespace attnphys::amx::kernels

#endif
