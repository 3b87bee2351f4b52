// The reference solver of a problem-family file (heat_file_solver.hpp): each sample's problem rebuilt exactly from
// the file's configuration, else from its float32 channels; and the equal-accuracy step search.
#include "attnphys/solvers/training/heat_file_solver.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/physics/heat/initial_conditions.hpp"
#include "attnphys/physics/heat/problem_options.hpp"

namespace attnphys::training {

namespace {

const char* const kAxis[3] = {"x", "y", "z"};

// The float32 channels of samples [first, first + count) that describe the problems: kappa, source and the faces.
struct FileChannels {
  std::vector<float> kappa, source;
  std::vector<std::pair<std::string, std::vector<float>>> faces;  // ("x0", values of every sample)
  std::vector<long> face_size;
};

FileChannels read_channels(const h5::Reader& r, long first, long count) {
  FileChannels c;
  auto rows = [&](const std::string& name) {
    const h5::Shape s = r.shape(name);
    long per = 1;
    for (std::size_t i = 1; i < s.size(); ++i) per *= long(s[i]);
    std::vector<float> v(std::size_t(per * count));
    r.read_rows<float>(name, std::uint64_t(first), std::uint64_t(count), v.data());
    return std::make_pair(v, per);
  };
  if (r.has("kappa")) c.kappa = rows("kappa").first;
  if (r.has("source")) c.source = rows("source").first;
  for (int a = 0; a < 3; ++a)
    for (int s = 0; s < 2; ++s) {
      const std::string name = std::string("boundary_faces/") + kAxis[a] + std::to_string(s);
      if (!r.has(name)) continue;
      auto v = rows(name);
      c.faces.emplace_back(std::string(kAxis[a]) + std::to_string(s), std::move(v.first));
      c.face_size.push_back(v.second);
    }
  return c;
}

// File order of cell (i, j, k) of a sample: ((i·ny) + j)·nz + k.
long file_cell(const heat::Grid& g, long i, long j, long k) { return (i * g.n[1] + j) * g.n[2] + k; }

// Whether the problem's κ, source and face data equal the file's float32 channels of sample s (of the rows read),
// exactly as float32; else the first difference, in words.
std::string differs_from_file(const heat::HeatProblem& p, const FileChannels& c, long s) {
  const auto& g = p.grid;
  const long cells = g.cells();
  auto field = [&](const View3<double>& f, double constant, const std::vector<float>& file, const char* name) {
    HostView3<double> h = f.size() > 0 ? to_host(f) : HostView3<double>();
    for (long k = 0; k < g.n[2]; ++k)
      for (long j = 0; j < g.n[1]; ++j)
        for (long i = 0; i < g.n[0]; ++i) {
          const double v = f.size() > 0 ? h(k, j, i) : constant;
          const float w = file[std::size_t(s * cells + file_cell(g, i, j, k))];
          if (float(v) != w) return msg(name, " of cell (", i, ", ", j, ", ", k, ") is ", w, " in the file, ", v,
                                        " rebuilt");
        }
    return std::string();
  };
  if (!c.kappa.empty()) {
    const std::string d = field(p.kappa_field, p.kappa, c.kappa, "kappa");
    if (!d.empty()) return d;
  } else if (p.variable_kappa()) {
    return "the rebuilt problem has a κ field, the file has no 'kappa' channel";
  }
  if (!c.source.empty()) {
    const std::string d = field(p.source_field, 0.0, c.source, "source");
    if (!d.empty()) return d;
  } else if (p.has_source()) {
    return "the rebuilt problem has a source, the file has no 'source' channel";
  }
  for (std::size_t q = 0; q < c.faces.size(); ++q) {
    const int a = c.faces[q].first[0] - 'x', side = c.faces[q].first[1] - '0';
    if (a >= g.dim || p.periodic(a)) return "the file has boundary_faces/" + c.faces[q].first + " for a periodic side";
    const auto v = heat::face_data(p, a, side);
    const long n = c.face_size[q];
    if (long(v.size()) != n) return msg("boundary_faces/", c.faces[q].first, " holds ", n, " values per sample, the ",
                                        "face has ", v.size());
    for (long i = 0; i < n; ++i)
      if (float(v[std::size_t(i)]) != c.faces[q].second[std::size_t(s * n + i)])
        return msg("boundary_faces/", c.faces[q].first, "[", i, "] is ", c.faces[q].second[std::size_t(s * n + i)],
                   " in the file, ", v[std::size_t(i)], " rebuilt");
  }
  return std::string();
}

// A static boundary profile that returns the file's value of the face cell under the evaluation point.
heat::SpaceTimeFn face_profile(const heat::HeatProblem& base, int axis, std::vector<double> values) {
  int t[2] = {-1, -1}, nt = 0;
  for (int b = 0; b < base.grid.dim; ++b)
    if (b != axis) t[nt++] = b;
  std::array<double, 3> h = base.grid.h, off{0, 0, 0};
  std::array<long, 3> n = base.grid.n;
  for (int b = 0; b < base.grid.dim; ++b) off[std::size_t(b)] = base.periodic(b) ? 0.0 : 0.5;
  return [values = std::move(values), t0 = t[0], t1 = t[1], h, off, n](double x, double y, double z, double) {
    const double pos[3] = {x, y, z};
    auto cell = [&](int b) {
      if (b < 0) return 0L;
      const long i = std::lround(pos[b] / h[std::size_t(b)] - off[std::size_t(b)]);
      return std::min(std::max(i, 0L), n[std::size_t(b)] - 1);
    };
    const long u = cell(t0), w = cell(t1), n2 = t1 >= 0 ? n[std::size_t(t1)] : 1;
    return values[std::size_t(u * n2 + w)];
  };
}

}  // namespace

HeatFileSolver::HeatFileSolver(const std::string& path, long first, long count) {
  h5::Reader r(path, h5::AnyFile{});
  require(r.is_attnphys(), "'", path, "' was not written by `attnphys heat dataset`, so its problems cannot be rebuilt");
  r.require_kind("heat_dataset", 1);
  for (const char* a : {"dim", "bc", "solver_dt", "kappa"})
    require(r.has_attr("/", a), "'", path, "' has no '", a, "' attribute (written by an older attnphys): its ",
            "problems cannot be rebuilt");
  dim_ = int(r.attr_long("/", "dim"));
  require(dim_ >= 1 && dim_ <= 3, "'", path, "': dim = ", dim_);
  const std::optional<heat::BcType> file_bc = file_bc_type(r.attr_string("/", "bc"));
  require(file_bc.has_value(), "'", path, "' has sides of different boundary types; its problems cannot be rebuilt");
  const heat::BcType bc = *file_bc;
  solver_dt_ = r.attr_double("/", "solver_dt");
  require(solver_dt_ > 0 && std::isfinite(solver_dt_), "'", path, "': solver_dt = ", solver_dt_);
  times_ = r.read<double>("grid/t");
  const h5::Shape ds = r.shape("data");
  require(long(ds.size()) == dim_ + 3, "'", path, "': 'data' has rank ", ds.size(), " for a ", dim_, "D dataset");
  const long samples = long(ds[0]);
  require(long(ds[1]) == long(times_.size()), "'", path, "': 'data' holds ", ds[1], " snapshots, grid/t ",
          times_.size());
  first_ = first;
  count_ = count > 0 ? count : samples - first;
  require(first_ >= 0 && count_ >= 1 && first_ + count_ <= samples, "samples [", first_, ", ", first_ + count_,
          ") outside '", path, "' (", samples, " samples)");
  std::array<long, 3> n{1, 1, 1};
  for (int a = 0; a < dim_; ++a) n[std::size_t(a)] = long(ds[std::size_t(2 + a)]);
  const bool file_law = r.has_attr("/", "nonlinear") && r.attr_long("/", "nonlinear") != 0;
  const FileChannels ch = read_channels(r, first_, count_);

  // 1. The configuration, when it reproduces the file.
  std::string why_not;
  try {
    require(r.has_attr("/", "config"), "no 'config' attribute");
    const std::string toml = r.attr_string("/", "config");
    require(!toml.empty(), "its 'config' attribute is empty (files written from Python)");
    fd::HeatDatasetConfig cfg;
    OptionSet set;  // the sections of `attnphys heat dataset`
    cfg.declare(set);
    set.load_string(toml, path + " (its 'config' attribute)");
    const auto& lo = cfg.law;
    const heat::HeatProblem base = cfg.problem.build();
    const heat::HeatFamily family = cfg.family.build(base, std::uint64_t(cfg.dataset.seed));
    require(base.grid.dim == dim_, "the config is ", base.grid.dim, "D, the file ", dim_, "D");
    for (int a = 0; a < dim_; ++a)
      require(base.grid.n[std::size_t(a)] == n[std::size_t(a)], "the config's grid has ", base.grid.n[std::size_t(a)],
              " cells along ", kAxis[a], ", the file ", n[std::size_t(a)]);
    require(lo.enabled() == file_law, "the config's nonlinear.law = ", enum_name(lo.law),
            " does not match nonlinear = ", file_law ? 1 : 0);
    if (r.has_attr("/", "family"))
      require(r.attr_string("/", "family") == family.describe(), "its family '", family.describe(),
              "' is not the file's '", r.attr_string("/", "family"), "'");
    const heat::KappaLaw law = lo.enabled() ? lo.build() : heat::KappaLaw{};
    const fd::NonlinearOptions picard = cfg.picard.build();
    const fd::HeatSampleSolver writer(base, cfg.ic, family, cfg.pair_options(), lo.enabled() ? &law : nullptr,
                                      picard);
    require(std::abs(writer.solver_dt() - solver_dt_) <= 1e-12 * solver_dt_, "its solver step ", writer.solver_dt(),
            " is not the file's solver_dt ", solver_dt_);
    std::vector<heat::HeatProblem> probs;
    probs.reserve(std::size_t(count_));
    for (long s = 0; s < count_; ++s) {
      probs.push_back(writer.problem(first_ + s));
      const std::string d = differs_from_file(probs.back(), ch, s);
      require(d.empty(), "sample ", first_ + s, ": ", d);
    }
    problems_ = std::move(probs);
    exact_ = true;
    has_law_ = lo.enabled();
    law_ = law;
    picard_ = picard;
    how_ = "problems regenerated exactly from the file's config (HeatSampleSolver::problem of each sample index, "
           "checked against its float32 kappa/source/boundary_faces channels)";
    return;
  } catch (const Error& e) {
    why_not = e.what();
  }

  // 2. The float32 channels.
  std::array<double, 3> h{1.0, 1.0, 1.0};
  for (int a = 0; a < dim_; ++a) {
    const auto g = r.read<double>(std::string("grid/") + kAxis[a]);
    require(long(g.size()) == n[std::size_t(a)] && g.size() >= 2, "'", path, "': grid/", kAxis[a], " holds ",
            g.size(), " values for ", n[std::size_t(a)], " cells");
    h[std::size_t(a)] = (g.back() - g.front()) / double(g.size() - 1);
  }
  heat::HeatProblem base = heat::make_problem(dim_, n, h, r.attr_double("/", "kappa"), bc);
  const bool boundary = r.has("boundary");
  require(!boundary || !ch.faces.empty(), "'", path, "' holds boundary data ('boundary') without its exact faces ",
          "(boundary_faces/*), and its config does not rebuild it (", why_not, ")");
  if (file_law) {
    const heat::KappaKind kind = heat::parse_kappa_kind(r.attr_string("/", "kappa_law"));
    law_ = kind == heat::KappaKind::Quadratic
               ? heat::KappaLaw::quadratic(r.attr_double("/", "kappa0"), r.attr_double("/", "beta"))
               : heat::KappaLaw::table(r.attr_doubles("/", "table_u"), r.attr_doubles("/", "table_kappa"));
    has_law_ = true;
  }
  const long cells = base.grid.cells();
  const auto e = base.spatial_extents();
  auto field_of = [&](const std::vector<float>& file, long s) {
    HostView3<double> hf("attnphys::file_field", e[0], e[1], e[2]);
    for (long k = 0; k < e[0]; ++k)
      for (long j = 0; j < e[1]; ++j)
        for (long i = 0; i < e[2]; ++i) hf(k, j, i) = double(file[std::size_t(s * cells + file_cell(base.grid, i, j, k))]);
    View3<double> f("attnphys::file_field", e[0], e[1], e[2]);
    Kokkos::deep_copy(f, hf);
    return f;
  };
  problems_.reserve(std::size_t(count_));
  for (long s = 0; s < count_; ++s) {
    heat::HeatProblem p = base;
    if (!ch.kappa.empty() && !has_law_) p.kappa_field = field_of(ch.kappa, s);
    if (!ch.source.empty()) p.source_field = field_of(ch.source, s);
    for (std::size_t q = 0; q < ch.faces.size(); ++q) {
      const int a = ch.faces[q].first[0] - 'x', side = ch.faces[q].first[1] - '0';
      require(a < dim_ && !base.periodic(a), "'", path, "' has boundary_faces/", ch.faces[q].first, " for a ",
              "periodic or missing side");
      const long m = ch.face_size[q];
      std::vector<double> v(static_cast<std::size_t>(m));
      for (long i = 0; i < m; ++i) v[std::size_t(i)] = double(ch.faces[q].second[std::size_t(s * m + i)]);
      p.bc[std::size_t(a)][std::size_t(side)] =
          heat::BoundaryCondition::profile(base.bc[std::size_t(a)][std::size_t(side)].type, face_profile(base, a, v));
    }
    p.validate();
    problems_.push_back(std::move(p));
  }
  exact_ = false;
  how_ = "problems rebuilt from the file's float32 channels (κ and f rounded to float32: relative change <= 6e-8 "
         "per cell; the config was not used: " + why_not + ")";
}

const heat::HeatProblem& HeatFileSolver::problem(long index) const {
  require(index >= first_ && index < first_ + count_, "HeatFileSolver: sample ", index, " was not prepared (samples [",
          first_, ", ", first_ + count_, "))");
  return problems_[std::size_t(index - first_)];
}

std::string HeatFileSolver::method_name() const {
  const std::string lin = dim_ == 1 ? "Crank–Nicolson" : dim_ == 2 ? "ADI (Peaceman–Rachford)" : "ADI (Douglas)";
  return has_law_ ? "nonlinear " + lin + " with Picard correction (" + std::to_string(picard_.picard_max) +
                        " linear solves per step)"
                  : lin;
}

long HeatFileSolver::reference_steps(long k, long stride) const {
  require(k >= 0 && stride >= 1 && k + stride < long(times_.size()), "reference_steps: snapshot ", k, " + ", stride,
          " outside the file's ", times_.size());
  long steps = 0;
  for (long j = k; j < k + stride; ++j) {
    const double span = times_[std::size_t(j + 1)] - times_[std::size_t(j)];
    steps += std::max(1L, long(std::ceil(span / solver_dt_ * (1 - 1e-12))));
  }
  return steps;
}

void HeatFileSolver::advance(const View2<double>& fields, const std::vector<long>& sample_of,
                             const std::vector<long>& k_of, long stride, long steps) const {
  const long rows = long(fields.extent(0));
  require(long(sample_of.size()) == rows && long(k_of.size()) == rows, "HeatFileSolver::advance: ", rows,
          " fields for ", sample_of.size(), " samples and ", k_of.size(), " snapshots");
  require(steps >= 1, "HeatFileSolver::advance: steps must be >= 1, got ", steps);
  std::unique_ptr<fd::HeatStepper> lin;
  std::unique_ptr<fd::NonlinearHeatStepper> nl;
  long current = -1;
  for (long r = 0; r < rows; ++r) {
    const long s = sample_of[std::size_t(r)], k = k_of[std::size_t(r)];
    require(k >= 0 && k + stride < long(times_.size()), "HeatFileSolver::advance: snapshot ", k, " + ", stride,
            " outside the file's ", times_.size());
    const heat::HeatProblem& p = problem(s);
    const auto e = p.spatial_extents();
    require(long(fields.extent(1)) == e[0] * e[1] * e[2], "HeatFileSolver::advance: fields of ", fields.extent(1),
            " points for a grid of ", e[0] * e[1] * e[2]);
    if (s != current) {  // one stepper per sample (its set-up is part of the solve)
      if (has_law_)
        nl = std::make_unique<fd::NonlinearHeatStepper>(p, law_, picard_);
      else
        lin = std::make_unique<fd::HeatStepper>(p, fd::Method::Adi);
      current = s;
    }
    View3<double> u(Kokkos::subview(fields, r, Kokkos::ALL).data(), e[0], e[1], e[2]);
    const double t0 = times_[std::size_t(k)], t1 = times_[std::size_t(k + stride)];
    const double dt = (t1 - t0) / double(steps);
    const long taken = has_law_ ? nl->advance(u, t0, t1, dt) : lin->advance(u, t0, t1, dt);
    require(taken == steps, "HeatFileSolver::advance: ", taken, " steps taken for ", steps, " asked");
  }
}

EqualAccuracy equal_accuracy_steps(const std::function<SolverRun(long)>& run, double target, long max_steps) {
  require(max_steps >= 1, "equal_accuracy_steps: max_steps must be >= 1");
  EqualAccuracy a;
  auto once = [&](long m) {
    const SolverRun s = run(m);
    a.tried.push_back(m);
    a.tried_rel_l2.push_back(s.rel_l2);
    a.tried_seconds.push_back(s.seconds);
    return s;
  };
  // Doubling: lo fails (0: none tried), hi meets.
  long lo = 0, hi = 0;
  SolverRun at_hi;
  for (long m = 1;; m = std::min(2 * m, max_steps)) {
    const SolverRun s = once(m);
    if (s.rel_l2 <= target) {
      hi = m;
      at_hi = s;
      break;
    }
    lo = m;
    a.steps = m, a.rel_l2 = s.rel_l2, a.seconds = s.seconds;
    if (m == max_steps) return a;  // not reached
  }
  // Bisection: err(lo) > target >= err(hi).
  while (lo > 0 && hi - lo > 1) {
    const long mid = lo + (hi - lo) / 2;
    const SolverRun s = once(mid);
    if (s.rel_l2 <= target) {
      hi = mid;
      at_hi = s;
    } else {
      lo = mid;
    }
  }
  a.reached = true;
  a.steps = hi;
  a.rel_l2 = at_hi.rel_l2;
  a.seconds = at_hi.seconds;
  return a;
}

}  // namespace attnphys::training
