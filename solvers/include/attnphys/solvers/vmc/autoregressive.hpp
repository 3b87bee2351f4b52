#pragma once
// Autoregressive transformer wavefunction for spin-1/2 chains (Sharir et al. 2020; NetKet's ARNN), sampled exactly.
//
//   ψ(σ) = Π_i sqrt(p(σ_i | σ_<i)) · exp(i φ(σ)),     Σ_σ |ψ(σ)|² = 1 by construction.
//
// A causal ops::Encoder reads the shifted sequence [start, σ_0, ..., σ_{N-2}] (token features one-hot over
// {start, up, down}, embedded by a linear layer, plus positional encodings), so output h_i depends on σ_<i only.
// Two linear heads act on every output token:
//   amp_head   [2, d] + [2]: logits z_i(v) of σ_i = v (v = 0: up, 1: down); p(σ_i | σ_<i) = softmax over v;
//   phase_head [2, d] + [2]: per-token phase contributions; φ(σ) = Σ_i phase_i(σ_i), read from the same pass.
// So log|ψ| = ½ Σ_i log p_i(σ_i) and arg ψ = Σ_i phase_i(σ_i), both from one encoder pass on the full configuration.
// The per-token phase loses nothing: any φ(σ) telescopes into Σ_i [g(σ_≤i) − g(σ_<i)].
//
// fixed_sz: with U = (N + two_sz)/2 up spins required, a value of σ_i is masked (probability 0, the other one
// renormalised to 1) when it would make U unreachable, so ψ is normalised over the sector and zero outside it
// (log|ψ| = −inf there; the phase stays finite).
//
// Parameters: the encoder's (prefix "encoder.", PyTorch-like initial values) first, then the heads (weights
// N(0, init_std²), biases 0). Exact sampling draws σ_0, σ_1, ... in N sequential conditional passes, with
// CounterRng(seed, counter, m·N + i) for site i of sample m.
#include <cstdint>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/operators/encoder.hpp"
#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::vmc {

// The conditionals need to know the site: learned or sinusoidal absolute positions.
enum class AutoregressivePositional { Learned, Sinusoidal };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::AutoregressivePositional> {
  static constexpr EnumName<vmc::AutoregressivePositional> values[] = {
      {vmc::AutoregressivePositional::Learned, "learned"}, {vmc::AutoregressivePositional::Sinusoidal, "sinusoidal"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct AutoregressiveOptions {
  long d_model = 16, n_heads = 2, n_layers = 2, d_ff = 0;  // d_ff 0: 4 · d_model
  AutoregressivePositional positional = AutoregressivePositional::Learned;
  bool fixed_sz = false;                                    // ψ confined to the sector 2S^z = two_sz
  int two_sz = 0;
  double init_std = 0.01;  // std of the head weights (small: nearly uniform conditionals and phase at the start)
  long seed = 1;

  void declare(OptionSet& set, const std::string& section = "autoregressive");
  void validate() const;
  ops::EncoderOptions encoder_options(int n_sites) const;
};

template <class T>
class AutoregressiveTransformer final : public LogPsiModel<T>, public DirectSampling<T> {
 public:
  AutoregressiveTransformer(int n_sites, const AutoregressiveOptions& options);
  AutoregressiveTransformer(const AutoregressiveTransformer&) = delete;  // heads_ views its own params_
  AutoregressiveTransformer& operator=(const AutoregressiveTransformer&) = delete;
  int n_sites() const override { return n_; }
  long n_parameters() const override { return params_.size(); }
  void log_psi(const View2<const T>& sigma, const View1<T>& re, const View1<T>& im) override;
  void log_psi_gradients(const View2<const T>& sigma, const View2<T>& o_re, const View2<T>& o_im) override;
  ParameterBuffer<T>& parameters() override { return params_; }
  std::string name() const override { return "autoregressive"; }
  void sample_direct(const View2<T>& sigma, std::uint64_t seed, std::uint64_t counter) override;
  bool fixed_sector(int& two_sz) const override;
  const AutoregressiveOptions& options() const { return opt_; }
  const ops::Encoder<T>& encoder() const { return enc_; }

  // log p(σ_i = up | σ_<i) and log p(σ_i = down | σ_<i) for every site of a batch [B, N] (−inf where masked):
  // the conditionals themselves, for tests and diagnostics.
  void conditionals(const View2<const T>& sigma, const View2<T>& log_p_up, const View2<T>& log_p_down);

  // Implementation steps (public: they hold device kernels).
  void tokens(const View2<const T>& sigma, long len);           // x_ [B*len, 3] from σ (shifted, start token)
  void heads(long batch, long len);                            // h_ → amp_ and phase_ [B*len, 2]
  void forward(const View2<const T>& sigma);                   // tokens, encoder, heads on the full sequence

 private:
  int n_;
  AutoregressiveOptions opt_;
  int n_up_;  // required up spins (fixed_sz)
  ops::Encoder<T> enc_;
  ParameterBuffer<T> params_;
  // The two heads' blocks, looked up once after allocation, with their offsets in the flat vector.
  struct Heads {
    Unmanaged2<T> amp_w, phase_w;
    Unmanaged1<T> amp_b, phase_b;
    long o_amp_w = 0, o_amp_b = 0, o_phase_w = 0, o_phase_b = 0;
  } heads_;
  ops::EncoderCache<T> cache_, one_cache_;
  View2<T> x_, h_, amp_, phase_, jac_, dy_re_, dy_im_, g_re_, g_im_;
};

extern template class AutoregressiveTransformer<float>;
extern template class AutoregressiveTransformer<double>;

}  // namespace attnphys::vmc
