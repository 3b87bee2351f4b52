#pragma once
// Flags every subcommand shares: --config FILE, --set section.key=value (repeatable), --json.
#include <CLI/CLI.hpp>
#include <deque>
#include <iostream>
#include <memory>
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

// Flags that are other names for declared options (--n for model.n). Each keeps the text it was given; resolve()
// reads the config file, then the --set overrides, then these flags, the later winning, all through the one
// OptionSet, so a flag is checked like --set and counts as set for the defaults that depend on what was given. A
// flag's help and choices are the option's declaration.
//
//   auto f = std::make_shared<OptionFlags>(declared);     // declared: an OptionSet with the command's options
//   f->add(sub, "--n", "model.n");
//   ... in the callback: OptionSet set; cfg.declare(set); f->resolve(set, *common); cfg.apply_defaults(set);
class OptionFlags {
 public:
  // The flags of a command whose options Config::declare(OptionSet&) declares (read for help and choices).
  template <class Config>
  static std::shared_ptr<OptionFlags> for_config() {
    auto f = std::make_shared<OptionFlags>();
    auto cfg = std::make_shared<Config>();
    cfg->declare(f->declared_);
    f->scratch_ = cfg;  // the declarations point into it
    return f;
  }
  CLI::Option* add(CLI::App* sub, const std::string& flag, const std::string& key) {
    const OptionInfo i = declared_.info(key);
    bindings_.push_back({flag, key, {}, nullptr});
    auto& b = bindings_.back();
    std::string help = i.help + " (" + key + ")";
    b.option = sub->add_option(flag, b.text, help);
    if (!i.choices.empty()) b.option->check(CLI::IsMember(i.choices));
    if (i.type == "integer") b.option->type_name("INT");
    if (i.type == "number") b.option->type_name("FLOAT");
    if (i.type == "bool") b.option->type_name("BOOL");
    return b.option;
  }
  // --print-config: print the resolved configuration as TOML and run nothing (print_config() says whether).
  void add_print_config(CLI::App* sub) {
    sub->add_flag("--print-config", print_config_,
                  "print the configuration that the file, --set and the flags resolve to (TOML) and exit");
  }
  bool print_config() const { return print_config_; }
  // The config file, then --set, then the flags given.
  void resolve(OptionSet& set, const CommonFlags& common) const {
    common.apply(set);
    for (const auto& b : bindings_)
      if (b.option->count() > 0) set.set_text(b.key, b.text, b.flag);
  }

 private:
  struct Binding {
    std::string flag, key, text;
    CLI::Option* option;
  };
  std::deque<Binding> bindings_;  // stable addresses: CLI11 writes into text
  OptionSet declared_;
  std::shared_ptr<void> scratch_;
  bool print_config_ = false;
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
