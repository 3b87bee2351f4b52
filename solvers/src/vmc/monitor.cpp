#include "attnphys/solvers/vmc/monitor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/vmc/driver.hpp"

namespace attnphys::vmc {

using spin::Basis;

ProductBound product_state_bound(const spin::SpinHamiltonian& H, bool fixed_sz, int two_sz) {
  const int n = H.n_sites();
  ProductBound b;
  if (n < 1 || n > 62) return b;
  const Basis all = (Basis(1) << n) - 1;
  Basis neel = 0;
  for (int i = 0; i < n; i += 2) neel |= Basis(1) << i;
  const int n_up = (n + two_sz) / 2;
  const Basis wall = n_up <= 0 ? 0 : n_up >= n ? all : (Basis(1) << n_up) - 1;
  const std::pair<Basis, const char*> candidates[] = {
      {neel, "Neel"}, {~neel & all, "flipped Neel"}, {wall, "domain wall"}, {all, "all up"}, {Basis(0), "all down"}};
  for (const auto& [s, name] : candidates) {
    if (fixed_sz && 2 * spin::popcount(s) - n != two_sz) continue;
    const double e = H.diagonal(s);
    if (e < b.energy) b = {e, name};
  }
  return b;
}

namespace {
// Mean and variance of the finite entries of x[0, w) (rejected iterations of the step guard are NaN in the trace);
// returns their count.
long window_stats(const double* x, long w, double& mean, double& var) {
  long k = 0;
  mean = 0;
  for (long i = 0; i < w; ++i)
    if (std::isfinite(x[i])) mean += x[i], ++k;
  mean = k > 0 ? mean / double(k) : std::numeric_limits<double>::quiet_NaN();
  var = 0;
  for (long i = 0; i < w; ++i)
    if (std::isfinite(x[i])) var += (x[i] - mean) * (x[i] - mean);
  var /= double(std::max(1L, k - 1));
  return k;
}
// Median of the finite entries of x[0, w) (NaN when there are none).
double median(const double* x, long w) {
  std::vector<double> v;
  for (long i = 0; i < w; ++i)
    if (std::isfinite(x[i])) v.push_back(x[i]);
  const long n = long(v.size());
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  double m = v[n / 2];
  if (n % 2 == 0) m = 0.5 * (m + *std::max_element(v.begin(), v.begin() + n / 2));
  return m;
}
}  // namespace

bool plateaued(const std::vector<double>& energy, const std::vector<double>& variance, const ConvergenceCriterion& c) {
  require(energy.size() == variance.size(), "plateaued: ", energy.size(), " energies but ", variance.size(),
          " variances");
  const long w = c.window, t = long(energy.size());
  if (w <= 0 || t < std::max(2 * w, c.start)) return false;
  const double* b = energy.data() + (t - 2 * w);
  const double* a = energy.data() + (t - w);
  double ma, va, mb, vb;
  // Iterations the step guard rejected (NaN) are left out; a window needs at least half of its iterations.
  const long ka = window_stats(a, w, ma, va), kb = window_stats(b, w, mb, vb);
  if (2 * ka < w || 2 * kb < w || !std::isfinite(ma) || !std::isfinite(mb)) return false;
  const double noise = c.sigmas * std::sqrt(va / double(ka) + vb / double(kb));
  const bool energy_flat = c.two_sided ? std::abs(mb - ma) <= noise : mb - ma <= noise;
  const double var_a = median(variance.data() + (t - w), w), var_b = median(variance.data() + (t - 2 * w), w);
  bool variance_flat = var_a >= (1.0 - c.variance_drop) * var_b;
  // A rise by more than the factor 1 / (1 - drop) (none when drop = 1: every variance then counts as flat).
  if (c.two_sided && c.variance_drop < 1.0) variance_flat = variance_flat && var_a * (1.0 - c.variance_drop) <= var_b;
  return energy_flat && variance_flat;
}

ProgressMonitor::ProgressMonitor(ProductBound bound, ProgressWarningOptions options)
    : bound_(std::move(bound)), opt_(options) {}

std::vector<std::string> ProgressMonitor::observe(const VmcStep& s) {
  std::vector<std::string> out;
  if (!std::isfinite(s.energy)) return out;  // the driver stops on a non-finite energy itself
  // Exact sampling (sweep 0) has no chains to freeze; its acceptance is reported as 1.
  frozen_run_ = s.sweep > 0 && s.acceptance <= opt_.frozen_acceptance ? frozen_run_ + 1 : 0;
  if (!warned_frozen_ && opt_.frozen_iterations > 0 && frozen_run_ >= opt_.frozen_iterations) {
    warned_frozen_ = true;
    out.push_back(msg("the Metropolis chains have accepted ", s.acceptance <= 0 ? "no move" : "almost no move", " for ",
                      frozen_run_, " iterations (acceptance ", s.acceptance, " at iteration ", s.iteration,
                      "): they are frozen in the configurations where the wavefunction peaks, so from here on the "
                      "energy (now ",
                      s.energy, " +- ", s.error,
                      "), its error bar and any plateau describe those configurations, not the state, and the "
                      "energy can fall below the ground state's. Usually a step blew the wavefunction up just "
                      "before: restart from an earlier checkpoint with a larger vmc.diag_shift or a smaller vmc.lr, "
                      "or turn on the step guard (vmc.guard_sigmas)"));
  }
  if (first_iteration_ < 0) first_iteration_ = s.iteration;
  const double noise = std::max(2.0 * s.error, 1e-12 * std::abs(s.energy));
  if (s.energy < best_ - noise || best_iteration_ < 0) {
    best_ = std::min(best_, s.energy);
    best_iteration_ = s.iteration;
  }
  const double margin = 2.0 * s.error + 1e-9 * std::abs(bound_.energy);
  if (!warned_bound_ && std::isfinite(bound_.energy) && s.iteration - first_iteration_ >= opt_.bound_after &&
      s.energy - margin > bound_.energy) {
    warned_bound_ = true;
    out.push_back(msg("VMC energy ", s.energy, " +- ", s.error, " at iteration ", s.iteration,
                      " is above that of the product state '", bound_.state, "' (", bound_.energy,
                      "): the ansatz has not found the ground state's sign structure, or its steps are too large. "
                      "For antiferromagnetic chains turn on the Marshall sign (ansatz.marshall_sign=on); lower "
                      "vmc.lr or raise vmc.diag_shift; use more samples (sampler.n_samples) if the error bar is "
                      "large"));
  }
  if (!warned_plateau_ && opt_.plateau_window > 0 && s.iteration - best_iteration_ >= opt_.plateau_window &&
      s.v_score > opt_.plateau_v_score) {
    warned_plateau_ = true;
    out.push_back(msg("VMC energy has not improved for ", s.iteration - best_iteration_, " iterations (best ", best_,
                      " at iteration ", best_iteration_, ") while its V-score N Var(E)/E^2 is still ", s.v_score,
                      " (a converged state is far below ", opt_.plateau_v_score,
                      "): the optimisation is stuck. Lower vmc.lr or raise vmc.diag_shift; for antiferromagnets "
                      "try the Marshall sign (ansatz.marshall_sign=on); or a larger ansatz"));
  }
  return out;
}

}  // namespace attnphys::vmc
