#include "attnphys/solvers/fd/heat_dataset.hpp"

#include "attnphys/core/resources.hpp"

#include <algorithm>
#include <array>
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
  const long cells = e[1] * e[2], nx = e[2];  // nx: the kernel must not call std::array::operator[] (host-only)
  for (long k = 0; k < nt; ++k) {
    if (k > 0)
      stepper_->advance(u, opt_.t_start + (k - 1) * opt_.delta_t, opt_.t_start + k * opt_.delta_t, dt_);
    const auto o = out;
    Kokkos::parallel_for(
        "attnphys::heat_pairs_snapshot", Kokkos::RangePolicy<ExecSpace>(0, count * cells),
        KOKKOS_LAMBDA(const long t) {
          const long s = t / cells, c = t - s * cells;
          o(s, k, c / nx, c % nx) = static_cast<T>(u.data()[t]);
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

HeatSampleSolver::HeatSampleSolver(const heat::HeatProblem& base, const heat::InitialConditionOptions& ic,
                                   const heat::HeatFamily& family, const HeatPairOptions& options,
                                   const heat::KappaLaw* law, const NonlinearOptions& picard)
    : base_(base), ic_(ic), family_(family), opt_(options), picard_(picard) {
  base_.validate();
  ic_.validate();
  require(opt_.delta_t > 0 && std::isfinite(opt_.delta_t), "delta_t must be positive, got ", opt_.delta_t);
  require(opt_.t_start >= 0 && std::isfinite(opt_.t_start), "t_start must be >= 0, got ", opt_.t_start);
  require(opt_.dt >= 0 && std::isfinite(opt_.dt), "dt must be >= 0 (0: automatic), got ", opt_.dt);
  if (law) {
    law->validate();
    picard_.validate();
    law_ = *law;
    has_law_ = true;
    opt_.method = Method::Adi;  // the nonlinear solver is Crank–Nicolson / ADI with Picard correction
  }
  if (opt_.dt > 0) {
    dt_ = opt_.dt;
    return;
  }
  // The step for the largest κ any sample can have, on the base grid and boundary types.
  heat::HeatProblem bound = base_;
  bound.kappa_field = View3<double>();
  bound.source = {};
  bound.source_field = View3<double>();
  double kb = family_.kappa_bound(base_);
  if (has_law_) {
    double ub = 3.0 * ic_.amplitude;
    if (family_.boundary == heat::BoundaryFamily::Random)
      ub += family_.boundary_amplitude * (1.0 + std::sqrt(double(family_.boundary_modes)));
    for (int a = 0; a < base_.grid.dim; ++a)
      for (int sd = 0; sd < 2; ++sd)
        if (!base_.periodic(a)) ub = std::max(ub, std::abs(base_.bc[a][sd].value));
    kb = law_.max_over(-ub, ub);
  }
  bound.kappa = kb;
  HeatStepper st(bound, opt_.method);
  dt_ = pair_dt(st, ic_, opt_.delta_t);
}

View3<double> HeatSampleSolver::initial(long index) const {
  const auto e = base_.spatial_extents();
  View2<double> f("attnphys::sample_initial", 1, e[0] * e[1] * e[2]);
  heat::initial_conditions(base_, ic_, opt_.seed, index, f);
  View3<double> u("attnphys::sample_u0", e[0], e[1], e[2]);
  Kokkos::deep_copy(u, View3<double>(f.data(), e[0], e[1], e[2]));
  return u;
}

std::vector<double> HeatSampleSolver::times(long nt) const {
  std::vector<double> t(std::size_t(std::max(nt, 0L)));
  for (long k = 0; k < nt; ++k) t[std::size_t(k)] = opt_.t_start + k * opt_.delta_t;
  return t;
}

HeatSolution HeatSampleSolver::solve(const heat::HeatProblem& problem, long index, long nt) const {
  require(nt >= 1, "a sample needs at least one snapshot, got nt = ", nt);
  const View3<double> u0 = initial(index);
  HeatSolveOptions so;
  so.method = opt_.method;
  so.dt = dt_;
  so.snapshot_times = times(nt);
  const double t_end = so.snapshot_times.back();
  if (has_law_) {
    NonlinearSolveOptions no;
    no.dt = dt_;
    no.picard = picard_;
    no.snapshot_times = so.snapshot_times;
    return solve_nonlinear(problem, law_, u0, t_end, no);
  }
  return fd::solve(problem, u0, t_end, so);
}

void HeatDatasetConfig::declare(OptionSet& set) {
  problem.declare(set);
  ic.declare(set);
  family.declare(set);
  law.declare(set);
  picard.declare(set);
  solver.declare(set);
  dataset.declare(set);
}

HeatPairOptions HeatDatasetConfig::pair_options() const {
  HeatPairOptions po;
  po.t_start = dataset.t_start;
  po.delta_t = dataset.delta_t;
  po.method = solver.to_solve_options().method;
  po.dt = solver.dt;
  po.seed = static_cast<std::uint64_t>(dataset.seed);
  return po;
}

HeatDatasetSummary write_heat_dataset(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                      const HeatSolveOptions& solver, const HeatDatasetOptions& o,
                                      const std::string& config_toml, const std::function<void(long)>& on_chunk,
                                      const Comm& comm) {
  return write_heat_dataset(problem, ic, heat::HeatFamily{}, nullptr, NonlinearOptions{}, solver, o, config_toml,
                            on_chunk, comm);
}

namespace {

// One dataset of the file and its place in a chunk's buffer.
struct Channel {
  std::string name;
  long per_sample = 0;  // values per sample
  h5::Shape shape;      // of one sample (after the sample axis)
  long offset = 0;      // values of the channels before it, per sample: its block in a chunk of `count` samples
                        // starts at offset·count
};

}  // namespace

HeatDatasetSummary write_heat_dataset(const heat::HeatProblem& problem, const heat::InitialConditionOptions& ic,
                                      const heat::HeatFamily& family, const heat::KappaLaw* law,
                                      const NonlinearOptions& picard, const HeatSolveOptions& solver,
                                      const HeatDatasetOptions& o,
                                      const std::string& config_toml, const std::function<void(long)>& on_chunk,
                                      const Comm& comm) {
  ScopedRegion region("attnphys::heat_dataset");
  const auto t0 = std::chrono::steady_clock::now();
  problem.validate();
  require(o.samples >= 1 && o.nt >= 1 && o.chunk >= 1, "dataset.samples, nt and chunk must be >= 1");
  require(o.delta_t > 0 && std::isfinite(o.delta_t) && o.t_start >= 0 && std::isfinite(o.t_start),
          "dataset.delta_t must be positive and dataset.t_start >= 0");
  HeatPairOptions po;
  po.t_start = o.t_start;
  po.delta_t = o.delta_t;
  po.method = solver.method;
  po.dt = solver.dt;
  po.seed = static_cast<std::uint64_t>(o.seed);
  const int dim = problem.grid.dim;
  const bool batched = !family.per_sample() && !law && dim <= 2;
  std::unique_ptr<HeatPairGenerator<float>> gen;
  std::unique_ptr<HeatSampleSolver> samples;
  if (batched)
    gen = std::make_unique<HeatPairGenerator<float>>(problem, ic, po);
  else
    samples = std::make_unique<HeatSampleSolver>(problem, ic, family, po, law, picard);
  const double solver_dt = batched ? gen->solver_dt() : samples->solver_dt();
  const long nx = problem.grid.n[0], ny = problem.grid.n[1], nz = problem.grid.n[2], nt = o.nt, S = o.samples;
  const long cells = nx * ny * nz;
  const long chunk = std::min(o.chunk, S);

  // What the file holds per sample.
  const bool has_kappa = family.kappa != heat::KappaFamily::Constant || problem.variable_kappa();
  const bool has_source = family.source != heat::SourceFamily::None || problem.source_field.size() > 0;
  bool has_boundary = family.boundary == heat::BoundaryFamily::Random;
  for (int a = 0; a < dim; ++a)
    for (int sd = 0; sd < 2; ++sd)
      if (!problem.periodic(a) && problem.bc[a][sd].nonzero()) has_boundary = true;
  const bool has_faces = family.boundary == heat::BoundaryFamily::Random;
  h5::Shape space{std::uint64_t(nx)};
  if (dim >= 2) space.push_back(std::uint64_t(ny));
  if (dim >= 3) space.push_back(std::uint64_t(nz));
  std::vector<Channel> channels;
  {
    Channel d{"data", nt * cells, {std::uint64_t(nt)}, 0};
    d.shape.insert(d.shape.end(), space.begin(), space.end());
    d.shape.push_back(1);
    channels.push_back(d);
  }
  if (has_kappa) channels.push_back({"kappa", cells, space, 0});
  if (has_source) channels.push_back({"source", cells, space, 0});
  if (has_boundary) channels.push_back({"boundary", cells, space, 0});
  static const char* axis_name[3] = {"x", "y", "z"};
  std::vector<std::array<int, 2>> faces;
  if (has_faces)
    for (int a = 0; a < dim; ++a)
      if (!problem.periodic(a))
        for (int sd = 0; sd < 2; ++sd) {
          h5::Shape fs;
          long n = 1;
          for (int b = 0; b < dim; ++b)
            if (b != a) fs.push_back(std::uint64_t(problem.grid.n[b])), n *= problem.grid.n[b];
          channels.push_back({std::string("boundary_faces/") + axis_name[a] + std::to_string(sd), n, fs, 0});
          faces.push_back({a, sd});
        }
  long per_sample = 0;
  for (auto& c : channels) c.offset = per_sample, per_sample += c.per_sample;  // per-sample layout inside a chunk

  // Rank 0 alone writes: it creates the file (its temporary), generates its own chunks and receives the others
  // in order. Chunk c (samples [c·chunk, c·chunk + count)) is generated by rank c mod size; a sample's data does
  // not depend on the chunk or rank it is generated in, so the file equals the one-rank file bit for bit.
  const int ranks = comm.size(), me = comm.rank();
  std::unique_ptr<h5::Writer> writer;
  std::exception_ptr create_error;
  // Sizes that cannot fit are refused before anything is generated: every rank holds one chunk (its buffer, and
  // in the batched path the trajectories on the device), rank 0 writes the whole file.
  const double chunk_bytes = double(chunk) * double(per_sample) * sizeof(float) * (batched ? 2.0 : 1.0);
  const double file_bytes = double(S) * double(per_sample) * sizeof(float);
  try {
    require_memory(chunk_bytes, msg("heat dataset: one chunk of ", chunk, " samples (", per_sample,
                                    " float32 values each)"),
                   "use a smaller dataset.chunk or a coarser grid");
  } catch (...) {
    create_error = std::current_exception();
  }
  if (comm.is_root() && !create_error) {
    try {
      require_disk(file_bytes, o.output,
                   msg("heat dataset '", o.output, "' (", S, " samples x ", per_sample, " float32 values)"),
                   "use fewer dataset.samples, fewer dataset.nt snapshots or a coarser grid, or write dataset.output "
                   "to a file system with more room");
      writer = std::make_unique<h5::Writer>(o.output, "heat_dataset", 1);
      auto& w = *writer;
      std::string names;
      for (const auto& c : channels) {
        h5::Shape shape{std::uint64_t(S)}, cshape{std::uint64_t(chunk)};
        shape.insert(shape.end(), c.shape.begin(), c.shape.end());
        cshape.insert(cshape.end(), c.shape.begin(), c.shape.end());
        w.create<float>(c.name, shape, cshape);
        if (c.name.find('/') == std::string::npos) names += (names.empty() ? "" : ",") + c.name;
      }
      for (int a = 0; a < dim; ++a) {
        std::vector<double> g(static_cast<std::size_t>(problem.grid.n[a]));
        for (long i = 0; i < problem.grid.n[a]; ++i) g[std::size_t(i)] = problem.coord(a, i);
        w.write(std::string("grid/") + axis_name[a], g);
      }
      std::vector<double> gt(static_cast<std::size_t>(nt));
      for (long k = 0; k < nt; ++k) gt[std::size_t(k)] = o.t_start + k * o.delta_t;
      w.write("grid/t", gt);
      w.set_attr("/", "config", config_toml);
      w.set_attr("/", "layout",
                 std::string(dim == 3   ? "data[sample, t, x, y, z, channel]"
                             : dim == 2 ? "data[sample, t, x, y, channel]"
                                        : "data[sample, t, x, channel]"));
      w.set_attr("/", "channels", names);
      w.set_attr("/", "family", family.describe());
      w.set_attr("/", "dim", long(dim));
      w.set_attr("/", "solver_dt", solver_dt);
      // The physics a reader needs to use the data (attnphys train heat with data.file): the boundary type ("mixed"
      // when the sides differ), the constant κ (the largest possible when κ varies), and whether the problem is
      // homogeneous (zero boundary data, no source).
      std::string bc = heat::to_string(problem.bc[0][0].type);
      for (int a = 0; a < dim; ++a)
        for (int side = 0; side < 2; ++side)
          if (heat::to_string(problem.bc[a][side].type) != bc) bc = "mixed";
      w.set_attr("/", "bc", bc);
      w.set_attr("/", "kappa", law ? law->kappa0 : family.kappa_bound(problem));
      w.set_attr("/", "variable_kappa", long(has_kappa ? 1 : 0));
      w.set_attr("/", "homogeneous", long(has_source || has_boundary || problem.source ? 0 : 1));
      w.set_attr("/", "nonlinear", long(law ? 1 : 0));
      if (law) {
        w.set_attr("/", "kappa_law", heat::to_string(law->kind));
        w.set_attr("/", "kappa_law_description", law->describe());
        w.set_attr("/", "kappa0", law->kappa0);
        w.set_attr("/", "beta", law->beta);
        if (law->kind == heat::KappaKind::Table) {
          w.set_attr("/", "table_u", law->table_u);
          w.set_attr("/", "table_kappa", law->table_kappa);
        }
      }
    } catch (...) {
      create_error = std::current_exception();
    }
  }
  // The other ranks must not start sending to a rank 0 that could not create the file, nor rank 0 wait for a
  // rank that cannot hold its chunk.
  double failed = create_error ? 1.0 : 0.0;
  comm.allreduce_max(&failed, 1);
  if (create_error) std::rethrow_exception(create_error);
  require(failed == 0.0, "heat dataset: another rank could not start (creating ", o.output,
          " or holding its chunk; see its error)");

  // File order of a cell: ((x·ny) + y)·nz + z, from the device's (z, y, x).
  auto file_index = [&](long k, long j, long i) { return (i * ny + j) * nz + k; };
  auto put_field = [&](float* dst, const HostView3<double>& h) {
    for (long k = 0; k < nz; ++k)
      for (long j = 0; j < ny; ++j)
        for (long i = 0; i < nx; ++i) dst[file_index(k, j, i)] = static_cast<float>(h(k, j, i));
  };
  ProgressBar bar(S, "heat dataset", o.progress && comm.is_root());
  View4<float> traj;
  if (batched) traj = View4<float>("attnphys::heat_dataset_chunk", chunk, nt, ny, nx);
  std::vector<float> buf(std::size_t(chunk * per_sample));
  HostView3<double> constant_kappa, constant_boundary;
  if (batched && has_kappa) constant_kappa = to_host(problem.kappa_field);
  if (batched && has_boundary) constant_boundary = heat::boundary_field(problem);
  constexpr int tag = 8;  // one sender's messages arrive in order, so one tag serves every chunk
  for (long c = 0, first = 0; first < S; ++c, first += chunk) {
    const long count = std::min(chunk, S - first);
    const long values = count * per_sample;
    const int owner = int(c % ranks);
    // Chunk buffer: channel by channel, each [count, per-sample values].
    auto at = [&](const Channel& ch, long s) { return buf.data() + ch.offset * count + s * ch.per_sample; };
    if (owner == me) {
      const Channel& data = channels[0];
      if (batched) {
        auto view = count == chunk ? traj : View4<float>("attnphys::heat_dataset_tail", count, nt, ny, nx);
        gen->trajectories(first, count, view);
        auto h = to_host(view);
        for (long s = 0; s < count; ++s)
          for (long k = 0; k < nt; ++k) {
            float* dst = at(data, s) + k * cells;
            for (long j = 0; j < ny; ++j)
              for (long i = 0; i < nx; ++i) dst[file_index(0, j, i)] = h(s, k, j, i);
          }
        // The channels after data, in their order: kappa, source, boundary, faces (source and faces stay as they are).
        const std::size_t kappa_q = 1, boundary_q = 1 + std::size_t(has_kappa) + std::size_t(has_source);
        for (long s = 0; s < count; ++s) {
          if (has_kappa) put_field(at(channels[kappa_q], s), constant_kappa);
          if (has_boundary) put_field(at(channels[boundary_q], s), constant_boundary);
        }
      } else {
        for (long s = 0; s < count; ++s) {
          const long index = first + s;
          const heat::HeatProblem p = samples->problem(index);
          const HeatSolution sol = samples->solve(p, index, nt);
          for (long k = 0; k < nt; ++k) put_field(at(data, s) + k * cells, to_host(sol.snapshots[std::size_t(k)]));
          std::size_t q = 1;
          if (has_kappa) {
            if (p.variable_kappa()) {
              put_field(at(channels[q], s), to_host(p.kappa_field));
            } else {
              std::fill(at(channels[q], s), at(channels[q], s) + cells, static_cast<float>(p.kappa));
            }
            ++q;
          }
          if (has_source) {
            if (p.source_field.size() > 0)
              put_field(at(channels[q], s), to_host(p.source_field));
            else
              std::fill(at(channels[q], s), at(channels[q], s) + cells, 0.0f);
            ++q;
          }
          if (has_boundary) put_field(at(channels[q++], s), heat::boundary_field(p));
          for (const auto& f : faces) {
            const auto v = heat::face_data(p, f[0], f[1]);
            float* dst = at(channels[q++], s);
            for (std::size_t i = 0; i < v.size(); ++i) dst[i] = static_cast<float>(v[i]);
          }
        }
      }
      if (!comm.is_root()) comm.send(buf.data(), values, 0, tag);
    } else if (comm.is_root()) {
      comm.recv(buf.data(), values, owner, tag);
    }
    if (!comm.is_root()) continue;
    for (const auto& ch : channels)
      writer->write_rows<float>(ch.name, std::uint64_t(first), std::uint64_t(count), at(ch, 0));
    bar.update(first + count);
    if (on_chunk) on_chunk(first + count);
  }
  if (comm.is_root()) writer->commit();
  bar.finish();
  HeatDatasetSummary sum;
  sum.path = o.output;
  sum.samples = S;
  sum.nt = nt;
  sum.solver_dt = solver_dt;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace attnphys::fd
