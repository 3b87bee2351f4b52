// The attnphys C++ library from a project of its own (examples/cpp/CMakeLists.txt): a heat solve against the
// exact solution and an exact diagonalisation against the free-fermion closed form. Exits non-zero if either is off.
#include <cmath>
#include <cstdio>

#include "attnphys/core/runtime.hpp"
#include "attnphys/core/views.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"
#include "attnphys/physics/spin/chain_model.hpp"
#include "attnphys/solvers/ed/exact.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"

namespace ap = attnphys;

// u_t = kappa u_xx on the periodic unit interval from sin(2 pi x): u = exp(-4 pi^2 kappa t) sin(2 pi x).
// Crank-Nicolson is second order: the error falls 4x per halving of the grid spacing.
static double heat_error(long n, double kappa, double t_end) {
  const double h = 1.0 / n, k = 2 * M_PI;
  ap::heat::HeatProblem problem = ap::heat::make_problem(1, {n, 1, 1}, {h, 1.0, 1.0}, kappa, "periodic");
  ap::View3<double> u0("u0", 1, 1, n);  // (batch, 1, nx) in 1D
  auto u0_host = Kokkos::create_mirror_view(u0);
  for (long i = 0; i < n; ++i) u0_host(0, 0, i) = std::sin(k * problem.coord(0, i));
  Kokkos::deep_copy(u0, u0_host);

  ap::fd::HeatSolveOptions options;
  options.method = ap::fd::Method::CrankNicolson;
  options.dt = 0.1 * h;
  ap::fd::HeatSolution solution = ap::fd::solve(problem, u0, t_end, options);
  auto u = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), solution.u);

  const double decay = std::exp(-kappa * k * k * t_end);
  double err2 = 0, norm2 = 0;
  for (long i = 0; i < n; ++i) {
    const double exact = decay * u0_host(0, 0, i);
    err2 += (u(0, 0, i) - exact) * (u(0, 0, i) - exact);
    norm2 += exact * exact;
  }
  return std::sqrt(err2 / norm2);
}

int main(int argc, char** argv) {
  ap::Runtime runtime(argc, argv);  // initialises Kokkos (and MPI when built in); finalises at the end of main
  int failures = 0;

  const double e32 = heat_error(32, 0.5, 0.05), e64 = heat_error(64, 0.5, 0.05);
  const double order = std::log2(e32 / e64);
  std::printf("heat, Crank-Nicolson: relative L2 error %.3e (n = 32), %.3e (n = 64), observed order %.2f\n", e32,
              e64, order);
  if (!(e64 < 1e-3 && order > 1.8 && order < 2.2)) {
    std::printf("FAILED: expected second-order convergence to the exact solution\n");
    ++failures;
  }

  ap::spin::ChainModel tfim;  // critical transverse-field Ising chain, H = -J sum Z Z - h sum X
  tfim.model = ap::spin::ModelKind::Tfim;
  tfim.n = 12;
  tfim.bc = ap::spin::Boundary::Open;
  const ap::ed::EdResult ed = ap::ed::exact_ground_state(tfim);
  const double exact = ap::ed::tfim_energy_open(tfim.n, tfim.J, tfim.h);
  const double rel = std::abs(ed.energies[0] - exact) / std::abs(exact);
  std::printf("ED, %s: E0 = %.12f in the sector %s (dimension %ld), free fermions %.12f, relative error %.1e\n",
              tfim.describe().c_str(), ed.energies[0], ed.sector.c_str(), ed.dimension, exact, rel);
  if (!(rel < 1e-10)) {
    std::printf("FAILED: exact diagonalisation disagrees with the closed form\n");
    ++failures;
  }

  std::printf(failures ? "FAILED\n" : "OK\n");
  return failures ? 1 : 0;
}
