#pragma once
// The finite-volume discretisation of u_t = ∇·(κ∇u) + f on the device, split by axis for the splitting schemes:
//
//   du/dt = Σ_a L_a u + G(t),   (L_a u)_i = c_{i+1}(u_{i+1} - u_i) - c_i(u_i - u_{i-1})   along axis a,
//
// with face coefficients c = κ_face / h_a² (conventions in physics/heat/heat_problem.hpp). L_a is linear and
// homogeneous: a Dirichlet side has c = 2κ_cell/h² (the face is half a cell from the centre) and a zero ghost value,
// a Neumann side has c = 0; the boundary data and the source live in the forcing G(t) = b(t) + f(t), which is
// non-zero only in boundary cells when there is no source. G is evaluated on the host (boundary and source
// functions are host callables) and copied once per time level; it is computed once when nothing depends on time.
//
// States are View3 (n0, n1, nx), x contiguous: (batch, 1, nx) in 1D, (batch, ny, nx) in 2D, (nz, ny, nx) in 3D.
// Coefficients, forcing and line factorisations have the spatial shape (1 or nz, 1 or ny, nx) and are shared by
// every sample of a batch; each sample's arithmetic does not depend on the batch it is in.
//
// The operator runs on the execution space it is instantiated for (BasicHeatOperator<Space>; HeatOperator is the
// default space's), with every view in that space's memory; the library's solvers use HeatOperator, and the tests
// run each kernel once per enabled space (solvers.HeatOperatorOnSpace.*). The problem's κ and source fields may live
// in the default memory space: the operator copies what it needs.
#include <array>
#include <vector>

#include "attnphys/core/views.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"

namespace attnphys::fd {

template <class Space = ExecSpace>
class BasicHeatOperator {
 public:
  // States, forcing and coefficients: (n0, n1, nx) views in Space's memory.
  using State = Kokkos::View<double***, Kokkos::LayoutRight, typename Space::memory_space>;
  using Row = Kokkos::View<double*, Kokkos::LayoutRight, typename Space::memory_space>;

  explicit BasicHeatOperator(const heat::HeatProblem& problem);

  const heat::HeatProblem& problem() const { return p_; }
  int dim() const { return p_.grid.dim; }
  // Spatial extents (nz or 1, ny or 1, nx).
  std::array<long, 3> spatial() const { return p_.spatial_extents(); }

  // Largest FTCS step for which every update is a convex combination of old values: 1 / max_cell Σ_faces c.
  // It is the stability limit Σ_a κ Δt/Δx_a² ≤ 1/2 for periodic and Neumann boundaries; next to a Dirichlet side it
  // is 2/3 of that per axis (the boundary face is half a cell away), which also keeps the maximum principle.
  double ftcs_limit() const { return ftcs_limit_; }

  // The forcing split into parts: boundary terms of each axis and the source. A splitting scheme takes each part
  // at the time level of the stage it belongs to; taking all boundary data at one time in every stage loses an
  // order of accuracy next to time-dependent Dirichlet sides (the classic ADI order reduction).
  enum Part : unsigned { BoundaryX = 1, BoundaryY = 2, BoundaryZ = 4, Source = 8, AllParts = 15 };
  struct ForcingTerm {
    double weight;
    double t;
    unsigned parts;
  };
  bool has_forcing() const { return has_forcing_; }
  bool forcing_time_dependent() const { return forcing_time_dependent_; }
  // out (spatial shape) = Σ_terms weight · (the selected parts at time t). Host evaluation when time-dependent;
  // otherwise a device sum of cached parts.
  void forcing(const State& out, const std::vector<ForcingTerm>& terms) const;

  // out = x + Σ_a s[a]·L_a y + g1·G1 + g2·G2. out may alias x (not y). G1, G2 may be empty views when g1, g2 are 0.
  void combine(const State& out, const State& x, const State& y, std::array<double, 3> s, double g1, const State& G1,
               double g2, const State& G2) const;

  // Two FTCS steps in one sweep (temporal blocking, host builds): out = the state two steps of dt after `in`, with
  // the static forcing G (an empty view when there is none) taken at both steps. The intermediate level lives only
  // in a ring of three slices along the outermost axis (z in 3D, y in 2D), so the grid is read once and written once
  // per two steps instead of per step. Returns false and does nothing where it does not apply (device builds,
  // variable κ, time-dependent forcing, 1D, fewer than 4 slices); out must not alias in. Same result as two
  // combine() steps up to rounding. `chunks` (0: enough for every thread) splits each item's slices into that many
  // parallel units, each recomputing the intermediate slices at its two ends; in 3D `band_rows` (0: sized for the
  // cache) splits each plane into bands of rows swept one after another, each recomputing one halo row per side.
  bool ftcs_two_steps(const State& out, const State& in, double dt, const State& G, long chunks = 0,
                      long band_rows = 0) const;

  // rhs ← (I - s·L_axis)⁻¹ rhs on every line of the axis: a Thomas solve per line (Sherman–Morrison for periodic
  // axes), with the factorisation for this s cached.
  void solve_lines(int axis, double s, const State& rhs);

  // Face coefficients c = κ_face/h² of an axis, extent n+1 along it (empty for unused axes).
  const State& face_coefficients(int axis) const { return cf_[axis]; }

  // Replaces κ by a new per-cell field (spatial shape, finite and >= 0; refused otherwise, the operator unchanged):
  // the face coefficients are rebuilt on the device (the same means as the constructor, bit for bit), the FTCS
  // limit is recomputed, the cached line factorisations are dropped and the κ-dependent forcing (Dirichlet data
  // enters as c_boundary·g) is rebuilt. The field is copied; problem().kappa_field is the copy. The nonlinear heat
  // stepper calls this once per Picard iterate.
  void set_kappa_field(const State& kappa_cell);

  // Kernel launchers (public only because CUDA lambdas may not live in private member functions).
  template <bool VariableKappa>
  void combine_kernel(const State& out, const State& x, const State& y, std::array<double, 3> s, double g1,
                      const State& G1, double g2, const State& G2) const;
  void factor_lines(int axis, double s);

 private:
  heat::HeatProblem p_;
  std::array<State, 3> cf_;                    // face coefficients per axis
  std::array<double, 3> c_{}, clo_{}, chi_{};  // constant-κ coefficients: interior, low face, high face
  Row zero_;                                   // a zero row standing in for ghost rows and unused axes
  mutable Row ring_;                           // ftcs_two_steps: three intermediate slices per parallel unit
  double ftcs_limit_ = 0;
  bool has_forcing_ = false, forcing_time_dependent_ = false;
  std::array<State, 4> part_cache_;  // per part, when nothing depends on time (empty: part is zero)
  mutable HostView3<double> forcing_host_;
  HostView3<double> source_host_;  // a copy of problem.source_field (empty when there is none)
  void forcing_host(const std::vector<ForcingTerm>& terms) const;
  std::array<HostView3<double>, 3> cf_host_;
  State kappa_own_;  // set_kappa_field: the operator's copy of κ
  struct LineFactor {
    double s = -1;
    Row low, cp, invd, z;  // per cell (spatial)
    Row vlast, fact;       // per line (periodic only)
  };
  std::array<LineFactor, 3> factor_;
};

using HeatOperator = BasicHeatOperator<>;

}  // namespace attnphys::fd
