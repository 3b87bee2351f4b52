"""Matrix product states: two-site DMRG baselines for the spin chains (compiled in ``attnphys._core.mps``).

``dmrg(model="heisenberg", n=100, chi=100)`` returns a dict with energy, variance, max_bond_dimension,
truncation_error, sweeps, converged, convergence_reason, symmetry, seconds, entropies, entropy_mid, magnetization
and sweep_energies. Sz-conserving chains (heisenberg, xxz, j1j2) run the U(1) block-sparse DMRG unless
``symmetry="none"``.
"""
from ._core import mps as _mps

dmrg = _mps.dmrg

__all__ = ["dmrg"]
