#pragma once
// Matrix product operators, built from a list of terms the way ITensor's AutoMPO does: each distinct left part of an
// operator string that crosses a bond becomes one state of a finite-state machine on that bond, plus the two states
// "nothing yet" and "term finished". The nearest-neighbour Heisenberg chain gets bond dimension 5.
//
// Operator names (spin 1/2, basis 0 = up, 1 = down): Id, Sz, S+, S-, Sx, X, Z (X, Z are Pauli matrices).
// Everything is real: Sy Sy terms are written as (S+ S- + S- S+) / 2.
#include <Eigen/Core>
#include <string>
#include <utility>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/spin/chain_model.hpp"

namespace attnphys::mps {

// The spin-1/2 operators of AutoMpo terms and observables, named in EnumNames below.
enum class LocalOp { Id, Sz, SPlus, SMinus, Sx, X, Z };

}  // namespace attnphys::mps

namespace attnphys {
template <>
struct EnumNames<mps::LocalOp> {
  static constexpr EnumName<mps::LocalOp> values[] = {{mps::LocalOp::Id, "Id"},     {mps::LocalOp::Sz, "Sz"},
                                                      {mps::LocalOp::SPlus, "S+"},  {mps::LocalOp::SMinus, "S-"},
                                                      {mps::LocalOp::Sx, "Sx"},     {mps::LocalOp::X, "X"},
                                                      {mps::LocalOp::Z, "Z"}};
};
}  // namespace attnphys

namespace attnphys::mps {

// The operator named `name` (the table above); anything else is refused with the names.
LocalOp parse_local_operator(const std::string& name);
Eigen::Matrix2d local_operator(LocalOp op);
Eigen::Matrix2d local_operator(const std::string& name);

// Nonzero block W(a, b) of one MPO site: a d x d operator <s'|op|s>.
struct MpoEntry {
  int a = 0, b = 0;
  Eigen::MatrixXd op;
};

struct MpoSite {
  int wl = 1, wr = 1;
  std::vector<MpoEntry> entries;
};

struct Mpo {
  int d = 2;
  std::vector<MpoSite> sites;
  int size() const { return int(sites.size()); }
  int max_bond_dimension() const;
};

struct OpTerm {
  double coef = 1.0;
  std::vector<std::pair<LocalOp, int>> ops;  // (operator, site), parsed where the term is added
};

class AutoMpo {
 public:
  explicit AutoMpo(int n) : n_(n) {}
  // Adds coef * op1(site1) op2(site2) ...; sites must be distinct (order does not matter).
  AutoMpo& add(double coef, const std::vector<std::pair<std::string, int>>& ops);
  AutoMpo& add(double coef, const std::string& op, int i) { return add(coef, {{op, i}}); }
  AutoMpo& add(double coef, const std::string& op1, int i, const std::string& op2, int j) {
    return add(coef, {{op1, i}, {op2, j}});
  }
  int size() const { return n_; }
  const std::vector<OpTerm>& terms() const { return terms_; }
  Mpo to_mpo() const;

 private:
  int n_;
  std::vector<OpTerm> terms_;
};

// The chain models (spin::ChainModel, conventions as in the README) as terms, and as an MPO.
AutoMpo chain_terms(const spin::ChainModel& model);
Mpo chain_mpo(const spin::ChainModel& model);

// The product MPO a * b (bond dimensions multiply): <psi|H^2|psi> as an expectation value of mpo_product(H, H).
Mpo mpo_product(const Mpo& a, const Mpo& b);

// Dense 2^n x 2^n matrix (site 0 most significant), for tests on small chains.
Eigen::MatrixXd mpo_to_dense(const Mpo& w);

}  // namespace attnphys::mps
