// The heat surrogate's grid kernels (solvers/training/surrogate_kernels.hpp) on every enabled execution space
// (tests/spaces.hpp): `SurrogateKernelsOnSpace.Test<Kokkos::Serial>`, `...<Kokkos::OpenMP>`, `...<Kokkos::Cuda>`.
// The stencil features and the conditioned local term against host evaluations of their definitions (periodic and
// non-periodic axes, each edge rule, r = 1 and 2, 2D and 3D), and each backward as the exact adjoint of its forward:
// <g, F(x)> = <F*(g), x>.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnphys/solvers/training/surrogate_kernels.hpp"
#include "operators/fd_check.hpp"
#include "spaces.hpp"

using namespace attnphys;
using namespace attnphys::training;
using attnphys::test::dot;
using attnphys::test::randn;

namespace {

constexpr long kBatch = 2;

struct GridCase {
  int dim;
  SurrogateGrid g;
};
std::vector<GridCase> grids() {
  SurrogateGrid a;  // 2D: x open, y periodic
  a.nx = 5, a.ny = 4, a.hx = 0.2, a.hy = 0.25, a.px = false, a.py = true;
  SurrogateGrid b;  // 3D: x periodic, y and z open
  b.nx = 4, b.ny = 3, b.nz = 5, b.hx = 0.25, b.hy = 0.3, b.hz = 0.2, b.px = true;
  SurrogateGrid c;  // 1D, open
  c.nx = 7, c.hx = 1.0 / 7;
  SurrogateGrid d;  // 2D, x open, y periodic, large enough for interior tokens at r = 2 (the transposed stencil)
  d.nx = 9, d.ny = 8, d.hx = 1.0 / 9, d.hy = 0.125, d.px = false, d.py = true;
  return {{2, a}, {3, b}, {1, c}, {2, d}};
}
long points(const SurrogateGrid& g) { return g.nx * g.ny * g.nz; }

// Host: the neighbour index along one axis and the sign it carries (the rule written out once more, by cases).
long neighbour(long i, long s, long n, bool periodic, LocalEdge e, int& sign) {
  const long k = i + s;
  if (periodic) return ((k % n) + n) % n;
  if (k >= 0 && k < n) return k;
  if (e == LocalEdge::Clamp) return k < 0 ? 0 : n - 1;
  long m = k < 0 ? -1 - k : 2 * n - 1 - k;
  if (e == LocalEdge::Odd) sign = -sign;
  return m < 0 ? 0 : (m >= n ? n - 1 : m);
}

std::vector<double> reference_local(const std::vector<double>& w, const std::vector<double>& fin,
                                    const SurrogateGrid& g, int dim, long r, LocalEdge e) {
  const long len = points(g), ry = dim > 1 ? r : 0, rz = dim > 2 ? r : 0, wx = 2 * r + 1, wy = 2 * ry + 1;
  const long S = wx * wy * (2 * rz + 1);
  std::vector<double> out(kBatch * len, 0.0);
  for (long b = 0; b < kBatch; ++b)
    for (long n = 0; n < len; ++n) {
      const long i = n % g.nx, j = (n / g.nx) % g.ny, k = n / (g.nx * g.ny), t = b * len + n;
      for (long sz = -rz; sz <= rz; ++sz)
        for (long sy = -ry; sy <= ry; ++sy)
          for (long sx = -r; sx <= r; ++sx) {
            int sign = 1;
            const long kk = neighbour(k, sz, g.nz, g.pz, e, sign), jj = neighbour(j, sy, g.ny, g.py, e, sign),
                       ii = neighbour(i, sx, g.nx, g.px, e, sign);
            const long s = ((sz + rz) * wy + sy + ry) * wx + sx + r;
            out[t] += w[t * S + s] * sign * fin[b * len + (kk * g.ny + jj) * g.nx + ii];
          }
    }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

template <class Space>
class SurrogateKernelsOnSpace : public ::testing::Test {
 protected:
  using V1 = Kokkos::View<double*, Kokkos::LayoutRight, typename Space::memory_space>;
  using V2 = Kokkos::View<double**, Kokkos::LayoutRight, typename Space::memory_space>;
  static V1 vec(const std::vector<double>& x) {
    V1 v("v", x.size());
    Kokkos::deep_copy(v, HostView1<const double>(x.data(), x.size()));
    return v;
  }
};
TYPED_TEST_SUITE(SurrogateKernelsOnSpace, test::Spaces);

TYPED_TEST(SurrogateKernelsOnSpace, LocalTermIsItsDefinitionAndItsBackwardTheAdjoint) {
  using Space = TypeParam;
  using V1 = typename TestFixture::V1;
  using V2 = typename TestFixture::V2;
  for (const auto& gc : grids())
    for (LocalEdge e : {LocalEdge::Clamp, LocalEdge::Odd, LocalEdge::Even})
      for (long r : {1L, 2L}) {
        const SurrogateGrid& g = gc.g;
        const long len = points(g), T = kBatch * len, w1 = 2 * r + 1;
        const long S = gc.dim == 1 ? w1 : gc.dim == 2 ? w1 * w1 : w1 * w1 * w1;
        const auto w = randn(T * S, 1), fin = randn(T, 2), g0 = randn(T, 3), w2 = randn(T * S, 4),
                   fin2 = randn(T, 5);
        const std::string what = std::to_string(gc.dim) + "D edge " + std::to_string(int(e)) + " r " +
                                 std::to_string(r);
        auto forward = [&](const std::vector<double>& wv, const std::vector<double>& x) {
          V1 out("out", T);
          local_forward<double, Space>(out, test::on_space<Space>(wv, T, S), TestFixture::vec(x), len, r, gc.dim, g,
                                       e);
          return test::host_values(out);
        };
        const auto y = forward(w, fin);
        EXPECT_LT(max_abs_diff(y, reference_local(w, fin, g, gc.dim, r, e)), 1e-12) << what;
        // Backward: dw(t, s) = g σ fin(nb) and du = the adjoint in fin, so <dw, w2> = <g, F(w2, fin)> and
        // <du, fin2> = <g, F(w, fin2)>.
        V2 dw("dw", T, S);
        V1 du("du", T);
        local_backward<double, Space>(dw, du, test::on_space<Space>(w, T, S), TestFixture::vec(fin),
                                      TestFixture::vec(g0), len, r, gc.dim, g, e);
        EXPECT_NEAR(dot(test::host_values(dw), w2), dot(g0, forward(w2, fin)), 1e-10) << what;
        EXPECT_NEAR(dot(test::host_values(du), fin2), dot(g0, forward(w, fin2)), 1e-10) << what;
      }
}

TYPED_TEST(SurrogateKernelsOnSpace, StencilFeaturesAreTheirDefinitionAndTheGradientTheAdjoint) {
  using Space = TypeParam;
  using V1 = typename TestFixture::V1;
  using V2 = typename TestFixture::V2;
  for (const auto& gc : grids()) {
    const SurrogateGrid& g = gc.g;
    const int dim = gc.dim;
    const long len = points(g), T = kBatch * len, C = 1, cols = (1 + C) * 2 * dim, col0 = 3, width = col0 + cols;
    AxisLengths L;
    L.v[0] = g.nx * g.hx, L.v[1] = g.ny * g.hy, L.v[2] = g.nz * g.hz;
    const auto u = randn(T, 6), extra = randn(T * C, 7);
    auto features = [&](const std::vector<double>& uu) {
      V2 f("f", T, width);
      stencil_features<double, Space>(f, col0, TestFixture::vec(uu), test::on_space<Space>(extra, T, C), C, len,
                                      dim, g, L);
      return test::host_values(f);
    };
    const auto f = features(u);
    for (long t = 0; t < T; ++t) {
      const long b = t / len, n = t % len;
      const long idx[3] = {n % g.nx, (n / g.nx) % g.ny, n / (g.nx * g.ny)};
      const long ext[3] = {g.nx, g.ny, g.nz};
      const bool per[3] = {g.px, g.py, g.pz};
      const double h[3] = {g.hx, g.hy, g.hz};
      for (long field = 0; field <= C; ++field) {
        auto val = [&](long q) { return field == 0 ? u[b * len + q] : extra[(b * len + q) * C + field - 1]; };
        for (int a = 0; a < dim; ++a) {
          auto shifted = [&](long d) {  // the point d steps along a: wrapped, or the point itself at an open edge
            long c[3] = {idx[0], idx[1], idx[2]};
            const long k = c[a] + d;
            c[a] = per[a] ? (k + ext[a]) % ext[a] : (k < 0 || k >= ext[a] ? c[a] : k);
            return (c[2] * g.ny + c[1]) * g.nx + c[0];
          };
          const double fm = val(shifted(-1)), fp = val(shifted(1)), f0 = val(n), l = L[a] / 64.0;
          const long col = col0 + (field * dim + a) * 2;
          EXPECT_NEAR(f[t * width + col], l * (fp - fm) / (2 * h[a]), 1e-12);
          EXPECT_NEAR(f[t * width + col + 1], l * l * (fp - 2 * f0 + fm) / (h[a] * h[a]), 1e-9);
        }
      }
    }
    // The gradient in û is the adjoint of û's columns: <du, v> = <df, features(v) - features(0)> on those columns.
    const auto df = randn(T * width, 8), v = randn(T, 9);
    V1 du("du", T);
    stencil_input_gradient<double, Space>(du, test::on_space<Space>(df, T, width), col0, len, dim, g, L);
    const auto fv = features(v), f0 = features(std::vector<double>(T, 0.0));
    double rhs = 0;
    for (long t = 0; t < T; ++t)
      for (long c = col0; c < col0 + 2 * dim; ++c) rhs += df[t * width + c] * (fv[t * width + c] - f0[t * width + c]);
    EXPECT_NEAR(dot(test::host_values(du), v), rhs, 1e-8 * std::max(1.0, std::abs(rhs))) << dim << "D";
  }
}

TYPED_TEST(SurrogateKernelsOnSpace, ChannelWindowHoldsTheNeighboursValues) {
  using Space = TypeParam;
  using V2 = typename TestFixture::V2;
  for (const auto& gc : grids())
    for (long w : {1L, 2L}) {
      const SurrogateGrid& g = gc.g;
      const long len = points(g), T = kBatch * len, C = 2, e1 = 2 * w + 1;
      const long S = gc.dim == 1 ? e1 : gc.dim == 2 ? e1 * e1 : e1 * e1 * e1, col0 = 1, width = col0 + C * (S - 1);
      const auto extra = randn(T * C, 10);
      V2 f("f", T, width);
      channel_window_features<double, Space>(f, col0, test::on_space<Space>(extra, T, C), C, len, w, gc.dim, g);
      const auto fv = test::host_values(f);
      const long wy = gc.dim > 1 ? w : 0, wz = gc.dim > 2 ? w : 0;
      for (long t = 0; t < T; ++t) {
        const long b = t / len, n = t % len, i = n % g.nx, j = (n / g.nx) % g.ny, k = n / (g.nx * g.ny);
        long slot = 0;
        for (long sz = -wz; sz <= wz; ++sz)
          for (long sy = -wy; sy <= wy; ++sy)
            for (long sx = -w; sx <= w; ++sx) {
              if (sx == 0 && sy == 0 && sz == 0) continue;
              int sign = 1;  // mirrored like an even edge: the sign stays 1
              const long q = b * len +
                             (neighbour(k, sz, g.nz, g.pz, LocalEdge::Even, sign) * g.ny +
                              neighbour(j, sy, g.ny, g.py, LocalEdge::Even, sign)) * g.nx +
                             neighbour(i, sx, g.nx, g.px, LocalEdge::Even, sign);
              for (long c = 0; c < C; ++c)
                EXPECT_EQ(fv[t * width + col0 + c * (S - 1) + slot], extra[q * C + c])
                    << gc.dim << "D w " << w << " token " << t << " offset " << slot;
              ++slot;
            }
        EXPECT_EQ(fv[t * width], 0.0);  // columns before col0 are left alone
      }
    }
}
