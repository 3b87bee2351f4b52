#pragma once
// Unrolled (multi-step) training of the heat surrogate (private to solvers/training): the model applied K times to
// its own prediction, û_1 = M(u_0), û_j = M(û_{j−1}), with the sample's extra channels, horizon and coordinates the
// same at every application, against the trajectory u_1, ..., u_K.
//
//   UnrollGrad::Full   L = (1/K) Σ_j ℓ(û_j, u_j), ℓ the relative L2 (+ H1) of heat_loss.hpp (unweighted mean over
//                      the steps), and its exact gradient through all K applications: backward runs from step K to
//                      1, each step's output gradient being its own loss gradient plus the input gradient of the
//                      step after it (HeatSurrogate::backward with du). Memory: K one-step caches (activations of K
//                      forward passes), K predictions.
//   UnrollGrad::Last   pushforward (Brandstetter et al. 2022): L = ℓ(û_K, u_K), with û_{K−1} treated as a constant
//                      input: the first K − 1 applications run without gradient, only the last one is back-
//                      propagated. Memory: one cache. (The training loop draws K per optimizer step from 1..unroll.)
// K = 1 is one-step training: the same forward, loss and backward calls as the plain loop, bit for bit.
// mean_over: as in relative_loss (a shard of a batch of mean_over samples: the shards' losses and gradients add
// up to those of the whole batch; Full divides by K·mean_over).
#include <vector>

#include "attnphys/solvers/training/heat_surrogate.hpp"
#include "attnphys/solvers/training/heat_training.hpp"

namespace attnphys::training {

// One shard of a batch of trajectories, normalised.
template <class T>
struct UnrollBatch {
  ops::ConstVec<T> input;                    // u_0 [B·P]
  std::vector<View1<const T>> targets;       // u_1, ..., u_K, each [B·P] (K = targets.size())
  ConstMat<T> extra;                         // [B·P, C] (empty: C = 0)
  ConstMat<T> coords;                        // [P, dim]
  ops::ConstVec<T> tau;                      // [B] horizons in base horizons
  long batch = 0, points = 0, nx = 0, ny = 1;
  int dim = 1;
};

template <class T>
class Unroller {
 public:
  // Runs the K applications and returns L (see above); the loss gradients are kept for backward.
  double forward(const HeatSurrogate<T>& model, const ParameterBuffer<T>& params, const UnrollBatch<T>& batch,
                 UnrollGrad mode, double mu, double sigma, double h1_weight, long mean_over = 0);
  // Parameter gradients += dL/dθ of the last forward.
  void backward(const HeatSurrogate<T>& model, const ParameterBuffer<T>& params);
  // Step j's (0-based) prediction of the last forward, normalised [B·P].
  View1<const T> prediction(long j) const { return pred_.at(std::size_t(j)); }
  // ℓ of each step of the last forward (mean over the shard's samples, divided as the loss is; Last: the earlier
  // steps' values are evaluated too, for reporting, and carry no gradient).
  const std::vector<double>& step_losses() const { return step_loss_; }

 private:
  std::vector<SurrogateCache<T>> caches_;
  std::vector<View1<T>> pred_, dpred_;
  View1<T> g_, dsum_;
  std::vector<double> step_loss_;
  long steps_ = 0, tokens_ = 0;
  UnrollGrad mode_ = UnrollGrad::Full;
};

extern template class Unroller<float>;
extern template class Unroller<double>;

}  // namespace attnphys::training
