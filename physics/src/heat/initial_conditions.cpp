#include "attnphys/physics/heat/initial_conditions.hpp"

#include <algorithm>
#include <cmath>

#include "attnphys/core/random.hpp"

namespace attnphys::heat {

IcKind parse_ic_kind(const std::string& name) {
  if (auto k = find_enum<IcKind>(name)) return *k;
  fail("unknown initial condition kind '", name, "': use ", enum_list<IcKind>());
}

GrfSpectrum parse_grf_spectrum(const std::string& name) {
  if (auto s = find_enum<GrfSpectrum>(name)) return *s;
  fail("unknown spectrum '", name, "': use ", enum_list<GrfSpectrum>());
}

void InitialConditionOptions::validate() const {
  require(length_scale > 0 && std::isfinite(length_scale), "ic length_scale must be positive, got ", length_scale);
  require(modes >= 1 && max_wavenumber >= 1 && bump_width > 0 && nu > 0,
          "ic modes, max_wavenumber, bump_width and nu must be positive");
}

void InitialConditionOptions::declare(OptionSet& set, const std::string& section) {
  set.add(section + ".kind", &kind, "random initial condition: grf, fourier or bumps");
  set.add(section + ".length_scale", &length_scale, "grf correlation length", Range::positive());
  set.add(section + ".spectrum", &spectrum, "grf spectrum: gaussian or matern");
  set.add(section + ".nu", &nu, "grf matern smoothness", Range::positive());
  set.add(section + ".amplitude", &amplitude, "overall scale of the fields", Range::non_negative());
  set.add(section + ".modes", &modes, "fourier: number of modes; bumps: number of bumps", Range::at_least(1));
  set.add(section + ".max_wavenumber", &max_wavenumber, "fourier: largest integer wavenumber per axis",
          Range::at_least(1));
  set.add(section + ".bump_width", &bump_width, "bumps: typical width", Range::positive());
}

double InitialConditionOptions::typical_wavenumber(const HeatProblem& p) const {
  double lmin = p.grid.length(0);
  for (int a = 1; a < p.grid.dim; ++a) lmin = std::min(lmin, p.grid.length(a));
  if (kind == IcKind::Grf) return 1.0 / length_scale;
  if (kind == IcKind::Fourier) return 2 * M_PI * max_wavenumber / lmin;
  return 1.0 / bump_width;
}

namespace {
constexpr std::uint64_t kKappaStream = 1ULL << 40;  // streams of κ fields, far from sample indices

// Row a (of m, wavenumber a − M): cos(2π (a − M) x_i / L) for the n cell coordinates x_i = x0 + i h, then the sines.
// An absent axis (L = 0, one mode) gets cos 1 and sin 0.
View2<double> phase_table(const char* label, long m, long M, long n, double x0, double h, double L) {
  View2<double> t(std::string(label), m, 2 * n);
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(0, m * n), KOKKOS_LAMBDA(const long k) {
        const long a = k / n, i = k - a * n;
        const double th = L > 0 ? 2 * M_PI * (a - M) * (x0 + i * h) / L : 0.0;
        t(a, i) = math::cos(th);
        t(a, n + i) = math::sin(th);
      });
  return t;
}
}  // namespace

void initial_conditions(const HeatProblem& p, const InitialConditionOptions& o, std::uint64_t seed, long first,
                        const View2<double>& out) {
  ScopedRegion region("attnphys::heat_initial_conditions");
  p.validate();
  o.validate();
  const auto e = p.spatial_extents();
  const long cells = e[0] * e[1] * e[2], count = out.extent(0);
  require(long(out.extent(1)) == cells, "initial conditions: output has ", out.extent(1), " cells per sample, the grid ",
          cells);
  if (count == 0) return;
  const int dim = p.grid.dim;
  const long nx = e[2], ny = e[1];
  double L[3], x0[3], h[3];
  bool per[3];
  for (int a = 0; a < 3; ++a) {
    L[a] = p.grid.length(a);
    h[a] = p.grid.h[a];
    per[a] = a < dim && p.periodic(a);
    x0[a] = per[a] ? 0.0 : 0.5 * h[a];  // coordinate of cell 0
  }
  const double Lx = L[0], Ly = L[1], Lz = L[2], hx = h[0], hy = h[1], hz = h[2];
  const double x0x = x0[0], x0y = x0[1], x0z = x0[2];
  const double amp = o.amplitude;
  if (o.kind == IcKind::Grf) {
    // Mode range per axis: up to where the spectrum has fallen by 1e-8 (gaussian), capped at Nyquist.
    long M[3] = {0, 0, 0};
    for (int a = 0; a < dim; ++a) {
      const long nyq = p.grid.n[a] / 2;
      long m = nyq;
      if (o.spectrum == GrfSpectrum::Gaussian)
        m = std::min(nyq, long(std::ceil(std::sqrt(2 * std::log(1e8)) / o.length_scale * L[a] / (2 * M_PI))));
      M[a] = std::max(1L, m);
    }
    const long mx = 2 * M[0] + 1, my = 2 * M[1] + 1, mz = 2 * M[2] + 1, modes = mx * my * mz;
    const long Mx = M[0], My = M[1], Mz = M[2];
    View1<double> weight("attnphys::grf_weight", modes);
    const bool gauss = o.spectrum == GrfSpectrum::Gaussian;
    const double ell = o.length_scale, expo = -(o.nu + 0.5 * dim);
    Kokkos::parallel_for(
        "attnphys::grf_spectrum", Kokkos::RangePolicy<ExecSpace>(0, modes), KOKKOS_LAMBDA(const long q) {
          const long a = q % mx - Mx, b = (q / mx) % my - My, c = q / (mx * my) - Mz;
          const double kx = 2 * M_PI * a / Lx, ky = 2 * M_PI * b / Ly, kz = 2 * M_PI * c / Lz;
          const double k2 = (kx * kx + ky * ky + kz * kz) * ell * ell;
          weight(q) = gauss ? math::exp(-0.5 * k2) : math::pow(1.0 + k2, expo);
        });
    double total = 0.0;
    Kokkos::parallel_reduce(
        "attnphys::grf_norm", Kokkos::RangePolicy<ExecSpace>(0, modes),
        KOKKOS_LAMBDA(const long q, double& s) { s += weight(q); }, total);
    const double norm = total > 0 ? amp / std::sqrt(total) : 0.0;
    View3<double> coef("attnphys::grf_coef", count, modes, 2);
    Kokkos::parallel_for(
        "attnphys::grf_coefficients", Kokkos::RangePolicy<ExecSpace>(0, count * modes), KOKKOS_LAMBDA(const long t) {
          const long s = t / modes, q = t - s * modes;
          CounterRng r(seed, std::uint64_t(first + s), 4 * std::uint64_t(q));
          const double w = math::sqrt(weight(q)) * norm;
          coef(s, q, 0) = w * r.normal();
          coef(s, q, 1) = w * r.normal();
        });
    // u = Re Σ_abc C_abc e^{i(kx_a x + ky_b y + kz_c z)}, C = A − iB, summed one axis at a time (absent axes have one
    // mode, k = 0): T1(s, c, b, x) = Σ_a C e^{i kx_a x}, T2(s, c, y, x) = Σ_b T1 e^{i ky_b y},
    // u(s, z, y, x) = Re Σ_c T2 e^{i kz_c z}. The phases come from per-axis tables, so the passes are multiply-adds:
    // O(modes^(1/dim)) work per cell and pass instead of O(modes) sines and cosines per cell.
    const long nz = e[0];
    const View2<double> px = phase_table("attnphys::grf_phase_x", mx, Mx, nx, x0x, hx, Lx);
    const View2<double> py = phase_table("attnphys::grf_phase_y", my, My, ny, x0y, hy, Ly);
    const View2<double> pz = phase_table("attnphys::grf_phase_z", mz, Mz, nz, x0z, hz, Lz);
    View3<double> t1r("attnphys::grf_t1r", count * mz, my, nx), t1i("attnphys::grf_t1i", count * mz, my, nx);
    Kokkos::parallel_for(
        "attnphys::grf_pass_x", Kokkos::RangePolicy<ExecSpace>(0, count * mz * my * nx), KOKKOS_LAMBDA(const long t) {
          const long i = t % nx, b = (t / nx) % my, sc = t / (nx * my), c = sc % mz, s = sc / mz;
          double re = 0.0, im = 0.0;
          for (long a = 0; a < mx; ++a) {
            const long q = a + mx * (b + my * c);
            const double cr = coef(s, q, 0), ci = -coef(s, q, 1), co = px(a, i), si = px(a, nx + i);
            re += cr * co - ci * si;
            im += cr * si + ci * co;
          }
          t1r(sc, b, i) = re;
          t1i(sc, b, i) = im;
        });
    View3<double> t2r("attnphys::grf_t2r", count * mz, ny, nx), t2i("attnphys::grf_t2i", count * mz, ny, nx);
    Kokkos::parallel_for(
        "attnphys::grf_pass_y", Kokkos::RangePolicy<ExecSpace>(0, count * mz * ny * nx), KOKKOS_LAMBDA(const long t) {
          const long i = t % nx, j = (t / nx) % ny, sc = t / (nx * ny);
          double re = 0.0, im = 0.0;
          for (long b = 0; b < my; ++b) {
            const double co = py(b, j), si = py(b, ny + j);
            const double ar = t1r(sc, b, i), ai = t1i(sc, b, i);
            re += ar * co - ai * si;
            im += ar * si + ai * co;
          }
          t2r(sc, j, i) = re;
          t2i(sc, j, i) = im;
        });
    Kokkos::parallel_for(
        "attnphys::grf_pass_z", Kokkos::RangePolicy<ExecSpace>(0, count * cells), KOKKOS_LAMBDA(const long t) {
          const long s = t / cells, cl = t - s * cells;
          const long i = cl % nx, j = (cl / nx) % ny, k = cl / (nx * ny);
          double v = 0.0;
          for (long c = 0; c < mz; ++c) v += t2r(s * mz + c, j, i) * pz(c, k) - t2i(s * mz + c, j, i) * pz(c, nz + k);
          out(s, cl) = v;
        });
    return;
  }
  const long K = o.modes, kmax = o.max_wavenumber;
  const bool fourier = o.kind == IcKind::Fourier;
  const double width = o.bump_width, scale = amp / std::sqrt(double(K));
  const bool px = per[0], py = per[1], pz = per[2];
  Kokkos::parallel_for(
      "attnphys::heat_random_modes", Kokkos::RangePolicy<ExecSpace>(0, count * cells), KOKKOS_LAMBDA(const long t) {
        const long s = t / cells, c = t - s * cells;
        const long i = c % nx, j = (c / nx) % ny, k = c / (nx * ny);
        const double x = x0x + i * hx, y = x0y + j * hy, z = x0z + k * hz;
        CounterRng r(seed, std::uint64_t(first + s));
        double v = 0.0;
        for (long q = 0; q < K; ++q) {
          const double A = 2 * r.uniform() - 1;
          if (fourier) {
            long m[3];
            for (int a = 0; a < 3; ++a) m[a] = a < dim ? long(r.below(2 * kmax + 1)) - kmax : 0;
            if (m[0] == 0 && m[1] == 0 && m[2] == 0) m[0] = 1;
            const double phi = 2 * M_PI * r.uniform();
            v += A * math::cos(2 * M_PI * (m[0] * x / Lx + m[1] * y / Ly + m[2] * z / Lz) + phi);
          } else {
            const double cx = r.uniform() * Lx, cy = r.uniform() * Ly, cz = r.uniform() * Lz;
            const double sig = width * (0.5 + r.uniform());
            auto d = [](double u, double cu, double Lu, bool p) {
              double dd = u - cu;
              if (p) dd -= Lu * double(long(dd / Lu + (dd >= 0 ? 0.5 : -0.5)));  // nearest image
              return dd;
            };
            const double dx = d(x, cx, Lx, px), dy = dim >= 2 ? d(y, cy, Ly, py) : 0.0,
                         dz = dim >= 3 ? d(z, cz, Lz, pz) : 0.0;
            v += A * math::exp(-(dx * dx + dy * dy + dz * dz) / (2 * sig * sig));
          }
        }
        out(s, c) = scale * v;
      });
}

View3<double> random_kappa(const HeatProblem& p, double lo, double hi, double length_scale, std::uint64_t seed) {
  return random_kappa_at(p, lo, hi, length_scale, seed, long(kKappaStream));
}

View3<double> random_kappa_at(const HeatProblem& p, double lo, double hi, double length_scale, std::uint64_t seed,
                              long first) {
  require(lo > 0 && hi > 0 && std::isfinite(lo) && std::isfinite(hi), "random kappa: lo and hi must be positive");
  const auto e = p.spatial_extents();
  const long cells = e[0] * e[1] * e[2];
  InitialConditionOptions o;
  o.length_scale = length_scale;
  View2<double> g("attnphys::kappa_grf", 2, cells);
  initial_conditions(p, o, seed, first, g);
  View3<double> k("attnphys::random_kappa", e[0], e[1], e[2]);
  Kokkos::parallel_for(
      "attnphys::random_kappa", Kokkos::RangePolicy<ExecSpace>(0, cells), KOKKOS_LAMBDA(const long c) {
        const double base = g(0, c) > 0 ? hi : lo;
        const double wobble = math::fmin(math::fmax(g(1, c), -1.7), 1.7);
        k.data()[c] = base * math::exp(0.3 * wobble);
      });
  return k;
}

}  // namespace attnphys::heat
