// "Is this sequence strictly increasing?" Each increasing sequence has a shuffled twin made of the same values, so
// a model that sees only the set of values (no positional information) cannot beat chance, while one with a
// positional encoding can learn the task.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attnphys/core/optim.hpp"
#include "attnphys/operators/encoder.hpp"
#include "fd_check.hpp"

using namespace attnphys;

namespace {
constexpr long N = 8;

// Pairs (sorted, shuffled) of the same N values; labels 1, 0.
void make_data(std::vector<float>& x, std::vector<float>& label, long pairs, std::uint64_t seed) {
  x.assign(2 * pairs * N, 0.0f);
  label.assign(2 * pairs, 0.0f);
  for (long p = 0; p < pairs; ++p) {
    CounterRng r(seed, p);
    std::vector<float> v(N);
    for (auto& e : v) e = float(2 * r.uniform() - 1);
    std::sort(v.begin(), v.end());
    std::vector<float> s = v;
    do {  // a shuffle that is not increasing
      for (long i = N - 1; i > 0; --i) std::swap(s[i], s[r.below(i + 1)]);
    } while (std::is_sorted(s.begin(), s.end()));
    std::copy(v.begin(), v.end(), x.begin() + 2 * p * N);
    std::copy(s.begin(), s.end(), x.begin() + (2 * p + 1) * N);
    label[2 * p] = 1.0f;
  }
}

// Trains encoder + mean-pool + linear readout with BCE and Adam; returns the test accuracy.
double train_and_test(const std::string& positional) {
  ops::EncoderOptions o;
  o.d_in = 1;
  o.d_model = 16;
  o.n_heads = 2;
  o.n_layers = 1;
  o.d_ff = 32;
  o.max_len = N;
  o.positional = parse_enum<ops::PositionalKind>(positional, "encoder.positional");
  ops::Encoder<float> enc(o);
  ParameterBuffer<float> buf;
  enc.declare(buf);
  buf.add("head.weight", {1, o.d_model});
  buf.add("head.bias", {1}, false);
  buf.allocate();
  enc.init(buf, 7);
  fill_uniform(buf.view1("head.weight"), 7, 999, -0.25, 0.25);

  OptimizerOptions oo;
  oo.kind = OptimizerKind::Adam;
  oo.lr = 3e-3;
  Optimizer opt(oo);
  ops::EncoderCache<float> cache;
  const long B = 64, d = o.d_model;
  View2<float> y("y", B * N, d), dy("dy", B * N, d);
  auto predict = [&](const std::vector<float>& xb, long batch, std::vector<float>& logit) {
    View2<float> yy("y", batch * N, d);
    enc.forward(yy, cache, test::to_device(xb, batch * N, 1), batch, N, buf);
    const auto yh = to_host(yy);
    const auto w = buf.get_host();
    const auto& hw = buf.block("head.weight");
    logit.assign(batch, w[buf.block("head.bias").offset]);
    for (long b = 0; b < batch; ++b)
      for (long n = 0; n < N; ++n)
        for (long f = 0; f < d; ++f) logit[b] += w[hw.offset + f] * yh(b * N + n, f) / N;
    return yh;
  };
  std::vector<float> xb, lb, logit;
  for (long step = 0; step < 300; ++step) {
    make_data(xb, lb, B / 2, 1000 + step);
    const auto yh = predict(xb, B, logit);
    buf.zero_grads();
    auto g = buf.get_host(Slot::Grads);
    const auto w = buf.get_host();
    const auto& hw = buf.block("head.weight");
    auto dyh = Kokkos::create_mirror_view(dy);
    for (long b = 0; b < B; ++b) {
      const float err = (1.0f / (1.0f + std::exp(-logit[b])) - lb[b]) / B;  // dBCE/dlogit
      g[buf.block("head.bias").offset] += err;
      for (long n = 0; n < N; ++n)
        for (long f = 0; f < d; ++f) {
          g[hw.offset + f] += err * yh(b * N + n, f) / N;
          dyh(b * N + n, f) = err * w[hw.offset + f] / N;
        }
    }
    Kokkos::deep_copy(dy, dyh);
    buf.set_host(g, Slot::Grads);
    enc.backward(Mat<float>(), cache, dy, buf);
    opt.step(buf, oo.lr);
  }
  make_data(xb, lb, 256, 777777);
  predict(xb, 512, logit);
  long correct = 0;
  for (long b = 0; b < 512; ++b) correct += (logit[b] > 0) == (lb[b] > 0.5f);
  return double(correct) / 512.0;
}
}  // namespace

TEST(PositionalLearning, IncreasingSequenceNeedsPositions) {
  const double with = train_and_test("learned");
  const double sinus = train_and_test("sinusoidal");
  const double without = train_and_test("none");
  std::printf("accuracy: learned %.3f, sinusoidal %.3f, none %.3f\n", with, sinus, without);
  EXPECT_GE(with, 0.95);
  EXPECT_GE(sinus, 0.95);
  EXPECT_NEAR(without, 0.5, 0.06);
}
