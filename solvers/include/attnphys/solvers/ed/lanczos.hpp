#pragma once
// Matrix-free Lanczos for the lowest eigenpairs of a real symmetric operator, with full reorthogonalisation and
// thick restarts: the basis grows to krylov_dim vectors (each new vector orthogonalised twice against all others,
// so the projected matrix Vᵀ A V is exact, not a trusted tridiagonal), then shrinks to the best Ritz vectors and
// grows again. A Ritz pair (θ, V y) is converged when its residual ‖A V y − θ V y‖ = |β y_last| ≤ tol·max(1, |θ|);
// since |θ − λ| ≤ residual²/gap, tol = 1e-10 gives eigenvalues to machine precision.
#include <functional>
#include <vector>

#include <Eigen/Dense>

namespace attnphys::ed {

struct LanczosOptions {
  int n_states = 1;        // eigenpairs wanted (lowest first)
  int krylov_dim = 0;      // basis size before a restart; 0: max(3·n_states + 20, 40), capped at the dimension
  double tol = 1e-10;      // residual tolerance relative to max(1, |θ|)
  int max_matvecs = 20000;
  bool want_vectors = false;
  unsigned long seed = 1;  // start vector
};

struct LanczosResult {
  std::vector<double> values;           // lowest n_states eigenvalues, ascending
  std::vector<Eigen::VectorXd> vectors; // normalised eigenvectors when asked for
  std::vector<double> residuals;
  long matvecs = 0;
  int restarts = 0;
  bool converged = false;
};

// y = A x for vectors of length dim.
using LinearOperator = std::function<void(const double* x, double* y)>;

LanczosResult lanczos(const LinearOperator& apply, long dim, const LanczosOptions& options);

}  // namespace attnphys::ed
