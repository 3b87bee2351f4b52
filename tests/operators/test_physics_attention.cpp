// Physics-Attention (Transolver) as the attention kind "physics": every parameter gradient and the input gradient
// against central finite differences, permutation equivariance, exact invariance under duplicating every token (the
// slice tokens are ratios of means), float against double, exported weights that reproduce the layer, the refusals,
// buffers linear in N on a 64² grid, and an encoder block with physics attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attnphys/operators/attention.hpp"
#include "encoder_harness.hpp"

using namespace attnphys;

namespace {

ops::AttentionOptions physics_options(long d, long heads, long slices) {
  ops::AttentionOptions o;
  o.d_model = d;
  o.n_heads = heads;
  o.kind = ops::AttentionKind::Physics;
  o.n_slices = slices;
  return o;
}

// One bare physics-attention layer with perturbed PyTorch-like initial parameters.
template <class T>
struct Layer {
  ops::MultiHeadAttention<T> attn;
  ParameterBuffer<T> buf;
  ops::AttentionCache<T> cache;
  ops::AttentionScratch<T> ws;
  long d;

  explicit Layer(const ops::AttentionOptions& o, std::uint64_t seed = 3) : attn(o, "self_attn."), d(o.d_model) {
    ops::InitPlan plan;
    attn.declare(buf, plan);
    buf.allocate();
    ops::init_parameters(buf, plan, seed);
    auto p = buf.get_host();
    const auto noise = test::randn(long(p.size()), seed + 100, 0.1);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += T(noise[i]);
    buf.set_host(p);
  }
  std::vector<double> forward(const std::vector<double>& x, long batch, long len) {
    std::vector<T> xt(x.begin(), x.end());
    View2<T> y("y", batch * len, d);
    attn.forward(y, cache, test::to_device(xt, batch * len, d), batch, len, buf, ops::IntMask(), ws);
    return test::to_vector(y);
  }
  // Gradients of <dy, y>: (parameters, input).
  std::pair<std::vector<double>, std::vector<double>> gradients(const std::vector<double>& x,
                                                                const std::vector<double>& dy, long batch, long len) {
    forward(x, batch, len);
    buf.zero_grads();
    std::vector<T> xt(x.begin(), x.end()), dyt(dy.begin(), dy.end());
    View2<T> dx("dx", batch * len, d);
    attn.backward(dx, cache, test::to_device(dyt, batch * len, d), test::to_device(xt, batch * len, d), buf, ws);
    const auto g = buf.get_host(Slot::Grads);
    return {std::vector<double>(g.begin(), g.end()), test::to_vector(dx)};
  }
};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

}  // namespace

TEST(PhysicsAttention, EveryParameterAndInputGradientMatchesFiniteDifferences) {
  const long B = 2, N = 7, d = 8, H = 2, M = 3;
  Layer<double> L(physics_options(d, H, M));
  const auto x = test::randn(B * N * d, 11), dy = test::randn(B * N * d, 12);
  const auto [gp, gx] = L.gradients(x, dy, B, N);
  const auto theta = L.buf.get_host();
  auto loss = [&](const std::vector<double>& t) {
    L.buf.set_host(t);
    return test::dot(L.forward(x, B, N), dy);
  };
  const std::vector<std::string> names = {"in_proj_fx.weight", "in_proj_fx.bias", "in_proj_x.weight",
                                          "in_proj_x.bias",    "slice.weight",    "slice.bias",
                                          "log_tau",           "to_q.weight",     "to_k.weight",
                                          "to_v.weight",       "out_proj.weight", "out_proj.bias"};
  EXPECT_EQ(L.buf.blocks().size(), names.size());
  EXPECT_EQ(L.buf.block("self_attn.slice.weight").shape, (std::vector<long>{H, d / H, M}));
  EXPECT_EQ(L.buf.block("self_attn.slice.bias").shape, (std::vector<long>{H, M}));
  EXPECT_EQ(L.buf.block("self_attn.log_tau").shape, (std::vector<long>{H}));
  EXPECT_EQ(L.buf.block("self_attn.to_q.weight").shape, (std::vector<long>{d / H, d / H}));
  for (const auto& name : names) {
    const auto& blk = L.buf.block("self_attn." + name);
    std::vector<long> which(blk.size);
    std::iota(which.begin(), which.end(), blk.offset);
    double gnorm = 0;
    for (long i : which) gnorm += gp[i] * gp[i];
    EXPECT_GT(std::sqrt(gnorm), 1e-4) << name << ": a vanishing gradient checks nothing";
    const double err = test::fd_relative_error(theta, gp, loss, which);
    EXPECT_LT(err, 1e-6) << name;
    std::printf("  %-18s fd relative error %.2e\n", name.c_str(), err);
  }
  L.buf.set_host(theta);
  const double ex = test::fd_relative_error(x, gx, [&](const std::vector<double>& xi) {
    return test::dot(L.forward(xi, B, N), dy);
  });
  EXPECT_LT(ex, 1e-6) << "input";
  std::printf("  %-18s fd relative error %.2e\n", "input x", ex);
}

TEST(PhysicsAttention, PermutingTheTokensOfASamplePermutesItsOutputs) {
  const long B = 2, N = 7, d = 8;
  Layer<double> L(physics_options(d, 2, 3));
  const long perm[B][N] = {{3, 0, 6, 1, 4, 2, 5}, {6, 5, 4, 3, 2, 1, 0}};
  const auto x = test::randn(B * N * d, 21);
  std::vector<double> xp(x.size());
  for (long b = 0; b < B; ++b)
    for (long i = 0; i < N; ++i)
      for (long f = 0; f < d; ++f) xp[(b * N + i) * d + f] = x[(b * N + perm[b][i]) * d + f];
  const auto y = L.forward(x, B, N), yp = L.forward(xp, B, N);
  double err = 0;
  for (long b = 0; b < B; ++b)
    for (long i = 0; i < N; ++i)
      for (long f = 0; f < d; ++f)
        err = std::max(err, std::abs(yp[(b * N + i) * d + f] - y[(b * N + perm[b][i]) * d + f]));
  EXPECT_LT(err, 1e-12);
}

TEST(PhysicsAttention, DuplicatingEveryTokenLeavesSliceTokensAndOutputsUnchanged) {
  // N -> 2N with each token twice: every slice sum doubles in numerator and denominator (the ε is per token), so
  // the slice tokens, the attention among them and each token's output are unchanged: resolution independence.
  const long B = 2, N = 7, d = 8, H = 2, M = 3;
  Layer<double> L(physics_options(d, H, M));
  const auto x = test::randn(B * N * d, 31);
  std::vector<double> x2(2 * x.size());
  for (long b = 0; b < B; ++b)
    for (long i = 0; i < N; ++i)
      for (long r = 0; r < 2; ++r)
        for (long f = 0; f < d; ++f) x2[((b * 2 * N) + 2 * i + r) * d + f] = x[(b * N + i) * d + f];
  const auto y = L.forward(x, B, N);
  const auto z = test::to_vector(L.cache.physics.z);
  const auto y2 = L.forward(x2, B, 2 * N);
  const auto z2 = test::to_vector(L.cache.physics.z);
  ASSERT_EQ(z.size(), std::size_t(B * H * M * (d / H)));
  EXPECT_LT(max_abs_diff(z, z2), 1e-12);
  double err = 0, scale = 0;
  for (long b = 0; b < B; ++b)
    for (long i = 0; i < N; ++i)
      for (long r = 0; r < 2; ++r)
        for (long f = 0; f < d; ++f) {
          err = std::max(err, std::abs(y2[((b * 2 * N) + 2 * i + r) * d + f] - y[(b * N + i) * d + f]));
          scale = std::max(scale, std::abs(y[(b * N + i) * d + f]));
        }
  EXPECT_GT(scale, 0.1);
  EXPECT_LT(err, 1e-12);
}

TEST(PhysicsAttention, FloatAndDoubleAgree) {
  const long B = 2, N = 7, d = 8;
  const auto o = physics_options(d, 2, 3);
  Layer<double> Ld(o);
  Layer<float> Lf(o);
  const auto theta = Ld.buf.get_host();
  Lf.buf.set_host(std::vector<float>(theta.begin(), theta.end()));
  const auto x = test::randn(B * N * d, 41), dy = test::randn(B * N * d, 42);
  const auto yd = Ld.forward(x, B, N), yf = Lf.forward(x, B, N);
  const auto [gd, xd] = Ld.gradients(x, dy, B, N);
  const auto [gf, xf] = Lf.gradients(x, dy, B, N);
  auto rel = [](const std::vector<double>& a, const std::vector<double>& b) {
    double scale = 0;
    for (double v : a) scale = std::max(scale, std::abs(v));
    return max_abs_diff(a, b) / scale;
  };
  EXPECT_LT(rel(yd, yf), 2e-6);
  EXPECT_LT(rel(xd, xf), 2e-5);
  EXPECT_LT(rel(gd, gf), 2e-5);
}

TEST(PhysicsAttention, ExportedWeightsReproduceTheHeadOutputs) {
  // slice_weights: a softmax over the M slices. weights(): the effective token weights A_ij, with which each head's
  // output is o_i = Σ_j A_ij Wv fx_h[j] exactly, and whose rows sum to 1 up to the per-token ε.
  const long B = 2, N = 7, d = 8, H = 2, M = 3, dh = d / H;
  Layer<double> L(physics_options(d, H, M));
  L.forward(test::randn(B * N * d, 51), B, N);
  const auto fxh = test::to_vector(L.cache.physics.fxh), oh = test::to_vector(L.cache.physics.oh);
  const auto wv = test::to_vector(L.buf.view2("self_attn.to_v.weight"));
  for (long b = 0; b < B; ++b)
    for (long h = 0; h < H; ++h) {
      const long bh = b * H + h;
      for (long i = 0; i < N; ++i) {
        const auto s = L.attn.slice_weights(L.cache, b, h, i);
        ASSERT_EQ(s.size(), std::size_t(M));
        EXPECT_NEAR(std::accumulate(s.begin(), s.end(), 0.0), 1.0, 1e-14);
        const auto a = L.attn.weights(L.cache, L.buf, b, h, i);
        ASSERT_EQ(a.size(), std::size_t(N));
        EXPECT_NEAR(std::accumulate(a.begin(), a.end(), 0.0), 1.0, 1e-3);
        for (long c = 0; c < dh; ++c) {
          double o = 0;
          for (long j = 0; j < N; ++j)
            for (long e = 0; e < dh; ++e) o += a[j] * wv[c * dh + e] * fxh[(bh * N + j) * dh + e];
          EXPECT_NEAR(o, oh[(bh * N + i) * dh + c], 1e-12);
        }
      }
    }
}

TEST(PhysicsAttention, RefusesMasksAndBadOptionsWithClearMessages) {
  auto expect_error = [](auto&& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto o = physics_options(8, 2, 3);
  o.causal = true;
  expect_error([&] { o.validate(); }, "physics attention attends among its slice tokens");
  o = physics_options(8, 2, 3);
  o.window = 1;
  expect_error([&] { o.validate(); }, "causal/window mask or relative bias");
  o = physics_options(8, 2, 0);
  expect_error([&] { o.validate(); }, "n_slices >= 1");
  expect_error([&] { ops::parse_attention_kind("transolver"); }, "use dense, tiled, galerkin, factored or physics");
  EXPECT_EQ(ops::parse_attention_kind("physics"), ops::AttentionKind::Physics);
  EXPECT_EQ(ops::parse_attention_kind("tiled"), ops::AttentionKind::Tiled);

  Layer<double> L(physics_options(8, 2, 3));
  Kokkos::View<int**, Kokkos::LayoutRight, MemSpace> km("km", 1, 4);
  Kokkos::deep_copy(km, 1);
  View2<double> x("x", 4, 8), y("y", 4, 8);
  expect_error([&] { L.attn.forward(y, L.cache, x, 1, 4, L.buf, km, L.ws); }, "physics attention takes no key mask");
  Layer<double> D([] {
    auto od = physics_options(8, 2, 3);
    od.kind = ops::AttentionKind::Dense;
    return od;
  }());
  D.forward(test::randn(32, 1), 1, 4);
  expect_error([&] { D.attn.slice_weights(D.cache, 0, 0, 0); }, "only physics attention has slices");
}

TEST(PhysicsAttention, BuffersAreLinearInTheGridSizeAndReusedOn64x64) {
  // A 64² grid (N = 4096) in float, d = 32, 4 heads, 32 slices: every buffer is O(N·(d + H·M)), nothing is N², and
  // a second call with the same shapes reuses the same memory.
  const long N = 64 * 64, d = 32, H = 4, M = 32;
  Layer<float> L(physics_options(d, H, M));
  View2<float> x("x", N, d), y("y", N, d), dy("dy", N, d), dx("dx", N, d);
  fill_normal(x, 1, 0);
  fill_normal(dy, 1, 1);
  L.attn.forward(y, L.cache, x, 1, N, L.buf, ops::IntMask(), L.ws);
  L.buf.zero_grads();
  L.attn.backward(dx, L.cache, dy, x, L.buf, L.ws);
  const float* w0 = L.cache.physics.w.data();
  L.attn.forward(y, L.cache, x, 1, N, L.buf, ops::IntMask(), L.ws);
  L.attn.backward(dx, L.cache, dy, x, L.buf, L.ws);
  Kokkos::fence();
  EXPECT_EQ(L.cache.physics.w.data(), w0);
  const auto& p = L.cache.physics;
  long total = 0, largest = 0;
  for (long s : {long(p.fx.span()), long(p.xm.span()), long(p.fxh.span()), long(p.xmh.span()), long(p.oh.span()),
                 long(p.logits.span()), long(p.w.span()), long(p.dw.span()), long(p.dfx.span()), long(p.dxm.span()),
                 long(p.doh.span()), long(p.dfxh.span()), long(p.dxmh.span()), long(p.z.span()), long(p.p.span()),
                 long(L.cache.p.span()), long(L.cache.q.span()), long(L.ws.tile.span()), long(L.ws.dtile.span())}) {
    total += s;
    largest = std::max(largest, s);
  }
  EXPECT_EQ(L.cache.p.span(), 0u);  // no token-level attention matrix
  EXPECT_EQ(largest, N * H * M);     // the slice weights
  EXPECT_LT(total, 4 * N * (3 * d + H * M));
  EXPECT_LT(total, N * N / 4);  // (H·M = N/32 here: the slice weights are the largest term)
  const auto yv = test::to_vector(y), dxv = test::to_vector(dx);
  for (double v : yv) ASSERT_TRUE(std::isfinite(v));
  for (double v : dxv) ASSERT_TRUE(std::isfinite(v));
  // The weights of a token over the grid sum to 1 (up to the per-token ε).
  const auto a = L.attn.weights(L.cache, L.buf, 0, 1, 100);
  ASSERT_EQ(long(a.size()), N);
  EXPECT_NEAR(std::accumulate(a.begin(), a.end(), 0.0), 1.0, 1e-2);
}

TEST(PhysicsAttention, EncoderBlockGradientsMatchFiniteDifferences) {
  auto o = test::small_options("physics");
  o.n_layers = 1;
  o.n_slices = 3;
  test::EncoderHarness h(o, 2, 5);
  const auto [ep, ex] = h.check();
  EXPECT_LT(ep, 1e-6);
  EXPECT_LT(ex, 1e-6);
  std::printf("  encoder (1 block, physics) fd relative error: parameters %.2e, inputs %.2e\n", ep, ex);
  // The options reach the layer, and the export works through the encoder.
  EXPECT_EQ(h.enc.block(0).attention().kind(), ops::AttentionKind::Physics);
  EXPECT_EQ(h.buf.block("layers.0.self_attn.slice.weight").shape, (std::vector<long>{2, 4, 3}));
  EXPECT_EQ(h.enc.attention_weights(h.cache, h.buf, 0, 1, 0, 2).size(), 5u);
}
