#pragma once
// Statistics of Markov-chain samples x[s·C + c] (S steps of C chains, step-major as the sampler stores them):
// mean, variance, integrated autocorrelation time, the error of the mean that accounts for it, and split-R̂.
//
// τ = 1 + 2 Σ_{t=1}^{W} ρ(t), with ρ the autocorrelation averaged over chains and W the first window with
// W ≥ 5τ (Sokal); error = sqrt(var · τ / (S·C)). τ is floored at 1 so that an unlucky estimate never shrinks the
// error bar. split-R̂ (Gelman et al.) compares the two halves of every chain; it is near 1 when the chains agree.
#include <vector>

namespace attnphys::vmc {

struct ChainStats {
  double mean = 0;
  double variance = 0;
  double error = 0;
  double tau = 1;
  double r_hat = 1;  // 1 when there are too few steps to split (S < 4)
  long n = 0;
};

ChainStats chain_statistics(const std::vector<double>& x, long n_steps, long n_chains);

// V-score (Wu et al. 2023): N · Var(E) / E², a size-independent measure of how far from an eigenstate.
inline double v_score(int n_sites, double energy, double variance) {
  return energy == 0 ? 0.0 : n_sites * variance / (energy * energy);
}

}  // namespace attnphys::vmc
