#include "attnphys/solvers/training/heat_fit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"
#include "attnphys/solvers/training/normalizer.hpp"
#include "heat_loss.hpp"
#include "heat_unroll.hpp"

namespace attnphys::training {

using T = float;  // training precision

// ------------------------------------------------------------------------------------------------ helpers

namespace detail_fit {

// Normalised float copy of extra channels [rows, points, C], each with its own statistics.
View3<T> channels_normalised(const View3<double>& f, const std::vector<double>& mu, const std::vector<double>& sd) {
  const long rows = f.extent(0), P = f.extent(1), C = f.extent(2);
  View3<T> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::channels_normalised")), rows, P,
               C);
  if (rows * P * C == 0) return out;
  View1<double> m("attnphys::channel_mean", C), inv("attnphys::channel_inv_std", C);
  {
    auto hm = Kokkos::create_mirror_view(m), hi = Kokkos::create_mirror_view(inv);
    for (long c = 0; c < C; ++c) hm(c) = mu[std::size_t(c)], hi(c) = 1.0 / sd[std::size_t(c)];
    Kokkos::deep_copy(m, hm);
    Kokkos::deep_copy(inv, hi);
  }
  Kokkos::parallel_for(
      "attnphys::channels_normalised", Kokkos::RangePolicy<ExecSpace>(0, rows * P * C), KOKKOS_LAMBDA(long i) {
        const long c = i % C, q = (i / C) % P, r = i / (C * P);
        out(r, q, c) = T((f(r, q, c) - m(c)) * inv(c));
      });
  return out;
}

// Rows [r0, r0 + rows) of channels [rows, points, C] as a [rows·points, C] matrix (empty when C = 0).
ConstMat<T> channel_rows(const View3<T>& v, long r0, long rows) {
  const long P = v.extent(1), C = v.extent(2);
  if (C == 0) return ConstMat<T>();
  return ConstMat<T>(v.data() + r0 * P * C, rows * P, C);
}

// dst [count·points, C] = rows idx of src [rows, points, C].
void gather_channels(const View2<T>& dst, const View3<T>& src, const View1<long>& idx, long count) {
  const long P = src.extent(1), C = src.extent(2);
  if (C == 0 || count == 0) return;
  Kokkos::parallel_for(
      "attnphys::gather_batch_channels", Kokkos::RangePolicy<ExecSpace>(0, count * P * C), KOKKOS_LAMBDA(long i) {
        const long c = i % C, q = (i / C) % P, k = i / (C * P);
        dst(k * P + q, c) = src(idx(k), q, c);
      });
}

// Normalised float copy of double fields.
View2<T> to_normalised(const View2<double>& f, double mu, double sigma) {
  View2<T> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::normalised")), f.extent(0),
               f.extent(1));
  const long m = f.extent(1);
  const double inv = 1.0 / sigma;
  Kokkos::parallel_for(
      "attnphys::to_normalised", Kokkos::RangePolicy<ExecSpace>(0, long(f.extent(0)) * m),
      KOKKOS_LAMBDA(long i) { out(i / m, i % m) = T((f(i / m, i % m) - mu) * inv); });
  return out;
}

void gather(const View1<T>& dst, const View2<T>& src, const View1<long>& idx, long points) {
  const long count = idx.extent(0);
  Kokkos::parallel_for(
      "attnphys::gather_batch", Kokkos::RangePolicy<ExecSpace>(0, count * points),
      KOKKOS_LAMBDA(long i) { dst(i) = src(idx(i / points), i % points); });
}

// Float copy of the pairs' horizons (in base horizons).
View1<T> to_float(const View1<double>& v) {
  View1<T> out("attnphys::pair_horizon_f", v.extent(0));
  Kokkos::parallel_for(
      "attnphys::horizon_to_float", Kokkos::RangePolicy<ExecSpace>(0, v.extent(0)),
      KOKKOS_LAMBDA(long i) { out(i) = T(v(i)); });
  return out;
}

// Normalised float copy of trajectories [rows, K − 1, points].
View3<T> later_normalised(const View3<double>& f, double mu, double sigma) {
  const long rows = f.extent(0), K1 = f.extent(1), P = f.extent(2);
  View3<T> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("attnphys::later_normalised")), rows, K1,
               P);
  const double inv = 1.0 / sigma;
  Kokkos::parallel_for(
      "attnphys::later_normalised", Kokkos::RangePolicy<ExecSpace>(0, rows * K1 * P), KOKKOS_LAMBDA(long i) {
        const long q = i % P, k = (i / P) % K1, r = i / (P * K1);
        out(r, k, q) = T((f(r, k, q) - mu) * inv);
      });
  return out;
}

// dst [count·points] = step k of rows idx of src [rows, K − 1, points].
void gather_later(const View1<T>& dst, const View3<T>& src, long k, const View1<long>& idx, long points) {
  const long count = idx.extent(0);
  Kokkos::parallel_for(
      "attnphys::gather_batch_later", Kokkos::RangePolicy<ExecSpace>(0, count * points),
      KOKKOS_LAMBDA(long i) { dst(i) = src(idx(i / points), k, i % points); });
}

// dst [count·points] = step k of rows [r0, r0 + count) of src [rows, K − 1, points].
void copy_later_rows(const View1<T>& dst, const View3<T>& src, long k, long r0, long count) {
  const long points = src.extent(2);
  Kokkos::parallel_for(
      "attnphys::copy_later_rows", Kokkos::RangePolicy<ExecSpace>(0, count * points),
      KOKKOS_LAMBDA(long i) { dst(i) = src(r0 + i / points, k, i % points); });
}

void gather1(const View1<T>& dst, const View1<T>& src, const View1<long>& idx) {
  Kokkos::parallel_for(
      "attnphys::gather_batch_horizon", Kokkos::RangePolicy<ExecSpace>(0, idx.extent(0)),
      KOKKOS_LAMBDA(long i) { dst(i) = src(idx(i)); });
}

// Sample indices of optimizer step s: consecutive slices of a per-epoch permutation fixed by the seed, so a
// resumed run draws exactly the batches an uninterrupted one would.
std::vector<long> batch_indices(long step, long batch, long n_train, long seed) {
  const long per_epoch = std::max(1L, n_train / batch);
  const long epoch = step / per_epoch, slot = step % per_epoch;
  std::vector<long> perm(n_train);
  for (long i = 0; i < n_train; ++i) perm[i] = i;
  CounterRng rng(std::uint64_t(seed), 0x5EED0000ULL + std::uint64_t(epoch));
  for (long i = n_train - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  std::vector<long> out(batch);
  for (long k = 0; k < batch; ++k) out[k] = perm[(slot * batch + k) % n_train];
  return out;
}

// Pushforward (train.unroll_grad = last): the applications run without gradient before the trained one at optimizer
// step `step`, drawn uniformly from 0..K − 1 and fixed by the seed and the step (every rank, and a resumed run,
// draws the same), as in Brandstetter et al. 2022: the model is trained on exact inputs as well as on inputs that
// its own earlier predictions drifted.
long pushforward_free_steps(long step, long K, long seed) {
  CounterRng rng(std::uint64_t(seed), 0x9F5F0000ULL + std::uint64_t(step));
  return long(rng.below(std::uint64_t(K)));
}

// Sums a slot of the parameter buffer over ranks (host staging; a no-op on one rank).
void allreduce_slot(const Comm& comm, const ParameterBuffer<T>& buf, Slot slot) {
  if (comm.size() == 1) return;
  auto v = buf.flat(slot);
  Kokkos::fence();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  comm.allreduce_sum(h.data(), long(h.extent(0)));
  Kokkos::deep_copy(v, h);
}

// Every rank must hold rank 0's parameters. Differences at the level of float rounding (a reduction whose
// order depends on the thread count) are repaired by copying rank 0's parameters and optimizer moments;
// anything larger means the ranks trained on different data or steps, and stops the run.
void check_ranks_agree(const Comm& comm, ParameterBuffer<T>& buf, long step) {
  if (comm.size() == 1) return;
  const std::vector<T> mine = buf.get_host(Slot::Params);
  std::vector<T> root = mine;
  comm.broadcast(root.data(), long(root.size()), 0);
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    diff = std::max(diff, std::abs(double(mine[i]) - double(root[i])));
    scale = std::max(scale, std::abs(double(root[i])));
  }
  double d[2] = {diff, std::isfinite(diff) ? 0.0 : 1.0};
  comm.allreduce_max(d, 2);
  if (d[0] == 0 && d[1] == 0) return;
  if (d[1] != 0 || d[0] > 1e-5 * std::max(scale, 1.0))
    fail("data-parallel training lost sync at step ", step, ": the parameters differ between ranks by up to ",
         d[0], " (largest |parameter| ", scale, "). Every rank must run the same configuration and build.");
  for (Slot sl : {Slot::Params, Slot::Moment1, Slot::Moment2}) {
    std::vector<T> v = buf.get_host(sl);
    comm.broadcast(v.data(), long(v.size()), 0);
    buf.set_host(v, sl);
  }
}

// Float copy of coordinates [P, dim].
View2<T> coords_float(const View2<double>& c) {
  View2<T> out("attnphys::coords_f", c.extent(0), c.extent(1));
  const long dim = c.extent(1);
  Kokkos::parallel_for(
      "attnphys::coords_to_float", Kokkos::RangePolicy<ExecSpace>(0, long(c.extent(0)) * dim),
      KOKKOS_LAMBDA(long i) { out(i / dim, i % dim) = T(c(i / dim, i % dim)); });
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty() || !out.empty()) out.push_back(cur);
  return out;
}

}  // namespace detail_fit

// ------------------------------------------------------------------------------------------------ normalisation

HeatNormalisation normalisation_of(const HeatPairs& train) {
  require(train.count > 0, "heat surrogate: no training pairs to learn the normalisation from");
  HeatNormalisation n;
  {
    Normalizer norm;
    auto h = to_host(train.inputs);
    norm.update(h.data(), h.size());
    norm.finalize();
    n.mean = norm.mean();
    n.std = norm.stddev();
  }
  const long C = train.channels();
  n.channel_mean.resize(std::size_t(C));
  n.channel_std.resize(std::size_t(C));
  auto h = to_host(train.extra);
  for (long c = 0; c < C; ++c) {
    RunningStats st;
    for (long r = 0; r < long(h.extent(0)); ++r)
      for (long q = 0; q < long(h.extent(1)); ++q) st.add(h(r, q, c));
    Normalizer nc(st);
    n.channel_mean[std::size_t(c)] = nc.mean();
    n.channel_std[std::size_t(c)] = nc.stddev();
  }
  return n;
}

// ------------------------------------------------------------------------------------------------ training

FitResult fit_heat_surrogate(const HeatSurrogate<T>& model, ParameterBuffer<T>& buf, Optimizer& opt, FitState& state,
                             const HeatPairs& train, const HeatPairs& val, const HeatNormalisation& norm,
                             const TrainOptions& Tr, const FitHooks& hooks, const Comm& comm) {
  using namespace detail_fit;
  const long P = train.points, n_rows = train.count, n_val_rows = val.count, C = train.channels();
  require(n_rows > 0, "heat surrogate training: no training pairs");
  require(C == model.options().extra_inputs(), "heat surrogate training: the pairs carry ", C,
          " extra channel(s), the model takes ", model.options().extra_inputs());
  require(norm.channels() == C, "heat surrogate training: normalisation statistics of ", norm.channels(),
          " extra channel(s) for pairs with ", C);
  require(train.dim == model.dim(), "heat surrogate training: ", train.dim, "D pairs for a ", model.dim(), "D model");
  require(n_val_rows == 0 || (val.channels() == C && val.dim == train.dim), "heat surrogate training: the ",
          "validation pairs carry ", val.channels(), " extra channel(s) in ", val.dim, "D, the training pairs ", C,
          " in ", train.dim, "D");
  const long K = Tr.unroll;
  const UnrollGrad unroll_grad = Tr.unroll_grad;
  require(K >= 1 && train.steps() >= K, "heat surrogate training: train.unroll = ", K, " needs trajectories of ", K,
          " horizons per training sample, the training pairs hold ", train.steps(), " target(s) per sample (make ",
          "them with make_heat_pairs(..., steps = train.unroll))");
  const double mu = norm.mean, sigma = norm.std;
  const View3<T> tr_later = K > 1 ? later_normalised(train.later, mu, sigma) : View3<T>();
  const View3<T> tr_ex = channels_normalised(train.extra, norm.channel_mean, norm.channel_std);
  const View3<T> va_ex = n_val_rows > 0 ? channels_normalised(val.extra, norm.channel_mean, norm.channel_std) : View3<T>();
  View2<T> tr_in = to_normalised(train.inputs, mu, sigma), tr_tg = to_normalised(train.targets, mu, sigma);
  View2<T> va_in, va_tg;
  View1<T> va_tau;
  if (n_val_rows > 0) {
    va_in = to_normalised(val.inputs, mu, sigma);
    va_tg = to_normalised(val.targets, mu, sigma);
    va_tau = to_float(val.tau);
  }
  // Unrolled training validates the rollout it trains: the mean relative L2 over min(K, val.steps()) steps.
  const long Kv = n_val_rows > 0 ? std::min(K, val.steps()) : 1;
  const View3<T> va_later = Kv > 1 ? later_normalised(val.later, mu, sigma) : View3<T>();
  View1<T> tr_tau = to_float(train.tau);
  const View2<T> coords = coords_float(train.coords);
  const View2<T> va_coords = n_val_rows > 0 ? coords_float(val.coords) : View2<T>();
  const long VP = val.points;

  FitResult res;
  // Buffers for this rank's shard of one mini-batch: samples [b0, b1) of the B drawn for the step (contiguous
  // shards, sizes differing by at most one; a rank may get none when B < ranks).
  const long B = Tr.batch, R = comm.size();
  const long b0 = B * comm.rank() / R, b1 = B * (comm.rank() + 1) / R, Bl = b1 - b0, Bm = std::max(Bl, 1L);
  View1<T> xb("attnphys::batch_in", Bm * P), yb("attnphys::batch_target", Bm * P);
  View1<T> tb("attnphys::batch_horizon", Bm);
  View2<T> eb("attnphys::batch_channels", Bm * P, C);
  View1<long> idx("attnphys::batch_index", Bm);
  auto idx_h = Kokkos::create_mirror_view(idx);
  SurrogateCache<T> cache;  // validation
  Unroller<T> unroller;     // training: K caches (unroll_grad = full), one otherwise
  std::vector<View1<T>> yl;  // targets of steps 2..K of this rank's shard
  for (long k = 1; k < K; ++k) yl.emplace_back("attnphys::batch_target_later", Bm * P);

  // Mean relative L2 over the validation set; each rank takes a contiguous share, and rank 0's total is the
  // value every rank acts on (early stopping, best parameters).
  auto validate = [&]() {
    const long v0 = n_val_rows * comm.rank() / R, v1 = n_val_rows * (comm.rank() + 1) / R;
    const long chunk = std::max(1L, std::min<long>(64, v1 - v0));
    View1<T> vin("v_in", chunk * VP), vtg("v_tg", chunk * VP), vpred("v_pred", chunk * VP), vd("v_d", chunk * VP);
    double sum = 0;
    for (long s0 = v0; s0 < v1; s0 += chunk) {
      const long c = std::min(chunk, v1 - s0);
      auto in = Kokkos::subview(vin, std::make_pair(0L, c * VP));
      auto tg = Kokkos::subview(vtg, std::make_pair(0L, c * VP));
      auto pr = Kokkos::subview(vpred, std::make_pair(0L, c * VP));
      auto dd = Kokkos::subview(vd, std::make_pair(0L, c * VP));
      Kokkos::deep_copy(in, View1<T>(Kokkos::subview(va_in, std::make_pair(s0, s0 + c), Kokkos::ALL).data(), c * VP));
      Kokkos::deep_copy(tg, View1<T>(Kokkos::subview(va_tg, std::make_pair(s0, s0 + c), Kokkos::ALL).data(), c * VP));
      model.forward(pr, cache, in, channel_rows(va_ex, s0, c), va_coords, c, VP, buf,
                    Kokkos::subview(va_tau, std::make_pair(s0, s0 + c)));
      if (Kv == 1) {
        sum += relative_loss<T>(dd, pr, tg, c, VP, val.nx, val.ny, val.dim, mu, sigma, 0.0) * c;
        continue;
      }
      double steps_sum = relative_loss<T>(dd, pr, tg, c, VP, val.nx, val.ny, val.dim, mu, sigma, 0.0);
      for (long k = 1; k < Kv; ++k) {  // the model fed its own prediction
        Kokkos::deep_copy(in, pr);
        copy_later_rows(tg, va_later, k - 1, s0, c);
        model.forward(pr, cache, in, channel_rows(va_ex, s0, c), va_coords, c, VP, buf,
                      Kokkos::subview(va_tau, std::make_pair(s0, s0 + c)));
        steps_sum += relative_loss<T>(dd, pr, tg, c, VP, val.nx, val.ny, val.dim, mu, sigma, 0.0);
      }
      sum += steps_sum / double(Kv) * c;
    }
    sum = comm.allreduce_sum(sum);
    comm.broadcast(&sum, 1, 0);
    return sum / n_val_rows;
  };

  const long start = state.step;
  const auto t0 = std::chrono::steady_clock::now();
  double loss = 0, gnorm = 0;
  long step = start;
  for (; step < Tr.steps; ++step) {
    // This rank's shard; its loss and gradient are divided by B (not Bl), so their sums over ranks are the
    // mean loss and gradient of the whole batch.
    const auto ids = batch_indices(step, B, n_rows, Tr.seed);
    buf.zero_grads();
    loss = 0;
    if (Bl > 0) {
      for (long k = 0; k < Bl; ++k) idx_h(k) = ids[b0 + k];
      Kokkos::deep_copy(idx, idx_h);
      auto xs = Kokkos::subview(xb, std::make_pair(0L, Bl * P)), ys = Kokkos::subview(yb, std::make_pair(0L, Bl * P));
      gather(xs, tr_in, Kokkos::subview(idx, std::make_pair(0L, Bl)), P);
      gather(ys, tr_tg, Kokkos::subview(idx, std::make_pair(0L, Bl)), P);
      auto ts = Kokkos::subview(tb, std::make_pair(0L, Bl));
      gather1(ts, tr_tau, Kokkos::subview(idx, std::make_pair(0L, Bl)));
      gather_channels(eb, tr_ex, Kokkos::subview(idx, std::make_pair(0L, Bl)), Bl);
      const ConstMat<T> es = C > 0 ? ConstMat<T>(eb.data(), Bl * P, C) : ConstMat<T>();
      // The curriculum: one-step training before train.unroll_warmup_steps.
      long Ks = step < Tr.unroll_warmup_steps ? 1 : K;
      if (unroll_grad == UnrollGrad::Last && Ks > 1) Ks = 1 + pushforward_free_steps(step, K, Tr.seed);
      UnrollBatch<T> ub;
      ub.input = xs;
      ub.targets.push_back(ys);
      for (long k = 1; k < Ks; ++k) {
        auto yk = Kokkos::subview(yl[std::size_t(k - 1)], std::make_pair(0L, Bl * P));
        gather_later(yk, tr_later, k - 1, Kokkos::subview(idx, std::make_pair(0L, Bl)), P);
        ub.targets.push_back(yk);
      }
      ub.extra = es;
      ub.coords = coords;
      ub.tau = ts;
      ub.batch = Bl;
      ub.points = P;
      ub.nx = train.nx;
      ub.ny = train.ny;
      ub.dim = train.dim;
      loss = unroller.forward(model, buf, ub, unroll_grad, mu, sigma, Tr.h1_weight, B);
    }
    if (R > 1) {
      double l[2] = {std::isfinite(loss) ? loss : 0.0, std::isfinite(loss) ? 0.0 : 1.0};
      comm.allreduce_sum(l, 2);
      comm.broadcast(l, 2, 0);
      loss = l[1] != 0 ? NAN : l[0];
    }
    if (!std::isfinite(loss))
      fail("training diverged at step ", step, ": the loss is ", loss, ". ",
           hooks.diverged_hint ? hooks.diverged_hint() : std::string("Lower optimizer.lr or set optimizer.clip_norm."));
    if (Bl > 0) unroller.backward(model, buf);
    allreduce_slot(comm, buf, Slot::Grads);
    gnorm = clip_grad_norm(buf, Tr.optimizer.clip_norm);
    // The clock of a time schedule and of the budget: rank 0's decides, so every rank takes the same rate and
    // stops after the same step.
    const auto elapsed = [&] {
      double e = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (R > 1) comm.broadcast(&e, 1, 0);
      return e;
    };
    const double lr = Tr.schedule.clock == ScheduleClock::Time
                          ? scheduled_lr(Tr.schedule, Tr.optimizer.lr, step, elapsed() / Tr.max_seconds)
                          : scheduled_lr(Tr.schedule, Tr.optimizer.lr, step);
    opt.step(buf, lr);
    const bool last = step + 1 == Tr.steps;
    const double time_up = Tr.max_seconds > 0 && elapsed() >= Tr.max_seconds;
    double val_now = NAN;
    if (n_val_rows > 0 && ((step + 1) % Tr.eval_every == 0 || last || time_up != 0)) {
      check_ranks_agree(comm, buf, step + 1);
      val_now = validate();
      if (val_now < state.best_val) {
        state.best_val = val_now;
        state.best_params = buf.get_host(Slot::Params);
        state.bad_evals = 0;
      } else {
        ++state.bad_evals;
      }
    }
    state.step = step + 1;
    state.last_loss = loss;
    if (hooks.on_step) {
      FitStep s;
      s.step = step + 1;
      s.lr = lr;
      s.loss = loss;
      s.grad_norm = gnorm;
      s.val_rel_l2 = val_now;
      s.best_val_rel_l2 = state.best_val < INFINITY ? state.best_val : NAN;
      s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      hooks.on_step(s);
    }
    if ((step + 1) % Tr.checkpoint_every == 0 && !last && hooks.on_checkpoint) hooks.on_checkpoint(step + 1);
    if (n_val_rows > 0 && Tr.patience > 0 && state.bad_evals >= Tr.patience) {
      res.stopped_early = true;
      ++step;
      break;
    }
    if (time_up != 0 && !last) {
      res.stopped_at_time_limit = true;
      ++step;
      break;
    }
  }
  res.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check_ranks_agree(comm, buf, step);
  state.step = step;
  res.steps_done = step;
  res.final_loss = state.last_loss;  // that of the checkpoint when a resume had no step left to take
  return res;
}

// ------------------------------------------------------------------------------------------------ prediction

View2<double> predict_heat_surrogate(const HeatSurrogate<T>& model, const ParameterBuffer<T>& buf,
                                     const HeatNormalisation& norm, const View2<double>& inputs,
                                     const View3<double>& extra, const View2<double>& coords_d,
                                     const View1<double>& tau_d, SurrogateCache<T>& cache, long max_chunk) {
  const long count = inputs.extent(0), P = inputs.extent(1);
  const long C = long(extra.extent(2));
  require(C == model.options().extra_inputs() && (C == 0 || long(extra.extent(0)) == count),
          "heat surrogate prediction: ", C, " extra channel(s) given, the model takes ",
          model.options().extra_inputs());
  require(C == 0 || long(extra.extent(1)) == P, "heat surrogate prediction: extra channels on ", extra.extent(1),
          " points for fields of ", P);
  require(norm.channels() == C && long(norm.channel_std.size()) == C, "heat surrogate prediction: statistics of ",
          norm.channels(), " extra channel(s) for ", C);
  require(long(coords_d.extent(0)) == P && long(coords_d.extent(1)) == model.dim(), "heat surrogate prediction: ",
          coords_d.extent(0), "x", coords_d.extent(1), " coordinates for ", P, " points in ", model.dim(), "D");
  require(tau_d.extent(0) == 0 || long(tau_d.extent(0)) == count, "heat surrogate prediction: ", tau_d.extent(0),
          " horizons for ", count, " fields");
  require(max_chunk >= 1, "heat surrogate prediction: the batch size must be at least 1, got ", max_chunk);
  const View2<float> coords = detail_fit::coords_float(coords_d);
  View1<double> cm("attnphys::eval_channel_mean", C), ci("attnphys::eval_channel_inv_std", C);
  {
    auto hm = Kokkos::create_mirror_view(cm), hi = Kokkos::create_mirror_view(ci);
    for (long c = 0; c < C; ++c) hm(c) = norm.channel_mean[std::size_t(c)], hi(c) = 1.0 / norm.channel_std[std::size_t(c)];
    Kokkos::deep_copy(cm, hm);
    Kokkos::deep_copy(ci, hi);
  }
  View2<double> out("attnphys::prediction", count, P);
  const long chunk = std::max(1L, std::min<long>(count, max_chunk));
  View1<float> in("attnphys::eval_in", chunk * P), pr("attnphys::eval_pred", chunk * P);
  View2<float> ex("attnphys::eval_channels", chunk * P, C);
  View1<float> taus("attnphys::eval_tau", chunk);
  Kokkos::deep_copy(taus, 1.0f);
  const double mu = norm.mean, inv = 1.0 / norm.std, sd = norm.std;
  const bool has_tau = tau_d.extent(0) > 0;
  for (long s0 = 0; s0 < count; s0 += chunk) {
    const long c = std::min(chunk, count - s0);
    Kokkos::parallel_for(
        "attnphys::eval_normalise", Kokkos::RangePolicy<ExecSpace>(0, c * P),
        KOKKOS_LAMBDA(long i) { in(i) = float((inputs(s0 + i / P, i % P) - mu) * inv); });
    if (C > 0)
      Kokkos::parallel_for(
          "attnphys::eval_normalise_channels", Kokkos::RangePolicy<ExecSpace>(0, c * P * C), KOKKOS_LAMBDA(long i) {
            const long k = i % C, t = i / C;
            ex(t, k) = float((extra(s0 + t / P, t % P, k) - cm(k)) * ci(k));
          });
    if (has_tau)
      Kokkos::parallel_for(
          "attnphys::eval_tau", Kokkos::RangePolicy<ExecSpace>(0, c),
          KOKKOS_LAMBDA(long i) { taus(i) = float(tau_d(s0 + i)); });
    auto pv = Kokkos::subview(pr, std::make_pair(0L, c * P));
    const ConstMat<float> es = C > 0 ? ConstMat<float>(ex.data(), c * P, C) : ConstMat<float>();
    model.forward(pv, cache, Kokkos::subview(in, std::make_pair(0L, c * P)), es, coords, c, P, buf,
                  Kokkos::subview(taus, std::make_pair(0L, c)));
    Kokkos::parallel_for(
        "attnphys::eval_denormalise", Kokkos::RangePolicy<ExecSpace>(0, c * P),
        KOKKOS_LAMBDA(long i) { out(s0 + i / P, i % P) = double(pr(i)) * sd + mu; });
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ checkpoints

std::vector<double> HeatModelGrid::encoding_lengths() const {
  const double period = bc == heat::BcType::Periodic ? 1.0 : 2.0;
  std::vector<double> l;
  for (double b : box) l.push_back(period * b);
  return l;
}

HeatModelGrid grid_of(const HeatPairs& pairs, std::vector<double> box, heat::BcType bc) {
  HeatModelGrid g;
  g.dim = pairs.dim;
  g.bc = bc;
  g.box = std::move(box);
  g.nx = pairs.nx;
  g.ny = pairs.dim == 1 ? 1 : pairs.ny;
  g.nz = pairs.dim < 3 ? 1 : pairs.nz;
  auto h = to_host(pairs.coords);
  g.coords.assign(h.data(), h.data() + h.size());
  return g;
}

void write_heat_checkpoint(const std::string& path, const ParameterBuffer<T>& buf, long optimizer_steps,
                           const FitState& state, const HeatNormalisation& norm,
                           const std::vector<std::string>& channel_names, const HeatModelGrid& grid,
                           const std::string& config_toml, const std::string& written_by) {
  require(long(channel_names.size()) == norm.channels(), "heat checkpoint: ", channel_names.size(),
          " channel names for statistics of ", norm.channels());
  h5::Writer w(path, "heat_surrogate", 1);
  h5::write_parameters(w, "/model", buf, true);
  if (!state.best_params.empty()) w.write<T>("/best/params", state.best_params);
  w.set_attr("/", "step", state.step);
  w.set_attr("/", "optimizer_steps", optimizer_steps);
  w.set_attr("/", "best_val_rel_l2", state.best_val);
  w.set_attr("/", "bad_evals", state.bad_evals);
  w.set_attr("/", "last_train_loss", state.last_loss);
  w.set_attr("/", "norm_mean", norm.mean);
  w.set_attr("/", "norm_std", norm.std);
  if (norm.channels() > 0) {  // per extra channel, in order
    w.set_attr("/", "channel_names", detail_fit::join(channel_names, ","));
    w.set_attr("/", "channel_mean", norm.channel_mean);
    w.set_attr("/", "channel_std", norm.channel_std);
  }
  // The problem the model was trained on.
  w.set_attr("/", "dim", long(grid.dim));
  w.set_attr("/", "bc", std::string(enum_name(grid.bc)));
  w.set_attr("/", "box_lengths", grid.box);
  w.set_attr("/", "encoding_lengths", grid.encoding_lengths());
  w.set_attr("/", "grid_shape", grid.dim == 3 ? std::vector<double>{double(grid.nz), double(grid.ny), double(grid.nx)}
                                               : std::vector<double>{double(grid.ny), double(grid.nx)});
  if (!grid.coords.empty()) {
    const std::uint64_t d = std::uint64_t(grid.dim);
    if (grid.dim == 1)
      w.write<double>("/grid/coords", grid.coords.data(), {std::uint64_t(grid.nx), d});
    else if (grid.dim == 3)
      w.write<double>("/grid/coords", grid.coords.data(),
                      {std::uint64_t(grid.nz), std::uint64_t(grid.ny), std::uint64_t(grid.nx), d});
    else
      w.write<double>("/grid/coords", grid.coords.data(), {std::uint64_t(grid.ny), std::uint64_t(grid.nx), d});
  }
  w.set_attr("/", "written_by", written_by);
  w.set_attr("/", "config", config_toml);
  w.commit();
}

// ------------------------------------------------------------------------------------------------ HeatModel

namespace {
// The configuration stored with a model made here: its options and problem, as `attnphys train heat` keys.
std::string model_config(const SurrogateOptions& opt, const HeatModelGrid& grid,
                         const std::vector<std::string>& channels, const TrainOptions* train,
                         const HeatDataOptions* data) {
  HeatRunConfig cfg;
  if (data) cfg.data = *data;
  cfg.data.dim = grid.dim;
  cfg.data.bc = grid.bc;
  if (!grid.box.empty()) cfg.data.length = grid.box[0];
  if (!data) {
    cfg.data.n = (grid.dim == 1 || (grid.nx == grid.ny && (grid.dim < 3 || grid.nz == grid.nx))) ? grid.nx : 0;
    cfg.data.channels = channels;
  }
  cfg.model = opt;
  cfg.model.input_kappa = false;
  if (train) cfg.train = *train;
  OptionSet set;
  cfg.declare(set);
  return set.to_toml();
}
}  // namespace

HeatModel::HeatModel(SurrogateOptions options, int dim, std::vector<double> box, heat::BcType bc,
                     std::vector<std::string> channel_names, long seed) {
  require(dim >= 1 && dim <= 3, "heat surrogate: dim must be 1, 2 or 3, got ", dim);
  require(long(box.size()) == dim, "heat surrogate: ", box.size(), " box length(s) for a ", dim, "D model: give one per ",
          "axis");
  for (double b : box) require(b > 0 && std::isfinite(b), "heat surrogate: box lengths must be positive, got ", b);
  for (std::size_t i = 0; i < channel_names.size(); ++i) {
    require(!channel_names[i].empty() && channel_names[i].find(',') == std::string::npos,
            "heat surrogate: channel names must be non-empty and free of commas, got '", channel_names[i], "'");
    for (std::size_t j = 0; j < i; ++j)
      require(channel_names[i] != channel_names[j], "heat surrogate: channel '", channel_names[i], "' is listed twice");
  }
  grid_.dim = dim;
  grid_.bc = bc;
  grid_.box = std::move(box);
  channels_ = std::move(channel_names);
  options.input_kappa = false;
  options.extra_channels = long(channels_.size());
  build(options);
  model_->init(buf_, std::uint64_t(seed));
  norm_.channel_mean.assign(channels_.size(), 0.0);
  norm_.channel_std.assign(channels_.size(), 1.0);
  config_ = model_config(model_->options(), grid_, channels_, nullptr, nullptr);
}

void HeatModel::build(SurrogateOptions options) {
  options.validate();
  require(options.encoder.d_model % options.encoder.n_heads == 0 || options.kind == SurrogateKind::Kernel, "heat surrogate: ",
          "d_model (", options.encoder.d_model, ") must be a multiple of n_heads (", options.encoder.n_heads, ")");
  model_ = std::make_unique<HeatSurrogate<T>>(options, grid_.dim, grid_.encoding_lengths());
  buf_ = ParameterBuffer<T>();
  model_->declare(buf_);
  buf_.allocate();
}

std::unique_ptr<HeatModel> HeatModel::load(const std::string& path, const std::vector<std::string>& overrides) {
  using detail_fit::split_names;
  h5::Reader r(path, "heat_surrogate", 1);
  std::unique_ptr<HeatModel> m(new HeatModel());
  m->config_ = r.attr_string("/", "config");
  HeatRunConfig cfg;
  {
    OptionSet set;
    cfg.declare(set);
    set.load_string(m->config_, path + " (stored configuration)");
    if (!overrides.empty()) {
      set.set_all(overrides);
      m->config_ = set.to_toml();  // a later save() keeps what this model runs
    }
  }
  if (r.has_attr("/", "channel_names")) m->channels_ = split_names(r.attr_string("/", "channel_names"));
  if (r.has_attr("/", "channel_mean")) {
    m->norm_.channel_mean = r.attr_doubles("/", "channel_mean");
    m->norm_.channel_std = r.attr_doubles("/", "channel_std");
  }
  HeatModelGrid& g = m->grid_;
  if (r.has_attr("/", "dim") && r.has("/grid/coords")) {
    g.dim = int(r.attr_long("/", "dim"));
    g.bc = heat::parse_bc_type(r.attr_string("/", "bc"));
    g.box = r.attr_doubles("/", "box_lengths");
    const auto shape = r.attr_doubles("/", "grid_shape");
    const std::size_t want = g.dim == 3 ? 3 : 2;
    require(shape.size() == want, "checkpoint '", path, "': grid_shape holds ", shape.size(), " values, expected ",
            want, " for a ", g.dim, "D model");
    g.nz = g.dim == 3 ? long(shape[0]) : 1;
    g.ny = long(shape[want - 2]);
    g.nx = long(shape[want - 1]);
    g.coords = r.read<double>("/grid/coords");
    require(long(g.coords.size()) == g.nx * g.ny * g.nz * g.dim, "checkpoint '", path, "': /grid/coords holds ",
            g.coords.size(), " values for a ", g.nx, "x", g.ny, g.dim == 3 ? "x" + std::to_string(g.nz) : "",
            " grid in ", g.dim, "D");
  } else {  // an older checkpoint: the problem from its configuration (data.file must still be readable)
    const HeatRunConfig rc = cfg.resolved();
    const auto& D = rc.data;
    g.dim = D.dim;
    g.bc = D.bc;
    g.box = D.box();
    g.nx = D.grid_nx();
    g.ny = D.grid_ny();
    g.nz = D.grid_nz();
    auto h = to_host(grid_coordinates(D));
    g.coords.assign(h.data(), h.data() + h.size());
    if (m->channels_.empty()) m->channels_ = D.channels;
  }
  require(m->norm_.channel_mean.size() == m->channels_.size() && m->norm_.channel_std.size() == m->channels_.size(),
          "checkpoint '", path, "' holds statistics of ", m->norm_.channel_mean.size(), " extra input channel(s) but ",
          "names ", m->channels_.size());
  SurrogateOptions opt = cfg.model;
  opt.input_kappa = false;
  opt.extra_channels = long(m->channels_.size());
  m->build(opt);
  h5::read_parameters(r, "/model", m->buf_, false);
  if (r.has("/best/params")) m->buf_.set_host(r.read<T>("/best/params"));
  m->norm_.mean = r.attr_double("/", "norm_mean");
  m->norm_.std = r.attr_double("/", "norm_std");
  m->state_.step = r.attr_long("/", "step");
  m->state_.best_val = r.attr_double("/", "best_val_rel_l2");
  m->state_.bad_evals = r.attr_long("/", "bad_evals");
  if (r.has_attr("/", "last_train_loss")) m->state_.last_loss = r.attr_double("/", "last_train_loss");
  m->optimizer_steps_ = r.attr_long("/", "optimizer_steps");
  m->trained_ = true;
  return m;
}

void HeatModel::save(const std::string& path, const std::string& config_toml) const {
  require(trained_, "heat surrogate: the model has not been trained, so it has no normalisation to save: fit it first");
  FitState st = state_;
  st.best_params.clear();  // the parameters in /model are the ones this model predicts with
  write_heat_checkpoint(path, buf_, optimizer_steps_, st, norm_, channels_, grid_,
                        config_toml.empty() ? config_ : config_toml, "attnphys.operator");
}

FitResult HeatModel::fit(const HeatPairs& train, const HeatPairs& val, const TrainOptions& options,
                         const FitHooks& hooks, bool restore_best, const HeatDataOptions* data) {
  options.validate();
  require(train.count > 0, "fit: no training pairs");
  require(train.dim == grid_.dim, "fit: ", train.dim, "D pairs for a ", grid_.dim, "D model");
  require(train.channels() == long(channels_.size()), "fit: the pairs carry ", train.channels(),
          " extra channel(s), the model takes ", channels_.size());
  if (!trained_) norm_ = normalisation_of(train);
  Optimizer opt(options.optimizer);
  buf_.zero(Slot::Moment1);
  buf_.zero(Slot::Moment2);
  FitState st;
  // From here the model holds (partly) trained parameters, whatever happens in the loop.
  trained_ = true;
  const HeatModelGrid before = grid_;
  grid_ = grid_of(train, before.box, before.bc);
  FitResult r;
  try {
    r = fit_heat_surrogate(*model_, buf_, opt, st, train, val, norm_, options, hooks, Comm::self());
  } catch (...) {
    state_ = st;
    optimizer_steps_ = opt.steps_taken();
    throw;
  }
  if (restore_best && !st.best_params.empty()) buf_.set_host(st.best_params);
  st.best_params.clear();
  state_ = st;
  optimizer_steps_ = opt.steps_taken();
  config_ = model_config(model_->options(), grid_, channels_, &options, data);
  return r;
}

View2<double> HeatModel::predict(const View2<double>& inputs, const View3<double>& extra, const View2<double>& coords,
                                 const View1<double>& tau, long chunk) {
  require(trained_, "heat surrogate: the model has not been trained (no normalisation yet): fit it first, or load a ",
          "checkpoint");
  return predict_heat_surrogate(*model_, buf_, norm_, inputs, extra, coords, tau, cache_, chunk);
}

}  // namespace attnphys::training
