// Properties of attention: tiled equals dense, exported weights are the softmax rows, masks zero what they mask,
// permutation equivariance without positions, unit score variance with the 1/sqrt(d_k) scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

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
    o.positional = "sinusoidal";
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
