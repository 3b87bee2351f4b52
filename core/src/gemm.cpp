#include "attnphys/core/gemm.hpp"

#include <KokkosBlas3_gemm.hpp>

namespace attnphys {

namespace detail_gemm {

bool is_trans(char t) {
  require(t == 'N' || t == 'n' || t == 'T' || t == 't', "gemm: transpose flag must be 'N' or 'T', got '", t, "'");
  return t == 'T' || t == 't';
}

template <class T>
void scale(const Mat<T>& C, T beta) {
  const long n = C.extent(1);
  Kokkos::parallel_for(
      "attnphys::gemm_scale", Kokkos::RangePolicy<ExecSpace>(0, long(C.extent(0)) * n), KOKKOS_LAMBDA(long i) {
        T& c = C(i / n, i % n);
        c = (beta == T(0)) ? T(0) : beta * c;
      });
}

template <class T>
void gemm_impl(char ta, char tb, T alpha, const ConstMat<T>& A, const ConstMat<T>& B, T beta, const Mat<T>& C) {
  const bool at = is_trans(ta), bt = is_trans(tb);
  const long m = at ? A.extent(1) : A.extent(0);
  const long ka = at ? A.extent(0) : A.extent(1);
  const long kb = bt ? B.extent(1) : B.extent(0);
  const long n = bt ? B.extent(0) : B.extent(1);
  require(ka == kb, "gemm: inner dimensions differ: op(A) is ", m, "x", ka, ", op(B) is ", kb, "x", n);
  require(long(C.extent(0)) == m && long(C.extent(1)) == n, "gemm: C is ", C.extent(0), "x", C.extent(1),
          " but op(A)*op(B) is ", m, "x", n);
  if (m == 0 || n == 0) return;
  if (ka == 0 || alpha == T(0)) {  // BLAS would only scale C; do it ourselves so no library has to agree
    scale(C, beta);
    return;
  }
  const char tra[2] = {at ? 'T' : 'N', 0};
  const char trb[2] = {bt ? 'T' : 'N', 0};
  KokkosBlas::gemm(tra, trb, alpha, A, B, beta, C);
}

template <class T>
void batched_impl(char ta, char tb, T alpha, const ConstMat3<T>& A, const ConstMat3<T>& B, T beta,
                  const Mat3<T>& C) {
  const long nb = C.extent(0);
  require(long(A.extent(0)) == nb || A.extent(0) == 1, "batched_gemm: A has batch ", A.extent(0), ", C has ", nb,
          " (A's batch must equal C's or be 1)");
  require(long(B.extent(0)) == nb || B.extent(0) == 1, "batched_gemm: B has batch ", B.extent(0), ", C has ", nb,
          " (B's batch must equal C's or be 1)");
  ScopedRegion region("attnphys::batched_gemm");
  for (long b = 0; b < nb; ++b) {
    const long ba = A.extent(0) == 1 ? 0 : b, bb = B.extent(0) == 1 ? 0 : b;
    ConstMat<T> a(A.data() + ba * A.extent(1) * A.extent(2), A.extent(1), A.extent(2));
    ConstMat<T> bm(B.data() + bb * B.extent(1) * B.extent(2), B.extent(1), B.extent(2));
    Mat<T> c(C.data() + b * C.extent(1) * C.extent(2), C.extent(1), C.extent(2));
    gemm_impl(ta, tb, alpha, a, bm, beta, c);
  }
}

}  // namespace detail_gemm

void gemm(char ta, char tb, float alpha, const ConstMat<float>& A, const ConstMat<float>& B, float beta,
          const Mat<float>& C) {
  detail_gemm::gemm_impl(ta, tb, alpha, A, B, beta, C);
}
void gemm(char ta, char tb, double alpha, const ConstMat<double>& A, const ConstMat<double>& B, double beta,
          const Mat<double>& C) {
  detail_gemm::gemm_impl(ta, tb, alpha, A, B, beta, C);
}
void batched_gemm(char ta, char tb, float alpha, const ConstMat3<float>& A, const ConstMat3<float>& B, float beta,
                  const Mat3<float>& C) {
  detail_gemm::batched_impl(ta, tb, alpha, A, B, beta, C);
}
void batched_gemm(char ta, char tb, double alpha, const ConstMat3<double>& A, const ConstMat3<double>& B,
                  double beta, const Mat3<double>& C) {
  detail_gemm::batched_impl(ta, tb, alpha, A, B, beta, C);
}

}  // namespace attnphys
