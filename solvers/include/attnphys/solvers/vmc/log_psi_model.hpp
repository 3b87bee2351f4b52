#pragma once
// The variational-state interface VMC needs from an ansatz, and nothing more: a complex log-amplitude and its
// per-sample gradients with respect to the model's real parameters.
//
// Spins are ±1 values of type T, sigma [B, N]. log ψ(σ) = re + i·im. O_k(σ) = ∂ log ψ(σ) / ∂θ_k for the real
// parameters θ_k of parameters() in their flat order ([B, P] real and imaginary parts; a complex weight is two real
// parameters, with O = g and O = i·g). Implementations may keep work buffers between calls (hence non-const).
//
// DirectSampling is an optional second interface for models whose |ψ|² is normalised and can be sampled exactly
// (autoregressive models): the VMC driver finds it with dynamic_cast and then needs no Markov chains.
#include <cstdint>
#include <string>

#include "attnphys/core/params.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::vmc {

template <class T>
class LogPsiModel {
 public:
  virtual ~LogPsiModel() = default;
  virtual int n_sites() const = 0;
  virtual long n_parameters() const = 0;
  virtual void log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) = 0;
  virtual void log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) = 0;
  virtual ParameterBuffer<T>& parameters() = 0;
  virtual std::string name() const { return "model"; }
};

template <class T>
class DirectSampling {
 public:
  virtual ~DirectSampling() = default;
  // Fills sigma [M, N] with M independent draws from |ψ(σ)|² (Σ_σ |ψ(σ)|² = 1). The draws are a pure function of
  // (parameters, seed, counter, row m): the same on every backend and thread count, and row m does not depend on M.
  virtual void sample_direct(const View2<T>& sigma, std::uint64_t seed, std::uint64_t counter) = 0;
  // True when ψ vanishes outside the sector 2S^z = two_sz (then every draw lies in it); two_sz is set only then.
  virtual bool fixed_sector(int& two_sz) const {
    (void)two_sz;
    return false;
  }
};

}  // namespace attnphys::vmc
