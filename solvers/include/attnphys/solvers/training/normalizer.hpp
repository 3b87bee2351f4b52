#pragma once
// Per-channel normalisation statistics accumulated with Welford's algorithm and merged with Chan et al.'s
// parallel formula (across batches and MPI ranks). E[x²]−E[x]² is never formed: for fields with a large mean
// (a temperature of 300 K ± 0.01) it cancels catastrophically and gives a negative or NaN variance.
#include <cstdint>
#include <string>
#include <vector>

#include "attnphys/core/views.hpp"

namespace attnphys::training {

struct RunningStats {
  double count = 0;
  double mean = 0;
  double m2 = 0;  // Σ (x − mean)²

  void add(double x) {
    count += 1;
    const double d = x - mean;
    mean += d / count;
    m2 += d * (x - mean);
  }
  // Merges another set of statistics (Chan, Golub & LeVeque 1979).
  void merge(const RunningStats& o) {
    if (o.count == 0) return;
    if (count == 0) {
      *this = o;
      return;
    }
    const double n = count + o.count, d = o.mean - mean;
    mean += d * o.count / n;
    m2 += o.m2 + d * d * count * o.count / n;
    count = n;
  }
  double variance() const { return count > 1 ? m2 / count : 0.0; }  // population variance
  double stddev() const;
};

// Normalises x → (x − mean)/std with statistics taken from training data; std is floored so a constant field
// does not divide by zero.
class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(RunningStats s, double min_std = 1e-8);
  void update(const double* x, std::size_t n);  // accumulate more data
  void finalize(double min_std = 1e-8);         // freeze mean/std from the accumulated statistics
  double mean() const { return mean_; }
  double stddev() const { return std_; }
  const RunningStats& stats() const { return stats_; }
  RunningStats& stats() { return stats_; }

  template <class V>
  void normalize(const V& v) const;  // in place, any contiguous view
  template <class V>
  void denormalize(const V& v) const;

 private:
  RunningStats stats_;
  double mean_ = 0, std_ = 1;
};

template <class V>
void Normalizer::normalize(const V& v) const {
  using T = typename V::non_const_value_type;
  const T m = T(mean_), inv = T(1.0 / std_);
  auto* p = v.data();
  Kokkos::parallel_for("attnphys::normalize", Kokkos::RangePolicy<typename V::execution_space>(0, v.span()),
                       KOKKOS_LAMBDA(std::size_t i) { p[i] = (p[i] - m) * inv; });
}

template <class V>
void Normalizer::denormalize(const V& v) const {
  using T = typename V::non_const_value_type;
  const T m = T(mean_), s = T(std_);
  auto* p = v.data();
  Kokkos::parallel_for("attnphys::denormalize", Kokkos::RangePolicy<typename V::execution_space>(0, v.span()),
                       KOKKOS_LAMBDA(std::size_t i) { p[i] = p[i] * s + m; });
}

}  // namespace attnphys::training
