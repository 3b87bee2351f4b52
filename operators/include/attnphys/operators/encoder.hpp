#pragma once
// Transformer encoder: optional input embedding, absolute positional information, L pre-LN blocks, optional final
// LayerNorm. Tokens are [B*N, features] matrices (token t = b*N + n); the readout belongs to the application.
//
// Parameter names (under the prefix given to the constructor), matching torch.nn.TransformerEncoder where it has
// them: embed.{weight,bias} (d_in > 0), pos_embed [max_len, d] (learned), coord_proj.{weight,bias} (coords),
// layers.<l>.{norm1, self_attn, norm2, linear1, linear2}.*, norm.{weight,bias} (final_norm).
#include <cstdint>
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/operators/positional.hpp"
#include "attnphys/operators/transformer_block.hpp"

namespace attnphys::ops {

// Absolute positional information added to the embedded tokens.
enum class PositionalKind { None, Sinusoidal, Learned, Coords };
// Arithmetic of softmax attention: float32 throughout, or bf16 products with float32 accumulation and softmax on
// Intel AMX, or AVX512-BF16 without AMX (AttentionScratch::bf16; tiled attention, head width 16, no mask or relative
// bias, float32 models).
enum class AttentionPrecision { Float32, BF16 };

}  // namespace attnphys::ops

namespace attnphys {
template <>
struct EnumNames<ops::PositionalKind> {
  static constexpr EnumName<ops::PositionalKind> values[] = {{ops::PositionalKind::None, "none"},
                                                             {ops::PositionalKind::Sinusoidal, "sinusoidal"},
                                                             {ops::PositionalKind::Learned, "learned"},
                                                             {ops::PositionalKind::Coords, "coords"}};
};
template <>
struct EnumNames<MatmulPrecision> {
  static constexpr EnumName<MatmulPrecision> values[] = {{MatmulPrecision::Float32, "float32"},
                                                         {MatmulPrecision::BF16, "bf16"}};
};
template <>
struct EnumNames<ops::AttentionPrecision> {
  static constexpr EnumName<ops::AttentionPrecision> values[] = {{ops::AttentionPrecision::Float32, "float32"},
                                                                 {ops::AttentionPrecision::BF16, "bf16"}};
};
}  // namespace attnphys

namespace attnphys::ops {

// The kinds are parsed where the options are read (TOML, --set, Python keywords: OptionSet, through the names above
// and EnumNames<AttentionKind>); the encoder dispatches on them.
struct EncoderOptions {
  long d_in = 0;          // input features per token; 0: the input already has d_model features (no embedding)
  long d_model = 64;
  long n_heads = 4;
  long n_layers = 2;
  long d_ff = 0;          // feed-forward width; 0: 4 * d_model
  AttentionKind attention = AttentionKind::Dense;  // dense | tiled | galerkin | factored | physics
  long n_slices = 32;     // physics attention: slices per head
  bool causal = false;
  long window = -1;       // local attention |i - j| <= window; negative: global
  bool periodic = false;  // ring distances (window, relative bias, factored weights)
  bool relative_bias = false;
  long max_len = 0;       // longest sequence (learned encoding, relative bias, factored attention)
  PositionalKind positional = PositionalKind::None;  // none | sinusoidal | learned | coords
  long coord_dim = 0;     // coordinates per token (positional = coords)
  long coord_features = 16;    // random Fourier features (2x this many inputs to the projection)
  double coord_sigma = 1.0;    // frequency scale of the features, in inverse coordinate units
  long coord_seed = 1234;      // fixes the random frequencies (part of the model, not trained)
  bool final_norm = true;
  double ln_eps = 1e-5;
  AttentionPrecision attention_precision = AttentionPrecision::Float32;
  MatmulPrecision matmul_precision = MatmulPrecision::Float32;  // float gemm() calls inside forward / backward

  void validate() const;
  void declare(OptionSet& set, const std::string& section = "encoder");
  long ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  AttentionOptions attention_options() const;
};

// Extra per-call inputs.
template <class T>
struct EncoderInputs {
  ConstMat<T> coords;  // [Bc*N, coord_dim], Bc = B or 1 (positional = coords)
  IntMask key_mask;    // [B, N] nonzero = key may be attended; empty: all keys
};

// Everything saved between forward and backward, sized for (B, N) and reused while the shapes repeat.
template <class T>
struct EncoderCache {
  long batch = 0, len = 0, coord_batch = 0;
  View2<T> input, phi, coord_enc, dcoord;  // copy of x; coordinate features and their projection
  std::vector<View2<T>> acts;              // residual stream before block l (l = 0..L)
  std::vector<BlockCache<T>> blocks;
  View1<T> norm_mean, norm_rstd;
  View2<T> dres;                           // gradient of the residual stream
  AttentionScratch<T> scratch;
  IntMask key_mask;
};

template <class T>
class Encoder {
 public:
  explicit Encoder(EncoderOptions options, std::string prefix = "");
  const EncoderOptions& options() const { return opt_; }
  const TransformerBlock<T>& block(long l) const { return blocks_.at(l); }

  // Adds every parameter block to buf (before buf.allocate()); the blocks are contiguous, in declaration order.
  void declare(ParameterBuffer<T>& buf);
  // PyTorch-like initial values, deterministic in seed.
  void init(ParameterBuffer<T>& buf, std::uint64_t seed) const;
  // The encoder's parameters are the flat range [param_offset, param_offset + num_parameters) of the buffer.
  long param_offset() const { return offset_; }
  long num_parameters() const { return count_; }

  // y [B*N, d_model] from x [B*N, d_in or d_model].
  void forward(const Mat<T>& y, EncoderCache<T>& cache, const ConstMat<T>& x, long batch, long len,
               const ParameterBuffer<T>& params, const EncoderInputs<T>& in = {}) const;
  // dx [B*N, d_in or d_model] = (skipped when empty); parameter gradients += from dy [B*N, d_model].
  void backward(const Mat<T>& dx, EncoderCache<T>& cache, const ConstMat<T>& dy,
                const ParameterBuffer<T>& params) const;
  // Row b of jac [B, num_parameters()] = d<dy_b, y_b>/dθ for each sample b alone (dy [B*N, d_model] are per-sample
  // output cotangents; all ones-weighted readouts are a special case). Runs one-sample forward/backward passes in
  // `cache`; the buffer's gradient slot is left as it was.
  void per_sample_gradients(const Mat<T>& jac, EncoderCache<T>& cache, const ConstMat<T>& x, const ConstMat<T>& dy,
                            long batch, long len, ParameterBuffer<T>& params, const EncoderInputs<T>& in = {}) const;
  // The N attention weights of query `query` in head `head` of layer `layer` for sample `sample` (last forward).
  std::vector<T> attention_weights(const EncoderCache<T>& cache, const ParameterBuffer<T>& params, long layer,
                                   long sample, long head, long query) const;

 private:
  EncoderOptions opt_;
  std::string prefix_;
  // The encoder's own parameter blocks, resolved once in declare() (llm.c's ParameterTensors): forward and backward
  // build their views from these, with no name lookups. Unused blocks stay unresolved.
  struct Tensors {
    ParamRef embed_w, embed_b;      // d_in > 0
    ParamRef pos_embed;             // positional = learned
    ParamRef coord_w, coord_b;      // positional = coords
    ParamRef norm_w, norm_b;        // final_norm
  } t_;
  std::vector<TransformerBlock<T>> blocks_;
  InitPlan plan_;
  View2<T> freqs_;  // random Fourier frequencies [coord_features, coord_dim]
  long offset_ = 0, count_ = 0;
};

extern template class Encoder<float>;
extern template class Encoder<double>;

}  // namespace attnphys::ops
