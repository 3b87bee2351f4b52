#pragma once
// Baseline ansätze behind the LogPsiModel interface.
//
// Rbm: restricted Boltzmann machine (Carleo & Troyer 2017, NetKet's RBM):
//   log ψ(σ) = Σ_i a_i σ_i + Σ_j log cosh(b_j + Σ_i W_ji σ_i),   M = alpha·N hidden units,
// with complex parameters (each stored as a real and an imaginary block) or, complex = false, real ones (a positive
// wavefunction, enough for stoquastic models such as the TFIM).
//
// TableAnsatz: ψ(σ) = exp(θ_re[σ] + i θ_im[σ]) with one complex number per basis state (2^N of them): every
// wavefunction is representable, so tests can check VMC machinery against exact answers. Small N only.
#include <cstdint>

#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::vmc {

struct RbmOptions {
  double alpha = 1.0;      // hidden units per site
  bool complex = true;
  bool visible_bias = true;
  double init_std = 0.01;  // parameters start as N(0, init_std²)
  std::uint64_t seed = 1;
  bool marshall_sign = false;  // multiply by (−1)^{number of up spins on even sites} (a constant phase per σ)
};

template <class T>
class Rbm final : public LogPsiModel<T> {
 public:
  Rbm(int n_sites, const RbmOptions& options);
  Rbm(const Rbm&) = delete;  // t_ views its own params_
  Rbm& operator=(const Rbm&) = delete;
  int n_sites() const override { return n_; }
  long n_parameters() const override { return params_.size(); }
  int n_hidden() const { return m_; }
  void log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) override;
  void log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) override;
  ParameterBuffer<T>& parameters() override { return params_; }
  std::string name() const override { return "rbm"; }
  std::vector<ComplexBlock> complex_blocks() const override;
  const RbmOptions& options() const { return opt_; }
  // Hidden pre-activations θ = W σ + b of the last batch [B, M] (public: it holds device kernels).
  void hidden(const View2<const T>& sigma);

 private:
  // The parameter blocks, looked up once after allocation (views into params_, valid while it lives) with their
  // offsets in the flat vector (the columns of O); the _im and a_ blocks are empty when absent.
  struct Tensors {
    Unmanaged2<T> W_re, W_im;
    Unmanaged1<T> b_re, b_im, a_re, a_im;
    long o_W_re = 0, o_W_im = 0, o_b_re = 0, o_b_im = 0, o_a_re = 0, o_a_im = 0;
  };
  int n_, m_;
  RbmOptions opt_;
  ParameterBuffer<T> params_;
  Tensors t_;
  View2<T> th_re_, th_im_;
};

template <class T>
class TableAnsatz final : public LogPsiModel<T> {
 public:
  explicit TableAnsatz(int n_sites, std::uint64_t seed = 1, double init_std = 0.0);
  int n_sites() const override { return n_; }
  long n_parameters() const override { return params_.size(); }
  void log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) override;
  void log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) override;
  ParameterBuffer<T>& parameters() override { return params_; }
  std::string name() const override { return "table"; }
  // θ_re and θ_im are one complex number per basis state (ψ is holomorphic in them).
  std::vector<ComplexBlock> complex_blocks() const override { return {{0, 1L << n_, 1L << n_}}; }

 private:
  int n_;
  ParameterBuffer<T> params_;
};

}  // namespace attnphys::vmc
