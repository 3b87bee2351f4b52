"""`attnphys train heat` / `attnphys eval heat` on PDEBench-layout HDF5 files that attnphys did not write.

The files are made here with h5py, in PDEBench's naming (a field `tensor` [N, T, X] or `u` [N, T, X, Y, 1], a static
coefficient channel `nu`, `x-coordinate` / `y-coordinate` / `t-coordinate` with T + 1 times, no attributes), on grids
the configuration does not default to (24 points in 1D, 20 x 16 in 2D) with several snapshots per sample. The
solutions are variable-kappa heat trajectories from attnphys.heat.solve with nu = kappa, so the coefficient channel
carries information the model needs.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import attnphys
import attnphys.heat

h5py = pytest.importorskip("h5py")

EXE = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")

N1, S1, T1 = 24, 160, 5          # 1D: points, samples, snapshots
NX, NY, S2, T2 = 20, 16, 40, 3   # 2D, non-square


def _kappa_trajectories(shape, h, samples, nt, dt, seed):
    """u[s, t] (attnphys layout: [..., y, x]) and kappa[s] for a variable-kappa periodic problem."""
    u0 = attnphys.heat.initial_conditions(shape, h, count=samples, seed=seed, length_scale=0.2)
    us = np.zeros((samples, nt) + tuple(shape))
    ks = np.zeros((samples,) + tuple(shape))
    for s in range(samples):
        k = attnphys.heat.random_kappa(shape, h, 0.3, 3.0, 0.3, 100 + s, "periodic")
        ks[s] = k
        u = np.array(u0[s])
        us[s, 0] = u
        for t in range(1, nt):
            u = attnphys.heat.solve(u, dt, h, kappa=k)
            us[s, t] = u
    return us, ks


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pdebench")
    h = 1.0 / N1
    dt1 = 4 * h * h
    u, k = _kappa_trajectories([N1], h, S1, T1, dt1, seed=5)
    one = d / "pdebench_1d.h5"
    with h5py.File(one, "w") as f:  # PDEBench 1D: tensor [N, T, X] float32, t-coordinate with T + 1 entries
        f["tensor"] = u.astype(np.float32)
        f["nu"] = k.astype(np.float32)
        f["x-coordinate"] = ((np.arange(N1) + 0.5) * h).astype(np.float32)
        f["t-coordinate"] = (np.arange(T1 + 1) * dt1).astype(np.float32)
    h2 = 1.0 / NX
    dt2 = 2 * h2 * h2
    u2, k2 = _kappa_trajectories([NY, NX], h2, S2, T2, dt2, seed=6)
    two = d / "pdebench_2d.h5"
    with h5py.File(two, "w") as f:  # [N, T, X, Y, 1] float64 (x before y), static nu [N, X, Y]
        f["u"] = np.transpose(u2, (0, 1, 3, 2))[..., None]
        f["nu"] = np.transpose(k2, (0, 2, 1)).astype(np.float32)
        f["x-coordinate"] = (np.arange(NX) + 0.5) * h2
        f["y-coordinate"] = (np.arange(NY) + 0.5) * h2
        f["t-coordinate"] = np.arange(T2) * dt2
    return {"dir": d, "one": one, "two": two, "u1": u, "nu1": k, "u2": u2}


def _identity_rel_l2(u, first, count):
    """Mean relative L2 of the trivial predictor u(t + dt) ~ u(t) over every (t, t + 1) of samples [first, +count)."""
    e = []
    for s in range(first, first + count):
        for t in range(u.shape[1] - 1):
            e.append(np.linalg.norm(u[s, t + 1] - u[s, t]) / np.linalg.norm(u[s, t + 1]))
    return float(np.mean(e))


def _run(args, check=True):
    p = subprocess.run([EXE] + args, capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])
    return p


def _sets(items):
    out = []
    for s in items:
        out += ["--set", s]
    return out


ONE_D = ["data.dim=1", "data.field=tensor", "data.n_train=128", "data.n_val=16", "data.n_test=16",
         "model.kind=transformer", "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
         "train.steps=600", "train.batch=16", "train.eval_every=100", "train.progress=false", "optimizer.lr=1e-2",
         "train.unroll=1"]  # one-step training (the CLI's main job adds pushforward steps, which 3 snapshots cannot feed)


def test_trains_and_evaluates_from_a_pdebench_1d_file(files):
    base = ONE_D + [f"data.file={files['one']}"]
    r = _run(["train", "heat", "--json"] + _sets(base + ['data.channels=["nu"]', f"train.out_dir={files['dir'] / 'nu'}"]))
    blind = _run(["train", "heat", "--json"] + _sets(base + [f"train.out_dir={files['dir'] / 'blind'}"]))
    identity = _identity_rel_l2(files["u1"], 144, 16)
    assert identity > 0.1, "the horizon is too short for the test to mean anything"
    # It learns: far below the trivial predictor, and the coefficient channel is what makes the difference (the
    # same model without nu cannot tell a fast-diffusing sample from a slow one).
    assert r["test_rel_l2"] < 0.4 * identity, (r["test_rel_l2"], identity)
    assert r["test_rel_l2"] < 0.75 * blind["test_rel_l2"], (r["test_rel_l2"], blind["test_rel_l2"])
    # Physics from the file: no solver-based evaluation, each skip noted; the rollout runs along the file's
    # 5 snapshots (4 horizons of the 20 asked for).
    assert r["physics"] == "file"
    notes = "\n".join(r["notes"])
    for part in ["not written by `attnphys heat dataset`", "speed against ADI skipped",
                 "resolution transfer skipped", "heat-kernel comparison skipped",
                 "rollout: 4 of eval.rollout_steps = 20"]:
        assert part in notes, part
    assert len(r["rollout_rel_l2"]) == 4
    assert r["speedup_vs_solver"] is None and r["transfer_rel_l2"] is None
    # nu's statistics over the training split are in the checkpoint.
    ckpt = files["dir"] / "nu" / "checkpoint.h5"
    with h5py.File(ckpt, "r") as f:
        nu = files["nu1"][:128].astype(np.float32).astype(np.float64)
        assert f.attrs["channel_mean"][0] == pytest.approx(nu.mean(), rel=1e-9)
        assert f.attrs["channel_std"][0] == pytest.approx(nu.std(), rel=1e-9)
    # eval heat from the checkpoint reproduces the run.
    e = _run(["eval", "heat", "--checkpoint", str(ckpt), "--out", str(files["dir"] / "nu_eval"), "--json"])
    for key in ["test_rel_l2", "test_rmse", "rollout_rel_l2"]:
        assert e[key] == pytest.approx(r[key], rel=1e-9), key


def test_non_square_2d_grid_and_orientation(files):
    r = _run(["train", "heat", "--json"] + _sets([
        f"data.file={files['two']}", "data.field=u", 'data.channels=["nu"]', "data.n_train=24", "data.n_val=8",
        "data.n_test=8", "model.kind=transformer", "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
        "train.steps=100", "train.batch=8", "train.eval_every=50", "train.progress=false", "optimizer.lr=1e-2",
        "train.unroll=1", f"train.out_dir={files['dir'] / 'two'}"]))
    identity = _identity_rel_l2(files["u2"], 32, 8)
    assert identity > 0.1
    assert r["test_rel_l2"] < 0.6 * identity, (r["test_rel_l2"], identity)
    assert len(r["rollout_rel_l2"]) == 2
    # eval.h5 holds the fields as [sample, y, x]: the first test input is the file's u[32, 0] transposed back.
    with h5py.File(files["dir"] / "two" / "eval.h5", "r") as f:
        assert f["fields/input"].shape == (4, NY, NX)
        np.testing.assert_allclose(f["fields/input"][0], files["u2"][32, 0], rtol=1e-12, atol=1e-14)
        assert f["attention/weights"].shape == (NY, NX)
        assert "attention/heat_kernel" not in f
        assert f.attrs["physics"] == "file"
    # An explicit data.n cannot name a non-square grid.
    p = _run(["train", "heat"] + _sets([f"data.file={files['two']}", "data.field=u", "data.n=20",
                                        f"train.out_dir={files['dir'] / 'two_n'}"]), check=False)
    assert p.returncode != 0 and "20x16 grid but data.n = 20" in p.stderr and "set data.n = 0" in p.stderr


def test_our_own_variable_kappa_file_trains_with_its_kappa_channel(tmp_path):
    path = tmp_path / "lognormal.h5"
    attnphys.heat.write_dataset(path, [16], 1.0 / 16, samples=48, nt=3, delta_t=25.0 / (16 * 16 * 2), seed=2,
                                length_scale=0.15, family={"kappa": "lognormal", "kappa_contrast": 10})
    common = ["data.dim=1", f"data.file={path}", "data.n_train=32", "data.n_val=8", "data.n_test=8",
              "model.kind=transformer", "model.d_model=16", "model.n_heads=2", "train.steps=60",
              "train.progress=false", "optimizer.lr=1e-2", "train.unroll=1"]
    r = _run(["train", "heat", "--json"] + _sets(common + ['data.channels=["kappa"]', f"train.out_dir={tmp_path / 'a'}"]))
    assert r["physics"] == "file"
    assert "variable κ(x)" in r["notes"][0]
    # model.input_kappa is shorthand for the same channel: the same run.
    s = _run(["train", "heat", "--json"] + _sets(common + ["model.input_kappa=true", f"train.out_dir={tmp_path / 'b'}"]))
    assert s["test_rel_l2"] == r["test_rel_l2"]


def _variant(files, name, edit):
    """A copy of the 1D file with `edit(h5py.File)` applied."""
    path = files["dir"] / name
    shutil.copy(files["one"], path)
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


def test_bad_files_and_channels_fail_with_clear_messages(files):
    def fails(extra, *parts):
        p = _run(["train", "heat"] + _sets(ONE_D + extra + [f"train.out_dir={files['dir'] / 'bad'}"]), check=False)
        assert p.returncode != 0
        for part in parts:
            assert part in p.stderr, (part, p.stderr)

    one = files["one"]
    # A wrong channel name: the message lists the datasets that exist.
    fails([f"data.file={one}", 'data.channels=["nux"]'], "no dataset 'nux'", "'nu' [160x24]", "'tensor' [160x5x24]")
    fails([f"data.file={one}", "data.field=density"], "no dataset 'density' (data.field = 'density')")
    # A channel on another grid, and one with the wrong number of samples.
    coarse = _variant(files, "coarse.h5", lambda f: f.create_dataset("kappa", data=np.ones((S1, 12), np.float32)))
    fails([f"data.file={coarse}", 'data.channels=["kappa"]'],
          "channel 'kappa' has shape 160x12, which does not fit 'tensor'", "24-point grid")
    short = _variant(files, "short.h5", lambda f: f.create_dataset("nu_short", data=np.ones((S1 - 1, N1))))
    fails([f"data.file={short}", 'data.channels=["nu_short"]'],
          "channel 'nu_short' holds 159 samples but 'tensor' (data.field) holds 160")
    # NaN in a channel (sample 3, in the training split).
    def put_nan(f):
        f["nu"][3, 5] = np.nan
    nan = _variant(files, "nan.h5", put_nan)
    fails([f"data.file={nan}", 'data.channels=["nu"]'], "non-finite value (nan) in 'nu' at sample 3")
    # A truncated copy.
    cut = files["dir"] / "cut.h5"
    data = open(one, "rb").read()
    open(cut, "wb").write(data[: len(data) * 3 // 4])
    fails([f"data.file={cut}", 'data.channels=["nu"]'], "truncated")
    # The linear kernel model cannot take channels.
    fails([f"data.file={one}", 'data.channels=["nu"]', "model.kind=kernel"],
          "model.kind = kernel is linear in the field and cannot take extra input channels")


def test_the_pdebench_example_config_runs_on_a_pdebench_file(files):
    """configs/heat1d_pdebench.toml: every key is declared, and it trains on a PDEBench 1D file as it is."""
    src = os.environ.get("ATTNPHYS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    cfg = os.path.join(src, "configs", "heat1d_pdebench.toml")
    r = _run(["train", "heat", "--config", cfg, "--json"] + _sets([
        f"data.file={files['one']}", "data.file_stride=1", "data.n_train=32", "data.n_val=8", "data.n_test=8",
        "train.steps=5", "train.progress=false", f"train.out_dir={files['dir'] / 'example'}"]))
    assert r["physics"] == "file" and np.isfinite(r["test_rel_l2"])
