#pragma once
// Training data for learned heat operators: (u(t), u(t + Δt)) pairs or trajectories from random initial
// conditions, generated on the device (HeatPairGenerator) or streamed to an HDF5 file (write_heat_dataset).
//
// Using HeatPairGenerator for training (1D or 2D problems):
//
//   heat::HeatProblem problem = heat::make_problem(2, {64, 64, 1}, {1.0 / 64, 1.0 / 64, 1}, 1.0, "periodic");
//   heat::InitialConditionOptions ic;            // kind "grf", length_scale 0.1, ...
//   fd::HeatPairOptions po;                      // t_start, delta_t, method, seed
//   po.delta_t = 0.01;
//   fd::HeatPairGenerator<float> gen(problem, ic, po);
//   View3<float> x("x", 32, 64, 64), y("y", 32, 64, 64);   // [count, ny, nx]; 1D: [count, 1, nx]
//   gen.generate(/*first_index=*/i0, /*count=*/32, x, y);   // x = u(t_start), y = u(t_start + delta_t)
//
// Guarantees:
//   * Sample index i always gets the same initial condition and the same pair for a given (problem, ic, options
//     with seed): generate(5, 3, ...) equals rows 5..7 of generate(0, 10, ...), bit for bit. Disjoint index ranges
//     (e.g. [0, n_train) and [n_train, n_train + n_test)) give independent samples.
//   * The time step does not depend on the data (options.dt, or a rule from the problem and the initial-condition
//     scale), and the input is u(t_start) after solving from the random initial condition, so t_start > 0 gives
//     smoother inputs than the raw fields.
//   * Arrays are [count, ny, nx] in 2D and [count, 1, nx] (or View2 [count, nx]) in 1D, x contiguous, in the
//     units of the problem (no normalisation). Computation is in double; T = float or double for the outputs.
//   * 3D problems are refused here (solve them with fd::solve, one sample at a time).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/options.hpp"
#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/physics/heat/nonlinear.hpp"
#include "attnphys/physics/heat/problem_options.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"
#include "attnphys/solvers/fd/nonlinear_heat.hpp"

namespace attnphys::fd {

struct HeatPairOptions {
  double t_start = 0.0;   // input time
  double delta_t = 0.01;  // target time - input time (also the spacing of trajectory snapshots)
  Method method = Method::Adi;
  double dt = 0.0;        // solver step; 0: chosen from the problem and the initial-condition scale
  std::uint64_t seed = 0;
};

template <class T>
class HeatPairGenerator {
 public:
  HeatPairGenerator(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                    const HeatPairOptions& options);

  // inputs/targets [count, ny, nx] (1D: [count, 1, nx]); sample s is index first_index + s.
  void generate(long first_index, long count, const View3<T>& inputs, const View3<T>& targets);
  // 1D convenience: [count, nx].
  void generate(long first_index, long count, const View2<T>& inputs, const View2<T>& targets);
  // out [count, nt, ny, nx] (1D: ny = 1): u at t_start + k·delta_t, k = 0..nt-1.
  void trajectories(long first_index, long count, const View4<T>& out);
  // Initial conditions only (t = 0), [count, ny, nx].
  void initial(long first_index, long count, const View3<T>& out);

  const heat::HeatProblem& problem() const { return problem_; }
  double solver_dt() const { return dt_; }

 private:
  heat::HeatProblem problem_;
  heat::InitialConditionOptions ic_;
  HeatPairOptions opt_;
  std::unique_ptr<HeatStepper> stepper_;
  double dt_ = 0.0;
  View2<double> state_;
  View3<double> start(long first_index, long count);  // the state at t_start, [count, n1, nx]
};

// The step HeatPairGenerator uses when options.dt is 0: FTCS a quarter of its limit; CN/ADI the step whose time
// error for the typical wavenumber k of the initial conditions stays below the space error, h/(2κk), at least the
// FTCS limit, at most delta_t.
double pair_dt(const HeatStepper& stepper, const heat::InitialConditionOptions& ic, double delta_t);

// Samples of a problem family (physics/heat/families.hpp), each solved on its own: per-sample κ, source and boundary
// data, 3D grids, and the nonlinear equation u_t = ∇·(κ(u)∇u) + f when a κ(u) law is given. Sample i is
//   problem(i) = family.sample_problem(base, i),  u(0) = initial_conditions(base, ic, seed, i),
//   snapshots u(t_start + k·delta_t), k = 0 .. nt-1, = fd::solve(problem(i), u(0), ..., {method, solver_dt(), times})
// (solve_nonlinear with the law), so a sample can be regenerated alone by those calls, bit for bit. The step does
// not depend on the sample: options.dt, or pair_dt for the family's largest κ (kappa_bound; for a κ(u) law, its
// maximum over |u| <= 3·ic.amplitude + the largest boundary data). With a law the method is always Crank–Nicolson /
// ADI with Picard correction (solvers/fd/nonlinear_heat.hpp, options `picard`).
class HeatSampleSolver {
 public:
  HeatSampleSolver(const heat::HeatProblem& base, const heat::InitialConditionOptions& ic,
                   const heat::HeatFamily& family, const HeatPairOptions& options,
                   const heat::KappaLaw* law = nullptr, const NonlinearOptions& picard = {});
  heat::HeatProblem problem(long index) const { return family_.sample_problem(base_, index); }
  // u(0) of sample `index`, spatial shape (nz, ny, nx).
  View3<double> initial(long index) const;
  // The snapshot times t_start + k·delta_t, k < nt.
  std::vector<double> times(long nt) const;
  // Solves sample `index` (its problem given, as problem(index) returns it) and returns its nt snapshots.
  HeatSolution solve(const heat::HeatProblem& problem, long index, long nt) const;
  double solver_dt() const { return dt_; }
  bool nonlinear() const { return has_law_; }
  const heat::KappaLaw& law() const { return law_; }

 private:
  heat::HeatProblem base_;
  heat::InitialConditionOptions ic_;
  heat::HeatFamily family_;
  HeatPairOptions opt_;
  heat::KappaLaw law_;
  NonlinearOptions picard_;
  bool has_law_ = false;
  double dt_ = 0.0;
};

// The dataset section of configuration files.
struct HeatDatasetOptions {
  std::string output = "heat_dataset.h5";
  long samples = 64;
  long seed = 0;
  long nt = 2;             // snapshots per sample: 2 gives (u(t), u(t + Δt)) pairs
  double t_start = 0.0;
  double delta_t = 0.01;
  long chunk = 16;         // samples per generated and written slab
  bool progress = true;
  void declare(OptionSet& set, const std::string& section = "dataset");
};

// Every section of `attnphys heat dataset` in one place ([problem], [ic], [family], [nonlinear], [solver],
// [dataset]): the CLI, the reader that rebuilds a file's problems from its config (training/heat_file_solver) and
// the tests declare them together, so a file's `config` attribute always parses back the way it was written.
struct HeatDatasetConfig {
  heat::HeatProblemOptions problem;
  heat::InitialConditionOptions ic;
  heat::HeatFamilyOptions family;
  heat::KappaLawOptions law;
  NonlinearHeatOptions picard;
  HeatSolverOptions solver;
  HeatDatasetOptions dataset;
  void declare(OptionSet& set);
  // The per-sample options write_heat_dataset derives from [dataset] and [solver]: times, method, step, seed.
  HeatPairOptions pair_options() const;
};

struct HeatDatasetSummary {
  std::string path;
  long samples = 0, nt = 0;
  double seconds = 0.0, solver_dt = 0.0;
};

// Writes `samples` trajectories in the PDEBench layout:
//   data    float32 [sample, t, x, (y, (z)), 1]   (x before y before z, as PDEBench; device arrays are [.., y, x])
//   grid/x, grid/y, grid/z  cell coordinates;  grid/t  snapshot times
// and, per sample, the inputs that vary (named channels, float32 [sample, x, (y, (z))]):
//   kappa     the diffusivity field (family.kappa piecewise or lognormal, or problem.kappa_random)
//   source    the static source f(x) (family.source = grf)
//   boundary  the boundary data as a grid field (heat::boundary_field: the data of the adjacent faces in the cells
//             next to non-periodic sides, 0 inside), with the exact face data in boundary_faces/x0, x1, y0, y1,
//             z0, z1 (float32 [sample, (tangential axes)])
// Root attribute `channels` lists the grid channels ("data,kappa,..."), `family` describes the family, and a κ(u)
// law adds nonlinear = 1, kappa_law, kappa0, beta (and table_u, table_kappa).
//   root attributes: config (the TOML given), layout, dim, bc ("mixed" when the sides differ), kappa (the maximum
//   when κ varies), variable_kappa and homogeneous (zero boundary data, no source) as 0/1, solver_dt, and
//   attnphys' own (kind "heat_dataset"). `attnphys train heat` reads such files (data.file, training/heat_data.hpp).
// Streamed in chunks of options.chunk samples through a temporary file renamed into place at the end: an
// interruption (exception, kill) leaves no file under the final name. on_chunk(done) runs after each chunk.
// With a communicator of several ranks (every rank calls this with the same arguments) the chunks are generated
// round-robin over the ranks (chunk c on rank c mod size) and sent to rank 0, which alone writes the file (serial
// HDF5) and runs on_chunk and the progress bar; the file equals the one-rank file bit for bit. Memory stays one
// chunk per rank.
// Constant families in 1D/2D run batched through HeatPairGenerator (the files of earlier versions, bit for bit);
// everything else runs sample by sample through HeatSampleSolver.
HeatDatasetSummary write_heat_dataset(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                      const HeatSolveOptions& solver, const HeatDatasetOptions& options,
                                      const std::string& config_toml,
                                      const std::function<void(long done)>& on_chunk = {},
                                      const Comm& comm = Comm::self());
HeatDatasetSummary write_heat_dataset(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                      const heat::HeatFamily& family, const heat::KappaLaw* law,
                                      const NonlinearOptions& picard, const HeatSolveOptions& solver, const HeatDatasetOptions& options,
                                      const std::string& config_toml,
                                      const std::function<void(long done)>& on_chunk = {},
                                      const Comm& comm = Comm::self());

}  // namespace attnphys::fd
