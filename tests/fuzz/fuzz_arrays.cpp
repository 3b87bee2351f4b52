// libFuzzer target: the numpy-facing entry points of the Python package, through the same C++ functions the
// bindings call (attnphys/solvers/entry/arrays.hpp): heat.solve with a scalar or a per-cell kappa, the surrogate's
// training pairs (Trainer.fit with arrays) and Surrogate.predict. The input bytes choose the entry point, the shapes
// (0-4 dimensions, extents 0-9: wrong ranks, empty axes, mismatched grids), every value (ordinary numbers, NaN,
// +-inf, +-0, denormals, +-1e308, raw 8-byte doubles) and the strings (boundary, method; valid, miscased, unknown).
//
// What must hold: each call returns or throws attnphys::Error (what Python sees as attnphys.Error); any other
// exception, a crash, a hang or a sanitizer report is a finding. And on success:
//   heat.solve: the solution is finite whenever the inputs are at most 1e100 in size (ADI and Crank-Nicolson are
//               unconditionally stable, FTCS runs below its limit or is refused: a finite field must stay finite);
//   pairs / predict: the views have the shapes the arrays had; predict returns finite values for finite input
//               at most 1e4 in size (the model is float32 and was trained on values of order 1).
// Cost limits (of the harness, not of attnphys): heat.solve runs at most 256 explicit steps (t_end / dt), or any
// number when the library must refuse it at once (t_end / dt above 10^12); with the automatic step, at most ~2000.
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/solvers/entry/arrays.hpp"

namespace {

using attnphys::entry::HostArray;

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_arrays: %s\n%s\n", what, detail.c_str());
  std::abort();
}

class Bytes {
 public:
  Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  bool empty() const { return i_ >= n_; }
  // A value: mostly small ordinary numbers, sometimes special ones, sometimes any 8 bytes.
  double value() {
    const std::uint8_t c = byte();
    if (c < 200) return (double(c) - 100.0) / 10.0 + double(byte()) / 2560.0;
    static const double special[] = {std::numeric_limits<double>::quiet_NaN(),
                                     std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity(),
                                     0.0,
                                     -0.0,
                                     1e308,
                                     -1e308,
                                     1e-308,
                                     4.9e-324,
                                     1e30,
                                     1e-30,
                                     1.0,
                                     0.5,
                                     64.0};
    if (c < 200 + sizeof(special) / sizeof(double)) return special[c - 200];
    double v;
    std::uint8_t raw[8];
    for (auto& r : raw) r = byte();
    std::memcpy(&v, raw, 8);
    return v;
  }
  // A positive length-like value (dx, dt, t_end, box): small positive numbers most of the time.
  double positive() {
    const std::uint8_t c = byte();
    if (c < 224) return (1.0 + c) / 64.0;
    return value();
  }
  std::vector<long> shape(long max_ndim) {
    const long nd = byte() % (max_ndim + 1);
    std::vector<long> s(nd);
    for (auto& e : s) e = byte() % 10;
    return s;
  }
  // A mostly valid shape: `like` with probability 3/4, else a random one.
  std::vector<long> shape_like(const std::vector<long>& like, long max_ndim) {
    return byte() < 192 ? like : shape(max_ndim);
  }
  const char* pick(const char* const* names, std::size_t n) { return names[byte() % n]; }

 private:
  const std::uint8_t* d_;
  std::size_t n_, i_ = 0;
};

// An array of the shape given filled from the input; `max_abs` gets the largest magnitude (NaN counts as infinite).
struct Filled {
  std::vector<double> values;
  HostArray host;
};
Filled fill(Bytes& in, const std::vector<long>& shape, double* max_abs) {
  Filled f;
  long n = 1;
  for (long e : shape) n *= e;
  f.values.resize(std::size_t(n));
  // A fill pattern: one value everywhere, a ramp, or values from the input (which repeat when it runs out).
  const std::uint8_t mode = in.byte() % 3;
  const double a = in.value(), b = mode == 1 ? in.value() : 0.0;
  for (long i = 0; i < n; ++i) {
    double v = a;
    if (mode == 1) v = a + b * double(i % 17) / 17.0;
    if (mode == 2) v = in.empty() ? a * double(1 + i % 5) : in.value();
    f.values[std::size_t(i)] = v;
    const double m = std::isnan(v) ? std::numeric_limits<double>::infinity() : std::fabs(v);
    if (max_abs && m > *max_abs) *max_abs = m;
  }
  static const double no_elements = 0;  // numpy hands a valid, non-null pointer for an empty array
  f.host.data = n == 0 ? &no_elements : f.values.data();
  f.host.shape = shape;
  return f;
}

const char* const kBc[] = {"periodic", "dirichlet", "neumann", "Periodic", "", "robin", "dirichlet "};
const char* const kMethod[] = {"adi", "cn", "ftcs", "ADI", "", "implicit", "euler"};

void check_finite(const attnphys::View3<double>& v, const char* what) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  for (std::size_t i = 0; i < h.size(); ++i)
    if (!std::isfinite(h.data()[i])) finding(what, "a non-finite value at flat index " + std::to_string(i));
}

void heat_solve(Bytes& in, bool array_kappa) {
  const std::vector<long> shape = in.shape(4);
  double max_abs = 0;
  Filled u0 = fill(in, shape, &max_abs);
  const double dx = in.positive(), t_end = in.positive() / 64.0, dt = in.byte() < 128 ? 0.0 : in.positive() / 64.0;
  double kappa = in.positive();
  Filled k;
  if (array_kappa) {
    k = fill(in, in.shape_like(shape, 4), &max_abs);
  } else if (kappa > max_abs) {
    max_abs = kappa;
  }
  const std::string bc = in.pick(kBc, 7), method = in.pick(kMethod, 7);
  attnphys::entry::HeatSolveCall call;
  try {
    call = attnphys::entry::heat_solve_call(u0.host, t_end, dx, array_kappa ? &k.host : nullptr, kappa, bc, method,
                                            dt);
  } catch (const attnphys::Error&) {
    return;
  }
  if (dt > 0 && std::isfinite(t_end / dt) && t_end / dt > 256 && t_end / dt < 1e12) return;  // too long to fuzz
  if (dt == 0) {
    // The automatic step is at least ~dx^2 / (2 pi d kappa_max) (FTCS: its stability limit; ADI/CN: an accuracy
    // bound on the field's highest wavenumber): bound the steps that way.
    const double kmax = std::max(array_kappa ? max_abs : kappa, 1e-300);
    const double steps = t_end * 2.0 * M_PI * call.problem.grid.dim * kmax / (dx * dx);
    if (!(steps <= 2000)) return;
  }
  attnphys::fd::HeatSolution sol;
  try {
    sol = attnphys::fd::solve(call.problem, call.u0, call.t_end, call.options);
  } catch (const attnphys::Error&) {
    return;
  }
  // The solver refuses a non-finite u0 (with its first index); a solution from one is a finding.
  for (double v : u0.values)
    if (!std::isfinite(v)) finding("heat.solve accepted a non-finite u0", "");
  if (max_abs <= 1e100) check_finite(sol.u, "heat.solve returned a non-finite value for finite input");
}

// A trained model for predict (two steps on 4 random pairs of an 8x8 periodic grid with one channel, kappa).
attnphys::training::HeatModel& model() {
  static std::unique_ptr<attnphys::training::HeatModel> m = [] {
    attnphys::training::SurrogateOptions o;
    o.kind = attnphys::training::SurrogateKind::Conditioned;
    o.kernel_heads = 1;
    o.kernel_dk = 4;
    auto mm = std::make_unique<attnphys::training::HeatModel>(o, 2, std::vector<double>{1.0, 1.0},
                                                              attnphys::heat::BcType::Periodic,
                                                              std::vector<std::string>{"kappa"}, 1);
    const long S = 4, P = 64;
    std::vector<double> x(S * P), y(S * P), c(P * 2), e(S * P, 1.0);
    for (long i = 0; i < S * P; ++i) {
      x[std::size_t(i)] = std::sin(0.1 * double(i));
      y[std::size_t(i)] = 0.9 * x[std::size_t(i)];
    }
    for (long q = 0; q < P; ++q) {
      c[std::size_t(2 * q)] = double(q % 8) / 8.0;
      c[std::size_t(2 * q + 1)] = double(q / 8) / 8.0;
    }
    const HostArray none;
    const auto pairs = attnphys::entry::heat_pairs({x.data(), {S, P}}, {y.data(), {S, P}}, {c.data(), {P, 2}}, 8, 8,
                                                   1, 2, {e.data(), {S, P, 1}}, none, 1);
    attnphys::training::TrainOptions t;
    t.steps = 2;
    t.batch = 2;
    t.progress = false;
    t.schedule.total_steps = 2;
    t.schedule.warmup_steps = 0;
    mm->fit(pairs, attnphys::training::HeatPairs{}, t, {}, false);
    return mm;
  }();
  return *m;
}

void pairs_or_predict(Bytes& in, bool predict) {
  const long S = 1 + in.byte() % 4, nx = 1 + in.byte() % 6, ny = 1 + in.byte() % 6;
  const int dim = predict ? 2 : 1 + in.byte() % 3;
  const long channels = predict ? 1 : in.byte() % 3;
  const long P = nx * ny;
  double max_abs = 0;
  Filled inputs = fill(in, in.shape_like({S, P}, 4), &max_abs);
  Filled coords = fill(in, in.shape_like({P, dim}, 4), &max_abs);
  Filled targets, extra, tau;
  const std::uint8_t opt = in.byte();
  if (!predict && (opt & 1)) targets = fill(in, in.shape_like((opt & 8) ? std::vector<long>{S, 2, P} : std::vector<long>{S, P}, 4), nullptr);
  if (opt & 2) extra = fill(in, in.shape_like({S, P, channels}, 4), &max_abs);
  if (opt & 4) tau = fill(in, in.shape_like({S}, 2), nullptr);
  const long batch = predict ? long(in.byte() % 5) : 1;
  try {
    if (!predict) {
      const auto p = attnphys::entry::heat_pairs(inputs.host, targets.host, coords.host, nx, ny, 1, dim, extra.host,
                                                 tau.host, channels);
      // The pairs take their sample count from the inputs (which may differ from the S the harness meant).
      if (inputs.host.shape.size() != 2 || long(p.inputs.extent(0)) != inputs.host.shape[0] ||
          long(p.inputs.extent(1)) != P || p.count != inputs.host.shape[0] || long(p.coords.extent(1)) != dim ||
          long(p.extra.extent(2)) != channels || long(p.tau.extent(0)) != p.count)
        finding("pairs: the views do not have the arrays' shapes", "");
      return;
    }
    auto& m = model();
    const auto a = attnphys::entry::predict_args(m, inputs.host, extra.host, coords.host, tau.host, batch);
    const auto pred = m.predict(a.inputs, a.extra, a.coords, a.tau, batch);
    if (long(pred.extent(0)) != a.samples || long(pred.extent(1)) != a.points)
      finding("predict: the output does not have the fields' shape", "");
    if (max_abs <= 1e4) {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pred);
      for (std::size_t i = 0; i < h.size(); ++i)
        if (!std::isfinite(h.data()[i])) finding("predict returned a non-finite value for finite input", "");
    }
  } catch (const attnphys::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attnphys::ensure_initialized();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  try {
    switch (in.byte() % 4) {
      case 0: heat_solve(in, false); break;
      case 1: heat_solve(in, true); break;
      case 2: pairs_or_predict(in, false); break;
      default: pairs_or_predict(in, true); break;
    }
  } catch (const attnphys::Error& e) {
    finding("an attnphys::Error escaped the harness's own handling", e.what());
  } catch (const std::exception& e) {
    finding("an exception other than attnphys::Error", e.what());
  } catch (...) {
    finding("a non-standard exception", "");
  }
  return 0;
}
