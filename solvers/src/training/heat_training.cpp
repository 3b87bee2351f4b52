#include "attnphys/solvers/training/heat_training.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/logging.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/solvers/training/normalizer.hpp"
#include "heat_eval.hpp"
#include "heat_loss.hpp"

namespace attnphys::training {

using T = float;  // training precision

TrainOptions::TrainOptions() {
  optimizer.kind = "adamw";
  optimizer.lr = 3e-2;  // measured: 3e-3 reaches 0.48 relative L2 in 300 steps, 3e-2 reaches 1.2e-2
  optimizer.weight_decay = 1e-4;
  optimizer.clip_norm = 1.0;
  schedule.kind = "warmup_cosine";
  schedule.warmup_steps = 100;
  schedule.total_steps = steps;
  schedule.min_lr_ratio = 0.02;
}

void TrainOptions::declare(OptionSet& set) {
  set.add("train.steps", &steps, "optimizer steps", Range::at_least(1));
  set.add("train.batch", &batch, "samples per mini-batch", Range::at_least(1));
  set.add("train.eval_every", &eval_every, "steps between validations", Range::at_least(1));
  set.add("train.max_seconds", &max_seconds,
          "wall-clock budget of the training loop in seconds (0: none; the schedule still spans train.steps)",
          Range::non_negative());
  set.add("train.checkpoint_every", &checkpoint_every, "steps between checkpoints", Range::at_least(1));
  set.add("train.patience", &patience, "validations without improvement before stopping (0: off)",
          Range::non_negative());
  set.add("train.h1_weight", &h1_weight, "weight of the relative H1 term in the loss", Range::non_negative());
  set.add("train.seed", &seed, "seed of the model initialisation and the batch order");
  set.add("train.out_dir", &out_dir, "run directory (checkpoint, metrics.csv, eval.h5, summary.json)");
  set.add("train.resume", &resume, "checkpoint to resume from (empty: start afresh)");
  set.add("train.progress", &progress, "show a progress bar on stderr");
  optimizer.declare(set, "optimizer");
  schedule.declare(set, "schedule");
}

void TrainOptions::validate() const {
  require(steps >= 1 && batch >= 1, "train.steps and train.batch must be positive");
  require(!out_dir.empty(), "train.out_dir must name a directory");
  optimizer.validate();
  schedule.validate();
}

void EvalOptions::declare(OptionSet& set) {
  set.add("eval.rollout_steps", &rollout_steps, "autoregressive rollout length (horizons)", Range::non_negative());
  set.add("eval.rollout_samples", &rollout_samples, "test samples in the rollout", Range::at_least(1));
  set.add("eval.transfer_n", &transfer_n, "also evaluate on this grid (0: skip)", Range::non_negative());
  set.add("eval.transfer_samples", &transfer_samples, "samples for the resolution transfer", Range::at_least(1));
  set.add("eval.speed", &speed, "time the surrogate against the ADI solver at equal accuracy");
  set.add("eval.attention_layer", &attention_layer, "layer of the exported attention map", Range::non_negative());
}

void HeatRunConfig::declare(OptionSet& set) {
  data.declare(set);
  model.declare(set);
  train.declare(set);
  eval.declare(set);
}

void HeatRunConfig::validate() const {
  data.validate();
  model.validate();
  train.validate();
  require(eval.attention_layer < model.encoder.n_layers, "eval.attention_layer = ", eval.attention_layer,
          " but the model has ", model.encoder.n_layers, " layer(s)");
  require(model.encoder.d_model % model.encoder.n_heads == 0, "model.d_model (", model.encoder.d_model,
          ") must be a multiple of model.n_heads (", model.encoder.n_heads, ")");
  require(data.horizons.size() == 1 || model.dt_input, "data.horizons lists ", data.horizons.size(),
          " horizons but model.dt_input is off, so the model could not tell them apart: set model.dt_input = true");
  if (model.kind == "kernel" && !data.channels.empty()) {
    std::string names;
    for (const auto& c : data.channels) names += (names.empty() ? "" : ", ") + c;
    fail("model.kind = kernel is linear in the field and cannot take extra input channels (data.channels = [",
         names, "]): use model.kind = transformer, or data.channels = []");
  }
}

HeatRunConfig HeatRunConfig::resolved() const {
  validate();
  HeatRunConfig c = *this;
  // model.input_kappa: shorthand for a "kappa" channel of data.file.
  if (c.model.input_kappa && std::find(c.data.channels.begin(), c.data.channels.end(), "kappa") == c.data.channels.end()) {
    require(!c.data.file.empty(), "model.input_kappa feeds the dataset 'kappa' of data.file to the model, but data.file ",
            "is empty (generated pairs have a constant κ): set data.file, or model.input_kappa = false");
    c.data.channels.push_back("kappa");
  }
  c.data = resolve_heat_data(c.data);  // data.file: the file's grid, physics and channels
  c.model.extra_channels = long(c.data.channels.size());
  c.model.validate();
  return c;
}

void HeatRunConfig::apply_schedule_defaults(const OptionSet& set) {
  if (!set.was_set("schedule.total_steps")) train.schedule.total_steps = train.steps;
  if (!set.was_set("schedule.warmup_steps"))
    train.schedule.warmup_steps = std::min(train.schedule.warmup_steps, train.steps / 10);
}

// ------------------------------------------------------------------------------------------------ helpers

namespace detail_train {

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

}  // namespace detail_train

// ------------------------------------------------------------------------------------------------ training

HeatRunResult run_heat(const HeatRunConfig& cfg, const std::string& config_toml) {
  return run_heat(cfg, config_toml, Comm::world());
}

HeatRunResult run_heat(const HeatRunConfig& cfg_in, const std::string& config_toml, const Comm& comm) {
  using namespace detail_train;
  const HeatRunConfig cfg = cfg_in.resolved();  // data.file: the file's grid, physics and channels
  const auto& D = cfg.data;
  const auto& Tr = cfg.train;
  namespace fs = std::filesystem;
  if (comm.is_root()) fs::create_directories(Tr.out_dir);
  const std::string ckpt_path = (fs::path(Tr.out_dir) / "checkpoint.h5").string();

  // Data: sample i is the same field on every run of this seed; contiguous index ranges split it.
  const auto t_data = std::chrono::steady_clock::now();
  HeatPairs train = make_heat_pairs(D, 0, D.n_train, D.n);
  HeatPairs val = make_heat_pairs(D, D.n_train, D.n_val, D.n);
  const long P = train.points, n_rows = train.count, n_val_rows = val.count;
  Normalizer norm;
  {
    auto h = to_host(train.inputs);
    norm.update(h.data(), h.size());
    norm.finalize();
  }
  const double mu = norm.mean(), sigma = norm.stddev();
  // Each extra channel with its own statistics over the training pairs.
  const long C = train.channels();
  std::vector<double> ch_mu(static_cast<std::size_t>(C)), ch_sd(static_cast<std::size_t>(C));
  {
    auto h = to_host(train.extra);
    for (long c = 0; c < C; ++c) {
      RunningStats st;
      for (long r = 0; r < long(h.extent(0)); ++r)
        for (long q = 0; q < long(h.extent(1)); ++q) st.add(h(r, q, c));
      Normalizer nc(st);
      ch_mu[std::size_t(c)] = nc.mean();
      ch_sd[std::size_t(c)] = nc.stddev();
    }
  }
  const View3<T> tr_ex = channels_normalised(train.extra, ch_mu, ch_sd), va_ex = channels_normalised(val.extra, ch_mu, ch_sd);
  View2<T> tr_in = to_normalised(train.inputs, mu, sigma), tr_tg = to_normalised(train.targets, mu, sigma);
  View2<T> va_in = to_normalised(val.inputs, mu, sigma), va_tg = to_normalised(val.targets, mu, sigma);
  View1<T> tr_tau = to_float(train.tau), va_tau = to_float(val.tau);
  View2<T> coords("attnphys::coords_f", P, D.dim);
  Kokkos::deep_copy(coords, View2<T>(to_normalised(train.coords, 0.0, 1.0)));
  const double data_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_data).count();

  // Model, parameters, optimizer.
  HeatSurrogate<T> model(cfg.model, D.dim, encoding_lengths(D));
  ParameterBuffer<T> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, std::uint64_t(Tr.seed));
  Optimizer opt(Tr.optimizer);
  HeatRunResult res;
  res.n_parameters = buf.size();
  long start = 0, bad_evals = 0;
  double best_val = INFINITY;
  std::vector<T> best_params;
  if (!Tr.resume.empty()) {
    h5::Reader r(Tr.resume, "heat_surrogate", 1);
    h5::read_parameters(r, "/model", buf, true);
    start = r.attr_long("/", "step");
    opt.set_steps_taken(r.attr_long("/", "optimizer_steps"));
    best_val = r.attr_double("/", "best_val_rel_l2");
    bad_evals = r.attr_long("/", "bad_evals");
    if (r.has("/best/params")) best_params = r.read<T>("/best/params");
    const double mu_c = r.attr_double("/", "norm_mean"), sd_c = r.attr_double("/", "norm_std");
    require(std::abs(mu_c - mu) <= 1e-12 * (1 + std::abs(mu)) && std::abs(sd_c - sigma) <= 1e-12 * sigma,
            "cannot resume from '", Tr.resume, "': it was trained on other data (normaliser ", mu_c, " ± ", sd_c,
            ", this configuration gives ", mu, " ± ", sigma, "); use the configuration stored in the checkpoint");
    const auto cm = r.has_attr("/", "channel_mean") ? r.attr_doubles("/", "channel_mean") : std::vector<double>{};
    const auto cs = r.has_attr("/", "channel_std") ? r.attr_doubles("/", "channel_std") : std::vector<double>{};
    bool same = cm.size() == ch_mu.size() && cs.size() == ch_sd.size();
    for (std::size_t c = 0; same && c < cm.size(); ++c)
      same = std::abs(cm[c] - ch_mu[c]) <= 1e-12 * (1 + std::abs(ch_mu[c])) && std::abs(cs[c] - ch_sd[c]) <= 1e-12 * ch_sd[c];
    require(same, "cannot resume from '", Tr.resume, "': its extra input channels (", cm.size(), ") have other ",
            "statistics than this configuration's data.channels (", ch_mu.size(), "); use the configuration stored ",
            "in the checkpoint");
    require(start <= Tr.steps, "checkpoint '", Tr.resume, "' is at step ", start, ", past train.steps = ", Tr.steps);
  }

  auto save_checkpoint = [&](long step) {
    if (!comm.is_root()) return;
    h5::Writer w(ckpt_path, "heat_surrogate", 1);
    h5::write_parameters(w, "/model", buf, true);
    if (!best_params.empty()) w.write<T>("/best/params", best_params);
    w.set_attr("/", "step", step);
    w.set_attr("/", "optimizer_steps", opt.steps_taken());
    w.set_attr("/", "best_val_rel_l2", best_val);
    w.set_attr("/", "bad_evals", bad_evals);
    w.set_attr("/", "norm_mean", mu);
    w.set_attr("/", "norm_std", sigma);
    if (C > 0) {  // per extra channel (data.channels, in order)
      std::string names;
      for (const auto& c : D.channels) names += (names.empty() ? "" : ",") + c;
      w.set_attr("/", "channel_names", names);
      w.set_attr("/", "channel_mean", ch_mu);
      w.set_attr("/", "channel_std", ch_sd);
    }
    w.set_attr("/", "config", config_toml);
    w.commit();
  };

  // Buffers for this rank's shard of one mini-batch: samples [b0, b1) of the B drawn for the step (contiguous
  // shards, sizes differing by at most one; a rank may get none when B < ranks).
  const long B = Tr.batch, R = comm.size();
  const long b0 = B * comm.rank() / R, b1 = B * (comm.rank() + 1) / R, Bl = b1 - b0, Bm = std::max(Bl, 1L);
  View1<T> xb("attnphys::batch_in", Bm * P), yb("attnphys::batch_target", Bm * P),
      pred("attnphys::batch_pred", Bm * P), dpred("attnphys::batch_dpred", Bm * P);
  View1<T> tb("attnphys::batch_horizon", Bm);
  View2<T> eb("attnphys::batch_channels", Bm * P, C);
  View1<long> idx("attnphys::batch_index", Bm);
  auto idx_h = Kokkos::create_mirror_view(idx);
  SurrogateCache<T> cache;

  // Mean relative L2 over the validation set; each rank takes a contiguous share, and rank 0's total is the
  // value every rank acts on (early stopping, best parameters).
  auto validate = [&]() {
    const long v0 = n_val_rows * comm.rank() / R, v1 = n_val_rows * (comm.rank() + 1) / R;
    const long chunk = std::max(1L, std::min<long>(64, v1 - v0));
    View1<T> vin("v_in", chunk * P), vtg("v_tg", chunk * P), vpred("v_pred", chunk * P), vd("v_d", chunk * P);
    double sum = 0;
    for (long s0 = v0; s0 < v1; s0 += chunk) {
      const long c = std::min(chunk, v1 - s0);
      auto in = Kokkos::subview(vin, std::make_pair(0L, c * P));
      auto tg = Kokkos::subview(vtg, std::make_pair(0L, c * P));
      auto pr = Kokkos::subview(vpred, std::make_pair(0L, c * P));
      auto dd = Kokkos::subview(vd, std::make_pair(0L, c * P));
      Kokkos::deep_copy(in, View1<T>(Kokkos::subview(va_in, std::make_pair(s0, s0 + c), Kokkos::ALL).data(), c * P));
      Kokkos::deep_copy(tg, View1<T>(Kokkos::subview(va_tg, std::make_pair(s0, s0 + c), Kokkos::ALL).data(), c * P));
      model.forward(pr, cache, in, channel_rows(va_ex, s0, c), coords, c, P, buf,
                    Kokkos::subview(va_tau, std::make_pair(s0, s0 + c)));
      sum += relative_loss<T>(dd, pr, tg, c, P, D.grid_nx(), D.grid_ny(), D.dim, mu, sigma, 0.0) * c;
    }
    sum = comm.allreduce_sum(sum);
    comm.broadcast(&sum, 1, 0);
    return sum / n_val_rows;
  };

  CsvLogger csv;
  if (comm.is_root())
    csv = CsvLogger((fs::path(Tr.out_dir) / "metrics.csv").string(),
                    {"step", "lr", "train_loss", "grad_norm", "val_rel_l2", "seconds"}, start > 0);
  ProgressBar bar(Tr.steps - start, "train heat", Tr.progress && comm.is_root());
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
      auto ps = Kokkos::subview(pred, std::make_pair(0L, Bl * P));
      auto ds = Kokkos::subview(dpred, std::make_pair(0L, Bl * P));
      gather(xs, tr_in, Kokkos::subview(idx, std::make_pair(0L, Bl)), P);
      gather(ys, tr_tg, Kokkos::subview(idx, std::make_pair(0L, Bl)), P);
      auto ts = Kokkos::subview(tb, std::make_pair(0L, Bl));
      gather1(ts, tr_tau, Kokkos::subview(idx, std::make_pair(0L, Bl)));
      gather_channels(eb, tr_ex, Kokkos::subview(idx, std::make_pair(0L, Bl)), Bl);
      const ConstMat<T> es = C > 0 ? ConstMat<T>(eb.data(), Bl * P, C) : ConstMat<T>();
      model.forward(ps, cache, xs, es, coords, Bl, P, buf, ts);
      loss = relative_loss<T>(ds, ps, ys, Bl, P, D.grid_nx(), D.grid_ny(), D.dim, mu, sigma, Tr.h1_weight, B);
    }
    if (R > 1) {
      double l[2] = {std::isfinite(loss) ? loss : 0.0, std::isfinite(loss) ? 0.0 : 1.0};
      comm.allreduce_sum(l, 2);
      comm.broadcast(l, 2, 0);
      loss = l[1] != 0 ? NAN : l[0];
    }
    if (!std::isfinite(loss))
      fail("training diverged at step ", step, ": the loss is ", loss, ". ",
           fs::exists(ckpt_path) ? "The last good checkpoint is kept at " + ckpt_path + ". " : "",
           "Lower optimizer.lr or set optimizer.clip_norm.");
    if (Bl > 0) model.backward(cache, Kokkos::subview(dpred, std::make_pair(0L, Bl * P)), buf);
    allreduce_slot(comm, buf, Slot::Grads);
    gnorm = clip_grad_norm(buf, Tr.optimizer.clip_norm);
    const double lr = scheduled_lr(Tr.schedule, Tr.optimizer.lr, step);
    opt.step(buf, lr);
    const bool last = step + 1 == Tr.steps;
    // The time budget: rank 0's clock decides, so every rank stops after the same step.
    double time_up = Tr.max_seconds > 0 &&
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= Tr.max_seconds;
    if (R > 1) comm.broadcast(&time_up, 1, 0);
    double val = -1;
    if ((step + 1) % Tr.eval_every == 0 || last || time_up != 0) {
      check_ranks_agree(comm, buf, step + 1);
      val = validate();
      if (val < best_val) {
        best_val = val;
        best_params = buf.get_host(Slot::Params);
        bad_evals = 0;
      } else {
        ++bad_evals;
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    csv.row({double(step + 1), lr, loss, gnorm, val, secs});
    char status[96];
    std::snprintf(status, sizeof status, "loss %.3e%s", loss,
                  best_val < INFINITY ? (" val " + std::to_string(best_val).substr(0, 8)).c_str() : "");
    bar.update(step + 1 - start, status);
    if ((step + 1) % Tr.checkpoint_every == 0 && !last) save_checkpoint(step + 1);
    if (Tr.patience > 0 && bad_evals >= Tr.patience) {
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
  bar.finish("loss " + std::to_string(loss));
  res.steps_done = step;
  res.final_train_loss = loss;
  res.best_val_rel_l2 = best_val;
  save_checkpoint(step);
  res.checkpoint = ckpt_path;
  if (!best_params.empty()) buf.set_host(best_params);  // evaluate the best validated parameters
  (void)data_seconds;

  HeatEvaluator ev(cfg, model, buf, mu, sigma, ChannelNorm{ch_mu, ch_sd});
  ev.set_comm(comm);
  ev.set_metrics(csv.columns(), csv.rows());
  ev.run(res, Tr.out_dir, config_toml);
  comm.barrier();  // rank 0's files are complete when any rank returns
  return res;
}

HeatRunResult evaluate_heat_checkpoint(const std::string& checkpoint, const std::vector<std::string>& overrides,
                                       const std::string& out_dir) {
  h5::Reader r(checkpoint, "heat_surrogate", 1);
  HeatRunConfig cfg;
  OptionSet set;
  cfg.declare(set);
  set.load_string(r.attr_string("/", "config"), checkpoint + " (stored configuration)");
  set.set_all(overrides);
  const std::string toml = set.to_toml();  // as configured (resolution happens again on every load)
  cfg = cfg.resolved();
  HeatSurrogate<T> model(cfg.model, cfg.data.dim, encoding_lengths(cfg.data));
  ParameterBuffer<T> buf;
  model.declare(buf);
  buf.allocate();
  h5::read_parameters(r, "/model", buf, false);
  if (r.has("/best/params")) buf.set_host(r.read<T>("/best/params"));
  HeatRunResult res;
  res.n_parameters = buf.size();
  res.steps_done = r.attr_long("/", "step");
  res.best_val_rel_l2 = r.attr_double("/", "best_val_rel_l2");
  res.checkpoint = checkpoint;
  ChannelNorm cn;
  if (r.has_attr("/", "channel_mean")) {
    cn.mean = r.attr_doubles("/", "channel_mean");
    cn.std = r.attr_doubles("/", "channel_std");
  }
  require(long(cn.mean.size()) == cfg.model.extra_channels && cn.std.size() == cn.mean.size(), "checkpoint '",
          checkpoint, "' holds statistics of ", cn.mean.size(), " extra input channel(s) but its configuration names ",
          cfg.model.extra_channels, " (data.channels)");
  HeatEvaluator ev(cfg, model, buf, r.attr_double("/", "norm_mean"), r.attr_double("/", "norm_std"), cn);
  std::filesystem::create_directories(out_dir);
  ev.run(res, out_dir, toml);
  return res;
}

}  // namespace attnphys::training
