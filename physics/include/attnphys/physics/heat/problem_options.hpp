#pragma once
// The [problem] section of heat configuration files (attnphys heat solve / dataset, training scripts): a box of
// n cells per axis with one boundary type on every side.
#include <cstdint>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"

namespace attnphys::heat {

struct HeatProblemOptions {
  int dim = 2;
  long nx = 64, ny = 64, nz = 1;  // cells per axis (unused axes ignored)
  double length = 1.0;            // box side: h = length / n per axis
  double kappa = 1.0;             // constant diffusivity (when kappa_random is false)
  bool kappa_random = false;      // random piecewise-smooth κ (random_kappa) instead
  double kappa_lo = 0.2, kappa_hi = 2.0, kappa_length_scale = 0.15;
  long kappa_seed = 0;
  BcType bc = BcType::Periodic;   // on every side
  double bc_value = 0.0;          // dirichlet: u on the boundary; neumann: heat flux in
  FaceMean face_mean = FaceMean::Harmonic;

  void declare(OptionSet& set, const std::string& section = "problem");
  HeatProblem build() const;  // validated
};

}  // namespace attnphys::heat
