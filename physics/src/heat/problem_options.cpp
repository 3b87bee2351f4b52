#include "attnphys/physics/heat/problem_options.hpp"

#include "attnphys/physics/heat/initial_conditions.hpp"

namespace attnphys::heat {

void HeatProblemOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".dim", &dim, "spatial dimension: 1, 2 or 3", Range::closed(1, 3));
  set.add(s + ".nx", &nx, "cells along x", Range::at_least(1));
  set.add(s + ".ny", &ny, "cells along y (2D, 3D)", Range::at_least(1));
  set.add(s + ".nz", &nz, "cells along z (3D)", Range::at_least(1));
  set.add(s + ".length", &length, "side of the box", Range::positive());
  set.add(s + ".kappa", &kappa, "constant diffusivity", Range::non_negative());
  set.add(s + ".kappa_random", &kappa_random, "use a random piecewise-smooth diffusivity");
  set.add(s + ".kappa_lo", &kappa_lo, "random kappa: low level", Range::positive());
  set.add(s + ".kappa_hi", &kappa_hi, "random kappa: high level", Range::positive());
  set.add(s + ".kappa_length_scale", &kappa_length_scale, "random kappa: interface length scale", Range::positive());
  set.add(s + ".kappa_seed", &kappa_seed, "random kappa: seed", Range::non_negative());
  set.add(s + ".bc", &bc, "boundary type on every side");
  set.add(s + ".bc_value", &bc_value, "dirichlet: boundary value; neumann: heat flux into the box");
  set.add(s + ".face_mean", &face_mean, "diffusivity on faces: harmonic or arithmetic");
}

HeatProblem HeatProblemOptions::build() const {
  require(dim >= 1 && dim <= 3, "problem.dim must be 1, 2 or 3, got ", dim);
  HeatProblem p;
  const long n[3] = {nx, ny, nz};
  std::array<long, 3> nn{1, 1, 1};
  std::array<double, 3> h{1, 1, 1};
  for (int a = 0; a < dim; ++a) {
    nn[a] = n[a];
    h[a] = n[a] > 0 ? length / n[a] : 1.0;
  }
  p.grid = Grid::make(dim, nn, h);
  p.kappa = kappa;
  p.face_mean = face_mean;
  p.set_all_boundaries(BoundaryCondition{bc, bc_value, {}});
  p.validate();
  if (kappa_random) p.kappa_field = random_kappa(p, kappa_lo, kappa_hi, kappa_length_scale, std::uint64_t(kappa_seed));
  p.validate();
  return p;
}

}  // namespace attnphys::heat
