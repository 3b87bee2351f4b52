#pragma once
// Exact diagonalisation of spin chains (Lanczos in the S^z sector of the ground state when H conserves S^z), and
// the closed-form reference energies (free-fermion TFIM, Majumdar-Ghosh point of the J1-J2 chain).
#include <optional>
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/physics/spin/hamiltonian.hpp"
#include "attnphys/solvers/ed/lanczos.hpp"

namespace attnphys::ed {

// H restricted to a Hilbert space, applied on the fly (gather form: y_r = Σ_c H_rc x_c needs only the row of r,
// which by symmetry is the set of states connected to r, so rows are independent and run in parallel on the host).
//
// Every SpinHamiltonian commutes with the global spin flip P = Π σ^x. With flip_parity = ±1 (full space only) the
// operator acts in that eigenspace of P, on the basis (|s⟩ ± |s̄⟩)/√2 of representatives s with the top spin down:
// half the dimension.
class HamiltonianOperator {
 public:
  HamiltonianOperator(const spin::SpinHamiltonian& H, const spin::ChainHilbert& space, int flip_parity = 0);
  long dim() const { return long(states_.size()); }
  void apply(const double* x, double* y) const;
  // A vector of this operator's basis expressed in `space`'s basis.
  std::vector<double> expand(const double* v) const;

 private:
  const spin::SpinHamiltonian& H_;
  const spin::ChainHilbert& space_;
  int parity_ = 0;
  std::vector<spin::Basis> states_;
  std::vector<double> diag_;
};

struct EdOptions {
  int n_states = 1;         // ground state and n_states − 1 excitations (in the same sector)
  double tol = 1e-10;
  int krylov_dim = 0;
  bool want_vectors = false;
  bool use_sz_sector = true;  // restrict S^z-conserving models to the ground-state sector (2Sz = n mod 2)
  // In the full space, work in the eigenspace of the global spin flip that holds the ground state when the
  // Perron-Frobenius theorem says which (all flip terms of one sign, no exchange terms): halves the dimension.
  bool use_flip_parity = true;

  // The [ed] keys of `attnphys ed` (n_states, tol, krylov_dim, use_sz_sector).
  void declare(OptionSet& set, const std::string& section = "ed");
};

struct EdResult {
  std::vector<double> energies;
  std::vector<std::vector<double>> vectors;  // in the basis of `space` (when want_vectors)
  std::string sector;                        // "full", "2Sz=0", "P=+1" or "P=-1"
  long dimension = 0;
  long matvecs = 0;
  int restarts = 0;
  bool converged = false;
  double seconds = 0;
  std::vector<double> residuals;
};

// The Hilbert space ED uses for a model.
spin::ChainHilbert ed_space(const spin::ChainModel& model, bool use_sz_sector = true);
EdResult diagonalize(const spin::SpinHamiltonian& H, const spin::ChainHilbert& space, const EdOptions& options);
EdResult exact_ground_state(const spin::ChainModel& model, const EdOptions& options = {});

// Closed forms: TFIM for any J, h (free fermions: OBC from the singular values of the N×N Lieb-Schultz-Mattis
// matrix, PBC from both fermion-parity sectors); J1-J2 at j2 = J/2 > 0 with even n: −3nJ/8; the antiferromagnetic
// Heisenberg ring (heisenberg, xxz at Δ = 1, j1j2 at j2 = 0; periodic, even n ≥ 4, J > 0) from the Bethe
// ansatz. Nothing otherwise.
std::optional<double> reference_energy(const spin::ChainModel& model);
double heisenberg_energy_periodic(int n, double J);
double tfim_energy_open(int n, double J, double h);
double tfim_energy_periodic(int n, double J, double h);

}  // namespace attnphys::ed
