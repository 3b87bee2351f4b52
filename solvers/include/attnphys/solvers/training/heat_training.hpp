#pragma once
// Training and evaluation of the heat surrogate (the README's main job).
//
//   auto cfg = HeatRunConfig{};            // defaults = configs/heat2d.toml
//   OptionSet set; cfg.declare(set); set.load_file(...); set.set_all(overrides);
//   HeatRunResult r = run_heat(cfg, set.to_toml());
//
// Training: relative L2 loss (optionally + an H1 term) on denormalised fields, AdamW with warm-up + cosine,
// mini-batches in a per-epoch permutation fixed by the seed, validation every eval_every steps with early stopping,
// multi-step (unrolled) training on trajectories with train.unroll (TrainOptions below),
// checkpoints (parameters, optimizer moments, step, normaliser, best parameters, config) every checkpoint_every
// steps and at the end, written to a temporary file and renamed. resume = PATH continues a run to the same result
// as an uninterrupted one. A NaN/Inf loss stops the run with a clear error; the last good checkpoint stays.
// Data parallel under MPI: every rank holds the same model (same seed); each step's global mini-batch is split into
// contiguous shards, one per rank, whose gradients are summed so that every rank takes the step the 1-rank run
// would take. Validation is split the same way; evaluation runs on every rank; only rank 0 writes files and prints.
// Ranks are checked to hold the same parameters at every validation and at the end. Checkpoints hold no rank
// state, so a run can resume at another rank count.
// Data: generated on the fly, or read from data.file (an `attnphys heat dataset` file, whose grid, κ, boundary type
// and horizon then replace the configured ones for training and evaluation alike, or any PDEBench-layout file, with
// the evolving field data.field and extra input channels data.channels: see heat_data.hpp). Each extra channel is
// normalised with its own mean and standard deviation over the training split, stored in the checkpoint. With several
// data.horizons (and model.dt_input) one model learns every horizon; the headline test metrics, the rollout and the
// solver comparison use the base horizon, test_rel_l2_by_horizon lists each.
// Evaluation: PDEBench metrics on the test set, an autoregressive rollout, resolution transfer, inference time
// against the ADI solver at equal accuracy, and the learned attention map beside the exact heat kernel. When the
// physics comes from the file (heat_data.hpp) the solver-based parts are skipped, each with a note (notes in the
// JSON), and the rollout follows the file's own later snapshots.
#include <string>
#include <vector>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/optim.hpp"
#include "attnphys/solvers/training/heat_data.hpp"
#include "attnphys/solvers/training/heat_surrogate.hpp"
#include "attnphys/solvers/training/metrics.hpp"

namespace attnphys::training {

// Where the gradient of unrolled training flows (train.unroll_grad).
enum class UnrollGrad {
  Full,  // through every application: the loss is the mean over the K steps, back-propagated through the chain
  Last,  // pushforward (Brandstetter et al. 2022): each optimizer step draws N from 0..K − 1 (fixed by train.seed
         // and the step), N applications run without gradient and the next one is trained, on the input they
         // drifted, against u_{N+1}; the loss is that step's
};
}  // namespace attnphys::training

namespace attnphys {
template <>
struct EnumNames<training::UnrollGrad> {
  static constexpr EnumName<training::UnrollGrad> values[] = {{training::UnrollGrad::Full, "full"},
                                                              {training::UnrollGrad::Last, "last"}};
};
}  // namespace attnphys

namespace attnphys::training {

// "full" | "last" (the table above); anything else is refused with the list.
UnrollGrad parse_unroll_grad(const std::string& text);

struct TrainOptions {
  long steps = 3000;  // ~2 minutes on 2 cores; 1500 steps left the 10-step rollout at 5.3e-2
  long batch = 16;
  long eval_every = 100;
  long checkpoint_every = 1000;
  long patience = 0;          // evaluations without improvement before stopping (0: never stop early)
  double max_seconds = 0;     // wall-clock budget of the training loop (0: none); the run then validates and stops
                              // (the schedule still runs over train.steps: set both for a budgeted run)
  double h1_weight = 0.0;     // weight of the relative H1 (gradient) term in the loss
  // Multi-step training. unroll = K: each sample is a trajectory (u_0, u_1, ..., u_K) one (sample) horizon apart;
  // the model is applied K times to its own output (extra channels and horizon held fixed) and, with
  // unroll_grad = full, the loss is the unweighted mean over the K steps of the relative L2 (+ H1) against u_j,
  // back-propagated through all K applications (memory: K one-step caches); with last (pushforward), one step's
  // loss after 0..K − 1 applications without gradient (drawn per optimizer step; UnrollGrad::Last; memory: one
  // cache). unroll_warmup_steps: plain one-step training before
  // that step (a curriculum). Validation (best parameters, early stopping) is then on the rollout it trains: the
  // mean relative L2 over the K steps from the validation samples' starts (val_rel_l2 in metrics.csv), and the
  // validation samples give fewer starts from a file (those with K targets). K = 1: one-step training, bit for bit
  // the same.
  long unroll = 1;
  UnrollGrad unroll_grad = UnrollGrad::Full;
  long unroll_warmup_steps = 0;
  long seed = 0;              // model initialisation and batch order
  std::string out_dir = "runs/heat2d";
  std::string resume;         // checkpoint to continue from
  bool progress = true;
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  TrainOptions();
  void declare(OptionSet& set);
  void validate() const;
};

struct EvalOptions {
  long rollout_steps = 20;
  long rollout_samples = 32;
  long transfer_n = 64;        // evaluate on this grid too (0: skip)
  long transfer_samples = 64;
  bool speed = true;           // time the surrogate against the ADI solver at equal accuracy
  long attention_layer = 0;
  void declare(OptionSet& set);
};

struct HeatRunConfig {
  HeatDataOptions data;
  SurrogateOptions model;
  TrainOptions train;
  EvalOptions eval;
  void declare(OptionSet& set);
  void validate() const;
  // After loading `set`: the cosine spans train.steps and warm-up is at most a tenth of it, unless the
  // configuration set schedule.total_steps / schedule.warmup_steps itself.
  void apply_schedule_defaults(const OptionSet& set);
  // Validated, with data.file resolved (resolve_heat_data), model.input_kappa folded into data.channels and
  // model.extra_channels set: the configuration training and evaluation run with.
  HeatRunConfig resolved() const;
  // The main job (configs/heat2d.toml): what `attnphys train heat` and attnphys.training.train_heat start from
  // before the config file and --set apply. A periodic 32² box whose samples each have their own log-normal κ(x)
  // (contrast 5), the κ-conditioned attention operator, a 400 s training budget. A default-constructed
  // HeatRunConfig is the constant-κ problem with the coordinate-attention kernel model (configs/heat2d_constant.toml).
  static HeatRunConfig main_job();
};

struct HeatRunResult {
  long steps_done = 0;
  bool stopped_early = false;
  bool stopped_at_time_limit = false;  // train.max_seconds ran out before train.steps
  double train_seconds = 0;
  double final_train_loss = 0;
  double best_val_rel_l2 = 0;
  long n_parameters = 0;
  FieldMetrics test;            // mean over test pairs of one base horizon, at the training resolution
  double identity_rel_l2 = 0;   // the same for u(t) itself as the prediction (the baseline a model must beat)
  std::vector<double> test_rel_l2_by_horizon;  // mean relative L2 per entry of data.horizons (when several)
  FieldMetrics transfer;        // mean over samples at eval.transfer_n
  std::vector<double> rollout;  // mean relative L2 after k = 1..rollout_steps horizons
  double surrogate_ms_per_sample = 0, solver_ms_per_sample = 0, speedup_vs_solver = 0;
  long solver_steps_equal_accuracy = 0;
  double solver_rel_l2_equal_accuracy = 0;
  double attention_kernel_overlap = 0;  // Σ min(attention, heat kernel) (1 = identical distributions)
  std::string checkpoint;
  bool solver_physics = true;   // false: the data's physics is the file's (solver-based evaluation skipped)
  std::string family;           // the problem family trained on (HeatDataOptions::family_name)
  std::vector<std::string> channels;  // the model's extra input channels
  std::vector<std::string> notes;  // what the evaluation skipped or changed, and why
  Json to_json() const;
  std::string table() const;  // the metrics table printed at the end of a run
};

// Trains (or resumes) and evaluates. config_toml is stored in checkpoints and outputs. The first form runs on
// Comm::world(); comm = Comm::self() trains on this process alone inside an MPI run.
HeatRunResult run_heat(const HeatRunConfig& cfg, const std::string& config_toml);
HeatRunResult run_heat(const HeatRunConfig& cfg, const std::string& config_toml, const Comm& comm);

// Evaluates a saved checkpoint (its stored configuration, with `overrides` applied to the eval section).
HeatRunResult evaluate_heat_checkpoint(const std::string& checkpoint, const std::vector<std::string>& overrides,
                                       const std::string& out_dir);

}  // namespace attnphys::training
