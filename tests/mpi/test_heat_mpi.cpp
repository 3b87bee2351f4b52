// Runs under mpirun -np 2: data-parallel training of the heat surrogate. Each rank also trains alone
// (Comm::self()) as the 1-rank reference; the 2-rank run must take the same steps to float rounding, every rank
// must hold the same parameters, and a checkpoint must resume at another rank count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/error.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/solvers/training/heat_training.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

// A directory every rank agrees on, under the run's scratch root (rank 0's pid).
std::string shared_dir(const std::string& name) {
  const Comm c = Comm::world();
  auto d = attnphys::test::scratch_dir("heat_mpi/" + name);
  c.barrier();
  return d.string();
}
std::string own_dir(const std::string& name) {
  return shared_dir(name + "_rank" + std::to_string(Comm::world().rank()));
}

// A tiny 1D problem: batch 5 splits 2 + 3 over two ranks, the 5 validation samples likewise.
HeatRunConfig tiny(const std::string& dir, long steps, const std::string& kind, const std::string& opt = "adamw") {
  HeatRunConfig c;
  c.data.dim = 1;
  c.data.n = 16;
  c.data.n_train = 20;
  c.data.n_val = 5;
  c.data.n_test = 8;
  c.data.length_scale = 0.15;
  c.model.kind = parse_enum<SurrogateKind>(kind, "model.kind");
  c.model.kernel_heads = 2;
  c.model.kernel_dk = 4;
  c.model.encoder.d_model = 8;
  c.model.encoder.n_heads = 2;
  c.model.encoder.d_ff = 16;
  c.model.harmonics = 3;
  c.train.steps = steps;
  c.train.batch = 5;
  c.train.eval_every = 3;
  c.train.checkpoint_every = 3;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.optimizer.kind = parse_optimizer_kind(opt);
  c.train.optimizer.lr = opt == "sgd" ? 0.3 : 1e-2;
  c.train.schedule.kind = ScheduleKind::WarmupCosine;
  c.train.schedule.warmup_steps = 2;
  c.train.schedule.total_steps = 12;
  c.eval.rollout_steps = 2;
  c.eval.rollout_samples = 2;
  c.eval.transfer_n = 0;
  c.eval.speed = false;
  return c;
}

std::string toml_of(HeatRunConfig& c) {
  OptionSet s;
  c.declare(s);
  return s.to_toml();
}

std::vector<float> params_of(const std::string& checkpoint, const char* slot = "params") {
  h5::Reader r(checkpoint, "heat_surrogate", 1);
  return r.read<float>(std::string("/model/") + slot);
}

// Largest |a − b| relative to the largest |b|, over the parameters with a gradient above rounding noise.
// Adam divides each gradient by its own running RMS, so a parameter whose exact gradient is zero (the key bias of
// a softmax, which shifts every score of a query alike) moves by ±lr in the sign of its rounding noise: that
// noise differs between any two summation orders (1 or 2 ranks alike), and such parameters do not change the
// model's output. Their second moment (from checkpoint b) is ~1e-20 against ~1e-4 for the others.
double rel_diff(const std::string& a_ckpt, const std::string& b_ckpt) {
  const auto a = params_of(a_ckpt), b = params_of(b_ckpt), v = params_of(b_ckpt, "moment2");
  double vmax = 0;
  for (float x : v) vmax = std::max(vmax, double(x));
  double d = 0, s = 0;
  long used = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (vmax > 0 && std::sqrt(double(v[i])) < 1e-6 * std::sqrt(vmax)) continue;
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    s = std::max(s, std::abs(double(b[i])));
    ++used;
  }
  EXPECT_GT(used, long(b.size()) * 3 / 4) << "too few parameters with a gradient to compare";
  return d / s;
}

// max over ranks of |x − x_rank0|.
double spread(double x) {
  const Comm c = Comm::world();
  double root = x;
  c.broadcast(&root, 1, 0);
  double d = std::abs(x - root);
  c.allreduce_max(&d, 1);
  return d;
}

void two_ranks_match_one(const std::string& kind, const std::string& opt) {
  const Comm world = Comm::world();
  ASSERT_GE(world.size(), 2);
  const std::string tag = kind + "_" + opt;
  auto one_cfg = tiny(own_dir(tag + "_one"), 6, kind, opt);
  const HeatRunResult one = run_heat(one_cfg, toml_of(one_cfg), Comm::self());
  auto two_cfg = tiny(shared_dir(tag + "_two"), 6, kind, opt);
  const HeatRunResult two = run_heat(two_cfg, toml_of(two_cfg));
  EXPECT_EQ(two.steps_done, 6);
  EXPECT_NEAR(two.final_train_loss, one.final_train_loss, 1e-5 * one.final_train_loss);
  EXPECT_NEAR(two.best_val_rel_l2, one.best_val_rel_l2, 1e-5 * one.best_val_rel_l2);
  EXPECT_NEAR(two.test.rel_l2, one.test.rel_l2, 1e-5 * one.test.rel_l2);
  ASSERT_EQ(params_of(one.checkpoint).size(), params_of(two.checkpoint).size());
  EXPECT_LT(rel_diff(two.checkpoint, one.checkpoint), 1e-5);
  // The run moved the parameters far beyond the tolerance (the comparison means something).
  auto init_cfg = tiny(own_dir(tag + "_init"), 1, kind, opt);
  init_cfg.train.optimizer.lr = 1e-12;
  EXPECT_GT(rel_diff(run_heat(init_cfg, toml_of(init_cfg), Comm::self()).checkpoint, one.checkpoint), 1e-3);
  // Every rank acts on the same numbers and evaluates the same parameters.
  EXPECT_EQ(spread(two.final_train_loss), 0.0);
  EXPECT_EQ(spread(two.best_val_rel_l2), 0.0);
  EXPECT_EQ(spread(two.test.rel_l2), 0.0);
  EXPECT_EQ(spread(two.rollout.back()), 0.0);
  // Only rank 0 wrote the run's files, into the shared directory.
  for (const char* f : {"metrics.csv", "eval.h5", "summary.json", "checkpoint.h5"})
    EXPECT_TRUE(fs::exists(fs::path(two_cfg.train.out_dir) / f)) << f;
}

}  // namespace

TEST(HeatMpi, KernelModelTwoRanksTakeTheOneRankSteps) {
  two_ranks_match_one("kernel", "adamw");
  two_ranks_match_one("kernel", "sgd");
}
TEST(HeatMpi, TransformerModelTwoRanksTakeTheOneRankSteps) {
  two_ranks_match_one("transformer", "adamw");
  two_ranks_match_one("transformer", "sgd");
}

TEST(HeatMpi, ResumesAtAnotherRankCount) {
  const Comm world = Comm::world();
  // Reference: 6 steps on one rank.
  auto ref_cfg = tiny(own_dir("resume_ref"), 6, "kernel");
  const HeatRunResult ref = run_heat(ref_cfg, toml_of(ref_cfg), Comm::self());
  // 3 steps on one rank (rank 0's run), then 3 more on two ranks from its checkpoint.
  auto half_cfg = tiny(own_dir("resume_half"), 3, "kernel");
  const HeatRunResult half = run_heat(half_cfg, toml_of(half_cfg), Comm::self());
  ASSERT_EQ(half.steps_done, 3);
  world.barrier();
  const std::string ckpt = (fs::path(shared_dir("resume_half_rank0")) / "checkpoint.h5").string();
  auto two_cfg = tiny(shared_dir("resume_two"), 6, "kernel");
  two_cfg.train.resume = ckpt;
  const HeatRunResult two = run_heat(two_cfg, toml_of(two_cfg));
  EXPECT_EQ(two.steps_done, 6);
  EXPECT_NEAR(two.final_train_loss, ref.final_train_loss, 1e-5 * ref.final_train_loss);
  EXPECT_LT(rel_diff(two.checkpoint, ref.checkpoint), 1e-5);
  // And back: the 2-rank checkpoint at step 3 continued on one rank.
  auto two_half_cfg = tiny(shared_dir("resume_two_half"), 3, "kernel");
  const HeatRunResult two_half = run_heat(two_half_cfg, toml_of(two_half_cfg));
  auto one_cfg = tiny(own_dir("resume_one"), 6, "kernel");
  one_cfg.train.resume = two_half.checkpoint;
  const HeatRunResult one = run_heat(one_cfg, toml_of(one_cfg), Comm::self());
  EXPECT_NEAR(one.final_train_loss, ref.final_train_loss, 1e-5 * ref.final_train_loss);
  EXPECT_LT(rel_diff(one.checkpoint, ref.checkpoint), 1e-5);
}

TEST(HeatMpi, RanksThatDivergeStopWithAClearError) {
  // Different initialisation seeds per rank: the parameters differ at the first check, on every rank alike.
  const Comm world = Comm::world();
  auto cfg = tiny(shared_dir("diverge"), 3, "kernel");
  cfg.train.seed = world.rank();
  std::string msg;
  try {
    run_heat(cfg, toml_of(cfg));
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("lost sync at step 3"), std::string::npos) << msg;
  world.barrier();
}
