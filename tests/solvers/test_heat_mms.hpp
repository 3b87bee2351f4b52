#pragma once
// Manufactured solutions for the heat tests: u = T(t) Π_a φ_a(x_a) with κ = Π_a k_a(x_a) (or a constant), on the
// unit box. φ and k are products of exponentials and trigonometric functions (periodic ones along periodic axes),
// T(t) = e^{-t}(1 + ½ sin 4t); the source f = u_t - ∇·(κ∇u) and the boundary data are computed analytically.
#include <array>
#include <cmath>
#include <vector>

#include "attnphys/physics/heat/heat_problem.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"

namespace attnphys::heat_test {

using heat::BcType;

struct Mms {
  int dim = 1;
  std::array<std::array<BcType, 2>, 3> bc{};  // per axis and side
  bool variable_kappa = false;
  double kappa_const = 0.8;

  bool periodic(int a) const { return bc[a][0] == BcType::Periodic; }
  // φ_a and its derivatives.
  double phi(int a, double x, int d) const {
    const double w = 2 * M_PI;
    if (periodic(a)) {
      const double s = std::sin(w * x), c = std::cos(w * x), e = std::exp(0.6 * s);
      if (d == 0) return e;
      if (d == 1) return e * 0.6 * w * c;
      return e * (0.36 * w * w * c * c - 0.6 * w * w * s);
    }
    const double e = std::exp(0.7 * x), c = std::cos(2 * x + 0.4 + a), s = std::sin(2 * x + 0.4 + a);
    if (d == 0) return e * c;
    if (d == 1) return e * (0.7 * c - 2 * s);
    return e * (-3.51 * c - 2.8 * s);
  }
  double kfac(int a, double x, int d) const {
    if (!variable_kappa) return d == 0 ? (a == 0 ? kappa_const : 1.0) : 0.0;
    const double w = periodic(a) ? 2 * M_PI : 3.0;
    if (d == 0) return 1.0 + 0.4 * std::sin(w * x + 0.3);
    return 0.4 * w * std::cos(w * x + 0.3);
  }
  double T(double t, int d) const {
    const double e = std::exp(-t);
    if (d == 0) return e * (1 + 0.5 * std::sin(4 * t));
    return -e * (1 + 0.5 * std::sin(4 * t)) + e * 2 * std::cos(4 * t);
  }
  double prod_phi(const double* p, int skip, int dskip) const {
    double v = 1.0;
    for (int a = 0; a < dim; ++a) v *= phi(a, p[a], a == skip ? dskip : 0);
    return v;
  }
  double prod_k(const double* p, int skip, int dskip) const {
    double v = 1.0;
    for (int a = 0; a < dim; ++a) v *= kfac(a, p[a], a == skip ? dskip : 0);
    return v;
  }
  double u(double x, double y, double z, double t) const {
    const double p[3] = {x, y, z};
    return T(t, 0) * prod_phi(p, -1, 0);
  }
  double kappa(double x, double y, double z) const {
    const double p[3] = {x, y, z};
    return prod_k(p, -1, 0);
  }
  // κ ∂u/∂x_a
  double flux(int a, const double* p, double t) const { return prod_k(p, -1, 0) * T(t, 0) * prod_phi(p, a, 1); }
  double source(double x, double y, double z, double t) const {
    const double p[3] = {x, y, z};
    double div = 0.0;
    for (int a = 0; a < dim; ++a)
      div += prod_k(p, a, 1) * prod_phi(p, a, 1) + prod_k(p, -1, 0) * prod_phi(p, a, 2);
    return T(t, 1) * prod_phi(p, -1, 0) - T(t, 0) * div;
  }

  // The problem on n cells per axis of the unit box.
  heat::HeatProblem problem(long n) const {
    heat::HeatProblem pr;
    pr.grid = heat::Grid::make(dim, {n, n, n}, {1.0 / n, 1.0 / n, 1.0 / n});
    pr.kappa = kappa_const;
    for (int a = 0; a < dim; ++a)
      for (int s = 0; s < 2; ++s) {
        const BcType t = bc[a][s];
        if (t == BcType::Periodic) {
          pr.bc[a][s] = heat::BoundaryCondition::periodic();
        } else if (t == BcType::Dirichlet) {
          pr.bc[a][s] = heat::BoundaryCondition::dirichlet(
              [this](double x, double y, double z, double tt) { return u(x, y, z, tt); });
        } else {
          pr.bc[a][s] = heat::BoundaryCondition::neumann([this, a, s](double x, double y, double z, double tt) {
            const double p[3] = {x, y, z};
            return (s == 0 ? -1.0 : 1.0) * flux(a, p, tt);  // outward normal
          });
        }
      }
    pr.source = [this](double x, double y, double z, double t) { return source(x, y, z, t); };
    if (variable_kappa) {
      const auto e = pr.spatial_extents();
      HostView3<double> kh("k", e[0], e[1], e[2]);
      for (long k = 0; k < e[0]; ++k)
        for (long j = 0; j < e[1]; ++j)
          for (long i = 0; i < e[2]; ++i)
            kh(k, j, i) = kappa(pr.coord(0, i), dim >= 2 ? pr.coord(1, j) : 0.0, dim >= 3 ? pr.coord(2, k) : 0.0);
      pr.kappa_field = View3<double>("kappa", e[0], e[1], e[2]);
      Kokkos::deep_copy(pr.kappa_field, kh);
    }
    return pr;
  }
  // The exact solution at time t as a (1-sample) state.
  View3<double> exact(const heat::HeatProblem& pr, double t) const {
    const auto e = pr.spatial_extents();
    HostView3<double> h("u", e[0], e[1], e[2]);
    for (long k = 0; k < e[0]; ++k)
      for (long j = 0; j < e[1]; ++j)
        for (long i = 0; i < e[2]; ++i)
          h(k, j, i) = u(pr.coord(0, i), dim >= 2 ? pr.coord(1, j) : 0.0, dim >= 3 ? pr.coord(2, k) : 0.0, t);
    View3<double> d("u", e[0], e[1], e[2]);
    Kokkos::deep_copy(d, h);
    return d;
  }
};

inline Mms mms(int dim, BcType all, bool variable_kappa) {
  Mms m;
  m.dim = dim;
  m.variable_kappa = variable_kappa;
  for (auto& a : m.bc) a = {all, all};
  return m;
}

// Root-mean-square difference of two states.
inline double rms_diff(const View3<double>& a, const View3<double>& b) {
  auto ha = to_host(a), hb = to_host(b);
  double s = 0.0;
  for (std::size_t i = 0; i < ha.size(); ++i) s += std::pow(ha.data()[i] - hb.data()[i], 2);
  return std::sqrt(s / ha.size());
}

// Error at t_end against the exact solution, for n cells per axis and a step dt(n).
template <class DtFn>
double mms_error(const Mms& m, long n, double t_end, fd::Method method, DtFn dt_of) {
  auto pr = m.problem(n);
  fd::HeatSolveOptions o;
  o.method = method;
  fd::HeatStepper probe(pr, method);
  o.dt = dt_of(pr, probe.ftcs_limit());
  auto sol = fd::solve(pr, m.exact(pr, 0.0), t_end, o);
  return rms_diff(sol.u, m.exact(pr, t_end));
}

// Difference between solutions with steps dt and dt/2 on one grid (time error alone).
inline double time_self_diff(const Mms& m, long n, double t_end, fd::Method method, double dt) {
  auto pr = m.problem(n);
  fd::HeatSolveOptions o;
  o.method = method;
  o.dt = dt;
  auto a = fd::solve(pr, m.exact(pr, 0.0), t_end, o);
  o.dt = dt / 2;
  auto b = fd::solve(pr, m.exact(pr, 0.0), t_end, o);
  return rms_diff(a.u, b.u);
}

}  // namespace attnphys::heat_test
