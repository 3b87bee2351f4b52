#pragma once
// Evaluation of a trained heat surrogate (private to solvers/training; used by run_heat and
// evaluate_heat_checkpoint).
#include <string>
#include <vector>

#include "attnphys/solvers/training/heat_file_solver.hpp"
#include "attnphys/solvers/training/heat_training.hpp"

namespace attnphys::training {

// Mean and standard deviation of each extra input channel (data.channels) over the training split.
struct ChannelNorm {
  std::vector<double> mean, std;
};

class HeatEvaluator {
 public:
  // cfg: resolved (HeatRunConfig::resolved).
  HeatEvaluator(const HeatRunConfig& cfg, const HeatSurrogate<float>& model, const ParameterBuffer<float>& params,
                double mu, double sigma, ChannelNorm channels = {})
      : cfg_(cfg), model_(model), params_(params), mu_(mu), sigma_(sigma), ch_(std::move(channels)) {}
  // Fills the evaluation fields of res and writes eval.h5 and summary.json into out_dir.
  void run(HeatRunResult& res, const std::string& out_dir, const std::string& config_toml);
  // Training metrics (the rows of metrics.csv of this run) to store in eval.h5 under /metrics as well.
  void set_metrics(std::vector<std::string> columns, std::vector<double> rows) {
    metric_columns_ = std::move(columns);
    metric_rows_ = std::move(rows);
  }
  // The group whose rank 0 writes the files (default: Comm::world()).
  void set_comm(const Comm& comm) { comm_ = comm; }
  // Surrogate prediction of fields [count, points] at coordinates [points, dim] (denormalised, double), with the
  // raw extra channels [count, points, C] of each input (C = 0: none), tau base horizons ahead (a model without
  // model.dt_input always predicts one).
  View2<double> predict(const View2<double>& inputs, const View3<double>& extra, const View2<double>& coords,
                        SurrogateCache<float>& cache, double tau = 1.0);
  // The same on a generated n-per-axis grid of the configured problem, without extra channels.
  View2<double> predict(const View2<double>& inputs, long n_points, SurrogateCache<float>& cache, double tau = 1.0);

 private:
  const HeatRunConfig& cfg_;
  const HeatSurrogate<float>& model_;
  const ParameterBuffer<float>& params_;
  double mu_, sigma_;
  ChannelNorm ch_;
  Comm comm_ = Comm::world();
  std::vector<std::string> metric_columns_;
  std::vector<double> metric_rows_;
  EqualAccuracy speed_;  // the step counts the speed comparison tried
  // The speed comparison at equal accuracy on the test pairs (fsol: the file's per-sample problems; null: the
  // configured problem), filling the speed fields and a note of res.
  void run_speed(HeatRunResult& res, const HeatPairs& test, double pred_seconds, const HeatFileSolver* fsol,
                 SurrogateCache<float>& cache);
};

// Mean relative L2 between two sets of fields [count, points].
double mean_rel_l2(const View2<double>& pred, const View2<double>& ref);

}  // namespace attnphys::training
