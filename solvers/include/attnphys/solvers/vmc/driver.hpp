#pragma once
// The VMC loop: sample |ψ|², estimate the energy, update the parameters (SR, minSR or Adam), repeat.
//
//   vmc::VmcDriver<double> driver(model, H, options);
//   auto history = driver.run(300, &logger, {[](const vmc::VmcStep& s) { return s.error > 1e-4; }});
//
// A callback returning false stops the run after that step. A NaN or infinite energy stops it with an Error.
// Checkpoints hold the parameters, the optimizer state, the chain states and the random-number counter, so a
// restarted run continues exactly as the uninterrupted one would.
//
// Models that implement DirectSampling (autoregressive ones) are sampled exactly when sampler.move is auto or
// exact: sampler.n_samples independent draws per iteration, draw k of the run using counter k (no chains, no
// burn-in; energy statistics with tau = 1, acceptance reported as 1). Other models use the Metropolis sampler.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/logging.hpp"
#include "attnphys/core/optim.hpp"
#include "attnphys/physics/spin/hamiltonian.hpp"
#include "attnphys/solvers/vmc/sr.hpp"
#include "attnphys/solvers/vmc/diagnostics.hpp"
#include "attnphys/solvers/vmc/monitor.hpp"
#include "attnphys/solvers/vmc/sampler.hpp"

namespace attnphys::vmc {

// sr: P x P or minSR, whichever is smaller; pxp, minsr: that form of SR; adam: Adam on the energy gradient.
enum class VmcOptimizer { Sr, Pxp, Minsr, Adam };

}  // namespace attnphys::vmc

namespace attnphys {
template <>
struct EnumNames<vmc::VmcOptimizer> {
  static constexpr EnumName<vmc::VmcOptimizer> values[] = {{vmc::VmcOptimizer::Sr, "sr"},
                                                           {vmc::VmcOptimizer::Pxp, "pxp"},
                                                           {vmc::VmcOptimizer::Minsr, "minsr"},
                                                           {vmc::VmcOptimizer::Adam, "adam"}};
};
}  // namespace attnphys

namespace attnphys::vmc {

struct VmcOptions {
  SamplerOptions sampler;
  VmcOptimizer optimizer = VmcOptimizer::Sr;
  double lr = 0.05;              // SR step τ, or Adam's learning rate
  double diag_shift = 1e-2;      // SR diagonal shift, decaying geometrically ...
  double diag_shift_final = 1e-4;
  long diag_shift_steps = 300;   // ... to diag_shift_final over this many iterations
  double rcond = 1e-12;          // pseudo-inverse cut-off (relative)
  SrPrecision sr_precision = SrPrecision::Mixed;  // single-precision Gram + Cholesky refined in double (sr.hpp)
  long chunk_size = 1024;        // samples per model evaluation
  bool merge_duplicates = true;  // SR sees each distinct sample once, weighted by its count (the same update)
  long n_iter = 300;
  std::string log_path;          // CSV log (empty: none)
  std::string checkpoint_path;   // written every checkpoint_every iterations and at the end (empty: never)
  long checkpoint_every = 0;
  long plateau_window = 50;      // warn when the energy has not improved for this many iterations (vmc/monitor.hpp)
  // Stop when the energy and its variance have plateaued (vmc/monitor.hpp, ConvergenceCriterion; window 0: never,
  // n_iter is then the number of iterations, else their maximum). The criterion starts at the end of the SR
  // diagonal-shift decay (diag_shift_steps) for the SR optimisers.
  long converge_window = 0;
  double converge_sigmas = 2.0;
  double converge_variance_drop = 0.1;
  bool converge_two_sided = false;  // a rise of the energy or variance is not a plateau either (ConvergenceCriterion)
  // Step guard (0: off). From iteration guard_start on, an iteration whose energy is not finite, lies more than
  // guard_sigmas combined standard errors above the lowest energy of the run so far, or has more than
  // kGuardVarianceFactor times that energy's variance, rejects the step that led there: the parameters go back to
  // those of that lowest energy and the diagonal shift is multiplied by 10 for the rest of the run (each rejection
  // again). A rejected iteration is logged (column `rejected`), takes no step, and is left out of the convergence
  // criterion; after kGuardMaxRejections the run stops with an error as an unguarded run does on a NaN energy.
  // A rejection whose re-estimate rebases (below) was a false alarm: the restored parameters fail too, so the step
  // was not the cause, and it does not count toward kGuardMaxRejections. A 16-site Heisenberg transformer near its
  // ground state (variance ~0.007) had chains stuck for 2-9 iterations at a time in configurations of huge local
  // energy (variance 1-3) even with its steps frozen; five of its seven rejections rebased, and the run gave up at
  // 1e-4 relative error before this rule. The tenfold raise of the shift stays: undoing it was tried, and the
  // 128-site TFIM run, rebased at 183 onto a state of variance 197, took a step at the scheduled shift (6e-4) and
  // reached +55.7 at 185 where the raised shift had let it climb back to -162.55 by 280.
  // When the iteration right after a rejection (the lowest energy's own parameters, no step since) fails the test
  // again, that lowest estimate no longer describes its parameters under the chains as they are now: they found
  // configurations it never saw. The iteration is then accepted and its estimate becomes the lowest
  // (GuardVerdict::Rebase), so that the run goes on learning there instead of rejecting until it gives up, as a
  // 128-site TFIM run did: its chains found a region of bad local energies, the run was climbing back down when the
  // guard restored the lowest energy's parameters, and those gave -154 to -149 against the lowest -162.56, six times.
  // Before guard_start the energy may rise for real (SR from a random start: +3.5 at 9 standard errors in the first
  // step of a 64-site TFIM transformer), so the guard waits. A run does not count as converged (converge_window)
  // until converge_window iterations have passed since the guard last rejected or rebased: the plateau criterion
  // reads a rise as "no improvement", and the same 128-site run stopped 6 iterations after a rebase, at a relative
  // error of 8.1e-4 where its estimates had been 2e-5 before the disturbance.
  double guard_sigmas = 0;
  long guard_start = 100;

  void declare(OptionSet& set, const std::string& section = "vmc");
  void validate() const;
};

double scheduled_diag_shift(const VmcOptions& o, long iteration);

struct VmcStep {
  long iteration = 0;
  double energy = 0, energy_imag = 0, error = 0, variance = 0, v_score = 0, tau = 1, r_hat = 1;
  double acceptance = 0, diag_shift = 0, grad_norm = 0, seconds = 0;
  long sweep = 0;  // Metropolis steps between kept samples in this iteration (0: exact sampling)
  // Where the time went: sampling, local energies, per-sample gradients, the update (gather + SR solve).
  double sample_seconds = 0, energy_seconds = 0, gradient_seconds = 0, update_seconds = 0;
  bool used_pinv = false;
  bool rejected = false;  // the step guard rejected this iteration (VmcOptions::guard_sigmas)
};

inline constexpr long kGuardMaxRejections = 6;
inline constexpr double kGuardVarianceFactor = 100;

// One iteration's energy estimate as the step guard sees it.
struct GuardEstimate {
  double energy = 0, error = 0, variance = 0;
};
enum class GuardVerdict { Accept, Reject, Rebase };
// The step guard's decision (VmcOptions::guard_sigmas) for the estimate `now`, given the lowest accepted estimate
// `best` and whether the last iteration was rejected. A non-finite energy or variance is always rejected.
GuardVerdict guard_verdict(double sigmas, const GuardEstimate& now, const GuardEstimate& best, bool after_rejection);

// The step guard's memory: the lowest accepted estimate, whether the last iteration was rejected, and the counts of
// rejections and of false alarms (rejections whose re-estimate rebased). observe() judges one iteration's estimate
// (`active`: the guard may reject, i.e. iteration >= guard_start) and updates the memory; `new_lowest` says whether
// the estimate became the lowest (its parameters are then the ones a rejection restores).
struct StepGuardState {
  bool have_best = false, last_rejected = false;
  GuardEstimate best;
  long rejections = 0, false_alarms = 0;
  // The rejections that count toward kGuardMaxRejections: those the re-estimate did not show to be false alarms.
  long counted_rejections() const { return rejections - false_alarms; }
  GuardVerdict observe(double sigmas, const GuardEstimate& now, bool active, bool& new_lowest);
};

template <class T>
class VmcDriver {
 public:
  using Callback = std::function<bool(const VmcStep&)>;

  // Under MPI (comm of more than one rank) sampler.n_samples and sampler.n_chains are totals over the ranks: every
  // rank runs its share of the chains with its own seed, computes local energies and per-sample gradients of its
  // samples, and the samples' local energies and gradients are gathered so that every rank solves the same SR
  // system and takes the same step (the parameters stay identical; statistics cover all chains). Only rank 0
  // writes logs and checkpoints; a checkpoint holds every rank's chains and restarts with any rank count (chains
  // restart from fresh states when the count differs).
  VmcDriver(LogPsiModel<T>& model, const spin::SpinHamiltonian& H, const VmcOptions& options,
            const Comm& comm = Comm::world());

  // n_iter iterations (options().n_iter when negative); logs each to `logger` when given.
  std::vector<VmcStep> run(long n_iter = -1, CsvLogger* logger = nullptr,
                           const std::vector<Callback>& callbacks = {});
  VmcStep step();
  // Energy statistics of the current state from n_samples new samples (0: the sampler's setting), drawn by chains
  // that start from the run's current (equilibrated) chain states with a separate random stream; no update.
  ChainStats estimate_energy(long n_samples = 0);
  // Acceptance rate of the last estimate_energy's chains (averaged over the ranks; 1 for exact sampling; 0 before
  // any estimate).
  double estimate_acceptance() const { return estimate_acceptance_; }

  void save_checkpoint(const std::string& path) const;
  void load_checkpoint(const std::string& path);

  long iteration() const { return iter_; }
  // Whether the energy and variance trace meets the convergence criterion of the options (false when
  // converge_window is 0). run() stops there, and takes no step when a resumed run has already converged.
  bool converged() const;
  ConvergenceCriterion convergence_criterion() const;
  // Energy and variance of every iteration of the run (with a resumed checkpoint's before them).
  const std::vector<double>& energy_trace() const { return trace_e_; }
  const std::vector<double>& variance_trace() const { return trace_v_; }
  // The Markov-chain sampler (an Error when the driver samples directly).
  MetropolisSampler<T>& sampler();
  bool direct_sampling() const { return direct_ != nullptr; }
  std::uint64_t direct_counter() const { return direct_counter_; }
  const VmcOptions& options() const { return opt_; }
  const Comm& comm() const { return comm_; }
  // Largest |θ_rank − θ_rank0| over parameters and ranks (0 on one rank): the ranks must agree exactly.
  double parameter_divergence() const;
  // The warnings of run() so far (vmc/monitor.hpp: above a product state's energy, no progress for
  // vmc.plateau_window iterations), each also printed once on stderr by rank 0.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The CSV log's columns and one iteration's row; with the step guard a last column `rejected` (0 or 1).
  static std::vector<std::string> log_columns(bool guard = false);
  static std::vector<double> log_row(const VmcStep& s, bool guard = false);
  // Step guard state (VmcOptions::guard_sigmas): rejections so far and the factor on the scheduled diagonal shift.
  long guard_rejections() const { return guard_.rejections; }
  // Rejections whose re-estimate rebased (false alarms: not counted toward kGuardMaxRejections).
  long guard_false_alarms() const { return guard_.false_alarms; }
  double guard_shift_factor() const { return shift_mult_; }

 private:
  LogPsiModel<T>& model_;
  const spin::SpinHamiltonian& H_;
  VmcOptions opt_;
  Comm comm_;
  SamplerOptions local_;  // this rank's share of the chains and samples, with its own seed
  std::unique_ptr<MetropolisSampler<T>> sampler_;  // null when sampling directly
  DirectSampling<T>* direct_ = nullptr;
  std::uint64_t direct_counter_ = 0;
  Optimizer adam_;
  long iter_ = 0;
  double estimate_acceptance_ = 0;
  std::vector<std::string> warnings_;
  std::vector<double> trace_e_, trace_v_;
  // Step guard: the lowest accepted energy so far, its error and parameters; rejections and the shift factor.
  StepGuardState guard_;
  long guard_event_ = -1;  // the last iteration the guard rejected or rebased (-1: none)
  double shift_mult_ = 1;
  View1<T> best_params_;
  View2<T> samples_, o_re_, o_im_;
  View1<T> lp_re_, lp_im_, e_re_, e_im_, delta_;
  View2<T> g_o_re_, g_o_im_;  // every rank's gradients and local energies (MPI only)
  // The distinct samples' rows of O and E_loc and their counts (merge_duplicates), and the merge's index lists.
  View2<T> u_o_re_, u_o_im_;
  View1<T> u_e_re_, u_e_im_, u_count_;
  std::vector<long> u_first_, u_times_;
  View1<T> g_e_re_, g_e_im_;
  HolomorphicPairs holomorphic_;  // complex weights of a model that may be holomorphic in them (the complex RBM)
  // Local energies of samples_ and their statistics as n_steps steps of n_chains chains.
  ChainStats energy_stats(long n_steps, long n_chains);
  // n_samples direct draws into samples_ (with log ψ) from (seed, counter).
  void sample_direct(long n_samples, std::uint64_t seed, std::uint64_t counter);
};

}  // namespace attnphys::vmc
