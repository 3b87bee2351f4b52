// The attention kernels of operators/attention_core.hpp on every enabled execution space (tests/spaces.hpp):
// `AttentionOnSpace.Test<Kokkos::Serial>`, `...<Kokkos::OpenMP>`, `...<Kokkos::Cuda>` as the Kokkos build enables
// them. Every view lives in the space's own memory; inputs are made on the host and copied there. Softmax attention
// in each memory mode (dense with saved probabilities, the blocked FlashAttention-2 path, and on host spaces the
// fused kernels) against a host evaluation of the definition, with causal, window and key masks and a relative
// bias; its gradients, factored, factored-rows and Galerkin attention against central finite differences; head
// split and merge against their index maps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <vector>

#include "attnphys/operators/attention_core.hpp"
#include "fd_check.hpp"
#include "spaces.hpp"

using namespace attnphys;
using namespace attnphys::ops;
using attnphys::test::fd_relative_error;
using attnphys::test::randn;

namespace {

constexpr long kB = 2, kH = 2, kN = 7;  // N is not a multiple of a vector or of a block

// What a test asks of the scores: masks and the relative bias (all off: plain scores).
struct Scores {
  bool causal = false, periodic = false, key_mask = false, bias = false;
  long window = -1;
};

// The key mask: sample 0 attends to every key, sample 1 not to keys 2 and 5.
int key_allowed(long b, long j) { return b == 1 && (j == 2 || j == 5) ? 0 : 1; }

// Host evaluation of o = softmax(q kᵀ / sqrt(dh) + bias, masked) v, straight from the definition.
std::vector<double> reference_sdpa(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, const std::vector<double>& bias, long dh,
                                   const Scores& sc) {
  const long nbh = kB * kH, n = kN, max_len = kN;
  std::vector<double> o(nbh * n * dh, 0.0);
  for (long bh = 0; bh < nbh; ++bh)
    for (long i = 0; i < n; ++i) {
      std::vector<double> s(n, -std::numeric_limits<double>::infinity());
      double mx = -std::numeric_limits<double>::infinity();
      for (long j = 0; j < n; ++j) {
        long dist = std::labs(i - j);
        if (sc.periodic && n - dist < dist) dist = n - dist;
        if ((sc.causal && j > i) || (sc.window >= 0 && dist > sc.window) ||
            (sc.key_mask && !key_allowed(bh / kH, j)))
          continue;
        double x = 0;
        for (long c = 0; c < dh; ++c) x += q[(bh * n + i) * dh + c] * k[(bh * n + j) * dh + c];
        x /= std::sqrt(double(dh));
        if (sc.bias) x += bias[(bh % kH) * relative_table_size(max_len, sc.periodic) +
                               relative_index(i, j, n, max_len, sc.periodic)];
        s[j] = x;
        mx = std::max(mx, x);
      }
      double z = 0;
      for (long j = 0; j < n; ++j) z += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
      for (long j = 0; j < n; ++j) {
        if (std::isinf(s[j])) continue;
        const double p = std::exp(s[j] - mx) / z;
        for (long c = 0; c < dh; ++c) o[(bh * n + i) * dh + c] += p * v[(bh * n + j) * dh + c];
      }
    }
  return o;
}

enum class Mode { Dense, Blocked, Fused };

}  // namespace

template <class Space>
class AttentionOnSpace : public ::testing::Test {
 protected:
  using V3 = Kokkos::View<double***, Kokkos::LayoutRight, typename Space::memory_space>;
  using V2 = Kokkos::View<double**, Kokkos::LayoutRight, typename Space::memory_space>;

  // The spec of `sc` in Space's memory; keeps the bias and key mask views alive in the members.
  ScoreSpec<double, Space> spec(const Scores& sc, const std::vector<double>& bias) {
    ScoreSpec<double, Space> s;
    s.heads = kH;
    s.max_len = kN;
    s.mask.causal = sc.causal;
    s.mask.window = sc.window;
    s.mask.periodic = sc.periodic;
    if (sc.key_mask) {
      Kokkos::View<int**, Kokkos::LayoutRight, typename Space::memory_space> km("key_mask", kB, kN);
      auto h = Kokkos::create_mirror_view(km);
      for (long b = 0; b < kB; ++b)
        for (long j = 0; j < kN; ++j) h(b, j) = key_allowed(b, j);
      Kokkos::deep_copy(km, h);
      s.mask.key_mask = km;
    }
    if (sc.bias) {
      bias_ = test::on_space<Space>(bias, kH, relative_table_size(kN, sc.periodic));
      s.rel_bias = bias_;
    }
    return s;
  }

  struct Out {
    std::vector<double> o, dq, dk, dv, dbias;
  };

  // Forward (and, with dout, backward) of softmax attention in `mode` on [B*H, N, dh] tensors.
  Out run(Mode mode, const Scores& sc, long dh, const std::vector<double>& q, const std::vector<double>& k,
          const std::vector<double>& v, const std::vector<double>& bias, const std::vector<double>* dout) {
    const long nbh = kB * kH, n = kN;
    auto qf = test::on_space<Space>(q, nbh * n, dh), kf = test::on_space<Space>(k, nbh * n, dh),
         vf = test::on_space<Space>(v, nbh * n, dh);
    V3 qd(qf.data(), nbh, n, dh), kd(kf.data(), nbh, n, dh), vd(vf.data(), nbh, n, dh);
    V3 o("o", nbh, n, dh), p;
    V2 lse("lse", nbh, n);
    if (mode == Mode::Dense) p = V3("p", nbh, n, n);
    const auto s = spec(sc, bias);
    AttentionScratch<double, Space> ws;
    ws.fused = mode == Mode::Fused;
    if (mode == Mode::Blocked) {  // several query and key blocks
      ws.tile_budget = 3 * 3;
      ws.min_tile_rows = 1;
    }
    sdpa_forward<double, Space>(o, p, lse, qd, kd, vd, s, ws);
    Out out;
    out.o = test::host_values(o);
    if (!dout) return out;
    auto dof = test::on_space<Space>(*dout, nbh * n, dh);
    V3 dod(dof.data(), nbh, n, dh), dq("dq", nbh, n, dh), dk("dk", nbh, n, dh), dv("dv", nbh, n, dh);
    V2 dbias;
    if (sc.bias) dbias = V2("dbias", kH, relative_table_size(kN, sc.periodic));
    sdpa_backward<double, Space>(dq, dk, dv, dbias, dod, qd, kd, vd, o, p, lse, s, ws);
    out.dq = test::host_values(dq);
    out.dk = test::host_values(dk);
    out.dv = test::host_values(dv);
    if (sc.bias) out.dbias = test::host_values(dbias);
    return out;
  }

  V2 bias_;
};
TYPED_TEST_SUITE(AttentionOnSpace, test::Spaces);

namespace {
// Mode::Fused asks for the fused kernels (ws.fused); where they do not apply (masks, bias, dh not 1, 2 or 4
// vectors, a device space) the blocked path runs with the default blocking, which is then what is tested.
const Mode kModes[] = {Mode::Dense, Mode::Blocked, Mode::Fused};
std::vector<Scores> score_cases() {
  std::vector<Scores> c(4);
  c[1].causal = true;
  c[1].bias = true;
  c[2].window = 2;
  c[2].periodic = true;
  c[2].bias = true;
  c[2].key_mask = true;
  c[3].key_mask = true;
  return c;
}
}  // namespace

TYPED_TEST(AttentionOnSpace, SoftmaxMatchesTheDefinitionInEveryMemoryMode) {
  using Space = TypeParam;
  for (long dh : {4L, 8L}) {
    const long m = kB * kH * kN * dh;
    const auto q = randn(m, 1, 1.5), k = randn(m, 2, 1.5), v = randn(m, 3);
    for (const auto& sc : score_cases()) {
      const auto bias = randn(kH * relative_table_size(kN, sc.periodic), 4);
      const auto ref = reference_sdpa(q, k, v, bias, dh, sc);
      for (Mode mode : kModes) {
        const auto o = this->run(mode, sc, dh, q, k, v, bias, nullptr).o;
        double err = 0;
        for (long i = 0; i < m; ++i) err = std::max(err, std::abs(o[i] - ref[i]));
        EXPECT_LT(err, 1e-12) << "dh " << dh << " mode " << int(mode) << " causal " << sc.causal << " window "
                              << sc.window << " key mask " << sc.key_mask << " bias " << sc.bias;
      }
    }
  }
}

TYPED_TEST(AttentionOnSpace, SoftmaxGradientsMatchFiniteDifferences) {
  using Space = TypeParam;
  for (long dh : {4L, 8L}) {
    const long m = kB * kH * kN * dh;
    const auto q = randn(m, 5, 1.5), k = randn(m, 6, 1.5), v = randn(m, 7), dout = randn(m, 8);
    for (const auto& sc : score_cases()) {
      const auto bias = randn(kH * relative_table_size(kN, sc.periodic), 9);
      for (Mode mode : kModes) {
        const auto g = this->run(mode, sc, dh, q, k, v, bias, &dout);
        auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk, const std::vector<double>& vv,
                         const std::vector<double>& bb) {
          return test::dot(this->run(mode, sc, dh, qq, kk, vv, bb, nullptr).o, dout);
        };
        const std::string what = "dh " + std::to_string(dh) + " mode " + std::to_string(int(mode));
        EXPECT_LT(fd_relative_error(q, g.dq, [&](const auto& x) { return loss(x, k, v, bias); }), 1e-6) << what;
        EXPECT_LT(fd_relative_error(k, g.dk, [&](const auto& x) { return loss(q, x, v, bias); }), 1e-6) << what;
        EXPECT_LT(fd_relative_error(v, g.dv, [&](const auto& x) { return loss(q, k, x, bias); }), 1e-6) << what;
        if (sc.bias)
          EXPECT_LT(fd_relative_error(bias, g.dbias, [&](const auto& x) { return loss(q, k, v, x); }), 1e-6) << what;
      }
    }
  }
}

TYPED_TEST(AttentionOnSpace, FactoredAttentionMatchesItsDefinitionAndGradients) {
  using Space = TypeParam;
  using V3 = typename TestFixture::V3;
  using V2 = typename TestFixture::V2;
  const long nbh = kB * kH, n = kN, dh = 3;
  Scores sc;
  sc.causal = true;
  const long table = relative_table_size(kN, false);
  const auto v0 = randn(nbh * n * dh, 11), alpha0 = randn(kH * table, 12), dout0 = randn(nbh * n * dh, 13);
  const auto s = this->spec(sc, {});
  auto forward = [&](const std::vector<double>& v, const std::vector<double>& alpha, V3* p_out) {
    auto vf = test::on_space<Space>(v, nbh * n, dh);
    auto alpha_d = test::on_space<Space>(alpha, kH, table);
    V3 o("o", nbh, n, dh), p("p", nbh, n, n);
    factored_forward<double, Space>(o, p, V3(vf.data(), nbh, n, dh), alpha_d, s);
    if (p_out) *p_out = p;
    return test::host_values(o);
  };
  V3 p;
  const auto o = forward(v0, alpha0, &p);
  for (long bh = 0; bh < nbh; ++bh)
    for (long i = 0; i < n; ++i)
      for (long c = 0; c < dh; ++c) {
        double x = 0;
        for (long j = 0; j <= i; ++j)
          x += alpha0[(bh % kH) * table + relative_index(i, j, n, kN, false)] * v0[(bh * n + j) * dh + c];
        EXPECT_NEAR(o[(bh * n + i) * dh + c], x, 1e-12);
      }
  auto vf = test::on_space<Space>(v0, nbh * n, dh);
  auto df = test::on_space<Space>(dout0, nbh * n, dh);
  V3 dv("dv", nbh, n, dh);
  V2 dalpha("dalpha", kH, table);
  AttentionScratch<double, Space> ws;
  factored_backward<double, Space>(dv, dalpha, V3(df.data(), nbh, n, dh), V3(vf.data(), nbh, n, dh), p, s, ws);
  auto loss_v = [&](const std::vector<double>& x) { return test::dot(forward(x, alpha0, nullptr), dout0); };
  auto loss_a = [&](const std::vector<double>& x) { return test::dot(forward(v0, x, nullptr), dout0); };
  EXPECT_LT(fd_relative_error(v0, test::host_values(dv), loss_v), 1e-6);
  EXPECT_LT(fd_relative_error(alpha0, test::host_values(dalpha), loss_a), 1e-6);

  // The token-major form: rows [B*N, H*dh], one product per head over the whole batch, same numbers.
  V3 vt("vt", kH, n, kB * dh), ot("ot", kH, n, kB * dh), dvt("dvt", kH, n, kB * dh), pr("p", kH, n, n),
      dpr("dp", kH, n, n);
  const FactoredRowsBuffers<double, Space> buf{vt, ot, dvt, pr, dpr};
  std::vector<double> rows(kB * n * kH * dh), drows(rows.size());
  for (long b = 0; b < kB; ++b)
    for (long h = 0; h < kH; ++h)
      for (long i = 0; i < n; ++i)
        for (long c = 0; c < dh; ++c) {
          rows[(b * n + i) * kH * dh + h * dh + c] = v0[((b * kH + h) * n + i) * dh + c];
          drows[(b * n + i) * kH * dh + h * dh + c] = dout0[((b * kH + h) * n + i) * dh + c];
        }
  V2 out("out", kB * n, kH * dh), din("din", kB * n, kH * dh), dalpha_rows("dalpha_rows", kH, table);
  auto alpha_d = test::on_space<Space>(alpha0, kH, table);
  factored_rows_forward<double, Space>(out, buf, test::on_space<Space>(rows, kB * n, kH * dh), alpha_d, kB, n, s);
  factored_rows_backward<double, Space>(din, dalpha_rows, buf, test::on_space<Space>(drows, kB * n, kH * dh), kB, n,
                                        s);
  const auto out_h = test::host_values(out), din_h = test::host_values(din), dv_h = test::host_values(dv);
  for (long b = 0; b < kB; ++b)
    for (long h = 0; h < kH; ++h)
      for (long i = 0; i < n; ++i)
        for (long c = 0; c < dh; ++c) {
          const long r = (b * n + i) * kH * dh + h * dh + c, t = ((b * kH + h) * n + i) * dh + c;
          EXPECT_NEAR(out_h[r], o[t], 1e-12);
          EXPECT_NEAR(din_h[r], dv_h[t], 1e-12);
        }
  const auto da = test::host_values(dalpha), da_rows = test::host_values(dalpha_rows);
  for (long x = 0; x < kH * table; ++x) EXPECT_NEAR(da_rows[x], da[x], 1e-12);
}

TYPED_TEST(AttentionOnSpace, GalerkinAttentionMatchesItsDefinitionAndGradients) {
  using Space = TypeParam;
  using V3 = typename TestFixture::V3;
  const long nbh = kB * kH, n = kN, dh = 3;
  const auto q0 = randn(nbh * n * dh, 21), k0 = randn(nbh * n * dh, 22), v0 = randn(nbh * n * dh, 23),
             dout0 = randn(nbh * n * dh, 24);
  auto forward = [&](const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                     V3* kv_out) {
    auto qf = test::on_space<Space>(q, nbh * n, dh), kf = test::on_space<Space>(k, nbh * n, dh),
         vf = test::on_space<Space>(v, nbh * n, dh);
    V3 o("o", nbh, n, dh), kv("kv", nbh, dh, dh);
    galerkin_forward<double, Space>(o, kv, V3(qf.data(), nbh, n, dh), V3(kf.data(), nbh, n, dh),
                                    V3(vf.data(), nbh, n, dh));
    if (kv_out) *kv_out = kv;
    return test::host_values(o);
  };
  V3 kv;
  const auto o = forward(q0, k0, v0, &kv);
  for (long bh = 0; bh < nbh; ++bh)
    for (long i = 0; i < n; ++i)
      for (long c = 0; c < dh; ++c) {
        double x = 0;
        for (long a = 0; a < dh; ++a)
          for (long j = 0; j < n; ++j)
            x += q0[(bh * n + i) * dh + a] * k0[(bh * n + j) * dh + a] * v0[(bh * n + j) * dh + c];
        EXPECT_NEAR(o[(bh * n + i) * dh + c], x / n, 1e-12);
      }
  auto qf = test::on_space<Space>(q0, nbh * n, dh), kf = test::on_space<Space>(k0, nbh * n, dh),
       vf = test::on_space<Space>(v0, nbh * n, dh), df = test::on_space<Space>(dout0, nbh * n, dh);
  V3 dq("dq", nbh, n, dh), dk("dk", nbh, n, dh), dv("dv", nbh, n, dh);
  AttentionScratch<double, Space> ws;
  galerkin_backward<double, Space>(dq, dk, dv, V3(df.data(), nbh, n, dh), V3(qf.data(), nbh, n, dh),
                                   V3(kf.data(), nbh, n, dh), V3(vf.data(), nbh, n, dh), kv, ws);
  auto loss = [&](const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
    return test::dot(forward(q, k, v, nullptr), dout0);
  };
  EXPECT_LT(fd_relative_error(q0, test::host_values(dq), [&](const auto& x) { return loss(x, k0, v0); }), 1e-6);
  EXPECT_LT(fd_relative_error(k0, test::host_values(dk), [&](const auto& x) { return loss(q0, x, v0); }), 1e-6);
  EXPECT_LT(fd_relative_error(v0, test::host_values(dv), [&](const auto& x) { return loss(q0, k0, x); }), 1e-6);
}

TYPED_TEST(AttentionOnSpace, SplitAndMergeHeadsFollowTheHeadLayout) {
  using Space = TypeParam;
  using V3 = typename TestFixture::V3;
  using V2 = typename TestFixture::V2;
  const long dh = 3, col0 = 2, ld = col0 + kH * dh + 1;
  const auto rows0 = randn(kB * kN * ld, 31);
  V3 heads("heads", kB * kH, kN, dh);
  split_heads<double, Space>(heads, test::on_space<Space>(rows0, kB * kN, ld), col0, kB, kH);
  const auto hv = test::host_values(heads);
  for (long b = 0; b < kB; ++b)
    for (long h = 0; h < kH; ++h)
      for (long i = 0; i < kN; ++i)
        for (long c = 0; c < dh; ++c)
          EXPECT_EQ(hv[((b * kH + h) * kN + i) * dh + c], rows0[(b * kN + i) * ld + col0 + h * dh + c]);
  V2 back("back", kB * kN, ld);
  merge_heads<double, Space>(back, col0, heads, kB, kH);
  const auto bv = test::host_values(back);
  for (long t = 0; t < kB * kN; ++t)
    for (long x = 0; x < ld; ++x)
      EXPECT_EQ(bv[t * ld + x], x >= col0 && x < col0 + kH * dh ? rows0[t * ld + x] : 0.0);
}
