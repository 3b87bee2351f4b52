// attnphys dmrg: ground state of a spin chain by two-site DMRG (same model flags as `attnphys ed`).
#include <chrono>

#include "attnphys/core/logging.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/observables.hpp"
#include "attnphys/solvers/mps/u1.hpp"
#include "chain_flags.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

namespace {
struct DmrgCliOptions {
  int chi = 100;
  int sweeps = 12;
  double cutoff = 1e-12;
  double noise = 1e-5;
  int niter = 4;
  std::string save;
  std::string symmetry = "auto";
  bool variance = true;
  void declare(OptionSet& s) {
    s.add("dmrg.chi", &chi, "largest bond dimension", Range::at_least(1));
    s.add("dmrg.sweeps", &sweeps, "maximum number of sweeps", Range::at_least(1));
    s.add("dmrg.cutoff", &cutoff, "discarded weight allowed per bond", Range::non_negative());
    s.add("dmrg.noise", &noise, "initial density-matrix noise (fades once the bond dimension is reached)",
          Range::non_negative());
    s.add("dmrg.niter", &niter, "Davidson iterations per bond (only with dmrg.davidson_adaptive=false)",
          Range::at_least(1));
    s.add("dmrg.symmetry", &symmetry,
          "auto: U(1) block-sparse DMRG when the model conserves Sz (heisenberg, xxz, j1j2), dense otherwise; "
          "u1; none (dense)",
          {"auto", "u1", "none"});
    s.add("dmrg.save", &save, "write the final MPS to this HDF5 file");
    s.add("dmrg.variance", &variance, "also compute <H^2> - <H>^2");
  }
};
}  // namespace

void register_dmrg(CLI::App& app) {
  auto* sub = app.add_subcommand("dmrg", "ground state of a spin chain by two-site DMRG");
  auto flags = std::make_shared<CommonFlags>();
  auto model = std::make_shared<spin::ChainModel>();
  auto opt = std::make_shared<DmrgCliOptions>();
  auto dopt = std::make_shared<mps::DmrgOptions>();
  flags->add_to(sub);
  add_chain_flags(sub, *model);
  sub->add_option("--chi", opt->chi, "largest bond dimension");
  sub->add_option("--sweeps", opt->sweeps, "maximum number of sweeps");
  sub->add_option("--cutoff", opt->cutoff, "discarded weight allowed per bond");
  sub->add_option("--noise", opt->noise, "initial density-matrix noise");
  sub->add_option("--niter", opt->niter, "Davidson iterations per bond (with --set dmrg.davidson_adaptive=false)");
  sub->add_option("--symmetry", opt->symmetry, "auto | u1 | none (same as --set dmrg.symmetry=...)");
  sub->add_option("--save", opt->save, "write the final MPS to this HDF5 file");
  sub->callback([flags, model, opt, dopt]() {
    OptionSet set;
    model->declare(set);
    opt->declare(set);
    dopt->declare(set);
    flags->apply(set);
    model->validate();
    const bool root = Comm::world().is_root();
    const mps::Mpo h = mps::chain_mpo(*model);
    const mps::MpoCharges charges = mps::mpo_charges(h);
    mps::Symmetry sym = mps::parse_symmetry(opt->symmetry);
    require(sym != mps::Symmetry::U1 || charges.ok, "dmrg.symmetry=u1: ", model->describe(),
            " does not conserve Sz (", charges.reason, "); use dmrg.symmetry=none or auto");
    if (sym == mps::Symmetry::Auto) sym = charges.ok ? mps::Symmetry::U1 : mps::Symmetry::None;
    const bool u1 = sym == mps::Symmetry::U1;
    // The critical TFIM ground state is parity-symmetric: start from all spins along +x, the others from Neel.
    mps::Mps psi = model->model == "tfim" ? mps::Mps::uniform_product(model->n, Eigen::Vector2d(1.0, 1.0))
                                          : mps::Mps::neel(model->n);
    mps::QMps qpsi = u1 ? mps::QMps::neel(model->n) : mps::QMps();
    const mps::Sweeps sweeps = mps::default_sweeps(opt->chi, opt->sweeps, opt->cutoff, opt->noise, opt->niter);
    ProgressBar bar(sweeps.size(), "dmrg " + model->describe(), root);
    auto observer = [&](const mps::SweepRecord& rec) {
      bar.update(rec.sweep, msg("E ", rec.energy, " chi ", rec.max_bond_dimension));
      return true;
    };
    mps::DmrgResult r = u1 ? mps::dmrg(h, qpsi, sweeps, *dopt, observer) : mps::dmrg(h, psi, sweeps, *dopt, observer);
    bar.finish(msg("E ", r.energy));
    const auto t0 = std::chrono::steady_clock::now();
    const double energy = u1 ? mps::expectation(h, qpsi) : mps::expectation(h, psi);
    const double var = !opt->variance ? 0.0 : u1 ? mps::variance(h, qpsi) : mps::variance(h, psi);
    const double tv = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opt->variance) mps::check_variance(r, var, *dopt);
    if (!r.converged && root)
      std::cerr << "warning: DMRG did not converge: " << r.convergence_reason << "\n";
    const double s_mid = r.entropies.empty() ? 0.0 : r.entropies[(model->n - 1) / 2];
    if (u1 && !opt->save.empty()) psi = qpsi.to_dense_mps();
    if (!opt->save.empty() && root) mps::save_mps(psi, opt->save, set.to_toml());
    if (!root) return;
    if (flags->json) {
      Json j = Json::object();
      j.set("model", model->describe());
      j.set("energy", energy);
      j.set("variance", opt->variance ? Json(var) : Json());
      j.set("max_bond_dimension", r.max_bond_dimension);
      j.set("truncation_error", r.truncation_error);
      j.set("sweeps", r.sweeps);
      j.set("converged", r.converged);
      j.set("convergence_reason", r.converged ? Json() : Json(r.convergence_reason));
      j.set("energy_change", r.energy_change);
      j.set("symmetry", mps::symmetry_name(sym));
      j.set("davidson_products_last_sweep", r.history.back().davidson_products);
      j.set("seconds", r.seconds);
      j.set("measure_seconds", tv);
      j.set("entropy_mid", s_mid);
      emit_json(j);
    } else {
      std::cout << model->describe() << "\nenergy " << msg(energy) << "  variance " << var << "\nmax bond dimension "
                << r.max_bond_dimension << "  truncation error " << r.truncation_error << "  sweeps " << r.sweeps
                << (r.converged ? " (converged)" : "") << "\nentropy (middle bond) " << s_mid << "\nDMRG "
                << format_seconds(r.seconds) << "\n";
    }
  });
}

static Registrar registrar("dmrg", register_dmrg);

}  // namespace attnphys::cli
