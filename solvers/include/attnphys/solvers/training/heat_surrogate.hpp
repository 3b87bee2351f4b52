#pragma once
// The heat-equation surrogate: every grid point is a token.
//
// Per token the model sees the (normalised) field value û, optionally extra (normalised) input channels — the
// diffusivity κ(x), a source, boundary data, any dataset named in data.channels — and its physical position
// through a coordinate encoding; a lifting layer (the encoder's embedding), L transformer blocks
// and a linear readout give the normalised increment, so ŷ = û + readout(encoder(features)). Positions enter only
// through coordinates in physical units, so a model trained on a 32² grid runs unchanged on 64² or on scattered
// points: softmax attention then acts as a learned, normalised heat kernel Σ_j P_ij u_j, the global version of the
// 5-point stencil.
//
// Two model kinds:
//   kernel (default): coordinate attention. Queries and keys come from the coordinate encoding only, values are
//          the field: P_h = softmax(q(x_i)·k(x_j)/sqrt(dk)) is one learned attention matrix per head, shared by
//          every sample, and ŷ = b0·û + Σ_h a_h P_h û + c (L such layers compose). This is the global version of
//          a stencil — exactly linear in the field, as the heat map is — and since P does not depend on the
//          sample it is computed once per batch: the cost is H·N² + H·N²·B multiply-adds, not B·H·N²·d.
//   conditioned: kernel attention whose attention depends on the input channels (variable κ(x), sources, ...).
//          Per token a conditioning vector c_i = [harmonic coordinate features φ(x_i), the normalised extra
//          channels, (s), (with model.stencil: the channels' stencil differences — never û's)]; a small MLP
//          h_i = GELU(W1 c_i + b1) (width model.d_model) and z_i = [h_i, c_i]. Per layer l and head h (all linear
//          maps of z, per layer): queries q_i, keys k_j (width dk = model.kernel_dk), value gains g_j ∈ R^dk and
//          mixing coefficients m_i = (A_i ∈ R^{H·dk}, b0_i, e_i). With P_h(b) = softmax(q_i·k_j/sqrt(dk)) per sample,
//              ŷ_i = b0_i û_i + Σ_h Σ_r A_{i,hr} Σ_j P_h,ij g_{j,hr} û_j + e_i,
//          exactly affine in û (linear with e = 0) for any κ: the learned, κ-dependent heat kernel K_κ. L layers
//          compose (the output field of layer l is the input of l+1, z shared). It starts as the identity map
//          (A = 0, b0 = 1, g = e_1) with the kernel kind's multi-width harmonic q/k. Cost B·H·N²·dk: dense
//          attention with saved P when L·B·H·N² <= 2^27 (model.conditioned_attention = auto), else tiled
//          (FlashAttention-2, O(N·dk) memory).
//          Local term (model.local_radius = r > 0, regular grids): every layer adds a κ-conditioned stencil on its
//          input field, ŷ_i += Σ_{s ∈ S} w_{l,s}(z_i) û_{i+s}, S = {−r..r}^dim ((2r+1)^dim offsets, x fastest), w_l a
//          linear map of z (cond.l.wl, cond.l.bl, initialised to 0 so the model starts as without it); neighbours
//          wrap on periodic axes and repeat the edge value on the others (the grid read as for model.stencil), or,
//          with model.local_edge = odd / even, read the cell mirrored across the edge face with its sign flipped
//          (zero Dirichlet data: the odd extension is what the heat map itself does there) or kept (zero flux).
//          Still exactly affine in û. r = 0 (default) declares nothing and computes exactly as before.
//          model.local_softmax: w_l(z_i) = softmax_s(W_l z_i + b_l) over the offsets, and the b0·û term is dropped, so
//          that with model.kernel_heads = 0 each layer is a convex combination of its input's neighbours plus e_i —
//          a max-principle operator (‖ŷ − e‖∞ ≤ ‖û‖∞), as the heat map itself, that cannot amplify any mode in a
//          rollout (the linear weights can, at frequencies the data never shows). Starts at 0.9 on the centre.
//          model.kernel_heads = 0 (with r > 0) drops the global attention: each layer is then the conditioned
//          stencil alone, ŷ_i = b0_i û_i + Σ_s w_s(z_i) û_{i+s} + e_i — O(N·(2r+1)^dim) per layer, what a 3D grid of
//          32³ = 32768 tokens affords on a CPU (the per-sample N² attention there costs about a second per sample
//          and head for the forward pass alone on one core). 3D grids: harmonics per axis (x, y, z), offsets
//          (2r+1)³ with x fastest, then y, then z.
//          Channel window (model.channel_window = w > 0, regular grids): the conditioning also holds every channel's
//          values at the (2w+1)^dim − 1 neighbours of the token (x fastest; wrapped on periodic axes, mirrored across
//          the edge face on the others), so that a local stencil's weights can depend on κ around the token, as the
//          heat map's coefficients do, and not only on κ and its central differences at the token.
//          Repeated updates (model.layer_repeat = K > 1, with model.kernel_heads = 0): each layer's update
//          û ← b0 û + Σ_s w_s û_{i+s} + e runs K times with the same κ-conditioned weights (the conditioning network
//          runs once per layer), like K explicit steps of a learned scheme: the receptive field grows to K·L·r cells
//          for K times the stencil work, which is what a diffusion length of several cells per horizon needs. The
//          weights' gradients sum over the K updates. K = 1 (default) computes exactly as before.
//          Field conditioning (model.condition_on_field): û_i is one more column of c_i (the last), so q, k, g and
//          the mixing depend on the field and ŷ = A(û) û is quasi-linear, the structure of u_t = ∇·(κ(u)∇u): the
//          conditioned operator for nonlinear diffusion, where no channel carries κ. Not linear in û any more.
//   transformer: the generic pre-LayerNorm encoder (operators/encoder.hpp) over tokens [û, extra channels, (s),
//          coordinates], for nonlinear or variable-coefficient problems.
//
// Horizon input (model.dt_input): one model for several horizons Δt = τ·Δt_base (data.horizons lists the τ). Each
// sample carries s = τ − 1 (0 at the base horizon). transformer: s is one more token feature. kernel: the mixing
// coefficients become affine in s, b0 + b0'·s, a_h + a_h'·s, c + c'·s (the primed ones start at 0), so the model stays
// linear in the field and P_h stays shared by the batch: the heads' kernels of different widths are mixed
// differently for different horizons.
//
// Stencil features (model.stencil, transformer): for û and every extra channel f, along each axis a, the physical
// central differences ℓ_a (f_{i+1} − f_{i−1})/(2h_a) and ℓ_a² (f_{i+1} − 2f_i + f_{i−1})/h_a² (wrapped on periodic
// axes, the edge value repeated on the others), ℓ_a = L_a/64 of the encoding length: what a 3-point stencil sees,
// given to every token at once, in physical units so that the model still runs on other grids.
//
// Conservation (model.conserve, any kind): ŷ_b ← ŷ_b − mean(ŷ_b) + mean(û_b) per sample, so that the predicted
// field keeps the input's mean exactly, as the heat equation does with periodic or zero-flux (Neumann) boundaries
// and no source (the run turns it off elsewhere, with a note). Points count equally (regular grids). Linear, so the kernel and
// conditioned kinds stay linear in û; the backward pass projects the output gradient the same way.
//
// Coordinate encodings:
//   harmonics: cos(2π m x/L), sin(2π m x/L), m = 1..M per axis (periodic-aware, exact on the torus);
//   fourier:   the encoder's random Fourier features of the raw coordinates (any domain, irregular points);
//   none:      no positional information (the model is then permutation-equivariant and cannot learn a kernel).
#include <cstdint>
#include <string>
#include <vector>

#include "attnphys/core/params.hpp"
#include "attnphys/operators/attention_core.hpp"
#include "attnphys/operators/encoder.hpp"

namespace attnphys::training {

// model.kind, model.conditioned_attention and model.coords: parsed once where the option is read (EnumNames below).
enum class SurrogateKind { Kernel, Conditioned, Transformer };
enum class ConditionedAttention { Auto, Dense, Tiled };  // conditioned: saved probabilities, FlashAttention-2 or
                                                         // chosen by size
enum class CoordEncoding { Harmonics, Fourier, None };
// model.local_edge: what the local stencil reads beyond a non-periodic edge, at the cell mirrored across the edge
// face: its value (even: zero-flux sides), minus its value (odd: zero Dirichlet data, the exact extension of
// u = 0 on the face), or the edge cell itself (clamp, the edge value repeated).
enum class LocalEdge { Clamp, Odd, Even };

}  // namespace attnphys::training

namespace attnphys {
template <>
struct EnumNames<training::SurrogateKind> {
  static constexpr EnumName<training::SurrogateKind> values[] = {{training::SurrogateKind::Kernel, "kernel"},
                                                                 {training::SurrogateKind::Conditioned, "conditioned"},
                                                                 {training::SurrogateKind::Transformer, "transformer"}};
};
template <>
struct EnumNames<training::ConditionedAttention> {
  static constexpr EnumName<training::ConditionedAttention> values[] = {
      {training::ConditionedAttention::Auto, "auto"},
      {training::ConditionedAttention::Dense, "dense"},
      {training::ConditionedAttention::Tiled, "tiled"}};
};
template <>
struct EnumNames<training::LocalEdge> {
  static constexpr EnumName<training::LocalEdge> values[] = {
      {training::LocalEdge::Clamp, "clamp"}, {training::LocalEdge::Odd, "odd"}, {training::LocalEdge::Even, "even"}};
};
template <>
struct EnumNames<training::CoordEncoding> {
  static constexpr EnumName<training::CoordEncoding> values[] = {{training::CoordEncoding::Harmonics, "harmonics"},
                                                                 {training::CoordEncoding::Fourier, "fourier"},
                                                                 {training::CoordEncoding::None, "none"}};
};
}  // namespace attnphys

namespace attnphys::training {

struct SurrogateOptions {
  SurrogateKind kind = SurrogateKind::Kernel;
  ConditionedAttention conditioned_attention = ConditionedAttention::Auto;  // conditioned kind
  // conditioned / transformer: bf16 products in the global softmax attention (float32 accumulation and softmax;
  // AMX or AVX512-BF16; tiled attention with head width 16, float32 models only); float32 by default.
  ops::AttentionPrecision attention_precision = ops::AttentionPrecision::Float32;
  long kernel_heads = 4;            // kernel: heads (each its own attention matrix)
  long kernel_dk = 16;              // kernel: query/key width per head
  long kernel_layers = 1;           // kernel: stacked layers
  ops::EncoderOptions encoder;      // transformer: attention kind, width, depth, heads (d_in/positional set below)
  CoordEncoding coords = CoordEncoding::Harmonics;
  long harmonics = 4;               // M per axis
  bool input_kappa = false;         // shorthand for one extra channel "kappa" (data.channels; transformer only)
  bool stencil = false;             // transformer: + local differences of û and the channels (see below)
  long local_radius = 0;            // conditioned: radius r of the κ-conditioned local stencil (0: none)
  bool local_softmax = false;       // conditioned + local_radius: the stencil weights are a softmax over the
                                    // (2r+1)^dim offsets and replace b0·û (see below)
  LocalEdge local_edge = LocalEdge::Clamp;  // conditioned + local_radius: reads beyond a non-periodic edge
  long channel_window = 0;          // conditioned: each channel's values at the (2w+1)^dim neighbours join the
                                    // conditioning (regular grids; 0: the channel at the token only)
  long layer_repeat = 1;            // conditioned, kernel_heads = 0, local_radius > 0: each layer's update applied
                                    // K times with the same weights (see below)
  long extra_channels = 0;          // not a key: extra input channels per token (set from data.channels by the run)
  bool dt_input = false;            // the horizon τ = Δt/Δt_base as an input (see above)
  bool conserve = false;            // project every output onto the input's mean (see below)
  bool condition_on_field = false;  // conditioned: û itself in the conditioning (quasi-linear, for κ(u))
  SurrogateOptions();
  void declare(OptionSet& set);
  void validate() const;
  // Features per token given the spatial dimension.
  long num_features(int dim) const;
  // Extra input channels per token: extra_channels, or 1 for input_kappa alone.
  long extra_inputs() const { return extra_channels > 0 ? extra_channels : (input_kappa ? 1 : 0); }
};

// The regular grid behind a coordinate list [N, dim] (x fastest), as the stencil features read it.
struct SurrogateGrid {
  long nx = 0, ny = 1, nz = 1;
  double hx = 1, hy = 1, hz = 1;
  bool px = false, py = false, pz = false;  // periodic axes (the encoding length is n·h; non-periodic boxes are
                                            // encoded as 2L)
};

// Saved activations of one forward pass (grow-only, reused across steps).
template <class T>
struct SurrogateCache {
  long batch = 0, len = 0;
  const void* grid_key = nullptr;  // the coordinates the grid below was read from (data pointer and length)
  long grid_len = 0;
  SurrogateGrid grid;
  View2<T> features;  // [B*N, F]
  View2<T> hidden;    // [B*N, d]
  View2<T> readout;   // [B*N, 1]
  View2<T> dhidden;   // [B*N, d]
  View2<T> dfeatures; // [B*N, F]: gradient of the token features (backward with an input gradient)
  View1<T> dconserved; // [B*N]: model.conserve, the output gradient projected onto zero-mean fields
  View2<T> cdcond;     // [B*N, Fc]: conditioned with model.condition_on_field, the conditioning's gradient
  ops::EncoderCache<T> enc;
  // kernel kind, per layer l: coordinate features phi [N, F], q/k [N, H*dk] and per head [H, N, dk],
  // probabilities p [H, N, N], the layer's input field as columns u [N, B], head outputs o [H, N, B].
  View2<T> phi;
  std::vector<View2<T>> qc, kc, u;
  std::vector<View3<T>> qh, kh, p, o;
  View3<T> dp, dqh, dkh, dout3;
  View2<T> dqc, dkc, du;
  std::vector<View1<T>> field;  // input field of update l·K + k (K = model.layer_repeat), [B*N] (field[L·K] = output)
  View1<T> shift;               // dt_input: s = τ − 1 per sample [B]
  // conditioned kind: conditioning c [B*N, Fc], MLP pre-activation [B*N, d], z = [h, c] [B*N, d + Fc]; per layer
  // l: q, k, value gains g, values v = g ⊙ û, mixing m [B*N, H*dk (+2 for m)], merged head outputs om [B*N, H*dk],
  // per-head q/k/v/o [B*H, N, dk], probabilities p [B*H, N, N] (dense) or empty (tiled), lse [B*H, N].
  View2<T> cond, cpre, cz, dz;
  std::vector<View2<T>> cq, ck, cg, cv, cm, com, clse;
  std::vector<View3<T>> cqh, ckh, cvh, coh, cp;
  std::vector<View2<T>> cw;  // local_radius > 0: per layer the stencil weights w(z) [B*N, (2r+1)^dim]
  View2<T> cdw;
  View2<T> cdw_sum;  // model.layer_repeat > 1: the local weights' gradient summed over a layer's K updates
  View3<T> cdq3, cdk3, cdv3, cdo3;
  View2<T> cdq, cdk, cdv, cdg, cdm, cdo, cdpre;
  ops::AttentionScratch<T> ws;
};

template <class T>
class HeatSurrogate {
 public:
  // dim: 1, 2 or 3; lengths: per axis, the period of the harmonic encoding (the box, or twice it on a non-periodic
  // box: encoding_lengths in heat_data.hpp).
  HeatSurrogate(SurrogateOptions options, int dim, std::vector<double> lengths);
  const SurrogateOptions& options() const { return opt_; }
  const ops::Encoder<T>& encoder() const { return enc_; }
  int dim() const { return dim_; }

  void declare(ParameterBuffer<T>& buf);
  void init(ParameterBuffer<T>& buf, std::uint64_t seed) const;

  // coords [N, dim] physical positions; u [B*N] normalised inputs; extra [B*N, C] normalised extra channels
  // (C = options().extra_inputs(); empty when C = 0); out [B*N] normalised prediction; tau [B]: each sample's
  // horizon in base horizons (needed with dt_input, else ignored).
  void forward(const ops::Vec<T>& out, SurrogateCache<T>& cache, const ops::ConstVec<T>& u, const ConstMat<T>& extra,
               const ConstMat<T>& coords, long batch, long len, const ParameterBuffer<T>& params,
               const ops::ConstVec<T>& tau = {}) const;
  // Parameter gradients += from dout [B*N]. With du non-empty [B*N]: du = the gradient of the same objective with
  // respect to the normalised input field u of the last forward (through the residual, the u feature and, with
  // model.stencil, its differences; the extra channels, horizons and coordinates are held fixed) — what unrolled
  // training (train.unroll) propagates from one application of the model into the one before.
  void backward(SurrogateCache<T>& cache, const ops::ConstVec<T>& dout, const ParameterBuffer<T>& params,
                const ops::Vec<T>& du = {}) const;
  // Attention weights (mean over heads) of query `query` in `layer`, for `sample` of the last forward.
  std::vector<double> attention_map(const SurrogateCache<T>& cache, const ParameterBuffer<T>& params, long layer,
                                    long sample, long query) const;
  // kernel kind with one layer: row `query` of the learned linear operator b0·I + Σ_h a_h P_h (in normalised
  // units, so directly comparable with the solver's response to a unit impulse); empty otherwise.
  std::vector<double> operator_row(const SurrogateCache<T>& cache, const ParameterBuffer<T>& params,
                                   long query) const;

  // Implementation steps of the conditioned kind (public only because they hold device kernels: nvcc rejects a
  // KOKKOS_LAMBDA in a private member function).
  void conditioned_forward(const ops::Vec<T>& out, SurrogateCache<T>& c, const ops::ConstVec<T>& u,
                           const ConstMat<T>& extra, const ConstMat<T>& coords, long batch, long len,
                           const ParameterBuffer<T>& params) const;
  void conditioned_backward(SurrogateCache<T>& c, const ops::ConstVec<T>& dout, const ParameterBuffer<T>& params,
                            const ops::Vec<T>& du) const;

 private:
  SurrogateOptions opt_;
  int dim_;
  std::vector<double> lengths_;
  ops::Encoder<T> enc_;
  ops::InitPlan head_plan_, kernel_plan_;
  using Kind = SurrogateKind;
  using CondMemory = ConditionedAttention;
  using Coords = CoordEncoding;
  Kind kind_;
  CondMemory cond_memory_;
  Coords coords_;
  std::string lp(long l) const { return "kernel." + std::to_string(l) + "."; }
  void kernel_forward(const ops::Vec<T>& out, SurrogateCache<T>& c, const ops::ConstVec<T>& u,
                      const ConstMat<T>& coords, long batch, long len, const ParameterBuffer<T>& params) const;
  void kernel_backward(SurrogateCache<T>& c, const ops::ConstVec<T>& dout, const ParameterBuffer<T>& params,
                       const ops::Vec<T>& du) const;
  long cond_width() const;  // Fc: conditioning features per token
  long local_size() const;  // (2r+1)^dim offsets of the local term, 0 without it
  long window_size() const;  // (2w+1)^dim offsets of the channel window (1 without it)
  std::string cp(long l) const { return "cond." + std::to_string(l) + "."; }
  std::string head_ = "head.";
  // The parameter blocks, resolved once in declare(): forward and backward look up no names. Per layer l the
  // blocks of the kind (kernel: lp(l) wq..c_dt; conditioned: cp(l) wq..bl; unresolved where not declared).
  struct LayerTensors {
    ParamRef wq, bq, wk, bk, wv, bv, wm, bm, wl, bl;
    ParamRef a, b0, c, a_dt, b0_dt, c_dt;
  };
  std::vector<LayerTensors> layer_t_;
  ParamRef cond_w1_, cond_b1_, head_w_, head_b_;
  void declare_blocks(ParameterBuffer<T>& buf);
  void resolve_blocks(const ParameterBuffer<T>& buf);
};

extern template class HeatSurrogate<float>;
extern template class HeatSurrogate<double>;

}  // namespace attnphys::training
