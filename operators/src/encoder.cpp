#include "attnphys/operators/encoder.hpp"

#include "attnphys/core/amx.hpp"
#include "attnphys/core/random.hpp"

namespace attnphys::ops {

void EncoderOptions::validate() const {
  require(d_in >= 0, "encoder: d_in = ", d_in, " must be >= 0 (0: no input embedding)");
  require(n_layers >= 0, "encoder: n_layers = ", n_layers, " must be >= 0");
  require(positional != PositionalKind::Learned || max_len > 0,
          "encoder: a learned positional encoding needs max_len > 0");
  require(positional != PositionalKind::Coords || (coord_dim > 0 && coord_features > 0 && coord_sigma > 0),
          "encoder: coordinate encodings need coord_dim > 0, coord_features > 0 and coord_sigma > 0");
  require(ln_eps > 0, "encoder: ln_eps must be positive");
  attention_options().validate();
  if (attention_precision == AttentionPrecision::BF16) {
    const long dh = n_heads > 0 ? d_model / n_heads : 0;
    require(attention == AttentionKind::Tiled, "encoder: attention_precision = bf16 needs attention = tiled");
    require(dh == 16, "encoder: attention_precision = bf16 needs head width d_model / n_heads = 16, not ", dh,
            "; set attention_precision = float32");
    require(!causal && window < 0 && !relative_bias,
            "encoder: attention_precision = bf16 takes no causal or window mask and no relative bias; set "
            "attention_precision = float32");
    require(bf16_attention_available(), "encoder: attention_precision = bf16 cannot run here: ",
            bf16_attention_unavailable_reason(), "; set attention_precision = float32");
  }
  require(matmul_precision != MatmulPrecision::BF16 || amx::available(),
          "encoder: matmul_precision = bf16 cannot run here: ", amx::unavailable_reason(),
          "; set matmul_precision = float32");
}

AttentionOptions EncoderOptions::attention_options() const {
  AttentionOptions a;
  a.d_model = d_model;
  a.n_heads = n_heads;
  a.kind = attention;
  a.causal = causal;
  a.window = window;
  a.periodic = periodic;
  a.relative_bias = relative_bias;
  a.max_len = max_len;
  a.n_slices = n_slices;
  return a;
}

void EncoderOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".d_in", &d_in, "input features per token (0: inputs already have d_model features)",
          Range::non_negative());
  set.add(s + ".d_model", &d_model, "token width", Range::at_least(1));
  set.add(s + ".n_heads", &n_heads, "attention heads (must divide d_model)", Range::at_least(1));
  set.add(s + ".n_layers", &n_layers, "transformer blocks", Range::non_negative());
  set.add(s + ".d_ff", &d_ff, "feed-forward width (0: 4 * d_model)", Range::non_negative());
  set.add(s + ".attention", &attention, "attention kind");
  set.add(s + ".n_slices", &n_slices, "physics attention: slices per head", Range::at_least(1));
  set.add(s + ".causal", &causal, "attend only to earlier tokens");
  set.add(s + ".window", &window, "local attention window |i - j| <= window (negative: global)");
  set.add(s + ".periodic", &periodic, "ring distances for window, relative bias and factored weights");
  set.add(s + ".relative_bias", &relative_bias, "learned per-head score bias b_h(i - j)");
  set.add(s + ".max_len", &max_len, "longest sequence (learned encoding, relative tables)", Range::non_negative());
  set.add(s + ".positional", &positional, "absolute positional information");
  set.add(s + ".coord_dim", &coord_dim, "coordinates per token (positional = coords)", Range::non_negative());
  set.add(s + ".coord_features", &coord_features, "random Fourier features of the coordinates",
          Range::at_least(1));
  set.add(s + ".coord_sigma", &coord_sigma, "frequency scale of the coordinate features", Range::positive());
  set.add(s + ".coord_seed", &coord_seed, "seed of the random coordinate frequencies");
  set.add(s + ".final_norm", &final_norm, "LayerNorm after the last block");
  set.add(s + ".ln_eps", &ln_eps, "LayerNorm epsilon", Range::positive());
  set.add(s + ".attention_precision", &attention_precision,
          "softmax attention arithmetic: float32, or bf16 products on Intel AMX or AVX512-BF16 (tiled, head width 16)");
  set.add(s + ".matmul_precision", &matmul_precision,
          "arithmetic of the float32 dense products (projections, feed-forward): float32, or bf16 operands with "
          "float32 accumulation on Intel AMX");
}

template <class T>
Encoder<T>::Encoder(EncoderOptions options, std::string prefix) : opt_(std::move(options)), prefix_(std::move(prefix)) {
  opt_.validate();
  for (long l = 0; l < opt_.n_layers; ++l)
    blocks_.emplace_back(opt_.attention_options(), opt_.ff_width(), prefix_ + "layers." + std::to_string(l) + ".",
                         T(opt_.ln_eps));
  if (opt_.positional == PositionalKind::Coords) {
    freqs_ = View2<T>("attnphys::coord_freqs", opt_.coord_features, opt_.coord_dim);
    fill_normal(freqs_, std::uint64_t(opt_.coord_seed), 0, 0.0, opt_.coord_sigma);
  }
}

template <class T>
void Encoder<T>::declare(ParameterBuffer<T>& buf) {
  require(plan_.empty(), "encoder: declare() was already called");
  offset_ = buf.size();
  const long d = opt_.d_model;
  t_ = Tensors{};
  if (opt_.d_in > 0) {
    declare_linear(buf, plan_, prefix_ + "embed.", d, opt_.d_in);
    t_.embed_w = buf.ref(prefix_ + "embed.weight");
    t_.embed_b = buf.ref(prefix_ + "embed.bias");
  }
  if (opt_.positional == PositionalKind::Learned) {
    buf.add(prefix_ + "pos_embed", {opt_.max_len, d}, false);
    plan_.push_back({prefix_ + "pos_embed", InitSpec::Kind::Normal, 0.02});
    t_.pos_embed = buf.ref(prefix_ + "pos_embed");
  }
  if (opt_.positional == PositionalKind::Coords) {
    declare_linear(buf, plan_, prefix_ + "coord_proj.", d, 2 * opt_.coord_features);
    t_.coord_w = buf.ref(prefix_ + "coord_proj.weight");
    t_.coord_b = buf.ref(prefix_ + "coord_proj.bias");
  }
  for (auto& b : blocks_) b.declare(buf, plan_);
  if (opt_.final_norm) {
    declare_layernorm(buf, plan_, prefix_ + "norm.", d);
    t_.norm_w = buf.ref(prefix_ + "norm.weight");
    t_.norm_b = buf.ref(prefix_ + "norm.bias");
  }
  count_ = buf.size() - offset_;
}

template <class T>
void Encoder<T>::init(ParameterBuffer<T>& buf, std::uint64_t seed) const {
  require(!plan_.empty() || count_ == 0, "encoder: declare() the parameters before init()");
  init_parameters(buf, plan_, seed);
}

template <class T>
void Encoder<T>::forward(const Mat<T>& y, EncoderCache<T>& c, const ConstMat<T>& x, long batch, long len,
                         const ParameterBuffer<T>& params, const EncoderInputs<T>& in) const {
  ScopedRegion region("attnphys::encoder_forward");
  const MatmulPrecisionScope precision(opt_.matmul_precision);
  const long d = opt_.d_model, tokens = batch * len, width = opt_.d_in > 0 ? opt_.d_in : d;
  require(batch > 0 && len > 0, "encoder: batch and length must be positive");
  require(long(x.extent(0)) == tokens && long(x.extent(1)) == width, "encoder: input is ", x.extent(0), "x",
          x.extent(1), ", expected ", tokens, "x", width, " (B*N tokens of ", width, " features)");
  require(long(y.extent(0)) == tokens && long(y.extent(1)) == d, "encoder: output is ", y.extent(0), "x",
          y.extent(1), ", expected ", tokens, "x", d);
  require(opt_.positional != PositionalKind::Learned || len <= opt_.max_len, "encoder: length ", len, " exceeds max_len ",
          opt_.max_len, " of the learned positional table");
  c.batch = batch;
  c.len = len;
  c.key_mask = in.key_mask;
  grow_view(c.input, "attnphys::encoder", tokens, width);
  Kokkos::deep_copy(c.input, View2<const T>(x.data(), tokens, width));
  if (c.acts.size() != std::size_t(opt_.n_layers + 1)) c.acts.resize(opt_.n_layers + 1);
  if (c.blocks.size() != std::size_t(opt_.n_layers)) c.blocks.resize(opt_.n_layers);
  for (auto& a : c.acts) grow_view(a, "attnphys::encoder", tokens, d);
  grow_view(c.dres, "attnphys::encoder", tokens, d);

  if (opt_.d_in > 0)
    linear_forward<T>(c.acts[0], c.input, params.view2(t_.embed_w), params.view1(t_.embed_b));
  else
    Kokkos::deep_copy(c.acts[0], c.input);
  if (opt_.positional == PositionalKind::Sinusoidal) sinusoidal_forward<T>(c.acts[0], batch, len);
  if (opt_.positional == PositionalKind::Learned)
    broadcast_add_forward<T>(c.acts[0], params.view2(t_.pos_embed), batch, len);
  if (opt_.positional == PositionalKind::Coords) {
    const long rows = in.coords.extent(0);
    require(in.coords.extent(0) != 0 && long(in.coords.extent(1)) == opt_.coord_dim &&
                (rows == len || rows == tokens),
            "encoder: coordinate encoding needs coords of shape [N or B*N, ", opt_.coord_dim, "], got ",
            in.coords.extent(0), "x", in.coords.extent(1));
    c.coord_batch = rows / len;
    grow_view(c.phi, "attnphys::encoder", rows, 2 * opt_.coord_features);
    grow_view(c.coord_enc, "attnphys::encoder", rows, d);
    grow_view(c.dcoord, "attnphys::encoder", rows, d);
    fourier_features<T>(c.phi, in.coords, freqs_);
    linear_forward<T>(c.coord_enc, c.phi, params.view2(t_.coord_w), params.view1(t_.coord_b));
    broadcast_add_forward<T>(c.acts[0], c.coord_enc, rows == len ? batch : 1, rows);
  }
  c.scratch.bf16 = opt_.attention_precision == AttentionPrecision::BF16;
  for (long l = 0; l < opt_.n_layers; ++l)
    blocks_[l].forward(c.acts[l + 1], c.blocks[l], c.acts[l], batch, len, params, in.key_mask, c.scratch);
  if (opt_.final_norm) {
    grow_view(c.norm_mean, "attnphys::encoder", tokens);
    grow_view(c.norm_rstd, "attnphys::encoder", tokens);
    layernorm_forward<T>(y, c.norm_mean, c.norm_rstd, c.acts[opt_.n_layers], params.view1(t_.norm_w),
                         params.view1(t_.norm_b), T(opt_.ln_eps));
  } else {
    Kokkos::deep_copy(View2<T>(y.data(), tokens, d), c.acts[opt_.n_layers]);
  }
}

template <class T>
void Encoder<T>::backward(const Mat<T>& dx, EncoderCache<T>& c, const ConstMat<T>& dy,
                          const ParameterBuffer<T>& params) const {
  ScopedRegion region("attnphys::encoder_backward");
  const MatmulPrecisionScope precision(opt_.matmul_precision);
  const long d = opt_.d_model, tokens = c.batch * c.len, L = opt_.n_layers;
  require(c.batch > 0, "encoder backward: run forward first");
  require(long(dy.extent(0)) == tokens && long(dy.extent(1)) == d, "encoder backward: dy is ", dy.extent(0), "x",
          dy.extent(1), ", expected ", tokens, "x", d);
  if (opt_.final_norm) {
    Kokkos::deep_copy(c.dres, T(0));
    layernorm_backward<T>(c.dres, params.view1(t_.norm_w, Slot::Grads), params.view1(t_.norm_b, Slot::Grads), dy,
                          c.acts[L], params.view1(t_.norm_w), c.norm_mean, c.norm_rstd);
  } else {
    Kokkos::deep_copy(c.dres, View2<const T>(dy.data(), tokens, d));
  }
  for (long l = L - 1; l >= 0; --l) blocks_[l].backward(c.dres, c.blocks[l], c.acts[l], params, c.scratch);
  if (opt_.positional == PositionalKind::Learned)
    broadcast_add_backward<T>(params.view2(t_.pos_embed, Slot::Grads), c.dres, c.batch, c.len);
  if (opt_.positional == PositionalKind::Coords) {
    const long rows = c.phi.extent(0);
    Kokkos::deep_copy(c.dcoord, T(0));
    broadcast_add_backward<T>(c.dcoord, c.dres, tokens / rows, rows);
    linear_backward<T>(Mat<T>(), params.view2(t_.coord_w, Slot::Grads), params.view1(t_.coord_b, Slot::Grads),
                       c.dcoord, c.phi, params.view2(t_.coord_w));
  }
  if (opt_.d_in > 0) {
    linear_backward<T>(dx, params.view2(t_.embed_w, Slot::Grads), params.view1(t_.embed_b, Slot::Grads), c.dres,
                       c.input, params.view2(t_.embed_w));
  } else if (dx.extent(0) != 0) {
    Kokkos::deep_copy(View2<T>(dx.data(), tokens, d), c.dres);
  }
}

template <class T>
void Encoder<T>::per_sample_gradients(const Mat<T>& jac, EncoderCache<T>& c, const ConstMat<T>& x,
                                      const ConstMat<T>& dy, long batch, long len, ParameterBuffer<T>& params,
                                      const EncoderInputs<T>& in) const {
  ScopedRegion region("attnphys::per_sample_gradients");
  const long d = opt_.d_model, width = x.extent(1);
  require(long(jac.extent(0)) == batch && long(jac.extent(1)) == count_, "per_sample_gradients: jac is ",
          jac.extent(0), "x", jac.extent(1), ", expected ", batch, "x", count_);
  require(long(x.extent(0)) == batch * len && long(dy.extent(0)) == batch * len && long(dy.extent(1)) == d,
          "per_sample_gradients: x and dy must have B*N = ", batch * len, " rows");
  const auto range = std::make_pair(offset_, offset_ + count_);
  auto grads = Kokkos::subview(params.grads(), range);
  View1<T> saved("attnphys::saved_grads", count_);
  Kokkos::deep_copy(saved, grads);
  View2<T> y("attnphys::per_sample_y", len, d);
  const bool shared_coords = in.coords.extent(0) != 0 && long(in.coords.extent(0)) == len;
  for (long b = 0; b < batch; ++b) {
    EncoderInputs<T> one;
    if (in.coords.extent(0) != 0)
      one.coords = shared_coords ? in.coords
                                 : ConstMat<T>(in.coords.data() + b * len * in.coords.extent(1), len,
                                               in.coords.extent(1));
    if (in.key_mask.extent(0) != 0)
      one.key_mask = Kokkos::subview(in.key_mask, std::make_pair(b, b + 1), Kokkos::ALL);
    forward(y, c, ConstMat<T>(x.data() + b * len * width, len, width), 1, len, params, one);
    Kokkos::deep_copy(grads, T(0));
    backward(Mat<T>(), c, ConstMat<T>(dy.data() + b * len * d, len, d), params);
    Kokkos::deep_copy(Kokkos::subview(jac, b, Kokkos::ALL), grads);
  }
  Kokkos::deep_copy(grads, saved);
}

template <class T>
std::vector<T> Encoder<T>::attention_weights(const EncoderCache<T>& c, const ParameterBuffer<T>& params, long layer,
                                             long sample, long head, long query) const {
  require(layer >= 0 && layer < opt_.n_layers, "attention weights: layer ", layer, " out of range (", opt_.n_layers,
          " layers)");
  require(long(c.blocks.size()) == opt_.n_layers, "attention weights: run a forward pass first");
  return blocks_[layer].attention().weights(c.blocks[layer].attn, params, sample, head, query);
}

template struct EncoderCache<float>;
template struct EncoderCache<double>;
template class Encoder<float>;
template class Encoder<double>;

}  // namespace attnphys::ops
