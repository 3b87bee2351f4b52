"""attnphys.spin from Python: ED against closed forms, local energies against a dense Hamiltonian, VMC."""
import math

import numpy as np
import pytest

import attnphys
from attnphys import spin


def dense_hamiltonian(model):
    """H in the full 2^n basis, from the connected configurations of every basis state."""
    states = spin.all_states(model.n)
    conn, el = spin.connected(model, states)
    weights = 2 ** np.arange(model.n)
    rows = ((conn > 0) * weights).sum(axis=-1)
    H = np.zeros((2 ** model.n, 2 ** model.n))
    for a in range(2 ** model.n):
        for k in range(conn.shape[1]):
            H[rows[a, k], a] += el[a, k]
    return H


def test_exact_ground_state_matches_closed_forms():
    m = spin.ChainModel("tfim", n=12, bc="periodic", J=1.0, h=1.0)
    e = spin.exact_ground_state(m)["energy"]
    assert abs(e - (-2 / math.sin(math.pi / 24))) < 1e-9
    assert abs(spin.reference_energy(m) - e) < 1e-9
    h = spin.exact_ground_state(spin.ChainModel("heisenberg", n=16, bc="periodic"))
    assert abs(h["energy"] - (-7.142296361)) < 1e-9
    assert h["sector"] == "2Sz=0"
    assert spin.reference_energy(spin.ChainModel("heisenberg", n=16)) is None
    mg = spin.ChainModel("j1j2", n=12, bc="periodic", j2=0.5)
    assert abs(spin.exact_ground_state(mg)["energy"] + 3 * 12 / 8) < 1e-9


def test_dense_spectrum_and_vectors():
    m = spin.ChainModel("xxz", n=8, bc="open", delta=0.5)
    H = dense_hamiltonian(m)
    assert np.allclose(H, H.T)
    r = spin.exact_ground_state(m, n_states=2, want_vectors=True)
    v = r["vectors"][0]
    full = np.zeros(2 ** m.n)
    full[r["states"].astype(np.int64)] = v
    assert abs(full @ H @ full - r["energy"]) < 1e-10
    assert r["energy"] == pytest.approx(np.linalg.eigvalsh(H)[0], abs=1e-10)


def test_rbm_local_energies_match_dense_hamiltonian():
    m = spin.ChainModel("tfim", n=6, bc="periodic", h=0.7)
    rbm = spin.Rbm(m.n, alpha=1.5, init_std=0.3, seed=4)
    states = spin.all_states(m.n)
    logpsi = rbm.log_psi(states)
    psi = np.exp(logpsi)
    H = dense_hamiltonian(m)
    expected = (H @ psi) / psi
    assert np.allclose(rbm.local_energies(m, states), expected, atol=1e-10)
    assert rbm.gradients(states[:3]).shape == (3, rbm.n_parameters)


def test_errors_reach_python():
    with pytest.raises(attnphys.Error, match="unknown model"):
        spin.ChainModel("potts", n=4)
    rbm = spin.Rbm(4)
    with pytest.raises(attnphys.Error, match=r"\[B, 4\]"):
        rbm.log_psi(np.ones((2, 5)))
    with pytest.raises(attnphys.Error, match="only \\+1 and -1"):
        rbm.log_psi(np.zeros((2, 4)))


def test_vmc_rbm_approaches_ed_and_callback_stops(tmp_path):
    m = spin.ChainModel("tfim", n=6, bc="open", h=1.0)
    rbm = spin.Rbm(m.n, alpha=1, complex=False, init_std=0.05, seed=3)
    vmc = spin.Vmc(m, rbm, {"vmc.lr": 0.05, "sampler.n_samples": 512, "sampler.n_chains": 64,
                            "vmc.diag_shift_steps": 60})
    stopped = vmc.run(100, callback=lambda s: s["iteration"] < 2)
    assert len(stopped) == 3
    vmc.run(80)
    est = vmc.estimate_energy(8192)
    exact = spin.reference_energy(m)
    assert abs(est["energy"] - exact) / abs(exact) < 2e-3
    path = str(tmp_path / "ckpt.h5")
    vmc.save_checkpoint(path)
    vmc.load_checkpoint(path)
    assert vmc.iteration == 83


def test_vmc_config_keys_are_accepted():
    """configs/vmc_rbm_tfim.toml: every key must be one the C++ option sets declare."""
    import os
    import tomllib

    src = os.environ.get("ATTNPHYS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(src, "configs", "vmc_rbm_tfim.toml"), "rb") as f:
        cfg = tomllib.load(f)
    m = spin.ChainModel(**cfg["model"])
    options = {f"{section}.{k}": v for section in ("sampler", "vmc") for k, v in cfg[section].items()}
    vmc = spin.Vmc(m, spin.Rbm(m.n, alpha=1, complex=False), options)
    assert len(vmc.run(1)) == 1
    with pytest.raises(attnphys.Error, match="unknown option"):
        spin.Vmc(m, spin.Rbm(m.n), {"vmc.learning_rate": 0.1})


def test_vmc_sector_defaults_are_the_cli_defaults():
    # spin.Vmc takes the model-dependent sampler defaults from the same C++ function as `attnphys vmc`
    # (vmc::apply_model_defaults): the 2Sz = 0 sector for Sz-conserving chains of even N, none for odd N or the TFIM.
    cases = [(spin.ChainModel("heisenberg", n=6, bc="periodic"), True),
             (spin.ChainModel("heisenberg", n=7, bc="open"), False),
             (spin.ChainModel("tfim", n=6), False)]
    for m, fixed in cases:
        v = spin.Vmc(m, spin.Rbm(m.n, seed=1), {"sampler.n_samples": 64, "sampler.n_chains": 16})
        assert v.options["sampler.fixed_sz"] is fixed, m
        assert v.options["sampler.move"] == "auto"
    # A key given explicitly is kept.
    m = spin.ChainModel("heisenberg", n=7, bc="open")
    v = spin.Vmc(m, spin.Rbm(7), {"sampler.fixed_sz": True, "sampler.two_sz": 1, "sampler.n_chains": 16})
    assert v.options["sampler.fixed_sz"] is True and v.options["sampler.two_sz"] == 1
    # The keyword defaults of ChainModel are the C++ ChainModel's.
    d = spin.ChainModel()
    assert (d.model, d.n, d.bc, d.J, d.h, d.delta, d.j2) == ("tfim", 20, "open", 1.0, 1.0, 1.0, 0.5)
