#pragma once
// Central finite-difference checks for the operator tests (double precision, tiny shapes).
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "attnphys/core/random.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::test {

// ||analytic - fd|| / ||fd|| over the coordinates in `which` (all when empty), fd from loss(theta ± h e_i).
inline double fd_relative_error(std::vector<double> theta, const std::vector<double>& analytic,
                                const std::function<double(const std::vector<double>&)>& loss,
                                std::vector<long> which = {}, double h = 1e-5) {
  if (which.empty())
    for (long i = 0; i < long(theta.size()); ++i) which.push_back(i);
  double num = 0, den = 0;
  for (long i : which) {
    const double t0 = theta[i];
    theta[i] = t0 + h;
    const double lp = loss(theta);
    theta[i] = t0 - h;
    const double lm = loss(theta);
    theta[i] = t0;
    const double fd = (lp - lm) / (2 * h);
    num += (analytic[i] - fd) * (analytic[i] - fd);
    den += fd * fd;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A deterministic N(0, s²) host vector.
inline std::vector<double> randn(long n, std::uint64_t seed, double s = 1.0) {
  std::vector<double> v(n);
  for (long i = 0; i < n; ++i) {
    CounterRng r(seed, 7, 2 * i);
    v[i] = s * r.normal();
  }
  return v;
}

template <class T>
View2<T> to_device(const std::vector<T>& v, long rows, long cols) {
  View2<T> d("test", rows, cols);
  Kokkos::deep_copy(d, HostView2<const T>(v.data(), rows, cols));
  return d;
}

template <class V>
std::vector<double> to_vector(const V& v) {
  auto h = to_host(v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace attnphys::test
