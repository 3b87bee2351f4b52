#pragma once
// Multi-head attention as a module: projections, head split, one of five attention kinds, head merge, output
// projection. Tokens are [B*N, d_model] matrices (batch-major).
//
// Parameters (prefix + name, PyTorch's nn.MultiheadAttention names where they exist):
//   in_proj_weight [3d, d], in_proj_bias [3d]   rows: q, then k, then v (dense, tiled, galerkin)
//   v_proj.weight [d, d], v_proj.bias [d]       (factored: values only)
//   out_proj.weight [d, d], out_proj.bias [d]
//   rel_bias [H, T]                              learned score bias b_h(i - j) (relative_bias = true)
//   alpha [H, T]                                 factored weights alpha_h(i - j)
//   k_norm.{weight,bias}, v_norm.{weight,bias} [H, dh]   Galerkin's layer norms, one per head (Cao 2021)
//   physics (Transolver's Physics-Attention, physics_attention.hpp), M = n_slices:
//     in_proj_fx.{weight [d, d], bias [d]}, in_proj_x.{weight [d, d], bias [d]}   values fx and slice inputs xm
//     slice.weight [H, dh, M], slice.bias [H, M]                                 slice logits per head
//     log_tau [H]                                                                temperature τ_h = exp(log_tau)
//     to_q.weight, to_k.weight, to_v.weight [dh, dh]                             among the slices, shared by heads
// with T = 2*max_len - 1 (open) or max_len (periodic).
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/operators/attention_core.hpp"
#include "attnphys/operators/init.hpp"
#include "attnphys/operators/physics_attention.hpp"

namespace attnphys::ops {

// The attention kinds; a name is parsed once where it is read (EnumNames below, parse_attention_kind) and the
// module dispatches on the value.
enum class AttentionKind { Dense, Tiled, Galerkin, Factored, Physics };
// "dense" | "tiled" | "galerkin" | "factored" | "physics" (the table below); anything else is refused with the list.
AttentionKind parse_attention_kind(const std::string& kind);
}  // namespace attnphys::ops

namespace attnphys {
template <>
struct EnumNames<ops::AttentionKind> {
  static constexpr EnumName<ops::AttentionKind> values[] = {{ops::AttentionKind::Dense, "dense"},
                                                            {ops::AttentionKind::Tiled, "tiled"},
                                                            {ops::AttentionKind::Galerkin, "galerkin"},
                                                            {ops::AttentionKind::Factored, "factored"},
                                                            {ops::AttentionKind::Physics, "physics"}};
};
}  // namespace attnphys

namespace attnphys::ops {

struct AttentionOptions {
  long d_model = 64;
  long n_heads = 4;
  AttentionKind kind = AttentionKind::Dense;
  bool causal = false;
  long window = -1;            // local window |i - j| <= window; negative: none
  bool periodic = false;       // ring distances for window, relative bias and factored weights
  bool relative_bias = false;  // learned b_h(i - j) added to the scores (dense, tiled)
  long max_len = 0;            // longest sequence the relative tables cover (relative_bias, factored)
  long n_slices = 32;          // physics: slices M per head
  void validate() const;
  long head_dim() const { return d_model / n_heads; }
};

// Saved activations and gradient buffers of one attention layer, sized for (B, N) and reused while they repeat.
template <class T>
struct AttentionCache {
  long batch = 0, len = 0;
  IntMask key_mask;
  View2<T> proj;                 // [B*N, 3d] (factored: [B*N, d])
  View3<T> q, k, v, o, p;        // [B*H, N, dh]; p [B*H, N, N] for dense, and factored with a key mask
  View2<T> lse;                  // [B*H, N]
  View2<T> merged;               // [B*N, d] heads side by side
  View3<T> kn, vn, kv;           // Galerkin: normalised k, v; kv [B*H, dh, dh]
  View1<T> k_mean, k_rstd, v_mean, v_rstd;
  View2<T> dproj, dmerged;       // gradient buffers
  View3<T> dq, dk, dv, dout, dkn, dvn;
  PhysicsAttentionBuffers<T> physics;  // physics attention: every buffer of the slices (only these are used)
  void ensure(AttentionKind kind, const AttentionOptions& opt, long batch, long len);
};

template <class T>
class MultiHeadAttention {
 public:
  MultiHeadAttention() = default;
  MultiHeadAttention(AttentionOptions options, std::string prefix);
  const AttentionOptions& options() const { return opt_; }
  AttentionKind kind() const { return kind_; }
  const std::string& prefix() const { return prefix_; }

  // Declares the parameter blocks and resolves them (forward and backward then look up no names): this module's
  // forward and backward take buffers of the layout declared here.
  void declare(ParameterBuffer<T>& buf, InitPlan& plan);
  // y [B*N, d] from x [B*N, d]; key_mask [B, N] or empty.
  void forward(const Mat<T>& y, AttentionCache<T>& cache, const ConstMat<T>& x, long batch, long len,
               const ParameterBuffer<T>& params, const IntMask& key_mask, AttentionScratch<T>& ws) const;
  // dx = (skipped when empty); parameter gradients +=. x is the forward's input.
  void backward(const Mat<T>& dx, AttentionCache<T>& cache, const ConstMat<T>& dy, const ConstMat<T>& x,
                const ParameterBuffer<T>& params, AttentionScratch<T>& ws) const;
  // Weights of query `query` of sample `sample` over the N keys in head `head`, from the last forward. Physics
  // attention: the effective token weights A_qj = Σ_{m,m'} w_qm P_mm' w_jm' / den_m' (physics_token_weights).
  std::vector<T> weights(const AttentionCache<T>& cache, const ParameterBuffer<T>& params, long sample, long head,
                         long query) const;
  // Physics attention only: the M slice weights of token `token` (softmax over the slices) from the last forward.
  std::vector<T> slice_weights(const AttentionCache<T>& cache, long sample, long head, long token) const;

 private:
  AttentionOptions opt_;
  AttentionKind kind_ = AttentionKind::Dense;
  std::string prefix_;
  // The parameter blocks, resolved once in declare() (those of the kind and options; the others stay unresolved).
  struct Tensors {
    ParamRef in_w, in_b;                        // in_proj_weight, in_proj_bias (dense, tiled, galerkin)
    ParamRef v_w, v_b, alpha;                   // factored: v_proj, alpha
    ParamRef kn_w, kn_b, vn_w, vn_b;            // galerkin: k_norm, v_norm
    ParamRef rel_bias;                          // relative_bias
    ParamRef out_w, out_b;                      // out_proj
    ParamRef fx_w, fx_b, xm_w, xm_b;            // physics: in_proj_fx, in_proj_x
    ParamRef slice_w, slice_b, log_tau, to_q, to_k, to_v;
  } t_;
  ScoreSpec<T> spec(const AttentionCache<T>& c, const ParameterBuffer<T>& params) const;
  PhysicsAttentionParams<T> physics_params(const ParameterBuffer<T>& params) const;
  PhysicsAttentionGrads<T> physics_grads(const ParameterBuffer<T>& params) const;
};

extern template class MultiHeadAttention<float>;
extern template class MultiHeadAttention<double>;

}  // namespace attnphys::ops
