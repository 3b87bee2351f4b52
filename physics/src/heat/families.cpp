#include "attnphys/physics/heat/families.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "attnphys/core/random.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"

namespace attnphys::heat {

namespace {
// Streams of the per-sample draws (sample indices of initial conditions stay below 2^40, random_kappa's shared
// field is at 2^40).
constexpr long kKappaFamilyStream = 1L << 41;   // 2 fields per sample
constexpr long kSourceFamilyStream = 1L << 42;  // 1 field per sample
constexpr std::uint64_t kBoundaryStream = 1ULL << 43;

// A static boundary profile along a face: c0 + Σ_q a_q cos(2π(m1 s1/L1 + m2 s2/L2) + φ_q)/sqrt(K), times amp.
struct FaceProfile {
  double amp = 1.0, c0 = 0.0;
  int t1 = -1, t2 = -1;  // tangential axes (-1: none)
  double L1 = 1.0, L2 = 1.0;
  std::vector<double> a, m1, m2, phi;
  double operator()(double x, double y, double z) const {
    const double pos[3] = {x, y, z};
    double v = c0;
    const double norm = a.empty() ? 1.0 : 1.0 / std::sqrt(double(a.size()));
    for (std::size_t q = 0; q < a.size(); ++q) {
      double th = phi[q];
      if (t1 >= 0) th += 2 * M_PI * m1[q] * pos[t1] / L1;
      if (t2 >= 0) th += 2 * M_PI * m2[q] * pos[t2] / L2;
      v += norm * a[q] * std::cos(th);
    }
    return amp * v;
  }
};

}  // namespace

std::string to_string(KappaFamily k) { return enum_name(k); }
std::string to_string(SourceFamily s) { return enum_name(s); }
std::string to_string(BoundaryFamily b) { return enum_name(b); }

HeatProblem HeatFamily::sample_problem(const HeatProblem& base, long index) const {
  require(index >= 0, "sample index must be >= 0, got ", index);
  HeatProblem p = base;
  const auto e = base.spatial_extents();
  const long cells = e[0] * e[1] * e[2];
  if (kappa == KappaFamily::Piecewise) {
    p.kappa_field = random_kappa_at(base, kappa_lo, kappa_hi, kappa_length_scale, seed, kKappaFamilyStream + 2 * index);
  } else if (kappa == KappaFamily::LogNormal) {
    InitialConditionOptions o;
    o.length_scale = kappa_length_scale;
    View2<double> g("attnphys::lognormal_grf", 1, cells);
    initial_conditions(base, o, seed, kKappaFamilyStream + 2 * index, g);
    View3<double> k("attnphys::lognormal_kappa", e[0], e[1], e[2]);
    // log κ an affine map of g onto [log κ̄ − ln(C)/2, log κ̄ + ln(C)/2]: the sample's contrast is C exactly.
    double gmin = 0.0, gmax = 0.0;
    Kokkos::parallel_reduce(
        "attnphys::lognormal_range", Kokkos::RangePolicy<ExecSpace>(0, cells),
        KOKKOS_LAMBDA(const long c, double& lo, double& hi) {
          lo = math::fmin(lo, g(0, c));
          hi = math::fmax(hi, g(0, c));
        },
        Kokkos::Min<double>(gmin), Kokkos::Max<double>(gmax));
    const double mid = 0.5 * (gmin + gmax), range = gmax - gmin;
    const double mean = base.kappa, s = range > 0 ? std::log(kappa_contrast) / range : 0.0;
    Kokkos::parallel_for(
        "attnphys::lognormal_kappa", Kokkos::RangePolicy<ExecSpace>(0, cells), KOKKOS_LAMBDA(const long c) {
          k.data()[c] = mean * math::exp(s * (g(0, c) - mid));
        });
    p.kappa_field = k;
  }
  if (source == SourceFamily::Grf) {
    InitialConditionOptions o;
    o.length_scale = source_length_scale;
    o.amplitude = source_amplitude;
    View2<double> f("attnphys::family_source", 1, cells);
    initial_conditions(base, o, seed, kSourceFamilyStream + index, f);
    p.source_field = View3<double>("attnphys::family_source_field", e[0], e[1], e[2]);
    Kokkos::deep_copy(p.source_field, View3<double>(f.data(), e[0], e[1], e[2]));
  }
  if (boundary == BoundaryFamily::Random) {
    const int dim = base.grid.dim;
    for (int a = 0; a < dim; ++a) {
      if (base.periodic(a)) continue;
      for (int side = 0; side < 2; ++side) {
        CounterRng r(seed, kBoundaryStream + std::uint64_t(index), std::uint64_t(1000 * (2 * a + side)));
        FaceProfile f;
        f.amp = boundary_amplitude;
        int t[2] = {-1, -1}, nt = 0;
        for (int b = 0; b < dim; ++b)
          if (b != a) t[nt++] = b;
        f.t1 = t[0];
        f.t2 = t[1];
        if (f.t1 >= 0) f.L1 = base.grid.length(f.t1);
        if (f.t2 >= 0) f.L2 = base.grid.length(f.t2);
        f.c0 = 2 * r.uniform() - 1;
        if (nt > 0)
          for (long q = 0; q < boundary_modes; ++q) {
            f.a.push_back(2 * r.uniform() - 1);
            f.m1.push_back(double(r.below(3)));
            f.m2.push_back(nt > 1 ? double(r.below(3)) : 0.0);
            f.phi.push_back(2 * M_PI * r.uniform());
          }
        p.bc[a][side] = BoundaryCondition::profile(
            base.bc[a][side].type, [f](double x, double y, double z, double) { return f(x, y, z); });
      }
    }
  }
  p.validate();
  return p;
}

double HeatFamily::kappa_bound(const HeatProblem& base) const {
  switch (kappa) {
    case KappaFamily::Constant: return base.kappa_max();
    case KappaFamily::Piecewise: return std::max(kappa_lo, kappa_hi) * std::exp(0.3 * 1.7);
    case KappaFamily::LogNormal: return base.kappa * std::sqrt(kappa_contrast);
  }
  return base.kappa_max();
}

std::string HeatFamily::describe() const {
  std::ostringstream s;
  s << "kappa=" << to_string(kappa);
  if (kappa == KappaFamily::Piecewise)
    s << "(lo " << kappa_lo << ", hi " << kappa_hi << ", length " << kappa_length_scale << ")";
  if (kappa == KappaFamily::LogNormal) s << "(contrast " << kappa_contrast << ", length " << kappa_length_scale << ")";
  s << ", source=" << to_string(source);
  if (source == SourceFamily::Grf) s << "(amplitude " << source_amplitude << ", length " << source_length_scale << ")";
  s << ", boundary=" << to_string(boundary);
  if (boundary == BoundaryFamily::Random) s << "(amplitude " << boundary_amplitude << ", modes " << boundary_modes << ")";
  return s.str();
}

void HeatFamilyOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".kappa", &kappa,
          "per-sample diffusivity: constant (the problem's), piecewise (random_kappa) or lognormal (Gaussian random "
          "field in log kappa)");
  set.add(s + ".kappa_lo", &kappa_lo, "piecewise: low level", Range::positive());
  set.add(s + ".kappa_hi", &kappa_hi, "piecewise: high level", Range::positive());
  set.add(s + ".kappa_contrast", &kappa_contrast, "lognormal: bound of max/min kappa (around problem.kappa)",
          Range::closed(1.0, 1e4));
  set.add(s + ".kappa_length_scale", &kappa_length_scale, "correlation length of the kappa fields", Range::positive());
  set.add(s + ".source", &source, "per-sample static source f(x): none or grf");
  set.add(s + ".source_amplitude", &source_amplitude, "grf source: standard deviation", Range::non_negative());
  set.add(s + ".source_length_scale", &source_length_scale, "grf source: correlation length", Range::positive());
  set.add(s + ".boundary", &boundary,
          "per-sample boundary data on the non-periodic sides (u for dirichlet, flux in for neumann): zero or random");
  set.add(s + ".boundary_amplitude", &boundary_amplitude, "random boundary data: scale", Range::non_negative());
  set.add(s + ".boundary_modes", &boundary_modes, "random boundary data: cosine modes along each face",
          Range::non_negative());
}

HeatFamily HeatFamilyOptions::build(const HeatProblem& base, std::uint64_t seed) const {
  HeatFamily f;
  f.kappa = kappa;
  f.source = source;
  f.boundary = boundary;
  f.kappa_lo = kappa_lo;
  f.kappa_hi = kappa_hi;
  f.kappa_contrast = kappa_contrast;
  f.kappa_length_scale = kappa_length_scale;
  f.source_amplitude = source_amplitude;
  f.source_length_scale = source_length_scale;
  f.boundary_amplitude = boundary_amplitude;
  f.boundary_modes = boundary_modes;
  f.seed = seed;
  require(kappa_lo > 0 && kappa_hi > 0 && std::isfinite(kappa_lo) && std::isfinite(kappa_hi),
          "family.kappa_lo and kappa_hi must be positive, got ", kappa_lo, " and ", kappa_hi);
  require(kappa_contrast >= 1 && std::isfinite(kappa_contrast), "family.kappa_contrast must be >= 1 (max/min kappa), got ",
          kappa_contrast);
  require(kappa_length_scale > 0 && source_length_scale > 0, "family length scales must be positive");
  require(boundary_modes >= 0, "family.boundary_modes must be >= 0, got ", boundary_modes);
  if (f.kappa != KappaFamily::Constant)
    require(!base.variable_kappa(), "family.kappa = ", enum_name(kappa),
            " draws kappa per sample, but problem.kappa_random is also set: use one of them");
  if (f.kappa == KappaFamily::LogNormal)
    require(base.kappa > 0, "family.kappa = lognormal is centred on problem.kappa, which is ", base.kappa,
            ": set problem.kappa > 0");
  if (f.boundary == BoundaryFamily::Random) {
    bool any = false;
    for (int a = 0; a < base.grid.dim; ++a) any = any || !base.periodic(a);
    require(any, "family.boundary = random needs non-periodic sides: set problem.bc = dirichlet or neumann");
    for (int a = 0; a < base.grid.dim; ++a)
      for (int s = 0; s < 2; ++s)
        require(base.bc[a][s].type == BcType::Periodic || !base.bc[a][s].nonzero(), "family.boundary = random ",
                "draws the boundary data; problem.bc_value must then be 0");
  }
  return f;
}

namespace {
// The data of side (a, s) at the face centre next to cell (i, j, k).
double side_value(const HeatProblem& p, int a, int s, long i, long j, long k) {
  const auto& g = p.grid;
  double pos[3] = {p.coord(0, i), g.dim >= 2 ? p.coord(1, j) : 0.0, g.dim >= 3 ? p.coord(2, k) : 0.0};
  pos[a] = s == 0 ? 0.0 : g.length(a);
  return p.bc[a][s].at(pos[0], pos[1], pos[2], 0.0);
}
}  // namespace

HostView3<double> boundary_field(const HeatProblem& p) {
  const auto e = p.spatial_extents();
  HostView3<double> out("attnphys::boundary_field", e[0], e[1], e[2]);
  const auto& g = p.grid;
  for (long k = 0; k < e[0]; ++k)
    for (long j = 0; j < e[1]; ++j)
      for (long i = 0; i < e[2]; ++i) {
        const long idx[3] = {i, j, k};
        double sum = 0.0;
        int faces = 0;
        for (int a = 0; a < g.dim; ++a) {
          if (p.periodic(a)) continue;
          for (int s = 0; s < 2; ++s)
            if (idx[a] == (s == 0 ? 0 : g.n[a] - 1)) sum += side_value(p, a, s, i, j, k), ++faces;
        }
        out(k, j, i) = faces ? sum / faces : 0.0;
      }
  return out;
}

std::vector<double> face_data(const HeatProblem& p, int axis, int side) {
  const auto& g = p.grid;
  require(axis >= 0 && axis < g.dim && (side == 0 || side == 1), "face_data: no side ", side, " of axis ", axis);
  int t[2] = {-1, -1}, nt = 0;
  for (int b = 0; b < g.dim; ++b)
    if (b != axis) t[nt++] = b;
  const long n1 = nt > 0 ? g.n[t[0]] : 1, n2 = nt > 1 ? g.n[t[1]] : 1;
  std::vector<double> v;
  v.reserve(std::size_t(n1 * n2));
  for (long u = 0; u < n1; ++u)
    for (long w = 0; w < n2; ++w) {
      long idx[3] = {0, 0, 0};
      if (nt > 0) idx[t[0]] = u;
      if (nt > 1) idx[t[1]] = w;
      v.push_back(side_value(p, axis, side, idx[0], idx[1], idx[2]));
    }
  return v;
}

}  // namespace attnphys::heat
