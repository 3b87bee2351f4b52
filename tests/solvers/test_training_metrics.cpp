// Normaliser (Welford, no cancellation) and error metrics on hand-made fields.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/solvers/training/metrics.hpp"
#include "attnphys/solvers/training/normalizer.hpp"

using namespace attnphys;
using namespace attnphys::training;

TEST(Normalizer, LargeMeanDoesNotCancel) {
  // 300 ± 1e-3: E[x²] − E[x]² in double loses every digit of the variance (9e4 vs 1e-6).
  std::vector<double> x(100000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3e5 + ((i % 2) ? 1e-3 : -1e-3);
  Normalizer n;
  n.update(x.data(), x.size());
  n.finalize();
  EXPECT_NEAR(n.mean(), 3e5, 1e-9);
  EXPECT_NEAR(n.stddev(), 1e-3, 1e-9);  // inputs themselves carry 3e5 * 2^-53 rounding
  double s = 0, s2 = 0;
  for (double v : x) s += v, s2 += v * v;
  const double naive = s2 / x.size() - (s / x.size()) * (s / x.size());
  EXPECT_GT(std::abs(naive - 1e-6), 1e-7) << "the naive formula should fail here, or the test proves nothing";
}

TEST(Normalizer, MergeEqualsSinglePass) {
  RunningStats a, b, all;
  for (int i = 0; i < 1000; ++i) {
    const double v = std::sin(i) * 5 + 2;
    (i < 300 ? a : b).add(v);
    all.add(v);
  }
  a.merge(b);
  EXPECT_NEAR(a.mean, all.mean, 1e-13);
  EXPECT_NEAR(a.variance(), all.variance(), 1e-12);
  EXPECT_EQ(a.count, all.count);
}

TEST(Normalizer, RoundTripAndBadData) {
  Normalizer n;
  std::vector<double> d{1, 2, 3, 4};
  n.update(d.data(), d.size());
  n.finalize();
  View1<double> v("v", 4);
  auto h = Kokkos::create_mirror_view(v);
  for (int i = 0; i < 4; ++i) h(i) = d[i];
  Kokkos::deep_copy(v, h);
  n.normalize(v);
  auto z = to_host(v);
  EXPECT_NEAR(z(0), (1 - 2.5) / std::sqrt(1.25), 1e-14);
  n.denormalize(v);
  z = to_host(v);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(z(i), d[i], 1e-14);
  std::vector<double> bad{1, NAN};
  EXPECT_THROW(n.update(bad.data(), 2), Error);
  Normalizer empty;
  EXPECT_THROW(empty.finalize(), Error);
}

TEST(Metrics, HandMadeFields) {
  const int ny = 16, nx = 16;
  std::vector<double> ref(ny * nx), pred(ny * nx);
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) ref[y * nx + x] = 2.0;
  // A constant offset of 0.1: rel L2 = 0.1/2, RMSE 0.1, all error in the k = 0 (low) band, cRMSE 0.1.
  for (size_t i = 0; i < pred.size(); ++i) pred[i] = ref[i] + 0.1;
  auto m = field_metrics(pred.data(), ref.data(), ny, nx);
  EXPECT_NEAR(m.rel_l2, 0.05, 1e-14);
  EXPECT_NEAR(m.rmse, 0.1, 1e-14);
  EXPECT_NEAR(m.max_err, 0.1, 1e-14);
  EXPECT_NEAR(m.crmse, 0.1, 1e-14);
  EXPECT_NEAR(m.brmse, 0.1, 1e-14);
  EXPECT_NEAR(m.frmse_low, 0.1, 1e-12);
  EXPECT_NEAR(m.frmse_mid, 0.0, 1e-12);
  EXPECT_NEAR(m.frmse_high, 0.0, 1e-12);
  // A mode with wavenumber (6, 0) lands in the mid band, has zero mean (cRMSE 0) and RMSE amplitude/sqrt(2).
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) pred[y * nx + x] = ref[y * nx + x] + 0.3 * std::cos(2 * M_PI * 6 * x / nx);
  m = field_metrics(pred.data(), ref.data(), ny, nx);
  EXPECT_NEAR(m.rmse, 0.3 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(m.frmse_mid, m.rmse, 1e-12);
  EXPECT_NEAR(m.frmse_low, 0.0, 1e-12);
  EXPECT_NEAR(m.crmse, 0.0, 1e-12);
  // An error only in the interior leaves bRMSE at zero.
  std::fill(pred.begin(), pred.end(), 2.0);
  pred[5 * nx + 5] = 3.0;
  m = field_metrics(pred.data(), ref.data(), ny, nx);
  EXPECT_EQ(m.brmse, 0.0);
  EXPECT_NEAR(m.max_err, 1.0, 1e-15);
  EXPECT_NEAR(m.frmse_low * m.frmse_low + m.frmse_mid * m.frmse_mid + m.frmse_high * m.frmse_high,
              m.rmse * m.rmse, 1e-12);
}
