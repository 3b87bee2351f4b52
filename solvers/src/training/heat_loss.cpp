#include "heat_loss.hpp"

#include <cmath>

namespace attnphys::training {

namespace detail_loss {
struct Sums {
  double e2 = 0, t2 = 0, ge2 = 0, gt2 = 0;
  KOKKOS_INLINE_FUNCTION Sums& operator+=(const Sums& o) {
    e2 += o.e2, t2 += o.t2, ge2 += o.ge2, gt2 += o.gt2;
    return *this;
  }
};
}  // namespace detail_loss
}  // namespace attnphys::training

namespace Kokkos {  // identity for the team reduction of Sums
template <>
struct reduction_identity<attnphys::training::detail_loss::Sums> {
  KOKKOS_FORCEINLINE_FUNCTION static attnphys::training::detail_loss::Sums sum() { return {}; }
};
}  // namespace Kokkos

namespace attnphys::training {

template <class T>
double relative_loss(const Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>& dout,
                     const Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace>& pred,
                     const Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace>& target, long batch, long points,
                     long nx, long ny, int dim, double mu, double sigma, double h1_weight, long mean_over) {
  using detail_loss::Sums;
  View1<double> loss("attnphys::loss", batch);
  const bool h1 = h1_weight > 0;
  const double denom = double(mean_over > 0 ? mean_over : batch), inv_b = 1.0 / denom;
  const long nxy = nx * ny, nz = dim > 2 ? points / nxy : 1;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "attnphys::relative_loss", Policy(batch, Kokkos::AUTO), KOKKOS_LAMBDA(const Policy::member_type& m) {
        const long b = m.league_rank(), off = b * points;
        auto err = [&](long p) { return sigma * (double(pred(off + p)) - double(target(off + p))); };
        auto tru = [&](long p) { return sigma * double(target(off + p)) + mu; };
        Sums s;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, points),
            [&](long p, Sums& acc) {
              const double e = err(p), t = tru(p);
              acc.e2 += e * e;
              acc.t2 += t * t;
              if (h1) {
                const long x = p % nx, y = (p / nx) % ny, z = p / nxy;
                if (x + 1 < nx) {
                  const double de = err(p + 1) - e, dt = tru(p + 1) - t;
                  acc.ge2 += de * de, acc.gt2 += dt * dt;
                }
                if (dim > 1 && y + 1 < ny) {
                  const double de = err(p + nx) - e, dt = tru(p + nx) - t;
                  acc.ge2 += de * de, acc.gt2 += dt * dt;
                }
                if (dim > 2 && z + 1 < nz) {
                  const double de = err(p + nxy) - e, dt = tru(p + nxy) - t;
                  acc.ge2 += de * de, acc.gt2 += dt * dt;
                }
              }
            },
            Kokkos::Sum<Sums>(s));
        const double ne = math::sqrt(s.e2), nt = math::sqrt(s.t2) + 1e-30;
        const double ge = math::sqrt(s.ge2), gt = math::sqrt(s.gt2) + 1e-30;
        Kokkos::single(Kokkos::PerTeam(m), [&]() { loss(b) = ne / nt + (h1 ? h1_weight * ge / gt : 0.0); });
        // ∂ℓ/∂p = e/(‖e‖‖t‖) (+ w (−Δ_h e)/(‖∇e‖‖∇t‖)); times σ for ŷ and 1/B for the mean.
        const double c_l2 = ne > 0 ? 1.0 / (ne * nt) : 0.0;
        const double c_h1 = (h1 && ge > 0) ? h1_weight / (ge * gt) : 0.0;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, points), [&](long p) {
          const double e = err(p);
          double g = c_l2 * e;
          if (h1) {
            const long x = p % nx, y = (p / nx) % ny, z = p / nxy;
            double lap = 0;  // Σ over edges touching p of (e_p − e_neighbour)
            if (x + 1 < nx) lap += e - err(p + 1);
            if (x > 0) lap += e - err(p - 1);
            if (dim > 1 && y + 1 < ny) lap += e - err(p + nx);
            if (dim > 1 && y > 0) lap += e - err(p - nx);
            if (dim > 2 && z + 1 < nz) lap += e - err(p + nxy);
            if (dim > 2 && z > 0) lap += e - err(p - nxy);
            g += c_h1 * lap;
          }
          dout(off + p) = T(g * sigma * inv_b);
        });
      });
  double total = 0;
  Kokkos::parallel_reduce(
      "attnphys::loss_sum", Kokkos::RangePolicy<ExecSpace>(0, batch),
      KOKKOS_LAMBDA(long b, double& acc) { acc += loss(b); }, total);
  return total / denom;
}

template double relative_loss<float>(const Kokkos::View<float*, Kokkos::LayoutRight, MemSpace>&,
                                     const Kokkos::View<const float*, Kokkos::LayoutRight, MemSpace>&,
                                     const Kokkos::View<const float*, Kokkos::LayoutRight, MemSpace>&, long, long,
                                     long, long, int, double, double, double, long);
template double relative_loss<double>(const Kokkos::View<double*, Kokkos::LayoutRight, MemSpace>&,
                                      const Kokkos::View<const double*, Kokkos::LayoutRight, MemSpace>&,
                                      const Kokkos::View<const double*, Kokkos::LayoutRight, MemSpace>&, long, long,
                                      long, long, int, double, double, double, long);

}  // namespace attnphys::training
