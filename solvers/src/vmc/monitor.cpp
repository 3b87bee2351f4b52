#include "attnphys/solvers/vmc/monitor.hpp"

#include <cmath>
#include <cstdio>

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

ProgressMonitor::ProgressMonitor(ProductBound bound, ProgressWarningOptions options)
    : bound_(std::move(bound)), opt_(options) {}

std::vector<std::string> ProgressMonitor::observe(const VmcStep& s) {
  std::vector<std::string> out;
  if (!std::isfinite(s.energy)) return out;  // the driver stops on a non-finite energy itself
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
