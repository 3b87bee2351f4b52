#pragma once
// Softmax attention in bf16 (attention_amx.cpp): FlashAttention-style forward and backward for head width 16, plain
// scores (no mask, no bias), float32 in and out. The products q kᵀ, p v, dO vᵀ, pᵀ dO, dSᵀ q and dS k run as tile
// products (TDPBF16PS: bf16 operands, float32 accumulation) on Intel AMX, or, on CPUs with AVX512-BF16 but no AMX
// (AMD Zen 4/5, Intel Cooper Lake), as the same tile operations in AVX-512 registers (VDPBF16PS); the softmax, its
// running maximum and sum, exp(s - lse) and dS = p (dp - D) stay float32 (AVX-512). Inputs are rounded to bf16 (8 bits
// of mantissa) once per call, so results agree with float32 to about 1e-2 relative (tests: test_fused_attention).
// Host-only: x86-64 builds with GCC or Clang, not CUDA/HIP/SYCL builds; available() says whether this CPU has
// AVX-512 BW/VL and AVX512-BF16 (then AMX is used where it has AMX-BF16 and AMX-TILE and the kernel granted this
// process the tile data state: Linux >= 5.16, arch_prctl(ARCH_REQ_XCOMP_PERM)).
#include <cstdint>
#include <string>

#include "attnphys/core/amx.hpp"

namespace attnphys::ops::amx {

constexpr long kHeadDim = 16;

// Whether the kernels below can run here (AMX, or AVX512-BF16 without AMX), and why not.
bool available();
std::string unavailable_reason();

// bf16 scratch (16-bit elements) the forward / backward need for nbh head slices of length n.
long forward_scratch(long nbh, long n);
long backward_scratch(long nbh, long n);

// q, k, v, o: [nbh, n, 16] row-major float; lse: [nbh, n]. o and lse are written. Without AMX the forward is
// scheduled for AVX512-BF16 cores; tile_schedule runs the AMX kernel's schedule there instead (tests; the same for
// the backward).
void forward(float* o, float* lse, const float* q, const float* k, const float* v, long nbh, long n,
             std::uint16_t* scratch, bool tile_schedule = false);
// dq, dk, dv are written; rowdot = rowsum(dO ⊙ O) per query; lse from forward().
void backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
              const float* lse, const float* rowdot, long nbh, long n, std::uint16_t* scratch,
              bool tile_schedule = false);

}  // namespace attnphys::ops::amx
