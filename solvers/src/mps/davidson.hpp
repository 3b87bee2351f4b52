#pragma once
// Krylov/Davidson eigensolver for the lowest eigenpair of the effective Hamiltonian (internal), shared by the dense
// and the U(1) DMRG. Its basis buffers only grow, so a sweep does not allocate once the bond dimension saturates.
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"
#include "dense_ops.hpp"

namespace attnphys::mps::detail {

class Davidson {
 public:
  // Lowest eigenpair from the start vector x (overwritten by the normalised eigenvector): at most max_iter
  // products, stopping once |A x - lambda x| < tol.
  template <class Apply>
  double solve(long n, double* x, int max_iter, double tol, Apply&& apply) {
    max_iter = std::max(max_iter, 1);
    double* v = grow(v_, std::size_t(n) * (max_iter + 1));
    double* av = grow(av_, std::size_t(n) * (max_iter + 1));
    double* r = grow(r_, std::size_t(n));
    Eigen::Map<Eigen::VectorXd> xv(x, n), rv(r, n);
    const double nrm = xv.norm();
    require(nrm > 0, "DMRG: the two-site wavefunction vanished; start from a state with nonzero overlap");
    Eigen::Map<Eigen::VectorXd>(v, n) = xv / nrm;
    apply(v, av);
    products_ = 1;
    double lambda = 0;
    Eigen::MatrixXd m(max_iter + 1, max_iter + 1);
    for (int k = 1;; ++k) {
      Eigen::Map<Eigen::MatrixXd> V(v, n, k), AV(av, n, k);
      m.topLeftCorner(k, k).noalias() = V.transpose() * AV;
      Eigen::MatrixXd mk = 0.5 * (m.topLeftCorner(k, k) + m.topLeftCorner(k, k).transpose());
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(mk);
      lambda = es.eigenvalues()(0);
      const Eigen::VectorXd y = es.eigenvectors().col(0);
      xv.noalias() = V * y;
      rv.noalias() = AV * y;
      rv -= lambda * xv;
      residual_ = rv.norm();
      if (k >= max_iter || residual_ < tol) break;
      for (int pass = 0; pass < 2; ++pass) rv -= V * (V.transpose() * rv);
      const double rn = rv.norm();
      if (rn < 1e-14) break;
      Eigen::Map<Eigen::VectorXd>(v + n * k, n) = rv / rn;
      apply(v + n * k, av + n * k);
      ++products_;
    }
    xv.normalize();
    return lambda;
  }
  int products() const { return products_; }
  double residual() const { return residual_; }

 private:
  AlignedBuffer v_, av_, r_;
  int products_ = 0;
  double residual_ = 0;
};

// Per-sweep eigensolver budget: (max products, residual tolerance) from the options and the previous sweep.
struct DavidsonBudget {
  int max_iter = 4;
  double tol = 1e-12;
};
// The residual that matters is the one the truncation leaves: a bond that discards weight w changes the state by
// ~sqrt(w), so converging the eigenvector far below that is wasted (TeNPy ties its Lanczos tolerance to the
// truncation error the same way). Exact (untruncated) runs iterate to the floor davidson_tol, and so does the
// first sweep (small bonds in a ramp, or a converged state being truncated).
inline DavidsonBudget davidson_budget(const DmrgOptions& opt, const SweepParams& p, int sweep,
                                      double previous_truncation) {
  if (!opt.davidson_adaptive) return {p.niter, opt.davidson_tol};
  const double t = sweep == 0 ? 0.0 : opt.davidson_rel * std::sqrt(std::max(previous_truncation, 0.0));
  return {std::max(opt.davidson_max_iter, 1), std::max(opt.davidson_tol, std::min(t, 1e-3))};
}

// Bookkeeping at the end of sweep `sw` shared by the dense and the U(1) DMRG: completes rec (entropy change,
// timing), appends it to res, prints the progress line, runs the stopping test and the observer; true = stop.
// When the schedule runs out before the test passes, res.convergence_reason says why.
struct SweepState {
  std::vector<double> entropies, previous;
  double previous_energy = 0, previous_truncation = 0;
  long products = 0, bonds = 0;
};
bool end_of_sweep(int sw, int nsweeps, const SweepParams& p, const DmrgOptions& opt, const DmrgObserver& observer,
                  double energy, double trunc, int max_dim, double seconds, double residual_tol, SweepState& st,
                  DmrgResult& res);

// Refuses, before the first sweep, a schedule whose largest bond dimension cannot fit in memory: the MPS, one
// environment per bond (the sweeps free the stale side) and the two-site eigensolver (Davidson basis and images,
// density matrix) hold about chi^2 (n (d + D) + d^2 (2 max_iter + 2 D + 6)) doubles (D the MPO bond dimension, chi capped at d^(n/2));
// block-sparse U(1) storage (`blocks`: the charge sectors of a bond, at most n/2 + 1) divides that at best by
// their number. The message names the size needed and the largest chi that fits.
void check_memory(const Mpo& h, const Sweeps& sweeps, const DmrgOptions& opt, bool u1);

}  // namespace attnphys::mps::detail
