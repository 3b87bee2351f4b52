#include "attnphys/solvers/training/heat_surrogate.hpp"
#include "attnphys/solvers/training/surrogate_kernels.hpp"

#include <cmath>

#include "attnphys/core/parallel.hpp"
#include "attnphys/operators/init.hpp"

namespace attnphys::training {

namespace {
// model.conserve: out_b += mean(u_b) − mean(out_b) per sample of len points.
template <class T>
void conserve_mean(const ops::Vec<T>& out, const ops::ConstVec<T>& u, long batch, long len) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const double inv = 1.0 / double(len);
  Kokkos::parallel_for(
      "attnphys::conserve_mean", Policy(batch, Kokkos::AUTO), KOKKOS_LAMBDA(const Policy::member_type& m) {
        const long off = m.league_rank() * len;
        double shift = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, len),
            [&](long p, double& acc) { acc += double(u(off + p)) - double(out(off + p)); }, shift);
        const T d = T(shift * inv);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, len), [&](long p) { out(off + p) += d; });
      });
}

// Its backward: g = dout − mean(dout) per sample (into proj); with du non-empty, du_b += mean(dout_b) (the input's
// mean enters every output point).
template <class T>
void conserve_mean_backward(const View1<T>& proj, const ops::ConstVec<T>& dout, const ops::Vec<T>& du, long batch,
                            long len) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const double inv = 1.0 / double(len);
  const bool want_du = du.extent(0) > 0;
  Kokkos::parallel_for(
      "attnphys::conserve_mean_backward", Policy(batch, Kokkos::AUTO), KOKKOS_LAMBDA(const Policy::member_type& m) {
        const long off = m.league_rank() * len;
        double sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, len), [&](long p, double& acc) { acc += double(dout(off + p)); }, sum);
        const T mean = T(sum * inv);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, len), [&](long p) {
          if (want_du) du(off + p) += mean;
          else proj(off + p) = dout(off + p) - mean;
        });
      });
}
}  // namespace

SurrogateOptions::SurrogateOptions() {
  encoder.d_model = 32;
  encoder.n_heads = 4;
  encoder.n_layers = 1;
  encoder.d_ff = 64;
  encoder.attention = ops::AttentionKind::Dense;
  encoder.final_norm = false;  // keeps the readout linear in the features: the heat map itself is linear
}

void SurrogateOptions::declare(OptionSet& set) {
  set.add("model.kind", &kind,
          "kernel (coordinate attention, linear in the field), conditioned (kernel attention whose weights depend on "
          "the input channels, still linear in the field) or transformer");
  set.add("model.conditioned_attention", &conditioned_attention,
          "conditioned: dense (saved probabilities), tiled (FlashAttention-2, O(N) memory) or auto");
  set.add("model.attention_precision", &attention_precision,
          "conditioned / transformer: float32, or bf16 for the global softmax attention's products in bf16 with "
          "float32 accumulation and a float32 softmax (Intel AMX, or AVX512-BF16 on AMD Zen 4/5 and Intel Cooper "
          "Lake; tiled attention, head width model.kernel_dk (conditioned) or d_model / n_heads (transformer) = 16)");
  set.add("model.kernel_heads", &kernel_heads,
          "kernel / conditioned: attention heads (conditioned with model.local_radius > 0: 0 turns the global "
          "attention off, leaving the κ-conditioned local stencil)",
          Range::non_negative());
  set.add("model.kernel_dk", &kernel_dk, "kernel: query/key width per head", Range::at_least(1));
  set.add("model.kernel_layers", &kernel_layers, "kernel: stacked layers", Range::at_least(1));
  set.add("model.d_model", &encoder.d_model, "token width", Range::at_least(1));
  set.add("model.n_heads", &encoder.n_heads, "attention heads (must divide d_model)", Range::at_least(1));
  set.add("model.n_layers", &encoder.n_layers, "transformer blocks", Range::at_least(1));
  set.add("model.d_ff", &encoder.d_ff, "feed-forward width (0: 4 * d_model)", Range::non_negative());
  set.add("model.attention", &encoder.attention, "attention kind",
          {ops::AttentionKind::Dense, ops::AttentionKind::Tiled, ops::AttentionKind::Galerkin,
           ops::AttentionKind::Physics});
  set.add("model.n_slices", &encoder.n_slices, "physics attention: slices per head", Range::at_least(1));
  set.add("model.coords", &coords, "coordinate encoding");
  set.add("model.harmonics", &harmonics, "harmonics per axis (coords = harmonics)", Range::at_least(1));
  set.add("model.coord_features", &encoder.coord_features, "random Fourier features (coords = fourier)",
          Range::at_least(1));
  set.add("model.coord_sigma", &encoder.coord_sigma, "frequency scale of the Fourier features", Range::positive());
  set.add("model.input_kappa", &input_kappa, "shorthand for data.channels = [\"kappa\"] (transformer)");
  set.add("model.stencil", &stencil,
          "transformer: add the local first and second differences of u and of every channel to each token");
  set.add("model.local_radius", &local_radius,
          "conditioned: radius r of a κ-conditioned local stencil added in every layer, (2r+1)^dim weights per "
          "token (0: none)",
          Range::non_negative());
  set.add("model.local_softmax", &local_softmax,
          "conditioned with model.local_radius > 0: the local stencil's weights are a softmax over the offsets "
          "(positive, summing to 1) in place of the b0·u term: a max-principle operator, stable in rollouts");
  set.add("model.local_edge", &local_edge,
          "conditioned with model.local_radius > 0: what the local stencil reads beyond a non-periodic edge: clamp "
          "(the edge value repeated), odd (minus the mirrored cell: zero Dirichlet sides) or even (the mirrored "
          "cell: zero-flux sides)");
  set.add("model.channel_window", &channel_window,
          "conditioned: the channels' values at the (2w+1)^dim neighbours of each token join its conditioning "
          "(regular grids; 0: the channels at the token only)",
          Range::non_negative());
  set.add("model.layer_repeat", &layer_repeat,
          "conditioned with model.kernel_heads = 0: each layer's κ-conditioned update (b0·u + local stencil + e) is "
          "applied K times with the same weights, like K explicit steps of a learned scheme (receptive field "
          "K·layers·r cells for K times the stencil work; the conditioning network runs once per layer)",
          Range::at_least(1));
  set.add("model.dt_input", &dt_input, "feed the horizon Δt/Δt_base (train with several data.horizons)");
  set.add("model.condition_on_field", &condition_on_field,
          "conditioned: the field itself conditions the attention too (quasi-linear A(u) u, for nonlinear κ(u))");
  set.add("model.conserve", &conserve,
          "keep each predicted field's mean equal to the input's (heat conserved: periodic or Neumann boundaries, "
          "no source; the run turns it off, with a note, where the problem does not conserve heat)");
  set.add("model.final_norm", &encoder.final_norm, "LayerNorm before the readout");
}

void SurrogateOptions::validate() const {
  // kind, coords and conditioned_attention are enums: an unknown name was refused where it was read.
  using K = SurrogateKind;
  require(harmonics >= 1, "model.harmonics must be >= 1");
  require(kind != K::Conditioned || coords == CoordEncoding::Harmonics,
          "model.kind = conditioned builds its queries and keys ",
          "from the harmonic coordinate encoding and the channels: set model.coords = harmonics");
  require(kind != K::Kernel || coords == CoordEncoding::Harmonics,
          "model.kind = kernel builds its queries and keys from the ",
          "harmonic coordinate encoding: set model.coords = harmonics");
  require(kind != K::Kernel || !input_kappa, "model.kind = kernel is linear in the field and cannot take κ as an ",
          "input: use model.kind = transformer for variable diffusivity");
  require(kind != K::Kernel || extra_channels == 0, "model.kind = kernel is linear in the field and cannot take ",
          "extra input channels (data.channels): use model.kind = transformer");
  require(extra_channels >= 0, "heat surrogate: negative number of extra channels");
  require(local_radius >= 0, "model.local_radius must be >= 0, got ", local_radius);
  require(!local_softmax || (kind == K::Conditioned && local_radius > 0), "model.local_softmax normalises the ",
          "weights of the conditioned local stencil: set model.kind = conditioned and model.local_radius > 0, or ",
          "model.local_softmax = false");
  require(kernel_heads >= 1 || (kind == K::Conditioned && local_radius > 0), "model.kernel_heads = ", kernel_heads,
          ": the model needs at least one attention head (0 is allowed only for model.kind = conditioned with ",
          "model.local_radius > 0, where the local stencil carries the map)");
  require(!condition_on_field || kind == K::Conditioned, "model.condition_on_field conditions the attention of ",
          "model.kind = conditioned on the field: set model.kind = conditioned (the transformer kind sees the field ",
          "anyway) or model.condition_on_field = false");
  require(channel_window == 0 || kind == K::Conditioned, "model.channel_window widens the conditioning of ",
          "model.kind = conditioned: set model.kind = conditioned or model.channel_window = 0");
  require(local_edge == LocalEdge::Clamp || local_radius > 0, "model.local_edge sets what the conditioned local ",
          "stencil reads beyond an edge: set model.local_radius > 0 (and model.kind = conditioned), or leave "
          "model.local_edge = clamp");
  require(layer_repeat >= 1, "model.layer_repeat must be >= 1, got ", layer_repeat);
  require(layer_repeat == 1 || (kind == K::Conditioned && kernel_heads == 0 && local_radius > 0),
          "model.layer_repeat = ", layer_repeat, " repeats the local update of model.kind = conditioned with the ",
          "global attention off: set model.kind = conditioned, model.kernel_heads = 0 and model.local_radius > 0, or ",
          "model.layer_repeat = 1");
  require(local_radius == 0 || kind == K::Conditioned, "model.local_radius adds a κ-conditioned local stencil to ",
          "model.kind = conditioned only: set model.kind = conditioned or model.local_radius = 0");
  require(kind != K::Kernel || !stencil, "model.stencil adds nonlinear token features; model.kind = kernel is linear ",
          "in the field: use model.kind = transformer");
  if (attention_precision == ops::AttentionPrecision::BF16) {
    require(kind != K::Kernel,
            "model.attention_precision = bf16 applies to model.kind = conditioned or transformer; "
            "the kernel kind's attention does not depend on the input: set model.attention_precision = float32");
    if (kind == K::Conditioned) {
      require(conditioned_attention != ConditionedAttention::Dense,
              "model.attention_precision = bf16 needs the tiled attention: set model.conditioned_attention = tiled "
              "(or auto)");
      require(kernel_dk == 16, "model.attention_precision = bf16 needs head width model.kernel_dk = 16, not ",
              kernel_dk, "; set model.kernel_dk = 16 or model.attention_precision = float32");
      require(kernel_heads >= 1, "model.attention_precision = bf16 applies to the global attention, which ",
              "model.kernel_heads = 0 turns off: set model.attention_precision = float32");
    } else {  // transformer: the encoder's conditions, under the keys this model reads
      require(encoder.attention == ops::AttentionKind::Tiled,
              "model.attention_precision = bf16 needs model.attention = tiled");
      require(encoder.n_heads > 0 && encoder.d_model == 16 * encoder.n_heads,
              "model.attention_precision = bf16 needs head width model.d_model / model.n_heads = 16, not ",
              encoder.n_heads > 0 ? encoder.d_model / encoder.n_heads : 0, "; set model.attention_precision = float32");
    }
    require(ops::bf16_attention_available(),
            "model.attention_precision = bf16 cannot run here: ", ops::bf16_attention_unavailable_reason(),
            "; set model.attention_precision = float32");
  }
  require(encoder.attention != ops::AttentionKind::Factored,
          "model.attention = factored needs a fixed sequence length; the heat surrogate evaluates on other grids: ",
          "use dense, tiled or galerkin");
}

long SurrogateOptions::num_features(int dim) const {
  return 1 + extra_inputs() + (dt_input ? 1 : 0) + (coords == CoordEncoding::Harmonics ? 2 * harmonics * dim : 0) +
         (stencil ? (1 + extra_inputs()) * 2 * dim : 0);
}

template <class T>
HeatSurrogate<T>::HeatSurrogate(SurrogateOptions options, int dim, std::vector<double> lengths)
    : opt_([&] {
        options.validate();
        // Here, not in validate(): a run's configuration is validated before data.channels sets extra_channels.
        require(options.kind != SurrogateKind::Conditioned || options.extra_inputs() >= 1 || options.condition_on_field,
                "model.kind = conditioned conditions its attention on the extra input channels but none is given: ",
                "set data.channels (e.g. [\"kappa\"]), model.condition_on_field = true (a nonlinear κ(u)), or use ",
                "model.kind = kernel for a constant-coefficient problem");
        require(dim >= 1 && dim <= 3, "the heat surrogate handles 1D, 2D and 3D grids, got dim = ", dim);
        require(long(lengths.size()) == dim, "heat surrogate: ", lengths.size(), " box lengths for dim ", dim);
        options.encoder.d_in = options.num_features(dim);
        const bool fourier = options.coords == CoordEncoding::Fourier;
        options.encoder.positional = fourier ? ops::PositionalKind::Coords : ops::PositionalKind::None;
        options.encoder.coord_dim = fourier ? dim : 0;
        if (options.kind == SurrogateKind::Transformer)
          options.encoder.attention_precision = options.attention_precision;
        require(options.attention_precision != ops::AttentionPrecision::BF16 || std::is_same<T, float>::value,
                "model.attention_precision = bf16 runs on float32 models only");
        return options;
      }()),
      dim_(dim),
      lengths_(std::move(lengths)),
      enc_(opt_.encoder, "encoder."),
      kind_(opt_.kind),
      cond_memory_(opt_.conditioned_attention),
      coords_(opt_.coords) {}

template <class T>
long HeatSurrogate<T>::cond_width() const {
  const long C = opt_.extra_inputs();
  return 2 * opt_.harmonics * dim_ + C + (opt_.dt_input ? 1 : 0) + (opt_.stencil ? C * 2 * dim_ : 0) +
         C * (window_size() - 1) + (opt_.condition_on_field ? 1 : 0);
}

template <class T>
long HeatSurrogate<T>::window_size() const {
  const long w = 2 * opt_.channel_window + 1;
  return dim_ > 2 ? w * w * w : dim_ > 1 ? w * w : w;
}

template <class T>
long HeatSurrogate<T>::local_size() const {
  const long w = 2 * opt_.local_radius + 1;
  return opt_.local_radius > 0 ? (dim_ > 2 ? w * w * w : dim_ > 1 ? w * w : w) : 0;
}

template <class T>
void HeatSurrogate<T>::declare(ParameterBuffer<T>& buf) {
  declare_blocks(buf);
  resolve_blocks(buf);
}

template <class T>
void HeatSurrogate<T>::resolve_blocks(const ParameterBuffer<T>& buf) {
  auto ref = [&](const std::string& name) { return buf.has(name) ? buf.ref(name) : ParamRef{}; };
  layer_t_.assign(kind_ == Kind::Transformer ? 0 : std::size_t(opt_.kernel_layers), LayerTensors{});
  for (long l = 0; l < long(layer_t_.size()); ++l) {
    LayerTensors& t = layer_t_[std::size_t(l)];
    const std::string p = kind_ == Kind::Conditioned ? cp(l) : lp(l);
    t.wq = ref(p + "wq"), t.bq = ref(p + "bq"), t.wk = ref(p + "wk"), t.bk = ref(p + "bk");
    t.wv = ref(p + "wv"), t.bv = ref(p + "bv"), t.wm = ref(p + "wm"), t.bm = ref(p + "bm");
    t.wl = ref(p + "wl"), t.bl = ref(p + "bl");
    t.a = ref(p + "a"), t.b0 = ref(p + "b0"), t.c = ref(p + "c");
    t.a_dt = ref(p + "a_dt"), t.b0_dt = ref(p + "b0_dt"), t.c_dt = ref(p + "c_dt");
  }
  cond_w1_ = ref("cond.w1"), cond_b1_ = ref("cond.b1");
  head_w_ = ref(head_ + "weight"), head_b_ = ref(head_ + "bias");
}

template <class T>
void HeatSurrogate<T>::declare_blocks(ParameterBuffer<T>& buf) {
  if (kind_ == Kind::Conditioned) {
    const long H = opt_.kernel_heads, dk = opt_.kernel_dk, Fc = cond_width(), d = opt_.encoder.d_model;
    const long Dz = d + Fc;
    buf.add("cond.w1", {d, Fc});
    buf.add("cond.b1", {d}, false);
    kernel_plan_.push_back({"cond.w1", ops::InitSpec::Kind::Uniform, 1.0 / std::sqrt(double(Fc))});
    kernel_plan_.push_back({"cond.b1", ops::InitSpec::Kind::Uniform, 1.0 / std::sqrt(double(Fc))});
    const double a = 1.0 / std::sqrt(double(Dz));
    for (long l = 0; l < opt_.kernel_layers; ++l) {
      struct Block {
        const char* name;
        double scale;  // of the uniform initialisation: the value gains' random part starts smaller
      };
      for (const Block w : {Block{"wq", a}, Block{"wk", a}, Block{"wv", 0.1 * a}}) {
        if (H == 0) continue;  // no global attention (model.kernel_heads = 0): the local term alone
        buf.add(cp(l) + w.name, {H * dk, Dz});
        kernel_plan_.push_back({cp(l) + w.name, ops::InitSpec::Kind::Uniform, w.scale});
      }
      buf.add(cp(l) + "wm", {H * dk + 2, Dz});
      kernel_plan_.push_back({cp(l) + "wm", ops::InitSpec::Kind::Constant, 0.0});
      for (const char* b : {"bq", "bk", "bv"}) {
        if (H == 0) continue;
        buf.add(cp(l) + b, {H * dk}, false);
        kernel_plan_.push_back({cp(l) + b, ops::InitSpec::Kind::Constant, 0.0});
      }
      buf.add(cp(l) + "bm", {H * dk + 2}, false);
      kernel_plan_.push_back({cp(l) + "bm", ops::InitSpec::Kind::Constant, 0.0});
    }
    // The local stencil weights after every other block: the blocks above keep their random streams, so a model
    // with model.local_radius > 0 starts from the same parameters as without it, plus zeros.
    if (const long S = local_size(); S > 0)
      for (long l = 0; l < opt_.kernel_layers; ++l) {
        buf.add(cp(l) + "wl", {S, Dz});
        kernel_plan_.push_back({cp(l) + "wl", ops::InitSpec::Kind::Constant, 0.0});
        buf.add(cp(l) + "bl", {S}, false);
        kernel_plan_.push_back({cp(l) + "bl", ops::InitSpec::Kind::Constant, 0.0});
      }
    return;
  }
  if (kind_ == Kind::Kernel) {
    const long H = opt_.kernel_heads, dk = opt_.kernel_dk, F = 2 * opt_.harmonics * dim_;
    const double a = 1.0 / std::sqrt(double(F));
    for (long l = 0; l < opt_.kernel_layers; ++l) {
      for (const char* w : {"wq", "wk"}) {
        buf.add(lp(l) + w, {H * dk, F});
        kernel_plan_.push_back({lp(l) + w, ops::InitSpec::Kind::Uniform, a});
      }
      struct Block {
        const char* name;
        long size;
      };
      for (const Block b : {Block{"bq", H * dk}, Block{"bk", H * dk}, Block{"a", H}, Block{"c", 1}}) {
        buf.add(lp(l) + b.name, {b.size}, false);
        kernel_plan_.push_back({lp(l) + b.name, ops::InitSpec::Kind::Constant, 0.0});
      }
      buf.add(lp(l) + "b0", {1}, false);
      kernel_plan_.push_back({lp(l) + "b0", ops::InitSpec::Kind::Constant, 1.0});
      if (opt_.dt_input)  // the horizon's slopes of a, b0, c: zero, so the model starts horizon-independent
        for (const Block b : {Block{"a_dt", H}, Block{"b0_dt", 1}, Block{"c_dt", 1}}) {
          buf.add(lp(l) + b.name, {b.size}, false);
          kernel_plan_.push_back({lp(l) + b.name, ops::InitSpec::Kind::Constant, 0.0});
        }
    }
    return;
  }
  enc_.declare(buf);
  const long d = opt_.encoder.d_model;
  buf.add(head_ + "weight", {1, d});
  buf.add(head_ + "bias", {1}, false);
  // A small readout: the model starts near the identity map û -> û and learns the increment.
  head_plan_ = {{head_ + "weight", ops::InitSpec::Kind::Uniform, 0.1 / std::sqrt(double(d))},
                {head_ + "bias", ops::InitSpec::Kind::Constant, 0.0}};
}

template <class T>
void HeatSurrogate<T>::init(ParameterBuffer<T>& buf, std::uint64_t seed) const {
  if (kind_ == Kind::Conditioned) {
    ops::init_parameters(buf, kernel_plan_, seed);
    // As the kernel kind: each head starts as a periodic smoothing kernel of its own width from the harmonic
    // columns of z (columns d .. d+F-1), scaled 0.1 on the random part; value gains g = e_1 per head (bv), the
    // identity mixing b0 = 1 (bm), A = 0 and e = 0: the model starts as ŷ = û.
    const long H = opt_.kernel_heads, dk = opt_.kernel_dk, F = 2 * opt_.harmonics * dim_, d = opt_.encoder.d_model;
    for (long l = 0; l < opt_.kernel_layers; ++l) {
      if (H == 0) {  // no attention: the identity mixing b0 = 1 alone
        auto bm = buf.view1(cp(l) + "bm");
        auto hm = Kokkos::create_mirror_view(bm);
        Kokkos::deep_copy(hm, bm);
        hm(0) = T(1);
        Kokkos::deep_copy(bm, hm);
        continue;
      }
      for (const char* w : {"wq", "wk"}) {
        auto v = buf.view2(cp(l) + w);
        auto h = Kokkos::create_mirror_view(v);
        Kokkos::deep_copy(h, v);
        for (long hd = 0; hd < H; ++hd) {
          const double beta = std::pow(2.0, double(hd)) * std::sqrt(double(dk));
          for (long r = 0; r < dk; ++r)
            for (long f = 0; f < long(h.extent(1)); ++f) {
              const long m = f >= d && f < d + F ? ((f - d) % (2 * opt_.harmonics)) / 2 + 1 : 0;
              h(hd * dk + r, f) = T(0.1 * double(h(hd * dk + r, f)) + (m > 0 && r == f - d ? std::sqrt(beta) / double(m) : 0.0));
            }
        }
        Kokkos::deep_copy(v, h);
      }
      auto bv = buf.view1(cp(l) + "bv");
      auto bm = buf.view1(cp(l) + "bm");
      auto hv = Kokkos::create_mirror_view(bv);
      auto hm = Kokkos::create_mirror_view(bm);
      Kokkos::deep_copy(hv, bv);
      Kokkos::deep_copy(hm, bm);
      for (long hd = 0; hd < H; ++hd) hv(hd * dk) = T(1);
      hm(H * dk) = T(1);
      Kokkos::deep_copy(bv, hv);
      Kokkos::deep_copy(bm, hm);
    }
    if (opt_.local_softmax) {  // softmax weights: 0.9 on the centre offset, the rest shared by the others
      const long S = local_size();
      for (long l = 0; l < opt_.kernel_layers; ++l) {
        auto bl = buf.view1(cp(l) + "bl");
        auto hb = Kokkos::create_mirror_view(bl);
        Kokkos::deep_copy(hb, bl);
        hb((S - 1) / 2) = T(std::log(9.0 * double(S - 1)));
        Kokkos::deep_copy(bl, hb);
      }
    }
    return;
  }
  if (kind_ == Kind::Kernel) {
    ops::init_parameters(buf, kernel_plan_, seed);
    // Start each head as a smoothing kernel of its own width: q = k = sqrt(β_h)·[cos, sin](2π m x)/m, so that
    // q(x_i)·k(x_j)/sqrt(dk) = β_h Σ_m cos(2π m (x_i − x_j))/m² per axis — a periodic Gaussian-like kernel with
    // concentration β_h = 2^h (widths bracketing a diffusion over a few cells). Training tunes the shapes; the
    // small random part of the initialisation breaks the symmetry between heads.
    const long H = opt_.kernel_heads, dk = opt_.kernel_dk, F = 2 * opt_.harmonics * dim_;
    for (long l = 0; l < opt_.kernel_layers; ++l)
      for (const char* w : {"wq", "wk"}) {
        auto v = buf.view2(lp(l) + w);
        auto h = Kokkos::create_mirror_view(v);
        Kokkos::deep_copy(h, v);
        for (long hd = 0; hd < H; ++hd) {
          const double beta = std::pow(2.0, double(hd)) * std::sqrt(double(dk));
          for (long r = 0; r < dk; ++r)
            for (long f = 0; f < F; ++f) {
              const long m = (f % (2 * opt_.harmonics)) / 2 + 1;
              h(hd * dk + r, f) = T(0.1 * double(h(hd * dk + r, f)) + (r == f ? std::sqrt(beta) / double(m) : 0.0));
            }
        }
        Kokkos::deep_copy(v, h);
      }
    return;
  }
  enc_.init(buf, seed);
  ops::init_parameters(buf, head_plan_, seed + 7919);
}

// Builds the token features [B*N, F]: û, the C extra channels, (s = τ − 1 of the token's sample), then
// cos/sin(2π m x_a / L_a) for m = 1..M and each axis a.
template <class T>
void surrogate_features(const Mat<T>& f, const ops::ConstVec<T>& u, const ConstMat<T>& extra,
                        const ops::ConstVec<T>& shift, const ConstMat<T>& coords, long len, long harmonics,
                        bool use_harmonics, AxisLengths lengths) {
  const long tokens = f.extent(0), dim = coords.extent(1);
  const long C = extra.extent(0) > 0 ? long(extra.extent(1)) : 0;
  const bool has_shift = shift.extent(0) > 0;
  const long base = 1 + C + (has_shift ? 1 : 0);
  const double two_pi = 6.283185307179586;
  attnphys::parallel_for("attnphys::surrogate_features", tokens, KOKKOS_LAMBDA(long t) {
        const long n = t % len;
        f(t, 0) = u(t);
        for (long c = 0; c < C; ++c) f(t, 1 + c) = extra(t, c);
        if (has_shift) f(t, 1 + C) = shift(t / len);
        if (use_harmonics) {
          for (long a = 0; a < dim; ++a) {
            const double x = double(coords(n, a)) / lengths[a];
            for (long m = 1; m <= harmonics; ++m) {
              const long c = base + (a * harmonics + (m - 1)) * 2;
              f(t, c) = T(math::cos(two_pi * m * x));
              f(t, c + 1) = T(math::sin(two_pi * m * x));
            }
          }
        }
      });
}

// The grid behind coordinates [N, dim] laid out x fastest: nx from the first row, spacings from neighbours, an
// axis periodic when n·h equals its encoding length (non-periodic boxes are encoded with period 2L).
template <class T>
SurrogateGrid infer_grid(const ConstMat<T>& coords, long len, int dim, const std::vector<double>& lengths) {
  auto c = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), coords);
  SurrogateGrid g;
  if (dim == 1) {
    g.nx = len;
  } else {
    g.nx = 1;
    while (g.nx < len && c(g.nx, 1) == c(0, 1) && (dim < 3 || c(g.nx, 2) == c(0, 2))) ++g.nx;
    if (dim == 2) {
      g.ny = len / g.nx;
    } else {
      g.ny = 1;
      while (g.ny * g.nx < len && c(g.ny * g.nx, 2) == c(0, 2)) ++g.ny;
      g.nz = len / (g.nx * g.ny);
    }
    require(g.nx * g.ny * g.nz == len, "heat surrogate: model.stencil and model.local_radius need a regular grid (x ",
            "fastest, then y", dim > 2 ? ", then z" : "", "); the coordinates do not form one");
  }
  require(g.nx >= 2 && (dim == 1 || g.ny >= 2) && (dim < 3 || g.nz >= 2), "heat surrogate: model.stencil and ",
          "model.local_radius need at least 2 points per axis");
  g.hx = double(c(1, 0)) - double(c(0, 0));
  g.hy = dim > 1 ? double(c(g.nx, 1)) - double(c(0, 1)) : 1.0;
  g.hz = dim > 2 ? double(c(g.nx * g.ny, 2)) - double(c(0, 2)) : 1.0;
  require(g.hx > 0 && g.hy > 0 && g.hz > 0, "heat surrogate: model.stencil and model.local_radius need increasing ",
          "coordinates along each axis");
  g.px = std::abs(g.nx * g.hx - lengths[0]) <= 1e-6 * lengths[0];
  g.py = dim > 1 && std::abs(g.ny * g.hy - lengths[1]) <= 1e-6 * lengths[1];
  g.pz = dim > 2 && std::abs(g.nz * g.hz - lengths[2]) <= 1e-6 * lengths[2];
  return g;
}

// du = dout + ∂(features)/∂û: the residual and the û feature column.
template <class T>
void feature_input_gradient(const ops::Vec<T>& du, const ops::ConstVec<T>& dout, const ConstMat<T>& df) {
  attnphys::parallel_for(
      "attnphys::surrogate_input_gradient", long(du.extent(0)),
      KOKKOS_LAMBDA(long t) { du(t) = dout(t) + df(t, 0); });
}

template <class T>
void add_increment(const ops::Vec<T>& out, const ops::ConstVec<T>& u, const ConstMat<T>& r) {
  attnphys::parallel_for("attnphys::surrogate_increment", out.extent(0),
      KOKKOS_LAMBDA(long t) { out(t) = u(t) + r(t, 0); });
}

template <class T>
void HeatSurrogate<T>::forward(const ops::Vec<T>& out, SurrogateCache<T>& c, const ops::ConstVec<T>& u,
                               const ConstMat<T>& extra, const ConstMat<T>& coords, long batch, long len,
                               const ParameterBuffer<T>& params, const ops::ConstVec<T>& tau) const {
  ScopedRegion region("attnphys::heat_surrogate_forward");
  if (opt_.dt_input) {
    require(long(tau.extent(0)) == batch, "heat surrogate: model.dt_input is on but ", tau.extent(0),
            " horizons were given for a batch of ", batch);
    grow_view(c.shift, "attnphys::surrogate_shift", batch);
    const auto sh = c.shift;
    attnphys::parallel_for("attnphys::surrogate_shift", batch,
        KOKKOS_LAMBDA(long b) { sh(b) = tau(b) - T(1); });
  }
  if (kind_ == Kind::Kernel) {
    kernel_forward(out, c, u, coords, batch, len, params);
    if (opt_.conserve) conserve_mean<T>(out, u, batch, len);
    return;
  }
  if (kind_ == Kind::Conditioned) {
    conditioned_forward(out, c, u, extra, coords, batch, len, params);
    if (opt_.conserve) conserve_mean<T>(out, u, batch, len);
    return;
  }
  const long tokens = batch * len, d = opt_.encoder.d_model, nf = opt_.encoder.d_in;
  require(long(u.extent(0)) == tokens && long(out.extent(0)) == tokens, "heat surrogate: fields hold ",
          u.extent(0), " values, expected batch*points = ", tokens);
  require(long(coords.extent(0)) == len && long(coords.extent(1)) == dim_, "heat surrogate: coordinates are ",
          coords.extent(0), "x", coords.extent(1), ", expected ", len, "x", dim_);
  const long C = opt_.extra_inputs();
  require(C == 0 ? extra.extent(0) == 0 || extra.extent(1) == 0
                 : long(extra.extent(0)) == tokens && long(extra.extent(1)) == C,
          "heat surrogate: the model takes ", C, " extra input channel(s) per token but ", extra.extent(0), "x",
          extra.extent(1), " values were given for ", tokens, " tokens");
  c.batch = batch;
  c.len = len;
  grow_view(c.features, "attnphys::surrogate_features", tokens, nf);
  grow_view(c.hidden, "attnphys::surrogate_hidden", tokens, d);
  grow_view(c.readout, "attnphys::surrogate_readout", tokens, 1);
  surrogate_features<T>(c.features, u, C > 0 ? extra : ConstMat<T>(),
                        opt_.dt_input ? ops::ConstVec<T>(c.shift) : ops::ConstVec<T>(), coords, len, opt_.harmonics,
                        coords_ == Coords::Harmonics, axis_lengths(lengths_));
  if (opt_.stencil) {
    if (c.grid_key != coords.data() || c.grid_len != len) {
      c.grid = infer_grid<T>(coords, len, dim_, lengths_);
      c.grid_key = coords.data();
      c.grid_len = len;
    }
    const long col0 = nf - (1 + C) * 2 * dim_;
    stencil_features<T>(c.features, col0, u, C > 0 ? extra : ConstMat<T>(), C, len, dim_, c.grid,
                        axis_lengths(lengths_));
  }
  ops::EncoderInputs<T> in;
  if (coords_ == Coords::Fourier) in.coords = coords;
  enc_.forward(c.hidden, c.enc, c.features, batch, len, params, in);
  ops::linear_forward<T>(c.readout, c.hidden, params.view2(head_w_), params.view1(head_b_));
  add_increment<T>(out, u, c.readout);
  if (opt_.conserve) conserve_mean<T>(out, u, batch, len);
}

template <class T>
void HeatSurrogate<T>::backward(SurrogateCache<T>& c, const ops::ConstVec<T>& dout_in,
                                const ParameterBuffer<T>& params, const ops::Vec<T>& du) const {
  ScopedRegion region("attnphys::heat_surrogate_backward");
  const bool want_du = du.extent(0) > 0;
  require(!want_du || long(du.extent(0)) == c.batch * c.len, "heat surrogate backward: input gradient of ",
          du.extent(0), " values, expected ", c.batch * c.len);
  require(long(dout_in.extent(0)) == c.batch * c.len, "heat surrogate backward: gradient has ", dout_in.extent(0),
          " values, expected ", c.batch * c.len);
  // model.conserve: the kinds' backward sees the projected gradient; the input's share is added to du at the end.
  if (opt_.conserve) {
    grow_view(c.dconserved, "attnphys::surrogate_dconserved", c.batch * c.len);
    conserve_mean_backward<T>(c.dconserved, dout_in, ops::Vec<T>(), c.batch, c.len);
  }
  const ops::ConstVec<T> dout = opt_.conserve ? ops::ConstVec<T>(c.dconserved.data(), c.batch * c.len) : dout_in;
  const auto input_share = [&] {  // du += mean(dout_in) per sample, after the kinds' backward has written du
    if (opt_.conserve && want_du) conserve_mean_backward<T>(c.dconserved, dout_in, du, c.batch, c.len);
  };
  if (kind_ == Kind::Kernel) {
    kernel_backward(c, dout, params, du);
    input_share();
    return;
  }
  if (kind_ == Kind::Conditioned) {
    conditioned_backward(c, dout, params, du);
    input_share();
    return;
  }
  const long tokens = c.batch * c.len, d = opt_.encoder.d_model, nf = opt_.encoder.d_in;
  require(long(dout.extent(0)) == tokens, "heat surrogate backward: gradient has ", dout.extent(0),
          " values, expected ", tokens);
  grow_view(c.dhidden, "attnphys::surrogate_dhidden", tokens, d);
  ConstMat<T> dr(dout.data(), tokens, 1);
  ops::linear_backward<T>(c.dhidden, params.view2(head_w_, Slot::Grads), params.view1(head_b_, Slot::Grads), dr,
                          c.hidden, params.view2(head_w_));
  if (!want_du) {
    enc_.backward(Mat<T>(), c.enc, c.dhidden, params);
    return;
  }
  grow_view(c.dfeatures, "attnphys::surrogate_dfeatures", tokens, nf);
  enc_.backward(Mat<T>(c.dfeatures.data(), tokens, nf), c.enc, c.dhidden, params);
  feature_input_gradient<T>(du, dout, c.dfeatures);
  if (opt_.stencil) {
    const long C = opt_.extra_inputs();
    stencil_input_gradient<T>(du, c.dfeatures, nf - (1 + C) * 2 * dim_, c.len, dim_, c.grid,
                              axis_lengths(lengths_));
  }
  input_share();
}

template <class T>
std::vector<double> HeatSurrogate<T>::attention_map(const SurrogateCache<T>& c, const ParameterBuffer<T>& params,
                                                    long layer, long sample, long query) const {
  require(layer >= 0 && (kind_ != Kind::Transformer || layer < opt_.encoder.n_layers), "attention map: layer ",
          layer, " outside the model");
  std::vector<double> mean(c.len, 0.0);
  if (kind_ == Kind::Conditioned) {
    require(layer < opt_.kernel_layers && layer < long(c.cqh.size()), "attention map: layer ", layer, " outside 0..",
            opt_.kernel_layers - 1);
    require(query >= 0 && query < c.len, "attention map: query ", query, " outside 0..", c.len - 1);
    require(sample >= 0 && sample < c.batch, "attention map: sample ", sample, " outside 0..", c.batch - 1);
    if (opt_.kernel_heads == 0) return mean;  // no global attention: zero weights
    ops::ScoreSpec<T> spec;
    spec.heads = opt_.kernel_heads;
    View1<T> row("attnphys::cond_row", c.len);
    for (long hd = 0; hd < opt_.kernel_heads; ++hd) {
      ops::sdpa_row<T>(row, c.cqh[layer], c.ckh[layer], c.clse[layer], spec, sample * opt_.kernel_heads + hd, query);
      auto h = to_host(row);
      for (long j = 0; j < c.len; ++j) mean[j] += double(h(j)) / opt_.kernel_heads;
    }
    return mean;
  }
  if (kind_ == Kind::Kernel) {
    require(layer < opt_.kernel_layers, "attention map: layer ", layer, " outside 0..", opt_.kernel_layers - 1);
    require(query >= 0 && query < c.len, "attention map: query ", query, " outside 0..", c.len - 1);
    auto row = Kokkos::subview(c.p[layer], Kokkos::ALL, query, Kokkos::ALL);
    auto h = Kokkos::create_mirror_view(row);
    Kokkos::deep_copy(h, row);
    for (long hd = 0; hd < opt_.kernel_heads; ++hd)
      for (long j = 0; j < c.len; ++j) mean[j] += double(h(hd, j)) / opt_.kernel_heads;
    return mean;
  }
  for (long h = 0; h < opt_.encoder.n_heads; ++h) {
    auto w = enc_.attention_weights(c.enc, params, layer, sample, h, query);
    for (long j = 0; j < c.len; ++j) mean[j] += double(w[j]) / opt_.encoder.n_heads;
  }
  return mean;
}

template <class T>
std::vector<double> HeatSurrogate<T>::operator_row(const SurrogateCache<T>& c, const ParameterBuffer<T>& params,
                                                   long query) const {
  if (kind_ != Kind::Kernel || opt_.kernel_layers != 1 || c.p.empty()) return {};
  require(query >= 0 && query < c.len, "operator row: query ", query, " outside 0..", c.len - 1);
  auto row = Kokkos::subview(c.p[0], Kokkos::ALL, query, Kokkos::ALL);
  auto h = Kokkos::create_mirror_view(row);
  Kokkos::deep_copy(h, row);
  auto a = to_host(params.view1(lp(0) + "a"));
  auto b0 = to_host(params.view1(lp(0) + "b0"));
  std::vector<double> out(c.len, 0.0);
  for (long hd = 0; hd < opt_.kernel_heads; ++hd)
    for (long j = 0; j < c.len; ++j) out[j] += double(a(hd)) * double(h(hd, j));
  out[query] += double(b0(0));
  return out;
}

// ---------------------------------------------------------------------------------------- kernel (coordinate) attention

template <class T>
void coordinate_harmonics(const Mat<T>& phi, const ConstMat<T>& coords, long harmonics, AxisLengths lengths) {
  const long len = phi.extent(0), dim = coords.extent(1);
  const double two_pi = 6.283185307179586;
  attnphys::parallel_for("attnphys::coordinate_harmonics", len, KOKKOS_LAMBDA(long n) {
        for (long a = 0; a < dim; ++a) {
          const double x = double(coords(n, a)) / lengths[a];
          for (long m = 1; m <= harmonics; ++m) {
            const long col = (a * harmonics + (m - 1)) * 2;
            phi(n, col) = T(math::cos(two_pi * m * x));
            phi(n, col + 1) = T(math::sin(two_pi * m * x));
          }
        }
      });
}

template <class T>
void fields_to_columns(const Mat<T>& u_cols, const ops::ConstVec<T>& field, long batch, long len) {
  attnphys::parallel_for("attnphys::fields_to_columns", batch * len,
      KOKKOS_LAMBDA(long t) { u_cols(t % len, t / len) = field(t); });
}

// The mixing coefficients of a kernel layer; with the horizon input (shift non-empty), each is affine in the
// sample's s = τ − 1: b0 + b0_dt·s etc.
template <class T>
struct KernelMix {
  ops::Vec<T> a, b0, c0, a_dt, b0_dt, c0_dt, shift;  // parameters (or their gradients); shift [B] or empty
  KOKKOS_INLINE_FUNCTION bool has_dt() const { return shift.extent(0) > 0; }
  KOKKOS_INLINE_FUNCTION T ah(long h, long b) const { return has_dt() ? a(h) + a_dt(h) * shift(b) : a(h); }
  KOKKOS_INLINE_FUNCTION T bb(long b) const { return has_dt() ? b0(0) + b0_dt(0) * shift(b) : b0(0); }
  KOKKOS_INLINE_FUNCTION T cc(long b) const { return has_dt() ? c0(0) + c0_dt(0) * shift(b) : c0(0); }
};

// The coefficients of the kernel layer whose parameters start with `prefix` (Slot::Params) or their gradients.
template <class T, class Layer>
KernelMix<T> kernel_mix(const ParameterBuffer<T>& p, const Layer& t, bool dt_input, const View1<T>& shift, Slot sl) {
  KernelMix<T> m;
  m.a = p.view1(t.a, sl);
  m.b0 = p.view1(t.b0, sl);
  m.c0 = p.view1(t.c, sl);
  if (dt_input) {
    m.a_dt = p.view1(t.a_dt, sl);
    m.b0_dt = p.view1(t.b0_dt, sl);
    m.c0_dt = p.view1(t.c_dt, sl);
    m.shift = shift;
  }
  return m;
}

// out[b, n] = b0 * in[b, n] + Σ_h a_h o[h, n, b] + c
template <class T>
void combine_heads(const ops::Vec<T>& out, const ops::ConstVec<T>& in, const ConstMat3<T>& o, const KernelMix<T>& mix,
                   long len) {
  const long heads = o.extent(0);
  attnphys::parallel_for("attnphys::combine_heads", out.extent(0), KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t % len;
        T acc = mix.bb(b) * in(t) + mix.cc(b);
        for (long h = 0; h < heads; ++h) acc += mix.ah(h, b) * o(h, n, b);
        out(t) = acc;
      });
}

template <class T>
void HeatSurrogate<T>::kernel_forward(const ops::Vec<T>& out, SurrogateCache<T>& c, const ops::ConstVec<T>& u,
                                      const ConstMat<T>& coords, long batch, long len,
                                      const ParameterBuffer<T>& params) const {
  const long H = opt_.kernel_heads, dk = opt_.kernel_dk, F = 2 * opt_.harmonics * dim_, L = opt_.kernel_layers;
  const long tokens = batch * len;
  require(long(u.extent(0)) == tokens && long(out.extent(0)) == tokens, "heat surrogate: fields hold ",
          u.extent(0), " values, expected batch*points = ", tokens);
  require(long(coords.extent(0)) == len && long(coords.extent(1)) == dim_, "heat surrogate: coordinates are ",
          coords.extent(0), "x", coords.extent(1), ", expected ", len, "x", dim_);
  c.batch = batch;
  c.len = len;
  grow_view(c.phi, "attnphys::kernel_phi", len, F);
  // The mixing coefficients of layer l (Slot::Params) or their gradients (Slot::Grads).
  auto mix = [&](const ParameterBuffer<T>& p, long l, const SurrogateCache<T>& cc, Slot sl) {
    return kernel_mix<T>(p, layer_t_[std::size_t(l)], opt_.dt_input, cc.shift, sl);
  };
  coordinate_harmonics<T>(c.phi, coords, opt_.harmonics, axis_lengths(lengths_));
  c.qc.resize(L), c.kc.resize(L), c.u.resize(L), c.qh.resize(L), c.kh.resize(L), c.p.resize(L), c.o.resize(L);
  c.field.resize(L + 1);
  grow_view(c.field[0], "attnphys::kernel_field", tokens);
  Kokkos::deep_copy(c.field[0], View1<const T>(u.data(), tokens));
  grow_view(c.dp, "attnphys::kernel_scores", H, len, len);
  const T scale = T(1.0 / std::sqrt(double(dk)));
  for (long l = 0; l < L; ++l) {
    const LayerTensors& pre = layer_t_[std::size_t(l)];
    grow_view(c.qc[l], "attnphys::kernel_q", len, H * dk);
    grow_view(c.kc[l], "attnphys::kernel_k", len, H * dk);
    ops::linear_forward<T>(c.qc[l], c.phi, params.view2(pre.wq), params.view1(pre.bq));
    ops::linear_forward<T>(c.kc[l], c.phi, params.view2(pre.wk), params.view1(pre.bk));
    grow_view(c.qh[l], "attnphys::kernel_qh", H, len, dk);
    grow_view(c.kh[l], "attnphys::kernel_kh", H, len, dk);
    ops::split_heads<T>(c.qh[l], c.qc[l], 0, 1, H);
    ops::split_heads<T>(c.kh[l], c.kc[l], 0, 1, H);
    batched_gemm('N', 'T', scale, c.qh[l], c.kh[l], T(0), c.dp);
    grow_view(c.p[l], "attnphys::kernel_p", H, len, len);
    ops::softmax_forward<T>(Mat<T>(c.p[l].data(), H * len, len), ConstMat<T>(c.dp.data(), H * len, len));
    grow_view(c.u[l], "attnphys::kernel_u", len, batch);
    fields_to_columns<T>(c.u[l], c.field[l], batch, len);
    grow_view(c.o[l], "attnphys::kernel_o", H, len, batch);
    batched_gemm('N', 'N', T(1), c.p[l], ConstMat3<T>(c.u[l].data(), 1, len, batch), T(0), c.o[l]);
    grow_view(c.field[l + 1], "attnphys::kernel_field", tokens);
    combine_heads<T>(c.field[l + 1], c.field[l], c.o[l], mix(params, l, c, Slot::Params), len);
  }
  Kokkos::deep_copy(View1<T>(out.data(), tokens), c.field[L]);
}

// w(i) += sum on the device.
template <class T>
void add_at(const ops::Vec<T>& w, long i, double sum) {
  Kokkos::parallel_for("attnphys::combine_heads_grad_add", Kokkos::RangePolicy<ExecSpace>(0, 1),
                       KOKKOS_LAMBDA(long) { w(i) += T(sum); });
}

// dO[h, n, b] = a_h g[b, n]; and the parameter gradients of a, b0, c (and of their horizon slopes: the same sums
// weighted by s of each sample).
template <class T>
void combine_heads_backward(const Mat3<T>& dO, const KernelMix<T>& grad, const ops::ConstVec<T>& g,
                            const ops::ConstVec<T>& in, const ConstMat3<T>& o, const KernelMix<T>& mix, long len) {
  const long heads = o.extent(0), tokens = g.extent(0);
  attnphys::parallel_for("attnphys::combine_heads_backward", tokens, KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t % len;
        for (long h = 0; h < heads; ++h) dO(h, n, b) = mix.ah(h, b) * g(t);
      });
  const bool has_dt = mix.shift.extent(0) > 0;
  const auto shift = mix.shift;
  const auto add_to = [](const ops::Vec<T>& w, long i, double sum) { add_at<T>(w, i, sum); };
  for (long h = 0; h < heads; ++h) {
    double s = 0;
    Kokkos::parallel_reduce(
        "attnphys::combine_heads_da", Kokkos::RangePolicy<ExecSpace>(0, tokens),
        KOKKOS_LAMBDA(long t, double& acc) { acc += double(o(h, t % len, t / len)) * double(g(t)); }, s);
    add_to(grad.a, h, s);
    if (has_dt) {
      double sd = 0;
      Kokkos::parallel_reduce(
          "attnphys::combine_heads_da_dt", Kokkos::RangePolicy<ExecSpace>(0, tokens),
          KOKKOS_LAMBDA(long t, double& acc) {
            acc += double(shift(t / len)) * double(o(h, t % len, t / len)) * double(g(t));
          },
          sd);
      add_to(grad.a_dt, h, sd);
    }
  }
  double s_b0 = 0, s_c = 0;
  Kokkos::parallel_reduce(
      "attnphys::combine_heads_db0", Kokkos::RangePolicy<ExecSpace>(0, tokens),
      KOKKOS_LAMBDA(long t, double& acc) { acc += double(in(t)) * double(g(t)); }, s_b0);
  Kokkos::parallel_reduce(
      "attnphys::combine_heads_dc", Kokkos::RangePolicy<ExecSpace>(0, tokens),
      KOKKOS_LAMBDA(long t, double& acc) { acc += double(g(t)); }, s_c);
  const ops::Vec<T> db0 = grad.b0, dc = grad.c0;
  Kokkos::parallel_for("attnphys::combine_heads_db_add", Kokkos::RangePolicy<ExecSpace>(0, 1), KOKKOS_LAMBDA(long) {
    db0(0) += T(s_b0);
    dc(0) += T(s_c);
  });
  if (has_dt) {
    double d_b0 = 0, d_c = 0;
    Kokkos::parallel_reduce(
        "attnphys::combine_heads_db0_dt", Kokkos::RangePolicy<ExecSpace>(0, tokens),
        KOKKOS_LAMBDA(long t, double& acc) { acc += double(shift(t / len)) * double(in(t)) * double(g(t)); }, d_b0);
    Kokkos::parallel_reduce(
        "attnphys::combine_heads_dc_dt", Kokkos::RangePolicy<ExecSpace>(0, tokens),
        KOKKOS_LAMBDA(long t, double& acc) { acc += double(shift(t / len)) * double(g(t)); }, d_c);
    add_to(grad.b0_dt, 0, d_b0);
    add_to(grad.c0_dt, 0, d_c);
  }
}

// g_prev[b, n] = b0 g[b, n] + Σ_h (P_hᵀ dO_h)[n, b]
template <class T>
void field_gradient(const ops::Vec<T>& g_prev, const ops::ConstVec<T>& g, const ConstMat3<T>& pt_do,
                    const KernelMix<T>& mix, long len) {
  const long heads = pt_do.extent(0);
  attnphys::parallel_for("attnphys::kernel_field_gradient", g.extent(0), KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t % len;
        T acc = mix.bb(b) * g(t);
        for (long h = 0; h < heads; ++h) acc += pt_do(h, n, b);
        g_prev(t) = acc;
      });
}

template <class T>
void HeatSurrogate<T>::kernel_backward(SurrogateCache<T>& c, const ops::ConstVec<T>& dout,
                                       const ParameterBuffer<T>& params, const ops::Vec<T>& du) const {
  const long H = opt_.kernel_heads, dk = opt_.kernel_dk, L = opt_.kernel_layers, len = c.len, batch = c.batch;
  const long tokens = batch * len;
  require(long(dout.extent(0)) == tokens, "heat surrogate backward: gradient has ", dout.extent(0),
          " values, expected ", tokens);
  // The mixing coefficients of layer l (Slot::Params) or their gradients (Slot::Grads).
  auto mix = [&](const ParameterBuffer<T>& p, long l, const SurrogateCache<T>& cc, Slot sl) {
    return kernel_mix<T>(p, layer_t_[std::size_t(l)], opt_.dt_input, cc.shift, sl);
  };
  const T scale = T(1.0 / std::sqrt(double(dk)));
  View1<T> g("attnphys::kernel_g", tokens), g_prev("attnphys::kernel_gprev", tokens);
  Kokkos::deep_copy(g, View1<const T>(dout.data(), tokens));
  View3<T> ds("attnphys::kernel_ds", H, len, len);
  grow_view(c.dout3, "attnphys::kernel_do", H, len, batch);
  grow_view(c.dqh, "attnphys::kernel_dqh", H, len, dk);
  grow_view(c.dkh, "attnphys::kernel_dkh", H, len, dk);
  grow_view(c.dqc, "attnphys::kernel_dqc", len, H * dk);
  grow_view(c.dkc, "attnphys::kernel_dkc", len, H * dk);
  for (long l = L - 1; l >= 0; --l) {
    const LayerTensors& pre = layer_t_[std::size_t(l)];
    combine_heads_backward<T>(c.dout3, mix(params, l, c, Slot::Grads), g, c.field[l], c.o[l],
                              mix(params, l, c, Slot::Params), len);
    // dP = dO Uᵀ, then through the softmax to the scores, then to queries and keys.
    batched_gemm('N', 'T', T(1), c.dout3, ConstMat3<T>(c.u[l].data(), 1, len, batch), T(0), c.dp);
    ops::softmax_backward<T>(Mat<T>(ds.data(), H * len, len), ConstMat<T>(c.dp.data(), H * len, len),
                             ConstMat<T>(c.p[l].data(), H * len, len));
    batched_gemm('N', 'N', scale, ds, c.kh[l], T(0), c.dqh);
    batched_gemm('T', 'N', scale, ds, c.qh[l], T(0), c.dkh);
    ops::merge_heads<T>(c.dqc, 0, c.dqh, 1, H);
    ops::merge_heads<T>(c.dkc, 0, c.dkh, 1, H);
    ops::linear_backward<T>(Mat<T>(), params.view2(pre.wq, Slot::Grads), params.view1(pre.bq, Slot::Grads),
                            c.dqc, c.phi, params.view2(pre.wq));
    ops::linear_backward<T>(Mat<T>(), params.view2(pre.wk, Slot::Grads), params.view1(pre.bk, Slot::Grads),
                            c.dkc, c.phi, params.view2(pre.wk));
    if (l > 0 || du.extent(0) > 0) {  // the field entering layer l came out of layer l-1 (or is the input)
      View3<T> pt_do("attnphys::kernel_ptdo", H, len, batch);
      batched_gemm('T', 'N', T(1), c.p[l], c.dout3, T(0), pt_do);
      if (l > 0) {
        field_gradient<T>(g_prev, g, pt_do, mix(params, l, c, Slot::Params), len);
        std::swap(g, g_prev);
      } else {
        field_gradient<T>(du, g, pt_do, mix(params, l, c, Slot::Params), len);
      }
    }
  }
}

// ------------------------------------------------------------------------- conditioned (channel-dependent) kernel attention

// Conditioning columns [φ (2·M·dim harmonics), the C channels, (s)] of every token; the channels' stencil
// differences follow (written by stencil_features with first_field = 1).
template <class T>
void conditioning_features(const Mat<T>& cf, const ConstMat<T>& extra, const ops::ConstVec<T>& shift,
                           const ConstMat<T>& coords, long len, long harmonics, AxisLengths lengths) {
  const long tokens = cf.extent(0), dim = coords.extent(1), C = extra.extent(1);
  const bool has_shift = shift.extent(0) > 0;
  const long F = 2 * harmonics * dim;
  const double two_pi = 6.283185307179586;
  // The harmonics depend on the point only: computed for the first sample's rows, copied to the others.
  attnphys::parallel_for("attnphys::conditioning_harmonics", len < tokens ? len : tokens, KOKKOS_LAMBDA(long n) {
        for (long a = 0; a < dim; ++a) {
          const double x = double(coords(n, a)) / lengths[a];
          for (long m = 1; m <= harmonics; ++m) {
            const long col = (a * harmonics + (m - 1)) * 2;
            cf(n, col) = T(math::cos(two_pi * m * x));
            cf(n, col + 1) = T(math::sin(two_pi * m * x));
          }
        }
      });
  attnphys::parallel_for("attnphys::conditioning_features", tokens, KOKKOS_LAMBDA(long t) {
        if (t >= len)
          for (long f = 0; f < F; ++f) cf(t, f) = cf(t % len, f);
        for (long c = 0; c < C; ++c) cf(t, F + c) = extra(t, c);
        if (has_shift) cf(t, F + C) = shift(t / len);
      });
}

template <class T>
void HeatSurrogate<T>::conditioned_forward(const ops::Vec<T>& out, SurrogateCache<T>& c, const ops::ConstVec<T>& u,
                                           const ConstMat<T>& extra, const ConstMat<T>& coords, long batch, long len,
                                           const ParameterBuffer<T>& params) const {
  const long H = opt_.kernel_heads, dk = opt_.kernel_dk, L = opt_.kernel_layers, d = opt_.encoder.d_model;
  const long C = opt_.extra_inputs(), F = 2 * opt_.harmonics * dim_, Fc = cond_width(), Dz = d + Fc, HD = H * dk;
  const long tokens = batch * len;
  const AxisLengths lens = axis_lengths(lengths_);
  require(long(u.extent(0)) == tokens && long(out.extent(0)) == tokens, "heat surrogate: fields hold ",
          u.extent(0), " values, expected batch*points = ", tokens);
  require(long(coords.extent(0)) == len && long(coords.extent(1)) == dim_, "heat surrogate: coordinates are ",
          coords.extent(0), "x", coords.extent(1), ", expected ", len, "x", dim_);
  require(C == 0 || (long(extra.extent(0)) == tokens && long(extra.extent(1)) == C),
          "heat surrogate: model.kind = conditioned takes ", C, " extra input channel(s) per token but ", extra.extent(0), "x", extra.extent(1),
          " values were given for ", tokens, " tokens");
  c.batch = batch;
  c.len = len;
  grow_view(c.cond, "attnphys::cond_features", tokens, Fc);
  conditioning_features<T>(c.cond, extra, opt_.dt_input ? ops::ConstVec<T>(c.shift) : ops::ConstVec<T>(), coords, len,
                           opt_.harmonics, lens);
  const long S = local_size();
  if ((opt_.stencil || S > 0 || opt_.channel_window > 0) && (c.grid_key != coords.data() || c.grid_len != len)) {
    c.grid = infer_grid<T>(coords, len, dim_, lengths_);
    c.grid_key = coords.data();
    c.grid_len = len;
  }
  if (opt_.stencil) {
    stencil_features<T>(c.cond, F + C + (opt_.dt_input ? 1 : 0), ops::ConstVec<T>(), extra, C, len, dim_, c.grid, lens,
                        1);
  }
  if (opt_.channel_window > 0)  // after the stencil columns, before û (condition_on_field: the last column)
    channel_window_features<T>(c.cond, F + C + (opt_.dt_input ? 1 : 0) + (opt_.stencil ? C * 2 * dim_ : 0), extra, C,
                               len, opt_.channel_window, dim_, c.grid);
  if (opt_.condition_on_field) {  // û, the last column of c
    const auto cf = c.cond;
    const long col = Fc - 1;
    attnphys::parallel_for("attnphys::cond_field_feature", tokens,
        KOKKOS_LAMBDA(long t) { cf(t, col) = u(t); });
  }
  // Trunk: z = [GELU(W1 c + b1), c].
  grow_view(c.cpre, "attnphys::cond_pre", tokens, d);
  grow_view(c.cdpre, "attnphys::cond_dpre", tokens, d);
  grow_view(c.cz, "attnphys::cond_z", tokens, Dz);
  ops::linear_forward<T>(c.cpre, c.cond, params.view2(cond_w1_), params.view1(cond_b1_));
  ops::gelu_forward<T>(c.cdpre, c.cpre);
  {
    const auto z = c.cz, hh = c.cdpre, cf = c.cond;
    attnphys::parallel_for(
        "attnphys::cond_z", tokens, KOKKOS_LAMBDA(long t) {
          for (long f = 0; f < Dz; ++f) z(t, f) = f < d ? hh(t, f) : cf(t, f - d);
        });
  }
  const bool bf16 = opt_.attention_precision == ops::AttentionPrecision::BF16;  // tiled only (validated)
  const bool dense =
      !bf16 && (cond_memory_ == CondMemory::Dense ||
                (cond_memory_ == CondMemory::Auto && double(L) * batch * H * double(len) * len <= double(1L << 27)));
  c.ws.bf16 = bf16;
  for (auto* v : {&c.cq, &c.ck, &c.cg, &c.cv, &c.cm, &c.com, &c.clse}) v->resize(L);
  for (auto* v : {&c.cqh, &c.ckh, &c.cvh, &c.coh, &c.cp}) v->resize(L);
  c.cw.resize(S > 0 ? L : 0);
  const long K = opt_.layer_repeat;  // > 1 only with H = 0 and S > 0 (validated)
  c.field.resize(L * K + 1);
  grow_view(c.field[0], "attnphys::cond_field", tokens);
  Kokkos::deep_copy(c.field[0], View1<const T>(u.data(), tokens));
  ops::ScoreSpec<T> spec;
  spec.heads = H;
  for (long l = 0; l < L; ++l) {
    const LayerTensors& pre = layer_t_[std::size_t(l)];
    grow_view(c.cm[l], "attnphys::cond_m", tokens, HD + 2);
    ops::linear_forward<T>(c.cm[l], c.cz, params.view2(pre.wm), params.view1(pre.bm));
    if (H > 0) {  // the global attention (model.kernel_heads = 0: none)
    grow_view(c.cq[l], "attnphys::cond_q", tokens, HD);
    grow_view(c.ck[l], "attnphys::cond_k", tokens, HD);
    grow_view(c.cg[l], "attnphys::cond_g", tokens, HD);
    grow_view(c.cv[l], "attnphys::cond_v", tokens, HD);
    grow_view(c.com[l], "attnphys::cond_om", tokens, HD);
    ops::linear_forward<T>(c.cq[l], c.cz, params.view2(pre.wq), params.view1(pre.bq));
    ops::linear_forward<T>(c.ck[l], c.cz, params.view2(pre.wk), params.view1(pre.bk));
    ops::linear_forward<T>(c.cg[l], c.cz, params.view2(pre.wv), params.view1(pre.bv));
    {
      const auto v = c.cv[l], g = c.cg[l];
      const auto fl = c.field[l * K];
      attnphys::parallel_for(
          "attnphys::cond_values", tokens, KOKKOS_LAMBDA(long t) {
            for (long f = 0; f < HD; ++f) v(t, f) = g(t, f) * fl(t);
          });
    }
    grow_view(c.cqh[l], "attnphys::cond_qh", batch * H, len, dk);
    grow_view(c.ckh[l], "attnphys::cond_kh", batch * H, len, dk);
    grow_view(c.cvh[l], "attnphys::cond_vh", batch * H, len, dk);
    grow_view(c.coh[l], "attnphys::cond_oh", batch * H, len, dk);
    ops::split_heads<T>(c.cqh[l], c.cq[l], 0, batch, H);
    ops::split_heads<T>(c.ckh[l], c.ck[l], 0, batch, H);
    ops::split_heads<T>(c.cvh[l], c.cv[l], 0, batch, H);
    if (dense)
      grow_view(c.cp[l], "attnphys::cond_p", batch * H, len, len);
    else
      c.cp[l] = View3<T>();
    grow_view(c.clse[l], "attnphys::cond_lse", batch * H, len);
    ops::sdpa_forward<T>(c.coh[l], c.cp[l], c.clse[l], c.cqh[l], c.ckh[l], c.cvh[l], spec, c.ws);
    ops::merge_heads<T>(c.com[l], 0, c.coh[l], batch, H);
    }
    if (S > 0) {
      grow_view(c.cw[l], "attnphys::cond_w", tokens, S);
      ops::linear_forward<T>(c.cw[l], c.cz, params.view2(pre.wl), params.view1(pre.bl));
      if (opt_.local_softmax) ops::softmax_forward<T>(c.cw[l], c.cw[l]);
    }
    for (long k = 0; k < K; ++k) {  // model.layer_repeat: the same update K times (field index l·K + k)
    const long fi = l * K + k;
    grow_view(c.field[fi + 1], "attnphys::cond_field", tokens);
    {
      const auto m = c.cm[l], om = c.com[l];
      const auto fin = c.field[fi], fout = c.field[fi + 1];
      const bool b0 = !opt_.local_softmax;  // the softmax stencil replaces b0·û
      attnphys::parallel_for("attnphys::cond_combine", tokens, KOKKOS_LAMBDA(long t) {
            // (the b0 form written exactly as without model.local_softmax, so that it rounds the same)
            T acc = b0 ? m(t, HD) * fin(t) + m(t, HD + 1) : m(t, HD + 1);
            for (long f = 0; f < HD; ++f) acc += m(t, f) * om(t, f);
            fout(t) = acc;
          });
    }
    if (S > 0)
      local_forward<T>(c.field[fi + 1], c.cw[l], c.field[fi], len, opt_.local_radius, dim_, c.grid, opt_.local_edge);
    }
  }
  Kokkos::deep_copy(View1<T>(out.data(), tokens), c.field[L * K]);
}

template <class T>
void HeatSurrogate<T>::conditioned_backward(SurrogateCache<T>& c, const ops::ConstVec<T>& dout,
                                            const ParameterBuffer<T>& params, const ops::Vec<T>& du) const {
  const long H = opt_.kernel_heads, dk = opt_.kernel_dk, L = opt_.kernel_layers, d = opt_.encoder.d_model;
  const long Fc = cond_width(), Dz = d + Fc, HD = H * dk, len = c.len, batch = c.batch, tokens = batch * len;
  require(long(dout.extent(0)) == tokens, "heat surrogate backward: gradient has ", dout.extent(0),
          " values, expected ", tokens);
  require(long(c.cq.size()) == L, "heat surrogate backward: no conditioned forward pass to differentiate");
  View1<T> g("attnphys::cond_g", tokens), gp("attnphys::cond_gprev", tokens);
  Kokkos::deep_copy(g, View1<const T>(dout.data(), tokens));
  grow_view(c.dz, "attnphys::cond_dz", tokens, Dz);
  Kokkos::deep_copy(c.dz, T(0));
  grow_view(c.cdq, "attnphys::cond_dq", tokens, HD);
  grow_view(c.cdk, "attnphys::cond_dk", tokens, HD);
  grow_view(c.cdv, "attnphys::cond_dv", tokens, HD);
  grow_view(c.cdg, "attnphys::cond_dg", tokens, HD);
  grow_view(c.cdo, "attnphys::cond_do", tokens, HD);
  grow_view(c.cdm, "attnphys::cond_dm", tokens, HD + 2);
  grow_view(c.cdq3, "attnphys::cond_dq3", batch * H, len, dk);
  grow_view(c.cdk3, "attnphys::cond_dk3", batch * H, len, dk);
  grow_view(c.cdv3, "attnphys::cond_dv3", batch * H, len, dk);
  grow_view(c.cdo3, "attnphys::cond_do3", batch * H, len, dk);
  const long S = local_size();
  const long K = opt_.layer_repeat;  // > 1 only with H = 0 and S > 0 (validated)
  require(S == 0 || long(c.cw.size()) == L, "heat surrogate backward: no conditioned forward pass to differentiate");
  require(long(c.field.size()) == L * K + 1, "heat surrogate backward: no conditioned forward pass to differentiate");
  if (S > 0) grow_view(c.cdw, "attnphys::cond_dw", tokens, S);
  if (S > 0 && K > 1) grow_view(c.cdw_sum, "attnphys::cond_dw_sum", tokens, S);
  ops::ScoreSpec<T> spec;
  spec.heads = H;
  for (long l = L - 1; l >= 0; --l) {
    const LayerTensors& pre = layer_t_[std::size_t(l)];
    for (long k = K - 1; k >= 0; --k) {  // model.layer_repeat: the K updates of the layer, last first
    const long fi = l * K + k;
    const bool last = k == K - 1;  // the first gradient of the layer: assign, then accumulate
    {  // ŷ = b0 û + Σ A ⊙ O + e: the mixing coefficients' and the head outputs' gradients, û's direct part
      const auto m = c.cm[l], om = c.com[l], dm = c.cdm, dO = c.cdo;
      const auto fin = c.field[fi];
      const View1<T> gg = g, gprev = gp;
      const bool b0 = !opt_.local_softmax;
      attnphys::parallel_for("attnphys::cond_combine_backward", tokens, KOKKOS_LAMBDA(long t) {
            const T gt = gg(t);
            for (long f = 0; f < HD; ++f) {
              dm(t, f) = gt * om(t, f);
              dO(t, f) = gt * m(t, f);
            }
            const T db0 = b0 ? gt * fin(t) : T(0);
            dm(t, HD) = last ? db0 : dm(t, HD) + db0;
            dm(t, HD + 1) = last ? gt : dm(t, HD + 1) + gt;
            gprev(t) = b0 ? gt * m(t, HD) : T(0);
          });
    }
    if (S > 0) {  // the local term's adjoint into û; its weights' gradient, summed over the K updates
      local_backward<T>(c.cdw, gp, c.cw[l], c.field[fi], g, len, opt_.local_radius, dim_, c.grid, opt_.local_edge);
      if (K > 1) {
        const auto dw = c.cdw, sum = c.cdw_sum;
        attnphys::parallel_for("attnphys::cond_dw_sum", tokens, KOKKOS_LAMBDA(long t) {
              for (long s = 0; s < S; ++s) sum(t, s) = last ? dw(t, s) : sum(t, s) + dw(t, s);
            });
      }
    }
    if (k > 0) std::swap(g, gp);
    }
    const auto lin = [&](const ParamRef& w, const ParamRef& b, const View2<T>& dy) {
      ops::linear_backward<T>(c.dz, params.view2(w, Slot::Grads), params.view1(b, Slot::Grads), dy, c.cz,
                              params.view2(w), true);
    };
    if (H > 0) {  // the global attention (model.kernel_heads = 0: none)
    ops::split_heads<T>(c.cdo3, c.cdo, 0, batch, H);
    ops::sdpa_backward<T>(c.cdq3, c.cdk3, c.cdv3, Mat<T>(), c.cdo3, c.cqh[l], c.ckh[l], c.cvh[l], c.coh[l], c.cp[l],
                          c.clse[l], spec, c.ws);
    ops::merge_heads<T>(c.cdq, 0, c.cdq3, batch, H);
    ops::merge_heads<T>(c.cdk, 0, c.cdk3, batch, H);
    ops::merge_heads<T>(c.cdv, 0, c.cdv3, batch, H);
    {  // v = g ⊙ û
      const auto dv = c.cdv, dg = c.cdg, gv = c.cg[l];
      const auto fin = c.field[l * K];
      const View1<T> gprev = gp;
      attnphys::parallel_for("attnphys::cond_values_backward", tokens, KOKKOS_LAMBDA(long t) {
            T acc = 0;
            const T ut = fin(t);
            for (long f = 0; f < HD; ++f) {
              dg(t, f) = dv(t, f) * ut;
              acc += dv(t, f) * gv(t, f);
            }
            gprev(t) += acc;
          });
    }
    lin(pre.wq, pre.bq, c.cdq);
    lin(pre.wk, pre.bk, c.cdk);
    lin(pre.wv, pre.bv, c.cdg);
    }
    lin(pre.wm, pre.bm, c.cdm);
    if (S > 0) {  // the local term's weights (its adjoint into û ran above)
      const View2<T> dw = K > 1 ? c.cdw_sum : c.cdw;
      if (opt_.local_softmax) ops::softmax_backward<T>(dw, dw, c.cw[l]);
      lin(pre.wl, pre.bl, dw);
    }
    if (l > 0)
      std::swap(g, gp);
    else if (du.extent(0) > 0)
      Kokkos::deep_copy(View1<T>(du.data(), tokens), gp);
  }
  {  // the trunk: dz's first d columns through the GELU to W1, b1
    const auto dz = c.dz, dh = c.cdpre;
    attnphys::parallel_for(
        "attnphys::cond_dh", tokens, KOKKOS_LAMBDA(long t) {
          for (long f = 0; f < d; ++f) dh(t, f) = dz(t, f);
        });
  }
  ops::gelu_backward<T>(c.cdpre, c.cdpre, c.cpre);
  const bool field_du = opt_.condition_on_field && du.extent(0) > 0;
  if (field_du) grow_view(c.cdcond, "attnphys::cond_dcond", tokens, Fc);
  ops::linear_backward<T>(field_du ? Mat<T>(c.cdcond) : Mat<T>(), params.view2(cond_w1_, Slot::Grads),
                          params.view1(cond_b1_, Slot::Grads), c.cdpre, c.cond, params.view2(cond_w1_));
  if (field_du) {  // û as a conditioning column: through z directly and through the trunk
    const auto dz = c.dz, dc = c.cdcond;
    const long col = Fc - 1;
    attnphys::parallel_for("attnphys::cond_field_feature_backward", tokens,
        KOKKOS_LAMBDA(long t) { du(t) += dz(t, d + col) + dc(t, col); });
  }
}

template class HeatSurrogate<float>;
template class HeatSurrogate<double>;

}  // namespace attnphys::training
