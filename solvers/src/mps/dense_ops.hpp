#pragma once
// Host-side dense kernels of the MPS code (internal): column-major GEMM through Kokkos Kernels (BLAS on the host)
// and symmetric eigen-decomposition of density matrices, block by block.
#include <Eigen/Core>
#include <vector>

#include "attnphys/solvers/mps/mps.hpp"

namespace attnphys::mps::detail {

// C (m x n) = alpha op(A) op(B) + beta C; contiguous column-major operands.
void gemm(bool trans_a, bool trans_b, long m, long n, long k, double alpha, const double* a, const double* b,
          double beta, double* c);

// Buffers that only grow, so a sweep does not allocate once the bond dimension has saturated.
inline double* grow(AlignedBuffer& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Eigenpairs of a symmetric matrix, found per block of its exact-zero pattern (a conserved charge) so that
// vectors of degenerate levels never mix different charges; eigenvalues sorted in descending order.
class BlockEigen {
 public:
  void compute(const Eigen::Ref<const Eigen::MatrixXd>& rho);
  int size() const { return int(values_.size()); }
  double value(int k) const { return values_[order_[k]]; }
  // The first k eigenvectors as the columns of out (n x k, zero-filled outside each vector's block).
  void vectors(int k, double* out) const;

 private:
  long n_ = 0;
  std::vector<int> parent_, block_of_, block_start_, members_;
  std::vector<double> values_;   // per eigenpair (block order)
  std::vector<int> pair_block_, order_;
  std::vector<long> pair_offset_;  // where a pair's vector lives in vecs_
  AlignedBuffer vecs_, sub_, work_;
  std::vector<int> iwork_;
};

// Symmetric eigen-decomposition in place (LAPACK dsyevd when linked, Eigen otherwise): a (n x n) becomes the
// eigenvectors, w the ascending eigenvalues.
void symmetric_eigen(int n, double* a, double* w, AlignedBuffer& work, std::vector<int>& iwork);

}  // namespace attnphys::mps::detail
