#pragma once
// Complex log cosh and tanh on real/imaginary pairs, usable in device kernels (the readouts of the RBM and of the
// transformer ansatz).
#include "attnphys/core/views.hpp"

namespace attnphys::vmc::detail {

#if KOKKOS_VERSION >= 30700
using Kokkos::atan2;
#else
using Kokkos::Experimental::atan2;
#endif

// log cosh(x + iy) without overflow or cancellation: |cosh z|² = sinh²x + cos²y (two non-negative terms, accurate
// next to the zeros of cosh), and with e = e^{−2|x|}, 4 e^{−2|x|} |cosh z|² = (1 − e)² + 4 e cos²y, so
// Re = |x| − log 2 + ½ log((1 − e)² + 4 e cos²y) with 1 − e = −expm1(−2|x|); arg cosh z = atan2(tanh x · sin y, cos y).
KOKKOS_INLINE_FUNCTION void log_cosh(double x, double y, double& re, double& im) {
  const double ax = math::abs(x), em = math::expm1(-2 * ax), e = 1 + em, c = math::cos(y);
  re = ax - 0.6931471805599453 + 0.5 * math::log(em * em + 4 * e * c * c);
  im = atan2(math::tanh(x) * math::sin(y), c);
}
// Σ_k log cosh(x_k + i y_k) over the units of a readout: add(x, y) per unit, then finish(re, im). One expm1 and one
// sin/cos pair per unit, one log and one atan2 per sum (log_cosh per unit takes five calls):
//   Re: Σ |x_k| − K log 2 + ½ log Π_k f_k,  f_k = (1 − e_k)² + 4 e_k cos²y_k ∈ [(1−e_k)², (1+e_k)²], e_k = e^{−2|x_k|};
//   Im: arg Π_k (cos y_k + i tanh x_k sin y_k), the sum of the units' phases reduced to (−π, π] (a different branch
//   of the same log ψ: exp(log ψ) and every derivative are unchanged).
// Both products are rescaled when they leave [1e−200, 1e200], so any number of units neither under- nor overflows.
struct LogCoshSum {
  double lin = 0, prod = 1, pr = 1, pi = 0;
  KOKKOS_INLINE_FUNCTION void add(double x, double y) {
    const double ax = math::abs(x), em = math::expm1(-2 * ax), e = 1 + em;
    const double s = math::sin(y), c = math::cos(y);
    lin += ax - 0.6931471805599453;
    prod *= em * em + 4 * e * c * c;
    const double th = (x < 0 ? em : -em) / (2 + em);  // tanh x
    const double qi = th * s, r = pr * c - pi * qi;
    pi = pr * qi + pi * c;
    pr = r;
    if (!(prod > 1e-200 && prod < 1e200)) {
      lin += 0.5 * math::log(prod);
      prod = 1;
    }
    if (math::abs(pr) + math::abs(pi) < 1e-200) {
      pr *= 1e200;
      pi *= 1e200;
    }
  }
  KOKKOS_INLINE_FUNCTION void finish(double& re, double& im) const {
    re = lin + 0.5 * math::log(prod);
    im = atan2(pi, pr);
  }
};

// tanh(x + iy) = (sinh 2x + i sin 2y)/(cosh 2x + cos 2y), divided through by cosh 2x.
KOKKOS_INLINE_FUNCTION void tanh_c(double x, double y, double& re, double& im) {
  const double e2 = math::exp(-2 * math::abs(x)), sech2 = 2 * e2 / (1 + e2 * e2);
  const double d = 1 + math::cos(2 * y) * sech2;
  re = math::tanh(2 * x) / d;
  im = math::sin(2 * y) * sech2 / d;
}

}  // namespace attnphys::vmc::detail
