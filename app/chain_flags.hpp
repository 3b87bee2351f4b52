#pragma once
// The model flags shared by `attnphys ed`, `dmrg` and `vmc`: --model --n --bc --J --h --delta --j2.
#include <CLI/CLI.hpp>

#include "attnphys/physics/spin/chain_model.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

// As other names for the options model.model, model.n, ... (applied after the file and --set).
inline void add_chain_flags(CLI::App* sub, OptionFlags& f) {
  f.add(sub, "--model", "model.model");
  f.add(sub, "--n", "model.n");
  f.add(sub, "--bc", "model.bc");
  f.add(sub, "--J", "model.J");
  f.add(sub, "--h", "model.h");
  f.add(sub, "--delta", "model.delta");
  f.add(sub, "--j2", "model.j2");
}

// Into a ChainModel of the command's own (the caller decides what each given flag overrides).
inline void add_chain_flags(CLI::App* sub, spin::ChainModel& m) {
  sub->add_option_function<std::string>(
         "--model", [&m](const std::string& s) { m.model = spin::parse_model_kind(s); }, "spin-chain model")
      ->check(CLI::IsMember(enum_names<spin::ModelKind>()));
  sub->add_option("--n", m.n, "number of sites");
  sub->add_option_function<std::string>(
         "--bc", [&m](const std::string& s) { m.bc = spin::parse_boundary(s); }, "boundary condition")
      ->check(CLI::IsMember(enum_names<spin::Boundary>()));
  sub->add_option("--J", m.J, "nearest-neighbour coupling (J1 for j1j2)");
  sub->add_option("--h", m.h, "transverse field (tfim)");
  sub->add_option("--delta", m.delta, "anisotropy (xxz)");
  sub->add_option("--j2", m.j2, "next-nearest-neighbour coupling (j1j2)");
}

}  // namespace attnphys::cli
