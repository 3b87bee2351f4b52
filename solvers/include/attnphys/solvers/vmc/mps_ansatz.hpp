#pragma once
// A matrix product state as a VMC ansatz (LogPsiModel): the same sampler, local energies and SR optimiser as the
// neural ansätze, so MPS and transformer wavefunctions can be compared at equal parameter count and equal budget.
//
//   ψ(σ) = Tr A_0^{σ_0} A_1^{σ_1} ... A_{N-1}^{σ_{N-1}}       (periodic: every bond has dimension χ)
//   ψ(σ) = A_0^{σ_0} A_1^{σ_1} ... A_{N-1}^{σ_{N-1}}          (open: bond dimension 1 at both ends, and bond b
//                                                              between sites b-1 and b has min(χ, 2^b, 2^{N-b}))
//
// with real parameters A_i^{s}[a, b] (s = 0 for σ = +1, spin up, as in attnphys::mps; s = 1 for σ = −1). The sign
// of ψ is carried by the imaginary part of log ψ: im = π for a negative amplitude. With marshall_sign the amplitude
// is multiplied by (−1)^{up spins on even sites}, as TransformerAnsatz does, so a positive MPS describes the
// ground state of an antiferromagnetic Heisenberg chain.
//
// Evaluation: one Kokkos parallel_for over samples (each sample's matrix products run in the kernel on the device;
// per-sample work buffers live in device views). Running products are rescaled by their largest entry at every
// site and the logarithms of the scales are summed, so log ψ stays finite for any N. Gradients use left products
// P_i = A_0 .. A_{i-1} (stored) and right products R_{i+1} = A_{i+1} .. A_{N-1} (swept):
//   O_{i,σ_i,a,b} = ∂ log ψ / ∂A_i^{σ_i}[a,b] = (R_{i+1} P_i)[b,a] / Tr(P_i A_i^{σ_i} R_{i+1}),
// a ratio in which the scales cancel; entries of the other spin value are 0. Cost O(N χ²) per sample for open
// chains, O(N χ³) for periodic ones.
//
// Parameters start as A_i^{s} = 1 (the identity, rectangular at the edges) + N(0, init_std²) noise: ψ starts close
// to the uniform superposition, with every channel coupled by the noise.
#include <cstdint>
#include <memory>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::mps {
class Mps;
}

namespace attnphys::vmc {

struct MpsAnsatzOptions {
  long chi = 4;                // largest bond dimension χ
  bool periodic = false;       // trace over a ring (every bond χ) instead of open ends
  bool marshall_sign = false;  // multiply by (−1)^{N_up on even sites}
  double init_std = 0.05;      // noise on the identity start
  long seed = 1;

  void declare(OptionSet& set, const std::string& section = "mps");
  void validate() const;
};

// Bond dimensions D_0 .. D_N of an n-site MPS with largest bond χ (D_0 = D_N = 1 for open chains).
std::vector<int> mps_bond_dimensions(int n, long chi, bool periodic);
// Number of entries Σ_i d D_i D_{i+1} (d = 2) of an MPS with these bond dimensions.
long mps_entry_count(const std::vector<int>& bonds, int d = 2);
// Number of entries of an MPS (what `attnphys dmrg` stores).
long mps_entry_count(const mps::Mps& psi);

template <class T>
class MpsAnsatz final : public LogPsiModel<T> {
 public:
  MpsAnsatz(int n_sites, const MpsAnsatzOptions& options);
  // Explicit bond dimensions D_0 .. D_n (D_0 = D_n; 1 for open chains); options.chi and periodic are set from them.
  MpsAnsatz(int n_sites, const std::vector<int>& bonds, const MpsAnsatzOptions& options);
  // The ansatz holding exactly the amplitudes of an open-chain MPS (e.g. a DMRG ground state): ψ(σ) = <σ|psi>.
  static std::unique_ptr<MpsAnsatz<T>> from_mps(const mps::Mps& psi, bool marshall_sign = false);

  int n_sites() const override { return n_; }
  long n_parameters() const override { return params_.size(); }
  void log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) override;
  void log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) override;
  ParameterBuffer<T>& parameters() override { return params_; }
  std::string name() const override { return "mps"; }
  const MpsAnsatzOptions& options() const { return opt_; }
  const std::vector<int>& bond_dimensions() const { return bonds_; }
  // Offset of A_i in the flat parameter vector; A_i^{s}[a, b] is at offset + (s·D_i + a)·D_{i+1} + b.
  long site_offset(int i) const { return offsets_host_.at(i); }

 private:
  int n_;
  MpsAnsatzOptions opt_;
  std::vector<int> bonds_;
  std::vector<long> offsets_host_;
  int chi_max_ = 1;
  ParameterBuffer<T> params_;
  View1<int> bond_dev_;
  View1<long> offset_dev_;
  View3<double> left_;  // [B, n, D_0 · χ]: left products P_i (gradients)
  View2<double> work_;  // [B, 2 · D_0 · χ]: running products
  void setup(const std::vector<int>& bonds);
  void ensure_work(long B, bool with_left);
};

}  // namespace attnphys::vmc
