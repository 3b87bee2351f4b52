#pragma once
// The model flags shared by `attnphys ed`, `dmrg` and `vmc`: --model --n --bc --J --h --delta --j2.
#include <CLI/CLI.hpp>

#include "attnphys/physics/spin/chain_model.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

// As other names for the options model.model, model.n, ... (OptionFlags: applied after the file and --set).
inline void add_chain_flags(CLI::App* sub, OptionFlags& f) {
  f.add(sub, "--model", "model.model");
  f.add(sub, "--n", "model.n");
  f.add(sub, "--bc", "model.bc");
  f.add(sub, "--J", "model.J");
  f.add(sub, "--h", "model.h");
  f.add(sub, "--delta", "model.delta");
  f.add(sub, "--j2", "model.j2");
}

}  // namespace attnphys::cli
