// HeatModel (heat_fit.hpp): the object behind attnphys.operator. Trained on the pairs run_heat trains on, it takes
// the same steps (bit-identical parameters); a run_heat checkpoint loads and predicts what the evaluation wrote;
// save -> load round-trips exactly; the errors say what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/solvers/training/heat_fit.hpp"
#include "scratch.hpp"

using namespace attnphys;
using namespace attnphys::training;
namespace fs = std::filesystem;

namespace {

std::string run_dir(const std::string& name) {
  auto d = attnphys::test::scratch_dir("heat_fit/" + name);
  fs::create_directories(d);
  return d.string();
}

HeatRunConfig tiny(const std::string& dir, const std::string& kind) {
  HeatRunConfig c;
  c.data.dim = 1;
  c.data.n = 16;
  c.data.n_train = 32;
  c.data.n_val = 8;
  c.data.n_test = 8;
  c.data.length_scale = 0.15;
  c.model.kind = parse_enum<SurrogateKind>(kind, "model.kind");
  c.model.kernel_heads = 2;
  c.model.kernel_dk = 6;
  c.model.encoder.d_model = 16;
  c.model.encoder.n_heads = 2;
  c.model.encoder.d_ff = 32;
  c.model.harmonics = 3;
  c.train.steps = 20;
  c.train.batch = 8;
  c.train.eval_every = 10;
  c.train.out_dir = dir;
  c.train.progress = false;
  c.train.schedule.kind = ScheduleKind::WarmupCosine;
  c.train.schedule.warmup_steps = 2;
  c.train.schedule.total_steps = 20;
  c.eval.rollout_steps = 0;
  c.eval.transfer_n = 0;
  c.eval.speed = false;
  return c;
}

std::vector<double> host(const View2<double>& v) {
  auto h = to_host(v);
  return std::vector<double>(h.data(), h.data() + h.size());
}

}  // namespace

TEST(HeatModel, TrainsLikeRunHeatAndLoadsItsCheckpoint) {
  for (const std::string kind : {"kernel", "transformer"}) {
    SCOPED_TRACE(kind);
    const std::string dir = run_dir("cli_" + kind);
    HeatRunConfig cfg = tiny(dir, kind);
    OptionSet set;
    cfg.declare(set);
    run_heat(cfg, set.to_toml(), Comm::self());  // the configuration is stored as the CLI stores it
    const std::string ckpt = dir + "/checkpoint.h5";
    h5::Reader r(ckpt, "heat_surrogate", 1);
    EXPECT_EQ(r.attr_long("/", "dim"), 1);
    EXPECT_EQ(r.attr_string("/", "bc"), "periodic");
    EXPECT_EQ(r.attr_doubles("/", "grid_shape"), (std::vector<double>{1, 16}));
    const auto coords = r.read<double>("/grid/coords");
    ASSERT_EQ(coords.size(), 16u);
    EXPECT_DOUBLE_EQ(coords[3], 3.0 / 16);

    // The same pairs, options and seeds through HeatModel::fit: the same final parameters, bit for bit.
    const HeatRunConfig rc = cfg.resolved();
    const HeatPairs train = make_heat_pairs(rc.data, 0, 32, 16), val = make_heat_pairs(rc.data, 32, 8, 16);
    HeatModel mine(rc.model, 1, {1.0}, heat::BcType::Periodic, {}, cfg.train.seed);
    long calls = 0;
    FitHooks hooks;
    hooks.on_step = [&](const FitStep& s) { EXPECT_EQ(s.step, ++calls); };
    const FitResult fr = mine.fit(train, val, cfg.train, hooks, false);
    EXPECT_EQ(calls, 20);
    EXPECT_EQ(fr.steps_done, 20);
    EXPECT_EQ(mine.parameters().get_host(), r.read<float>("/model/params"));
    EXPECT_EQ(mine.state().best_val, r.attr_double("/", "best_val_rel_l2"));
    EXPECT_EQ(mine.normalisation().mean, r.attr_double("/", "norm_mean"));

    // The checkpoint predicts the evaluation's fields (eval.h5, the first 4 test samples) exactly.
    auto loaded = HeatModel::load(ckpt);
    EXPECT_EQ(loaded->grid().nx, 16);
    EXPECT_EQ(enum_name(loaded->options().kind), kind);
    h5::Reader e(dir + "/eval.h5", "heat_eval", 1);
    const auto in = e.read<double>("/fields/input"), ref = e.read<double>("/fields/prediction");
    View2<double> x("x", 4, 16), c("c", 16, 1);
    Kokkos::deep_copy(x, HostView2<const double>(in.data(), 4, 16));
    Kokkos::deep_copy(c, HostView2<const double>(loaded->grid().coords.data(), 16, 1));
    const auto p = host(loaded->predict(x, View3<double>("e", 4, 16, 0), c, View1<double>()));
    // To float32 rounding, not bit for bit: the evaluation predicts the whole test split in one batch, and OpenBLAS'
    // AVX2 (Haswell, Zen) sgemm kernels round a row differently with the batch size (measured here: up to ~1e-7
    // of the field's scale; bit-identical under its AVX-512 kernels).
    ASSERT_EQ(p.size(), ref.size());
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      scale = std::max(scale, std::abs(ref[i]));
      worst = std::max(worst, std::abs(p[i] - ref[i]));
    }
    std::printf("[ %s: checkpoint vs evaluation, max |difference| %.3g of max |field| %.3g ]\n", kind.c_str(), worst,
                scale);
    EXPECT_LE(worst, 2e-6 * scale);
    EXPECT_GT(scale, 0.05);

    // save -> load -> the same predictions.
    loaded->save(dir + "/again.h5");
    auto back = HeatModel::load(dir + "/again.h5");
    EXPECT_EQ(host(back->predict(x, View3<double>("e", 4, 16, 0), c, View1<double>())), p);
    EXPECT_EQ(back->n_parameters(), loaded->n_parameters());
  }
}

TEST(HeatModel, RefusesWhatDoesNotFit) {
  SurrogateOptions o;
  o.kind = SurrogateKind::Transformer;
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { HeatModel(o, 4, {1, 1, 1, 1}, heat::BcType::Periodic, {}, 0); }).find("dim must be 1, 2 or 3"),
            std::string::npos);
  EXPECT_NE(message([&] { HeatModel(o, 2, {1.0}, heat::BcType::Periodic, {}, 0); }).find("1 box length(s) for a 2D model"),
            std::string::npos);
  EXPECT_NE(message([&] { HeatModel(o, 1, {1.0}, heat::parse_bc_type("wall"), {}, 0); }).find("unknown boundary type 'wall'"),
            std::string::npos);
  EXPECT_NE(message([&] { HeatModel(o, 1, {1.0}, heat::BcType::Periodic, {"kappa", "kappa"}, 0); }).find("listed twice"),
            std::string::npos);
  HeatModel m(o, 1, {1.0}, heat::BcType::Periodic, {"kappa"}, 0);
  EXPECT_FALSE(m.trained());
  EXPECT_NE(message([&] { m.save(run_dir("refuse") + "/x.h5"); }).find("has not been trained"), std::string::npos);
  View2<double> x("x", 2, 8), c("c", 8, 1);
  EXPECT_NE(message([&] { m.predict(x, View3<double>("e", 2, 8, 1), c, View1<double>()); }).find("not been trained"),
            std::string::npos);
  // Pairs without the model's channel.
  HeatDataOptions d;
  d.dim = 1;
  d.n = 8;
  const HeatPairs p = generate_heat_pairs(d, 0, 4, 8);
  EXPECT_NE(message([&] { m.fit(p, HeatPairs{}, TrainOptions{}, {}); }).find("carry 0 extra channel(s), the model "
                                                                              "takes 1"),
            std::string::npos);
}
