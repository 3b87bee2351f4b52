#pragma once
// Environment updates and the two-site effective Hamiltonian of DMRG as GEMMs plus sparse MPO axpys (internal).
//
// Layouts (column-major, first index fastest):
//   left environment of site i:  (l', a, l) = matrix (Dl*w) x Dl, l' bra, a MPO bond, l ket
//   right environment of site i: (r, c, r') = matrix (Dr*w) x Dr, r ket, c MPO bond, r' bra
//   two-site wavefunction theta: (l, s1, s2, r)
#include <Eigen/Core>
#include <vector>

#include "attnphys/solvers/mps/mpo.hpp"
#include "attnphys/solvers/mps/mps.hpp"

namespace attnphys::mps::detail {

struct Env {
  int dim = 1, w = 1;
  Eigen::MatrixXd m;  // (dim*w) x dim
};

// A nonzero element of an MPO site: W(a, b)(s', s) = value.
struct MpoElement {
  int a, b, sp, s;
  double value;
};
// A nonzero element of the two-site operator W1 W2: (a, c)(p', p) with p = s1 + d s2.
struct PairElement {
  int a, c, pp, p;
  double value;
};

class EffectiveH {
 public:
  // Precomputes the sparse structure of W_i W_{i+1}.
  void set_bond(const Mpo& h, int i, const Env& left, const Env& right);
  long size() const { return long(dl_) * d_ * d_ * dr_; }
  // out = H_eff theta.
  void apply(const double* theta, double* out);
  // Density matrix of the left (two sites -> left site) or right half with White's perturbation:
  // rho = theta theta^T + noise sum_b P_b P_b^T (left), theta^T theta + noise sum_b P_b^T P_b (right).
  void density_left(const double* theta, double noise, Eigen::MatrixXd& rho);
  void density_right(const double* theta, double noise, Eigen::MatrixXd& rho);

  void update_left(const Env& left, const SiteTensor& a, const MpoSite& w, Env& out);
  void update_right(const Env& right, const SiteTensor& b, const MpoSite& w, Env& out);

 private:
  int d_ = 2, dl_ = 1, dr_ = 1, wl_ = 1, wm_ = 1, wr_ = 1;
  const Env* left_ = nullptr;
  const Env* right_ = nullptr;
  std::vector<MpoElement> w1_, w2_;
  std::vector<PairElement> pair_;
  AlignedBuffer x_, y_, p_, t_, u_;
};

std::vector<MpoElement> elements(const MpoSite& w);

}  // namespace attnphys::mps::detail
