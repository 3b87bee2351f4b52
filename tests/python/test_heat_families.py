# Problem-family datasets as a user reads them: `attnphys heat dataset` and attnphys.heat.write_dataset write
# PDEBench-layout HDF5 whose channels (data, kappa, source, boundary) h5py opens by name, and whose samples are
# the solver's answers for the stored inputs.
import os
import subprocess

import h5py
import numpy as np
import pytest

import attnphys

EXE = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")


def run(*args, check=True):
    return subprocess.run([EXE, *args], capture_output=True, text=True, check=check)


def test_help_lists_the_families():
    out = run("heat", "dataset", "--help").stdout
    for word in ("family.kappa", "piecewise", "lognormal", "family.source", "family.boundary", "nonlinear.law",
                 "quadratic", "table", "problem.dim"):
        assert word in out, word


def test_cli_variable_kappa_dataset_opens_in_h5py_with_a_kappa_channel(tmp_path):
    path = tmp_path / "kappa2d.h5"
    run("heat", "dataset", "--set", "problem.dim=2", "--set", "problem.nx=16", "--set", "problem.ny=12",
        "--set", "family.kappa=lognormal", "--set", "family.kappa_contrast=10", "--set", "dataset.samples=4",
        "--set", "dataset.nt=3", "--set", "dataset.progress=false", "--set", f"dataset.output={path}")
    with h5py.File(path, "r") as f:
        assert f["data"].shape == (4, 3, 16, 12, 1)
        kappa = f["kappa"][...]
        assert kappa.shape == (4, 16, 12)
        assert "kappa" in f.attrs["channels"].split(",")
        assert f.attrs["variable_kappa"] == 1
        assert kappa.min() > 0
        for s in range(4):
            assert abs(kappa[s].max() / kappa[s].min() - 10.0) < 1e-4 * 10
        assert not np.array_equal(kappa[0], kappa[1])  # per sample
        assert np.all(np.isfinite(f["data"][...]))


def test_python_families_round_trip_against_the_solver(tmp_path):
    # 2D periodic with a log-normal κ per sample: the second snapshot is attnphys.heat.solve of the first one (as
    # stored, in float32) with the stored κ. Then every channel of a 3D family with sources and boundary data.
    path = tmp_path / "fam.h5"
    s = attnphys.heat.write_dataset(path, (10, 12), 1.0 / 12, samples=3, nt=2, delta_t=0.004, seed=2,
                                    bc="periodic", family={"kappa": "lognormal", "kappa_contrast": 8})
    assert "lognormal" in s["family"]
    with h5py.File(path, "r") as f:
        data, kappa = f["data"][...], f["kappa"][...]
        dt = f.attrs["solver_dt"]
        assert data.shape == (3, 2, 12, 10, 1)
        for i in range(3):
            u0 = data[i, 0, :, :, 0].T.astype(np.float64)  # file [x, y] -> solver (ny, nx)
            k = kappa[i].T.astype(np.float64)
            u1 = attnphys.heat.solve(u0, 0.004, 1.0 / 12, kappa=k, bc="periodic", dt=dt)
            ref = data[i, 1, :, :, 0].T
            # The file's first snapshot is float32-rounded; the rest is the same solver on the same κ.
            assert np.max(np.abs(u1 - ref)) < 1e-5 * max(1.0, np.max(np.abs(ref)))
    path = tmp_path / "all.h5"
    attnphys.heat.write_dataset(path, (6, 8, 10), 0.1, samples=2, nt=2, delta_t=0.002, bc="dirichlet",
                                family={"kappa": "piecewise", "source": "grf", "boundary": "random"})
    with h5py.File(path, "r") as f:
        assert f["data"].shape == (2, 2, 10, 8, 6, 1)
        for name, shape in (("kappa", (2, 10, 8, 6)), ("source", (2, 10, 8, 6)), ("boundary", (2, 10, 8, 6)),
                            ("boundary_faces/x0", (2, 8, 6)), ("boundary_faces/z1", (2, 10, 8))):
            assert f[name].shape == shape, name
        assert set(f.attrs["channels"].split(",")) == {"data", "kappa", "source", "boundary"}
        assert list(f["grid"].keys()) == ["t", "x", "y", "z"]


def test_nonlinear_dataset_and_bad_keys(tmp_path):
    path = tmp_path / "nl.h5"
    attnphys.heat.write_dataset(path, (32,), 1.0 / 32, samples=2, nt=3, delta_t=0.002, bc="neumann",
                                nonlinear={"law": "quadratic", "kappa0": 0.5, "beta": 3.0})
    with h5py.File(path, "r") as f:
        assert f.attrs["nonlinear"] == 1
        assert f.attrs["beta"] == 3.0
        u = f["data"][...]
        # Insulated sides: total heat is conserved by the nonlinear scheme (float32 storage).
        tot = u.sum(axis=(2, 3))
        assert np.allclose(tot[:, 0], tot[:, 2], rtol=0, atol=1e-4 * np.abs(u).sum() / u.shape[0])
    with pytest.raises(Exception, match="did you mean"):
        attnphys.heat.write_dataset(tmp_path / "bad.h5", (16,), 1.0 / 16, samples=1, family={"kapa": "lognormal"})
    with pytest.raises(Exception, match="problem.bc = dirichlet or neumann"):
        attnphys.heat.write_dataset(tmp_path / "bad.h5", (16,), 1.0 / 16, samples=1, family={"boundary": "random"})
    assert not (tmp_path / "bad.h5").exists()
    r = run("heat", "dataset", "--set", "family.kappa=gauss", "--set", f"dataset.output={tmp_path / 'x.h5'}",
            check=False)
    assert r.returncode != 0 and "constant, piecewise, lognormal" in r.stderr
