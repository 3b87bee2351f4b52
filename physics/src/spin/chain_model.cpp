#include "attnphys/physics/spin/chain_model.hpp"

#include <cmath>
#include <sstream>

namespace attnphys::spin {

ModelKind parse_model_kind(const std::string& name) {
  if (auto m = find_enum<ModelKind>(name)) return *m;
  fail("unknown model '", name, "': use ", enum_list<ModelKind>());
}

Boundary parse_boundary(const std::string& name) {
  if (auto b = find_enum<Boundary>(name)) return *b;
  fail("unknown boundary condition '", name, "': use ", enum_list<Boundary>());
}

void ChainModel::validate() const {
  require(n >= 2, "a chain needs at least 2 sites, got n = ", n);
  require(!(model == ModelKind::J1J2 && periodic() && n < 5), "a periodic J1-J2 chain needs n >= 5, got ", n);
  require(std::isfinite(J) && std::isfinite(h) && std::isfinite(delta) && std::isfinite(j2),
          "model couplings must be finite numbers");
}

std::string ChainModel::describe() const {
  std::ostringstream os;
  os << enum_name(model) << " n=" << n << " " << enum_name(bc) << " J=" << J;
  if (model == ModelKind::Tfim) os << " h=" << h;
  if (model == ModelKind::Xxz) os << " delta=" << delta;
  if (model == ModelKind::J1J2) os << " j2=" << j2;
  return os.str();
}

void ChainModel::declare(OptionSet& set, const std::string& s) {
  set.add(s + ".model", &model, "spin-chain model");
  set.add(s + ".n", &n, "number of sites", Range::at_least(2));
  set.add(s + ".bc", &bc, "boundary condition");
  set.add(s + ".J", &J, "nearest-neighbour coupling (J1 for j1j2)");
  set.add(s + ".h", &h, "transverse field (tfim)");
  set.add(s + ".delta", &delta, "anisotropy (xxz)");
  set.add(s + ".j2", &j2, "next-nearest-neighbour coupling (j1j2)");
}

}  // namespace attnphys::spin
