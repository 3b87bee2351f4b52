"""attnphys.heat: reference solutions against exact decay, conservation, errors, pairs and datasets."""
import math
import os

import numpy as np
import pytest

import attnphys
from attnphys import heat


def mode_2d(n, kx, ky):
    x = np.arange(n) / n
    return np.sin(2 * np.pi * ky * x)[:, None] * np.cos(2 * np.pi * kx * x)[None, :]


@pytest.mark.parametrize("method", ["adi", "ftcs"])
def test_periodic_mode_decays_at_the_exact_rate(method):
    n, kappa, t = 32, 0.5, 0.02
    u0 = mode_2d(n, 1, 2)
    u = heat.solve(u0, t, 1.0 / n, kappa=kappa, bc="periodic", method=method)
    exact = u0 * math.exp(-kappa * 4 * np.pi ** 2 * 5 * t)
    # Spatial error kappa t sum k^4 h^2 / 12 relative; dt=None keeps the time error below it.
    space = kappa * t * (2 * np.pi) ** 4 * (1 + 16) / (12 * n * n)
    rel = np.linalg.norm(u - exact) / np.linalg.norm(exact)
    assert rel < 2.5 * space
    assert u.shape == u0.shape


def test_one_dimensional_cn_and_three_dimensional_adi():
    n = 64
    x = np.arange(n) / n
    u0 = np.sin(2 * np.pi * x)
    u = heat.solve(u0, 0.01, 1.0 / n, method="cn")
    assert np.allclose(u, u0 * math.exp(-4 * np.pi ** 2 * 0.01), atol=2e-4)
    m = 12
    g = np.arange(m) / m
    u3 = np.sin(2 * np.pi * g)[:, None, None] * np.ones((m, m, m))
    out = heat.solve(u3, 0.005, 1.0 / m, method="adi")
    assert np.allclose(out, u3 * math.exp(-4 * np.pi ** 2 * 0.005), atol=5e-3)


def test_neumann_conserves_heat_and_dirichlet_loses_it():
    rng = np.random.default_rng(0)
    u0 = rng.uniform(0, 1, size=(20, 24))
    kappa = heat.random_kappa(u0.shape, 0.05, bc="neumann")
    un = heat.solve(u0, 0.05, 0.05, kappa=kappa, bc="neumann")
    assert abs(un.sum() - u0.sum()) < 1e-12 * u0.sum()
    ud = heat.solve(u0, 0.05, 0.05, bc="dirichlet")
    assert ud.sum() < 0.9 * u0.sum()


def test_bad_input_raises_attnphys_error():
    u0 = np.zeros((8, 8))
    with pytest.raises(attnphys.Error, match="unknown boundary type"):
        heat.solve(u0, 0.1, 0.1, bc="robin")
    with pytest.raises(attnphys.Error, match="kappa"):
        heat.solve(u0, 0.1, 0.1, kappa=-1.0)
    with pytest.raises(attnphys.Error, match="kappa"):
        heat.solve(u0, 0.1, 0.1, kappa=np.full((8, 8), np.nan))
    with pytest.raises(attnphys.Error, match="shaped like u0"):
        heat.solve(u0, 0.1, 0.1, kappa=np.ones((8, 7)))
    with pytest.raises(attnphys.Error, match="stability limit"):
        heat.solve(u0, 0.1, 0.1, method="ftcs", dt=0.01)
    with pytest.raises(attnphys.Error):
        heat.solve(np.zeros((0, 8)), 0.1, 0.1)


def test_pairs_are_deterministic_per_index():
    x, y = heat.generate_pairs((16, 16), 1.0 / 16, count=5, seed=3)
    x2, y2 = heat.generate_pairs((16, 16), 1.0 / 16, count=2, first=3, seed=3)
    assert x.shape == (5, 16, 16)
    np.testing.assert_array_equal(x[3:], x2)
    np.testing.assert_array_equal(y[3:], y2)
    # the target is the solution from the input (up to the difference of the two automatic time steps)
    np.testing.assert_allclose(heat.solve(x[0], 0.01, 1.0 / 16), y[0], atol=1e-2)
    f = heat.initial_conditions((32,), 1.0 / 32, count=4, kind="bumps", seed=1)
    assert f.shape == (4, 32) and np.isfinite(f).all()


def test_dataset_is_readable_by_h5py(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "heat.h5"
    s = heat.write_dataset(path, (8, 10), 0.1, samples=3, nt=4, config="[x]\n")
    assert s["samples"] == 3 and os.path.exists(path)
    with h5py.File(path, "r") as f:
        assert f["data"].shape == (3, 4, 10, 8, 1)  # [sample, t, x, y, channel]
        np.testing.assert_allclose(f["grid/t"][:], [0.0, 0.01, 0.02, 0.03])
        assert f["grid/x"].shape == (10,) and f["grid/y"].shape == (8,)
        cfg = f.attrs["config"]
        assert (cfg.decode() if isinstance(cfg, bytes) else cfg) == "[x]\n"
        x, _ = heat.generate_pairs((8, 10), 0.1, count=3)
        np.testing.assert_allclose(f["data"][:, 0, :, :, 0], np.transpose(x, (0, 2, 1)), rtol=1e-6, atol=1e-6)


def test_nonlinear_kappa_law():
    n = 32
    x = (np.arange(n) + 0.5) / n
    u0 = 1.0 + 0.5 * np.cos(np.pi * x)[:, None] * np.cos(2 * np.pi * x)[None, :]
    # beta = 0 is the linear equation with kappa = kappa0.
    lin = heat.solve(u0, 0.05, 1.0 / n, kappa=0.7, bc="neumann", dt=0.005)
    nl0 = heat.solve(u0, 0.05, 1.0 / n, bc="neumann", dt=0.005, kappa_law={"law": "quadratic", "kappa0": 0.7, "beta": 0.0})
    assert np.max(np.abs(nl0 - lin)) < 1e-12
    # beta = 5: a different solution, with the same total heat (insulated sides).
    nl = heat.solve(u0, 0.05, 1.0 / n, bc="neumann", dt=0.005, kappa_law={"law": "quadratic", "kappa0": 0.7, "beta": 5.0})
    assert np.max(np.abs(nl - lin)) > 1e-2
    assert abs(nl.sum() - u0.sum()) < 1e-12 * u0.sum()
    # A table sampled from the same law, and the Picard keys.
    us = np.linspace(0.0, 2.0, 201)
    table = {"law": "table", "table_u": list(us), "table_kappa": list(0.7 * (1 + 5.0 * us ** 2)), "picard_max": 3}
    nt = heat.solve(u0, 0.05, 1.0 / n, bc="neumann", dt=0.005, kappa_law=table)
    assert np.max(np.abs(nt - nl)) < 1e-3
    with pytest.raises(attnphys.Error, match="strictly increasing"):
        heat.solve(u0, 0.05, 1.0 / n, kappa_law={"law": "table", "table_u": [0.0, 0.0], "table_kappa": [1.0, 2.0]})
    with pytest.raises(attnphys.Error, match="give kappa0 inside kappa_law"):
        heat.solve(u0, 0.05, 1.0 / n, kappa=2.0, kappa_law={"law": "quadratic", "beta": 1.0})
    with pytest.raises(attnphys.Error, match="not 'ftcs'"):
        heat.solve(u0, 0.05, 1.0 / n, method="ftcs", kappa_law={"law": "quadratic", "beta": 1.0})
    with pytest.raises(attnphys.Error):
        heat.solve(u0, 0.05, 1.0 / n, kappa_law={"law": "quadratic", "bta": 1.0})  # unknown key


def test_nan_fields_and_wrong_kappa_shapes_are_refused_with_the_shapes():
    u0 = np.zeros((8, 8))
    bad = u0.copy()
    bad[3, 5] = np.nan
    with pytest.raises(attnphys.Error, match=r"1 NaN or infinite value\(s\) \(the first at flat index 29"):
        heat.solve(bad, 0.1, 0.1)
    bad[3, 5] = np.inf
    with pytest.raises(attnphys.Error, match="NaN or infinite"):
        heat.solve(bad, 0.1, 0.1, method="ftcs", dt=1e-3)
    # The message names both shapes as numpy prints them.
    with pytest.raises(attnphys.Error, match=r"shaped like u0 \(8, 8\), got shape \(2,\)"):
        heat.solve(u0, 0.1, 0.1, kappa=np.ones(2))
