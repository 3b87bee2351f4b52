// libFuzzer target: the TOML config loader and the --set overrides (core/src/options.cpp).
//
// Input: a TOML document, optionally followed by a line "%%" and one override "section.key=value" per line, applied
// to an OptionSet that declares one option of every kind (numbers with ranges, integers, bools, strings with and
// without choices, an enum, lists of numbers and of strings), under the section names of the real configurations.
// Loading may fail only with attnphys::Error (anything else, a crash or a sanitizer report is a finding). When it
// succeeds, the configuration written back (OptionSet::to_toml, what checkpoints store) must load again into a fresh
// set and give the same values, and to_json must be writable.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/core/options.hpp"

using attnphys::OptionSet;
using attnphys::Range;

namespace fuzz {
enum class Move { Auto, Local, Exchange, Exact };
}  // namespace fuzz
namespace attnphys {
template <>
struct EnumNames<fuzz::Move> {
  static constexpr EnumName<fuzz::Move> values[] = {
      {fuzz::Move::Auto, "auto"}, {fuzz::Move::Local, "local"}, {fuzz::Move::Exchange, "exchange"},
      {fuzz::Move::Exact, "exact"}};
};
}  // namespace attnphys

namespace {

struct Values {
  double lr = 3e-2, kappa = 1.0, any = -2.5;
  long steps = 3000, seed = 0;
  int n = 32;
  bool progress = true;
  std::string out_dir = "runs/heat2d", kind = "conditioned";
  std::vector<double> horizons{1.0}, table{0.0, 0.5};
  std::vector<std::string> channels{"kappa"};
  fuzz::Move move = fuzz::Move::Auto;

  void declare(OptionSet& s) {
    s.add("optimizer.lr", &lr, "learning rate", Range::positive());
    s.add("problem.kappa", &kappa, "diffusivity", Range::non_negative());
    s.add("model.bias", &any, "any number");
    s.add("train.steps", &steps, "steps", Range::at_least(1));
    s.add("train.seed", &seed, "seed", Range::closed(-5, 1e12));
    s.add("data.n", &n, "grid", Range::closed(1, 4096));
    s.add("train.progress", &progress, "progress bar");
    s.add("train.out_dir", &out_dir, "output directory");
    s.add("model.kind", &kind, "model kind", {"transformer", "kernel", "conditioned"});
    s.add("data.horizons", &horizons, "horizons", Range::positive());
    s.add("nonlinear.table_u", &table, "table");
    s.add("data.channels", &channels, "channels");
    s.add("sampler.move", &move, "Metropolis move");
  }

  bool same(const Values& o) const {
    auto eq = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
    auto eqv = [&](const std::vector<double>& a, const std::vector<double>& b) {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!eq(a[i], b[i])) return false;
      return true;
    };
    return eq(lr, o.lr) && eq(kappa, o.kappa) && eq(any, o.any) && steps == o.steps && seed == o.seed && n == o.n &&
           progress == o.progress && out_dir == o.out_dir && kind == o.kind && eqv(horizons, o.horizons) &&
           eqv(table, o.table) && channels == o.channels && move == o.move;
  }
};

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_options: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string toml = input, rest;
  const auto sep = input.find("%%\n");
  if (sep != std::string::npos && (sep == 0 || input[sep - 1] == '\n')) {
    toml = input.substr(0, sep);
    rest = input.substr(sep + 3);
  }
  std::vector<std::string> overrides;
  for (std::size_t pos = 0; pos < rest.size();) {
    auto nl = rest.find('\n', pos);
    if (nl == std::string::npos) nl = rest.size();
    if (nl > pos) overrides.push_back(rest.substr(pos, nl - pos));
    pos = nl + 1;
  }

  Values v;
  OptionSet set;
  v.declare(set);
  try {
    set.load_string(toml, "fuzz.toml");
    set.set_all(overrides);
  } catch (const attnphys::Error&) {
    return 0;  // refused with a message: the expected outcome for most inputs
  }
  const std::string written = set.to_toml();
  Values back;
  OptionSet again;
  back.declare(again);
  try {
    again.load_string(written, "to_toml");
  } catch (const attnphys::Error& e) {
    finding("the configuration written by to_toml() does not load again", std::string(e.what()) + "\n" + written);
  }
  if (!v.same(back)) finding("to_toml() and load_string() do not round-trip", written);
  (void)set.to_json().dump();
  return 0;
}
