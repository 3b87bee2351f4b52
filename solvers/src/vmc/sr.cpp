#include "attnphys/solvers/vmc/sr.hpp"

#include <Eigen/Dense>
#include <cmath>

#include "attnphys/core/gemm.hpp"

namespace attnphys::vmc {

namespace {
// Solves (A + shift·I) x = b for symmetric positive semi-definite A; Cholesky first, pseudo-inverse fallback.
Eigen::VectorXd spd_solve(Eigen::MatrixXd A, const Eigen::VectorXd& b, double shift, double rcond, bool& pinv) {
  A.diagonal().array() += shift;
  Eigen::LLT<Eigen::MatrixXd> llt(A);
  pinv = false;
  if (llt.info() == Eigen::Success) {
    Eigen::VectorXd x = llt.solve(b);
    if (x.allFinite() && (A * x - b).norm() <= 1e-6 * std::max(1e-300, b.norm())) return x;
  }
  pinv = true;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(A);
  const Eigen::VectorXd w = es.eigenvalues();
  const double cut = rcond * std::max(std::abs(w.maxCoeff()), 1e-300);
  Eigen::VectorXd c = es.eigenvectors().transpose() * b;
  for (long i = 0; i < w.size(); ++i) c[i] = w[i] > cut ? c[i] / w[i] : 0.0;
  return es.eigenvectors() * c;
}

template <class V>
Eigen::MatrixXd to_eigen(const V& v) {
  auto h = to_host(v);
  Eigen::MatrixXd m(h.extent(0), h.extent(1));
  for (std::size_t i = 0; i < h.extent(0); ++i)
    for (std::size_t j = 0; j < h.extent(1); ++j) m(i, j) = double(h(i, j));
  return m;
}
}  // namespace

template <class T>
SrInfo sr_direction(const View2<const T>& o_re, const View2<const T>& o_im, const View1<const T>& e_re,
                    const View1<const T>& e_im, double diag_shift, const std::string& form, double rcond,
                    const View1<T>& delta, const View1<T>& gradient) {
  ScopedRegion region("attnphys::sr_direction");
  const long M = o_re.extent(0), P = o_re.extent(1);
  require(M >= 1 && o_im.extent(0) == std::size_t(M) && o_im.extent(1) == std::size_t(P) &&
              e_re.extent(0) == std::size_t(M) && e_im.extent(0) == std::size_t(M) &&
              delta.extent(0) == std::size_t(P),
          "sr_direction: O must be [M, P] (twice), E_loc [M] (twice) and delta [P]");
  require(form == "pxp" || form == "minsr" || form == "auto", "unknown SR form '", form, "': use pxp, minsr or auto");
  require(diag_shift >= 0, "SR diagonal shift must be >= 0, got ", diag_shift);
  SrInfo info;
  info.form = form == "auto" ? (P > 2 * M ? "minsr" : "pxp") : form;

  // Centre and stack.
  View2<T> X("attnphys::sr_x", 2 * M, P), eps("attnphys::sr_eps", 2 * M, 1);
  const double inv_sqrt_m = 1.0 / std::sqrt(double(M));
  Kokkos::parallel_for(
      "attnphys::sr_center", Kokkos::RangePolicy<ExecSpace>(0, P), KOKKOS_LAMBDA(const long k) {
        double mr = 0, mi = 0;
        for (long m = 0; m < M; ++m) {
          mr += double(o_re(m, k));
          mi += double(o_im(m, k));
        }
        mr /= M;
        mi /= M;
        for (long m = 0; m < M; ++m) {
          X(m, k) = T((double(o_re(m, k)) - mr) * inv_sqrt_m);
          X(M + m, k) = T((double(o_im(m, k)) - mi) * inv_sqrt_m);
        }
      });
  double er = 0, ei = 0;
  Kokkos::parallel_reduce(
      "attnphys::sr_mean_e", Kokkos::RangePolicy<ExecSpace>(0, M),
      KOKKOS_LAMBDA(const long m, double& a) { a += double(e_re(m)); }, er);
  Kokkos::parallel_reduce(
      "attnphys::sr_mean_e", Kokkos::RangePolicy<ExecSpace>(0, M),
      KOKKOS_LAMBDA(const long m, double& a) { a += double(e_im(m)); }, ei);
  er /= M;
  ei /= M;
  Kokkos::parallel_for(
      "attnphys::sr_eps", Kokkos::RangePolicy<ExecSpace>(0, M), KOKKOS_LAMBDA(const long m) {
        eps(m, 0) = T((double(e_re(m)) - er) * inv_sqrt_m);
        eps(M + m, 0) = T((double(e_im(m)) - ei) * inv_sqrt_m);
      });
  View2<T> F("attnphys::sr_f", P, 1);
  gemm('T', 'N', T(1), X, eps, T(0), F);
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

  Eigen::VectorXd d;
  if (info.form == "pxp") {
    View2<T> S("attnphys::sr_s", P, P);
    gemm('T', 'N', T(1), X, X, T(0), S);
    d = spd_solve(to_eigen(S), to_eigen(F).col(0), diag_shift, rcond, info.used_pinv);
  } else {
    View2<T> K("attnphys::sr_kernel", 2 * M, 2 * M), y("attnphys::sr_y", 2 * M, 1), D("attnphys::sr_d", P, 1);
    gemm('N', 'T', T(1), X, X, T(0), K);
    const Eigen::VectorXd yy = spd_solve(to_eigen(K), to_eigen(eps).col(0), diag_shift, rcond, info.used_pinv);
    auto hy = Kokkos::create_mirror_view(y);
    for (long m = 0; m < 2 * M; ++m) hy(m, 0) = T(yy[m]);
    Kokkos::deep_copy(y, hy);
    gemm('T', 'N', T(1), X, y, T(0), D);
    d = to_eigen(D).col(0);
  }
  require(d.allFinite(), "SR produced a non-finite update: raise the diagonal shift or lower the learning rate");
  auto hd = Kokkos::create_mirror_view(delta);
  for (long k = 0; k < P; ++k) hd(k) = T(d[k]);
  Kokkos::deep_copy(delta, hd);
  return info;
}

template SrInfo sr_direction<float>(const View2<const float>&, const View2<const float>&, const View1<const float>&,
                                    const View1<const float>&, double, const std::string&, double,
                                    const View1<float>&, const View1<float>&);
template SrInfo sr_direction<double>(const View2<const double>&, const View2<const double>&,
                                     const View1<const double>&, const View1<const double>&, double,
                                     const std::string&, double, const View1<double>&, const View1<double>&);

}  // namespace attnphys::vmc
