// Random initial conditions, the pair generator and HDF5 datasets: determinism per sample index, the statistics
// of the Gaussian random fields, consistency with the solver, the file layout and safe interruption.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::heat;
namespace fs = std::filesystem;

TEST(HeatInitialConditions, SampleDependsOnlyOnItsIndex) {
  auto p = make_problem(2, {12, 10, 1}, {0.1, 0.1, 1}, 1.0, "dirichlet");
  for (const char* kind : {"grf", "fourier", "bumps"}) {
    InitialConditionOptions o;
    o.kind = heat::parse_ic_kind(kind);
    View2<double> all("all", 10, 120), part("part", 3, 120);
    initial_conditions(p, o, 42, 0, all);
    initial_conditions(p, o, 42, 5, part);
    auto ha = to_host(all), hp = to_host(part);
    for (long s = 0; s < 3; ++s)
      for (long c = 0; c < 120; ++c) ASSERT_EQ(hp(s, c), ha(5 + s, c)) << kind;
    double diff = 0.0;  // and different samples differ
    for (long c = 0; c < 120; ++c) diff += std::abs(ha(0, c) - ha(1, c));
    EXPECT_GT(diff, 1.0) << kind;
  }
}

TEST(HeatInitialConditions, GaussianRandomFieldHasUnitVarianceAndItsCorrelationLength) {
  const long n = 64;
  auto p = make_problem(1, {n, 1, 1}, {1.0 / n, 1, 1}, 1.0, "periodic");
  InitialConditionOptions o;
  o.length_scale = 0.05;
  const long S = 400;
  View2<double> f("f", S, n);
  initial_conditions(p, o, 7, 0, f);
  auto h = to_host(f);
  double var = 0.0, c1 = 0.0, c2 = 0.0;  // covariances at lags of 3 and 6 cells (about ℓ and 2ℓ)
  for (long s = 0; s < S; ++s)
    for (long i = 0; i < n; ++i) {
      var += h(s, i) * h(s, i);
      c1 += h(s, i) * h(s, (i + 3) % n);
      c2 += h(s, i) * h(s, (i + 6) % n);
    }
  var /= S * n;
  c1 /= S * n * var;
  c2 /= S * n * var;
  const double r1 = 3.0 / n, r2 = 6.0 / n, l = o.length_scale;
  EXPECT_NEAR(var, 1.0, 0.1);
  EXPECT_NEAR(c1, std::exp(-r1 * r1 / (2 * l * l)), 0.06);
  EXPECT_NEAR(c2, std::exp(-r2 * r2 / (2 * l * l)), 0.06);
}

TEST(HeatInitialConditions, RandomKappaIsPositivePiecewiseAndDeterministic) {
  auto p = make_problem(2, {32, 32, 1}, {1.0 / 32, 1.0 / 32, 1}, 1.0, "periodic");
  auto k1 = to_host(random_kappa(p, 0.2, 2.0, 0.15, 3)), k2 = to_host(random_kappa(p, 0.2, 2.0, 0.15, 3));
  long low = 0, high = 0;
  for (std::size_t i = 0; i < k1.size(); ++i) {
    ASSERT_EQ(k1.data()[i], k2.data()[i]);
    ASSERT_GT(k1.data()[i], 0.2 * 0.6);
    if (k1.data()[i] < 0.2 * 1.7) ++low;
    if (k1.data()[i] > 2.0 * 0.6) ++high;
  }
  EXPECT_EQ(low + high, long(k1.size()));  // two well-separated levels
  EXPECT_GT(low, 50);
  EXPECT_GT(high, 50);
  p.kappa_field = random_kappa(p, 0.2, 2.0, 0.15, 3);
  EXPECT_NO_THROW(p.validate());
}

TEST(HeatPairGenerator, PairsAreDeterministicPerIndexAndMatchTheSolver) {
  auto p = make_problem(2, {16, 12, 1}, {1.0 / 16, 1.0 / 12, 1}, 0.5, "periodic");
  InitialConditionOptions ic;
  fd::HeatPairOptions po;
  po.t_start = 0.002;
  po.delta_t = 0.01;
  po.seed = 9;
  fd::HeatPairGenerator<double> gen(p, ic, po);
  View3<double> x("x", 6, 12, 16), y("y", 6, 12, 16), x2("x2", 2, 12, 16), y2("y2", 2, 12, 16);
  gen.generate(0, 6, x, y);
  gen.generate(3, 2, x2, y2);
  auto hx = to_host(x), hy = to_host(y), hx2 = to_host(x2), hy2 = to_host(y2);
  for (long s = 0; s < 2; ++s)
    for (long j = 0; j < 12; ++j)
      for (long i = 0; i < 16; ++i) {
        ASSERT_EQ(hx2(s, j, i), hx(3 + s, j, i));
        ASSERT_EQ(hy2(s, j, i), hy(3 + s, j, i));
      }
  // The target is the solver's answer for the input over delta_t with the same step.
  fd::HeatSolveOptions so;
  so.dt = gen.solver_dt();
  auto sol = fd::solve(p, x, po.delta_t, so);
  auto hs = to_host(sol.u);
  for (std::size_t i = 0; i < hs.size(); ++i) ASSERT_NEAR(hs.data()[i], hy.data()[i], 1e-13);
  // Trajectories with nt = 2 are the same pairs; float output is the rounded double.
  fd::HeatPairGenerator<float> genf(p, ic, po);
  View4<float> traj("traj", 6, 2, 12, 16);
  genf.trajectories(0, 6, traj);
  auto ht = to_host(traj);
  for (long s = 0; s < 6; ++s)
    for (long j = 0; j < 12; ++j)
      for (long i = 0; i < 16; ++i) {
        ASSERT_EQ(ht(s, 0, j, i), float(hx(s, j, i)));
        ASSERT_EQ(ht(s, 1, j, i), float(hy(s, j, i)));
      }
  View3<double> bad("bad", 6, 16, 12);
  EXPECT_THROW(gen.generate(0, 6, bad, y), Error);
}

TEST(HeatPairGenerator, OneDimensionalOverloadAndRefusals) {
  auto p = make_problem(1, {20, 1, 1}, {0.05, 1, 1}, 1.0, "neumann");
  fd::HeatPairGenerator<float> gen(p, InitialConditionOptions{}, fd::HeatPairOptions{});
  View2<float> x("x", 4, 20), y("y", 4, 20);
  gen.generate(10, 4, x, y);
  // Insulated sides: the pair conserves total heat.
  auto hx = to_host(x), hy = to_host(y);
  for (long s = 0; s < 4; ++s) {
    double a = 0, b = 0;
    for (long i = 0; i < 20; ++i) a += hx(s, i), b += hy(s, i);
    EXPECT_NEAR(a, b, 1e-5 * (std::abs(a) + 1));
  }
  auto p3 = make_problem(3, {4, 4, 4}, {0.1, 0.1, 0.1}, 1.0, "periodic");
  EXPECT_THROW(fd::HeatPairGenerator<float>(p3, InitialConditionOptions{}, fd::HeatPairOptions{}), Error);
}

TEST(HeatDataset, WritesThePdeBenchLayoutAndLeavesNothingWhenInterrupted) {
  const fs::path dir = attnphys::test::scratch_dir("heat_ds");
  fs::create_directories(dir);
  auto p = make_problem(2, {8, 6, 1}, {1.0 / 8, 1.0 / 6, 1}, 1.0, "dirichlet");
  InitialConditionOptions ic;
  fd::HeatDatasetOptions o;
  o.output = (dir / "d.h5").string();
  o.samples = 5;
  o.nt = 3;
  o.chunk = 2;
  o.progress = false;
  fd::HeatSolveOptions so;
  auto sum = fd::write_heat_dataset(p, ic, so, o, "[dataset]\nsamples = 5\n");
  EXPECT_EQ(sum.samples, 5);
  h5::Reader r(o.output, "heat_dataset", 1);
  h5::Shape shape;
  auto data = r.read<float>("data", &shape);
  ASSERT_EQ(shape, (h5::Shape{5, 3, 8, 6, 1}));
  EXPECT_EQ(r.read<double>("grid/t"), (std::vector<double>{0.0, 0.01, 0.02}));
  EXPECT_NEAR(r.read<double>("grid/x")[0], 1.0 / 16, 1e-15);
  EXPECT_EQ(r.attr_string("/", "config"), "[dataset]\nsamples = 5\n");
  // Same values as the generator, transposed to [s, t, x, y].
  fd::HeatPairOptions po;
  po.delta_t = o.delta_t;
  fd::HeatPairGenerator<float> gen(p, ic, po);
  View4<float> traj("traj", 5, 3, 6, 8);
  gen.trajectories(0, 5, traj);
  auto ht = to_host(traj);
  for (long s = 0; s < 5; ++s)
    for (long k = 0; k < 3; ++k)
      for (long i = 0; i < 8; ++i)
        for (long j = 0; j < 6; ++j) ASSERT_EQ(data[(((s * 3 + k) * 8 + i) * 6 + j)], ht(s, k, j, i));

  // Interrupted after the first chunk: no file under the final name, no temporary left behind.
  o.output = (dir / "interrupted.h5").string();
  EXPECT_THROW(fd::write_heat_dataset(p, ic, so, o, "", [](long done) {
                 if (done >= 2) throw Error("simulated interruption");
               }),
               Error);
  EXPECT_FALSE(fs::exists(o.output));
  long leftovers = 0;
  for (const auto& f : fs::directory_iterator(dir)) leftovers += f.path().filename().string() != "d.h5";
  EXPECT_EQ(leftovers, 0);
  fs::remove_all(dir);
}
