// The heat surrogate in 3D: pairs generated on the fly from a 3D problem family (per-sample κ(x), Douglas ADI
// targets on each sample's own problem), the conditioned model's 3D local stencil and attention (gradients against
// central differences), and a small 3D run end to end (training, rollout, resolution transfer, the ADI timing, a
// checkpoint that loads and predicts eval.h5's numbers).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/options.hpp"
#include "attnphys/solvers/fd/heat_dataset.hpp"
#include "attnphys/solvers/fd/heat_solver.hpp"
#include "attnphys/solvers/training/heat_fit.hpp"
#include "attnphys/solvers/training/heat_training.hpp"
#include "../../solvers/src/training/heat_eval.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

HeatDataOptions family_3d(long n) {
  HeatDataOptions d;
  d.dim = 3;
  d.n = n;
  d.length_scale = 0.25;
  d.horizon_ftcs_steps = 4;
  d.reference_substeps = 4;
  d.family.kappa = heat::KappaFamily::LogNormal;
  d.family.kappa_contrast = 5;
  d.family.kappa_length_scale = 0.3;
  return d;
}

// Sample s of the pairs advanced by one horizon with the Douglas ADI on `prob`: the [n, n, n] field.
std::vector<double> adi_one_horizon(const HeatDataOptions& d, const heat::HeatProblem& prob,
                                    const HostView2<double>& in, long s, long n, View3<double>& u) {
  const long P = n * n * n;
  fd::HeatStepper st(prob, fd::Method::Adi);
  if (u.extent(0) == 0) {
    u = View3<double>("u", n, n, n);
    auto uh = Kokkos::create_mirror_view(u);
    for (long q = 0; q < P; ++q) uh.data()[q] = in(s, q);
    Kokkos::deep_copy(u, uh);
  }
  st.advance(u, 0.0, d.horizon(), d.horizon() / double(d.reference_substeps));
  auto h = to_host(u);
  return std::vector<double>(h.data(), h.data() + P);
}

}  // namespace

TEST(HeatTraining3d, PairsAreTheDouglasAdiOnEachSamplesOwnProblem) {
  const long n = 8, P = n * n * n, first = 2, count = 2;
  const HeatDataOptions d = resolve_heat_data(family_3d(n));
  ASSERT_EQ(d.channels, std::vector<std::string>{"kappa"});
  ASSERT_EQ(d.points(), P);
  const HeatPairs p = make_heat_pairs(d, first, count, n, 2);
  ASSERT_EQ(p.count, count);
  ASSERT_EQ(p.points, P);
  EXPECT_EQ(p.nx, n);
  EXPECT_EQ(p.ny, n);
  EXPECT_EQ(p.nz, n);
  ASSERT_EQ(long(p.coords.extent(1)), 3L);
  auto in = to_host(p.inputs), tg = to_host(p.targets);
  auto ex = to_host(p.extra);
  auto later = to_host(p.later);
  auto xyz = to_host(p.coords);
  const heat::HeatProblem base = d.problem(n);
  for (long q = 0; q < P; ++q) {  // x fastest, then y, then z, in physical units
    EXPECT_EQ(xyz(q, 0), base.coord(0, q % n));
    EXPECT_EQ(xyz(q, 1), base.coord(1, (q / n) % n));
    EXPECT_EQ(xyz(q, 2), base.coord(2, q / (n * n)));
  }
  for (long s = 0; s < count; ++s) {
    const heat::HeatProblem prob = d.sample_problem(n, first + s);
    ASSERT_TRUE(prob.variable_kappa());
    auto k = to_host(prob.kappa_field);
    double kmin = 1e300, kmax = 0;
    for (long q = 0; q < P; ++q) {
      EXPECT_EQ(ex(s, q, 0), k.data()[q]);
      kmin = std::min(kmin, k.data()[q]);
      kmax = std::max(kmax, k.data()[q]);
    }
    EXPECT_NEAR(kmax / kmin, 5.0, 1e-9);  // the family's contrast, exactly
    View3<double> u;
    const auto u1 = adi_one_horizon(d, prob, in, s, n, u);
    double m0 = 0, m1 = 0, diff = 0;
    for (long q = 0; q < P; ++q) {
      EXPECT_NEAR(tg(s, q), u1[std::size_t(q)], 1e-12);
      m0 += in(s, q);
      m1 += tg(s, q);
      diff += std::abs(tg(s, q) - in(s, q));
    }
    EXPECT_NEAR(m1, m0, 1e-10) << "periodic, no source: the heat is conserved";
    EXPECT_GT(diff / P, 1e-3) << "the horizon must change the field";
    const auto u2 = adi_one_horizon(d, prob, in, s, n, u);
    for (long q = 0; q < P; ++q) EXPECT_NEAR(later(s, 0, q), u2[std::size_t(q)], 1e-12);
  }
  // The same physical fields on a finer grid (resolution transfer): periodic points 2i of 16³ are points i of 8³.
  const HeatPairs f = generate_heat_pairs(d, first, 1, 2 * n);
  auto fin = to_host(f.inputs);
  for (long z = 0; z < n; ++z)
    for (long y = 0; y < n; ++y)
      for (long x = 0; x < n; ++x)
        EXPECT_NEAR(fin(0, ((2 * z) * 2 * n + 2 * y) * 2 * n + 2 * x), in(0, (z * n + y) * n + x), 1e-12);
}

TEST(HeatTraining3d, DirichletFamilyPairsWithBoundaryDataAndSources) {
  const long n = 6, P = n * n * n;
  HeatDataOptions o = family_3d(n);
  o.bc = heat::BcType::Dirichlet;
  o.family.boundary = heat::BoundaryFamily::Random;
  o.family.source = heat::SourceFamily::Grf;
  const HeatDataOptions d = resolve_heat_data(o);
  ASSERT_EQ(d.channels, (std::vector<std::string>{"kappa", "source", "boundary"}));
  const HeatPairs p = make_heat_pairs(d, 0, 1, n);
  auto in = to_host(p.inputs), tg = to_host(p.targets);
  auto ex = to_host(p.extra);
  const heat::HeatProblem prob = d.sample_problem(n, 0);
  View3<double> u;
  const auto u1 = adi_one_horizon(d, prob, in, 0, n, u);
  const auto b = heat::boundary_field(prob);
  double bin = 0, bside = 0;
  for (long q = 0; q < P; ++q) {
    EXPECT_NEAR(tg(0, q), u1[std::size_t(q)], 1e-12);
    EXPECT_EQ(ex(0, q, 2), b.data()[q]);
    const long x = q % n, y = (q / n) % n, z = q / (n * n);
    const bool side = x == 0 || x == n - 1 || y == 0 || y == n - 1 || z == 0 || z == n - 1;
    (side ? bside : bin) += std::abs(ex(0, q, 2));
  }
  EXPECT_EQ(bin, 0.0) << "boundary data only next to the faces";
  EXPECT_GT(bside, 0.0);
  // The encoding of a non-periodic box has period 2L on every axis.
  EXPECT_EQ(encoding_lengths(d), (std::vector<double>{2.0, 2.0, 2.0}));
}

namespace {
// A 3D grid nx × ny × nz (x fastest), spacing 0.25, periodic where the length passed is n·h.
struct Grid3 {
  long nx, ny, nz;
  View2<double> coords;
  Grid3(long x, long y, long z) : nx(x), ny(y), nz(z), coords("xyz", x * y * z, 3) {
    auto h = Kokkos::create_mirror_view(coords);
    for (long q = 0; q < x * y * z; ++q) {
      h(q, 0) = 0.25 * (q % x);
      h(q, 1) = 0.25 * ((q / x) % y);
      h(q, 2) = 0.25 * (q / (x * y));
    }
    Kokkos::deep_copy(coords, h);
  }
  long points() const { return nx * ny * nz; }
};

// J = Σ w ŷ: the worst relative error of every parameter's and every input value's gradient against central
// differences, for a conditioned 3D model at a random point.
void gradient_errors(const SurrogateOptions& so, const Grid3& g, const std::vector<double>& lengths, double* wp,
                     double* wi, double eps = 1e-5, double spread = 0.3) {
  HeatSurrogate<double> model(so, 3, lengths);
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 3);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto p0 = buf.get_host();
  for (auto& x : p0) x += spread * nd(rng);
  buf.set_host(p0);
  const long B = 2, N = g.points(), C = so.extra_channels;
  View1<double> u("u", B * N), out("out", B * N), dout("dout", B * N), du("du", B * N), tau("tau", B);
  View2<double> ex("ex", B * N, C);
  auto hu = Kokkos::create_mirror_view(u);
  auto he = Kokkos::create_mirror_view(ex);
  auto hd = Kokkos::create_mirror_view(dout);
  for (long t = 0; t < B * N; ++t) {
    hu(t) = nd(rng);
    hd(t) = nd(rng);
    for (long c = 0; c < C; ++c) he(t, c) = nd(rng);
  }
  Kokkos::deep_copy(u, hu);
  Kokkos::deep_copy(ex, he);
  Kokkos::deep_copy(dout, hd);
  Kokkos::deep_copy(tau, 1.0);
  SurrogateCache<double> cache;
  auto J = [&](const View1<double>& field) {
    model.forward(out, cache, field, ex, g.coords, B, N, buf, tau);
    auto h = to_host(out);
    double s = 0;
    for (long t = 0; t < B * N; ++t) s += h(t) * hd(t);
    return s;
  };
  buf.zero_grads();
  J(u);
  model.backward(cache, dout, buf, du);
  const auto grads = buf.get_host(Slot::Grads);
  const auto dus = to_host(du);
  // eps: the sums over (2r+1)^3 neighbours are large, a wider step keeps round-off down (1e-5 by default)
  *wp = 0;
  *wi = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    auto p = p0;
    p[i] = p0[i] + eps;
    buf.set_host(p);
    const double jp = J(u);
    p[i] = p0[i] - eps;
    buf.set_host(p);
    const double jm = J(u);
    const double fd = (jp - jm) / (2 * eps);
    *wp = std::max(*wp, std::abs(fd - grads[i]) / std::max(1.0, std::abs(fd)));
  }
  buf.set_host(p0);
  View1<double> v("v", B * N);
  auto hv = Kokkos::create_mirror_view(v);
  for (long t = 0; t < B * N; ++t) {
    for (long q = 0; q < B * N; ++q) hv(q) = hu(q);
    hv(t) = hu(t) + eps;
    Kokkos::deep_copy(v, hv);
    const double jp = J(v);
    hv(t) = hu(t) - eps;
    Kokkos::deep_copy(v, hv);
    const double jm = J(v);
    const double fd = (jp - jm) / (2 * eps);
    *wi = std::max(*wi, std::abs(fd - dus(t)) / std::max(1.0, std::abs(fd)));
  }
}

SurrogateOptions cond3(long heads, long radius) {
  SurrogateOptions so;
  so.kind = SurrogateKind::Conditioned;
  so.extra_channels = 1;
  so.kernel_heads = heads;
  so.kernel_dk = 3;
  so.kernel_layers = 2;
  so.local_radius = radius;
  so.harmonics = 1;
  so.encoder.d_model = 4;
  so.conditioned_attention = ConditionedAttention::Dense;
  return so;
}
}  // namespace

TEST(HeatTraining3d, ConditionedLocalStencilAndAttentionGradientsIn3d) {
  // A 4 × 3 × 5 grid: x periodic (n > 2r + 1 for r = 1, wraps), y periodic with n = 2r + 1 (every point a
  // neighbour), z not periodic (edges repeat); with and without global attention.
  const Grid3 g(4, 3, 5);
  const std::vector<double> lengths{1.0, 0.75, 2.5};  // z: 2·(5·0.25), a non-periodic axis
  for (long heads : {0L, 1L}) {
    double wp = 1, wi = 1;
    gradient_errors(cond3(heads, 1), g, lengths, &wp, &wi);
    EXPECT_LT(wp, 1e-7) << "heads " << heads;
    EXPECT_LT(wi, 1e-7) << "heads " << heads;
  }
  // r = 2 on the same grid: the y axis (3 points) is shorter than the window of 5.
  double wp = 1, wi = 1;
  gradient_errors(cond3(0, 2), g, lengths, &wp, &wi);
  EXPECT_LT(wp, 1e-7);
  EXPECT_LT(wi, 1e-7);
}

TEST(HeatTraining3d, MirroredEdgesGradientsAndWhereTheyApply) {
  // model.local_edge = odd / even: beyond a non-periodic edge the local stencil reads the cell mirrored across the
  // edge face, with its sign flipped (odd) or kept (even). Gradients through both, r = 1 and 2 (r = 2 reaches the
  // second mirrored cell), on a grid whose x and z axes are not periodic (y is).
  const Grid3 g(4, 3, 5);
  const std::vector<double> lengths{2.0, 0.75, 2.5};
  for (LocalEdge e : {LocalEdge::Odd, LocalEdge::Even})
    for (long r : {1L, 2L}) {
      SurrogateOptions so = cond3(0, r);
      so.local_edge = e;
      double wp = 1, wi = 1;
      gradient_errors(so, g, lengths, &wp, &wi);
      EXPECT_LT(wp, 1e-7) << "edge " << int(e) << " r " << r;
      EXPECT_LT(wi, 1e-7) << "edge " << int(e) << " r " << r;
    }
  // model.channel_window: the channel's neighbours join the conditioning (no gradient flows into them; the wider
  // conditioning changes the parameter shapes).
  {
    SurrogateOptions so = cond3(0, 1);
    so.kernel_layers = 1;
    so.channel_window = 1;
    so.local_edge = LocalEdge::Odd;
    double wp = 1, wi = 1;
    gradient_errors(so, g, lengths, &wp, &wi);
    EXPECT_LT(wp, 1e-7);
    EXPECT_LT(wi, 1e-7);
  }
  // One layer, r = 1, the same parameters and input under the three rules: the mirrored cell of a first-neighbour
  // read is the edge cell itself, so even equals clamp everywhere; odd differs exactly at the tokens on a
  // non-periodic edge (x = 0 or 3, z = 0 or 4) and nowhere else.
  auto run = [&](LocalEdge e) {
    SurrogateOptions so = cond3(0, 1);
    so.kernel_layers = 1;
    so.local_edge = e;
    HeatSurrogate<double> model(so, 3, lengths);
    ParameterBuffer<double> buf;
    model.declare(buf);
    buf.allocate();
    model.init(buf, 3);
    std::mt19937_64 rng(11);
    std::normal_distribution<double> nd(0.0, 1.0);
    auto p = buf.get_host();
    for (auto& x : p) x += 0.5 * nd(rng);
    buf.set_host(p);
    const long N = g.points();
    View1<double> u("u", N), out("out", N), tau("tau", 1);
    View2<double> ex("ex", N, 1);
    auto hu = Kokkos::create_mirror_view(u);
    auto he = Kokkos::create_mirror_view(ex);
    for (long t = 0; t < N; ++t) {
      hu(t) = nd(rng);
      he(t, 0) = nd(rng);
    }
    Kokkos::deep_copy(u, hu);
    Kokkos::deep_copy(ex, he);
    Kokkos::deep_copy(tau, 1.0);
    SurrogateCache<double> cache;
    model.forward(out, cache, u, ex, g.coords, 1, N, buf, tau);
    auto h = to_host(out);
    return std::vector<double>(h.data(), h.data() + N);
  };
  const auto clamp = run(LocalEdge::Clamp), odd = run(LocalEdge::Odd), even = run(LocalEdge::Even);
  for (long t = 0; t < g.points(); ++t) {
    const long i = t % g.nx, k = t / (g.nx * g.ny);
    const bool edge = i == 0 || i == g.nx - 1 || k == 0 || k == g.nz - 1;
    EXPECT_EQ(even[t], clamp[t]) << "token " << t;
    if (edge)
      EXPECT_GT(std::abs(odd[t] - clamp[t]), 1e-6) << "token " << t;
    else
      EXPECT_EQ(odd[t], clamp[t]) << "token " << t;
  }
}

TEST(HeatTraining3d, RepeatedLayerUpdatesGradientsAndEquivalence) {
  // model.layer_repeat = K: each layer's update runs K times with the same weights. Gradients through it (the
  // weights' gradients sum over the K updates), with odd edges, and with the softmax stencil.
  const Grid3 g(4, 3, 5);
  const std::vector<double> lengths{2.0, 0.75, 2.5};
  for (bool softmax : {false, true}) {
    SurrogateOptions so = cond3(0, 1);  // two layers, three updates each: six compositions of random stencils
    so.layer_repeat = 3;                 // amplify the field, and the differences' round-off with it, so the
    so.local_edge = LocalEdge::Odd;      // parameters are drawn closer to their start (the identity map)
    so.local_softmax = softmax;
    double wp = 1, wi = 1;
    gradient_errors(so, g, lengths, &wp, &wi, 1e-5, 0.1);
    EXPECT_LT(wp, 1e-7) << "softmax " << softmax;
    EXPECT_LT(wi, 1e-7) << "softmax " << softmax;
  }
  // One layer repeated 3 times is three layers with the same weights: the same output, and the repeated model's
  // weight gradient is the sum of the three layers' gradients.
  const long N = g.points();
  std::mt19937_64 rng(17);
  std::normal_distribution<double> nd(0.0, 1.0);
  View1<double> u("u", N), dout("dout", N), du("du", N), tau("tau", 1);
  View2<double> ex("ex", N, 1);
  {
    auto hu = Kokkos::create_mirror_view(u);
    auto hd = Kokkos::create_mirror_view(dout);
    auto he = Kokkos::create_mirror_view(ex);
    for (long t = 0; t < N; ++t) {
      hu(t) = nd(rng);
      hd(t) = nd(rng);
      he(t, 0) = nd(rng);
    }
    Kokkos::deep_copy(u, hu);
    Kokkos::deep_copy(dout, hd);
    Kokkos::deep_copy(ex, he);
    Kokkos::deep_copy(tau, 1.0);
  }
  SurrogateOptions rep = cond3(0, 1), wide = cond3(0, 1);
  rep.kernel_layers = 1;
  rep.layer_repeat = 3;
  wide.kernel_layers = 3;
  for (SurrogateOptions* so : {&rep, &wide}) so->local_edge = LocalEdge::Odd;
  HeatSurrogate<double> mr(rep, 3, lengths), mw(wide, 3, lengths);
  ParameterBuffer<double> br, bw;
  mr.declare(br);
  mw.declare(bw);
  br.allocate();
  bw.allocate();
  mr.init(br, 3);
  auto pr = br.get_host();
  for (auto& x : pr) x += 0.3 * nd(rng);
  br.set_host(pr);
  auto pw = bw.get_host();
  for (const auto& b : bw.blocks()) {  // cond.w1, cond.b1 as they are; every cond.l.* from cond.0.*
    std::string from = b.name;
    if (from.rfind("cond.", 0) == 0 && from.size() > 6 && from[6] == '.') from[5] = '0';
    const auto& a = br.block(from);
    ASSERT_EQ(a.size, b.size) << b.name;
    std::copy(pr.begin() + a.offset, pr.begin() + a.offset + a.size, pw.begin() + b.offset);
  }
  bw.set_host(pw);
  View1<double> outr("outr", N), outw("outw", N), duw("duw", N);
  SurrogateCache<double> cr, cw;
  mr.forward(outr, cr, u, ex, g.coords, 1, N, br, tau);
  mw.forward(outw, cw, u, ex, g.coords, 1, N, bw, tau);
  br.zero_grads();
  bw.zero_grads();
  mr.backward(cr, dout, br, du);
  mw.backward(cw, dout, bw, duw);
  const auto hr = to_host(outr), hw = to_host(outw), dr = to_host(du), dw = to_host(duw);
  double scale = 0;
  for (long t = 0; t < N; ++t) scale = std::max(scale, std::abs(hw(t)));
  ASSERT_GT(scale, 0.1);
  for (long t = 0; t < N; ++t) {
    EXPECT_NEAR(hr(t), hw(t), 1e-12 * scale) << "token " << t;
    EXPECT_NEAR(dr(t), dw(t), 1e-10) << "token " << t;
  }
  const auto gr = br.get_host(Slot::Grads), gw = bw.get_host(Slot::Grads);
  for (const auto& a : br.blocks()) {
    for (long i = 0; i < a.size; ++i) {
      double sum = 0;
      if (a.name.rfind("cond.0.", 0) == 0) {
        for (int l = 0; l < 3; ++l) {
          std::string to = a.name;
          to[5] = char('0' + l);
          sum += gw[std::size_t(bw.block(to).offset + i)];
        }
      } else {
        sum = gw[std::size_t(bw.block(a.name).offset + i)];
      }
      EXPECT_NEAR(gr[std::size_t(a.offset + i)], sum, 1e-10 * std::max(1.0, std::abs(sum))) << a.name << " " << i;
    }
  }
  // Where it applies: with global attention, or without a local stencil, the option is refused.
  SurrogateOptions bad = cond3(1, 1);
  bad.layer_repeat = 2;
  EXPECT_THROW(bad.validate(), Error);
  bad = cond3(0, 1);
  bad.layer_repeat = 0;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(HeatTraining3d, SoftmaxStencilGradientsAndMaximumPrinciple) {
  // model.local_softmax: gradients through the softmax over the 27 offsets, with and without attention; and with
  // the global attention off, each layer is a convex combination of neighbours plus e, so ‖ŷ − e‖∞ ≤ ‖û‖∞ for any
  // parameters — here with e = 0, two layers, at a random point of the parameters.
  const Grid3 g(4, 3, 5);
  const std::vector<double> lengths{1.0, 0.75, 2.5};
  for (long heads : {0L, 1L}) {
    SurrogateOptions so = cond3(heads, 1);
    so.local_softmax = true;
    double wp = 1, wi = 1;
    gradient_errors(so, g, lengths, &wp, &wi);
    EXPECT_LT(wp, 1e-7) << "heads " << heads;
    EXPECT_LT(wi, 1e-7) << "heads " << heads;
  }
  SurrogateOptions so = cond3(0, 1);
  so.local_softmax = true;
  HeatSurrogate<double> model(so, 3, lengths);
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 3);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto p = buf.get_host();
  for (auto& x : p) x += 2.0 * nd(rng);
  buf.set_host(p);
  for (long l = 0; l < 2; ++l) {  // e = 0: the bias column of the mixing map and its weights
    auto wm = buf.view2("cond." + std::to_string(l) + ".wm");
    auto bm = buf.view1("cond." + std::to_string(l) + ".bm");
    auto hw = Kokkos::create_mirror_view(wm);
    auto hb = Kokkos::create_mirror_view(bm);
    Kokkos::deep_copy(hw, wm);
    Kokkos::deep_copy(hb, bm);
    for (long f = 0; f < long(hw.extent(1)); ++f) hw(1, f) = 0;
    hb(1) = 0;
    Kokkos::deep_copy(wm, hw);
    Kokkos::deep_copy(bm, hb);
  }
  const long N = g.points();
  View1<double> u("u", N), out("out", N), tau("tau", 1);
  View2<double> ex("ex", N, 1);
  auto hu = Kokkos::create_mirror_view(u);
  auto he = Kokkos::create_mirror_view(ex);
  double umax = 0;
  for (long q = 0; q < N; ++q) {
    hu(q) = nd(rng);
    he(q, 0) = nd(rng);
    umax = std::max(umax, std::abs(hu(q)));
  }
  Kokkos::deep_copy(u, hu);
  Kokkos::deep_copy(ex, he);
  SurrogateCache<double> cache;
  model.forward(out, cache, u, ex, g.coords, 1, N, buf, tau);
  auto ho = to_host(out);
  double omax = 0;
  for (long q = 0; q < N; ++q) omax = std::max(omax, std::abs(ho(q)));
  EXPECT_LE(omax, umax * (1 + 1e-12));
  EXPECT_GT(omax, 0.0);
}

TEST(HeatTraining3d, LocalStencilIsTheExplicitStencilItIsGiven) {
  // With its weights fixed to the 7-point Laplacian step (bias only), the local term on a periodic 4³ grid applies
  // exactly u + a·Σ_neighbours (u_nb − u): the 3D neighbour indexing and the wrap.
  SurrogateOptions so = cond3(0, 1);
  so.kernel_layers = 1;
  const Grid3 g(4, 4, 4);
  HeatSurrogate<double> model(so, 3, {1.0, 1.0, 1.0});
  ParameterBuffer<double> buf;
  model.declare(buf);
  buf.allocate();
  model.init(buf, 1);
  const double a = 0.1;
  auto bl = buf.view1("cond.0.bl");
  auto hb = Kokkos::create_mirror_view(bl);
  for (long s = 0; s < 27; ++s) hb(s) = 0;
  // offset index ((sz + 1)·3 + sy + 1)·3 + sx + 1
  for (long s : {4L, 10L, 12L, 14L, 16L, 22L}) hb(s) = a;
  hb(13) = -6 * a;
  Kokkos::deep_copy(bl, hb);
  const long N = 64;
  View1<double> u("u", N), out("out", N), tau("tau", 1);
  View2<double> ex("ex", N, 1);
  auto hu = Kokkos::create_mirror_view(u);
  for (long q = 0; q < N; ++q) hu(q) = std::sin(0.7 * q) + 0.1 * q;
  Kokkos::deep_copy(u, hu);
  SurrogateCache<double> cache;
  model.forward(out, cache, u, ex, g.coords, 1, N, buf, tau);
  auto ho = to_host(out);
  auto at = [&](long x, long y, long z) { return hu(((z + 4) % 4 * 4 + (y + 4) % 4) * 4 + (x + 4) % 4); };
  for (long q = 0; q < N; ++q) {
    const long x = q % 4, y = (q / 4) % 4, z = q / 16;
    const double lap = at(x + 1, y, z) + at(x - 1, y, z) + at(x, y + 1, z) + at(x, y - 1, z) + at(x, y, z + 1) +
                       at(x, y, z - 1) - 6 * at(x, y, z);
    EXPECT_NEAR(ho(q), hu(q) + a * lap, 1e-12) << q;
  }
}

TEST(HeatTraining3d, ConditionedRunBeatsTheFieldTransfersAndItsCheckpointPredictsEvalNumbers) {
  const auto dir = attnphys::test::scratch_dir("heat3d").string();
  HeatRunConfig c;
  c.data = family_3d(12);
  c.data.n_train = 96;
  c.data.n_val = 8;
  c.data.n_test = 8;
  c.model.kind = SurrogateKind::Conditioned;
  c.model.kernel_heads = 0;
  c.model.local_radius = 1;
  c.model.kernel_layers = 2;
  c.model.encoder.d_model = 16;
  c.model.harmonics = 2;
  c.train.steps = 200;
  c.train.batch = 4;
  c.train.eval_every = 50;
  c.train.checkpoint_every = 1000;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.optimizer.lr = 1e-2;
  c.train.schedule.total_steps = c.train.steps;
  c.train.schedule.warmup_steps = 20;
  c.eval.rollout_steps = 3;
  c.eval.rollout_samples = 4;
  c.eval.transfer_n = 16;
  c.eval.transfer_samples = 4;
  c.eval.speed = true;
  OptionSet s;
  HeatRunConfig t = c;
  t.declare(s);
  const HeatRunResult r = run_heat(c, s.to_toml());
  std::printf("3D 12^3: test %.3e (u(t) itself %.3e), transfer 16^3 %.3e, rollout %.3e %.3e %.3e, %.1f s\n",
              r.test.rel_l2, r.identity_rel_l2, r.transfer.rel_l2, r.rollout[0], r.rollout[1], r.rollout[2],
              r.train_seconds);
  EXPECT_GT(r.identity_rel_l2, 0.05) << "the horizon must change the field";
  EXPECT_LT(r.test.rel_l2, 0.25 * r.identity_rel_l2) << "surrogate " << r.test.rel_l2 << " vs u(t) itself "
                                                     << r.identity_rel_l2;
  EXPECT_GT(r.transfer.rel_l2, 0.0);
  EXPECT_LT(r.transfer.rel_l2, 0.5 * r.identity_rel_l2) << "16³: the same samples' κ on the finer grid";
  ASSERT_EQ(r.rollout.size(), 3u);
  for (double e : r.rollout) EXPECT_TRUE(std::isfinite(e));
  EXPECT_GT(r.speedup_vs_solver, 0.0) << "the Douglas ADI timed at equal accuracy";
  // The checkpoint: a 3D grid, and the model it loads predicts eval.h5's numbers.
  h5::Reader ck(r.checkpoint, "heat_surrogate", 1);
  EXPECT_EQ(ck.attr_doubles("/", "grid_shape"), (std::vector<double>{12, 12, 12}));
  auto m = HeatModel::load(r.checkpoint);
  ASSERT_EQ(m->grid().dim, 3);
  EXPECT_EQ(m->grid().nz, 12);
  h5::Reader ev(dir + "/eval.h5", "heat_eval", 1);
  const auto want = ev.read<double>("/fields/prediction");
  const auto input = ev.read<double>("/fields/input");
  const auto kappa = ev.read<double>("/fields/channels/kappa");
  const long P = 12 * 12 * 12, S = long(want.size()) / P;
  ASSERT_EQ(S * P, long(want.size()));
  View2<double> x("x", S, P);
  View3<double> k("k", S, P, 1);
  auto hx = Kokkos::create_mirror_view(x);
  auto hk = Kokkos::create_mirror_view(k);
  for (long i = 0; i < S * P; ++i) hx.data()[i] = input[std::size_t(i)], hk.data()[i] = kappa[std::size_t(i)];
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(k, hk);
  View2<double> coords("coords", P, 3);
  {
    auto hc = Kokkos::create_mirror_view(coords);
    for (long i = 0; i < P * 3; ++i) hc.data()[i] = m->grid().coords[std::size_t(i)];
    Kokkos::deep_copy(coords, hc);
  }
  const auto got = to_host(m->predict(x, k, coords, View1<double>()));
  for (long i = 0; i < S * P; ++i) EXPECT_NEAR(got.data()[i], want[std::size_t(i)], 1e-12) << i;
  fs::remove_all(dir);
}

TEST(HeatTraining3d, PairsFromA3dDatasetFileKeepTheirOrientationAndTrain) {
  // A file of `attnphys heat dataset` is [sample, t, x, y, z, 1] (x slowest); the pairs are [pair, (z·n + y)·n + x].
  const auto dir = attnphys::test::scratch_dir("heat3d_file").string();
  fs::create_directories(dir);
  const long n = 6, S = 10, nt = 3, P = n * n * n;
  const auto prob = heat::make_problem(3, {n, n, n}, {1.0 / n, 1.0 / n, 1.0 / n}, 1.0, "periodic");
  fd::HeatDatasetOptions o;
  o.output = dir + "/three_d.h5";
  o.samples = S;
  o.nt = nt;
  o.delta_t = 0.004;
  o.seed = 2;
  o.progress = false;
  heat::InitialConditionOptions ic;
  ic.kind = heat::IcKind::Grf;
  ic.length_scale = 0.3;
  fd::HeatSolveOptions so;
  fd::write_heat_dataset(prob, ic, so, o, "");
  HeatDataOptions d;
  d.dim = 3;
  d.n_train = 6, d.n_val = 2, d.n_test = 2;
  d.file = o.output;
  const HeatDataOptions r = resolve_heat_data(d);
  EXPECT_EQ(r.grid_nx(), n);
  EXPECT_EQ(r.grid_nz(), n);
  EXPECT_TRUE(r.solver_physics);
  EXPECT_EQ(r.box(), (std::vector<double>{1.0, 1.0, 1.0}));
  const HeatPairs p = read_heat_pairs(r, 0, S);
  ASSERT_EQ(p.points, P);
  EXPECT_EQ(p.nz, n);
  EXPECT_EQ(p.count, S * (nt - 1));
  h5::Reader f(o.output, "heat_dataset", 1);
  const auto raw = f.read<double>("data");  // [S, nt, x, y, z, 1]
  auto in = to_host(p.inputs), tg = to_host(p.targets), c = to_host(p.coords);
  for (long s = 0; s < S; ++s)
    for (long k = 0; k + 1 < nt; ++k) {
      const long row = s * (nt - 1) + k;
      for (long q = 0; q < P; ++q) {
        const long x = q % n, y = (q / n) % n, z = q / (n * n);
        auto file_at = [&](long t) { return raw[std::size_t((((s * nt + t) * n + x) * n + y) * n + z)]; };
        ASSERT_EQ(in(row, q), file_at(k)) << s << " " << q;
        ASSERT_EQ(tg(row, q), file_at(k + 1)) << s << " " << q;
        if (s == 0 && k == 0) {
          EXPECT_NEAR(c(q, 0), x / double(n), 1e-12);
          EXPECT_NEAR(c(q, 1), y / double(n), 1e-12);
          EXPECT_NEAR(c(q, 2), z / double(n), 1e-12);
        }
      }
    }
  // The file's targets are the Douglas ADI of its inputs (float32 in the file).
  const HeatPairs one = read_heat_pairs(r, 0, 1);
  View2<double> adv("adv", one.count, P);
  Kokkos::deep_copy(adv, one.inputs);
  advance_reference(r, adv, n, 1.0, 64);
  const double identity = mean_rel_l2(one.inputs, one.targets), err = mean_rel_l2(adv, one.targets);
  EXPECT_GT(identity, 0.05);
  EXPECT_LT(err, 2e-2 * identity) << "identity " << identity;
  // A short run trains from the file and evaluates with its physics (rollout against the solver, ADI timing).
  HeatRunConfig cfg;
  cfg.data = d;
  cfg.model.kind = SurrogateKind::Kernel;
  cfg.model.kernel_heads = 2;
  cfg.model.kernel_dk = 4;
  cfg.model.harmonics = 2;
  cfg.train.steps = 30;
  cfg.train.batch = 4;
  cfg.train.eval_every = 10;
  cfg.train.schedule.total_steps = 30;
  cfg.train.schedule.warmup_steps = 3;
  cfg.train.out_dir = dir + "/run";
  cfg.train.progress = false;
  cfg.eval.rollout_steps = 2;
  cfg.eval.rollout_samples = 2;
  cfg.eval.transfer_n = 0;
  OptionSet set;
  HeatRunConfig t = cfg;
  t.declare(set);
  const HeatRunResult res = run_heat(cfg, set.to_toml());
  EXPECT_TRUE(res.solver_physics);
  EXPECT_LT(res.test.rel_l2, res.identity_rel_l2);
  EXPECT_EQ(res.rollout.size(), 2u);
  fs::remove_all(dir);
}
