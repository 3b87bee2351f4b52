#pragma once
// U(1)-symmetric (conserved total Sz) block-sparse matrix product states and the two-site DMRG on them.
//
// Charges are integers q = 2 Sz: the local state s of a spin 1/2 has q(s) = +1 (s = 0, up) or -1 (s = 1, down). An
// MPS bond carries the total charge of the sites to its left, split into sectors (charge, dimension), and a site
// tensor A(l, s, r) is nonzero only where Q(l) + q(s) = Q(r): it is stored as one dense column-major block per
// (left sector, s), all blocks of one left sector next to each other, so that [A(l, 0, .) A(l, 1, .)] is one
// contiguous matrix (the GEMMs of the sweep run on those). An MPO bond state a carries the charge D(a) that the
// operator string left of it has added (S+ : +2, S- : -2, Sz, Id : 0); the AutoMPO chains (Heisenberg, XXZ, J1-J2)
// have one such charge per state, the TFIM (X flips one spin) has none and stays on the dense path.
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/mpo.hpp"
#include "attnphys/solvers/mps/mps.hpp"

namespace attnphys::mps {

// Charge of local state s (spin 1/2).
inline int local_charge(int s) { return s == 0 ? 1 : -1; }

// A bond index split into charge sectors, charges ascending.
struct QnIndex {
  std::vector<int> charge;
  std::vector<int> dim;
  int sectors() const { return int(charge.size()); }
  int find(int q) const;  // sector of charge q, -1 if absent
  int total() const;      // sum of dims
  int offset(int sector) const;  // dense position of a sector's first state
};

// A block-sparse tensor T(l, p, r) with Q(l) + qp(p) = Q(r): the site tensors (p = s, np = 2) and the two-site
// wavefunction (p = s1 + 2 s2, np = 4). Block (ls, p) is dim(ls) x dim(rs) column-major at offset(ls, p).
struct QBlockLayout {
  QnIndex left, right;
  std::vector<int> qp;            // charge of each physical index value
  std::vector<long> offset_;      // [ls * np + p]: offset in the data, -1 when the block is absent
  std::vector<int> rsec_;         // [ls * np + p]: right sector of the block
  std::vector<long> colstart_;    // [ls * np + p]: column of the block within [T(ls, 0, .) T(ls, 1, .) ...]
  std::vector<long> group_start_, group_cols_;  // [ls]: where the left sector's blocks start, their total columns
  long size = 0;

  void build(const QnIndex& l, const QnIndex& r, const std::vector<int>& qphys);
  int np() const { return int(qp.size()); }
  long offset(int ls, int p) const { return offset_[std::size_t(ls) * qp.size() + p]; }
  int rsec(int ls, int p) const { return rsec_[std::size_t(ls) * qp.size() + p]; }
  long colstart(int ls, int p) const { return colstart_[std::size_t(ls) * qp.size() + p]; }
};

struct QSiteTensor {
  QBlockLayout layout;  // qp = {+1, -1}
  AlignedBuffer data;
  Eigen::Map<Eigen::MatrixXd> block(int ls, int s);
  Eigen::Map<const Eigen::MatrixXd> block(int ls, int s) const;
  SiteTensor to_dense() const;  // dense (l, s, r) with the sectors of each bond in ascending charge order
};

class QMps {
 public:
  QMps() = default;
  // Product state of local states (0 = up, 1 = down); its total charge is conserved by the U(1) DMRG.
  static QMps product_state(const std::vector<int>& states);
  static QMps neel(int n);
  int size() const { return int(sites_.size()); }
  int total_charge() const;  // 2 Sz of the state
  QSiteTensor& operator[](int i) { return sites_[i]; }
  const QSiteTensor& operator[](int i) const { return sites_[i]; }
  std::vector<QSiteTensor>& sites() { return sites_; }
  int max_bond_dimension() const;
  std::vector<int> bond_dimensions() const;
  // The same state as a dense MPS (bond states ordered by sector): every dense observable, save_mps and the
  // VMC ansatz work on it.
  Mps to_dense_mps() const;

 private:
  std::vector<QSiteTensor> sites_;
};

// The charge D(a) of every MPO bond state (charges[i][a] on the bond right of site i, i = -1 .. n-1 stored at
// i + 1), when every entry of the MPO has a definite charge and the whole operator conserves it; false otherwise
// (the TFIM: X has no definite charge), with a reason.
struct MpoCharges {
  std::vector<std::vector<int>> bond;  // n + 1 bonds; bond[0] and bond[n] are the boundaries {0}
  bool ok = false;
  std::string reason;
};
MpoCharges mpo_charges(const Mpo& w);

// Two-site DMRG in the total-charge sector of psi (psi must be right-canonical: a product state or a state returned
// by this function). Same schedule, options, result and observer as the dense dmrg(); psi ends right-canonical
// with its center on site 0 and unit norm.
DmrgResult dmrg(const Mpo& h, QMps& psi, const Sweeps& sweeps, const DmrgOptions& opt = {},
                const DmrgObserver& observer = {});

// Observables from the blocks. <psi|W|psi> / <psi|psi> for an MPO with charges (e.g. H, mpo_product(H, H), or a
// two-point AutoMpo term such as S+_i S-_j).
double expectation(const Mpo& w, const QMps& psi);
double variance(const Mpo& h, const QMps& psi);
// <O_i> for every site, O diagonal in Sz (Sz, Z, Id).
std::vector<double> local_expectations(const QMps& psi, const std::string& op);
// <O1_i O2_j> (i != j) with a conserving product (Sz Sz, S+ S-, S- S+).
double correlation(const QMps& psi, const std::string& op1, int i, const std::string& op2, int j);
// <S_i . S_j> = <Sz Sz> + (<S+ S-> + <S- S+>) / 2.
double spin_correlation(const QMps& psi, int i, int j);
// von Neumann entropy of every bond from the Schmidt values of each sector (block SVD sweep).
std::vector<double> entanglement_entropies(const QMps& psi);

// Brings any U(1) MPS into right-canonical form (block LQ decompositions from the right: every site but the first
// right-orthonormal, sectors no state reaches dropped) with unit norm; the state it describes is unchanged.
void right_canonicalize(QMps& psi);

// A random state of total charge two_sz (= 2 Sz) with bond dimension at most chi, deterministic in seed: random
// Gaussian blocks on sectors chosen around the straight line from charge 0 to two_sz, then right_canonicalize.
QMps random_qmps(int n, int chi, int two_sz, unsigned long seed);

// The U(1) form of a dense MPS whose bond states each carry a definite charge (as QMps::to_dense_mps and the
// dense DMRG from a product state give them: every nonzero entry A(l, s, r) has Q(l) + q(s) = Q(r)), with the
// bond states regrouped by charge; nullopt (and the reason) when some bond state mixes charges. Exact: no
// tolerance, no entry dropped but those of bond states that carry no amplitude.
std::optional<QMps> qmps_from_dense(const Mps& psi, std::string* reason = nullptr);

}  // namespace attnphys::mps
