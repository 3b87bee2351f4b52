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
    s.add("ed.n_states", &ed.n_states, "number of lowest eigenvalues", Range::at_least(1));
    s.add("ed.tol", &ed.tol, "Lanczos residual tolerance", Range::positive());
    s.add("ed.krylov_dim", &ed.krylov_dim, "Lanczos basis size before a restart (0: automatic)",
          Range::non_negative());
    s.add("ed.use_sz_sector", &ed.use_sz_sector, "restrict Sz-conserving models to the ground-state sector");
  }
};
}  // namespace

void register_ed(CLI::App& app) {
  auto* sub = app.add_subcommand("ed", "exact diagonalisation (Lanczos) of a spin chain");
  auto flags = std::make_shared<CommonFlags>();
  auto opt = std::make_shared<EdCliOptions>();
  auto cli_model = std::make_shared<spin::ChainModel>();
  auto n_states = std::make_shared<int>(0);
  flags->add_to(sub);
  add_chain_flags(sub, *cli_model);
  sub->add_option("--n-states", *n_states, "number of lowest eigenvalues (default 1)");
  sub->callback([flags, opt, cli_model, n_states, sub]() {
    OptionSet set;
    opt->declare(set);
    flags->apply(set);
    // Command-line model flags win over the config file.
    const spin::ChainModel& c = *cli_model;
    auto& m = opt->model;
    if (sub->count("--model")) m.model = c.model;
    if (sub->count("--n")) m.n = c.n;
    if (sub->count("--bc")) m.bc = c.bc;
    if (sub->count("--J")) m.J = c.J;
    if (sub->count("--h")) m.h = c.h;
    if (sub->count("--delta")) m.delta = c.delta;
    if (sub->count("--j2")) m.j2 = c.j2;
    if (*n_states > 0) opt->ed.n_states = *n_states;
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
      j.set("model", m.model).set("n", m.n).set("bc", m.bc).set("J", m.J);
      if (m.model == "tfim") j.set("h", m.h);
      if (m.model == "xxz") j.set("delta", m.delta);
      if (m.model == "j1j2") j.set("j2", m.j2);
      j.set("energy", res.energies[0]).set("energies", res.energies).set("sector", res.sector);
      j.set("dimension", res.dimension).set("matvecs", res.matvecs).set("seconds", res.seconds);
      if (ref) j.set("reference", *ref);
      emit_json(j);
    }
  });
}

static Registrar registrar("ed", register_ed);

}  // namespace attnphys::cli
