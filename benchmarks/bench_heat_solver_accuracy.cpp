// What a surrogate of a heat-problem family has to beat: the time per sample of the ADI solver (Douglas in 3D,
// Peaceman–Rachford in 2D, Crank–Nicolson in 1D) at a given accuracy, against the number of steps per horizon.
//
// Problems: the variable-κ family of configs/heat_dataset_3d_kappa.toml — log-normal κ per sample (contrast 10,
// length scale 0.15, around κ̄ = 1), Dirichlet sides with random boundary data, Gaussian random initial fields
// (length scale 0.15) — on an n^dim grid, samples built exactly as `attnphys heat dataset` builds them
// (fd::HeatSampleSolver). For each horizon Δt (in explicit stability limits of the family's largest κ) and each
// step count m, every sample is advanced over Δt with m equal steps; the error is the relative L2 distance to a
// reference of the same scheme with R = 4·max(m) steps (its own time error is estimated by Richardson from R/2
// steps: |u_R − u_{R/2}| / 3, reported), and the time per sample counts the stepper's set-up (face coefficients for
// the sample's κ, forcing, factorisations) and the steps, as a user solving a new sample would pay. Spatial error is
// not part of it: a surrogate trained on the solver's data is measured against the same discrete solution.
// `ms_at` lists, per accuracy, the fewest measured m that reaches it and its time per sample.
//
// Times are the best of --reps runs per sample (the cores may be shared).
// Usage: bench_heat_solver_accuracy [--dim 3] [--n 64] [--samples 2] [--limits 100,1000] [--max-steps 64]
//        [--reps 3] [--quick]   (--quick: 3D 24³, 1 sample, max 16 steps). Last stdout line: one JSON object.
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnphys/core/json.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"
#include "bench_common.hpp"

using namespace attnphys;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::stod(item));
  return v;
}

double rel_l2(const View3<double>& a, const View3<double>& b) {
  double e = 0, n = 0;
  Kokkos::parallel_reduce(
      "bench::rel_l2_num", Kokkos::RangePolicy<ExecSpace>(0, long(a.size())),
      KOKKOS_LAMBDA(long i, double& s) {
        const double d = a.data()[i] - b.data()[i];
        s += d * d;
      },
      e);
  Kokkos::parallel_reduce(
      "bench::rel_l2_den", Kokkos::RangePolicy<ExecSpace>(0, long(b.size())),
      KOKKOS_LAMBDA(long i, double& s) { s += b.data()[i] * b.data()[i]; }, n);
  return std::sqrt(e / (n > 0 ? n : 1.0));
}

// u0 advanced over [0, dt] with m steps of a stepper built here for the problem; returns the seconds (set-up + steps).
double solve(const heat::HeatProblem& p, const View3<double>& u0, double dt, long m, View3<double>& out) {
  out = View3<double>("bench::u", u0.extent(0), u0.extent(1), u0.extent(2));
  Kokkos::deep_copy(out, u0);
  Kokkos::fence();
  const auto t0 = Clock::now();
  fd::HeatStepper s(p, fd::Method::Adi);
  const long taken = s.advance(out, 0.0, dt, dt / double(m));
  Kokkos::fence();
  const double t = seconds_since(t0);
  if (taken != m) throw std::runtime_error("step count mismatch");
  return t;
}

int run(int argc, char** argv) {
  int dim = 3;
  long n = 64, samples = 2, max_steps = 64, reps = 3;
  std::vector<double> limits{100, 1000};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--dim") dim = std::stoi(next());
    else if (a == "--n") n = std::stol(next());
    else if (a == "--samples") samples = std::stol(next());
    else if (a == "--limits") limits = parse_list(next());
    else if (a == "--max-steps") max_steps = std::stol(next());
    else if (a == "--reps") reps = std::stol(next());
    else if (a == "--quick") dim = 3, n = 24, samples = 1, max_steps = 16;
    else {
      std::cerr << "usage: bench_heat_solver_accuracy [--dim 3] [--n 64] [--samples 2] [--limits 100,1000] "
                   "[--max-steps 64] [--reps 3] [--quick]\n";
      return 2;
    }
  }
  if (dim < 1 || dim > 3 || n < 8 || samples < 1 || max_steps < 1 || reps < 1) {
    std::cerr << "bench_heat_solver_accuracy: dim 1..3, n >= 8, samples >= 1, max-steps >= 1, reps >= 1\n";
    return 2;
  }
  const double h = 1.0 / double(n);
  const heat::HeatProblem base = heat::make_problem(dim, {n, dim > 1 ? n : 1, dim > 2 ? n : 1},
                                                    {h, dim > 1 ? h : 1.0, dim > 2 ? h : 1.0}, 1.0, "dirichlet");
  heat::HeatFamilyOptions fo;
  fo.kappa = heat::KappaFamily::LogNormal;
  fo.kappa_contrast = 10.0;
  fo.kappa_length_scale = 0.15;
  fo.boundary = heat::BoundaryFamily::Random;
  const heat::HeatFamily family = fo.build(base, 0);
  heat::InitialConditionOptions ic;
  ic.length_scale = 0.15;
  // The explicit stability limit of the family's largest κ (Dirichlet sides included).
  heat::HeatProblem bound = base;
  bound.kappa = family.kappa_bound(base);
  const double limit = fd::HeatStepper(bound, fd::Method::Ftcs).ftcs_limit();

  std::vector<long> counts;
  for (long m : {1L, 2L, 3L, 4L, 6L, 8L, 12L, 16L, 24L, 32L, 48L, 64L, 96L, 128L, 192L, 256L})
    if (m <= max_steps) counts.push_back(m);
  const long R = 4 * counts.back();
  const double accuracies[] = {3e-2, 1e-2, 3e-3, 1e-3, 1e-4};

  Json out = Json::object();
  out.set("benchmark", "heat_solver_accuracy").set("dim", dim).set("n", n).set("samples", samples);
  out.set("family", family.describe()).set("bc", "dirichlet").set("ic_length_scale", ic.length_scale);
  out.set("method", dim == 1 ? "cn" : dim == 2 ? "adi (Peaceman-Rachford)" : "adi (Douglas)");
  out.set("explicit_limit", limit).set("reference_steps", R);
  Json hz = Json::array();
  std::printf("heat solver accuracy: %dD %ld^%d, %s, %ld sample(s); reference %ld steps per horizon\n", dim, n, dim,
              family.describe().c_str(), samples, R);
  for (double L : limits) {
    const double dt = L * limit;
    fd::HeatPairOptions po;
    po.delta_t = dt;
    const fd::HeatSampleSolver gen(base, ic, family, po);
    std::vector<heat::HeatProblem> probs;
    std::vector<View3<double>> u0, ref;
    double ref_err = 0, ref_seconds = 0;
    for (long s = 0; s < samples; ++s) {
      probs.push_back(gen.problem(s));
      u0.push_back(gen.initial(s));
      View3<double> r, half;
      ref_seconds += solve(probs.back(), u0.back(), dt, R, r);
      solve(probs.back(), u0.back(), dt, R / 2, half);
      ref_err = std::max(ref_err, rel_l2(half, r) / 3.0);
      ref.push_back(r);
    }
    // The set-up alone (face coefficients, forcing): part of every count's time below.
    double setup = 1e300;
    for (long r = 0; r < reps; ++r) {
      Kokkos::fence();
      const auto t0 = Clock::now();
      fd::HeatStepper st(probs[0], fd::Method::Adi);
      Kokkos::fence();
      setup = std::min(setup, seconds_since(t0));
    }
    Json curve = Json::array();
    std::vector<double> errs, ms;
    std::printf("  horizon %.4g = %.0f explicit limits (reference's own error ~%.1e, %.0f ms per sample; stepper "
                "set-up %.2f ms, included below):\n", dt, L, ref_err, 1e3 * ref_seconds / double(samples), 1e3 * setup);
    for (long m : counts) {
      double e = 0, t = 0;
      for (long s = 0; s < samples; ++s) {
        View3<double> u;
        double best = 1e300;  // best of `reps` (the cores may be shared)
        for (long r = 0; r < reps; ++r) best = std::min(best, solve(probs[std::size_t(s)], u0[std::size_t(s)], dt, m, u));
        t += best;
        e += rel_l2(u, ref[std::size_t(s)]);
      }
      e /= double(samples);
      t = 1e3 * t / double(samples);
      errs.push_back(e);
      ms.push_back(t);
      std::printf("    %4ld steps: relative L2 %.3e, %9.2f ms per sample\n", m, e, t);
      Json c = Json::object();
      c.set("steps", m).set("rel_l2", e).set("ms_per_sample", t);
      curve.push_back(c);
    }
    Json at = Json::object();
    for (double a : accuracies) {
      Json v;  // null: not reached with the counts measured (or below the reference's own error)
      for (std::size_t i = 0; i < counts.size(); ++i)
        if (errs[i] <= a && a > 3 * ref_err) {
          Json c = Json::object();
          c.set("steps", counts[i]).set("rel_l2", errs[i]).set("ms_per_sample", ms[i]);
          v = c;
          break;
        }
      char key[16];
      std::snprintf(key, sizeof key, "%.0e", a);
      at.set(key, v);
    }
    Json o = Json::object();
    o.set("delta_t", dt).set("explicit_limits", L).set("reference_error_estimate", ref_err);
    o.set("reference_ms_per_sample", 1e3 * ref_seconds / double(samples)).set("setup_ms", 1e3 * setup);
    o.set("curve", curve).set("ms_at", at);
    hz.push_back(o);
  }
  out.set("horizons", hz);
  out.set("machine", bench::machine_json());
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  try {
    return run(argc, argv);  // every view is gone when it returns
  } catch (const std::exception& e) {
    std::cerr << "bench_heat_solver_accuracy: " << e.what() << "\n";
    return 1;
  }
}
