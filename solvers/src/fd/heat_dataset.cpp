#include "attnphys/solvers/fd/heat_dataset.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <vector>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/logging.hpp"

namespace attnphys::fd {

double pair_dt(const HeatStepper& stepper, const heat::InitialConditionOptions& ic, double delta_t) {
  const double limit = stepper.ftcs_limit();
  if (stepper.method() == Method::Ftcs) return std::min(0.25 * limit, delta_t);
  const auto& p = stepper.op().problem();
  double hmin = p.grid.h[0];
  for (int a = 1; a < p.grid.dim; ++a) hmin = std::min(hmin, p.grid.h[a]);
  const double kmax = p.kappa_max();
  if (!(kmax > 0)) return delta_t;
  const double dt = hmin / (2.0 * kmax * ic.typical_wavenumber(p));
  return std::min(std::max(dt, limit), delta_t);
}

template <class T>
HeatPairGenerator<T>::HeatPairGenerator(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                        const HeatPairOptions& options)
    : problem_(problem), ic_(ic), opt_(options) {
  problem_.validate();
  ic_.validate();
  require(problem_.grid.dim <= 2, "HeatPairGenerator handles 1D and 2D problems; solve 3D ones with fd::solve");
  require(opt_.delta_t > 0 && std::isfinite(opt_.delta_t), "delta_t must be positive, got ", opt_.delta_t);
  require(opt_.t_start >= 0 && std::isfinite(opt_.t_start), "t_start must be >= 0, got ", opt_.t_start);
  require(opt_.dt >= 0, "dt must be >= 0 (0: automatic), got ", opt_.dt);
  stepper_ = std::make_unique<HeatStepper>(problem_, opt_.method, /*substep=*/false);
  dt_ = opt_.dt > 0 ? opt_.dt : pair_dt(*stepper_, ic_, opt_.delta_t);
}

template <class T>
View3<double> HeatPairGenerator<T>::start(long first, long count) {
  require(first >= 0 && count >= 1, "generate: first_index must be >= 0 and count >= 1, got ", first, " and ", count);
  const auto e = problem_.spatial_extents();
  const long cells = e[1] * e[2];
  if (long(state_.extent(0)) != count) state_ = View2<double>("attnphys::heat_pairs_state", count, cells);
  heat::initial_conditions(problem_, ic_, opt_.seed, first, state_);
  View3<double> u(state_.data(), count, e[1], e[2]);  // same memory, solver layout
  if (opt_.t_start > 0) stepper_->advance(u, 0.0, opt_.t_start, dt_);
  return u;
}

namespace {
template <class T>
void convert(const View3<double>& from, T* to) {
  Kokkos::parallel_for(
      "attnphys::heat_pairs_convert", Kokkos::RangePolicy<ExecSpace>(0, from.size()),
      KOKKOS_LAMBDA(const long i) { to[i] = static_cast<T>(from.data()[i]); });
}
}  // namespace

template <class T>
void HeatPairGenerator<T>::generate(long first, long count, const View3<T>& inputs, const View3<T>& targets) {
  ScopedRegion region("attnphys::heat_pairs_generate");
  const auto e = problem_.spatial_extents();
  for (const auto* v : {&inputs, &targets})
    require(long(v->extent(0)) == count && long(v->extent(1)) == e[1] && long(v->extent(2)) == e[2],
            "generate: arrays must be [count, ny, nx] = [", count, ", ", e[1], ", ", e[2], "], got [", v->extent(0),
            ", ", v->extent(1), ", ", v->extent(2), "]");
  View3<double> u = start(first, count);
  convert(u, inputs.data());
  stepper_->advance(u, opt_.t_start, opt_.t_start + opt_.delta_t, dt_);
  convert(u, targets.data());
}

template <class T>
void HeatPairGenerator<T>::generate(long first, long count, const View2<T>& inputs, const View2<T>& targets) {
  require(problem_.grid.dim == 1, "the [count, nx] overload is for 1D problems");
  require(long(inputs.extent(0)) == count && long(targets.extent(0)) == count &&
              long(inputs.extent(1)) == problem_.grid.n[0] && long(targets.extent(1)) == problem_.grid.n[0],
          "generate: arrays must be [count, nx] = [", count, ", ", problem_.grid.n[0], "]");
  generate(first, count, View3<T>(inputs.data(), count, 1, inputs.extent(1)),
           View3<T>(targets.data(), count, 1, targets.extent(1)));
}

template <class T>
void HeatPairGenerator<T>::trajectories(long first, long count, const View4<T>& out) {
  ScopedRegion region("attnphys::heat_pairs_trajectories");
  const auto e = problem_.spatial_extents();
  const long nt = out.extent(1);
  require(long(out.extent(0)) == count && nt >= 1 && long(out.extent(2)) == e[1] && long(out.extent(3)) == e[2],
          "trajectories: array must be [count, nt, ny, nx] = [", count, ", nt, ", e[1], ", ", e[2], "]");
  View3<double> u = start(first, count);
  const long cells = e[1] * e[2];
  for (long k = 0; k < nt; ++k) {
    if (k > 0)
      stepper_->advance(u, opt_.t_start + (k - 1) * opt_.delta_t, opt_.t_start + k * opt_.delta_t, dt_);
    const auto o = out;
    Kokkos::parallel_for(
        "attnphys::heat_pairs_snapshot", Kokkos::RangePolicy<ExecSpace>(0, count * cells),
        KOKKOS_LAMBDA(const long t) {
          const long s = t / cells, c = t - s * cells;
          o(s, k, c / e[2], c % e[2]) = static_cast<T>(u.data()[t]);
        });
  }
}

template <class T>
void HeatPairGenerator<T>::initial(long first, long count, const View3<T>& out) {
  const auto e = problem_.spatial_extents();
  require(long(out.extent(0)) == count && long(out.extent(1)) == e[1] && long(out.extent(2)) == e[2],
          "initial: array must be [count, ny, nx] = [", count, ", ", e[1], ", ", e[2], "]");
  if (long(state_.extent(0)) != count) state_ = View2<double>("attnphys::heat_pairs_state", count, e[1] * e[2]);
  heat::initial_conditions(problem_, ic_, opt_.seed, first, state_);
  convert(View3<double>(state_.data(), count, e[1], e[2]), out.data());
}

template class HeatPairGenerator<float>;
template class HeatPairGenerator<double>;

void HeatDatasetOptions::declare(OptionSet& set, const std::string& section) {
  set.add(section + ".output", &output, "HDF5 file to write (PDEBench layout)");
  set.add(section + ".samples", &samples, "number of random initial conditions", Range::at_least(1));
  set.add(section + ".seed", &seed, "random seed: the same seed gives the same file", Range::non_negative());
  set.add(section + ".nt", &nt, "snapshots per sample (2: input/target pairs)", Range::at_least(1));
  set.add(section + ".t_start", &t_start, "time of the first snapshot", Range::non_negative());
  set.add(section + ".delta_t", &delta_t, "time between snapshots", Range::positive());
  set.add(section + ".chunk", &chunk, "samples generated and written per slab", Range::at_least(1));
  set.add(section + ".progress", &progress, "show a progress bar on stderr");
}

HeatDatasetSummary write_heat_dataset(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                      const HeatSolveOptions& solver, const HeatDatasetOptions& o,
                                      const std::string& config_toml, const std::function<void(long)>& on_chunk,
                                      const Comm& comm) {
  ScopedRegion region("attnphys::heat_dataset");
  const auto t0 = std::chrono::steady_clock::now();
  require(problem.grid.dim <= 2, "heat datasets are 1D or 2D");
  HeatPairOptions po;
  po.t_start = o.t_start;
  po.delta_t = o.delta_t;
  po.method = solver.method;
  po.dt = solver.dt;
  po.seed = static_cast<std::uint64_t>(o.seed);
  HeatPairGenerator<float> gen(problem, ic, po);
  const int dim = problem.grid.dim;
  const long nx = problem.grid.n[0], ny = problem.grid.n[1], nt = o.nt, S = o.samples;
  const long chunk = std::min(o.chunk, S);

  // Rank 0 alone writes: it creates the file (its temporary), generates its own chunks and receives the others
  // in order. Chunk c (samples [c·chunk, c·chunk + count)) is generated by rank c mod size; a sample's data does
  // not depend on the chunk or rank it is generated in, so the file equals the one-rank file bit for bit.
  const int ranks = comm.size(), me = comm.rank();
  std::unique_ptr<h5::Writer> writer;
  std::exception_ptr create_error;
  if (comm.is_root()) {
    try {
      writer = std::make_unique<h5::Writer>(o.output, "heat_dataset", 1);
      auto& w = *writer;
      h5::Shape shape{std::uint64_t(S), std::uint64_t(nt), std::uint64_t(nx)};
      h5::Shape cshape{std::uint64_t(chunk), std::uint64_t(nt), std::uint64_t(nx)};
      if (dim == 2) shape.push_back(ny), cshape.push_back(ny);
      shape.push_back(1);
      cshape.push_back(1);
      w.create<float>("data", shape, cshape);
      std::vector<double> gx(nx), gy(ny), gt(nt);
      for (long i = 0; i < nx; ++i) gx[i] = problem.coord(0, i);
      for (long j = 0; j < ny; ++j) gy[j] = dim >= 2 ? problem.coord(1, j) : 0.0;
      for (long k = 0; k < nt; ++k) gt[k] = o.t_start + k * o.delta_t;
      w.write("grid/x", gx);
      if (dim == 2) w.write("grid/y", gy);
      w.write("grid/t", gt);
      w.set_attr("/", "config", config_toml);
      w.set_attr("/", "layout",
                 std::string(dim == 2 ? "data[sample, t, x, y, channel]" : "data[sample, t, x, channel]"));
      w.set_attr("/", "dim", long(dim));
      w.set_attr("/", "solver_dt", gen.solver_dt());
      // The physics a reader needs to use the data (attnphys train heat with data.file): the boundary type ("mixed"
      // when the sides differ), the constant κ (the maximum when κ varies), and whether the problem is homogeneous
      // (zero boundary data, no source).
      {
        std::string bc = heat::to_string(problem.bc[0][0].type);
        bool homogeneous = !problem.source;
        for (int a = 0; a < dim; ++a)
          for (int side = 0; side < 2; ++side) {
            const auto& b = problem.bc[a][side];
            if (heat::to_string(b.type) != bc) bc = "mixed";
            if (b.type != heat::BcType::Periodic && (b.fn || b.value != 0.0)) homogeneous = false;
          }
        w.set_attr("/", "bc", bc);
        w.set_attr("/", "kappa", problem.kappa_max());
        w.set_attr("/", "variable_kappa", long(problem.variable_kappa() ? 1 : 0));
        w.set_attr("/", "homogeneous", long(homogeneous ? 1 : 0));
      }
    } catch (...) {
      create_error = std::current_exception();
    }
  }
  // The other ranks must not start sending to a rank 0 that could not create the file.
  double created = create_error ? 0.0 : 1.0;
  comm.broadcast(&created, 1, 0);
  if (create_error) std::rethrow_exception(create_error);
  require(created == 1.0, "heat dataset: rank 0 could not create ", o.output, " (see its error)");

  ProgressBar bar(S, "heat dataset", o.progress && comm.is_root());
  View4<float> traj("attnphys::heat_dataset_chunk", chunk, nt, ny, nx);
  std::vector<float> buf(std::size_t(chunk) * nt * nx * ny);
  constexpr int tag = 8;  // one sender's messages arrive in order, so one tag serves every chunk
  for (long c = 0, first = 0; first < S; ++c, first += chunk) {
    const long count = std::min(chunk, S - first);
    const long values = count * nt * nx * ny;
    const int owner = int(c % ranks);
    if (owner == me) {
      auto view = count == chunk ? traj : View4<float>("attnphys::heat_dataset_tail", count, nt, ny, nx);
      gen.trajectories(first, count, view);
      auto h = to_host(view);
      std::size_t q = 0;  // [s, t, x, y] from [s, t, y, x]
      for (long s = 0; s < count; ++s)
        for (long k = 0; k < nt; ++k)
          for (long i = 0; i < nx; ++i)
            for (long j = 0; j < ny; ++j) buf[q++] = h(s, k, j, i);
      if (!comm.is_root()) comm.send(buf.data(), values, 0, tag);
    } else if (comm.is_root()) {
      comm.recv(buf.data(), values, owner, tag);
    }
    if (!comm.is_root()) continue;
    writer->write_rows<float>("data", std::uint64_t(first), std::uint64_t(count), buf.data());
    bar.update(first + count);
    if (on_chunk) on_chunk(first + count);
  }
  if (comm.is_root()) writer->commit();
  bar.finish();
  HeatDatasetSummary sum;
  sum.path = o.output;
  sum.samples = S;
  sum.nt = nt;
  sum.solver_dt = gen.solver_dt();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace attnphys::fd
