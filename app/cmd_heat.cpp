// attnphys heat solve | dataset: finite-difference heat solutions and PDEBench-layout training datasets.
#include <chrono>
#include <cmath>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/physics/heat/nonlinear.hpp"
#include "attnphys/physics/heat/problem_options.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

struct HeatSolveRunOptions {
  double t_end = 0.05;
  long seed = 0;             // which random initial condition (sample index 0 of this seed)
  std::string output = "";   // optional HDF5 file with the initial and final fields
  void declare(OptionSet& s) {
    s.add("solve.t_end", &t_end, "final time", Range::non_negative());
    s.add("solve.seed", &seed, "seed of the random initial condition", Range::non_negative());
    s.add("solve.output", &output, "HDF5 file for u0 and u(t_end) (empty: none)");
  }
};

void run_heat_solve(const CommonFlags& flags) {
  heat::HeatProblemOptions po;
  heat::InitialConditionOptions ic;
  fd::HeatSolverOptions so;
  HeatSolveRunOptions ro;
  OptionSet set;
  po.declare(set);
  ic.declare(set);
  so.declare(set);
  ro.declare(set);
  flags.apply(set);
  const auto t0 = std::chrono::steady_clock::now();
  const auto p = po.build();
  const auto e = p.spatial_extents();
  View2<double> f("u0", 1, e[0] * e[1] * e[2]);
  heat::initial_conditions(p, ic, std::uint64_t(ro.seed), 0, f);
  View3<double> u0(f.data(), e[0], e[1], e[2]);
  const auto sol = fd::solve(p, u0, ro.t_end, so.to_solve_options());
  auto h = to_host(sol.u);
  double lo = 1e300, hi = -1e300, sum = 0, sq = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const double v = h.data()[i];
    lo = std::min(lo, v), hi = std::max(hi, v), sum += v, sq += v * v;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ro.output.empty() && Comm::world().is_root()) {
    h5::Writer w(ro.output, "heat_solution", 1);
    h5::write_view(w, "u0", u0);
    h5::write_view(w, "u", sol.u);
    w.set_attr("/", "config", set.to_toml());
    w.set_attr("/", "t_end", ro.t_end);
    w.commit();
  }
  if (Comm::world().is_root()) {
    std::cout << "heat " << p.grid.dim << "D, " << enum_name(so.method) << ", " << sol.steps << " steps of dt <= " << sol.dt
              << " to t = " << ro.t_end << " in " << seconds << " s; u in [" << lo << ", " << hi << "], mean "
              << sum / h.size() << "\n";
  }
  if (flags.json) {
    Json j = Json::object();
    j.set("command", "heat solve")
        .set("dim", p.grid.dim)
        .set("method", enum_name(so.method))
        .set("t_end", ro.t_end)
        .set("steps", sol.steps)
        .set("dt", sol.dt)
        .set("ftcs_limit", fd::HeatStepper(p, fd::Method::Ftcs).ftcs_limit())
        .set("min", lo)
        .set("max", hi)
        .set("mean", sum / h.size())
        .set("rms", std::sqrt(sq / h.size()))
        .set("seconds", seconds)
        .set("output", ro.output);
    emit_json(j);
  }
}

void run_heat_dataset(const CommonFlags& flags) {
  fd::HeatDatasetConfig cfg;
  OptionSet set;
  cfg.declare(set);
  flags.apply(set);
  const auto& lo = cfg.law;
  const auto p = cfg.problem.build();
  const auto family = cfg.family.build(p, std::uint64_t(cfg.dataset.seed));
  const heat::KappaLaw law = lo.enabled() ? lo.build() : heat::KappaLaw{};
  const auto picard = cfg.picard.build();
  // Under mpirun every rank generates its share of the samples; rank 0 writes the file and reports.
  const auto s = fd::write_heat_dataset(p, cfg.ic, family, lo.enabled() ? &law : nullptr, picard,
                                        cfg.solver.to_solve_options(), cfg.dataset, set.to_toml(), {}, Comm::world());
  if (!Comm::world().is_root()) return;
  std::cout << "wrote " << s.path << ": " << s.samples << " samples x " << s.nt << " snapshots in " << s.seconds
            << " s (solver dt " << s.solver_dt << "; " << family.describe()
            << (lo.enabled() ? ", " + law.describe() : std::string()) << ")\n";
  if (flags.json) {
    Json j = Json::object();
    j.set("command", "heat dataset")
        .set("path", s.path)
        .set("samples", s.samples)
        .set("nt", s.nt)
        .set("solver_dt", s.solver_dt)
        .set("seconds", s.seconds)
        .set("samples_per_s", s.samples / std::max(s.seconds, 1e-9))
        .set("family", family.describe())
        .set("nonlinear", lo.enabled());
    emit_json(j);
  }
}

void register_heat(CLI::App& app) {
  auto* heat = app.add_subcommand("heat", "finite-difference heat solver and training datasets");
  heat->require_subcommand(1);
  auto* solve = heat->add_subcommand("solve", "solve from a random initial condition and report the field");
  auto solve_flags = std::make_shared<CommonFlags>();
  solve_flags->add_to(solve);
  solve->callback([solve_flags]() { run_heat_solve(*solve_flags); });
  auto* dataset = heat->add_subcommand("dataset", "write (u(t), u(t + dt)) pairs or trajectories to HDF5 (PDEBench)");
  auto dataset_flags = std::make_shared<CommonFlags>();
  dataset_flags->add_to(dataset);
  dataset->footer(
      "Problem families (--set key=value or a [family] / [nonlinear] section; combine freely):\n"
      "  family.kappa    = constant | piecewise | lognormal   per-sample random kappa(x): piecewise-smooth\n"
      "                    (family.kappa_lo/kappa_hi) or log-normal Gaussian random field (family.kappa_contrast\n"
      "                    <= max/min, around problem.kappa); written as the channel 'kappa'\n"
      "  family.source   = none | grf                          per-sample static source f(x); channel 'source'\n"
      "  family.boundary = zero | random                       per-sample boundary data on the problem.bc sides\n"
      "                    (dirichlet: u, neumann: flux in); channels 'boundary' and boundary_faces/*\n"
      "  nonlinear.law   = none | quadratic | table            u_t = div(kappa(u) grad u): kappa0 (1 + beta u^2)\n"
      "                    (nonlinear.kappa0, nonlinear.beta) or a table (nonlinear.table_u, table_kappa)\n"
      "  problem.dim     = 1 | 2 | 3                           grids problem.nx, ny, nz\n"
      "Example: attnphys heat dataset --set problem.dim=2 --set family.kappa=lognormal --set dataset.output=k.h5");
  dataset->callback([dataset_flags]() { run_heat_dataset(*dataset_flags); });
}

static Registrar registrar("heat", register_heat);

}  // namespace attnphys::cli
