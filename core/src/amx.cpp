// Intel AMX on the host: the availability probe and the bf16 gemm (amx.hpp).
//
// gemm_bf16 packs op(B) into B tiles in VNNI pairs of K (Bp[nb][kt][16 pairs][16 columns × 2]), zero-padded to
// multiples of 32; then one work item per 32 rows of C packs its rows of op(A) into A tiles (16 rows × 32 bf16 of
// K, tile after tile) and computes each 32 × 32 block of its rows with four accumulator tiles (2 A tiles × 2 B tiles
// per step of 32 in K), writing alpha · acc + beta · C. Packing converts with AVX512-BF16 (VCVTNE2PS2BF16); a transposed operand goes
// through VNNI pairs of rows and a 16 × 16 transpose of 32-bit pairs. The packed buffers are per thread and grow
// only (host memory: these kernels run on the host by construction).
#include "attnphys/core/amx.hpp"

#include <cstring>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/core/parallel.hpp"

#include "attnphys/core/amx_kernels.hpp"
#ifdef ATTNPHYS_AMX
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attnphys::amx {

#ifdef ATTNPHYS_AMX
namespace {

// "" where this CPU has AVX-512 F/BW/VL and AVX512-BF16 and the OS saves the AVX-512 state; else why not.
std::string probe_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "CPUID leaf 7 is missing";
  const bool avx512 = (b >> 16 & 1) && (b >> 30 & 1) && (b >> 31 & 1);  // F, BW, VL
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool avx512_bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 >> 5 & 1);
  if (!avx512 || !avx512_bf16)
    return "this CPU lacks AVX-512 BW/VL or AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake and Sapphire "
           "Rapids and later have them)";
  unsigned a1b = 0, b1b = 0, c1b = 0, d1b = 0;
  if (!__get_cpuid(1, &a1b, &b1b, &c1b, &d1b) || !(c1b >> 27 & 1)) return "the OS has not enabled XSAVE";
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xe6) != 0xe6) return "the OS does not save the AVX-512 register state";
  return "";
}
const std::string& avx512_bf16_reason() {
  static const std::string r = probe_avx512_bf16();
  return r;
}

std::string probe() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "CPUID leaf 7 is missing";
  const bool amx_bf16 = d >> 22 & 1, amx_tile = d >> 24 & 1;
  if (!amx_tile || !amx_bf16)
    return "this CPU has no AMX-BF16 tile unit (Intel Xeon Sapphire Rapids or later have one; AMD CPUs do not)";
  if (!avx512_bf16_reason().empty()) return avx512_bf16_reason();
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) != 0)
    return "the kernel did not grant the AMX tile state (needs Linux >= 5.16; arch_prctl(ARCH_REQ_XCOMP_PERM) failed)";
  return "";
}
const std::string& reason() {
  static const std::string r = probe();
  return r;
}

using namespace kernels;

constexpr long kTile = 512;  // bf16 elements of one packed tile (16 × 32)

// A tiles of op(A) [m × k]: rows i, K contiguous.
// Tile row mb of op(A) (rows 16 mb .. 16 mb + 15, all of K) into slot `slot` of ap.
AMX_FN void pack_a_rows(std::uint16_t* ap, bool ta, const float* a, long lda, long m, long k, long kt, long mb,
                        long slot) {
  {
    for (long t = 0; t < kt; ++t) {
      std::uint16_t* tile = ap + (slot * kt + t) * kTile;
      const long k0 = 32 * t;
      if (!ta) {  // rows of A
        for (int r = 0; r < 16; ++r) {
          const long i = 16 * mb + r;
          __m512i v = _mm512_setzero_si512();
          if (i < m) {
            const float* row = a + i * lda + k0;
            v = bf16x32(load16(row, k - k0), load16(row + 16, k - k0 - 16));
          }
          _mm512_store_si512(tile + r * 32, v);
        }
      } else {  // op(A) = Aᵀ, A [k × m]: VNNI pairs of A's rows k0 + 2p, k0 + 2p + 1 give 32-bit pairs (p, i)
        alignas(64) std::uint32_t pairs[16][16];
        const long cols = m - 16 * mb;
        for (int p = 0; p < 16; ++p) {
          const long r0 = k0 + 2 * p;
          const __m512 x0 = r0 < k ? load16(a + r0 * lda + 16 * mb, cols) : _mm512_setzero_ps();
          const __m512 x1 = r0 + 1 < k ? load16(a + (r0 + 1) * lda + 16 * mb, cols) : _mm512_setzero_ps();
          _mm512_store_si512(&pairs[p][0], vnni_pair(x0, x1));
        }
        transpose16(reinterpret_cast<std::uint32_t*>(tile), &pairs[0][0]);
      }
    }
  }
}


// B tiles of op(B) [k × n] in VNNI pairs of K: tile[p][2j + t] = op(B)(k0 + 2p + t, 16 nb + j).
AMX_FN void pack_b_cols(std::uint16_t* bp, bool tb, const float* b, long ldb, long k, long n, long kt, long nb) {
  {
    for (long t = 0; t < kt; ++t) {
      std::uint16_t* tile = bp + (nb * kt + t) * kTile;
      const long k0 = 32 * t, cols = n - 16 * nb;
      if (!tb) {  // B [k × n]: rows k0 + 2p and k0 + 2p + 1, 16 columns each
        for (int p = 0; p < 16; ++p) {
          const long r0 = k0 + 2 * p;
          const __m512 x0 = r0 < k ? load16(b + r0 * ldb + 16 * nb, cols) : _mm512_setzero_ps();
          const __m512 x1 = r0 + 1 < k ? load16(b + (r0 + 1) * ldb + 16 * nb, cols) : _mm512_setzero_ps();
          _mm512_store_si512(tile + p * 32, vnni_pair(x0, x1));
        }
      } else {  // op(B) = Bᵀ, B [n × k]: row j of B in bf16 is the 16 pairs (p, j) of column j
        alignas(64) std::uint32_t rows[16][16];
        for (int j = 0; j < 16; ++j) {
          __m512i v = _mm512_setzero_si512();
          if (j < cols) {
            const float* row = b + (16 * nb + j) * ldb + k0;
            v = bf16x32(load16(row, k - k0), load16(row + 16, k - k0 - 16));
          }
          _mm512_store_si512(&rows[j][0], v);
        }
        transpose16(reinterpret_cast<std::uint32_t*>(tile), &rows[0][0]);
      }
    }
  }
}
void pack_b(std::uint16_t* bp, bool tb, const float* b, long ldb, long k, long n, long nt, long kt) {
  attnphys::parallel_for("attnphys::amx_pack_b", nt, [=](long nb) { pack_b_cols(bp, tb, b, ldb, k, n, kt, nb); });
}

// One work item: rows [32 mb2, 32 mb2 + 32) of C against every column block. Its two A tile rows are packed here
// (into the calling thread's buffer, so they are read from memory once and used from cache), the tile
// configuration is loaded once, then each 32 × 32 block of C accumulates in four tiles over K.
AMX_FN void row_block(float* c, long ldc, long m, long n, long k, float alpha, float beta, bool ta, const float* a,
                      long lda, const std::uint16_t* bp, long kt, long nb2, long mb2) {
  thread_local std::vector<std::uint16_t> abuf;
  const std::size_t need = std::size_t(2 * kt * kTile) + 32;
  if (abuf.size() < need) abuf.resize(need);
  std::uint16_t* ap =
      reinterpret_cast<std::uint16_t*>((reinterpret_cast<std::uintptr_t>(abuf.data()) + 63) & ~std::uintptr_t(63));
  pack_a_rows(ap, ta, a, lda, m, k, kt, 2 * mb2, 0);
  pack_a_rows(ap, ta, a, lda, m, k, kt, 2 * mb2 + 1, 1);
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  AMX_BARRIER();
  _tile_loadconfig(&cfg);
  const std::uint16_t* a0 = ap;
  const std::uint16_t* a1 = ap + kt * kTile;
  const long i0 = 32 * mb2;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  alignas(64) float acc[32][32];
  for (long nb = 0; nb < nb2; ++nb) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const std::uint16_t* b0 = bp + (2 * nb) * kt * kTile;
    const std::uint16_t* b1 = b0 + kt * kTile;
    for (long t = 0; t < kt; ++t) {
      TILE_LOAD(4, a0 + t * kTile, 64);
      TILE_LOAD(5, a1 + t * kTile, 64);
      TILE_LOAD(6, b0 + t * kTile, 64);
      TILE_LOAD(7, b1 + t * kTile, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, &acc[0][0], 128);
    _tile_stored(1, &acc[0][16], 128);
    _tile_stored(2, &acc[16][0], 128);
    _tile_stored(3, &acc[16][16], 128);
    AMX_BARRIER();  // the tile stores do not declare the memory they write: the reads of acc below stay behind
    const long j0 = 32 * nb;
    for (int r = 0; r < 32 && i0 + r < m; ++r) {
      float* row = c + (i0 + r) * ldc + j0;
      for (int h = 0; h < 2; ++h) {
        const long cols = n - j0 - 16 * h;
        if (cols <= 0) break;
        const __mmask16 km = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1u);
        __m512 v = _mm512_mul_ps(va, _mm512_load_ps(&acc[r][16 * h]));
        if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(km, row + 16 * h), v);
        _mm512_mask_storeu_ps(row + 16 * h, km, v);
      }
    }
  }
  _tile_release();
}

}  // namespace

bool available() { return reason().empty(); }
std::string unavailable_reason() { return reason(); }
bool avx512_bf16_available() { return avx512_bf16_reason().empty(); }
std::string avx512_bf16_unavailable_reason() { return avx512_bf16_reason(); }

void gemm_bf16(bool ta, bool tb, long m, long n, long k, float alpha, const float* a, long lda, const float* b,
               long ldb, float beta, float* c, long ldc) {
  require(available(), "gemm_bf16: ", reason());
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // C = beta C
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const long mb2 = (m + 31) / 32, nt = (n + 31) / 32 * 2, kt = (k + 31) / 32;
  thread_local std::vector<std::uint16_t> bbuf;  // host scratch of the calling thread, grow-only
  const std::size_t bsz = std::size_t(nt * kt * kTile) + 32;
  if (bbuf.size() < bsz) bbuf.resize(bsz);
  std::uint16_t* bp =
      reinterpret_cast<std::uint16_t*>((reinterpret_cast<std::uintptr_t>(bbuf.data()) + 63) & ~std::uintptr_t(63));
  pack_b(bp, tb, b, ldb, k, n, nt, kt);
  attnphys::parallel_for("attnphys::amx_gemm", mb2, [=](long it) {
    row_block(c, ldc, m, n, k, alpha, beta, ta, a, lda, bp, kt, nt / 2, it);
  });
}

#else  // no AMX in this build

bool available() { return false; }
std::string unavailable_reason() {
  return "this build has no AMX kernels (they need an x86-64 host build with GCC or Clang, not a GPU build)";
}
bool avx512_bf16_available() { return false; }
std::string avx512_bf16_unavailable_reason() { return unavailable_reason(); }
void gemm_bf16(bool, bool, long, long, long, float, const float*, long, const float*, long, float, float*, long) {
  require(false, "gemm_bf16: ", unavailable_reason());
}

#endif

}  // namespace attnphys::amx
