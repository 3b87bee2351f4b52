#pragma once
// Warnings for a VMC run that is not getting anywhere (issue 22, item 4): the energy sits above that of a trivial
// product state, or has not improved for K iterations while the state is still far from an eigenstate, or the
// Metropolis chains have frozen (no move accepted for several iterations: every sample is the configuration a chain
// is stuck in, and the energy, its error bar and any "plateau" describe that configuration, not the wavefunction;
// the estimate can even fall below the ground-state energy). Each says what to change (Marshall sign, learning
// rate, diagonal shift, samples). VmcDriver::run raises them (once each per run) on stderr and keeps them in
// VmcDriver::warnings(); run_vmc adds them to its result's warnings.
#include <limits>
#include <string>
#include <vector>

#include "attnphys/physics/spin/hamiltonian.hpp"

namespace attnphys::vmc {

struct VmcStep;

// The lowest energy <s|H|s> of the simple z-basis product states s of the sampled sector: Neel and its flip, the
// domain wall, and (outside a fixed-Sz sector) all up / all down. Any ground state lies at or below it, and an
// ansatz that sits above it has learned less than a product state knows.
struct ProductBound {
  double energy = std::numeric_limits<double>::infinity();
  std::string state;  // "Neel", "flipped Neel", "domain wall", "all up", "all down" (empty: none in the sector)
};
ProductBound product_state_bound(const spin::SpinHamiltonian& H, bool fixed_sz = false, int two_sz = 0);

struct ProgressWarningOptions {
  long plateau_window = 50;      // K: warn when the best energy has not improved for this many iterations (0: off)
  long bound_after = 10;         // warn about the product bound from this iteration on
  double plateau_v_score = 1e-2; // ... only while the V-score N Var/E^2 is above this (a converged state is lower)
  long frozen_iterations = 3;    // warn when this many iterations in a row accepted at most frozen_acceptance (0: off)
  double frozen_acceptance = 1e-3;  // (healthy runs on the chains accept 5-50 % of their moves)
};

// When a VMC run counts as converged (vmc.converge_window; the study of issue 20 trains every ansatz to this instead
// of a fixed number of iterations). With W = window, the energies E_t and variances V_t of every iteration so far
// (a resumed run continues the checkpoint's trace), A = the last W iterations and B = the W before them:
//   energy plateau:   mean_B(E) - mean_A(E) <= sigmas * sqrt(s_A^2 / W + s_B^2 / W)   (s: the scatter of E in the
//                     window), i.e. no improvement the noise cannot explain;
//   variance plateau: median_A(V) >= (1 - variance_drop) * median_B(V), i.e. the variance fell by less than
//                     variance_drop over the last window;
// both, once at least max(2 W, start) iterations have run (start: the end of the SR diagonal-shift decay).
// The default test is one-sided: a rise of the energy or of the variance counts as flat, so a run can stop in the
// middle of an excursion (9 of 37 study runs replayed in docs/study/two_sided/ stopped during a rise the noise does
// not explain; two of them, continued two-sided, settled again at the error they had). two_sided also requires
//   |mean_B(E) - mean_A(E)| <= sigmas * sqrt(...)   and   median_A(V) <= median_B(V) / (1 - variance_drop),
// i.e. neither a fall nor a rise the noise cannot explain.
struct ConvergenceCriterion {
  long window = 0;            // W (0: never converged; the run takes all its iterations)
  double sigmas = 2.0;
  double variance_drop = 0.1;
  long start = 0;
  bool two_sided = false;
};
// Whether the trace (one entry per iteration, energies and variances of equal length) meets the criterion.
bool plateaued(const std::vector<double>& energy, const std::vector<double>& variance, const ConvergenceCriterion& c);

class ProgressMonitor {
 public:
  ProgressMonitor(ProductBound bound, ProgressWarningOptions options = {});
  // The warnings this iteration raises (each kind at most once per monitor).
  std::vector<std::string> observe(const VmcStep& step);

 private:
  ProductBound bound_;
  ProgressWarningOptions opt_;
  double best_ = std::numeric_limits<double>::infinity();
  long best_iteration_ = -1;
  long first_iteration_ = -1;
  long frozen_run_ = 0;  // iterations in a row with acceptance <= frozen_acceptance
  bool warned_bound_ = false, warned_plateau_ = false, warned_frozen_ = false;
};

}  // namespace attnphys::vmc
