#include "attnphys/solvers/ed/lanczos.hpp"

#include <algorithm>
#include <cmath>

#include "attnphys/core/error.hpp"
#include "attnphys/core/random.hpp"

namespace attnphys::ed {

namespace {
// Orthogonalises w against the first m columns of V twice (classical Gram-Schmidt, repeated: "twice is enough"),
// accumulating the coefficients in h.
void orthogonalize(const Eigen::MatrixXd& V, int m, Eigen::VectorXd& w, Eigen::VectorXd& h) {
  h.setZero(m);
  if (m == 0) return;
  for (int pass = 0; pass < 2; ++pass) {
    const Eigen::VectorXd c = V.leftCols(m).transpose() * w;
    w.noalias() -= V.leftCols(m) * c;
    h += c;
  }
}

// A random unit vector orthogonal to the first m columns (used when the Krylov space is invariant).
Eigen::VectorXd random_orthogonal(const Eigen::MatrixXd& V, int m, unsigned long seed, long salt) {
  const long n = V.rows();
  Eigen::VectorXd w(n);
  for (long attempt = 0; attempt < 10; ++attempt) {
    CounterRng r(seed, 1000 + salt * 17 + attempt);
    for (long i = 0; i < n; ++i) w[i] = r.uniform() - 0.5;
    Eigen::VectorXd h;
    orthogonalize(V, m, w, h);
    const double nw = w.norm();
    if (nw > 1e-8) return w / nw;
  }
  fail("Lanczos: could not find a vector orthogonal to the Krylov basis");
}
}  // namespace

LanczosResult lanczos(const LinearOperator& apply, long dim, const LanczosOptions& opt) {
  require(dim >= 1, "Lanczos needs a space of dimension >= 1");
  require(opt.n_states >= 1 && opt.n_states <= dim, "Lanczos: n_states = ", opt.n_states, " must be in [1, ", dim,
          "]");
  require(opt.tol > 0, "Lanczos: tol must be positive");
  int mmax = opt.krylov_dim > 0 ? opt.krylov_dim : std::max(3 * opt.n_states + 20, 40);
  mmax = int(std::min<long>(mmax, dim));
  require(mmax >= std::min<long>(dim, opt.n_states + 2) && mmax >= opt.n_states,
          "Lanczos: krylov_dim = ", mmax, " must exceed n_states + 1");
  const int keep = std::min(mmax - 1, std::max(opt.n_states + 8, mmax / 2));

  Eigen::MatrixXd V(dim, mmax);
  Eigen::MatrixXd H = Eigen::MatrixXd::Zero(mmax, mmax);
  Eigen::VectorXd w(dim), h;
  LanczosResult res;

  // Start vector: deterministic, with weight on every basis state.
  {
    CounterRng r(opt.seed, 7);
    for (long i = 0; i < dim; ++i) w[i] = 0.5 + r.uniform();
    V.col(0) = w / w.norm();
  }
  int m = 1;    // columns of V in use
  int next = 0; // column whose A-image is computed next
  Eigen::VectorXd residual_vec(dim);
  double beta = 0;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig;

  while (true) {
    // Expand until the basis is full (or the space is exhausted).
    while (next < m) {
      apply(V.col(next).data(), w.data());
      ++res.matvecs;
      orthogonalize(V, m, w, h);
      for (int i = 0; i < m; ++i) H(i, next) = H(next, i) = h[i];
      // Symmetrise with the entries already known from earlier columns (exact in exact arithmetic).
      beta = w.norm();
      ++next;
      if (next == m && m < mmax) {
        if (beta > 1e-12 * std::max(1.0, H.topLeftCorner(m, m).norm())) {
          V.col(m) = w / beta;
        } else {
          V.col(m) = random_orthogonal(V, m, opt.seed, res.matvecs);  // invariant subspace found
          beta = 0;
        }
        ++m;
      } else if (next == m) {
        residual_vec = w;
      }
      if (res.matvecs >= opt.max_matvecs) break;
    }
    if (next < m) m = next;  // stopped early: drop columns whose image was never computed
    // Rayleigh-Ritz in the current basis.
    eig.compute(H.topLeftCorner(m, m));
    const Eigen::VectorXd theta = eig.eigenvalues();
    const Eigen::MatrixXd Y = eig.eigenvectors();
    const bool full_space = m == dim;
    res.residuals.assign(opt.n_states, 0.0);
    bool done = true;
    for (int k = 0; k < opt.n_states; ++k) {
      res.residuals[k] = full_space ? 0.0 : std::abs(beta * Y(m - 1, k));
      if (res.residuals[k] > opt.tol * std::max(1.0, std::abs(theta[k]))) done = false;
    }
    if (done || res.matvecs >= opt.max_matvecs) {
      res.converged = done;
      res.values.assign(theta.data(), theta.data() + opt.n_states);
      if (opt.want_vectors) {
        for (int k = 0; k < opt.n_states; ++k) {
          Eigen::VectorXd v = V.leftCols(m) * Y.col(k);
          res.vectors.push_back(v / v.norm());
        }
      }
      return res;
    }
    // Thick restart: keep the lowest Ritz vectors, whose residuals all point along the last residual vector.
    const Eigen::MatrixXd Vk = V.leftCols(m) * Y.leftCols(keep);
    V.leftCols(keep) = Vk;
    H.setZero();
    for (int i = 0; i < keep; ++i) H(i, i) = theta[i];
    const double rn = residual_vec.norm();
    if (rn > 0) {
      V.col(keep) = residual_vec / rn;
    } else {
      V.col(keep) = random_orthogonal(V, keep, opt.seed, res.matvecs);
    }
    // Reorthogonalise the new vector against the rotated basis (rounding in the rotation).
    Eigen::VectorXd v = V.col(keep);
    orthogonalize(V, keep, v, h);
    V.col(keep) = v / v.norm();
    m = keep + 1;
    next = keep;  // A-images of the Ritz vectors are known: H is diagonal there
    ++res.restarts;
  }
}

}  // namespace attnphys::ed
