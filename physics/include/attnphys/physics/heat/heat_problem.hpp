#pragma once
// The heat problem u_t = ∇·(κ(x) ∇u) + f(x, t) on a 1D, 2D or 3D box, as the finite-difference solvers
// (solvers/fd) and the dataset generators read it.
//
// Grid. Axis a (0 = x, 1 = y, 2 = z) has n[a] cells of width h[a]; the box is [0, n[a]·h[a]] along it. Unknowns
// live at cell centres x_i = (i + 1/2)·h, except along periodic axes, where x_i = i·h (so that a periodic field
// sampled at 0, h, 2h, ... is used as is). The scheme is a finite-volume (flux) form: the flux through the face
// between cells i and i+1 is κ_{i+1/2}(u_{i+1} - u_i)/h with κ_{i+1/2} the harmonic mean of the two cell values
// (the right mean for layered media: it keeps the flux continuous across a jump of κ); the arithmetic mean is
// available too. Both are second order where κ is smooth.
//
// Boundaries, per side of every axis:
//   periodic  — both sides of the axis, at least 3 cells;
//   dirichlet — u = g on the face (a constant or a function of position and time);
//   neumann   — κ ∂u/∂n = q on the face, n the outward normal: q is the heat entering per unit area and time
//               (q = 0 insulates, and then total heat Σ u·h^d changes only through the source).
//
// Fields on the device are View3 in (z, y, x) order with x contiguous. κ fields have the spatial shape
// spatial_extents() = (nz or 1, ny or 1, nx); states of the solvers may carry a batch in the leading unused axes
// (see solvers/fd/heat_solver.hpp).
#include <array>
#include <functional>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::heat {

enum class BcType { Periodic, Dirichlet, Neumann };
enum class FaceMean { Harmonic, Arithmetic };

}  // namespace attnphys::heat

namespace attnphys {
template <>
struct EnumNames<heat::BcType> {
  static constexpr EnumName<heat::BcType> values[] = {
      {heat::BcType::Periodic, "periodic"}, {heat::BcType::Dirichlet, "dirichlet"}, {heat::BcType::Neumann, "neumann"}};
};
template <>
struct EnumNames<heat::FaceMean> {
  static constexpr EnumName<heat::FaceMean> values[] = {{heat::FaceMean::Harmonic, "harmonic"},
                                                        {heat::FaceMean::Arithmetic, "arithmetic"}};
};
}  // namespace attnphys

namespace attnphys::heat {

// "periodic" | "dirichlet" | "neumann"; anything else is refused with the valid names.
BcType parse_bc_type(const std::string& name);
std::string to_string(BcType t);

// f(x, y, z, t); coordinates of unused axes are 0.
using SpaceTimeFn = std::function<double(double x, double y, double z, double t)>;

struct BoundaryCondition {
  BcType type = BcType::Periodic;
  double value = 0.0;  // dirichlet: g; neumann: q (see above)
  SpaceTimeFn fn;      // when set, replaces value; evaluated at the centres of the boundary faces
  bool fn_static = false;  // fn does not depend on t (evaluated once, at t = 0, and cached on the device)

  static BoundaryCondition periodic() { return {BcType::Periodic, 0.0, {}}; }
  static BoundaryCondition dirichlet(double g = 0.0) { return {BcType::Dirichlet, g, {}}; }
  static BoundaryCondition dirichlet(SpaceTimeFn g) { return {BcType::Dirichlet, 0.0, std::move(g)}; }
  static BoundaryCondition neumann(double q = 0.0) { return {BcType::Neumann, q, {}}; }
  static BoundaryCondition neumann(SpaceTimeFn q) { return {BcType::Neumann, 0.0, std::move(q)}; }
  // A boundary profile that varies along the face but not in time (random boundary data of the dataset families).
  static BoundaryCondition profile(BcType t, SpaceTimeFn g) { return {t, 0.0, std::move(g), true}; }
  double at(double x, double y, double z, double t) const { return fn ? fn(x, y, z, t) : value; }
  bool time_dependent() const { return bool(fn) && !fn_static; }
  bool nonzero() const { return bool(fn) || value != 0.0; }
};

FaceMean parse_face_mean(const std::string& name);  // "harmonic" | "arithmetic"

struct Grid {
  int dim = 1;
  std::array<long, 3> n{1, 1, 1};       // cells along x, y, z (1 along unused axes)
  std::array<double, 3> h{1.0, 1.0, 1.0};  // cell widths

  // Uniform grid: n cells of width h along the first `dim` axes.
  static Grid make(int dim, std::array<long, 3> n, std::array<double, 3> h);
  long cells() const { return n[0] * n[1] * n[2]; }
  double length(int axis) const { return n[axis] * h[axis]; }
};

struct HeatProblem {
  Grid grid;
  double kappa = 1.0;          // constant diffusivity, used when kappa_field is empty
  View3<double> kappa_field;   // optional κ per cell, spatial shape (see above); κ ≥ 0 and finite
  FaceMean face_mean = FaceMean::Harmonic;
  // bc[axis][side], side 0 at coordinate 0, side 1 at the far end. Default: periodic everywhere.
  std::array<std::array<BoundaryCondition, 2>, 3> bc;
  SpaceTimeFn source;          // optional f(x, y, z, t)
  View3<double> source_field;  // optional static source per cell, spatial shape; added to `source` when both are set

  // Checks everything listed in the header comment; throws attnphys::Error saying what to fix.
  void validate() const;

  bool periodic(int axis) const { return bc[axis][0].type == BcType::Periodic; }
  bool variable_kappa() const { return kappa_field.size() > 0; }
  bool has_source() const { return bool(source) || source_field.size() > 0; }
  // No boundary data on any side and no source: the zero field stays zero.
  bool homogeneous() const;
  // The coordinate of cell i along an axis (see the grid convention above).
  double coord(int axis, long i) const {
    return periodic(axis) ? i * grid.h[axis] : (i + 0.5) * grid.h[axis];
  }
  // (nz, ny, nx) with 1 for unused axes: the shape of κ fields and of one sample.
  std::array<long, 3> spatial_extents() const { return {grid.n[2], grid.n[1], grid.n[0]}; }
  // max κ over the grid (the constant when κ is constant).
  double kappa_max() const;
  // Sets the same boundary condition on both sides of every used axis.
  void set_all_boundaries(const BoundaryCondition& b);
};

// How many of the n values at `data` (execution-space memory) are NaN or infinite (with negative: or below 0).
long count_non_finite(const double* data, long n, bool negative_too = false);

// A problem with zero boundary data on every side: bc "periodic", "dirichlet" or "neumann".
HeatProblem make_problem(int dim, std::array<long, 3> n, std::array<double, 3> h, double kappa,
                         const std::string& bc);
HeatProblem make_problem(int dim, std::array<long, 3> n, std::array<double, 3> h, double kappa, BcType bc);

}  // namespace attnphys::heat
