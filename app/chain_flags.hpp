#pragma once
// The model flags shared by `attnphys ed`, `dmrg` and `vmc`: --model --n --bc --J --h --delta --j2.
#include <CLI/CLI.hpp>

#include "attnphys/physics/spin/chain_model.hpp"

namespace attnphys::cli {

inline void add_chain_flags(CLI::App* sub, spin::ChainModel& m) {
  sub->add_option("--model", m.model, "tfim | xxz | heisenberg | j1j2")
      ->check(CLI::IsMember({"tfim", "xxz", "heisenberg", "j1j2"}));
  sub->add_option("--n", m.n, "number of sites");
  sub->add_option("--bc", m.bc, "open | periodic")->check(CLI::IsMember({"open", "periodic"}));
  sub->add_option("--J", m.J, "nearest-neighbour coupling (J1 for j1j2)");
  sub->add_option("--h", m.h, "transverse field (tfim)");
  sub->add_option("--delta", m.delta, "anisotropy (xxz)");
  sub->add_option("--j2", m.j2, "next-nearest-neighbour coupling (j1j2)");
}

}  // namespace attnphys::cli
