#pragma once
// Training data for the heat surrogate: pairs (u(t), u(t + Δt)) on a 1D or 2D grid, produced by our own
// finite-difference reference solver (ADI / Crank–Nicolson, run with steps fine enough that its time error is far
// below what a surrogate can reach) from random initial conditions, generated on the fly. (Training from an HDF5
// file written by `attnphys heat dataset` is not wired in yet.)
//
// Sample i of a given seed is always the same field, whatever the batch or rank that makes it, so the
// train / validation / test split is a split of index ranges: [0, n_train), [n_train, n_train + n_val), then test.
#include <cstdint>
#include <functional>
#include <string>

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

  void declare(OptionSet& set, const std::string& section = "data");
  void validate() const;
  double h() const { return length / double(n); }
  double horizon() const;       // Δt
  long points() const { return dim == 1 ? n : n * n; }
  heat::HeatProblem problem(long n_points) const;  // the problem on an n_points-per-axis grid
};

// A set of pairs on the device: inputs and targets [count, points] (row-major fields, x fastest), coordinates
// [points, dim] of the grid points (physical units).
struct HeatPairs {
  long count = 0, points = 0, n = 0;
  int dim = 0;
  View2<double> inputs, targets;
  View2<double> coords;
};

// count samples starting at sample index `first`, on an n-per-axis grid (n = options.n for training; other values
// for resolution transfer: the same physical fields, sampled on the finer grid).
HeatPairs make_heat_pairs(const HeatDataOptions& options, long first, long count, long n_points);

// Random initial fields of samples [first, first + count) on an n-per-axis grid: [count, points].
View2<double> make_initial_fields(const HeatDataOptions& options, long first, long count, long n_points);

// Advances fields [count, points] by `horizons` model horizons with the reference solver, in place.
void advance_reference(const HeatDataOptions& options, const View2<double>& fields, long n_points, double horizons,
                       long substeps_per_horizon);

// Grid point coordinates [points, dim] on an n-per-axis grid.
View2<double> grid_coordinates(const HeatDataOptions& options, long n_points);

}  // namespace attnphys::training
