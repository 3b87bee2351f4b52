#pragma once
// Block environments of the U(1) MPS code (internal).
//
// Left environment E(l', a, l) of a bond (l' bra, a MPO state, l ket), nonzero where Q(l') = Q(l) + D(a): for each
// ket sector k one matrix whose rows stack, over the MPO states a whose bra sector exists, the dim(bra) x dim(k)
// blocks. Right environment E(r, c, r') (r ket, r' bra), nonzero where Q(r') = Q(r) + D(c): for each bra sector
// one matrix stacking over c the dim(ket) x dim(bra) blocks. With the sectors of a theta block next to each other
// (QBlockLayout) the contractions with the environments are one GEMM per sector.
#include <Eigen/Core>
#include <climits>
#include <vector>

#include "attnphys/solvers/mps/u1.hpp"

namespace attnphys::mps::detail {

constexpr int kNoCharge = INT_MIN;  // an MPO state no operator string reaches

struct QEnv {
  QnIndex bond;
  int w = 1;
  std::vector<Eigen::MatrixXd> m;  // per sector of the bond
  std::vector<int> other_, row_;   // [sector * w + a]: the other sector (-1: none) and its first row in m[sector]
  // left: other = sector of Q + D(a); right: other = sector of Q - D(c). Allocates m (zeros).
  void layout(const QnIndex& b, const std::vector<int>& dmpo, bool left);
  int other(int k, int a) const { return other_[std::size_t(k) * w + a]; }
  int row(int k, int a) const { return row_[std::size_t(k) * w + a]; }
};

// Nonzero element of an MPO site whose left state is reachable.
struct QElement {
  int a, b, sp, s;
  double value;
};
std::vector<QElement> q_elements(const MpoSite& w, const std::vector<int>& dleft);

// The boundary environment (one sector of dimension 1, MPO state 0, value 1).
QEnv boundary_env(const QnIndex& b);

class QEnvWork {
 public:
  // E_{i+1} from E_i and site tensor A (left-orthonormal side); dl/dr: MPO state charges left/right of the site.
  void update_left(const QEnv& left, const QSiteTensor& a, const MpoSite& w, const std::vector<int>& dl,
                   const std::vector<int>& dr, QEnv& out);
  void update_right(const QEnv& right, const QSiteTensor& b, const MpoSite& w, const std::vector<int>& dl,
                    const std::vector<int>& dr, QEnv& out);

 private:
  AlignedBuffer t_, u_;
  std::vector<long> toff_, uoff_;
};

// <a|b>-type closure of a left environment on the last bond with a right one: sum_k tr(L_k R_k) over MPO state 0.
double close_envs(const QEnv& left, const QEnv& right);

}  // namespace attnphys::mps::detail
