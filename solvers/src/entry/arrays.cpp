// The array-facing entry points (attnphys/solvers/entry/arrays.hpp): the validation behind the Python functions
// that take numpy arrays, shared by the bindings and the fuzz target fuzz_arrays.
#include "attnphys/solvers/entry/arrays.hpp"

#include <Kokkos_Core.hpp>
#include <cmath>
#include <limits>

#include "attnphys/core/error.hpp"

namespace attnphys::entry {

long HostArray::size() const {
  long n = 1;
  for (long e : shape) {
    require(e >= 0, "array extent ", e, " is negative");
    // numpy cannot hold more elements than fit in memory; a product past 2^62 is a corrupted shape.
    require(e == 0 || n <= (std::numeric_limits<long>::max() / 4) / e, "array shape ", shape_str(shape),
            " has too many elements");
    n *= e;
  }
  return n;
}

std::string shape_str(const std::vector<long>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void require_finite(const HostArray& a, const std::string& where, const std::string& name) {
  if (!a.given()) return;
  const long n = a.size();
  long bad = 0, first = -1;
  for (long i = 0; i < n; ++i)
    if (!std::isfinite(a.data[i])) {
      if (first < 0) first = i;
      ++bad;
    }
  require(bad == 0, where, ": ", name, " holds ", bad, " non-finite value(s) (NaN or inf), the first at flat index ",
          first, ": give finite values");
}

namespace {

// An array of exactly this shape, or an error naming it.
void require_shape(const HostArray& a, const std::vector<long>& shape, const std::string& what,
                   const std::string& expected) {
  require(a.given(), what, ": expected an array of shape ", expected, ", got None");
  require(a.shape == shape, what, ": expected an array of shape ", expected, ", got ", shape_str(a.shape));
}

// The shape first: the finiteness scan then reads exactly the elements the shape promises.
View2<double> to_view2(const HostArray& a, long rows, long cols, const std::string& what, const std::string& where) {
  require_shape(a, {rows, cols}, what, shape_str({rows, cols}));
  require_finite(a, where, what);
  View2<double> v("attnphys::" + what, rows, cols);
  Kokkos::deep_copy(v, HostView2<const double>(a.data, rows, cols));
  return v;
}

}  // namespace

heat::HeatProblem heat_problem(const std::vector<long>& shape, double dx, const std::string& bc) {
  require(shape.size() >= 1 && shape.size() <= 3, "heat: arrays must be 1-, 2- or 3-dimensional, got ", shape.size(),
          " dimensions (shape ", shape_str(shape), ")");
  // dx, empty axes and the boundary name are checked by make_problem / HeatProblem::validate ("cell width along x
  // must be positive and finite", "0 cells along y").
  const int d = int(shape.size());
  std::array<long, 3> n{1, 1, 1};
  for (int a = 0; a < d; ++a) n[a] = shape[d - 1 - a];
  return heat::make_problem(d, n, {dx, dx, dx}, 1.0, bc);
}

void set_kappa(heat::HeatProblem& p, double kappa) {
  p.kappa = kappa;
  p.validate();
}

void set_kappa(heat::HeatProblem& p, const HostArray& kappa, const std::vector<long>& shape) {
  require(kappa.given() && kappa.shape == shape, "kappa must be a number or an array shaped like u0 ",
          shape_str(shape), ", got shape ", kappa.given() ? shape_str(kappa.shape) : std::string("None"));
  const auto e = p.spatial_extents();  // values: HeatProblem::validate ("kappa field has 1 negative, NaN or ...")
  p.kappa_field = View3<double>("kappa", e[0], e[1], e[2]);
  Kokkos::deep_copy(p.kappa_field, HostView3<const double>(kappa.data, e[0], e[1], e[2]));
  p.validate();
}

View3<double> heat_field(const heat::HeatProblem& p, const HostArray& u, const std::string& name) {
  const auto e = p.spatial_extents();
  std::vector<long> shape;
  for (int a = p.grid.dim - 1; a >= 0; --a) shape.push_back(p.grid.n[a]);
  require_shape(u, shape, name, shape_str(shape));  // values: the solvers refuse NaN/inf with the first index
  View3<double> v("attnphys::" + name, e[0], e[1], e[2]);
  Kokkos::deep_copy(v, HostView3<const double>(u.data, e[0], e[1], e[2]));
  return v;
}

HeatSolveCall heat_solve_call(const HostArray& u0, double t_end, double dx, const HostArray* kappa_array,
                              double kappa, const std::string& bc, const std::string& method, double dt) {
  require(u0.given(), "heat.solve: u0 is None");
  HeatSolveCall c;
  c.problem = heat_problem(u0.shape, dx, bc);
  if (kappa_array)
    set_kappa(c.problem, *kappa_array, u0.shape);
  else
    set_kappa(c.problem, kappa);
  c.u0 = heat_field(c.problem, u0, "u0");
  c.options.method = fd::parse_method(method);
  if (c.options.method == fd::Method::CrankNicolson && c.problem.grid.dim > 1) c.options.method = fd::Method::Adi;
  c.options.dt = dt;
  c.t_end = t_end;
  return c;
}

training::HeatPairs heat_pairs(const HostArray& inputs, const HostArray& targets, const HostArray& coords, long nx,
                               long ny, long nz, int dim, const HostArray& extra, const HostArray& tau,
                               long channels) {
  require(inputs.given() && inputs.ndim() == 2, "inputs: expected [samples, points], got ",
          inputs.given() ? shape_str(inputs.shape) : std::string("None"));
  require(dim >= 1 && dim <= 3, "pairs: dim must be 1, 2 or 3, got ", dim);
  require(nx >= 1 && ny >= 1 && nz >= 1, "pairs: grid extents must be >= 1, got ", nx, "x", ny, "x", nz);
  require(channels >= 0, "pairs: channels must be >= 0, got ", channels);
  const long S = inputs.shape[0], P = inputs.shape[1];
  require(S >= 1, "inputs: no samples (shape ", shape_str(inputs.shape), ")");
  require(P == nx * ny * nz, "inputs: ", P, " points per sample for a ", nx, "x", ny,
          nz > 1 ? "x" + std::to_string(nz) : std::string(), " grid");
  training::HeatPairs p;
  p.count = S;
  p.points = P;
  p.n = p.nx = nx;
  p.ny = ny;
  p.nz = nz;
  p.dim = dim;
  p.inputs = to_view2(inputs, S, P, "inputs", "pairs");
  if (!targets.given()) {
    p.targets = View2<double>("attnphys::targets", S, P);
  } else if (targets.ndim() == 3) {  // a trajectory per sample
    const long K = targets.shape[1];
    require(targets.shape[0] == S && K >= 1 && targets.shape[2] == P, "targets: expected trajectories of shape (", S,
            ", K, ", P, "), got ", shape_str(targets.shape));
    require_finite(targets, "pairs", "targets");
    HostView3<const double> h(targets.data, S, K, P);
    HostView2<double> first("attnphys::targets_host", S, P);
    for (long i = 0; i < S; ++i)
      for (long q = 0; q < P; ++q) first(i, q) = h(i, 0, q);
    p.targets = View2<double>("attnphys::targets", S, P);
    Kokkos::deep_copy(p.targets, first);
    if (K > 1) {
      p.later = View3<double>("attnphys::later_targets", S, K - 1, P);
      auto hl = Kokkos::create_mirror_view(p.later);
      for (long i = 0; i < S; ++i)
        for (long k = 1; k < K; ++k)
          for (long q = 0; q < P; ++q) hl(i, k - 1, q) = h(i, k, q);
      Kokkos::deep_copy(p.later, hl);
    }
  } else {
    p.targets = to_view2(targets, S, P, "targets", "pairs");
  }
  p.coords = to_view2(coords, P, dim, "coords", "pairs");
  p.tau = View1<double>("attnphys::pair_horizon", S);
  if (!tau.given()) {
    Kokkos::deep_copy(p.tau, 1.0);
  } else {
    require(tau.shape == std::vector<long>{S}, "tau: expected ", S, " horizons, got shape ", shape_str(tau.shape));
    require_finite(tau, "pairs", "tau");
    for (long i = 0; i < S; ++i)
      require(tau.data[i] > 0, "tau: horizons must be positive, got ", tau.data[i], " at index ", i);
    Kokkos::deep_copy(p.tau, HostView1<const double>(tau.data, S));
  }
  p.extra = View3<double>("attnphys::pair_channels", S, P, channels);
  if (channels > 0) {
    require(extra.given(), "channels: the model takes ", channels, " extra channel(s), none were given");
    require(extra.shape == std::vector<long>{S, P, channels}, "channels: expected an array of shape (", S, ", ", P,
            ", ", channels, "), got ", shape_str(extra.shape));
    require_finite(extra, "pairs", "channels");
    Kokkos::deep_copy(p.extra, HostView3<const double>(extra.data, S, P, channels));
  }
  return p;
}

PredictArgs predict_args(const training::HeatModel& model, const HostArray& inputs, const HostArray& extra,
                         const HostArray& coords, const HostArray& tau, long batch) {
  require(inputs.given() && inputs.ndim() == 2, "predict: expected fields [samples, points], got ",
          inputs.given() ? shape_str(inputs.shape) : std::string("None"));
  require(batch >= 1, "predict: batch must be at least 1, got ", batch);
  PredictArgs a;
  a.samples = inputs.shape[0];
  a.points = inputs.shape[1];
  const long S = a.samples, P = a.points, C = long(model.channel_names().size());
  const int dim = model.grid().dim;
  require(P >= 1, "predict: fields have no points (shape ", shape_str(inputs.shape), ")");
  a.inputs = to_view2(inputs, S, P, "fields", "predict");
  a.coords = to_view2(coords, P, dim, "coords", "predict");
  a.extra = View3<double>("attnphys::predict_channels", S, P, C);
  if (C > 0) {
    require(extra.given(), "channels: the model takes ", C, " extra channel(s), none were given");
    require(extra.shape == std::vector<long>{S, P, C}, "channels: expected an array of shape (", S, ", ", P, ", ", C,
            "), got ", shape_str(extra.shape));
    require_finite(extra, "predict", "channels");
    Kokkos::deep_copy(a.extra, HostView3<const double>(extra.data, S, P, C));
  }
  if (tau.given()) {
    require(tau.shape == std::vector<long>{S}, "tau: expected ", S, " horizons, got shape ", shape_str(tau.shape));
    require_finite(tau, "predict", "tau");
    for (long i = 0; i < S; ++i)
      require(tau.data[i] > 0, "tau: horizons must be positive, got ", tau.data[i], " at index ", i);
    a.tau = View1<double>("attnphys::predict_tau", S);
    Kokkos::deep_copy(a.tau, HostView1<const double>(tau.data, S));
  }
  return a;
}

}  // namespace attnphys::entry
