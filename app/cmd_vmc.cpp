// attnphys vmc: variational Monte Carlo ground state of a spin chain with a transformer (or RBM, autoregressive or
// MPS) wavefunction, same model flags as `attnphys ed` and `attnphys dmrg`.
#include <cmath>
#include <iomanip>

#include "attnphys/core/logging.hpp"
#include "attnphys/solvers/vmc/run.hpp"
#include "chain_flags.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

void register_vmc(CLI::App& app) {
  auto* sub = app.add_subcommand("vmc", "variational Monte Carlo ground state of a spin chain");
  auto flags = std::make_shared<CommonFlags>();
  auto opts = OptionFlags::for_config<vmc::VmcRunConfig>();
  flags->add_to(sub);
  add_chain_flags(sub, *opts);
  opts->add(sub, "--ansatz", "ansatz.kind");
  opts->add(sub, "--chi", "mps.chi");
  opts->add(sub, "--iters", "vmc.n_iter");
  opts->add(sub, "--samples", "sampler.n_samples");
  opts->add(sub, "--seed", "sampler.seed");
  opts->add(sub, "--resume", "run.resume")->check(CLI::ExistingFile);
  opts->add(sub, "--checkpoint", "vmc.checkpoint_path");
  opts->add(sub, "--log", "vmc.log_path");
  opts->add_print_config(sub);
  sub->callback([=]() {
    OptionSet set;
    vmc::VmcRunConfig cfg;
    cfg.declare(set);
    opts->resolve(set, *flags);  // the file, then --set, then the flags
    cfg.apply_defaults(set);
    if (opts->print_config()) {
      if (Comm::world().is_root()) std::cout << set.to_toml();
      return;
    }

    const bool root = Comm::world().is_root();
    const std::string ansatz = enum_name(cfg.ansatz);
    ProgressBar bar(cfg.vmc.n_iter, "vmc " + ansatz + " " + cfg.model.describe(), root);
    const auto r = vmc::run_vmc(cfg, [&](const vmc::VmcStep& s) {
      bar.update(s.iteration + 1, msg("E ", s.energy, " ± ", s.error));
      return true;
    });
    bar.finish(msg("E ", r.energy, " ± ", r.energy_error));
    if (!root) return;
    if (flags->json) {
      Json j = Json::object();
      const auto& m = cfg.model;
      j.set("model", enum_name(m.model)).set("n", m.n).set("bc", enum_name(m.bc)).set("J", m.J);
      if (m.model == spin::ModelKind::Tfim) j.set("h", m.h);
      if (m.model == spin::ModelKind::Xxz) j.set("delta", m.delta);
      if (m.model == spin::ModelKind::J1J2) j.set("j2", m.j2);
      using vmc::AnsatzKind;
      j.set("ansatz", ansatz)
          .set("marshall_sign", (cfg.ansatz == AnsatzKind::Transformer && cfg.transformer.marshall_sign) ||
                                    (cfg.ansatz == AnsatzKind::Mps && cfg.mps.marshall_sign));
      if (cfg.ansatz == AnsatzKind::Mps) j.set("chi", cfg.mps.chi);
      j.set("energy", r.energy).set("energy_error", r.energy_error).set("variance", r.variance);
      j.set("v_score", r.v_score).set("tau", r.tau).set("r_hat", r.r_hat).set("acceptance", r.acceptance);
      j.set("n_parameters", r.n_parameters).set("iterations", r.iterations).set("n_samples", r.n_samples);
      j.set("converged", r.converged).set("guard_rejections", r.guard_rejections);
      j.set("guard_false_alarms", r.guard_false_alarms);
      j.set("seconds", r.seconds).set("step_seconds", r.step_seconds).set("estimate_seconds", r.estimate_seconds);
      j.set("n_ranks", Comm::world().size());
      if (r.reference) {
        j.set("reference", *r.reference).set("reference_source", r.reference_source);
        j.set("relative_error", r.relative_error());
      } else {
        j.set("reference", Json());
      }
      j.set("warnings", r.warnings);
      emit_json(j);
    } else {
      std::cout << std::setprecision(10) << cfg.model.describe() << ", " << ansatz << " ansatz ("
                << r.n_parameters << " parameters), " << r.iterations << " iterations"
                << (r.converged ? " (converged)" : "") << "\n"
                << "energy " << r.energy << " ± " << std::setprecision(3) << r.energy_error << "  variance "
                << r.variance << "  V-score " << r.v_score << "  tau " << r.tau << "  R-hat " << r.r_hat << "\n";
      if (r.reference)
        std::cout << std::setprecision(10) << "exact (" << r.reference_source << ") " << *r.reference
                  << "  relative error " << std::setprecision(3) << r.relative_error() << "\n";
      std::cout << "time " << format_seconds(r.seconds) << "\n";
    }
  });
}

static Registrar registrar("vmc", register_vmc);

}  // namespace attnphys::cli
