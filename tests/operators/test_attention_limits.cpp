// Attention buffers that cannot fit are refused before any is allocated, with the size they need:
// the N x N probabilities of dense attention and the O(B N d) buffers of every kind.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <regex>
#include <string>

#include "attnphys/core/error.hpp"
#include "attnphys/operators/attention.hpp"
#include "attnphys/operators/attention_core.hpp"
#include "attnphys/operators/init.hpp"

using namespace attnphys;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
ops::AttentionOptions options(const char* kind) {
  ops::AttentionOptions o;
  o.d_model = 16;
  o.n_heads = 2;
  o.kind = ops::parse_attention_kind(kind);
  return o;
}
#define EXPECT_MATCHES(text, pattern) \
  EXPECT_TRUE(std::regex_search(text, std::regex(pattern))) << "message: " << (text) << "\npattern: " << (pattern)
}  // namespace

TEST(AttentionLimits, DenseProbabilitiesThatCannotFitAreRefusedWithTheirSize) {
  // 64 samples of 2^22 tokens: the probabilities alone are 64 * 2 * 2^44 floats = 9 PB.
  ops::AttentionCache<float> c;
  const std::string m = error_of([&] { c.ensure(ops::AttentionKind::Dense, options("dense"), 64, 1L << 22); });
  EXPECT_MATCHES(m, "^attention \\(dense, 2 heads, d_model 16\\) on 64 samples of 4194304 tokens \\(its N x N "
                    "probabilities alone: 9.01 PB\\) needs 9.01 PB of memory, more than the .* available .*: use the "
                    "tiled attention kind");
  EXPECT_EQ(c.p.extent(0), 0u);  // nothing allocated
  EXPECT_EQ(c.proj.extent(0), 0u);
}

TEST(AttentionLimits, TiledBuffersThatCannotFitAreRefusedToo) {
  ops::AttentionCache<float> c;
  const std::string m = error_of([&] { c.ensure(ops::AttentionKind::Tiled, options("tiled"), 1L << 20, 1L << 20); });
  EXPECT_MATCHES(m, "^attention \\(tiled, 2 heads, d_model 16\\) on 1048576 samples of 1048576 tokens needs [0-9.]+ "
                    "PB of memory, more than the .* available .*: use a smaller batch, or fewer tokens");
  // What fits is allocated as before.
  EXPECT_EQ(error_of([&] { c.ensure(ops::AttentionKind::Tiled, options("tiled"), 2, 64); }), "");
  EXPECT_EQ(c.q.extent(0), 4u);
}

TEST(AttentionLimits, TheForwardRefusesBeforeAllocatingUnderAMemoryCap) {
  // 2 samples of 4096 tokens in dense attention: 268 MB of probabilities, refused under a 100 MB cap; the tiled
  // kind runs the same input in O(N d) memory.
  const long n = 4096, d = 16;
  View2<float> x("x", 2 * n, d), y("y", 2 * n, d);
  for (const char* kind : {"dense", "tiled"}) {
    ops::MultiHeadAttention<float> attn(options(kind), "");
    ParameterBuffer<float> buf;
    ops::InitPlan plan;
    attn.declare(buf, plan);
    buf.allocate();
    ops::init_parameters(buf, plan, 0);
    ops::AttentionCache<float> cache;
    ops::AttentionScratch<float> ws;
    setenv("ATTNPHYS_MEMORY_LIMIT", "100M", 1);
    const std::string m = error_of([&] { attn.forward(y, cache, x, 2, n, buf, ops::IntMask(), ws); });
    unsetenv("ATTNPHYS_MEMORY_LIMIT");
    if (std::string(kind) == "dense") {
      EXPECT_MATCHES(m, "^attention \\(dense, 2 heads, d_model 16\\) on 2 samples of 4096 tokens \\(its N x N "
                        "probabilities alone: 268 MB\\) needs 277 MB of memory, more than the 105 MB available "
                        "\\(ATTNPHYS_MEMORY_LIMIT\\)");
    } else {
      EXPECT_EQ(m, "");
    }
  }
}
