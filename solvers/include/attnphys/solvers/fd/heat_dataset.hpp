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
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"

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

struct HeatDatasetSummary {
  std::string path;
  long samples = 0, nt = 0;
  double seconds = 0.0, solver_dt = 0.0;
};

// Writes `samples` trajectories in the PDEBench layout:
//   data    float32 [sample, t, x, (y), 1]   (note x before y, as PDEBench; our device arrays are [.., y, x])
//   grid/x, grid/y  cell coordinates;  grid/t  snapshot times
//   root attributes: config (the TOML given), layout, dim, bc ("mixed" when the sides differ), kappa (the maximum
//   when κ varies), variable_kappa and homogeneous (zero boundary data, no source) as 0/1, solver_dt, and
//   attnphys' own (kind "heat_dataset"). `attnphys train heat` reads such files (data.file, training/heat_data.hpp).
// Streamed in chunks of options.chunk samples through a temporary file renamed into place at the end: an
// interruption (exception, kill) leaves no file under the final name. on_chunk(done) runs after each chunk.
// With a communicator of several ranks (every rank calls this with the same arguments) the chunks are generated
// round-robin over the ranks (chunk c on rank c mod size) and sent to rank 0, which alone writes the file (serial
// HDF5) and runs on_chunk and the progress bar; the file equals the one-rank file bit for bit. Memory stays one
// chunk per rank.
HeatDatasetSummary write_heat_dataset(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                      const HeatSolveOptions& solver, const HeatDatasetOptions& options,
                                      const std::string& config_toml,
                                      const std::function<void(long done)>& on_chunk = {},
                                      const Comm& comm = Comm::self());

}  // namespace attnphys::fd
