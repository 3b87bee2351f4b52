// Properties of attention: tiled (online softmax over query and key blocks) equals dense, the tiled scratch is
// O(N·d), Galerkin has one layer norm per head, exported weights are the softmax rows, masks zero what they mask,
// permutation equivariance without positions, unit score variance with the 1/sqrt(d_k) scaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attnphys/operators/attention.hpp"
#include "attnphys/operators/attention_core.hpp"
#include "encoder_harness.hpp"

using namespace attnphys;
using attnphys::test::EncoderHarness;
using attnphys::test::small_options;

TEST(AttentionProperties, TiledEqualsDenseToRounding) {
  for (bool bias : {false, true}) {
    auto od = small_options("dense"), ot = small_options("tiled");
    od.relative_bias = ot.relative_bias = bias;
    od.causal = ot.causal = true;
    EncoderHarness hd(od, 2, 6), ht(ot, 2, 6);
    ht.cache.scratch.tile_budget = 4 * 6;  // four query rows per tile: tiles of 4 and 2 rows
    ht.cache.scratch.min_tile_rows = 1;
    const auto yd = hd.forward(hd.x), yt = ht.forward(ht.x);
    for (std::size_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yd[i], yt[i], 1e-13);
    const auto [gd, xd] = hd.gradients();
    const auto [gt, xt] = ht.gradients();
    for (std::size_t i = 0; i < gd.size(); ++i) EXPECT_NEAR(gd[i], gt[i], 1e-12);
    for (std::size_t i = 0; i < xd.size(); ++i) EXPECT_NEAR(xd[i], xt[i], 1e-12);
  }
}

TEST(AttentionProperties, TiledOnlineSoftmaxEqualsDenseOverSeveralQueryAndKeyBlocks) {
  // N = 10 with blocks of 3 query rows x 4 keys (tile_budget 12): query blocks 3, 3, 3, 1 and key blocks 4, 4, 2,
  // so every row's softmax is assembled online from several key blocks, some partly or wholly masked.
  const long n = 10;
  struct Case {
    const char* name;
    bool causal = false, periodic = false, bias = false, padding = false;
    long window = -1;
  };
  const Case cases[] = {{"causal", true},
                        {"window_periodic", false, true, false, false, 2},
                        {"window_open_bias", false, false, true, false, 1},
                        {"key_padding_with_fully_padded_sample", false, false, false, true},
                        {"relative_bias_open", false, false, true},
                        {"relative_bias_periodic_causal_padding", true, true, true, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto od = small_options("dense"), ot = small_options("tiled");
    for (auto* o : {&od, &ot}) {
      o->causal = c.causal;
      o->periodic = c.periodic;
      o->window = c.window;
      o->relative_bias = c.bias;
      o->max_len = n;
    }
    EncoderHarness hd(od, 3, n), ht(ot, 3, n);
    if (c.padding) {
      // sample 0: keys 0-6 valid; sample 1: every key is padding (its attention outputs are zero); sample 2: all.
      std::vector<int> km(3 * n, 1);
      for (long j = 7; j < n; ++j) km[j] = 0;
      for (long j = 0; j < n; ++j) km[n + j] = 0;
      hd.key_mask = ht.key_mask = km;
    }
    ht.cache.scratch.tile_budget = 12;
    ht.cache.scratch.min_tile_rows = 1;
    const auto yd = hd.forward(hd.x), yt = ht.forward(ht.x);
    EXPECT_EQ(long(ht.cache.scratch.tile.extent(0)), 12);  // one 3 x 4 block: never a row of all N keys
    for (std::size_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yd[i], yt[i], 1e-12);
    const auto [gd, xd] = hd.gradients();
    const auto [gt, xt] = ht.gradients();
    double gmax = 0;
    for (double g : gd) gmax = std::max(gmax, std::abs(g));
    EXPECT_GT(gmax, 1e-3);
    for (std::size_t i = 0; i < gd.size(); ++i) EXPECT_NEAR(gd[i], gt[i], 1e-12) << "parameter " << i;
    for (std::size_t i = 0; i < xd.size(); ++i) EXPECT_NEAR(xd[i], xt[i], 1e-12) << "input " << i;
    EXPECT_LE(long(ht.cache.scratch.dtile.extent(0)), 12);
  }
}

TEST(AttentionProperties, TiledScratchIsLinearInTheSequenceLength) {
  // One attention layer, N = 2048, d = 32, 2 heads, float32, blocks of 64 x 64: the scratch of the tiled mode (two
  // score blocks and one [B*H, N] row vector) must not grow like N² or like (block rows)·N, and its result must
  // still match dense attention.
  const long n = 2048, d = 32, heads = 2;
  std::vector<double> ys[2], dxs[2];
  for (int dense = 0; dense < 2; ++dense) {
    ops::AttentionOptions o;
    o.d_model = d;
    o.n_heads = heads;
    o.kind = dense ? ops::AttentionKind::Dense : ops::AttentionKind::Tiled;
    o.causal = true;
    ops::MultiHeadAttention<float> attn(o, "");
    ParameterBuffer<float> buf;
    ops::InitPlan plan;
    attn.declare(buf, plan);
    buf.allocate();
    ops::init_parameters(buf, plan, 0);
    View2<float> x("x", n, d), y("y", n, d), dy("dy", n, d), dx("dx", n, d);
    fill_normal(x, 1, 0);
    fill_normal(dy, 1, 1);
    ops::AttentionCache<float> cache;
    ops::AttentionScratch<float> ws;
    ws.tile_budget = 64 * 64;
    attn.forward(y, cache, x, 1, n, buf, ops::IntMask(), ws);
    buf.zero_grads();
    attn.backward(dx, cache, dy, x, buf, ws);
    Kokkos::fence();
    ys[dense] = test::to_vector(y);
    dxs[dense] = test::to_vector(dx);
    if (!dense) {
      const long scratch = long(ws.tile.extent(0) + ws.dtile.extent(0) + ws.rowdot.extent(0));
      EXPECT_EQ(cache.p.extent(0), 0u);  // no saved probabilities
      EXPECT_LE(scratch, 2 * 64 * 64 + heads * n);
      EXPECT_LT(scratch, n * d);           // O(N·d) ...
      EXPECT_LT(scratch, 64 * n);          // ... below one strip of 64 query rows x all keys ...
      EXPECT_LT(scratch, heads * n * n / 256);  // ... and far below N²
    }
  }
  for (const auto* v : {ys, dxs}) {  // float32: max |tiled - dense| relative to max |dense|
    double scale = 0, err = 0;
    for (std::size_t i = 0; i < v[0].size(); ++i) {
      scale = std::max(scale, std::abs(v[1][i]));
      err = std::max(err, std::abs(v[0][i] - v[1][i]));
    }
    EXPECT_GT(scale, 0.0);
    EXPECT_LT(err, 1e-4 * scale);
  }
}

TEST(AttentionProperties, GalerkinHasOneLayerNormPerHead) {
  // k_norm and v_norm are [H, dh] tables: changing head 1's row changes head 1's output and leaves head 0's.
  const long n = 5, d = 8, heads = 2, dh = d / heads;
  ops::AttentionOptions o;
  o.d_model = d;
  o.n_heads = heads;
  o.kind = ops::AttentionKind::Galerkin;
  ops::MultiHeadAttention<double> attn(o, "");
  ParameterBuffer<double> buf;
  ops::InitPlan plan;
  attn.declare(buf, plan);
  buf.allocate();
  ops::init_parameters(buf, plan, 0);
  for (const char* name : {"k_norm.weight", "k_norm.bias", "v_norm.weight", "v_norm.bias"}) {
    EXPECT_EQ(buf.block(name).shape, (std::vector<long>{heads, dh})) << name;
  }
  View2<double> x("x", n, d), y("y", n, d);
  fill_normal(x, 3, 0);
  ops::AttentionCache<double> cache;
  ops::AttentionScratch<double> ws;
  auto head_outputs = [&] {
    attn.forward(y, cache, x, 1, n, buf, ops::IntMask(), ws);
    const auto v = test::to_vector(cache.o);  // [B*H, N, dh]
    return std::pair<std::vector<double>, std::vector<double>>{{v.begin(), v.begin() + n * dh},
                                                               {v.begin() + n * dh, v.end()}};
  };
  const auto [h0, h1] = head_outputs();
  for (const char* name : {"k_norm.weight", "v_norm.bias"}) {
    auto theta = buf.get_host();
    const long off = buf.block(name).offset;
    const auto saved = theta;
    for (long c = 0; c < dh; ++c) theta[off + dh + c] += 0.5 * (c + 1);  // head 1's row only
    buf.set_host(theta);
    const auto [g0, g1] = head_outputs();
    double d0 = 0, d1 = 0;
    for (long i = 0; i < n * dh; ++i) {
      d0 = std::max(d0, std::abs(g0[i] - h0[i]));
      d1 = std::max(d1, std::abs(g1[i] - h1[i]));
    }
    EXPECT_EQ(d0, 0.0) << name;
    EXPECT_GT(d1, 1e-3) << name;
    buf.set_host(saved);
  }
}

TEST(AttentionProperties, ExportedWeightsAreMaskedSoftmaxRows) {
  for (const char* kind : {"dense", "tiled"}) {
    auto o = small_options(kind);
    o.window = 1;
    EncoderHarness h(o, 2, 6);
    h.key_mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};  // sample 1: key 5 is padding
    h.forward(h.x);
    for (long layer = 0; layer < 2; ++layer) {
      const auto w = h.enc.attention_weights(h.cache, h.buf, layer, 1, 1, 4);
      ASSERT_EQ(w.size(), 6u);
      EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-12);
      EXPECT_EQ(w[0], 0.0);  // outside the window
      EXPECT_EQ(w[1], 0.0);
      EXPECT_EQ(w[2], 0.0);
      EXPECT_GT(w[3], 0.0);
      EXPECT_GT(w[4], 0.0);
      EXPECT_EQ(w[5], 0.0);  // padding
    }
  }
  auto o = small_options("galerkin");
  EncoderHarness g(o, 1, 4);
  g.forward(g.x);
  EXPECT_THROW(g.enc.attention_weights(g.cache, g.buf, 0, 0, 0, 0), Error);
}

TEST(AttentionProperties, FactoredWeightsAreCirculantForPeriodicChains) {
  auto o = small_options("factored");
  o.periodic = true;
  o.max_len = 6;
  EncoderHarness h(o, 1, 6);
  h.forward(h.x);
  const auto w0 = h.enc.attention_weights(h.cache, h.buf, 0, 0, 1, 0);
  for (long i = 1; i < 6; ++i) {
    const auto wi = h.enc.attention_weights(h.cache, h.buf, 0, 0, 1, i);
    for (long j = 0; j < 6; ++j) EXPECT_EQ(wi[j], w0[((j - i) % 6 + 6) % 6]);
  }
}

TEST(AttentionProperties, FactoredTokenMajorPathEqualsPerSampleWeights) {
  // Without a key mask factored attention runs on token-major rows; an all-ones key mask takes the per-sample
  // weight-tensor path. Both must give the same encoder output, for open, periodic, causal and windowed weights.
  for (int variant = 0; variant < 3; ++variant) {
    auto o = small_options("factored");
    o.periodic = variant == 1;
    o.causal = variant == 1;
    o.window = variant == 2 ? 1 : -1;
    EncoderHarness rows(o, 3, 5), masked(o, 3, 5);
    masked.key_mask.assign(15, 1);
    const auto a = rows.forward(rows.x), b = masked.forward(masked.x);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-13) << "variant " << variant;
  }
}

namespace {
// Relative difference between the permuted output of x and the output of the permuted x.
double equivariance_defect(const ops::EncoderOptions& o) {
  const long B = 2, N = 6, perm[N] = {3, 0, 5, 1, 4, 2};
  EncoderHarness h(o, B, N);
  const auto y = h.forward(h.x);
  const long w = h.width(), d = o.d_model;
  std::vector<double> xp(h.x.size());
  for (long b = 0; b < B; ++b)
    for (long n = 0; n < N; ++n)
      for (long f = 0; f < w; ++f) xp[(b * N + n) * w + f] = h.x[(b * N + perm[n]) * w + f];
  const auto yp = h.forward(xp);
  double num = 0, den = 0;
  for (long b = 0; b < B; ++b)
    for (long n = 0; n < N; ++n)
      for (long f = 0; f < d; ++f) {
        const double e = yp[(b * N + n) * d + f] - y[(b * N + perm[n]) * d + f];
        num += e * e;
        den += y[(b * N + perm[n]) * d + f] * y[(b * N + perm[n]) * d + f];
      }
  return std::sqrt(num / den);
}
}  // namespace

TEST(AttentionProperties, PermutationEquivariantOnlyWithoutPositions) {
  for (const char* kind : {"dense", "tiled", "galerkin"}) {
    auto o = small_options(kind);
    EXPECT_LT(equivariance_defect(o), 1e-13) << kind;
    o.positional = ops::PositionalKind::Sinusoidal;
    EXPECT_GT(equivariance_defect(o), 1e-3) << kind;
  }
  auto o = small_options("dense");
  o.relative_bias = true;
  EXPECT_GT(equivariance_defect(o), 1e-3);
  o = small_options("factored");
  EXPECT_GT(equivariance_defect(o), 1e-3);
}

TEST(AttentionProperties, ScaledScoresHaveUnitVariance) {
  const long n = 64;
  for (long dk : {4, 16, 64, 256}) {
    View3<double> q("q", 1, n, dk), k("k", 1, n, dk), s("s", 1, n, n);
    fill_normal(q, 11, dk);
    fill_normal(k, 12, dk);
    ops::attention_scores<double>(s, q, k);
    const auto v = test::to_vector(s);
    double mean = 0, var = 0;
    for (double x : v) mean += x / v.size();
    for (double x : v) var += (x - mean) * (x - mean) / v.size();
    // 4096 scores: the sample variance of a unit-variance variable is within ~0.1 of 1.
    EXPECT_NEAR(var, 1.0, 0.15) << "d_k = " << dk;
  }
}
