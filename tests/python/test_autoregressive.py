"""attnphys.spin.Autoregressive: a normalised wavefunction, exact samples, and VMC with direct sampling."""
import numpy as np
import pytest

import attnphys
from attnphys import spin


def test_probabilities_sum_to_one_and_samples_follow_them():
    n = 6
    ar = spin.Autoregressive(n, d_model=8, n_heads=2, init_std=0.5, seed=3)
    ar.set_parameters(ar.get_parameters() + 0.3 * np.random.default_rng(0).standard_normal(ar.n_parameters))
    states = spin.all_states(n)
    p = np.exp(2 * ar.log_psi(states).real)
    assert abs(p.sum() - 1) < 1e-12
    cond = np.exp(ar.conditionals(states))
    assert np.allclose(cond.sum(axis=-1), 1, atol=1e-14)
    # Exact draws: counts against |psi|^2, the same draws for the same (seed, counter), ±1 arrays.
    s = ar.sample(20000, seed=5, counter=1)
    assert s.shape == (20000, n) and set(np.unique(s)) <= {-1.0, 1.0}
    assert np.array_equal(ar.sample(10, seed=5, counter=1), s[:10])
    idx = ((s > 0) * 2 ** np.arange(n)).sum(axis=1)
    freq = np.bincount(idx, minlength=2 ** n) / len(s)
    assert np.abs(freq - p).max() < 5 * np.sqrt(p.max() / len(s))


def test_fixed_sz_lives_in_the_sector():
    n = 6
    ar = spin.Autoregressive(n, d_model=8, fixed_sz=True, two_sz=2, init_std=0.5)
    states = spin.all_states(n)
    p = np.exp(2 * ar.log_psi(states).real)
    inside = states.sum(axis=1) == 2
    assert abs(p[inside].sum() - 1) < 1e-12
    assert np.all(p[~inside] == 0)
    assert np.all(ar.sample(200).sum(axis=1) == 2)
    with pytest.raises(attnphys.Error, match="impossible"):
        spin.Autoregressive(7, fixed_sz=True, two_sz=0)
    with pytest.raises(attnphys.Error, match="divisible"):
        spin.Autoregressive(6, d_model=10, n_heads=3)


def test_short_vmc_run_approaches_the_tfim_ground_state():
    m = spin.ChainModel("tfim", n=6, bc="open", J=1.0, h=1.0)
    exact = spin.reference_energy(m)
    ar = spin.Autoregressive(m.n, d_model=8, n_heads=2, seed=2)
    vmc = spin.AutoregressiveVmc(m, ar, {"vmc.lr": 0.05, "sampler.n_samples": 256, "sampler.seed": 3})
    assert vmc.direct_sampling
    hist = vmc.run(60)
    assert len(hist) == 60 and hist[-1]["tau"] == 1.0 and hist[-1]["acceptance"] == 1.0
    e = vmc.estimate_energy(8192)
    assert e["energy"] >= exact - 5 * e["error"] - 1e-12
    assert abs(e["energy"] - exact) / abs(exact) < 1e-2
    # ... and the gradients the driver used are the model's exact ones.
    g = ar.gradients(ar.sample(2))
    assert g.shape == (2, ar.n_parameters) and np.all(np.isfinite(g))


def test_vmc_takes_the_sector_of_a_directly_sampled_ansatz():
    m = spin.ChainModel("heisenberg", n=6, bc="periodic")
    for fixed in (True, False):  # the driver samples the model's own sector (or every sector)
        ar = spin.Autoregressive(m.n, d_model=8, fixed_sz=fixed, two_sz=0, seed=4)
        assert isinstance(ar, spin.Ansatz)
        vmc = spin.Vmc(m, ar, {"sampler.n_samples": 64})
        assert vmc.direct_sampling
        hist = vmc.run(2)
        assert len(hist) == 2 and np.isfinite(hist[-1]["energy"])
