#include "attnphys/core/gemm.hpp"

#include <KokkosBlas3_gemm.hpp>
#include <string>
#include <type_traits>

#include "attnphys/core/amx.hpp"
#include "attnphys/core/error.hpp"

namespace attnphys {

namespace detail_gemm {

bool is_trans(char t) {
  require(t == 'N' || t == 'n' || t == 'T' || t == 't', "gemm: transpose flag must be 'N' or 'T', got '", t, "'");
  return t == 'T' || t == 't';
}

template <class Space, class T>
void scale(const MatOn<T, Space>& C, T beta) {
  const long n = C.extent(1);
  Kokkos::parallel_for(
      "attnphys::gemm_scale", Kokkos::RangePolicy<Space>(0, long(C.extent(0)) * n), KOKKOS_LAMBDA(long i) {
        T& c = C(i / n, i % n);
        c = (beta == T(0)) ? T(0) : beta * c;
      });
}

// Host builds for a CPU with 256- or 512-bit vectors (ATTNPHYS_NATIVE_ARCH on a recent x86): a tall-skinny product
// C [m, n] = alpha·A [m, k]·op(B) + beta·C with n, k ≤ 64 (the linear layers of narrow models against many tokens)
// is one Kokkos kernel over pairs of rows, with the n outputs of each row in vector registers and op(B) as a k×n
// row-major panel. A BLAS call for such a product spends more on packing both operands, on its call overhead and on
// starting its threads than on the product (and a threaded BLAS then spins beside the Kokkos kernels that run
// between its calls). Products with more work than 2^22 multiply-adds still go to BLAS when the execution space has
// one thread, since BLAS's threads then pay off. With SSE2 only, BLAS's own runtime-dispatched kernels are faster.
#if !(defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL)) && \
    (defined(__AVX2__) || defined(__AVX512F__))
#define ATTNPHYS_SKINNY_GEMM 1
constexpr long kSkinnyMax = 64;
bool skinny_applies(bool at, long m, long n, long k) {
  if (at || !(n == 16 || n == 32 || n == 64) || k > kSkinnyMax) return false;
  return double(m) * double(n) * double(k) <= double(1L << 22) || ExecSpace().concurrency() > 1;
}

// One vector register of T (GCC/Clang vector extensions; the compiler maps it to the widest registers it was told
// about). Each row's n ≤ 64 outputs are n / lanes such vectors; a panel row is loaded once for two rows of A.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#else
constexpr int kVecBytes = 32;
#endif
template <class T>
struct VecOf {
  typedef T type __attribute__((vector_size(kVecBytes)));
};

template <class T, int NB>
void skinny_kernel(T alpha, const ConstMat<T>& A, const T* panel, T beta, const Mat<T>& C) {
  using V = typename VecOf<T>::type;
  constexpr int L = kVecBytes / int(sizeof(T)), NV = NB / L;  // lanes, vectors per row
  static_assert(NB % L == 0, "skinny_kernel: NB must be a multiple of the vector width");
  const long m = C.extent(0), k = A.extent(1), lda = A.stride(0), ldc = C.stride(0);
  const T* a0 = A.data();
  T* c0 = C.data();
  Kokkos::parallel_for(
      "attnphys::gemm_skinny", Kokkos::RangePolicy<ExecSpace>(0, (m + 1) / 2), KOKKOS_LAMBDA(const long blk) {
        const long i = 2 * blk, i2 = i + 1 < m ? i + 1 : i;
        const T* x = a0 + i * lda;
        const T* y = a0 + i2 * lda;
        V u[NV], v[NV];
        for (int j = 0; j < NV; ++j) u[j] = v[j] = V{} ;
        for (long q = 0; q < k; ++q) {
          const T p = x[q], r = y[q];
          for (int j = 0; j < NV; ++j) {
            V b;
            __builtin_memcpy(&b, panel + q * NB + j * L, sizeof(V));
            u[j] += p * b;
            v[j] += r * b;
          }
        }
        auto store = [&](T* c, const V* acc) {
          for (int j = 0; j < NV; ++j) {
            V out = alpha * acc[j];
            if (beta != T(0)) {
              V old;
              __builtin_memcpy(&old, c + j * L, sizeof(V));
              out += beta * old;
            }
            __builtin_memcpy(c + j * L, &out, sizeof(V));
          }
        };
        store(c0 + i * ldc, u);
        if (i2 != i) store(c0 + i2 * ldc, v);
      });
  Kokkos::fence();  // the panel lives on the caller's stack
}

template <class T>
void skinny(T alpha, const ConstMat<T>& A, const ConstMat<T>& B, bool bt, T beta, const Mat<T>& C) {
  const long n = C.extent(1), k = A.extent(1);
  T panel[kSkinnyMax * kSkinnyMax];  // op(B) as k rows of n
  for (long q = 0; q < k; ++q)
    for (long j = 0; j < n; ++j) panel[q * n + j] = bt ? B(j, q) : B(q, j);
  switch (n) {
    case 16: skinny_kernel<T, 16>(alpha, A, panel, beta, C); break;
    case 32: skinny_kernel<T, 32>(alpha, A, panel, beta, C); break;
    case 64: skinny_kernel<T, 64>(alpha, A, panel, beta, C); break;
  }
}
#endif

template <class Space, class T>
void gemm_impl(char ta, char tb, T alpha, const ConstMatOn<T, Space>& A, const ConstMatOn<T, Space>& B, T beta,
               const MatOn<T, Space>& C) {
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
    scale<Space>(C, beta);
    return;
  }
  if constexpr (std::is_same<T, float>::value && host_accessible<Space>()) {
    if (matmul_precision() == MatmulPrecision::BF16) {
      amx::gemm_bf16(at, bt, m, n, ka, alpha, A.data(), long(A.stride(0)), B.data(), long(B.stride(0)), beta,
                     C.data(), long(C.stride(0)));
      return;
    }
  }
#ifdef ATTNPHYS_SKINNY_GEMM
  if constexpr (std::is_same<Space, ExecSpace>::value) {
    if (skinny_applies(at, m, n, ka)) {
      skinny(alpha, A, B, bt, beta, C);
      return;
    }
  }
#endif
  const char tra[2] = {at ? 'T' : 'N', 0};
  const char trb[2] = {bt ? 'T' : 'N', 0};
#if defined(KOKKOSKERNELS_VERSION) && KOKKOSKERNELS_VERSION >= 40000
  KokkosBlas::gemm(Space(), tra, trb, alpha, A, B, beta, C);
#else
  // Kokkos Kernels 3.x takes no execution space; the Kokkos builds it comes with here enable Serial alone.
  static_assert(std::is_same<Space, ExecSpace>::value, "gemm_on: this Kokkos Kernels runs only the default space");
  KokkosBlas::gemm(tra, trb, alpha, A, B, beta, C);
#endif
}

template <class Space, class T>
void batched_impl(char ta, char tb, T alpha, const ConstMat3On<T, Space>& A, const ConstMat3On<T, Space>& B, T beta,
                  const Mat3On<T, Space>& C) {
  const long nb = C.extent(0);
  require(long(A.extent(0)) == nb || A.extent(0) == 1, "batched_gemm: A has batch ", A.extent(0), ", C has ", nb,
          " (A's batch must equal C's or be 1)");
  require(long(B.extent(0)) == nb || B.extent(0) == 1, "batched_gemm: B has batch ", B.extent(0), ", C has ", nb,
          " (B's batch must equal C's or be 1)");
  ScopedRegion region("attnphys::batched_gemm");
  for (long b = 0; b < nb; ++b) {
    const long ba = A.extent(0) == 1 ? 0 : b, bb = B.extent(0) == 1 ? 0 : b;
    ConstMatOn<T, Space> a(A.data() + ba * A.extent(1) * A.extent(2), A.extent(1), A.extent(2));
    ConstMatOn<T, Space> bm(B.data() + bb * B.extent(1) * B.extent(2), B.extent(1), B.extent(2));
    MatOn<T, Space> c(C.data() + b * C.extent(1) * C.extent(2), C.extent(1), C.extent(2));
    gemm_impl<Space>(ta, tb, alpha, a, bm, beta, c);
  }
}

}  // namespace detail_gemm

namespace {
thread_local MatmulPrecision t_matmul_precision = MatmulPrecision::Float32;
}
MatmulPrecision matmul_precision() { return t_matmul_precision; }
MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecision p) : prev_(t_matmul_precision) {
  if (p == MatmulPrecision::BF16)
    require(Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible && amx::available(),
            "matmul_precision = bf16 cannot run here: ",
            Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible ? amx::unavailable_reason()
                                                                        : std::string("this is a GPU build"),
            "; set matmul_precision = float32");
  t_matmul_precision = p;
}
MatmulPrecisionScope::~MatmulPrecisionScope() { t_matmul_precision = prev_; }

void gemm(char ta, char tb, float alpha, const ConstMat<float>& A, const ConstMat<float>& B, float beta,
          const Mat<float>& C) {
  detail_gemm::gemm_impl<ExecSpace>(ta, tb, alpha, A, B, beta, C);
}
void gemm(char ta, char tb, double alpha, const ConstMat<double>& A, const ConstMat<double>& B, double beta,
          const Mat<double>& C) {
  detail_gemm::gemm_impl<ExecSpace>(ta, tb, alpha, A, B, beta, C);
}
void batched_gemm(char ta, char tb, float alpha, const ConstMat3<float>& A, const ConstMat3<float>& B, float beta,
                  const Mat3<float>& C) {
  detail_gemm::batched_impl<ExecSpace>(ta, tb, alpha, A, B, beta, C);
}
void batched_gemm(char ta, char tb, double alpha, const ConstMat3<double>& A, const ConstMat3<double>& B,
                  double beta, const Mat3<double>& C) {
  detail_gemm::batched_impl<ExecSpace>(ta, tb, alpha, A, B, beta, C);
}

template <class Space, class T>
void gemm_on(char ta, char tb, T alpha, const ConstMatOn<T, Space>& A, const ConstMatOn<T, Space>& B, T beta,
             const MatOn<T, Space>& C) {
  detail_gemm::gemm_impl<Space>(ta, tb, alpha, A, B, beta, C);
}
template <class Space, class T>
void batched_gemm_on(char ta, char tb, T alpha, const ConstMat3On<T, Space>& A, const ConstMat3On<T, Space>& B,
                     T beta, const Mat3On<T, Space>& C) {
  detail_gemm::batched_impl<Space>(ta, tb, alpha, A, B, beta, C);
}
#define ATTNPHYS_GEMM_ON_T(S, T)                                                                                 \
  template void gemm_on<S, T>(char, char, T, const ConstMatOn<T, S>&, const ConstMatOn<T, S>&, T,               \
                              const MatOn<T, S>&);                                                              \
  template void batched_gemm_on<S, T>(char, char, T, const ConstMat3On<T, S>&, const ConstMat3On<T, S>&, T,     \
                                      const Mat3On<T, S>&);
#define ATTNPHYS_GEMM_ON(S) ATTNPHYS_GEMM_ON_T(S, float) ATTNPHYS_GEMM_ON_T(S, double)
ATTNPHYS_FOR_EACH_SPACE(ATTNPHYS_GEMM_ON)

}  // namespace attnphys
