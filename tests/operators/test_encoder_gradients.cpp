// Every attention kind, mask and encoding of the encoder against central finite differences (double, tiny shapes):
// parameter gradients, input gradients and per-sample Jacobian rows.
#include <gtest/gtest.h>

#include "encoder_harness.hpp"

using namespace attnphys;
using attnphys::test::EncoderHarness;
using attnphys::test::small_options;

namespace {
struct Case {
  std::string name;
  ops::EncoderOptions opt;
  bool padding = false;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char* kind : {"dense", "tiled", "galerkin", "factored"}) c.push_back({kind, small_options(kind)});
  auto o = small_options("dense");
  o.causal = true;
  c.push_back({"causal", o});
  o = small_options("tiled");
  o.window = 1;
  c.push_back({"window_open", o});
  o.periodic = true;
  c.push_back({"window_periodic", o});
  o = small_options("dense");
  c.push_back({"key_padding", o, true});
  o = small_options("tiled");
  c.push_back({"key_padding_tiled", o, true});
  o = small_options("dense");
  o.relative_bias = true;
  c.push_back({"relative_bias_open", o});
  o.periodic = true;
  o.attention = ops::AttentionKind::Tiled;
  c.push_back({"relative_bias_periodic_tiled", o});
  o = small_options("factored");
  o.periodic = true;
  o.causal = true;
  c.push_back({"factored_periodic_causal", o, true});  // key mask: the per-sample weight path
  c.push_back({"factored_periodic_causal_rows", o});   // no key mask: the token-major path
  o = small_options("factored");
  o.window = 1;
  c.push_back({"factored_window_open_rows", o});
  o = small_options("dense");
  o.positional = ops::PositionalKind::Sinusoidal;
  c.push_back({"sinusoidal", o});
  o.positional = ops::PositionalKind::Learned;
  o.final_norm = false;
  c.push_back({"learned_no_final_norm", o});
  o.positional = ops::PositionalKind::Coords;
  o.coord_dim = 2;
  o.coord_features = 3;
  o.d_in = 0;
  c.push_back({"coords_no_embedding", o});
  return c;
}
}  // namespace

TEST(EncoderGradients, MatchFiniteDifferencesForEveryKindMaskAndEncoding) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    EncoderHarness h(c.opt, 2, 5);
    if (c.padding) h.key_mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};  // sample 1 has 3 valid tokens
    const auto [ep, ex] = h.check();
    EXPECT_LT(ep, 1e-6) << c.name << " parameters";
    EXPECT_LT(ex, 1e-6) << c.name << " inputs";
  }
}

TEST(EncoderGradients, TiledBackwardUsesSeveralTiles) {
  // A budget of one row per tile forces the recomputation path through every tile boundary.
  auto o = small_options("tiled");
  o.relative_bias = true;
  EncoderHarness h(o, 2, 5);
  h.cache.scratch.tile_budget = 1;
  h.cache.scratch.min_tile_rows = 1;
  const auto [ep, ex] = h.check();
  EXPECT_LT(ep, 1e-6);
  EXPECT_LT(ex, 1e-6);
}

TEST(EncoderGradients, PerSampleJacobianRowsMatchFiniteDifferences) {
  auto o = small_options("dense");
  o.relative_bias = true;
  o.positional = ops::PositionalKind::Learned;
  EncoderHarness h(o, 3, 4);
  h.key_mask = {1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
  View2<double> cd;
  Kokkos::View<int**, Kokkos::LayoutRight, MemSpace> km;
  const long P = h.enc.num_parameters();
  View2<double> jac("jac", 3, P);
  ops::EncoderCache<double> cache1;
  h.enc.per_sample_gradients(jac, cache1, test::to_device(h.x, 12, 3), test::to_device(h.dy, 12, 8), 3, 4, h.buf,
                             h.inputs(cd, km));
  const auto J = test::to_vector(jac);
  const auto theta = h.buf.get_host();
  std::vector<double> sum(P, 0.0);
  for (long b = 0; b < 3; ++b) {
    // Loss of sample b alone: its rows of dy, others zero.
    auto dyb = std::vector<double>(h.dy.size(), 0.0);
    for (long i = b * 4 * 8; i < (b + 1) * 4 * 8; ++i) dyb[i] = h.dy[i];
    auto loss = [&](const std::vector<double>& t) {
      h.buf.set_host(t);
      return test::dot(h.forward(h.x), dyb);
    };
    std::vector<double> row(J.begin() + b * P, J.begin() + (b + 1) * P);
    EXPECT_LT(test::fd_relative_error(theta, row, loss), 1e-6) << "sample " << b;
    for (long i = 0; i < P; ++i) sum[i] += row[i];
  }
  h.buf.set_host(theta);
  // The rows sum to the batch gradient; the gradient slot is left untouched.
  auto [g, gx] = h.gradients();
  for (long i = 0; i < P; ++i) EXPECT_NEAR(sum[i], g[i], 1e-10);
}
