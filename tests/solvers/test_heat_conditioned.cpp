// The conditioned heat surrogate (model.kind = conditioned): kernel attention whose queries, keys, value gains and
// mixing coefficients come from the coordinates and the input channels, so that every sample has its own kernel
// while the prediction stays exactly affine in the field. Gradients (parameters and the field) against central
// differences, dense against tiled attention, affinity in û, one shared kernel for samples with the same channels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "attnphys/core/error.hpp"
#include "attnphys/solvers/training/heat_surrogate.hpp"

using namespace attnphys;
using namespace attnphys::training;

namespace {

SurrogateOptions cond_options(long channels, bool stencil, bool dt_input, long layers, const char* memory) {
  SurrogateOptions so;
  so.kind = SurrogateKind::Conditioned;
  so.extra_channels = channels;
  so.stencil = stencil;
  so.dt_input = dt_input;
  so.kernel_layers = layers;
  so.kernel_heads = 2;
  so.kernel_dk = 3;
  so.harmonics = 1;
  so.encoder.d_model = 4;
  so.conditioned_attention = parse_enum<ConditionedAttention>(memory, "model.conditioned_attention");
  return so;
}

// A 2D periodic 4 x 3 grid (box 1 x 0.75), B samples of a field and C channels, random but reproducible. With
// dim = 1: 12 points spaced 0.25; lengths (the encoding periods) decide which axes are periodic (n·h = length).
struct CondSetup {
  long nx = 4, ny = 3, N = 12, B = 2, C;
  int dim;
  SurrogateOptions so;
  HeatSurrogate<double> model;
  ParameterBuffer<double> buf;
  View1<double> u, out, tau;
  View2<double> ex, coords;
  SurrogateCache<double> cache;
  CondSetup(SurrogateOptions o, std::uint64_t seed = 3, int dim_ = 2, std::vector<double> lengths = {1.0, 0.75})
      : C(o.extra_channels), dim(dim_), so(o), model(o, dim_, lengths), u("u", 24), out("out", 24), tau("tau", 2),
        ex("ex", 24, o.extra_channels), coords("x", 12, dim_) {
    if (dim == 1) nx = 12, ny = 1;
    model.declare(buf);
    buf.allocate();
    model.init(buf, seed);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    // A generic point: the initialisation's zeros (A = 0, wm = 0) would hide most of the gradient.
    auto p = buf.get_host();
    for (auto& x : p) x += 0.3 * nd(rng);
    buf.set_host(p);
    auto hu = Kokkos::create_mirror_view(u);
    auto he = Kokkos::create_mirror_view(ex);
    auto hc = Kokkos::create_mirror_view(coords);
    auto ht = Kokkos::create_mirror_view(tau);
    for (long n = 0; n < N; ++n) {
      hc(n, 0) = (n % nx) * 0.25;
      if (dim > 1) hc(n, 1) = (n / nx) * 0.25;
    }
    for (long t = 0; t < B * N; ++t) {
      hu(t) = nd(rng);
      for (long c = 0; c < C; ++c) he(t, c) = nd(rng);
    }
    ht(0) = 1.0;
    ht(1) = 2.0;
    Kokkos::deep_copy(u, hu);
    Kokkos::deep_copy(ex, he);
    Kokkos::deep_copy(coords, hc);
    Kokkos::deep_copy(tau, ht);
    // Several key and query blocks in tiled mode even on 12 points.
    cache.ws.tile_budget = 16;
    cache.ws.min_tile_rows = 2;
  }
  std::vector<double> run(const View1<double>& field) {
    model.forward(out, cache, field, ex, coords, B, N, buf, tau);
    auto h = to_host(out);
    return std::vector<double>(h.data(), h.data() + B * N);
  }
  std::vector<double> run() { return run(u); }
};

double dot(const std::vector<double>& a, const std::vector<double>& w) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * w[i];
  return s;
}

// J = Σ w_t ŷ_t: every parameter's and every input value's gradient against central differences.
void check_gradients(SurrogateOptions so, double* worst_param, double* worst_input, int dim = 2,
                     std::vector<double> lengths = {1.0, 0.75}) {
  CondSetup s(so, 3, dim, lengths);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> w(s.B * s.N);
  for (auto& x : w) x = nd(rng);
  View1<double> dout("dout", s.B * s.N), du("du", s.B * s.N);
  auto hd = Kokkos::create_mirror_view(dout);
  for (long t = 0; t < s.B * s.N; ++t) hd(t) = w[t];
  Kokkos::deep_copy(dout, hd);
  s.buf.zero_grads();
  s.run();
  s.model.backward(s.cache, dout, s.buf, du);
  const auto grads = s.buf.get_host(Slot::Grads);
  const auto dus = to_host(du);
  auto p0 = s.buf.get_host();
  const double eps = 1e-6;
  double wp = 0, wi = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    auto p = p0;
    p[i] = p0[i] + eps;
    s.buf.set_host(p);
    const double jp = dot(s.run(), w);
    p[i] = p0[i] - eps;
    s.buf.set_host(p);
    const double jm = dot(s.run(), w);
    const double fd = (jp - jm) / (2 * eps);
    wp = std::max(wp, std::abs(fd - grads[i]) / std::max(1.0, std::abs(fd)));
  }
  s.buf.set_host(p0);
  auto hu = to_host(s.u);
  for (long t = 0; t < s.B * s.N; ++t) {
    View1<double> v("v", s.B * s.N);
    auto hv = Kokkos::create_mirror_view(v);
    for (long q = 0; q < s.B * s.N; ++q) hv(q) = hu(q);
    hv(t) = hu(t) + eps;
    Kokkos::deep_copy(v, hv);
    const double jp = dot(s.run(v), w);
    hv(t) = hu(t) - eps;
    Kokkos::deep_copy(v, hv);
    const double jm = dot(s.run(v), w);
    const double fd = (jp - jm) / (2 * eps);
    wi = std::max(wi, std::abs(fd - dus(t)) / std::max(1.0, std::abs(fd)));
  }
  *worst_param = wp;
  *worst_input = wi;
}

}  // namespace

TEST(HeatConditioned, StartsAsTheIdentityMap) {
  SurrogateOptions so = cond_options(1, false, false, 2, "auto");
  HeatSurrogate<double> model(so, 2, {1.0, 0.75});
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 5);
  CondSetup s(so);
  s.buf.set_host(buf.get_host());  // the plain initialisation, not the perturbed point
  const auto y = s.run();
  auto hu = to_host(s.u);
  for (long t = 0; t < s.B * s.N; ++t) EXPECT_EQ(y[t], hu(t)) << t;
}

TEST(HeatConditioned, GradientsMatchCentralDifferencesDenseAndTiled) {
  for (const char* mem : {"dense", "tiled"}) {
    double wp = 1, wi = 1;
    check_gradients(cond_options(1, false, false, 2, mem), &wp, &wi);
    std::printf("conditioned %s, 2 layers: worst parameter gradient error %.2e, input %.2e\n", mem, wp, wi);
    EXPECT_LT(wp, 1e-7) << mem;
    EXPECT_LT(wi, 1e-7) << mem;
    // Two channels, their stencil differences and the horizon input in the conditioning.
    check_gradients(cond_options(2, true, true, 1, mem), &wp, &wi);
    std::printf("conditioned %s, stencil + dt_input: worst parameter gradient error %.2e, input %.2e\n", mem, wp, wi);
    EXPECT_LT(wp, 1e-7) << mem << " stencil + dt_input";
    EXPECT_LT(wi, 1e-7) << mem << " stencil + dt_input";
  }
}

TEST(HeatConditioned, TiledAttentionEqualsDense) {
  CondSetup a(cond_options(1, true, false, 2, "dense")), b(cond_options(1, true, false, 2, "tiled"));
  const auto ya = a.run(), yb = b.run();
  EXPECT_GT(a.cache.cp[0].extent(0), 0u);
  EXPECT_EQ(b.cache.cp[0].extent(0), 0u);
  for (std::size_t t = 0; t < ya.size(); ++t) EXPECT_NEAR(ya[t], yb[t], 1e-12) << t;
  const auto ma = a.model.attention_map(a.cache, a.buf, 1, 1, 5), mb = b.model.attention_map(b.cache, b.buf, 1, 1, 5);
  double sum = 0;
  for (std::size_t j = 0; j < ma.size(); ++j) {
    EXPECT_NEAR(ma[j], mb[j], 1e-12);
    sum += ma[j];
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(HeatConditioned, PredictionIsAffineInTheFieldAndLinearWithoutTheBias) {
  CondSetup s(cond_options(1, true, true, 2, "auto"));
  const long T = s.B * s.N;
  View1<double> v("v", T), zero("zero", T), mix("mix", T);
  auto hu = to_host(s.u);
  auto hv = Kokkos::create_mirror_view(v);
  auto hm = Kokkos::create_mirror_view(mix);
  const double al = 0.7, be = -1.9;
  for (long t = 0; t < T; ++t) {
    hv(t) = std::sin(1.0 + 3.0 * t);
    hm(t) = al * hu(t) + be * hv(t);
  }
  Kokkos::deep_copy(v, hv);
  Kokkos::deep_copy(mix, hm);
  const auto f0 = s.run(zero), fu = s.run(s.u), fv = s.run(v), fm = s.run(mix);
  double bias = 0;
  for (long t = 0; t < T; ++t) {
    EXPECT_NEAR(fm[t] - f0[t], al * (fu[t] - f0[t]) + be * (fv[t] - f0[t]), 1e-12) << t;
    bias = std::max(bias, std::abs(f0[t]));
  }
  EXPECT_GT(bias, 1e-3);  // the affine part e(c) is really there at this point
  // Without e (the last mixing row, weights and bias, in every layer) the map is linear: f(0) = 0.
  for (long l = 0; l < 2; ++l) {
    const std::string pre = "cond." + std::to_string(l) + ".";
    auto wm = s.buf.view2(pre + "wm");
    auto bm = s.buf.view1(pre + "bm");
    auto hw = Kokkos::create_mirror_view(wm);
    auto hb = Kokkos::create_mirror_view(bm);
    Kokkos::deep_copy(hw, wm);
    Kokkos::deep_copy(hb, bm);
    const long e = long(hb.extent(0)) - 1;
    for (long f = 0; f < long(hw.extent(1)); ++f) hw(e, f) = 0;
    hb(e) = 0;
    Kokkos::deep_copy(wm, hw);
    Kokkos::deep_copy(bm, hb);
  }
  const auto g0 = s.run(zero), gu = s.run(s.u), gv = s.run(v), gm = s.run(mix);
  for (long t = 0; t < T; ++t) {
    EXPECT_EQ(g0[t], 0.0);
    EXPECT_NEAR(gm[t], al * gu[t] + be * gv[t], 1e-12) << t;
  }
}

TEST(HeatConditioned, SamplesWithTheSameChannelsShareOneKernelAndOthersDoNot) {
  CondSetup s(cond_options(1, false, false, 1, "dense"));
  s.so.dt_input = false;
  auto he = to_host(s.ex);
  for (long n = 0; n < s.N; ++n) he(s.N + n, 0) = he(n, 0);  // sample 1 gets sample 0's channel
  Kokkos::deep_copy(s.ex, he);
  s.run();
  auto p = to_host(s.cache.cp[0]);  // [B*H, N, N]
  const long H = s.so.kernel_heads;
  for (long h = 0; h < H; ++h)
    for (long i = 0; i < s.N; ++i)
      for (long j = 0; j < s.N; ++j) ASSERT_EQ(p(h, i, j), p(H + h, i, j));
  // The output is then one shared linear map of the fields: the same as running each sample alone.
  he(s.N + 3, 0) += 0.5;  // a different channel value changes that sample's kernel
  Kokkos::deep_copy(s.ex, he);
  s.run();
  auto q = to_host(s.cache.cp[0]);
  double diff = 0;
  for (long h = 0; h < H; ++h)
    for (long i = 0; i < s.N; ++i)
      for (long j = 0; j < s.N; ++j) {
        diff = std::max(diff, std::abs(q(h, i, j) - q(H + h, i, j)));
        ASSERT_EQ(q(h, i, j), p(h, i, j));  // sample 0 is untouched
      }
  EXPECT_GT(diff, 1e-4);
}

TEST(HeatConditioned, RefusesAModelWithoutChannels) {
  SurrogateOptions so = cond_options(0, false, false, 1, "auto");
  EXPECT_NO_THROW(so.validate());  // a run validates before data.channels sets the channel count
  try {
    HeatSurrogate<double> model(so, 2, {1.0, 1.0});
    FAIL() << "no channel accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.channels"), std::string::npos) << e.what();
  }
  so.input_kappa = true;  // the shorthand gives the one channel
  EXPECT_NO_THROW(HeatSurrogate<double>(so, 2, {1.0, 1.0}));
  so.coords = CoordEncoding::Fourier;
  EXPECT_THROW(so.validate(), Error);
  so.coords = CoordEncoding::Harmonics;
  OptionSet set;  // an unknown memory layout is refused where the option is read
  so.declare(set);
  EXPECT_THROW(set.set("model.conditioned_attention=sparse"), Error);
}

// ------------------------------------------------------------------ the κ-conditioned local stencil (model.local_radius)

namespace {

SurrogateOptions local_options(long radius, long layers, bool stencil = false, bool dt_input = false) {
  SurrogateOptions so = cond_options(1, stencil, dt_input, layers, "dense");
  so.local_radius = radius;
  return so;
}

// The four geometries: 2D periodic, 2D edge-repeated, 1D periodic, 1D edge-repeated (lengths = n·h or 2·n·h).
struct Geometry {
  const char* name;
  int dim;
  std::vector<double> lengths;
};
const Geometry kGeometries[] = {{"2D periodic", 2, {1.0, 0.75}},
                                {"2D non-periodic", 2, {2.0, 1.5}},
                                {"1D periodic", 1, {3.0}},
                                {"1D non-periodic", 1, {6.0}}};

}  // namespace

TEST(HeatConditionedLocal, GradientsMatchCentralDifferences) {
  // r = 2 on the periodic 3-point y axis: the window (5) is longer than the axis, offsets wrap onto one point.
  for (long r : {1L, 2L})
    for (const auto& g : kGeometries) {
      double wp = 1, wi = 1;
      check_gradients(local_options(r, 2), &wp, &wi, g.dim, g.lengths);
      std::printf("local r=%ld %s, 2 layers: worst parameter gradient error %.2e, input %.2e\n", r, g.name, wp, wi);
      EXPECT_LT(wp, 1e-7) << g.name << " r=" << r;
      EXPECT_LT(wi, 1e-7) << g.name << " r=" << r;
    }
  double wp = 1, wi = 1;  // with the channels' stencil differences and the horizon in z, tiled attention
  SurrogateOptions so = local_options(2, 1, true, true);
  so.conditioned_attention = ConditionedAttention::Tiled;
  check_gradients(so, &wp, &wi, 2, {2.0, 1.5});
  std::printf("local r=2 2D non-periodic, stencil + dt_input, tiled: parameter %.2e, input %.2e\n", wp, wi);
  EXPECT_LT(wp, 1e-7);
  EXPECT_LT(wi, 1e-7);
}

// With every parameter 0 but one stencil bias b_s = 1, one layer is the pure shift ŷ_i = û_{i+s}: wrapped on a
// periodic axis, the edge value on the others.
TEST(HeatConditionedLocal, OneStencilWeightIsTheShiftedField) {
  const long r = 2, sx = 2, sy = -1;
  for (const auto& g : kGeometries) {
    CondSetup s(local_options(r, 1), 3, g.dim, g.lengths);
    auto p = s.buf.get_host();
    for (auto& x : p) x = 0;
    s.buf.set_host(p);
    auto bl = s.buf.view1("cond.0.bl");
    auto hb = Kokkos::create_mirror_view(bl);
    Kokkos::deep_copy(hb, bl);
    const long ry = g.dim > 1 ? r : 0, esy = g.dim > 1 ? sy : 0;
    ASSERT_EQ(long(hb.extent(0)), (2 * r + 1) * (2 * ry + 1));
    hb((esy + ry) * (2 * r + 1) + sx + r) = 1;
    Kokkos::deep_copy(bl, hb);
    const auto y = s.run();
    auto hu = to_host(s.u);
    const bool per = g.lengths[0] == (g.dim > 1 ? 1.0 : 3.0);
    auto nb = [&](long i, long d, long n) {
      const long k = i + d;
      return per ? ((k % n) + n) % n : std::min(std::max(k, 0L), n - 1);
    };
    for (long b = 0; b < s.B; ++b)
      for (long n = 0; n < s.N; ++n) {
        const long i = n % s.nx, j = n / s.nx;
        const long q = nb(j, esy, s.ny) * s.nx + nb(i, sx, s.nx);
        EXPECT_EQ(y[b * s.N + n], hu(b * s.N + q)) << g.name << " token " << n;
      }
  }
}

TEST(HeatConditionedLocal, PredictionStaysAffineInTheField) {
  for (const auto& g : kGeometries) {
    CondSetup s(local_options(2, 2, true, true), 3, g.dim, g.lengths);
    const long T = s.B * s.N;
    View1<double> v("v", T), zero("zero", T), mix("mix", T);
    auto hu = to_host(s.u);
    auto hv = Kokkos::create_mirror_view(v);
    auto hm = Kokkos::create_mirror_view(mix);
    const double al = 0.7, be = -1.9;
    for (long t = 0; t < T; ++t) {
      hv(t) = std::sin(1.0 + 3.0 * t);
      hm(t) = al * hu(t) + be * hv(t);
    }
    Kokkos::deep_copy(v, hv);
    Kokkos::deep_copy(mix, hm);
    const auto f0 = s.run(zero), fu = s.run(s.u), fv = s.run(v), fm = s.run(mix);
    for (long t = 0; t < T; ++t)
      EXPECT_NEAR(fm[t] - f0[t], al * (fu[t] - f0[t]) + be * (fv[t] - f0[t]), 1e-12) << g.name << " " << t;
  }
}

// r = 0 declares no local parameters and computes as before; r > 0 with its (initial) zero weights gives the same
// numbers bit for bit, and its blocks come after all the others, so the other parameters start identical.
TEST(HeatConditionedLocal, RadiusZeroAndZeroWeightsAreBitIdenticalToTheModelWithout) {
  for (const auto& g : kGeometries) {
    CondSetup a(local_options(0, 2, true, true), 3, g.dim, g.lengths), b(local_options(2, 2, true, true), 3, g.dim,
                                                                         g.lengths);
    for (const auto& blk : a.buf.blocks()) EXPECT_EQ(blk.name.find("wl"), std::string::npos) << blk.name;
    // Plain initialisations: the shared parameters agree, the local ones are zero.
    ParameterBuffer<double> pa, pb;
    a.model.declare(pa);
    pa.allocate();
    a.model.init(pa, 5);
    b.model.declare(pb);
    pb.allocate();
    b.model.init(pb, 5);
    const auto ha = pa.get_host(), hb = pb.get_host();
    ASSERT_GT(hb.size(), ha.size());
    for (std::size_t i = 0; i < hb.size(); ++i) EXPECT_EQ(hb[i], i < ha.size() ? ha[i] : 0.0) << i;
    // At the perturbed point of a: b with a's parameters and zero local weights.
    auto p = a.buf.get_host();
    const std::size_t n0 = p.size();
    p.resize(hb.size(), 0.0);
    b.buf.set_host(p);
    Kokkos::deep_copy(b.u, a.u);  // the setups draw their fields after their (differently many) parameters
    Kokkos::deep_copy(b.ex, a.ex);
    const auto ya = a.run(), yb = b.run();
    EXPECT_TRUE(a.cache.cw.empty());
    EXPECT_EQ(long(b.cache.cw.size()), 2);
    for (std::size_t t = 0; t < ya.size(); ++t) EXPECT_EQ(ya[t], yb[t]) << g.name << " " << t;
    // ... and the local term does act once its weights are not zero.
    for (std::size_t i = n0; i < p.size(); ++i) p[i] = 0.01 * double(i % 7);
    b.buf.set_host(p);
    const auto yc = b.run();
    double diff = 0;
    for (std::size_t t = 0; t < ya.size(); ++t) diff = std::max(diff, std::abs(yc[t] - ya[t]));
    EXPECT_GT(diff, 1e-4) << g.name;
  }
  SurrogateOptions so = cond_options(1, false, false, 1, "auto");
  so.local_radius = -1;
  EXPECT_THROW(so.validate(), Error);
  so.local_radius = 2;
  EXPECT_NO_THROW(so.validate());
  so.kind = SurrogateKind::Kernel;
  so.extra_channels = 0;
  EXPECT_THROW(so.validate(), Error);
}

// model.conserve: every predicted field keeps its input's mean exactly (periodic or zero-flux heat without
// sources), for the conditioned and the generic kind; gradients through the projection against central differences.
TEST(HeatConserve, PredictionKeepsTheInputMeanAndGradientsMatchCentralDifferences) {
  for (const char* kind : {"conditioned", "transformer"}) {
    SurrogateOptions so = cond_options(1, false, false, 2, "dense");
    so.kind = parse_enum<SurrogateKind>(kind, "model.kind");
    so.encoder.n_heads = 2;
    for (bool conserve : {false, true}) {
      so.conserve = conserve;
      CondSetup s(so);
      const auto y = s.run();
      auto hu = to_host(s.u);
      double worst = 0;
      for (long b = 0; b < s.B; ++b) {
        double my = 0, mu = 0;
        for (long n = 0; n < s.N; ++n) my += y[b * s.N + n], mu += hu(b * s.N + n);
        worst = std::max(worst, std::abs(my - mu) / double(s.N));
      }
      if (conserve)
        EXPECT_LT(worst, 1e-13) << kind;
      else
        EXPECT_GT(worst, 1e-3) << kind << ": at a generic point the unconstrained model changes the mean";
    }
    double wp = 1, wi = 1;
    check_gradients(so, &wp, &wi);
    std::printf("%s with model.conserve: worst parameter gradient error %.2e, input %.2e\n", kind, wp, wi);
    EXPECT_LT(wp, 1e-7) << kind;
    EXPECT_LT(wi, 1e-7) << kind;
  }
}

// model.condition_on_field: û is a conditioning column too (for κ(u)); the map is then no longer linear in û, and
// the gradients with respect to the parameters and to û (through the attention and the conditioning) still match
// central differences, with and without channels, over two layers.
TEST(HeatConditionedOnField, GradientsMatchCentralDifferencesAndTheMapIsNonlinear) {
  for (long channels : {0L, 1L}) {
    SurrogateOptions so = cond_options(channels, false, false, 2, "tiled");
    so.condition_on_field = true;
    double wp = 1, wi = 1;
    check_gradients(so, &wp, &wi);
    std::printf("conditioned on the field, %ld channel(s): worst parameter gradient error %.2e, input %.2e\n",
                channels, wp, wi);
    EXPECT_LT(wp, 1e-7) << channels;
    EXPECT_LT(wi, 1e-7) << channels;
    // ŷ(2û) ≠ 2ŷ(û) − ŷ(0): not affine any more.
    CondSetup s(so);
    const auto y1 = s.run();
    auto hu = to_host(s.u);
    View1<double> z("z", s.B * s.N), u2("u2", s.B * s.N);
    auto h2 = Kokkos::create_mirror_view(u2);
    for (long t = 0; t < s.B * s.N; ++t) h2(t) = 2 * hu(t);
    Kokkos::deep_copy(u2, h2);
    const auto y0 = s.run(z);
    const auto y2 = s.run(u2);
    double dev = 0;
    for (long t = 0; t < s.B * s.N; ++t) dev = std::max(dev, std::abs(y2[t] - 2 * y1[t] + y0[t]));
    EXPECT_GT(dev, 1e-3) << channels;
    if (channels == 0) {  // the run passes no channel view at all (0 x 0) when there are no channels
      View2<double> none("none", 0, 0);
      s.model.forward(s.out, s.cache, s.u, none, s.coords, s.B, s.N, s.buf, s.tau);
      EXPECT_EQ(to_host(s.out)(5), y1[5]);
    }
  }
  SurrogateOptions bad = cond_options(0, false, false, 1, "dense");
  EXPECT_THROW(HeatSurrogate<double>(bad, 2, {1.0, 0.75}), Error) << "conditioned without channels or the field";
}

// model.attention_precision = bf16 (conditioned kind): the global attention's products in bf16 (AMX, or AVX512-BF16
// without AMX), float32 accumulation and softmax. The same float32 model on a 20 x 12 grid (240 tokens: two key
// blocks of 128, the second partial) in float32 and in bf16: predictions within 8e-3 of their largest magnitude,
// parameter gradients within 6e-3 and input gradients within 1.5e-2 of theirs, and not identical (the bf16 kernels
// ran). Where no bf16 unit exists the option is refused with the reason.
TEST(HeatConditioned, Bf16AttentionMatchesFloat32WithinBf16Rounding) {
  SurrogateOptions so;
  so.kind = SurrogateKind::Conditioned;
  so.extra_channels = 1;
  so.kernel_layers = 2;
  so.kernel_heads = 2;
  so.kernel_dk = 16;
  so.harmonics = 2;
  so.encoder.d_model = 8;
  so.conditioned_attention = ConditionedAttention::Tiled;
  SurrogateOptions sb = so;
  sb.attention_precision = ops::AttentionPrecision::BF16;
  if (!ops::bf16_attention_available()) {
    try {
      HeatSurrogate<float> m(sb, 2, {1.0, 0.6});
      ADD_FAILURE() << "bf16 accepted without a bf16 unit";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.attention_precision = float32"), std::string::npos) << e.what();
    }
    GTEST_SKIP() << ops::bf16_attention_unavailable_reason();
  }
  const long nx = 20, ny = 12, N = nx * ny, B = 2;
  HeatSurrogate<float> mf(so, 2, {1.0, 0.6}), mb(sb, 2, {1.0, 0.6});
  ParameterBuffer<float> pf, pb;
  mf.declare(pf);
  mb.declare(pb);
  pf.allocate();
  pb.allocate();
  mf.init(pf, 7);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto p = pf.get_host();
  for (auto& x : p) x += 0.3 * nd(rng);  // a generic point (the initialisation's zeros hide the attention)
  pf.set_host(p);
  pb.set_host(p);
  View1<float> u("u", B * N), outf("outf", B * N), outb("outb", B * N), dout("dout", B * N), duf("duf", B * N),
      dub("dub", B * N);
  View2<float> ex("ex", B * N, 1), coords("x", N, 2);
  auto hu = Kokkos::create_mirror_view(u);
  auto he = Kokkos::create_mirror_view(ex);
  auto hc = Kokkos::create_mirror_view(coords);
  auto hd = Kokkos::create_mirror_view(dout);
  for (long n = 0; n < N; ++n) {
    hc(n, 0) = float((n % nx) * 0.05);
    hc(n, 1) = float((n / nx) * 0.05);
  }
  for (long t = 0; t < B * N; ++t) {
    hu(t) = float(nd(rng));
    he(t, 0) = float(nd(rng));
    hd(t) = float(nd(rng));
  }
  Kokkos::deep_copy(u, hu);
  Kokkos::deep_copy(ex, he);
  Kokkos::deep_copy(coords, hc);
  Kokkos::deep_copy(dout, hd);
  SurrogateCache<float> cf, cb;
  pf.zero_grads();
  pb.zero_grads();
  mf.forward(outf, cf, u, ex, coords, B, N, pf);
  mb.forward(outb, cb, u, ex, coords, B, N, pb);
  EXPECT_FALSE(cf.ws.bf16);
  EXPECT_TRUE(cb.ws.bf16);
  mf.backward(cf, dout, pf, duf);
  mb.backward(cb, dout, pb, dub);
  // Largest deviation relative to the largest magnitude, and whether anything differs at all.
  auto compare = [](const std::vector<double>& a, const std::vector<double>& b, double* rel, bool* differs) {
    double scale = 0, dev = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::abs(a[i]));
      dev = std::max(dev, std::abs(a[i] - b[i]));
      if (a[i] != b[i]) *differs = true;
    }
    *rel = dev / scale;
  };
  auto vec = [](const View1<float>& v) {
    auto h = to_host(v);
    return std::vector<double>(h.data(), h.data() + h.extent(0));
  };
  double ro = 1, rg = 1, ri = 1;
  bool differs = false;
  compare(vec(outf), vec(outb), &ro, &differs);
  const auto gf = pf.get_host(Slot::Grads), gb = pb.get_host(Slot::Grads);
  compare(std::vector<double>(gf.begin(), gf.end()), std::vector<double>(gb.begin(), gb.end()), &rg, &differs);
  compare(vec(duf), vec(dub), &ri, &differs);
  std::printf("conditioned bf16 attention against float32: output %.2e, parameter gradients %.2e, input %.2e\n", ro, rg,
              ri);
  // Measured on a Zen 4 (AVX512-BF16): 3.0e-3, 2.6e-3, 6.8e-3; dq scaled by 1.08 in the bf16 backward gives 9.5e-3
  // on the parameter gradients, which fails here.
  EXPECT_LT(ro, 8e-3);
  EXPECT_LT(rg, 6e-3);
  EXPECT_LT(ri, 1.5e-2);
  EXPECT_TRUE(differs) << "bf16 and float32 agree bit for bit: the bf16 kernels did not run";
}

// The bf16 option's conditions, each refused with what to change.
TEST(HeatConditioned, Bf16AttentionOptionsRefuseWhatTheKernelsDoNotCover) {
  auto refused = [](SurrogateOptions so, const char* needle) {
    so.attention_precision = ops::AttentionPrecision::BF16;
    try {
      HeatSurrogate<float> m(so, 2, {1.0, 0.75});
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  SurrogateOptions so = cond_options(1, false, false, 1, "tiled");
  so.kernel_dk = 16;
  SurrogateOptions a = so;
  a.kernel_dk = 8;
  refused(a, "model.kernel_dk = 16");
  SurrogateOptions b = so;
  b.conditioned_attention = ConditionedAttention::Dense;
  refused(b, "model.conditioned_attention = tiled");
  SurrogateOptions c = so;
  c.kind = SurrogateKind::Kernel;
  c.extra_channels = 0;
  refused(c, "model.kind = conditioned or transformer");
  SurrogateOptions t = so;  // the transformer kind: its encoder's conditions under the model.* keys
  t.kind = SurrogateKind::Transformer;
  t.encoder.d_model = 32;
  t.encoder.n_heads = 2;
  refused(t, "model.attention = tiled");  // the surrogate's default attention is dense
  t.encoder.attention = ops::AttentionKind::Tiled;
  t.encoder.n_heads = 4;
  refused(t, "model.d_model / model.n_heads = 16");
  if (ops::bf16_attention_available()) {
    so.attention_precision = ops::AttentionPrecision::BF16;
    EXPECT_THROW(HeatSurrogate<double>(so, 2, {1.0, 0.75}), Error) << "a float64 model in bf16";
    EXPECT_NO_THROW(HeatSurrogate<float>(so, 2, {1.0, 0.75}));
  }
}
