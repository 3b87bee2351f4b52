// attnphys dmrg: ground state of a spin chain by two-site DMRG (same model flags as `attnphys ed`).
//
// Precedence: the config file, then --set, then the explicit flags (--chi, --n, ...), the later winning; a flag
// counts as explicitly set, like --set.
#include <iomanip>
#include <sstream>

#include "attnphys/core/logging.hpp"
#include "attnphys/solvers/mps/run.hpp"
#include "chain_flags.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

namespace {
// The values the flags were given; only those present on the command line become overrides.
struct DmrgFlags {
  spin::ChainModel model;
  int chi = 0, sweeps = 0, niter = 0;
  double cutoff = 0, noise = 0;
  std::string symmetry, save;
};

// Every digit of a double, so that a flag's value reaches the configuration unrounded.
std::string exact(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

// A TOML basic string: any file name survives the round trip through the configuration.
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == 0x7f) out += "\\u007f";
    else out += json_escape(std::string(1, c));
  }
  return out + "\"";
}
}  // namespace

void register_dmrg(CLI::App& app) {
  auto* sub = app.add_subcommand("dmrg", "ground state of a spin chain by two-site DMRG");
  auto flags = std::make_shared<CommonFlags>();
  auto f = std::make_shared<DmrgFlags>();
  flags->add_to(sub);
  add_chain_flags(sub, f->model);
  sub->add_option("--chi", f->chi, "largest bond dimension (dmrg.chi)");
  sub->add_option("--sweeps", f->sweeps, "maximum number of sweeps (dmrg.sweeps)");
  sub->add_option("--cutoff", f->cutoff, "discarded weight allowed per bond (dmrg.cutoff)");
  sub->add_option("--noise", f->noise, "initial density-matrix noise (dmrg.noise)");
  sub->add_option("--niter", f->niter, "Davidson iterations per bond (with --set dmrg.davidson_adaptive=false)");
  sub->add_option("--symmetry", f->symmetry, "auto | u1 | none (same as --set dmrg.symmetry=...)");
  sub->add_option("--save", f->save, "write the final MPS to this HDF5 file (dmrg.save)");
  sub->callback([sub, flags, f]() {
    OptionSet set;
    mps::DmrgRunConfig cfg;
    cfg.declare(set);
    flags->apply(set);  // file, then --set
    std::vector<std::string> over;
    const spin::ChainModel& c = f->model;
    if (sub->count("--model")) over.push_back(std::string("model.model=") + enum_name(c.model));
    if (sub->count("--n")) over.push_back(msg("model.n=", c.n));
    if (sub->count("--bc")) over.push_back(std::string("model.bc=") + enum_name(c.bc));
    if (sub->count("--J")) over.push_back("model.J=" + exact(c.J));
    if (sub->count("--h")) over.push_back("model.h=" + exact(c.h));
    if (sub->count("--delta")) over.push_back("model.delta=" + exact(c.delta));
    if (sub->count("--j2")) over.push_back("model.j2=" + exact(c.j2));
    if (sub->count("--chi")) over.push_back(msg("dmrg.chi=", f->chi));
    if (sub->count("--sweeps")) over.push_back(msg("dmrg.sweeps=", f->sweeps));
    if (sub->count("--cutoff")) over.push_back("dmrg.cutoff=" + exact(f->cutoff));
    if (sub->count("--noise")) over.push_back("dmrg.noise=" + exact(f->noise));
    if (sub->count("--niter")) over.push_back(msg("dmrg.niter=", f->niter));
    if (sub->count("--symmetry")) over.push_back("dmrg.symmetry=" + f->symmetry);
    if (sub->count("--save")) over.push_back("dmrg.save=" + toml_string(f->save));
    set.set_all(over);  // then the flags: the later wins
    cfg.resolve();

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
