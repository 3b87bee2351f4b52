#include "attnphys/solvers/vmc/transformer.hpp"

#include <cmath>

#include "attnphys/core/gemm.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/operators/attention_core.hpp"
#include "attnphys/operators/layers.hpp"
#include "attnphys/solvers/vmc/complex_math.hpp"

namespace attnphys::vmc {

void TransformerAnsatzOptions::declare(OptionSet& s, const std::string& p) {
  s.add(p + ".patch_size", &patch_size, "spins per token (must divide the chain length)", Range::at_least(1));
  s.add(p + ".d_model", &d_model, "token width", Range::at_least(1));
  s.add(p + ".n_heads", &n_heads, "attention heads", Range::at_least(1));
  s.add(p + ".n_layers", &n_layers, "transformer blocks", Range::at_least(1));
  s.add(p + ".d_ff", &d_ff, "feed-forward width (0: 2 d_model)", Range::non_negative());
  s.add(p + ".attention", &attention, "factored (alpha_h(i-j)) or dense (softmax with relative bias)",
        {"factored", "dense"});
  s.add(p + ".positional", &positional, "absolute positions: auto (learned for open chains), none, learned",
        {"auto", "none", "learned"});
  s.add(p + ".hidden", &hidden, "complex log-cosh readout units (0: d_model)", Range::non_negative());
  s.add(p + ".symmetrize", &symmetrize, "sum over intra-patch translations (periodic chains)");
  s.add(p + ".marshall_sign", &marshall_sign, "multiply by (-1)^(up spins on even sites)");
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
  require(attention == "factored" || attention == "dense", "transformer ansatz: attention '", attention,
          "' is unknown: use factored or dense");
  require(positional == "auto" || positional == "none" || positional == "learned", "transformer ansatz: positional '",
          positional, "' is unknown: use auto, none or learned");
  require(init_std >= 0 && std::isfinite(init_std), "transformer ansatz: init_std must be >= 0");
}

namespace {
ops::EncoderOptions make_encoder_options(int n, bool periodic, const TransformerAnsatzOptions& o) {
  ops::EncoderOptions e;
  e.d_in = o.patch_size;
  e.d_model = o.d_model;
  e.n_heads = o.n_heads;
  e.n_layers = o.n_layers;
  e.d_ff = o.d_ff > 0 ? o.d_ff : 2 * o.d_model;
  e.attention = o.attention;
  e.periodic = periodic;
  e.relative_bias = o.attention == "dense";
  e.max_len = n / o.patch_size;
  e.positional = o.positional == "auto" ? (periodic ? "none" : "learned") : o.positional;
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
      shifts_(periodic && o.symmetrize ? o.patch_size : 1),
      d_(o.d_model),
      k_(o.hidden > 0 ? o.hidden : o.d_model),
      enc_(make_encoder_options(n, periodic, o), "encoder.") {
  inc_ok_ = o.incremental && o.n_layers == 1 && o.attention == "factored";
  enc_.declare(params_);
  params_.add("out.W_re", {k_, d_});
  params_.add("out.W_im", {k_, d_});
  params_.add("out.c_re", {k_}, false);
  params_.add("out.c_im", {k_}, false);
  params_.allocate();
  enc_.init(params_, o.seed);
  if (o.init_std > 0) {
    const double sd = o.init_std / std::sqrt(double(d_));
    fill_normal(params_.view2("out.W_re"), o.seed, 31, 0.0, sd);
    fill_normal(params_.view2("out.W_im"), o.seed, 32, 0.0, sd);
  }
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
    z_ = View2<T>("attnphys::vit_z", rows, d_);
    theta_re_ = View2<T>("attnphys::vit_theta_re", rows, k_);
    theta_im_ = View2<T>("attnphys::vit_theta_im", rows, k_);
    lp_re_ = View1<T>("attnphys::vit_lp_re", rows);
    lp_im_ = View1<T>("attnphys::vit_lp_im", rows);
    w_re_ = View1<T>("attnphys::vit_w_re", rows);
    w_im_ = View1<T>("attnphys::vit_w_im", rows);
  }
  const auto tok = tokens_;
  Kokkos::parallel_for(
      "attnphys::vit_tokens", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows * np, b}),
      KOKKOS_LAMBDA(const long t, const long k) {
        const long r = t / np, p = t % np, bb = r / S, s = r % S;
        tok(t, k) = sigma(bb, (p * b + k + s) % n);
      });
}

template <class T>
void TransformerAnsatz<T>::readout(long rows) {
  const long np = np_, d = d_, K = k_;
  const auto y = y_, z = z_;
  Kokkos::parallel_for(
      "attnphys::vit_pool", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows, d}),
      KOKKOS_LAMBDA(const long r, const long j) {
        T acc = 0;
        for (long p = 0; p < np; ++p) acc += y(r * np + p, j);
        z(r, j) = acc;
      });
  gemm('N', 'T', T(1), ConstMat<T>(z_.data(), rows, d), params_.view2("out.W_re"), T(0), theta_re_);
  gemm('N', 'T', T(1), ConstMat<T>(z_.data(), rows, d), params_.view2("out.W_im"), T(0), theta_im_);
  const auto cr = params_.view1("out.c_re"), ci = params_.view1("out.c_im");
  const auto tr = theta_re_, ti = theta_im_;
  const auto lr = lp_re_, li = lp_im_;
  Kokkos::parallel_for(
      "attnphys::vit_log_cosh", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(const long r) {
        detail::LogCoshSum acc;
        for (long k = 0; k < K; ++k) {
          tr(r, k) += cr(k);
          ti(r, k) += ci(k);
          acc.add(double(tr(r, k)), double(ti(r, k)));
        }
        double a, c;
        acc.finish(a, c);
        lr(r) = T(a);
        li(r) = T(c);
      });
}

template <class T>
void TransformerAnsatz<T>::combine(long B, const View1<T>& re, const View1<T>& im) {
  const long S = shifts_;
  const auto lr = lp_re_, li = lp_im_, wr = w_re_, wi = w_im_;
  Kokkos::parallel_for(
      "attnphys::vit_combine", Kokkos::RangePolicy<ExecSpace>(0, B), KOKKOS_LAMBDA(const long b) {
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
      });
}

namespace {
// (−1)^{N_up on even sites} as a phase π·N_up(even) added to Im log ψ.
template <class T>
void add_marshall_phase(const View2<const T>& sigma, const View1<T>& im) {
  const long n = sigma.extent(1);
  Kokkos::parallel_for(
      "attnphys::vit_marshall", Kokkos::RangePolicy<ExecSpace>(0, sigma.extent(0)), KOKKOS_LAMBDA(const long b) {
        long ups = 0;
        for (long i = 0; i < n; i += 2) ups += sigma(b, i) > T(0) ? 1 : 0;
        im(b) += T(3.14159265358979323846 * double(ups % 2));
      });
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
  const auto Wr = params_.view2("out.W_re"), Wi = params_.view2("out.W_im");
  const long o_wr = params_.block("out.W_re").offset, o_wi = params_.block("out.W_im").offset;
  const long o_cr = params_.block("out.c_re").offset, o_ci = params_.block("out.c_im").offset;
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
    const T* gam = fnorm ? params_.view1("encoder.norm.weight").data() : nullptr;
    const long o_g = fnorm ? params_.block("encoder.norm.weight").offset : 0;
    const long o_b = fnorm ? params_.block("encoder.norm.bias").offset : 0;
    Kokkos::parallel_for(
        "attnphys::vit_bw_final", Kokkos::RangePolicy<ExecSpace>(0, count), KOKKOS_LAMBDA(const long b) {
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
    const std::string pre = "encoder.layers." + std::to_string(l) + ".";
    const auto& bc = grad_cache_.blocks.at(l);
    ops::gelu_backward<T>(bw_gp_, bw_ones_, bc.f);  // gelu'(f) on every token (vectorised erf)
    FactoredBlockBackward<T> k;
    auto ptr = [&](const char* name) { return params_.view1(pre + name).data(); };
    auto offs = [&](const char* name) { return params_.block(pre + name).offset; };
    k.g1 = ptr("norm1.weight");
    k.Wv = ptr("self_attn.v_proj.weight");
    k.Wo = ptr("self_attn.out_proj.weight");
    k.alpha = ptr("self_attn.alpha");
    k.g2 = ptr("norm2.weight");
    k.W1 = ptr("linear1.weight");
    k.W2 = ptr("linear2.weight");
    k.o_g1 = offs("norm1.weight");
    k.o_b1 = offs("norm1.bias");
    k.o_Wv = offs("self_attn.v_proj.weight");
    k.o_bv = offs("self_attn.v_proj.bias");
    k.o_Wo = offs("self_attn.out_proj.weight");
    k.o_bo = offs("self_attn.out_proj.bias");
    k.o_alpha = offs("self_attn.alpha");
    k.o_g2 = offs("norm2.weight");
    k.o_b2 = offs("norm2.bias");
    k.o_W1 = offs("linear1.weight");
    k.o_bl1 = offs("linear1.bias");
    k.o_W2 = offs("linear2.weight");
    k.o_bl2 = offs("linear2.bias");
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
    k.table = params_.block(pre + "self_attn.alpha").shape.at(1);
    require(long(bc.attn.proj.extent(0)) == tokens && long(bc.attn.proj.extent(1)) == d &&
                long(bc.attn.merged.extent(0)) == tokens,
            "transformer gradients: the factored attention cache has an unexpected layout");
    const bool periodic = periodic_;
    const long max_len = eo.max_len;
    Kokkos::parallel_for(
        "attnphys::vit_bw_block", Kokkos::RangePolicy<ExecSpace>(0, count), KOKKOS_LAMBDA(const long b) {
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
    const bool pos = eo.positional == "learned";
    const long o_We = params_.block("encoder.embed.weight").offset, o_be = params_.block("encoder.embed.bias").offset;
    const long o_pe = pos ? params_.block("encoder.pos_embed").offset : 0;
    const T* tok = tokens_.data();
    Kokkos::parallel_for(
        "attnphys::vit_bw_embed", Kokkos::RangePolicy<ExecSpace>(0, count), KOKKOS_LAMBDA(const long b) {
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
      Kokkos::parallel_for(
          "attnphys::vit_accumulate", Kokkos::RangePolicy<ExecSpace>(0, cnt), KOKKOS_LAMBDA(const long q) {
            o_re(b, off + q) += cr * grads(q);
            o_im(b, off + q) += ci * grads(q);
          });
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
void TransformerAnsatz<T>::set_reference(const View2<const T>& ref) {
  ScopedRegion region("attnphys::vit_set_reference");
  require(inc_ok_, "transformer ansatz: incremental evaluation needs one factored-attention block and "
          "transformer.incremental = true");
  const long R = ref.extent(0), per = shifts_ * np_;
  require(ref.extent(1) == std::size_t(n_), "transformer set_reference: configurations have ", ref.extent(1),
          " sites, expected ", n_);
  ensure2(ref_sigma_, R, n_, "attnphys::vit_ref_sigma");
  ensure2(ref_x1_, R * per, d_, "attnphys::vit_ref_x1");
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
  require(ref_sigma_.extent(0) > 0 || B == 0, "transformer log_psi_from_reference: call set_reference first");
  ensure2(inc_sigma_, B, n_, "attnphys::vit_inc_sigma");
  ensure1(inc_parent_, B, "attnphys::vit_inc_parent");
  ensure2(inc_x1_, B * per, d_, "attnphys::vit_inc_x1");
  if (B == 0) return;
  Kokkos::deep_copy(inc_sigma_, sigma);
  Kokkos::deep_copy(inc_parent_, parent);
  const long chunk = opt_.chunk_tokens > 0 ? std::min(B, std::max(1L, opt_.chunk_tokens / per)) : B;
  for (long b0 = 0; b0 < B; b0 += chunk) incremental_chunk(sigma, parent, std::min(b0, B - chunk), chunk, re, im);
}

template <class T>
void TransformerAnsatz<T>::incremental_chunk(const View2<const T>& sigma, const View1<const long>& parent, long lo,
                                             long count, const View1<T>& re, const View1<T>& im) {
  const long S = shifts_, np = np_, d = d_, n = n_, bp = opt_.patch_size, H = opt_.n_heads, dh = d / H;
  const long rows = count * S, tokens = rows * np, dff = enc_.options().ff_width();
  const auto sub = View2<const T>(sigma.data() + lo * n, count, n);
  make_tokens(sub);
  const std::string L = "encoder.layers.0.";
  const auto We = params_.view2("encoder.embed.weight");
  const auto be = params_.view1("encoder.embed.bias");
  const bool pos = enc_.options().positional == "learned";
  const auto Pe = pos ? params_.view2("encoder.pos_embed") : params_.view2("encoder.embed.weight");  // unused if !pos
  const auto g1 = params_.view1(L + "norm1.weight"), b1 = params_.view1(L + "norm1.bias");
  const auto Wv = params_.view2(L + "self_attn.v_proj.weight");
  const auto Wo = params_.view2(L + "self_attn.out_proj.weight");
  const auto alpha = params_.view2(L + "self_attn.alpha");
  const bool periodic = periodic_;
  const long max_len = enc_.options().max_len;
  const double eps = enc_.options().ln_eps;
  ensure2(inc_scratch_, rows, (5 + H) * d, "attnphys::vit_inc_scratch");
  const auto scr = inc_scratch_;
  const auto tok = tokens_;
  const auto rs = ref_sigma_, rx = ref_x1_;
  const auto x1 = Kokkos::subview(inc_x1_, std::make_pair(lo * S * np, lo * S * np + tokens), Kokkos::ALL());
  Kokkos::parallel_for(
      "attnphys::vit_incremental_x1", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(const long r) {
        const long bb = r / S, s = r % S, pref = parent(lo + bb), pr = pref * S + s;
        for (long t = 0; t < np; ++t)
          for (long i = 0; i < d; ++i) x1(r * np + t, i) = rx(pr * np + t, i);
        T* x0n = &scr(r, 0);
        T* x0o = x0n + d;
        T* hn = x0o + d;
        T* ho = hn + d;
        T* dv = ho + d;
        T* u = dv + d;
        for (long j = 0; j < np; ++j) {
          bool changed = false;
          for (long k = 0; k < bp; ++k) changed = changed || tok(r * np + j, k) != rs(pref, (j * bp + k + s) % n);
          if (!changed) continue;
          // x0 of the new and the old token (embedding, bias, position), their norm1, the value change.
          for (long i = 0; i < d; ++i) {
            T an = be(i), ao = be(i);
            for (long k = 0; k < bp; ++k) {
              an += We(i, k) * tok(r * np + j, k);
              ao += We(i, k) * rs(pref, (j * bp + k + s) % n);
            }
            if (pos) {
              an += Pe(j, i);
              ao += Pe(j, i);
            }
            x0n[i] = an;
            x0o[i] = ao;
          }
          for (int which = 0; which < 2; ++which) {
            const T* x = which == 0 ? x0n : x0o;
            T* h = which == 0 ? hn : ho;
            double mean = 0, var = 0;
            for (long i = 0; i < d; ++i) mean += double(x[i]);
            mean /= double(d);
            for (long i = 0; i < d; ++i) var += (double(x[i]) - mean) * (double(x[i]) - mean);
            const double rstd = 1.0 / math::sqrt(var / double(d) + eps);
            for (long i = 0; i < d; ++i) h[i] = T((double(x[i]) - mean) * rstd) * g1(i) + b1(i);
          }
          for (long i = 0; i < d; ++i) {
            T a = 0;
            for (long k = 0; k < d; ++k) a += Wv(i, k) * (hn[k] - ho[k]);
            dv[i] = a;
          }
          for (long h = 0; h < H; ++h)
            for (long i = 0; i < d; ++i) {
              T a = 0;
              for (long e = 0; e < dh; ++e) a += Wo(i, h * dh + e) * dv[h * dh + e];
              u[h * d + i] = a;
            }
          for (long i = 0; i < d; ++i) x1(r * np + j, i) += x0n[i] - x0o[i];
          for (long t = 0; t < np; ++t) {
            T* row = &x1(r * np + t, 0);
            for (long h = 0; h < H; ++h) {
              const T a = alpha(h, ops::relative_index(t, j, np, max_len, periodic));
              const T* uh = u + h * d;
              for (long i = 0; i < d; ++i) row[i] += a * uh[i];
            }
          }
        }
      });
  // The feed-forward half of the block, the final norm and the readout on every token.
  ensure2(inc_h2_, tokens, d, "attnphys::vit_inc_h2");
  ensure2(inc_out_, tokens, d, "attnphys::vit_inc_out");
  ensure2(inc_f_, tokens, dff, "attnphys::vit_inc_f");
  ensure2(inc_g_, tokens, dff, "attnphys::vit_inc_g");
  ensure1(inc_mean_, tokens, "attnphys::vit_inc_mean");
  ensure1(inc_rstd_, tokens, "attnphys::vit_inc_rstd");
  const T teps = T(eps);
  ops::layernorm_forward<T>(inc_h2_, inc_mean_, inc_rstd_, x1, params_.view1(L + "norm2.weight"),
                            params_.view1(L + "norm2.bias"), teps);
  ops::linear_forward<T>(inc_f_, inc_h2_, params_.view2(L + "linear1.weight"), params_.view1(L + "linear1.bias"));
  ops::gelu_forward<T>(inc_g_, inc_f_);
  ops::linear_forward<T>(inc_out_, inc_g_, params_.view2(L + "linear2.weight"), params_.view1(L + "linear2.bias"));
  ops::add_inplace<T>(inc_out_, x1);
  ops::layernorm_forward<T>(y_, inc_mean_, inc_rstd_, inc_out_, params_.view1("encoder.norm.weight"),
                            params_.view1("encoder.norm.bias"), teps);
  readout(rows);
  const View1<T> sre(re.data() + lo, count), sim(im.data() + lo, count);
  combine(count, sre, sim);
  if (opt_.marshall_sign) add_marshall_phase<T>(sub, sim);
}

template <class T>
void TransformerAnsatz<T>::update_reference(const View1<const long>& take) {
  const long B = inc_sigma_.extent(0), per = shifts_ * np_, d = d_, n = n_;
  require(take.extent(0) == std::size_t(B), "transformer update_reference: take needs ", B,
          " entries (the rows of the last log_psi_from_reference)");
  const auto rs = ref_sigma_, rx = ref_x1_, is = inc_sigma_, ix = inc_x1_;
  const auto par = inc_parent_;
  Kokkos::parallel_for(
      "attnphys::vit_update_reference", Kokkos::RangePolicy<ExecSpace>(0, B), KOKKOS_LAMBDA(const long b) {
        if (take(b) == 0) return;
        const long p = par(b);
        for (long i = 0; i < n; ++i) rs(p, i) = is(b, i);
        for (long q = 0; q < per; ++q)
          for (long i = 0; i < d; ++i) rx(p * per + q, i) = ix(b * per + q, i);
      });
}

template class TransformerAnsatz<float>;
template class TransformerAnsatz<double>;

}  // namespace attnphys::vmc
