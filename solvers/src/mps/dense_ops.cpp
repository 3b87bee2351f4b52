#include "dense_ops.hpp"

#include <Eigen/Eigenvalues>
#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <numeric>

#include "attnphys/core/error.hpp"

// LAPACK's dsyevd is far faster than Eigen's solver for density matrices of a few hundred rows. It is declared weak
// so that builds without LAPACK on the link line still link, and fall back to Eigen.
extern "C" void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
                        double* work, const int* lwork, int* iwork, const int* liwork, int* info)
    __attribute__((weak));

namespace attnphys::mps::detail {

using HostMat = Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using ConstHostMat =
    Kokkos::View<const double**, Kokkos::LayoutLeft, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

void gemm(bool ta, bool tb, long m, long n, long k, double alpha, const double* a, const double* b, double beta,
          double* c) {
  if (m == 0 || n == 0) return;
  Eigen::Map<Eigen::MatrixXd> C(c, m, n);
  if (k == 0) {
    if (beta == 0.0) C.setZero(); else C *= beta;
    return;
  }
  // Tiny products (boundary bonds) cost less in Eigen than the dispatch into BLAS.
  if (double(m) * double(n) * double(k) < 32768.0) {
    Eigen::Map<const Eigen::MatrixXd> A(a, ta ? k : m, ta ? m : k), B(b, tb ? n : k, tb ? k : n);
    if (beta == 0.0) C.setZero(); else C *= beta;
    if (ta && tb) C.noalias() += alpha * A.transpose() * B.transpose();
    else if (ta) C.noalias() += alpha * A.transpose() * B;
    else if (tb) C.noalias() += alpha * A * B.transpose();
    else C.noalias() += alpha * A * B;
    return;
  }
  ConstHostMat A(a, ta ? k : m, ta ? m : k), B(b, tb ? n : k, tb ? k : n);
  HostMat Cv(c, m, n);
  KokkosBlas::gemm(ta ? "T" : "N", tb ? "T" : "N", alpha, A, B, beta, Cv);
}

void symmetric_eigen(int n, double* a, double* w, AlignedBuffer& work, std::vector<int>& iwork) {
  if (n == 0) return;
  if (dsyevd_ != nullptr && n > 8) {
    int info = 0, lwork = -1, liwork = -1, iw = 0;
    double wq = 0;
    dsyevd_("V", "L", &n, a, &n, w, &wq, &lwork, &iw, &liwork, &info);
    lwork = int(wq) + 1;
    liwork = iw + 1;
    double* wk = grow(work, std::size_t(lwork));
    if (iwork.size() < std::size_t(liwork)) iwork.resize(liwork);
    dsyevd_("V", "L", &n, a, &n, w, wk, &lwork, iwork.data(), &liwork, &info);
    require(info == 0, "dsyevd failed (info = ", info, ") on a ", n, "x", n, " density matrix");
    return;
  }
  Eigen::Map<Eigen::MatrixXd> A(a, n, n);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(A);
  require(es.info() == Eigen::Success, "eigen-decomposition failed on a ", n, "x", n, " density matrix");
  Eigen::Map<Eigen::VectorXd>(w, n) = es.eigenvalues();
  A = es.eigenvectors();
}

void BlockEigen::compute(const Eigen::Ref<const Eigen::MatrixXd>& rho) {
  const long n = rho.rows();
  n_ = n;
  parent_.resize(n);
  std::iota(parent_.begin(), parent_.end(), 0);
  auto find = [this](int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  };
  for (long j = 0; j < n; ++j)
    for (long i = j + 1; i < n; ++i)
      if (rho(i, j) != 0.0) {
        const int a = find(int(i)), b = find(int(j));
        if (a != b) parent_[std::max(a, b)] = std::min(a, b);
      }
  // Group indices by block root (members_ lists indices block by block).
  block_of_.assign(n, -1);
  std::vector<int> root_block(n, -1);
  int nblocks = 0;
  std::vector<int> count;
  for (long i = 0; i < n; ++i) {
    const int r = find(int(i));
    if (root_block[r] < 0) root_block[r] = nblocks++, count.push_back(0);
    block_of_[i] = root_block[r];
    ++count[block_of_[i]];
  }
  block_start_.assign(nblocks + 1, 0);
  for (int b = 0; b < nblocks; ++b) block_start_[b + 1] = block_start_[b] + count[b];
  members_.resize(n);
  std::vector<int> fill(block_start_.begin(), block_start_.end() - 1);
  for (long i = 0; i < n; ++i) members_[fill[block_of_[i]]++] = int(i);

  values_.resize(n);
  pair_block_.resize(n);
  pair_offset_.resize(n);
  long vec_total = 0;
  for (int b = 0; b < nblocks; ++b) {
    const long m = block_start_[b + 1] - block_start_[b];
    vec_total += m * m;
  }
  double* vecs = grow(vecs_, std::size_t(vec_total));
  long off = 0;
  for (int b = 0; b < nblocks; ++b) {
    const int s = block_start_[b];
    const int m = block_start_[b + 1] - s;
    double* sub = vecs + off;
    for (int j = 0; j < m; ++j)
      for (int i = 0; i < m; ++i) sub[i + long(m) * j] = rho(members_[s + i], members_[s + j]);
    symmetric_eigen(m, sub, values_.data() + s, work_, iwork_);
    for (int k = 0; k < m; ++k) {
      pair_block_[s + k] = b;
      pair_offset_[s + k] = off + long(m) * k;
    }
    off += long(m) * m;
  }
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(), [this](int x, int y) { return values_[x] > values_[y]; });
}

void BlockEigen::vectors(int k, double* out) const {
  Eigen::Map<Eigen::MatrixXd> U(out, n_, k);
  U.setZero();
  for (int c = 0; c < k; ++c) {
    const int p = order_[c], b = pair_block_[p];
    const int s = block_start_[b], m = block_start_[b + 1] - s;
    const double* v = vecs_.data() + pair_offset_[p];
    for (int i = 0; i < m; ++i) U(members_[s + i], c) = v[i];
  }
}

}  // namespace attnphys::mps::detail
