#include "attnphys/solvers/mps/run.hpp"

#include <chrono>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/error.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/mps/u1.hpp"

namespace attnphys::mps {

void DmrgRunConfig::declare(OptionSet& s) {
  model.declare(s);
  s.add("dmrg.chi", &chi, "largest bond dimension", Range::at_least(1));
  s.add("dmrg.sweeps", &sweeps, "maximum number of sweeps", Range::at_least(1));
  s.add("dmrg.cutoff", &cutoff, "discarded weight allowed per bond", Range::non_negative());
  s.add("dmrg.noise", &noise, "initial density-matrix noise (fades once the bond dimension is reached)",
        Range::non_negative());
  s.add("dmrg.niter", &niter, "Davidson iterations per bond (only with dmrg.davidson_adaptive=false)",
        Range::at_least(1));
  s.add("dmrg.symmetry", &symmetry,
        "auto: U(1) block-sparse DMRG when the model conserves Sz (heisenberg, xxz, j1j2), dense otherwise; "
        "u1; none (dense)");
  s.add("dmrg.save", &save, "write the final MPS to this HDF5 file");
  s.add("dmrg.variance", &variance, "also compute <H^2> - <H>^2");
  s.add("dmrg.magnetization", &magnetization, "also measure <Sz_i> on every site");
  dmrg.declare(s);
}

void DmrgRunConfig::resolve() { validate(); }

void DmrgRunConfig::validate() const {
  model.validate();
  require(chi >= 1 && sweeps >= 1 && niter >= 1, "dmrg: chi, sweeps and niter must be >= 1 (chi = ", chi,
          ", sweeps = ", sweeps, ", niter = ", niter, ")");
  require(cutoff >= 0 && noise >= 0, "dmrg: cutoff and noise must be >= 0 (cutoff = ", cutoff, ", noise = ", noise,
          ")");
}

double DmrgRunResult::entropy_mid() const {
  return run.entropies.empty() ? 0.0 : run.entropies[std::size_t(model.n - 1) / 2];
}

Json to_json(const DmrgResult& r) {
  Json j = Json::object();
  j.set("energy", r.energy);
  j.set("truncation_error", r.truncation_error);
  j.set("max_bond_dimension", r.max_bond_dimension);
  j.set("sweeps", r.sweeps);
  j.set("converged", r.converged);
  j.set("convergence_reason", r.converged ? Json() : Json(r.convergence_reason));
  j.set("energy_change", r.energy_change);
  j.set("seconds", r.seconds);
  j.set("davidson_products_last_sweep", r.history.empty() ? 0.0 : r.history.back().davidson_products);
  j.set("entropies", r.entropies);
  std::vector<double> energies;
  for (const auto& rec : r.history) energies.push_back(rec.energy);
  j.set("sweep_energies", energies);
  return j;
}

Json DmrgRunResult::to_json() const {
  Json j = Json::object();
  j.set("model", model.describe());
  j.set("energy", energy);
  j.set("variance", variance ? Json(*variance) : Json());
  j.set("max_bond_dimension", run.max_bond_dimension);
  j.set("truncation_error", run.truncation_error);
  j.set("sweeps", run.sweeps);
  j.set("converged", run.converged);
  j.set("convergence_reason", run.converged ? Json() : Json(run.convergence_reason));
  j.set("energy_change", run.energy_change);
  j.set("symmetry", symmetry_name(symmetry));
  j.set("davidson_products_last_sweep", run.history.empty() ? 0.0 : run.history.back().davidson_products);
  j.set("seconds", run.seconds);
  j.set("measure_seconds", measure_seconds);
  j.set("entropy_mid", entropy_mid());
  j.set("entropies", run.entropies);
  j.set("magnetization", magnetization);
  std::vector<double> energies;
  for (const auto& rec : run.history) energies.push_back(rec.energy);
  j.set("sweep_energies", energies);
  j.set("bond_dimensions", bond_dimensions);
  j.set("n_parameters", n_parameters);
  return j;
}

Mps initial_state(const spin::ChainModel& m) {
  // The critical TFIM ground state is parity-symmetric: start from all spins along +x, the others from Neel.
  return m.conserves_sz() ? Mps::neel(m.n) : Mps::uniform_product(m.n, Eigen::Vector2d(1.0, 1.0));
}

namespace {
long entry_count(const Mps& psi) {
  long total = 0;
  for (const auto& a : psi.sites()) total += long(a.dl) * a.d * a.dr;
  return total;
}
}  // namespace

DmrgRunResult run_dmrg(const DmrgRunConfig& cfg, const DmrgObserver& observer, const std::string& config_toml) {
  cfg.validate();
  DmrgRunResult out;
  out.model = cfg.model;
  const Mpo h = chain_mpo(cfg.model);
  const MpoCharges charges = mpo_charges(h);
  Symmetry sym = cfg.symmetry;
  require(sym != Symmetry::U1 || charges.ok, "dmrg: symmetry u1 (dmrg.symmetry=u1, Python symmetry='u1') but ",
          cfg.model.describe(), " does not conserve Sz (", charges.reason, "); use none or auto");
  if (sym == Symmetry::Auto) sym = charges.ok ? Symmetry::U1 : Symmetry::None;
  out.symmetry = sym;
  const Sweeps sweeps = default_sweeps(cfg.chi, cfg.sweeps, cfg.cutoff, cfg.noise, cfg.niter);
  Mps psi;
  if (sym == Symmetry::U1) {
    QMps q = QMps::neel(cfg.model.n);
    out.run = dmrg(h, q, sweeps, cfg.dmrg, observer);
    const auto t0 = std::chrono::steady_clock::now();
    out.energy = expectation(h, q);
    if (cfg.variance) out.variance = variance(h, q);
    if (cfg.magnetization) out.magnetization = local_expectations(q, "Sz");
    out.measure_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.bond_dimensions = q.bond_dimensions();
    for (const auto& a : q.sites())
      out.n_parameters += long(a.layout.left.total()) * a.layout.np() * a.layout.right.total();
    if (!cfg.save.empty()) psi = q.to_dense_mps();  // the dense copy only for the file (it is χ² per site)
  } else {
    psi = initial_state(cfg.model);
    out.run = dmrg(h, psi, sweeps, cfg.dmrg, observer);
    const auto t0 = std::chrono::steady_clock::now();
    out.energy = expectation(h, psi);
    if (cfg.variance) out.variance = variance(h, psi);
    if (cfg.magnetization) out.magnetization = local_expectations(psi, "Sz");
    out.measure_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.bond_dimensions = psi.bond_dimensions();
    out.n_parameters = entry_count(psi);
  }
  if (out.variance) check_variance(out.run, *out.variance, cfg.dmrg);
  if (!cfg.save.empty() && Comm::world().is_root()) save_mps(psi, cfg.save, config_toml);
  return out;
}

}  // namespace attnphys::mps
