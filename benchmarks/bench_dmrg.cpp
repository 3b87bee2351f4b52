// DMRG reference runs of issue 7: open Heisenberg N = 100 at chi = 100 and critical TFIM N = 100 at chi = 64, both
// from product states, with wall time, peak memory (max RSS, cumulative over the process) and the energy error.
// ITensor v3 (the tool a user would pick instead) is not installed here; its times on this machine kind
// (shared/ANCHORS.md: ~23 s dense / ~10 s with U(1) for Heisenberg, ~5 s for TFIM) are printed for reference,
// and `ratio` is ours over those reference times.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "bench_common.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/solvers/mps/dmrg.hpp"
#include "attnphys/solvers/mps/observables.hpp"

using namespace attnphys;

namespace {

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

Json run(const std::string& model, int chi, double exact, double reference_seconds) {
  spin::ChainModel m;
  m.model = model;
  m.n = 100;
  m.bc = "open";
  m.h = 1.0;
  const mps::Mpo h = mps::chain_mpo(m);
  mps::Mps psi = model == "tfim" ? mps::Mps::uniform_product(m.n, Eigen::Vector2d(1.0, 1.0)) : mps::Mps::neel(m.n);
  const auto t0 = std::chrono::steady_clock::now();
  const mps::DmrgResult r = mps::dmrg(h, psi, mps::default_sweeps(chi, 12, 1e-12, 1e-5, 4));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double e = mps::expectation(h, psi);
  std::fprintf(stderr, "%s N=100 chi=%d: E = %.12f (error %.2e), %d sweeps, %.2f s, max RSS %.0f MiB\n",
               model.c_str(), chi, e, e - exact, r.sweeps, seconds, max_rss_mib());
  Json j = Json::object();
  j.set("energy", e);
  j.set("energy_error", e - exact);
  j.set("seconds", seconds);
  j.set("max_rss_mib", max_rss_mib());
  j.set("sweeps", r.sweeps);
  j.set("max_bond_dimension", r.max_bond_dimension);
  j.set("itensor_reference_seconds", reference_seconds);
  j.set("ratio", seconds / reference_seconds);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  Json out = Json::object();
  out.set("tfim_n100_chi64", run("tfim", 64, -126.961876739681, 5.0));
  out.set("heisenberg_n100_chi100", run("heisenberg", 100, -44.127739893, 23.0));
  out.set("peer", "ITensor v3 times from shared/ANCHORS.md (not measured in this run)");
  out.set("machine", bench::machine_json());
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
