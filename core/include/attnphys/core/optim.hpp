#pragma once
// Optimizers (SGD with momentum, Adam, AdamW), learning-rate schedules and gradient-norm clipping, all as single
// passes over a ParameterBuffer's flat slots. Update rules follow PyTorch's torch.optim definitions so results can
// be compared one to one.
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/core/params.hpp"

namespace attnphys {

enum class OptimizerKind { Sgd, Adam, AdamW };
// warmup_cosine: linear warm-up, then a half cosine down to min_lr_ratio (scheduled_lr).
enum class ScheduleKind { Constant, WarmupCosine };
// What the cosine decays over: optimizer steps (schedule.total_steps) or the wall clock (a training budget in
// seconds, as a peer trained "for 120 s" uses it); the warm-up counts steps either way.
enum class ScheduleClock { Steps, Time };

template <>
struct EnumNames<OptimizerKind> {
  static constexpr EnumName<OptimizerKind> values[] = {
      {OptimizerKind::Sgd, "sgd"}, {OptimizerKind::Adam, "adam"}, {OptimizerKind::AdamW, "adamw"}};
};
template <>
struct EnumNames<ScheduleKind> {
  static constexpr EnumName<ScheduleKind> values[] = {{ScheduleKind::Constant, "constant"},
                                                      {ScheduleKind::WarmupCosine, "warmup_cosine"}};
};
template <>
struct EnumNames<ScheduleClock> {
  static constexpr EnumName<ScheduleClock> values[] = {{ScheduleClock::Steps, "steps"}, {ScheduleClock::Time, "time"}};
};
// The names as configs and Python spell them ("optimizer.kind must be sgd, adam or adamw, got 'rmsprop'").
OptimizerKind parse_optimizer_kind(const std::string& name);
ScheduleKind parse_schedule_kind(const std::string& name);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 1e-3;
  double momentum = 0.0;       // sgd only
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;   // adam: L2 added to the gradient; adamw: decoupled decay; sgd: L2
  double clip_norm = 0.0;      // 0 disables gradient-norm clipping

  void declare(OptionSet& set, const std::string& section = "optimizer");
  void validate() const;
};

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::Constant;
  long warmup_steps = 0;
  long total_steps = 1000;
  double min_lr_ratio = 0.0;  // final lr as a fraction of the base lr (cosine)
  ScheduleClock clock = ScheduleClock::Steps;

  void declare(OptionSet& set, const std::string& section = "schedule");
  void validate() const;
};

// Learning rate at a step (0-based). warmup_cosine: linear from base/warmup to base over warmup_steps, then a
// half cosine from base down to min_lr_ratio*base at total_steps, constant after.
double scheduled_lr(const ScheduleOptions& s, double base_lr, long step);
// The same with the clock the options name: steps as above; time: the warm-up factor of the step times the half
// cosine at the fraction `time_fraction` (elapsed / budget, clamped to [0, 1]) of the wall-clock budget.
double scheduled_lr(const ScheduleOptions& s, double base_lr, long step, double time_fraction);

class Optimizer {
 public:
  explicit Optimizer(OptimizerOptions options);
  const OptimizerOptions& options() const { return opt_; }
  long steps_taken() const { return t_; }
  void set_steps_taken(long t) { t_ = t; }  // restored from a checkpoint

  // One update with learning rate lr, using the gradients in the buffer (which it does not zero).
  template <class T>
  void step(ParameterBuffer<T>& buffer, double lr);

 private:
  OptimizerOptions opt_;
  long t_ = 0;
};

// Returns the gradient's L2 norm before clipping; scales the gradients to norm max_norm when it is larger
// (max_norm <= 0: only measures).
template <class T>
double clip_grad_norm(ParameterBuffer<T>& buffer, double max_norm);

// L2 norm of a flat view, accumulated in double.
template <class T>
double l2_norm(const Unmanaged1<T>& v);

}  // namespace attnphys
