#pragma once
// The spin-chain models of attnphys, named the same way by `attnphys ed`, `attnphys dmrg`, `attnphys vmc` and the
// Python API. Conventions (shared/MISSION.md):
//   tfim:        H = -J Σ Z_i Z_{i+1} - h Σ X_i            (Pauli matrices; critical at h = J)
//   xxz:         H =  J Σ (Sx Sx + Sy Sy + Δ Sz Sz)        (spin-1/2 operators S = σ/2)
//   heisenberg:  xxz with Δ = 1
//   j1j2:        H = J Σ S_i·S_{i+1} + j2 Σ S_i·S_{i+2}    (J plays J1)
// Sites are numbered from 0; bc is "open" or "periodic".
#include <string>

#include "attnphys/core/options.hpp"

namespace attnphys::spin {

struct ChainModel {
  std::string model = "tfim";  // tfim | xxz | heisenberg | j1j2
  int n = 20;
  std::string bc = "open";     // open | periodic
  double J = 1.0;
  double h = 1.0;              // tfim transverse field
  double delta = 1.0;          // xxz anisotropy
  double j2 = 0.5;             // j1j2 next-nearest coupling

  bool periodic() const { return bc == "periodic"; }
  // Δ actually used: 1 for heisenberg and j1j2, delta for xxz.
  double anisotropy() const { return model == "xxz" ? delta : 1.0; }
  // Whether H conserves total Sz (everything but tfim).
  bool conserves_sz() const { return model != "tfim"; }
  std::string describe() const;
  void validate() const;
  void declare(OptionSet& set, const std::string& section = "model");
};

}  // namespace attnphys::spin
