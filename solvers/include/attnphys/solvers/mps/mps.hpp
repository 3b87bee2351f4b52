#pragma once
// Matrix product states of a chain of n sites with local dimension d (spin 1/2: d = 2, state 0 = up, Sz = +1/2).
//
// Site tensor A(l, s, r) is stored column-major with l fastest, then s, then r, so the same memory is both the
// "left-grouped" matrix (l s) x r and the "right-grouped" matrix l x (s r) without copying; the DMRG contractions
// rely on this to run as plain GEMMs.
#include <Eigen/Core>
#include <string>
#include <vector>

namespace attnphys::mps {

// Work and tensor storage aligned as Eigen aligns its matrices. Eigen's vectorised reductions and the BLAS / LAPACK
// kernels treat the first elements up to an alignment boundary separately, so a buffer whose alignment followed the
// heap layout would make the rounding -- and through it the gauge of a converged state -- depend on unrelated
// allocations (the length of an output path); aligned buffers make every run of the same job bit-identical.
using AlignedBuffer = std::vector<double, Eigen::aligned_allocator<double>>;

struct SiteTensor {
  int dl = 1, d = 2, dr = 1;
  Eigen::MatrixXd data;  // (dl*d) x dr

  SiteTensor() = default;
  SiteTensor(int dl_, int d_, int dr_) : dl(dl_), d(d_), dr(dr_), data(Eigen::MatrixXd::Zero(dl_ * d_, dr_)) {}
  double& operator()(int l, int s, int r) { return data(l + dl * s, r); }
  double operator()(int l, int s, int r) const { return data(l + dl * s, r); }
  // (l s) x r and l x (s r) views of the same memory.
  Eigen::Map<Eigen::MatrixXd> left() { return {data.data(), dl * d, dr}; }
  Eigen::Map<const Eigen::MatrixXd> left() const { return {data.data(), dl * d, dr}; }
  Eigen::Map<Eigen::MatrixXd> right() { return {data.data(), dl, d * dr}; }
  Eigen::Map<const Eigen::MatrixXd> right() const { return {data.data(), dl, d * dr}; }
};

class Mps {
 public:
  Mps() = default;
  // Product state: states[i] is the local basis state of site i.
  static Mps product_state(const std::vector<int>& states, int d = 2);
  // The same local state on every site (normalised), e.g. (1, 1)/sqrt(2): all spins along +x.
  static Mps uniform_product(int n, const Eigen::VectorXd& local);
  // Neel state up, down, up, ... (total Sz = 0 for even n).
  static Mps neel(int n);
  // Random state of bond dimension chi (deterministic in seed), normalised and right-canonical.
  static Mps random(int n, int d, int chi, unsigned long seed);

  int size() const { return int(sites_.size()); }
  int local_dim() const { return sites_.empty() ? 0 : sites_[0].d; }
  SiteTensor& operator[](int i) { return sites_[i]; }
  const SiteTensor& operator[](int i) const { return sites_[i]; }
  std::vector<SiteTensor>& sites() { return sites_; }
  const std::vector<SiteTensor>& sites() const { return sites_; }
  int max_bond_dimension() const;
  std::vector<int> bond_dimensions() const;  // n-1 inner bonds

  // Canonical forms by QR: sites left of `center` left-orthonormal, right of it right-orthonormal.
  void canonicalize(int center);
  // Moves the orthogonality center of a state already in mixed canonical form (center() >= 0) one QR at a time.
  void shift_center(int to);
  int center() const { return center_; }  // -1 when unknown
  void set_center(int c) { center_ = c; }
  double norm() const;
  void normalize();

  // Dense state vector (site 0 most significant), for tests on small chains.
  Eigen::VectorXd to_dense() const;

 private:
  std::vector<SiteTensor> sites_;
  int center_ = -1;
  void move_center_right(int i);  // QR of site i, R into site i+1
  void move_center_left(int i);   // LQ of site i, L into site i-1
};

// <a|b>
double overlap(const Mps& a, const Mps& b);
// Whether site i is left- (A^T A = 1) or right-orthonormal (A A^T = 1) to tolerance.
double left_orthonormality_error(const SiteTensor& a);
double right_orthonormality_error(const SiteTensor& a);

// HDF5 (kind "mps"): datasets site_<i> of shape [dl, d, dr] (row-major), root attributes n, d, center.
void save_mps(const Mps& psi, const std::string& path, const std::string& config_toml = "");
Mps load_mps(const std::string& path);

}  // namespace attnphys::mps
