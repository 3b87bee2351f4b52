#pragma once
// Local energies E_loc(σ) = Σ_σ' H_σσ' ψ(σ')/ψ(σ) of a batch, on the device. The connected configurations that
// contribute (off-diagonal elements that are not zero) are packed into one list by a prefix sum, so the model
// evaluates only those, in chunks of at most `chunk` configurations.
#include "attnphys/physics/spin/hamiltonian.hpp"
#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::vmc {

// logpsi_re/im: log ψ of sigma (as the sampler already has them). chunk: samples per pass (memory bound:
// chunk · max_conn · N values).
template <class T>
void local_energy(LogPsiModel<T>& model, const spin::SpinHamiltonian& H, const View2<const T>& sigma,
                  const View1<const T>& logpsi_re, const View1<const T>& logpsi_im, const View1<T>& eloc_re,
                  const View1<T>& eloc_im, long chunk = 1024);

}  // namespace attnphys::vmc
