#pragma once
// The array-facing entry points of the Python package without Python: what attnphys._core does with the numpy
// arrays it is handed (shape checks, finiteness checks, conversion to device views) before a solver or a model
// runs. The bindings (python/src/bind_heat.cpp, bind_surrogate.cpp) turn each numpy argument into a HostArray and
// call these functions, so the same validation is reachable from C++: the fuzz target tests/fuzz/fuzz_arrays.cpp
// drives it with arbitrary shapes and values. Every refusal is an attnphys::Error that names the argument, the shape
// it has and the shape it needs (or the first non-finite value).
#include <string>
#include <vector>

#include "attnphys/core/views.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"
#include "attnphys/solvers/training/heat_data.hpp"
#include "attnphys/solvers/training/heat_fit.hpp"

namespace attnphys::entry {

// A C-contiguous float64 host array as numpy hands it over (after forcecast); data == nullptr: the argument was
// None / not given.
struct HostArray {
  const double* data = nullptr;
  std::vector<long> shape;
  bool given() const { return data != nullptr; }
  long ndim() const { return long(shape.size()); }
  long size() const;  // product of the extents (1 for a 0-d array)
};

// A shape as Python prints it: (8, 8), (5,), ().
std::string shape_str(const std::vector<long>& shape);

// Refuses NaN / inf: "<where>: <name> holds 3 non-finite value(s) (NaN or inf), the first at flat index 7".
void require_finite(const HostArray& a, const std::string& where, const std::string& name);

// ---- heat.solve / heat.solve_nonlinear: fields shaped (nx,), (ny, nx) or (nz, ny, nx), the last axis x.
// The grid of a numpy shape with spacing dx on every axis and the boundary type by name.
heat::HeatProblem heat_problem(const std::vector<long>& shape, double dx, const std::string& bc);
// kappa as a number, or an array shaped like the field (a positive, finite value per cell).
void set_kappa(heat::HeatProblem& p, double kappa);
void set_kappa(heat::HeatProblem& p, const HostArray& kappa, const std::vector<long>& shape);
// The device copy of a field for problem p (its shape must be the problem's).
View3<double> heat_field(const heat::HeatProblem& p, const HostArray& u, const std::string& name);
// heat.solve's arguments checked and converted: the problem, the initial field and the solver options
// ("cn" becomes ADI in 2D/3D, as the Python function documents). Run with fd::solve(problem, u0, t_end, options).
struct HeatSolveCall {
  heat::HeatProblem problem;
  View3<double> u0;
  double t_end = 0;
  fd::HeatSolveOptions options;
};
HeatSolveCall heat_solve_call(const HostArray& u0, double t_end, double dx, const HostArray* kappa_array,
                              double kappa, const std::string& bc, const std::string& method, double dt);

// ---- the surrogate (attnphys.operator): fields [samples, points], coords [points, dim], channels
// [samples, points, C], tau [samples], targets [samples, points] or trajectories [samples, K, points].
training::HeatPairs heat_pairs(const HostArray& inputs, const HostArray& targets, const HostArray& coords, long nx,
                               long ny, long nz, int dim, const HostArray& extra, const HostArray& tau,
                               long channels);
// Model.predict's arguments checked against the model and converted. Run with
// model.predict(args.inputs, args.extra, args.coords, args.tau, batch).
struct PredictArgs {
  View2<double> inputs, coords;
  View3<double> extra;
  View1<double> tau;  // empty: one base horizon per sample
  long samples = 0, points = 0;
};
PredictArgs predict_args(const training::HeatModel& model, const HostArray& inputs, const HostArray& extra,
                         const HostArray& coords, const HostArray& tau, long batch);

}  // namespace attnphys::entry
