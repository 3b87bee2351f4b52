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
#include "attnphys/solvers/training/heat_fit.hpp"
#include "attnphys/solvers/training/normalizer.hpp"
#include "heat_eval.hpp"
#include "heat_loss.hpp"

namespace attnphys::training {

using T = float;  // training precision

TrainOptions::TrainOptions() {
  optimizer.kind = OptimizerKind::AdamW;
  optimizer.lr = 3e-2;  // measured: 3e-3 reaches 0.48 relative L2 in 300 steps, 3e-2 reaches 1.2e-2
  optimizer.weight_decay = 1e-4;
  optimizer.clip_norm = 1.0;
  schedule.kind = ScheduleKind::WarmupCosine;
  schedule.warmup_steps = 100;
  schedule.total_steps = steps;
  schedule.min_lr_ratio = 0.02;
}

void TrainOptions::declare(OptionSet& set) {
  set.add("train.steps", &steps, "optimizer steps", Range::at_least(1));
  set.add("train.batch", &batch, "samples per mini-batch", Range::at_least(1));
  set.add("train.eval_every", &eval_every, "steps between validations", Range::at_least(1));
  set.add("train.max_seconds", &max_seconds,
          "wall-clock budget of the training loop in seconds (0: none; the schedule spans train.steps unless "
          "schedule.clock = time)",
          Range::non_negative());
  set.add("train.checkpoint_every", &checkpoint_every, "steps between checkpoints", Range::at_least(1));
  set.add("train.patience", &patience, "validations without improvement before stopping (0: off)",
          Range::non_negative());
  set.add("train.h1_weight", &h1_weight, "weight of the relative H1 term in the loss", Range::non_negative());
  set.add("train.unroll", &unroll,
          "applications of the model per training sample (K > 1: trajectories of K horizons, the model fed its own "
          "prediction; 1: one-step training)",
          Range::at_least(1));
  set.add("train.unroll_grad", &unroll_grad,
          "unrolled training: full (mean loss over the K steps, gradient through all of them) or last (pushforward: "
          "per step, 0..K-1 applications without gradient, then one trained application on their output)");
  set.add("train.unroll_warmup_steps", &unroll_warmup_steps,
          "optimizer steps of one-step training before unrolled training starts (0: unrolled from the start)",
          Range::non_negative());
  set.add("train.seed", &seed, "seed of the model initialisation and the batch order");
  set.add("train.out_dir", &out_dir, "run directory (checkpoint, metrics.csv, eval.h5, summary.json)");
  set.add("train.resume", &resume, "checkpoint to resume from (empty: start afresh)");
  set.add("train.progress", &progress, "show a progress bar on stderr");
  optimizer.declare(set, "optimizer");
  schedule.declare(set, "schedule");
}

UnrollGrad parse_unroll_grad(const std::string& text) {
  if (const auto g = find_enum<UnrollGrad>(text)) return *g;
  fail("train.unroll_grad = '", text, "' is not one of full, last");
}

void TrainOptions::validate() const {
  require(steps >= 1 && batch >= 1, "train.steps and train.batch must be positive");
  require(unroll >= 1, "train.unroll must be at least 1 (1: one-step training), got ", unroll);
  require(unroll_warmup_steps >= 0, "train.unroll_warmup_steps must be non-negative, got ", unroll_warmup_steps);
  require(!out_dir.empty(), "train.out_dir must name a directory");
  optimizer.validate();
  schedule.validate();
  require(schedule.clock != ScheduleClock::Time || max_seconds > 0,
          "schedule.clock = time decays the learning rate over the wall-clock budget: set train.max_seconds > 0 "
          "(and train.steps as an upper bound), or use schedule.clock = steps");
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
  if (model.kind == SurrogateKind::Kernel && !data.channels.empty()) {
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
  c.data = resolve_heat_data(c.data);  // data.file: the file's grid, physics and channels; a family's channels
  if (c.model.kind == SurrogateKind::Kernel && !c.data.channels.empty())
    fail("model.kind = kernel is linear in the field with one kernel for every sample, so it cannot take the ",
         "per-sample inputs of the generated family (", c.data.family_name(), "): use model.kind = conditioned ",
         "(a kernel conditioned on them) or transformer");
  // model.conserve (on in the main job) holds only where the heat is conserved: periodic or zero-flux sides, no
  // source, no boundary data, physics the run knows. Elsewhere it is turned off, and the run's notes say so.
  if (c.model.conserve) {
    std::string why;
    if (c.data.bc != heat::BcType::Periodic && c.data.bc != heat::BcType::Neumann)
      why = std::string("data.bc = ") + enum_name(c.data.bc) + " lets heat through the boundary";
    else if (c.data.family.source != heat::SourceFamily::None ||
             std::find(c.data.channels.begin(), c.data.channels.end(), "source") != c.data.channels.end())
      why = "a source changes the heat";
    else if (c.data.family.boundary != heat::BoundaryFamily::Zero)
      why = "boundary data change the heat";
    else if (!c.data.solver_physics)
      why = "the physics of data.file is not known to conserve heat";
    if (!why.empty()) {
      c.model.conserve = false;
      c.data.family_note += std::string(c.data.family_note.empty() ? "" : "; ") + "model.conserve is off: " + why;
    }
  }
  c.model.extra_channels = long(c.data.channels.size());
  c.model.validate();
  return c;
}

HeatRunConfig HeatRunConfig::main_job() {
  HeatRunConfig c;
  c.data.family.kappa = heat::KappaFamily::LogNormal;
  c.data.family.kappa_contrast = 5.0;
  c.data.horizon_ftcs_steps = 8.0;  // of the mean κ; about 18 of the largest
  c.data.n_train = 1200;
  c.data.n_val = 100;
  c.data.n_test = 100;
  c.model.kind = SurrogateKind::Conditioned;
  c.model.kernel_heads = 4;
  c.model.kernel_dk = 16;
  c.model.conditioned_attention = ConditionedAttention::Tiled;  // measured faster here than the saved-probability form (0.15 vs 0.19 s)
  c.model.conserve = true;  // periodic, no source: the heat is conserved, so is each prediction's mean
  c.train.steps = 1200;
  c.train.batch = 8;
  c.train.max_seconds = 400;
  // One-step training for 800 steps, then the pushforward trick on 4-step trajectories: what keeps the rollout
  // after 20 horizons within 5e-2.
  c.train.unroll = 4;
  c.train.unroll_grad = UnrollGrad::Last;
  c.train.unroll_warmup_steps = 800;
  c.train.optimizer.lr = 2e-2;
  c.train.schedule.total_steps = c.train.steps;
  return c;
}

void HeatRunConfig::apply_schedule_defaults(const OptionSet& set) {
  if (!set.was_set("schedule.total_steps")) train.schedule.total_steps = train.steps;
  if (!set.was_set("schedule.warmup_steps"))
    train.schedule.warmup_steps = std::min(train.schedule.warmup_steps, train.steps / 10);
}

// ------------------------------------------------------------------------------------------------ training

HeatRunResult run_heat(const HeatRunConfig& cfg, const std::string& config_toml) {
  return run_heat(cfg, config_toml, Comm::world());
}

HeatRunResult run_heat(const HeatRunConfig& cfg_in, const std::string& config_toml, const Comm& comm) {
  const HeatRunConfig cfg = cfg_in.resolved();  // data.file: the file's grid, physics and channels
  const auto& D = cfg.data;
  const auto& Tr = cfg.train;
  namespace fs = std::filesystem;
  if (comm.is_root()) fs::create_directories(Tr.out_dir);
  const std::string ckpt_path = (fs::path(Tr.out_dir) / "checkpoint.h5").string();

  // Data: sample i is the same field on every run of this seed; contiguous index ranges split it.
  HeatPairs train = make_heat_pairs(D, 0, D.n_train, D.n, Tr.unroll);  // trajectories of train.unroll horizons
  HeatPairs val = make_heat_pairs(D, D.n_train, D.n_val, D.n, Tr.unroll);  // validated over the same K steps
  // The field and each extra channel with its own statistics over the training pairs.
  const HeatNormalisation norm = normalisation_of(train);
  const double mu = norm.mean, sigma = norm.std;
  const HeatModelGrid grid = grid_of(train, D.box(), D.bc);

  // Model, parameters, optimizer.
  HeatSurrogate<T> model(cfg.model, D.dim, encoding_lengths(D));
  ParameterBuffer<T> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, std::uint64_t(Tr.seed));
  Optimizer opt(Tr.optimizer);
  HeatRunResult res;
  res.n_parameters = buf.size();
  FitState state;
  if (!Tr.resume.empty()) {
    h5::Reader r(Tr.resume, "heat_surrogate", 1);
    h5::read_parameters(r, "/model", buf, true);
    state.step = r.attr_long("/", "step");
    opt.set_steps_taken(r.attr_long("/", "optimizer_steps"));
    state.best_val = r.attr_double("/", "best_val_rel_l2");
    state.bad_evals = r.attr_long("/", "bad_evals");
    if (r.has_attr("/", "last_train_loss")) state.last_loss = r.attr_double("/", "last_train_loss");
    if (r.has("/best/params")) state.best_params = r.read<T>("/best/params");
    const double mu_c = r.attr_double("/", "norm_mean"), sd_c = r.attr_double("/", "norm_std");
    require(std::abs(mu_c - mu) <= 1e-12 * (1 + std::abs(mu)) && std::abs(sd_c - sigma) <= 1e-12 * sigma,
            "cannot resume from '", Tr.resume, "': it was trained on other data (normaliser ", mu_c, " ± ", sd_c,
            ", this configuration gives ", mu, " ± ", sigma, "); use the configuration stored in the checkpoint");
    const auto cm = r.has_attr("/", "channel_mean") ? r.attr_doubles("/", "channel_mean") : std::vector<double>{};
    const auto cs = r.has_attr("/", "channel_std") ? r.attr_doubles("/", "channel_std") : std::vector<double>{};
    const auto& ch_mu = norm.channel_mean;
    const auto& ch_sd = norm.channel_std;
    bool same = cm.size() == ch_mu.size() && cs.size() == ch_sd.size();
    for (std::size_t c = 0; same && c < cm.size(); ++c)
      same = std::abs(cm[c] - ch_mu[c]) <= 1e-12 * (1 + std::abs(ch_mu[c])) && std::abs(cs[c] - ch_sd[c]) <= 1e-12 * ch_sd[c];
    require(same, "cannot resume from '", Tr.resume, "': its extra input channels (", cm.size(), ") have other ",
            "statistics than this configuration's data.channels (", ch_mu.size(), "); use the configuration stored ",
            "in the checkpoint");
    require(state.step <= Tr.steps, "checkpoint '", Tr.resume, "' is at step ", state.step, ", past train.steps = ",
            Tr.steps);
  }
  auto save_checkpoint = [&]() {
    if (!comm.is_root()) return;
    write_heat_checkpoint(ckpt_path, buf, opt.steps_taken(), state, norm, D.channels, grid, config_toml,
                          "attnphys train heat");
  };

  const long start = state.step;
  CsvLogger csv;
  if (comm.is_root())
    csv = start > 0 ? CsvLogger::resume((fs::path(Tr.out_dir) / "metrics.csv").string(),
                                        {"step", "lr", "train_loss", "grad_norm", "val_rel_l2", "seconds"},
                                        double(start))
                    : CsvLogger((fs::path(Tr.out_dir) / "metrics.csv").string(),
                                {"step", "lr", "train_loss", "grad_norm", "val_rel_l2", "seconds"}, false);
  ProgressBar bar(Tr.steps - start, "train heat", Tr.progress && comm.is_root());
  FitHooks hooks;
  hooks.on_step = [&](const FitStep& s) {
    csv.row({double(s.step), s.lr, s.loss, s.grad_norm, std::isnan(s.val_rel_l2) ? -1.0 : s.val_rel_l2, s.seconds});
    char status[96];
    std::snprintf(status, sizeof status, "loss %.3e%s", s.loss,
                  !std::isnan(s.best_val_rel_l2) ? (" val " + std::to_string(s.best_val_rel_l2).substr(0, 8)).c_str()
                                                 : "");
    bar.update(s.step - start, status);
  };
  hooks.on_checkpoint = [&](long) { save_checkpoint(); };
  hooks.diverged_hint = [&]() {
    return std::string(fs::exists(ckpt_path) ? "The last good checkpoint is kept at " + ckpt_path + ". " : "") +
           "Lower optimizer.lr or set optimizer.clip_norm.";
  };
  const FitResult fr = fit_heat_surrogate(model, buf, opt, state, train, val, norm, Tr, hooks, comm);
  res.stopped_early = fr.stopped_early;
  res.stopped_at_time_limit = fr.stopped_at_time_limit;
  res.train_seconds = fr.train_seconds;
  bar.finish("loss " + std::to_string(fr.final_loss));
  res.steps_done = fr.steps_done;
  res.final_train_loss = fr.final_loss;
  res.best_val_rel_l2 = state.best_val;
  save_checkpoint();
  res.checkpoint = ckpt_path;
  if (!state.best_params.empty()) buf.set_host(state.best_params);  // evaluate the best validated parameters

  HeatEvaluator ev(cfg, model, buf, mu, sigma, ChannelNorm{norm.channel_mean, norm.channel_std});
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
