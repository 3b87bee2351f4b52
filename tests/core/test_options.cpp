// Configuration: TOML files and --set overrides, with clear refusals of bad keys, types and ranges.
#include <gtest/gtest.h>

#include <fstream>

#include "attnphys/core/optim.hpp"
#include "attnphys/core/options.hpp"

using namespace attnphys;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
struct Fixture {
  OptimizerOptions opt;
  ScheduleOptions sched;
  long steps = 100;
  std::vector<double> times{0.1};
  OptionSet set;
  Fixture() {
    opt.declare(set);
    sched.declare(set);
    set.add("train.steps", &steps, "steps", Range::at_least(1));
    set.add("data.times", &times, "times", Range::non_negative());
  }
};
}  // namespace

TEST(Options, TomlAndOverrides) {
  Fixture f;
  f.set.load_string("[optimizer]\nkind = \"adam\"\nlr = 3e-4\n[train]\nsteps = 50\n[data]\ntimes = [0.5, 1]\n");
  EXPECT_EQ(f.opt.kind, "adam");
  EXPECT_DOUBLE_EQ(f.opt.lr, 3e-4);
  EXPECT_EQ(f.steps, 50);
  ASSERT_EQ(f.times.size(), 2u);
  EXPECT_EQ(f.times[1], 1.0);
  f.set.set("optimizer.lr=0.01");
  f.set.set("optimizer.kind=sgd");  // bare word for a string option
  f.set.set("train.steps=1e3");     // integral float is accepted for an integer
  EXPECT_DOUBLE_EQ(f.opt.lr, 0.01);
  EXPECT_EQ(f.opt.kind, "sgd");
  EXPECT_EQ(f.steps, 1000);
}

TEST(Options, UnknownKeySuggestsNearest) {
  Fixture f;
  auto e = error_of([&] { f.set.set("optimizer.lrr=1"); });
  EXPECT_NE(e.find("unknown option 'optimizer.lrr'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'optimizer.lr'"), std::string::npos) << e;
  e = error_of([&] { f.set.load_string("[optimiser]\nweight_decay = 0.1\n", "run.toml"); });
  EXPECT_NE(e.find("did you mean 'optimizer.weight_decay'"), std::string::npos) << e;
  EXPECT_NE(e.find("run.toml"), std::string::npos) << e;
}

TEST(Options, WrongTypeAndRangeAreRefused) {
  Fixture f;
  auto e = error_of([&] { f.set.set("optimizer.lr=fast"); });
  EXPECT_NE(e.find("expects a number"), std::string::npos) << e;
  e = error_of([&] { f.set.set("optimizer.lr=-1"); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = error_of([&] { f.set.set("train.steps=2.5"); });
  EXPECT_NE(e.find("expects an integer"), std::string::npos) << e;
  e = error_of([&] { f.set.set("train.steps=0"); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = error_of([&] { f.set.set("optimizer.kind=adamm"); });
  EXPECT_NE(e.find("did you mean 'adam'"), std::string::npos) << e;
  e = error_of([&] { f.set.set("data.times=[0.1, -2]"); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = error_of([&] { f.set.set("optimizer.lr=nan"); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = error_of([&] { f.set.set("no_equals_sign"); });
  EXPECT_NE(e.find("section.key=value"), std::string::npos) << e;
  e = error_of([&] { f.set.load_string("[optimizer\nlr = 1", "broken.toml"); });
  EXPECT_NE(e.find("cannot parse broken.toml"), std::string::npos) << e;
  e = error_of([&] { f.set.load_file("/nonexistent/x.toml"); });
  EXPECT_NE(e.find("cannot open config file"), std::string::npos) << e;
}

TEST(Options, TomlRoundTrip) {
  Fixture f;
  f.set.set("optimizer.lr=0.125");
  f.set.set("data.times=[0.25, 2]");
  const std::string text = f.set.to_toml();
  Fixture g;
  g.set.load_string(text);
  EXPECT_EQ(g.opt.lr, 0.125);
  EXPECT_EQ(g.times, f.times);
  EXPECT_EQ(g.set.to_toml(), text);
}

TEST(Options, EditDistance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

TEST(Options, WasSetTracksFilesAndOverrides) {
  Fixture f;
  EXPECT_FALSE(f.set.was_set("optimizer.lr"));
  f.set.load_string("[schedule]\ntotal_steps = 7\n");
  f.set.set("optimizer.lr=0.5");
  EXPECT_TRUE(f.set.was_set("schedule.total_steps"));
  EXPECT_TRUE(f.set.was_set("optimizer.lr"));
  EXPECT_FALSE(f.set.was_set("train.steps"));
}
