#pragma once
// The finite-difference reference solver of the nonlinear heat equation
//
//   u_t = ∇·(κ(u) ∇u) + f(x, t),   κ(u) from a heat::KappaLaw (physics/heat/nonlinear.hpp),
//
// on the grids, boundaries and sources of the linear problem (physics/heat/heat_problem.hpp; the problem's kappa
// and kappa_field are ignored: κ comes from the law).
//
// Scheme (per step t → t + dt): Picard iterates k = 0, 1, ...: ū = (uⁿ + u⁽ᵏ⁾)/2 with u⁽⁰⁾ = uⁿ, κ_cell = κ(ū),
// and u⁽ᵏ⁺¹⁾ = one linear Crank–Nicolson (1D) / Peaceman–Rachford (2D) / Douglas (3D) step from uⁿ with the
// operator frozen at κ_cell (HeatStepper after HeatOperator::set_kappa_field). The first iterate is the lagged-κ
// (semi-implicit) step, first order in time; one correction (two iterates, the default) makes it second order, as
// the implicit mid-point rule: the face coefficients are those of κ at the step's mid-point to O(dt²). Each iterate
// is conservative (the flux form), so Σ u·h^d changes only through the source and the boundaries.
//
//   picard_max   — iterates (linear steps) per step, >= 1. 1: lagged κ only; 2: one correction.
//   tol = 0      — take exactly picard_max iterates (fixed cost; no convergence test). The default.
//   tol > 0      — stop as soon as max|u⁽ᵏ⁺¹⁾ - u⁽ᵏ⁾| < tol·(1 + max|u⁽ᵏ⁺¹⁾|). A step that has not met it after
//                  picard_max iterates is redone as two half steps (each again iterated to tol), up to
//                  max_halvings times in a row; beyond that the step is refused with a message naming t, dt and
//                  the last change.
//
// Stability: each iterate is a stable linear step, but ADI (2D, 3D) with κ re-frozen at every step is not
// unconditionally stable in the nonlinear problem: ADI is a contraction only in a norm that depends on the operator,
// so a κ that changes between steps can feed growth. Far above the explicit limit next to steep layers it diverges:
// in a 2D 64² test (zero Dirichlet sides beside u ≈ 1–3.8, κ0 = 0.5, β = 2, κ contrast 30) the lagged scheme
// (picard_max = 1) diverged at dt = 160× HeatOperator::ftcs_limit(), one correction at 370× (stable at 250×), while
// two corrections, or tol > 0 (which halves the diverging steps), stayed stable and accurate. 1D Crank–Nicolson is
// a contraction in the 2-norm for every κ and stays stable. Steps from auto_dt are a few times the explicit limit.
//
// States are the linear stepper's: (batch, 1, nx) in 1D, (batch, ny, nx) in 2D, (nz, ny, nx) in 3D (one sample).
// κ(u) differs per sample, so samples do not share coefficients: a batch is advanced one sample at a time (and
// with tol > 0 each sample takes its own halvings), each sample's numbers not depending on the batch it is in.
// A NaN or infinite value in a state (or a κ that is not positive) is refused with the sample and time.
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/heat/nonlinear.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"

namespace attnphys::fd {

struct NonlinearOptions {
  int picard_max = 2;    // linear steps per step (1: lagged κ, first order; 2: one correction, second order)
  double tol = 0.0;      // 0: always picard_max iterates; > 0: iterate to tol, halving steps that do not get there
  int max_halvings = 10; // tol > 0: consecutive halvings of one step before it is refused
  void validate() const;
};

struct NonlinearStats {
  long steps = 0;           // accepted steps, per sample (a halved step counts its pieces)
  long linear_solves = 0;   // Picard iterates (linear CN/ADI steps), over all samples
  long halvings = 0;        // tol > 0: steps redone as two half steps
  int max_iterations = 0;   // the most iterates one step took
  double last_change = 0.0; // tol > 0: max|Δu| of the last iterate of the last step
};

class NonlinearHeatStepper {
 public:
  NonlinearHeatStepper(const heat::HeatProblem& problem, const heat::KappaLaw& law, NonlinearOptions opts = {});

  const heat::HeatProblem& problem() const { return linear_.op().problem(); }
  const heat::KappaLaw& law() const { return law_; }
  const NonlinearOptions& options() const { return opts_; }
  // The linear stepper underneath (its operator holds κ of the last iterate).
  const HeatStepper& linear() const { return linear_; }

  View3<double> make_state(long batch = 1) const { return linear_.make_state(batch); }
  void check_state(const View3<double>& u) const { linear_.check_state(u); }

  // One step from t to t + dt, in place (every sample of the batch).
  void step(const View3<double>& u, double t, double dt);
  // From t0 to t1 in the fewest equal steps not longer than dt_max; returns the number of steps (halvings not
  // counted). Refuses a state that holds NaN or infinite values at the end.
  long advance(const View3<double>& u, double t0, double t1, double dt_max);

  const NonlinearStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // κ(u) of one sample of a state into kappa (spatial shape); refuses non-finite or non-positive values.
  void kappa_of(const View3<double>& u, const View3<double>& kappa, long sample = 0) const;

 private:
  HeatStepper linear_;
  heat::KappaLaw law_;
  heat::KappaFn kfn_;
  NonlinearOptions opts_;
  NonlinearStats stats_;
  View3<double> un_, wa_, wb_, kappa_;  // one sample: uⁿ, two iterates, κ(ū)
  View3<double> sample_view(const View3<double>& u, long b) const;
  void step_sample(const View3<double>& ub, long b, double t, double dt, int depth);
};

// auto_dt (heat_solver.hpp) for the linear problem with κ = the largest κ(u) over the range of u0.
double auto_dt(const NonlinearHeatStepper& stepper, const View3<double>& u0, double t_end);

struct NonlinearSolveOptions {
  double dt = 0.0;                     // 0: auto_dt
  NonlinearOptions picard;
  std::vector<double> snapshot_times;  // increasing, within [0, t_end]
};

// Advances u0 (not modified) from t = 0 to t_end, like fd::solve.
HeatSolution solve_nonlinear(const heat::HeatProblem& problem, const heat::KappaLaw& law, const View3<double>& u0,
                             double t_end, const NonlinearSolveOptions& options = {});

// The Picard keys of the [nonlinear] section (the law's keys: heat::KappaLawOptions).
struct NonlinearHeatOptions {
  int picard_max = 2;
  double tol = 0.0;
  int max_halvings = 10;
  void declare(OptionSet& set, const std::string& section = "nonlinear");
  NonlinearOptions build() const;  // validated
};

}  // namespace attnphys::fd
