// attnphys ed: exact ground state (and a few excitations) of a spin chain by Lanczos, in the Sz sector of the
// ground state when the model conserves Sz.
#include <cmath>
#include <iomanip>

#include "attnphys/solvers/ed/exact.hpp"
#include "chain_flags.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

namespace {
struct EdCliOptions {
  spin::ChainModel model;
  ed::EdOptions ed;
  void declare(OptionSet& s) {
    model.declare(s);
    ed.declare(s);
  }
};
}  // namespace

void register_ed(CLI::App& app) {
  auto* sub = app.add_subcommand("ed", "exact diagonalisation (Lanczos) of a spin chain");
  auto flags = std::make_shared<CommonFlags>();
  auto opts = OptionFlags::for_config<EdCliOptions>();
  flags->add_to(sub);
  add_chain_flags(sub, *opts);
  opts->add(sub, "--n-states", "ed.n_states");
  opts->add_print_config(sub);
  sub->callback([flags, opts]() {
    OptionSet set;
    auto opt = std::make_shared<EdCliOptions>();
    opt->declare(set);
    opts->resolve(set, *flags);  // the file, then --set, then the flags
    if (opts->print_config()) {
      if (Comm::world().is_root()) std::cout << set.to_toml();
      return;
    }
    auto& m = opt->model;
    m.validate();
    require(m.n <= 30, "ED of ", m.n, " sites needs too much memory: use n <= 30 (n = 24 takes ~1 GB in Sz = 0)");
    auto res = ed::exact_ground_state(m, opt->ed);
    require(res.converged, "Lanczos did not converge (residual ", res.residuals.empty() ? NAN : res.residuals[0],
            "): raise ed.krylov_dim or loosen ed.tol");
    const auto ref = ed::reference_energy(m);
    if (Comm::world().is_root()) {
      std::cout << std::setprecision(12) << m.describe() << ": E0 = " << res.energies[0] << " (" << res.sector
                << ", dimension " << res.dimension << ", " << res.matvecs << " matvecs, " << res.seconds << " s)\n";
      if (ref) std::cout << "closed form: " << *ref << ", difference " << res.energies[0] - *ref << "\n";
    }
    if (flags->json) {
      Json j = Json::object();
      j.set("model", enum_name(m.model)).set("n", m.n).set("bc", enum_name(m.bc)).set("J", m.J);
      if (m.model == spin::ModelKind::Tfim) j.set("h", m.h);
      if (m.model == spin::ModelKind::Xxz) j.set("delta", m.delta);
      if (m.model == spin::ModelKind::J1J2) j.set("j2", m.j2);
      j.set("energy", res.energies[0]).set("energies", res.energies).set("sector", res.sector);
      j.set("dimension", res.dimension).set("matvecs", res.matvecs).set("seconds", res.seconds);
      if (ref) j.set("reference", *ref);
      emit_json(j);
    }
  });
}

static Registrar registrar("ed", register_ed);

}  // namespace attnphys::cli
