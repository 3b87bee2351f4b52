// Multi-step (unrolled) training of the heat surrogate (train.unroll, heat_unroll.hpp): the surrogate's input
// gradient, the K-step loss gradient against central finite differences (unroll_grad = full), the pushforward
// gradient (last) against the one-step gradient at the drifted input, K = 1 against the plain one-step loop, the
// trajectories (generated and from a file), and a short 1D run where unrolled training drifts less over 10 steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "../../solvers/src/training/heat_loss.hpp"
#include "../../solvers/src/training/heat_unroll.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/solvers/training/heat_fit.hpp"
#include "attnphys/solvers/training/heat_training.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

std::string run_dir(const std::string& name) {
  auto d = attnphys::test::scratch_dir("heat_unroll/" + name);
  fs::create_directories(d);
  return d.string();
}

// A tiny double-precision model on an nx x ny grid (ny = 1: 1D), its parameters randomised around the
// initialisation so that no term of the gradient is hidden by a zero (the horizon slopes, the head).
struct Tiny {
  SurrogateOptions so;
  int dim = 1;
  long nx = 6, ny = 1, B = 2, C = 0;
  std::vector<double> lengths{1.0};
  std::unique_ptr<HeatSurrogate<double>> model;
  ParameterBuffer<double> buf;
  View1<double> u, tau;
  View2<double> extra, coords;
  long P() const { return nx * ny; }
  void build(std::uint64_t seed) {
    so.extra_channels = C;
    so.validate();
    model = std::make_unique<HeatSurrogate<double>>(so, dim, lengths);
    model->declare(buf);
    buf.allocate();
    model->init(buf, seed);
    std::vector<double> p = buf.get_host(Slot::Params);
    CounterRng rng(seed + 17, 0);
    for (auto& v : p) v += 0.2 * (rng.uniform() - 0.5);
    buf.set_host(p);
    u = View1<double>("u", B * P());
    fill_normal(u, 1, seed);
    tau = View1<double>("tau", B);
    Kokkos::deep_copy(tau, 1.0);
    if (so.dt_input) {
      auto th = Kokkos::create_mirror_view(tau);
      for (long b = 0; b < B; ++b) th(b) = 1.0 + 0.5 * double(b);
      Kokkos::deep_copy(tau, th);
    }
    extra = View2<double>("extra", B * P(), C);
    if (C > 0) {
      View1<double> e(extra.data(), B * P() * C);
      fill_normal(e, 1, seed + 3);
    }
    coords = View2<double>("coords", P(), dim);
    auto ch = Kokkos::create_mirror_view(coords);
    // Cell centres on a non-periodic box (encoded with period 2L), grid points on a periodic one.
    const bool periodic = lengths[0] == 1.0;
    for (long p = 0; p < P(); ++p) {
      ch(p, 0) = (double(p % nx) + (periodic ? 0.0 : 0.5)) / double(nx);
      if (dim > 1) ch(p, 1) = (double(p / nx) + (periodic ? 0.0 : 0.5)) / double(ny);
    }
    Kokkos::deep_copy(coords, ch);
  }
  ConstMat<double> ex() const { return C > 0 ? ConstMat<double>(extra.data(), B * P(), C) : ConstMat<double>(); }
};

std::vector<Tiny> tiny_models() {
  std::vector<Tiny> out;
  {  // the kernel (coordinate attention) kind, two layers, with the horizon input
    Tiny t;
    t.so.kind = SurrogateKind::Kernel;
    t.so.kernel_heads = 2;
    t.so.kernel_dk = 3;
    t.so.kernel_layers = 2;
    t.so.harmonics = 2;
    t.so.dt_input = true;
    out.push_back(std::move(t));
  }
  {  // transformer with a channel and the stencil features, 1D periodic
    Tiny t;
    t.so.kind = SurrogateKind::Transformer;
    t.so.encoder.d_model = 8;
    t.so.encoder.n_heads = 2;
    t.so.encoder.d_ff = 8;
    t.so.harmonics = 2;
    t.so.stencil = true;
    t.C = 1;
    out.push_back(std::move(t));
  }
  {  // transformer with the stencil on a non-periodic 2D 4 x 3 grid (edges repeated along both axes)
    Tiny t;
    t.so.kind = SurrogateKind::Transformer;
    t.so.encoder.d_model = 8;
    t.so.encoder.n_heads = 2;
    t.so.encoder.d_ff = 8;
    t.so.harmonics = 1;
    t.so.stencil = true;
    t.so.dt_input = true;
    t.dim = 2;
    t.nx = 4;
    t.ny = 3;
    t.lengths = {2.0, 2.0};
    out.push_back(std::move(t));
  }
  {  // the conditioned kind (κ-dependent attention, local stencil) on a non-periodic 2D grid
    Tiny t;
    t.so.kind = SurrogateKind::Conditioned;
    t.so.kernel_heads = 2;
    t.so.kernel_dk = 3;
    t.so.kernel_layers = 2;
    t.so.encoder.d_model = 8;
    t.so.harmonics = 1;
    t.so.local_radius = 1;
    t.C = 1;
    t.dim = 2;
    t.nx = 4;
    t.ny = 3;
    t.lengths = {2.0, 2.0};
    out.push_back(std::move(t));
  }
  return out;
}

std::string name_of(const Tiny& t) {
  return std::string(enum_name(t.so.kind)) + (t.so.stencil ? "+stencil" : "") + " " + std::to_string(t.dim) + "D";
}

// K random normalised targets of the model's shape.
std::vector<View1<double>> random_targets(const Tiny& t, long K, std::uint64_t seed) {
  std::vector<View1<double>> y;
  for (long k = 0; k < K; ++k) {
    y.emplace_back("y", t.B * t.P());
    fill_normal(y.back(), 1, seed + std::uint64_t(k));
  }
  return y;
}

UnrollBatch<double> batch_of(const Tiny& t, const ops::ConstVec<double>& input,
                             const std::vector<View1<double>>& targets) {
  UnrollBatch<double> b;
  b.input = input;
  for (const auto& y : targets) b.targets.push_back(y);
  b.extra = t.ex();
  b.coords = ConstMat<double>(t.coords.data(), t.P(), t.dim);
  b.tau = ops::ConstVec<double>(t.tau.data(), t.B);
  b.batch = t.B;
  b.points = t.P();
  b.nx = t.nx;
  b.ny = t.ny;
  b.dim = t.dim;
  return b;
}

// The parameters checked by finite differences: a spread of every block, all of the last 12 (the head).
std::vector<long> checked_parameters(long np) {
  std::vector<long> out;
  const long stride = std::max(1L, np / 60);
  for (long i = 0; i < np; i += (i + stride < np - 12 ? stride : 1)) out.push_back(i);
  return out;
}

}  // namespace

TEST(HeatSurrogateInputGradient, MatchesFiniteDifferences) {
  // d<w, M(u)>/du from backward(..., du) against central differences of every input value.
  for (Tiny& t : tiny_models()) {
    SCOPED_TRACE(name_of(t));
    t.build(3);
    const long n = t.B * t.P();
    View1<double> w("w", n), out("out", n), du("du", n);
    fill_normal(w, 1, 9);
    SurrogateCache<double> cache;
    auto objective = [&](const View1<double>& u) {
      t.model->forward(out, cache, u, t.ex(), t.coords, t.B, t.P(), t.buf, t.tau);
      auto ho = to_host(out);
      auto hw = to_host(w);
      double s = 0;
      for (long i = 0; i < n; ++i) s += ho(i) * hw(i);
      return s;
    };
    objective(t.u);
    t.buf.zero_grads();
    t.model->backward(cache, w, t.buf, du);
    const auto g = to_host(du);
    const auto u0 = to_host(t.u);
    View1<double> up("up", n);
    auto uh = Kokkos::create_mirror_view(up);
    double worst = 0;
    for (long i = 0; i < n; ++i) {
      const double eps = 1e-6;
      for (long j = 0; j < n; ++j) uh(j) = u0(j);
      uh(i) = u0(i) + eps;
      Kokkos::deep_copy(up, uh);
      const double fp = objective(up);
      uh(i) = u0(i) - eps;
      Kokkos::deep_copy(up, uh);
      const double fm = objective(up);
      const double fd = (fp - fm) / (2 * eps);
      EXPECT_NEAR(g(i), fd, 1e-6 * (1 + std::abs(fd))) << "input " << i;
      worst = std::max(worst, std::abs(fd));
    }
    EXPECT_GT(worst, 1e-3);  // the objective depends on the input
  }
}

TEST(HeatUnroll, FullGradientMatchesFiniteDifferencesOfTheThreeStepLoss) {
  const long K = 3;
  for (Tiny& t : tiny_models()) {
    SCOPED_TRACE(name_of(t));
    t.build(5);
    const auto y = random_targets(t, K, 40);
    const UnrollBatch<double> b = batch_of(t, t.u, y);
    const double mu = 0.2, sigma = 1.3, h1 = 0.4;
    Unroller<double> un;
    const double L = un.forward(*t.model, t.buf, b, UnrollGrad::Full, mu, sigma, h1);
    // L is the mean over the K steps of the per-step losses.
    double mean = 0;
    for (double l : un.step_losses()) mean += l / K;
    EXPECT_NEAR(L, mean, 1e-13 * L);
    t.buf.zero_grads();
    un.backward(*t.model, t.buf);
    const std::vector<double> grad = t.buf.get_host(Slot::Grads), p0 = t.buf.get_host(Slot::Params);
    auto loss_at = [&](const std::vector<double>& p) {
      t.buf.set_host(p);
      Unroller<double> u2;
      return u2.forward(*t.model, t.buf, b, UnrollGrad::Full, mu, sigma, h1);
    };
    long checked = 0;
    for (long i : checked_parameters(long(p0.size()))) {
      const double eps = 1e-6;
      auto p = p0;
      p[std::size_t(i)] = p0[std::size_t(i)] + eps;
      const double fp = loss_at(p);
      p[std::size_t(i)] = p0[std::size_t(i)] - eps;
      const double fm = loss_at(p);
      const double fd = (fp - fm) / (2 * eps);
      EXPECT_NEAR(grad[std::size_t(i)], fd, 1e-6 * (1 + std::abs(fd))) << "parameter " << i;
      ++checked;
    }
    t.buf.set_host(p0);
    EXPECT_GT(checked, 20);
    // The chain matters: the gradient differs from the sum of the one-step gradients at the drifted inputs.
    Unroller<double> last;
    t.buf.zero_grads();
    last.forward(*t.model, t.buf, b, UnrollGrad::Last, mu, sigma, h1);
    last.backward(*t.model, t.buf);
    double diff = 0, scale = 0;
    const auto gl = t.buf.get_host(Slot::Grads);
    for (std::size_t i = 0; i < gl.size(); ++i) {
      diff = std::max(diff, std::abs(gl[i] - grad[i]));
      scale = std::max(scale, std::abs(grad[i]));
    }
    EXPECT_GT(diff, 1e-3 * scale);
  }
}

TEST(HeatUnroll, LastIsTheOneStepGradientAtTheDriftedInput) {
  // unroll_grad = last: L = ℓ(M(û_{K−1}), u_K) with û_{K−1} = M^{K−1}(u_0) a constant. The reference: run the
  // first K − 1 applications by hand, then one plain step (K = 1) from their output.
  const long K = 3;
  for (Tiny& t : tiny_models()) {
    SCOPED_TRACE(name_of(t));
    t.build(7);
    const auto y = random_targets(t, K, 50);
    const double mu = -0.1, sigma = 0.8, h1 = 0.0;
    Unroller<double> un;
    t.buf.zero_grads();
    const double L = un.forward(*t.model, t.buf, batch_of(t, t.u, y), UnrollGrad::Last, mu, sigma, h1, 5);
    un.backward(*t.model, t.buf);
    const std::vector<double> grad = t.buf.get_host(Slot::Grads);
    EXPECT_EQ(L, un.step_losses().back());

    const long n = t.B * t.P();
    View1<double> a("a", n), c("c", n);
    SurrogateCache<double> cache;
    t.model->forward(a, cache, t.u, t.ex(), t.coords, t.B, t.P(), t.buf, t.tau);
    for (long k = 1; k < K - 1; ++k) {
      t.model->forward(c, cache, a, t.ex(), t.coords, t.B, t.P(), t.buf, t.tau);
      Kokkos::deep_copy(a, c);
    }
    Unroller<double> one;
    t.buf.zero_grads();
    const double L1 = one.forward(*t.model, t.buf, batch_of(t, a, {y.back()}), UnrollGrad::Full, mu, sigma, h1, 5);
    one.backward(*t.model, t.buf);
    EXPECT_EQ(L1, L);
    EXPECT_EQ(t.buf.get_host(Slot::Grads), grad);
  }
}

TEST(HeatUnroll, OneStepIsThePlainLoopBitForBit) {
  // K = 1 makes the calls of one-step training: forward, relative_loss over mean_over, backward.
  for (Tiny& t : tiny_models()) {
    SCOPED_TRACE(name_of(t));
    t.build(11);
    const auto y = random_targets(t, 1, 60);
    Unroller<double> un;
    t.buf.zero_grads();
    const double L = un.forward(*t.model, t.buf, batch_of(t, t.u, y), UnrollGrad::Full, 0.3, 1.1, 0.5, 4);
    un.backward(*t.model, t.buf);
    const auto grad = t.buf.get_host(Slot::Grads);
    const long n = t.B * t.P();
    View1<double> pred("p", n), d("d", n);
    SurrogateCache<double> cache;
    t.buf.zero_grads();
    t.model->forward(pred, cache, t.u, t.ex(), t.coords, t.B, t.P(), t.buf, t.tau);
    const double L0 = relative_loss<double>(d, pred, y[0], t.B, t.P(), t.nx, t.ny, t.dim, 0.3, 1.1, 0.5, 4);
    t.model->backward(cache, d, t.buf);
    EXPECT_EQ(L, L0);
    EXPECT_EQ(t.buf.get_host(Slot::Grads), grad);
  }
}

TEST(HeatTrajectories, GeneratedTrajectoriesAdvanceTheTargetsByEachRowsHorizon) {
  HeatDataOptions d;
  d.dim = 1;
  d.n = 16;
  d.length_scale = 0.15;
  d.horizons = {1.0, 2.0};
  const HeatPairs one = generate_heat_pairs(d, 3, 4, 16);
  const HeatPairs three = generate_heat_pairs(d, 3, 4, 16, 3);
  ASSERT_EQ(three.count, one.count);
  EXPECT_EQ(one.steps(), 1);
  ASSERT_EQ(three.steps(), 3);
  ASSERT_EQ(long(three.later.extent(1)), 2);
  // Inputs, targets and horizons are those of one-step pairs, bit for bit.
  auto i1 = to_host(one.inputs), i3 = to_host(three.inputs), t1 = to_host(one.targets), t3 = to_host(three.targets);
  for (long r = 0; r < one.count; ++r)
    for (long q = 0; q < 16; ++q) {
      ASSERT_EQ(i1(r, q), i3(r, q));
      ASSERT_EQ(t1(r, q), t3(r, q));
    }
  // later[:, j] is the input advanced by (j + 2)·τ: compare with one-step pairs of horizon (j + 2)·τ.
  auto lt = to_host(three.later);
  auto tau = to_host(three.tau);
  for (long j = 0; j < 2; ++j) {
    HeatDataOptions dj = d;
    dj.horizons = {double(j + 2), double(2 * (j + 2))};
    auto ref = to_host(generate_heat_pairs(dj, 3, 4, 16).targets);
    double worst = 0, scale = 0;
    for (long r = 0; r < three.count; ++r)
      for (long q = 0; q < 16; ++q) {
        worst = std::max(worst, std::abs(lt(r, j, q) - ref(r, q)));
        scale = std::max(scale, std::abs(ref(r, q)));
      }
    EXPECT_LT(worst, 1e-12 * scale) << "step " << j + 2;
    EXPECT_EQ(tau(1), 2.0);
  }
}

TEST(HeatTrajectories, FileTrajectoriesAreTheFilesLaterSnapshots) {
  // u(s, t, x) = 100 s + 10 t + x / 16: every value says where it came from.
  const std::string path = run_dir("file") + "/traj.h5";
  const long S = 3, nt = 7, n = 8;
  {
    h5::Writer w(path, "heat_dataset", 1);
    std::vector<double> u(std::size_t(S * nt * n)), k(std::size_t(S * n));
    for (long s = 0; s < S; ++s)
      for (long t = 0; t < nt; ++t)
        for (long x = 0; x < n; ++x) u[std::size_t((s * nt + t) * n + x)] = 100.0 * s + 10.0 * t + x / 16.0;
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = 1.0 + 0.01 * double(i);
    w.write<double>("data", u.data(), {S, nt, n, 1});
    w.write<double>("kappa", k.data(), {S, n});
    std::vector<double> x(n), tt(nt);
    for (long i = 0; i < n; ++i) x[std::size_t(i)] = double(i) / n;
    for (long i = 0; i < nt; ++i) tt[std::size_t(i)] = 0.01 * double(i);
    w.write<double>("grid/x", x);
    w.write<double>("grid/t", tt);
    w.set_attr("/", "dim", 1L);
    w.set_attr("/", "bc", std::string("periodic"));
    w.set_attr("/", "kappa", 1.0);
    w.set_attr("/", "variable_kappa", 1L);
    w.set_attr("/", "homogeneous", 1L);
    w.commit();
  }
  HeatDataOptions d;
  d.dim = 1;
  d.n_train = 1, d.n_val = 1, d.n_test = 1;
  d.file = path;
  d.channels = {"kappa"};
  d.file_stride = 2;
  const HeatDataOptions r = resolve_heat_data(d);
  // stride 2, K = 3: starts 0 (targets 2, 4, 6) only; K = 1: starts 0..4.
  EXPECT_EQ(r.pairs_per_sample(), 5);
  EXPECT_EQ(r.pairs_per_sample(3), 1);
  const HeatPairs p = read_heat_pairs(r, 1, 2, 3);
  ASSERT_EQ(p.count, 2);
  ASSERT_EQ(p.steps(), 3);
  auto in = to_host(p.inputs), tg = to_host(p.targets);
  auto lt = to_host(p.later), ex = to_host(p.extra);
  for (long row = 0; row < 2; ++row) {
    const double s = double(1 + row);
    EXPECT_EQ(in(row, 3), 100 * s + 3 / 16.0);
    EXPECT_EQ(tg(row, 3), 100 * s + 20 + 3 / 16.0);
    EXPECT_EQ(lt(row, 0, 3), 100 * s + 40 + 3 / 16.0);
    EXPECT_EQ(lt(row, 1, 3), 100 * s + 60 + 3 / 16.0);
    EXPECT_NEAR(ex(row, 3, 0), 1.0 + 0.01 * double((1 + row) * n + 3), 1e-12);
  }
  // stride 1, K = 2: starts 0..4 of 7 snapshots, in order.
  HeatDataOptions d1 = d;
  d1.file_stride = 1;
  const HeatDataOptions r1 = resolve_heat_data(d1);
  const HeatPairs p1 = read_heat_pairs(r1, 0, 1, 2);
  ASSERT_EQ(p1.count, 5);
  auto l1 = to_host(p1.later);
  for (long k = 0; k < 5; ++k) EXPECT_EQ(l1(k, 0, 0), 10.0 * (k + 2));
  // Too long a trajectory: says how many snapshots it needs and what to lower.
  try {
    read_heat_pairs(r, 0, 1, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train.unroll = 4"), std::string::npos) << m;
    EXPECT_NE(m.find("needs at least 9"), std::string::npos) << m;
    EXPECT_NE(m.find("at most 3"), std::string::npos) << m;
  }
}

namespace {
HeatRunConfig tiny_run(const std::string& dir, long steps, const std::string& kind) {
  HeatRunConfig c;
  c.data.dim = 1;
  c.data.n = 16;
  c.data.n_train = 48;
  c.data.n_val = 8;
  c.data.n_test = 8;
  c.data.length_scale = 0.15;
  c.model.kind = parse_enum<SurrogateKind>(kind, "model.kind");
  c.model.kernel_heads = 2;
  c.model.kernel_dk = 4;
  c.model.encoder.d_model = 16;
  c.model.encoder.n_heads = 2;
  c.model.encoder.d_ff = 32;
  c.model.harmonics = 3;
  c.train.steps = steps;
  c.train.batch = 8;
  c.train.eval_every = 5;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.schedule.kind = ScheduleKind::WarmupCosine;
  c.train.schedule.warmup_steps = 2;
  c.train.schedule.total_steps = steps;
  c.eval.rollout_steps = 0;
  c.eval.transfer_n = 0;
  c.eval.speed = false;
  return c;
}
}  // namespace

TEST(HeatUnrollFit, WarmupStepsAreOneStepTrainingAndTheUnrolledStepsDiffer) {
  // A curriculum longer than the run is one-step training on the same samples: the same parameters bit for bit as
  // train.unroll = 1; without it, unrolled training takes other steps.
  for (const std::string kind : {"kernel", "transformer"}) {
    SCOPED_TRACE(kind);
    HeatRunConfig cfg = tiny_run(run_dir("warm_" + kind), 8, kind);
    const HeatRunConfig rc = cfg.resolved();
    const HeatPairs p1 = make_heat_pairs(rc.data, 0, 48, 16), p3 = make_heat_pairs(rc.data, 0, 48, 16, 3);
    const HeatPairs val = make_heat_pairs(rc.data, 48, 8, 16);
    auto fit = [&](const HeatPairs& p, long unroll, long warmup, const std::string& grad) {
      TrainOptions t = cfg.train;
      t.unroll = unroll;
      t.unroll_warmup_steps = warmup;
      t.unroll_grad = parse_enum<UnrollGrad>(grad, "train.unroll_grad");
      HeatModel m(rc.model, 1, {1.0}, heat::BcType::Periodic, {}, t.seed);
      m.fit(p, val, t, {}, false);
      return m.parameters().get_host();
    };
    const auto plain = fit(p1, 1, 0, "full");
    EXPECT_EQ(fit(p3, 3, 8, "full"), plain);
    EXPECT_EQ(fit(p3, 3, 8, "last"), plain);
    EXPECT_EQ(fit(p3, 1, 0, "full"), plain);  // longer trajectories than train.unroll: the first targets
    EXPECT_NE(fit(p3, 3, 4, "full"), plain);
    EXPECT_NE(fit(p3, 3, 0, "last"), plain);
    // Pairs without trajectories are refused with what to do.
    try {
      fit(p1, 3, 0, "full");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("train.unroll = 3 needs trajectories of 3 horizons"), std::string::npos)
          << e.what();
    }
  }
}

TEST(HeatUnrollFit, ThreeStepTrainingDriftsLessOverTenStepsThanOneStepTraining) {
  // The generic transformer, 1D periodic n = 32, the same data and optimizer steps: trained on 3-step rollouts (full
  // gradient), its error grows less over a 10-step rollout than that of the one-step model, and its 10-step error
  // is lower on the mean of three model seeds. The one-step error is higher (the K-step loss trades it for
  // stability), so the drift is the growth rollout[9] / rollout[0]. One seed's 10-step error alone is chaotic: over
  // 5 data/model seeds every unrolled run was better, by 1.06x to 3.4x, and a change of summation order in the
  // kernels moves it within that range; under OpenBLAS' AVX2 (Haswell) kernels seed 2's unrolled 10-step error was
  // 5.0e-2 against 4.4e-2, while its growth was 1.8x against 2.5x. Measured growth (2026-12-02, SkylakeX / Haswell
  // kernels): one-step 2.7-5.4x / 2.5-4.5x, unrolled 1.0-2.5x / 1.4-2.3x (the worst seed 0.70 of its one-step growth).
  // Not asserted for the kernel kind: its one-step model is already near exact on this problem (10-step error
  // 6.7e-4), and 3-step training there gave 1.3e-3.
  auto cfg = [&](long unroll, long seed) {
    HeatRunConfig c = tiny_run(run_dir("drift_" + std::to_string(unroll) + "_" + std::to_string(seed)), 1500,
                               "transformer");
    c.data.n = 32;
    c.data.n_train = 128;
    c.data.n_val = 16;
    c.data.n_test = 16;
    c.train.eval_every = 50;
    c.train.optimizer.lr = 1e-2;
    c.train.schedule.warmup_steps = 150;
    c.train.unroll = unroll;
    c.train.seed = seed;
    c.eval.rollout_steps = 10;
    c.eval.rollout_samples = 16;
    return c;
  };
  double sum1 = 0, sum3 = 0;
  for (long seed = 0; seed < 3; ++seed) {
    HeatRunConfig c1 = cfg(1, seed), c3 = cfg(3, seed);
    OptionSet s1, s3;
    c1.declare(s1);
    c3.declare(s3);
    const HeatRunResult one = run_heat(c1, s1.to_toml(), Comm::self());
    const HeatRunResult three = run_heat(c3, s3.to_toml(), Comm::self());
    ASSERT_EQ(one.rollout.size(), 10u);
    ASSERT_EQ(three.rollout.size(), 10u);
    EXPECT_LT(one.test.rel_l2, 0.05);  // both learned the map
    EXPECT_LT(three.test.rel_l2, 0.1);
    const double g1 = one.rollout[9] / one.rollout[0], g3 = three.rollout[9] / three.rollout[0];
    EXPECT_LT(g3, 0.8 * g1) << "seed " << seed << ", error growth over 10 steps: unrolled " << g3 << "x ("
                            << three.rollout[0] << " -> " << three.rollout[9] << "), one-step " << g1 << "x ("
                            << one.rollout[0] << " -> " << one.rollout[9] << ")";
    sum1 += one.rollout[9];
    sum3 += three.rollout[9];
    std::printf("[ seed %ld: rollout 1 -> 10 steps %.3e -> %.3e (%.2fx, one-step training) vs %.3e -> %.3e (%.2fx, "
                "train.unroll = 3) ]\n", seed, one.rollout[0], one.rollout[9], g1, three.rollout[0], three.rollout[9],
                g3);
  }
  // Measured (2026-12-01): seeds 0/1/2 one-step 8.6e-2 / 5.4e-2 / 4.6e-2, unrolled 7.5e-2 / 3.1e-2 / 4.3e-2
  // (SkylakeX kernels); 2026-12-02 under Haswell kernels 7.1e-2 / 5.4e-2 / 4.4e-2 against 6.9e-2 / 4.0e-2 / 5.0e-2.
  EXPECT_LT(sum3, sum1) << "mean 10-step rollout: unrolled " << sum3 / 3 << ", one-step " << sum1 / 3;
}
