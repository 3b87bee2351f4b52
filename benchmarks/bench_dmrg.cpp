// DMRG reference runs: open Heisenberg N = 100 at chi = 100, dense and U(1) block-sparse, and the critical TFIM
// N = 100 at chi = 64 (dense: no U(1)), all from product states, with wall time, peak memory and the energy error.
//
//   bench_dmrg                          all cases in this process (max RSS is cumulative over the process)
//   bench_dmrg --case NAME [--n N] [--chi C]   one case (NAME: heisenberg_u1 | heisenberg_dense | tfim), so that
//                                       max_rss_mib is that case's peak; benchmarks/dmrg.py runs it this way next to
//                                       TeNPy.
// Schedule (both paths, and TeNPy in dmrg.py): 12 sweeps at most, chi 10, 20, 40, ... up to chi, cutoff 1e-12 on
// the discarded weight, noise 1e-5 fading 100x per sweep once chi is reached, adaptive Davidson.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench_common.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/solvers/mps/run.hpp"

using namespace attnphys;

namespace {

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Exact open-chain energies (N = 100): Heisenberg from the Bethe ansatz (README), TFIM from the free-fermion form.
double exact_energy(const std::string& model, int n) {
  if (model == "tfim" && n == 100) return -126.961876739681;
  if (model == "heisenberg" && n == 100) return -44.127739893;
  return std::nan("");
}

Json run(const std::string& model, bool u1, int n, int chi, double* seconds_out = nullptr) {
  // The job attnphys dmrg runs (mps::run_dmrg), without the variance and magnetisation: the time is the sweeps and
  // the final energy.
  mps::DmrgRunConfig cfg;
  cfg.model.model = spin::parse_model_kind(model);
  cfg.model.n = n;
  cfg.model.bc = spin::Boundary::Open;
  cfg.model.h = 1.0;
  cfg.chi = chi;
  cfg.sweeps = 12;
  cfg.cutoff = 1e-12;
  cfg.noise = 1e-5;
  cfg.niter = 4;
  cfg.symmetry = u1 ? mps::Symmetry::U1 : mps::Symmetry::None;
  cfg.variance = false;
  cfg.magnetization = false;
  const auto t0 = std::chrono::steady_clock::now();
  const mps::DmrgRunResult res = mps::run_dmrg(cfg);
  const mps::DmrgResult& r = res.run;
  const double e = res.energy;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (seconds_out) *seconds_out = seconds;
  const double exact = exact_energy(model, n);
  std::fprintf(stderr, "%s %s N=%d chi=%d: E = %.12f (error %.2e), %d sweeps, %.2f s, max RSS %.0f MiB%s\n",
               model.c_str(), u1 ? "U(1)" : "dense", n, chi, e, e - exact, r.sweeps, seconds, max_rss_mib(),
               r.converged ? "" : (" NOT CONVERGED: " + r.convergence_reason).c_str());
  Json j = Json::object();
  j.set("symmetry", u1 ? "u1" : "none");
  j.set("n", n);
  j.set("chi", chi);
  j.set("energy", e);
  j.set("energy_error", std::isnan(exact) ? Json() : Json(e - exact));
  j.set("seconds", seconds);
  j.set("max_rss_mib", max_rss_mib());
  j.set("sweeps", r.sweeps);
  j.set("converged", r.converged);
  j.set("max_bond_dimension", r.max_bond_dimension);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  std::string one;
  int n = 100, chi = 0;
  for (int k = 1; k + 1 < argc; ++k) {
    if (!std::strcmp(argv[k], "--case")) one = argv[++k];
    else if (!std::strcmp(argv[k], "--n")) n = std::atoi(argv[++k]);
    else if (!std::strcmp(argv[k], "--chi")) chi = std::atoi(argv[++k]);
  }
  if (!one.empty()) {
    if (one != "heisenberg_u1" && one != "heisenberg_dense" && one != "tfim") {
      std::fprintf(stderr, "bench_dmrg: unknown case '%s' (heisenberg_u1 | heisenberg_dense | tfim)\n", one.c_str());
      return 2;
    }
    const bool tfim = one == "tfim";
    Json j = run(tfim ? "tfim" : "heisenberg", one == "heisenberg_u1", n, chi > 0 ? chi : (tfim ? 64 : 100));
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  Json out = Json::object();
  out.set("tfim_n100_chi64", run("tfim", false, 100, 64));
  double td = 0, tu = 0;
  Json hd = run("heisenberg", false, 100, 100, &td), hu = run("heisenberg", true, 100, 100, &tu);
  out.set("heisenberg_n100_chi100_dense", hd);
  out.set("heisenberg_n100_chi100_u1", hu);
  out.set("u1_speedup", td / tu);
  out.set("machine", bench::machine_json());
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
