#include "attnphys/solvers/fd/heat_operator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attnphys/core/spaces.hpp"

namespace attnphys::fd {

using heat::BcType;

namespace {

double face_mean(heat::FaceMean m, double a, double b) {
  if (m == heat::FaceMean::Arithmetic) return 0.5 * (a + b);
  return a + b > 0 ? 2.0 * a * b / (a + b) : 0.0;
}

}  // namespace

template <class Space>
BasicHeatOperator<Space>::BasicHeatOperator(const heat::HeatProblem& problem) : p_(problem) {
  ScopedRegion region("attnphys::heat_operator_setup");
  p_.validate();
  const auto& g = p_.grid;
  const auto e = spatial();  // (nz, ny, nx)
  HostView3<double> kh("kappa_host", e[0], e[1], e[2]);
  if (p_.variable_kappa())
    Kokkos::deep_copy(kh, p_.kappa_field);
  else
    Kokkos::deep_copy(kh, p_.kappa);
  auto kap = [&](int axis, long m, long kz, long jy, long i) {  // κ of cell m along axis, other coordinates given
    return axis == 0 ? kh(kz, jy, m) : axis == 1 ? kh(kz, m, i) : kh(m, jy, i);
  };

  for (int a = 0; a < g.dim; ++a) {
    const long n = g.n[a];
    const double inv_h2 = 1.0 / (g.h[a] * g.h[a]);
    const bool per = p_.periodic(a);
    HostView3<double> cf("cf_host", a == 2 ? n + 1 : e[0], a == 1 ? n + 1 : e[1], a == 0 ? n + 1 : e[2]);
    // Loop over the lines of this axis (the two other coordinates) and the faces along each.
    const long lz = a == 2 ? 1 : e[0], ly = a == 1 ? 1 : e[1], lx = a == 0 ? 1 : e[2];
    for (long kz = 0; kz < lz; ++kz)
      for (long jy = 0; jy < ly; ++jy)
        for (long i = 0; i < lx; ++i) {
          auto face = [&](long m) -> double& { return a == 0 ? cf(kz, jy, m) : a == 1 ? cf(kz, m, i) : cf(m, jy, i); };
          for (long m = 1; m < n; ++m)
            face(m) = face_mean(p_.face_mean, kap(a, m - 1, kz, jy, i), kap(a, m, kz, jy, i)) * inv_h2;
          if (per) {
            face(0) = face(n) = face_mean(p_.face_mean, kap(a, n - 1, kz, jy, i), kap(a, 0, kz, jy, i)) * inv_h2;
          } else {
            auto boundary = [&](int side, long m) {
              return p_.bc[a][side].type == BcType::Dirichlet ? 2.0 * kap(a, m, kz, jy, i) * inv_h2 : 0.0;
            };
            face(0) = boundary(0, 0);
            face(n) = boundary(1, n - 1);
          }
        }
    cf_host_[a] = cf;
    cf_[a] = State("attnphys::heat_face_coefficients", cf.extent(0), cf.extent(1), cf.extent(2));
    Kokkos::deep_copy(cf_[a], cf);
    c_[a] = p_.kappa * inv_h2;
    auto side_c = [&](int side) {
      return per ? c_[a] : p_.bc[a][side].type == BcType::Dirichlet ? 2.0 * c_[a] : 0.0;
    };
    clo_[a] = side_c(0);
    chi_[a] = side_c(1);
  }
  zero_ = Row("attnphys::heat_zero_row", std::max<long>(e[2] + 1, 1));

  // FTCS limit: largest Σ_faces c over the cells.
  double worst = 0.0;
  for (long kz = 0; kz < e[0]; ++kz)
    for (long jy = 0; jy < e[1]; ++jy)
      for (long i = 0; i < e[2]; ++i) {
        double sum = cf_host_[0](kz, jy, i) + cf_host_[0](kz, jy, i + 1);
        if (g.dim >= 2) sum += cf_host_[1](kz, jy, i) + cf_host_[1](kz, jy + 1, i);
        if (g.dim >= 3) sum += cf_host_[2](kz, jy, i) + cf_host_[2](kz + 1, jy, i);
        worst = std::max(worst, sum);
      }
  ftcs_limit_ = worst > 0 ? 1.0 / worst : std::numeric_limits<double>::infinity();

  // Forcing: boundary data and sources. Time-dependent data (a source function, boundary functions of t) is
  // evaluated on the host at every time level; static data (constant values, static profiles, a source field) once,
  // into per-part caches on the device.
  has_forcing_ = p_.has_source();
  forcing_time_dependent_ = bool(p_.source);
  for (int a = 0; a < g.dim; ++a)
    for (int s = 0; s < 2; ++s) {
      const auto& b = p_.bc[a][s];
      if (b.type == BcType::Periodic) continue;
      if (b.time_dependent()) forcing_time_dependent_ = true;
      if (b.nonzero()) has_forcing_ = true;
    }
  if (p_.source_field.size() > 0) {
    source_host_ = HostView3<double>("source_host", e[0], e[1], e[2]);
    Kokkos::deep_copy(source_host_, p_.source_field);
  }
  if (has_forcing_) {
    forcing_host_ = HostView3<double>("forcing_host", e[0], e[1], e[2]);
    if (!forcing_time_dependent_) {
      for (unsigned part = 0; part < 4; ++part) {
        if (part == 3) {  // a static source field
          if (p_.source_field.size() == 0) continue;
          part_cache_[3] = State("attnphys::heat_forcing_part", e[0], e[1], e[2]);
          Kokkos::deep_copy(part_cache_[3], p_.source_field);
          continue;
        }
        if (part >= unsigned(g.dim) || p_.periodic(part)) continue;
        const bool any = p_.bc[part][0].nonzero() || p_.bc[part][1].nonzero();
        if (!any) continue;
        forcing_host({{1.0, 0.0, 1u << part}});
        part_cache_[part] = State("attnphys::heat_forcing_part", e[0], e[1], e[2]);
        Kokkos::deep_copy(part_cache_[part], forcing_host_);
      }
    }
  }
}

template <class Space>
void BasicHeatOperator<Space>::forcing(const State& out, const std::vector<ForcingTerm>& terms) const {
  const auto e = spatial();
  require(long(out.extent(0)) == e[0] && long(out.extent(1)) == e[1] && long(out.extent(2)) == e[2],
          "forcing: output view has the wrong shape");
  Kokkos::deep_copy(out, 0.0);
  if (!has_forcing_) return;
  if (forcing_time_dependent_) {
    forcing_host(terms);
    Kokkos::deep_copy(out, forcing_host_);
    return;
  }
  for (const auto& term : terms)
    for (unsigned part = 0; part < 4; ++part) {
      if (!(term.parts & (1u << part)) || part_cache_[part].size() == 0) continue;
      const auto src = part_cache_[part];
      const double w = term.weight;
      Kokkos::parallel_for(
          "attnphys::heat_forcing_sum", Kokkos::RangePolicy<Space>(0, out.size()),
          KOKKOS_LAMBDA(const long i) { out.data()[i] += w * src.data()[i]; });
    }
}

template <class Space>
void BasicHeatOperator<Space>::forcing_host(const std::vector<ForcingTerm>& terms) const {
  ScopedRegion region("attnphys::heat_forcing");
  const auto e = spatial();
  const auto& g = p_.grid;
  auto& f = forcing_host_;
  const std::array<long, 3> n = g.n;
  for (long kz = 0; kz < e[0]; ++kz)
    for (long jy = 0; jy < e[1]; ++jy)
      for (long i = 0; i < e[2]; ++i) {
        const double x = p_.coord(0, i), y = g.dim >= 2 ? p_.coord(1, jy) : 0.0,
                     z = g.dim >= 3 ? p_.coord(2, kz) : 0.0;
        const long idx[3] = {i, jy, kz};
        double v = 0.0;
        for (const auto& term : terms) {
          const double t = term.t;
          double w = 0.0;
          if (term.parts & Source) {
            if (p_.source) w += p_.source(x, y, z, t);
            if (source_host_.size() > 0) w += source_host_(kz, jy, i);
          }
          for (int a = 0; a < g.dim; ++a) {
            if (!(term.parts & (1u << a)) || p_.periodic(a)) continue;
            for (int s = 0; s < 2; ++s) {
              if (idx[a] != (s == 0 ? 0 : n[a] - 1)) continue;
              const auto& b = p_.bc[a][s];
              double pos[3] = {x, y, z};
              pos[a] = s == 0 ? 0.0 : g.length(a);
              const double data = b.at(pos[0], pos[1], pos[2], t);
              if (b.type == BcType::Neumann) {
                w += data / g.h[a];
              } else {
                const long m = s == 0 ? 0 : n[a];
                const auto& cf = cf_host_[a];
                w += (a == 0 ? cf(kz, jy, m) : a == 1 ? cf(kz, m, i) : cf(m, jy, i)) * data;
              }
            }
          }
          v += term.weight * w;
        }
        f(kz, jy, i) = v;
      }
}

template <class Space>
void BasicHeatOperator<Space>::combine(const State& out, const State& x, const State& y, std::array<double, 3> s,
                                       double g1, const State& G1, double g2, const State& G2) const {
  ScopedRegion region("attnphys::heat_combine");
  if (p_.variable_kappa())
    combine_kernel<true>(out, x, y, s, g1, G1, g2, G2);
  else
    combine_kernel<false>(out, x, y, s, g1, G1, g2, G2);
}

// A loop whose iterations are independent (out may alias x only at the same index): lets the compiler vectorise the
// row loops without runtime alias checks across up to nine streams (it gives up on those and stays scalar).
#if defined(__clang__)
#define ATTNPHYS_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define ATTNPHYS_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#define ATTNPHYS_INDEPENDENT_ITERATIONS
#endif

#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL))
// Host, constant κ: the interior cells 1 .. nx-2 of one row, a weighted sum of the stencil values,
//   out_i = x_i + ccen·u_i + ax·(u_{i-1} + u_{i+1}) + bym·u_{j-1} + byq·u_{j+1} + bzm·u_{k-1} + bzq·u_{k+1} [+ G].
// `same` (x is y: an FTCS step) folds x_i into the centre weight, and `sym` (equal coefficients on both sides of
// y and z: every row that does not touch a non-periodic y or z side) adds the two neighbours before multiplying:
// in 3D FTCS that is 7 loads, 4 multiplies and 6 adds per cell instead of 8, 6 and 7, which matters because the
// SSE2 loop is close to being bound by instructions rather than memory. Its own function so that the compiler
// vectorises the loop on its own (inlined into the kernel, partial-redundancy elimination carries u_{i+1} over
// to the next iteration and the loop stays scalar).
template <bool Y, bool Z, bool G>
void host_row_interior(double* o, const double* xr, const double* yr, const double* ym, const double* yq,
                       const double* zm, const double* zq, const double* g1r, const double* g2r, const long nx,
                       const double ccen, const double ax, const double bym, const double byq, const double bzm,
                       const double bzq, const double g1, const double g2, const bool same) {
  const bool sym = bym == byq && bzm == bzq;
  const double c0 = same ? 1.0 + ccen : ccen;
  if (same && sym) {
    ATTNPHYS_INDEPENDENT_ITERATIONS
    for (long i = 1; i < nx - 1; ++i) {
      double v = c0 * yr[i] + ax * (yr[i - 1] + yr[i + 1]);
      if constexpr (Y) v += byq * (ym[i] + yq[i]);
      if constexpr (Z) v += bzq * (zm[i] + zq[i]);
      if constexpr (G) v += g1 * g1r[i] + g2 * g2r[i];
      o[i] = v;
    }
  } else if (same) {
    ATTNPHYS_INDEPENDENT_ITERATIONS
    for (long i = 1; i < nx - 1; ++i) {
      double v = c0 * yr[i] + ax * (yr[i - 1] + yr[i + 1]);
      if constexpr (Y) v += bym * ym[i] + byq * yq[i];
      if constexpr (Z) v += bzm * zm[i] + bzq * zq[i];
      if constexpr (G) v += g1 * g1r[i] + g2 * g2r[i];
      o[i] = v;
    }
  } else {
    ATTNPHYS_INDEPENDENT_ITERATIONS
    for (long i = 1; i < nx - 1; ++i) {
      double v = xr[i] + c0 * yr[i] + ax * (yr[i - 1] + yr[i + 1]);
      if constexpr (Y) v += bym * ym[i] + byq * yq[i];
      if constexpr (Z) v += bzm * zm[i] + bzq * zq[i];
      if constexpr (G) v += g1 * g1r[i] + g2 * g2r[i];
      o[i] = v;
    }
  }
}

// Host, constant κ: one whole row, the interior in host_row_interior and the two end cells here (wrapped or
// zero-ghost x neighbours, the low/high x face coefficients axlo/axhi):
//   out_i = x_i + ccen·u_i + cl·u_{i-1} + cr·u_{i+1} + Σ (neighbour-row coefficient · value) [+ g1·G1 + g2·G2],
// ccen = -(sum of the cell's face coefficients). Used by combine() and by the two-step FTCS sweep.
template <bool Y, bool Z, bool G>
void host_row_const(double* o, const double* xr, const double* yr, const double* ym, const double* yq,
                    const double* zm, const double* zq, const double* g1r, const double* g2r, const long nx,
                    const double ax, const double axlo, const double axhi, const bool perx, const double bym,
                    const double byq, const double bzm, const double bzq, const double g1, const double g2,
                    const bool same) {
  const double cyz = -(bym + byq + bzm + bzq);
  host_row_interior<Y, Z, G>(o, xr, yr, ym, yq, zm, zq, g1r, g2r, nx, cyz - 2.0 * ax, ax, bym, byq, bzm, bzq, g1, g2,
                             same);
  auto cell = [&](const long i, const double ul, const double ur, const double cl, const double cr) {
    double v = xr[i] + (cyz - cl - cr) * yr[i] + (cl * ul + cr * ur);
    if constexpr (Y) v += bym * ym[i] + byq * yq[i];
    if constexpr (Z) v += bzm * zm[i] + bzq * zq[i];
    if constexpr (G) v += g1 * g1r[i] + g2 * g2r[i];
    o[i] = v;
  };
  if (nx == 1) {
    cell(0, perx ? yr[0] : 0.0, perx ? yr[0] : 0.0, axlo, axhi);
    return;
  }
  cell(0, perx ? yr[nx - 1] : 0.0, yr[1], axlo, ax);
  cell(nx - 1, yr[nx - 2], perx ? yr[0] : 0.0, ax, axhi);
}
#endif

template <class Space>
template <bool Var>
void BasicHeatOperator<Space>::combine_kernel(const State& out, const State& x, const State& y, std::array<double, 3> s,
                                              double g1, const State& G1, double g2, const State& G2) const {
  const int dim = p_.grid.dim;
  const long n0 = y.extent(0), n1 = y.extent(1), nx = y.extent(2);
  const long ny_s = spatial()[1];
  const bool perx = p_.periodic(0), pery = dim >= 2 && p_.periodic(1), perz = dim >= 3 && p_.periodic(2);
  const bool use_y = dim >= 2 && s[1] != 0.0, use_z = dim >= 3 && s[2] != 0.0;
  const double sx = s[0], sy = s[1], sz = s[2];
  const double ax = sx * c_[0], axlo = sx * clo_[0], axhi = sx * chi_[0];
  const double ay = sy * c_[1], aylo = sy * clo_[1], ayhi = sy * chi_[1];
  const double az = sz * c_[2], azlo = sz * clo_[2], azhi = sz * chi_[2];
  const auto cfx = cf_[0], cfy = cf_[1], cfz = cf_[2];
  const double* zero = zero_.data();
  const double* yd = y.data();
  const double* xd = x.data();
  double* od = out.data();
  const double* G1d = (g1 != 0.0 && G1.size() > 0) ? G1.data() : nullptr;
  const double* G2d = (g2 != 0.0 && G2.size() > 0) ? G2.data() : nullptr;
  const bool with_g = G1d || G2d;
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)
  using Member = typename Kokkos::TeamPolicy<Space>::member_type;
  Kokkos::parallel_for(
      "attnphys::heat_combine", Kokkos::TeamPolicy<Space>(n0 * n1, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const long r = team.league_rank();
        const long k = r / n1, j = r - (r / n1) * n1;
        const long kz = dim == 3 ? k : 0, jy = dim >= 2 ? j : 0;
        const long off = r * nx, soff = (kz * ny_s + jy) * nx;
        const double* yr = yd + off;
        const double* xr = xd + off;
        double* o = od + off;
        const double* g1r = G1d ? G1d + soff : zero;
        const double* g2r = G2d ? G2d + soff : zero;
        // Neighbour rows across y and z: the adjacent row, the wrapped one, or a zero ghost row; with their
        // coefficients (scalars for constant κ, face rows for variable κ).
        const double *ym = zero, *yq = zero, *zm = zero, *zq = zero;
        double bym = 0, byq = 0, bzm = 0, bzq = 0;
        const double *cxr = zero, *cym = zero, *cyq = zero, *czm = zero, *czq = zero;
        // `if (Var)`, not `if constexpr`, in this device lambda: nvcc rejects a lambda whose first capture of a
        // variable is inside an if-constexpr branch (the untaken branch still compiles, and is folded away).
        if (Var) cxr = &cfx(kz, jy, 0);
        if (use_y) {
          ym = j > 0 ? yr - nx : (pery ? yr + (n1 - 1) * nx : zero);
          yq = j < n1 - 1 ? yr + nx : (pery ? yr - (n1 - 1) * nx : zero);
          if (Var) {
            cym = &cfy(kz, jy, 0);
            cyq = &cfy(kz, jy + 1, 0);
          } else {
            bym = j > 0 ? ay : aylo;
            byq = j < n1 - 1 ? ay : ayhi;
          }
        }
        if (use_z) {
          const long plane = n1 * nx;
          zm = k > 0 ? yr - plane : (perz ? yr + (n0 - 1) * plane : zero);
          zq = k < n0 - 1 ? yr + plane : (perz ? yr - (n0 - 1) * plane : zero);
          if (Var) {
            czm = &cfz(k, j, 0);
            czq = &cfz(k + 1, j, 0);
          } else {
            bzm = k > 0 ? az : azlo;
            bzq = k < n0 - 1 ? az : azhi;
          }
        }
        auto cell = [=](const long i, const double ul, const double ur, const double cl, const double cr) {
          const double uc = yr[i];
          double v = cr * (ur - uc) - cl * (uc - ul);
          if (Var) {
            v += sy * (cyq[i] * (yq[i] - uc) - cym[i] * (uc - ym[i])) +
                 sz * (czq[i] * (zq[i] - uc) - czm[i] * (uc - zm[i]));
          } else {
            v += byq * (yq[i] - uc) - bym * (uc - ym[i]) + bzq * (zq[i] - uc) - bzm * (uc - zm[i]);
          }
          v += xr[i];
          if (with_g) v += g1 * g1r[i] + g2 * g2r[i];
          o[i] = v;
        };
        const long last = nx > 1 ? nx - 1 : 1L;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, 1L, last), [=](const long i) {
          if (Var)
            cell(i, yr[i - 1], yr[i + 1], sx * cxr[i], sx * cxr[i + 1]);
          else
            cell(i, yr[i - 1], yr[i + 1], ax, ax);
        });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          for (long i = 0; i < nx; i += (nx > 1 ? nx - 1 : 1)) {
            const double ul = i > 0 ? yr[i - 1] : (perx ? yr[nx - 1] : 0.0);
            const double ur = i < nx - 1 ? yr[i + 1] : (perx ? yr[0] : 0.0);
            double cl, cr;
            if (Var) {
              cl = sx * cxr[i];
              cr = sx * cxr[i + 1];
            } else {
              cl = i == 0 ? axlo : ax;
              cr = i == nx - 1 ? axhi : ax;
            }
            cell(i, ul, ur, cl, cr);
          }
        });
      });
#else
  // Host: a flat range over the rows, one row per iteration, and a plain contiguous loop over the interior of the
  // row that the compiler vectorises. The terms an axis does not use (a zero s, 1D/2D) and the forcing are template
  // switches of the row loop, so nothing is branched on or loaded per cell that the step does not need. All
  // boundary handling is per row (which neighbour rows, which coefficients) or at the two end cells of a row.
  const bool same = xd == yd;  // an FTCS step: out = y + Σ s_a L_a y
  auto launch = [&](auto use_y_tag, auto use_z_tag, auto with_g_tag) {
    constexpr bool Y = decltype(use_y_tag)::value, Z = decltype(use_z_tag)::value, G = decltype(with_g_tag)::value;
    Kokkos::parallel_for(
        "attnphys::heat_combine", Kokkos::RangePolicy<Space>(0, n0 * n1), KOKKOS_LAMBDA(const long r) {
          const long k = r / n1, j = r - k * n1;
          const long kz = dim == 3 ? k : 0, jy = dim >= 2 ? j : 0;
          const long off = r * nx, soff = (kz * ny_s + jy) * nx;
          const double* yr = yd + off;
          const double* xr = xd + off;
          double* o = od + off;
          const double* g1r = G1d ? G1d + soff : zero;
          const double* g2r = G2d ? G2d + soff : zero;
          const double *ym = zero, *yq = zero, *zm = zero, *zq = zero;
          double bym = 0, byq = 0, bzm = 0, bzq = 0;
          const double *cxr = zero, *cym = zero, *cyq = zero, *czm = zero, *czq = zero;
          if constexpr (Var) cxr = &cfx(kz, jy, 0);
          if constexpr (Y) {
            ym = j > 0 ? yr - nx : (pery ? yr + (n1 - 1) * nx : zero);
            yq = j < n1 - 1 ? yr + nx : (pery ? yr - (n1 - 1) * nx : zero);
            if constexpr (Var) {
              cym = &cfy(kz, jy, 0);
              cyq = &cfy(kz, jy + 1, 0);
            } else {
              bym = j > 0 ? ay : aylo;
              byq = j < n1 - 1 ? ay : ayhi;
            }
          }
          if constexpr (Z) {
            const long plane = n1 * nx;
            zm = k > 0 ? yr - plane : (perz ? yr + (n0 - 1) * plane : zero);
            zq = k < n0 - 1 ? yr + plane : (perz ? yr - (n0 - 1) * plane : zero);
            if constexpr (Var) {
              czm = &cfz(k, j, 0);
              czq = &cfz(k + 1, j, 0);
            } else {
              bzm = k > 0 ? az : azlo;
              bzq = k < n0 - 1 ? az : azhi;
            }
          }
          // The two end cells of the row (one when nx = 1), with their x-neighbour values (wrapped or a zero
          // ghost) and x-face coefficients (scaled by s[0]).
          auto ends = [&](auto&& cell) {
            const double clo = Var ? sx * cxr[0] : axlo, chi = Var ? sx * cxr[nx] : axhi;
            if (nx == 1) {
              cell(0, perx ? yr[0] : 0.0, perx ? yr[0] : 0.0, clo, chi);
              return;
            }
            cell(0, perx ? yr[nx - 1] : 0.0, yr[1], clo, Var ? sx * cxr[1] : ax);
            cell(nx - 1, yr[nx - 2], perx ? yr[0] : 0.0, Var ? sx * cxr[nx - 1] : ax, chi);
          };
          if constexpr (Var) {
            // out_i = x_i + (x-axis flux difference with the left/right values and face coefficients) + y, z terms.
            auto cell = [&](const long i, const double ul, const double ur, const double cl, const double cr) {
              const double uc = yr[i];
              double v = xr[i] + cr * (ur - uc) - cl * (uc - ul);
              if constexpr (Y) v += sy * (cyq[i] * (yq[i] - uc) - cym[i] * (uc - ym[i]));
              if constexpr (Z) v += sz * (czq[i] * (zq[i] - uc) - czm[i] * (uc - zm[i]));
              if constexpr (G) v += g1 * g1r[i] + g2 * g2r[i];
              o[i] = v;
            };
            ATTNPHYS_INDEPENDENT_ITERATIONS
            for (long i = 1; i < nx - 1; ++i) cell(i, yr[i - 1], yr[i + 1], sx * cxr[i], sx * cxr[i + 1]);
            ends(cell);
          } else {
            // Constant κ: the row's coefficients are scalars (host_row_const).
            host_row_const<Y, Z, G>(o, xr, yr, ym, yq, zm, zq, g1r, g2r, nx, ax, axlo, axhi, perx, bym, byq, bzm, bzq,
                                    g1, g2, same);
          }
        });
  };
  using T = std::true_type;
  using F = std::false_type;
  auto with_z = [&](auto y_tag) {
    if (use_z) {
      if (with_g) launch(y_tag, T{}, T{}); else launch(y_tag, T{}, F{});
    } else {
      if (with_g) launch(y_tag, F{}, T{}); else launch(y_tag, F{}, F{});
    }
  };
  if (use_y) with_z(T{}); else with_z(F{});
#endif
}

#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL))
namespace {

// What one unit of ftcs_two_steps needs: slices along the outermost axis (3D: z planes of `rows` rows; 2D: the y
// rows of one batch item), Δt-scaled coefficients (x; y inside a 3D plane; the outer axis), the static forcing.
struct TwoStepGeometry {
  long ns, rows, nx, slice;
  bool perx, pery, pero;
  double ax, axlo, axhi, ay, aylo, ayhi, ao, aolo, aohi, g1;
  const double *G, *zero;
};

// One unit: slices [a, b) of one item and, in 3D, the band of rows [ja, jb) of each plane, from src to dst.
// Level 1 (one step) of slices a−1 .. b goes into the ring R just ahead of level 2, which reads three ring slices
// and writes dst, so src is read once and dst written once. A ring slice holds the band's rows with one halo row
// on each side (rows ja−1 .. jb, stored from row `lo` = ja − 1), slice s in slot (s − a + 1) mod 3; in 3D the
// band keeps the ring and the input planes it reads small enough for the core's cache. A slice or row beyond a
// non-periodic side is a zero ghost (its coefficient carries the boundary condition; Dirichlet data is in G).
template <bool D3, bool HasG>
void ftcs_two_step_unit(const TwoStepGeometry& g, const double* src, double* dst, double* R, long a, long b, long ja,
                        long jb) {
  const long ns = g.ns, slice = g.slice, nx = g.nx, ny = g.rows;
  const long lo = ja - 1, rslice = D3 ? (jb - ja + 2) * nx : slice;  // ring slice: rows lo .. jb
  auto wrap = [](long i, long n) { return ((i % n) + n) % n; };
  auto slot = [&](long s) { return R + ((s - a + 1) % 3) * rslice; };
  auto gslice = [&](long s) { return HasG ? g.G + s * slice : g.zero; };
  // One row: out, its values, the y and z (3D) or y (2D: the outer axis) neighbour rows and their coefficients.
  auto row = [&](double* o, const double* cur, const double* ym, const double* yq, double bym, double byq,
                 const double* zm, const double* zq, double bzm, double bzq, const double* gr) {
    host_row_const<true, D3, HasG>(o, cur, cur, ym, yq, D3 ? zm : g.zero, D3 ? zq : g.zero, gr, g.zero, nx, g.ax,
                                   g.axlo, g.axhi, g.perx, bym, byq, D3 ? bzm : 0.0, D3 ? bzq : 0.0, g.g1, 0.0, true);
  };
  // Level 1 of slice s (unwrapped pipeline index) from src into its ring slot.
  auto level1 = [&](long s) {
    if (!g.pero && (s < 0 || s >= ns)) return;
    const long w = wrap(s, ns);
    const double* P = src + w * slice;
    const double* Pm = (g.pero || w > 0) ? src + wrap(w - 1, ns) * slice : nullptr;
    const double* Pq = (g.pero || w < ns - 1) ? src + wrap(w + 1, ns) * slice : nullptr;
    const double om = w > 0 ? g.ao : g.aolo, oq = w < ns - 1 ? g.ao : g.aohi;
    double* out = slot(s);
    if constexpr (D3) {
      for (long j = ja - 1; j <= jb; ++j) {
        if (!g.pery && (j < 0 || j >= ny)) continue;
        const long wj = wrap(j, ny), off = wj * nx;
        const double* ym = wj > 0 ? P + off - nx : (g.pery ? P + (ny - 1) * nx : g.zero);
        const double* yq = wj < ny - 1 ? P + off + nx : (g.pery ? P : g.zero);
        row(out + (j - lo) * nx, P + off, ym, yq, wj > 0 ? g.ay : g.aylo, wj < ny - 1 ? g.ay : g.ayhi,
            Pm ? Pm + off : g.zero, Pq ? Pq + off : g.zero, om, oq, HasG ? gslice(w) + off : g.zero);
      }
    } else {
      row(out, P, Pm ? Pm : g.zero, Pq ? Pq : g.zero, om, oq, nullptr, nullptr, 0.0, 0.0, gslice(w));
    }
  };
  level1(a - 1);
  level1(a);
  for (long s = a; s < b; ++s) {
    level1(s + 1);
    // Level 2 of slice s from the ring into dst.
    const double* C = slot(s);
    const double* M = (g.pero || s > 0) ? slot(s - 1) : nullptr;
    const double* Q = (g.pero || s < ns - 1) ? slot(s + 1) : nullptr;
    const double om = s > 0 ? g.ao : g.aolo, oq = s < ns - 1 ? g.ao : g.aohi;
    double* out = dst + s * slice;
    if constexpr (D3) {
      for (long j = ja; j < jb; ++j) {
        const long r = (j - lo) * nx;
        const double* ym = (g.pery || j > 0) ? C + r - nx : g.zero;
        const double* yq = (g.pery || j < ny - 1) ? C + r + nx : g.zero;
        row(out + j * nx, C + r, ym, yq, j > 0 ? g.ay : g.aylo, j < ny - 1 ? g.ay : g.ayhi, M ? M + r : g.zero,
            Q ? Q + r : g.zero, om, oq, HasG ? gslice(s) + j * nx : g.zero);
      }
    } else {
      row(out, C, M ? M : g.zero, Q ? Q : g.zero, om, oq, nullptr, nullptr, 0.0, 0.0, gslice(s));
    }
  }
}

}  // namespace
#endif

template <class Space>
bool BasicHeatOperator<Space>::ftcs_two_steps(const State& out, const State& in, double dt, const State& Gv,
                                              long chunks_wanted, long band_rows) const {
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)
  (void)out, (void)in, (void)dt, (void)Gv, (void)chunks_wanted, (void)band_rows;
  return false;  // the device kernel keeps one step per sweep
#else
  const int dim = p_.grid.dim;
  if (dim < 2 || p_.variable_kappa() || forcing_time_dependent_) return false;
  const long n0 = in.extent(0), n1 = in.extent(1), nx = in.extent(2);
  const long ns = dim == 3 ? n0 : n1, items = dim == 3 ? 1 : n0, rows = dim == 3 ? n1 : 1;
  if (ns < 4) return false;
  require(out.data() != in.data(), "ftcs_two_steps: out must not alias in");
  require(out.extent(0) == in.extent(0) && out.extent(1) == in.extent(1) && out.extent(2) == in.extent(2),
          "ftcs_two_steps: out and in have different shapes");
  const auto e = spatial();
  require(!has_forcing_ || (long(Gv.extent(0)) == e[0] && long(Gv.extent(1)) == e[1] && long(Gv.extent(2)) == e[2]),
          "ftcs_two_steps: this problem has boundary data or a source; pass its forcing (HeatOperator::forcing) with "
          "the spatial shape (", e[0], ", ", e[1], ", ", e[2], "), got (", Gv.extent(0), ", ", Gv.extent(1), ", ",
          Gv.extent(2), ")");
  ScopedRegion region("attnphys::heat_ftcs_two_steps");
  // Parallel units: (batch item, chunk of slices, band of rows in 3D). A chunk recomputes the level-1 slices at its
  // two ends, so there are only as many chunks as it takes to give every thread work, each of at least 8 slices. A
  // 3D band has up to 32768 / nx rows (a ring slice of up to 256 KB: whole planes up to 128 x 254), recomputing one
  // halo row on each side at level 1. (Narrower bands were not faster at 128³: the sweep is bound by the row
  // kernel, not by the cache; they keep the ring in cache for large planes.)
  const long conc = std::max<long>(1, static_cast<long>(Space().concurrency()));
  const long chunks = chunks_wanted > 0 ? std::min(chunks_wanted, ns)
                                        : std::max(1L, std::min(ns / 8, (conc + items - 1) / items));
  const long band = dim < 3 ? rows
                    : band_rows > 0 ? std::min(band_rows, rows)
                                    : std::min(rows, std::max(4L, 32768 / std::max(nx, 1L) - 2));
  const long bands = (rows + band - 1) / band;
  const long units = items * chunks * bands;
  const long rslice = dim == 3 ? (band + 2) * nx : rows * nx;
  if (long(ring_.size()) < units * 3 * rslice) ring_ = Row("attnphys::heat_ftcs_ring", units * 3 * rslice);
  const int oa = dim == 3 ? 2 : 1;
  TwoStepGeometry g{ns,
                    rows,
                    nx,
                    rows * nx,
                    p_.periodic(0),
                    p_.periodic(1),
                    p_.periodic(oa),
                    dt * c_[0],
                    dt * clo_[0],
                    dt * chi_[0],
                    dt * c_[1],
                    dt * clo_[1],
                    dt * chi_[1],
                    dt * c_[oa],
                    dt * clo_[oa],
                    dt * chi_[oa],
                    dt,
                    has_forcing_ ? Gv.data() : nullptr,
                    zero_.data()};
  const double* src = in.data();
  double* dst = out.data();
  double* ring = ring_.data();
  const long item_size = ns * g.slice;
  auto run = [&](auto d3_tag, auto g_tag) {
    constexpr bool D3 = decltype(d3_tag)::value, HasG = decltype(g_tag)::value;
    Kokkos::parallel_for(
        "attnphys::heat_ftcs_two_steps", Kokkos::RangePolicy<Space>(0, units), KOKKOS_LAMBDA(const long u) {
          const long item = u / (chunks * bands), rest = u - item * chunks * bands;
          const long c = rest / bands, bb = rest - c * bands;
          ftcs_two_step_unit<D3, HasG>(g, src + item * item_size, dst + item * item_size, ring + u * 3 * rslice,
                                       c * ns / chunks, (c + 1) * ns / chunks, bb * band,
                                       std::min(rows, (bb + 1) * band));
        });
  };
  using T = std::true_type;
  using F = std::false_type;
  if (dim == 3) {
    if (g.G) run(T{}, T{}); else run(T{}, F{});
  } else {
    if (g.G) run(F{}, T{}); else run(F{}, F{});
  }
  return true;
#endif
}

template <class Space>
void BasicHeatOperator<Space>::factor_lines(int axis, double s) {
  ScopedRegion region("attnphys::heat_factor_lines");
  const auto e = spatial();
  const long n = p_.grid.n[axis], nys = e[1], nx = e[2];
  const bool per = p_.periodic(axis);
  const long lines = axis == 0 ? e[0] * e[1] : axis == 1 ? e[0] * e[2] : e[1] * e[2];
  const long cells = e[0] * e[1] * e[2];
  LineFactor& F = factor_[axis];
  if (F.low.size() == 0) {
    F.low = Row("attnphys::heat_line_low", cells);
    F.cp = Row("attnphys::heat_line_cp", cells);
    F.invd = Row("attnphys::heat_line_invd", cells);
    if (per) {
      F.z = Row("attnphys::heat_line_z", cells);
      F.vlast = Row("attnphys::heat_line_vlast", lines);
      F.fact = Row("attnphys::heat_line_fact", lines);
    }
  }
  F.s = s;
  const auto cf = cf_[axis];
  const auto low = F.low, cp = F.cp, invd = F.invd, zv = F.z, vlast = F.vlast, fact = F.fact;
  Kokkos::parallel_for(
      "attnphys::heat_factor_lines", Kokkos::RangePolicy<Space>(0, lines), KOKKOS_LAMBDA(const long L) {
        long base, stride;
        long a0, a1;  // the line's two other coordinates
        if (axis == 0) {
          a0 = L / nys; a1 = L - a0 * nys; base = L * nx; stride = 1;
        } else if (axis == 1) {
          a0 = L / nx; a1 = L - a0 * nx; base = a0 * nys * nx + a1; stride = nx;
        } else {
          a0 = L / nx; a1 = L - a0 * nx; base = L; stride = nys * nx;
        }
        auto c = [&](long m) { return axis == 0 ? cf(a0, a1, m) : axis == 1 ? cf(a0, m, a1) : cf(m, a0, a1); };
        const double beta = -s * c(0), alpha = -s * c(n);  // corner entries of a periodic line
        const double gamma = -(1.0 + s * (c(0) + c(1)));
        double cprev = 0.0;
        for (long m = 0; m < n; ++m) {
          const long q = base + m * stride;
          double diag = 1.0 + s * (c(m) + c(m + 1));
          const double lo = m > 0 ? -s * c(m) : 0.0;
          const double up = m < n - 1 ? -s * c(m + 1) : 0.0;
          if (per && m == 0) diag -= gamma;
          if (per && m == n - 1) diag -= alpha * beta / gamma;
          const double id = 1.0 / (diag - lo * cprev);
          low(q) = lo;
          invd(q) = id;
          cp(q) = up * id;
          cprev = cp(q);
        }
        if (per) {  // z = A'^{-1} (gamma, 0, ..., 0, alpha)
          double prev = 0.0;
          for (long m = 0; m < n; ++m) {
            const long q = base + m * stride;
            const double rhs = m == 0 ? gamma : (m == n - 1 ? alpha : 0.0);
            prev = (rhs - low(q) * prev) * invd(q);
            zv(q) = prev;
          }
          for (long m = n - 2; m >= 0; --m) {
            const long q = base + m * stride;
            zv(q) -= cp(q) * zv(q + stride);
          }
          vlast(L) = beta / gamma;
          fact(L) = 1.0 / (1.0 + zv(base) + vlast(L) * zv(base + (n - 1) * stride));
        }
      });
}

template <class Space>
void BasicHeatOperator<Space>::solve_lines(int axis, double s, const State& rhs) {
  require(axis >= 0 && axis < p_.grid.dim, "solve_lines: axis ", axis, " is not used in ", p_.grid.dim, "D");
  if (factor_[axis].s != s) factor_lines(axis, s);
  ScopedRegion region("attnphys::heat_solve_lines");
  const int dim = p_.grid.dim;
  const auto e = spatial();
  const long n = p_.grid.n[axis], nys = e[1], nx = e[2];
  const long n0 = rhs.extent(0), n1 = rhs.extent(1);
  const bool per = p_.periodic(axis);
  const LineFactor& F = factor_[axis];
  const auto low = F.low, cp = F.cp, invd = F.invd, zv = F.z, vlast = F.vlast, fact = F.fact;
  double* u = rhs.data();
  const long lines = axis == 0 ? n0 * n1 : axis == 1 ? n0 * nx : n1 * nx;
  // Line l: first element, spatial first element, spatial line (periodic scalars); stride along the line is the
  // same in the state and in the spatial arrays.
  const long stride = axis == 0 ? 1 : axis == 1 ? nx : n1 * nx;
  auto line_of = [=] KOKKOS_FUNCTION(const long l, long& base, long& sbase, long& sline) {
    if (axis == 0) {
      const long k = l / n1, j = l - k * n1;
      sline = (dim == 3 ? k : 0) * nys + (dim >= 2 ? j : 0);
      base = l * nx;
      sbase = sline * nx;
    } else if (axis == 1) {
      const long k = l / nx, i = l - k * nx, kz = dim == 3 ? k : 0;
      base = k * n1 * nx + i;
      sbase = kz * nys * nx + i;
      sline = kz * nx + i;
    } else {
      base = sbase = sline = l;
    }
  };
#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL))
  if (axis > 0) {
    // Host: sweep blocks of adjacent lines together so each step along the lines reads contiguous memory
    // (one line at a time would walk a column, a cache line per element).
    constexpr long B = 32;
    const long blocks = (lines + B - 1) / B;
    Kokkos::parallel_for(
        "attnphys::heat_solve_lines", Kokkos::RangePolicy<Space>(0, blocks), KOKKOS_LAMBDA(const long blk) {
          long base[B], sbase[B], sline[B];
          double prev[B];
          const long l0 = blk * B, cnt = lines - l0 < B ? lines - l0 : B;
          for (long q = 0; q < cnt; ++q) {
            line_of(l0 + q, base[q], sbase[q], sline[q]);
            prev[q] = 0.0;
          }
          for (long m = 0; m < n; ++m)
            for (long q = 0; q < cnt; ++q) {
              const long x = base[q] + m * stride, sx = sbase[q] + m * stride;
              prev[q] = (u[x] - low(sx) * prev[q]) * invd(sx);
              u[x] = prev[q];
            }
          for (long m = n - 2; m >= 0; --m)
            for (long q = 0; q < cnt; ++q)
              u[base[q] + m * stride] -= cp(sbase[q] + m * stride) * u[base[q] + (m + 1) * stride];
          if (per) {
            for (long q = 0; q < cnt; ++q)
              prev[q] = (u[base[q]] + vlast(sline[q]) * u[base[q] + (n - 1) * stride]) * fact(sline[q]);
            for (long m = 0; m < n; ++m)
              for (long q = 0; q < cnt; ++q) u[base[q] + m * stride] -= prev[q] * zv(sbase[q] + m * stride);
          }
        });
    return;
  }
#endif
  Kokkos::parallel_for(
      "attnphys::heat_solve_lines", Kokkos::RangePolicy<Space>(0, lines), KOKKOS_LAMBDA(const long l) {
        long base, sbase, sline;
        line_of(l, base, sbase, sline);
        double prev = 0.0;
        for (long m = 0; m < n; ++m) {
          const long q = base + m * stride, sq = sbase + m * stride;
          prev = (u[q] - low(sq) * prev) * invd(sq);
          u[q] = prev;
        }
        for (long m = n - 2; m >= 0; --m) u[base + m * stride] -= cp(sbase + m * stride) * u[base + (m + 1) * stride];
        if (per) {
          const double f = (u[base] + vlast(sline) * u[base + (n - 1) * stride]) * fact(sline);
          for (long m = 0; m < n; ++m) u[base + m * stride] -= f * zv(sbase + m * stride);
        }
      });
}


// ---- set_kappa_field: rebuild everything that depends on κ, on the device ----------------------------------------

namespace {

// The constructor's face_mean, device-callable (same arithmetic, so the same coefficients bit for bit).
KOKKOS_INLINE_FUNCTION double face_mean_device(bool harmonic, double a, double b) {
  if (!harmonic) return 0.5 * (a + b);
  return a + b > 0 ? 2.0 * a * b / (a + b) : 0.0;
}

}  // namespace

template <class Space>
void BasicHeatOperator<Space>::set_kappa_field(const State& kappa_cell) {
  ScopedRegion region("attnphys::heat_set_kappa");
  const auto e = spatial();
  require(long(kappa_cell.extent(0)) == e[0] && long(kappa_cell.extent(1)) == e[1] &&
              long(kappa_cell.extent(2)) == e[2],
          "set_kappa_field: kappa field has shape (", kappa_cell.extent(0), ", ", kappa_cell.extent(1), ", ",
          kappa_cell.extent(2), "), the grid needs (", e[0], ", ", e[1], ", ", e[2], ") (z, y, x)");
  const auto& g = p_.grid;
  const long cells = e[0] * e[1] * e[2];
  {
    const double* k = kappa_cell.data();
    long bad = 0;
    Kokkos::parallel_reduce(
        "attnphys::heat_set_kappa_check", Kokkos::RangePolicy<Space>(0, cells),
        KOKKOS_LAMBDA(const long i, long& b) {
          if (!(math::isfinite(k[i]) && k[i] >= 0.0)) ++b;
        },
        bad);
    require(bad == 0, "set_kappa_field: the kappa field has ", bad,
            " negative, NaN or infinite value(s): diffusivity must be finite and >= 0");
  }
  if (kappa_own_.size() == 0) kappa_own_ = State("attnphys::heat_operator_kappa", e[0], e[1], e[2]);
  Kokkos::deep_copy(kappa_own_, kappa_cell);
  if constexpr (std::is_same<typename Space::memory_space, MemSpace>::value) {
    p_.kappa_field = kappa_own_;
  } else {  // problem() keeps its fields in the default memory space
    if (p_.kappa_field.size() == 0 || p_.kappa_field.data() == kappa_cell.data())
      p_.kappa_field = View3<double>("attnphys::heat_problem_kappa", e[0], e[1], e[2]);
    Kokkos::deep_copy(p_.kappa_field, kappa_own_);
  }
  const auto kc = kappa_own_;
  const bool harmonic = p_.face_mean == heat::FaceMean::Harmonic;

  // Face coefficients, one thread per face of each axis.
  bool any_dirichlet = false;
  for (int a = 0; a < g.dim; ++a) {
    const long n = g.n[a];
    const double inv_h2 = 1.0 / (g.h[a] * g.h[a]);
    const bool per = p_.periodic(a);
    const bool dlo = !per && p_.bc[a][0].type == BcType::Dirichlet;
    const bool dhi = !per && p_.bc[a][1].type == BcType::Dirichlet;
    any_dirichlet = any_dirichlet || dlo || dhi;
    const auto cf = cf_[a];
    const long f1 = cf.extent(1), f2 = cf.extent(2);
    const int ax = 2 - a;  // position of axis a in (z, y, x)
    Kokkos::parallel_for(
        "attnphys::heat_set_kappa_faces", Kokkos::RangePolicy<Space>(0, long(cf.size())),
        KOKKOS_LAMBDA(const long f) {
          const long q0 = f / (f1 * f2), q1 = (f / f2) % f1, q2 = f % f2;
          const long m = ax == 0 ? q0 : ax == 1 ? q1 : q2;
          auto kap = [&](const long mm) {  // κ of cell mm along the axis, on this face's line
            return ax == 0 ? kc(mm, q1, q2) : ax == 1 ? kc(q0, mm, q2) : kc(q0, q1, mm);
          };
          double c;
          if (m > 0 && m < n)
            c = face_mean_device(harmonic, kap(m - 1), kap(m)) * inv_h2;
          else if (per)
            c = face_mean_device(harmonic, kap(n - 1), kap(0)) * inv_h2;
          else if (m == 0)
            c = dlo ? 2.0 * kap(0) * inv_h2 : 0.0;
          else
            c = dhi ? 2.0 * kap(n - 1) * inv_h2 : 0.0;
          cf(q0, q1, q2) = c;
        });
    factor_[a].s = -1;  // refactor the lines at the next solve
  }

  // FTCS limit: the largest Σ_faces c over the cells (summed in the constructor's order).
  {
    const int dim = g.dim;
    const auto cx = cf_[0], cy = cf_[1], cz = cf_[2];
    const long ny = e[1], nx = e[2];
    double worst = 0.0;
    Kokkos::parallel_reduce(
        "attnphys::heat_set_kappa_ftcs_limit", Kokkos::RangePolicy<Space>(0, cells),
        KOKKOS_LAMBDA(const long c, double& w) {
          const long kz = c / (ny * nx), jy = (c / nx) % ny, i = c % nx;
          double sum = cx(kz, jy, i) + cx(kz, jy, i + 1);
          if (dim >= 2) sum += cy(kz, jy, i) + cy(kz, jy + 1, i);
          if (dim >= 3) sum += cz(kz, jy, i) + cz(kz + 1, jy, i);
          if (sum > w) w = sum;
        },
        Kokkos::Max<double>(worst));
    ftcs_limit_ = worst > 0 ? 1.0 / worst : std::numeric_limits<double>::infinity();
  }

  // Forcing that depends on κ: Dirichlet data enters as (boundary face coefficient)·g. forcing_host reads the host
  // copies of the coefficients (time-dependent data: at every evaluation); static data lives in the part caches,
  // rebuilt here for the axes with a Dirichlet side.
  if (has_forcing_ && any_dirichlet) {
    for (int a = 0; a < g.dim; ++a) Kokkos::deep_copy(cf_host_[a], cf_[a]);
    if (!forcing_time_dependent_)
      for (int a = 0; a < g.dim; ++a) {
        if (part_cache_[a].size() == 0) continue;
        if (p_.bc[a][0].type != BcType::Dirichlet && p_.bc[a][1].type != BcType::Dirichlet) continue;
        forcing_host({{1.0, 0.0, 1u << a}});
        Kokkos::deep_copy(part_cache_[a], forcing_host_);
      }
  }
}

// The operator on every enabled execution space (core/spaces.hpp).
#define ATTNPHYS_HEAT_OPERATOR_ON(S) template class BasicHeatOperator<S>;
ATTNPHYS_FOR_EACH_SPACE(ATTNPHYS_HEAT_OPERATOR_ON)

}  // namespace attnphys::fd
