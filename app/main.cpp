// attnphys: self-attention for physics — learned heat-equation operators and transformer wavefunctions.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <new>
#include <string>

#include "attnphys/core/alloc_error.hpp"
#include "attnphys/core/error.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/core/comm.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {
std::vector<std::pair<std::string, RegisterFn>>& registry() {
  static std::vector<std::pair<std::string, RegisterFn>> r;
  return r;
}
}  // namespace attnphys::cli

int main(int argc, char** argv) {
  // Kokkos takes its own --kokkos-* flags out of argv before CLI11 sees them; it would also answer --help with
  // its own page, so a help request initialises Kokkos without the arguments.
  bool help = false;
  for (int i = 1; i < argc; ++i) help = help || std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h";
  int kargc = help ? 1 : argc;
  attnphys::Runtime runtime(kargc, argv);
  if (!help) argc = kargc;
  int code = 0;
  {
    CLI::App app{"attnphys: self-attention for physics (learned heat operators, transformer wavefunctions)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("attnphys ") + attnphys::runtime_info().version);
    auto subcommands = attnphys::cli::registry();
    std::sort(subcommands.begin(), subcommands.end());
    for (const auto& [name, fn] : subcommands) fn(app);
    // A BLAS running generic fallback kernels on a CPU that could do far better: say so once, with the fix
    // (`attnphys info` prints it itself).
    if (!help && argc > 1 && std::string(argv[1]) != "info" && attnphys::Comm::world().is_root()) {
      const std::string w = attnphys::runtime_info().blas_warning;
      if (!w.empty()) std::cerr << "attnphys: warning: " << w << std::endl;
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      code = app.exit(e);
    } catch (const attnphys::Error& e) {
      std::cerr << "attnphys: error: " << e.what() << std::endl;
      code = 2;
    } catch (const std::bad_alloc& e) {
      // What the resource checks did not foresee (they refuse the known large buffers before a job starts).
      std::cerr << "attnphys: error: not enough memory for this request (" << e.what()
                << "): use smaller sizes (grid, batch, samples, chi, sites)" << std::endl;
      code = 2;
    } catch (const std::runtime_error& e) {
      if (attnphys::is_kokkos_allocation_failure(e.what())) {  // Kokkos' own report of a failed allocation
        std::cerr << "attnphys: error: not enough memory for this request (" << e.what()
                  << "): use smaller sizes (grid, batch, samples, chi, sites)" << std::endl;
        code = 2;
      } else {
        std::cerr << "attnphys: internal error: " << e.what() << std::endl;
        code = 3;
      }
    } catch (const std::exception& e) {
      std::cerr << "attnphys: internal error: " << e.what() << std::endl;
      code = 3;
    }
  }
  return code;
}
