#pragma once
// Dense products. Every matrix product in attnphys goes through these two functions, which call
// KokkosBlas::gemm (OpenBLAS/MKL on the host, cuBLAS/rocBLAS on GPUs through Kokkos Kernels' TPLs).
//
//   C = alpha * op(A) * op(B) + beta * C,   op(X) = X or X^T  (trans 'N' or 'T')
//
// Matrices are row-major (LayoutRight) views in the default memory space; managed views convert implicitly.
// batched_gemm applies the same product to every slice of rank-3 views [batch, rows, cols]; an A or B with batch
// extent 1 is shared by every slice (one weight matrix against many heads).
#include "attnphys/core/spaces.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys {

template <class T>
using ConstMat = Kokkos::View<const T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Mat = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using ConstMat3 = Kokkos::View<const T***, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Mat3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// The same matrices in the memory of any enabled execution space (core/spaces.hpp); MatOn<T, ExecSpace> is Mat<T>.
template <class T, class Space>
using MatOn =
    Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T, class Space>
using ConstMatOn = Kokkos::View<const T**, Kokkos::LayoutRight, typename Space::memory_space,
                                Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T, class Space>
using Mat3On =
    Kokkos::View<T***, Kokkos::LayoutRight, typename Space::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T, class Space>
using ConstMat3On = Kokkos::View<const T***, Kokkos::LayoutRight, typename Space::memory_space,
                                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

void gemm(char trans_a, char trans_b, float alpha, const ConstMat<float>& A, const ConstMat<float>& B, float beta,
          const Mat<float>& C);
void gemm(char trans_a, char trans_b, double alpha, const ConstMat<double>& A, const ConstMat<double>& B,
          double beta, const Mat<double>& C);

// gemm on the execution space Space, with its views in Space's memory (instantiated for every enabled space, T float
// or double); gemm_on<ExecSpace> is gemm. The bf16 setting applies where Space's memory is the host's.
template <class Space, class T>
void gemm_on(char trans_a, char trans_b, T alpha, const ConstMatOn<T, Space>& A, const ConstMatOn<T, Space>& B,
             T beta, const MatOn<T, Space>& C);

void batched_gemm(char trans_a, char trans_b, float alpha, const ConstMat3<float>& A, const ConstMat3<float>& B,
                  float beta, const Mat3<float>& C);
void batched_gemm(char trans_a, char trans_b, double alpha, const ConstMat3<double>& A,
                  const ConstMat3<double>& B, double beta, const Mat3<double>& C);
// batched_gemm on any enabled execution space (one gemm_on per batch entry), instantiated for every space.
template <class Space, class T>
void batched_gemm_on(char trans_a, char trans_b, T alpha, const ConstMat3On<T, Space>& A,
                     const ConstMat3On<T, Space>& B, T beta, const Mat3On<T, Space>& C);

// Arithmetic of the float32 products, as torch.set_float32_matmul_precision sets it for PyTorch: Float32 (the
// default), or BF16: operands rounded to bf16 and products accumulated in float32 on Intel AMX (attnphys/core/amx.hpp;
// agreement with float32 about 2^-9 relative per operand). It applies to the float gemm() and batched_gemm() calls
// made on this thread while a MatmulPrecisionScope asks for it; double products never change.
enum class MatmulPrecision { Float32, BF16 };
MatmulPrecision matmul_precision();  // this thread's current setting
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p);  // BF16 requires amx::available() (the error says why not)
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision prev_;
};

// Floating-point operations of one gemm (2·m·n·k), for benchmark reports.
inline double gemm_flops(long m, long n, long k) { return 2.0 * double(m) * double(n) * double(k); }

}  // namespace attnphys
