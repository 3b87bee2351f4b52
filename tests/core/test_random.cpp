// Counter-based random numbers: reproducible for a seed, different across seeds and streams, right moments.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/random.hpp"

using namespace attnphys;

TEST(Random, SameSeedSameNumbers) {
  View1<double> a("a", 10000), b("b", 10000), c("c", 10000), d("d", 10000);
  fill_normal(a, 42, 0);
  fill_normal(b, 42, 0);
  fill_normal(c, 43, 0);
  fill_normal(d, 42, 1);
  auto ha = to_host(a), hb = to_host(b), hc = to_host(c), hd = to_host(d);
  int same_c = 0, same_d = 0;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(ha(i), hb(i));
    same_c += ha(i) == hc(i);
    same_d += ha(i) == hd(i);
  }
  EXPECT_EQ(same_c, 0);
  EXPECT_EQ(same_d, 0);
}

TEST(Random, NormalMoments) {
  const int n = 200000;
  View1<double> a("a", n);
  fill_normal(a, 1, 0, 2.0, 3.0);
  auto h = to_host(a);
  double s = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n; ++i) s += h(i);
  const double mean = s / n;
  for (int i = 0; i < n; ++i) {
    const double d = h(i) - mean;
    s2 += d * d;
    s4 += d * d * d * d;
  }
  const double var = s2 / n, kurt = s4 / n / (var * var);
  EXPECT_NEAR(mean, 2.0, 5 * 3.0 / std::sqrt(n));
  EXPECT_NEAR(var, 9.0, 9.0 * 5 * std::sqrt(2.0 / n));
  EXPECT_NEAR(kurt, 3.0, 0.05);
}

TEST(Random, UniformRangeAndMean) {
  const int n = 100000;
  View1<float> a("a", n);
  fill_uniform(a, 5, 3, -1.0, 3.0);
  auto h = to_host(a);
  double s = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(h(i), -1.0f);
    ASSERT_LT(h(i), 3.0f);
    s += h(i);
  }
  EXPECT_NEAR(s / n, 1.0, 5 * 4.0 / std::sqrt(12.0 * n));
}

TEST(Random, CounterStreamIsSequenceIndependentOfThreads) {
  // The same (seed, stream, counter) gives the same number on the host, whatever fill produced it.
  View1<double> a("a", 8);
  fill_uniform(a, 9, 4);
  auto h = to_host(a);
  for (int i = 0; i < 8; ++i) {
    CounterRng r(9, 4, i);
    EXPECT_EQ(h(i), r.uniform());
  }
}
