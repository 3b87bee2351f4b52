#pragma once
// The heat surrogate's training loop on given pairs, its prediction, its checkpoint format, and a trained model as
// one object (HeatModel: the model, its parameters, the normalisation learned from the training pairs and the grid
// it was trained on). run_heat (`attnphys train heat`) and the Python API (attnphys.operator) both train through
// fit_heat_surrogate, predict through predict_heat_surrogate and write checkpoints through write_heat_checkpoint,
// so a checkpoint of either loads in the other and predicts the same numbers.
//
// Checkpoint (HDF5, attnphys_kind "heat_surrogate", format 1):
//   /model/...            parameters and AdamW moments (h5::write_parameters)
//   /best/params          the best validated parameters (when a validation ran)
//   /grid/coords          [ny, nx, dim] (1D: [nx, 1]; 3D: [nz, ny, nx, 3]) physical coordinates of the training grid
//   attributes            step, optimizer_steps, best_val_rel_l2, bad_evals, norm_mean, norm_std,
//                         channel_names ("a,b"), channel_mean, channel_std (per extra channel, when any),
//                         dim, bc, box_lengths, encoding_lengths, grid_shape ([ny, nx]; 3D: [nz, ny, nx]),
//                         config (the TOML)
// Checkpoints written before /grid and the dim/box attributes existed still load: the model's problem then comes
// from the stored configuration (with data.file resolved again, so the file must still exist).
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/optim.hpp"
#include "attnphys/solvers/training/heat_data.hpp"
#include "attnphys/solvers/training/heat_surrogate.hpp"
#include "attnphys/solvers/training/heat_training.hpp"

namespace attnphys::training {

// Normalisation learned from the training pairs: mean and standard deviation of the input fields, and of each
// extra input channel separately.
struct HeatNormalisation {
  double mean = 0, std = 1;
  std::vector<double> channel_mean, channel_std;
  long channels() const { return long(channel_mean.size()); }
};
// Statistics over every input field and every extra channel of `train` (Welford; non-finite values refused).
HeatNormalisation normalisation_of(const HeatPairs& train);

// One optimizer step, reported to FitHooks::on_step.
struct FitStep {
  long step = 0;                 // steps done (1-based)
  double lr = 0, loss = 0, grad_norm = 0;
  double val_rel_l2 = NAN;       // mean relative L2 on the validation pairs, NaN when not validated at this step
  double best_val_rel_l2 = NAN;  // best so far (NaN before the first validation)
  double seconds = 0;            // since the fit started
};

// What a checkpoint holds besides the parameters and the normalisation.
struct FitState {
  long step = 0, bad_evals = 0;
  double best_val = INFINITY;
  std::vector<float> best_params;  // empty until a validation ran
  double last_loss = 0.0;          // training loss of the last step taken (kept in checkpoints)
};

struct FitHooks {
  // After every step. It may throw: the fit stops and the exception propagates, with the parameters of that step.
  std::function<void(const FitStep&)> on_step;
  // Every train.checkpoint_every steps except the last.
  std::function<void(long step)> on_checkpoint;
  // What the error of a diverged run (NaN/Inf loss) suggests (default: lower optimizer.lr, set optimizer.clip_norm).
  std::function<std::string()> diverged_hint;
};

struct FitResult {
  long steps_done = 0;
  bool stopped_early = false;
  bool stopped_at_time_limit = false;  // train.max_seconds ran out before train.steps
  double train_seconds = 0, final_loss = 0;
};

// Trains buf (declared and allocated for model) on the pairs `train`, validating on `val` every
// options.eval_every steps (val.count == 0: no validation, no early stopping), from state.step up to
// options.steps; state carries the step, best validation and best parameters in and out. The loss, the
// optimizer, the schedule, gradient clipping, the batch order and the data-parallel split over comm are those of
// `attnphys train heat` (heat_training.hpp). The pairs are normalised with norm; their coordinates are the grid.
// Multi-step training (options.unroll = K > 1, unroll_grad, unroll_warmup_steps; see TrainOptions) needs training
// pairs with trajectories of at least K horizons (HeatPairs::later: make_heat_pairs(..., steps = K)); validation
// pairs with trajectories are validated over min(K, val.steps()) steps of rollout (mean relative L2 over the
// steps), one-step pairs over one. FitStep::loss is then the K-step loss (full) or the last step's (last).
FitResult fit_heat_surrogate(const HeatSurrogate<float>& model, ParameterBuffer<float>& buf, Optimizer& opt,
                             FitState& state, const HeatPairs& train, const HeatPairs& val,
                             const HeatNormalisation& norm, const TrainOptions& options, const FitHooks& hooks = {},
                             const Comm& comm = Comm::self());

// Denormalised prediction for input fields [count, P] with the raw extra channels [count, P, C] (C = 0: none) at
// coordinates [P, dim], each sample tau[i] base horizons ahead (tau empty: 1; ignored without model.dt_input), in
// chunks of `chunk` samples.
View2<double> predict_heat_surrogate(const HeatSurrogate<float>& model, const ParameterBuffer<float>& buf,
                                     const HeatNormalisation& norm, const View2<double>& inputs,
                                     const View3<double>& extra, const View2<double>& coords,
                                     const View1<double>& tau, SurrogateCache<float>& cache, long chunk = 32);

// The problem a model was trained on: what predicting needs besides the parameters.
struct HeatModelGrid {
  int dim = 2;
  heat::BcType bc = heat::BcType::Periodic;
  std::vector<double> box;       // box length per axis
  long nx = 0, ny = 1, nz = 1;   // the training grid
  std::vector<double> coords;    // [nx·ny·nz, dim] its points (row-major, x fastest)
  std::vector<double> encoding_lengths() const;  // periods of the harmonic encoding (encoding_lengths in heat_data)
};
// The grid of a set of pairs on the box and boundary type given.
HeatModelGrid grid_of(const HeatPairs& pairs, std::vector<double> box, heat::BcType bc);

// Writes a checkpoint (the format in the header comment) through a temporary file renamed into place.
void write_heat_checkpoint(const std::string& path, const ParameterBuffer<float>& buf, long optimizer_steps,
                           const FitState& state, const HeatNormalisation& norm,
                           const std::vector<std::string>& channel_names, const HeatModelGrid& grid,
                           const std::string& config_toml, const std::string& written_by);

// A trained (or fresh) surrogate with everything a prediction needs.
class HeatModel {
 public:
  // A fresh model: options (extra_channels is set from channel_names), the problem's dimension, box lengths and
  // boundary type, the names of the extra input channels, parameters initialised from seed.
  HeatModel(SurrogateOptions options, int dim, std::vector<double> box, heat::BcType bc,
            std::vector<std::string> channel_names, long seed);
  // A checkpoint of `attnphys train heat` or of save(); the best validated parameters when it holds them.
  // overrides ("model.attention_precision=float32", ...) change the stored configuration, as `attnphys eval heat
  // --set` does (e.g. a model trained in bf16 predicted on a CPU without a bf16 unit).
  static std::unique_ptr<HeatModel> load(const std::string& path, const std::vector<std::string>& overrides = {});
  // The checkpoint format above; config_toml is stored as the configuration (empty: one made from the options).
  void save(const std::string& path, const std::string& config_toml = "") const;

  // Trains on pairs (on this process alone): the first fit learns the normalisation from `train`, later fits
  // keep it (the parameters were trained for it). A fresh optimizer and schedule each time; with validation
  // pairs and restore_best, the model ends with the best validated parameters.
  // data: where the pairs came from (stored in the configuration; nullptr: arrays).
  FitResult fit(const HeatPairs& train, const HeatPairs& val, const TrainOptions& options, const FitHooks& hooks,
                bool restore_best = true, const HeatDataOptions* data = nullptr);
  View2<double> predict(const View2<double>& inputs, const View3<double>& extra, const View2<double>& coords,
                        const View1<double>& tau, long chunk = 32);

  const SurrogateOptions& options() const { return model_->options(); }
  const HeatSurrogate<float>& surrogate() const { return *model_; }
  const ParameterBuffer<float>& parameters() const { return buf_; }
  ParameterBuffer<float>& parameters() { return buf_; }
  const HeatNormalisation& normalisation() const { return norm_; }
  const std::vector<std::string>& channel_names() const { return channels_; }
  const HeatModelGrid& grid() const { return grid_; }
  bool trained() const { return trained_; }
  long n_parameters() const { return buf_.size(); }
  const FitState& state() const { return state_; }
  // The configuration stored with the model (a checkpoint's, or one made from the options).
  const std::string& config() const { return config_; }

 private:
  HeatModel() = default;
  void build(SurrogateOptions options);
  std::unique_ptr<HeatSurrogate<float>> model_;
  ParameterBuffer<float> buf_;
  HeatNormalisation norm_;
  HeatModelGrid grid_;
  std::vector<std::string> channels_;
  FitState state_;
  long optimizer_steps_ = 0;
  bool trained_ = false;
  std::string config_;
  SurrogateCache<float> cache_;
};

}  // namespace attnphys::training
