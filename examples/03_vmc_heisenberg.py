#!/usr/bin/env python3
"""03 - Variational Monte Carlo with a transformer wavefunction, in NetKet's shape.

The antiferromagnetic Heisenberg ring of 8 spins, H = sum_i S_i . S_{i+1} (spin-1/2 operators), in the sector
S^z = 0. The ansatz is the default relative-position transformer (factored attention, Marshall sign for this
chain), optimised by stochastic reconfiguration on Metropolis exchange samples, and compared with exact
diagonalisation.

    PYTHONPATH=build/python /usr/bin/python3 examples/03_vmc_heisenberg.py

Exits non-zero unless the VMC energy is within 1% of the exact ground-state energy. A few seconds.
"""
import sys

import numpy as np

from attnphys import spin

hi = spin.Spin(8, total_sz=0)
H = spin.Heisenberg(hi, J=1.0, bc="periodic")
sampler = spin.MetropolisExchange(hi, n_chains=32)
vs = spin.MCState(sampler, spin.Transformer(), n_samples=256, seed=1)
driver = spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(diag_shift=0.01))
log = spin.RuntimeLog()
driver.run(40, out=log)

E = vs.expect(H, n_samples=2048)
exact = spin.exact_ground_state(H.chain_model())["energy"]
rel = abs(E.mean - exact) / abs(exact)
print(f"VMC energy {E.mean:.6f} +- {E.error_of_mean:.6f} ({vs.n_parameters} parameters), "
      f"exact {exact:.7f}, relative error {rel:.2e}")
c01 = vs.expect(spin.SpinCorrelation(hi, 0, 1))  # a Stats object: mean, error_of_mean, variance, tau_corr, R_hat
print(f"<S_0 . S_1> = {c01.mean:.4f} +- {c01.error_of_mean:.4f} (exact: E / 8 = {exact / 8:.4f} on the ring)")
print(f"S(pi) = {vs.expect(spin.StructureFactor(hi, q=np.pi)).mean:.4f}")

if not rel < 1e-2:
    print(f"FAILED: relative error {rel:.2e} is above 1e-2")
    sys.exit(1)
print("OK")
