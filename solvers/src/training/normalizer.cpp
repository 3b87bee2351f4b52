#include "attnphys/solvers/training/normalizer.hpp"

#include <cmath>

#include "attnphys/core/error.hpp"

namespace attnphys::training {

double RunningStats::stddev() const { return std::sqrt(variance()); }

Normalizer::Normalizer(RunningStats s, double min_std) : stats_(s) { finalize(min_std); }

void Normalizer::update(const double* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    require(std::isfinite(x[i]), "normaliser: non-finite value ", x[i], " at index ", i,
            " in the training data; check the dataset");
    stats_.add(x[i]);
  }
}

void Normalizer::finalize(double min_std) {
  require(stats_.count > 0, "normaliser has seen no data: the training set is empty");
  mean_ = stats_.mean;
  std_ = std::max(stats_.stddev(), min_std);
}

}  // namespace attnphys::training
