#include "attnphys/solvers/vmc/transformer.hpp"
#include "attnphys/core/parallel.hpp"

#include <cmath>
#include <type_traits>

#include "attnphys/core/gemm.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/operators/attention_core.hpp"
#include "attnphys/operators/layers.hpp"
#include "attnphys/solvers/vmc/complex_math.hpp"

// The vector erf of glibc's libmvec for the fused feed-forward loops (as in operators/src/layers.cpp: math.h declares
// the SIMD variants to GCC only under -ffast-math). Host builds only; a device build keeps Kokkos' erf.
#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)) && \
    defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) &&           \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
extern "C" double erf(double) noexcept __attribute__((simd("notinbranch")));
extern "C" float erff(float) noexcept __attribute__((simd("notinbranch")));
namespace attnphys::vmc::detail {
inline double vit_erf(double x) { return ::erf(x); }
inline float vit_erf(float x) { return ::erff(x); }
// GCC vectors of one register of the target for the fused feed-forward's register blocks: 64 bytes on AVX-512, 32
// on AVX2/AVX, 16 otherwise. (64-byte vectors on an AVX2 CPU were lowered to stack traffic: ff_pool was 61 % of a
// TFIM N = 32 run on a Zen 3.)
#if defined(__AVX512F__)
constexpr int kVitVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVitVecBytes = 32;
#else
constexpr int kVitVecBytes = 16;
#endif
template <class T>
struct Simd {
  typedef T type __attribute__((vector_size(kVitVecBytes)));
  static constexpr int width = kVitVecBytes / int(sizeof(T));
};
}  // namespace attnphys::vmc::detail
#define ATTNPHYS_VIT_SIMD 1
#else
namespace attnphys::vmc::detail {
template <class T>
KOKKOS_INLINE_FUNCTION T vit_erf(T x) {
  return math::erf(x);
}
}  // namespace attnphys::vmc::detail
#endif

namespace attnphys::vmc {

void TransformerAnsatzOptions::declare(OptionSet& s, const std::string& p) {
  s.add(p + ".patch_size", &patch_size, "spins per token (must divide the chain length)", Range::at_least(1));
  s.add(p + ".d_model", &d_model, "token width", Range::at_least(1));
  s.add(p + ".n_heads", &n_heads, "attention heads", Range::at_least(1));
  s.add(p + ".n_layers", &n_layers, "transformer blocks", Range::at_least(1));
  s.add(p + ".d_ff", &d_ff, "feed-forward width (0: 2 d_model)", Range::non_negative());
  s.add(p + ".attention", &attention, "factored (alpha_h(i-j)) or dense (softmax with relative bias)");
  s.add(p + ".positional", &positional, "absolute positions: auto (learned for open chains), none, learned");
  s.add(p + ".hidden", &hidden, "complex log-cosh readout units (0: d_model)", Range::non_negative());
  s.add(p + ".symmetrize", &symmetrize, "sum over intra-patch translations (periodic chains)");
  s.add(p + ".marshall_sign", &marshall_sign, "multiply by (-1)^(up spins on even sites)");
  s.add(p + ".spin_flip", &spin_flip,
        "project onto a sector of the global spin flip: off, even (psi(-s) = psi(s)), odd (psi(-s) = -psi(s))");
  s.add(p + ".reflection", &reflection,
        "project onto a sector of the reflection i -> N-1-i: off, even, odd");
  s.add(p + ".init_std", &init_std, "readout initial scale", Range::non_negative());
  s.add(p + ".seed", &seed, "initialisation seed");
  s.add(p + ".incremental", &incremental,
        "one factored block: proposals and connected configurations recompute only the changed tokens (false: full "
        "evaluations)");
  s.add(p + ".chunk_tokens", &chunk_tokens,
        "log psi evaluates the batch in chunks of about this many tokens, so activations stay in cache (0: whole batch)",
        Range::non_negative());
}

void TransformerAnsatzOptions::validate() const {
  require(patch_size >= 1 && d_model >= 1 && n_heads >= 1 && n_layers >= 1 && d_ff >= 0 && hidden >= 0 &&
              chunk_tokens >= 0,
          "transformer ansatz: patch_size, d_model, n_heads, n_layers >= 1 and d_ff, hidden, chunk_tokens >= 0 are "
          "required");
  require(d_model % n_heads == 0, "transformer ansatz: d_model = ", d_model, " is not divisible by n_heads = ",
          n_heads);
  require(init_std >= 0 && std::isfinite(init_std), "transformer ansatz: init_std must be >= 0");
}

namespace {
bool learned_positions(bool periodic, const TransformerAnsatzOptions& o) {
  return o.positional == TransformerPositional::Auto ? !periodic : o.positional == TransformerPositional::Learned;
}
ops::EncoderOptions make_encoder_options(int n, bool periodic, const TransformerAnsatzOptions& o) {
  ops::EncoderOptions e;
  e.d_in = o.patch_size;
  e.d_model = o.d_model;
  e.n_heads = o.n_heads;
  e.n_layers = o.n_layers;
  e.d_ff = o.d_ff > 0 ? o.d_ff : 2 * o.d_model;
  e.attention = o.attention == TransformerAttention::Dense ? ops::AttentionKind::Dense : ops::AttentionKind::Factored;
  e.periodic = periodic;
  e.relative_bias = o.attention == TransformerAttention::Dense;
  e.max_len = n / o.patch_size;
  e.positional = learned_positions(periodic, o) ? ops::PositionalKind::Learned : ops::PositionalKind::None;
  e.final_norm = true;
  return e;
}
const TransformerAnsatzOptions& checked(int n, const TransformerAnsatzOptions& o) {
  o.validate();
  require(n >= 2, "transformer ansatz: the chain needs at least 2 sites, got ", n);
  require(n % o.patch_size == 0, "transformer ansatz: patch_size ", o.patch_size, " does not divide N = ", n,
          "; choose a divisor of N");
  return o;
}
}  // namespace

template <class T>
TransformerAnsatz<T>::TransformerAnsatz(int n, bool periodic, const TransformerAnsatzOptions& o)
    : n_(n),
      periodic_(periodic),
      opt_(checked(n, o)),
      np_(n / o.patch_size),
      shifts_((periodic && o.symmetrize ? o.patch_size : 1) * (o.reflection != SymmetrySector::Off ? 2 : 1) *
              (o.spin_flip != SymmetrySector::Off ? 2 : 1)),
      d_(o.d_model),
      k_(o.hidden > 0 ? o.hidden : o.d_model),
      enc_(make_encoder_options(n, periodic, o), "encoder.") {
  inc_ok_ = o.incremental && o.n_layers == 1 && o.attention == TransformerAttention::Factored;
  make_group();
  enc_.declare(params_);
  params_.add("out.W_re", {k_, d_});
  params_.add("out.W_im", {k_, d_});
  params_.add("out.c_re", {k_}, false);
  params_.add("out.c_im", {k_}, false);
  params_.allocate();
  out_.W_re = params_.view2("out.W_re"), out_.o_W_re = params_.block("out.W_re").offset;
  out_.W_im = params_.view2("out.W_im"), out_.o_W_im = params_.block("out.W_im").offset;
  out_.c_re = params_.view1("out.c_re"), out_.o_c_re = params_.block("out.c_re").offset;
  out_.c_im = params_.view1("out.c_im"), out_.o_c_im = params_.block("out.c_im").offset;
  {
    auto off = [&](const std::string& name) { return params_.has(name) ? params_.block(name).offset : -1L; };
    enc_off_.embed_w = off("encoder.embed.weight"), enc_off_.embed_b = off("encoder.embed.bias");
    enc_off_.pos = off("encoder.pos_embed");
    enc_off_.norm_w = off("encoder.norm.weight"), enc_off_.norm_b = off("encoder.norm.bias");
    if (o.attention == TransformerAttention::Factored)
      for (long l = 0; l < o.n_layers; ++l) {
        const std::string pre = "encoder.layers." + std::to_string(l) + ".";
        LayerOffsets b;
        b.norm1_w = off(pre + "norm1.weight"), b.norm1_b = off(pre + "norm1.bias");
        b.v_w = off(pre + "self_attn.v_proj.weight"), b.v_b = off(pre + "self_attn.v_proj.bias");
        b.out_w = off(pre + "self_attn.out_proj.weight"), b.out_b = off(pre + "self_attn.out_proj.bias");
        b.alpha = off(pre + "self_attn.alpha");
        b.alpha_table = params_.block(pre + "self_attn.alpha").shape.at(1);
        b.norm2_w = off(pre + "norm2.weight"), b.norm2_b = off(pre + "norm2.bias");
        b.l1_w = off(pre + "linear1.weight"), b.l1_b = off(pre + "linear1.bias");
        b.l2_w = off(pre + "linear2.weight"), b.l2_b = off(pre + "linear2.bias");
        enc_off_.layers.push_back(b);
      }
  }
  enc_.init(params_, o.seed);
  if (o.init_std > 0) {
    const double sd = o.init_std / std::sqrt(double(d_));
    fill_normal(out_.W_re, o.seed, 31, 0.0, sd);
    fill_normal(out_.W_im, o.seed, 32, 0.0, sd);
  }
}

template <class T>
void TransformerAnsatz<T>::make_group() {
  // Elements s = (shift · n_reflections + reflection) · n_flips + flip, each reading input position i from site
  // (i + shift) mod N, or from (N − 1 − i + shift) mod N when reflected, with the flip's sign and the character's
  // phase. With whole-patch translations (which periodic factored attention is invariant under) these generate the
  // whole group.
  const long n = n_, nshift = periodic_ && opt_.symmetrize ? opt_.patch_size : 1;
  const long nrefl = opt_.reflection != SymmetrySector::Off ? 2 : 1, nflip = opt_.spin_flip != SymmetrySector::Off ? 2 : 1;
  const double pi = 3.14159265358979323846;
  gsite_ = Kokkos::View<int*, MemSpace>("attnphys::vit_group_site", shifts_ * n);
  gsign_ = View1<T>("attnphys::vit_group_sign", shifts_);
  gphase_ = View1<T>("attnphys::vit_group_phase", shifts_);
  auto hs = Kokkos::create_mirror_view(gsite_);
  auto hg = Kokkos::create_mirror_view(gsign_);
  auto hp = Kokkos::create_mirror_view(gphase_);
  for (long sh = 0; sh < nshift; ++sh)
    for (long r = 0; r < nrefl; ++r)
      for (long f = 0; f < nflip; ++f) {
        const long s = (sh * nrefl + r) * nflip + f;
        for (long i = 0; i < n; ++i) hs(s * n + i) = int(((r ? n - 1 - i : i) + sh) % n);
        hg(s) = f ? T(-1) : T(1);
        const bool odd = (r && opt_.reflection == SymmetrySector::Odd) != (f && opt_.spin_flip == SymmetrySector::Odd);
        hp(s) = odd ? T(pi) : T(0);
      }
  Kokkos::deep_copy(gsite_, hs);
  Kokkos::deep_copy(gsign_, hg);
  Kokkos::deep_copy(gphase_, hp);
}

template <class T>
void TransformerAnsatz<T>::make_tokens(const View2<const T>& sigma) {
  const long B = sigma.extent(0), S = shifts_, np = np_, b = opt_.patch_size, n = n_;
  require(sigma.extent(1) == std::size_t(n_), "transformer ansatz: sigma has ", sigma.extent(1),
          " sites, expected ", n_);
  const long rows = B * S;
  if (tokens_.extent(0) != std::size_t(rows * np)) {
    tokens_ = View2<T>("attnphys::vit_tokens", rows * np, b);
    y_ = View2<T>("attnphys::vit_y", rows * np, d_);
  }
  ensure_rows(rows);
  const auto tok = tokens_;
  const auto site = gsite_;
  const auto sign = gsign_;
  Kokkos::parallel_for(
      "attnphys::vit_tokens", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows * np, b}),
      KOKKOS_LAMBDA(const long t, const long k) {
        const long r = t / np, p = t % np, bb = r / S, s = r % S;
        tok(t, k) = sign(s) * sigma(bb, site(s * n + p * b + k));
      });
}

template <class T>
void TransformerAnsatz<T>::ensure_rows(long rows) {
  if (z_.extent(0) != std::size_t(rows)) {
    z_ = View2<T>("attnphys::vit_z", rows, d_);
    theta_re_ = View2<T>("attnphys::vit_theta_re", rows, k_);
    theta_im_ = View2<T>("attnphys::vit_theta_im", rows, k_);
    lp_re_ = View1<T>("attnphys::vit_lp_re", rows);
    lp_im_ = View1<T>("attnphys::vit_lp_im", rows);
    w_re_ = View1<T>("attnphys::vit_w_re", rows);
    w_im_ = View1<T>("attnphys::vit_w_im", rows);
  }
}

template <class T>
void TransformerAnsatz<T>::readout(long rows) {
  const long np = np_, d = d_;
  const auto y = y_, z = z_;
  Kokkos::parallel_for(
      "attnphys::vit_pool", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows, d}),
      KOKKOS_LAMBDA(const long r, const long j) {
        T acc = 0;
        for (long p = 0; p < np; ++p) acc += y(r * np + p, j);
        z(r, j) = acc;
      });
  readout_pooled(rows);
}

template <class T>
void TransformerAnsatz<T>::readout_pooled(long rows) {
  const long d = d_, K = k_;
  gemm('N', 'T', T(1), ConstMat<T>(z_.data(), rows, d), out_.W_re, T(0), theta_re_);
  gemm('N', 'T', T(1), ConstMat<T>(z_.data(), rows, d), out_.W_im, T(0), theta_im_);
  const auto cr = out_.c_re, ci = out_.c_im;
  const auto tr = theta_re_, ti = theta_im_;
  const auto lr = lp_re_, li = lp_im_;
  const auto phase = gphase_;
  const long S = shifts_;
  attnphys::parallel_for(
      "attnphys::vit_log_cosh", rows, KOKKOS_LAMBDA(const long r) {
        detail::LogCoshSum acc;
        for (long k = 0; k < K; ++k) {
          tr(r, k) += cr(k);
          ti(r, k) += ci(k);
          acc.add(double(tr(r, k)), double(ti(r, k)));
        }
        double a, c;
        acc.finish(a, c);
        lr(r) = T(a);
        li(r) = T(c) + phase(r % S);
      }, 64);
}

template <class T>
void TransformerAnsatz<T>::combine(long B, const View1<T>& re, const View1<T>& im) {
  const long S = shifts_;
  const auto lr = lp_re_, li = lp_im_, wr = w_re_, wi = w_im_;
  attnphys::parallel_for(
      "attnphys::vit_combine", B, KOKKOS_LAMBDA(const long b) {
        // log Σ_s exp(lp_s) − log S, and the weights w_s = exp(lp_s − log ψ_sum) = ∂ log ψ / ∂ lp_s.
        double m = double(lr(b * S));
        for (long s = 1; s < S; ++s) m = math::fmax(m, double(lr(b * S + s)));
        double sr = 0, si = 0;
        for (long s = 0; s < S; ++s) {
          const double e = math::exp(double(lr(b * S + s)) - m);
          sr += e * math::cos(double(li(b * S + s)));
          si += e * math::sin(double(li(b * S + s)));
        }
        double out_re, out_im;
        if (S == 1) {
          out_re = double(lr(b));
          out_im = double(li(b));
        } else {
          out_re = m + 0.5 * math::log(sr * sr + si * si) - math::log(double(S));
          out_im = detail::atan2(si, sr);
        }
        const double ls = S == 1 ? 0.0 : math::log(double(S));
        for (long s = 0; s < S; ++s) {
          const double mag = math::exp(double(lr(b * S + s)) - out_re - ls), ph = double(li(b * S + s)) - out_im;
          wr(b * S + s) = T(mag * math::cos(ph));
          wi(b * S + s) = T(mag * math::sin(ph));
        }
        re(b) = T(out_re);
        im(b) = T(out_im);
      }, 256);
}

namespace {
// (−1)^{N_up on even sites} as a phase π·N_up(even) added to Im log ψ.
template <class T>
void add_marshall_phase(const View2<const T>& sigma, const View1<T>& im) {
  const long n = sigma.extent(1);
  attnphys::parallel_for(
      "attnphys::vit_marshall", sigma.extent(0), KOKKOS_LAMBDA(const long b) {
        long ups = 0;
        for (long i = 0; i < n; i += 2) ups += sigma(b, i) > T(0) ? 1 : 0;
        im(b) += T(3.14159265358979323846 * double(ups % 2));
      }, 256);
}
}  // namespace

template <class T>
void TransformerAnsatz<T>::log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) {
  ScopedRegion region("attnphys::vit_log_psi");
  const long B = sigma.extent(0);
  require(re.extent(0) == std::size_t(B) && im.extent(0) == std::size_t(B), "transformer log_psi: outputs need ", B,
          " entries");
  if (B == 0) return;
  require(sigma.extent(1) == std::size_t(n_), "transformer ansatz: sigma has ", sigma.extent(1), " sites, expected ",
          n_);
  // Configurations in chunks of about chunk_tokens tokens, so that every activation of the encoder stays in cache
  // between its kernels (the whole batch's activations are MBs each). Chunks all have the same size, so the
  // buffers are allocated once: the last one ends at B and overlaps the one before (those rows are recomputed to
  // the same values).
  const long per_config = shifts_ * np_;
  const long chunk = opt_.chunk_tokens > 0 ? std::max(1L, opt_.chunk_tokens / per_config) : B;
  if (chunk < B) {
    for (long b0 = 0; b0 < B; b0 += chunk) {
      const long lo = std::min(b0, B - chunk);
      log_psi(View2<const T>(sigma.data() + lo * n_, chunk, n_), View1<T>(re.data() + lo, chunk),
              View1<T>(im.data() + lo, chunk));
    }
    return;
  }
  make_tokens(sigma);
  const long rows = B * shifts_;
  enc_.forward(y_, cache_, tokens_, rows, np_, params_);
  readout(rows);
  combine(B, re, im);
  if (opt_.marshall_sign) add_marshall_phase<T>(sigma, im);
}

template <class T>
void TransformerAnsatz<T>::readout_gradients(long lo, long count, const View2<T>& o_re, const View2<T>& o_im) {
  const long B = count, S = shifts_, d = d_, K = k_, rows = count * S;
  // Readout: ∂ lp/∂c_k = t_k, ∂ lp/∂W_kj = t_k z_j (imaginary parts: times i); g_j = ∂ lp/∂z_j = Σ_k t_k W_kj.
  if (g_re_.extent(0) != std::size_t(rows)) {
    g_re_ = View2<T>("attnphys::vit_g_re", rows, d);
    g_im_ = View2<T>("attnphys::vit_g_im", rows, d);
  }
  const auto tr = theta_re_, ti = theta_im_, z = z_, gr = g_re_, gi = g_im_;  // View2
  const auto wr = w_re_, wi = w_im_;  // View1 (one `auto` must deduce one type; nvcc enforces it)
  const auto Wr = out_.W_re, Wi = out_.W_im;
  const long o_wr = out_.o_W_re, o_wi = out_.o_W_im, o_cr = out_.o_c_re, o_ci = out_.o_c_im;
  Kokkos::parallel_for(
      "attnphys::vit_tanh", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows, K}),
      KOKKOS_LAMBDA(const long r, const long k) {
        double a, c;
        detail::tanh_c(double(tr(r, k)), double(ti(r, k)), a, c);
        tr(r, k) = T(a);  // theta now holds t = tanh(theta)
        ti(r, k) = T(c);
      });
  Kokkos::parallel_for(
      "attnphys::vit_readout_grad", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, K}),
      KOKKOS_LAMBDA(const long b, const long k) {
        // Σ_s w_s t_{s,k} (complex), and Σ_s w_s t_{s,k} z_{s,j}.
        double ar = 0, ai = 0;
        for (long s = 0; s < S; ++s) {
          const long r = b * S + s;
          ar += double(wr(r)) * double(tr(r, k)) - double(wi(r)) * double(ti(r, k));
          ai += double(wr(r)) * double(ti(r, k)) + double(wi(r)) * double(tr(r, k));
        }
        const long ob = lo + b;
        o_re(ob, o_cr + k) = T(ar);
        o_im(ob, o_cr + k) = T(ai);
        o_re(ob, o_ci + k) = T(-ai);
        o_im(ob, o_ci + k) = T(ar);
        for (long j = 0; j < d; ++j) {
          double br = 0, bi = 0;
          for (long s = 0; s < S; ++s) {
            const long r = b * S + s;
            const double zr = double(z(r, j));
            br += (double(wr(r)) * double(tr(r, k)) - double(wi(r)) * double(ti(r, k))) * zr;
            bi += (double(wr(r)) * double(ti(r, k)) + double(wi(r)) * double(tr(r, k))) * zr;
          }
          o_re(ob, o_wr + k * d + j) = T(br);
          o_im(ob, o_wr + k * d + j) = T(bi);
          o_re(ob, o_wi + k * d + j) = T(-bi);
          o_im(ob, o_wi + k * d + j) = T(br);
        }
      });
  Kokkos::parallel_for(
      "attnphys::vit_dz", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows, d}),
      KOKKOS_LAMBDA(const long r, const long j) {
        double a = 0, c = 0;
        for (long k = 0; k < K; ++k) {
          a += double(tr(r, k)) * double(Wr(k, j)) - double(ti(r, k)) * double(Wi(k, j));
          c += double(tr(r, k)) * double(Wi(k, j)) + double(ti(r, k)) * double(Wr(k, j));
        }
        gr(r, j) = T(a);
        gi(r, j) = T(c);
      });
}

namespace {
template <class T>
void grow2(View2<T>& v, long a, long b, const char* name) {
  if (long(v.extent(0)) != a || long(v.extent(1)) != b)
    v = View2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), a, b);
}

// Pre-LN layer norm backward of one token, y = x̂ γ + β with x̂ = (x − μ) rstd: dx += rstd (dŷ − mean dŷ − x̂ mean(dŷ x̂))
// with dŷ = dy γ; the sample's γ and β gradients (og, ob: its row of O at the blocks' offsets) +=.
template <class T>
KOKKOS_INLINE_FUNCTION void ln_backward_token(T* dx, T* og, T* ob, const T* dy, const T* x, T mu, T rs, const T* gam,
                                              long d) {
  T m1 = 0, m2 = 0;
  for (long i = 0; i < d; ++i) {
    const T xh = (x[i] - mu) * rs, dyh = dy[i] * gam[i];
    m1 += dyh;
    m2 += dyh * xh;
    og[i] += dy[i] * xh;
    ob[i] += dy[i];
  }
  m1 /= T(d);
  m2 /= T(d);
  for (long i = 0; i < d; ++i) {
    const T xh = (x[i] - mu) * rs;
    dx[i] += rs * (dy[i] * gam[i] - m1 - xh * m2);
  }
}

// Linear layer y = x wᵀ + b, w [out, in], backward for one token: the sample's gradients ow[o, i] += dy_o x_i and
// ob[o] += dy_o; dx[i] = Σ_o dy_o w[o, i] (dx may be null).
template <class T>
KOKKOS_INLINE_FUNCTION void linear_backward_token(T* dx, T* ow, T* ob, const T* dy, const T* x, const T* w, long out,
                                                  long in) {
  if (dx)
    for (long i = 0; i < in; ++i) dx[i] = T(0);
  for (long o = 0; o < out; ++o) {
    const T g = dy[o];
    ob[o] += g;
    T* orow = ow + o * in;
#pragma GCC ivdep
    for (long i = 0; i < in; ++i) orow[i] += g * x[i];
    if (dx) {
      const T* wrow = w + o * in;
#pragma GCC ivdep
      for (long i = 0; i < in; ++i) dx[i] += g * wrow[i];
    }
  }
}

// Everything one factored block's batched backward reads: parameters, their offsets in a row of O, activations.
template <class T>
struct FactoredBlockBackward {
  const T *g1, *Wv, *Wo, *alpha, *g2, *W1, *W2;
  long o_g1, o_b1, o_Wv, o_bv, o_Wo, o_bo, o_alpha, o_g2, o_b2, o_W1, o_bl1, o_W2, o_bl2;
  const T *x, *h1, *mean1, *rstd1, *v, *merged, *x1, *mean2, *rstd2, *h2, *g, *gp;
  long table;
};
}  // namespace

template <class T>
void TransformerAnsatz<T>::gradients_chunk(const View2<const T>& sigma, long lo, long count, const View2<T>& o_re,
                                           const View2<T>& o_im) {
  const long S = shifts_, np = np_, d = d_, n = n_, rows = count * S, tokens = rows * np;
  const auto sub = View2<const T>(sigma.data() + lo * n, count, n);
  make_tokens(sub);
  enc_.forward(y_, grad_cache_, tokens_, rows, np, params_);
  readout(rows);
  View1<T> re(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::vit_re")), count),
      im(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::vit_im")), count);
  combine(count, re, im);
  readout_gradients(lo, count, o_re, o_im);

  const auto& eo = enc_.options();
  const long L = eo.n_layers, dff = eo.ff_width(), H = eo.n_heads, dh = d / H, bp = opt_.patch_size;
  const long off = enc_.param_offset(), cnt = enc_.num_parameters();
  grow2(bw_res_, 2 * tokens, d, "attnphys::vit_bw_res");
  grow2(bw_dh_, 2 * tokens, d, "attnphys::vit_bw_dh");
  grow2(bw_dv_, 2 * tokens, d, "attnphys::vit_bw_dv");
  grow2(bw_dg_, 2 * tokens, dff, "attnphys::vit_bw_dg");
  grow2(bw_gp_, tokens, dff, "attnphys::vit_bw_gp");
  if (long(bw_ones_.extent(0)) != tokens || long(bw_ones_.extent(1)) != dff) {
    bw_ones_ = View2<T>("attnphys::vit_bw_ones", tokens, dff);
    Kokkos::deep_copy(bw_ones_, T(1));
  }
  T* const Rb = bw_res_.data();
  T* const DHb = bw_dh_.data();
  T* const DVb = bw_dv_.data();
  T* const DGb = bw_dg_.data();
  T* const ore = o_re.data();
  T* const oim = o_im.data();
  const long ld_o = long(o_re.stride(0)), ld_i = long(o_im.stride(0));
  const auto gr = g_re_, gi = g_im_;
  const auto wr = w_re_, wi = w_im_;
  const long per = S * np;

  // Final norm: the cotangent of every token of row r is c_r = w_r g_r (complex; part 0 its real, part 1 its
  // imaginary part), through the final LayerNorm into the residual stream R. The sample's encoder entries start at 0.
  {
    const bool fnorm = eo.final_norm;
    const T* a = grad_cache_.acts[L].data();
    const T* mu = fnorm ? grad_cache_.norm_mean.data() : nullptr;
    const T* rs = fnorm ? grad_cache_.norm_rstd.data() : nullptr;
    const T* gam = fnorm ? param_ptr(enc_off_.norm_w) : nullptr;
    const long o_g = fnorm ? enc_off_.norm_w : 0;
    const long o_b = fnorm ? enc_off_.norm_b : 0;
    attnphys::parallel_for(
        "attnphys::vit_bw_final", count, KOKKOS_LAMBDA(const long b) {
          for (int part = 0; part < 2; ++part) {
            T* orow = part == 0 ? ore + (lo + b) * ld_o : oim + (lo + b) * ld_i;
            for (long q = 0; q < cnt; ++q) orow[off + q] = T(0);
            for (long s = 0; s < S; ++s) {
              const long r = b * S + s;
              T c[64];  // d_model <= 64 (checked below)
              for (long j = 0; j < d; ++j)
                c[j] = part == 0 ? wr(r) * gr(r, j) - wi(r) * gi(r, j) : wr(r) * gi(r, j) + wi(r) * gr(r, j);
              for (long p = 0; p < np; ++p) {
                const long t = r * np + p;
                T* R = Rb + (part * tokens + t) * d;
                if (fnorm) {
                  for (long j = 0; j < d; ++j) R[j] = T(0);
                  ln_backward_token<T>(R, orow + o_g, orow + o_b, c, a + t * d, mu[t], rs[t], gam, d);
                } else {
                  for (long j = 0; j < d; ++j) R[j] = c[j];
                }
              }
            }
          }
        });
  }

  // Blocks, last to first: R holds dL/d(block output) on entry and dL/d(block input) on exit.
  for (long l = L - 1; l >= 0; --l) {
    const auto& bc = grad_cache_.blocks.at(l);
    ops::gelu_backward<T>(bw_gp_, bw_ones_, bc.f);  // gelu'(f) on every token (vectorised erf)
    FactoredBlockBackward<T> k;
    const LayerOffsets& blk = enc_off_.layers.at(l);
    k.g1 = param_ptr(blk.norm1_w);
    k.Wv = param_ptr(blk.v_w);
    k.Wo = param_ptr(blk.out_w);
    k.alpha = param_ptr(blk.alpha);
    k.g2 = param_ptr(blk.norm2_w);
    k.W1 = param_ptr(blk.l1_w);
    k.W2 = param_ptr(blk.l2_w);
    k.o_g1 = blk.norm1_w;
    k.o_b1 = blk.norm1_b;
    k.o_Wv = blk.v_w;
    k.o_bv = blk.v_b;
    k.o_Wo = blk.out_w;
    k.o_bo = blk.out_b;
    k.o_alpha = blk.alpha;
    k.o_g2 = blk.norm2_w;
    k.o_b2 = blk.norm2_b;
    k.o_W1 = blk.l1_w;
    k.o_bl1 = blk.l1_b;
    k.o_W2 = blk.l2_w;
    k.o_bl2 = blk.l2_b;
    k.x = grad_cache_.acts[l].data();
    k.h1 = bc.h1.data();
    k.mean1 = bc.mean1.data();
    k.rstd1 = bc.rstd1.data();
    k.v = bc.attn.proj.data();
    k.merged = bc.attn.merged.data();
    k.x1 = bc.x1.data();
    k.mean2 = bc.mean2.data();
    k.rstd2 = bc.rstd2.data();
    k.h2 = bc.h2.data();
    k.g = bc.g.data();
    k.gp = bw_gp_.data();
    k.table = blk.alpha_table;
    require(long(bc.attn.proj.extent(0)) == tokens && long(bc.attn.proj.extent(1)) == d &&
                long(bc.attn.merged.extent(0)) == tokens,
            "transformer gradients: the factored attention cache has an unexpected layout");
    const bool periodic = periodic_;
    const long max_len = eo.max_len;
    attnphys::parallel_for(
        "attnphys::vit_bw_block", count, KOKKOS_LAMBDA(const long b) {
          for (int part = 0; part < 2; ++part) {
            T* orow = part == 0 ? ore + (lo + b) * ld_o : oim + (lo + b) * ld_i;
            const long t0 = b * per;
            T* R = Rb + (part * tokens + t0) * d;
            T* DH = DHb + (part * tokens + t0) * d;
            T* DV = DVb + (part * tokens + t0) * d;
            T* DG = DGb + (part * tokens + t0) * dff;
            // Feed-forward: y = x1 + W2 gelu(W1 h2 + b1) + b2, h2 = norm2(x1).
            for (long t = 0; t < per; ++t) {
              const long gt = t0 + t;
              T* dg = DG + t * dff;
              linear_backward_token<T>(dg, orow + k.o_W2, orow + k.o_bl2, R + t * d, k.g + gt * dff, k.W2, d, dff);
              const T* gp = k.gp + gt * dff;
#pragma GCC ivdep
              for (long i = 0; i < dff; ++i) dg[i] *= gp[i];
              linear_backward_token<T>(DH + t * d, orow + k.o_W1, orow + k.o_bl1, dg, k.h2 + gt * d, k.W1, dff, d);
              ln_backward_token<T>(R + t * d, orow + k.o_g2, orow + k.o_b2, DH + t * d, k.x1 + gt * d, k.mean2[gt],
                                   k.rstd2[gt], k.g2, d);
            }
            // Attention: x1 = x + Wo merged + bo, merged_h(t) = Σ_j α_h(t − j) v_h(j), v = Wv h1 + bv, h1 = norm1(x).
            for (long t = 0; t < per; ++t)
              linear_backward_token<T>(DH + t * d, orow + k.o_Wo, orow + k.o_bo, R + t * d, k.merged + (t0 + t) * d,
                                       k.Wo, d, d);
            for (long s = 0; s < S; ++s) {
              const long rt = s * np;  // the row's first token within the sample
              for (long j = 0; j < np; ++j) {
                T* dv = DV + (rt + j) * d;
                for (long i = 0; i < d; ++i) dv[i] = T(0);
                const T* vj = k.v + (t0 + rt + j) * d;
                for (long t = 0; t < np; ++t) {
                  const T* dm = DH + (rt + t) * d;
                  const long ri = ops::relative_index(t, j, np, max_len, periodic);
                  for (long h = 0; h < H; ++h) {
                    const T a = k.alpha[h * k.table + ri];
                    T dot = 0;
                    for (long e = h * dh; e < (h + 1) * dh; ++e) {
                      dv[e] += a * dm[e];
                      dot += dm[e] * vj[e];
                    }
                    orow[k.o_alpha + h * k.table + ri] += dot;
                  }
                }
              }
            }
            for (long t = 0; t < per; ++t) {
              const long gt = t0 + t;
              linear_backward_token<T>(DH + t * d, orow + k.o_Wv, orow + k.o_bv, DV + t * d, k.h1 + gt * d, k.Wv, d,
                                       d);
              ln_backward_token<T>(R + t * d, orow + k.o_g1, orow + k.o_b1, DH + t * d, k.x + gt * d, k.mean1[gt],
                                   k.rstd1[gt], k.g1, d);
            }
          }
        });
  }

  // Input: x0 = We token + be (+ pos_embed at the token's patch).
  {
    const bool pos = learned_positions(periodic_, opt_);
    const long o_We = enc_off_.embed_w, o_be = enc_off_.embed_b;
    const long o_pe = pos ? enc_off_.pos : 0;
    const T* tok = tokens_.data();
    attnphys::parallel_for(
        "attnphys::vit_bw_embed", count, KOKKOS_LAMBDA(const long b) {
          for (int part = 0; part < 2; ++part) {
            T* orow = part == 0 ? ore + (lo + b) * ld_o : oim + (lo + b) * ld_i;
            const long t0 = b * per;
            const T* R = Rb + (part * tokens + t0) * d;
            for (long t = 0; t < per; ++t) {
              linear_backward_token<T>(static_cast<T*>(nullptr), orow + o_We, orow + o_be, R + t * d,
                                       tok + (t0 + t) * bp, static_cast<const T*>(nullptr), d, bp);
              if (pos) {
                T* pe = orow + o_pe + (t % np) * d;
                for (long i = 0; i < d; ++i) pe[i] += R[t * d + i];
              }
            }
          }
        });
  }
}

template <class T>
void TransformerAnsatz<T>::log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) {
  ScopedRegion region("attnphys::vit_gradients");
  const long B = sigma.extent(0), P = params_.size(), S = shifts_, np = np_, d = d_;
  require(o_re.extent(0) == std::size_t(B) && o_re.extent(1) == std::size_t(P) && o_im.extent(0) == std::size_t(B) &&
              o_im.extent(1) == std::size_t(P),
          "transformer gradients: outputs must be [", B, ", ", P, "]");
  if (B == 0) return;
  require(sigma.extent(1) == std::size_t(n_), "transformer ansatz: sigma has ", sigma.extent(1), " sites, expected ",
          n_);
  if (batched_gradients()) {
    require(d <= 64, "transformer gradients: the batched backward supports d_model <= 64, got ", d);
    // Chunks of about 4 chunk_tokens tokens (the activations of a chunk stay in cache between the forward and the
    // backward kernels), all of one size; the last overlaps the one before (its rows are written again, equal).
    const long per_config = S * np;
    const long chunk =
        opt_.chunk_tokens > 0 ? std::min(B, std::max(1L, 4 * opt_.chunk_tokens / per_config)) : B;
    for (long b0 = 0; b0 < B; b0 += chunk) gradients_chunk(sigma, std::min(b0, B - chunk), chunk, o_re, o_im);
    return;
  }
  make_tokens(sigma);
  const long rows = B * S;
  View1<T> re("attnphys::vit_re", B), im("attnphys::vit_im", B);
  enc_.forward(y_, cache_, tokens_, rows, np_, params_);
  readout(rows);
  combine(B, re, im);
  Kokkos::deep_copy(o_re, T(0));
  Kokkos::deep_copy(o_im, T(0));
  readout_gradients(0, B, o_re, o_im);
  const auto gr = g_re_, gi = g_im_;

  // Encoder (dense attention): per row, one forward and two backward passes (cotangents Re g and Im g on every
  // token), each accumulated into O with the shift weight: O += w · (J_re + i J_im).
  const long off = enc_.param_offset(), cnt = enc_.num_parameters();
  auto grads = Kokkos::subview(params_.grads(), std::make_pair(off, off + cnt));
  View1<T> saved("attnphys::vit_saved_grads", cnt);
  Kokkos::deep_copy(saved, grads);
  if (dy_.extent(0) != std::size_t(np)) {
    dy_ = View2<T>("attnphys::vit_dy", np, d);
    sub_re_ = View2<T>("attnphys::vit_y1", np, d);
  }
  const auto hw_re = to_host(w_re_), hw_im = to_host(w_im_);
  const auto dy = dy_;
  const long b_patch = opt_.patch_size;
  for (long r = 0; r < rows; ++r) {
    const long b = r / S;
    enc_.forward(sub_re_, one_cache_, ConstMat<T>(tokens_.data() + r * np * b_patch, np, b_patch), 1, np, params_);
    for (int part = 0; part < 2; ++part) {
      const auto g = part == 0 ? gr : gi;
      Kokkos::parallel_for(
          "attnphys::vit_cotangent", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {np, d}),
          KOKKOS_LAMBDA(const long p, const long j) { dy(p, j) = g(r, j); });
      Kokkos::deep_copy(grads, T(0));
      enc_.backward(Mat<T>(), one_cache_, dy_, params_);
      // part 0: O += w J_re = (wr + i wi) J_re;  part 1: O += w · i J_im = (−wi + i wr) J_im.
      const T cr = part == 0 ? T(hw_re(r)) : T(-hw_im(r));
      const T ci = part == 0 ? T(hw_im(r)) : T(hw_re(r));
      attnphys::parallel_for(
          "attnphys::vit_accumulate", cnt, KOKKOS_LAMBDA(const long q) {
            o_re(b, off + q) += cr * grads(q);
            o_im(b, off + q) += ci * grads(q);
          }, 4096);
    }
  }
  Kokkos::deep_copy(grads, saved);
}

namespace {
template <class T>
void ensure2(View2<T>& v, long a, long b, const char* name) {
  if (long(v.extent(0)) != a || long(v.extent(1)) != b) v = View2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), a, b);
}
template <class T>
void ensure1(View1<T>& v, long a, const char* name) {
  if (long(v.extent(0)) != a) v = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), a);
}
}  // namespace

template <class T>
bool TransformerAnsatz<T>::incremental_enabled() const {
  return inc_ok_;
}

template <class T>
bool TransformerAnsatz<T>::set_low_precision(bool low) {
  low_next_ = low && inc_ok_ && std::is_same_v<T, double>;
  return low_next_;
}

namespace {
template <class A, class B>
void convert_rows(const A& dst, const B& src) {  // dst = src elementwise (float <-> double), [R, N]
  const long n = src.extent(1);
  attnphys::parallel_for(
      "attnphys::vit_convert", src.extent(0), KOKKOS_LAMBDA(const long r) {
        for (long i = 0; i < n; ++i) dst(r, i) = typename A::value_type(src(r, i));
      }, 4096);
}
// d1 = s1 and d2 = s2 elementwise (float -> double), [B]. A helper, so that no KOKKOS_LAMBDA is defined inside an
// `if constexpr` block of the caller (nvcc refuses that for some host compilers / dialects).
template <class A, class B>
void convert_pair(const A& d1, const B& s1, const A& d2, const B& s2) {
  attnphys::parallel_for(
      "attnphys::vit_f32_out", s1.extent(0), KOKKOS_LAMBDA(const long b) {
        d1(b) = typename A::value_type(s1(b));
        d2(b) = typename A::value_type(s2(b));
      }, 256);
}
}  // namespace

template <class T>
void TransformerAnsatz<T>::set_reference(const View2<const T>& ref) {
  ScopedRegion region("attnphys::vit_set_reference");
  require(inc_ok_, "transformer ansatz: incremental evaluation needs one factored-attention block and "
          "transformer.incremental = true");
  const long R = ref.extent(0), per = shifts_ * np_;
  require(ref.extent(1) == std::size_t(n_), "transformer set_reference: configurations have ", ref.extent(1),
          " sites, expected ", n_);
  low_ref_ = low_next_;
  if constexpr (std::is_same_v<T, double>) {
    if (low_ref_) {
      if (!f32_) f32_ = std::make_shared<TransformerAnsatz<float>>(n_, periodic_, opt_);
      const auto p = params_.get_host();
      f32_->parameters().set_host(std::vector<float>(p.begin(), p.end()));
      if (long(f32_sigma_.extent(0)) != R || long(f32_sigma_.extent(1)) != n_)
        f32_sigma_ = Kokkos::View<float**, Kokkos::LayoutRight, MemSpace>("attnphys::vit_f32_sigma", R, n_);
      convert_rows(f32_sigma_, ref);
      f32_->set_reference(f32_sigma_);
      return;
    }
  }
  ensure2(ref_sigma_, R, n_, "attnphys::vit_ref_sigma");
  ensure2(ref_x1_, R * per, d_, "attnphys::vit_ref_x1");
  {
    // Transposed weights of the incremental kernels (contiguous output rows): Wvᵀ, Woᵀ, W1ᵀ, W2ᵀ.
    const long d = d_, dff = enc_.options().ff_width();
    ensure1(inc_wt_, 2 * d * d + 2 * d * dff, "attnphys::vit_inc_wt");
    const std::string L = "encoder.layers.0.";
    const auto Wv = params_.view2(L + "self_attn.v_proj.weight"), Wo = params_.view2(L + "self_attn.out_proj.weight");
    const auto W1 = params_.view2(L + "linear1.weight"), W2 = params_.view2(L + "linear2.weight");
    const auto wt = inc_wt_;
    Kokkos::parallel_for(
        "attnphys::vit_inc_transpose", Kokkos::RangePolicy<ExecSpace>(0, d), KOKKOS_LAMBDA(const long i) {
          for (long k = 0; k < d; ++k) {
            wt(k * d + i) = Wv(i, k);          // WvT[k][i]
            wt(d * d + k * d + i) = Wo(i, k);  // WoT[k][i]
          }
          for (long o = 0; o < dff; ++o) {
            wt(2 * d * d + i * dff + o) = W1(o, i);            // W1T[i][o]
            wt(2 * d * d + d * dff + o * d + i) = W2(i, o);    // W2T[o][i]
          }
        });
  }
  if (R == 0) return;
  Kokkos::deep_copy(ref_sigma_, ref);
  const long chunk = opt_.chunk_tokens > 0 ? std::min(R, std::max(1L, opt_.chunk_tokens / per)) : R;
  for (long b0 = 0; b0 < R; b0 += chunk) {
    const long lo = std::min(b0, R - chunk);
    make_tokens(View2<const T>(ref.data() + lo * n_, chunk, n_));
    enc_.forward(y_, cache_, tokens_, chunk * shifts_, np_, params_);
    Kokkos::deep_copy(Kokkos::subview(ref_x1_, std::make_pair(lo * per, (lo + chunk) * per), Kokkos::ALL()),
                      cache_.blocks.at(0).x1);
  }
}

namespace detail {
// Everything the fused incremental kernels read (plain values and pointers into parameter and reference views).
template <class T>
struct IncrementalRows {
  long S, np, d, n, bp, H, dh, dff, max_len, table, per;
  bool periodic, pos;
  T eps;
  const T *We, *be, *Pe, *g1, *b1, *WvT, *WoT, *alpha, *g2, *b2, *W1T, *bl1, *W2T, *bl2, *gf, *bf;
  const T *ref_sigma, *ref_x1;
  const int* gsite;  // [S, n]: the site read into each input position by group element s
  const T* gsign;    // [S]: its spin flip

  // y = (x − mean) / sqrt(var + eps) γ + β over the D (compile time; 0: d at run time) entries, with eight
  // interleaved partial sums as the library's layer norm.
  template <int D>
  KOKKOS_INLINE_FUNCTION void norm(T* y, const T* x, const T* gam, const T* bet) const {
    const long dd = D > 0 ? D : d;
    T s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long k = 0;
    for (; k + 8 <= dd; k += 8)
      for (int l = 0; l < 8; ++l) s[l] += x[k + l];
    for (int l = 0; l < 8 && k < dd; ++k, ++l) s[l] += x[k];
    const T mean = (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) / T(dd);
    T v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    k = 0;
    for (; k + 8 <= dd; k += 8)
      for (int l = 0; l < 8; ++l) v[l] += (x[k + l] - mean) * (x[k + l] - mean);
    for (int l = 0; l < 8 && k < dd; ++k, ++l) v[l] += (x[k] - mean) * (x[k] - mean);
    const T var = (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))) / T(dd);
    const T rstd = T(1) / math::sqrt(var + eps);
#pragma GCC ivdep
    for (long i = 0; i < dd; ++i) y[i] = (x[i] - mean) * rstd * gam[i] + bet[i];
  }

  // x1 [np, d] of row (config sig [n], shift s) from the reference row (pref, s): the reference's x1 plus, for every
  // changed token j, δx0_j at token j and Σ_h α_h(t − j) W_o,h W_v,h δh1_j at every token t. w: scratch [(6 + H) d]
  // (used when D = 0; compile-time widths keep the vectors on the stack).
  template <int D>
  KOKKOS_INLINE_FUNCTION void x1_row(T* x1, T* w, const T* sig, long pref, long s) const {
    const long dd = D > 0 ? D : d;
    const T* rx = ref_x1 + (pref * S + s) * np * dd;
    for (long q = 0; q < np * dd; ++q) x1[q] = rx[q];
    const T* rs = ref_sigma + pref * n;
    T local[D > 0 ? 5 * D + 8 * D : 1];
    T* buf = D > 0 ? local : w;
    T* x0n = buf;
    T* x0o = buf + dd;
    T* hn = buf + 2 * dd;
    T* ho = buf + 3 * dd;
    T* dv = buf + 4 * dd;
    T* u = buf + 5 * dd;  // [H, d] (H <= 8 with compile-time widths)
    const int* site = gsite + s * n;
    const T sgn = gsign[s];
    for (long j = 0; j < np; ++j) {
      bool changed = false;
      for (long k = 0; k < bp; ++k) changed = changed || sig[site[j * bp + k]] != rs[site[j * bp + k]];
      if (!changed) continue;
      for (long i = 0; i < dd; ++i) {
        x0n[i] = be[i];
        x0o[i] = be[i];
      }
      for (long k = 0; k < bp; ++k) {
        const T sn = sgn * sig[site[j * bp + k]], so = sgn * rs[site[j * bp + k]];
        for (long i = 0; i < dd; ++i) {
          x0n[i] += We[i * bp + k] * sn;
          x0o[i] += We[i * bp + k] * so;
        }
      }
      if (pos)
        for (long i = 0; i < dd; ++i) {
          x0n[i] += Pe[j * dd + i];
          x0o[i] += Pe[j * dd + i];
        }
      norm<D>(hn, x0n, g1, b1);
      norm<D>(ho, x0o, g1, b1);
      for (long i = 0; i < dd; ++i) dv[i] = T(0);
      for (long k = 0; k < dd; ++k) {
        const T dh1 = hn[k] - ho[k];
        const T* wv = WvT + k * dd;
#pragma GCC ivdep
        for (long i = 0; i < dd; ++i) dv[i] += wv[i] * dh1;
      }
      for (long h = 0; h < H; ++h) {
        T* uh = u + h * dd;
        for (long i = 0; i < dd; ++i) uh[i] = T(0);
        for (long e = h * dh; e < (h + 1) * dh; ++e) {
          const T* wo = WoT + e * dd;
#pragma GCC ivdep
          for (long i = 0; i < dd; ++i) uh[i] += wo[i] * dv[e];
        }
      }
      for (long i = 0; i < dd; ++i) x1[j * dd + i] += x0n[i] - x0o[i];
#ifdef ATTNPHYS_VIT_SIMD
      if constexpr (D > 0 && D % Simd<T>::width == 0) {
        using V = typename Simd<T>::type;
        constexpr int Wd = Simd<T>::width, ND = D / Wd;
        for (long t = 0; t < np; ++t) {
          T* row = x1 + t * D;
          const long ri = ops::relative_index(t, j, np, max_len, periodic);
          V acc[ND];
          __builtin_memcpy(acc, row, sizeof(acc));
          for (long h = 0; h < H; ++h) {
            const V a = V{} + alpha[h * table + ri];
            for (int q = 0; q < ND; ++q) {
              V uq;
              __builtin_memcpy(&uq, u + h * D + q * Wd, sizeof(V));
              acc[q] += a * uq;
            }
          }
          __builtin_memcpy(row, acc, sizeof(acc));
        }
        continue;
      }
#endif
      for (long t = 0; t < np; ++t) {
        T* row = x1 + t * dd;
        const long ri = ops::relative_index(t, j, np, max_len, periodic);
        for (long h = 0; h < H; ++h) {
          const T a = alpha[h * table + ri];
          const T* uh = u + h * dd;
#pragma GCC ivdep
          for (long i = 0; i < dd; ++i) row[i] += a * uh[i];
        }
      }
    }
  }

  // The rest of the block and the final norm on every token of a row, pooled: z [d] = Σ_t norm(x1_t + FF(x1_t)).
  // w: scratch [3 d + 2 d_ff] (used when D = 0; with compile-time widths D, F the vectors live on the stack and
  // the products run from registers).
  template <int D, int F>
  KOKKOS_INLINE_FUNCTION void ff_pool(T* z, const T* x1, T* w) const {
    const long dd = D > 0 ? D : d, ff = F > 0 ? F : dff;
    T local[D > 0 && F > 0 ? 3 * D + 2 * F : 1];
    T* buf = D > 0 && F > 0 ? local : w;
    T* h2 = buf;
    T* out = buf + dd;
    T* y = buf + 2 * dd;
    T* f = buf + 3 * dd;
    T* g = f + ff;
    T zacc[D > 0 ? D : 1];
    T* za = D > 0 ? zacc : z;
    for (long i = 0; i < dd; ++i) za[i] = T(0);
#ifdef ATTNPHYS_VIT_SIMD
    // Compile-time widths that are multiples of the vector: both products from vector registers (GCC's own
    // vectoriser keeps the 16 outputs of W2 in scalar registers).
    if constexpr (D > 0 && F > 0 && D % Simd<T>::width == 0 && F % Simd<T>::width == 0) {
      using V = typename Simd<T>::type;
      constexpr int Wd = Simd<T>::width, ND = D / Wd, NF = F / Wd;
      auto load = [](const T* p) {
        V v;
        __builtin_memcpy(&v, p, sizeof(V));
        return v;
      };
      auto store = [](T* p, const V& v) { __builtin_memcpy(p, &v, sizeof(V)); };
      V zv[ND];
      for (int q = 0; q < ND; ++q) zv[q] = V{};
      for (long t = 0; t < np; ++t) {
        const T* xt = x1 + t * D;
        norm<D>(h2, xt, g2, b2);
        V fv[NF];
        for (int q = 0; q < NF; ++q) fv[q] = load(bl1 + q * Wd);
        for (int i = 0; i < D; ++i) {
          const V hb = V{} + h2[i];
          for (int q = 0; q < NF; ++q) fv[q] += hb * load(W1T + i * F + q * Wd);
        }
        for (int q = 0; q < NF; ++q) store(f + q * Wd, fv[q]);
#pragma GCC ivdep
        for (long o = 0; o < F; ++o) g[o] = T(0.5) * f[o] * (T(1) + vit_erf(f[o] * T(0.70710678118654752440)));
        V ov[ND];
        for (int q = 0; q < ND; ++q) ov[q] = load(xt + q * Wd) + load(bl2 + q * Wd);
        for (int o = 0; o < F; ++o) {
          const V gb = V{} + g[o];
          for (int q = 0; q < ND; ++q) ov[q] += gb * load(W2T + o * D + q * Wd);
        }
        for (int q = 0; q < ND; ++q) store(out + q * Wd, ov[q]);
        norm<D>(y, out, gf, bf);
        for (int q = 0; q < ND; ++q) zv[q] += load(y + q * Wd);
      }
      for (int q = 0; q < ND; ++q) store(z + q * Wd, zv[q]);
      return;
    }
#endif
    for (long t = 0; t < np; ++t) {
      const T* xt = x1 + t * dd;
      norm<D>(h2, xt, g2, b2);
      for (long o = 0; o < ff; ++o) f[o] = bl1[o];
      for (long i = 0; i < dd; ++i) {
        const T hi = h2[i];
        const T* w1 = W1T + i * ff;
#pragma GCC ivdep
        for (long o = 0; o < ff; ++o) f[o] += hi * w1[o];
      }
#pragma GCC ivdep
      for (long o = 0; o < ff; ++o) g[o] = T(0.5) * f[o] * (T(1) + vit_erf(f[o] * T(0.70710678118654752440)));
      for (long i = 0; i < dd; ++i) out[i] = xt[i] + bl2[i];
      for (long o = 0; o < ff; ++o) {
        const T go = g[o];
        const T* w2 = W2T + o * dd;
#pragma GCC ivdep
        for (long i = 0; i < dd; ++i) out[i] += go * w2[i];
      }
      norm<D>(y, out, gf, bf);
#pragma GCC ivdep
      for (long i = 0; i < dd; ++i) za[i] += y[i];
    }
    if (D > 0)
      for (long i = 0; i < dd; ++i) z[i] = za[i];
  }
};
}  // namespace detail

namespace {
// The fused incremental kernel of incremental_chunk for compile-time widths D, F (0: run time): rows [0, rows) of the
// chunk starting at configuration lo. A function template, not a generic lambda: nvcc rejects a KOKKOS_LAMBDA
// defined inside a generic lambda.
template <int D, int F, class T>
void incremental_rows_kernel(const detail::IncrementalRows<T>& k, const View1<const long>& parent, long rows, long lo,
                             long width, bool keep, T* kx, T* scr, T* z, const T* sg) {
  const long S = k.S, np = k.np, d = k.d, n = k.n, per = k.per;
  attnphys::parallel_for(
      "attnphys::vit_incremental_rows", rows, KOKKOS_LAMBDA(const long r) {
        const long bb = r / S, s = r % S;
        T* x1 = keep ? kx + ((lo + bb) * per + s * np) * d : scr + r * width;
        T* w = scr + r * width + np * d;
        k.template x1_row<D>(x1, w, sg + (lo + bb) * n, parent(lo + bb), s);
        k.template ff_pool<D, F>(z + r * d, x1, w);
      });
}
}  // namespace

template <class T>
void TransformerAnsatz<T>::log_psi_from_reference(const View2<const T>& sigma, const View1<const long>& parent,
                                                  const View1<T>& re, const View1<T>& im) {
  ScopedRegion region("attnphys::vit_log_psi_incremental");
  const long B = sigma.extent(0), per = shifts_ * np_;
  require(inc_ok_, "transformer ansatz: incremental evaluation needs one factored-attention block and "
          "transformer.incremental = true");
  require(sigma.extent(1) == std::size_t(n_) && parent.extent(0) == std::size_t(B) &&
              re.extent(0) == std::size_t(B) && im.extent(0) == std::size_t(B),
          "transformer log_psi_from_reference: sigma [B, ", n_, "], parent, re and im [B] are required");
  if constexpr (std::is_same_v<T, double>) {
    if (low_ref_) {
      if (B == 0) return;
      if (long(f32_sigma_.extent(0)) != B || long(f32_sigma_.extent(1)) != n_)
        f32_sigma_ = Kokkos::View<float**, Kokkos::LayoutRight, MemSpace>("attnphys::vit_f32_sigma", B, n_);
      if (long(f32_re_.extent(0)) != B) {
        f32_re_ = Kokkos::View<float*, MemSpace>("attnphys::vit_f32_re", B);
        f32_im_ = Kokkos::View<float*, MemSpace>("attnphys::vit_f32_im", B);
      }
      convert_rows(f32_sigma_, sigma);
      f32_->log_psi_from_reference(f32_sigma_, parent, f32_re_, f32_im_);
      convert_pair(re, f32_re_, im, f32_im_);
      return;
    }
  }
  require(ref_sigma_.extent(0) > 0 || B == 0, "transformer log_psi_from_reference: call set_reference first");
  ensure2(inc_sigma_, B, n_, "attnphys::vit_inc_sigma");
  ensure1(inc_parent_, B, "attnphys::vit_inc_parent");
  if (B == 0) return;
  Kokkos::deep_copy(inc_sigma_, sigma);
  Kokkos::deep_copy(inc_parent_, parent);
  // x1 of every configuration is kept for update_reference when the batch is small (a sampler's proposals); for
  // larger batches (the connected configurations of the local energy, which are never taken) update_reference
  // recomputes it. Chunks bound the per-row scratch.
  inc_keep_x1_ = B <= kKeepX1Configs;
  if (inc_keep_x1_) ensure2(inc_x1_, B * per, d_, "attnphys::vit_inc_x1");
  const long chunk = opt_.chunk_tokens > 0 ? std::min(B, std::max(1L, 8 * opt_.chunk_tokens / per)) : B;
  for (long b0 = 0; b0 < B; b0 += chunk) incremental_chunk(sigma, parent, std::min(b0, B - chunk), chunk, re, im);
}

template <class T>
detail::IncrementalRows<T> TransformerAnsatz<T>::incremental_rows() const {
  detail::IncrementalRows<T> k;
  const auto& eo = enc_.options();
  const LayerOffsets& l0 = enc_off_.layers.at(0);
  k.S = shifts_;
  k.np = np_;
  k.d = d_;
  k.n = n_;
  k.bp = opt_.patch_size;
  k.H = opt_.n_heads;
  k.dh = d_ / opt_.n_heads;
  k.dff = eo.ff_width();
  k.max_len = eo.max_len;
  k.table = l0.alpha_table;
  k.per = shifts_ * np_;
  k.periodic = periodic_;
  k.pos = learned_positions(periodic_, opt_);
  k.eps = T(eo.ln_eps);
  k.We = param_ptr(enc_off_.embed_w);
  k.be = param_ptr(enc_off_.embed_b);
  k.Pe = k.pos ? param_ptr(enc_off_.pos) : nullptr;
  k.g1 = param_ptr(l0.norm1_w);
  k.b1 = param_ptr(l0.norm1_b);
  k.alpha = param_ptr(l0.alpha);
  k.g2 = param_ptr(l0.norm2_w);
  k.b2 = param_ptr(l0.norm2_b);
  k.bl1 = param_ptr(l0.l1_b);
  k.bl2 = param_ptr(l0.l2_b);
  k.gf = param_ptr(enc_off_.norm_w);
  k.bf = param_ptr(enc_off_.norm_b);
  // Transposed weights (set_reference writes them): Wvᵀ, Woᵀ [d, d], W1ᵀ [d, d_ff], W2ᵀ [d_ff, d].
  const T* wt = inc_wt_.data();
  k.WvT = wt;
  k.WoT = wt + d_ * d_;
  k.W1T = wt + 2 * d_ * d_;
  k.W2T = wt + 2 * d_ * d_ + d_ * k.dff;
  k.ref_sigma = ref_sigma_.data();
  k.ref_x1 = ref_x1_.data();
  k.gsite = gsite_.data();
  k.gsign = gsign_.data();
  return k;
}

template <class T>
void TransformerAnsatz<T>::incremental_chunk(const View2<const T>& sigma, const View1<const long>& parent, long lo,
                                             long count, const View1<T>& re, const View1<T>& im) {
  const long S = shifts_, np = np_, d = d_, n = n_, H = opt_.n_heads, rows = count * S;
  const detail::IncrementalRows<T> k = incremental_rows();
  ensure_rows(rows);
  const long width = np * d + (6 + H) * d + 3 * d + 2 * k.dff;
  ensure2(inc_scratch_, rows, width, "attnphys::vit_inc_scratch");
  T* const scr = inc_scratch_.data();
  T* const z = z_.data();
  const T* sg = sigma.data();
  // One kernel for the block, the final norm and the pooling of every row (nothing per token leaves the row); the
  // default widths (d 16, d_ff 32), the doubled ones and the study's sizes s and l (d 12 / 24, d_ff = 2 d) are
  // compiled with constant trip counts.
  const bool keep = inc_keep_x1_;
  T* const kx = keep ? inc_x1_.data() : nullptr;
  if (d == 16 && k.dff == 32 && H <= 8)
    incremental_rows_kernel<16, 32>(k, parent, rows, lo, width, keep, kx, scr, z, sg);
  else if (d == 24 && k.dff == 48 && H <= 8)
    incremental_rows_kernel<24, 48>(k, parent, rows, lo, width, keep, kx, scr, z, sg);
  else if (d == 12 && k.dff == 24 && H <= 8)
    incremental_rows_kernel<12, 24>(k, parent, rows, lo, width, keep, kx, scr, z, sg);
  else if (d == 32 && k.dff == 64 && H <= 8)
    incremental_rows_kernel<32, 64>(k, parent, rows, lo, width, keep, kx, scr, z, sg);
  else
    incremental_rows_kernel<0, 0>(k, parent, rows, lo, width, keep, kx, scr, z, sg);
  readout_pooled(rows);
  const View1<T> sre(re.data() + lo, count), sim(im.data() + lo, count);
  combine(count, sre, sim);
  if (opt_.marshall_sign) add_marshall_phase<T>(View2<const T>(sigma.data() + lo * n, count, n), sim);
}

template <class T>
void TransformerAnsatz<T>::update_reference(const View1<const long>& take) {
  ScopedRegion region("attnphys::vit_update_reference");
  if constexpr (std::is_same_v<T, double>) {
    if (low_ref_) {
      f32_->update_reference(take);
      return;
    }
  }
  const long B = inc_sigma_.extent(0), S = shifts_, np = np_, d = d_, n = n_, H = opt_.n_heads;
  require(take.extent(0) == std::size_t(B), "transformer update_reference: take needs ", B,
          " entries (the rows of the last log_psi_from_reference)");
  if (B == 0) return;
  // x1 of every taken configuration again, from its parent's (the same arithmetic as log_psi_from_reference), then
  // the reference rows. Parents must be distinct among the taken rows (a Metropolis step has one proposal each).
  const long per = S * np;
  if (inc_keep_x1_) {
    const auto rsv = ref_sigma_, rxv = ref_x1_, isv = inc_sigma_, ix = inc_x1_;
    const auto parv = inc_parent_;
    attnphys::parallel_for(
        "attnphys::vit_update_reference", B, KOKKOS_LAMBDA(const long b) {
          if (take(b) == 0) return;
          const long p = parv(b);
          for (long i = 0; i < n; ++i) rsv(p, i) = isv(b, i);
          for (long q = 0; q < per; ++q)
            for (long i = 0; i < d; ++i) rxv(p * per + q, i) = ix(b * per + q, i);
        }, 16);
    return;
  }
  const detail::IncrementalRows<T> k = incremental_rows();
  const long width = np * d + (6 + H) * d;
  ensure2(inc_scratch_, B * S, std::max<long>(width, long(inc_scratch_.extent(1))), "attnphys::vit_inc_scratch");
  const long ld = inc_scratch_.extent(1);
  T* const scr = inc_scratch_.data();
  T* const rs = ref_sigma_.data();
  T* const rx = ref_x1_.data();
  const T* is = inc_sigma_.data();
  const auto par = inc_parent_;
  attnphys::parallel_for(
      "attnphys::vit_update_reference_x1", B * S, KOKKOS_LAMBDA(const long r) {
        const long b = r / S, s = r % S;
        if (take(b) == 0) return;
        T* x1 = scr + r * ld;
        k.template x1_row<0>(x1, x1 + np * d, is + b * n, par(b), s);
      }, 16);
  attnphys::parallel_for(
      "attnphys::vit_update_reference", B, KOKKOS_LAMBDA(const long b) {
        if (take(b) == 0) return;
        const long p = par(b);
        for (long i = 0; i < n; ++i) rs[p * n + i] = is[b * n + i];
        for (long s = 0; s < S; ++s) {
          const T* x1 = scr + (b * S + s) * ld;
          T* dst = rx + (p * S + s) * np * d;
          for (long q = 0; q < np * d; ++q) dst[q] = x1[q];
        }
      }, 16);
}

template class TransformerAnsatz<float>;
template class TransformerAnsatz<double>;

}  // namespace attnphys::vmc
