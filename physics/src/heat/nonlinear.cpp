#include "attnphys/physics/heat/nonlinear.hpp"

#include <algorithm>
#include <cmath>

namespace attnphys::heat {

KappaKind parse_kappa_kind(const std::string& name) {
  if (auto k = find_enum<KappaKind>(name)) return *k;
  fail("unknown diffusivity law '", name, "': use quadratic (kappa0 (1 + beta u^2)) or table");
}

std::string to_string(KappaKind k) { return enum_name(k); }

KappaLaw KappaLaw::quadratic(double kappa0, double beta) {
  KappaLaw l;
  l.kind = KappaKind::Quadratic;
  l.kappa0 = kappa0;
  l.beta = beta;
  l.validate();
  return l;
}

KappaLaw KappaLaw::table(std::vector<double> u, std::vector<double> kappa) {
  KappaLaw l;
  l.kind = KappaKind::Table;
  l.table_u = std::move(u);
  l.table_kappa = std::move(kappa);
  l.validate();
  return l;
}

KappaLaw KappaLaw::sampled(double u_lo, double u_hi, long points) const {
  require(points >= 2, "a sampled kappa table needs at least 2 points, got ", points);
  require(std::isfinite(u_lo) && std::isfinite(u_hi) && u_hi > u_lo, "a sampled kappa table needs finite u_lo < u_hi, got [",
          u_lo, ", ", u_hi, "]");
  std::vector<double> u(points), k(points);
  for (long i = 0; i < points; ++i) {
    u[i] = i + 1 == points ? u_hi : u_lo + (u_hi - u_lo) * double(i) / double(points - 1);
    k[i] = (*this)(u[i]);
  }
  return table(std::move(u), std::move(k));
}

void KappaLaw::validate() const {
  if (kind == KappaKind::Quadratic) {
    require(std::isfinite(kappa0) && kappa0 > 0, "nonlinear diffusivity: kappa0 must be positive and finite, got ",
            kappa0);
    require(std::isfinite(beta) && beta >= 0, "nonlinear diffusivity: beta must be finite and >= 0 (kappa0 (1 + beta "
            "u^2) must stay positive for every u), got ", beta, "; give a decreasing kappa(u) as a table");
    return;
  }
  const auto& u = table_u;
  const auto& k = table_kappa;
  require(u.size() == k.size(), "nonlinear diffusivity table: table_u has ", u.size(), " value(s) but table_kappa has ",
          k.size(), "; give one kappa per u");
  require(u.size() >= 2, "nonlinear diffusivity table: needs at least 2 points (u, kappa), got ", u.size());
  for (std::size_t i = 0; i < u.size(); ++i) {
    require(std::isfinite(u[i]), "nonlinear diffusivity table: table_u[", i, "] = ", u[i], " is not finite");
    require(std::isfinite(k[i]) && k[i] > 0, "nonlinear diffusivity table: table_kappa[", i, "] = ", k[i],
            " must be positive and finite (kappa > 0 everywhere keeps the problem parabolic)");
    // (not one require(i == 0 || ...): its message arguments, u[i - 1] among them, are evaluated even for i = 0)
    if (i > 0)
      require(u[i] > u[i - 1], "nonlinear diffusivity table: table_u must be strictly increasing, but table_u[", i,
              "] = ", u[i], " <= table_u[", i - 1, "] = ", u[i - 1]);
  }
}

double KappaLaw::operator()(double v) const {
  const long n = static_cast<long>(table_u.size());
  return kappa_law_eval(kind, kappa0, beta, n ? table_u.data() : nullptr, n ? table_kappa.data() : nullptr, n, v);
}

double KappaLaw::derivative(double v) const {
  if (kind == KappaKind::Quadratic) return 2.0 * kappa0 * beta * v;
  const auto& u = table_u;
  const auto& k = table_kappa;
  if (!(v >= u.front() && v < u.back())) return 0.0;
  const std::size_t i = std::upper_bound(u.begin(), u.end(), v) - u.begin() - 1;
  return (k[i + 1] - k[i]) / (u[i + 1] - u[i]);
}

double KappaLaw::min_over(double lo, double hi) const {
  require(lo <= hi, "min_over: lo = ", lo, " > hi = ", hi);
  if (kind == KappaKind::Quadratic) return (lo <= 0 && hi >= 0) ? kappa0 : std::min((*this)(lo), (*this)(hi));
  double m = std::min((*this)(lo), (*this)(hi));  // piecewise linear: the extremes are at the ends or table points
  for (std::size_t i = 0; i < table_u.size(); ++i)
    if (table_u[i] > lo && table_u[i] < hi) m = std::min(m, table_kappa[i]);
  return m;
}

double KappaLaw::max_over(double lo, double hi) const {
  require(lo <= hi, "max_over: lo = ", lo, " > hi = ", hi);
  double m = std::max((*this)(lo), (*this)(hi));
  if (kind == KappaKind::Table)
    for (std::size_t i = 0; i < table_u.size(); ++i)
      if (table_u[i] > lo && table_u[i] < hi) m = std::max(m, table_kappa[i]);
  return m;
}

KappaFn KappaLaw::device() const {
  validate();
  KappaFn f;
  f.kind = kind;
  f.kappa0 = kappa0;
  f.beta = beta;
  if (kind == KappaKind::Table) {
    f.n = static_cast<long>(table_u.size());
    f.u = View1<double>("attnphys::kappa_table_u", f.n);
    f.k = View1<double>("attnphys::kappa_table_kappa", f.n);
    HostView1<const double> hu(table_u.data(), f.n), hk(table_kappa.data(), f.n);
    Kokkos::deep_copy(f.u, hu);
    Kokkos::deep_copy(f.k, hk);
  }
  return f;
}

std::string KappaLaw::describe() const {
  if (kind == KappaKind::Quadratic) return msg("quadratic kappa0=", kappa0, " beta=", beta);
  return msg("table of ", table_u.size(), " points on [", table_u.front(), ", ", table_u.back(), "]");
}

void KappaLawOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".law", &law, "nonlinear diffusivity kappa(u): none (linear), quadratic (kappa0 (1 + beta u^2)) or "
          "table (piecewise linear through table_u, table_kappa)");
  set.add(s + ".kappa0", &kappa0, "quadratic law: kappa at u = 0", Range::positive());
  set.add(s + ".beta", &beta, "quadratic law: beta in kappa0 (1 + beta u^2)", Range::non_negative());
  set.add(s + ".table_u", &table_u, "table law: u values, strictly increasing (kappa is clamped outside them)");
  set.add(s + ".table_kappa", &table_kappa, "table law: kappa at each table_u, all > 0", Range::positive());
}

KappaLaw KappaLawOptions::build() const {
  require(enabled(), "nonlinear.law = none: there is no nonlinear diffusivity to build (check enabled() first)");
  if (law == KappaLawChoice::Quadratic) {
    require(table_u.empty() && table_kappa.empty(), "nonlinear.table_u / nonlinear.table_kappa are set but "
            "nonlinear.law = quadratic ignores them: set nonlinear.law = table or remove the table");
    return KappaLaw::quadratic(kappa0, beta);
  }
  return KappaLaw::table(table_u, table_kappa);
}

}  // namespace attnphys::heat
