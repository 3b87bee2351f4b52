// Runs under mpirun -np 2: unrolled (multi-step) training of the heat surrogate, data parallel. Each rank also
// trains alone (Comm::self()) as the 1-rank reference; the 2-rank run (batch 5 split 2 + 3, K-step trajectories,
// the validation over K steps split too) must take the same steps to float rounding, for unroll_grad = full and last.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/comm.hpp"
#include "attnphys/solvers/training/heat_fit.hpp"

using namespace attnphys;
using namespace attnphys::training;

namespace {

struct UnrollRun {
  std::vector<float> params;
  double loss = 0, best_val = 0;
};

UnrollRun train(const std::string& kind, const std::string& grad, const Comm& comm, double lr) {
  HeatDataOptions d;
  d.dim = 1;
  d.n = 16;
  d.length_scale = 0.15;
  const long K = 3;
  const HeatPairs tr = make_heat_pairs(d, 0, 20, 16, K), va = make_heat_pairs(d, 20, 5, 16, K);
  SurrogateOptions so;
  so.kind = parse_enum<training::SurrogateKind>(kind, "model.kind");
  so.kernel_heads = 2;
  so.kernel_dk = 4;
  so.encoder.d_model = 8;
  so.encoder.n_heads = 2;
  so.encoder.d_ff = 16;
  so.harmonics = 3;
  HeatSurrogate<float> model(so, 1, encoding_lengths(d));
  ParameterBuffer<float> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 0);
  TrainOptions t;
  t.steps = 6;
  t.batch = 5;
  t.eval_every = 3;
  t.progress = false;
  t.optimizer.kind = OptimizerKind::Sgd;  // AdamW would move parameters whose exact gradient is 0 by ±lr (test_heat_mpi.cpp)
  t.optimizer.lr = lr;
  t.schedule.warmup_steps = 2;
  t.schedule.total_steps = 6;
  t.unroll = K;
  t.unroll_grad = parse_enum<UnrollGrad>(grad, "train.unroll_grad");
  t.unroll_warmup_steps = 2;  // the curriculum's switch inside the run
  Optimizer opt(t.optimizer);
  FitState st;
  const FitResult r = fit_heat_surrogate(model, buf, opt, st, tr, va, normalisation_of(tr), t, {}, comm);
  EXPECT_EQ(r.steps_done, 6);
  return {buf.get_host(Slot::Params), r.final_loss, st.best_val};
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    s = std::max(s, std::abs(double(b[i])));
  }
  return d / s;
}

}  // namespace

TEST(HeatUnrollMpi, TwoRanksTakeTheOneRankStepsForFullAndLast) {
  const Comm world = Comm::world();
  ASSERT_GE(world.size(), 2);
  for (const std::string kind : {"kernel", "transformer"})
    for (const std::string grad : {"full", "last"}) {
      SCOPED_TRACE(kind + " " + grad);
      const UnrollRun one = train(kind, grad, Comm::self(), 0.1);
      const UnrollRun two = train(kind, grad, world, 0.1);
      EXPECT_NEAR(two.loss, one.loss, 1e-5 * one.loss);
      EXPECT_NEAR(two.best_val, one.best_val, 1e-5 * one.best_val);
      EXPECT_LT(rel_diff(two.params, one.params), 1e-5);
      const UnrollRun moved = train(kind, grad, Comm::self(), 1e-12);
      EXPECT_GT(rel_diff(moved.params, one.params), 1e-3);
      // Every rank holds the same numbers.
      double v[2] = {two.loss, two.best_val}, root[2] = {two.loss, two.best_val};
      world.broadcast(root, 2, 0);
      EXPECT_EQ(v[0], root[0]);
      EXPECT_EQ(v[1], root[1]);
    }
}
