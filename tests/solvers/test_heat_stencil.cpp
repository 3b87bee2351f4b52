// Stencil features of the heat surrogate (model.stencil): each token gets the physical central differences of the
// field and of every channel, exact for discrete Fourier modes, wrapped on periodic axes and edge-repeated on the
// others, read from the coordinates on any regular grid (non-square, other resolutions).
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/solvers/training/heat_surrogate.hpp"

using namespace attnphys;
using namespace attnphys::training;

namespace {

SurrogateOptions stencil_options(long channels) {
  SurrogateOptions so;
  so.kind = SurrogateKind::Transformer;
  so.stencil = true;
  so.extra_channels = channels;
  so.harmonics = 1;
  so.encoder.d_model = 8;
  so.encoder.n_heads = 2;
  so.encoder.d_ff = 8;
  return so;
}

}  // namespace

TEST(HeatSurrogateStencil, PeriodicDifferencesAreTheDiscreteDerivativesOfAMode) {
  const long n = 32, C = 1;
  const double L = 1.0, h = L / n, k = 2 * M_PI * 3 / L;
  auto so = stencil_options(C);
  EXPECT_EQ(so.num_features(1), 1 + C + 2 * 1 + (1 + C) * 2);
  HeatSurrogate<double> model(so, 1, {L});  // periodic: encoding length = n·h
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 1);
  View1<double> u("u", n), out("out", n);
  View2<double> ex("ex", n, C), coords("x", n, 1);
  auto hu = Kokkos::create_mirror_view(u);
  auto he = Kokkos::create_mirror_view(ex);
  auto hc = Kokkos::create_mirror_view(coords);
  for (long i = 0; i < n; ++i) {
    hc(i, 0) = i * h;
    hu(i) = std::sin(k * i * h);
    he(i, 0) = 2.0 + std::cos(k * i * h);
  }
  Kokkos::deep_copy(u, hu);
  Kokkos::deep_copy(ex, he);
  Kokkos::deep_copy(coords, hc);
  SurrogateCache<double> cache;
  model.forward(out, cache, u, ex, coords, 1, n, buf);
  EXPECT_EQ(cache.grid.nx, n);
  EXPECT_TRUE(cache.grid.px);
  auto f = to_host(cache.features);
  const long col0 = so.num_features(1) - (1 + C) * 2;
  const double l = L / 64, d1 = l * std::sin(k * h) / h, d2 = l * l * (2 * std::cos(k * h) - 2) / (h * h);
  for (long i = 0; i < n; ++i) {
    const double x = i * h;
    ASSERT_NEAR(f(i, col0), d1 * std::cos(k * x), 1e-12) << i;       // û: ℓ D1 sin = ℓ sin(kh)/h cos
    ASSERT_NEAR(f(i, col0 + 1), d2 * std::sin(k * x), 1e-12) << i;   // û: ℓ² D2 sin
    ASSERT_NEAR(f(i, col0 + 2), -d1 * std::sin(k * x), 1e-12) << i;  // channel: D1 cos = −sin
    ASSERT_NEAR(f(i, col0 + 3), d2 * std::cos(k * x), 1e-12) << i;
  }
}

TEST(HeatSurrogateStencil, NonPeriodicNonSquareGridRepeatsTheEdgeValue) {
  // 5 x 3 grid of a box encoded as 2L (non-periodic), u = y: ∂y u = 1 inside, half of it at the two edge rows.
  const long nx = 5, ny = 3, N = nx * ny;
  const double hx = 0.2, hy = 1.0 / 3, Lx = 2 * nx * hx, Ly = 2 * ny * hy;
  auto so = stencil_options(0);
  HeatSurrogate<double> model(so, 2, {Lx, Ly});
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 2);
  View1<double> u("u", 2 * N), out("out", 2 * N);
  View2<double> coords("x", N, 2);
  auto hu = Kokkos::create_mirror_view(u);
  auto hc = Kokkos::create_mirror_view(coords);
  for (long j = 0; j < ny; ++j)
    for (long i = 0; i < nx; ++i) {
      const long q = j * nx + i;
      hc(q, 0) = (i + 0.5) * hx;
      hc(q, 1) = (j + 0.5) * hy;
      hu(q) = hc(q, 1);               // sample 0: u = y
      hu(N + q) = hc(q, 0) * hc(q, 0);  // sample 1: u = x²
    }
  Kokkos::deep_copy(u, hu);
  Kokkos::deep_copy(coords, hc);
  SurrogateCache<double> cache;
  model.forward(out, cache, u, {}, coords, 2, N, buf);
  EXPECT_EQ(cache.grid.nx, nx);
  EXPECT_EQ(cache.grid.ny, ny);
  EXPECT_FALSE(cache.grid.px);
  EXPECT_FALSE(cache.grid.py);
  EXPECT_NEAR(cache.grid.hx, hx, 1e-15);
  EXPECT_NEAR(cache.grid.hy, hy, 1e-15);
  auto f = to_host(cache.features);
  const long col0 = so.num_features(2) - 4;  // û: (x: D1, D2), (y: D1, D2)
  const double lx = Lx / 64, ly = Ly / 64;
  for (long j = 0; j < ny; ++j)
    for (long i = 0; i < nx; ++i) {
      const long q = j * nx + i;
      const bool edge_y = j == 0 || j == ny - 1;
      EXPECT_NEAR(f(q, col0), 0.0, 1e-14);                               // ∂x y = 0
      EXPECT_NEAR(f(q, col0 + 2), ly * (edge_y ? 0.5 : 1.0), 1e-14);     // ∂y y
      EXPECT_NEAR(f(q, col0 + 3), edge_y ? ly * ly * (j == 0 ? 1 : -1) / hy : 0.0, 1e-12);
      // Sample 1, u = x²: ℓ²·D2 = 2ℓ² inside along x.
      if (i > 0 && i < nx - 1) EXPECT_NEAR(f(N + q, col0 + 1), 2 * lx * lx, 1e-12);
    }
  // The kernel kind refuses stencil features.
  SurrogateOptions k;
  k.stencil = true;
  EXPECT_THROW(k.validate(), Error);
}
