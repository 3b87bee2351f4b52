#include "attnphys/operators/positional.hpp"

namespace attnphys::ops {

template <class T>
void sinusoidal_forward(const Mat<T>& x, long batch, long len) {
  ScopedRegion region("attnphys::sinusoidal_forward");
  const long d = x.extent(1);
  require(long(x.extent(0)) == batch * len, "sinusoidal encoding: x has ", x.extent(0), " rows, expected ",
          batch * len);
  Kokkos::parallel_for(
      "attnphys::sinusoidal_forward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {batch * len, d}),
      KOKKOS_LAMBDA(long t, long f) {
        const double pos = double(t % len);
        const double freq = math::exp(-double(2 * (f / 2)) / double(d) * 9.210340371976184);  // ln(10000)
        x(t, f) += T(f % 2 == 0 ? math::sin(pos * freq) : math::cos(pos * freq));
      });
}

template <class T>
void broadcast_add_forward(const Mat<T>& x, const ConstMat<T>& table, long batch, long len) {
  const long d = x.extent(1);
  require(long(table.extent(0)) >= len && table.extent(1) == x.extent(1), "positional table is ", table.extent(0),
          "x", table.extent(1), ", need at least ", len, "x", d);
  Kokkos::parallel_for(
      "attnphys::broadcast_add_forward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {batch * len, d}),
      KOKKOS_LAMBDA(long t, long f) { x(t, f) += table(t % len, f); });
}

template <class T>
void broadcast_add_backward(const Mat<T>& dtable, const ConstMat<T>& dx, long batch, long len) {
  const long d = dx.extent(1);
  Kokkos::parallel_for(
      "attnphys::broadcast_add_backward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {len, d}),
      KOKKOS_LAMBDA(long n, long f) {
        T s = 0;
        for (long b = 0; b < batch; ++b) s += dx(b * len + n, f);
        dtable(n, f) += s;
      });
}

template <class T>
void fourier_features(const Mat<T>& phi, const ConstMat<T>& coords, const ConstMat<T>& freqs) {
  const long m = freqs.extent(0), c = freqs.extent(1), rows = coords.extent(0);
  require(long(coords.extent(1)) == c && long(phi.extent(0)) == rows && long(phi.extent(1)) == 2 * m,
          "fourier_features: coords are ", coords.extent(0), "x", coords.extent(1), ", frequencies ", m, "x", c);
  Kokkos::parallel_for(
      "attnphys::fourier_features", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {rows, m}),
      KOKKOS_LAMBDA(long t, long k) {
        T s = 0;
        for (long a = 0; a < c; ++a) s += freqs(k, a) * coords(t, a);
        s *= T(6.283185307179586);
        phi(t, k) = math::cos(s);
        phi(t, m + k) = math::sin(s);
      });
}

#define ATTNPHYS_INSTANTIATE_POSITIONAL(T)                                                       \
  template void sinusoidal_forward<T>(const Mat<T>&, long, long);                                \
  template void broadcast_add_forward<T>(const Mat<T>&, const ConstMat<T>&, long, long);         \
  template void broadcast_add_backward<T>(const Mat<T>&, const ConstMat<T>&, long, long);        \
  template void fourier_features<T>(const Mat<T>&, const ConstMat<T>&, const ConstMat<T>&);

ATTNPHYS_INSTANTIATE_POSITIONAL(float)
ATTNPHYS_INSTANTIATE_POSITIONAL(double)

}  // namespace attnphys::ops
