#pragma once
// Random initial conditions and diffusivity fields for the heat problem, generated on the device.
//
// Sample s of a call with first index `first` is a pure function of (seed, first + s): the same sample index gives
// the same field whatever the batch it is generated in, on any backend. Fields are written to out[count, cells]
// (cells = nz·ny·nx in the (z, y, x) order of heat_problem.hpp), which reshapes without a copy to a solver state.
//
//   grf     — Gaussian random field, spectral: Σ_m sqrt(S(k_m)) (a_m cos k_m·x + b_m sin k_m·x) over the box's
//             Fourier modes k_m = 2π m / L, a, b ~ N(0, 1), normalised to standard deviation `amplitude`.
//             spectrum "gaussian": S = exp(-(|k| ℓ)²/2) (covariance exp(-r²/2ℓ²)); "matern": S = (1 + (|k| ℓ)²)^-(ν + d/2).
//             Modes beyond the grid's Nyquist wavenumber are left out.
//   fourier — Σ of `modes` random modes A cos(2π m·x/L + φ), integer m with |m_a| ≤ max_wavenumber, A ~ U(-1, 1).
//             In 3D the sum runs as three one-axis passes (it factorises along the axes): O(cells·modes^(1/3))
//             instead of O(cells·modes), so 64³ fields take milliseconds.
//   bumps   — Σ of `modes` Gaussian bumps A exp(-|x - c|²/2σ²), c uniform in the box (nearest image on periodic
//             axes), σ = bump_width·U(0.5, 1.5), A ~ U(-1, 1).
#include <cstdint>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"

namespace attnphys::heat {

enum class IcKind { Grf, Fourier, Bumps };
enum class GrfSpectrum { Gaussian, Matern };

}  // namespace attnphys::heat

namespace attnphys {
template <>
struct EnumNames<heat::IcKind> {
  static constexpr EnumName<heat::IcKind> values[] = {
      {heat::IcKind::Grf, "grf"}, {heat::IcKind::Fourier, "fourier"}, {heat::IcKind::Bumps, "bumps"}};
};
template <>
struct EnumNames<heat::GrfSpectrum> {
  static constexpr EnumName<heat::GrfSpectrum> values[] = {{heat::GrfSpectrum::Gaussian, "gaussian"},
                                                           {heat::GrfSpectrum::Matern, "matern"}};
};
}  // namespace attnphys

namespace attnphys::heat {

// The names as config files and Python spell them ("unknown initial condition kind 'x': use grf, fourier, bumps").
IcKind parse_ic_kind(const std::string& name);
GrfSpectrum parse_grf_spectrum(const std::string& name);

struct InitialConditionOptions {
  IcKind kind = IcKind::Grf;
  double length_scale = 0.1;          // grf: correlation length ℓ (same units as the grid)
  GrfSpectrum spectrum = GrfSpectrum::Gaussian;
  double nu = 1.5;                    // grf matern smoothness
  double amplitude = 1.0;             // overall scale
  long modes = 6;                     // fourier: number of modes; bumps: number of bumps
  long max_wavenumber = 4;            // fourier: largest |m_a|
  double bump_width = 0.08;           // bumps: typical σ
  void validate() const;
  void declare(OptionSet& set, const std::string& section = "ic");
  // A wavenumber typical of the fields (for choosing time steps): 1/ℓ, 2π·max_wavenumber/L or 1/bump_width.
  double typical_wavenumber(const HeatProblem& p) const;
};

// out[s, :] = field for sample index first + s. out must be [count, nz·ny·nx].
void initial_conditions(const HeatProblem& p, const InitialConditionOptions& o, std::uint64_t seed, long first,
                        const View2<double>& out);

// A random piecewise-smooth diffusivity: lo or hi on either side of the zero level set of one Gaussian random field
// (length scale ℓ), times exp(0.3·g) for a second one, so κ jumps across smooth interfaces and varies smoothly
// between them. Spatial shape (nz, ny, nx); deterministic for the seed; κ ≥ 0.6·lo.
View3<double> random_kappa(const HeatProblem& p, double lo, double hi, double length_scale, std::uint64_t seed);
// The same from the two Gaussian random fields of sample indices first and first + 1 (random_kappa uses 2^40).
View3<double> random_kappa_at(const HeatProblem& p, double lo, double hi, double length_scale, std::uint64_t seed,
                              long first);

}  // namespace attnphys::heat
