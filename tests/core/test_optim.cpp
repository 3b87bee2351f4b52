// Optimizer steps against hand-computed values, schedule shapes, gradient clipping, parameter blocks.
#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/optim.hpp"

using namespace attnphys;

namespace {
// Two blocks of one parameter each: "w" decays, "b" does not. Both start at 1 with gradient 0.5.
ParameterBuffer<double> two_params() {
  ParameterBuffer<double> p;
  p.add("w", {1});
  p.add("b", {1}, /*decay=*/false);
  p.allocate();
  p.set_host({1.0, 1.0});
  p.set_host({0.5, 0.5}, Slot::Grads);
  return p;
}
OptimizerOptions opts(const std::string& kind, double wd = 0, double momentum = 0) {
  OptimizerOptions o;
  o.kind = parse_optimizer_kind(kind);
  o.lr = 0.1;
  o.weight_decay = wd;
  o.momentum = momentum;
  return o;
}
}  // namespace

TEST(Optimizer, SgdWithMomentum) {
  auto p = two_params();
  Optimizer opt(opts("sgd", 0, 0.9));
  opt.step(p, 0.1);  // m = 0.5, p = 1 - 0.05
  EXPECT_NEAR(p.get_host()[0], 0.95, 1e-15);
  opt.step(p, 0.1);  // m = 0.9*0.5 + 0.5 = 0.95, p = 0.95 - 0.095
  EXPECT_NEAR(p.get_host()[0], 0.855, 1e-15);
}

TEST(Optimizer, AdamConstantGradientMovesByLr) {
  // With a constant gradient, bias-corrected m/sqrt(v) = g/|g|, so each step moves by lr (up to eps).
  auto p = two_params();
  Optimizer opt(opts("adam"));
  opt.step(p, 0.1);
  EXPECT_NEAR(p.get_host()[0], 0.9, 1e-7);
  opt.step(p, 0.1);
  EXPECT_NEAR(p.get_host()[0], 0.8, 1e-7);
  EXPECT_EQ(opt.steps_taken(), 2);
}

TEST(Optimizer, AdamWDecoupledDecayOnlyWhereMasked) {
  auto p = two_params();
  Optimizer opt(opts("adamw", 0.1));
  opt.step(p, 0.1);  // w: 1*(1 - 0.01) - 0.1 ; b: 1 - 0.1
  auto v = p.get_host();
  EXPECT_NEAR(v[0], 0.89, 1e-7);
  EXPECT_NEAR(v[1], 0.9, 1e-7);
  opt.step(p, 0.1);  // w: 0.89*0.99 - 0.1
  v = p.get_host();
  EXPECT_NEAR(v[0], 0.7811, 1e-7);
  EXPECT_NEAR(v[1], 0.8, 1e-7);
}

TEST(Optimizer, AdamL2DecayEntersTheGradient) {
  auto p = two_params();
  Optimizer opt(opts("adam", 0.1));
  opt.step(p, 0.1);
  opt.step(p, 0.1);
  // Hand computation for w: g1 = 0.5 + 0.1*1 = 0.6, m1 = 0.06, v1 = 0.00036, p1 = 1 - 0.06/(0.6 + eps) (~0.9);
  // g2 = 0.5 + 0.1*p1 (~0.59); m2 = 0.9*m1 + 0.1*g2; v2 = 0.999*v1 + 0.001*g2^2.
  const double p1 = 1 - 0.06 / (0.6 + 1e-8), g2 = 0.5 + 0.1 * p1;
  const double m = 0.9 * 0.06 + 0.1 * g2, v = 0.999 * 0.00036 + 0.001 * g2 * g2, bc1 = 1 - 0.81, bc2 = 1 - 0.998001;
  const double expected = p1 - 0.1 / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + 1e-8);
  EXPECT_NEAR(p.get_host()[0], expected, 1e-12);
  EXPECT_NEAR(p.get_host()[0], 0.8000474, 1e-6);
}

TEST(Optimizer, InvalidOptionsAreRefused) {
  EXPECT_THROW(Optimizer(opts("rmsprop")), Error);
  auto o = opts("adam");
  o.beta2 = 1.0;
  EXPECT_THROW(Optimizer{o}, Error);
  o = opts("adam");
  o.lr = -1;
  EXPECT_THROW(Optimizer{o}, Error);
}

TEST(Schedule, WarmupCosineShape) {
  ScheduleOptions s;
  s.kind = ScheduleKind::WarmupCosine;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.min_lr_ratio = 0.1;
  EXPECT_NEAR(scheduled_lr(s, 1.0, 0), 0.1, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 4), 0.5, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 9), 1.0, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 10), 1.0, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 60), 0.55, 1e-12);  // half-way down the cosine: (1 + 0.1) / 2
  EXPECT_NEAR(scheduled_lr(s, 1.0, 110), 0.1, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 500), 0.1, 1e-15);
  for (long t = 10; t < 110; ++t) EXPECT_GE(scheduled_lr(s, 1.0, t), scheduled_lr(s, 1.0, t + 1));
  for (long t = 0; t < 9; ++t) EXPECT_LT(scheduled_lr(s, 1.0, t), scheduled_lr(s, 1.0, t + 1));
  s.kind = ScheduleKind::Constant;
  EXPECT_EQ(scheduled_lr(s, 0.3, 77), 0.3);
  s.kind = ScheduleKind::WarmupCosine;
  s.warmup_steps = 200;
  EXPECT_THROW(s.validate(), Error);
}

// schedule.clock = time: the warm-up factor of the step times the half cosine at the elapsed fraction of the budget.
TEST(Schedule, WarmupCosineOverTheWallClock) {
  ScheduleOptions s;
  s.kind = ScheduleKind::WarmupCosine;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.min_lr_ratio = 0.1;
  EXPECT_NEAR(scheduled_lr(s, 1.0, 60, 0.9), scheduled_lr(s, 1.0, 60), 1e-15);  // the steps clock ignores time
  s.clock = ScheduleClock::Time;
  EXPECT_NEAR(scheduled_lr(s, 1.0, 0, 0.0), 0.1, 1e-15);       // first warm-up step at the start of the budget
  EXPECT_NEAR(scheduled_lr(s, 1.0, 4, 0.5), 0.5 * 0.55, 1e-12);  // half-way warm, half-way down the cosine
  EXPECT_NEAR(scheduled_lr(s, 2.0, 5000, 0.5), 1.1, 1e-12);    // the step count no longer matters after warm-up
  EXPECT_NEAR(scheduled_lr(s, 1.0, 60, 1.0), 0.1, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 60, 3.0), 0.1, 1e-15);      // past the budget: the floor
  EXPECT_NEAR(scheduled_lr(s, 1.0, 60, -1.0), 1.0, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 60, NAN), 0.1, 1e-15);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 20, 0.25), 0.1 + 0.45 * (1 + std::cos(M_PI / 4)), 1e-12);
  for (int i = 0; i < 100; ++i) EXPECT_GE(scheduled_lr(s, 1.0, 50, i / 100.0), scheduled_lr(s, 1.0, 50, (i + 1) / 100.0));
  s.kind = ScheduleKind::Constant;
  EXPECT_EQ(scheduled_lr(s, 0.3, 7, 0.8), 0.3);
}

TEST(ClipGradNorm, ScalesToTheThreshold) {
  ParameterBuffer<double> p;
  p.add("a", {2});
  p.allocate();
  p.set_host({3.0, 4.0}, Slot::Grads);
  EXPECT_NEAR(clip_grad_norm(p, 10.0), 5.0, 1e-14);  // below: untouched
  EXPECT_NEAR(p.get_host(Slot::Grads)[0], 3.0, 1e-15);
  EXPECT_NEAR(clip_grad_norm(p, 1.0), 5.0, 1e-14);
  auto g = p.get_host(Slot::Grads);
  EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0, 1e-6);
  EXPECT_NEAR(g[0] / g[1], 0.75, 1e-14);
}

TEST(ParameterBuffer, BlocksAreViewsIntoOneAllocation) {
  ParameterBuffer<float> p;
  EXPECT_EQ(p.add("w", {2, 3}), 0);
  EXPECT_EQ(p.add("b", {3}, false), 6);
  EXPECT_THROW(p.add("w", {1}), Error);
  p.allocate();
  EXPECT_THROW(p.add("late", {1}), Error);
  EXPECT_EQ(p.size(), 9);
  auto w = p.view2("w");
  auto b = p.view1("b", Slot::Grads);
  EXPECT_EQ(w.data(), p.params().data());
  EXPECT_EQ(b.data(), p.grads().data() + 6);
  Kokkos::deep_copy(p.params(), 2.0f);
  p.zero_grads();
  auto h = p.get_host();
  for (float x : h) EXPECT_EQ(x, 2.0f);
  EXPECT_THROW(p.view2("b"), Error);
  EXPECT_THROW(p.view1("nope"), Error);
  EXPECT_THROW(p.set_host(std::vector<float>(3)), Error);
}

TEST(ParameterBuffer, ResolvedRefsGiveTheNamedViewsOfAnyBufferWithTheSameLayout) {
  auto declare = [](ParameterBuffer<float>& p) {
    p.add("w", {2, 3});
    p.add("b", {3}, false);
    p.add("t", {2, 1, 2});
  };
  ParameterBuffer<float> p;
  declare(p);
  const ParamRef w = p.ref("w"), b = p.ref("b"), t = p.ref("t");  // before allocate(), as models resolve them
  p.allocate();
  EXPECT_EQ(w.offset, 0);
  EXPECT_EQ(b.offset, 6);
  EXPECT_EQ(t.offset, 9);
  EXPECT_EQ(p.view2(w).data(), p.view2("w").data());
  EXPECT_EQ(p.view2(w).extent(0), 2u);
  EXPECT_EQ(p.view2(w).extent(1), 3u);
  EXPECT_EQ(p.view1(b, Slot::Grads).data(), p.view1("b", Slot::Grads).data());
  EXPECT_EQ(p.view3(t, Slot::Moment2).data(), p.view3("t", Slot::Moment2).data());
  EXPECT_EQ(p.view3(t).extent(2), 2u);
  // A second buffer of the same layout (a reload, another model's copy): the same refs view its own storage.
  ParameterBuffer<float> q;
  declare(q);
  q.allocate();
  std::vector<float> v(q.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  q.set_host(v);
  EXPECT_EQ(q.view2(w).data(), q.params().data());
  auto qb = to_host(q.view1(b));
  EXPECT_EQ(qb(0), 6.0f);
  EXPECT_EQ(qb(2), 8.0f);
  // Refusals: wrong rank, unresolved, a block outside a smaller buffer.
  EXPECT_THROW(p.view2(b), Error);
  EXPECT_THROW(p.view1(ParamRef{}), Error);
  ParameterBuffer<float> small;
  small.add("w", {2});
  small.allocate();
  EXPECT_THROW(small.view1(t), Error);
  EXPECT_THROW(p.ref("nope"), Error);
}
