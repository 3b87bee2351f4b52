// The fused kernels of the training step: fused tiled attention (register-blocked score tiles, one kernel for the
// forward and one for the backward; AttentionScratch::fused) equals the blocked gemm path it replaces, in float32
// and float64, for head widths of 1, 2 and 4 vectors and sequence lengths that are not multiples of a vector or a
// key block; its gradients match central finite differences; the fused bias + GELU equals bias then GELU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attnphys/operators/attention_core.hpp"
#include "attnphys/operators/encoder.hpp"
#include "fd_check.hpp"

using namespace attnphys;

namespace {

template <class T>
struct SdpaRun {
  std::vector<double> o, lse, dq, dk, dv;
};

// One forward + backward of plain softmax attention on [nbh, n, dh] tensors filled from the seeds.
template <class T>
SdpaRun<T> run_sdpa(long nbh, long n, long dh, bool fused, const std::vector<double>* qkv_override = nullptr,
                    bool bf16 = false, bool tile_schedule = false) {
  View3<T> q("q", nbh, n, dh), k("k", nbh, n, dh), v("v", nbh, n, dh), o("o", nbh, n, dh), dout("dout", nbh, n, dh);
  View3<T> dq("dq", nbh, n, dh), dk("dk", nbh, n, dh), dv("dv", nbh, n, dh);
  View2<T> lse("lse", nbh, n);
  if (qkv_override) {
    const long m = nbh * n * dh;
    auto hq = Kokkos::create_mirror_view(q), hk = Kokkos::create_mirror_view(k), hv = Kokkos::create_mirror_view(v);
    for (long i = 0; i < m; ++i) {
      hq.data()[i] = T((*qkv_override)[i]);
      hk.data()[i] = T((*qkv_override)[m + i]);
      hv.data()[i] = T((*qkv_override)[2 * m + i]);
    }
    Kokkos::deep_copy(q, hq);
    Kokkos::deep_copy(k, hk);
    Kokkos::deep_copy(v, hv);
  } else {
    fill_normal(q, 11, 0, 0.0, 1.5);  // scores of order a few: a peaked softmax, not a flat one
    fill_normal(k, 11, 1, 0.0, 1.5);
    fill_normal(v, 11, 2);
  }
  fill_normal(dout, 11, 3);
  ops::ScoreSpec<T> spec;
  spec.heads = 2;
  ops::AttentionScratch<T> ws;
  ws.fused = fused;
  ws.bf16 = bf16;
  ws.bf16_tile_schedule = tile_schedule;
  ws.tile_budget = 16 * 16;  // the blocked path: several query and key blocks
  ws.min_tile_rows = 1;
  ops::sdpa_forward<T>(o, Mat3<T>(), lse, q, k, v, spec, ws);
  ops::sdpa_backward<T>(dq, dk, dv, Mat<T>(), dout, q, k, v, o, ConstMat3<T>(), lse, spec, ws);
  Kokkos::fence();
  return {test::to_vector(o), test::to_vector(lse), test::to_vector(dq), test::to_vector(dk), test::to_vector(dv)};
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

template <class T>
void expect_fused_equals_blocked(double tol) {
  const long lanes = ops::fused_attention_lanes(sizeof(T));  // one vector of the fused kernels
  if (lanes == 0) GTEST_SKIP() << "this build has no fused attention kernels";
  struct Shape {
    long nbh, n, dh;
  };
  // n: below one vector, not a multiple of a vector, of a key block (64) or of the query rows per item.
  const Shape shapes[] = {{3, 5, lanes}, {2, 37, lanes}, {3, 130, lanes}, {2, 71, 2 * lanes}, {2, 45, 4 * lanes},
                          {1, 2, lanes}};
  for (const auto& s : shapes) {
    SCOPED_TRACE("nbh " + std::to_string(s.nbh) + " n " + std::to_string(s.n) + " dh " + std::to_string(s.dh));
    const auto a = run_sdpa<T>(s.nbh, s.n, s.dh, true), b = run_sdpa<T>(s.nbh, s.n, s.dh, false);
    EXPECT_GT(max_abs(b.o), 0.1);
    EXPECT_GT(max_abs(b.dq), 1e-3);
    EXPECT_LE(max_diff(a.o, b.o), tol * max_abs(b.o));
    EXPECT_LE(max_diff(a.lse, b.lse), tol * std::max(1.0, max_abs(b.lse)));
    EXPECT_LE(max_diff(a.dq, b.dq), tol * max_abs(b.dq));
    EXPECT_LE(max_diff(a.dk, b.dk), tol * max_abs(b.dk));
    EXPECT_LE(max_diff(a.dv, b.dv), tol * max_abs(b.dv));
  }
}

}  // namespace

TEST(FusedAttention, EqualsTheBlockedPathInFloat64) { expect_fused_equals_blocked<double>(1e-12); }

TEST(FusedAttention, EqualsTheBlockedPathInFloat32) { expect_fused_equals_blocked<float>(2e-5); }

TEST(FusedAttention, GradientsMatchFiniteDifferences) {
  // L = <dout, o(q, k, v)> in float64 on the fused path, n = 19 (a partial vector and rows past n in the last
  // query block), dh = 16 (two vectors of doubles): dq, dk, dv from the fused backward against central differences.
  const long nbh = 2, n = 19, dh = 16, m = nbh * n * dh;
  const auto theta = test::randn(3 * m, 5, 1.2);
  const auto base = run_sdpa<double>(nbh, n, dh, true, &theta);
  std::vector<double> analytic(base.dq);
  analytic.insert(analytic.end(), base.dk.begin(), base.dk.end());
  analytic.insert(analytic.end(), base.dv.begin(), base.dv.end());
  View3<double> dout("dout", nbh, n, dh);
  fill_normal(dout, 11, 3);  // the same cotangent as run_sdpa's
  const auto w = test::to_vector(dout);
  auto loss = [&](const std::vector<double>& t) { return test::dot(w, run_sdpa<double>(nbh, n, dh, true, &t).o); };
  std::vector<long> which;
  for (long i = 0; i < 3 * m; i += 7) which.push_back(i);  // every 7th coordinate of q, k and v
  const double err = test::fd_relative_error(theta, analytic, loss, which);
  EXPECT_LT(err, 1e-7);
}

// bf16 attention on AMX (AttentionScratch::bf16): bf16 operands, float32 accumulation and softmax. Against the
// float32 fused path: every output within 2e-2 of its largest magnitude (bf16 keeps 8 bits of mantissa: inputs
// rounded by <= 2^-9 relative), and not equal to it (the bf16 kernels ran). Lengths below a tile, not a multiple of
// 16, 32 or 64, and several key blocks.
TEST(Bf16Attention, MatchesFloat32WithinBf16Rounding) {
  if (!ops::bf16_attention_available()) GTEST_SKIP() << ops::bf16_attention_unavailable_reason();
  const long shapes[][2] = {{3, 5}, {2, 37}, {3, 130}, {2, 64}, {1, 200}, {2, 16}};
  for (const auto& s : shapes)
    for (const bool tiles : {false, true}) {  // without AMX: the AVX512-BF16 forward, and the AMX kernel's schedule
      SCOPED_TRACE("nbh " + std::to_string(s[0]) + " n " + std::to_string(s[1]) + (tiles ? " tile schedule" : ""));
      const auto a = run_sdpa<float>(s[0], s[1], 16, true, nullptr, true, tiles);
      const auto b = run_sdpa<float>(s[0], s[1], 16, true);
      EXPECT_GT(max_abs(b.o), 0.1);
      EXPECT_GT(max_abs(b.dq), 1e-3);
      EXPECT_LE(max_diff(a.o, b.o), 2e-2 * max_abs(b.o));
      EXPECT_LE(max_diff(a.lse, b.lse), 2e-2 * std::max(1.0, max_abs(b.lse)));
      EXPECT_LE(max_diff(a.dq, b.dq), 2e-2 * max_abs(b.dq));
      EXPECT_LE(max_diff(a.dk, b.dk), 2e-2 * max_abs(b.dk));
      EXPECT_LE(max_diff(a.dv, b.dv), 2e-2 * max_abs(b.dv));
      EXPECT_GT(max_diff(a.o, b.o), 0.0);
    }
}

// The online softmax across key blocks of 128, on both schedules (the AVX512-BF16 one and the AMX one): (a) scores
// that grow block by block (the first block's maximum about 7 below the last's: every later block raises the maximum
// and rescales what the rows hold); (b) one key per slice far above the rest (score 100 in natural units): the
// output is its value. Against the float32 kernels as above, and the gradients in (a).
TEST(Bf16Attention, OnlineMaximumAcrossKeyBlocks) {
  if (!ops::bf16_attention_available()) GTEST_SKIP() << ops::bf16_attention_unavailable_reason();
  const long nbh = 2, n = 300, dh = 16, m = nbh * n * dh;
  for (const bool tiles : {false, true})
    for (const bool sharp : {false, true}) {
      SCOPED_TRACE(std::string(sharp ? "one key far above the rest" : "scores growing with the key index") +
                   (tiles ? ", tile schedule" : ""));
      std::vector<double> theta = test::randn(3 * m, 21, sharp ? 0.3 : 0.5);
      for (long bh = 0; bh < nbh; ++bh)
        for (long i = 0; i < n; ++i) {
          double* q = &theta[(bh * n + i) * dh];
          double* k = &theta[m + (bh * n + i) * dh];
          if (sharp) {
            q[0] = 20.0;  // the special key 20 e0: its score 100 (natural units)
            if (i == 250) k[0] = 20.0;
          } else {
            q[0] = 3.0;  // score ~ 0.75 k0: k0 from -4 (first block) to +6.7 (last)
            k[0] = -4.0 + 10.7 * double(i) / double(n - 1);
          }
        }
      const auto a = run_sdpa<float>(nbh, n, dh, true, &theta, true, tiles);
      const auto b = run_sdpa<float>(nbh, n, dh, true, &theta);
      EXPECT_GT(max_abs(b.o), 0.1);
      EXPECT_LE(max_diff(a.o, b.o), 2e-2 * max_abs(b.o));
      EXPECT_LE(max_diff(a.lse, b.lse), 2e-2 * std::max(1.0, max_abs(b.lse)));
      EXPECT_LE(max_diff(a.dv, b.dv), 2e-2 * max_abs(b.dv));
      if (!sharp) {  // a one-hot softmax has gradients of e^-90 in q and k: nothing to compare there
        // dq = Σ_j dS_j k_j with Σ_j dS_j = 0 and k0 up to 6.7 on every key: the sum cancels what dS's bf16 rounding
        // does not, so dq agrees to about 2.8e-2 of its largest value here; a wrong lse from the forward would be off
        // by its whole size.
        EXPECT_GT(max_abs(b.dq), 1e-3);
        EXPECT_LE(max_diff(a.dq, b.dq), 5e-2 * max_abs(b.dq));
        EXPECT_LE(max_diff(a.dk, b.dk), 2e-2 * max_abs(b.dk));
      } else {
        for (long bh = 0; bh < nbh; ++bh)  // the output is the special key's value
          for (long c = 0; c < dh; ++c)
            EXPECT_NEAR(a.o[(bh * n + 7) * dh + c], theta[2 * m + (bh * n + 250) * dh + c], 2e-2);
      }
    }
}

// Where the bf16 kernels do not apply (head width 32, or a CPU without AMX) they refuse with an error that says
// what to set, rather than computing something else.
TEST(Bf16Attention, RefusesWhatItDoesNotCover) {
  try {
    run_sdpa<float>(2, 20, 32, true, nullptr, true);
    FAIL() << "head width 32 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_precision = float32"), std::string::npos) << e.what();
  }
  if (!ops::bf16_attention_available()) {
    EXPECT_FALSE(ops::bf16_attention_unavailable_reason().empty());
    EXPECT_THROW(run_sdpa<float>(2, 20, 16, true, nullptr, true), Error);
  }
}

namespace {
// One forward and backward of a float encoder (two heads of width 16, tiled attention, n = 70) at a precision:
// the outputs and the parameter gradients.
std::pair<std::vector<double>, std::vector<double>> encoder_step(ops::AttentionPrecision precision) {
  ops::EncoderOptions o;
  o.d_model = 32;
  o.n_heads = 2;
  o.n_layers = 2;
  o.d_ff = 64;
  o.attention = ops::AttentionKind::Tiled;
  o.attention_precision = precision;
  ops::Encoder<float> enc(o);
  ParameterBuffer<float> buf;
  enc.declare(buf);
  buf.allocate();
  enc.init(buf, 3);
  const long b = 2, n = 70;
  View2<float> x("x", b * n, 32), y("y", b * n, 32), dy("dy", b * n, 32);
  fill_normal(x, 4, 0);
  fill_normal(dy, 4, 1);
  ops::EncoderCache<float> cache;
  enc.forward(y, cache, x, b, n, buf);
  buf.zero_grads();
  enc.backward(Mat<float>(), cache, dy, buf);
  Kokkos::fence();
  const auto g = buf.get_host(Slot::Grads);
  return {test::to_vector(y), std::vector<double>(g.begin(), g.end())};
}
double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}
}  // namespace

// encoder.attention_precision = bf16 trains the same model: outputs within 2e-3 and parameter gradients within 5e-3
// (relative L2) of float32's (measured on a Xeon with AMX: 2.1e-4 and 7.4e-4).
TEST(Bf16Attention, EncoderStepMatchesFloat32) {
  if (!ops::bf16_attention_available()) GTEST_SKIP() << ops::bf16_attention_unavailable_reason();
  const auto a = encoder_step(ops::AttentionPrecision::BF16), b = encoder_step(ops::AttentionPrecision::Float32);
  const double ey = rel_l2(a.first, b.first), eg = rel_l2(a.second, b.second);
  EXPECT_LE(ey, 2e-3);
  EXPECT_LE(eg, 5e-3);
  EXPECT_GT(ey, 0.0);
  RecordProperty("output_rel_l2", std::to_string(ey));
  RecordProperty("gradient_rel_l2", std::to_string(eg));
}

// The options refuse bf16 where its kernels do not apply, naming what to change.
TEST(Bf16Attention, OptionsRefuseWhatTheKernelsDoNotCover) {
  auto base = [] {
    ops::EncoderOptions o;
    o.d_model = 32;
    o.n_heads = 2;
    o.attention = ops::AttentionKind::Tiled;
    o.attention_precision = ops::AttentionPrecision::BF16;
    return o;
  };
  auto o = base();
  o.attention = ops::AttentionKind::Dense;
  EXPECT_THROW(o.validate(), Error);
  o = base();
  o.n_heads = 1;  // head width 32
  EXPECT_THROW(o.validate(), Error);
  o = base();
  o.causal = true;
  EXPECT_THROW(o.validate(), Error);
  o = base();
  if (ops::bf16_attention_available()) EXPECT_NO_THROW(o.validate());
  else EXPECT_THROW(o.validate(), Error);
}

TEST(FusedLayers, BiasGeluEqualsBiasThenGelu) {
  const long m = 37, n = 40;  // n not a multiple of a vector
  View2<float> f("f", m, n), f2("f2", m, n), g("g", m, n), g2("g2", m, n);
  View1<float> b("b", n);
  fill_normal(f, 3, 0, 0.0, 2.0);
  fill_normal(b, 3, 1);
  Kokkos::deep_copy(f2, f);
  ops::bias_gelu_forward<float>(f, g, b);
  // Reference: add the bias row by row, then the elementwise GELU.
  auto hf2 = Kokkos::create_mirror_view(f2);
  auto hb = Kokkos::create_mirror_view(b);
  Kokkos::deep_copy(hf2, f2);
  Kokkos::deep_copy(hb, b);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) hf2(i, j) += hb(j);
  Kokkos::deep_copy(f2, hf2);
  ops::gelu_forward<float>(g2, f2);
  Kokkos::fence();
  const auto a = test::to_vector(f), a2 = test::to_vector(f2), y = test::to_vector(g), y2 = test::to_vector(g2);
  EXPECT_EQ(max_diff(a, a2), 0.0);  // f keeps the pre-activation
  EXPECT_LE(max_diff(y, y2), 1e-6 * max_abs(y2));
  EXPECT_GT(max_abs(y2), 1.0);
}
