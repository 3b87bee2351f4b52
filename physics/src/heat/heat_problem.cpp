#include "attnphys/physics/heat/heat_problem.hpp"

#include <cmath>

namespace attnphys::heat {

BcType parse_bc_type(const std::string& name) {
  if (auto t = find_enum<BcType>(name)) return *t;
  fail("unknown boundary type '", name, "': use periodic, dirichlet or neumann");
}

std::string to_string(BcType t) { return enum_name(t); }

FaceMean parse_face_mean(const std::string& name) {
  if (auto m = find_enum<FaceMean>(name)) return *m;
  fail("unknown face mean '", name, "': use harmonic or arithmetic");
}

Grid Grid::make(int dim, std::array<long, 3> n, std::array<double, 3> h) {
  require(dim >= 1 && dim <= 3, "the heat problem is 1D, 2D or 3D; got dim = ", dim);
  Grid g;
  g.dim = dim;
  for (int a = 0; a < 3; ++a) {
    g.n[a] = a < dim ? n[a] : 1;
    g.h[a] = a < dim ? h[a] : 1.0;
  }
  return g;
}

void HeatProblem::validate() const {
  static const char* axis_name[3] = {"x", "y", "z"};
  require(grid.dim >= 1 && grid.dim <= 3, "the heat problem is 1D, 2D or 3D; got dim = ", grid.dim);
  for (int a = 0; a < 3; ++a) {
    if (a >= grid.dim) {
      require(grid.n[a] == 1, "axis ", axis_name[a], " is unused in ", grid.dim, "D and must have 1 cell, got ",
              grid.n[a]);
      continue;
    }
    require(grid.n[a] >= 1, "the grid has ", grid.n[a], " cells along ", axis_name[a],
            ": every axis needs at least 1 cell");
    require(std::isfinite(grid.h[a]) && grid.h[a] > 0, "cell width along ", axis_name[a],
            " must be positive and finite, got ", grid.h[a]);
    // 1/h^2 must be a double: a width of 1e-304 made the coefficients 0 * inf = NaN (found by fuzz_arrays).
    require(std::isfinite(1.0 / (grid.h[a] * grid.h[a])), "cell width along ", axis_name[a], " = ", grid.h[a],
            " is too small for double precision (1/dx^2 overflows): use another length unit");
    const bool p0 = bc[a][0].type == BcType::Periodic, p1 = bc[a][1].type == BcType::Periodic;
    require(p0 == p1, "axis ", axis_name[a], ": periodic must be set on both sides or neither");
    require(!p0 || grid.n[a] >= 3, "periodic axis ", axis_name[a], " needs at least 3 cells, got ", grid.n[a]);
    for (int s = 0; s < 2; ++s)
      require(bc[a][s].fn || std::isfinite(bc[a][s].value), "boundary value on axis ", axis_name[a], " side ", s,
              " is not finite");
  }
  require(std::isfinite(kappa) && kappa >= 0, "diffusivity kappa must be finite and non-negative, got ", kappa);
  // A per-cell field must have the spatial shape and finite values (κ: also >= 0).
  auto check_field = [&](const View3<double>& f, const char* name, bool nonneg) {
    const auto e = spatial_extents();
    require(long(f.extent(0)) == e[0] && long(f.extent(1)) == e[1] && long(f.extent(2)) == e[2], name,
            " field has shape (", f.extent(0), ", ", f.extent(1), ", ", f.extent(2), "), the grid needs (", e[0],
            ", ", e[1], ", ", e[2], ") (z, y, x)");
    const long bad = count_non_finite(f.data(), long(f.size()), nonneg);
    require(bad == 0, name, " field has ", bad, nonneg ? " negative," : "", " NaN or infinite value(s)",
            nonneg ? ": diffusivity must be >= 0" : "");
  };
  if (variable_kappa()) check_field(kappa_field, "kappa", true);
  if (source_field.size() > 0) check_field(source_field, "source", false);
}

long count_non_finite(const double* x, long n, bool negative_too) {
  long bad = 0;
  Kokkos::parallel_reduce(
      "attnphys::heat_count_non_finite", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const long i, long& b) {
        if (!math::isfinite(x[i]) || (negative_too && !(x[i] >= 0.0))) ++b;
      },
      bad);
  return bad;
}

bool HeatProblem::homogeneous() const {
  if (has_source()) return false;
  for (int a = 0; a < grid.dim; ++a)
    for (int s = 0; s < 2; ++s)
      if (bc[a][s].type != BcType::Periodic && bc[a][s].nonzero()) return false;
  return true;
}

double HeatProblem::kappa_max() const {
  if (!variable_kappa()) return kappa;
  const auto k = kappa_field;
  double m = 0.0;
  Kokkos::parallel_reduce(
      "attnphys::heat_kappa_max", Kokkos::RangePolicy<ExecSpace>(0, k.size()),
      KOKKOS_LAMBDA(const long i, double& v) { v = math::fmax(v, k.data()[i]); }, Kokkos::Max<double>(m));
  return m;
}

void HeatProblem::set_all_boundaries(const BoundaryCondition& b) {
  for (int a = 0; a < grid.dim; ++a) bc[a][0] = bc[a][1] = b;
}

HeatProblem make_problem(int dim, std::array<long, 3> n, std::array<double, 3> h, double kappa,
                         const std::string& bc) {
  return make_problem(dim, n, h, kappa, parse_bc_type(bc));
}

HeatProblem make_problem(int dim, std::array<long, 3> n, std::array<double, 3> h, double kappa, BcType bc) {
  HeatProblem p;
  p.grid = Grid::make(dim, n, h);
  p.kappa = kappa;
  p.set_all_boundaries(BoundaryCondition{bc, 0.0, {}});
  p.validate();
  return p;
}

}  // namespace attnphys::heat
