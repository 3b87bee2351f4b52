#pragma once
// Two-site DMRG on an MPO Hamiltonian (ITensor style: `auto r = dmrg(H, psi, sweeps, opt, observer);`).
//
// Each bond: Davidson on the effective Hamiltonian L·W_i·W_{i+1}·R applied as a sequence of GEMMs (never formed),
// then a truncated eigen-decomposition of the one-side reduced density matrix, optionally perturbed by White's
// noise term (density-matrix perturbation) so that next-nearest-neighbour and critical chains leave a product state.
// Exact zeros of the density matrix (the blocks of a conserved quantity such as total Sz) are found and each block
// is diagonalised on its own, so symmetric states stay symmetric and the decomposition is cheap.
#include <functional>
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/solvers/mps/mpo.hpp"
#include "attnphys/solvers/mps/mps.hpp"

namespace attnphys::mps {

// One sweep's settings (a sweep is left-to-right then right-to-left).
struct SweepParams {
  int max_dim = 100;
  int min_dim = 1;
  double cutoff = 1e-12;  // discarded weight (sum of dropped density-matrix eigenvalues) allowed per bond
  int niter = 4;          // Davidson products per bond when DmrgOptions::davidson_adaptive is off
  double noise = 0.0;     // density-matrix perturbation weight
};

// A schedule: sweep k uses params(k); the last entry repeats.
class Sweeps {
 public:
  Sweeps() = default;
  explicit Sweeps(int nsweeps, SweepParams base = {}) : nsweeps_(nsweeps), params_{base} {}
  // Bond dimensions doubling from `start` up to max_dim, noise decaying 100x per sweep from `noise` to zero after
  // the ramp, `niter` Davidson iterations: a schedule that brings product states to convergence.
  static Sweeps ramp(int nsweeps, int max_dim, double cutoff = 1e-12, double noise = 1e-6, int niter = 4,
                     int start = 10);
  int size() const { return nsweeps_; }
  void set_size(int n) { nsweeps_ = n; }
  const SweepParams& params(int sweep) const;
  std::vector<SweepParams>& entries() { return params_; }
  const std::vector<SweepParams>& entries() const { return params_; }

 private:
  int nsweeps_ = 0;
  std::vector<SweepParams> params_;
};

struct DmrgOptions {
  double energy_tol = 1e-10;   // stop when |E_sweep - E_previous| <= energy_tol * max(1, |E|) ...
  double entropy_tol = 1e-6;   // ... and the largest change of a bond entropy is below entropy_tol
  int min_sweeps = 2;          // never stop before this many sweeps
  double davidson_tol = 1e-12; // residual norm at which Davidson stops early (the floor of the adaptive tolerance)
  // Adaptive eigensolver (default): every bond iterates until the residual norm |H x - E x| is below
  // max(davidson_tol, min(1e-3, davidson_rel * sqrt(largest discarded weight of the previous sweep))) -- converging
  // the eigenvector below what the truncation destroys is wasted; exact runs and the first sweep go to
  // davidson_tol -- at most davidson_max_iter products; SweepParams::niter is then unused. Off: niter products.
  bool davidson_adaptive = true;
  double davidson_rel = 0.1;
  int davidson_max_iter = 20;
  double variance_tol = 1e-5;  // goal for <H^2> - <H>^2, relative to max(1, |E|) (checked by check_variance)
  double degeneracy_tol = 1e-6;  // singular values within this relative distance form one multiplet
  bool quiet = true;           // progress lines on stderr
  void declare(OptionSet& set, const std::string& section = "dmrg");
};

struct SweepRecord {
  int sweep = 0;
  double energy = 0;              // Davidson energy at the end of the sweep
  double truncation_error = 0;    // largest discarded weight of the sweep
  int max_bond_dimension = 0;
  double max_entropy_change = 0;  // vs the previous sweep, over bonds
  double seconds = 0;             // since the start of the run
  double davidson_products = 0;   // mean matrix-vector products per bond
  double residual_tol = 0;        // the sweep's Davidson residual tolerance (adaptive mode)
};

struct DmrgResult {
  double energy = 0;
  double truncation_error = 0;
  int max_bond_dimension = 0;
  int sweeps = 0;
  bool converged = false;
  std::string convergence_reason;  // why converged is false (empty when it is true)
  double energy_change = 0;        // |E_last - E_previous sweep|
  double seconds = 0;
  std::vector<double> entropies;  // von Neumann entropy of every bond (n-1), from the last sweep
  std::vector<SweepRecord> history;
};

// Which DMRG a job runs: U(1) block-sparse when the MPO conserves Sz (auto picks it then), or dense.
enum class Symmetry { Auto, U1, None };
}  // namespace attnphys::mps

namespace attnphys {
template <>
struct EnumNames<mps::Symmetry> {
  static constexpr EnumName<mps::Symmetry> values[] = {
      {mps::Symmetry::Auto, "auto"}, {mps::Symmetry::U1, "u1"}, {mps::Symmetry::None, "none"}};
};
}  // namespace attnphys

namespace attnphys::mps {
// The names of EnumNames<Symmetry>; an unknown name is refused with them.
Symmetry parse_symmetry(const std::string& name);  // "auto" | "u1" | "none"
const char* symmetry_name(Symmetry s);

// Marks a run as not converged when its final variance misses opt.variance_tol (appending the reason).
void check_variance(DmrgResult& r, double variance, const DmrgOptions& opt);

// Called after every sweep; returning false stops the run cleanly.
using DmrgObserver = std::function<bool(const SweepRecord&)>;

// Optimises psi in place (any state works; a product state is fine with noise) and returns the run's summary.
// psi ends right-canonical with its center on site 0 and unit norm.
DmrgResult dmrg(const Mpo& h, Mps& psi, const Sweeps& sweeps, const DmrgOptions& opt = {},
                const DmrgObserver& observer = {});

// How many density-matrix eigenvalues w (descending) a bond keeps: at most max_dim, at least min_dim, the fewest
// whose discarded weight is within cutoff * sum(w); a multiplet (singular values within degeneracy_tol of each
// other) is never split: dropped whole when max_dim is the limit (unless that would halve the bond), kept whole
// when the cutoff is.
struct Truncation {
  int keep = 1;
  double discarded = 0;  // relative to sum(w)
};
Truncation truncation_rank(const std::vector<double>& w, const SweepParams& p, double degeneracy_tol);

// Schedule used by `attnphys dmrg` and the Python binding for a target bond dimension.
Sweeps default_sweeps(int max_dim, int nsweeps, double cutoff, double noise, int niter = 4);

}  // namespace attnphys::mps
