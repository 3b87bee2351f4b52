#pragma once
// The head-level kernels of attention, on per-head tensors [B*H, N, dh] (batch-major, then head).
//
// Softmax attention P = softmax(q kᵀ/sqrt(dh) + bias, masked), o = P v comes in two memory modes:
//   dense: tiles of (head slices × query rows) against every key, an exact softmax per tile whose probabilities
//          P [B*H, N, N] are saved for the backward (fastest when N² fits);
//   tiled: FlashAttention-2. Blocks of (query rows × keys) with an online softmax (running row maximum m, running
//          sum l, output accumulator rescaled by exp(m_old - m_new); o = acc / l); only the row log-sum-exp
//          lse = m + log l [B*H, N] is saved, and the backward recomputes each block's P = exp(s - lse) with
//          D = rowsum(dO ⊙ O). Scratch: two score blocks (AttentionScratch::tile_budget elements each) and one
//          [B*H, N] row vector, so memory is O(N·d) with no N² or rows·N term. Blocks that the causal or window
//          mask empties entirely are skipped.
// Factored attention uses position-only weights P(i, j) = alpha_h(i - j); Galerkin attention is softmax-free,
// o = q (k̃ᵀ ṽ)/N with layer-normalised k̃, ṽ.
// Accumulation rule as in layers.hpp: parameter gradients (rel_bias, alpha) +=, activation gradients =.
//
// Every kernel takes its execution space as a template argument (ExecSpace by default, deduced from the ScoreSpec
// or AttentionScratch where there is one) and is instantiated for each enabled space (core/spaces.hpp), with every
// view in that space's memory: the tests run them once per space (operators.AttentionOnSpace.*). The fused AVX
// kernels run on any host space; the bf16 (AMX or AVX512-BF16) kernels on the default space
// only.
#include <string>

#include "attnphys/operators/layers.hpp"

namespace attnphys::ops {

template <class Space>
using IntMaskOn = Kokkos::View<const int**, Kokkos::LayoutRight, typename Space::memory_space>;
using IntMask = IntMaskOn<ExecSpace>;

// Which (query i, key j) pairs interact. Distances are |i - j|, or min(|i - j|, N - |i - j|) when periodic.
template <class Space = ExecSpace>
struct AttentionMaskOn {
  bool causal = false;  // only j <= i
  long window = -1;     // only distance <= window (negative: no window)
  bool periodic = false;
  IntMaskOn<Space> key_mask;  // [B, N]: nonzero where key j of sample b may be attended (padding); empty: every key

  KOKKOS_INLINE_FUNCTION bool allowed(long b, long i, long j, long n) const {
    if (causal && j > i) return false;
    if (window >= 0) {
      long dist = i > j ? i - j : j - i;
      if (periodic && n - dist < dist) dist = n - dist;
      if (dist > window) return false;
    }
    if (key_mask.extent(0) != 0 && key_mask(b, j) == 0) return false;
    return true;
  }
};
using AttentionMask = AttentionMaskOn<>;

// Index of the offset i - j in a per-head relative table: open chains keep 2*max_len - 1 offsets
// (index i - j + max_len - 1), periodic chains N offsets ((i - j) mod N).
KOKKOS_INLINE_FUNCTION long relative_index(long i, long j, long n, long max_len, bool periodic) {
  if (periodic) return ((i - j) % n + n) % n;
  return i - j + max_len - 1;
}
inline long relative_table_size(long max_len, bool periodic) { return periodic ? max_len : 2 * max_len - 1; }

template <class T, class Space = ExecSpace>
struct ScoreSpec {
  long heads = 1;
  long max_len = 0;              // length the relative table was sized for (ignored without one)
  AttentionMaskOn<Space> mask;
  ConstMatOn<T, Space> rel_bias;  // [heads, relative_table_size]: added to the scaled scores; empty: none
};

// Grow-only buffers reused across calls and layers (no allocation once shapes repeat).
template <class T, class Space = ExecSpace>
struct AttentionScratch {
  using Buffer = Kokkos::View<T*, Kokkos::LayoutRight, typename Space::memory_space>;
  Buffer tile;    // scores / probabilities of one tile or block (tiled mode)
  Buffer dtile;   // their gradients
  Buffer rowdot;  // rowsum(dO ⊙ O) per query (backward); the online softmax's running sums l (tiled forward)
  T* ensure(Buffer& v, long n, const char* label);
  // Elements of one score tile: [slices, rows, N] in dense mode, a block [slices, rows, keys] in tiled mode (about
  // sqrt(budget) query rows × sqrt(budget) keys once N exceeds that). Small on the host so a tile stays in cache
  // between the score gemm, the softmax and the value gemm; large on GPUs so each launch has enough work.
  long tile_budget = host_accessible<Space>() ? (1L << 16) : (1L << 24);
  // Fewest query rows (and, in tiled mode, keys) per tile: thinner tiles make the score gemms inefficient.
  long min_tile_rows = 64;
  // Tiled mode on host builds for AVX2/AVX-512 CPUs: the fused register-blocked kernels (one Kokkos kernel for the
  // forward, one for the backward, no score gemms) when the scores are plain (no mask, no bias) and dh is 1, 2 or 4
  // vectors (fused_attention_lanes: on AVX-512 16, 32, 64 floats or 8, 16, 32 doubles; on AVX2 8, 16, 32 floats or
  // 4, 8, 16 doubles). false: always the blocked gemm path (the tests' reference).
  bool fused = true;
  // bf16 softmax attention on Intel AMX or AVX512-BF16 (operators/src/attention_amx.hpp): the tiled kind in float32 with head
  // width 16 and plain scores; products in bf16 with float32 accumulation, the softmax in float32. Set from
  // EncoderOptions::attention_precision; sdpa_forward / sdpa_backward refuse it where it does not apply.
  bool bf16 = false;
  // Without AMX, the forward runs the AMX kernels' own schedule in AVX-512 registers instead of the one scheduled
  // for AVX512-BF16 cores (same products, same rounding): for tests of the AMX algorithm on CPUs without AMX.
  bool bf16_tile_schedule = false;
  Kokkos::View<std::uint16_t*, HostSpace> bf16_buf;
  std::uint16_t* ensure_bf16(long n);
};

// Elements of T in one vector of the fused attention kernels (16 floats on AVX-512 targets, 8 on AVX2); 0 where
// this build has no fused kernels (device builds, other CPUs).
long fused_attention_lanes(std::size_t element_bytes);

// Whether the bf16 (AMX or AVX512-BF16) attention kernels can run in this process, and why not.
bool bf16_attention_available();
std::string bf16_attention_unavailable_reason();

// q, k, v, o: [B*H, N, dh]; p: [B*H, N, N] (dense) or empty (tiled); lse: [B*H, N].
template <class T, class Space = ExecSpace>
void sdpa_forward(const Mat3On<T, Space>& o, const Mat3On<T, Space>& p, const MatOn<T, Space>& lse,
                  const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k, const ConstMat3On<T, Space>& v,
                  const ScoreSpec<T, Space>& spec, AttentionScratch<T, Space>& ws);
// dq, dk, dv =; d_rel_bias += (empty when there is no bias).
template <class T, class Space = ExecSpace>
void sdpa_backward(const Mat3On<T, Space>& dq, const Mat3On<T, Space>& dk, const Mat3On<T, Space>& dv,
                   const MatOn<T, Space>& d_rel_bias, const ConstMat3On<T, Space>& dout, const ConstMat3On<T, Space>& q,
                   const ConstMat3On<T, Space>& k, const ConstMat3On<T, Space>& v, const ConstMat3On<T, Space>& o,
                   const ConstMat3On<T, Space>& p, const ConstMatOn<T, Space>& lse, const ScoreSpec<T, Space>& spec,
                   AttentionScratch<T, Space>& ws);
// The scaled scores s [B*H, N, N] = q kᵀ / sqrt(dh) that the softmax kinds start from (before bias and mask).
template <class T, class Space = ExecSpace>
void attention_scores(const Mat3On<T, Space>& s, const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k);
// One row of attention probabilities (key weights of query i in slice bh), recomputed from q, k and lse.
template <class T, class Space = ExecSpace>
void sdpa_row(const VecOn<T, Space>& out, const ConstMat3On<T, Space>& q, const ConstMat3On<T, Space>& k,
              const ConstMatOn<T, Space>& lse, const ScoreSpec<T, Space>& spec, long bh, long i);

// Factored attention: p(bh, i, j) = alpha(h, relative_index(i, j)) where allowed, else 0; o = p v.
template <class T, class Space = ExecSpace>
void factored_forward(const Mat3On<T, Space>& o, const Mat3On<T, Space>& p, const ConstMat3On<T, Space>& v,
                      const ConstMatOn<T, Space>& alpha, const ScoreSpec<T, Space>& spec);
// dv =, d_alpha +=.
template <class T, class Space = ExecSpace>
void factored_backward(const Mat3On<T, Space>& dv, const MatOn<T, Space>& d_alpha, const ConstMat3On<T, Space>& dout,
                       const ConstMat3On<T, Space>& v, const ConstMat3On<T, Space>& p, const ScoreSpec<T, Space>& spec,
                       AttentionScratch<T, Space>& ws);

// Factored attention on token-major rows, for masks that do not depend on the sample (no key mask). With rows
// [B*N, d] (token b*N + i, head h in columns h*dh .. h*dh + dh - 1) the weights
// P_h(i, j) = alpha(h, relative_index(i, j)) (0 where the mask forbids) are the same for every sample, so each head
// is ONE product over the whole batch:
//   forward:  O_h [N, B*dh] = P_h V_h, with V_h the head's columns of every sample side by side (buf.vt, kept);
//   backward: dV_h = P_hᵀ dO_h (din =), dP_h = dO_h V_hᵀ and
//             d_alpha(h, r) += Σ_{allowed (i, j) at offset r} dP_h(i, j).
// Buffers: vt, ot, dvt [H, N, B*dh]; p, dp [H, N, N] (the forward's vt and p must survive until the backward).
template <class T, class Space = ExecSpace>
struct FactoredRowsBuffers {
  Mat3On<T, Space> vt, ot, dvt, p, dp;
};
template <class T, class Space = ExecSpace>
void factored_rows_forward(const MatOn<T, Space>& out, const FactoredRowsBuffers<T, Space>& buf,
                           const ConstMatOn<T, Space>& in, const ConstMatOn<T, Space>& alpha, long batch, long n,
                           const ScoreSpec<T, Space>& spec);
template <class T, class Space = ExecSpace>
void factored_rows_backward(const MatOn<T, Space>& din, const MatOn<T, Space>& d_alpha,
                            const FactoredRowsBuffers<T, Space>& buf, const ConstMatOn<T, Space>& dout, long batch,
                            long n, const ScoreSpec<T, Space>& spec);

// Galerkin attention: kv [B*H, dh, dh] = knᵀ vn (saved), o = q kv / N.
template <class T, class Space = ExecSpace>
void galerkin_forward(const Mat3On<T, Space>& o, const Mat3On<T, Space>& kv, const ConstMat3On<T, Space>& q,
                      const ConstMat3On<T, Space>& kn, const ConstMat3On<T, Space>& vn);
// dq, dkn, dvn =.
template <class T, class Space = ExecSpace>
void galerkin_backward(const Mat3On<T, Space>& dq, const Mat3On<T, Space>& dkn, const Mat3On<T, Space>& dvn,
                       const ConstMat3On<T, Space>& dout, const ConstMat3On<T, Space>& q,
                       const ConstMat3On<T, Space>& kn, const ConstMat3On<T, Space>& vn,
                       const ConstMat3On<T, Space>& kv, AttentionScratch<T, Space>& ws);

// Head split/merge between token matrices [B*N, ld] and per-head tensors [B*H, N, dh]; column block col0 holds
// the H heads side by side (PyTorch's layout: feature h*dh + c of the block belongs to head h).
template <class T, class Space = ExecSpace>
void split_heads(const Mat3On<T, Space>& out, const ConstMatOn<T, Space>& in, long col0, long batch, long heads);
template <class T, class Space = ExecSpace>
void merge_heads(const MatOn<T, Space>& out, long col0, const ConstMat3On<T, Space>& in, long batch, long heads);

}  // namespace attnphys::ops
