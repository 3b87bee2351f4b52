#!/usr/bin/env python3
"""05 - A transformer wavefunction against matrix product states, on the critical transverse-field Ising chain.

H = -J sum Z_i Z_{i+1} - h sum X_i with h = J = 1 (critical), open chain of 12 spins; the exact energy is the
free-fermion closed form. Three ways to the ground state, each with its parameter count:
  * DMRG at bond dimension chi = 2, 4, 8 (attnphys.mps.dmrg: the variational optimum within each chi);
  * VMC with an MPS ansatz of chi = 4 (attnphys.spin.Mps, sampled and optimised like the transformer);
  * VMC with the relative-position transformer (attnphys.spin.Transformer).
This is the small version of `attnphys compare` (README: transformer vs MPS study).

    PYTHONPATH=build/python /usr/bin/python3 examples/05_transformer_vs_mps.py

Exits non-zero unless the DMRG error falls as chi grows, the largest chi is exact to 1e-6 and both VMC runs
are within 2% of the exact energy. About ten seconds.
"""
import sys

from attnphys import mps, spin

n = 12
hi = spin.Spin(n)
H = spin.Ising(hi, h=1.0, J=1.0, bc="open")
exact = spin.reference_energy(H.chain_model())


def mps_parameters(n, chi, d=2):
    """Entries of an open-boundary MPS whose bonds are capped at chi (and at the Hilbert-space dimensions)."""
    bonds = [min(chi, d ** i, d ** (n - i)) for i in range(n + 1)]
    return sum(bonds[i] * d * bonds[i + 1] for i in range(n))


rows = []
for chi in (2, 4, 8):
    r = mps.dmrg(model="tfim", n=n, bc="open", chi=chi, sweeps=8)
    rows.append((f"DMRG chi={chi}", mps_parameters(n, chi), r["energy"], 0.0))

for name, model, lr in (("VMC MPS chi=4", spin.Mps(chi=4), 0.05), ("VMC transformer", spin.Transformer(), 0.05)):
    vs = spin.MCState(spin.MetropolisLocal(hi, n_chains=32), model, n_samples=512, seed=3)
    spin.VMC(H, spin.Sgd(lr), variational_state=vs, preconditioner=spin.SR(diag_shift=0.01)).run(60)
    E = vs.expect(H, n_samples=4096)
    rows.append((name, vs.n_parameters, E.mean, E.error_of_mean))

print(f"critical TFIM, open, N = {n}: exact energy {exact:.10f} (free fermions)")
print(f"{'method':18s} {'parameters':>10s} {'energy':>16s} {'relative error':>15s}")
errors = {}
for name, p, e, de in rows:
    errors[name] = abs(e - exact) / abs(exact)
    err_bar = f"  (E +- {de:.1e})" if de else ""
    print(f"{name:18s} {p:10d} {e:16.10f} {errors[name]:15.2e}{err_bar}")

failures = []
dmrg = [errors[f"DMRG chi={c}"] for c in (2, 4, 8)]
if not (dmrg[0] > dmrg[1] > dmrg[2] or dmrg[2] < 1e-12):
    failures.append(f"DMRG errors {dmrg} do not fall with chi")
if not dmrg[2] < 1e-6:
    failures.append(f"DMRG chi=8 error {dmrg[2]:.1e} above 1e-6")
for name in ("VMC MPS chi=4", "VMC transformer"):
    if not errors[name] < 2e-2:
        failures.append(f"{name} error {errors[name]:.1e} above 2e-2")
if failures:
    print("FAILED: " + "; ".join(failures))
    sys.exit(1)
print("OK")
