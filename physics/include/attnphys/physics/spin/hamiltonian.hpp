#pragma once
// Spin-chain Hamiltonians as lists of three kinds of terms, in the σ = ±1 basis of S^z:
//   ZZTerm        coef · σ_i σ_j                    (diagonal)
//   ExchangeTerm  coef · (|..↑_i..↓_j..⟩⟨..↓_i..↑_j..| + h.c.): swaps two antiparallel spins, element coef
//   FlipTerm      coef · σ^x_i                      (flips one spin, element coef)
// Built from a ChainModel with its conventions (chain_model.hpp): TFIM zz = −J, flip = −h; XXZ with S = σ/2 gives
// zz = JΔ/4 and exchange = J/2 (S^x S^x + S^y S^y = (S^+S^- + S^-S^+)/2); J1-J2 is XXZ with Δ = 1 on both ranges.
//
// connected_configs() produces, for a batch of configurations on the device, every configuration connected to each
// one and the matrix element: slot 0 is σ itself with the diagonal element, slot 1 + t is the configuration term t
// leads to (exchange terms first, then flips). A term that does not act (an exchange of parallel spins) leaves σ
// with element 0, so the output has a fixed shape [B, max_conn, N].
#include <vector>

#include "attnphys/core/views.hpp"
#include "attnphys/physics/spin/chain_model.hpp"
#include "attnphys/physics/spin/hilbert.hpp"

namespace attnphys::spin {

struct ZZTerm {
  int i, j;
  double coef;
};
struct ExchangeTerm {
  int i, j;
  double coef;
};
struct FlipTerm {
  int i;
  double coef;
};

class SpinHamiltonian {
 public:
  explicit SpinHamiltonian(const ChainModel& model);
  SpinHamiltonian(int n_sites, std::vector<ZZTerm> zz, std::vector<ExchangeTerm> exchange,
                  std::vector<FlipTerm> flips);

  int n_sites() const { return n_; }
  // Whether H commutes with total S^z (no flip terms).
  bool conserves_sz() const { return flips_.empty(); }
  // 1 (diagonal) + number of off-diagonal terms.
  int max_conn() const { return 1 + int(exchange_.size() + flips_.size()); }
  const std::vector<ZZTerm>& zz_terms() const { return zz_; }
  const std::vector<ExchangeTerm>& exchange_terms() const { return exchange_; }
  const std::vector<FlipTerm>& flip_terms() const { return flips_; }

  // Host: ⟨s|H|s⟩, and f(t, ⟨t|H|s⟩) for every off-diagonal term acting on s (a state can appear more than once
  // when two terms lead to it).
  double diagonal(Basis s) const;
  template <class F>
  void for_each_offdiagonal(Basis s, F&& f) const {
    for (const auto& t : exchange_)
      if (((s >> t.i) ^ (s >> t.j)) & 1u) f(s ^ ((Basis(1) << t.i) | (Basis(1) << t.j)), t.coef);
    for (const auto& t : flips_) f(s ^ (Basis(1) << t.i), t.coef);
  }
  // Dense matrix in a Hilbert space, row-major (tests and tiny chains only).
  std::vector<double> dense(const ChainHilbert& space) const;

  // Device copies of the terms, for kernels.
  struct DeviceTerms {
    View1<int> zz_i, zz_j, ex_i, ex_j, fl_i;
    View1<double> zz_c, ex_c, fl_c;
  };
  const DeviceTerms& device() const { return dev_; }

 private:
  int n_ = 0;
  std::vector<ZZTerm> zz_;
  std::vector<ExchangeTerm> exchange_;
  std::vector<FlipTerm> flips_;
  DeviceTerms dev_;
  void upload();
};

// For sigma [B, N] of ±1 spins: conn [B, max_conn, N] and elements [B, max_conn] as described above.
template <class T>
void connected_configs(const SpinHamiltonian& H, const View2<const T>& sigma, const View3<T>& conn,
                       const View2<T>& elements);
// Only the diagonal elements ⟨σ|H|σ⟩ [B].
template <class T>
void diagonal_elements(const SpinHamiltonian& H, const View2<const T>& sigma, const View1<T>& diag);

}  // namespace attnphys::spin
