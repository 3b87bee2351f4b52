#pragma once
// Relative-position transformer wavefunction for 1D spin-1/2 chains (a Vision-Transformer ansatz in the manner of
// Viteritti, Rende & Becca, PRL 130, 236401 (2023), and Rende et al. 2024):
//
//   σ [N]  →  N/b patches of b neighbouring spins (tokens [N/b, b])  →  linear embedding to d_model
//          →  L pre-LayerNorm blocks whose attention is either *factored* (weights α_h(i−j) that depend on the
//             patch distance only, circulant for periodic chains) or query-key softmax with a learned relative bias
//          →  final LayerNorm  →  z = Σ_tokens y  (R^d)
//          →  log ψ(σ) = Σ_{k<K} log cosh(w_k · z + c_k),  w_k ∈ C^d, c_k ∈ C   (amplitude and phase)
//
// Options add, on top:
//   symmetrize     ψ(σ) = Σ_{s<b} ψ_raw(T^s σ) over the b intra-patch shifts, so that with periodic factored
//                  attention (already invariant under whole-patch shifts) ψ is invariant under every translation;
//   marshall_sign  ψ(σ) ← (−1)^{number of up spins on the even sublattice} ψ(σ), the sign structure of bipartite
//                  antiferromagnets (Heisenberg; J1-J2 approximately, exactly at the Majumdar-Ghosh point).
//
// Gradients O_k = ∂ log ψ / ∂θ_k are exact: the readout's by hand, the encoder's by one batched backward (factored
// attention, any number of blocks): the batch runs forward in chunks of configurations, then per chunk one kernel
// per block walks every sample's tokens back with the two cotangents Re and Im of w_s ∂ log ψ_s / ∂z (w_s the shift
// weights) and accumulates that sample's parameter gradients straight into its row of O (per-sample outer products
// instead of one summed weight gradient); no autograd tape, no loop over samples on the host. Dense attention keeps
// one forward and two backward passes of the encoder per configuration and shift.
#include <cstdint>
#include <memory>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/operators/encoder.hpp"
#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::vmc {

namespace detail {
template <class T>
struct IncrementalRows;  // the fused incremental kernels' parameters (transformer.cpp)
}  // namespace detail

// factored: alpha_h(i - j) weights; dense: softmax attention with a learned relative bias.
enum class TransformerAttention { Factored, Dense };
// Absolute positions of the tokens: auto (learned for open chains, none for periodic ones), none, learned.
enum class TransformerPositional { Auto, None, Learned };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::TransformerAttention> {
  static constexpr EnumName<vmc::TransformerAttention> values[] = {{vmc::TransformerAttention::Factored, "factored"},
                                                                   {vmc::TransformerAttention::Dense, "dense"}};
};
template <>
struct EnumNames<vmc::TransformerPositional> {
  static constexpr EnumName<vmc::TransformerPositional> values[] = {{vmc::TransformerPositional::Auto, "auto"},
                                                                    {vmc::TransformerPositional::None, "none"},
                                                                    {vmc::TransformerPositional::Learned, "learned"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct TransformerAnsatzOptions {
  long patch_size = 2;         // b: spins per token (must divide N)
  long d_model = 16;
  long n_heads = 2;
  long n_layers = 1;
  long d_ff = 0;               // feed-forward width; 0: 2 * d_model
  TransformerAttention attention = TransformerAttention::Factored;
  TransformerPositional positional = TransformerPositional::Auto;
  long hidden = 0;             // complex log-cosh units K of the readout; 0: d_model
  bool symmetrize = true;      // sum over the b intra-patch translations (periodic chains only)
  bool marshall_sign = false;  // multiply by (−1)^{N_up on even sites}
  double init_std = 0.05;      // readout weights start as N(0, init_std² / d_model)
  long seed = 1;
  long chunk_tokens = 512;     // log ψ runs the batch in chunks of ~this many tokens (B·S·Np/chunk); 0: one pass
  bool incremental = true;     // one factored block: proposals and connected configurations recompute only the
                               // changed tokens' attention values (IncrementalLogPsi); false: full evaluations

  void declare(OptionSet& set, const std::string& section = "transformer");
  void validate() const;
};

template <class T>
class TransformerAnsatz final : public LogPsiModel<T>, public IncrementalLogPsi<T> {
 public:
  // periodic: whether the chain is a ring (circulant attention, translation symmetrisation).
  TransformerAnsatz(int n_sites, bool periodic, const TransformerAnsatzOptions& options);
  TransformerAnsatz(const TransformerAnsatz&) = delete;  // out_ views its own params_
  TransformerAnsatz& operator=(const TransformerAnsatz&) = delete;
  int n_sites() const override { return n_; }
  long n_parameters() const override { return params_.size(); }
  void log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) override;
  void log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) override;
  ParameterBuffer<T>& parameters() override { return params_; }
  std::string name() const override { return "transformer"; }
  const TransformerAnsatzOptions& options() const { return opt_; }
  const ops::EncoderOptions& encoder_options() const { return enc_.options(); }
  long n_shifts() const { return shifts_; }

  // IncrementalLogPsi: available for one factored-attention block (options.incremental). The reference keeps the
  // configurations and the block's residual stream after attention, x1 = x0 + out_proj(attention) [R·S·Np, d]; a
  // configuration differing in tokens J gets x1 + Σ_{j∈J} (δx0_j at token j + Σ_h α_h(t−j) W_o,h δv_j,h at every
  // token t), and only the feed-forward half of the block, the final norm and the readout run on every token.
  bool incremental_enabled() const override;
  // float64 models evaluate a low-precision reference set with a float32 copy of themselves (parameters copied at
  // set_reference); float32 models have no lower precision.
  bool set_low_precision(bool low) override;
  void set_reference(const View2<const T>& ref) override;
  void log_psi_from_reference(const View2<const T>& sigma, const View1<const long>& parent, const View1<T>& re,
                              const View1<T>& im) override;
  void update_reference(const View1<const long>& take) override;
  // One chunk of log_psi_from_reference (configurations [lo, lo + count) of sigma).
  void incremental_chunk(const View2<const T>& sigma, const View1<const long>& parent, long lo, long count,
                         const View1<T>& re, const View1<T>& im);

  // Implementation steps (public because they hold device kernels).
  void make_tokens(const View2<const T>& sigma);            // tokens_ [B*S*Np, b] for the S shifts
  void readout(long rows);                                  // y_ pooled into z_ → per-shift log ψ (lp_re_, lp_im_)
  void readout_pooled(long rows);                           // z_ → per-shift log ψ
  void ensure_rows(long rows);                              // z_, theta, lp, w for `rows` rows
  void combine(long batch, const View1<T>& re, const View1<T>& im);  // shifts → log ψ, weights w_
  // After readout + combine of configurations [lo, lo + count): the readout's entries of O (=) and g_ = ∂ lp/∂z.
  void readout_gradients(long lo, long count, const View2<T>& o_re, const View2<T>& o_im);
  // Batched per-sample encoder gradients of configurations [lo, lo + count) of sigma (factored attention): forward
  // into grad_cache_, readout, then the backward kernels; writes rows lo .. lo + count - 1 of O (=).
  void gradients_chunk(const View2<const T>& sigma, long lo, long count, const View2<T>& o_re, const View2<T>& o_im);
  bool batched_gradients() const { return opt_.attention == TransformerAttention::Factored; }

 private:
  int n_;
  bool periodic_;
  TransformerAnsatzOptions opt_;
  long np_, shifts_, d_, k_;
  ops::Encoder<T> enc_;
  ParameterBuffer<T> params_;
  // The readout's blocks, looked up once after allocation, with their offsets in the flat vector.
  struct Readout {
    Unmanaged2<T> W_re, W_im;
    Unmanaged1<T> c_re, c_im;
    long o_W_re = 0, o_W_im = 0, o_c_re = 0, o_c_im = 0;
  } out_;
  // Offsets of the encoder's blocks in the flat vector, looked up once (-1: the block does not exist): the final
  // norm, the embedding and, for factored attention, every block's tensors (the batched gradient and incremental
  // kernels read them through these).
  struct LayerOffsets {
    long norm1_w = -1, norm1_b = -1, v_w = -1, v_b = -1, out_w = -1, out_b = -1, alpha = -1, alpha_table = 0;
    long norm2_w = -1, norm2_b = -1, l1_w = -1, l1_b = -1, l2_w = -1, l2_b = -1;
  };
  struct EncoderOffsets {
    long embed_w = -1, embed_b = -1, pos = -1, norm_w = -1, norm_b = -1;
    std::vector<LayerOffsets> layers;
  } enc_off_;
  const T* param_ptr(long offset) const { return offset < 0 ? nullptr : params_.params().data() + offset; }
  ops::EncoderCache<T> cache_, one_cache_, grad_cache_;
  View2<T> bw_res_, bw_dh_, bw_dv_, bw_dg_, bw_gp_, bw_ones_;  // batched backward: [2 tokens, d] / [tokens, d_ff]
  View2<T> tokens_, y_, z_, theta_re_, theta_im_, g_re_, g_im_, dy_, sub_re_, sub_im_;
  View1<T> lp_re_, lp_im_, w_re_, w_im_;
  // Incremental evaluation: reference configurations and x1; the last call's configurations and parents (update_
  // reference recomputes their x1); per-row scratch of the fused kernel; transposed weights.
  static constexpr long kKeepX1Configs = 4096;  // batches up to this size keep x1 for update_reference
  View2<T> ref_sigma_, ref_x1_, inc_sigma_, inc_scratch_, inc_x1_;
  bool inc_keep_x1_ = false;
  bool low_next_ = false, low_ref_ = false;          // requested precision; the current reference's
  std::shared_ptr<TransformerAnsatz<float>> f32_;     // the float32 copy (T = double only)
  Kokkos::View<float**, Kokkos::LayoutRight, MemSpace> f32_sigma_;
  Kokkos::View<float*, MemSpace> f32_re_, f32_im_;
  View1<long> inc_parent_;
  View1<T> inc_wt_;
  detail::IncrementalRows<T> incremental_rows() const;
  bool inc_ok_ = false;
};

extern template class TransformerAnsatz<float>;
extern template class TransformerAnsatz<double>;

}  // namespace attnphys::vmc
