#pragma once
// One DMRG job, as `attnphys dmrg`, `attnphys compare`, Python's mps.dmrg(model=..., n=..., chi=...) and
// benchmarks/bench_dmrg run it: a chain model, the default sweep schedule for a target bond dimension, U(1) or
// dense DMRG from a product state, then the energy, variance and magnetisation of the final state.
//
//   OptionSet set; DmrgRunConfig cfg; cfg.declare(set); set.load_file(path); set.set_all(overrides);
//   cfg.resolve();                 // validates the resolved settings
//   DmrgRunResult r = run_dmrg(cfg);
//   r.to_json()                    // the CLI's --json line and the Python dict
//
// Code that fills the typed fields directly (Python, benchmarks) calls validate() instead of resolve().
#include <optional>
#include <string>
#include <vector>

#include "attnphys/core/json.hpp"
#include "attnphys/core/options.hpp"
#include "attnphys/physics/spin/chain_model.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"

namespace attnphys::mps {

struct DmrgRunConfig {
  spin::ChainModel model;
  int chi = 100;           // largest bond dimension of the schedule (default_sweeps)
  int sweeps = 12;         // most sweeps
  double cutoff = 1e-12;   // discarded weight allowed per bond
  double noise = 1e-5;     // initial density-matrix noise
  int niter = 4;           // Davidson products per bond when dmrg.davidson_adaptive is off
  Symmetry symmetry = Symmetry::Auto;
  bool variance = true;       // also <H^2> - <H>^2 (and the variance goal of the convergence test)
  bool magnetization = true;  // also <Sz_i> on every site
  std::string save;           // write the final MPS (dense layout, kind "mps") here; empty: no file
  DmrgOptions dmrg;

  // model.* and dmrg.* keys (DmrgOptions' too).
  void declare(OptionSet& set);
  // After the set has taken its values (dmrg.symmetry is read into the enum by the set itself): validate().
  void resolve();
  // Refuses impossible settings with the field named (chi, sweeps, niter >= 1; cutoff, noise >= 0; the model).
  void validate() const;
};

struct DmrgRunResult {
  spin::ChainModel model;
  Symmetry symmetry = Symmetry::None;  // the path that ran (Auto resolved)
  DmrgResult run;
  double energy = 0;                   // <psi|H|psi> of the final state
  std::optional<double> variance;
  std::vector<double> magnetization;   // <Sz_i> (empty when not measured)
  std::vector<int> bond_dimensions;    // n - 1 inner bonds of the final state
  long n_parameters = 0;               // entries of the final state as a dense MPS (sum of dl * d * dr)
  double measure_seconds = 0;          // energy, variance and magnetisation
  double entropy_mid() const;          // entropy of the middle bond (n - 1) / 2
  // Every field, the keys of `attnphys dmrg --json` first (model, energy, variance, max_bond_dimension,
  // truncation_error, sweeps, converged, convergence_reason, energy_change, symmetry,
  // davidson_products_last_sweep, seconds, measure_seconds, entropy_mid), then entropies, magnetization,
  // sweep_energies, bond_dimensions, n_parameters.
  Json to_json() const;
};

// The DmrgResult's fields as JSON (energy, truncation_error, ..., entropies, sweep_energies).
Json to_json(const DmrgResult& r);

// The product state a job starts from: Neel for Sz-conserving chains, all spins along +x for the TFIM.
Mps initial_state(const spin::ChainModel& model);

// Runs the job; observer sees every sweep (returning false stops the run). The MPS file (cfg.save, rank 0 only)
// stores config_toml as its "config" attribute.
DmrgRunResult run_dmrg(const DmrgRunConfig& cfg, const DmrgObserver& observer = {},
                       const std::string& config_toml = "");

}  // namespace attnphys::mps
