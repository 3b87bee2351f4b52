#include "attnphys/solvers/vmc/run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "attnphys/core/comm.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/vmc/monitor.hpp"

namespace attnphys::vmc {

VmcRunConfig::VmcRunConfig() {
  // Defaults that reach the README's VMC accuracy on N = 20 chains within minutes on 2 cores.
  vmc.sampler.n_chains = 64;
  vmc.sampler.n_samples = 1024;
  vmc.sampler.n_discard = 16;
  // Later iterations continue the chains from the previous iteration's states (a small SR step away from
  // equilibrium): two sweeps re-equilibrate them (measured: the same energies, tau ~1, at half the sampling cost).
  vmc.sampler.n_discard_continue = 2;
  // Proposals in float32 (the incremental transformer's path; the kept samples' log ψ is recomputed in float64, and
  // local energies, gradients and SR stay in float64).
  vmc.sampler.float32 = true;
  vmc.lr = 0.05;
  vmc.diag_shift = 1e-2;
  vmc.diag_shift_final = 1e-4;
  vmc.diag_shift_steps = 200;
  vmc.n_iter = 300;
  rbm.alpha = 1.0;
  rbm.complex = true;
  rbm.init_std = 0.01;
}

void VmcRunConfig::declare(OptionSet& s) {
  model.declare(s);
  s.add("ansatz.kind", &ansatz, "variational wavefunction");
  s.add("ansatz.marshall_sign", &marshall_sign,
        "Marshall sign (-1)^(up spins on even sites): auto (antiferromagnetic Sz-conserving chains), on, off");
  transformer.declare(s);
  autoregressive.declare(s);
  s.add("rbm.alpha", &rbm.alpha, "hidden units per site", Range::positive());
  s.add("rbm.complex", &rbm.complex, "complex parameters (amplitude and phase)");
  s.add("rbm.visible_bias", &rbm.visible_bias, "visible biases");
  s.add("rbm.init_std", &rbm.init_std, "initial parameter scale", Range::non_negative());
  s.add("rbm.seed", &rbm_seed, "initialisation seed");
  s.add("rbm.marshall_sign", &rbm.marshall_sign,
        "multiply by (-1)^(up spins on even sites) (default: on only when ansatz.marshall_sign = on)");
  mps.declare(s);
  vmc.declare(s);
  s.add("run.final_samples", &final_samples, "samples of the final energy estimate (0: skip)", Range::non_negative());
  s.add("run.reference", &reference, "exact energy: auto (closed form, else ED for n <= 22), ed, none");
  s.add("run.resume", &resume, "checkpoint to continue from (empty: start fresh)");
}

bool VmcRunConfig::uses_marshall_sign() const {
  if (marshall_sign == MarshallSign::On) return true;
  if (marshall_sign == MarshallSign::Off) return false;
  return model.model != spin::ModelKind::Tfim && model.J > 0;
}

void apply_model_defaults(const spin::ChainModel& model, const OptionSet& set, VmcOptions& vmc) {
  model.validate();
  vmc.sampler.periodic = model.periodic();
  if (!set.was_set("sampler.fixed_sz")) vmc.sampler.fixed_sz = model.conserves_sz() && model.n % 2 == 0;
}

void VmcRunConfig::apply_defaults(const OptionSet& set) {
  apply_model_defaults(model, set, vmc);
  if (!set.was_set("vmc.diag_shift_steps")) vmc.diag_shift_steps = std::max(1L, (2 * vmc.n_iter) / 3);
  if (ansatz == AnsatzKind::Transformer && !set.was_set("transformer.marshall_sign"))
    transformer.marshall_sign = uses_marshall_sign();
  if (ansatz == AnsatzKind::Mps && !set.was_set("mps.marshall_sign")) mps.marshall_sign = uses_marshall_sign();
  if (!set.was_set("mps.periodic")) mps.periodic = model.periodic();
  // The RBM takes the sign only when asked (on), so that by default it stays the plain RBM of the literature.
  if (ansatz == AnsatzKind::Rbm && !set.was_set("rbm.marshall_sign"))
    rbm.marshall_sign = marshall_sign == MarshallSign::On;
  require(ansatz != AnsatzKind::Autoregressive || marshall_sign != MarshallSign::On,
          "ansatz.marshall_sign = on is available for the transformer, MPS and RBM ansätze; the ", enum_name(ansatz),
          " ansatz learns its phase itself");
  if (ansatz == AnsatzKind::Mps) mps.validate();
  if (ansatz == AnsatzKind::Autoregressive) {
    if (!set.was_set("autoregressive.fixed_sz")) autoregressive.fixed_sz = vmc.sampler.fixed_sz;
    if (!set.was_set("autoregressive.two_sz")) autoregressive.two_sz = vmc.sampler.two_sz;
    autoregressive.validate();
  }
  if (ansatz == AnsatzKind::Transformer) {
    transformer.validate();
    require(model.n % transformer.patch_size == 0, "transformer.patch_size = ", transformer.patch_size,
            " does not divide n = ", model.n, "; choose a divisor of n");
  }
  vmc.validate();
}

std::unique_ptr<LogPsiModel<double>> make_ansatz(const VmcRunConfig& cfg) {
  switch (cfg.ansatz) {
    case AnsatzKind::Transformer:
      return std::make_unique<TransformerAnsatz<double>>(cfg.model.n, cfg.model.periodic(), cfg.transformer);
    case AnsatzKind::Rbm: {
      RbmOptions o = cfg.rbm;
      o.seed = std::uint64_t(cfg.rbm_seed);
      return std::make_unique<Rbm<double>>(cfg.model.n, o);
    }
    case AnsatzKind::Autoregressive:
      return std::make_unique<AutoregressiveTransformer<double>>(cfg.model.n, cfg.autoregressive);
    case AnsatzKind::Mps: return std::make_unique<MpsAnsatz<double>>(cfg.model.n, cfg.mps);
  }
  fail("unknown ansatz ", int(cfg.ansatz), ": use ", enum_list<AnsatzKind>());
}

std::optional<double> reference_energy(const spin::ChainModel& m, ReferencePolicy policy, std::string* source) {
  if (source) source->clear();
  if (policy == ReferencePolicy::None) return std::nullopt;
  if (policy == ReferencePolicy::Auto) {
    if (auto r = ed::reference_energy(m)) {
      if (source) *source = "closed form";
      return r;
    }
    if (m.n > 22) return std::nullopt;
  }
  require(m.n <= 26, "run.reference = ed for ", m.n, " sites needs too much memory: use n <= 26 or reference none");
  const auto r = ed::exact_ground_state(m);
  if (!r.converged) return std::nullopt;
  if (source) *source = "ED";
  return r.energies.at(0);
}

double VmcRunResult::relative_error() const {
  if (!reference || *reference == 0) return std::nan("");
  return std::abs(energy - *reference) / std::abs(*reference);
}

VmcRunResult run_vmc(const VmcRunConfig& cfg, const std::function<bool(const VmcStep&)>& on_step) {
  const auto t0 = std::chrono::steady_clock::now();
  auto psi = make_ansatz(cfg);
  spin::SpinHamiltonian H(cfg.model);
  VmcDriver<double> driver(*psi, H, cfg.vmc);
  if (!cfg.resume.empty()) driver.load_checkpoint(cfg.resume);
  VmcRunResult out;
  out.n_parameters = psi->n_parameters();
  std::vector<VmcDriver<double>::Callback> cbs;
  if (on_step) cbs.push_back(on_step);
  // The antiferromagnetic chains (Heisenberg, XXZ, J1-J2 with J > 0) have negative ground-state energies. An energy
  // that stays >= 0 means the wavefunction has not found their sign structure (a real positive ansatz, an RBM
  // without a sign rule): say so once, with what to change, instead of letting it run on silently.
  const bool negative_ground_state = cfg.model.model != spin::ModelKind::Tfim && cfg.model.J > 0;
  long non_negative = 0;
  // The driver's own warnings (vmc/monitor.hpp; it prints them) join the result in the order they were raised: its
  // monitor sees each step before these callbacks do.
  std::size_t driver_warnings = 0;
  auto take_driver_warnings = [&]() {
    for (; driver_warnings < driver.warnings().size(); ++driver_warnings)
      out.warnings.push_back(driver.warnings()[driver_warnings]);
  };
  cbs.push_back([&](const VmcStep& s) {
    take_driver_warnings();
    non_negative = s.energy >= 0 ? non_negative + 1 : 0;
    if (negative_ground_state && non_negative == kSignWarningIterations) {
      out.warnings.push_back(msg(
          "the VMC energy has stayed >= 0 for ", kSignWarningIterations, " iterations (now ", s.energy, " at iteration ",
          s.iteration, "), but the ground state of this antiferromagnetic ", enum_name(cfg.model.model),
          " chain has a negative energy: the ansatz has not found the sign structure. Use a sign rule ",
          "(ansatz.marshall_sign = on: the default of the transformer and mps ansätze on these chains, and available ",
          "for the rbm) or an ansatz that learns its phase, or lower vmc.lr if the energy was negative before"));
      if (Comm::world().is_root()) std::cerr << "attnphys: warning: " << out.warnings.back() << std::endl;
    }
    return true;
  });
  const long remaining = std::max(0L, cfg.vmc.n_iter - driver.iteration());
  out.history = driver.run(remaining, nullptr, cbs);
  take_driver_warnings();
  out.iterations = driver.iteration();
  out.converged = driver.converged();
  out.guard_rejections = driver.guard_rejections();
  out.guard_false_alarms = driver.guard_false_alarms();
  if (!out.history.empty()) {
    std::vector<double> t;
    for (const auto& s : out.history) t.push_back(s.seconds);
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    out.step_seconds = t[t.size() / 2];
  }
  if (cfg.final_samples > 0) {
    const auto te = std::chrono::steady_clock::now();
    const ChainStats st = driver.estimate_energy(cfg.final_samples);
    out.estimate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - te).count();
    out.energy = st.mean;
    out.energy_error = st.error;
    out.variance = st.variance;
    out.tau = st.tau;
    out.r_hat = st.r_hat;
    out.n_samples = st.n;
    out.acceptance = driver.estimate_acceptance();  // the estimate's own chains (a resumed run has no other)
    // Exact sampling reports 1; Metropolis chains that accepted (almost) nothing sampled the configurations they
    // were stuck in, and their mean is not a variational energy of the state (vmc/monitor.hpp).
    if (out.acceptance <= ProgressWarningOptions{}.frozen_acceptance) {
      out.warnings.push_back(msg("the final estimate's Metropolis chains accepted ", out.acceptance,
                                 " of their moves: they were frozen, and its energy ", out.energy, " +- ",
                                 out.energy_error,
                                 " is that of the configurations they were stuck in, not a variational estimate "
                                 "of the state (it can lie below the ground-state energy). Do not use it; see the "
                                 "run's earlier warnings"));
      if (Comm::world().is_root()) std::cerr << "attnphys: warning: " << out.warnings.back() << std::endl;
    }
  } else if (!out.history.empty()) {
    // Without a final estimate: the last iteration's, or, when the step guard rejected it (the parameters are then
    // those of the run's lowest energy), the lowest accepted one's.
    const VmcStep* last = &out.history.back();
    if (last->rejected)
      for (const auto& h : out.history)
        if (!h.rejected && (last->rejected || h.energy < last->energy)) last = &h;
    const auto& s = *last;
    out.energy = s.energy;
    out.energy_error = s.error;
    out.variance = s.variance;
    out.tau = s.tau;
    out.r_hat = s.r_hat;
    out.acceptance = s.acceptance;
    out.n_samples = cfg.vmc.sampler.n_samples;
  }
  out.v_score = v_score(cfg.model.n, out.energy, out.variance);
  // The exact energy (possibly a Lanczos run) once, on rank 0; the other ranks receive it.
  const Comm comm = Comm::world();
  double ref = std::nan("");
  if (comm.is_root()) {
    const auto r = reference_energy(cfg.model, cfg.reference, &out.reference_source);
    if (r) ref = *r;
  }
  comm.broadcast(&ref, 1, 0);
  if (!std::isnan(ref)) out.reference = ref;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace attnphys::vmc
