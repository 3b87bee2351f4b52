// Elementary layers: every backward against central finite differences (double), forward against definitions.
// Each test runs once per enabled execution space (tests/spaces.hpp): `LayersOnSpace.Test<Kokkos::Serial>` etc.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/operators/layers.hpp"
#include "fd_check.hpp"
#include "spaces.hpp"

using namespace attnphys;
using namespace attnphys::ops;
using attnphys::test::fd_relative_error;
using attnphys::test::randn;

namespace {
constexpr long M = 5, IN = 7, OUT = 4;
}

template <class Space>
class LayersOnSpace : public ::testing::Test {
 protected:
  using V2 = Kokkos::View<double**, Kokkos::LayoutRight, typename Space::memory_space>;
  using V1 = Kokkos::View<double*, Kokkos::LayoutRight, typename Space::memory_space>;
};
TYPED_TEST_SUITE(LayersOnSpace, test::Spaces);

TYPED_TEST(LayersOnSpace, LinearMatchesDefinitionAndGradients) {
  using Space = TypeParam;
  using V2 = typename TestFixture::V2;
  using V1 = typename TestFixture::V1;
  auto to_device = [](const std::vector<double>& v, long r, long c) { return test::on_space<Space>(v, r, c); };
  auto to_vector = [](const auto& v) { return test::host_values(v); };
  const auto x0 = randn(M * IN, 1), w0 = randn(OUT * IN, 2), b0 = randn(OUT, 3), dy0 = randn(M * OUT, 4);
  auto run = [&](const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
    V2 y("y", M, OUT);
    auto bd = to_device(b, 1, OUT);
    linear_forward<double, Space>(y, to_device(x, M, IN), to_device(w, OUT, IN), Kokkos::subview(bd, 0, Kokkos::ALL));
    return to_vector(y);
  };
  const auto y = run(x0, w0, b0);
  for (long i = 0; i < M; ++i)
    for (long o = 0; o < OUT; ++o) {
      double s = b0[o];
      for (long k = 0; k < IN; ++k) s += x0[i * IN + k] * w0[o * IN + k];
      EXPECT_NEAR(y[i * OUT + o], s, 1e-12);
    }
  V2 dx("dx", M, IN), dw("dw", OUT, IN);
  V1 db("db", OUT);
  auto dy = to_device(dy0, M, OUT);
  linear_backward<double, Space>(dx, dw, db, dy, to_device(x0, M, IN), to_device(w0, OUT, IN));
  auto loss_x = [&](const std::vector<double>& x) { return test::dot(run(x, w0, b0), dy0); };
  auto loss_w = [&](const std::vector<double>& w) { return test::dot(run(x0, w, b0), dy0); };
  auto loss_b = [&](const std::vector<double>& b) { return test::dot(run(x0, w0, b), dy0); };
  EXPECT_LT(fd_relative_error(x0, to_vector(dx), loss_x), 1e-6);
  EXPECT_LT(fd_relative_error(w0, to_vector(dw), loss_w), 1e-6);
  EXPECT_LT(fd_relative_error(b0, to_vector(db), loss_b), 1e-6);
  // Parameter gradients accumulate.
  linear_backward<double, Space>(dx, dw, db, dy, to_device(x0, M, IN), to_device(w0, OUT, IN));
  const auto db2 = to_vector(db);
  double colsum = 0;
  for (long i = 0; i < M; ++i) colsum += dy0[i * OUT + 1];
  EXPECT_NEAR(db2[1], 2 * colsum, 1e-12);
}

TYPED_TEST(LayersOnSpace, LayerNormGradients) {
  using Space = TypeParam;
  using V2 = typename TestFixture::V2;
  using V1 = typename TestFixture::V1;
  auto to_device = [](const std::vector<double>& v, long r, long c) { return test::on_space<Space>(v, r, c); };
  auto to_vector = [](const auto& v) { return test::host_values(v); };
  const long d = 6;
  const auto x0 = randn(M * d, 5, 2.0), w0 = randn(d, 6), b0 = randn(d, 7), dy0 = randn(M * d, 8);
  auto run = [&](const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
    V2 y("y", M, d);
    V1 mean("m", M), rstd("r", M);
    auto wd = to_device(w, 1, d), bd = to_device(b, 1, d);
    layernorm_forward<double, Space>(y, mean, rstd, to_device(x, M, d), Kokkos::subview(wd, 0, Kokkos::ALL),
                              Kokkos::subview(bd, 0, Kokkos::ALL));
    return to_vector(y);
  };
  // Normalised rows have mean b-weighted zero: with w = 1, b = 0 each row has mean 0 and variance 1 - eps effect.
  const auto yn = run(x0, std::vector<double>(d, 1.0), std::vector<double>(d, 0.0));
  double mu = 0, var = 0;
  for (long k = 0; k < d; ++k) mu += yn[k] / d;
  for (long k = 0; k < d; ++k) var += (yn[k] - mu) * (yn[k] - mu) / d;
  EXPECT_NEAR(mu, 0.0, 1e-12);
  EXPECT_NEAR(var, 1.0, 1e-4);

  V2 y("y", M, d), dx("dx", M, d);
  V1 mean("m", M), rstd("r", M), dw("dw", d), db("db", d);
  auto xd = to_device(x0, M, d), wd = to_device(w0, 1, d), bd = to_device(b0, 1, d);
  auto w1 = Kokkos::subview(wd, 0, Kokkos::ALL);
  layernorm_forward<double, Space>(y, mean, rstd, xd, w1, Kokkos::subview(bd, 0, Kokkos::ALL));
  layernorm_backward<double, Space>(dx, dw, db, to_device(dy0, M, d), xd, w1, mean, rstd);
  EXPECT_LT(fd_relative_error(x0, to_vector(dx), [&](auto& x) { return test::dot(run(x, w0, b0), dy0); }), 1e-6);
  EXPECT_LT(fd_relative_error(w0, to_vector(dw), [&](auto& w) { return test::dot(run(x0, w, b0), dy0); }), 1e-6);
  EXPECT_LT(fd_relative_error(b0, to_vector(db), [&](auto& b) { return test::dot(run(x0, w0, b), dy0); }), 1e-6);
}

TYPED_TEST(LayersOnSpace, GeluIsErfFormAndGradient) {
  using Space = TypeParam;
  using V2 = typename TestFixture::V2;
  auto to_device = [](const std::vector<double>& v, long r, long c) { return test::on_space<Space>(v, r, c); };
  auto to_vector = [](const auto& v) { return test::host_values(v); };
  const auto x0 = randn(M * IN, 9, 2.0), dy0 = randn(M * IN, 10);
  auto run = [&](const std::vector<double>& x) {
    V2 y("y", M, IN);
    gelu_forward<double, Space>(y, to_device(x, M, IN));
    return to_vector(y);
  };
  const auto y = run(x0);
  for (long i = 0; i < M * IN; ++i)
    EXPECT_NEAR(y[i], 0.5 * x0[i] * (1 + std::erf(x0[i] / std::sqrt(2.0))), 1e-14);
  V2 dx("dx", M, IN);
  gelu_backward<double, Space>(dx, to_device(dy0, M, IN), to_device(x0, M, IN));
  EXPECT_LT(fd_relative_error(x0, to_vector(dx), [&](auto& x) { return test::dot(run(x), dy0); }), 1e-6);
}

TYPED_TEST(LayersOnSpace, SoftmaxRowsSumToOneAndGradient) {
  using Space = TypeParam;
  using V2 = typename TestFixture::V2;
  auto to_device = [](const std::vector<double>& v, long r, long c) { return test::on_space<Space>(v, r, c); };
  auto to_vector = [](const auto& v) { return test::host_values(v); };
  const auto x0 = randn(M * IN, 11, 3.0), dy0 = randn(M * IN, 12);
  auto run = [&](const std::vector<double>& x) {
    V2 y("y", M, IN);
    softmax_forward<double, Space>(y, to_device(x, M, IN));
    return to_vector(y);
  };
  const auto y = run(x0);
  for (long i = 0; i < M; ++i) {
    double s = 0;
    for (long j = 0; j < IN; ++j) s += y[i * IN + j];
    EXPECT_NEAR(s, 1.0, 1e-14);
  }
  V2 dx("dx", M, IN);
  softmax_backward<double, Space>(dx, to_device(dy0, M, IN), to_device(y, M, IN));
  EXPECT_LT(fd_relative_error(x0, to_vector(dx), [&](auto& x) { return test::dot(run(x), dy0); }), 1e-6);
}

TEST(Layers, FastExpFloatIsAccurateAndUnderflowsToZero) {
  double worst = 0;
  for (int i = 0; i <= 100000; ++i) {
    const float x = -85.0f + 95.0f * float(i) / 100000.0f;
    const double e = std::exp(double(x));
    worst = std::max(worst, std::abs(double(fast_exp(x)) - e) / e);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(-1e6f), 0.0f);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}
