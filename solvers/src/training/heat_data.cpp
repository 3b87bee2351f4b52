#include "attnphys/solvers/training/heat_data.hpp"

#include <algorithm>
#include <cmath>

#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"
#include "attnphys/solvers/fd/nonlinear_heat.hpp"

namespace attnphys::training {

void HeatDataOptions::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".dim", &dim, "spatial dimension (1, 2 or 3)", Range::closed(1, 3));
  set.add(s + ".n", &n, "grid points per axis (0: the grid of data.file, or 32 for generated pairs)",
          Range::non_negative());
  set.add(s + ".length", &length, "box length", Range::positive());
  set.add(s + ".kappa", &kappa, "diffusivity", Range::positive());
  set.add(s + ".bc", &bc, "boundary condition (zero data)");
  set.add(s + ".horizon_ftcs_steps", &horizon_ftcs_steps, "model horizon in explicit stability limits",
          Range::positive());
  set.add(s + ".length_scale", &length_scale, "correlation length of the random initial fields", Range::positive());
  set.add(s + ".n_train", &n_train, "training samples", Range::at_least(1));
  set.add(s + ".n_val", &n_val, "validation samples", Range::at_least(1));
  set.add(s + ".n_test", &n_test, "test samples", Range::at_least(1));
  set.add(s + ".seed", &seed, "seed of the random initial fields");
  set.add(s + ".reference_substeps", &reference_substeps, "reference solver steps per horizon", Range::at_least(1));
  set.add(s + ".horizons", &horizons, "multiples of the base horizon to train on (must contain 1)",
          Range::positive());
  set.add(s + ".file", &file, "HDF5 dataset (ours or PDEBench layout) to train from (empty: generate pairs)");
  set.add(s + ".file_stride", &file_stride, "snapshots of data.file per base horizon", Range::at_least(1));
  set.add(s + ".field", &field, "data.file: the evolving channel (dataset [sample, t, x, (y), (C)]; name or name[k])");
  set.add(s + ".channels", &channels,
          "extra input channels of the model: datasets of data.file (name or name[k]), or of a generated [family] "
          "(kappa, source, boundary; empty: all it draws)");
  family.declare(set, "family");
  law.declare(set, "nonlinear");
}

void HeatDataOptions::validate() const {
  require(dim >= 1 && dim <= 3, "data.dim must be 1, 2 or 3, got ", dim);
  require(n == 0 || n >= 4, "data.n must be 0 (the file's grid) or at least 4, got ", n);
  require(!field.empty(), "data.field must name the evolving channel of data.file (default \"data\")");
  parse_channel(field);
  for (const auto& c : channels) parse_channel(c);
  require(kappa > 0 && std::isfinite(kappa), "data.kappa must be a positive number, got ", kappa);
  require(length > 0 && std::isfinite(length), "data.length must be positive, got ", length);
  require(length_scale > 0, "data.length_scale must be positive, got ", length_scale);
  require(horizon_ftcs_steps > 0, "data.horizon_ftcs_steps must be positive");
  require(n_train > 0 && n_val > 0 && n_test > 0, "data.n_train, n_val and n_test must all be positive");
  require(!horizons.empty(), "data.horizons must list at least one multiple of the base horizon");
  bool has_one = false;
  for (double m : horizons) {
    require(m > 0 && std::isfinite(m), "data.horizons must hold positive multiples of the base horizon, got ", m);
    has_one = has_one || m == 1.0;
  }
  require(has_one, "data.horizons must contain 1 (the base horizon that the test metrics, the rollout and the ",
          "solver comparison use)");
  require(file_stride >= 1, "data.file_stride must be at least 1, got ", file_stride);
}

long HeatDataOptions::pairs_per_sample(long steps) const {
  if (file.empty()) return long(horizons.size());
  require(file_nt >= 2, "data.file '", file, "' has not been inspected (call resolve_heat_data)");
  long p = 0;
  for (double m : horizons) p += std::max(0L, file_nt - steps * file_stride * std::lround(m));
  return p;
}

double HeatDataOptions::horizon() const {
  return horizon_ftcs_steps * h() * h() / (2.0 * dim * kappa);
}

heat::HeatProblem HeatDataOptions::problem(long np) const {
  const double hp = length / double(np);
  return heat::make_problem(dim, {np, dim > 1 ? np : 1, dim > 2 ? np : 1},
                            {hp, dim > 1 ? hp : 1.0, dim > 2 ? hp : 1.0}, kappa, bc);
}

std::vector<double> HeatDataOptions::box() const {
  std::vector<double> b{length};
  if (dim > 1) b.push_back(box_y());
  if (dim > 2) b.push_back(box_z());
  return b;
}

namespace {
long points_of(int dim, long np) { return dim == 1 ? np : (dim == 2 ? np * np : np * np * np); }
}  // namespace

bool HeatDataOptions::generated_family() const {
  return file.empty() &&
         (family.kappa != heat::KappaFamily::Constant || family.source != heat::SourceFamily::None ||
          family.boundary != heat::BoundaryFamily::Zero || law.enabled());
}

std::vector<std::string> HeatDataOptions::family_channels() const {
  std::vector<std::string> c;
  if (!generated_family()) return c;
  if (family.kappa != heat::KappaFamily::Constant) c.push_back(enum_name(FamilyChannel::Kappa));
  if (family.source != heat::SourceFamily::None) c.push_back(enum_name(FamilyChannel::Source));
  if (family.boundary != heat::BoundaryFamily::Zero) c.push_back(enum_name(FamilyChannel::Boundary));
  return c;
}

heat::HeatProblem HeatDataOptions::sample_problem(long np, long index) const {
  const heat::HeatProblem base = problem(np);
  if (!generated_family()) return base;
  return family.build(base, std::uint64_t(seed)).sample_problem(base, index);
}

std::string HeatDataOptions::family_name() const {
  if (generated_family()) {
    std::string d = family.build(problem(std::max(4L, grid_nx())), std::uint64_t(seed)).describe();
    if (law.enabled()) d += ", nonlinear kappa(u): " + law.build().describe();
    return d;
  }
  if (info && !info->family.empty()) return info->family;
  return file.empty() ? "constant" : "from the file";
}

View2<double> grid_coordinates(const HeatDataOptions& o) {
  if (o.file.empty() || !o.info) return grid_coordinates(o, o.n);
  const HeatFileInfo& f = *o.info;
  const long nx = f.nx, ny = o.dim == 1 ? 1 : f.ny, nz = o.dim < 3 ? 1 : f.nz;
  auto h = HostView2<double>("attnphys::coords", nx * ny * nz, o.dim);
  for (long p = 0; p < nx * ny * nz; ++p) {
    h(p, 0) = f.x[std::size_t(p % nx)];
    if (o.dim > 1) h(p, 1) = f.y[std::size_t((p / nx) % ny)];
    if (o.dim > 2) h(p, 2) = f.z[std::size_t(p / (nx * ny))];
  }
  View2<double> c("attnphys::coords", nx * ny * nz, o.dim);
  Kokkos::deep_copy(c, h);
  return c;
}

std::vector<double> encoding_lengths(const HeatDataOptions& o) {
  const double period = o.bc == heat::BcType::Periodic ? 1.0 : 2.0;
  std::vector<double> l{period * o.length};
  if (o.dim > 1) l.push_back(period * o.box_y());
  if (o.dim > 2) l.push_back(period * o.box_z());
  return l;
}

View2<double> grid_coordinates(const HeatDataOptions& o, long np) {
  const auto prob = o.problem(np);
  const long pts = points_of(o.dim, np);
  auto h = HostView2<double>("attnphys::coords", pts, o.dim);
  for (long p = 0; p < pts; ++p) {
    h(p, 0) = prob.coord(0, p % np);
    if (o.dim == 2) h(p, 1) = prob.coord(1, p / np);
    if (o.dim == 3) {
      h(p, 1) = prob.coord(1, (p / np) % np);
      h(p, 2) = prob.coord(2, p / (np * np));
    }
  }
  View2<double> c("attnphys::coords", pts, o.dim);
  Kokkos::deep_copy(c, h);
  return c;
}

// The initial fields are the heat component's Gaussian random fields (physics/heat/initial_conditions.hpp):
// sample i depends only on (seed, i), and the same physical field is sampled on any grid.
View2<double> make_initial_fields(const HeatDataOptions& o, long first, long count, long np) {
  heat::InitialConditionOptions ic;
  ic.kind = heat::IcKind::Grf;
  ic.length_scale = o.length_scale;
  View2<double> u("attnphys::initial_fields", count, points_of(o.dim, np));
  heat::initial_conditions(o.problem(np), ic, std::uint64_t(o.seed), first, u);
  return u;
}

void advance_reference(const HeatDataOptions& o, const View2<double>& fields, long np, double horizons,
                       long substeps) {
  const long count = fields.extent(0);
  if (count == 0 || horizons <= 0) return;
  fd::HeatStepper stepper(o.problem(np), fd::Method::Adi);
  const double t1 = horizons * o.horizon();
  if (o.dim == 3) {  // 3D states are one sample (nz, ny, nx): row by row with the one stepper (Douglas ADI)
    const long P = fields.extent(1);
    for (long r = 0; r < count; ++r) {
      View3<double> u(fields.data() + r * P, np, np, np);
      stepper.advance(u, 0.0, t1, o.horizon() / double(substeps));
    }
    return;
  }
  View3<double> u(fields.data(), count, o.dim > 1 ? np : 1, np);  // a [batch, ny, nx] view of the same memory
  stepper.advance(u, 0.0, t1, o.horizon() / double(substeps));
}

std::vector<heat::HeatProblem> sample_problems(const HeatDataOptions& o, long np, const std::vector<long>& sample_of) {
  const heat::HeatProblem base = o.problem(np);
  std::vector<heat::HeatProblem> out;
  out.reserve(sample_of.size());
  if (!o.generated_family()) {
    out.assign(sample_of.size(), base);
    return out;
  }
  const heat::HeatFamily fam = o.family.build(base, std::uint64_t(o.seed));
  for (long i : sample_of) out.push_back(fam.sample_problem(base, i));
  return out;
}

void advance_reference(const HeatDataOptions& o, const View2<double>& fields, long np, double horizons,
                       long substeps, const std::vector<heat::HeatProblem>& problems) {
  if (!o.generated_family()) return advance_reference(o, fields, np, horizons, substeps);
  const long count = fields.extent(0), P = fields.extent(1);
  require(long(problems.size()) == count, "advance_reference: ", problems.size(), " problems for ", count, " rows");
  if (count == 0 || horizons <= 0) return;
  const double t1 = horizons * o.horizon();
  const bool nonlinear = o.law.enabled();
  const heat::KappaLaw law = nonlinear ? o.law.build() : heat::KappaLaw{};
  for (long r = 0; r < count; ++r) {
    // row r as a [1, ny, nx] view (3D: [nz, ny, nx])
    View3<double> u(fields.data() + r * P, o.dim > 2 ? np : 1, o.dim > 1 ? np : 1, np);
    if (nonlinear) {
      fd::NonlinearHeatStepper stepper(problems[std::size_t(r)], law);
      stepper.advance(u, 0.0, t1, o.horizon() / double(substeps));
    } else {
      fd::HeatStepper stepper(problems[std::size_t(r)], fd::Method::Adi);
      stepper.advance(u, 0.0, t1, o.horizon() / double(substeps));
    }
  }
}

namespace {
// The family's channels of samples [first, first + count) on an np grid, [count·H, points, C] (each sample's row
// repeated for its H horizons), in the order of o.channels.
View3<double> family_channel_fields(const HeatDataOptions& o, long first, long count, long np, long H) {
  const long P = points_of(o.dim, np), C = long(o.channels.size());
  View3<double> extra("attnphys::pair_channels", count * H, P, C);
  if (C == 0) return extra;
  auto h = Kokkos::create_mirror_view(extra);
  const heat::HeatProblem base = o.problem(np);
  const heat::HeatFamily fam = o.family.build(base, std::uint64_t(o.seed));
  using Channel = FamilyChannel;
  std::vector<Channel> kinds;  // parsed once (resolve_heat_data admits only these names)
  for (const auto& name : o.channels) kinds.push_back(parse_enum<Channel>(name, "data.channels"));
  for (long s = 0; s < count; ++s) {
    const heat::HeatProblem p = fam.sample_problem(base, first + s);
    for (long c = 0; c < C; ++c) {
      const Channel kind = kinds[std::size_t(c)];
      std::vector<double> v(std::size_t(P), 0.0);
      if (kind == Channel::Kappa) {
        if (p.variable_kappa()) {
          auto k = to_host(p.kappa_field);
          for (long q = 0; q < P; ++q) v[std::size_t(q)] = k.data()[q];
        } else {
          std::fill(v.begin(), v.end(), p.kappa);
        }
      } else if (kind == Channel::Source) {
        if (p.source_field.size() > 0) {
          auto f = to_host(p.source_field);
          for (long q = 0; q < P; ++q) v[std::size_t(q)] = f.data()[q];
        }
      } else {  // "boundary" (resolve_heat_data admits no other name)
        auto b = heat::boundary_field(p);
        for (long q = 0; q < P; ++q) v[std::size_t(q)] = b.data()[q];
      }
      for (long j = 0; j < H; ++j)
        for (long q = 0; q < P; ++q) h(s * H + j, q, c) = v[std::size_t(q)];
    }
  }
  Kokkos::deep_copy(extra, h);
  return extra;
}

// later[r, j − 2, :] = the field of row r after j of its horizons, j = 2..steps: the targets advanced again by each
// row's horizon with the reference solver (rows of one horizon at a time).
void generate_later(const HeatDataOptions& o, HeatPairs& p, long first, long np, long steps) {
  const long K1 = steps - 1, P = p.points, R = p.count, H = long(o.horizons.size());
  p.later = View3<double>("attnphys::later_targets", R, K1, P);
  for (long j = 0; j < H; ++j) {
    const long rows = R / H;  // rows s·H + j
    View2<double> cur("attnphys::trajectory", rows, P);
    const auto tg = p.targets;
    const auto later = p.later;
    Kokkos::parallel_for(
        "attnphys::trajectory_start", Kokkos::RangePolicy<ExecSpace>(0, rows * P),
        KOKKOS_LAMBDA(long i) { cur(i / P, i % P) = tg((i / P) * H + j, i % P); });
    std::vector<long> sample_of(static_cast<std::size_t>(rows));
    for (long s = 0; s < rows; ++s) sample_of[std::size_t(s)] = first + s;
    const auto problems = sample_problems(o, np, sample_of);
    for (long k = 0; k < K1; ++k) {
      advance_reference(o, cur, np, o.horizons[std::size_t(j)], o.reference_substeps, problems);
      Kokkos::parallel_for(
          "attnphys::trajectory_store", Kokkos::RangePolicy<ExecSpace>(0, rows * P),
          KOKKOS_LAMBDA(long i) { later((i / P) * H + j, k, i % P) = cur(i / P, i % P); });
    }
  }
}
}  // namespace

static HeatPairs generate_one_step(const HeatDataOptions& o, long first, long count, long np) {
  HeatPairs p;
  const long H = long(o.horizons.size());
  p.count = count * H;
  p.n = p.nx = np;
  p.ny = o.dim == 1 ? 1 : np;
  p.nz = o.dim < 3 ? 1 : np;
  p.dim = o.dim;
  p.points = points_of(o.dim, np);
  p.coords = grid_coordinates(o, np);
  p.tau = View1<double>("attnphys::pair_horizon", p.count);
  p.extra = family_channel_fields(o, first, count, np, H);
  std::vector<long> sample_of(static_cast<std::size_t>(count));
  for (long s = 0; s < count; ++s) sample_of[std::size_t(s)] = first + s;
  const auto problems = sample_problems(o, np, sample_of);
  if (H == 1) {  // one pair per sample: targets advanced in place
    p.inputs = make_initial_fields(o, first, count, np);
    p.targets = View2<double>("attnphys::targets", count, p.points);
    Kokkos::deep_copy(p.targets, p.inputs);
    advance_reference(o, p.targets, np, o.horizons[0], o.reference_substeps, problems);
    Kokkos::deep_copy(p.tau, o.horizons[0]);
    return p;
  }
  // Rows s·H + j: sample first + s advanced by horizons[j].
  const View2<double> u0 = make_initial_fields(o, first, count, np);
  p.inputs = View2<double>("attnphys::inputs", p.count, p.points);
  p.targets = View2<double>("attnphys::targets", p.count, p.points);
  View2<double> tmp("attnphys::targets_one_horizon", count, p.points);
  const long P = p.points;
  const auto in = p.inputs, tg = p.targets;
  const auto tau = p.tau;
  for (long j = 0; j < H; ++j) {
    Kokkos::deep_copy(tmp, u0);
    advance_reference(o, tmp, np, o.horizons[j], o.reference_substeps, problems);
    const double m = o.horizons[j];
    Kokkos::parallel_for(
        "attnphys::scatter_horizon", Kokkos::RangePolicy<ExecSpace>(0, count * P), KOKKOS_LAMBDA(long i) {
          const long s = i / P, q = i % P, r = s * H + j;
          in(r, q) = u0(s, q);
          tg(r, q) = tmp(s, q);
          if (q == 0) tau(r) = m;
        });
  }
  return p;
}

HeatPairs generate_heat_pairs(const HeatDataOptions& o, long first, long count, long np, long steps) {
  require(steps >= 1, "generate_heat_pairs: steps must be at least 1, got ", steps);
  HeatPairs p = generate_one_step(o, first, count, np);
  if (steps > 1) generate_later(o, p, first, np, steps);
  return p;
}

HeatPairs make_heat_pairs(const HeatDataOptions& o, long first, long count, long np, long steps) {
  if (o.file.empty()) return generate_heat_pairs(o, first, count, np, steps);
  require(np == o.n, "data.file '", o.file, "' holds fields on its own ", o.grid_nx(),
          o.dim > 1 ? "x" + std::to_string(o.grid_ny()) : std::string(), " grid; pairs on a ", np,
          "-point grid are generated (generate_heat_pairs)");
  return read_heat_pairs(o, first, count, steps);
}

}  // namespace attnphys::training
