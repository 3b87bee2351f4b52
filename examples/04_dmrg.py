#!/usr/bin/env python3
"""04 - Ground states of spin chains by two-site DMRG, checked against exact values.

attnphys.mps.dmrg runs the DMRG of `attnphys dmrg` (U(1) block-sparse for Sz-conserving chains, dense for the
transverse-field Ising model) and returns a dict. Three checks against exact energies:
  * Heisenberg, open, N = 16: exact diagonalisation (attnphys.spin.exact_ground_state);
  * critical TFIM (h = J = 1), open, N = 16: free fermions (attnphys.spin.reference_energy);
  * J1-J2 at J2 = 1/2 (Majumdar-Ghosh point), periodic, N = 12: E = -3N/8 exactly.

    PYTHONPATH=build/python /usr/bin/python3 examples/04_dmrg.py

Exits non-zero if any relative error is above 1e-8. A few seconds.
"""
import sys

from attnphys import mps, spin

failures = []
cases = [  # model, n, bc, chi, exact energy
    ("heisenberg", 16, "open", 64, spin.exact_ground_state(spin.ChainModel("heisenberg", n=16, bc="open"))["energy"]),
    ("tfim", 16, "open", 32, None),
    ("j1j2", 12, "periodic", 64, -3 * 12 / 8),
]
for model, n, bc, chi, exact in cases:
    r = mps.dmrg(model=model, n=n, bc=bc, chi=chi, sweeps=8)
    if exact is None:
        exact = spin.reference_energy(spin.ChainModel(model, n=n, bc=bc))
    rel = abs(r["energy"] - exact) / abs(exact)
    print(f"{model:10s} N = {n:2d} {bc:8s} chi = {chi:3d} ({r['symmetry']}): E = {r['energy']:.10f}, "
          f"exact {exact:.10f}, relative error {rel:.1e}, max bond {r['max_bond_dimension']}, "
          f"S(middle) = {r['entropy_mid']:.4f}, converged {r['converged']}, {r['seconds']:.2f} s")
    if not rel < 1e-8:
        failures.append(f"{model}: relative error {rel:.1e} above 1e-8")

if failures:
    print("FAILED: " + "; ".join(failures))
    sys.exit(1)
print("OK")
