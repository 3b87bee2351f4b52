#include "attnphys/physics/spin/chain_model.hpp"

#include <cmath>
#include <sstream>

namespace attnphys::spin {

void ChainModel::validate() const {
  require(model == "tfim" || model == "xxz" || model == "heisenberg" || model == "j1j2", "unknown model '", model,
          "': use tfim, xxz, heisenberg or j1j2");
  require(bc == "open" || bc == "periodic", "unknown boundary condition '", bc, "': use open or periodic");
  require(n >= 2, "a chain needs at least 2 sites, got n = ", n);
  require(!(model == "j1j2" && periodic() && n < 5), "a periodic J1-J2 chain needs n >= 5, got ", n);
  require(std::isfinite(J) && std::isfinite(h) && std::isfinite(delta) && std::isfinite(j2),
          "model couplings must be finite numbers");
}

std::string ChainModel::describe() const {
  std::ostringstream os;
  os << model << " n=" << n << " " << bc << " J=" << J;
  if (model == "tfim") os << " h=" << h;
  if (model == "xxz") os << " delta=" << delta;
  if (model == "j1j2") os << " j2=" << j2;
  return os.str();
}

void ChainModel::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".model", &model, "spin-chain model", {"tfim", "xxz", "heisenberg", "j1j2"});
  set.add(s + ".n", &n, "number of sites", Range::at_least(2));
  set.add(s + ".bc", &bc, "boundary condition", {"open", "periodic"});
  set.add(s + ".J", &J, "nearest-neighbour coupling (J1 for j1j2)");
  set.add(s + ".h", &h, "transverse field (tfim)");
  set.add(s + ".delta", &delta, "anisotropy (xxz)");
  set.add(s + ".j2", &j2, "next-nearest-neighbour coupling (j1j2)");
}

}  // namespace attnphys::spin
