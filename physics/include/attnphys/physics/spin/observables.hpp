#pragma once
// Spin observables (S = σ/2): magnetisation, ⟨S^z_i S^z_j⟩ and ⟨S_i·S_j⟩ correlations, structure factor.
// From a batch of sampled configurations (device) where the observable is diagonal, and exactly from a state vector
// (an ED ground state) for everything.
#include <vector>

#include "attnphys/core/views.hpp"
#include "attnphys/physics/spin/hilbert.hpp"

namespace attnphys::spin {

// Row-major N×N correlation matrix.
struct Correlations {
  int n = 0;
  std::vector<double> values;
  double operator()(int i, int j) const { return values[std::size_t(i) * n + j]; }
};

// Per-sample magnetisation M^z = Σ_i σ_i / 2 of sigma [B, N].
template <class T>
void magnetization(const View2<const T>& sigma, const View1<T>& mz);
// Sample mean of S^z_i S^z_j = σ_i σ_j / 4 over the batch.
template <class T>
Correlations sz_correlations(const View2<const T>& sigma);

// Exact expectations in a normalised real state vector of `space`.
double exact_magnetization_squared(const ChainHilbert& space, const std::vector<double>& psi);  // ⟨(M^z)²⟩
Correlations exact_sz_correlations(const ChainHilbert& space, const std::vector<double>& psi);
Correlations exact_spin_correlations(const ChainHilbert& space, const std::vector<double>& psi);  // ⟨S_i·S_j⟩

// S_i·S_j as an operator with the Hamiltonian's term structure (i ≠ j): σ_iσ_j/4 + exchange 1/2. Its local
// estimator Σ_σ' O_σσ' ψ(σ')/ψ(σ) (vmc::local_energy with this operator) averaged over samples of |ψ|² gives
// ⟨S_i·S_j⟩ of a variational state.
class SpinHamiltonian;
SpinHamiltonian spin_spin_operator(int n_sites, int i, int j);

// S(q) = (1/N) Σ_ij e^{iq(i−j)} C_ij at q = 2πk/N, k = 0..N−1 (real for symmetric C).
std::vector<double> structure_factor(const Correlations& c);

}  // namespace attnphys::spin
