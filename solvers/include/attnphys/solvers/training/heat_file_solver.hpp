#pragma once
// The reference solver of a problem-family file of `attnphys heat dataset` (solvers/fd/heat_dataset.hpp), for the
// surrogate's speed comparison at equal accuracy: every sample's heat problem (κ field, source, boundary data,
// κ(u) law) is rebuilt from the file, so the solver can be run on the test pairs the surrogate predicts.
//
// How a sample's problem is rebuilt, the first that applies:
//   config   — exact. The file's `config` attribute (the TOML `attnphys heat dataset` ran with) gives the base
//              problem, the family, the κ(u) law, the Picard options and the dataset seed; sample i's problem is then
//              fd::HeatSampleSolver::problem(i), the writer's own call, bit for bit. Accepted only when it
//              reproduces the file: the grid, `family`, `solver_dt`, and the float32 channels kappa, source and
//              boundary_faces/* of every sample asked for (compared as float32, exactly).
//   channels — the problem from the file's float32 channels: κ from `kappa`, the source from `source`, the
//              boundary data from `boundary_faces/x0 … y1` (per face), the boundary type from `bc`, a κ(u) law from
//              `kappa_law`, `kappa0`, `beta` (`table_u`, `table_kappa`), default Picard options. κ and f are then
//              float32-rounded: a relative change of at most 2⁻²⁴ ≈ 6e-8 per cell, whose effect on a solution is of
//              the same order (measured in tests/solvers/test_heat_speed_families.cpp: below 1e-6 relative L2),
//              far below any surrogate's error. Files written from Python (attnphys.heat.write_dataset) take this
//              route: their `config` is not the writer's TOML.
// Files that cannot be rebuilt either way (not ours, sides of different types, boundary data without
// boundary_faces/*, no solver_dt, 3D) are refused with the reason (Error).
//
// Equal accuracy (equal_accuracy_steps): the fewest solver steps per horizon whose mean relative L2 error against
// the file's targets is at most the surrogate's test error. Doubling from 1 step until the error is met, then
// bisection between the last failing and the first meeting count. The answer m always satisfies
// err(m) ≤ target < err(m − 1) (the bisection keeps one failing and one meeting end). When the error falls
// monotonically with the step count (it does for CN/ADI once the steps resolve the data, and in every case we
// measured) m is the fewest; otherwise smaller counts below the bracket that doubling skipped could also meet it.
#include <functional>
#include <string>
#include <vector>

#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/nonlinear.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/fd/nonlinear_heat.hpp"
#include "attnphys/solvers/training/heat_data.hpp"

namespace attnphys::training {

class HeatFileSolver {
 public:
  // Opens `path`, a file of `attnphys heat dataset` in 1D or 2D, and prepares the problems of samples
  // [first, first + count) (count 0: every sample). Refuses (Error, with the reason) what it cannot rebuild.
  HeatFileSolver(const std::string& path, long first = 0, long count = 0);

  // The problem of sample `index` (one of those prepared).
  const heat::HeatProblem& problem(long index) const;
  bool exact() const { return exact_; }           // rebuilt from the config (else from the float32 channels)
  bool nonlinear() const { return has_law_; }
  const heat::KappaLaw& law() const { return law_; }
  const fd::NonlinearOptions& picard() const { return picard_; }
  int dim() const { return dim_; }
  double solver_dt() const { return solver_dt_; }  // the writer's step
  const std::vector<double>& times() const { return times_; }  // grid/t
  // How the problems were rebuilt, and why the config was not used when it was not.
  const std::string& how() const { return how_; }
  // What is timed: "Crank–Nicolson" (1D), "ADI (Peaceman–Rachford)" (2D), with "nonlinear … with Picard
  // correction" for a κ(u) law.
  std::string method_name() const;
  // Steps the writer took from snapshot k to snapshot k + stride.
  long reference_steps(long k, long stride) const;

  // Advances fields [rows, points] in place: row r holds sample sample_of[r] at snapshot k_of[r], and is advanced
  // to snapshot k_of[r] + stride in `steps` equal steps (fd::HeatStepper, or fd::NonlinearHeatStepper for a law),
  // one stepper per sample built here from its prepared problem (the set-up is part of the solve).
  void advance(const View2<double>& fields, const std::vector<long>& sample_of, const std::vector<long>& k_of,
               long stride, long steps) const;

 private:
  int dim_ = 0;
  long first_ = 0, count_ = 0;
  bool exact_ = false, has_law_ = false;
  heat::KappaLaw law_;
  fd::NonlinearOptions picard_;
  double solver_dt_ = 0;
  std::vector<double> times_;
  std::vector<heat::HeatProblem> problems_;
  std::string how_;
};

// One run of the solver at a step count: mean relative L2 against the targets and the seconds it took.
struct SolverRun {
  double rel_l2 = 0, seconds = 0;
};
struct EqualAccuracy {
  bool reached = false;     // some count up to max_steps met the target
  long steps = 0;           // the answer (reached), else the largest count tried
  double rel_l2 = 0, seconds = 0;  // of that count
  std::vector<long> tried;  // every count run, in order, with its error and seconds
  std::vector<double> tried_rel_l2, tried_seconds;
};
// The search of the header comment; run(m) solves every pair with m steps per horizon.
EqualAccuracy equal_accuracy_steps(const std::function<SolverRun(long steps)>& run, double target,
                                   long max_steps);

}  // namespace attnphys::training
