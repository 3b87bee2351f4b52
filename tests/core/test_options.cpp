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
  EXPECT_EQ(f.opt.kind, OptimizerKind::Adam);
  EXPECT_DOUBLE_EQ(f.opt.lr, 3e-4);
  EXPECT_EQ(f.steps, 50);
  ASSERT_EQ(f.times.size(), 2u);
  EXPECT_EQ(f.times[1], 1.0);
  f.set.set("optimizer.lr=0.01");
  f.set.set("optimizer.kind=sgd");  // bare word for a string option
  f.set.set("train.steps=1e3");     // integral float is accepted for an integer
  EXPECT_DOUBLE_EQ(f.opt.lr, 0.01);
  EXPECT_EQ(f.opt.kind, OptimizerKind::Sgd);
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

// Enumerated options: the names are declared once (EnumNames), parsed where the option is read, stored as the enum
// and written back by name.
namespace test_enum {
enum class Colour { Red, Green, Blue };
}  // namespace test_enum
namespace attnphys {
template <>
struct EnumNames<test_enum::Colour> {
  static constexpr EnumName<test_enum::Colour> values[] = {
      {test_enum::Colour::Red, "red"}, {test_enum::Colour::Green, "green"}, {test_enum::Colour::Blue, "blue"}};
};
}  // namespace attnphys

TEST(Options, EnumOptionsParseOnceAndWriteTheirNames) {
  using test_enum::Colour;
  EXPECT_STREQ(enum_name(Colour::Green), "green");
  EXPECT_EQ(enum_list<Colour>(" | "), "red | green | blue");
  EXPECT_EQ(parse_enum<Colour>("blue", "paint.colour"), Colour::Blue);
  EXPECT_EQ(error_of([] { parse_enum<Colour>("teal", "paint.colour"); }),
            "paint.colour = 'teal': expected one of red, green, blue");

  Colour c = Colour::Red;
  OptionSet set;
  set.add("paint.colour", &c, "the colour");
  const OptionInfo i = set.info("paint.colour");
  EXPECT_EQ(i.type, "choice");
  EXPECT_EQ(i.choices, (std::vector<std::string>{"red", "green", "blue"}));
  set.load_string("[paint]\ncolour = \"blue\"\n");
  EXPECT_EQ(c, Colour::Blue);
  EXPECT_TRUE(set.was_set("paint.colour"));
  set.set("paint.colour=green");  // a bare word
  EXPECT_EQ(c, Colour::Green);
  EXPECT_NE(set.to_toml().find("colour = \"green\""), std::string::npos) << set.to_toml();
  EXPECT_EQ(set.to_json().dump(), "{\"paint.colour\": \"green\"}");
  const std::string bad = error_of([&] { set.set("paint.colour=gren"); });
  EXPECT_NE(bad.find("'gren' is not one of: red, green, blue; did you mean 'green'?"), std::string::npos) << bad;
  EXPECT_EQ(c, Colour::Green);  // unchanged by the refusal
  set.set_text("paint.colour", "red", "--colour");
  EXPECT_EQ(c, Colour::Red);
  EXPECT_NE(error_of([&] { set.set_text("paint.colour", "x", "--colour"); }).find("(from --colour)"),
            std::string::npos);
  // A TOML round trip reads the names back.
  Colour d = Colour::Blue;
  OptionSet again;
  again.add("paint.colour", &d, "the colour");
  again.load_string(set.to_toml());
  EXPECT_EQ(d, Colour::Red);
}

TEST(Options, SetTextTakesFlagTextAndChecksItLikeSet) {
  long n = 1;
  std::string path;
  double x = 0;
  OptionSet set;
  set.add("model.n", &n, "sites", Range::at_least(2));
  set.add("run.path", &path, "a file");
  set.add("model.x", &x, "a number");
  set.set_text("model.n", "12", "--n");
  set.set_text("run.path", "a \"quoted\" name=1.h5", "--path");  // taken as it is, not read as TOML
  set.set_text("model.x", "1e-3", "--x");
  EXPECT_EQ(n, 12);
  EXPECT_EQ(path, "a \"quoted\" name=1.h5");
  EXPECT_DOUBLE_EQ(x, 1e-3);
  EXPECT_TRUE(set.was_set("model.n") && set.was_set("run.path"));
  const std::string range = error_of([&] { set.set_text("model.n", "1", "--n"); });
  EXPECT_NE(range.find("option 'model.n' (from --n) = 1 is out of range"), std::string::npos) << range;
  EXPECT_NE(error_of([&] { set.set_text("model.n", "ten", "--n"); }).find("expects an integer"), std::string::npos);
  EXPECT_EQ(set.info("model.n").type, "integer");
  EXPECT_NE(error_of([&] { set.info("model.m"); }).find("did you mean 'model.n'"), std::string::npos);
}
