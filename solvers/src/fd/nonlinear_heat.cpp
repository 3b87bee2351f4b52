#include "attnphys/solvers/fd/nonlinear_heat.hpp"

#include <algorithm>
#include <cmath>

namespace attnphys::fd {

namespace {

// The linear problem underneath: the same grid, boundaries and source, κ constant until the first iterate sets it.
heat::HeatProblem linear_problem(const heat::HeatProblem& problem, const heat::KappaLaw& law) {
  law.validate();
  heat::HeatProblem p = problem;
  p.kappa_field = View3<double>();
  p.kappa = law(0.0);
  return p;
}

// max |a - b| (b may be empty: max |a|).
double max_abs_diff(const View3<double>& a, const View3<double>& b) {
  const double* x = a.data();
  const double* y = b.size() ? b.data() : nullptr;
  double m = 0.0;
  Kokkos::parallel_reduce(
      "attnphys::nonlinear_heat_change", Kokkos::RangePolicy<ExecSpace>(0, long(a.size())),
      KOKKOS_LAMBDA(const long i, double& w) {
        const double d = math::abs(y ? x[i] - y[i] : x[i]);
        if (!(d <= w)) w = d;  // NaN wins
      },
      Kokkos::Max<double>(m));
  return m;
}

// kap = κ((un + uk)/2) cell by cell; returns the number of cells where it is NaN, infinite or not positive. A free
// function, not part of the private NonlinearHeatStepper::step_sample: nvcc rejects a KOKKOS_LAMBDA in a private
// member function.
long kappa_mid(const heat::KappaFn& f, const double* un, const double* uk, double* kap, long cells) {
  long bad = 0;
  Kokkos::parallel_reduce(
      "attnphys::nonlinear_heat_kappa_mid", Kokkos::RangePolicy<ExecSpace>(0, cells),
      KOKKOS_LAMBDA(const long i, long& nb) {
        const double v = f(0.5 * (un[i] + uk[i]));
        kap[i] = v;
        if (!(math::isfinite(v) && v > 0.0)) ++nb;
      },
      bad);
  return bad;
}

}  // namespace

void NonlinearOptions::validate() const {
  require(picard_max >= 1, "nonlinear.picard_max must be at least 1 (1: lagged kappa, 2: one Picard correction), got ",
          picard_max);
  require(std::isfinite(tol) && tol >= 0, "nonlinear.tol must be finite and >= 0 (0: always picard_max iterates), got ",
          tol);
  require(max_halvings >= 0, "nonlinear.max_halvings must be >= 0, got ", max_halvings);
}

NonlinearHeatStepper::NonlinearHeatStepper(const heat::HeatProblem& problem, const heat::KappaLaw& law,
                                           NonlinearOptions opts)
    : linear_(linear_problem(problem, law), Method::Adi), law_(law), kfn_(law.device()), opts_(opts) {
  opts_.validate();
  const auto e = linear_.op().spatial();
  un_ = View3<double>("attnphys::nonlinear_heat_un", e[0], e[1], e[2]);
  wa_ = View3<double>("attnphys::nonlinear_heat_iterate", e[0], e[1], e[2]);
  wb_ = View3<double>("attnphys::nonlinear_heat_iterate", e[0], e[1], e[2]);
  kappa_ = View3<double>("attnphys::nonlinear_heat_kappa", e[0], e[1], e[2]);
}

View3<double> NonlinearHeatStepper::sample_view(const View3<double>& u, long b) const {
  if (linear_.op().dim() == 3) return u;
  const long ny = u.extent(1), nx = u.extent(2);
  return View3<double>(u.data() + b * ny * nx, 1, ny, nx);  // unmanaged: the sample's memory in u
}

void NonlinearHeatStepper::kappa_of(const View3<double>& u, const View3<double>& kappa, long sample) const {
  check_state(u);
  const auto e = linear_.op().spatial();
  require(long(kappa.extent(0)) == e[0] && long(kappa.extent(1)) == e[1] && long(kappa.extent(2)) == e[2],
          "kappa_of: the output has shape (", kappa.extent(0), ", ", kappa.extent(1), ", ", kappa.extent(2),
          "), the grid needs (", e[0], ", ", e[1], ", ", e[2], ")");
  const long samples = linear_.op().dim() == 3 ? 1 : long(u.extent(0));
  require(sample >= 0 && sample < samples, "kappa_of: sample ", sample, " is not in the state's ", samples);
  const auto ub = sample_view(u, sample);
  const auto f = kfn_;
  Kokkos::parallel_for(
      "attnphys::nonlinear_heat_kappa", Kokkos::RangePolicy<ExecSpace>(0, long(kappa.size())),
      KOKKOS_LAMBDA(const long i) { kappa.data()[i] = f(ub.data()[i]); });
}

void NonlinearHeatStepper::step_sample(const View3<double>& ub, long b, double t, double dt, int depth) {
  Kokkos::deep_copy(un_, ub);
  const double* un = un_.data();
  double* kap = kappa_.data();
  const auto f = kfn_;
  const long cells = long(un_.size());
  View3<double> prev = un_;  // u^(k)
  View3<double> bufs[2] = {wa_, wb_};
  int it = 0;
  bool converged = false;
  double change = 0.0;
  for (int k = 0; k < opts_.picard_max; ++k) {
    // κ at the mid-point (uⁿ + u^(k))/2 (κ(uⁿ) at k = 0), refusing NaN/inf states and non-positive κ.
    const double* uk = prev.data();
    const long bad = kappa_mid(f, un, uk, kap, cells);
    if (bad) {
      const long nan_u = heat::count_non_finite(un, cells);
      require(false, "nonlinear heat: kappa(u) is NaN, infinite or not positive in ", bad, " cell(s) of sample ", b,
              " at t = ", t, " (Picard iterate ", k, ", dt = ", dt, "): ",
              nan_u ? msg("the state holds ", nan_u, " NaN or infinite value(s); check the initial field, source "
                          "and boundary data")
                    : msg("the iterate diverged; take smaller steps"));
    }
    linear_.set_kappa_field(kappa_);
    View3<double> w = bufs[k & 1];
    Kokkos::deep_copy(w, un_);
    linear_.step(w, t, dt);
    ++it;
    if (opts_.tol > 0) {
      change = max_abs_diff(w, prev);
      const double scale = max_abs_diff(w, View3<double>());
      prev = w;
      if (change < opts_.tol * (1.0 + scale)) {
        converged = true;
        break;
      }
    } else {
      prev = w;
    }
  }
  stats_.linear_solves += it;
  stats_.max_iterations = std::max(stats_.max_iterations, it);
  stats_.last_change = change;
  if (opts_.tol > 0 && !converged) {
    require(depth < opts_.max_halvings, "nonlinear heat: the Picard iteration did not reach tol = ", opts_.tol,
            " in picard_max = ", opts_.picard_max, " iterates (last change ", change, ") for sample ", b, " at t = ",
            t, " even after halving the step ", opts_.max_halvings, " times (dt = ", dt,
            "): raise nonlinear.picard_max or nonlinear.max_halvings, loosen nonlinear.tol, or take smaller steps");
    ++stats_.halvings;
    step_sample(ub, b, t, 0.5 * dt, depth + 1);
    step_sample(ub, b, t + 0.5 * dt, 0.5 * dt, depth + 1);
    return;
  }
  Kokkos::deep_copy(ub, prev);
  ++stats_.steps;
}

void NonlinearHeatStepper::step(const View3<double>& u, double t, double dt) {
  require(dt > 0 && std::isfinite(dt), "time step must be positive and finite, got ", dt);
  check_state(u);
  ScopedRegion region("attnphys::nonlinear_heat_step");
  const long samples = linear_.op().dim() == 3 ? 1 : long(u.extent(0));
  for (long b = 0; b < samples; ++b) step_sample(sample_view(u, b), b, t, dt, 0);
}

long NonlinearHeatStepper::advance(const View3<double>& u, double t0, double t1, double dt_max) {
  require(dt_max > 0 && std::isfinite(dt_max), "time step must be positive and finite, got ", dt_max);
  if (!(t1 > t0)) return 0;
  check_state(u);
  ScopedRegion region("attnphys::nonlinear_heat_advance");
  const double steps = std::ceil((t1 - t0) / dt_max * (1 - 1e-12));
  require(steps <= 1e12, "advancing from t = ", t0, " to t = ", t1, " in steps of at most ", dt_max, " takes ", steps,
          " steps (more than 10^12): use a larger dt or a shorter time span");
  const long n = std::max(1L, static_cast<long>(steps));
  const double dt = (t1 - t0) / n;
  const long samples = linear_.op().dim() == 3 ? 1 : long(u.extent(0));
  for (long b = 0; b < samples; ++b) {
    const auto ub = sample_view(u, b);
    for (long s = 0; s < n; ++s) step_sample(ub, b, t0 + s * dt, dt, 0);
    const long bad = heat::count_non_finite(ub.data(), long(ub.size()));
    require(bad == 0, "nonlinear heat: sample ", b, " holds ", bad, " NaN or infinite value(s) at t = ", t1,
            "; check the source and boundary data");
  }
  return n;
}

double auto_dt(const NonlinearHeatStepper& stepper, const View3<double>& u0, double t_end) {
  stepper.check_state(u0);
  const double* x = u0.data();
  using MinMax = Kokkos::MinMax<double>;
  MinMax::value_type r;
  Kokkos::parallel_reduce(
      "attnphys::nonlinear_heat_range", Kokkos::RangePolicy<ExecSpace>(0, long(u0.size())),
      KOKKOS_LAMBDA(const long i, MinMax::value_type& v) {
        if (x[i] < v.min_val) v.min_val = x[i];
        if (x[i] > v.max_val) v.max_val = x[i];
      },
      MinMax(r));
  const double lo = r.min_val, hi = r.max_val;
  require(std::isfinite(lo) && std::isfinite(hi), "auto_dt: the initial state holds NaN or infinite values");
  heat::HeatProblem p = stepper.problem();
  p.kappa_field = View3<double>();
  p.kappa = stepper.law().max_over(lo, hi);
  return auto_dt(HeatStepper(p, Method::Adi), u0, t_end);
}

HeatSolution solve_nonlinear(const heat::HeatProblem& problem, const heat::KappaLaw& law, const View3<double>& u0,
                             double t_end, const NonlinearSolveOptions& options) {
  ScopedRegion region("attnphys::nonlinear_heat_solve");
  require(std::isfinite(t_end) && t_end >= 0, "t_end must be finite and non-negative, got ", t_end);
  require(options.dt >= 0 && std::isfinite(options.dt), "dt must be positive (or 0 for automatic), got ",
          options.dt);
  NonlinearHeatStepper stepper(problem, law, options.picard);
  stepper.check_state(u0);
  const long bad = heat::count_non_finite(u0.data(), long(u0.size()));
  require(bad == 0, "nonlinear heat: the initial state holds ", bad, " NaN or infinite value(s)");
  const double dt = options.dt > 0 ? options.dt : auto_dt(stepper, u0, t_end);
  return solve_with_snapshots(u0, t_end, dt, options.snapshot_times,
                              [&](const View3<double>& u, double t0, double t1) { return stepper.advance(u, t0, t1, dt); });
}

void NonlinearHeatOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".picard_max", &picard_max, "Picard iterates (linear steps) per step: 1 lagged kappa (first order), "
          "2 one correction (second order), more with tol", Range::at_least(1));
  set.add(s + ".tol", &tol, "0: always picard_max iterates; > 0: iterate until max|du| < tol (1 + max|u|), halving "
          "steps that do not get there", Range::non_negative());
  set.add(s + ".max_halvings", &max_halvings, "tol > 0: halvings of one step before it is refused",
          Range::non_negative());
}

NonlinearOptions NonlinearHeatOptions::build() const {
  NonlinearOptions o;
  o.picard_max = picard_max;
  o.tol = tol;
  o.max_halvings = max_halvings;
  o.validate();
  return o;
}

}  // namespace attnphys::fd
