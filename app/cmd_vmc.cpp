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
  auto cli_model = std::make_shared<spin::ChainModel>();
  auto ansatz = std::make_shared<std::string>();
  auto iters = std::make_shared<long>(-1);
  auto samples = std::make_shared<long>(-1);
  auto seed = std::make_shared<long>(-1);
  auto resume = std::make_shared<std::string>();
  auto checkpoint = std::make_shared<std::string>();
  auto log = std::make_shared<std::string>();
  flags->add_to(sub);
  add_chain_flags(sub, *cli_model);
  auto chi = std::make_shared<long>(-1);
  sub->add_option("--ansatz", *ansatz, "transformer | rbm | autoregressive | mps")
      ->check(CLI::IsMember({"transformer", "rbm", "autoregressive", "mps"}));
  sub->add_option("--chi", *chi, "bond dimension of the MPS ansatz (mps.chi)");
  sub->add_option("--iters", *iters, "VMC iterations");
  sub->add_option("--samples", *samples, "samples per iteration");
  sub->add_option("--seed", *seed, "sampler seed");
  sub->add_option("--resume", *resume, "continue from this checkpoint")->check(CLI::ExistingFile);
  sub->add_option("--checkpoint", *checkpoint, "write a checkpoint here (every vmc.checkpoint_every and at the end)");
  sub->add_option("--log", *log, "per-iteration CSV log");
  sub->callback([=]() {
    OptionSet set;
    vmc::VmcRunConfig cfg;
    cfg.declare(set);
    flags->apply(set);
    // Command-line flags win over the config file; they count as explicitly set.
    std::vector<std::string> over;
    const spin::ChainModel& c = *cli_model;
    if (sub->count("--model")) over.push_back("model.model=" + c.model);
    if (sub->count("--n")) over.push_back(msg("model.n=", c.n));
    if (sub->count("--bc")) over.push_back("model.bc=" + c.bc);
    if (sub->count("--J")) over.push_back(msg("model.J=", c.J));
    if (sub->count("--h")) over.push_back(msg("model.h=", c.h));
    if (sub->count("--delta")) over.push_back(msg("model.delta=", c.delta));
    if (sub->count("--j2")) over.push_back(msg("model.j2=", c.j2));
    if (!ansatz->empty()) over.push_back("ansatz.kind=" + *ansatz);
    if (*chi >= 0) over.push_back(msg("mps.chi=", *chi));
    if (*iters >= 0) over.push_back(msg("vmc.n_iter=", *iters));
    if (*samples > 0) over.push_back(msg("sampler.n_samples=", *samples));
    if (*seed >= 0) over.push_back(msg("sampler.seed=", *seed));
    if (!resume->empty()) over.push_back("run.resume=" + *resume);
    if (!checkpoint->empty()) over.push_back("vmc.checkpoint_path=" + *checkpoint);
    if (!log->empty()) over.push_back("vmc.log_path=" + *log);
    set.set_all(over);
    cfg.apply_defaults(set);

    const bool root = Comm::world().is_root();
    ProgressBar bar(cfg.vmc.n_iter, "vmc " + cfg.ansatz + " " + cfg.model.describe(), root);
    const auto r = vmc::run_vmc(cfg, [&](const vmc::VmcStep& s) {
      bar.update(s.iteration + 1, msg("E ", s.energy, " ± ", s.error));
      return true;
    });
    bar.finish(msg("E ", r.energy, " ± ", r.energy_error));
    if (!root) return;
    if (flags->json) {
      Json j = Json::object();
      j.set("model", cfg.model.model).set("n", cfg.model.n).set("bc", cfg.model.bc).set("J", cfg.model.J);
      if (cfg.model.model == "tfim") j.set("h", cfg.model.h);
      if (cfg.model.model == "xxz") j.set("delta", cfg.model.delta);
      if (cfg.model.model == "j1j2") j.set("j2", cfg.model.j2);
      j.set("ansatz", cfg.ansatz)
          .set("marshall_sign", (cfg.ansatz == "transformer" && cfg.transformer.marshall_sign) ||
                                    (cfg.ansatz == "mps" && cfg.mps.marshall_sign));
      if (cfg.ansatz == "mps") j.set("chi", cfg.mps.chi);
      j.set("energy", r.energy).set("energy_error", r.energy_error).set("variance", r.variance);
      j.set("v_score", r.v_score).set("tau", r.tau).set("r_hat", r.r_hat).set("acceptance", r.acceptance);
      j.set("n_parameters", r.n_parameters).set("iterations", r.iterations).set("n_samples", r.n_samples);
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
      std::cout << std::setprecision(10) << cfg.model.describe() << ", " << cfg.ansatz << " ansatz ("
                << r.n_parameters << " parameters), " << r.iterations << " iterations\n"
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
