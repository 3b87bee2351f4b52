#pragma once
// Intel AMX (Advanced Matrix Extensions) on the host: bf16 tile products with float32 accumulation. Used where a
// model asks for bf16 arithmetic (EncoderOptions::attention_precision / matmul_precision); float32 stays the
// default everywhere. Host-only: x86-64 builds with GCC or Clang, not CUDA/HIP/SYCL builds.
#include <cstdint>
#include <string>

namespace attnphys::amx {

// True when this CPU has AMX-TILE, AMX-BF16, AVX-512 (F/BW/VL) and AVX512-BF16 and the kernel granted this
// process the tile data state (Linux >= 5.16, arch_prctl(ARCH_REQ_XCOMP_PERM)); checked once per process.
bool available();
// Why not, in words, when available() is false ("" otherwise).
std::string unavailable_reason();
// True when this CPU has AVX-512 (F/BW/VL) and AVX512-BF16 (VDPBF16PS: bf16 pair products with float32
// accumulation) and the OS saves the AVX-512 state, with or without AMX: AMD Zen 4 and later, Intel Cooper Lake and
// Sapphire Rapids and later. The bf16 attention kernels (operators) run there without AMX; gemm_bf16 needs AMX.
bool avx512_bf16_available();
std::string avx512_bf16_unavailable_reason();

// C [m×n] = alpha op(A) op(B) + beta C on row-major float32 matrices with leading dimensions lda, ldb, ldc;
// op(X) = Xᵀ when tX. Operands rounded to bf16 (round to nearest even), products accumulated in float32: the
// result agrees with float32 to about 2^-9 relative per operand. beta = 0 does not read C. Requires available().
void gemm_bf16(bool ta, bool tb, long m, long n, long k, float alpha, const float* a, long lda, const float* b,
               long ldb, float beta, float* c, long ldc);

}  // namespace attnphys::amx
