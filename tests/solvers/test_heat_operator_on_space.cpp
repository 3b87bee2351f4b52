// The finite-volume heat operator (solvers/fd/heat_operator.hpp) on every enabled execution space
// (tests/spaces.hpp): `HeatOperatorOnSpace.Test<Kokkos::Serial>`, `...<Kokkos::OpenMP>`, `...<Kokkos::Cuda>` as the
// Kokkos build enables them, each with its states, coefficients and factorisations in that space's memory. The
// stencil (combine) against a host evaluation of (L_a u)_i = c_{i+1}(u_{i+1} - u_i) - c_i(u_i - u_{i-1}) with the
// face coefficients written out from κ; the line solves against the matrix they invert; set_kappa_field against a
// newly built operator; the two-step FTCS sweep against two single steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnphys/solvers/fd/heat_operator.hpp"
#include "operators/fd_check.hpp"
#include "spaces.hpp"

using namespace attnphys;
using namespace attnphys::heat;
using attnphys::test::randn;

namespace {

using B = BoundaryCondition;

// A problem on a small grid with its boundary conditions, κ a positive field (variable) or a constant.
struct Case {
  int dim;
  std::array<long, 3> n;
  std::array<std::array<B, 2>, 3> bc;
  bool variable;
  FaceMean mean;
  long batch;  // samples of a 1D/2D state
};

std::vector<Case> cases() {
  return {
      {1, {9, 1, 1}, {{{B::dirichlet(0.0), B::neumann(0.0)}, {}, {}}}, true, FaceMean::Harmonic, 3},
      {2, {7, 6, 1}, {{{B::periodic(), B::periodic()}, {B::dirichlet(0.0), B::dirichlet(0.0)}, {}}}, true,
       FaceMean::Harmonic, 2},
      {2, {6, 9, 1}, {{{B::dirichlet(0.0), B::neumann(0.0)}, {B::periodic(), B::periodic()}, {}}}, true,
       FaceMean::Arithmetic, 1},
      {2, {8, 7, 1}, {{{B::dirichlet(0.0), B::dirichlet(0.0)}, {B::neumann(0.0), B::dirichlet(0.0)}, {}}}, false,
       FaceMean::Harmonic, 2},
      {3, {5, 6, 4},
       {{{B::periodic(), B::periodic()}, {B::dirichlet(0.0), B::neumann(0.0)}, {B::dirichlet(0.0), B::dirichlet(0.0)}}},
       true, FaceMean::Harmonic, 1},
      {3, {6, 4, 5},
       {{{B::dirichlet(0.0), B::dirichlet(0.0)}, {B::periodic(), B::periodic()}, {B::neumann(0.0), B::dirichlet(0.0)}}},
       false, FaceMean::Harmonic, 1},
  };
}

HeatProblem make(const Case& c) {
  HeatProblem p = make_problem(c.dim, c.n, {1.0 / c.n[0], 1.3 / c.n[1], 0.8 / c.n[2]}, 0.9, "periodic");
  p.bc = c.bc;
  p.face_mean = c.mean;
  if (c.variable) {
    const auto e = p.spatial_extents();
    const long cells = e[0] * e[1] * e[2];
    const auto r = randn(cells, 77);
    HostView3<double> k("kappa", e[0], e[1], e[2]);
    for (long x = 0; x < cells; ++x) k.data()[x] = 0.9 * std::exp(0.8 * r[x]);  // contrast ~ 10 over the grid
    p.kappa_field = View3<double>("kappa", e[0], e[1], e[2]);
    Kokkos::deep_copy(p.kappa_field, k);
  }
  return p;
}

// The state extents (n0, n1, nx) of a case: (batch, 1, nx) in 1D, (batch, ny, nx) in 2D, (nz, ny, nx) in 3D.
std::array<long, 3> state_extents(const Case& c) {
  if (c.dim == 1) return {c.batch, 1, c.n[0]};
  if (c.dim == 2) return {c.batch, c.n[1], c.n[0]};
  return {c.n[2], c.n[1], c.n[0]};
}

// Host evaluation of L_axis u on a state, from κ and the boundary conditions alone (no code of the operator).
std::vector<double> reference_L(const HeatProblem& p, int axis, const std::vector<double>& u,
                                const std::array<long, 3>& st) {
  const auto e = p.spatial_extents();
  HostView3<double> kh("kappa", e[0], e[1], e[2]);
  if (p.variable_kappa())
    Kokkos::deep_copy(kh, p.kappa_field);
  else
    Kokkos::deep_copy(kh, p.kappa);
  const int dim = p.grid.dim;
  const long n = p.grid.n[axis];
  const double inv_h2 = 1.0 / (p.grid.h[axis] * p.grid.h[axis]);
  const bool per = p.periodic(axis);
  auto mean = [&](double a, double b) {
    return p.face_mean == FaceMean::Arithmetic ? 0.5 * (a + b) : (a + b > 0 ? 2 * a * b / (a + b) : 0.0);
  };
  std::vector<double> out(u.size(), 0.0);
  for (long k = 0; k < st[0]; ++k)
    for (long j = 0; j < st[1]; ++j)
      for (long i = 0; i < st[2]; ++i) {
        const long kz = dim == 3 ? k : 0, jy = dim >= 2 ? j : 0;
        long pos[3] = {i, j, k};  // position along x, y, z in the state
        const long m = pos[axis];
        auto kap = [&](long mm) {  // κ of the cell mm along the axis, on this cell's line
          return axis == 0 ? kh(kz, jy, mm) : axis == 1 ? kh(kz, mm, i) : kh(mm, jy, i);
        };
        auto val = [&](long mm) {  // u of the cell mm along the axis (wrapped, or a zero ghost)
          if (mm < 0 || mm >= n) {
            if (!per) return 0.0;
            mm = (mm + n) % n;
          }
          long q[3] = {i, j, k};
          q[axis] = mm;
          return u[(q[2] * st[1] + q[1]) * st[2] + q[0]];
        };
        auto face = [&](long f) {  // coefficient of the face between cells f-1 and f
          if (f > 0 && f < n) return mean(kap(f - 1), kap(f)) * inv_h2;
          if (per) return mean(kap(n - 1), kap(0)) * inv_h2;
          const auto& b = p.bc[axis][f == 0 ? 0 : 1];
          return b.type == BcType::Dirichlet ? 2.0 * kap(f == 0 ? 0 : n - 1) * inv_h2 : 0.0;
        };
        const double uc = val(m);
        out[(k * st[1] + j) * st[2] + i] = face(m + 1) * (val(m + 1) - uc) - face(m) * (uc - val(m - 1));
      }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}
double max_abs(const std::vector<double>& a) { return max_abs_diff(a, std::vector<double>(a.size(), 0.0)); }

}  // namespace

template <class Space>
class HeatOperatorOnSpace : public ::testing::Test {
 protected:
  using Op = fd::BasicHeatOperator<Space>;
  using State = typename Op::State;
  static State state(const std::vector<double>& v, const std::array<long, 3>& st) {
    State s("state", st[0], st[1], st[2]);
    Kokkos::deep_copy(s, HostView3<const double>(v.data(), st[0], st[1], st[2]));
    return s;
  }
};
TYPED_TEST_SUITE(HeatOperatorOnSpace, test::Spaces);

TYPED_TEST(HeatOperatorOnSpace, CombineIsTheFiniteVolumeStencil) {
  using Space = TypeParam;
  using Op = typename TestFixture::Op;
  using State = typename TestFixture::State;
  for (const auto& c : cases()) {
    const HeatProblem p = make(c);
    Op op(p);
    const auto st = state_extents(c);
    const long size = st[0] * st[1] * st[2];
    const auto x = randn(size, 1), y = randn(size, 2);
    const std::array<double, 3> s = {0.3 * op.ftcs_limit(), -0.2 * op.ftcs_limit(), 0.1 * op.ftcs_limit()};
    auto expected = x;
    for (int a = 0; a < c.dim; ++a) {
      const auto L = reference_L(p, a, y, st);
      for (long q = 0; q < size; ++q) expected[q] += s[a] * L[q];
    }
    const auto e = op.spatial();
    const auto g = randn(e[0] * e[1] * e[2], 3);
    State out("out", st[0], st[1], st[2]);
    op.combine(out, TestFixture::state(x, st), TestFixture::state(y, st), s, 0.0, {}, 0.0, {});
    EXPECT_LT(max_abs_diff(test::host_values(out), expected), 1e-13 * max_abs(expected)) << c.dim << "D";
    // With a forcing term: + g1·G1 (G1 spatial, shared by every sample).
    op.combine(out, TestFixture::state(x, st), TestFixture::state(y, st), s, 0.7, TestFixture::state(g, e), 0.0,
               {});
    for (long q = 0; q < size; ++q) expected[q] += 0.7 * g[(c.dim == 3 ? q : q % (st[1] * st[2]))];
    EXPECT_LT(max_abs_diff(test::host_values(out), expected), 1e-13 * max_abs(expected)) << c.dim << "D + G";
    // An FTCS step (x is y: the host kernels fold x into the centre weight) is the same formula.
    auto yd = TestFixture::state(y, st);
    State u("u", st[0], st[1], st[2]);
    op.combine(u, yd, yd, s, 0.0, {}, 0.0, {});
    auto ftcs = y;
    for (int a = 0; a < c.dim; ++a) {
      const auto L = reference_L(p, a, y, st);
      for (long q = 0; q < size; ++q) ftcs[q] += s[a] * L[q];
    }
    EXPECT_LT(max_abs_diff(test::host_values(u), ftcs), 1e-13 * max_abs(ftcs)) << c.dim << "D FTCS";
  }
}

TYPED_TEST(HeatOperatorOnSpace, LineSolvesInvertTheirAxis) {
  using Op = typename TestFixture::Op;
  for (const auto& c : cases()) {
    const HeatProblem p = make(c);
    Op op(p);
    const auto st = state_extents(c);
    const long size = st[0] * st[1] * st[2];
    const auto rhs = randn(size, 4);
    for (int a = 0; a < c.dim; ++a)
      for (double s : {0.5 * op.ftcs_limit(), 40.0 * op.ftcs_limit()}) {
        auto u = TestFixture::state(rhs, st);
        op.solve_lines(a, s, u);
        const auto uh = test::host_values(u);
        auto back = uh;  // (I - s L_a) u must give the right-hand side back
        const auto L = reference_L(p, a, uh, st);
        for (long q = 0; q < size; ++q) back[q] -= s * L[q];
        EXPECT_LT(max_abs_diff(back, rhs), 1e-11 * max_abs(rhs)) << c.dim << "D axis " << a << " s " << s;
      }
  }
}

TYPED_TEST(HeatOperatorOnSpace, SetKappaFieldEqualsANewOperator) {
  using Op = typename TestFixture::Op;
  using State = typename TestFixture::State;
  for (const auto& c : cases()) {
    if (!c.variable) continue;
    const HeatProblem p1 = make(c);
    HeatProblem p2 = p1;
    const auto e = p1.spatial_extents();
    const auto r = randn(e[0] * e[1] * e[2], 88);
    HostView3<double> k2("kappa2", e[0], e[1], e[2]);
    for (long x = 0; x < long(k2.size()); ++x) k2.data()[x] = 0.5 * std::exp(0.5 * r[x]);
    p2.kappa_field = View3<double>("kappa2", e[0], e[1], e[2]);
    Kokkos::deep_copy(p2.kappa_field, k2);
    Op op(p1), fresh(p2);
    State k2s("k2", e[0], e[1], e[2]);
    Kokkos::deep_copy(k2s, k2);
    op.set_kappa_field(k2s);
    EXPECT_EQ(op.ftcs_limit(), fresh.ftcs_limit());
    for (int a = 0; a < c.dim; ++a)
      EXPECT_EQ(test::host_values(op.face_coefficients(a)), test::host_values(fresh.face_coefficients(a)))
          << c.dim << "D axis " << a;
    // Refused, and the operator unchanged: a negative κ.
    k2(0, 0, 0) = -1.0;
    Kokkos::deep_copy(k2s, k2);
    EXPECT_THROW(op.set_kappa_field(k2s), Error);
    EXPECT_EQ(op.ftcs_limit(), fresh.ftcs_limit());
  }
}

TYPED_TEST(HeatOperatorOnSpace, TwoStepSweepEqualsTwoSteps) {
  using Op = typename TestFixture::Op;
  using State = typename TestFixture::State;
  for (const auto& c : cases()) {
    if (c.variable || c.dim < 2) continue;  // the sweep is for constant κ in 2D and 3D
    const HeatProblem p = make(c);
    Op op(p);
    const auto st = state_extents(c);
    const auto y = randn(st[0] * st[1] * st[2], 5);
    const double dt = 0.9 * op.ftcs_limit();
    State once("once", st[0], st[1], st[2]), twice("twice", st[0], st[1], st[2]), swept("swept", st[0], st[1], st[2]);
    op.combine(once, TestFixture::state(y, st), TestFixture::state(y, st), {dt, dt, dt}, 0.0, {}, 0.0, {});
    op.combine(twice, once, once, {dt, dt, dt}, 0.0, {}, 0.0, {});
    const bool ran = op.ftcs_two_steps(swept, TestFixture::state(y, st), dt, {});
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)
    EXPECT_FALSE(ran) << "device builds keep one step per sweep, on every space";
    continue;
#else
    ASSERT_TRUE(ran) << "the two-step sweep runs on every space of a host build";
    static_assert(host_accessible<TypeParam>(), "a host build has host spaces only");
#endif
    const auto ref = test::host_values(twice);
    EXPECT_LT(max_abs_diff(test::host_values(swept), ref), 1e-13 * max_abs(ref)) << c.dim << "D";
  }
}
