// Training pairs generated from a problem family ([family] in `attnphys train heat`): every sample's κ (and source,
// boundary data) is its own, the model sees them as channels, and the evaluation uses each sample's own problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "attnphys/core/options.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"
#include "attnphys/solvers/fd/nonlinear_heat.hpp"
#include "attnphys/solvers/training/heat_training.hpp"
#include "../../solvers/src/training/heat_eval.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

HeatDataOptions family_2d() {
  HeatDataOptions d;
  d.dim = 2;
  d.n = 16;
  d.length_scale = 0.2;
  d.horizon_ftcs_steps = 10;
  d.reference_substeps = 8;
  d.family.kappa = heat::KappaFamily::LogNormal;
  d.family.kappa_contrast = 10;
  d.family.kappa_length_scale = 0.25;
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(HeatTrainingFamily, PairsAreTheReferenceSolverOnEachSamplesOwnProblem) {
  const HeatDataOptions d = resolve_heat_data(family_2d());
  ASSERT_EQ(d.channels, std::vector<std::string>{"kappa"});
  const long first = 3, count = 2, P = 16 * 16;
  const HeatPairs p = make_heat_pairs(d, first, count, 16, 2);
  ASSERT_EQ(p.count, count);
  ASSERT_EQ(p.channels(), 1);
  auto in = to_host(p.inputs), tg = to_host(p.targets);
  auto ex = to_host(p.extra);
  auto later = to_host(p.later);
  for (long s = 0; s < count; ++s) {
    const heat::HeatProblem prob = d.sample_problem(16, first + s);
    ASSERT_TRUE(prob.variable_kappa());
    auto k = to_host(prob.kappa_field);
    double kmin = 1e300, kmax = 0;
    for (long q = 0; q < P; ++q) {
      EXPECT_EQ(ex(s, q, 0), k.data()[q]) << "sample " << s << " cell " << q;
      kmin = std::min(kmin, k.data()[q]);
      kmax = std::max(kmax, k.data()[q]);
    }
    EXPECT_NEAR(kmax / kmin, 10.0, 1e-9);  // the family's contrast, exactly
    // The target is that problem advanced by one horizon with the reference scheme, then one more (unrolled pairs).
    fd::HeatStepper st(prob, fd::Method::Adi);
    View3<double> u("u", 1, 16, 16);
    auto uh = Kokkos::create_mirror_view(u);
    for (long q = 0; q < P; ++q) uh.data()[q] = in(s, q);
    Kokkos::deep_copy(u, uh);
    st.advance(u, 0.0, d.horizon(), d.horizon() / double(d.reference_substeps));
    auto u1 = to_host(u);
    double m0 = 0, m1 = 0, diff = 0;
    for (long q = 0; q < P; ++q) {
      EXPECT_NEAR(tg(s, q), u1.data()[q], 1e-13);
      m0 += in(s, q);
      m1 += tg(s, q);
      diff += std::abs(tg(s, q) - in(s, q));
    }
    EXPECT_NEAR(m1, m0, 1e-10) << "periodic, no source: the heat is conserved";
    EXPECT_GT(diff / P, 1e-3) << "the horizon must change the field";
    st.advance(u, 0.0, d.horizon(), d.horizon() / double(d.reference_substeps));
    auto u2 = to_host(u);
    for (long q = 0; q < P; ++q) EXPECT_NEAR(later(s, 0, q), u2.data()[q], 1e-13);
  }
  // Samples differ in κ; the same sample index gives the same κ on a finer grid (a field of physical coordinates:
  // periodic grid points 2i of the 32-point grid are points i of the 16-point one).
  const auto k3 = to_host(d.sample_problem(16, 3).kappa_field), k4 = to_host(d.sample_problem(16, 4).kappa_field);
  const auto k3f = to_host(d.sample_problem(32, 3).kappa_field);
  double dsamp = 0, dres = 0, norm = 0;
  for (long y = 0; y < 16; ++y)
    for (long x = 0; x < 16; ++x) {
      const double a = k3.data()[y * 16 + x];
      dsamp += std::abs(a - k4.data()[y * 16 + x]);
      dres += std::abs(a - k3f.data()[(2 * y) * 32 + 2 * x]);
      norm += a;
    }
  EXPECT_GT(dsamp / norm, 0.1);
  EXPECT_LT(dres / norm, 0.05);
}

TEST(HeatTrainingFamily, SourcesAndBoundaryDataBecomeChannels) {
  HeatDataOptions o = family_2d();
  o.bc = heat::BcType::Dirichlet;
  o.family.source = heat::SourceFamily::Grf;
  o.family.boundary = heat::BoundaryFamily::Random;
  const HeatDataOptions d = resolve_heat_data(o);
  ASSERT_EQ(d.channels, (std::vector<std::string>{"kappa", "source", "boundary"}));
  const HeatPairs p = make_heat_pairs(d, 0, 1, 16);
  auto ex = to_host(p.extra);
  const heat::HeatProblem prob = d.sample_problem(16, 0);
  auto f = to_host(prob.source_field);
  const auto b = heat::boundary_field(prob);
  double bin = 0, bside = 0;
  for (long q = 0; q < 256; ++q) {
    EXPECT_EQ(ex(0, q, 1), f.data()[q]);
    EXPECT_EQ(ex(0, q, 2), b.data()[q]);
    const long x = q % 16, y = q / 16;
    const bool side = x == 0 || x == 15 || y == 0 || y == 15;
    (side ? bside : bin) += std::abs(ex(0, q, 2));
  }
  EXPECT_EQ(bin, 0.0) << "boundary data only next to the sides";
  EXPECT_GT(bside, 0.0);
  // A subset, in the order asked for.
  o.channels = {"source", "kappa"};
  const HeatDataOptions d2 = resolve_heat_data(o);
  const HeatPairs p2 = make_heat_pairs(d2, 0, 1, 16);
  auto ex2 = to_host(p2.extra);
  for (long q = 0; q < 256; ++q) {
    EXPECT_EQ(ex2(0, q, 0), ex(0, q, 1));
    EXPECT_EQ(ex2(0, q, 1), ex(0, q, 0));
  }
}

TEST(HeatTrainingFamily, RefusesWhatCannotWork) {
  HeatRunConfig c;
  c.data = family_2d();
  c.model.kind = SurrogateKind::Kernel;
  EXPECT_TRUE(contains(error_of([&] { c.resolved(); }), "model.kind = conditioned")) << error_of([&] { c.resolved(); });
  c.model.kind = SurrogateKind::Conditioned;
  c.data.channels = {"source"};
  EXPECT_TRUE(contains(error_of([&] { c.resolved(); }), "does not draw")) << error_of([&] { c.resolved(); });
  c.data.channels = {};
  // Bad family keys are refused through the option path with the valid names.
  OptionSet set;
  HeatRunConfig d;
  d.declare(set);
  EXPECT_TRUE(contains(error_of([&] { set.set("family.kappa=gaussian"); }), "lognormal"));
  set.set("family.kappa=lognormal");
  set.set("family.kappa_contrast=5");
  EXPECT_EQ(d.data.family.kappa, heat::KappaFamily::LogNormal);
  EXPECT_EQ(d.data.family.kappa_contrast, 5.0);
}

TEST(HeatTrainingFamily, ConditionedModelTrainsAndEvaluatesOnTheFamily) {
  const auto dir = attnphys::test::scratch_dir("family").string();
  HeatRunConfig c;
  c.data = family_2d();
  c.data.dim = 1;
  c.data.n = 32;
  c.data.n_train = 96;
  c.data.n_val = 16;
  c.data.n_test = 16;
  c.data.horizon_ftcs_steps = 20;
  c.model.kind = SurrogateKind::Conditioned;
  c.model.kernel_dk = 8;
  c.train.steps = 120;
  c.train.batch = 8;
  c.train.eval_every = 20;
  c.train.checkpoint_every = 200;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.optimizer.lr = 2e-2;
  c.train.schedule.total_steps = 120;
  c.train.schedule.warmup_steps = 10;
  c.eval.rollout_steps = 4;
  c.eval.rollout_samples = 4;
  c.eval.transfer_n = 64;
  c.eval.transfer_samples = 4;
  c.eval.speed = true;
  OptionSet s;
  HeatRunConfig t = c;
  t.declare(s);
  const HeatRunResult r = run_heat(c, s.to_toml());
  EXPECT_TRUE(contains(r.family, "lognormal")) << r.family;
  EXPECT_EQ(r.channels, std::vector<std::string>{"kappa"});
  // Better than the field itself (u(t) as the prediction of u(t + Δt)).
  const HeatDataOptions d = resolve_heat_data(c.data);
  const HeatPairs test = make_heat_pairs(d, d.n_train + d.n_val, d.n_test, d.n);
  const double trivial = mean_rel_l2(test.inputs, test.targets);
  EXPECT_LT(r.test.rel_l2, 0.5 * trivial) << "surrogate " << r.test.rel_l2 << " vs u(t) itself " << trivial;
  ASSERT_EQ(r.rollout.size(), 4u);
  for (double e : r.rollout) EXPECT_TRUE(std::isfinite(e));
  // The transfer grid has the same family, its κ sampled there.
  EXPECT_GT(r.transfer.rel_l2, 0.0);
  EXPECT_LT(r.transfer.rel_l2, 0.5 * trivial);
  EXPECT_GT(r.speedup_vs_solver, 0.0);
  EXPECT_TRUE(contains(r.to_json().dump(), "\"family\": \"" + r.family + "\"")) << r.to_json().dump();
  fs::remove_all(dir);
}

TEST(HeatTrainingFamily, TheMainJobConfigFileHoldsTheMainJobDefaults) {
  // configs/heat2d.toml over a default-constructed configuration gives exactly HeatRunConfig::main_job(), what
  // `attnphys train heat` runs without --config; and the constant-κ config over the main job gives the defaults of a
  // default-constructed one (its every difference is stated in the file).
  const fs::path src = ATTNPHYS_SOURCE_DIR;
  auto toml_of = [](HeatRunConfig c, const std::string& file) {
    OptionSet s;
    c.declare(s);
    if (!file.empty()) s.load_file(file);
    return s.to_toml();
  };
  HeatRunConfig main = HeatRunConfig::main_job();
  main.data.n = 32;  // its 0 resolves to 32 for generated pairs (and to a file's grid with data.file)
  EXPECT_EQ(toml_of(HeatRunConfig{}, (src / "configs/heat2d.toml").string()), toml_of(main, ""));
  HeatRunConfig generic;
  generic.train.out_dir = "runs/heat2d_constant";
  generic.data.n = 32;  // the default 0 resolves to 32 for generated pairs
  generic.data.family.kappa_contrast = HeatRunConfig::main_job().data.family.kappa_contrast;  // unused: κ constant
  generic.model.conditioned_attention = HeatRunConfig::main_job().model.conditioned_attention;  // unused: kernel kind
  generic.train.unroll_grad = HeatRunConfig::main_job().train.unroll_grad;  // unused: one-step training
  generic.train.unroll_warmup_steps = HeatRunConfig::main_job().train.unroll_warmup_steps;  // unused likewise
  EXPECT_EQ(toml_of(HeatRunConfig::main_job(), (src / "configs/heat2d_constant.toml").string()), toml_of(generic, ""));
  const HeatRunConfig m = HeatRunConfig::main_job().resolved();
  EXPECT_EQ(m.data.channels, std::vector<std::string>{"kappa"});
  EXPECT_GE(m.data.family.kappa_contrast, 5.0);
}

TEST(HeatTrainingFamily, NonlinearPairsAreTheNonlinearSchemeAndKappaVariesThreefold) {
  // u_t = ∇·(κ0(1 + βu²)∇u): generated targets are fd::NonlinearHeatStepper's, and with β = 8 on fields of unit
  // size κ(u) varies at least 3× over the data (the floor the operator issue sets for the nonlinear family).
  HeatDataOptions o;
  o.dim = 2;
  o.n = 16;
  o.length_scale = 0.2;
  o.horizon_ftcs_steps = 4;
  o.reference_substeps = 8;
  o.law.law = heat::KappaLawChoice::Quadratic;
  o.law.kappa0 = 1.0;
  o.law.beta = 8.0;
  const HeatDataOptions d = resolve_heat_data(o);
  EXPECT_TRUE(d.generated_family());
  EXPECT_TRUE(d.channels.empty());
  EXPECT_TRUE(contains(d.family_name(), "quadratic")) << d.family_name();
  const HeatPairs p = make_heat_pairs(d, 0, 3, 16);
  auto in = to_host(p.inputs), tg = to_host(p.targets);
  double umax = 0, umin = 1e300;
  for (long s = 0; s < 3; ++s) {
    fd::NonlinearHeatStepper st(d.sample_problem(16, s), o.law.build());
    View3<double> u("u", 1, 16, 16);
    auto uh = Kokkos::create_mirror_view(u);
    for (long q = 0; q < 256; ++q) uh.data()[q] = in(s, q);
    Kokkos::deep_copy(u, uh);
    st.advance(u, 0.0, d.horizon(), d.horizon() / double(d.reference_substeps));
    auto u1 = to_host(u);
    double m0 = 0, m1 = 0;
    for (long q = 0; q < 256; ++q) {
      EXPECT_NEAR(tg(s, q), u1.data()[q], 1e-13);
      m0 += in(s, q);
      m1 += tg(s, q);
      umax = std::max(umax, std::abs(in(s, q)));
      umin = std::min(umin, std::abs(in(s, q)));
    }
    EXPECT_NEAR(m1, m0, 1e-9) << "periodic, no source: conservative";
  }
  const double kmax = 1 + 8 * umax * umax, kmin = 1 + 8 * umin * umin;
  EXPECT_GE(kmax / kmin, 3.0) << "κ(u) from " << kmin << " to " << kmax;
  // The linear stepper gives other targets: the law matters.
  fd::HeatStepper lin(d.sample_problem(16, 0), fd::Method::Adi);
  View3<double> u("u", 1, 16, 16);
  auto uh = Kokkos::create_mirror_view(u);
  for (long q = 0; q < 256; ++q) uh.data()[q] = in(0, q);
  Kokkos::deep_copy(u, uh);
  lin.advance(u, 0.0, d.horizon(), d.horizon() / double(d.reference_substeps));
  auto ul = to_host(u);
  double diff = 0, norm = 0;
  for (long q = 0; q < 256; ++q) {
    diff += (ul.data()[q] - tg(0, q)) * (ul.data()[q] - tg(0, q));
    norm += tg(0, q) * tg(0, q);
  }
  EXPECT_GT(std::sqrt(diff / norm), 1e-2);
  // A per-sample κ(x) with a κ(u) law is refused with what to change.
  o.family.kappa = heat::KappaFamily::LogNormal;
  EXPECT_TRUE(contains(error_of([&] { resolve_heat_data(o); }), "set family.kappa = constant"));
}
