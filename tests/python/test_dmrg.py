"""attnphys.mps.dmrg against known ground-state energies of small chains."""
import math

import pytest

import attnphys
from attnphys import mps


def test_heisenberg_open_n16_bethe_ansatz():
    r = mps.dmrg(model="heisenberg", n=16, bc="open", chi=48, sweeps=10)
    assert abs(r["energy"] - (-6.911737146)) < 1e-8
    assert r["variance"] < 1e-7
    assert len(r["entropies"]) == 15
    assert max(abs(m) for m in r["magnetization"]) < 1e-8


def test_tfim_critical_open_free_fermions():
    n = 20
    exact = 1 - 1 / math.sin(math.pi / (4 * n + 2))
    r = mps.dmrg(model="tfim", n=n, h=1.0, chi=40, sweeps=10)
    assert abs(r["energy"] - exact) < 1e-9


def test_bad_arguments_raise_attnphys_error():
    with pytest.raises(attnphys.Error):
        mps.dmrg(model="nope", n=8)
    with pytest.raises(attnphys.Error):
        mps.dmrg(model="heisenberg", n=8, chi=0)


def test_u1_is_the_default_for_sz_conserving_chains_and_equals_dense():
    kw = dict(model="j1j2", n=14, bc="open", j2=0.24, chi=64, sweeps=12)
    u = mps.dmrg(**kw)
    d = mps.dmrg(symmetry="none", **kw)
    assert u["symmetry"] == "u1" and d["symmetry"] == "none"
    assert abs(u["energy"] - d["energy"]) < 1e-10
    assert u["converged"] and u["convergence_reason"] is None
    assert max(abs(a - b) for a, b in zip(u["entropies"], d["entropies"])) < 1e-8
    assert mps.dmrg(model="tfim", n=8, chi=8)["symmetry"] == "none"
    with pytest.raises(attnphys.Error):
        mps.dmrg(model="tfim", n=8, symmetry="u1")
    with pytest.raises(attnphys.Error):
        mps.dmrg(model="heisenberg", n=8, symmetry="su2")


def test_unconverged_run_says_why():
    r = mps.dmrg(model="heisenberg", n=40, chi=16, sweeps=2)
    assert not r["converged"]
    assert "sweeps" in r["convergence_reason"]
