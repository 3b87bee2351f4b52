// attnphys: self-attention for physics — learned heat-equation operators and transformer wavefunctions.
#include <CLI/CLI.hpp>
#include <iostream>

#include "attnphys/core/error.hpp"
#include "attnphys/core/runtime.hpp"
#include "cli_common.hpp"

int main(int argc, char** argv) {
  // Kokkos takes its own --kokkos-* flags out of argv before CLI11 sees them.
  attnphys::Runtime runtime(argc, argv);
  int code = 0;
  {
    CLI::App app{"attnphys: self-attention for physics (learned heat operators, transformer wavefunctions)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("attnphys ") + attnphys::runtime_info().version);
    attnphys::cli::register_info(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      code = app.exit(e);
    } catch (const attnphys::Error& e) {
      std::cerr << "attnphys: error: " << e.what() << std::endl;
      code = 2;
    } catch (const std::exception& e) {
      std::cerr << "attnphys: internal error: " << e.what() << std::endl;
      code = 3;
    }
  }
  return code;
}
