#pragma once
// Time stepping for the heat problem (physics/heat/heat_problem.hpp) on the device.
//
//   ftcs — forward Euler on the finite-volume operator: first order in time, second in space. A step above
//          HeatOperator::ftcs_limit() is refused (the message gives the limit) unless substep is set, in which
//          case it is split into equal stable sub-steps.
//   cn   — Crank–Nicolson, 1D only: one batched tridiagonal solve per step; second order in time and space.
//   adi  — 1D: Crank–Nicolson. 2D: Peaceman–Rachford (an x-implicit then a y-implicit half step; the x boundary
//          data and the source at the mid-point, the y boundary data at the level of the y-operator's argument). 3D: Douglas with θ = 1/2 (an explicit predictor, then x-, y- and z-implicit corrections).
//          Second order in time and space; unconditionally stable.
// Every implicit stage is a batch of independent tridiagonal line solves run in parallel (one line per thread,
// factorised once per step size).
//
// States are View3 (n0, n1, nx) with x contiguous: (batch, 1, nx) in 1D, (batch, ny, nx) in 2D, (nz, ny, nx) in
// 3D. A batch of samples shares the problem (κ, boundaries, source) and is advanced together; each sample's
// numbers do not depend on the batch it is in.
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/solvers/fd/heat_operator.hpp"

namespace attnphys::fd {

enum class Method { Ftcs, CrankNicolson, Adi };
}  // namespace attnphys::fd

namespace attnphys {
template <>
struct EnumNames<fd::Method> {
  static constexpr EnumName<fd::Method> values[] = {
      {fd::Method::Ftcs, "ftcs"}, {fd::Method::CrankNicolson, "cn"}, {fd::Method::Adi, "adi"}};
};
}  // namespace attnphys

namespace attnphys::fd {

Method parse_method(const std::string& name);  // the names above; anything else is refused with them
std::string to_string(Method m);

class HeatStepper {
 public:
  HeatStepper(const heat::HeatProblem& problem, Method method, bool substep = false);

  const HeatOperator& op() const { return op_; }
  Method method() const { return method_; }
  double ftcs_limit() const { return op_.ftcs_limit(); }
  // Replaces κ (HeatOperator::set_kappa_field); the nonlinear stepper calls it once per Picard iterate.
  void set_kappa_field(const View3<double>& kappa_cell) { op_.set_kappa_field(kappa_cell); }

  // A zero state for `batch` samples (batch must be 1 in 3D).
  View3<double> make_state(long batch = 1) const;
  // Refuses a state whose shape does not fit the grid, naming both shapes.
  void check_state(const View3<double>& u) const;

  // One step from t to t + dt, in place.
  void step(const View3<double>& u, double t, double dt);
  // From t0 to t1 in the fewest equal steps not longer than dt_max; returns the number of steps taken.
  long advance(const View3<double>& u, double t0, double t1, double dt_max);

 private:
  HeatOperator op_;
  Method method_;
  bool substep_;
  View3<double> tmp_, G_;
  void ensure_work(const View3<double>& u);
  void ftcs_step(const View3<double>& in, const View3<double>& out, double t, double dt);
};

// A step for which the time error stays below the space error. FTCS: a quarter of its limit. CN/ADI: the
// step at which the Crank–Nicolson error of the data's dominant wavenumber k (from the Rayleigh quotient
// |∇u0|²/|u0 - mean|²) equals the spatial error, dt = h_min/(2 κ_max k), at least the FTCS limit; at most t_end.
double auto_dt(const HeatStepper& stepper, const View3<double>& u0, double t_end);

struct HeatSolveOptions {
  Method method = Method::Adi;
  double dt = 0.0;                  // 0: auto_dt
  bool substep = false;             // FTCS: split too-large steps instead of refusing them
  std::vector<double> snapshot_times;  // increasing, within [0, t_end]
};

struct HeatSolution {
  View3<double> u;                       // the state at t_end
  std::vector<double> times;             // snapshot times
  std::vector<View3<double>> snapshots;  // one state per snapshot time
  long steps = 0;
  double dt = 0.0;                       // the step asked for (steps may be shortened to land on the times)
};

// The snapshot loop of fd::solve and solve_nonlinear: a copy of u0 advanced through the increasing snapshot times
// (within [0, t_end]) and on to t_end by advance(u, t0, t1) (returns the steps taken); dt is recorded as asked.
template <class Advance>
HeatSolution solve_with_snapshots(const View3<double>& u0, double t_end, double dt, const std::vector<double>& times,
                                  Advance&& advance) {
  HeatSolution sol;
  sol.u = View3<double>("attnphys::heat_solution", u0.extent(0), u0.extent(1), u0.extent(2));
  Kokkos::deep_copy(sol.u, u0);
  sol.dt = dt;
  double t = 0.0;
  for (std::size_t s = 0; s < times.size(); ++s) {
    const double ts = times[s];
    require(ts >= t && ts <= t_end, "snapshot times must be increasing and within [0, t_end = ", t_end, "], got ",
            ts, s ? msg(" after ", times[s - 1]) : std::string());
    if (ts > t) sol.steps += advance(sol.u, t, ts);
    t = ts;
    View3<double> snap("attnphys::heat_snapshot", u0.extent(0), u0.extent(1), u0.extent(2));
    Kokkos::deep_copy(snap, sol.u);
    sol.times.push_back(ts);
    sol.snapshots.push_back(snap);
  }
  if (t_end > t) sol.steps += advance(sol.u, t, t_end);
  return sol;
}

// Advances u0 (not modified) from t = 0 to t_end.
HeatSolution solve(const heat::HeatProblem& problem, const View3<double>& u0, double t_end,
                   const HeatSolveOptions& options = {});

// The solver section of configuration files and --set (attnphys heat solve / dataset).
struct HeatSolverOptions {
  Method method = Method::Adi;  // parsed where the option is read (ftcs | cn | adi)
  double dt = 0.0;
  bool substep = false;
  void declare(OptionSet& set, const std::string& section = "solver");
  HeatSolveOptions to_solve_options() const;
};

}  // namespace attnphys::fd
