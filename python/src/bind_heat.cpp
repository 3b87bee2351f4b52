// Bindings for the heat solvers and data generation: attnphys._core.heat (wrapped by attnphys/heat.py).
// Arrays cross as numpy in the solver's axis order: (nx,), (ny, nx) or (nz, ny, nx), the last axis x.
#include <Kokkos_Core.hpp>

#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/physics/heat/nonlinear.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/fd/nonlinear_heat.hpp"
#include "bindings.hpp"

namespace attnphys::python {

namespace {

// Grid from a numpy shape: (nx,), (ny, nx) or (nz, ny, nx) (the checks are the entry layer's:
// attnphys/solvers/entry/arrays.hpp).
heat::HeatProblem problem_for(const std::vector<long>& shape, double dx, const std::string& bc) {
  return entry::heat_problem(shape, dx, bc);
}

void set_kappa(heat::HeatProblem& p, const py::object& kappa, const std::vector<long>& shape) {
  if (py::isinstance<py::float_>(kappa) || py::isinstance<py::int_>(kappa)) {
    entry::set_kappa(p, kappa.cast<double>());
  } else {
    const HeldArray k(kappa);
    entry::set_kappa(p, k.host, shape);
  }
}

Array<double> solve_py(Array<double> u0, double t_end, double dx, const py::object& kappa, const std::string& bc,
                       const std::string& method, double dt) {
  const auto shape = shape_of(u0);
  const bool scalar = py::isinstance<py::float_>(kappa) || py::isinstance<py::int_>(kappa);
  const HeldArray k(scalar ? py::none() : kappa);
  const entry::HostArray* ka = scalar ? nullptr : &k.host;
  const auto call = entry::heat_solve_call(host_array(u0), t_end, dx, ka, scalar ? kappa.cast<double>() : 0.0, bc,
                                           method, dt);
  const auto e = call.problem.spatial_extents();
  fd::HeatSolution sol;
  {
    py::gil_scoped_release release;
    sol = fd::solve(call.problem, call.u0, call.t_end, call.options);
  }
  Array<double> out(shape);
  Kokkos::deep_copy(HostView3<double>(out.mutable_data(), e[0], e[1], e[2]), sol.u);
  return out;
}

// The nonlinear equation u_t = div(kappa(u) grad u): the law and the Picard keys as [nonlinear] overrides
// ("nonlinear.law=quadratic", ...), the same keys as `attnphys heat dataset`.
Array<double> solve_nonlinear_py(Array<double> u0, double t_end, double dx, const std::string& bc,
                                 const std::string& method, double dt, const std::vector<std::string>& overrides) {
  require(method != "ftcs", "heat.solve with kappa_law: the nonlinear solver is semi-implicit (Crank-Nicolson / ADI "
          "with Picard correction); use method='adi' (or 'cn' in 1D), not 'ftcs'");
  fd::parse_method(method);  // refuses unknown names
  const auto shape = shape_of(u0);
  auto p = problem_for(shape, dx, bc);
  heat::KappaLawOptions lo;
  fd::NonlinearHeatOptions no;
  OptionSet set;
  lo.declare(set);
  no.declare(set);
  set.set_all(overrides);
  require(lo.enabled(), "heat.solve: kappa_law needs a law: {'law': 'quadratic', 'kappa0': ..., 'beta': ...} or "
          "{'law': 'table', 'table_u': [...], 'table_kappa': [...]}");
  const heat::KappaLaw law = lo.build();
  fd::NonlinearSolveOptions o;
  o.picard = no.build();
  o.dt = dt;
  const auto e = p.spatial_extents();
  const View3<double> u = entry::heat_field(p, host_array(u0), "u0");
  fd::HeatSolution sol;
  {
    py::gil_scoped_release release;
    sol = fd::solve_nonlinear(p, law, u, t_end, o);
  }
  Array<double> out(shape);
  Kokkos::deep_copy(HostView3<double>(out.mutable_data(), e[0], e[1], e[2]), sol.u);
  return out;
}

heat::InitialConditionOptions ic_options(const std::string& kind, double length_scale, const std::string& spectrum,
                                         long modes, long max_wavenumber, double bump_width, double amplitude) {
  heat::InitialConditionOptions o;
  o.kind = heat::parse_ic_kind(kind);
  o.length_scale = length_scale;
  o.spectrum = heat::parse_grf_spectrum(spectrum);
  o.modes = modes;
  o.max_wavenumber = max_wavenumber;
  o.bump_width = bump_width;
  o.amplitude = amplitude;
  o.validate();
  return o;
}

std::vector<long> with_count(long count, const std::vector<long>& shape) {
  std::vector<long> s{count};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

}  // namespace

void bind_heat(py::module_& m) {
  auto h = m.def_submodule("heat", "finite-difference heat solvers, random initial conditions and datasets");
  h.def("solve", &solve_py, py::arg("u0"), py::arg("t_end"), py::arg("dx"), py::arg("kappa") = 1.0,
        py::arg("bc") = "periodic", py::arg("method") = "adi", py::arg("dt") = 0.0);
  h.def("solve_nonlinear", &solve_nonlinear_py, py::arg("u0"), py::arg("t_end"), py::arg("dx"),
        py::arg("bc") = "periodic", py::arg("method") = "adi", py::arg("dt") = 0.0,
        py::arg("overrides") = std::vector<std::string>{});
  h.def(
      "initial_conditions",
      [](std::vector<long> shape, double dx, long count, long seed, long first, const std::string& bc,
         const std::string& kind, double length_scale, const std::string& spectrum, long modes, long max_wavenumber,
         double bump_width, double amplitude) {
        require(count >= 1 && seed >= 0 && first >= 0, "count must be >= 1, seed and first >= 0");
        auto p = problem_for(shape, dx, bc);
        auto o = ic_options(kind, length_scale, spectrum, modes, max_wavenumber, bump_width, amplitude);
        const long cells = p.grid.cells();
        View2<double> f("ic", count, cells);
        heat::initial_conditions(p, o, std::uint64_t(seed), first, f);
        Array<double> out(with_count(count, shape));
        Kokkos::deep_copy(HostView2<double>(out.mutable_data(), count, cells), f);
        return out;
      },
      py::arg("shape"), py::arg("dx"), py::arg("count") = 1, py::arg("seed") = 0, py::arg("first") = 0,
      py::arg("bc") = "periodic", py::arg("kind") = "grf", py::arg("length_scale") = 0.1,
      py::arg("spectrum") = "gaussian", py::arg("modes") = 6, py::arg("max_wavenumber") = 4,
      py::arg("bump_width") = 0.08, py::arg("amplitude") = 1.0);
  h.def(
      "random_kappa",
      [](std::vector<long> shape, double dx, double lo, double hi, double length_scale, long seed,
         const std::string& bc) {
        auto p = problem_for(shape, dx, bc);
        auto k = heat::random_kappa(p, lo, hi, length_scale, std::uint64_t(seed));
        Array<double> out(shape);
        Kokkos::deep_copy(HostView3<double>(out.mutable_data(), k.extent(0), k.extent(1), k.extent(2)), k);
        return out;
      },
      py::arg("shape"), py::arg("dx"), py::arg("lo") = 0.2, py::arg("hi") = 2.0, py::arg("length_scale") = 0.15,
      py::arg("seed") = 0, py::arg("bc") = "periodic");
  h.def(
      "generate_pairs",
      [](std::vector<long> shape, double dx, long count, long first, long seed, const py::object& kappa,
         const std::string& bc, double t_start, double delta_t, const std::string& method, double dt,
         const std::string& kind, double length_scale) {
        require(count >= 1 && seed >= 0, "count must be >= 1 and seed >= 0");
        auto p = problem_for(shape, dx, bc);
        set_kappa(p, kappa, shape);
        auto ic = ic_options(kind, length_scale, "gaussian", 6, 4, 0.08, 1.0);
        fd::HeatPairOptions po;
        po.t_start = t_start;
        po.delta_t = delta_t;
        po.method = fd::parse_method(method);
        po.dt = dt;
        po.seed = std::uint64_t(seed);
        const auto e = p.spatial_extents();
        View3<double> x("x", count, e[1], e[2]), y("y", count, e[1], e[2]);
        {
          py::gil_scoped_release release;
          fd::HeatPairGenerator<double> gen(p, ic, po);
          gen.generate(first, count, x, y);
        }
        Array<double> xi(with_count(count, shape)), yi(with_count(count, shape));
        Kokkos::deep_copy(HostView3<double>(xi.mutable_data(), count, e[1], e[2]), x);
        Kokkos::deep_copy(HostView3<double>(yi.mutable_data(), count, e[1], e[2]), y);
        return py::make_tuple(xi, yi);
      },
      py::arg("shape"), py::arg("dx"), py::arg("count"), py::arg("first") = 0, py::arg("seed") = 0,
      py::arg("kappa") = 1.0, py::arg("bc") = "periodic", py::arg("t_start") = 0.0, py::arg("delta_t") = 0.01,
      py::arg("method") = "adi", py::arg("dt") = 0.0, py::arg("kind") = "grf", py::arg("length_scale") = 0.1);
  h.def(
      "write_dataset",
      [](const std::string& path, std::vector<long> shape, double dx, long samples, long nt, double t_start,
         double delta_t, long seed, double kappa, const std::string& bc, const std::string& method,
         const std::string& kind, double length_scale, long chunk, const std::string& config,
         const std::vector<std::string>& overrides) {
        auto p = problem_for(shape, dx, bc);
        p.kappa = kappa;
        p.validate();
        auto ic = ic_options(kind, length_scale, "gaussian", 6, 4, 0.08, 1.0);
        // The family and the κ(u) law through the same option keys as `attnphys heat dataset` (family.*,
        // nonlinear.*): unknown keys are refused with the nearest valid one.
        heat::HeatFamilyOptions fo;
        heat::KappaLawOptions lo;
        fd::NonlinearHeatOptions no;
        OptionSet set;
        fo.declare(set);
        lo.declare(set);
        no.declare(set);
        set.set_all(overrides);
        const auto family = fo.build(p, std::uint64_t(seed));
        const heat::KappaLaw law = lo.enabled() ? lo.build() : heat::KappaLaw{};
        const auto picard = no.build();
        fd::HeatDatasetOptions o;
        o.output = path;
        o.samples = samples;
        o.nt = nt;
        o.t_start = t_start;
        o.delta_t = delta_t;
        o.seed = seed;
        o.chunk = chunk;
        o.progress = false;
        fd::HeatSolveOptions so;
        so.method = fd::parse_method(method);
        if (so.method == fd::Method::CrankNicolson && p.grid.dim > 1) so.method = fd::Method::Adi;
        fd::HeatDatasetSummary s;
        {
          py::gil_scoped_release release;
          s = fd::write_heat_dataset(p, ic, family, lo.enabled() ? &law : nullptr, picard, so, o, config);
        }
        py::dict d;
        d["path"] = s.path;
        d["samples"] = s.samples;
        d["nt"] = s.nt;
        d["seconds"] = s.seconds;
        d["solver_dt"] = s.solver_dt;
        d["family"] = family.describe();
        d["nonlinear"] = lo.enabled();
        return d;
      },
      py::arg("path"), py::arg("shape"), py::arg("dx"), py::arg("samples"), py::arg("nt") = 2,
      py::arg("t_start") = 0.0, py::arg("delta_t") = 0.01, py::arg("seed") = 0, py::arg("kappa") = 1.0,
      py::arg("bc") = "periodic", py::arg("method") = "adi", py::arg("kind") = "grf", py::arg("length_scale") = 0.1,
      py::arg("chunk") = 16, py::arg("config") = "", py::arg("overrides") = std::vector<std::string>{});
}

static BindRegistrar reg("heat", bind_heat);

}  // namespace attnphys::python
