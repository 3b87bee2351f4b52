#include "attnphys/solvers/training/surrogate_kernels.hpp"

#include "attnphys/core/parallel.hpp"
#include "attnphys/core/spaces.hpp"

namespace attnphys::training {

namespace {
// The stencil neighbours (m, p) of grid point n along axis a: wrapped on a periodic axis, the point itself at the
// edge of the others (as stencil_features reads them).
KOKKOS_INLINE_FUNCTION void stencil_neighbours(const SurrogateGrid& g, long n, int a, long& m, long& p) {
  const long nxy = g.nx * g.ny;
  const long i = n % g.nx, j = (n / g.nx) % g.ny, k = n / nxy;
  if (a == 0) {
    m = i > 0 ? n - 1 : (g.px ? n + g.nx - 1 : n);
    p = i + 1 < g.nx ? n + 1 : (g.px ? n - g.nx + 1 : n);
  } else if (a == 1) {
    m = j > 0 ? n - g.nx : (g.py ? n + (g.ny - 1) * g.nx : n);
    p = j + 1 < g.ny ? n + g.nx : (g.py ? n - (g.ny - 1) * g.nx : n);
  } else {
    m = k > 0 ? n - nxy : (g.pz ? n + (g.nz - 1) * nxy : n);
    p = k + 1 < g.nz ? n + nxy : (g.pz ? n - (g.nz - 1) * nxy : n);
  }
}

KOKKOS_INLINE_FUNCTION double grid_spacing(const SurrogateGrid& g, int a) {
  return a == 0 ? g.hx : (a == 1 ? g.hy : g.hz);
}

// The local term's neighbour along one axis: index i + s among n points, wrapped (periodic); beyond a
// non-periodic edge (model.local_edge) clamped to the edge (the edge value repeated), or the cell mirrored across
// the edge face (−1 − k below, 2n − 1 − k above; clamped if still outside), with the sign −1 for the odd extension.
struct LocalEdgeRule {
  bool mirror = false;  // odd or even: read the mirrored cell
  int sign = 1;         // -1: odd
};
KOKKOS_INLINE_FUNCTION long local_axis(long i, long s, long n, bool periodic, const LocalEdgeRule& e, int& sign) {
  long k = i + s;
  if (periodic) {
    k %= n;
    if (k < 0) k += n;
    return k;
  }
  if (k >= 0 && k < n) return k;
  if (e.mirror) {
    k = k < 0 ? -1 - k : 2 * n - 1 - k;
    sign *= e.sign;
  }
  return k < 0 ? 0 : (k >= n ? n - 1 : k);
}
KOKKOS_INLINE_FUNCTION long local_axis(long i, long s, long n, bool periodic) {
  int unused = 1;
  return local_axis(i, s, n, periodic, LocalEdgeRule{}, unused);
}
inline LocalEdgeRule edge_rule(LocalEdge e) {
  return {e != LocalEdge::Clamp, e == LocalEdge::Odd ? -1 : 1};
}

}  // namespace

// Columns col0.. of f: for each field (û, then the C channels) and axis, ℓ·D1 and ℓ²·D2 (see the header).
template <class T, class Space>
void stencil_features(const MatOn<T, Space>& f, long col0, const ops::ConstVecOn<T, Space>& u,
                      const ConstMatOn<T, Space>& extra, long C, long len, int dim, const SurrogateGrid& g,
                      AxisLengths lengths, long first_field) {
  const long tokens = f.extent(0);
  const SurrogateGrid grid = g;
  attnphys::parallel_for<Space>("attnphys::surrogate_stencil", tokens, KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t - b * len;
        auto at = [&](long q, long field) -> double {
          const long tt = b * len + q;
          return field == 0 ? double(u(tt)) : double(extra(tt, field - 1));
        };
        for (long field = first_field; field <= C; ++field) {
          const double c0 = at(n, field);
          for (int a = 0; a < dim; ++a) {
            long m, p;
            stencil_neighbours(grid, n, a, m, p);
            const double h = grid_spacing(grid, a), l = lengths[a] / 64.0;
            const double fm = at(m, field), fp = at(p, field);
            const long col = col0 + ((field - first_field) * dim + a) * 2;
            f(t, col) = T(l * (fp - fm) / (2 * h));
            f(t, col + 1) = T(l * l * (fp - 2 * c0 + fm) / (h * h));
          }
        }
      });
}

// du += the adjoint of the stencil columns of û (field 0): with f1(t) = ℓ(u_p(t) − u_m(t))/(2h) and
// f2(t) = ℓ²(u_p(t) − 2u_t + u_m(t))/h², du_n += Σ_t g1(t) ∂f1(t)/∂u_n + g2(t) ∂f2(t)/∂u_n. Gathered per n over the
// tokens whose stencil touches n (n itself and its two neighbours), so no two threads write one value.
template <class T, class Space>
void stencil_input_gradient(const ops::VecOn<T, Space>& du, const ConstMatOn<T, Space>& df, long col0, long len,
                            int dim, const SurrogateGrid& g, AxisLengths lengths) {
  const SurrogateGrid grid = g;
  attnphys::parallel_for<Space>(
      "attnphys::surrogate_stencil_backward", long(du.extent(0)),
      KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t - b * len;
        double acc = 0;
        for (int a = 0; a < dim; ++a) {
          const double h = grid_spacing(grid, a), l = lengths[a] / 64.0;
          const double c1 = l / (2 * h), c2 = l * l / (h * h);
          const long col = col0 + 2 * a;
          long mn, pn;
          stencil_neighbours(grid, n, a, mn, pn);
          const long cand[3] = {n, mn, pn};
          for (int k = 0; k < 3; ++k) {
            const long q = cand[k];
            if ((k == 1 && q == n) || (k == 2 && (q == n || q == mn))) continue;  // each token once
            long mq, pq;
            stencil_neighbours(grid, q, a, mq, pq);
            const double w1 = double(pq == n) - double(mq == n);
            const double w2 = double(pq == n) - 2.0 * double(q == n) + double(mq == n);
            acc += c1 * w1 * double(df(b * len + q, col)) + c2 * w2 * double(df(b * len + q, col + 1));
          }
        }
        du(t) += T(acc);
      });
}

// ŷ(t) += Σ_s w(t, s) σ(t, s) û(nb(t, s)) with nb(t, s) the grid neighbour of t at offset s = (sx, sy, sz) ∈
// {−r..r}^dim and σ its sign (−1 per odd reflection, else 1), s index ((sz + rz)(2ry + 1) + sy + ry)(2r + 1) + sx + r
// (x fastest).
template <class T, class Space>
void local_forward(const ops::VecOn<T, Space>& fout, const ConstMatOn<T, Space>& w,
                   const ops::ConstVecOn<T, Space>& fin, long len, long r, int dim, const SurrogateGrid& g,
                   LocalEdge edge) {
  const SurrogateGrid grid = g;
  const LocalEdgeRule er = edge_rule(edge);
  const long ry = dim > 1 ? r : 0, rz = dim > 2 ? r : 0, wx = 2 * r + 1, wy = 2 * ry + 1;
  attnphys::parallel_for<Space>(
      "attnphys::cond_local", long(fout.extent(0)), KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t - b * len, i = n % grid.nx, j = (n / grid.nx) % grid.ny,
                   k = n / (grid.nx * grid.ny);
        T acc = 0;
        for (long sz = -rz; sz <= rz; ++sz) {
          int sgz = 1;
          const long kk = local_axis(k, sz, grid.nz, grid.pz, er, sgz);
          for (long sy = -ry; sy <= ry; ++sy) {
            int sgy = sgz;
            const long jj = local_axis(j, sy, grid.ny, grid.py, er, sgy);
            for (long sx = -r; sx <= r; ++sx) {
              int sg = sgy;
              const long ii = local_axis(i, sx, grid.nx, grid.px, er, sg);
              const T v = fin(b * len + (kk * grid.ny + jj) * grid.nx + ii);
              acc += w(t, ((sz + rz) * wy + sy + ry) * wx + sx + r) * (sg < 0 ? -v : v);
            }
          }
        }
        fout(t) += acc;
      });
}

// The local term's backward: dw(t, s) = g(t) σ(t, s) û(nb(t, s)) and du(n) += Σ_{t, s: nb(t, s) = n} σ(t, s) w(t, s)
// g(t), the latter gathered per n over the tokens within r cells of n along each axis (a mirrored neighbour is
// within r cells too; every token once, also when a periodic axis has fewer than 2r + 1 points), so no two threads
// write one value.
template <class T, class Space>
void local_backward(const MatOn<T, Space>& dw, const ops::VecOn<T, Space>& du, const ConstMatOn<T, Space>& w,
                    const ops::ConstVecOn<T, Space>& fin, const ops::ConstVecOn<T, Space>& g, long len, long r,
                    int dim, const SurrogateGrid& gr, LocalEdge edge) {
  const SurrogateGrid grid = gr;
  const LocalEdgeRule er = edge_rule(edge);
  const long ry = dim > 1 ? r : 0, rz = dim > 2 ? r : 0, wx = 2 * r + 1, wy = 2 * ry + 1;
  const long tokens = fin.extent(0);
  attnphys::parallel_for<Space>("attnphys::cond_local_dw", tokens, KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t - b * len, i = n % grid.nx, j = (n / grid.nx) % grid.ny,
                   k = n / (grid.nx * grid.ny);
        const T gt = g(t);
        for (long sz = -rz; sz <= rz; ++sz) {
          int sgz = 1;
          const long kk = local_axis(k, sz, grid.nz, grid.pz, er, sgz);
          for (long sy = -ry; sy <= ry; ++sy) {
            int sgy = sgz;
            const long jj = local_axis(j, sy, grid.ny, grid.py, er, sgy);
            for (long sx = -r; sx <= r; ++sx) {
              int sg = sgy;
              const long ii = local_axis(i, sx, grid.nx, grid.px, er, sg);
              const T v = gt * fin(b * len + (kk * grid.ny + jj) * grid.nx + ii);
              dw(t, ((sz + rz) * wy + sy + ry) * wx + sx + r) = sg < 0 ? -v : v;
            }
          }
        }
      });
  attnphys::parallel_for<Space>("attnphys::cond_local_du", tokens, KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t - b * len, i = n % grid.nx, j = (n / grid.nx) % grid.ny,
                   k = n / (grid.nx * grid.ny);
        // Candidates along an axis: all points of a periodic axis shorter than the window, else the window.
        const bool ax = grid.px && grid.nx <= wx, ay = grid.py && grid.ny <= wy, az = grid.pz && grid.nz <= 2 * rz + 1;
        const long kx = ax ? grid.nx : wx, ky = ay ? grid.ny : wy, kz = az ? grid.nz : 2 * rz + 1;
        T acc = 0;
        // Away from the edges (r cells or more from a non-periodic edge; a periodic axis longer than the window),
        // token q = t − s reads t at offset s and nothing else reads t: du(t) = Σ_s w(t − s, s) g(t − s), the
        // transposed stencil, without the search below.
        const bool fx = grid.px ? grid.nx > wx : (i >= r && i + r < grid.nx);
        const bool fy = grid.py ? grid.ny > wy : (j >= ry && j + ry < grid.ny);
        const bool fz = grid.pz ? grid.nz > 2 * rz + 1 : (k >= rz && k + rz < grid.nz);
        if (fx && fy && fz) {
          for (long sz = -rz; sz <= rz; ++sz) {
            long qz = k - sz;
            qz = qz < 0 ? qz + grid.nz : (qz >= grid.nz ? qz - grid.nz : qz);
            for (long sy = -ry; sy <= ry; ++sy) {
              long qy = j - sy;
              qy = qy < 0 ? qy + grid.ny : (qy >= grid.ny ? qy - grid.ny : qy);
              const long row = b * len + (qz * grid.ny + qy) * grid.nx;
              const long s0 = ((sz + rz) * wy + sy + ry) * wx + r;
              for (long sx = -r; sx <= r; ++sx) {
                long qx = i - sx;
                qx = qx < 0 ? qx + grid.nx : (qx >= grid.nx ? qx - grid.nx : qx);
                acc += w(row + qx, s0 + sx) * g(row + qx);
              }
            }
          }
          du(t) += acc;
          return;
        }
        for (long cz = 0; cz < kz; ++cz) {
          long qz = az ? cz : k - rz + cz;
          if (!az) {
            if (grid.pz)
              qz = local_axis(qz, 0, grid.nz, true);
            else if (qz < 0 || qz >= grid.nz)
              continue;
          }
          for (long cy = 0; cy < ky; ++cy) {
            long qy = ay ? cy : j - ry + cy;
            if (!ay) {
              if (grid.py)
                qy = local_axis(qy, 0, grid.ny, true);
              else if (qy < 0 || qy >= grid.ny)
                continue;
            }
            for (long cx = 0; cx < kx; ++cx) {
              long qx = ax ? cx : i - r + cx;
              if (!ax) {
                if (grid.px)
                  qx = local_axis(qx, 0, grid.nx, true);
                else if (qx < 0 || qx >= grid.nx)
                  continue;
              }
              const long q = b * len + (qz * grid.ny + qy) * grid.nx + qx;
              for (long sz = -rz; sz <= rz; ++sz) {
                int sgz = 1;
                if (local_axis(qz, sz, grid.nz, grid.pz, er, sgz) != k) continue;
                for (long sy = -ry; sy <= ry; ++sy) {
                  int sgy = sgz;
                  if (local_axis(qy, sy, grid.ny, grid.py, er, sgy) != j) continue;
                  for (long sx = -r; sx <= r; ++sx) {
                    int sg = sgy;
                    if (local_axis(qx, sx, grid.nx, grid.px, er, sg) == i) {
                      const T v = w(q, ((sz + rz) * wy + sy + ry) * wx + sx + r) * g(q);
                      acc += sg < 0 ? -v : v;
                    }
                  }
                }
              }
            }
          }
        }
        du(t) += acc;
      });
}

template <class T, class Space>
void channel_window_features(const MatOn<T, Space>& f, long col0, const ConstMatOn<T, Space>& extra, long C,
                             long len, long w, int dim, const SurrogateGrid& g) {
  const SurrogateGrid grid = g;
  const LocalEdgeRule mirror{true, 1};
  const long wy = dim > 1 ? w : 0, wz = dim > 2 ? w : 0, ex = 2 * w + 1, ey = 2 * wy + 1;
  const long S = ex * ey * (2 * wz + 1), centre = (S - 1) / 2;
  attnphys::parallel_for<Space>(
      "attnphys::surrogate_channel_window", long(f.extent(0)), KOKKOS_LAMBDA(long t) {
        const long b = t / len, n = t - b * len, i = n % grid.nx, j = (n / grid.nx) % grid.ny,
                   k = n / (grid.nx * grid.ny);
        for (long sz = -wz; sz <= wz; ++sz) {
          int unused = 1;
          const long kk = local_axis(k, sz, grid.nz, grid.pz, mirror, unused);
          for (long sy = -wy; sy <= wy; ++sy) {
            const long jj = local_axis(j, sy, grid.ny, grid.py, mirror, unused);
            for (long sx = -w; sx <= w; ++sx) {
              const long s = ((sz + wz) * ey + sy + wy) * ex + sx + w;
              if (s == centre) continue;
              const long q = b * len + (kk * grid.ny + jj) * grid.nx + local_axis(i, sx, grid.nx, grid.px, mirror, unused);
              const long slot = s < centre ? s : s - 1;
              for (long c = 0; c < C; ++c) f(t, col0 + c * (S - 1) + slot) = extra(q, c);
            }
          }
        }
      }, 16);
}

// Every kernel for T = float and double on every enabled execution space.
#define ATTNPHYS_SURROGATE_KERNELS(T, S)                                                                          \
  template void stencil_features<T, S>(const MatOn<T, S>&, long, const ops::ConstVecOn<T, S>&,                   \
                                       const ConstMatOn<T, S>&, long, long, int, const SurrogateGrid&,           \
                                       AxisLengths, long);                                                       \
  template void stencil_input_gradient<T, S>(const ops::VecOn<T, S>&, const ConstMatOn<T, S>&, long, long, int,  \
                                             const SurrogateGrid&, AxisLengths);                                 \
  template void local_forward<T, S>(const ops::VecOn<T, S>&, const ConstMatOn<T, S>&, const ops::ConstVecOn<T, S>&, \
                                    long, long, int, const SurrogateGrid&, LocalEdge);                           \
  template void local_backward<T, S>(const MatOn<T, S>&, const ops::VecOn<T, S>&, const ConstMatOn<T, S>&,       \
                                     const ops::ConstVecOn<T, S>&, const ops::ConstVecOn<T, S>&, long, long, int, \
                                     const SurrogateGrid&, LocalEdge);                                            \
  template void channel_window_features<T, S>(const MatOn<T, S>&, long, const ConstMatOn<T, S>&, long, long, long, \
                                              int, const SurrogateGrid&);
#define ATTNPHYS_SURROGATE_KERNELS_ON(S) ATTNPHYS_SURROGATE_KERNELS(float, S) ATTNPHYS_SURROGATE_KERNELS(double, S)
ATTNPHYS_FOR_EACH_SPACE(ATTNPHYS_SURROGATE_KERNELS_ON)

}  // namespace attnphys::training
