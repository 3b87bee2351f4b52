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
#include <vector>

#include "attnphys/core/params.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::vmc {

// A complex weight block stored as two real blocks of the flat parameter vector: its real parts at re_offset, its
// imaginary parts at im_offset, size entries each.
struct ComplexBlock {
  long re_offset = 0, im_offset = 0, size = 0;
};

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
  // The model's complex weights (re, im block pairs), for the SR solve of a holomorphic ansatz; empty when its
  // parameters are real.
  virtual std::vector<ComplexBlock> complex_blocks() const { return {}; }
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

// IncrementalLogPsi is an optional third interface: log ψ of configurations that each differ from one cached
// reference configuration in a few sites, cheaper than log_psi (a transformer with one factored-attention block
// recomputes only the changed tokens' values: attention is linear in them). The Metropolis sampler (proposals
// against the chain states) and the local energy (connected configurations against their sample) find it with
// dynamic_cast. The model holds one reference set at a time: each caller sets it before its updates.
template <class T>
class IncrementalLogPsi {
 public:
  virtual ~IncrementalLogPsi() = default;
  // Whether the fast path applies to this model's configuration (false: use log_psi).
  virtual bool incremental_enabled() const = 0;
  // Evaluates the following reference set (set_reference, then log_psi_from_reference and update_reference until
  // the next set_reference) in a lower precision (float32) when `low` and the model has one; returns whether it
  // does. For Metropolis proposals, whose acceptance test tolerates rounding of ~1e-6 in log ψ; local energies and
  // gradients stay in the model's precision (callers set false before their own set_reference).
  virtual bool set_low_precision(bool low) {
    (void)low;
    return false;
  }
  // Caches the reference configurations ref [R, N] (replacing earlier ones).
  virtual void set_reference(const View2<const T>& ref) = 0;
  // log ψ of sigma [B, N], whose row b may differ from reference row parent(b) anywhere (the cost grows with the
  // number of changed tokens); equal to log_psi(sigma) up to rounding.
  virtual void log_psi_from_reference(const View2<const T>& sigma, const View1<const long>& parent,
                                      const View1<T>& re, const View1<T>& im) = 0;
  // After log_psi_from_reference: reference row parent(b) becomes that call's row b wherever take(b) != 0 (a
  // Metropolis acceptance), so that the next proposals are again one move away.
  virtual void update_reference(const View1<const long>& take) = 0;
};

}  // namespace attnphys::vmc
