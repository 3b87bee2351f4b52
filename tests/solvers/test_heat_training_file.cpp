// The heat surrogate trained from an HDF5 dataset of `attnphys heat dataset` (data.file), and on several horizons
// with the horizon as a model input (data.horizons, model.dt_input): the pairs read equal the generator's, the
// physics comes from the file, training learns, bad files are refused with clear errors, and the model's gradient
// with the horizon input matches finite differences.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../../solvers/src/training/heat_eval.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/training/heat_training.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

std::string run_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("attnphys_heat_file_" + std::to_string(::getpid())) / name;
  fs::create_directories(d);
  return d.string();
}

constexpr long kN = 16;
constexpr double kLengthScale = 0.15;
// 25 explicit stability limits h²/(2κ) on the 16-point unit interval, as the generated tiny runs use.
const double kDelta = 25.0 / (double(kN) * kN * 2.0);

heat::HeatProblem problem_1d(double kappa = 1.0, const std::string& bc = "periodic") {
  return heat::make_problem(1, {kN, 1, 1}, {1.0 / kN, 1, 1}, kappa, bc);
}

heat::InitialConditionOptions ic_grf() {
  heat::InitialConditionOptions ic;
  ic.kind = "grf";
  ic.length_scale = kLengthScale;
  return ic;
}

// A 1D dataset: `samples` trajectories of nt snapshots kDelta apart.
std::string write_dataset(const std::string& name, long samples, long nt, double kappa = 1.0,
                          const std::string& bc = "periodic", long seed = 3) {
  fd::HeatDatasetOptions o;
  o.output = run_dir("data") + "/" + name;
  o.samples = samples;
  o.nt = nt;
  o.delta_t = kDelta;
  o.seed = seed;
  o.chunk = 16;
  o.progress = false;
  fd::HeatSolveOptions so;
  so.method = fd::Method::Adi;
  fd::write_heat_dataset(problem_1d(kappa, bc), ic_grf(), so, o, "");
  return o.output;
}

// The tiny 1D run of test_heat_training.cpp, reading data.file.
HeatRunConfig tiny(const std::string& dir, long steps, const std::string& file) {
  HeatRunConfig c;
  c.data.dim = 1;
  c.data.n = kN;
  c.data.n_train = 64;
  c.data.n_val = 16;
  c.data.n_test = 16;
  c.data.length_scale = kLengthScale;
  c.data.file = file;
  c.model.harmonics = 3;
  c.train.steps = steps;
  c.train.batch = 8;
  c.train.eval_every = 50;
  c.train.checkpoint_every = 1000;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.schedule.kind = "warmup_cosine";
  c.train.schedule.warmup_steps = 5;
  c.train.schedule.total_steps = steps;
  c.eval.rollout_steps = 3;
  c.eval.rollout_samples = 4;
  c.eval.transfer_n = 0;
  c.eval.speed = true;
  return c;
}

std::string toml_of(HeatRunConfig& c) {
  OptionSet s;
  c.declare(s);
  return s.to_toml();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(HeatTrainingFile, PairsEqualTheGeneratorsAndThePhysicsIsTheFiles) {
  // kappa 0.5 and a Dirichlet box: everything the model and the evaluation use must come from the file.
  const long nt = 4;
  const std::string path = write_dataset("pairs.h5", 12, nt, 0.5, "dirichlet");
  HeatDataOptions d;
  d.dim = 1;
  d.n = kN;
  d.n_train = 6, d.n_val = 2, d.n_test = 2;
  d.file = path;
  d.length_scale = kLengthScale;  // of the fields the training generator makes (compared below)
  d.horizons = {1.0, 2.0};
  d.kappa = 7.0, d.length = 3.0, d.bc = "periodic";  // overridden by the file
  const HeatDataOptions r = resolve_heat_data(d);
  EXPECT_EQ(r.bc, "dirichlet");
  EXPECT_DOUBLE_EQ(r.kappa, 0.5);
  EXPECT_NEAR(r.length, 1.0, 1e-14);
  EXPECT_NEAR(r.horizon(), kDelta, 1e-14 * kDelta);
  EXPECT_EQ(r.file_nt, nt);
  // Per sample: horizon 1 from starts 0, 1, 2; horizon 2 from starts 0, 1.
  ASSERT_EQ(r.pairs_per_sample(), 5);

  const long first = 3, count = 4;
  HeatPairs p = read_heat_pairs(r, first, count);
  ASSERT_EQ(p.count, count * 5);
  ASSERT_EQ(p.points, kN);

  // The generator that wrote the file, in double: the file holds its values rounded to float32.
  fd::HeatPairOptions po;
  po.delta_t = kDelta;
  po.seed = 3;
  fd::HeatPairGenerator<double> gen(problem_1d(0.5, "dirichlet"), ic_grf(), po);
  View4<double> traj("traj", count, nt, 1, kN);
  gen.trajectories(first, count, traj);
  auto t = to_host(traj);
  auto in = to_host(p.inputs), tg = to_host(p.targets);
  auto tau = to_host(p.tau);
  auto f32 = [](double v) { return 1e-30 + 6.0e-8 * std::abs(v); };  // half an ulp of float, with margin
  long row = 0;
  for (long s = 0; s < count; ++s)
    for (long m : {1L, 2L})
      for (long k = 0; k + m < nt; ++k, ++row) {
        EXPECT_EQ(tau(row), double(m));
        for (long x = 0; x < kN; ++x) {
          ASSERT_NEAR(in(row, x), t(s, k, 0, x), f32(t(s, k, 0, x))) << "sample " << s << " t " << k << " x " << x;
          ASSERT_NEAR(tg(row, x), t(s, k + m, 0, x), f32(t(s, k + m, 0, x))) << "sample " << s << " t " << k + m;
        }
      }
  ASSERT_EQ(row, p.count);
  // Inputs at t = 0 are the training generator's own initial fields for those sample indices.
  HeatDataOptions g = r;
  g.seed = 3;
  auto u0 = to_host(make_initial_fields(g, first, count, kN));
  for (long s = 0; s < count; ++s)
    for (long x = 0; x < kN; ++x) ASSERT_NEAR(in(s * 5, x), u0(s, x), f32(u0(s, x)));
  // The coordinates are the file's grid/x (cell centres on a Dirichlet grid).
  h5::Reader rd(path, "heat_dataset", 1);
  const auto gx = rd.read<double>("grid/x");
  auto c = to_host(p.coords);
  for (long x = 0; x < kN; ++x) EXPECT_NEAR(c(x, 0), gx[x], 1e-14);
  // The reference solver with the file's physics (what the rollout and the ADI timing use) reproduces the file's
  // targets to its time-discretisation error.
  HeatDataOptions b = r;
  b.horizons = {1.0};
  HeatPairs one = read_heat_pairs(b, first, count);
  View2<double> adv("adv", one.count, kN);
  Kokkos::deep_copy(adv, one.inputs);
  advance_reference(r, adv, kN, 1.0, 64);
  const double identity = mean_rel_l2(one.inputs, one.targets), err = mean_rel_l2(adv, one.targets);
  EXPECT_GT(identity, 0.1);
  EXPECT_LT(err, 1e-2 * identity) << "identity " << identity;
}

TEST(HeatTrainingFile, TwoDimensionalFieldsKeepTheirOrientation) {
  // The file is [sample, t, x, y, 1] (x before y); the pairs are [pair, y·n + x]. A transposition would show.
  const long n = 8, S = 3, nt = 2;
  const auto prob = heat::make_problem(2, {n, n, 1}, {1.0 / n, 1.0 / n, 1}, 1.0, "periodic");
  fd::HeatDatasetOptions o;
  o.output = run_dir("data") + "/two_d.h5";
  o.samples = S;
  o.nt = nt;
  o.delta_t = 0.002;
  o.seed = 4;
  o.progress = false;
  fd::HeatSolveOptions so;
  fd::write_heat_dataset(prob, ic_grf(), so, o, "");
  HeatDataOptions d;
  d.dim = 2;
  d.n = n;
  d.n_train = 1, d.n_val = 1, d.n_test = 1;
  d.file = o.output;
  const HeatDataOptions r = resolve_heat_data(d);
  HeatPairs p = read_heat_pairs(r, 0, S);
  fd::HeatPairOptions po;
  po.delta_t = o.delta_t;
  po.seed = 4;
  fd::HeatPairGenerator<double> gen(prob, ic_grf(), po);
  View3<double> x("x", S, n, n), y("y", S, n, n);
  gen.generate(0, S, x, y);
  auto xh = to_host(x), yh = to_host(y);
  auto in = to_host(p.inputs), tg = to_host(p.targets), c = to_host(p.coords);
  double asym = 0;
  for (long s = 0; s < S; ++s)
    for (long iy = 0; iy < n; ++iy)
      for (long ix = 0; ix < n; ++ix) {
        const long q = iy * n + ix;
        ASSERT_NEAR(in(s, q), xh(s, iy, ix), 6e-8 * std::abs(xh(s, iy, ix)) + 1e-30) << s << " " << iy << " " << ix;
        ASSERT_NEAR(tg(s, q), yh(s, iy, ix), 6e-8 * std::abs(yh(s, iy, ix)) + 1e-30) << s << " " << iy << " " << ix;
        asym = std::max(asym, std::abs(xh(s, iy, ix) - xh(s, ix, iy)));
        if (s == 0) {
          EXPECT_NEAR(c(q, 0), ix / double(n), 1e-14);
          EXPECT_NEAR(c(q, 1), iy / double(n), 1e-14);
        }
      }
  EXPECT_GT(asym, 1e-3) << "symmetric fields would not detect a transposition";
}

TEST(HeatTrainingFile, TrainsFromTheFileAndTheLossFallsByAFixedFactor) {
  const std::string path = write_dataset("train.h5", 96, 2);
  auto cfg = tiny(run_dir("learn"), 150, path);
  auto r = run_heat(cfg, toml_of(cfg));
  const HeatDataOptions d = resolve_heat_data(cfg.data);
  HeatPairs test = read_heat_pairs(d, d.n_train + d.n_val, d.n_test);
  const double identity = mean_rel_l2(test.inputs, test.targets);
  EXPECT_GT(identity, 0.1) << "the horizon is too short to make the test meaningful";
  EXPECT_LT(r.test.rel_l2, identity / 4) << "identity error " << identity;
  EXPECT_LT(r.best_val_rel_l2, identity / 4);
  EXPECT_EQ(r.rollout.size(), 3u);
  EXPECT_GT(r.solver_ms_per_sample, 0.0);
  // The checkpoint evaluates again from the file to the same numbers.
  auto e = evaluate_heat_checkpoint(r.checkpoint, {"eval.rollout_steps=0", "eval.speed=false"}, run_dir("learn_e"));
  EXPECT_NEAR(e.test.rel_l2, r.test.rel_l2, 1e-9);
}

TEST(HeatTrainingFile, BadFilesAreRefusedWithClearErrors) {
  const std::string good = write_dataset("good.h5", 8, 3);
  HeatDataOptions d;
  d.dim = 1;
  d.n = kN;
  d.n_train = 4, d.n_val = 2, d.n_test = 2;
  auto with_file = [&](const std::string& f) {
    HeatDataOptions o = d;
    o.file = f;
    return o;
  };
  EXPECT_NO_THROW(resolve_heat_data(with_file(good)));
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure() << "'" << part << "' not in: " << msg;
  };
  // Missing.
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(with_file(run_dir("bad") + "/missing.h5")); }),
                  "does not exist"));
  // Truncated.
  const std::string cut = run_dir("bad") + "/cut.h5";
  {
    const auto size = fs::file_size(good);
    std::ifstream in(good, std::ios::binary);
    std::vector<char> bytes(size);
    in.read(bytes.data(), size);
    std::ofstream(cut, std::ios::binary).write(bytes.data(), size / 2);
  }
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(with_file(cut)); }), "truncated"));
  // Another kind of attnphys file.
  const std::string other = run_dir("bad") + "/other.h5";
  {
    h5::Writer w(other, "heat_surrogate", 1);
    w.write<double>("x", std::vector<double>{1.0});
    w.commit();
  }
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(with_file(other)); }), "not a heat_dataset"));
  // Wrong layout: no channel axis (rank 3 for a 1D dataset).
  const std::string rank = run_dir("bad") + "/rank.h5";
  {
    h5::Writer w(rank, "heat_dataset", 1);
    std::vector<float> v(8 * 2 * kN, 0.5f);
    w.write<float>("data", v.data(), {8, 2, std::uint64_t(kN)});
    w.set_attr("/", "dim", 1L);
    w.commit();
  }
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(with_file(rank)); }), "[sample, t, x, 1] (rank 4)"));
  // A grid other than the model's.
  HeatDataOptions wide = with_file(good);
  wide.n = 32;
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(wide); }), "set data.n = 16"));
  HeatDataOptions twod = with_file(good);
  twod.dim = 2;
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(twod); }), "is 1D but data.dim = 2"));
  // A single snapshot per sample: no pairs.
  const std::string single = write_dataset("single.h5", 8, 1);
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(with_file(single)); }), "at least 2"));
  // Too few samples for the split, too few snapshots for the horizons.
  HeatDataOptions many = with_file(good);
  many.n_train = 100;
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(many); }), "holds 8 samples"));
  HeatDataOptions far = with_file(good);
  far.horizons = {1.0, 3.0};
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(far); }), "needs at least 4"));
  HeatDataOptions half = with_file(good);
  half.horizons = {1.0, 1.5};
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(half); }), "not a whole number"));
  // A training run stops before training on any of these.
  auto cfg = tiny(run_dir("bad_run"), 5, cut);
  EXPECT_THROW(run_heat(cfg, toml_of(cfg)), Error);
}

namespace {
// Σ w·forward(params) for the model with the horizon input, and its parameter gradient by backward.
template <class M>
double objective(const M& model, ParameterBuffer<double>& buf, SurrogateCache<double>& cache,
                 const View1<double>& u, const View1<double>& tau, const View2<double>& coords,
                 const View1<double>& w, long B, long N) {
  View1<double> out("out", B * N);
  model.forward(out, cache, u, {}, coords, B, N, buf, tau);
  auto o = to_host(out), wh = to_host(w);
  double s = 0;
  for (long i = 0; i < B * N; ++i) s += o(i) * wh(i);
  return s;
}
}  // namespace

TEST(HeatSurrogateHorizon, GradientMatchesFiniteDifferences) {
  for (const std::string kind : {"kernel", "transformer"}) {
    SurrogateOptions so;
    so.kind = kind;
    so.dt_input = true;
    so.kernel_heads = 2;
    so.kernel_dk = 3;
    so.kernel_layers = 2;
    so.harmonics = 2;
    so.encoder.d_model = 8;
    so.encoder.n_heads = 2;
    so.encoder.d_ff = 8;
    const long B = 3, N = 6;
    HeatSurrogate<double> model(so, 1, {1.0});
    ParameterBuffer<double> buf;
    model.declare(buf);
    buf.allocate();
    model.init(buf, 5);
    // Random parameters everywhere (the horizon slopes start at 0, which would hide their cross terms).
    std::vector<double> p0 = buf.get_host(Slot::Params);
    {
      CounterRng rng(11, 0);
      for (auto& v : p0) v += 0.2 * (rng.uniform() - 0.5);
    }
    buf.set_host(p0);
    View1<double> u("u", B * N), w("w", B * N), tau("tau", B);
    fill_normal(u, 1, 0);
    fill_normal(w, 1, 1);
    {
      auto th = Kokkos::create_mirror_view(tau);
      th(0) = 1.0, th(1) = 2.0, th(2) = 1.5;
      Kokkos::deep_copy(tau, th);
    }
    View2<double> coords("x", N, 1);
    {
      auto ch = Kokkos::create_mirror_view(coords);
      for (long i = 0; i < N; ++i) ch(i, 0) = double(i) / N;
      Kokkos::deep_copy(coords, ch);
    }
    SurrogateCache<double> cache;
    objective(model, buf, cache, u, tau, coords, w, B, N);
    buf.zero_grads();
    model.backward(cache, w, buf);
    const std::vector<double> grad = buf.get_host(Slot::Grads);
    // The horizon changes the prediction.
    View1<double> one("one", B);
    Kokkos::deep_copy(one, 1.0);
    EXPECT_GT(std::abs(objective(model, buf, cache, u, tau, coords, w, B, N) -
                       objective(model, buf, cache, u, one, coords, w, B, N)),
              1e-6)
        << kind;
    const long np = long(p0.size()), stride = std::max(1L, np / 80);
    long checked = 0;
    for (long i = 0; i < np; i += (i + stride < np - 12 ? stride : 1)) {  // every one of the last 12 (the head)
      const double eps = 1e-6;
      auto p = p0;
      p[i] = p0[i] + eps;
      buf.set_host(p);
      const double fp = objective(model, buf, cache, u, tau, coords, w, B, N);
      p[i] = p0[i] - eps;
      buf.set_host(p);
      const double fm = objective(model, buf, cache, u, tau, coords, w, B, N);
      const double fd = (fp - fm) / (2 * eps);
      EXPECT_NEAR(grad[i], fd, 1e-6 * (1 + std::abs(fd))) << kind << " parameter " << i;
      ++checked;
    }
    buf.set_host(p0);
    EXPECT_GT(checked, 20) << kind;
  }
}

TEST(HeatSurrogateHorizon, KernelGradientCoversTheHorizonSlopes) {
  // Every parameter of a one-layer kernel model, the horizon slopes a_dt, b0_dt, c_dt included.
  SurrogateOptions so;
  so.dt_input = true;
  so.kernel_heads = 2;
  so.kernel_dk = 2;
  so.harmonics = 1;
  const long B = 2, N = 5;
  HeatSurrogate<double> model(so, 1, {1.0});
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 2);
  std::vector<double> p0 = buf.get_host(Slot::Params);
  CounterRng rng(4, 0);
  for (auto& v : p0) v += 0.3 * (rng.uniform() - 0.5);
  buf.set_host(p0);
  View1<double> u("u", B * N), w("w", B * N), tau("tau", B);
  fill_normal(u, 2, 0);
  fill_normal(w, 2, 1);
  Kokkos::deep_copy(tau, 3.0);
  View2<double> coords("x", N, 1);
  {
    auto ch = Kokkos::create_mirror_view(coords);
    for (long i = 0; i < N; ++i) ch(i, 0) = double(i) / N;
    Kokkos::deep_copy(coords, ch);
  }
  SurrogateCache<double> cache;
  objective(model, buf, cache, u, tau, coords, w, B, N);
  buf.zero_grads();
  model.backward(cache, w, buf);
  const std::vector<double> grad = buf.get_host(Slot::Grads);
  for (const char* name : {"kernel.0.a_dt", "kernel.0.b0_dt", "kernel.0.c_dt"}) {
    const auto& blk = buf.block(name);
    for (long j = 0; j < blk.size; ++j) {
      const long i = blk.offset + j;
      const double eps = 1e-6;
      auto p = p0;
      p[i] += eps;
      buf.set_host(p);
      const double fp = objective(model, buf, cache, u, tau, coords, w, B, N);
      p[i] = p0[i] - eps;
      buf.set_host(p);
      const double fm = objective(model, buf, cache, u, tau, coords, w, B, N);
      const double fd = (fp - fm) / (2 * eps);
      EXPECT_NEAR(grad[i], fd, 1e-7 * (1 + std::abs(fd))) << name << "[" << j << "]";
      EXPECT_GT(std::abs(fd), 1e-8) << name << " does not act on the output";
    }
  }
}

TEST(HeatTrainingHorizons, OneModelLearnsTwoHorizons) {
  // Generated pairs at Δt and 2Δt, the horizon as an input: both horizons are learned.
  HeatRunConfig cfg = tiny(run_dir("two"), 200, "");
  cfg.data.horizons = {1.0, 2.0};
  cfg.model.dt_input = true;
  cfg.eval.speed = false;
  auto r = run_heat(cfg, toml_of(cfg));
  ASSERT_EQ(r.test_rel_l2_by_horizon.size(), 2u);
  for (int j = 0; j < 2; ++j) {
    HeatDataOptions d = cfg.data;
    d.horizons = {cfg.data.horizons[j]};
    HeatPairs p = generate_heat_pairs(d, d.n_train + d.n_val, d.n_test, d.n);
    const double identity = mean_rel_l2(p.inputs, p.targets);
    EXPECT_GT(identity, 0.1);
    EXPECT_LT(r.test_rel_l2_by_horizon[j], identity / 4) << "horizon " << j << ", identity " << identity;
  }
  EXPECT_NEAR(r.test_rel_l2_by_horizon[0], r.test.rel_l2, 1e-9);
  // Several horizons without the horizon input are refused: the model could not tell them apart.
  HeatRunConfig blind = cfg;
  blind.model.dt_input = false;
  EXPECT_THROW(blind.validate(), Error);
}
