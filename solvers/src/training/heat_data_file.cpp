// Training pairs read from an HDF5 dataset written by `attnphys heat dataset` (solvers/fd/heat_dataset.hpp):
//   data  float32 [sample, t, x, (y), 1]  (x before y, PDEBench), grid/x, grid/y, grid/t, root attributes dim, bc,
//   kappa, variable_kappa, homogeneous.
// Everything the training relies on is checked before use, with messages that say what to change.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/solvers/training/heat_data.hpp"

namespace attnphys::training {

namespace {

// Uniform spacing of a coordinate list (relative tolerance 1e-6 of the spacing), or an error naming the list.
double uniform_spacing(const std::vector<double>& v, const std::string& what, const std::string& path) {
  require(v.size() >= 2, "data.file '", path, "': ", what, " has ", v.size(), " value(s), at least 2 are needed");
  const double d = v[1] - v[0];
  require(d > 0 && std::isfinite(d), "data.file '", path, "': ", what, " is not increasing (", v[0], ", ", v[1],
          ", ...)");
  for (std::size_t i = 1; i < v.size(); ++i)
    require(std::abs((v[i] - v[i - 1]) - d) <= 1e-6 * d, "data.file '", path, "': ", what,
            " is not uniformly spaced (step ", v[i] - v[i - 1], " at index ", i, ", first step ", d, ")");
  return d;
}

}  // namespace

HeatFileInfo inspect_heat_file(const std::string& path) {
  require(!path.empty(), "data.file is empty");
  require(std::filesystem::exists(path), "data.file '", path, "' does not exist (write it with `attnphys heat ",
          "dataset`, or leave data.file empty to generate the pairs)");
  h5::Reader r(path, "heat_dataset", 1);  // refuses truncated, corrupted, foreign and too-new files
  HeatFileInfo f;
  f.path = path;
  require(r.has("data"), "data.file '", path, "' has no dataset 'data'");
  require(r.has_attr("/", "dim"), "data.file '", path, "' has no 'dim' attribute: it was not written by `attnphys ",
          "heat dataset`");
  f.dim = int(r.attr_long("/", "dim"));
  require(f.dim == 1 || f.dim == 2, "data.file '", path, "' is a ", f.dim, "D dataset; the surrogate trains on 1D ",
          "and 2D data");
  const h5::Shape s = r.shape("data");
  std::string got;
  for (std::size_t i = 0; i < s.size(); ++i) got += (i ? "x" : "") + std::to_string(s[i]);
  const std::size_t rank = std::size_t(f.dim) + 3;
  require(s.size() == rank && s.back() == 1, "data.file '", path, "': 'data' has shape ", got, "; a ", f.dim,
          "D heat dataset is [sample, t, x", f.dim == 2 ? ", y" : "", ", 1] (rank ", rank, ")");
  f.samples = long(s[0]);
  f.nt = long(s[1]);
  const long nx = long(s[2]), ny = f.dim == 2 ? long(s[3]) : 1;
  require(f.samples >= 1, "data.file '", path, "' holds no samples");
  require(f.nt >= 2, "data.file '", path, "' holds ", f.nt, " snapshot(s) per sample; training pairs need at ",
          "least 2 (write the dataset with dataset.nt >= 2)");
  require(f.dim == 1 || nx == ny, "data.file '", path, "' has a ", nx, "x", ny, " grid; the surrogate trains on ",
          "square grids (n points per axis)");
  f.n = nx;

  // Physics.
  for (const char* a : {"bc", "kappa"})
    require(r.has_attr("/", a), "data.file '", path, "' has no '", a, "' attribute (written by an older attnphys): ",
            "write it again with `attnphys heat dataset`");
  f.bc = r.attr_string("/", "bc");
  require(f.bc != "mixed", "data.file '", path, "' has different boundary types on different sides; the ",
          "surrogate's reference solver handles one type on every side");
  heat::parse_bc_type(f.bc);
  f.kappa = r.attr_double("/", "kappa");
  require(f.kappa > 0 && std::isfinite(f.kappa), "data.file '", path, "': kappa = ", f.kappa, " is not positive");
  require(!r.has_attr("/", "variable_kappa") || r.attr_long("/", "variable_kappa") == 0, "data.file '", path,
          "' was made with a variable κ(x); training from files supports constant κ");
  require(!r.has_attr("/", "homogeneous") || r.attr_long("/", "homogeneous") == 1, "data.file '", path,
          "' has non-zero boundary data or a source; training from files supports the homogeneous problem");

  // Grid: cell coordinates x_i = i·h (periodic) or (i + 1/2)·h, the same h along y.
  for (const char* g : {"grid/x", "grid/t"})
    require(r.has(g), "data.file '", path, "' has no dataset '", g, "'");
  const auto gx = r.read<double>("grid/x"), gt = r.read<double>("grid/t");
  require(long(gx.size()) == nx, "data.file '", path, "': grid/x has ", gx.size(), " values but 'data' has ", nx,
          " points along x");
  require(long(gt.size()) == f.nt, "data.file '", path, "': grid/t has ", gt.size(), " values but 'data' has ",
          f.nt, " snapshots");
  f.h = uniform_spacing(gx, "grid/x", path);
  const double x0 = f.bc == "periodic" ? 0.0 : 0.5 * f.h;
  require(std::abs(gx[0] - x0) <= 1e-6 * f.h, "data.file '", path, "': grid/x starts at ", gx[0], ", expected ",
          x0, " for a ", f.bc, " grid of spacing ", f.h);
  if (f.dim == 2) {
    require(r.has("grid/y"), "data.file '", path, "' has no dataset 'grid/y'");
    const auto gy = r.read<double>("grid/y");
    require(long(gy.size()) == ny, "data.file '", path, "': grid/y has ", gy.size(), " values but 'data' has ", ny,
            " points along y");
    const double hy = uniform_spacing(gy, "grid/y", path);
    require(std::abs(hy - f.h) <= 1e-6 * f.h, "data.file '", path, "': the spacing along y (", hy,
            ") differs from the spacing along x (", f.h, "); the surrogate trains on square cells");
  }
  f.length = double(f.n) * f.h;
  f.dt = uniform_spacing(gt, "grid/t", path);
  return f;
}

HeatDataOptions resolve_heat_data(const HeatDataOptions& o) {
  if (o.file.empty()) return o;
  o.validate();
  const HeatFileInfo f = inspect_heat_file(o.file);
  require(f.dim == o.dim, "data.file '", o.file, "' is ", f.dim, "D but data.dim = ", o.dim, ": set data.dim = ",
          f.dim);
  require(f.n == o.n, "data.file '", o.file, "' holds fields on a grid of ", f.n, " points per axis but the model ",
          "is configured for data.n = ", o.n, ": set data.n = ", f.n, " or write the dataset on a ", o.n,
          "-point grid");
  const long need = o.n_train + o.n_val + o.n_test;
  require(need <= f.samples, "data.file '", o.file, "' holds ", f.samples, " samples but data.n_train + n_val + ",
          "n_test = ", need);
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
  r.length = f.length;
  r.kappa = f.kappa;
  r.bc = f.bc;
  r.file_nt = f.nt;
  // The base horizon Δt = stride·(t[1] − t[0]), expressed in the units horizon() works in.
  const double dt = double(o.file_stride) * f.dt;
  const double h = r.h();
  r.horizon_ftcs_steps = dt * 2.0 * r.dim * r.kappa / (h * h);
  return r;
}

HeatPairs read_heat_pairs(const HeatDataOptions& o, long first, long count) {
  require(!o.file.empty() && o.file_nt >= 2, "read_heat_pairs: data.file is not set or not resolved");
  h5::Reader r(o.file, "heat_dataset", 1);
  const h5::Shape s = r.shape("data");
  require(long(s.size()) == o.dim + 3 && long(s[1]) == o.file_nt && long(s[2]) == o.n &&
              (o.dim == 1 || long(s[3]) == o.n),
          "data.file '", o.file, "' changed since it was inspected");
  require(first >= 0 && count >= 0 && first + count <= long(s[0]), "samples [", first, ", ", first + count,
          ") outside data.file '", o.file, "' (", s[0], " samples)");
  const long n = o.n, nt = o.file_nt, P = o.dim == 1 ? n : n * n, per = o.pairs_per_sample();
  HeatPairs p;
  p.count = count * per;
  p.n = n;
  p.dim = o.dim;
  p.points = P;
  p.coords = grid_coordinates(o, n);
  p.inputs = View2<double>("attnphys::file_inputs", p.count, P);
  p.targets = View2<double>("attnphys::file_targets", p.count, P);
  p.tau = View1<double>("attnphys::pair_horizon", p.count);
  auto hin = Kokkos::create_mirror_view(p.inputs), htg = Kokkos::create_mirror_view(p.targets);
  auto htau = Kokkos::create_mirror_view(p.tau);
  // Slabs of at most ~32 MiB of float32 samples.
  const long per_sample = nt * P;
  const long slab = std::max(1L, std::min(count, (32L << 20) / (4 * per_sample)));
  std::vector<float> buf(std::size_t(slab * per_sample));
  long row = 0;
  for (long s0 = 0; s0 < count; s0 += slab) {
    const long c = std::min(slab, count - s0);
    r.read_rows<float>("data", std::uint64_t(first + s0), std::uint64_t(c), buf.data());
    // File index of (sample, t, x, y): ((s·nt + t)·nx + x)·ny + y; ours of (y, x): y·nx + x.
    auto at = [&](long sl, long t, long q) {
      const long x = q % n, y = q / n;
      const long ny = o.dim == 1 ? 1 : n;
      return double(buf[std::size_t(((sl * nt + t) * n + x) * ny + y)]);
    };
    for (long sl = 0; sl < c; ++sl)
      for (double m : o.horizons) {
        const long off = o.file_stride * std::lround(m);
        for (long k = 0; k + off < nt; ++k, ++row) {
          for (long q = 0; q < P; ++q) {
            hin(row, q) = at(sl, k, q);
            htg(row, q) = at(sl, k + off, q);
          }
          htau(row) = m;
        }
      }
  }
  require(row == p.count, "read_heat_pairs: ", row, " pairs read, expected ", p.count);
  for (long i = 0; i < p.count * P; ++i)
    require(std::isfinite(hin.data()[i]) && std::isfinite(htg.data()[i]), "data.file '", o.file,
            "' holds a non-finite value in samples [", first, ", ", first + count, ")");
  Kokkos::deep_copy(p.inputs, hin);
  Kokkos::deep_copy(p.targets, htg);
  Kokkos::deep_copy(p.tau, htau);
  return p;
}

}  // namespace attnphys::training
