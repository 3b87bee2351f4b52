#include "attnphys/solvers/mps/dmrg.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "attnphys/core/error.hpp"
#include "attnphys/core/resources.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "davidson.hpp"
#include "dense_ops.hpp"
#include "effective_h.hpp"

namespace attnphys::mps {

Sweeps Sweeps::ramp(int nsweeps, int max_dim, double cutoff, double noise, int niter, int start) {
  require(nsweeps >= 1 && max_dim >= 1, "Sweeps::ramp needs nsweeps >= 1 and max_dim >= 1");
  Sweeps s;
  s.nsweeps_ = nsweeps;
  int dim = std::min(start, max_dim);
  double nz = noise;
  for (int k = 0; k < nsweeps; ++k) {
    SweepParams p;
    p.max_dim = dim;
    p.cutoff = cutoff;
    p.niter = niter;
    p.noise = nz;
    s.params_.push_back(p);
    // Noise fades (100x per sweep) only once the ramp is done, and is off below 1e-10 so that the stopping test,
    // which needs a noiseless sweep, can end the run.
    if (dim == max_dim) nz = nz * 0.01 >= 1e-10 ? nz * 0.01 : 0.0;
    dim = std::min(2 * dim, max_dim);
  }
  // The last sweeps run without noise so that the energy is variational for the final state.
  if (nsweeps > 2) s.params_.back().noise = 0.0;
  return s;
}

const SweepParams& Sweeps::params(int sweep) const {
  require(!params_.empty(), "the sweep schedule is empty");
  return params_[std::min<std::size_t>(std::size_t(sweep), params_.size() - 1)];
}

Sweeps default_sweeps(int max_dim, int nsweeps, double cutoff, double noise, int niter) {
  return Sweeps::ramp(nsweeps, max_dim, cutoff, noise, niter);
}

void DmrgOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".energy_tol", &energy_tol, "stop when the sweep energy changes by less (relative to max(1,|E|))",
          Range::non_negative());
  set.add(s + ".entropy_tol", &entropy_tol, "... and no bond entropy changes by more", Range::non_negative());
  set.add(s + ".min_sweeps", &min_sweeps, "sweeps before the stopping test applies", Range::at_least(1));
  set.add(s + ".davidson_tol", &davidson_tol, "Davidson residual norm that ends a bond early", Range::positive());
  set.add(s + ".davidson_adaptive", &davidson_adaptive,
          "Davidson iterates to a residual tolerance (davidson_rel * sqrt(previous sweep's truncation error)) instead "
          "of a fixed niter");
  set.add(s + ".davidson_rel", &davidson_rel, "adaptive residual tolerance factor", Range::positive());
  set.add(s + ".davidson_max_iter", &davidson_max_iter, "most Davidson products per bond (adaptive mode)",
          Range::at_least(1));
  set.add(s + ".variance_tol", &variance_tol, "goal for the final variance, relative to max(1, |E|)",
          Range::non_negative());
  set.add(s + ".degeneracy_tol", &degeneracy_tol, "relative gap below which singular values form one multiplet",
          Range::non_negative());
}


Truncation truncation_rank(const std::vector<double>& w, const SweepParams& p, double degeneracy_tol) {
  struct {
    const std::vector<double>& w;
    int size() const { return int(w.size()); }
    double value(int k) const { return w[k]; }
  } eig{w};
  const int n = eig.size();
  require(n >= 1, "truncation_rank needs at least one weight");
  double total = 0;
  for (int k = 0; k < n; ++k) total += std::max(eig.value(k), 0.0);
  int by_cutoff = n;
  double tail = 0;
  while (by_cutoff > 1 && tail + std::max(eig.value(by_cutoff - 1), 0.0) <= p.cutoff * total)
    tail += std::max(eig.value(--by_cutoff), 0.0);
  int keep = std::min(by_cutoff, p.max_dim);
  keep = std::max(keep, std::min(p.min_dim, n));
  // Never split a multiplet: drop it when the bond dimension is the limit, keep all of it when the cutoff is.
  auto sv = [&](int k) { return std::sqrt(std::max(eig.value(k), 0.0)); };
  auto same = [&](int a, int b) { return std::abs(sv(a) - sv(b)) <= degeneracy_tol * sv(a); };
  if (keep < n && eig.value(keep) > 1e-12 * eig.value(0) && same(keep - 1, keep)) {
    if (keep == p.max_dim) {
      int k = keep;
      while (k > 1 && same(k - 1, k)) --k;
      if (k >= keep / 2) keep = k;
    } else {
      while (keep < n && same(keep - 1, keep)) ++keep;
    }
  }
  double disc = 0;
  for (int k = keep; k < n; ++k) disc += std::max(eig.value(k), 0.0);
  return {keep, total > 0 ? disc / total : 0.0};
}

namespace {

double entropy_of(const detail::BlockEigen& eig, int keep) {
  double total = 0, s = 0;
  for (int k = 0; k < keep; ++k) total += std::max(eig.value(k), 0.0);
  for (int k = 0; k < keep; ++k) {
    const double p = std::max(eig.value(k), 0.0) / total;
    if (p > 1e-300) s -= p * std::log(p);
  }
  return s;
}

}  // namespace

DmrgResult dmrg(const Mpo& h, Mps& psi, const Sweeps& sweeps, const DmrgOptions& opt,
                const DmrgObserver& observer) {
  const int n = psi.size();
  require(n >= 2, "DMRG needs at least 2 sites, got ", n);
  require(h.size() == n, "DMRG: the MPO has ", h.size(), " sites but the MPS has ", n);
  require(h.d == psi.local_dim(), "DMRG: local dimensions differ (MPO ", h.d, ", MPS ", psi.local_dim(), ")");
  require(sweeps.size() >= 1, "DMRG needs at least one sweep");
  detail::check_memory(h, sweeps, opt, false);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  psi.canonicalize(0);
  psi.normalize();
  std::vector<detail::Env> left(n), right(n);
  left[0].m = Eigen::MatrixXd::Ones(1, 1);
  right[n - 1].m = Eigen::MatrixXd::Ones(1, 1);
  detail::EffectiveH heff;
  for (int i = n - 1; i > 1; --i) heff.update_right(right[i], psi[i], h.sites[i], right[i - 1]);

  detail::Davidson davidson;
  detail::BlockEigen eig;
  Eigen::MatrixXd rho;
  AlignedBuffer theta_buf, u_buf;
  std::vector<double> weights;
  DmrgResult res;
  detail::SweepState st;
  st.entropies.assign(n - 1, 0.0);
  st.previous.assign(n - 1, 0.0);
  auto& entropies = st.entropies;

  for (int sw = 0; sw < sweeps.size(); ++sw) {
    const SweepParams& p = sweeps.params(sw);
    require(p.max_dim >= 1 && p.niter >= 1 && p.cutoff >= 0 && p.noise >= 0, "sweep ", sw,
            ": max_dim and niter must be >= 1, cutoff and noise >= 0");
    double energy = 0, trunc = 0;
    const detail::DavidsonBudget budget = detail::davidson_budget(opt, p, sw, st.previous_truncation);
    for (int dir = 0; dir < 2; ++dir) {
      for (int step = 0; step < n - 1; ++step) {
        const int i = dir == 0 ? step : n - 2 - step;
        auto &a = psi[i], &b = psi[i + 1];
        const long dl = a.dl, dr = b.dr, d = a.d, len = dl * d * d * dr;
        double* theta = detail::grow(theta_buf, std::size_t(len));
        detail::gemm(false, false, dl * d, d * dr, a.dr, 1.0, a.data.data(), b.data.data(), 0.0, theta);
        heff.set_bond(h, i, left[i], right[i + 1]);
        energy = davidson.solve(len, theta, budget.max_iter, budget.tol,
                                [&](const double* in, double* out) { heff.apply(in, out); });
        st.products += davidson.products();
        ++st.bonds;
        const bool to_right = dir == 0;
        if (to_right) heff.density_left(theta, p.noise, rho);
        else heff.density_right(theta, p.noise, rho);
        eig.compute(rho);
        weights.resize(eig.size());
        for (int k = 0; k < eig.size(); ++k) weights[k] = eig.value(k);
        const Truncation t = truncation_rank(weights, p, opt.degeneracy_tol);
        trunc = std::max(trunc, t.discarded);
        entropies[i] = entropy_of(eig, t.keep);
        const long k = t.keep, m = long(rho.rows());
        double* u = detail::grow(u_buf, std::size_t(m * k));
        eig.vectors(int(k), u);
        if (to_right) {
          // A_i = U (left-orthonormal), A_{i+1} = U^T theta
          a.dr = int(k);
          a.data.resize(dl * d, k);
          std::copy(u, u + m * k, a.data.data());
          b.dl = int(k);
          b.data.resize(k * d, dr);
          detail::gemm(true, false, k, d * dr, dl * d, 1.0, u, theta, 0.0, b.data.data());
          heff.update_left(left[i], a, h.sites[i], left[i + 1]);
          // One environment per bond is live: the right one of this bond is stale until the sweep back recomputes
          // it, so it is freed (the boundary stays).
          if (i + 1 < n - 1) right[i + 1] = detail::Env{};
        } else {
          // A_{i+1} = V^T (right-orthonormal), A_i = theta V
          b.dl = int(k);
          b.data.resize(k * d, dr);
          Eigen::Map<Eigen::MatrixXd>(b.data.data(), k, d * dr) = Eigen::Map<Eigen::MatrixXd>(u, m, k).transpose();
          a.dr = int(k);
          a.data.resize(dl * d, k);
          detail::gemm(false, false, dl * d, k, d * dr, 1.0, theta, u, 0.0, a.data.data());
          heff.update_right(right[i + 1], b, h.sites[i + 1], right[i]);
          if (i > 0) left[i] = detail::Env{};
          left[i + 1] = detail::Env{};
        }
      }
    }
    psi.set_center(0);
    if (detail::end_of_sweep(sw, sweeps.size(), p, opt, observer, energy, trunc, psi.max_bond_dimension(),
                             elapsed(), budget.tol, st, res))
      break;
  }
  psi.normalize();
  res.energy = res.history.back().energy;
  res.truncation_error = res.history.back().truncation_error;
  res.max_bond_dimension = psi.max_bond_dimension();
  res.entropies = entropies;
  res.seconds = elapsed();
  return res;
}

namespace detail {

void check_memory(const Mpo& h, const Sweeps& sweeps, const DmrgOptions& opt, bool u1) {
  const int n = h.size(), d = h.d, mpo_bond = h.max_bond_dimension();
  int chi_max = 1;
  for (const auto& e : sweeps.entries()) chi_max = std::max(chi_max, e.max_dim);
  const double cap = std::pow(double(d), std::min(n / 2, 60));
  const double chi = std::min(double(chi_max), cap);
  const int iters = opt.davidson_adaptive ? opt.davidson_max_iter : 1;
  int niter = 1;
  for (const auto& e : sweeps.entries()) niter = std::max(niter, e.niter);
  const double D = mpo_bond, dd = double(d) * d;
  const double per_chi2 = n * (d + D) + dd * (2.0 * (std::max(iters, niter) + 1) + 2 * D + 6);
  const double blocks = u1 ? std::min(double(n / 2 + 1), chi) : 1.0;
  const double bytes = 8.0 * chi * chi * per_chi2 / blocks;
  if (bytes < 256e6) return;  // small runs: no system query
  const double avail = available_memory();
  const long fits = std::isfinite(avail) ? long(std::sqrt(avail * blocks / (8.0 * per_chi2))) : 0;
  require_memory(bytes,
                 msg("DMRG up to bond dimension ", chi_max, " on ", n, " sites (", u1 ? "U(1) blocks" : "dense",
                     ", MPO bond dimension ", mpo_bond, ")"),
                 msg("lower chi (dmrg.chi; about ", fits, " fits)",
                     !u1 && mpo_charges(h).ok ? ", or use the U(1) DMRG (dmrg.symmetry=u1), whose blocks are smaller"
                                              : ""));
}

bool end_of_sweep(int sw, int nsweeps, const SweepParams& p, const DmrgOptions& opt, const DmrgObserver& observer,
                  double energy, double trunc, int max_dim, double seconds, double residual_tol, SweepState& st,
                  DmrgResult& res) {
  const int n1 = int(st.entropies.size());
  SweepRecord rec;
  rec.sweep = sw + 1;
  rec.energy = energy;
  rec.truncation_error = trunc;
  rec.max_bond_dimension = max_dim;
  for (int b = 0; b < n1; ++b)
    rec.max_entropy_change = std::max(rec.max_entropy_change, std::abs(st.entropies[b] - st.previous[b]));
  rec.seconds = seconds;
  rec.davidson_products = st.bonds > 0 ? double(st.products) / double(st.bonds) : 0.0;
  rec.residual_tol = residual_tol;
  st.products = st.bonds = 0;
  res.history.push_back(rec);
  res.sweeps = sw + 1;
  if (!opt.quiet)
    std::fprintf(stderr, "dmrg sweep %d: E = %.12f, max dim %d, trunc %.2e, dS %.2e, %.1f products/bond, %.1f s\n",
                 rec.sweep, rec.energy, rec.max_bond_dimension, rec.truncation_error, rec.max_entropy_change,
                 rec.davidson_products, rec.seconds);
  const double change = std::abs(energy - st.previous_energy);
  const double goal = opt.energy_tol * std::max(1.0, std::abs(energy));
  const bool energy_ok = sw > 0 && change <= goal;
  const bool entropy_ok = sw > 0 && rec.max_entropy_change <= opt.entropy_tol;
  st.previous = st.entropies;
  st.previous_energy = energy;
  st.previous_truncation = trunc;
  res.energy_change = sw > 0 ? change : std::abs(energy);
  const bool stop_by_observer = observer && !observer(rec);
  if (p.noise == 0.0 && sw + 1 >= opt.min_sweeps && energy_ok && entropy_ok) {
    res.converged = true;
    res.convergence_reason.clear();
    return true;
  }
  const bool last = stop_by_observer || sw + 1 >= nsweeps;
  if (last) {
    res.converged = false;
    std::string why;
    auto add = [&why](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
    if (stop_by_observer) add("stopped by the observer");
    if (sw == 0) add("only one sweep (the stopping test compares two)");
    else if (!energy_ok) add(msg("energy change ", change, " above the goal ", goal, " (dmrg.energy_tol)"));
    if (sw > 0 && !entropy_ok)
      add(msg("entropy change ", rec.max_entropy_change, " above dmrg.entropy_tol = ", opt.entropy_tol));
    if (p.noise != 0.0) add("the last sweep still had noise");
    if (sw + 1 < opt.min_sweeps) add(msg("fewer than dmrg.min_sweeps = ", opt.min_sweeps, " sweeps"));
    if (!stop_by_observer) why += "; raise --sweeps (or --chi)";
    res.convergence_reason = why;
  }
  return last;
}

}  // namespace detail

Symmetry parse_symmetry(const std::string& name) {
  if (auto s = find_enum<Symmetry>(name)) return *s;
  fail("unknown DMRG symmetry '", name, "': use auto (U(1) when the model conserves Sz), u1 or none (dense)");
}

const char* symmetry_name(Symmetry s) { return enum_name(s); }

void check_variance(DmrgResult& r, double variance, const DmrgOptions& opt) {
  const double goal = opt.variance_tol * std::max(1.0, std::abs(r.energy));
  if (!(variance <= goal)) {
    r.converged = false;
    const std::string why = msg("variance ", variance, " above the goal ", goal, " (dmrg.variance_tol)");
    r.convergence_reason = r.convergence_reason.empty() ? why : r.convergence_reason + "; " + why;
  }
}

}  // namespace attnphys::mps
