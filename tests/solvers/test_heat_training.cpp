// The heat surrogate's training pipeline: loss gradients, end-to-end learning, reproducibility, resume,
// divergence handling, and refusal of corrupted checkpoints and wrong configuration keys.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../../solvers/src/training/heat_eval.hpp"
#include "../../solvers/src/training/heat_loss.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/solvers/training/heat_training.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

// out = a * in on the device (a free function: CUDA extended lambdas cannot live in a TEST body, a private member).
void scale_into(const View1<double>& out, double a, const View1<double>& in) {
  Kokkos::parallel_for(out.extent(0), KOKKOS_LAMBDA(long i) { out(i) = a * in(i); });
}

std::string run_dir(const std::string& name) {
  auto d = attnphys::test::scratch_dir("heat/" + name);
  fs::create_directories(d);
  return d.string();
}

// A tiny 1D problem that trains in seconds.
HeatRunConfig tiny(const std::string& dir, long steps) {
  HeatRunConfig c;
  c.data.dim = 1;
  c.data.n = 16;
  c.data.n_train = 64;
  c.data.n_val = 16;
  c.data.n_test = 16;
  c.data.length_scale = 0.15;
  c.model.encoder.d_model = 16;
  c.model.encoder.n_heads = 2;
  c.model.encoder.d_ff = 32;
  c.model.harmonics = 3;
  c.train.steps = steps;
  c.train.batch = 8;
  c.train.eval_every = 5;
  c.train.checkpoint_every = 5;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.schedule.kind = ScheduleKind::WarmupCosine;
  c.train.schedule.warmup_steps = 5;
  c.train.schedule.total_steps = 40;
  c.eval.rollout_steps = 3;
  c.eval.rollout_samples = 4;
  c.eval.transfer_n = 32;
  c.eval.transfer_samples = 4;
  c.eval.speed = false;
  return c;
}

std::string toml_of(HeatRunConfig& c) {
  OptionSet s;
  c.declare(s);
  return s.to_toml();
}

}  // namespace

TEST(HeatLoss, GradientMatchesFiniteDifferences) {
  for (double h1 : {0.0, 0.7}) {
    const long B = 3, nx = 5, ny = 4, P = nx * ny;  // a non-square grid: the H1 term's neighbours along y are nx apart
    View1<double> pred("p", B * P), tgt("t", B * P), d("d", B * P), dummy("x", B * P);
    fill_normal(pred, 1, 0);
    fill_normal(tgt, 1, 1);
    const double mu = 0.3, sigma = 1.7;
    relative_loss<double>(d, pred, tgt, B, P, nx, ny, 2, mu, sigma, h1);
    auto dh = to_host(d);
    auto ph = Kokkos::create_mirror_view(pred);
    Kokkos::deep_copy(ph, pred);
    for (long i : {0L, 7L, 19L, 24L, 40L, 59L}) {
      const double eps = 1e-6, x = ph(i);
      ph(i) = x + eps;
      Kokkos::deep_copy(pred, ph);
      const double lp = relative_loss<double>(dummy, pred, tgt, B, P, nx, ny, 2, mu, sigma, h1);
      ph(i) = x - eps;
      Kokkos::deep_copy(pred, ph);
      const double lm = relative_loss<double>(dummy, pred, tgt, B, P, nx, ny, 2, mu, sigma, h1);
      ph(i) = x;
      Kokkos::deep_copy(pred, ph);
      const double fd = (lp - lm) / (2 * eps);
      EXPECT_NEAR(dh(i), fd, 1e-7 * (1 + std::abs(fd))) << "h1 " << h1 << " index " << i;
    }
  }
}

TEST(HeatLoss, RelativeL2OfKnownFields) {
  // pred = 1.1 * target (denormalised, mu = 0): relative L2 is exactly 0.1 for every sample.
  const long B = 2, P = 8;
  View1<double> pred("p", B * P), tgt("t", B * P), d("d", B * P);
  fill_normal(tgt, 3, 0);
  scale_into(pred, 1.1, tgt);
  EXPECT_NEAR(relative_loss<double>(d, pred, tgt, B, P, P, 1, 1, 0.0, 2.0, 0.0), 0.1, 1e-14);
}

TEST(HeatTraining, LearnsAndResumesToTheSameResult) {
  // Uninterrupted 20 steps against 10 steps + resume to 20: same parameters, loss and test metrics.
  auto a_cfg = tiny(run_dir("a"), 20);
  auto a = run_heat(a_cfg, toml_of(a_cfg));
  auto b_cfg = tiny(run_dir("b"), 10);
  run_heat(b_cfg, toml_of(b_cfg));
  auto c_cfg = tiny(run_dir("c"), 20);
  c_cfg.train.resume = run_dir("b") + "/checkpoint.h5";
  auto c = run_heat(c_cfg, toml_of(c_cfg));
  EXPECT_EQ(c.steps_done, 20);
  EXPECT_NEAR(c.final_train_loss, a.final_train_loss, 1e-6);
  EXPECT_NEAR(c.test.rel_l2, a.test.rel_l2, 1e-6);
  h5::Reader ra(a.checkpoint, "heat_surrogate", 1), rc(c.checkpoint, "heat_surrogate", 1);
  auto pa = ra.read<float>("/model/params"), pc = rc.read<float>("/model/params");
  ASSERT_EQ(pa.size(), pc.size());
  for (size_t i = 0; i < pa.size(); ++i) ASSERT_NEAR(pa[i], pc[i], 1e-6) << "parameter " << i;
  // The same seed reproduces the run.
  auto a2_cfg = tiny(run_dir("a2"), 20);
  auto a2 = run_heat(a2_cfg, toml_of(a2_cfg));
  EXPECT_NEAR(a2.test.rel_l2, a.test.rel_l2, 1e-6);
  // Outputs a user needs are there.
  for (const char* f : {"metrics.csv", "eval.h5", "summary.json", "checkpoint.h5"})
    EXPECT_TRUE(fs::exists(fs::path(run_dir("a")) / f)) << f;
  EXPECT_EQ(a.rollout.size(), 3u);
  EXPECT_GT(a.transfer.rel_l2, 0.0);
}

TEST(HeatTraining, LossFallsByAFixedFactor) {
  auto cfg = tiny(run_dir("learn"), 150);
  cfg.train.eval_every = 50;
  cfg.train.schedule.total_steps = 150;
  cfg.eval.rollout_steps = 0;
  cfg.eval.transfer_n = 0;
  auto r = run_heat(cfg, toml_of(cfg));
  // The identity map (the untrained model's starting point) has the relative change over a horizon as error.
  HeatPairs p = make_heat_pairs(cfg.data, cfg.data.n_train + cfg.data.n_val, cfg.data.n_test, cfg.data.n);
  const double identity = mean_rel_l2(p.inputs, p.targets);
  EXPECT_GT(identity, 0.1) << "the horizon is too short to make the test meaningful";
  EXPECT_LT(r.test.rel_l2, identity / 4) << "identity error " << identity;
}

TEST(HeatTraining, DivergenceStopsWithAClearError) {
  auto cfg = tiny(run_dir("nan"), 10);
  cfg.train.optimizer.lr = 1e30;
  cfg.train.optimizer.clip_norm = 0;
  try {
    run_heat(cfg, toml_of(cfg));
    FAIL() << "a learning rate of 1e30 must make the loss non-finite";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training diverged"), std::string::npos) << e.what();
  }
}

TEST(HeatTraining, CorruptedCheckpointAndBadKeysAreRefused) {
  auto cfg = tiny(run_dir("corrupt"), 5);
  cfg.eval.rollout_steps = 0;
  cfg.eval.transfer_n = 0;
  auto r = run_heat(cfg, toml_of(cfg));
  const auto size = fs::file_size(r.checkpoint);
  const std::string cut = run_dir("corrupt") + "/cut.h5";
  {
    std::ifstream in(r.checkpoint, std::ios::binary);
    std::vector<char> bytes(size);
    in.read(bytes.data(), size);
    std::ofstream(cut, std::ios::binary).write(bytes.data(), size / 3);
  }
  EXPECT_THROW(evaluate_heat_checkpoint(cut, {}, run_dir("corrupt")), Error);
  auto resumed = tiny(run_dir("corrupt2"), 10);
  resumed.train.resume = cut;
  EXPECT_THROW(run_heat(resumed, toml_of(resumed)), Error);
  // Evaluating the good checkpoint again gives the stored run's numbers.
  auto e = evaluate_heat_checkpoint(r.checkpoint, {"eval.rollout_steps=0", "eval.transfer_n=0"}, run_dir("corrupt"));
  EXPECT_NEAR(e.test.rel_l2, r.test.rel_l2, 1e-9);
  try {
    evaluate_heat_checkpoint(r.checkpoint, {"eval.rolout_steps=1"}, run_dir("corrupt"));
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("did you mean 'eval.rollout_steps'"), std::string::npos) << err.what();
  }
  // Resuming with a different data configuration is refused, not silently continued.
  auto other = tiny(run_dir("corrupt3"), 10);
  other.data.seed = 99;
  other.train.resume = r.checkpoint;
  EXPECT_THROW(run_heat(other, toml_of(other)), Error);
}
