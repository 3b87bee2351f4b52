"""Spin chains: models, exact diagonalisation, local energies, the RBM baseline and VMC.

Conventions (as in the README): TFIM H = -J Σ Z_i Z_{i+1} - h Σ X_i (Pauli matrices); XXZ/Heisenberg/J1-J2 with spin-1/2
operators S = σ/2. Spins are ±1 arrays of shape [B, N]; σ_i = +1 is spin up (bit i set in a basis state).

    from attnphys import spin
    m = spin.ChainModel("heisenberg", n=16, bc="periodic")
    spin.exact_ground_state(m)["energy"]          # -7.142296361...
    rbm = spin.Rbm(m.n, alpha=2)
    vmc = spin.Vmc(m, rbm, {"vmc.lr": 0.05, "sampler.n_samples": 1024})
    history = vmc.run(200, callback=lambda step: step["error"] > 1e-4)

    # The relative-position transformer (factored attention, patches, complex log-cosh readout):
    psi = spin.Transformer(m.n, periodic=True, options={"transformer.marshall_sign": True})
    vmc = spin.Vmc(m, psi, {"vmc.lr": 0.05})
    # A matrix product state of bond dimension chi as the VMC ansatz (real tensors; Marshall sign for Heisenberg):
    psi = spin.Mps(m.n, chi=8, periodic=True, marshall_sign=True)
    # Or the whole `attnphys vmc` job, with the same defaults and results as the CLI:
    spin.run_vmc({"model.model": "heisenberg", "model.n": 20, "model.bc": "periodic"})

    # The same in NetKet's shape (attnphys/_vmc_api.py): typed keywords, defaults from the C++ VmcRunConfig.
    hi = spin.Spin(16, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    vs = spin.MCState(spin.MetropolisExchange(hi), spin.Transformer(), n_samples=1024, seed=1)
    spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(1e-2)).run(200)
    vs.expect(H), vs.expect(spin.StructureFactor(hi, q=np.pi))

spin.Rbm, spin.Transformer, spin.Mps and spin.Autoregressive with the chain length first (spin.Rbm(16, alpha=2))
build the C++ ansatz directly, as before; with keywords only (spin.Rbm(alpha=2)) they describe a model for MCState.
"""
import numpy as _np

from ._core.spin import (  # noqa: F401
    Ansatz,
    ChainModel,
    Mps,
    Rbm,
    Transformer,
    Vmc,
    connected,
    exact_ground_state,
    plateaued,
    reference_energy,
    run_vmc,
)


def all_states(n):
    """Every configuration of n spins as a [2^n, n] array of ±1 (bit i of the row index is spin i)."""
    idx = _np.arange(2 ** n, dtype=_np.int64)[:, None]
    return _np.where((idx >> _np.arange(n)) & 1, 1.0, -1.0)


# Autoregressive transformer ansatz (exact sampling); spin.Vmc samples it directly:
#     ar = spin.Autoregressive(m.n, d_model=16, n_heads=2, n_layers=2)
#     ar.sample(1000)                                   # [1000, n] exact draws from |psi|^2
#     vmc = spin.Vmc(m, ar, {"vmc.lr": 0.05, "sampler.n_samples": 512})
from ._core.spin import Autoregressive  # noqa: E402,F401

AutoregressiveVmc = Vmc  # the earlier name of spin.Vmc driving an Autoregressive ansatz

# The NetKet-shaped API; its model classes replace the C++ names above and build them when given the chain length.
from ._vmc_api import (  # noqa: E402,F401
    J1J2,
    Convergence,
    MCState,
    SR,
    VMC,
    XXZ,
    Adam,
    Autoregressive,
    ExactSampler,
    Heisenberg,
    Ising,
    MetropolisExchange,
    MetropolisLocal,
    Mps,
    OptionError,
    Rbm,
    RuntimeLog,
    Sgd,
    Spin,
    SpinCorrelation,
    Stats,
    StructureFactor,
    Transformer,
)
