"""The transformer ansatz from Python: gradients against finite differences, translation invariance, Marshall
sign, and run_vmc (the `attnphys vmc` job) reaching the exact energy of a small chain."""
import numpy as np
import pytest

import attnphys
from attnphys import spin


def _small(**extra):
    opts = {"transformer.d_model": 8, "transformer.n_heads": 2, "transformer.hidden": 4,
            "transformer.init_std": 0.5, "transformer.seed": 4}
    opts.update(extra)
    return opts


def test_gradients_match_finite_differences():
    psi = spin.Transformer(8, periodic=True, options=_small())
    rng = np.random.default_rng(0)
    theta = psi.get_parameters() + 0.1 * rng.standard_normal(psi.n_parameters)
    psi.set_parameters(theta)
    sigma = np.where(rng.random((3, 8)) < 0.5, -1.0, 1.0)
    g = psi.gradients(sigma)
    assert g.shape == (3, psi.n_parameters)
    h = 1e-5
    for k in rng.choice(psi.n_parameters, 25, replace=False):
        tp, tm = theta.copy(), theta.copy()
        tp[k] += h
        tm[k] -= h
        psi.set_parameters(tp)
        lp = psi.log_psi(sigma)
        psi.set_parameters(tm)
        lm = psi.log_psi(sigma)
        d = lp - lm
        d = d.real + 1j * np.angle(np.exp(1j * d.imag))  # phases modulo 2π
        np.testing.assert_allclose(d / (2 * h), g[:, k], rtol=1e-5, atol=1e-7)
    psi.set_parameters(theta)


def test_periodic_state_is_translation_invariant_and_marshall_sign():
    psi = spin.Transformer(8, periodic=True, options=_small(**{"transformer.marshall_sign": True}))
    sigma = spin.all_states(8)
    lp = psi.log_psi(sigma)
    shifted = psi.log_psi(np.roll(sigma, 1, axis=1))
    np.testing.assert_allclose(lp.real, shifted.real, atol=1e-12)
    # A one-site shift swaps the sublattices: the Marshall factors differ by (-1)^(N_up) = +1 at N_up = 4.
    n_up = (sigma > 0).sum(axis=1)
    same = n_up % 2 == 0
    np.testing.assert_allclose(np.cos(lp.imag - shifted.imag)[same], 1.0, atol=1e-10)


def test_bad_options_raise():
    with pytest.raises(attnphys.Error, match="patch_size"):
        spin.Transformer(9, options={"transformer.patch_size": 2})
    with pytest.raises(attnphys.Error):
        spin.Transformer(8, options={"transformer.no_such_key": 1})


def test_run_vmc_reaches_exact_energy():
    r = spin.run_vmc({"model.model": "heisenberg", "model.n": 8, "model.bc": "periodic", "vmc.n_iter": 60,
                      "sampler.n_samples": 512, "sampler.n_chains": 32, "transformer.d_model": 8,
                      "run.final_samples": 4096})
    assert r["reference"] == pytest.approx(-3.6510934089371783, abs=1e-8)
    assert r["relative_error"] < 5e-3
    assert r["energy"] > r["reference"] - 5 * r["energy_error"]
    assert len(r["history"]) == 60
