// The heat surrogate trained from an HDF5 dataset of `attnphys heat dataset` (data.file), and on several horizons
// with the horizon as a model input (data.horizons, model.dt_input): the pairs read equal the generator's, the
// physics comes from the file, training learns, bad files are refused with clear errors, and the model's gradient
// with the horizon input matches finite differences.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../../solvers/src/training/heat_eval.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/training/heat_training.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

std::string run_dir(const std::string& name) {
  auto d = attnphys::test::scratch_dir("heat_file/" + name);
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
  ic.kind = heat::IcKind::Grf;
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
  c.train.schedule.kind = ScheduleKind::WarmupCosine;
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
  d.kappa = 7.0, d.length = 3.0, d.bc = heat::BcType::Periodic;  // overridden by the file
  const HeatDataOptions r = resolve_heat_data(d);
  EXPECT_EQ(r.bc, heat::BcType::Dirichlet);
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
  // Wrong layout: no time axis (rank 2 for a 1D dataset; rank 3 [sample, t, x] and 4 [sample, t, x, 1] are fine).
  const std::string rank = run_dir("bad") + "/rank.h5";
  {
    h5::Writer w(rank, "heat_dataset", 1);
    std::vector<float> v(8 * kN, 0.5f);
    w.write<float>("data", v.data(), {8, std::uint64_t(kN)});
    w.set_attr("/", "dim", 1L);
    w.commit();
  }
  EXPECT_TRUE(has(error_of([&] { resolve_heat_data(with_file(rank)); }),
                  "[sample, t, x, (components)] (rank 3 or 4)"));
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
    so.kind = parse_enum<SurrogateKind>(kind, "model.kind");
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

// ------------------------------------------------------------------------------------------ files attnphys did not write

namespace {

// A dataset of a foreign file: its values (written as float32 or float64, no attributes at all).
struct Foreign {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::vector<double> values;
  bool f32 = true;
};

// Writes an HDF5 file as h5py would (no attnphys attributes): groups made on the way.
void write_foreign(const std::string& path, const std::vector<Foreign>& sets) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  for (const auto& d : sets) {
    std::vector<hsize_t> dims(d.shape.begin(), d.shape.end());
    std::size_t n = 1;
    for (auto e : dims) n *= std::size_t(e);
    ASSERT_EQ(n, d.values.size()) << d.name;
    const hid_t sp = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
    const hid_t ds = H5Dcreate2(f, d.name.c_str(), d.f32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, sp, lcpl, H5P_DEFAULT,
                                H5P_DEFAULT);
    ASSERT_GE(ds, 0) << d.name;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.values.data()), 0);
    H5Dclose(ds);
    H5Sclose(sp);
  }
  H5Pclose(lcpl);
  H5Fclose(f);
}

std::vector<double> iota_coords(long n, double h, double x0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) v[std::size_t(i)] = x0 + h * double(i);
  return v;
}

// A 2D PDEBench-style file on a 6 x 5 grid: density [S, T, X, Y] (float64), nu [S, X, Y] (static, float32),
// V [S, T, X, Y, 2] (time-dependent, two components), coordinates named as PDEBench names them, t with T + 1
// entries. Values encode their indices, so every placement can be checked.
constexpr long kS = 6, kT = 3, kX = 6, kY = 5;
double density(long s, long t, long x, long y) { return 1000.0 * s + 100.0 * t + 10.0 * x + y; }
double nu_at(long s, long x, long y) { return 1.0 + s + 0.1 * x + 0.01 * y; }
double v_at(long s, long t, long x, long y, long k) { return -(1000.0 * s + 100.0 * t + 10.0 * x + y) - 0.5 * k; }

std::vector<Foreign> pdebench_2d() {
  Foreign d{"density", {kS, kT, kX, kY}, {}, false}, nu{"nu", {kS, kX, kY}, {}, true},
      v{"V", {kS, kT, kX, kY, 2}, {}, true};
  for (long s = 0; s < kS; ++s) {
    for (long t = 0; t < kT; ++t)
      for (long x = 0; x < kX; ++x)
        for (long y = 0; y < kY; ++y) {
          d.values.push_back(density(s, t, x, y));
          for (long k = 0; k < 2; ++k) v.values.push_back(v_at(s, t, x, y, k));
        }
    for (long x = 0; x < kX; ++x)
      for (long y = 0; y < kY; ++y) nu.values.push_back(nu_at(s, x, y));
  }
  const double h = 0.25;
  return {d, nu, v, {"x-coordinate", {kX}, iota_coords(kX, h, -0.625), true},
          {"y-coordinate", {kY}, iota_coords(kY, h, 0.125), true},
          {"t-coordinate", {kT + 1}, iota_coords(kT + 1, 0.05, 0.0), true}};
}

HeatDataOptions foreign_options(const std::string& path) {
  HeatDataOptions d;
  d.dim = 2;
  d.n = 0;
  d.n_train = 3, d.n_val = 1, d.n_test = 2;
  d.file = path;
  d.field = "density";
  d.channels = {"nu", "V[1]"};
  return d;
}

auto contains = [](const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                             : ::testing::AssertionFailure() << "'" << part << "' not in: " << msg;
};

}  // namespace

TEST(HeatDataChannels, NamesAndComponentsAreParsed) {
  auto a = parse_channel("nu");
  EXPECT_EQ(a.name, "nu");
  EXPECT_EQ(a.component, -1);
  EXPECT_EQ(a.text(), "nu");
  auto b = parse_channel("Vx[1]");
  EXPECT_EQ(b.name, "Vx");
  EXPECT_EQ(b.component, 1);
  EXPECT_EQ(b.text(), "Vx[1]");
  auto g = parse_channel("fields/u[12]");
  EXPECT_EQ(g.name, "fields/u");
  EXPECT_EQ(g.component, 12);
  for (const char* bad : {"", "a[", "[0]", "a[-1]", "a[x]", "a]", "a[1]b", "a[]"})
    EXPECT_TRUE(contains(error_of([&] { parse_channel(bad); }), "name[k]")) << "'" << bad << "'";
  // data.channels are checked with the rest of the options.
  HeatDataOptions d;
  d.channels = {"ok", "bad["};
  EXPECT_TRUE(contains(error_of([&] { d.validate(); }), "'bad['"));
}

TEST(HeatDataForeign, PdebenchLayoutIsReadByNameOnANonSquareGrid) {
  const std::string path = run_dir("foreign") + "/pdebench_2d.h5";
  write_foreign(path, pdebench_2d());
  const HeatDataOptions r = resolve_heat_data(foreign_options(path));
  EXPECT_EQ(r.n, kX);
  EXPECT_EQ(r.grid_nx(), kX);
  EXPECT_EQ(r.grid_ny(), kY);
  EXPECT_EQ(r.points(), kX * kY);
  EXPECT_EQ(r.file_nt, kT);
  EXPECT_FALSE(r.solver_physics);
  ASSERT_TRUE(r.info);
  EXPECT_TRUE(contains(r.info->physics_note, "not written by `attnphys heat dataset`"));
  EXPECT_TRUE(contains(r.info->physics_note, "from data.bc"));
  EXPECT_NEAR(r.length, kX * 0.25, 1e-12);
  EXPECT_NEAR(r.box_y(), kY * 0.25, 1e-12);
  // Periodic (data.bc): the encoding's periods are the box; non-periodic: twice it.
  EXPECT_NEAR(encoding_lengths(r)[1], kY * 0.25, 1e-12);
  HeatDataOptions neu = r;
  neu.bc = heat::BcType::Neumann;
  EXPECT_NEAR(encoding_lengths(neu)[0], 2 * kX * 0.25, 1e-12);
  ASSERT_EQ(r.info->channels.size(), 2u);
  EXPECT_FALSE(r.info->channels[0].time_dependent);
  EXPECT_TRUE(r.info->channels[1].time_dependent);
  EXPECT_EQ(r.info->channels[1].components, 2);
  EXPECT_EQ(r.pairs_per_sample(), kT - 1);

  const long first = 2, count = 3;
  HeatPairs p = read_heat_pairs(r, first, count);
  ASSERT_EQ(p.count, count * (kT - 1));
  ASSERT_EQ(p.points, kX * kY);
  ASSERT_EQ(p.channels(), 2);
  EXPECT_EQ(p.nx, kX);
  EXPECT_EQ(p.ny, kY);
  auto in = to_host(p.inputs), tg = to_host(p.targets), c = to_host(p.coords);
  auto ex = to_host(p.extra);
  long row = 0;
  for (long s = first; s < first + count; ++s)
    for (long k = 0; k + 1 < kT; ++k, ++row)
      for (long y = 0; y < kY; ++y)
        for (long x = 0; x < kX; ++x) {
          const long q = y * kX + x;  // ours: x fastest; the file's: [x, y]
          ASSERT_EQ(in(row, q), density(s, k, x, y)) << s << " " << k << " " << x << " " << y;
          ASSERT_EQ(tg(row, q), density(s, k + 1, x, y));
          ASSERT_NEAR(ex(row, q, 0), nu_at(s, x, y), 1e-6 * nu_at(s, x, y));       // static: every snapshot
          ASSERT_NEAR(ex(row, q, 1), v_at(s, k, x, y, 1), 1e-6 * std::abs(v_at(s, k, x, y, 1)));  // at the input's t
        }
  for (long y = 0; y < kY; ++y)
    for (long x = 0; x < kX; ++x) {
      EXPECT_NEAR(c(y * kX + x, 0), -0.625 + 0.25 * x, 1e-7);
      EXPECT_NEAR(c(y * kX + x, 1), 0.125 + 0.25 * y, 1e-7);
    }
  // Horizon: the t-coordinate's spacing (its first T of T + 1 entries).
  EXPECT_NEAR(r.horizon(), 0.05, 1e-7);
}

TEST(HeatDataForeign, BadChannelsAndFilesGiveErrorsThatSayWhatToFix) {
  const std::string dir = run_dir("foreign_bad");
  const std::string good = dir + "/good.h5";
  write_foreign(good, pdebench_2d());
  auto opts = [&](const std::string& path, std::vector<std::string> channels, const std::string& field = "density") {
    HeatDataOptions d = foreign_options(path);
    d.channels = std::move(channels);
    d.field = field;
    return d;
  };
  auto err = [&](const HeatDataOptions& d) { return error_of([&] { resolve_heat_data(d); }); };
  // A wrong channel name lists the datasets that exist.
  auto e = err(opts(good, {"nux"}));
  EXPECT_TRUE(contains(e, "no dataset 'nux'"));
  EXPECT_TRUE(contains(e, "'nu' [6x6x5]"));
  EXPECT_TRUE(contains(e, "'density' [6x3x6x5]"));
  EXPECT_TRUE(contains(err(opts(good, {}, "tensor")), "no dataset 'tensor' (data.field = 'tensor')"));
  // Components: needed for a trailing axis of 2, and within range.
  EXPECT_TRUE(contains(err(opts(good, {"V"})), "choose one, e.g. 'V[0]'"));
  EXPECT_TRUE(contains(err(opts(good, {"V[2]"})), "asks for component 2 but 'V' has 2 component(s)"));
  EXPECT_TRUE(contains(err(opts(good, {"nu[1]"})), "'nu' has 1 component(s)"));
  // A channel on another grid, and one with the wrong number of samples.
  auto sets = pdebench_2d();
  sets.push_back({"kappa", {kS, 3, 3}, std::vector<double>(kS * 9, 1.0), true});
  sets.push_back({"short", {kS - 1, kX, kY}, std::vector<double>((kS - 1) * kX * kY, 1.0), true});
  const std::string more = dir + "/more.h5";
  write_foreign(more, sets);
  e = err(opts(more, {"kappa"}));
  EXPECT_TRUE(contains(e, "channel 'kappa' has shape 6x3x3, which does not fit 'density'"));
  EXPECT_TRUE(contains(e, "6x5 grid"));
  EXPECT_TRUE(contains(err(opts(more, {"short"})), "channel 'short' holds 5 samples but 'density' (data.field) holds 6"));
  // An explicit data.n that is not the file's grid.
  HeatDataOptions n8 = opts(good, {});
  n8.n = 8;
  EXPECT_TRUE(contains(err(n8), "6x5 grid but data.n = 8"));
  EXPECT_TRUE(contains(err(n8), "set data.n = 0"));
  HeatDataOptions one_d = opts(good, {});
  one_d.dim = 1;
  EXPECT_TRUE(contains(err(one_d), "is 2D but data.dim = 1"));
  // A truncated copy, a file that is not HDF5 at all.
  const std::string cut = dir + "/cut.h5";
  {
    const auto size = fs::file_size(good);
    std::ifstream in(good, std::ios::binary);
    std::vector<char> bytes(size);
    in.read(bytes.data(), long(size));
    std::ofstream(cut, std::ios::binary).write(bytes.data(), long(size * 2 / 3));
  }
  EXPECT_TRUE(contains(err(opts(cut, {"nu"})), "truncated"));
  const std::string text = dir + "/text.h5";
  std::ofstream(text) << "x,y\n1,2\n";
  EXPECT_TRUE(contains(err(opts(text, {})), "is not an HDF5 file"));
  // t-coordinate of a length that fits neither T nor T + 1.
  auto badt = pdebench_2d();
  badt.back() = {"t-coordinate", {kT + 2}, iota_coords(kT + 2, 0.05, 0.0), true};
  const std::string tfile = dir + "/badt.h5";
  write_foreign(tfile, badt);
  EXPECT_TRUE(contains(err(opts(tfile, {})), "t-coordinate has 5 values but 'density' has 3 snapshots"));
  // PDEBench's per-sample groups are not read, and the error says so.
  const std::string groups = dir + "/groups.h5";
  write_foreign(groups, {{"0000/data", {kT, kX, 1}, std::vector<double>(kT * kX, 0.0), true},
                         {"0000/grid/x", {kX}, iota_coords(kX, 0.1, 0.05), true}});
  HeatDataOptions g1 = opts(groups, {}, "data");
  g1.dim = 1;
  EXPECT_TRUE(contains(err(g1), "one group per sample ('0000/data', ...) are not read"));
  // NaN in a channel: refused when the pairs are read, naming the channel and the sample.
  auto nan = pdebench_2d();
  nan[1].values[std::size_t(4 * kX * kY + 7)] = std::nan("");
  const std::string nfile = dir + "/nan.h5";
  write_foreign(nfile, nan);
  const HeatDataOptions rn = resolve_heat_data(opts(nfile, {"nu"}));
  EXPECT_NO_THROW(read_heat_pairs(rn, 0, 4));
  e = error_of([&] { read_heat_pairs(rn, 2, 4); });
  EXPECT_TRUE(contains(e, "non-finite value (nan) in 'nu' at sample 4"));
  // The field too.
  auto nanf = pdebench_2d();
  nanf[0].values[std::size_t(1 * kT * kX * kY + 3)] = INFINITY;
  write_foreign(nfile, nanf);
  const HeatDataOptions rf = resolve_heat_data(opts(nfile, {}));
  EXPECT_TRUE(contains(error_of([&] { read_heat_pairs(rf, 0, 3); }), "(inf) in 'density' at sample 1"));
}

TEST(HeatDataForeign, OurOwnFileWithVariableKappaHasItsPhysicsFromTheFile) {
  // As the dataset writer stores a variable-κ family: a per-sample 'kappa' channel and variable_kappa = 1.
  const std::string path = run_dir("own") + "/variable.h5";
  const long S = 4, nt = 3, n = 8;
  {
    h5::Writer w(path, "heat_dataset", 1);
    std::vector<float> u(S * nt * n), k(S * n);
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = float(std::sin(0.3 * double(i)));
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = float(1.0 + 0.5 * std::cos(double(i)));
    w.write<float>("data", u.data(), {S, nt, n, 1});
    w.write<float>("kappa", k.data(), {S, n});
    w.write<double>("grid/x", iota_coords(n, 1.0 / n, 0.0));
    w.write<double>("grid/t", iota_coords(nt, 0.01, 0.0));
    w.set_attr("/", "dim", 1L);
    w.set_attr("/", "bc", std::string("periodic"));
    w.set_attr("/", "kappa", 1.0);
    w.set_attr("/", "variable_kappa", 1L);
    w.set_attr("/", "homogeneous", 1L);
    w.set_attr("/", "family", std::string("variable_kappa"));
    w.commit();
  }
  HeatDataOptions d;
  d.dim = 1;
  d.n_train = 2, d.n_val = 1, d.n_test = 1;
  d.file = path;
  d.bc = heat::BcType::Dirichlet;  // the file's own bc attribute wins
  d.channels = {"kappa"};
  const HeatDataOptions r = resolve_heat_data(d);
  EXPECT_FALSE(r.solver_physics);
  EXPECT_EQ(r.bc, heat::BcType::Periodic);
  EXPECT_EQ(r.n, n);
  EXPECT_TRUE(contains(r.info->physics_note, "variable κ(x)"));
  EXPECT_EQ(r.info->family, "variable_kappa");
  HeatPairs p = read_heat_pairs(r, 1, 2);
  auto ex = to_host(p.extra);
  EXPECT_NEAR(ex(0, 3, 0), 1.0 + 0.5 * std::cos(double(1 * n + 3)), 1e-6);
  EXPECT_NEAR(ex(2, 3, 0), 1.0 + 0.5 * std::cos(double(2 * n + 3)), 1e-6);
  // model.input_kappa is shorthand for that channel; the kernel model refuses channels.
  HeatRunConfig cfg;
  cfg.data = d;
  cfg.data.channels.clear();
  cfg.model.kind = SurrogateKind::Transformer;
  cfg.model.input_kappa = true;
  auto rc = cfg.resolved();
  ASSERT_EQ(rc.data.channels.size(), 1u);
  EXPECT_EQ(rc.data.channels[0], "kappa");
  EXPECT_EQ(rc.model.extra_channels, 1);
  HeatRunConfig kern = cfg;
  kern.model.input_kappa = false;
  kern.model.kind = SurrogateKind::Kernel;
  kern.data.channels = {"kappa"};
  EXPECT_TRUE(contains(error_of([&] { kern.validate(); }), "cannot take extra input channels (data.channels = [kappa])"));
  HeatRunConfig gen = cfg;
  gen.data.file = "";
  EXPECT_TRUE(contains(error_of([&] { gen.resolved(); }), "model.input_kappa feeds the dataset 'kappa'"));
  gen.model.input_kappa = false;
  gen.data.channels = {"nu"};
  EXPECT_TRUE(contains(error_of([&] { gen.resolved(); }), "generated pairs have no per-sample family"));
}

TEST(HeatSurrogateChannels, ExtraChannelsAreInputsAndTheGradientMatches) {
  SurrogateOptions so;
  so.kind = SurrogateKind::Transformer;
  so.extra_channels = 2;
  so.harmonics = 2;
  so.encoder.d_model = 8;
  so.encoder.n_heads = 2;
  so.encoder.d_ff = 8;
  EXPECT_EQ(so.num_features(2), 1 + 2 + 2 * 2 * 2);
  const long B = 2, N = 6, C = 2;
  HeatSurrogate<double> model(so, 2, {1.0, 0.5});
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 3);
  View1<double> u("u", B * N), w("w", B * N), out("out", B * N), out2("out2", B * N);
  View2<double> ex("ex", B * N, C), ex2("ex2", B * N, C), coords("x", N, 2);
  fill_normal(u, 4, 0);
  fill_normal(w, 4, 1);
  {
    auto he = Kokkos::create_mirror_view(ex);
    auto hc = Kokkos::create_mirror_view(coords);
    for (long t = 0; t < B * N; ++t) he(t, 0) = std::sin(double(t)), he(t, 1) = std::cos(2.0 * t);
    for (long i = 0; i < N; ++i) hc(i, 0) = double(i % 3) / 3, hc(i, 1) = 0.25 * double(i / 3);
    Kokkos::deep_copy(ex, he);
    Kokkos::deep_copy(coords, hc);
  }
  Kokkos::deep_copy(ex2, ex);
  Kokkos::deep_copy(Kokkos::subview(ex2, 3, 1), 5.0);
  SurrogateCache<double> cache;
  model.forward(out, cache, u, ex, coords, B, N, buf);
  model.forward(out2, cache, u, ex2, coords, B, N, buf);
  auto o1 = to_host(out), o2 = to_host(out2);
  double diff = 0;
  for (long i = 0; i < B * N; ++i) diff = std::max(diff, std::abs(o1(i) - o2(i)));
  EXPECT_GT(diff, 1e-6) << "a changed channel value must change the prediction";
  // Missing channels are refused.
  EXPECT_TRUE(contains(error_of([&] { model.forward(out, cache, u, {}, coords, B, N, buf); }),
                       "takes 2 extra input channel(s)"));
  // Gradient of Σ w·out with respect to the parameters (through the channel features) by finite differences.
  auto objective = [&]() {
    model.forward(out, cache, u, ex, coords, B, N, buf);
    auto o = to_host(out), wh = to_host(w);
    double s = 0;
    for (long i = 0; i < B * N; ++i) s += o(i) * wh(i);
    return s;
  };
  objective();
  buf.zero_grads();
  model.backward(cache, w, buf);
  const auto grad = buf.get_host(Slot::Grads);
  const auto p0 = buf.get_host(Slot::Params);
  // The embedding's weights of the channel features (columns 1, 2 of the first linear layer) are among the
  // first parameters; check every one of the first 40.
  for (long i = 0; i < std::min<long>(40, long(p0.size())); ++i) {
    auto p = p0;
    p[i] += 1e-6;
    buf.set_host(p);
    const double fp = objective();
    p[i] = p0[i] - 1e-6;
    buf.set_host(p);
    const double fm = objective();
    EXPECT_NEAR(grad[i], (fp - fm) / 2e-6, 1e-6 * (1 + std::abs(grad[i]))) << i;
  }
  buf.set_host(p0);
}

TEST(HeatTrainingFile, ChannelStatisticsAreStoredAndEvaluationReproducesTheRun) {
  // A 1D foreign file (field 'u' [S, T, X], static channel 'nu' [S, X]); the transformer trains a few steps, the
  // checkpoint holds nu's mean and std over the training split, and eval reproduces the run's test metrics.
  const long S = 20, T = 4, X = 12;
  Foreign u{"u", {S, T, X}, {}, true}, nu{"nu", {S, X}, {}, false};
  for (long s = 0; s < S; ++s) {
    for (long t = 0; t < T; ++t)
      for (long x = 0; x < X; ++x)
        u.values.push_back(std::exp(-0.3 * t) * std::sin(2 * M_PI * (x + 0.5) / X + s) + 0.1 * s);
    for (long x = 0; x < X; ++x) nu.values.push_back(2.0 + s + 0.25 * x);
  }
  const std::string path = run_dir("ch_run") + "/u.h5";
  write_foreign(path, {u, nu, {"x-coordinate", {X}, iota_coords(X, 1.0 / X, 0.5 / X), true}});
  HeatRunConfig c = tiny(run_dir("ch_run_out"), 12, path);
  c.data.n = 0;
  c.data.n_train = 12, c.data.n_val = 4, c.data.n_test = 4;
  c.data.field = "u";
  c.data.channels = {"nu"};
  c.data.bc = heat::BcType::Neumann;
  c.model.kind = SurrogateKind::Transformer;
  c.model.encoder.d_model = 8;
  c.model.encoder.n_heads = 2;
  c.model.encoder.d_ff = 8;
  c.train.eval_every = 6;
  c.eval.rollout_steps = 5;
  c.eval.transfer_n = 32;
  auto r = run_heat(c, toml_of(c));
  EXPECT_FALSE(r.solver_physics);
  EXPECT_TRUE(std::isfinite(r.test.rel_l2));
  // The rollout follows the file's snapshots: 3 of the 5 asked for, noted; the solver parts are skipped, noted.
  EXPECT_EQ(r.rollout.size(), 3u);
  std::string notes;
  for (const auto& n : r.notes) notes += n + "\n";
  EXPECT_TRUE(contains(notes, "rollout: 3 of eval.rollout_steps = 5"));
  EXPECT_TRUE(contains(notes, "speed against ADI skipped"));
  EXPECT_TRUE(contains(notes, "resolution transfer skipped"));
  EXPECT_TRUE(contains(notes, "heat-kernel comparison skipped"));
  const Json j = r.to_json();
  EXPECT_TRUE(contains(j.dump(), "\"physics\": \"file\""));
  EXPECT_TRUE(contains(j.dump(), "\"speedup_vs_solver\": null"));
  // nu over the 12 training samples (each repeated for its T − 1 pairs): mean 2 + 5.5 + 0.25·5.5.
  h5::Reader ck(r.checkpoint, "heat_surrogate", 1);
  const auto m = ck.attr_doubles("/", "channel_mean"), sd = ck.attr_doubles("/", "channel_std");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NEAR(m[0], 2.0 + 5.5 + 0.25 * 5.5, 1e-9);
  const double var = (144.0 - 1.0) / 12.0 + 0.0625 * (144.0 - 1.0) / 12.0;  // independent uniform grids of s and x
  EXPECT_NEAR(sd[0], std::sqrt(var), 1e-9);
  EXPECT_EQ(ck.attr_string("/", "channel_names"), "nu");
  auto e = evaluate_heat_checkpoint(r.checkpoint, {}, run_dir("ch_run_eval"));
  EXPECT_NEAR(e.test.rel_l2, r.test.rel_l2, 1e-9);
  ASSERT_EQ(e.rollout.size(), r.rollout.size());
  for (std::size_t i = 0; i < e.rollout.size(); ++i) EXPECT_NEAR(e.rollout[i], r.rollout[i], 1e-9);
  // Resuming checks the channel statistics too: the same run resumes; other channel data does not.
  HeatRunConfig more = c;
  more.train.steps = 14;
  more.train.resume = r.checkpoint;
  more.train.out_dir = run_dir("ch_run_resume");
  EXPECT_NO_THROW(run_heat(more, toml_of(more)));
  HeatRunConfig other = more;
  other.data.channels = {"u"};  // the field as a (time-dependent) channel: other statistics
  EXPECT_TRUE(contains(error_of([&] { run_heat(other, toml_of(other)); }), "cannot resume"));
}

TEST(HeatDataChannels, ChannelListsComeFromTomlAndOverridesAndRoundTrip) {
  HeatRunConfig c;
  OptionSet set;
  c.declare(set);
  set.load_string("[data]\nfield = \"tensor\"\nchannels = [\"nu\", \"V[1]\"]\n");
  ASSERT_EQ(c.data.channels.size(), 2u);
  EXPECT_EQ(c.data.channels[1], "V[1]");
  EXPECT_EQ(c.data.field, "tensor");
  // The TOML written into checkpoints reads back to the same list.
  HeatRunConfig back;
  OptionSet set2;
  back.declare(set2);
  set2.load_string(set.to_toml());
  EXPECT_EQ(back.data.channels, c.data.channels);
  EXPECT_EQ(back.data.n, 0);  // the default: the file's grid (32 when generating)
  // --set: a bare name is a list of one, an array a list, [] none.
  set.set("data.channels=kappa");
  EXPECT_EQ(c.data.channels, std::vector<std::string>{"kappa"});
  set.set("data.channels=[\"kappa\", \"source\"]");
  EXPECT_EQ(c.data.channels.size(), 2u);
  set.set("data.channels=[]");
  EXPECT_TRUE(c.data.channels.empty());
  EXPECT_TRUE(contains(error_of([&] { set.set("data.channels=[1, 2]"); }), "expects a list of strings"));
  EXPECT_TRUE(contains(set.to_json().dump(), "\"data.channels\": []"));
  // Generated pairs: n = 0 becomes the 32-point default grid.
  EXPECT_EQ(resolve_heat_data(HeatDataOptions{}).n, 32);
}

// A file of ours whose sides differ (Dirichlet at x = 0, Neumann at x = L; written with bc = "mixed") keeps data.bc as
// the grid's boundary type, and its physics note says so (it used to say "from the file").
TEST(HeatDataFile, MixedBoundaryFileNamesDataBcAsTheSourceOfItsType) {
  auto prob = problem_1d(1.0, "dirichlet");
  prob.bc[0][1].type = heat::BcType::Neumann;
  fd::HeatDatasetOptions o;
  o.output = run_dir("data") + "/mixed.h5";
  o.samples = 4;
  o.nt = 2;
  o.delta_t = kDelta;
  o.seed = 5;
  o.progress = false;
  fd::HeatSolveOptions so;
  so.method = fd::Method::Adi;
  fd::write_heat_dataset(prob, ic_grf(), so, o, "");
  HeatDataOptions d;
  d.dim = 1;
  d.n = kN;
  d.n_train = 1, d.n_val = 1, d.n_test = 1;
  d.file = o.output;
  d.bc = heat::BcType::Neumann;
  const HeatDataOptions r = resolve_heat_data(d);
  EXPECT_FALSE(r.solver_physics);
  ASSERT_TRUE(r.info);
  EXPECT_TRUE(contains(r.info->physics_note, "different boundary types on different sides")) << r.info->physics_note;
  EXPECT_TRUE(contains(r.info->physics_note, "boundary type 'neumann' from data.bc")) << r.info->physics_note;
  EXPECT_EQ(r.bc, heat::BcType::Neumann);
}
