#include "attnphys/operators/layers.hpp"
#include "attnphys/core/parallel.hpp"

#include <cmath>

// glibc 2.35+ ships vector variants of erf and erff in libmvec (SSE2, AVX2 and AVX-512 versions, within 4 ulp),
// but math.h only declares them to GCC under -ffast-math. Declaring them here lets GCC vectorise the host GELU loops
// (one erf per activation: the costliest part of the transformer wavefunction's feed-forward block). Host builds
// only; a device build keeps Kokkos' erf.
#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)) && \
    defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) &&           \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
extern "C" double erf(double) noexcept __attribute__((simd("notinbranch")));
extern "C" float erff(float) noexcept __attribute__((simd("notinbranch")));
#define ATTNPHYS_VECTOR_ERF 1
#endif

namespace attnphys::ops {

namespace {
#ifdef ATTNPHYS_VECTOR_ERF
inline double gelu_erf(double x) { return ::erf(x); }
inline float gelu_erf(float x) { return ::erff(x); }
#else
template <class T>
KOKKOS_INLINE_FUNCTION T gelu_erf(T x) {
  return math::erf(x);
}
#endif

// f(i) for every i < n. With the vector erf, blocks of 1024 elements per Kokkos iteration, each a plain loop the
// compiler vectorises (erf included); otherwise one element per iteration (the device layout).
template <class Space, class F>
void elementwise(const char* label, long n, const F& f) {
#ifdef ATTNPHYS_VECTOR_ERF
  constexpr long block = 1024;
  attnphys::parallel_for<Space>(
      label, (n + block - 1) / block, KOKKOS_LAMBDA(long b) {
        const long i1 = (b + 1) * block < n ? (b + 1) * block : n;
#pragma GCC ivdep
        for (long i = b * block; i < i1; ++i) f(i);
      }, 16);
#else
  attnphys::parallel_for<Space>(label, n, f, 4096);
#endif
}
// Σ_k f(p[k]) over a short contiguous row in eight interleaved partial sums, added pairwise at the end: the
// compiler keeps the eight lanes in one vector register (a single running sum is a chain of dependent adds that it
// may not reorder, and a layer norm over d = 16 would wait on it twice per row).
template <class T, class F>
KOKKOS_INLINE_FUNCTION T lane_sum(const T* p, long n, F f) {
  T s[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};
  long k = 0;
  for (; k + 8 <= n; k += 8)
    for (int l = 0; l < 8; ++l) s[l] += f(p[k + l]);
  for (int l = 0; k < n; ++k, ++l) s[l] += f(p[k]);
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// Column sums out(j) += Σ_i a(i, j) of a row-major [m, n] matrix. Host: one work item per run of kCols
// neighbouring columns that walks down the rows, so every cache line of a is read once (a work item per column
// would stream the whole matrix once per column); devices: one work item per column (coalesced across threads).
constexpr long kCols = 16;

template <class T, class Space>
void column_sums_add(const VecOn<T, Space>& out, const ConstMatOn<T, Space>& a) {
  const long m = a.extent(0), n = a.extent(1);
  if (host_accessible<Space>()) {
    attnphys::parallel_for<Space>(
        "attnphys::column_sums", (n + kCols - 1) / kCols, KOKKOS_LAMBDA(long blk) {
          const long j0 = blk * kCols, w = n - j0 < kCols ? n - j0 : kCols;
          T s[kCols] = {};
          for (long i = 0; i < m; ++i) {
            const T* row = &a(i, j0);
            for (long c = 0; c < w; ++c) s[c] += row[c];
          }
          for (long c = 0; c < w; ++c) out(j0 + c) += s[c];
        }, 4);
    return;
  }
  attnphys::parallel_for<Space>(
      "attnphys::column_sums", n, KOKKOS_LAMBDA(long j) {
        T s = 0;
        for (long i = 0; i < m; ++i) s += a(i, j);
        out(j) += s;
      }, 4);
}

}  // namespace

template <class T, class Space>
void linear_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x, const ConstMatOn<T, Space>& w,
                    const ConstVecOn<T, Space>& b) {
  ScopedRegion region("attnphys::linear_forward");
  const long m = y.extent(0), n = y.extent(1);
  require(long(x.extent(0)) == m && long(w.extent(0)) == n && w.extent(1) == x.extent(1),
          "linear_forward: y is ", m, "x", n, ", x is ", x.extent(0), "x", x.extent(1), ", w is ", w.extent(0), "x",
          w.extent(1), " (w must be [out, in])");
  require(b.extent(0) == 0 || long(b.extent(0)) == n, "linear_forward: bias has ", b.extent(0), " entries, need ", n);
  if (b.extent(0) == 0) {
    gemm_on<Space, T>('N', 'T', T(1), x, w, T(0), y);
    return;
  }
  // Broadcast the bias first and let the gemm add onto it (beta = 1): one pass fewer over y.
  attnphys::parallel_for<Space>(
      "attnphys::linear_forward", m, KOKKOS_LAMBDA(long i) {
        for (long j = 0; j < n; ++j) y(i, j) = b(j);
      }, 16);
  gemm_on<Space, T>('N', 'T', T(1), x, w, T(1), y);
}

template <class T, class Space>
void linear_backward(const MatOn<T, Space>& dx, const MatOn<T, Space>& dw, const VecOn<T, Space>& db,
                     const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& x, const ConstMatOn<T, Space>& w,
                     bool accumulate_dx) {
  ScopedRegion region("attnphys::linear_backward");
  const long m = dy.extent(0), n = dy.extent(1);
  if (dx.extent(0) != 0) gemm_on<Space, T>('N', 'N', T(1), dy, w, accumulate_dx ? T(1) : T(0), dx);
  gemm_on<Space, T>('T', 'N', T(1), dy, x, T(1), dw);
  if (db.extent(0) != 0) {
    require(long(db.extent(0)) == n, "linear_backward: db has ", db.extent(0), " entries, need ", n);
    column_sums_add<T, Space>(db, dy);
  }
}

template <class T, class Space>
void layernorm_forward(const MatOn<T, Space>& y, const VecOn<T, Space>& mean, const VecOn<T, Space>& rstd,
                       const ConstMatOn<T, Space>& x, const ConstVecOn<T, Space>& w, const ConstVecOn<T, Space>& b,
                       T eps) {
  ScopedRegion region("attnphys::layernorm_forward");
  const long m = x.extent(0), d = x.extent(1);
  require(long(y.extent(0)) == m && long(y.extent(1)) == d && long(mean.extent(0)) == m &&
              long(rstd.extent(0)) == m && long(w.extent(0)) == d && long(b.extent(0)) == d,
          "layernorm_forward: shapes disagree (x is ", m, "x", d, ")");
  attnphys::parallel_for<Space>(
      "attnphys::layernorm_forward", m, KOKKOS_LAMBDA(long i) {
        const T* xi = &x(i, 0);
        const T mu = lane_sum(xi, d, [](T v) { return v; }) / T(d);
        const T var = lane_sum(xi, d, [mu](T v) { return (v - mu) * (v - mu); }) / T(d);
        const T r = T(1) / math::sqrt(var + eps);
        for (long k = 0; k < d; ++k) y(i, k) = (xi[k] - mu) * r * w(k) + b(k);
        mean(i) = mu;
        rstd(i) = r;
      }, 16);
}

template <class T, class Space>
void layernorm_backward(const MatOn<T, Space>& dx, const VecOn<T, Space>& dw, const VecOn<T, Space>& db,
                        const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& x, const ConstVecOn<T, Space>& w,
                        const ConstVecOn<T, Space>& mean, const ConstVecOn<T, Space>& rstd) {
  ScopedRegion region("attnphys::layernorm_backward");
  const long m = x.extent(0), d = x.extent(1);
  if (dx.extent(0) != 0) {
    attnphys::parallel_for<Space>(
        "attnphys::layernorm_backward", m, KOKKOS_LAMBDA(long i) {
          const T mu = mean(i), r = rstd(i);
          T s1 = 0, s2 = 0;  // means of g and g·xhat, with g = dy·w
          for (long k = 0; k < d; ++k) {
            const T g = dy(i, k) * w(k);
            s1 += g;
            s2 += g * (x(i, k) - mu) * r;
          }
          s1 /= T(d);
          s2 /= T(d);
          for (long k = 0; k < d; ++k) {
            const T xh = (x(i, k) - mu) * r;
            dx(i, k) += r * (dy(i, k) * w(k) - s1 - xh * s2);
          }
        }, 16);
  }
  if (host_accessible<Space>()) {  // runs of kCols columns down the rows (see column_sums_add)
    attnphys::parallel_for<Space>(
        "attnphys::layernorm_backward_params", (d + kCols - 1) / kCols,
        KOKKOS_LAMBDA(long blk) {
          const long k0 = blk * kCols, w = d - k0 < kCols ? d - k0 : kCols;
          T sw[kCols] = {}, sb[kCols] = {};
          for (long i = 0; i < m; ++i) {
            const T* g = &dy(i, k0);
            const T* xi = &x(i, k0);
            const T mu = mean(i), r = rstd(i);
            for (long c = 0; c < w; ++c) {
              sw[c] += g[c] * (xi[c] - mu) * r;
              sb[c] += g[c];
            }
          }
          for (long c = 0; c < w; ++c) {
            dw(k0 + c) += sw[c];
            db(k0 + c) += sb[c];
          }
        }, 4);
    return;
  }
  attnphys::parallel_for<Space>(
      "attnphys::layernorm_backward_params", d, KOKKOS_LAMBDA(long k) {
        T sw = 0, sb = 0;
        for (long i = 0; i < m; ++i) {
          sw += dy(i, k) * (x(i, k) - mean(i)) * rstd(i);
          sb += dy(i, k);
        }
        dw(k) += sw;
        db(k) += sb;
      }, 4);
}

template <class T, class Space>
void gelu_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x) {
  ScopedRegion region("attnphys::gelu_forward");
  const long n = long(x.extent(0)) * long(x.extent(1));
  T* py = y.data();
  const T* px = x.data();
  elementwise<Space>("attnphys::gelu_forward", n, KOKKOS_LAMBDA(long i) {
    const T v = px[i];
    py[i] = T(0.5) * v * (T(1) + gelu_erf(v * T(0.70710678118654752440)));
  });
}

template <class T, class Space>
void gelu_backward(const MatOn<T, Space>& dx, const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& x) {
  ScopedRegion region("attnphys::gelu_backward");
  const long n = long(x.extent(0)) * long(x.extent(1));
  T* pdx = dx.data();
  const T* pdy = dy.data();
  const T* px = x.data();
  elementwise<Space>("attnphys::gelu_backward", n, KOKKOS_LAMBDA(long i) {
    const T v = px[i];
    const T cdf = T(0.5) * (T(1) + gelu_erf(v * T(0.70710678118654752440)));
    const T pdf = T(0.39894228040143267794) * fast_exp(T(-0.5) * v * v);  // vectorises (float)
    pdx[i] = pdy[i] * (cdf + v * pdf);
  });
}

template <class T, class Space>
void bias_gelu_forward(const MatOn<T, Space>& f, const MatOn<T, Space>& g, const ConstVecOn<T, Space>& b) {
  ScopedRegion region("attnphys::bias_gelu_forward");
  const long m = f.extent(0), n = f.extent(1);
  require(long(g.extent(0)) == m && long(g.extent(1)) == n && long(b.extent(0)) == n,
          "bias_gelu_forward: f is ", m, "x", n, ", g is ", g.extent(0), "x", g.extent(1), ", b has ", b.extent(0),
          " entries");
  T* pf = f.data();
  T* pg = g.data();
  const T* pb = b.data();
  // One pass: per row, f += b, then g = gelu(f) from the value in registers.
  attnphys::parallel_for<Space>(
      "attnphys::bias_gelu_forward", m, KOKKOS_LAMBDA(long i) {
        T* fr = pf + i * n;
        T* gr = pg + i * n;
#pragma GCC ivdep
        for (long j = 0; j < n; ++j) {
          const T v = fr[j] + pb[j];
          fr[j] = v;
          gr[j] = T(0.5) * v * (T(1) + gelu_erf(v * T(0.70710678118654752440)));
        }
      }, 16);
}

template <class T, class Space>
void softmax_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x) {
  ScopedRegion region("attnphys::softmax_forward");
  const long m = x.extent(0), n = x.extent(1);
  attnphys::parallel_for<Space>(
      "attnphys::softmax_forward", m, KOKKOS_LAMBDA(long i) {
        T mx = x(i, 0);
        for (long j = 1; j < n; ++j) mx = x(i, j) > mx ? x(i, j) : mx;
        T s = 0;
        for (long j = 0; j < n; ++j) {
          const T e = math::exp(x(i, j) - mx);
          y(i, j) = e;
          s += e;
        }
        const T inv = T(1) / s;
        for (long j = 0; j < n; ++j) y(i, j) *= inv;
      }, 16);
}

template <class T, class Space>
void softmax_backward(const MatOn<T, Space>& dx, const ConstMatOn<T, Space>& dy, const ConstMatOn<T, Space>& y) {
  ScopedRegion region("attnphys::softmax_backward");
  const long m = y.extent(0), n = y.extent(1);
  attnphys::parallel_for<Space>(
      "attnphys::softmax_backward", m, KOKKOS_LAMBDA(long i) {
        T dot = 0;
        for (long j = 0; j < n; ++j) dot += dy(i, j) * y(i, j);
        for (long j = 0; j < n; ++j) dx(i, j) = y(i, j) * (dy(i, j) - dot);
      }, 16);
}

template <class T, class Space>
void residual_forward(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& a, const ConstMatOn<T, Space>& b) {
  const long n = long(a.extent(0)) * long(a.extent(1));
  T* py = y.data();
  const T* pa = a.data();
  const T* pb = b.data();
  attnphys::parallel_for<Space>(
      "attnphys::residual_forward", n,
      KOKKOS_LAMBDA(long i) { py[i] = pa[i] + pb[i]; }, 32768);
}

template <class T, class Space>
void add_inplace(const MatOn<T, Space>& y, const ConstMatOn<T, Space>& x) {
  const long n = long(x.extent(0)) * long(x.extent(1));
  T* py = y.data();
  const T* px = x.data();
  attnphys::parallel_for<Space>(
      "attnphys::add_inplace", n, KOKKOS_LAMBDA(long i) { py[i] += px[i]; }, 32768);
}

// Every layer for T = float and double on every enabled execution space (core/spaces.hpp).
#define ATTNPHYS_INSTANTIATE_LAYERS(T, S)                                                                       \
  template void linear_forward<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&, const ConstMatOn<T, S>&,      \
                                     const ConstVecOn<T, S>&);                                                  \
  template void linear_backward<T, S>(const MatOn<T, S>&, const MatOn<T, S>&, const VecOn<T, S>&,               \
                                      const ConstMatOn<T, S>&, const ConstMatOn<T, S>&, const ConstMatOn<T, S>&, \
                                      bool);                                                                    \
  template void layernorm_forward<T, S>(const MatOn<T, S>&, const VecOn<T, S>&, const VecOn<T, S>&,             \
                                        const ConstMatOn<T, S>&, const ConstVecOn<T, S>&,                       \
                                        const ConstVecOn<T, S>&, T);                                            \
  template void layernorm_backward<T, S>(const MatOn<T, S>&, const VecOn<T, S>&, const VecOn<T, S>&,            \
                                         const ConstMatOn<T, S>&, const ConstMatOn<T, S>&,                      \
                                         const ConstVecOn<T, S>&, const ConstVecOn<T, S>&,                      \
                                         const ConstVecOn<T, S>&);                                              \
  template void gelu_forward<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&);                                \
  template void gelu_backward<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&, const ConstMatOn<T, S>&);      \
  template void bias_gelu_forward<T, S>(const MatOn<T, S>&, const MatOn<T, S>&, const ConstVecOn<T, S>&);       \
  template void softmax_forward<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&);                             \
  template void softmax_backward<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&, const ConstMatOn<T, S>&);   \
  template void residual_forward<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&, const ConstMatOn<T, S>&);   \
  template void add_inplace<T, S>(const MatOn<T, S>&, const ConstMatOn<T, S>&);
#define ATTNPHYS_LAYERS_ON(S) ATTNPHYS_INSTANTIATE_LAYERS(float, S) ATTNPHYS_INSTANTIATE_LAYERS(double, S)
ATTNPHYS_FOR_EACH_SPACE(ATTNPHYS_LAYERS_ON)

}  // namespace attnphys::ops
