#include "attnphys/solvers/vmc/autoregressive.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "attnphys/core/gemm.hpp"
#include "attnphys/core/random.hpp"

namespace attnphys::vmc {

void AutoregressiveOptions::declare(OptionSet& s, const std::string& p) {
  s.add(p + ".d_model", &d_model, "token width", Range::at_least(1));
  s.add(p + ".n_heads", &n_heads, "attention heads (must divide d_model)", Range::at_least(1));
  s.add(p + ".n_layers", &n_layers, "causal transformer blocks", Range::non_negative());
  s.add(p + ".d_ff", &d_ff, "feed-forward width (0: 4 * d_model)", Range::non_negative());
  s.add(p + ".positional", &positional, "positional encoding");
  s.add(p + ".fixed_sz", &fixed_sz, "confine psi to the sector 2Sz = two_sz (masked conditionals)");
  s.add(p + ".two_sz", &two_sz, "twice the total S^z of the sector (fixed_sz)");
  s.add(p + ".init_std", &init_std, "std of the initial head weights", Range::non_negative());
  s.add(p + ".seed", &seed, "initialisation seed", Range::non_negative());
}

void AutoregressiveOptions::validate() const {
  require(d_model >= 1 && n_heads >= 1, "autoregressive: d_model = ", d_model, " and n_heads = ", n_heads,
          " must be >= 1");
  require(d_model % n_heads == 0, "autoregressive: d_model = ", d_model, " is not divisible by n_heads = ", n_heads);
  require(n_layers >= 0 && d_ff >= 0, "autoregressive: n_layers = ", n_layers, " and d_ff = ", d_ff,
          " must be >= 0");
  require(init_std >= 0, "autoregressive: init_std = ", init_std, " must be >= 0");
  require(seed >= 0, "autoregressive: seed = ", seed, " must be >= 0");
}

ops::EncoderOptions AutoregressiveOptions::encoder_options(int n) const {
  ops::EncoderOptions e;
  e.d_in = 3;  // one-hot {start, up, down}
  e.d_model = d_model;
  e.n_heads = n_heads;
  e.n_layers = n_layers;
  e.d_ff = d_ff;
  e.attention = ops::AttentionKind::Dense;
  e.causal = true;
  e.max_len = n;
  e.positional = positional == AutoregressivePositional::Learned ? ops::PositionalKind::Learned
                                                                  : ops::PositionalKind::Sinusoidal;
  e.final_norm = true;
  return e;
}

namespace {
template <class T>
void alloc2(View2<T>& v, long a, long b) {
  if (long(v.extent(0)) != a || long(v.extent(1)) != b)
    v = View2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::ar")), a, b);
}

// Which values site i may take given `ups` up spins before it, when n_up of n must be up in total.
KOKKOS_INLINE_FUNCTION void allowed(bool fixed, int n, int n_up, int i, int ups, bool& up_ok, bool& down_ok) {
  up_ok = down_ok = true;
  if (!fixed) return;
  const int left = n - i - 1;  // sites after i
  up_ok = ups + 1 <= n_up && n_up - ups - 1 <= left;
  down_ok = ups <= n_up && n_up - ups <= left;
}

// log of the normaliser of the two (possibly masked) logits.
KOKKOS_INLINE_FUNCTION double log_norm(double z0, double z1, bool up_ok, bool down_ok) {
  if (up_ok && down_ok) {
    const double m = z0 > z1 ? z0 : z1;
    return m + math::log(math::exp(z0 - m) + math::exp(z1 - m));
  }
  return up_ok ? z0 : z1;
}
}  // namespace

template <class T>
AutoregressiveTransformer<T>::AutoregressiveTransformer(int n, const AutoregressiveOptions& o)
    : n_(n), opt_(o), n_up_(0), enc_((o.validate(), o.encoder_options(std::max(n, 1))), "encoder.") {
  require(n >= 1, "autoregressive: a chain needs at least one site, got ", n);
  if (o.fixed_sz) {
    require(std::abs(o.two_sz) <= n && (n + o.two_sz) % 2 == 0, "autoregressive: fixed_sz with 2Sz = ", o.two_sz,
            " is impossible for ", n, " sites (2Sz must have the parity of N and |2Sz| <= N)");
    n_up_ = (n + o.two_sz) / 2;
  }
  enc_.declare(params_);
  const long d = o.d_model;
  params_.add("amp_head.weight", {2, d});
  params_.add("amp_head.bias", {2}, false);
  params_.add("phase_head.weight", {2, d});
  params_.add("phase_head.bias", {2}, false);
  params_.allocate();
  heads_.amp_w = params_.view2("amp_head.weight"), heads_.o_amp_w = params_.block("amp_head.weight").offset;
  heads_.amp_b = params_.view1("amp_head.bias"), heads_.o_amp_b = params_.block("amp_head.bias").offset;
  heads_.phase_w = params_.view2("phase_head.weight"), heads_.o_phase_w = params_.block("phase_head.weight").offset;
  heads_.phase_b = params_.view1("phase_head.bias"), heads_.o_phase_b = params_.block("phase_head.bias").offset;
  enc_.init(params_, std::uint64_t(o.seed));
  if (o.init_std > 0) {
    fill_normal(heads_.amp_w, std::uint64_t(o.seed), 1001, 0.0, o.init_std);
    fill_normal(heads_.phase_w, std::uint64_t(o.seed), 1002, 0.0, o.init_std);
  }
}

template <class T>
bool AutoregressiveTransformer<T>::fixed_sector(int& two_sz) const {
  if (opt_.fixed_sz) two_sz = opt_.two_sz;
  return opt_.fixed_sz;
}

template <class T>
void AutoregressiveTransformer<T>::tokens(const View2<const T>& sigma, long len) {
  const long B = sigma.extent(0);
  alloc2(x_, B * len, 3);
  const auto x = x_;
  Kokkos::parallel_for(
      "attnphys::ar_tokens", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, len}),
      KOKKOS_LAMBDA(const long b, const long t) {
        const long r = b * len + t;
        const T s = t == 0 ? T(0) : sigma(b, t - 1);
        x(r, 0) = t == 0 ? T(1) : T(0);
        x(r, 1) = s > T(0) ? T(1) : T(0);
        x(r, 2) = s < T(0) ? T(1) : T(0);
      });
}

template <class T>
void AutoregressiveTransformer<T>::heads(long batch, long len) {
  alloc2(amp_, batch * len, 2);
  alloc2(phase_, batch * len, 2);
  ops::linear_forward<T>(amp_, h_, heads_.amp_w, heads_.amp_b);
  ops::linear_forward<T>(phase_, h_, heads_.phase_w, heads_.phase_b);
}

template <class T>
void AutoregressiveTransformer<T>::forward(const View2<const T>& sigma) {
  const long B = sigma.extent(0);
  require(sigma.extent(1) == std::size_t(n_), "autoregressive: sigma has ", sigma.extent(1), " sites, expected ",
          n_);
  tokens(sigma, n_);
  alloc2(h_, B * n_, opt_.d_model);
  enc_.forward(h_, cache_, x_, B, n_, params_);
  heads(B, n_);
}

template <class T>
void AutoregressiveTransformer<T>::log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) {
  ScopedRegion region("attnphys::ar_log_psi");
  const long B = sigma.extent(0);
  require(re.extent(0) == std::size_t(B) && im.extent(0) == std::size_t(B), "autoregressive log_psi: outputs need ",
          B, " entries");
  if (B == 0) return;
  forward(sigma);
  const auto amp = amp_, ph = phase_;
  const int n = n_, n_up = n_up_;
  const bool fixed = opt_.fixed_sz;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Kokkos::parallel_for(
      "attnphys::ar_log_psi", Kokkos::RangePolicy<ExecSpace>(0, B), KOKKOS_LAMBDA(const long b) {
        double r = 0, p = 0;
        int ups = 0;
        bool inside = true;
        for (int i = 0; i < n; ++i) {
          const long t = b * n + i;
          const bool up = sigma(b, i) > T(0);
          p += double(ph(t, up ? 0 : 1));
          if (inside) {
            bool up_ok, down_ok;
            allowed(fixed, n, n_up, i, ups, up_ok, down_ok);
            if (up ? up_ok : down_ok) {
              const double z0 = amp(t, 0), z1 = amp(t, 1);
              r += 0.5 * ((up ? z0 : z1) - log_norm(z0, z1, up_ok, down_ok));
            } else {
              inside = false;
            }
          }
          ups += up;
        }
        re(b) = T(inside ? r : neg_inf);
        im(b) = T(p);
      });
}

template <class T>
void AutoregressiveTransformer<T>::conditionals(const View2<const T>& sigma, const View2<T>& lp_up,
                                                const View2<T>& lp_down) {
  const long B = sigma.extent(0);
  require(lp_up.extent(0) == std::size_t(B) && lp_up.extent(1) == std::size_t(n_) &&
              lp_down.extent(0) == std::size_t(B) && lp_down.extent(1) == std::size_t(n_),
          "autoregressive conditionals: outputs must be [", B, ", ", n_, "]");
  if (B == 0) return;
  forward(sigma);
  const auto amp = amp_;
  const int n = n_, n_up = n_up_;
  const bool fixed = opt_.fixed_sz;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Kokkos::parallel_for(
      "attnphys::ar_conditionals", Kokkos::RangePolicy<ExecSpace>(0, B), KOKKOS_LAMBDA(const long b) {
        int ups = 0;
        for (int i = 0; i < n; ++i) {
          const long t = b * n + i;
          bool up_ok, down_ok;
          allowed(fixed, n, n_up, i, ups, up_ok, down_ok);
          const double z0 = amp(t, 0), z1 = amp(t, 1);
          if (!up_ok && !down_ok) {  // the prefix already left the sector
            lp_up(b, i) = T(neg_inf);
            lp_down(b, i) = T(neg_inf);
          } else {
            const double lz = log_norm(z0, z1, up_ok, down_ok);
            lp_up(b, i) = T(up_ok ? z0 - lz : neg_inf);
            lp_down(b, i) = T(down_ok ? z1 - lz : neg_inf);
          }
          ups += sigma(b, i) > T(0);
        }
      });
}

template <class T>
void AutoregressiveTransformer<T>::log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re,
                                                     const View2<T>& o_im) {
  ScopedRegion region("attnphys::ar_gradients");
  const long B = sigma.extent(0), P = params_.size(), d = opt_.d_model, E = enc_.num_parameters();
  const int n = n_, n_up = n_up_;
  require(o_re.extent(0) == std::size_t(B) && o_re.extent(1) == std::size_t(P) && o_im.extent(0) == std::size_t(B) &&
              o_im.extent(1) == std::size_t(P),
          "autoregressive gradients: outputs must be [", B, ", ", P, "]");
  if (B == 0) return;
  forward(sigma);

  // Cotangents of Re log ψ and Im log ψ with respect to the head outputs: g_re(t, v) = ½ (δ_{v σ_i} − p_i(v)) over
  // the allowed values (0 for a forced site), g_im(t, v) = δ_{v σ_i}. Configurations outside the sector get 0.
  alloc2(g_re_, B * n, 2);
  alloc2(g_im_, B * n, 2);
  {
    const auto amp = amp_, gr = g_re_, gi = g_im_;
    const bool fixed = opt_.fixed_sz;
    Kokkos::parallel_for(
        "attnphys::ar_cotangents", Kokkos::RangePolicy<ExecSpace>(0, B), KOKKOS_LAMBDA(const long b) {
          int ups = 0;
          bool inside = true;
          for (int i = 0; i < n; ++i) {
            const long t = b * n + i;
            const bool up = sigma(b, i) > T(0);
            bool up_ok, down_ok;
            allowed(fixed, n, n_up, i, ups, up_ok, down_ok);
            if (!(up ? up_ok : down_ok)) inside = false;
            const double z0 = amp(t, 0), z1 = amp(t, 1);
            const double lz = inside ? log_norm(z0, z1, up_ok, down_ok) : 0.0;
            const double p0 = inside && up_ok ? math::exp(z0 - lz) : 0.0;
            const double p1 = inside && down_ok ? math::exp(z1 - lz) : 0.0;
            gr(t, 0) = T(up_ok ? 0.5 * ((up ? 1.0 : 0.0) - p0) : 0.0);
            gr(t, 1) = T(down_ok ? 0.5 * ((up ? 0.0 : 1.0) - p1) : 0.0);
            gi(t, 0) = T(up ? 1 : 0);
            gi(t, 1) = T(up ? 0 : 1);
            ups += up;
          }
          if (!inside)
            for (int i = 0; i < n; ++i)
              for (int v = 0; v < 2; ++v) gr(b * n + i, v) = gi(b * n + i, v) = T(0);
        });
  }

  // Head parameters: ∂/∂W(v, k) = Σ_i g(i, v) h_i(k), ∂/∂b(v) = Σ_i g(i, v).
  {
    const long oa_w = heads_.o_amp_w, oa_b = heads_.o_amp_b, op_w = heads_.o_phase_w, op_b = heads_.o_phase_b;
    const auto h = h_, gr = g_re_, gi = g_im_;
    Kokkos::parallel_for(
        "attnphys::ar_head_gradients", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, d + 1}),
        KOKKOS_LAMBDA(const long b, const long k) {
          for (int v = 0; v < 2; ++v) {
            double sr = 0, si = 0;
            for (int i = 0; i < n; ++i) {
              const long t = b * n + i;
              const double x = k < d ? double(h(t, k)) : 1.0;
              sr += double(gr(t, v)) * x;
              si += double(gi(t, v)) * x;
            }
            const long ca = k < d ? oa_w + v * d + k : oa_b + v;
            const long cp = k < d ? op_w + v * d + k : op_b + v;
            o_re(b, ca) = T(sr);
            o_im(b, ca) = T(0);
            o_re(b, cp) = T(0);
            o_im(b, cp) = T(si);
          }
        });
  }

  // Encoder parameters: the cotangents pulled back through the heads, dy = g · W [B*N, d], then one single-sample
  // forward and two backward passes (Re, Im) per sample. The buffer's gradient slot is left as it was.
  alloc2(dy_re_, B * n, d);
  alloc2(dy_im_, B * n, d);
  gemm('N', 'N', T(1), g_re_, heads_.amp_w, T(0), dy_re_);
  gemm('N', 'N', T(1), g_im_, heads_.phase_w, T(0), dy_im_);
  if (E == 0) return;
  const long e0 = enc_.param_offset();
  const auto range = std::make_pair(e0, e0 + E);
  auto grads = Kokkos::subview(params_.grads(), range);
  View1<T> saved("attnphys::ar_saved_grads", E);
  Kokkos::deep_copy(saved, grads);
  View2<T> y("attnphys::ar_one_y", n, d);
  for (long b = 0; b < B; ++b) {
    enc_.forward(y, one_cache_, ConstMat<T>(x_.data() + b * n * 3, n, 3), 1, n, params_);
    for (int part = 0; part < 2; ++part) {
      const auto& dy = part == 0 ? dy_re_ : dy_im_;
      Kokkos::deep_copy(grads, T(0));
      enc_.backward(Mat<T>(), one_cache_, ConstMat<T>(dy.data() + b * n * d, n, d), params_);
      Kokkos::deep_copy(Kokkos::subview(part == 0 ? o_re : o_im, b, range), grads);
    }
  }
  Kokkos::deep_copy(grads, saved);
}

template <class T>
void AutoregressiveTransformer<T>::sample_direct(const View2<T>& sigma, std::uint64_t seed, std::uint64_t counter) {
  ScopedRegion region("attnphys::ar_sample");
  const long M = sigma.extent(0), d = opt_.d_model;
  require(sigma.extent(1) == std::size_t(n_), "autoregressive sample_direct: sigma must be [M, ", n_, "], got [", M,
          ", ", sigma.extent(1), "]");
  if (M == 0) return;
  Kokkos::deep_copy(sigma, T(1));
  const int n = n_, n_up = n_up_;
  const bool fixed = opt_.fixed_sz;
  const auto wa = heads_.amp_w;
  const auto ba = heads_.amp_b;
  // Causal attention: output i depends only on [start, σ_0, ..., σ_{i-1}], so each pass runs on the full length
  // (sites not drawn yet are placeholders that cannot influence it) and every pass, and the log ψ evaluation that
  // usually follows, reuses one [M, N] set of buffers.
  const long len = n;
  alloc2(h_, M * len, d);
  for (int i = 0; i < n; ++i) {
    tokens(sigma, len);
    enc_.forward(h_, cache_, x_, M, len, params_);
    const auto h = h_;
    Kokkos::parallel_for(
        "attnphys::ar_sample_site", Kokkos::RangePolicy<ExecSpace>(0, M), KOKKOS_LAMBDA(const long m) {
          const long t = m * len + i;
          double z0 = ba(0), z1 = ba(1);
          for (long k = 0; k < d; ++k) {
            z0 += double(wa(0, k)) * double(h(t, k));
            z1 += double(wa(1, k)) * double(h(t, k));
          }
          int ups = 0;
          for (int j = 0; j < i; ++j) ups += sigma(m, j) > T(0);
          bool up_ok, down_ok;
          allowed(fixed, n, n_up, i, ups, up_ok, down_ok);
          const double p_up = up_ok ? math::exp(z0 - log_norm(z0, z1, up_ok, down_ok)) : 0.0;
          CounterRng r(seed, counter, std::uint64_t(m) * std::uint64_t(n) + std::uint64_t(i));
          sigma(m, i) = r.uniform() < p_up ? T(1) : T(-1);
        });
  }
}

template class AutoregressiveTransformer<float>;
template class AutoregressiveTransformer<double>;

}  // namespace attnphys::vmc
