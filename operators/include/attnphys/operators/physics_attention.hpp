#pragma once
// Physics-Attention (Wu et al., "Transolver", ICML 2024): the N tokens are softly assigned to M learned slices,
// attention runs among the M slice tokens of each head, and its result is spread back to the tokens with the same
// assignment. Cost O(N·M·d) time and O(N·M·H) memory (the slice weights), no N × N term: 64² and 64³ grids fit.
//
// Per head h (dh = d/H), with tokens x [B*N, d] (PyTorch layout: feature h*dh + c belongs to head h):
//   fx = x W_fxᵀ + b_fx,  xm = x W_xᵀ + b_x                       [B*N, d]; heads fx_h, xm_h [B*H, N, dh]
//   s[b,h,i,m] = (xm_h[b,i] · W_slice[h][:, m] + b_slice[h, m]) / τ_h,   τ_h = exp(log_tau[h])
//   w[b,h,i,:] = softmax_m s[b,h,i,:]                               slice weights [B*H, N, M]
//   z[b,h,m]   = Σ_i w[b,h,i,m] fx_h[b,i] / (Σ_i w[b,h,i,m] + N ε)  slice tokens [B*H, M, dh], ε = 1e-5
//   q, k, v    = z Wqᵀ, z Wkᵀ, z Wvᵀ                                 dh × dh, no bias, shared by the heads (Transolver)
//   z'         = softmax(q kᵀ / sqrt(dh)) v                         [B*H, M, dh] (the dense softmax kernels)
//   o[b,h,i]   = Σ_m w[b,h,i,m] z'[b,h,m]                           heads merged to [B*N, d]
// The output projection (out_proj) belongs to MultiHeadAttention.
//
// The normaliser uses ε per token: Σ_i w + N ε = N (mean weight + ε), so a slice token is a ratio of two means over
// the tokens and duplicating every token (a refinement that adds no information) leaves it exactly unchanged.
// Transolver adds an absolute 1e-5, which makes z drift by a relative N ε / Σ_i w under refinement.
//
// Accumulation rule as in layers.hpp: parameter gradients +=, the input gradient =.
#include <vector>

#include "attnphys/operators/attention_core.hpp"

namespace attnphys::ops {

// ε of the slice normaliser, per token (see above).
inline constexpr double kPhysicsSliceEps = 1e-5;

// Saved activations and gradient buffers of one physics-attention layer, sized for (B, N, d, H, M) and reused while
// the shapes repeat.
template <class T>
struct PhysicsAttentionBuffers {
  long batch = 0, len = 0, heads = 0, slices = 0;
  View2<T> fx, xm;               // [B*N, d] value and slice projections
  View3<T> fxh, xmh, oh;         // [B*H, N, dh] their heads; the deslice output
  View3<T> logits, w;            // [B*H, N, M] tempered logits s and slice weights w = softmax_m s
  View2<T> den;                  // [B*H, M] Σ_i w + N ε
  View3<T> z, q, k, v, zo;       // [B*H, M, dh] slice tokens, their projections, slice attention output z'
  View3<T> p;                    // [B*H, M, M] attention among the slices
  View2<T> lse;                  // [B*H, M]
  View1<T> ones;                 // [N] ones: column sums over the tokens as products
  View2<T> dfx, dxm;             // gradient buffers
  View3<T> doh, dfxh, dxmh, dw, dzo, dq, dk, dv, dz;
  View2<T> dden;
  void ensure(long batch, long len, long d, long heads, long slices);
};

// Parameter views (MultiHeadAttention names: in_proj_fx.*, in_proj_x.*, slice.weight [H, dh, M], slice.bias
// [H, M], log_tau [H], to_q/to_k/to_v.weight [dh, dh]).
template <class T>
struct PhysicsAttentionParams {
  ConstMat<T> w_fx, w_x;  // [d, d]
  ConstVec<T> b_fx, b_x;  // [d]
  ConstMat3<T> w_slice;   // [H, dh, M]
  ConstMat<T> b_slice;    // [H, M]
  ConstVec<T> log_tau;    // [H]
  ConstMat<T> wq, wk, wv; // [dh, dh]
};
template <class T>
struct PhysicsAttentionGrads {
  Mat<T> w_fx, w_x;
  Vec<T> b_fx, b_x;
  Mat3<T> w_slice;
  Mat<T> b_slice;
  Vec<T> log_tau;
  Mat<T> wq, wk, wv;
};

// merged [B*N, d] = the heads' outputs o side by side, from x [B*N, d].
template <class T>
void physics_attention_forward(const Mat<T>& merged, PhysicsAttentionBuffers<T>& buf, const ConstMat<T>& x,
                               long batch, long len, const PhysicsAttentionParams<T>& p, AttentionScratch<T>& ws);
// dx = (skipped when empty), parameter gradients += from dmerged [B*N, d]; x is the forward's input.
template <class T>
void physics_attention_backward(const Mat<T>& dx, PhysicsAttentionBuffers<T>& buf, const ConstMat<T>& dmerged,
                                const ConstMat<T>& x, const PhysicsAttentionParams<T>& p,
                                const PhysicsAttentionGrads<T>& g, AttentionScratch<T>& ws);

// The M slice weights w[sample, head, token, :] of the last forward (a softmax over the slices).
template <class T>
std::vector<T> physics_slice_weights(const PhysicsAttentionBuffers<T>& buf, long sample, long head, long token);
// The effective token-to-token weights of the last forward: with v_j = Wv fx_h[j], o_i = Σ_j A_ij v_j where
//   A_ij = Σ_{m, m'} w_im P_mm' w_jm' / den_m'   (N values for query i; they sum to 1 - O(N ε / den)).
template <class T>
std::vector<T> physics_token_weights(const PhysicsAttentionBuffers<T>& buf, long sample, long head, long query);

}  // namespace attnphys::ops
