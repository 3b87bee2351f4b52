#include "attnphys/solvers/vmc/sr.hpp"
#include "attnphys/core/parallel.hpp"

#include <Eigen/Dense>
#include <cmath>
#include <complex>
#include <map>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "attnphys/core/gemm.hpp"

// LAPACK / BLAS (the host BLAS that Kokkos Kernels links: OpenBLAS here). Only routines implemented in C by
// OpenBLAS (no hidden Fortran string lengths are read).
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
            const int* lda, const double* beta, double* c, const int* ldc);
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha, const float* a,
            const int* lda, const float* beta, float* c, const int* ldc);
void dtrsv_(const char* uplo, const char* trans, const char* diag, const int* n, const double* a, const int* lda,
            double* x, const int* incx);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void strsv_(const char* uplo, const char* trans, const char* diag, const int* n, const float* a, const int* lda,
            float* x, const int* incx);
void zherk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const void* a,
            const int* lda, const double* beta, void* c, const int* ldc);
void zpotrf_(const char* uplo, const int* n, void* a, const int* lda, int* info);
void ztrsv_(const char* uplo, const char* trans, const char* diag, const int* n, const void* a, const int* lda,
            void* x, const int* incx);
}

namespace attnphys::vmc {

namespace {
// C (n×n, column-major; only its upper triangle is written on the host path) = op(A) op(A)ᵀ for the row-major X
// [rows, cols]: gram_rows: X Xᵀ (n = rows), otherwise Xᵀ X (n = cols). One syrk (half a gemm's work) on the host,
// a gemm (both triangles) elsewhere.
template <class T>
void gram(const View2<T>& X, const View2<T>& C, bool gram_rows) {
  const int rows = int(X.extent(0)), cols = int(X.extent(1));
  if constexpr (std::is_same_v<MemSpace, Kokkos::HostSpace>) {
    // Row-major X is the column-major A = Xᵀ [cols × rows], lda = cols.
    const int n = gram_rows ? rows : cols, k = gram_rows ? cols : rows, lda = std::max(1, cols);
    const char uplo = 'U', trans = gram_rows ? 'T' : 'N';
    const T one = 1, zero = 0;
    if constexpr (std::is_same_v<T, double>)
      dsyrk_(&uplo, &trans, &n, &k, &one, X.data(), &lda, &zero, C.data(), &n);
    else
      ssyrk_(&uplo, &trans, &n, &k, &one, X.data(), &lda, &zero, C.data(), &n);
  } else if (gram_rows) {
    gemm('N', 'T', T(1), X, X, T(0), C);
  } else {
    gemm('T', 'N', T(1), X, X, T(0), C);
  }
}

// Preconditioned conjugate gradients for (A + shift·I) x = b from x (in: the start, out: the solution), with
// apply(v) = (A + shift·I) v in double and precondition(r) ≈ (A + shift·I)⁻¹ r. Stops when the recursive residual is
// below tol·‖b‖, then recomputes the residual from x (the value returned in `residual`); true when that one is below
// tol too. `steps` counts the products. At most max_steps; a breakdown (a non-positive curvature) stops it.
template <class Apply, class Precondition>
bool pcg(const Apply& apply, const Precondition& precondition, const Eigen::VectorXd& b, Eigen::VectorXd& x,
         double tol, int max_steps, int& steps, double& residual) {
  const double bnorm = b.norm();
  steps = 0;
  residual = INFINITY;
  if (!(bnorm > 0) || !std::isfinite(bnorm)) return false;
  Eigen::VectorXd r = x.isZero(0) ? Eigen::VectorXd(b) : Eigen::VectorXd(b - apply(x));
  if (r.norm() <= tol * bnorm) {
    residual = r.norm() / bnorm;
    return true;
  }
  Eigen::VectorXd z = precondition(r), p = z;
  double rz = r.dot(z);
  while (steps < max_steps && std::isfinite(rz) && rz > 0) {
    const Eigen::VectorXd q = apply(p);
    ++steps;
    const double pq = p.dot(q);
    if (!(pq > 0)) break;
    const double alpha = rz / pq;
    x += alpha * p;
    r -= alpha * q;
    if (r.norm() <= tol * bnorm) {
      residual = (b - apply(x)).norm() / bnorm;
      return residual <= tol;
    }
    z = precondition(r);
    const double rz_next = r.dot(z);
    p = z + (rz_next / rz) * p;
    rz = rz_next;
  }
  return false;
}

// Solves (A + shift·I) x = b for a symmetric positive semi-definite A held in `a` (n×n column-major; only the
// upper triangle and the diagonal are read; the storage is overwritten by the Cholesky factor). LAPACK's blocked,
// threaded Cholesky of the upper triangle in place (as syrk left it: no copy, no transpose) and two BLAS triangular
// solves. `apply(x)` returns (A + shift·I) x computed from the stacked O (X) itself, which checks the solution; when
// the factorisation fails or its solution does not solve the system, `refill(a)` writes A again and an eigenvalue
// pseudo-inverse with cut-off rcond·λ_max takes over.
template <class Apply, class Refill>
Eigen::VectorXd spd_solve(double* a, long n, const Eigen::VectorXd& b, double shift, double rcond, bool& pinv,
                          const Apply& apply, const Refill& refill) {
  Eigen::Map<Eigen::MatrixXd> A(a, n, n);
  pinv = false;
  {
    A.diagonal().array() += shift;
    const int nn = int(n), one = 1;
    int info = 0;
    const char upper = 'U', trans = 'T', notrans = 'N', nonunit = 'N';
    dpotrf_(&upper, &nn, A.data(), &nn, &info);
    if (info == 0) {
      auto solve = [&](const Eigen::VectorXd& r) {
        Eigen::VectorXd x = r;  // A = Uᵀ U: Uᵀ z = r, then U x = z
        dtrsv_(&upper, &trans, &nonunit, &nn, A.data(), &nn, x.data(), &one);
        dtrsv_(&upper, &notrans, &nonunit, &nn, A.data(), &nn, x.data(), &one);
        return x;
      };
      Eigen::VectorXd x = solve(b);
      if (x.allFinite()) {
        // With a small shift the condition number reaches 1e9 and more (VMC at N = 100, λ = 1e-4), where the
        // Cholesky solution leaves a residual of ~1e-6 and the products that measure it are accurate to about that:
        // conjugate-gradient steps preconditioned by the same factor polish it as far as double precision allows.
        // Such a solution is kept: the eigenvalue pseudo-inverse (seconds at n = 2000) solves these systems no
        // better (test IllConditionedCholeskySolutionIsPolishedNotPseudoInverted), and is for failed
        // factorisations and solutions that are far off (residual above 1e-4).
        int steps = 0;
        double residual = 0;
        const bool converged = pcg(apply, solve, b, x, 1e-10, 10, steps, residual);
        if (converged || (x.allFinite() && residual <= 1e-4)) return x;
      }
    }
  }
  pinv = true;
  refill(a);
  Eigen::MatrixXd F = A.triangularView<Eigen::Upper>();
  F.triangularView<Eigen::StrictlyLower>() = A.triangularView<Eigen::StrictlyUpper>().transpose();
  F.diagonal().array() += shift;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(F);
  const Eigen::VectorXd w = es.eigenvalues();
  const double cut = rcond * std::max(std::abs(w.maxCoeff()), 1e-300);
  Eigen::VectorXd c = es.eigenvectors().transpose() * b;
  for (long i = 0; i < w.size(); ++i) c[i] = w[i] > cut ? c[i] / w[i] : 0.0;
  return es.eigenvectors() * c;
}

// Matrix-vector products with the row-major X [rows, cols] (one column of a gemm; a BLAS gemm with one column packs
// both operands and ran at a fifth of the memory bandwidth here). Each output is summed by one thread in a fixed
// order, so the result does not depend on the thread count. x_times: y = X v; xt_times: u = Xᵀ w.
template <class T>
void x_times(const View2<T>& X, const View2<T>& v, const View2<T>& y) {
  const long rows = X.extent(0), cols = X.extent(1);
  attnphys::parallel_for(
      "attnphys::sr_x_times", rows, KOKKOS_LAMBDA(const long r) {
        constexpr int L = 8;
        double acc[L] = {0, 0, 0, 0, 0, 0, 0, 0};
        long k = 0;
        for (; k + L <= cols; k += L)
          for (int l = 0; l < L; ++l) acc[l] += double(X(r, k + l)) * double(v(k + l, 0));
        double t = 0;
        for (; k < cols; ++k) t += double(X(r, k)) * double(v(k, 0));
        for (int l = 0; l < L; ++l) t += acc[l];
        y(r, 0) = T(t);
      }, 16);
}

template <class T>
void xt_times(const View2<T>& X, const View2<T>& w, const View2<T>& u) {
  const long rows = X.extent(0), cols = X.extent(1);
  constexpr long kBlock = 64;  // columns per work item, accumulated over the rows in order
  attnphys::parallel_for(
      "attnphys::sr_xt_times", (cols + kBlock - 1) / kBlock, KOKKOS_LAMBDA(const long q) {
        const long k0 = q * kBlock, n = k0 + kBlock < cols ? kBlock : cols - k0;
        double acc[kBlock];
        for (long j = 0; j < n; ++j) acc[j] = 0;
        for (long r = 0; r < rows; ++r) {
          const double wr = double(w(r, 0));
          for (long j = 0; j < n; ++j) acc[j] += wr * double(X(r, k0 + j));
        }
        for (long j = 0; j < n; ++j) u(k0 + j, 0) = T(acc[j]);
      });
}

// Host double copy of a symmetric [n, n] view (the view's own storage when it already is host double).
template <class T>
double* host_square(const View2<T>& v, std::vector<double>& own) {
  auto h = to_host(v);
  if constexpr (std::is_same_v<T, double> && std::is_same_v<MemSpace, Kokkos::HostSpace>) {
    (void)own;
    return h.data();
  } else {
    own.assign(h.data(), h.data() + h.span());
    return own.data();
  }
}

// Work buffers kept between calls (VMC calls sr_direction every iteration with the same shapes, and allocating
// and zeroing ~100 MB each time cost as much as the products); released when Kokkos finalises.
// The row count may change from call to call (merged duplicate samples): storage grows only, and the views of
// each call are exact-shape views into it.
template <class T>
struct SrWork {
  View2<T> X, eps, F, K, y, D;
  Kokkos::View<double*, MemSpace> mean_re, mean_im;
  View1<T> sx, seps, sk, sy;  // storage of X, eps, K, y
  View2<float> Xf, Kf;         // mixed precision: X and the kernel in single precision
  View1<float> sxf, skf;
  long M = -1, P = -1;
  bool pxp = false;
  template <class U>
  static void grow(View1<U>& v, long n, const char* label) {
    if (long(v.extent(0)) < n) v = View1<U>(std::string(label), n);
  }
  void ensure_single() {
    const long nk = pxp ? P : 2 * M;
    grow(sxf, 2 * M * P, "attnphys::sr_x_single");
    grow(skf, nk * nk, "attnphys::sr_kernel_single");
    Xf = View2<float>(sxf.data(), 2 * M, P);
    Kf = View2<float>(skf.data(), nk, nk);
  }
  void ensure(long m, long p, bool use_pxp) {
    if (m == M && p == P && use_pxp == pxp) return;
    if (p != P) {
      F = View2<T>(("attnphys::sr_f"), p, 1);
      D = View2<T>(("attnphys::sr_d"), p, 1);
      mean_re = Kokkos::View<double*, MemSpace>("attnphys::sr_mean_re", p);
      mean_im = Kokkos::View<double*, MemSpace>("attnphys::sr_mean_im", p);
    }
    const long nk = use_pxp ? p : 2 * m;
    grow(sx, 2 * m * p, "attnphys::sr_x");
    grow(seps, 2 * m, "attnphys::sr_eps");
    grow(sy, 2 * m, "attnphys::sr_y");
    grow(sk, nk * nk, use_pxp ? "attnphys::sr_s" : "attnphys::sr_kernel");
    X = View2<T>(sx.data(), 2 * m, p);
    eps = View2<T>(seps.data(), 2 * m, 1);
    y = View2<T>(sy.data(), 2 * m, 1);
    K = View2<T>(sk.data(), nk, nk);
    M = m;
    P = p;
    pxp = use_pxp;
  }
};

template <class T>
SrWork<T>& sr_work() {
  static SrWork<T>* work = nullptr;
  if (!work) {
    work = new SrWork<T>();
    Kokkos::push_finalize_hook([] {
      delete work;
      work = nullptr;
    });
  }
  return *work;
}
}  // namespace

template <class T>
SrInfo sr_direction(const View2<const T>& o_re, const View2<const T>& o_im, const View1<const T>& e_re,
                    const View1<const T>& e_im, double diag_shift, SrForm form, double rcond,
                    const View1<T>& delta, const View1<T>& gradient, const View1<const T>& counts,
                    SrPrecision precision) {
  ScopedRegion region("attnphys::sr_direction");
  const long M = o_re.extent(0), P = o_re.extent(1);
  require(M >= 1 && o_im.extent(0) == std::size_t(M) && o_im.extent(1) == std::size_t(P) &&
              e_re.extent(0) == std::size_t(M) && e_im.extent(0) == std::size_t(M) &&
              delta.extent(0) == std::size_t(P),
          "sr_direction: O must be [M, P] (twice), E_loc [M] (twice) and delta [P]; got O ", o_re.extent(0), "x",
          o_re.extent(1), " and ", o_im.extent(0), "x", o_im.extent(1), ", E_loc ", e_re.extent(0), " and ",
          e_im.extent(0), ", delta ", delta.extent(0));
  require(diag_shift >= 0, "SR diagonal shift must be >= 0, got ", diag_shift);
  const bool weighted = counts.extent(0) > 0;
  require(!weighted || counts.extent(0) == std::size_t(M), "sr_direction: counts must have one entry per row of O (",
          M, "), got ", counts.extent(0));
  double total = double(M);  // samples the rows stand for
  if (weighted) {
    total = 0;
    Kokkos::parallel_reduce(
        "attnphys::sr_total", Kokkos::RangePolicy<ExecSpace>(0, M),
        KOKKOS_LAMBDA(const long m, double& a) { a += double(counts(m)); }, total);
    require(total >= 1, "sr_direction: counts must add up to at least one sample");
  }
  SrInfo info;
  info.form = form == SrForm::Auto ? (P > 2 * M ? SrForm::Minsr : SrForm::Pxp) : form;

  // Centre and stack.
  auto& work = sr_work<T>();
  work.ensure(M, P, info.form == SrForm::Pxp);
  // Mixed precision applies to the double solve (a float T solves in float as before).
  const bool mixed = precision == SrPrecision::Mixed && std::is_same_v<T, double>;
  if (mixed) work.ensure_single();
  const auto X = work.X, eps = work.eps;
  const auto Xf = work.Xf;
  const double inv_sqrt_m = 1.0 / std::sqrt(double(M));
  // Column means ⟨O_k⟩ (summed over m in order, in double), then X row by row (contiguous in k).
  const auto mean_re = work.mean_re, mean_im = work.mean_im;
  constexpr long kCols = 32;  // columns per work item: rows are read contiguously, summed in order m = 0..M-1
  attnphys::parallel_for(
      "attnphys::sr_mean_o", (P + kCols - 1) / kCols, KOKKOS_LAMBDA(const long q) {
        const long k0 = q * kCols, k1 = k0 + kCols < P ? k0 + kCols : P;
        for (long k = k0; k < k1; ++k) {
          mean_re(k) = 0;
          mean_im(k) = 0;
        }
        for (long m = 0; m < M; ++m) {
          const double c = weighted ? double(counts(m)) : 1.0;
          for (long k = k0; k < k1; ++k) {
            mean_re(k) += weighted ? c * double(o_re(m, k)) : double(o_re(m, k));
            mean_im(k) += weighted ? c * double(o_im(m, k)) : double(o_im(m, k));
          }
        }
      }, 64);
  // Row m scaled by √(count_m / total) (1/√M without counts).
  attnphys::parallel_for(
      "attnphys::sr_center", M, KOKKOS_LAMBDA(const long m) {
        const double w = weighted ? math::sqrt(double(counts(m)) / total) : inv_sqrt_m;
        for (long k = 0; k < P; ++k) {
          const T re = T((double(o_re(m, k)) - mean_re(k) / total) * w);
          const T im = T((double(o_im(m, k)) - mean_im(k) / total) * w);
          X(m, k) = re;
          X(M + m, k) = im;
          if (mixed) {
            Xf(m, k) = float(re);
            Xf(M + m, k) = float(im);
          }
        }
      }, 8);
  double er = 0, ei = 0;
  Kokkos::parallel_reduce(
      "attnphys::sr_mean_e", Kokkos::RangePolicy<ExecSpace>(0, M),
      KOKKOS_LAMBDA(const long m, double& a) { a += weighted ? double(counts(m)) * double(e_re(m)) : double(e_re(m)); },
      er);
  Kokkos::parallel_reduce(
      "attnphys::sr_mean_e", Kokkos::RangePolicy<ExecSpace>(0, M),
      KOKKOS_LAMBDA(const long m, double& a) { a += weighted ? double(counts(m)) * double(e_im(m)) : double(e_im(m)); },
      ei);
  er /= total;
  ei /= total;
  attnphys::parallel_for(
      "attnphys::sr_eps", M, KOKKOS_LAMBDA(const long m) {
        const double w = weighted ? math::sqrt(double(counts(m)) / total) : inv_sqrt_m;
        eps(m, 0) = T((double(e_re(m)) - er) * w);
        eps(M + m, 0) = T((double(e_im(m)) - ei) * w);
      }, 4096);
  const auto F = work.F;
  xt_times<T>(X, eps, F);
  {
    auto hf = to_host(F);
    double g2 = 0;
    for (long k = 0; k < P; ++k) g2 += 4.0 * double(hf(k, 0)) * double(hf(k, 0));
    info.grad_norm = std::sqrt(g2);
    if (gradient.extent(0) == std::size_t(P)) {
      auto hg = Kokkos::create_mirror_view(gradient);
      for (long k = 0; k < P; ++k) hg(k) = T(2) * hf(k, 0);
      Kokkos::deep_copy(gradient, hg);
    }
  }

  // (K + shift) v for the kernel of the chosen form, from X: pxp K = XᵀX (v [P]), minsr K = XXᵀ (v [2M]).
  const bool pxp = info.form == SrForm::Pxp;
  const long n_sys = pxp ? P : 2 * M;
  const View2<T> in = pxp ? work.D : work.y, mid = pxp ? work.y : work.D;
  auto to_view = [](const Eigen::VectorXd& x, const View2<T>& v) {
    auto h = Kokkos::create_mirror_view(v);
    for (long i = 0; i < long(x.size()); ++i) h(i, 0) = T(x[i]);
    Kokkos::deep_copy(v, h);
  };
  auto from_view = [](const View2<T>& v, long n) {
    auto h = to_host(v);
    Eigen::VectorXd x(n);
    for (long i = 0; i < n; ++i) x[i] = double(h(i, 0));
    return x;
  };
  auto apply = [&](const Eigen::VectorXd& x) -> Eigen::VectorXd {
    to_view(x, in);
    if (pxp) {
      x_times<T>(X, in, mid);   // X v [2M]
      xt_times<T>(X, mid, in);  // Xᵀ X v [P]
    } else {
      xt_times<T>(X, in, mid);  // Xᵀ v [P]
      x_times<T>(X, mid, in);   // X Xᵀ v [2M]
    }
    return from_view(in, n_sys) + diag_shift * x;
  };
  std::vector<double> own, own2;
  auto refill = [&](double* a) {  // the pseudo-inverse's fallback needs the kernel that the factorisation replaced
    gram<T>(X, work.K, !pxp);
    const double* k = host_square(work.K, own2);
    if (k != a) std::copy(k, k + n_sys * n_sys, a);
  };
  const Eigen::VectorXd rhs = pxp ? from_view(F, P) : from_view(eps, 2 * M);
  Eigen::VectorXd sol;
  bool solved = false;
  if (mixed) {
    // (K + λ) in single precision (syrk, shift, Cholesky) as the preconditioner of conjugate gradients on the
    // double system, whose products use the double X (apply), until ‖b − (K + λ) x‖ ≤ 1e-10 ‖b‖ for the residual
    // recomputed from x at the end. The preconditioned matrix differs from the identity by about cond · ε_single,
    // so a few steps suffice; a failed factorisation, a breakdown, or no convergence in 20 steps leaves it to the
    // double solve.
    gram<float>(Xf, work.Kf, !pxp);
    auto hk = to_host(work.Kf);
    float* kf = hk.data();
    // Equilibrated first (D⁻¹ (K + λ) D⁻¹ with unit diagonal): the single-precision Cholesky's error then follows
    // the condition number of the scaled matrix, often far smaller than that of K + λ when the rows of X differ in
    // size (one large |O| sample). Only the upper triangle is touched (syrk wrote nothing below it).
    Eigen::VectorXd dinv(n_sys);
    for (long i = 0; i < n_sys; ++i) {
      const double dii = double(kf[i * n_sys + i]) + diag_shift;
      dinv[i] = dii > 0 ? 1.0 / std::sqrt(dii) : 1.0;
    }
    // kf is host memory (the kernel's host copy): the host pool may scale it only when the execution space is the
    // host's; a device build scales its host copy in a plain loop.
    auto scale_column = [&](const long j) {
      float* col = kf + j * n_sys;
      for (long i = 0; i < j; ++i) col[i] = float(double(col[i]) * dinv[i] * dinv[j]);
      col[j] = float((double(col[j]) + diag_shift) * dinv[j] * dinv[j]);
    };
    if constexpr (std::is_same_v<MemSpace, Kokkos::HostSpace>)
      attnphys::parallel_for("attnphys::sr_equilibrate", n_sys, scale_column, 16);
    else
      for (long j = 0; j < n_sys; ++j) scale_column(j);
    const int nn = int(n_sys), one = 1;
    int fail = 0;
    const char upper = 'U', trans = 'T', notrans = 'N', nonunit = 'N';
    spotrf_(&upper, &nn, kf, &nn, &fail);
    std::vector<float> zf(static_cast<std::size_t>(n_sys));
    auto precondition = [&](const Eigen::VectorXd& r) {
      const Eigen::VectorXd rs = dinv.cwiseProduct(r);
      const double scale = std::max(rs.cwiseAbs().maxCoeff(), 1e-300);  // float's range is never the limit
      for (long i = 0; i < n_sys; ++i) zf[i] = float(rs[i] / scale);
      strsv_(&upper, &trans, &nonunit, &nn, kf, &nn, zf.data(), &one);
      strsv_(&upper, &notrans, &nonunit, &nn, kf, &nn, zf.data(), &one);
      Eigen::VectorXd z(n_sys);
      for (long i = 0; i < n_sys; ++i) z[i] = scale * double(zf[i]) * dinv[i];
      return z;
    };
    if (fail == 0) {
      Eigen::VectorXd x = Eigen::VectorXd::Zero(n_sys);
      solved = pcg(apply, precondition, rhs, x, 1e-10, 20, info.refinements, info.residual);
      if (solved) sol = x;
    }
    if (!solved) info.refinements = 0;
  }
  if (!solved) {
    gram<T>(X, work.K, !pxp);
    double* a = host_square(work.K, own);
    sol = spd_solve(a, n_sys, rhs, diag_shift, rcond, info.used_pinv, apply, refill);
  }
  Eigen::VectorXd d;
  if (pxp) {
    d = sol;
  } else {  // δ = Xᵀ y (one more pass over X: whichever path solved, D holds Xᵀ of its last product, not of y)
    to_view(sol, work.y);
    xt_times<T>(X, work.y, work.D);
    d = from_view(work.D, P);
  }
  require(d.allFinite(), "SR produced a non-finite update: raise the diagonal shift or lower the learning rate");
  auto hd = Kokkos::create_mirror_view(delta);
  for (long k = 0; k < P; ++k) hd(k) = T(d[k]);
  Kokkos::deep_copy(delta, hd);
  return info;
}

template <class T>
void merge_duplicate_samples(const View2<const T>& samples, std::vector<long>& first, std::vector<long>& count) {
  const long M = samples.extent(0), N = samples.extent(1);
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> h("attnphys::sr_merge_samples", M, N);
  Kokkos::deep_copy(h, samples);
  first.clear();
  count.clear();
  // Rows hashed by their spins (FNV-1a over the sign bits), collisions resolved by comparing the rows.
  std::unordered_map<std::uint64_t, std::vector<long>> seen;
  seen.reserve(std::size_t(2 * M));
  for (long m = 0; m < M; ++m) {
    std::uint64_t key = 1469598103934665603ull;
    for (long i = 0; i < N; ++i) key = (key ^ std::uint64_t(h(m, i) > T(0) ? 1 : 2)) * 1099511628211ull;
    auto& bucket = seen[key];
    long found = -1;
    for (const long u : bucket) {
      bool same = true;
      for (long i = 0; i < N && same; ++i) same = h(first[u], i) == h(m, i);
      if (same) {
        found = u;
        break;
      }
    }
    if (found < 0) {
      bucket.push_back(long(first.size()));
      first.push_back(m);
      count.push_back(1);
    } else {
      ++count[found];
    }
  }
}

template void merge_duplicate_samples<float>(const View2<const float>&, std::vector<long>&, std::vector<long>&);
template void merge_duplicate_samples<double>(const View2<const double>&, std::vector<long>&, std::vector<long>&);

template SrInfo sr_direction<float>(const View2<const float>&, const View2<const float>&, const View1<const float>&,
                                    const View1<const float>&, double, SrForm, double,
                                    const View1<float>&, const View1<float>&, const View1<const float>&,
                                    SrPrecision);
template SrInfo sr_direction<double>(const View2<const double>&, const View2<const double>&,
                                     const View1<const double>&, const View1<const double>&, double,
                                     SrForm, double, const View1<double>&, const View1<double>&,
                                     const View1<const double>&, SrPrecision);

HolomorphicPairs holomorphic_pairs(const std::vector<ComplexBlock>& blocks, long n_parameters) {
  HolomorphicPairs out;
  long covered = 0;
  for (const auto& b : blocks) {
    for (long i = 0; i < b.size; ++i) {
      out.re.push_back(b.re_offset + i);
      out.im.push_back(b.im_offset + i);
    }
    covered += 2 * b.size;
  }
  if (covered != n_parameters) return {};
  return out;
}

template <class T>
bool sr_direction_holomorphic(const View2<const T>& o_re, const View2<const T>& o_im, const View1<const T>& e_re,
                              const View1<const T>& e_im, double diag_shift, const HolomorphicPairs& pairs,
                              const View1<T>& delta, SrInfo& info) {
  if constexpr (!std::is_same_v<MemSpace, Kokkos::HostSpace>) {
    (void)o_re, (void)o_im, (void)e_re, (void)e_im, (void)diag_shift, (void)pairs, (void)delta, (void)info;
    return false;
  } else {
    ScopedRegion region("attnphys::sr_direction_holomorphic");
    using C = std::complex<double>;
    const long M = o_re.extent(0), P = o_re.extent(1), K = long(pairs.re.size());
    if (M < 1 || K == 0 || 2 * K != P || long(pairs.im.size()) != K || delta.extent(0) != std::size_t(P) ||
        o_im.extent(0) != std::size_t(M) || o_im.extent(1) != std::size_t(P) || diag_shift < 0)
      return false;
    const long* ia = pairs.re.data();
    const long* ib = pairs.im.data();
    // Holomorphic: the column of Im w_k is i times that of Re w_k.
    double scale = 0;
    for (long m = 0; m < M; ++m)
      for (long p = 0; p < P; ++p)
        scale = std::max(scale, std::max(std::abs(double(o_re(m, p))), std::abs(double(o_im(m, p)))));
    const double tol = 1e-10 * std::max(scale, 1e-300);
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < K; ++k)
        if (std::abs(double(o_re(m, ib[k])) + double(o_im(m, ia[k]))) > tol ||
            std::abs(double(o_im(m, ib[k])) - double(o_re(m, ia[k]))) > tol)
          return false;
    // A = ΔG† / √M, column-major [K, M] (A(k, m) = conj(ΔG(m, k)) / √M), so herk('N') gives A A† = S_c.
    const double inv_sqrt_m = 1.0 / std::sqrt(double(M));
    std::vector<C> mean(K, C(0, 0));
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < K; ++k) mean[k] += C(double(o_re(m, ia[k])), double(o_im(m, ia[k])));
    for (auto& v : mean) v /= double(M);
    std::vector<C> A(std::size_t(K) * std::size_t(M));
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < K; ++k)
        A[k + K * m] = std::conj(C(double(o_re(m, ia[k])), double(o_im(m, ia[k]))) - mean[k]) * inv_sqrt_m;
    C emean(0, 0);
    for (long m = 0; m < M; ++m) emean += C(double(e_re(m)), double(e_im(m)));
    emean /= double(M);
    std::vector<C> eps(M);
    for (long m = 0; m < M; ++m) eps[m] = (C(double(e_re(m)), double(e_im(m))) - emean) * inv_sqrt_m;
    std::vector<C> f(K, C(0, 0));  // f = A ε
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < K; ++k) f[k] += A[k + K * m] * eps[m];
    std::vector<C> S(std::size_t(K) * std::size_t(K));
    {
      const int n = int(K), kk = int(M), lda = int(K);
      const double one = 1, zero = 0;
      const char uplo = 'U', trans = 'N';
      zherk_(&uplo, &trans, &n, &kk, &one, A.data(), &lda, &zero, S.data(), &n);
    }
    for (long k = 0; k < K; ++k) S[k + K * k] += diag_shift;
    std::vector<C> x = f;
    {
      const int n = int(K), one = 1;
      int status = 0;
      const char upper = 'U', ctrans = 'C', notrans = 'N', nonunit = 'N';
      zpotrf_(&upper, &n, S.data(), &n, &status);
      if (status != 0) return false;
      ztrsv_(&upper, &ctrans, &nonunit, &n, S.data(), &n, x.data(), &one);  // S_c = U† U: U† z = f, then U x = z
      ztrsv_(&upper, &notrans, &nonunit, &n, S.data(), &n, x.data(), &one);
    }
    // Check (A A† + λ) x = f from A itself.
    std::vector<C> y(M, C(0, 0));
    for (long m = 0; m < M; ++m) {
      C acc(0, 0);
      for (long k = 0; k < K; ++k) acc += std::conj(A[k + K * m]) * x[k];
      y[m] = acc;
    }
    std::vector<C> r(K);
    for (long k = 0; k < K; ++k) r[k] = diag_shift * x[k] - f[k];
    for (long m = 0; m < M; ++m)
      for (long k = 0; k < K; ++k) r[k] += A[k + K * m] * y[m];
    double rn = 0, fn = 0;
    bool finite = true;
    for (long k = 0; k < K; ++k) {
      rn += std::norm(r[k]);
      fn += std::norm(f[k]);
      finite = finite && std::isfinite(x[k].real()) && std::isfinite(x[k].imag());
    }
    if (!finite || std::sqrt(rn) > 1e-6 * std::max(1e-300, std::sqrt(fn))) return false;
    auto hd = Kokkos::create_mirror_view(delta);
    for (long k = 0; k < K; ++k) {
      hd(ia[k]) = T(x[k].real());
      hd(ib[k]) = T(x[k].imag());
    }
    Kokkos::deep_copy(delta, hd);
    info = SrInfo{};
    info.form = SrForm::Pxp;
    info.holomorphic = true;
    info.grad_norm = 2.0 * std::sqrt(fn);
    return true;
  }
}

template bool sr_direction_holomorphic<float>(const View2<const float>&, const View2<const float>&,
                                              const View1<const float>&, const View1<const float>&, double,
                                              const HolomorphicPairs&, const View1<float>&, SrInfo&);
template bool sr_direction_holomorphic<double>(const View2<const double>&, const View2<const double>&,
                                               const View1<const double>&, const View1<const double>&, double,
                                               const HolomorphicPairs&, const View1<double>&, SrInfo&);

}  // namespace attnphys::vmc
