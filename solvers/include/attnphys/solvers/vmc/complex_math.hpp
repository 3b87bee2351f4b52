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

// log cosh(x + iy) without overflow: |cosh z|² = (cosh 2x + cos 2y)/2 = e^{2|x|}/4 · (1 + e^{−4|x|} + 2 cos 2y e^{−2|x|}),
// arg cosh z = atan2(tanh x · sin y, cos y).
KOKKOS_INLINE_FUNCTION void log_cosh(double x, double y, double& re, double& im) {
  const double ax = math::abs(x), e2 = math::exp(-2 * ax);
  re = ax - 0.6931471805599453 + 0.5 * math::log1p(e2 * e2 + 2 * math::cos(2 * y) * e2);
  im = atan2(math::tanh(x) * math::sin(y), math::cos(y));
}
// tanh(x + iy) = (sinh 2x + i sin 2y)/(cosh 2x + cos 2y), divided through by cosh 2x.
KOKKOS_INLINE_FUNCTION void tanh_c(double x, double y, double& re, double& im) {
  const double e2 = math::exp(-2 * math::abs(x)), sech2 = 2 * e2 / (1 + e2 * e2);
  const double d = 1 + math::cos(2 * y) * sech2;
  re = math::tanh(2 * x) / d;
  im = math::sin(2 * y) * sech2 / d;
}

}  // namespace attnphys::vmc::detail
