#include "attnphys/core/optim.hpp"

#include <cmath>

namespace attnphys {

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (auto k = find_enum<OptimizerKind>(name)) return *k;
  fail("optimizer.kind must be sgd, adam or adamw, got '", name, "'");
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (auto k = find_enum<ScheduleKind>(name)) return *k;
  fail("schedule.kind must be constant or warmup_cosine, got '", name, "'");
}

void OptimizerOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".kind", &kind, "optimizer");
  set.add(s + ".lr", &lr, "base learning rate", Range::positive());
  set.add(s + ".momentum", &momentum, "SGD momentum", Range{0.0, 1.0, false, true});
  set.add(s + ".beta1", &beta1, "Adam first-moment decay", Range{0.0, 1.0, false, true});
  set.add(s + ".beta2", &beta2, "Adam second-moment decay", Range{0.0, 1.0, false, true});
  set.add(s + ".eps", &eps, "Adam epsilon", Range::positive());
  set.add(s + ".weight_decay", &weight_decay, "weight decay", Range::non_negative());
  set.add(s + ".clip_norm", &clip_norm, "gradient-norm clipping threshold (0: off)", Range::non_negative());
}

void OptimizerOptions::validate() const {
  require(lr > 0 && std::isfinite(lr), "optimizer.lr must be a positive number, got ", lr);
  require(momentum >= 0 && momentum < 1, "optimizer.momentum must be in [0, 1), got ", momentum);
  require(beta1 >= 0 && beta1 < 1, "optimizer.beta1 must be in [0, 1), got ", beta1);
  require(beta2 >= 0 && beta2 < 1, "optimizer.beta2 must be in [0, 1), got ", beta2);
  require(eps > 0, "optimizer.eps must be positive, got ", eps);
  require(weight_decay >= 0, "optimizer.weight_decay must be >= 0, got ", weight_decay);
  require(clip_norm >= 0, "optimizer.clip_norm must be >= 0 (0 disables clipping), got ", clip_norm);
}

void ScheduleOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".kind", &kind, "learning-rate schedule");
  set.add(s + ".warmup_steps", &warmup_steps, "linear warm-up steps", Range::non_negative());
  set.add(s + ".total_steps", &total_steps, "steps over which the cosine decays", Range::at_least(1));
  set.add(s + ".min_lr_ratio", &min_lr_ratio, "final lr / base lr", Range::closed(0, 1));
  set.add(s + ".clock", &clock,
          "what the cosine decays over: steps (schedule.total_steps) or time (the training's wall-clock budget, "
          "train.max_seconds; the warm-up still counts steps)");
}

void ScheduleOptions::validate() const {
  require(warmup_steps >= 0, "schedule.warmup_steps must be >= 0, got ", warmup_steps);
  require(total_steps >= 1, "schedule.total_steps must be >= 1, got ", total_steps);
  require(kind != ScheduleKind::WarmupCosine || warmup_steps <= total_steps, "schedule.warmup_steps (", warmup_steps,
          ") exceeds schedule.total_steps (", total_steps, ")");
  require(min_lr_ratio >= 0 && min_lr_ratio <= 1, "schedule.min_lr_ratio must be in [0, 1], got ", min_lr_ratio);
}

double scheduled_lr(const ScheduleOptions& s, double base, long step) {
  if (s.kind == ScheduleKind::Constant) return base;
  if (step < s.warmup_steps) return base * double(step + 1) / double(s.warmup_steps);
  const long decay_steps = s.total_steps - s.warmup_steps;
  if (decay_steps <= 0) return base;
  const double p = std::min(1.0, double(step - s.warmup_steps) / double(decay_steps));
  const double lo = s.min_lr_ratio * base;
  return lo + 0.5 * (base - lo) * (1.0 + std::cos(M_PI * p));
}

double scheduled_lr(const ScheduleOptions& s, double base, long step, double time_fraction) {
  if (s.clock == ScheduleClock::Steps || s.kind == ScheduleKind::Constant) return scheduled_lr(s, base, step);
  const double warm = step < s.warmup_steps ? double(step + 1) / double(s.warmup_steps) : 1.0;
  const double p = std::isfinite(time_fraction) ? std::min(1.0, std::max(0.0, time_fraction)) : 1.0;
  const double lo = s.min_lr_ratio * base;
  return warm * (lo + 0.5 * (base - lo) * (1.0 + std::cos(M_PI * p)));
}

Optimizer::Optimizer(OptimizerOptions o) : opt_(std::move(o)) { opt_.validate(); }

template <class T>
void Optimizer::step(ParameterBuffer<T>& buf, double lr_in) {
  require(std::isfinite(lr_in) && lr_in >= 0, "optimizer step with learning rate ", lr_in);
  ScopedRegion region("attnphys::optimizer_step");
  ++t_;
  auto p = buf.flat(Slot::Params);
  auto g = buf.flat(Slot::Grads);
  auto m = buf.flat(Slot::Moment1);
  auto v = buf.flat(Slot::Moment2);
  auto mask = buf.decay_mask();
  const T lr = T(lr_in), wd = T(opt_.weight_decay);
  const long n = buf.size();
  auto range = Kokkos::RangePolicy<ExecSpace>(0, n);
  if (opt_.kind == OptimizerKind::Sgd) {
    const T mu = T(opt_.momentum);
    const bool use_m = opt_.momentum > 0;
    Kokkos::parallel_for("attnphys::sgd_step", range, KOKKOS_LAMBDA(long i) {
      T gi = g(i) + wd * mask(i) * p(i);
      if (use_m) {
        m(i) = mu * m(i) + gi;
        gi = m(i);
      }
      p(i) -= lr * gi;
    });
    return;
  }
  const bool decoupled = opt_.kind == OptimizerKind::AdamW;
  const T b1 = T(opt_.beta1), b2 = T(opt_.beta2), eps = T(opt_.eps);
  const T bc1 = T(1.0 - std::pow(opt_.beta1, double(t_)));
  const T bc2_sqrt = T(std::sqrt(1.0 - std::pow(opt_.beta2, double(t_))));
  Kokkos::parallel_for("attnphys::adam_step", range, KOKKOS_LAMBDA(long i) {
    T gi = g(i);
    if (decoupled) {
      p(i) -= lr * wd * mask(i) * p(i);
    } else {
      gi += wd * mask(i) * p(i);
    }
    m(i) = b1 * m(i) + (T(1) - b1) * gi;
    v(i) = b2 * v(i) + (T(1) - b2) * gi * gi;
    // PyTorch's form: p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
    p(i) -= (lr / bc1) * m(i) / (math::sqrt(v(i)) / bc2_sqrt + eps);
  });
}

template <class T>
double l2_norm(const Unmanaged1<T>& x) {
  double s = 0;
  Kokkos::parallel_reduce(
      "attnphys::l2_norm", Kokkos::RangePolicy<ExecSpace>(0, x.extent(0)),
      KOKKOS_LAMBDA(long i, double& acc) { acc += double(x(i)) * double(x(i)); }, s);
  return std::sqrt(s);
}

template <class T>
double clip_grad_norm(ParameterBuffer<T>& buf, double max_norm) {
  auto g = buf.grads();
  const double norm = l2_norm<T>(g);
  if (max_norm > 0 && norm > max_norm) {
    const T f = T(max_norm / (norm + 1e-6));  // PyTorch's clip_grad_norm_ uses the same 1e-6
    Kokkos::parallel_for("attnphys::clip_grad_norm", Kokkos::RangePolicy<ExecSpace>(0, g.extent(0)),
                         KOKKOS_LAMBDA(long i) { g(i) *= f; });
  }
  return norm;
}

template void Optimizer::step<float>(ParameterBuffer<float>&, double);
template void Optimizer::step<double>(ParameterBuffer<double>&, double);
template double clip_grad_norm<float>(ParameterBuffer<float>&, double);
template double clip_grad_norm<double>(ParameterBuffer<double>&, double);
template double l2_norm<float>(const Unmanaged1<float>&);
template double l2_norm<double>(const Unmanaged1<double>&);

}  // namespace attnphys
