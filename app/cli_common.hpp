#pragma once
// Flags every subcommand shares: --config FILE, --set section.key=value (repeatable), --json.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/json.hpp"
#include "attnphys/core/options.hpp"

namespace attnphys::cli {

struct CommonFlags {
  std::string config;
  std::vector<std::string> sets;
  bool json = false;

  void add_to(CLI::App* sub) {
    sub->add_option("--config", config, "TOML configuration file")->check(CLI::ExistingFile);
    sub->add_option("--set", sets, "override one option: section.key=value (repeatable)")->take_all();
    sub->add_flag("--json", json, "print one JSON summary as the last line of stdout");
  }
  // Config file first, then overrides in the order given.
  void apply(OptionSet& options) const {
    if (!config.empty()) options.load_file(config);
    options.set_all(sets);
  }
};

// Prints the JSON summary as the last line of stdout, from rank 0 only.
inline void emit_json(const Json& j) {
  if (!Comm::world().is_root()) return;
  std::cout << j.dump() << std::endl;
}

// Each cmd_*.cpp registers its subcommand with a static Registrar, so adding a subcommand is adding a file:
//   static attnphys::cli::Registrar reg("heat", register_heat);
// main() calls the registered functions in name order.
using RegisterFn = void (*)(CLI::App&);
std::vector<std::pair<std::string, RegisterFn>>& registry();
struct Registrar {
  Registrar(const std::string& name, RegisterFn fn) { registry().emplace_back(name, fn); }
};

}  // namespace attnphys::cli
