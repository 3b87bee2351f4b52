#include "attnphys/solvers/ed/exact.hpp"

#include <Eigen/Dense>
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cmath>

#include "attnphys/core/resources.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::ed {

using spin::Basis;

HamiltonianOperator::HamiltonianOperator(const spin::SpinHamiltonian& H, const spin::ChainHilbert& space,
                                         int flip_parity)
    : H_(H), space_(space), parity_(flip_parity) {
  require(H.n_sites() == space.n_sites(), "Hamiltonian has ", H.n_sites(), " sites, Hilbert space ",
          space.n_sites());
  require(!space.fixed_sz() || H.conserves_sz(), "this Hamiltonian does not conserve Sz: use the full space");
  require(parity_ == 0 || (!space.fixed_sz() && (parity_ == 1 || parity_ == -1)),
          "flip parity must be 0, +1 or -1, and only in the full space");
  const long dim = parity_ ? space.size() / 2 : space.size();
  states_.resize(dim);
  diag_.resize(dim);
  for (long r = 0; r < dim; ++r) {
    states_[r] = space.state(r);  // full space: the representatives (top spin down) are the first half
    diag_[r] = H.diagonal(states_[r]);
  }
}

void HamiltonianOperator::apply(const double* x, double* y) const {
  ScopedRegion region("attnphys::ed_apply");
  const int n = space_.n_sites();
  const Basis top = Basis(1) << (n - 1), all = (top << 1) - 1;
  const double sign = parity_;
  if (parity_ == 0 && space_.fixed_sz()) {
    Kokkos::parallel_for("attnphys::ed_apply", Kokkos::RangePolicy<HostExecSpace>(0, dim()), [&](const long r) {
      double acc = diag_[r] * x[r];
      H_.for_each_offdiagonal(states_[r], [&](Basis t, double e) { acc += e * x[space_.index(t)]; });
      y[r] = acc;
    });
  } else if (parity_ == 0) {
    Kokkos::parallel_for("attnphys::ed_apply", Kokkos::RangePolicy<HostExecSpace>(0, dim()), [&](const long r) {
      double acc = diag_[r] * x[r];
      H_.for_each_offdiagonal(states_[r], [&](Basis t, double e) { acc += e * x[t]; });
      y[r] = acc;
    });
  } else {
    Kokkos::parallel_for("attnphys::ed_apply", Kokkos::RangePolicy<HostExecSpace>(0, dim()), [&](const long r) {
      double acc = diag_[r] * x[r];
      H_.for_each_offdiagonal(states_[r], [&](Basis t, double e) {
        acc += (t & top) ? sign * e * x[~t & all] : e * x[t];
      });
      y[r] = acc;
    });
  }
}

std::vector<double> HamiltonianOperator::expand(const double* v) const {
  std::vector<double> out(space_.size(), 0.0);
  if (parity_ == 0) {
    std::copy(v, v + dim(), out.begin());
    return out;
  }
  const Basis all = (Basis(1) << space_.n_sites()) - 1;
  for (long r = 0; r < dim(); ++r) {
    out[states_[r]] = v[r] / std::sqrt(2.0);
    out[~states_[r] & all] = parity_ * v[r] / std::sqrt(2.0);
  }
  return out;
}

spin::ChainHilbert ed_space(const spin::ChainModel& m, bool use_sz_sector) {
  m.validate();
  require(m.n <= spin::ChainHilbert::kMaxSites, "ED holds at most ", spin::ChainHilbert::kMaxSites, " sites");
  if (use_sz_sector && m.conserves_sz()) return spin::ChainHilbert(m.n, spin::ground_state_two_sz(m.n));
  return spin::ChainHilbert(m.n);
}

EdResult diagonalize(const spin::SpinHamiltonian& H, const spin::ChainHilbert& space, const EdOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  int parity = 0;
  if (o.use_flip_parity && !space.fixed_sz() && H.exchange_terms().empty() && !H.flip_terms().empty()) {
    bool neg = true, pos = true;
    for (const auto& t : H.flip_terms()) {
      neg = neg && t.coef <= 0;
      pos = pos && t.coef >= 0;
    }
    // Off-diagonals ≤ 0: a positive ground state, even under P. All ≥ 0: conjugating by Π σ^z makes them ≤ 0 and
    // multiplies P by (−1)^n.
    if (neg) parity = 1;
    else if (pos) parity = space.n_sites() % 2 ? -1 : 1;
  }
  {
    // What the run will hold, before any of it is allocated: the basis states and diagonal (16 bytes per state),
    // the Lanczos basis (krylov_dim vectors), its thick-restart copy, two work vectors, and the eigenvectors.
    const double dim = parity ? double(space.size() / 2) : double(space.size());
    long mmax = o.krylov_dim > 0 ? o.krylov_dim : std::max(3 * o.n_states + 20, 40);
    mmax = std::max(1L, long(std::min<double>(double(mmax), dim)));
    const long keep = std::max(0L, std::min(mmax - 1, std::max(long(o.n_states) + 8, mmax / 2)));
    double bytes = dim * (16.0 + 8.0 * double(mmax + keep + 2));
    if (o.want_vectors) bytes += 8.0 * o.n_states * (dim + double(space.size()));
    require_memory(bytes,
                   msg("ED of ", space.n_sites(), " sites (",
                       space.fixed_sz() ? "sector 2Sz=" + std::to_string(space.two_sz())
                       : parity       ? std::string("one flip-parity sector")
                                      : std::string("full space"),
                       ", dimension ", parity ? space.size() / 2 : space.size(), ", Lanczos basis of ", mmax,
                       " vectors)"),
                   "use fewer sites (each site doubles it), a smaller ed.krylov_dim, or DMRG (attnphys dmrg) for "
                   "long chains");
  }
  require(space.size() <= (1L << 31), "ED space of dimension ", space.size(), " is too large for this machine");
  HamiltonianOperator op(H, space, parity);
  LanczosOptions lo;
  lo.n_states = int(std::min<long>(o.n_states, op.dim()));
  lo.tol = o.tol;
  lo.krylov_dim = o.krylov_dim;
  lo.want_vectors = o.want_vectors;
  auto lr = lanczos([&](const double* x, double* y) { op.apply(x, y); }, op.dim(), lo);
  EdResult r;
  r.energies = lr.values;
  for (auto& v : lr.vectors) r.vectors.push_back(op.expand(v.data()));
  r.sector = space.fixed_sz() ? "2Sz=" + std::to_string(space.two_sz())
             : parity      ? (parity > 0 ? "P=+1" : "P=-1")
                           : "full";
  r.dimension = op.dim();
  r.matvecs = lr.matvecs;
  r.restarts = lr.restarts;
  r.converged = lr.converged;
  r.residuals = lr.residuals;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

EdResult exact_ground_state(const spin::ChainModel& m, const EdOptions& o) {
  const auto space = ed_space(m, o.use_sz_sector);
  spin::SpinHamiltonian H(m);
  return diagonalize(H, space, o);
}

double tfim_energy_open(int n, double J, double h) {
  // Jordan-Wigner: H = −Σ h Z_i − Σ J X_i X_{i+1} is free fermions with single-particle energies 2·s_k, s_k the
  // singular values of the bidiagonal M (M_ii = h, M_i,i+1 = J); E0 = −Σ s_k.
  Eigen::MatrixXd M = Eigen::MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    M(i, i) = h;
    if (i + 1 < n) M(i, i + 1) = J;
  }
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(M);
  return -svd.singularValues().sum();
}

double tfim_energy_periodic(int n, double J, double h) {
  // Parity P = Π X: P = +1 has antiperiodic fermions, k = (2m+1)π/n; P = −1 periodic ones, k = 2πm/n. Pairs
  // (k, −k) contribute −√(J² + h² − 2Jh cos k) each in their vacuum (even fermion number); the unpaired k = 0, π
  // modes hold n_k ∈ {0, 1} fermions at energy (h − J cos k)(2n_k − 1). The fermion number's parity must match P:
  // when the cheapest choice has the wrong parity, pay the cheapest single excitation.
  double best = INFINITY;
  for (int sector = 0; sector < 2; ++sector) {
    const bool even = sector == 0;
    double e = 0, fix = INFINITY;
    int parity = 0;
    for (int m = 0; m < n; ++m) {
      const double k = even ? (2 * m + 1) * M_PI / n : 2 * M_PI * m / n;
      const double c = std::cos(k);
      const bool unpaired = std::abs(std::sin(k)) < 1e-12;
      if (unpaired) {
        const double a = h - J * c;
        e -= std::abs(a);
        if (a < 0) parity ^= 1;
        fix = std::min(fix, 2 * std::abs(a));
      } else {
        const double eps = std::sqrt(std::max(0.0, J * J + h * h - 2 * J * h * c));
        e -= eps;  // both k and −k are visited: each contributes −ε_k/2 with ε_k = 2√(...)
        fix = std::min(fix, 2 * eps);
      }
    }
    // e double counts nothing: the loop over all m visits every k once; −eps per k equals −ε_k/2.
    if (parity != (even ? 0 : 1)) e += fix;
    best = std::min(best, e);
  }
  return best;
}

double heisenberg_energy_periodic(int n, double J) {
  require(n >= 2 && n % 2 == 0 && J > 0, "heisenberg_energy_periodic: needs an even n >= 2 and J > 0, got n = ", n,
          ", J = ", J);
  // Bethe ansatz (Bethe 1931; e.g. Karbach & Müller, Computers in Physics 11, 36 (1997)): M = n/2 real rapidities
  // with n·atan(2λ_j) = π I_j + Σ_k atan(λ_j − λ_k), the ground state's quantum numbers I_j = −(M−1)/2, …, (M−1)/2,
  // and E = J (n/4 − Σ_j 2 / (4λ_j² + 1)). Newton's method from λ_j = tan(π I_j / n) / 2 (the roots without the
  // scattering term); the Jacobian is dense M × M.
  const int M = n / 2;
  Eigen::VectorXd I(M), lam(M);
  for (int j = 0; j < M; ++j) {
    I[j] = j - 0.5 * (M - 1);
    lam[j] = 0.5 * std::tan(M_PI * I[j] / n);
  }
  auto residual = [&](const Eigen::VectorXd& l) {
    Eigen::VectorXd f(M);
    for (int j = 0; j < M; ++j) {
      double s = 0;
      for (int k = 0; k < M; ++k) s += std::atan(l[j] - l[k]);
      f[j] = n * std::atan(2 * l[j]) - M_PI * I[j] - s;
    }
    return f;
  };
  Eigen::VectorXd f = residual(lam);
  for (int it = 0; it < 100 && f.cwiseAbs().maxCoeff() > 1e-13 * n; ++it) {
    Eigen::MatrixXd Jm(M, M);
    for (int j = 0; j < M; ++j) {
      double diag = 2.0 * n / (1 + 4 * lam[j] * lam[j]);
      for (int k = 0; k < M; ++k) {
        if (k == j) continue;
        const double d = lam[j] - lam[k], g = 1 / (1 + d * d);
        diag -= g;
        Jm(j, k) = g;
      }
      Jm(j, j) = diag;
    }
    const Eigen::VectorXd step = Jm.partialPivLu().solve(f);
    // Damped when a full step would not reduce the residual (far from the roots, atan saturates).
    double t = 1;
    Eigen::VectorXd next = lam - step, fn = residual(next);
    while (fn.norm() > f.norm() && t > 1e-4) {
      t *= 0.5;
      next = lam - t * step;
      fn = residual(next);
    }
    lam = next;
    f = fn;
  }
  require(f.cwiseAbs().maxCoeff() <= 1e-9 * n, "heisenberg_energy_periodic: the Bethe equations for n = ", n,
          " did not converge (residual ", f.cwiseAbs().maxCoeff(), ")");
  double e = 0.25 * n;
  for (int j = 0; j < M; ++j) e -= 2 / (4 * lam[j] * lam[j] + 1);
  return J * e;
}

void EdOptions::declare(OptionSet& s, const std::string& p) {
  s.add(p + ".n_states", &n_states, "number of lowest eigenvalues", Range::at_least(1));
  s.add(p + ".tol", &tol, "Lanczos residual tolerance", Range::positive());
  s.add(p + ".krylov_dim", &krylov_dim, "Lanczos basis size before a restart (0: automatic)", Range::non_negative());
  s.add(p + ".use_sz_sector", &use_sz_sector, "restrict Sz-conserving models to the ground-state sector");
}

std::optional<double> reference_energy(const spin::ChainModel& m) {
  m.validate();
  if (m.model == spin::ModelKind::Tfim)
    return m.periodic() ? tfim_energy_periodic(m.n, m.J, m.h) : tfim_energy_open(m.n, m.J, m.h);
  if (m.model == spin::ModelKind::J1J2 && m.J > 0 && std::abs(m.j2 - m.J / 2) < 1e-14 * std::abs(m.J) && m.n % 2 == 0)
    return -3.0 * m.n * m.J / 8.0;
  const bool isotropic = m.model == spin::ModelKind::Heisenberg || (m.model == spin::ModelKind::Xxz && m.delta == 1.0) ||
                         (m.model == spin::ModelKind::J1J2 && m.j2 == 0.0);
  if (isotropic && m.periodic() && m.J > 0 && m.n % 2 == 0 && m.n >= 4) return heisenberg_energy_periodic(m.n, m.J);
  return std::nullopt;
}

}  // namespace attnphys::ed
