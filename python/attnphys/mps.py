"""Matrix product states: two-site DMRG baselines for the spin chains (compiled in ``attnphys._core.mps``).

``dmrg(model="heisenberg", n=100, chi=100)`` returns a dict with energy, variance, max_bond_dimension,
truncation_error, sweeps, converged, convergence_reason, symmetry, seconds, entropies, entropy_mid, magnetization
and sweep_energies. Sz-conserving chains (heisenberg, xxz, j1j2) run the U(1) block-sparse DMRG unless
``symmetry="none"``.
"""
import json as _json

from ._core import mps as _mps


def dmrg(*args, **kwargs):
    """The job of ``attnphys dmrg`` (C++ ``mps::run_dmrg``): ``dmrg(model=..., n=..., chi=...)`` returns the dict of
    its ``to_json``."""
    return _json.loads(_mps._dmrg_job(*args, **kwargs))


__all__ = ["dmrg"]
