#pragma once
// The diffusivity law of the nonlinear heat equation u_t = ∇·(κ(u) ∇u) + f (solved by solvers/fd/nonlinear_heat.hpp):
//
//   quadratic — κ(u) = κ0 (1 + β u²), κ0 > 0 and β ≥ 0 (so κ ≥ κ0 > 0 for every u; a κ that falls with u is a
//               table);
//   table     — κ piecewise linear in u through the points (u_i, κ_i), u strictly increasing, κ_i > 0, at least
//               two points, all finite; constant (κ_0, κ_last) outside [u_0, u_last] (clamped).
//
// KappaLaw is the host description (validated, with host evaluation and dκ/du); KappaFn is its device-callable
// copy (the table in device memory) for Kokkos kernels. Both evaluate with the same code (kappa_law_eval), so a
// host value equals the device value bit for bit. A NaN u gives a NaN κ (callers refuse it), never a clamped value.
#include <limits>
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::heat {

enum class KappaKind { Quadratic, Table };
// nonlinear.law: none (linear), or one of the kinds.
enum class KappaLawChoice { None, Quadratic, Table };

}  // namespace attnphys::heat

namespace attnphys {
template <>
struct EnumNames<heat::KappaKind> {
  static constexpr EnumName<heat::KappaKind> values[] = {{heat::KappaKind::Quadratic, "quadratic"},
                                                         {heat::KappaKind::Table, "table"}};
};
template <>
struct EnumNames<heat::KappaLawChoice> {
  static constexpr EnumName<heat::KappaLawChoice> values[] = {{heat::KappaLawChoice::None, "none"},
                                                              {heat::KappaLawChoice::Quadratic, "quadratic"},
                                                              {heat::KappaLawChoice::Table, "table"}};
};
}  // namespace attnphys

namespace attnphys::heat {

KappaKind parse_kappa_kind(const std::string& name);  // "quadratic" | "table"
std::string to_string(KappaKind k);

// κ(v) for either kind; tu/tk are the table's n points (ignored for Quadratic).
KOKKOS_INLINE_FUNCTION double kappa_law_eval(KappaKind kind, double kappa0, double beta, const double* tu,
                                             const double* tk, long n, double v) {
  if (kind == KappaKind::Quadratic) return kappa0 * (1.0 + beta * v * v);
  if (math::isnan(v)) return v;
  if (v <= tu[0]) return tk[0];
  if (v >= tu[n - 1]) return tk[n - 1];
  long lo = 0, hi = n - 1;  // tu[lo] < v < tu[hi]
  while (hi - lo > 1) {
    const long mid = (lo + hi) / 2;
    if (tu[mid] <= v)
      lo = mid;
    else
      hi = mid;
  }
  const double w = (v - tu[lo]) / (tu[hi] - tu[lo]);
  return tk[lo] + w * (tk[hi] - tk[lo]);
}

// Device-callable κ(u): capture by copy in a KOKKOS_LAMBDA.
struct KappaFn {
  KappaKind kind = KappaKind::Quadratic;
  double kappa0 = 1.0, beta = 0.0;
  View1<double> u, k;  // table points (Table only)
  long n = 0;
  KOKKOS_INLINE_FUNCTION double operator()(double v) const {
    return kappa_law_eval(kind, kappa0, beta, n ? u.data() : nullptr, n ? k.data() : nullptr, n, v);
  }
};

struct KappaLaw {
  KappaKind kind = KappaKind::Quadratic;
  double kappa0 = 1.0, beta = 0.0;             // quadratic
  std::vector<double> table_u, table_kappa;    // table

  // Validated constructors; they refuse what the header comment excludes, saying which value is wrong.
  static KappaLaw quadratic(double kappa0, double beta);
  static KappaLaw table(std::vector<double> u, std::vector<double> kappa);
  // A table of `points` equally spaced samples of this law on [u_lo, u_hi].
  KappaLaw sampled(double u_lo, double u_hi, long points) const;
  void validate() const;

  // Host evaluation (same code as the device) and dκ/du (the table's slope inside an interval, 0 outside it; at a
  // table point, the slope of the interval to its right).
  double operator()(double u) const;
  double derivative(double u) const;
  // Smallest and largest κ over u in [lo, hi] (lo <= hi).
  double min_over(double lo, double hi) const;
  double max_over(double lo, double hi) const;
  // The device copy (allocates the table on the device; build it once, outside loops).
  KappaFn device() const;
  std::string describe() const;  // "quadratic kappa0=1 beta=2" / "table of 5 points on [0, 1]"
};

// The [nonlinear] section of configuration files: nonlinear.law = none | quadratic | table, nonlinear.kappa0,
// nonlinear.beta, nonlinear.table_u, nonlinear.table_kappa. (The Picard solver's keys, nonlinear.picard_max etc.,
// are declared by fd::NonlinearHeatOptions in the same section.)
struct KappaLawOptions {
  KappaLawChoice law = KappaLawChoice::None;
  double kappa0 = 1.0;
  double beta = 0.0;
  std::vector<double> table_u, table_kappa;

  void declare(OptionSet& set, const std::string& section = "nonlinear");
  bool enabled() const { return law != KappaLawChoice::None; }
  // The validated law; refuses law = none (check enabled() first) and table keys given for a quadratic law.
  KappaLaw build() const;
};

}  // namespace attnphys::heat
