#pragma once
// The spin-chain models of attnphys, named the same way by `attnphys ed`, `attnphys dmrg`, `attnphys vmc` and the
// Python API. Conventions:
//   tfim:        H = -J Σ Z_i Z_{i+1} - h Σ X_i            (Pauli matrices; critical at h = J)
//   xxz:         H =  J Σ (Sx Sx + Sy Sy + Δ Sz Sz)        (spin-1/2 operators S = σ/2)
//   heisenberg:  xxz with Δ = 1
//   j1j2:        H = J Σ S_i·S_{i+1} + j2 Σ S_i·S_{i+2}    (J plays J1)
// Sites are numbered from 0; bc is open or periodic. The names are parsed once (EnumNames below).
#include <string>

#include "attnphys/core/options.hpp"

namespace attnphys::spin {

enum class ModelKind { Tfim, Xxz, Heisenberg, J1J2 };
enum class Boundary { Open, Periodic };

}  // namespace attnphys::spin

namespace attnphys {
template <>
struct EnumNames<spin::ModelKind> {
  static constexpr EnumName<spin::ModelKind> values[] = {{spin::ModelKind::Tfim, "tfim"},
                                                         {spin::ModelKind::Xxz, "xxz"},
                                                         {spin::ModelKind::Heisenberg, "heisenberg"},
                                                         {spin::ModelKind::J1J2, "j1j2"}};
};
template <>
struct EnumNames<spin::Boundary> {
  static constexpr EnumName<spin::Boundary> values[] = {{spin::Boundary::Open, "open"},
                                                        {spin::Boundary::Periodic, "periodic"}};
};
}  // namespace attnphys

namespace attnphys::spin {

// The names as the CLI, config files and Python spell them ("unknown model 'potts': use tfim, xxz, ...").
ModelKind parse_model_kind(const std::string& name);
Boundary parse_boundary(const std::string& name);

struct ChainModel {
  ModelKind model = ModelKind::Tfim;
  int n = 20;
  Boundary bc = Boundary::Open;
  double J = 1.0;
  double h = 1.0;              // tfim transverse field
  double delta = 1.0;          // xxz anisotropy
  double j2 = 0.5;             // j1j2 next-nearest coupling

  bool periodic() const { return bc == Boundary::Periodic; }
  // Δ actually used: 1 for heisenberg and j1j2, delta for xxz.
  double anisotropy() const { return model == ModelKind::Xxz ? delta : 1.0; }
  // Whether H conserves total Sz (everything but tfim).
  bool conserves_sz() const { return model != ModelKind::Tfim; }
  std::string describe() const;
  void validate() const;
  void declare(OptionSet& set, const std::string& section = "model");
};

}  // namespace attnphys::spin
