#pragma once
// Training data for the heat surrogate: pairs (u(t), u(t + Δt)) on a 1D or 2D grid, either produced on the fly by
// our own finite-difference reference solver (ADI / Crank–Nicolson, run with steps fine enough that its time error
// is far below what a surrogate can reach) from random initial conditions, or read from an HDF5 file written by
// `attnphys heat dataset` (data.file; PDEBench layout, see solvers/fd/heat_dataset.hpp).
//
// Sample i of a given seed (or row i of the file) is always the same field, whatever the batch or rank that makes
// it, so the train / validation / test split is a split of sample index ranges: [0, n_train),
// [n_train, n_train + n_val), then test. One sample gives several pairs when data.horizons lists several multiples
// of the base horizon, or when a file holds more snapshots than one pair needs (every start snapshot that has its
// target in the file is used); the pairs of one sample are consecutive rows, in the order (horizon, start time).
//
// From a file, the physics is the file's: dim and n must equal data.dim and data.n (the model's grid), and the box
// length (n·h from grid/x), κ, the boundary type and the base horizon Δt = data.file_stride·(t[1] − t[0]) replace
// data.length, data.kappa, data.bc and data.horizon_ftcs_steps (resolve_heat_data). The evaluation (rollout
// reference, ADI timing at equal accuracy, heat-kernel comparison) then runs with the same physics.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"

namespace attnphys::training {

struct HeatDataOptions {
  int dim = 2;
  long n = 32;                  // points per axis
  double length = 1.0;          // box [0, length)^dim
  double kappa = 1.0;
  std::string bc = "periodic";  // periodic | dirichlet | neumann (zero boundary data)
  double horizon_ftcs_steps = 25;  // model horizon Δt in units of the explicit stability limit h²/(2·dim·κ)
  double length_scale = 0.1;    // correlation length of the Gaussian random initial fields
  long n_train = 1024, n_val = 128, n_test = 128;
  long seed = 1;
  long reference_substeps = 16;  // ADI/CN steps per horizon for the reference targets
  std::vector<double> horizons{1.0};  // multiples of the base horizon Δt to train on (must contain 1)
  std::string file;             // HDF5 dataset of `attnphys heat dataset` to read pairs from (empty: generate)
  long file_stride = 1;         // snapshots between input and target: base Δt = file_stride·(t[1] − t[0])

  void declare(OptionSet& set, const std::string& section = "data");
  void validate() const;
  double h() const { return length / double(n); }
  double horizon() const;       // Δt
  long points() const { return dim == 1 ? n : n * n; }
  heat::HeatProblem problem(long n_points) const;  // the problem on an n_points-per-axis grid
  long pairs_per_sample() const;  // rows of HeatPairs per sample (after resolve_heat_data for a file)
  long file_nt = 0;             // not a key: snapshots per sample in data.file (set by resolve_heat_data)
};

// What an HDF5 dataset of `attnphys heat dataset` holds, checked: layout, rank, grid, times and physics.
struct HeatFileInfo {
  std::string path;
  int dim = 0;
  long n = 0, samples = 0, nt = 0;
  double h = 0, length = 0, kappa = 0, dt = 0;  // dt: snapshot spacing t[1] − t[0]
  std::string bc;
};
HeatFileInfo inspect_heat_file(const std::string& path);

// The options with data.file's physics filled in (see the header comment); checks that the file fits the
// configuration (grid, sample counts, enough snapshots for file_stride·max(horizons)). Without data.file: the
// options unchanged.
HeatDataOptions resolve_heat_data(const HeatDataOptions& options);

// A set of pairs on the device: inputs and targets [count, points] (row-major fields, x fastest), coordinates
// [points, dim] of the grid points (physical units).
// [points, dim] of the grid points (physical units); tau [count]: each pair's horizon in base horizons.
struct HeatPairs {
  long count = 0, points = 0, n = 0;
  int dim = 0;
  View2<double> inputs, targets;
  View2<double> coords;
  View1<double> tau;
};

// The pairs of samples [first, first + count) on an n-per-axis grid: from data.file when it is set (options
// resolved by resolve_heat_data; n_points must then be options.n), else generated (generate_heat_pairs).
// count·pairs_per_sample() rows.
HeatPairs make_heat_pairs(const HeatDataOptions& options, long first, long count, long n_points);
// Generated pairs whatever data.file says (n = options.n for training; other values for resolution transfer: the
// same physical fields, sampled on the finer grid), one per sample and entry of data.horizons.
HeatPairs generate_heat_pairs(const HeatDataOptions& options, long first, long count, long n_points);
// Pairs read from data.file (options resolved by resolve_heat_data), in slabs of samples.
HeatPairs read_heat_pairs(const HeatDataOptions& options, long first, long count);

// Random initial fields of samples [first, first + count) on an n-per-axis grid: [count, points].
View2<double> make_initial_fields(const HeatDataOptions& options, long first, long count, long n_points);

// Advances fields [count, points] by `horizons` model horizons with the reference solver, in place.
void advance_reference(const HeatDataOptions& options, const View2<double>& fields, long n_points, double horizons,
                       long substeps_per_horizon);

// Grid point coordinates [points, dim] on an n-per-axis grid.
View2<double> grid_coordinates(const HeatDataOptions& options, long n_points);

}  // namespace attnphys::training
