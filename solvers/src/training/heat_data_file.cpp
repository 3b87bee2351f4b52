// Training pairs read from an HDF5 dataset file: one written by `attnphys heat dataset`
// (solvers/fd/heat_dataset.hpp: data float32 [sample, t, x, (y), 1], grid/x, grid/y, grid/t, root attributes dim,
// bc, kappa, variable_kappa, homogeneous, and per-sample channels such as kappa [sample, x, (y)]) or any file in
// PDEBench's layout (fields such as tensor [N, T, X], density [N, T, X, Y], x-coordinate, y-coordinate,
// t-coordinate). See heat_data.hpp for the rules.
// Everything the training relies on is checked before use, with messages that say what to change.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <vector>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/solvers/training/heat_data.hpp"

namespace attnphys::training {
// The 'bc' attribute of a file whose sides have different boundary types (the dataset writer's name).
enum class MixedBc { Mixed };
}  // namespace attnphys::training

namespace attnphys {
template <>
struct EnumNames<training::MixedBc> {
  static constexpr EnumName<training::MixedBc> values[] = {{training::MixedBc::Mixed, "mixed"}};
};
}  // namespace attnphys

namespace attnphys::training {

namespace {

std::string shape_text(const h5::Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "scalar" : out;
}

std::string grid_text(long nx, long ny, int dim, long nz = 1) {
  return dim == 1 ? std::to_string(nx) + "-point"
                  : std::to_string(nx) + "x" + std::to_string(ny) + (dim == 3 ? "x" + std::to_string(nz) : "");
}

// The grid axes of a dim-D dataset, in the file's order: "x", "x, y", "x, y, z".
std::string axes_text(int dim) { return dim == 1 ? "x" : dim == 2 ? "x, y" : "x, y, z"; }

// "'a' [4x2x16], 'grid/x' [16], ..." (at most 24 entries).
std::string dataset_list(const h5::Reader& r) {
  const auto names = r.datasets();
  std::string out;
  std::size_t shown = 0;
  for (const auto& n : names) {
    if (shown == 24) {
      out += ", ... (" + std::to_string(names.size() - shown) + " more)";
      break;
    }
    out += (shown++ ? ", '" : "'") + n + "' [" + shape_text(r.shape(n)) + "]";
  }
  return out.empty() ? "(none)" : out;
}

bool per_sample_groups(const h5::Reader& r);

// What to say about PDEBench's per-sample groups when a dataset was not found.
std::string groups_hint(const h5::Reader& r) {
  return per_sample_groups(r) ? ". Files with one group per sample ('0000/data', ...) are not read: write the "
                                "samples into one dataset [sample, t, x, (y), (C)]"
                              : "";
}

bool per_sample_groups(const h5::Reader& r) {
  for (const auto& n : r.datasets()) {
    const auto slash = n.find('/');
    if (slash != std::string::npos && slash > 0 &&
        std::all_of(n.begin(), n.begin() + long(slash), [](char c) { return std::isdigit(unsigned(c)) != 0; }))
      return true;
  }
  return false;
}

// Uniform spacing of a coordinate list, or an error naming the list. The tolerance allows float32 coordinates.
double uniform_spacing(const std::vector<double>& v, const std::string& what, const std::string& path) {
  require(v.size() >= 2, "data.file '", path, "': ", what, " has ", v.size(), " value(s), at least 2 are needed");
  const double d = v[1] - v[0];
  require(d > 0 && std::isfinite(d), "data.file '", path, "': ", what, " is not increasing (", v[0], ", ", v[1],
          ", ...)");
  double big = 0;
  for (double x : v) big = std::max(big, std::abs(x));
  const double tol = 1e-6 * d + 5e-7 * big;
  for (std::size_t i = 1; i < v.size(); ++i)
    require(std::abs((v[i] - v[i - 1]) - d) <= tol, "data.file '", path, "': ", what,
            " is not uniformly spaced (step ", v[i] - v[i - 1], " at index ", i, ", first step ", d, ")");
  return d;
}

// The first of `names` that is a dataset of the file, or "".
std::string first_of(const h5::Reader& r, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (r.is_numeric_dataset(n)) return n;
  return "";
}

// Locates a channel: its layout (time-dependent or static), component axis and sample count against the field's.
// role: the evolving field (data.field) or an extra channel (data.channels).
enum class Role { Field, Channel };
FileChannel locate(const h5::Reader& r, const ChannelSpec& spec, Role role_kind, int dim, long samples, long nt,
                   long nx, long ny, long nz, const std::string& field_name) {
  const std::string& path = r.path();
  const char* role = role_kind == Role::Field ? "data.field" : "data.channels";
  if (!r.is_numeric_dataset(spec.name))
    fail("data.file '", path, "' has no dataset '", spec.name, "' (", role, " = '", spec.text(),
         "'). Its datasets: ", dataset_list(r), groups_hint(r));
  FileChannel c;
  c.spec = spec;
  c.shape = r.shape(spec.name);
  const auto& s = c.shape;
  const long rank = long(s.size());
  const bool is_field = role_kind == Role::Field;
  std::vector<std::uint64_t> grid{std::uint64_t(nx)};
  if (dim >= 2) grid.push_back(std::uint64_t(ny));
  if (dim == 3) grid.push_back(std::uint64_t(nz));
  auto axes_match = [&](long at, const std::vector<std::uint64_t>& want) {
    if (at + long(want.size()) > rank) return false;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (s[std::size_t(at) + i] != want[i]) return false;
    return true;
  };
  const std::string want = is_field ? "[sample, t, " + axes_text(dim) + ", (components)]"
                                    : "[sample, t, " + axes_text(dim) + ", (components)] or [sample, " +
                                          axes_text(dim) + ", (components)]";
  if (is_field) {
    require(rank == dim + 2 || rank == dim + 3, "data.file '", path, "': '", spec.name, "' (data.field) has shape ",
            shape_text(s), "; a ", dim, "D field is ", want, " (rank ", dim + 2, " or ", dim + 3, ")");
    c.time_dependent = true;
  } else {
    require(rank >= 1 && long(s[0]) == samples, "data.file '", path, "': channel '", spec.name, "' holds ",
            rank >= 1 ? long(s[0]) : 0L, " samples but '", field_name, "' (data.field) holds ", samples,
            ": every channel needs one entry per sample");
    std::vector<std::uint64_t> tgrid{std::uint64_t(nt)};
    tgrid.insert(tgrid.end(), grid.begin(), grid.end());
    if ((rank == dim + 2 || rank == dim + 3) && axes_match(1, tgrid))
      c.time_dependent = true;
    else if ((rank == dim + 1 || rank == dim + 2) && axes_match(1, grid))
      c.time_dependent = false;
    else
      fail("data.file '", path, "': channel '", spec.name, "' has shape ", shape_text(s), ", which does not fit '",
           field_name, "' (", samples, " samples, ", nt, " snapshots on a ", grid_text(nx, ny, dim, nz),
           " grid): a channel is ", want, " on the grid of data.field");
  }
  const long grid_rank = 1 + (c.time_dependent ? 1 : 0) + dim;
  c.components = rank > grid_rank ? long(s.back()) : 1;
  if (spec.component >= 0) {
    require(spec.component < c.components, "data.file '", path, "': '", spec.text(), "' (", role, ") asks for ",
            "component ", spec.component, " but '", spec.name, "' has ", c.components, " component(s) along its last ",
            "axis (shape ", shape_text(s), ")");
    c.component = spec.component;
  } else {
    require(c.components == 1, "data.file '", path, "': '", spec.name, "' (", role, ") has ", c.components,
            " components along its last axis (shape ", shape_text(s), "): choose one, e.g. '", spec.name, "[0]'");
    c.component = 0;
  }
  return c;
}

}  // namespace

std::string ChannelSpec::text() const {
  return component < 0 ? name : name + "[" + std::to_string(component) + "]";
}

ChannelSpec parse_channel(const std::string& text) {
  ChannelSpec c;
  const auto open = text.find('[');
  if (open == std::string::npos) {
    require(!text.empty() && text.find(']') == std::string::npos, "channel '", text, "' is not a dataset name: write ",
            "'name' or 'name[k]' (component k of a trailing axis)");
    c.name = text;
    return c;
  }
  const std::string digits = text.substr(open + 1, text.size() >= open + 2 ? text.size() - open - 2 : 0);
  require(open > 0 && text.back() == ']' && !digits.empty() &&
              std::all_of(digits.begin(), digits.end(), [](char ch) { return std::isdigit(unsigned(ch)) != 0; }) &&
              digits.size() < 10,
          "channel '", text, "' is not 'name' or 'name[k]' with a component index k >= 0 (e.g. 'velocity[1]')");
  c.name = text.substr(0, open);
  c.component = std::stol(digits);
  return c;
}

bool FileChannel::solved_field() const { return spec.name == kSolvedField && components == 1; }

std::optional<heat::BcType> file_bc_type(const std::string& text) {
  if (find_enum<MixedBc>(text)) return std::nullopt;
  return heat::parse_bc_type(text);  // one boundary type, or refused with the valid names
}

long FileChannel::values_per_sample() const {
  long v = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) v *= long(shape[i]);
  return v;
}

HeatFileInfo inspect_heat_file(const HeatDataOptions& o) {
  const std::string& path = o.file;
  require(!path.empty(), "data.file is empty");
  require(std::filesystem::exists(path), "data.file '", path, "' does not exist (write it with `attnphys heat ",
          "dataset`, or leave data.file empty to generate the pairs)");
  // Any HDF5 file, but a truncated, corrupted or non-HDF5 one is refused, and a file of attnphys keeps its checks
  // (a checkpoint or a too-new dataset is not read as data).
  h5::Reader r(path, h5::AnyFile{});
  HeatFileInfo f;
  f.path = path;
  f.attnphys = r.is_attnphys();
  if (f.attnphys) r.require_kind("heat_dataset", 1);

  // Dimension: our 'dim' attribute, else the coordinates present.
  const std::string xname = first_of(r, {"grid/x", "x-coordinate"});
  const std::string yname = first_of(r, {"grid/y", "y-coordinate"});
  const std::string zname = first_of(r, {"grid/z", "z-coordinate"});
  const std::string tname = first_of(r, {"grid/t", "t-coordinate"});
  if (f.attnphys) {
    require(r.has_attr("/", "dim"), "data.file '", path, "' has no 'dim' attribute: it was not written by ",
            "`attnphys heat dataset`");
    f.dim = int(r.attr_long("/", "dim"));
  } else {
    require(!xname.empty(), "data.file '", path, "' has no x coordinates (looked for 'grid/x' and 'x-coordinate'). ",
            "Its datasets: ", dataset_list(r), groups_hint(r));
    f.dim = !zname.empty() ? 3 : !yname.empty() ? 2 : 1;
  }
  require(f.dim >= 1 && f.dim <= 3, "data.file '", path, "' is a ", f.dim, "D dataset; the surrogate trains on 1D, ",
          "2D and 3D data");

  // The evolving field.
  const ChannelSpec fs = parse_channel(o.field);
  {
    const long dim = f.dim;
    if (!r.is_numeric_dataset(fs.name)) locate(r, fs, Role::Field, f.dim, 0, 0, 0, 0, 0, fs.name);  // the error
    const h5::Shape s = r.shape(fs.name);
    require(long(s.size()) == dim + 2 || long(s.size()) == dim + 3, "data.file '", path, "': '", fs.name,
            "' has shape ", shape_text(s), "; a ", dim, "D heat dataset is [sample, t, ", axes_text(int(dim)),
            ", (components)] (rank ", dim + 2, " or ", dim + 3, ")");
    f.samples = long(s[0]);
    f.nt = long(s[1]);
    f.nx = long(s[2]);
    f.ny = dim >= 2 ? long(s[3]) : 1;
    f.nz = dim == 3 ? long(s[4]) : 1;
  }
  f.field = locate(r, fs, Role::Field, f.dim, f.samples, f.nt, f.nx, f.ny, f.nz, fs.name);
  require(f.samples >= 1, "data.file '", path, "' holds no samples");
  require(f.nt >= 2, "data.file '", path, "' holds ", f.nt, " snapshot(s) per sample of '", fs.name, "'; training ",
          "pairs need at least 2 (write the dataset with dataset.nt >= 2)");
  require(f.nx >= 2 && f.ny >= 1 && f.nz >= 1, "data.file '", path, "': '", fs.name, "' has a ",
          grid_text(f.nx, f.ny, f.dim, f.nz),
          " grid");
  f.n = f.nx;

  // Coordinates.
  require(!xname.empty(), "data.file '", path, "' has no dataset 'grid/x' (nor 'x-coordinate')");
  f.x = r.read<double>(xname);
  require(long(f.x.size()) == f.nx, "data.file '", path, "': ", xname, " has ", f.x.size(), " values but '",
          fs.name, "' has ", f.nx, " points along x");
  f.h = uniform_spacing(f.x, xname, path);
  f.hy = f.h;
  f.hz = f.h;
  f.y = {0.0};
  f.z = {0.0};
  if (f.dim >= 2) {
    require(!yname.empty(), "data.file '", path, "' has no dataset 'grid/y' (nor 'y-coordinate')");
    f.y = r.read<double>(yname);
    require(long(f.y.size()) == f.ny, "data.file '", path, "': ", yname, " has ", f.y.size(), " values but '",
            fs.name, "' has ", f.ny, " points along y");
    f.hy = uniform_spacing(f.y, yname, path);
  }
  if (f.dim == 3) {
    require(!zname.empty(), "data.file '", path, "' has no dataset 'grid/z' (nor 'z-coordinate')");
    f.z = r.read<double>(zname);
    require(long(f.z.size()) == f.nz, "data.file '", path, "': ", zname, " has ", f.z.size(), " values but '",
            fs.name, "' has ", f.nz, " points along z");
    f.hz = uniform_spacing(f.z, zname, path);
  }
  f.length = double(f.nx) * f.h;
  f.length_y = f.dim >= 2 ? double(f.ny) * f.hy : f.length;
  f.length_z = f.dim == 3 ? double(f.nz) * f.hz : f.length;
  f.has_time = !tname.empty();
  if (f.attnphys)
    require(f.has_time, "data.file '", path, "' has no dataset 'grid/t'");
  if (f.has_time) {
    auto gt = r.read<double>(tname);
    require(long(gt.size()) == f.nt || long(gt.size()) == f.nt + 1, "data.file '", path, "': ", tname, " has ",
            gt.size(), " values but '", fs.name, "' has ", f.nt, " snapshots (", tname, " must have ", f.nt, " or ",
            f.nt + 1, ")");
    gt.resize(std::size_t(f.nt));
    f.dt = uniform_spacing(gt, tname, path);
  } else {
    f.dt = 1.0;  // snapshot units
  }

  // Physics: ours with constant κ, no sources or boundary data, one boundary type and the field the solver
  // advanced; else from the file.
  std::vector<std::string> why;
  f.bc = o.bc;
  bool bc_from_file = false;  // the file's single boundary type replaced data.bc
  f.kappa = o.kappa;
  if (r.has_attr("/", "family")) {
    try {
      f.family = r.attr_string("/", "family");
    } catch (const Error&) {
    }
  }
  if (!f.attnphys) {
    why.push_back("it was not written by `attnphys heat dataset`");
  } else {
    if (r.has_attr("/", "variable_kappa") && r.attr_long("/", "variable_kappa") != 0) why.push_back("variable κ(x)");
    if (r.has_attr("/", "homogeneous") && r.attr_long("/", "homogeneous") == 0)
      why.push_back("sources or boundary data");
    if (r.has_attr("/", "nonlinear") && r.attr_long("/", "nonlinear") != 0) why.push_back("a nonlinear κ(u)");
    if (!r.has_attr("/", "bc")) why.push_back("no 'bc' attribute (written by an older attnphys)");
    if (!r.has_attr("/", "kappa")) why.push_back("no 'kappa' attribute (written by an older attnphys)");
    if (r.has_attr("/", "bc")) {
      if (const auto bc = file_bc_type(r.attr_string("/", "bc"))) {
        f.bc = *bc;
        bc_from_file = true;
      } else  // "mixed": the sides differ, and the grid's type stays data.bc
        why.push_back("different boundary types on different sides");
    }
    if (why.empty()) {
      f.kappa = r.attr_double("/", "kappa");
      require(f.kappa > 0 && std::isfinite(f.kappa), "data.file '", path, "': kappa = ", f.kappa,
              " is not positive");
    }
    if (!f.field.solved_field())
      why.push_back("data.field = '" + fs.text() + "' is not the solved field 'data'");
    if (f.dim >= 2 && (f.nx != f.ny || std::abs(f.hy - f.h) > 1e-6 * f.h ||
                       (f.dim == 3 && (f.nz != f.nx || std::abs(f.hz - f.h) > 1e-6 * f.h))))
      why.push_back("a " + grid_text(f.nx, f.ny, f.dim, f.nz) + " grid (the evaluation's reference solver runs on square " +
                    "grids of square cells)");
    // Cell coordinates of our writer: x_i = i·h (periodic) or (i + 1/2)·h.
    const double x0 = f.bc == heat::BcType::Periodic ? 0.0 : 0.5 * f.h;
    require(why.size() > 0 || std::abs(f.x[0] - x0) <= 1e-6 * f.h, "data.file '", path, "': ", xname,
            " starts at ", f.x[0], ", expected ", x0, " for a ", enum_name(f.bc), " grid of spacing ", f.h);
  }
  f.solver_physics = why.empty();
  if (!f.solver_physics) {
    std::string w;
    for (std::size_t i = 0; i < why.size(); ++i) w += (i ? "; " : "") + why[i];
    auto num = [](double v) {
      std::ostringstream os;
      os << v;
      return os.str();
    };
    f.physics_note = "data.file '" + path + "' has its physics from the file (" + w + "): box " + num(f.length) +
                     (f.dim >= 2 ? " x " + num(f.length_y) : "") + (f.dim == 3 ? " x " + num(f.length_z) : "") +
                     " from the coordinates, boundary type '" + enum_name(f.bc) + "'" +
                     (bc_from_file ? " from the file" : " from data.bc") +
                     (f.has_time ? "" : ", no time coordinates (snapshot spacing taken as 1)");
  }

  // Extra channels.
  for (const auto& text : o.channels)
    f.channels.push_back(
        locate(r, parse_channel(text), Role::Channel, f.dim, f.samples, f.nt, f.nx, f.ny, f.nz, fs.name));
  return f;
}

HeatDataOptions resolve_heat_data(const HeatDataOptions& o_in) {
  if (o_in.file.empty()) return resolve_heat_file(o_in);
  HeatDataOptions o = o_in;
  if (o.family.kappa != heat::KappaFamily::Constant || o.family.source != heat::SourceFamily::None ||
      o.family.boundary != heat::BoundaryFamily::Zero || o.law.enabled()) {
    o.family_note = std::string("the [family] / [nonlinear] keys (") + enum_name(o.family.kappa) + " kappa, source " +
                    enum_name(o.family.source) + ", boundary " + enum_name(o.family.boundary) + ", nonlinear " +
                    enum_name(o.law.law) +
                    ") describe generated pairs and are not used: data.file '" + o.file + "' holds the samples";
    o.family = heat::HeatFamilyOptions{};
    o.law = heat::KappaLawOptions{};
  }
  HeatDataOptions r = resolve_heat_file(o);
  const long need = o.n_train + o.n_val + o.n_test;
  require(need <= r.info->samples, "data.file '", o.file, "' holds ", r.info->samples, " samples but data.n_train + ",
          "n_val + n_test = ", need);
  return r;
}

HeatDataOptions resolve_heat_file(const HeatDataOptions& o) {
  if (o.file.empty()) {
    require(o.field == kSolvedField, "data.field = '", o.field, "' names a dataset of data.file, but data.file is empty ",
            "(generated pairs have only the solved field): set data.file or leave data.field at \"data\"");
    HeatDataOptions r = o;
    if (r.n == 0) r.n = 32;
    if (o.law.enabled()) {
      o.law.build();  // checks the [nonlinear] keys
      require(o.family.kappa == heat::KappaFamily::Constant, "nonlinear.law = ", enum_name(o.law.law),
              " gives κ(u), which replaces a per-sample κ(x): set family.kappa = constant (sources and boundary data "
              "may still vary per sample)");
    }
    const std::vector<std::string> drawn = o.family_channels();  // also checks the [family] keys
    if (o.generated_family()) o.family.build(o.problem(r.n), std::uint64_t(o.seed));
    std::string names, have;
    for (const auto& c : o.channels) names += (names.empty() ? "" : ", ") + c;
    for (const auto& c : drawn) have += (have.empty() ? "" : ", ") + c;
    if (drawn.empty() && !o.channels.empty())
      fail("data.channels = [", names, "] names datasets of data.file, but data.file is empty and the generated ",
           "pairs have no per-sample family ([family] all constant): set data.file, a [family] (family.kappa = ",
           "lognormal, ...), or data.channels = []");
    for (const auto& c : o.channels)
      require(std::find(drawn.begin(), drawn.end(), c) != drawn.end(), "data.channels names '", c, "', which the ",
              "generated family does not draw (it draws: ", have, "): use a subset of those, or [] for all of them");
    if (r.channels.empty()) r.channels = drawn;
    return r;
  }
  o.validate();
  const HeatFileInfo f = inspect_heat_file(o);
  require(f.dim == o.dim, "data.file '", o.file, "' is ", f.dim, "D but data.dim = ", o.dim, ": set data.dim = ",
          f.dim);
  if (o.n != 0) {
    if (f.dim == 1 || (f.nx == f.ny && (f.dim < 3 || f.nz == f.nx)))
      require(f.nx == o.n, "data.file '", o.file, "' holds fields on a grid of ", f.nx, " points per axis but the ",
              "model is configured for data.n = ", o.n, ": set data.n = ", f.nx, " (or 0 to take the file's grid) ",
              "or write the dataset on a ", o.n, "-point grid");
    else
      fail("data.file '", o.file, "' holds fields on a ", grid_text(f.nx, f.ny, f.dim, f.nz), " grid but data.n = ", o.n, " names a ",
           "square grid: set data.n = 0 to take the file's grid");
  }
  long max_offset = 0;
  for (double m : o.horizons) {
    require(std::abs(m - std::round(m)) < 1e-12, "data.horizons = ", m, " is not a whole number; from a file, ",
            "horizons are whole numbers of data.file_stride snapshots");
    max_offset = std::max(max_offset, o.file_stride * std::lround(m));
  }
  require(max_offset <= f.nt - 1, "data.file '", o.file, "' holds ", f.nt, " snapshots per sample; data.file_stride",
          " = ", o.file_stride, " with horizons up to ", max_offset / o.file_stride, " needs at least ",
          max_offset + 1);
  HeatDataOptions r = o;
  r.n = f.nx;
  r.nx = f.nx;
  r.ny = f.dim == 1 ? 1 : f.ny;
  r.nz = f.dim < 3 ? 1 : f.nz;
  r.length = f.length;
  r.length_y = f.length_y;
  r.length_z = f.length_z;
  r.kappa = f.kappa;
  r.bc = f.bc;
  r.file_nt = f.nt;
  r.solver_physics = f.solver_physics;
  r.info = std::make_shared<const HeatFileInfo>(f);
  // The base horizon Δt = stride·(t[1] − t[0]), expressed in the units horizon() works in.
  const double dt = double(o.file_stride) * f.dt;
  const double h = r.h();
  r.horizon_ftcs_steps = dt * 2.0 * r.dim * r.kappa / (h * h);
  return r;
}

namespace {
// Every value of component `k` of `rows` samples of a channel is finite, else an error naming the channel and sample.
void check_finite(const std::vector<double>& buf, long rows, long per_sample, long comps, long k,
                  const std::string& name, long first, const std::string& path) {
  for (long s = 0; s < rows; ++s)
    for (long i = k; i < per_sample; i += comps) {
      const double v = buf[std::size_t(s * per_sample + i)];
      if (!std::isfinite(v))
        fail("data.file '", path, "' holds a non-finite value (", v, ") in '", name, "' at sample ", first + s,
             " (flat index ", i, " of that sample): clean or drop the sample before training");
    }
}
}  // namespace

HeatPairs read_heat_pairs(const HeatDataOptions& o, long first, long count, long steps) {
  require(!o.file.empty() && o.file_nt >= 2 && o.info, "read_heat_pairs: data.file is not set or not resolved");
  require(steps >= 1, "read_heat_pairs: steps must be at least 1, got ", steps);
  const HeatFileInfo& f = *o.info;
  if (steps > 1) {
    long max_offset = 0;
    for (double m : o.horizons) max_offset = std::max(max_offset, o.file_stride * std::lround(m));
    require(steps * max_offset <= f.nt - 1, "train.unroll = ", steps, " needs trajectories of ", steps,
            " horizons: data.file '", o.file, "' holds ", f.nt, " snapshots per sample, and data.file_stride = ",
            o.file_stride, " with horizons up to ", max_offset / o.file_stride, " needs at least ",
            steps * max_offset + 1, "; lower train.unroll to at most ", (f.nt - 1) / max_offset,
            " or write the dataset with more snapshots (dataset.nt)");
    for (const auto& c : f.channels)
      require(!c.time_dependent, "train.unroll = ", steps, " holds the extra input channels fixed along each ",
              "trajectory, but data.channels '", c.spec.text(), "' of data.file '", o.file, "' changes in time: ",
              "use train.unroll = 1 with time-dependent channels");
  }
  h5::Reader r(o.file, h5::AnyFile{});
  if (f.attnphys) r.require_kind("heat_dataset", 1);
  require(r.is_numeric_dataset(f.field.spec.name) && r.shape(f.field.spec.name) == f.field.shape, "data.file '",
          o.file, "' changed since it was inspected");
  for (const auto& c : f.channels)
    require(r.is_numeric_dataset(c.spec.name) && r.shape(c.spec.name) == c.shape, "data.file '", o.file,
            "' changed since it was inspected");
  require(first >= 0 && count >= 0 && first + count <= f.samples, "samples [", first, ", ", first + count,
          ") outside data.file '", o.file, "' (", f.samples, " samples)");
  const long nx = f.nx, ny = o.dim == 1 ? 1 : f.ny, nz = o.dim < 3 ? 1 : f.nz, nt = f.nt, P = nx * ny * nz;
  const long per = o.pairs_per_sample(steps);
  const long C = long(f.channels.size());
  HeatPairs p;
  p.count = count * per;
  p.n = p.nx = nx;
  p.ny = ny;
  p.nz = nz;
  p.dim = o.dim;
  p.points = P;
  p.coords = grid_coordinates(o);
  p.inputs = View2<double>("attnphys::file_inputs", p.count, P);
  p.targets = View2<double>("attnphys::file_targets", p.count, P);
  p.tau = View1<double>("attnphys::pair_horizon", p.count);
  p.extra = View3<double>("attnphys::file_channels", p.count, P, C);
  if (steps > 1) p.later = View3<double>("attnphys::file_later_targets", p.count, steps - 1, P);
  auto hlater = Kokkos::create_mirror_view(p.later);
  auto hin = Kokkos::create_mirror_view(p.inputs), htg = Kokkos::create_mirror_view(p.targets);
  auto htau = Kokkos::create_mirror_view(p.tau);
  auto hex = Kokkos::create_mirror_view(p.extra);
  // Slabs of at most ~64 MiB of samples (read as double whatever the file's precision).
  long per_sample_values = f.field.values_per_sample();
  for (const auto& c : f.channels) per_sample_values += c.values_per_sample();
  const long slab = std::max(1L, std::min(count, (64L << 20) / (8 * per_sample_values)));
  const long fvals = f.field.values_per_sample(), fc = f.field.components, fk = f.field.component;
  std::vector<double> fbuf(std::size_t(slab * fvals));
  std::vector<std::vector<double>> cbuf(static_cast<std::size_t>(C));
  for (long j = 0; j < C; ++j) cbuf[std::size_t(j)].resize(std::size_t(slab * f.channels[std::size_t(j)].values_per_sample()));
  long row = 0;
  for (long s0 = 0; s0 < count; s0 += slab) {
    const long c = std::min(slab, count - s0);
    r.read_rows<double>(f.field.spec.name, std::uint64_t(first + s0), std::uint64_t(c), fbuf.data());
    check_finite(fbuf, c, fvals, fc, fk, f.field.spec.name, first + s0, o.file);
    for (long j = 0; j < C; ++j) {
      const auto& ch = f.channels[std::size_t(j)];
      r.read_rows<double>(ch.spec.name, std::uint64_t(first + s0), std::uint64_t(c), cbuf[std::size_t(j)].data());
      check_finite(cbuf[std::size_t(j)], c, ch.values_per_sample(), ch.components, ch.component, ch.spec.name,
                   first + s0, o.file);
    }
    // File index of (sample, t, x, y, z, k): ((((s·nt + t)·nx + x)·ny + y)·nz + z)·C + k; ours of (z, y, x):
    // (z·ny + y)·nx + x.
    auto at = [&](long sl, long t, long q) {
      const long x = q % nx, y = (q / nx) % ny, z = q / (nx * ny);
      return fbuf[std::size_t(((((sl * nt + t) * nx + x) * ny + y) * nz + z) * fc + fk)];
    };
    auto channel_at = [&](long j, long sl, long t, long q) {
      const auto& ch = f.channels[std::size_t(j)];
      const long x = q % nx, y = (q / nx) % ny, z = q / (nx * ny), tt = ch.time_dependent ? t : 0,
                 ntc = ch.time_dependent ? nt : 1;
      return cbuf[std::size_t(j)][std::size_t(
          ((((sl * ntc + tt) * nx + x) * ny + y) * nz + z) * ch.components + ch.component)];
    };
    for (long sl = 0; sl < c; ++sl)
      for (double m : o.horizons) {
        const long off = o.file_stride * std::lround(m);
        for (long k = 0; k + steps * off < nt; ++k, ++row) {
          for (long q = 0; q < P; ++q) {
            hin(row, q) = at(sl, k, q);
            htg(row, q) = at(sl, k + off, q);
            for (long j = 0; j < C; ++j) hex(row, q, j) = channel_at(j, sl, k, q);
            for (long j = 2; j <= steps; ++j) hlater(row, j - 2, q) = at(sl, k + j * off, q);
          }
          htau(row) = m;
        }
      }
  }
  require(row == p.count, "read_heat_pairs: ", row, " pairs read, expected ", p.count);
  Kokkos::deep_copy(p.inputs, hin);
  Kokkos::deep_copy(p.targets, htg);
  Kokkos::deep_copy(p.tau, htau);
  Kokkos::deep_copy(p.extra, hex);
  if (steps > 1) Kokkos::deep_copy(p.later, hlater);
  return p;
}

}  // namespace attnphys::training
