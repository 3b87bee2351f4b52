#pragma once
// Metropolis sampling of |ψ(σ)|² with many chains advanced together: each step proposes one move per chain and
// evaluates the model once on all proposals. Moves:
//   local     flip one random spin (changes S^z);
//   exchange  swap one pair of antiparallel spins chosen uniformly among the pairs within `exchange_distance`
//             (chain distance, periodic when the chain is). The number of such pairs n(σ) depends on σ, so the
//             proposal is not symmetric: the acceptance carries the Hastings factor n(σ)/n(σ');
//   global_flip with this probability, flip every spin instead (keeps 2S^z = 0; helps Z2-symmetric states).
// Every random number is CounterRng(seed, chain, 16·step + k): results do not depend on the backend or thread count.
#include <cstdint>
#include <string>

#include "attnphys/core/options.hpp"
#include "attnphys/solvers/vmc/log_psi_model.hpp"

namespace attnphys::vmc {

// auto: exchange when a fixed Sz sector is sampled, else local; exact (and auto for models with DirectSampling): the
// VMC driver samples |psi|^2 directly.
enum class SamplerMove { Auto, Local, Exchange, Exact };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::SamplerMove> {
  static constexpr EnumName<vmc::SamplerMove> values[] = {{vmc::SamplerMove::Auto, "auto"},
                                                          {vmc::SamplerMove::Local, "local"},
                                                          {vmc::SamplerMove::Exchange, "exchange"},
                                                          {vmc::SamplerMove::Exact, "exact"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct SamplerOptions {
  long n_chains = 128;
  long n_samples = 1024;     // per call of sample(), rounded up to a multiple of n_chains
  long n_discard = 16;       // sweeps discarded at the start of the first sample() call after reset() (burn-in)
  long n_discard_continue = -1;  // sweeps discarded at the start of later calls, whose chains continue from the
                                 // previous call's (equilibrated) states; negative: n_discard
  long sweep_size = 0;       // Metropolis steps between kept samples; 0: the number of sites
  // Adapt the sweep to the measured autocorrelation time of the local energy (the VMC driver does it after each
  // iteration): shorter while tau <= 1.2, longer when tau > 1.5, between min_sweep (0: a quarter of the sites) and
  // twice the number of sites. Starts from sweep_size.
  bool adapt_sweep = false;
  long min_sweep = 0;
  SamplerMove move = SamplerMove::Auto;
  long exchange_distance = 0;  // 0: any pair
  bool periodic = true;        // whether exchange distances wrap around (the driver's sampler uses this)
  double global_flip = 0.0;    // probability of a global spin flip instead of the move
  bool float32 = false;        // proposals in float32 where the model has such a path (the incremental
                               // transformer); kept samples get their log ψ again in the model's precision
  bool fixed_sz = false;       // start (and, with exchange moves, stay) in the sector 2Sz = two_sz
  int two_sz = 0;
  long seed = 1;

  void declare(OptionSet& set, const std::string& section = "sampler");
  void validate() const;
};

template <class T>
class MetropolisSampler {
 public:
  MetropolisSampler(LogPsiModel<T>& model, const SamplerOptions& options, bool periodic);

  // New random chain states (in the sector when fixed_sz).
  void reset();
  // Runs n_discard sweeps (n_discard_continue when the chains continue), then n_samples/n_chains sweeps, keeping
  // the state after each: samples [S·C, N] step-major (row s·C + c), with their log ψ.
  void sample(View2<T>& samples, View1<T>& logpsi_re, View1<T>& logpsi_im);
  // One Metropolis step of every chain.
  void step();
  // Recomputes log ψ of the chain states (after the model's parameters changed).
  void refresh() {
    model_.log_psi(state_, lp_re_, lp_im_);
    ref_valid_ = false;
  }

  long n_chains() const { return opt_.n_chains; }
  long n_steps_per_sample() const { return (opt_.n_samples + opt_.n_chains - 1) / opt_.n_chains; }
  long n_samples() const { return n_steps_per_sample() * opt_.n_chains; }
  long sweep_size() const { return sweep_; }
  // Metropolis steps between kept samples from now on (checkpoints and the driver's adaptation set it).
  void set_sweep_size(long steps);
  // The next sweep for a measured autocorrelation time (sampler.adapt_sweep); the current one when it stays.
  long adapted_sweep(double tau) const;
  SamplerMove move() const { return move_; }  // local or exchange (auto resolved)
  // Fraction of accepted proposals since the last reset_acceptance().
  double acceptance() const;
  void reset_acceptance();

  // Chain state, for checkpoints (the step counter makes a restarted run draw the same numbers).
  const View2<T>& states() const { return state_; }
  // log ψ of the chain states as the acceptance tests use it (float32 values when sampler.float32 ran).
  const View1<T>& chain_log_psi_re() const { return lp_re_; }
  const View1<T>& chain_log_psi_im() const { return lp_im_; }
  std::uint64_t step_counter() const { return step_; }
  // equilibrated: the states continue a run (the next sample() discards n_discard_continue sweeps); false: they
  // are fresh (it discards n_discard).
  void restore(const View2<T>& states, std::uint64_t step_counter, bool equilibrated = true);
  // Sweeps the next sample() call discards.
  long next_discard() const;
  const SamplerOptions& options() const { return opt_; }

 private:
  LogPsiModel<T>& model_;
  SamplerOptions opt_;
  int n_;
  long sweep_;
  SamplerMove move_;
  std::uint64_t step_ = 0;
  bool fresh_ = true;  // chains not yet sampled since reset()
  View2<T> state_, proposal_;
  View1<T> lp_re_, lp_im_, new_re_, new_im_, log_hastings_;
  View1<long> accepted_, take_, identity_;
  IncrementalLogPsi<T>* inc_ = nullptr;  // the model's incremental path (proposals against the chain states)
  bool ref_valid_ = false;               // the model's reference holds state_ (set in sample(), kept by step())
  bool low_ = false;                     // the reference runs in float32 (options.float32 and the model has it)
  long proposed_ = 0;
  View1<int> pair_i_, pair_j_;  // exchange pairs
};

}  // namespace attnphys::vmc
