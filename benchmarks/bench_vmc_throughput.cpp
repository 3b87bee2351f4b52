// VMC throughput of the default transformer ansatz (issue 17): periodic Heisenberg chains, the defaults of
// `attnphys vmc --model heisenberg --n N --bc periodic` (1024 samples, 64 chains, exchange moves in 2Sz = 0, SR),
// one rank. For each N it runs `--warmup` iterations, then `--iters` timed ones, and reports the median seconds per
// iteration and the median of each phase (sampling, local energies, per-sample gradients, update = SR solve), with
// samples/s (samples with their local energies per second of sampling + local energy, and samples per second of
// whole iterations), and the 1-minute load average before and after (figures under load are not quiet ones).
//
//   benchmarks/run vmc_throughput [--sizes 20,100] [--iters 5] [--warmup 2] [--set key=value ...]
//
// The last stdout line is JSON: s_per_iter_n20, s_per_iter_n100 (floors of issue 17: <= 0.35 and <= 3), the per-size
// blocks and the machine block. Time it on quiet cores: `flock /tmp/attnphys-bench.lock benchmarks/run vmc_throughput`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/options.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/solvers/vmc/run.hpp"

using namespace attnphys;

namespace {

// The 1-minute load average (/proc/loadavg; -1 where there is none): figures taken while other processes run are
// loaded, and the JSON says so.
double load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  double a = -1;
  if (f) {
    if (std::fscanf(f, "%lf", &a) != 1) a = -1;
    std::fclose(f);
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Json run(long n, long warmup, long iters, const std::vector<std::string>& sets, double& s_per_iter,
         double& samples_per_s) {
  OptionSet set;
  vmc::VmcRunConfig cfg;
  cfg.declare(set);
  set.set("model.model=heisenberg");
  set.set("model.n=" + std::to_string(n));
  set.set("model.bc=periodic");
  for (const auto& s : sets) set.set(s);
  cfg.vmc.n_iter = warmup + iters;
  cfg.apply_defaults(set);
  auto psi = vmc::make_ansatz(cfg);
  spin::SpinHamiltonian H(cfg.model);
  vmc::VmcDriver<double> driver(*psi, H, cfg.vmc);
  std::vector<double> total, samp, energy, grad, update, tau, acc;
  double last_e = 0;
  for (long k = 0; k < warmup + iters; ++k) {
    const vmc::VmcStep s = driver.step();
    std::fprintf(stderr, "N=%ld it %ld: %.3f s (sample %.3f, energy %.3f, gradients %.3f, update %.3f) E %.5f tau %.2f\n",
                 n, k, s.seconds, s.sample_seconds, s.energy_seconds, s.gradient_seconds, s.update_seconds,
                 s.energy, s.tau);
    if (k < warmup) continue;
    total.push_back(s.seconds);
    samp.push_back(s.sample_seconds);
    energy.push_back(s.energy_seconds);
    grad.push_back(s.gradient_seconds);
    update.push_back(s.update_seconds);
    tau.push_back(s.tau);
    acc.push_back(s.acceptance);
    last_e = s.energy;
  }
  const double M = double(driver.sampler().n_samples());
  s_per_iter = median(total);
  samples_per_s = M / (median(samp) + median(energy));
  Json j = Json::object();
  j.set("n", n);
  j.set("n_parameters", psi->n_parameters());
  j.set("n_samples", long(M));
  j.set("n_chains", cfg.vmc.sampler.n_chains);
  j.set("sweep_size", driver.sampler().sweep_size());
  j.set("n_discard", cfg.vmc.sampler.n_discard);
  j.set("iterations_timed", iters);
  j.set("s_per_iter", median(total));
  j.set("sample_s", median(samp));
  j.set("energy_s", median(energy));
  j.set("gradient_s", median(grad));
  j.set("update_s", median(update));
  j.set("samples_per_s", M / (median(samp) + median(energy)));
  j.set("iteration_samples_per_s", M / median(total));
  j.set("tau", median(tau));
  j.set("acceptance", median(acc));
  j.set("last_energy", last_e);
  j.set("s_per_iter_all", total);
  j.set("float32_proposals", cfg.vmc.sampler.float32);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  std::vector<long> sizes = {20, 100};
  long iters = 5, warmup = 2;
  std::vector<std::string> sets;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vmc_throughput: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--sizes") {
      sizes.clear();
      std::string s = next();
      for (std::size_t p = 0; p < s.size();) {
        const std::size_t q = s.find(',', p);
        sizes.push_back(std::stol(s.substr(p, q - p)));
        p = q == std::string::npos ? s.size() : q + 1;
      }
    } else if (a == "--iters") {
      iters = std::max(1L, std::stol(next()));
    } else if (a == "--warmup") {
      warmup = std::max(0L, std::stol(next()));
    } else if (a == "--set") {
      sets.push_back(next());
    } else {
      std::fprintf(stderr, "vmc_throughput: unknown argument '%s' (use --sizes, --iters, --warmup, --set key=value)\n",
                   a.c_str());
      return 2;
    }
  }
  Json out = Json::object();
  out.set("benchmark", "vmc_throughput");
  out.set("model", "heisenberg periodic, default transformer");
  std::vector<double> spi(sizes.size()), sps(sizes.size());
  std::vector<Json> blocks;
  out.set("load_average_start", load_average());
  for (std::size_t k = 0; k < sizes.size(); ++k) blocks.push_back(run(sizes[k], warmup, iters, sets, spi[k], sps[k]));
  out.set("load_average_end", load_average());
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    out.set("s_per_iter_n" + std::to_string(sizes[k]), spi[k]);
    out.set("samples_per_s_n" + std::to_string(sizes[k]), sps[k]);
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) out.set("n" + std::to_string(sizes[k]), blocks[k]);
  out.set("machine", bench::machine_json());
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
