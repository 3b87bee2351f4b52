// How close the FTCS heat kernel runs to the memory bandwidth, what an ADI step costs next to it, and how long
// each scheme takes to reach a relative L2 error of 1e-3 — the strong baseline a learned surrogate is measured
// against. The peer is the machine's own copy: a large Kokkos deep_copy timed in the same run.
//
// A naive FTCS step (constant κ, periodic, ping-pong between two arrays, no copy) reads u once and writes u_new
// once: 16 bytes per cell for doubles (the neighbours come from cache). The effective bandwidth counts exactly
// those 16 bytes per cell update, the same as a copy counts per element, so fraction_of_copy_bandwidth = FTCS
// bytes/s ÷ deep_copy bytes/s (the usual figure of merit for stencil codes). On host builds the solver takes two
// steps per sweep (HeatOperator::ftcs_two_steps: the intermediate level lives in a ring of three slices that stays
// in cache), so its real traffic is 16 bytes (24 with write-allocate) per two cell updates, and the fraction can
// pass what a one-step-per-sweep kernel could reach (about 2/3: a write-allocating cache also reads u_new's lines,
// while memcpy streams its stores). advance() below is exactly what users call.
// Usage: bench_heat_ftcs_bandwidth [--quick]. Last stdout line: one JSON object.
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>

#include "bench_common.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"

using namespace attnphys;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best of `reps` timings of f() (after one warm-up call), the same protocol for the copy and the stencil: on a shared
// VM one core can run much slower than the other for a while, and the best of several runs is the machine's speed.
template <class F>
double best_time(int reps, F&& f) {
  f();
  Kokkos::fence();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    Kokkos::fence();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

double copy_bandwidth_gbs(long n) {
  View1<double> a("a", n), b("b", n);
  Kokkos::deep_copy(a, 1.0);
  const double t = best_time(7, [&] { Kokkos::deep_copy(b, a); });
  return 2.0 * 8.0 * n / t / 1e9;
}

struct FtcsFigures {
  double step_s, cell_updates_per_s, gbs;
};

FtcsFigures ftcs_figures(int dim, long n, int steps) {
  auto p = heat::make_problem(dim, {n, n, n}, {1.0 / n, 1.0 / n, 1.0 / n}, 1.0, "periodic");
  fd::HeatStepper s(p, fd::Method::Ftcs);
  auto u = s.make_state();
  Kokkos::deep_copy(u, 1.0);
  const double dt = s.ftcs_limit();
  const double t = best_time(7, [&] { s.advance(u, 0.0, steps * dt, dt); }) / steps;
  const double cells = double(u.size());
  return {t, cells / t, 16.0 * cells / t / 1e9};
}

double adi_step_s(int dim, long n, int steps) {
  auto p = heat::make_problem(dim, {n, n, n}, {1.0 / n, 1.0 / n, 1.0 / n}, 1.0, "periodic");
  fd::HeatStepper s(p, fd::Method::Adi);
  auto u = s.make_state();
  Kokkos::deep_copy(u, 1.0);
  const double dt = 10 * s.ftcs_limit();
  return best_time(3, [&] { s.advance(u, 0.0, steps * dt, dt); }) / steps;
}

// Time for one scheme to reach rel L2 ≤ target at t_end on a periodic sum of eigenmodes (exact solution known):
// the largest step of the form t_end/2^m meeting the target (FTCS: its stability limit, then halving).
struct Tta {
  double seconds = -1, error = -1;
  long steps = 0;
};
Tta time_to_accuracy(int dim, long n, fd::Method method, double target) {
  const double kappa = 1.0, t_end = 0.01, h = 1.0 / n;
  auto p = heat::make_problem(dim, {n, n, 1}, {h, h, 1}, kappa, "periodic");
  const int modes[3][2] = {{1, 1}, {2, 3}, {4, 1}};
  const double amp[3] = {1.0, 0.5, 0.3};
  HostView3<double> h0("u0", 1, dim == 2 ? n : 1, n), hx("exact", 1, dim == 2 ? n : 1, n);
  for (long j = 0; j < long(h0.extent(1)); ++j)
    for (long i = 0; i < n; ++i) {
      double v = 0, w = 0;
      for (int m = 0; m < 3; ++m) {
        const double kx = 2 * M_PI * modes[m][0], ky = dim == 2 ? 2 * M_PI * modes[m][1] : 0.0;
        const double f = amp[m] * std::sin(kx * i * h + 0.3) * (dim == 2 ? std::cos(ky * j * h) : 1.0);
        v += f;
        w += f * std::exp(-kappa * (kx * kx + ky * ky) * t_end);
      }
      h0(0, j, i) = v;
      hx(0, j, i) = w;
    }
  View3<double> u0("u0", h0.extent(0), h0.extent(1), h0.extent(2));
  Kokkos::deep_copy(u0, h0);
  fd::HeatStepper probe(p, method);
  double dt = method == fd::Method::Ftcs ? probe.ftcs_limit() : t_end;
  Tta best;
  for (int attempt = 0; attempt < 24; ++attempt, dt /= 2) {
    fd::HeatSolveOptions o;
    o.method = method;
    o.dt = dt;
    const auto t0 = Clock::now();
    auto sol = fd::solve(p, u0, t_end, o);
    Kokkos::fence();
    const double secs = seconds_since(t0);
    auto hu = to_host(sol.u);
    double e2 = 0, n2 = 0;
    for (std::size_t i = 0; i < hu.size(); ++i) {
      e2 += std::pow(hu.data()[i] - hx.data()[i], 2);
      n2 += std::pow(hx.data()[i], 2);
    }
    const double err = std::sqrt(e2 / n2);
    if (err <= target) return {secs, err, sol.steps};
    best = {-1, err, sol.steps};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  Json out = Json::object();
  out.set("machine", bench::machine_json());
  {
    const double copy = copy_bandwidth_gbs(quick ? (1L << 22) : (1L << 25));
    std::cout << "copy bandwidth (Kokkos deep_copy, read + write): " << copy << " GB/s\n";
    const auto f2 = ftcs_figures(2, 1024, quick ? 5 : 50);
    const auto f3 = ftcs_figures(3, 128, quick ? 3 : 20);
    std::cout << "FTCS 2D 1024^2: " << f2.cell_updates_per_s / 1e9 << " G cell updates/s, " << f2.gbs
              << " GB/s effective (" << 100 * f2.gbs / copy << "% of copy)\n";
    std::cout << "FTCS 3D 128^3: " << f3.cell_updates_per_s / 1e9 << " G cell updates/s, " << f3.gbs
              << " GB/s effective (" << 100 * f3.gbs / copy << "% of copy)\n";
    const double adi2 = adi_step_s(2, 1024, quick ? 2 : 10), adi3 = adi_step_s(3, 128, quick ? 1 : 5);
    std::cout << "ADI step / FTCS step: 2D " << adi2 / f2.step_s << ", 3D " << adi3 / f3.step_s << "\n";
    const double target = 1e-3;
    const long n2 = quick ? 128 : 256, n1 = quick ? 512 : 1024;
    const auto tf2 = time_to_accuracy(2, n2, fd::Method::Ftcs, target);
    const auto ta2 = time_to_accuracy(2, n2, fd::Method::Adi, target);
    const auto tf1 = time_to_accuracy(1, n1, fd::Method::Ftcs, target);
    const auto tc1 = time_to_accuracy(1, n1, fd::Method::CrankNicolson, target);
    std::cout << "time to rel L2 <= 1e-3 at t = 0.01, 2D " << n2 << "^2: FTCS " << tf2.seconds << " s (" << tf2.steps
              << " steps, err " << tf2.error << "), ADI " << ta2.seconds << " s (" << ta2.steps << " steps, err "
              << ta2.error << ")\n";
    std::cout << "time to rel L2 <= 1e-3 at t = 0.01, 1D " << n1 << ": FTCS " << tf1.seconds << " s (" << tf1.steps
              << " steps), CN " << tc1.seconds << " s (" << tc1.steps << " steps)\n";
    out.set("fraction_of_copy_bandwidth", f2.gbs / copy)
        .set("ratio", copy / f2.gbs)
        .set("copy_bandwidth_gbs", copy)
        .set("ftcs2d_cell_updates_per_s", f2.cell_updates_per_s)
        .set("ftcs2d_bandwidth_gbs", f2.gbs)
        .set("ftcs3d_cell_updates_per_s", f3.cell_updates_per_s)
        .set("ftcs3d_bandwidth_gbs", f3.gbs)
        .set("ftcs3d_fraction_of_copy_bandwidth", f3.gbs / copy)
        .set("adi_over_ftcs_step_cost", adi2 / f2.step_s)
        .set("adi3d_over_ftcs_step_cost", adi3 / f3.step_s)
        .set("tta_grid_2d", n2)
        .set("tta_ftcs2d_s", tf2.seconds)
        .set("tta_ftcs2d_steps", tf2.steps)
        .set("tta_adi2d_s", ta2.seconds)
        .set("tta_adi2d_steps", ta2.steps)
        .set("tta_adi_speedup_over_ftcs", ta2.seconds > 0 ? tf2.seconds / ta2.seconds : -1.0)
        .set("tta_ftcs1d_s", tf1.seconds)
        .set("tta_cn1d_s", tc1.seconds)
        .set("tta_cn_speedup_over_ftcs", tc1.seconds > 0 ? tf1.seconds / tc1.seconds : -1.0)
        .set("execution_space", std::string(ExecSpace::name()))
        .set("quick", quick);
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
