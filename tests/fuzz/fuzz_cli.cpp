// libFuzzer target: the command-line argument parser of the attnphys program (app/: CLI11 with every subcommand's
// flags, as main() builds it from the registered subcommands), without running any job: the main app's
// parse-complete callback, which CLI11 runs after every value is converted and checked and before any subcommand's
// callback (the job), ends the parse with a sentinel exception. (Replacing the subcommands' callbacks instead would
// destroy the state their flags are bound to.)
//
// Input: the arguments after the program name, separated by NUL bytes (at most 64). The parse must end in one of
// two ways: success (exactly one top-level subcommand selected, as main() requires) or a CLI::ParseError, which
// main() turns into its usage message and exit code (app.exit is called here too, so help, version and error
// messages are formatted). Any other exception, a crash, a hang or a sanitizer report is a finding.
// The --set values and the configuration file are checked by the option loader, which fuzz_options fuzzes.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"

namespace attnphys::cli {
// main.cpp's registry (main.cpp itself is not linked: it starts Kokkos and runs the job).
std::vector<std::pair<std::string, RegisterFn>>& registry() {
  static std::vector<std::pair<std::string, RegisterFn>> r;
  return r;
}
}  // namespace attnphys::cli

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_cli: %s\n%s\n", what, detail.c_str());
  std::abort();
}

struct DryRun {
  std::size_t selected = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  args.emplace_back("attnphys");
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (size > 0) args.push_back(cur);
  if (args.size() > 65) return 0;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  CLI::App app{"attnphys (fuzz_cli)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("attnphys fuzz"));
  auto subcommands = attnphys::cli::registry();
  std::sort(subcommands.begin(), subcommands.end());
  for (const auto& [name, fn] : subcommands) fn(app);
  app.parse_complete_callback([&app] { throw DryRun{app.get_subcommands().size()}; });

  std::ostringstream out, err;
  try {
    app.parse(static_cast<int>(args.size()), argv.data());
    finding("the parse completed without reaching the parse-complete callback", "");
  } catch (const DryRun& d) {
    if (d.selected != 1) finding("a parse without exactly one subcommand succeeded", std::to_string(d.selected));
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    if (e.get_exit_code() != 0 && code == 0) finding("a parse error exited with code 0", e.what());
  } catch (const std::exception& e) {
    finding("an exception other than CLI::ParseError escaped the parser", e.what());
  }
  return 0;
}
