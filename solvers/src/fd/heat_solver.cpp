#include "attnphys/solvers/fd/heat_solver.hpp"

#include <algorithm>
#include <cmath>

namespace attnphys::fd {

Method parse_method(const std::string& name) {
  if (const auto m = find_enum<Method>(name)) return *m;
  fail("unknown heat method '", name, "': use ftcs, cn (1D) or adi");
}

std::string to_string(Method m) { return enum_name(m); }

HeatStepper::HeatStepper(const heat::HeatProblem& problem, Method method, bool substep)
    : op_(problem), method_(method), substep_(substep) {
  require(method != Method::CrankNicolson || problem.grid.dim == 1,
          "Crank-Nicolson ('cn') is implemented in 1D only; use 'adi' in ", problem.grid.dim, "D");
}

View3<double> HeatStepper::make_state(long batch) const {
  const auto e = op_.spatial();
  require(batch >= 1, "batch must be at least 1, got ", batch);
  require(batch == 1 || op_.dim() < 3, "3D states hold one sample; advance samples one at a time");
  if (op_.dim() == 3) return View3<double>("attnphys::heat_state", e[0], e[1], e[2]);
  return View3<double>("attnphys::heat_state", batch, e[1], e[2]);
}

void HeatStepper::check_state(const View3<double>& u) const {
  const auto e = op_.spatial();
  const int d = op_.dim();
  const bool ok = long(u.extent(2)) == e[2] && long(u.extent(1)) == e[1] &&
                  (d < 3 ? u.extent(0) >= 1 : long(u.extent(0)) == e[0]);
  require(ok, "heat state has shape (", u.extent(0), ", ", u.extent(1), ", ", u.extent(2), ") but the ", d,
          "D grid needs ", d == 3 ? msg("(", e[0], ", ", e[1], ", ", e[2], ")") : msg("(batch, ", e[1], ", ", e[2], ")"),
          " in (z|batch, y, x) order");
}

void HeatStepper::ensure_work(const View3<double>& u) {
  if (tmp_.extent(0) != u.extent(0) || tmp_.extent(1) != u.extent(1) || tmp_.extent(2) != u.extent(2))
    tmp_ = View3<double>("attnphys::heat_work", u.extent(0), u.extent(1), u.extent(2));
  if (op_.has_forcing() && G_.size() == 0) {
    const auto e = op_.spatial();
    G_ = View3<double>("attnphys::heat_forcing", e[0], e[1], e[2]);
    // FTCS takes all of a static forcing at every step: load it once.
    if (method_ == Method::Ftcs && !op_.forcing_time_dependent()) op_.forcing(G_, {{1.0, 0.0, HeatOperator::AllParts}});
  }
}

void HeatStepper::ftcs_step(const View3<double>& in, const View3<double>& out, double t, double dt) {
  if (op_.forcing_time_dependent()) op_.forcing(G_, {{1.0, t, HeatOperator::AllParts}});
  op_.combine(out, in, in, {dt, dt, dt}, op_.has_forcing() ? dt : 0.0, G_, 0.0, {});
}

namespace {
// kappa dt / dx^2 must be a number double precision can step with: a cell width of 1e-200 (1/dx^2 overflows) or a
// kappa of 1e300 made every coefficient infinite, and a step 10^17 times the stability limit loses the identity in
// the implicit solve's I + r L (Neumann sides: a zero pivot, -inf everywhere); both gave a non-finite solution
// without a word (found by fuzz_arrays). Implicit steps up to 10^12 limits are fine (auto dt stays near N / 2 pi).
void require_representable(double ftcs_limit, double dt) {
  const double ratio = dt / ftcs_limit;
  require(ftcs_limit > 0 && ratio <= 1e12, "the time step dt = ", dt, " is ", ratio,
          " times the FTCS stability limit ", ftcs_limit, " (kappa dt / dx^2 beyond 10^12, or not finite): double "
          "precision cannot take such a step; use a smaller dt, or rescale the cell width, kappa or the time unit");
}
}  // namespace

void HeatStepper::step(const View3<double>& u, double t, double dt) {
  using H = HeatOperator;
  require_representable(ftcs_limit(), dt);
  check_state(u);
  ensure_work(u);
  const bool g = op_.has_forcing();
  const double w = g ? 1.0 : 0.0;  // weight of G_ in combine (0 skips it)
  const double h = 0.5 * dt;
  auto load = [&](std::vector<H::ForcingTerm> terms) {
    if (g) op_.forcing(G_, terms);
  };
  if (method_ == Method::Ftcs) {
    long sub = 1;
    if (dt > ftcs_limit() * (1 + 1e-12)) {
      require(substep_, "FTCS time step dt = ", dt, " exceeds the stability limit dt_max = ", ftcs_limit(),
              " (sum_i kappa_max dt/dx_i^2 <= 1/2; 2/3 of that next to Dirichlet sides): use dt <= ", ftcs_limit(),
              ", an implicit method (cn, adi), or allow sub-steps (solver.substep = true)");
      const double subs = std::ceil(dt / ftcs_limit());
      require(subs <= 1e12, "FTCS time step dt = ", dt, " needs ", subs, " stable sub-steps of ", ftcs_limit(),
              " (more than 10^12): use an implicit method (cn, adi) or a smaller dt");
      sub = static_cast<long>(subs);
    }
    for (long s = 0; s < sub; ++s) {
      ftcs_step(u, tmp_, t + s * (dt / sub), dt / sub);
      Kokkos::deep_copy(u, tmp_);
    }
    return;
  }
  const unsigned X = H::BoundaryX | H::Source, Y = H::BoundaryY, Z = H::BoundaryZ;
  if (op_.dim() == 1) {  // Crank–Nicolson
    load({{h, t, H::AllParts}, {h, t + dt, H::AllParts}});
    op_.combine(tmp_, u, u, {h, 0, 0}, w, G_, 0.0, {});
    op_.solve_lines(0, h, tmp_);
    Kokkos::deep_copy(u, tmp_);
  } else if (op_.dim() == 2) {  // Peaceman–Rachford
    load({{h, t + h, X}, {h, t, Y}});
    op_.combine(tmp_, u, u, {0, h, 0}, w, G_, 0.0, {});
    op_.solve_lines(0, h, tmp_);
    load({{h, t + h, X}, {h, t + dt, Y}});
    op_.combine(u, tmp_, tmp_, {h, 0, 0}, w, G_, 0.0, {});
    op_.solve_lines(1, h, u);
  } else {  // Douglas, θ = 1/2; the source goes with the x stage
    load({{h, t, X}, {h, t + dt, X}, {dt, t, Y | Z}});
    op_.combine(tmp_, u, u, {h, dt, dt}, w, G_, 0.0, {});
    op_.solve_lines(0, h, tmp_);
    load({{h, t + dt, Y}, {-h, t, Y}});
    op_.combine(tmp_, tmp_, u, {0, -h, 0}, w, G_, 0.0, {});
    op_.solve_lines(1, h, tmp_);
    load({{h, t + dt, Z}, {-h, t, Z}});
    op_.combine(tmp_, tmp_, u, {0, 0, -h}, w, G_, 0.0, {});
    op_.solve_lines(2, h, tmp_);
    Kokkos::deep_copy(u, tmp_);
  }
}

long HeatStepper::advance(const View3<double>& u, double t0, double t1, double dt_max) {
  require(dt_max > 0 && std::isfinite(dt_max), "time step must be positive and finite, got ", dt_max);
  if (!(t1 > t0)) return 0;
  require_representable(ftcs_limit(), dt_max);
  check_state(u);
  ensure_work(u);
  if (method_ == Method::Ftcs && dt_max > ftcs_limit() * (1 + 1e-12)) {
    require(substep_, "FTCS time step dt = ", dt_max, " exceeds the stability limit dt_max = ", ftcs_limit(),
            " (sum_i kappa_max dt/dx_i^2 <= 1/2; 2/3 of that next to Dirichlet sides): use dt <= ", ftcs_limit(),
            ", an implicit method (cn, adi), or allow sub-steps (solver.substep = true)");
    dt_max = ftcs_limit();
  }
  // A span of 1e300 in steps of 1e-3 would overflow the step count (and never end): refuse it with the count.
  const double steps = std::ceil((t1 - t0) / dt_max * (1 - 1e-12));
  require(steps <= 1e12, "advancing from t = ", t0, " to t = ", t1, " in steps of at most ", dt_max, " takes ", steps,
          " steps (more than 10^12): use a larger dt or a shorter time span");
  const long n = std::max(1L, static_cast<long>(steps));
  const double dt = (t1 - t0) / n;
  if (method_ == Method::Ftcs) {  // ping-pong between u and the work array: no copies
    View3<double> a = u, b = tmp_;
    long s = 0;
    // Two steps per sweep where the operator can (host builds, constant κ, static forcing): half the memory traffic.
    const View3<double> g = op_.has_forcing() ? G_ : View3<double>();
    for (; s + 1 < n && op_.ftcs_two_steps(b, a, dt, g); s += 2) std::swap(a, b);
    for (; s < n; ++s) {
      ftcs_step(a, b, t0 + s * dt, dt);
      std::swap(a, b);
    }
    if (a.data() != u.data()) Kokkos::deep_copy(u, a);
  } else {
    for (long s = 0; s < n; ++s) step(u, t0 + s * dt, dt);
  }
  return n;
}

double auto_dt(const HeatStepper& stepper, const View3<double>& u0, double t_end) {
  const HeatOperator& op = stepper.op();
  const double limit = op.ftcs_limit();
  if (stepper.method() == Method::Ftcs) return std::min(0.25 * limit, t_end);
  const auto& p = op.problem();
  const int d = p.grid.dim;
  double hmin = p.grid.h[0];
  for (int a = 1; a < d; ++a) hmin = std::min(hmin, p.grid.h[a]);
  const double kmax = p.kappa_max();
  if (!(kmax > 0)) return t_end;
  // Rayleigh quotient |∇u|²/|u - mean|² per sample (host: this runs once per solve).
  auto h = to_host(u0);
  const long n0 = h.extent(0), n1 = h.extent(1), nx = h.extent(2);
  double k2 = 0.0;
  const long samples = d == 3 ? 1 : n0;
  for (long b = 0; b < samples; ++b) {
    double mean = 0.0, var = 0.0, grad = 0.0;
    long count = 0;
    const long k0 = d == 3 ? 0 : b, k1 = d == 3 ? n0 : b + 1;
    for (long k = k0; k < k1; ++k)
      for (long j = 0; j < n1; ++j)
        for (long i = 0; i < nx; ++i) mean += h(k, j, i), ++count;
    mean /= count;
    for (long k = k0; k < k1; ++k)
      for (long j = 0; j < n1; ++j)
        for (long i = 0; i < nx; ++i) {
          var += (h(k, j, i) - mean) * (h(k, j, i) - mean);
          if (i + 1 < nx) grad += std::pow((h(k, j, i + 1) - h(k, j, i)) / p.grid.h[0], 2);
          if (d >= 2 && j + 1 < n1) grad += std::pow((h(k, j + 1, i) - h(k, j, i)) / p.grid.h[1], 2);
          if (d == 3 && k + 1 < k1) grad += std::pow((h(k + 1, j, i) - h(k, j, i)) / p.grid.h[2], 2);
        }
    if (var > 0) k2 = std::max(k2, grad / var);
  }
  double lmin = p.grid.length(0);
  for (int a = 1; a < d; ++a) lmin = std::min(lmin, p.grid.length(a));
  const double k = std::max(std::sqrt(k2), 2.0 * M_PI / lmin);
  const double dt = hmin / (2.0 * kmax * k);
  return std::min(std::max(dt, limit), t_end);
}

HeatSolution solve(const heat::HeatProblem& problem, const View3<double>& u0, double t_end,
                   const HeatSolveOptions& options) {
  ScopedRegion region("attnphys::heat_solve");
  require(std::isfinite(t_end) && t_end >= 0, "t_end must be finite and non-negative, got ", t_end);
  require(options.dt >= 0 && std::isfinite(options.dt), "dt must be positive (or 0 for automatic), got ",
          options.dt);
  HeatStepper stepper(problem, options.method, options.substep);
  stepper.check_state(u0);
  // A NaN or infinite initial value would propagate silently through every step: refuse it here.
  if (const long bad = heat::count_non_finite(u0.data(), long(u0.size())); bad > 0) {
    auto h = to_host(u0);
    long first = 0;
    while (first < long(h.size()) && std::isfinite(h.data()[first])) ++first;
    fail("the initial field has ", bad, " NaN or infinite value(s) (the first at flat index ", first,
         " in (z|batch, y, x) order): give a finite field");
  }
  const double dt = options.dt > 0 ? options.dt : auto_dt(stepper, u0, t_end);
  return solve_with_snapshots(u0, t_end, dt, options.snapshot_times,
                              [&](const View3<double>& u, double t0, double t1) { return stepper.advance(u, t0, t1, dt); });
}

void HeatSolverOptions::declare(OptionSet& set, const std::string& section) {
  set.add(section + ".method", &method, "time stepping: ftcs, cn (1D Crank-Nicolson) or adi");
  set.add(section + ".dt", &dt, "time step; 0 picks one whose time error stays below the space error",
          Range::non_negative());
  set.add(section + ".substep", &substep, "ftcs: split a step above the stability limit into stable sub-steps");
}

HeatSolveOptions HeatSolverOptions::to_solve_options() const {
  HeatSolveOptions o;
  o.method = method;
  o.dt = dt;
  o.substep = substep;
  return o;
}

}  // namespace attnphys::fd
