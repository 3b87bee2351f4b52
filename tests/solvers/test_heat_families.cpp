// Problem families for operator learning (physics/heat/families.hpp) and their datasets (HeatSampleSolver,
// write_heat_dataset): per-sample κ, sources and boundary data are deterministic per index and have the stated
// distributions; the file's samples and channels equal direct solver calls for the same seeds, in 1D, 2D and 3D,
// linear and nonlinear; bad parameters are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::heat;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  auto d = attnphys::test::scratch_dir("families/" + name);
  fs::create_directories(d);
  return d;
}

HeatFamily family(KappaFamily k, SourceFamily s, BoundaryFamily b, std::uint64_t seed = 5) {
  HeatFamily f;
  f.kappa = k;
  f.source = s;
  f.boundary = b;
  f.seed = seed;
  return f;
}

double max_abs_diff(const View3<double>& a, const View3<double>& b) {
  auto ha = to_host(a), hb = to_host(b);
  double m = 0.0;
  for (std::size_t i = 0; i < ha.size(); ++i) m = std::max(m, std::abs(ha.data()[i] - hb.data()[i]));
  return m;
}

}  // namespace

TEST(HeatFamilies, SampleProblemsAreDeterministicPerIndexAndDiffer) {
  auto base = make_problem(2, {16, 12, 1}, {1.0 / 16, 1.0 / 12, 1}, 1.0, "dirichlet");
  const auto f = family(KappaFamily::LogNormal, SourceFamily::Grf, BoundaryFamily::Random);
  const auto a = f.sample_problem(base, 3), b = f.sample_problem(base, 3), c = f.sample_problem(base, 4);
  EXPECT_EQ(max_abs_diff(a.kappa_field, b.kappa_field), 0.0);
  EXPECT_EQ(max_abs_diff(a.source_field, b.source_field), 0.0);
  EXPECT_GT(max_abs_diff(a.kappa_field, c.kappa_field), 0.1);
  EXPECT_GT(max_abs_diff(a.source_field, c.source_field), 0.1);
  const auto fa = face_data(a, 1, 0), fb = face_data(b, 1, 0), fc = face_data(c, 1, 0);
  ASSERT_EQ(fa.size(), 16u);
  EXPECT_EQ(fa, fb);
  EXPECT_NE(fa, fc);
  // Another seed gives other fields; the base problem is left alone.
  const auto d = family(KappaFamily::LogNormal, SourceFamily::Grf, BoundaryFamily::Random, 6).sample_problem(base, 3);
  EXPECT_GT(max_abs_diff(a.kappa_field, d.kappa_field), 0.1);
  EXPECT_FALSE(base.variable_kappa());
  EXPECT_TRUE(base.homogeneous());
  EXPECT_FALSE(a.homogeneous());
}

TEST(HeatFamilies, LogNormalKappaSpansTheContrastAroundTheBaseAndIsLogGaussian) {
  auto base = make_problem(2, {32, 32, 1}, {1.0 / 32, 1.0 / 32, 1}, 2.0, "periodic");
  auto f = family(KappaFamily::LogNormal, SourceFamily::None, BoundaryFamily::Zero);
  f.kappa_contrast = 10.0;
  double skew = 0.0, var = 0.0;
  long n = 0;
  for (long s = 0; s < 20; ++s) {
    auto k = to_host(f.sample_problem(base, s).kappa_field);
    double lo = 1e300, hi = 0.0, m = 0.0;
    for (std::size_t i = 0; i < k.size(); ++i) lo = std::min(lo, k.data()[i]), hi = std::max(hi, k.data()[i]);
    // Every sample spans exactly κ̄/√C .. κ̄·√C.
    ASSERT_NEAR(hi / lo, 10.0, 1e-9);
    ASSERT_NEAR(std::sqrt(hi * lo), 2.0, 1e-9);
    for (std::size_t i = 0; i < k.size(); ++i) m += std::log(k.data()[i]);
    m /= double(k.size());
    for (std::size_t i = 0; i < k.size(); ++i) {
      const double d = std::log(k.data()[i]) - m;
      var += d * d, skew += d * d * d, ++n;
    }
  }
  // log κ is Gaussian (an affine map of a Gaussian field): no skew to speak of.
  var /= n;
  skew /= n * var * std::sqrt(var);
  EXPECT_LT(std::abs(skew), 0.3);
  EXPECT_GT(std::sqrt(var), 0.1 * std::log(10.0));  // and spread over the range, not piled at its ends
  EXPECT_NEAR(f.kappa_bound(base), 2.0 * std::sqrt(10.0), 1e-12);
}

TEST(HeatFamilies, PiecewiseKappaPerSampleHasTwoLevels) {
  auto base = make_problem(1, {64, 1, 1}, {1.0 / 64, 1, 1}, 1.0, "neumann");
  auto f = family(KappaFamily::Piecewise, SourceFamily::None, BoundaryFamily::Zero);
  f.kappa_lo = 0.5;
  f.kappa_hi = 4.0;
  auto k0 = to_host(f.sample_problem(base, 0).kappa_field), k1 = to_host(f.sample_problem(base, 1).kappa_field);
  long low = 0, high = 0, same = 0;
  for (std::size_t i = 0; i < k0.size(); ++i) {
    const double v = k0.data()[i];
    if (v < 0.5 * 1.7) ++low;
    if (v > 4.0 * 0.6) ++high;
    same += v == k1.data()[i];
  }
  EXPECT_EQ(low + high, 64);
  EXPECT_LT(same, 64);
  EXPECT_LE(f.kappa_bound(base), 4.0 * std::exp(0.51) + 1e-12);
}

TEST(HeatFamilies, ThreeDimensionalRandomFieldsHaveUnitVarianceAndTheirCorrelation) {
  // The 3D Gaussian random field is summed one axis at a time; its statistics must be those of the 1D/2D fields.
  const long n = 16;
  auto p = make_problem(3, {n, n, n}, {1.0 / n, 1.0 / n, 1.0 / n}, 1.0, "periodic");
  InitialConditionOptions o;
  o.length_scale = 0.12;
  const long S = 24, cells = n * n * n;
  View2<double> f("f", S, cells);
  initial_conditions(p, o, 3, 0, f);
  auto h = to_host(f);
  double var = 0.0, cx = 0.0, cz = 0.0;
  for (long s = 0; s < S; ++s)
    for (long k = 0; k < n; ++k)
      for (long j = 0; j < n; ++j)
        for (long i = 0; i < n; ++i) {
          const double v = h(s, (k * n + j) * n + i);
          var += v * v;
          cx += v * h(s, (k * n + j) * n + (i + 2) % n);
          cz += v * h(s, (((k + 2) % n) * n + j) * n + i);
        }
  var /= S * cells;
  cx /= S * cells * var;
  cz /= S * cells * var;
  const double r = 2.0 / n, expect = std::exp(-r * r / (2 * o.length_scale * o.length_scale));
  EXPECT_NEAR(var, 1.0, 0.1);
  EXPECT_NEAR(cx, expect, 0.06);
  EXPECT_NEAR(cz, expect, 0.06);
  // A z-independent check of the pass order: the field is not constant along any axis.
  double dz = 0.0;
  for (long c = 0; c < n * n; ++c) dz += std::abs(h(0, c) - h(0, c + n * n));
  EXPECT_GT(dz, 1.0);
}

TEST(HeatFamilies, RandomBoundaryDataIsWhatTheSolverSees) {
  // Dirichlet data g on every side and κ constant, no source: after a long time u is the discrete harmonic
  // function of g, so the cells next to a side sit close to the side's data where it varies slowly.
  const long n = 24;
  auto base = make_problem(2, {n, n, 1}, {1.0 / n, 1.0 / n, 1}, 1.0, "dirichlet");
  auto f = family(KappaFamily::Constant, SourceFamily::None, BoundaryFamily::Random);
  f.boundary_modes = 0;  // a constant per side: the steady state is then known along the middle of each side
  const auto p = f.sample_problem(base, 2);
  View3<double> u0("u0", 1, n, n);
  fd::HeatSolveOptions so;
  so.dt = 2e-3;
  const auto sol = fd::solve(p, u0, 1.0, so);
  auto u = to_host(sol.u);
  const auto bf = boundary_field(p);
  const double g_x0 = face_data(p, 0, 0)[n / 2], g_y1 = face_data(p, 1, 1)[n / 2];
  EXPECT_EQ(bf(0, n / 2, 0), g_x0);
  EXPECT_EQ(bf(0, n - 1, n / 2), g_y1);
  EXPECT_EQ(bf(0, n / 2, n / 2), 0.0);
  double lo = 1e300, hi = -1e300;
  for (int a = 0; a < 2; ++a)
    for (int side = 0; side < 2; ++side) {
      const double g = face_data(p, a, side)[0];
      lo = std::min(lo, g), hi = std::max(hi, g);
    }
  ASSERT_GT(hi - lo, 0.1);  // the four sides got different data
  // Half a cell from the face, u = g + (h/2)·∂u/∂n with ∂u/∂n of the order of the spread of the data.
  const double tol = 0.1 * (hi - lo);
  EXPECT_NEAR(u(0, n / 2, 0), g_x0, tol);
  EXPECT_NEAR(u(0, n - 1, n / 2), g_y1, tol);
  // and the interior is a mean of the sides' data, strictly inside their range (maximum principle).
  EXPECT_GT(u(0, n / 2, n / 2), lo);
  EXPECT_LT(u(0, n / 2, n / 2), hi);
}

namespace {

struct DatasetCase {
  const char* name;
  int dim;
  std::array<long, 3> n;
  const char* bc;
  HeatFamily family;
  bool nonlinear;
};

// Writes the family's dataset and checks every sample and channel against direct solver calls.
void check_dataset_against_solver(const DatasetCase& c) {
  SCOPED_TRACE(c.name);
  const auto dir = temp_dir(c.name);
  std::array<double, 3> h{1.0 / c.n[0], c.dim > 1 ? 1.0 / c.n[1] : 1.0, c.dim > 2 ? 1.0 / c.n[2] : 1.0};
  auto base = make_problem(c.dim, c.n, h, 0.5, c.bc);
  InitialConditionOptions ic;
  ic.length_scale = 0.2;
  fd::HeatDatasetOptions o;
  o.output = (dir / "d.h5").string();
  o.samples = 3;
  o.nt = 3;
  o.chunk = 2;
  o.seed = 4;
  o.delta_t = 0.004;
  o.progress = false;
  fd::HeatSolveOptions so;
  const KappaLaw law = KappaLaw::quadratic(0.5, 2.0);
  const KappaLaw* lp = c.nonlinear ? &law : nullptr;
  HeatFamily fam = c.family;
  fam.seed = 4;
  fd::write_heat_dataset(base, ic, fam, lp, fd::NonlinearOptions{}, so, o, "");

  fd::HeatPairOptions po;
  po.delta_t = o.delta_t;
  po.seed = 4;
  fd::HeatSampleSolver solver(base, ic, fam, po, lp);
  h5::Reader r(o.output, "heat_dataset", 1);
  h5::Shape shape;
  const auto data = r.read<float>("data", &shape);
  h5::Shape want{3, 3};
  for (int a = 0; a < c.dim; ++a) want.push_back(std::uint64_t(c.n[a]));
  want.push_back(1);
  ASSERT_EQ(shape, want);
  EXPECT_EQ(r.attr_long("/", "dim"), c.dim);
  EXPECT_EQ(r.attr_long("/", "nonlinear"), c.nonlinear ? 1 : 0);
  EXPECT_EQ(r.attr_string("/", "family"), fam.describe());
  const long nx = c.n[0], ny = c.n[1], nz = c.n[2], cells = nx * ny * nz;
  auto file_at = [&](long k, long j, long i) { return (i * ny + j) * nz + k; };
  const bool has_kappa = fam.kappa != KappaFamily::Constant, has_source = fam.source != SourceFamily::None,
             has_boundary = fam.boundary != BoundaryFamily::Zero;
  EXPECT_EQ(r.has("kappa"), has_kappa);
  EXPECT_EQ(r.has("source"), has_source);
  EXPECT_EQ(r.has("boundary"), has_boundary);
  EXPECT_EQ(r.attr_long("/", "variable_kappa"), has_kappa ? 1 : 0);
  EXPECT_EQ(r.attr_long("/", "homogeneous"), has_source || has_boundary ? 0 : 1);
  const auto kappa = has_kappa ? r.read<float>("kappa") : std::vector<float>();
  const auto source = has_source ? r.read<float>("source") : std::vector<float>();
  const auto boundary = has_boundary ? r.read<float>("boundary") : std::vector<float>();
  for (long s = 0; s < 3; ++s) {
    const auto p = solver.problem(s);
    // The direct call: fd::solve (or solve_nonlinear) of the sample's problem and initial condition, snapshots at
    // the file's times, with the file's step.
    const auto u0 = solver.initial(s);
    fd::HeatSolution sol;
    if (c.nonlinear) {
      fd::NonlinearSolveOptions no;
      no.dt = r.attr_double("/", "solver_dt");
      no.snapshot_times = r.read<double>("grid/t");
      sol = fd::solve_nonlinear(p, law, u0, no.snapshot_times.back(), no);
    } else {
      fd::HeatSolveOptions d;
      d.dt = r.attr_double("/", "solver_dt");
      d.snapshot_times = r.read<double>("grid/t");
      sol = fd::solve(p, u0, d.snapshot_times.back(), d);
    }
    double change = 0.0;
    for (long t = 0; t < 3; ++t) {
      auto hs = to_host(sol.snapshots[t]);
      for (long k = 0; k < nz; ++k)
        for (long j = 0; j < ny; ++j)
          for (long i = 0; i < nx; ++i) {
            const float v = data[std::size_t((s * 3 + t) * cells + file_at(k, j, i))];
            ASSERT_EQ(v, float(hs(k, j, i))) << "sample " << s << " t " << t << " cell " << i << "," << j << "," << k;
            if (t == 2) change += std::abs(double(v) - data[std::size_t(s * 3 * cells + file_at(k, j, i))]);
          }
    }
    EXPECT_GT(change, 1e-3 * cells);  // the snapshots evolve
    if (has_kappa) {
      auto hk = to_host(p.kappa_field);
      for (long k = 0; k < nz; ++k)
        for (long j = 0; j < ny; ++j)
          for (long i = 0; i < nx; ++i) ASSERT_EQ(kappa[std::size_t(s * cells + file_at(k, j, i))], float(hk(k, j, i)));
    }
    if (has_source) {
      auto hf = to_host(p.source_field);
      for (long k = 0; k < nz; ++k)
        for (long j = 0; j < ny; ++j)
          for (long i = 0; i < nx; ++i)
            ASSERT_EQ(source[std::size_t(s * cells + file_at(k, j, i))], float(hf(k, j, i)));
    }
    if (has_boundary) {
      const auto bf = boundary_field(p);
      for (long k = 0; k < nz; ++k)
        for (long j = 0; j < ny; ++j)
          for (long i = 0; i < nx; ++i)
            ASSERT_EQ(boundary[std::size_t(s * cells + file_at(k, j, i))], float(bf(k, j, i)));
      const auto x0 = r.read<float>("boundary_faces/x0");
      const auto fx = face_data(p, 0, 0);
      for (std::size_t q = 0; q < fx.size(); ++q) ASSERT_EQ(x0[s * fx.size() + q], float(fx[q]));
    }
  }
}

}  // namespace

TEST(HeatFamilies, DatasetSamplesAndChannelsEqualDirectSolverCalls) {
  const DatasetCase cases[] = {
      {"lognormal_2d", 2, {12, 10, 1}, "dirichlet",
       family(KappaFamily::LogNormal, SourceFamily::None, BoundaryFamily::Zero), false},
      {"piecewise_1d", 1, {24, 1, 1}, "periodic",
       family(KappaFamily::Piecewise, SourceFamily::None, BoundaryFamily::Zero), false},
      {"source_2d", 2, {10, 10, 1}, "periodic",
       family(KappaFamily::Constant, SourceFamily::Grf, BoundaryFamily::Zero), false},
      {"boundary_2d_neumann", 2, {10, 8, 1}, "neumann",
       family(KappaFamily::Constant, SourceFamily::None, BoundaryFamily::Random), false},
      {"all_2d_dirichlet", 2, {10, 8, 1}, "dirichlet",
       family(KappaFamily::LogNormal, SourceFamily::Grf, BoundaryFamily::Random), false},
      {"lognormal_3d", 3, {8, 6, 5}, "dirichlet",
       family(KappaFamily::LogNormal, SourceFamily::Grf, BoundaryFamily::Random), false},
      {"constant_3d", 3, {6, 6, 6}, "periodic",
       family(KappaFamily::Constant, SourceFamily::None, BoundaryFamily::Zero), false},
      {"nonlinear_1d", 1, {24, 1, 1}, "neumann",
       family(KappaFamily::Constant, SourceFamily::None, BoundaryFamily::Zero), true},
      {"nonlinear_2d_sources", 2, {10, 10, 1}, "dirichlet",
       family(KappaFamily::Constant, SourceFamily::Grf, BoundaryFamily::Random), true},
  };
  for (const auto& c : cases) check_dataset_against_solver(c);
  fs::remove_all(temp_dir("x").parent_path());
}

TEST(HeatFamilies, BadFamilyParametersAreRefusedWithWhatToChange) {
  auto periodic = make_problem(2, {8, 8, 1}, {0.125, 0.125, 1}, 1.0, "periodic");
  HeatFamilyOptions o;
  o.boundary = heat::BoundaryFamily::Random;
  try {
    o.build(periodic, 0);
    FAIL() << "random boundary data on a periodic box was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("problem.bc = dirichlet or neumann"), std::string::npos) << e.what();
  }
  o = HeatFamilyOptions{};
  {
    OptionSet set;
    o.declare(set);
    try {
      set.set("family.kappa=gaussian");  // not a family kind
      FAIL() << "family.kappa = gaussian was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'gaussian' is not one of: constant, piecewise, lognormal"),
                std::string::npos) << e.what();
    }
  }
  o = HeatFamilyOptions{};
  o.kappa = heat::KappaFamily::LogNormal;
  o.kappa_contrast = 0.5;
  EXPECT_THROW(o.build(periodic, 0), Error);
  auto shared = periodic;
  shared.kappa_field = random_kappa(shared, 0.2, 2.0, 0.15, 1);
  o.kappa_contrast = 10;
  try {
    o.build(shared, 0);
    FAIL() << "per-sample kappa on top of problem.kappa_random was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kappa_random"), std::string::npos) << e.what();
  }
  // A family built from options draws what it says.
  o = HeatFamilyOptions{};
  o.kappa = heat::KappaFamily::Piecewise;
  o.source = heat::SourceFamily::Grf;
  const auto f = o.build(periodic, 9);
  EXPECT_EQ(f.kappa, KappaFamily::Piecewise);
  EXPECT_EQ(f.source, SourceFamily::Grf);
  EXPECT_EQ(f.seed, 9u);
  EXPECT_TRUE(f.per_sample());
}

TEST(HeatFamilies, RandomFieldsIn1dAnd2dAgreeAcrossResolutionsAndHaveTheirCorrelation) {
  // Every grid evaluates the same trigonometric polynomial (the modes are set by the correlation length, below the
  // coarse grid's Nyquist limit here), summed one axis at a time from phase tables: the 2n-point periodic grid's even
  // points are the n-point grid's points, so the two fields agree there to rounding. And the 2D field has unit
  // variance and the Gaussian correlation exp(-r²/2ℓ²).
  InitialConditionOptions o;
  o.length_scale = 0.12;
  for (int dim : {1, 2}) {
    const long n = 32, S = 16;
    auto coarse = dim == 1 ? make_problem(1, {n}, {1.0 / n}, 1.0, "periodic")
                           : make_problem(2, {n, n}, {1.0 / n, 1.0 / n}, 1.0, "periodic");
    auto fine = dim == 1 ? make_problem(1, {2 * n}, {0.5 / n}, 1.0, "periodic")
                         : make_problem(2, {2 * n, 2 * n}, {0.5 / n, 0.5 / n}, 1.0, "periodic");
    const long cc = dim == 1 ? n : n * n, cf = dim == 1 ? 2 * n : 4 * n * n;
    View2<double> fc("fc", S, cc), ff("ff", S, cf);
    initial_conditions(coarse, o, 7, 3, fc);
    initial_conditions(fine, o, 7, 3, ff);
    auto hc = to_host(fc), hf = to_host(ff);
    double diff = 0.0, var = 0.0, cx = 0.0, cy = 0.0;
    for (long s = 0; s < S; ++s)
      for (long j = 0; j < (dim == 1 ? 1 : n); ++j)
        for (long i = 0; i < n; ++i) {
          const double v = hc(s, j * n + i);
          diff = std::max(diff, std::abs(v - hf(s, dim == 1 ? 2 * i : (2 * j) * (2 * n) + 2 * i)));
          var += v * v;
          cx += v * hc(s, j * n + (i + 2) % n);
          if (dim == 2) cy += v * hc(s, ((j + 2) % n) * n + i);
        }
    EXPECT_LT(diff, 1e-12) << "dim " << dim;
    var /= S * cc;
    const double r = 2.0 / n, expect = std::exp(-r * r / (2 * o.length_scale * o.length_scale));
    EXPECT_NEAR(cx / (S * cc * var), expect, 0.06) << "dim " << dim;
    if (dim == 2) {
      EXPECT_NEAR(var, 1.0, 0.15);
      EXPECT_NEAR(cy / (S * cc * var), expect, 0.06);
    }
  }
}
