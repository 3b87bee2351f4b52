"""attnphys.mps in ITensor's shape (SpinHalf, AutoMpo, Sweeps, product_state / random_mps, dmrg(H, psi0, sweeps),
expect / correlation / entropy, save / load, the MPS as a VMC ansatz) against exact values, and its errors."""
import math
import os
import re

import numpy as np
import pytest

import attnphys
from attnphys import mps, spin

# Open Heisenberg chain N = 20, J = 1: Lanczos ED in the 2Sz = 0 sector (`attnphys ed --model heisenberg --n 20
# --bc open --json`, 6 s; too slow to repeat here).
E_HEISENBERG_20 = -8.6824733343989511


def heisenberg(sites, j=1.0, *, xyz=False):
    ampo = mps.AutoMpo(sites)
    for i in range(len(sites) - 1):
        if xyz:  # Sx Sx + Sy Sy combines into (S+ S- + S- S+) / 2: the MPO still conserves Sz
            ampo += (j, "Sx", i, "Sx", i + 1)
            ampo += (j, "Sy", i, "Sy", i + 1)
        else:
            ampo += (j / 2, "S+", i, "S-", i + 1)
            ampo += (j / 2, "S-", i, "S+", i + 1)
        ampo += (j, "Sz", i, "Sz", i + 1)
    return ampo.mpo()


# The README example (section "DMRG from Python in ITensor's shape"), verbatim. When README.md carries the section,
# the test runs the README's own block instead.
EXAMPLE = '''\
# ITensor-shaped DMRG: open Heisenberg chain of 20 spins, conserved Sz
import numpy as np
from attnphys import mps, spin

sites = mps.SpinHalf(20, conserve_sz=True)       # U(1) block-sparse tensors (conserve_sz=False: dense)
ampo = mps.AutoMpo(sites)
for i in range(19):
    ampo += (0.5, "S+", i, "S-", i + 1)          # also "Sx", "Sy", "X", "Y", "Z", "Id"; any number of sites
    ampo += (0.5, "S-", i, "S+", i + 1)
    ampo += (1.0, "Sz", i, "Sz", i + 1)
H = ampo.mpo()                                   # MPO bond dimension 5, H.conserves_sz
psi0 = mps.product_state(sites, "Neel")          # or ["Up", "Dn", ...], or mps.random_mps(sites, 10, seed=1)
sweeps = mps.Sweeps(maxdim=[10, 20, 40, 80, 100, 100], cutoff=1e-12, noise=[1e-5, 1e-6, 1e-7, 0, 0, 0])
energy, psi = mps.dmrg(H, psi0, sweeps, observer=lambda info: print(info["sweep"], info["energy"]))
print("E =", energy, psi.dmrg_info["converged"], "variance", mps.variance(H, psi))

sz = psi.expect("Sz")                            # <Sz_i>, numpy array of 20
czz = psi.correlation("Sz", "Sz")                # 20 x 20 matrix <Sz_i Sz_j>
print("<Sz_0 Sz_1> =", czz[0, 1], " S(bond 9) =", psi.entropy(9))

psi.save("heisenberg20.h5")                      # the `attnphys dmrg --save` file, written atomically
psi2 = mps.load("heisenberg20.h5")               # U(1) again: every bond state has a definite Sz
assert all(np.array_equal(a, b) for a, b in zip(psi.tensors(), psi2.tensors()))

hi = spin.Spin(20, total_sz=0)                   # the same state as a VMC ansatz (exact amplitudes)
vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), psi.to_ansatz(), n_samples=512, seed=1)
print(vs.expect(spin.Heisenberg(hi, J=1.0, bc="open")))
'''


def readme_example():
    src = os.environ.get("ATTNPHYS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    path = os.path.join(src, "README.md")
    if os.path.exists(path):
        m = re.search(r"```python\n(# ITensor-shaped DMRG.*?)```", open(path, encoding="utf-8").read(), re.S)
        if m:
            return m.group(1)
    return EXAMPLE


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env = {}
    exec(compile(readme_example(), "README.md", "exec"), env)
    assert abs(env["energy"] - E_HEISENBERG_20) < 1e-9
    assert np.allclose(env["czz"], env["czz"].T) and (env["psi"].entropies() > 0).all()
    assert abs(env["vs"].expect(env["spin"].Heisenberg(env["hi"], J=1.0, bc="open")).mean - env["energy"]) < 1e-4
    assert "E = " in capsys.readouterr().out


SWEEPS = dict(maxdim=[10, 20, 40, 80, 100, 100, 100, 100], cutoff=1e-12, noise=[1e-5, 1e-6, 1e-7, 0, 0, 0, 0, 0])


@pytest.fixture(scope="module")
def ground_state():
    sites = mps.SpinHalf(20, conserve_sz=True)
    H = heisenberg(sites)
    seen = []
    energy, psi = mps.dmrg(H, mps.product_state(sites, "Neel"), mps.Sweeps(**SWEEPS), observer=seen.append)
    return sites, H, energy, psi, seen


def test_heisenberg20_matches_ed(ground_state):
    sites, H, energy, psi, seen = ground_state
    assert H.conserves_sz and H.max_bond_dimension == 5 and psi.conserve_sz
    assert abs(energy - E_HEISENBERG_20) < 1e-9
    assert abs(mps.energy(H, psi) - E_HEISENBERG_20) < 1e-9
    assert mps.variance(H, psi) < 1e-8
    assert psi.dmrg_info["converged"] and psi.dmrg_info["symmetry"] == "u1"
    # The observer saw every sweep with its energy, descending to the final one.
    assert [r["sweep"] for r in seen] == list(range(1, len(seen) + 1)) and len(seen) == psi.dmrg_info["sweeps"]
    assert abs(seen[-1]["energy"] - energy) < 1e-12


def test_observables(ground_state):
    sites, H, energy, psi, _ = ground_state
    n = len(sites)
    sz = psi.expect("Sz")
    assert sz.shape == (n,) and np.abs(sz).max() < 1e-7  # the singlet
    czz = psi.correlation("Sz", "Sz")
    assert czz.shape == (n, n) and np.allclose(czz, czz.T, atol=1e-12)
    assert np.allclose(np.diag(czz), 0.25, atol=1e-12)  # Sz^2 = 1/4
    cpm, cmp_ = psi.correlation("S+", "S-"), psi.correlation("S-", "S+")
    assert np.allclose(cpm, cmp_.T, atol=1e-12)
    # Sum of the bond energies <S_i . S_{i+1}> is the energy; nearest neighbours are antiferromagnetic.
    bonds = [czz[i, i + 1] + 0.5 * (cpm[i, i + 1] + cmp_[i, i + 1]) for i in range(n - 1)]
    assert abs(sum(bonds) - energy) < 1e-9 and max(bonds) < 0
    # SU(2): <Sx Sx> = <Sy Sy> = <Sz Sz> off the diagonal, and <Sx> = <Sy> = 0.
    assert np.allclose(psi.correlation("Sx", "Sx"), czz, atol=1e-7)
    assert np.allclose(psi.correlation("Sy", "Sy"), czz, atol=1e-7)
    assert np.abs(psi.expect("Sx")).max() < 1e-12 and np.abs(psi.expect("Sy")).max() == 0
    s = psi.entropies()
    assert s.shape == (n - 1,) and (s > 0).all()
    assert abs(s[0] - math.log(2)) < 1e-9  # one spin of a singlet-paired chain: ln 2
    assert abs(psi.entropy(9) - s[9]) < 1e-15 and np.allclose(s, s[::-1], atol=1e-8)  # reflection symmetry


def test_save_load_round_trip(ground_state, tmp_path):
    sites, H, energy, psi, _ = ground_state
    path = tmp_path / "gs.h5"
    psi.save(path)
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]  # written to a temporary and renamed
    back = mps.load(path)
    assert back.conserve_sz and back.bond_dimensions == psi.bond_dimensions
    assert all(np.array_equal(a, b) for a, b in zip(back.tensors(), psi.tensors()))
    assert mps.energy(H, back) == mps.energy(H, psi)
    assert np.array_equal(back.entropies(), psi.entropies())
    dense = mps.load(path, conserve_sz=False)
    assert not dense.conserve_sz and abs(mps.energy(H, dense) - energy) < 1e-12
    assert np.allclose(dense.entropies(), psi.entropies(), atol=1e-12)
    # The file is the `attnphys dmrg --save` format: spin.Mps.from_file reads it too.
    assert spin.Mps.from_file(str(path)).n_parameters == sum(a.size for a in psi.tensors())


def test_dense_and_random_starts_agree():
    n = 12
    u1, dense = mps.SpinHalf(n, conserve_sz=True), mps.SpinHalf(n)
    exact = spin.exact_ground_state(spin.ChainModel("heisenberg", n=n, bc="open"))["energy"]
    sweeps = mps.Sweeps(maxdim=[8, 16, 32, 64, 64, 64], cutoff=1e-13, noise=[1e-6, 1e-7, 0, 0, 0, 0])
    e_u1, _ = mps.dmrg(heisenberg(u1, xyz=True), mps.random_mps(u1, 4, seed=2), sweeps)
    e_d, psi_d = mps.dmrg(heisenberg(dense), mps.random_mps(dense, 4, seed=2), sweeps)
    assert abs(e_u1 - exact) < 1e-10 and abs(e_d - exact) < 1e-10
    assert not psi_d.conserve_sz and psi_d.dmrg_info["symmetry"] == "none"
    r = mps.random_mps(u1, 6, seed=5)
    assert abs(r.expect("Sz").sum()) < 1e-12 and r.max_bond_dimension <= 6
    odd = mps.random_mps(mps.SpinHalf(7, conserve_sz=True), 5, seed=1)
    assert abs(odd.expect("Sz").sum() - 0.5) < 1e-12
    assert abs(mps.random_mps(mps.SpinHalf(7, conserve_sz=True), 5, total_sz=1.5).expect("Sz").sum() - 1.5) < 1e-12
    # A field term (Sx, no definite charge) puts the Hamiltonian on the dense path.
    ampo = mps.AutoMpo(dense)
    for i in range(n - 1):
        ampo += (-1.0, "Z", i, "Z", i + 1)
    for i in range(n):
        ampo += (-1.0, "X", i)
    tfim = ampo.mpo()
    assert not tfim.conserves_sz
    e, _ = mps.dmrg(tfim, mps.product_state(dense, "Up"), mps.Sweeps(maxdim=[8, 16, 32, 32, 32, 32],
                                                                   noise=[1e-5, 1e-6, 0, 0, 0, 0]))
    assert abs(e - (1 - 1 / math.sin(math.pi / (4 * n + 2)))) < 1e-9  # critical TFIM, free fermions
    with pytest.raises(attnphys.Error, match="does not"):
        mps.dmrg(mps.AutoMpo(u1).add(1.0, "Sx", 0).mpo(), mps.product_state(u1, "Neel"), sweeps)


def test_psi_as_a_vmc_ansatz():
    n = 10
    sites = mps.SpinHalf(n, conserve_sz=True)
    e, psi = mps.dmrg(heisenberg(sites), mps.product_state(sites, ["Up", "Dn"] * 5), mps.Sweeps(maxdim=[8, 16, 32, 32]))
    hi = spin.Spin(n, total_sz=0)
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), psi.to_ansatz(), n_samples=512, seed=1)
    est = vs.expect(spin.Heisenberg(hi, J=1.0, bc="open"))
    assert abs(est.mean - e) < 1e-5 and est.variance < 1e-8  # an eigenstate: zero-variance local energies


@pytest.mark.parametrize("code, pattern", [
    ("mps.AutoMpo(s20).add(1.0, 'Sz', 20)", r"site index 20 out of range 0..19"),
    ("mps.AutoMpo(s20).add(1.0, 'Sz', -1)", r"site index -1 out of range"),
    ("mps.AutoMpo(s20).add(1.0, 'Sq', 0)", r"unknown operator 'Sq'"),
    ("mps.AutoMpo(s20).add(float('nan'), 'Sz', 0, 'Sz', 1)", r"coefficient must be finite, got nan"),
    ("mps.AutoMpo(s20).add(1.0, 'Sz', 0, 'Sz', 0)", r"a site appears twice"),
    ("mps.AutoMpo(s20).add(1.0, 'Sy', 0).mpo()", r"not real"),
    ("mps.AutoMpo(s20).mpo()", r"no terms"),
    ("mps.random_mps(s20, 0)", r"chi must be >= 1, got 0"),
    ("mps.random_mps(s20, 4, total_sz=0.25)", r"total_sz = 0.25 is impossible"),
    ("mps.Sweeps(maxdim=[10, 0, 20])", r"maxdim\[1\] must be >= 1, got 0"),
    ("mps.Sweeps(3, maxdim=0)", r"maxdim must be >= 1, got 0"),
    ("mps.Sweeps(maxdim=[10, 20, 40], noise=[1e-5, 0])", r"noise has 2 entries but there are 3 sweeps"),
    ("mps.Sweeps(5, maxdim=[10, 20])", r"maxdim has 2 entries but there are 5 sweeps"),
    ("mps.Sweeps(maxdim=[10], cutoff=float('nan'))", r"cutoff must be a finite number"),
    ("mps.Sweeps(maxdim=[10], niter=0)", r"niter must be >= 1"),
    ("mps.product_state(s20, 'Left')", r"unknown state 'Left'"),
    ("mps.product_state(s20, ['Up'] * 19)", r"state has 19 entries for 20 sites"),
    ("mps.SpinHalf(0)", r"n must be >= 1"),
    ("psi.entropy(19)", r"bond b must be an integer in 0..18"),
    ("psi.expect('Sq')", r"unknown operator 'Sq'"),
    ("mps.dmrg(H10, psi, mps.Sweeps(maxdim=[4]))", r"H has 10 sites, psi 20"),
    ("mps.dmrg(H20, psi, [4, 8])", r"sweeps must be mps.Sweeps"),
    ("mps.dmrg(H20, psi, mps.Sweeps(maxdim=[4]), tolerance=1)", r"unknown keyword 'tolerance'"),
    ("mps.load('/nonexistent/x.h5')", r"nonexistent"),
])
def test_bad_input_raises_attnphys_error_naming_the_argument(code, pattern):
    s20 = mps.SpinHalf(20, conserve_sz=True)
    psi = mps.product_state(s20, "Neel")
    H10, H20 = heisenberg(mps.SpinHalf(10)), heisenberg(s20)
    env = dict(mps=mps, s20=s20, psi=psi, H10=H10, H20=H20)
    with pytest.raises(attnphys.Error, match=pattern):
        eval(code, env)


def test_observer_stops_and_its_errors_propagate():
    sites = mps.SpinHalf(10, conserve_sz=True)
    H, psi0 = heisenberg(sites), mps.product_state(sites, "Neel")
    sweeps = mps.Sweeps(maxdim=[8, 16, 32, 32, 32, 32])
    _, psi = mps.dmrg(H, psi0, sweeps, observer=lambda info: info["sweep"] < 2)
    assert psi.dmrg_info["sweeps"] == 2

    def boom(info):
        raise ValueError("observer failed")
    with pytest.raises(ValueError, match="observer failed"):
        mps.dmrg(H, psi0, sweeps, observer=boom)
    # psi0 is untouched: still the Neel state.
    assert np.allclose(psi0.expect("Sz"), [0.5, -0.5] * 5)


def test_one_line_form_is_the_cli_job():
    # The dict is DmrgRunResult::to_json: the keys of `attnphys dmrg --json`.
    r = mps.dmrg(model="heisenberg", n=12, chi=32)
    for key in ("model", "energy", "variance", "symmetry", "converged", "convergence_reason", "entropies",
                "magnetization", "sweep_energies", "bond_dimensions", "n_parameters", "davidson_products_last_sweep"):
        assert key in r, key
    assert r["model"] == "heisenberg n=12 open J=1" and r["symmetry"] == "u1"
    # options= reaches the other configuration keys, checked as --set checks them.
    f = mps.dmrg(model="heisenberg", n=40, chi=16, sweeps=3,
                 options={"dmrg.davidson_adaptive": False, "dmrg.energy_tol": 1e-3})
    assert f["davidson_products_last_sweep"] == 4 and f["sweeps"] == 3
    with pytest.raises(attnphys.Error, match=r"did you mean 'dmrg.noise'"):
        mps.dmrg(n=8, options={"dmrg.nosie": 1e-5})
    with pytest.raises(attnphys.Error, match=r"as the keyword chi="):
        mps.dmrg(n=8, options={"dmrg.chi": 4})
