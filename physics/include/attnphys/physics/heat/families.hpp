#pragma once
// Problem families for operator learning: every sample of a dataset gets its own random diffusivity κ(x), source
// f(x) and boundary data, drawn from the distributions below. The base problem (physics/heat/problem_options.hpp)
// gives the grid, the boundary types and the constant κ; a family says what varies from sample to sample.
//
//   kappa    constant  — the base problem's κ (a constant, or one random field shared by all samples)
//            piecewise — random_kappa per sample: lo or hi across the zero set of a Gaussian random field (length
//                        scale ℓ_κ), times exp(0.3·g) for a second one (κ jumps across smooth interfaces)
//            lognormal — log κ an affine image of a Gaussian random field g (length scale ℓ_κ) onto
//                        [log κ̄ − ln(C)/2, log κ̄ + ln(C)/2]: κ = κ̄·exp(ln(C)·(g − mid)/(max g − min g)), so
//                        every sample spans κ̄/√C .. κ̄·√C (contrast max/min = C) with no clipped plateaus
//   source   none | grf — a static f(x): a Gaussian random field of length scale ℓ_f and standard deviation A_f
//   boundary zero | random — on every non-periodic side, static data varying along the face:
//                        A_b·(c0 + Σ_q a_q cos(2π(m1 s1/L1 + m2 s2/L2) + φ_q)/sqrt(K)), c0, a_q ~ U(−1, 1),
//                        m ∈ {0, 1, 2} per tangential axis, K = boundary_modes (1D: the constant c0 only). It is
//                        the value of u (Dirichlet) or the heat flux in (Neumann) on the face.
//
// Sample i's κ, f and boundary data are pure functions of (seed, i) and are independent of its initial condition
// (initial_conditions.hpp streams 0 .. 2^40), so any sample can be regenerated alone (sample_problem).
#include <cstdint>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"

namespace attnphys::heat {

enum class KappaFamily { Constant, Piecewise, LogNormal };
enum class SourceFamily { None, Grf };
enum class BoundaryFamily { Zero, Random };

}  // namespace attnphys::heat

namespace attnphys {
template <>
struct EnumNames<heat::KappaFamily> {
  static constexpr EnumName<heat::KappaFamily> values[] = {{heat::KappaFamily::Constant, "constant"},
                                                           {heat::KappaFamily::Piecewise, "piecewise"},
                                                           {heat::KappaFamily::LogNormal, "lognormal"}};
};
template <>
struct EnumNames<heat::SourceFamily> {
  static constexpr EnumName<heat::SourceFamily> values[] = {{heat::SourceFamily::None, "none"},
                                                            {heat::SourceFamily::Grf, "grf"}};
};
template <>
struct EnumNames<heat::BoundaryFamily> {
  static constexpr EnumName<heat::BoundaryFamily> values[] = {{heat::BoundaryFamily::Zero, "zero"},
                                                              {heat::BoundaryFamily::Random, "random"}};
};
}  // namespace attnphys

namespace attnphys::heat {

struct HeatFamily {
  KappaFamily kappa = KappaFamily::Constant;
  double kappa_lo = 0.2, kappa_hi = 2.0;  // piecewise levels
  double kappa_contrast = 10.0;           // lognormal: max κ / min κ of every sample
  double kappa_length_scale = 0.15;
  SourceFamily source = SourceFamily::None;
  double source_amplitude = 1.0, source_length_scale = 0.2;
  BoundaryFamily boundary = BoundaryFamily::Zero;
  double boundary_amplitude = 1.0;
  long boundary_modes = 3;
  std::uint64_t seed = 0;

  // Anything drawn per sample?
  bool per_sample() const {
    return kappa != KappaFamily::Constant || source != SourceFamily::None || boundary != BoundaryFamily::Zero;
  }
  // Sample `index`'s problem: the base problem with its own κ field, source field and boundary profiles (the base's
  // boundary types). Constant parts are the base's.
  HeatProblem sample_problem(const HeatProblem& base, long index) const;
  // An upper bound of κ over every sample of the family (for a time step that does not depend on the sample).
  double kappa_bound(const HeatProblem& base) const;
  // "kappa=lognormal(contrast 10, length 0.15), source=grf(amplitude 1, length 0.2), boundary=zero"
  std::string describe() const;
};

std::string to_string(KappaFamily k);
std::string to_string(SourceFamily s);
std::string to_string(BoundaryFamily b);

// The [family] section of `attnphys heat dataset` configurations (the kinds read by name into the enums).
struct HeatFamilyOptions {
  KappaFamily kappa = KappaFamily::Constant;
  double kappa_lo = 0.2, kappa_hi = 2.0, kappa_contrast = 10.0, kappa_length_scale = 0.15;
  SourceFamily source = SourceFamily::None;
  double source_amplitude = 1.0, source_length_scale = 0.2;
  BoundaryFamily boundary = BoundaryFamily::Zero;
  double boundary_amplitude = 1.0;
  long boundary_modes = 3;
  void declare(OptionSet& set, const std::string& section = "family");
  // seed: the dataset seed. Refuses combinations that cannot work (random boundary data on a periodic box, a
  // contrast below 1, ...) with a message that says what to change.
  HeatFamily build(const HeatProblem& base, std::uint64_t seed) const;
};

// The boundary data as a field on the grid: in every cell next to a non-periodic side, the data of that side's
// face (u for Dirichlet, the flux in for Neumann) at the cell's face centre, averaged over the faces the cell
// touches (edges and corners); 0 in the interior and on periodic axes. Spatial shape (nz, ny, nx), host memory.
HostView3<double> boundary_field(const HeatProblem& p);
// The data of one side's face at its face centres, in the file order of the tangential axes (the lower axis
// slowest): 1D one value, 2D n_other values, 3D n_t1·n_t2 values.
std::vector<double> face_data(const HeatProblem& p, int axis, int side);

}  // namespace attnphys::heat
