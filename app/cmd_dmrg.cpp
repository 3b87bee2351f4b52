// attnphys dmrg: ground state of a spin chain by two-site DMRG (same model flags as `attnphys ed`).
//
// Precedence: the config file, then --set, then the explicit flags (--chi, --n, ...), the later winning; a flag
// counts as explicitly set, like --set.
#include "attnphys/core/logging.hpp"
#include "attnphys/solvers/mps/run.hpp"
#include "chain_flags.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

void register_dmrg(CLI::App& app) {
  auto* sub = app.add_subcommand("dmrg", "ground state of a spin chain by two-site DMRG");
  auto flags = std::make_shared<CommonFlags>();
  auto opts = OptionFlags::for_config<mps::DmrgRunConfig>();  // each flag is another name for a declared key
  flags->add_to(sub);
  add_chain_flags(sub, *opts);
  opts->add(sub, "--chi", "dmrg.chi");
  opts->add(sub, "--sweeps", "dmrg.sweeps");
  opts->add(sub, "--cutoff", "dmrg.cutoff");
  opts->add(sub, "--noise", "dmrg.noise");
  opts->add(sub, "--niter", "dmrg.niter");
  opts->add(sub, "--symmetry", "dmrg.symmetry");
  opts->add(sub, "--save", "dmrg.save");
  opts->add_print_config(sub);
  sub->callback([flags, opts]() {
    OptionSet set;
    mps::DmrgRunConfig cfg;
    cfg.declare(set);
    opts->resolve(set, *flags);  // the file, then --set, then the flags: the later wins
    cfg.resolve();
    if (opts->print_config()) {
      if (Comm::world().is_root()) std::cout << set.to_toml();
      return;
    }

    const bool root = Comm::world().is_root();
    ProgressBar bar(cfg.sweeps, "dmrg " + cfg.model.describe(), root);
    const mps::DmrgRunResult r = mps::run_dmrg(
        cfg,
        [&](const mps::SweepRecord& rec) {
          bar.update(rec.sweep, msg("E ", rec.energy, " chi ", rec.max_bond_dimension));
          return true;
        },
        set.to_toml());
    bar.finish(msg("E ", r.run.energy));
    if (!root) return;
    if (!r.run.converged) std::cerr << "warning: DMRG did not converge: " << r.run.convergence_reason << "\n";
    if (flags->json) {
      emit_json(r.to_json());
    } else {
      std::cout << cfg.model.describe() << "\nenergy " << msg(r.energy) << "  variance "
                << (r.variance ? msg(*r.variance) : std::string("not computed")) << "\nmax bond dimension "
                << r.run.max_bond_dimension << "  truncation error " << r.run.truncation_error << "  sweeps "
                << r.run.sweeps << (r.run.converged ? " (converged)" : "") << "\nentropy (middle bond) "
                << r.entropy_mid() << "\nDMRG " << format_seconds(r.run.seconds) << "\n";
    }
  });
}

static Registrar registrar("dmrg", register_dmrg);

}  // namespace attnphys::cli
