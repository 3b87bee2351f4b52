"""attnphys.operator: the heat surrogate from numpy as a neural-operator user calls it (Surrogate, Trainer, fit,
predict, save, load), the same numbers as `attnphys train heat` / `attnphys eval heat`, and every bad input refused
with attnphys.Error saying what to fix."""
import inspect
import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

import attnphys
import attnphys.heat
from attnphys.operator import Surrogate, Trainer

EXE = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")
N, H, DT = 16, 1.0 / 16, 2e-3


def _docstring_example():
    """The indented block after the first line ending in '::' of the module docstring, dedented."""
    lines = attnphys.operator.__doc__.splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("::"))
    block = []
    for line in lines[start + 1:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip() + "\n"


def _rel_l2(pred, ref):
    axes = tuple(range(1, ref.ndim))
    return np.linalg.norm(pred - ref, axis=axes) / np.linalg.norm(ref, axis=axes)


@pytest.fixture(scope="module")
def problem():
    """Variable-kappa pairs on a periodic 16 x 16 grid (the docstring's problem, fewer samples)."""
    u0 = attnphys.heat.initial_conditions((N, N), H, count=80, seed=11, length_scale=0.2)
    kappa = np.stack([attnphys.heat.random_kappa((N, N), H, 0.3, 3.0, 0.3, seed=500 + s) for s in range(80)])
    u1 = np.stack([attnphys.heat.solve(u, DT, H, kappa=k) for u, k in zip(u0, kappa)])
    return u0, u1, kappa


@pytest.fixture(scope="module")
def trained(problem):
    u0, u1, kappa = problem
    model = Surrogate("transformer", d_model=16, n_heads=2, d_ff=32, channels=("kappa",))
    calls = []
    hist = Trainer(model, steps=60, batch=16, eval_every=20, callback=lambda s, i: calls.append((s, i))).fit(
        u0[:64], u1[:64], channels={"kappa": kappa[:64]}, val=(u0[64:72], u1[64:72], {"kappa": kappa[64:72]}))
    return model, hist, calls


# ---------------------------------------------------------------------------------------------------- it works

def test_the_docstring_example_runs_and_learns(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(_docstring_example(), "attnphys.operator example", "exec"), ns)
    out = capsys.readouterr().out
    assert "test relative L2" in out and "step 200" in out
    # Far below the trivial predictor u(t + dt) ~ u(t) on held-out samples, with a validation curve that falls.
    assert ns["trivial"].mean() > 0.2
    assert ns["err"].mean() < 0.45 * ns["trivial"].mean(), (ns["err"].mean(), ns["trivial"].mean())
    h = ns["history"]
    assert list(h["val_step"]) == [50, 100, 150, 200]
    assert h["val_rel_l2"][-1] < 0.7 * h["val_rel_l2"][0]
    assert (tmp_path / "surrogate.h5").exists()


def test_fit_history_callback_and_the_error_below_the_trivial_predictor(problem, trained):
    u0, u1, kappa = problem
    model, hist, calls = trained
    assert model.trained and model.grid_shape == (N, N) and model.channels == ("kappa",)
    assert [s for s, _ in calls] == list(range(1, 61))
    assert set(calls[0][1]) == {"loss", "lr", "grad_norm", "seconds", "val_rel_l2", "best_val_rel_l2"}
    assert calls[0][1]["val_rel_l2"] is None and calls[19][1]["val_rel_l2"] == pytest.approx(hist["val_rel_l2"][0])
    assert hist["steps"] == 60 and len(hist["loss"]) == 60 and list(hist["val_step"]) == [20, 40, 60]
    assert hist["best_val_rel_l2"] == pytest.approx(hist["val_rel_l2"].min())
    # The schedule of `attnphys train heat`: warm-up over steps // 10, then a cosine down to 0.02 lr.
    assert hist["lr"][0] == pytest.approx(3e-2 / 6) and hist["lr"].max() == pytest.approx(3e-2)
    assert 3e-2 * 0.02 < hist["lr"][-1] < 3e-2 * 0.03
    pred = model.predict(u0[72:], kappa=kappa[72:])
    assert pred.shape == u0[72:].shape and pred.dtype == np.float64
    err, trivial = _rel_l2(pred, u1[72:]).mean(), _rel_l2(u0[72:], u1[72:]).mean()
    assert err < 0.6 * trivial, (err, trivial)
    # The channel matters: the same fields with another kappa give other predictions.
    assert not np.allclose(model.predict(u0[72:], kappa=kappa[:8]), pred)
    # The normaliser is the training inputs' mean and std; kappa's statistics are its own.
    norm = model.normalisation
    assert norm["mean"] == pytest.approx(u0[:64].mean(), rel=1e-9, abs=1e-12)
    assert norm["std"] == pytest.approx(u0[:64].std(), rel=1e-9)
    assert norm["channel_mean"][0] == pytest.approx(kappa[:64].mean(), rel=1e-9)


def test_predict_save_load_predict_identical(problem, trained, tmp_path):
    u0, _, kappa = problem
    model, _, _ = trained
    before = model.predict(u0[72:], channels={"kappa": kappa[72:]})
    model.save(tmp_path / "m.h5")
    back = Surrogate.load(tmp_path / "m.h5")
    assert back.n_parameters == model.n_parameters and back.channels == model.channels
    assert back.options == model.options and back.grid_shape == model.grid_shape
    assert np.array_equal(back.predict(u0[72:], kappa=kappa[72:]), before)
    # One field without the sample axis, and the batch size, change nothing but float32 rounding: OpenBLAS' AVX2
    # (Haswell, Zen) sgemm kernels round a row differently with the batch size (~1e-7 of the field here; its AVX-512
    # kernels were bit-identical).
    scale = np.abs(before).max()
    np.testing.assert_allclose(back.predict(u0[72], kappa=kappa[72]), before[0], rtol=0, atol=2e-6 * scale)
    np.testing.assert_allclose(back.predict(u0[72:], kappa=kappa[72:], batch=3), before, rtol=0, atol=2e-6 * scale)
    # Saved again from the loaded model: the same file contents predict the same numbers.
    back.save(tmp_path / "m2.h5")
    assert np.array_equal(Surrogate.load(tmp_path / "m2.h5").predict(u0[72:], kappa=kappa[72:]), before)
    # Physical coordinates: the model runs on a 32 x 32 grid of the same box (values sampled on the finer grid).
    fine = np.kron(u0[72:74], np.ones((2, 2)))
    out = back.predict(fine, kappa=np.kron(kappa[72:74], np.ones((2, 2))))
    assert out.shape == (2, 32, 32) and np.all(np.isfinite(out))
    # No temporary file is left beside the checkpoint.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.h5", "m2.h5"]


def test_options_defaults_are_the_cores():
    core = attnphys._core.surrogate.model_defaults()
    sig = inspect.signature(Surrogate.__init__).parameters
    for name, key in [("d_model", "d_model"), ("n_heads", "n_heads"), ("n_layers", "n_layers"), ("d_ff", "d_ff"),
                      ("attention", "attention"), ("final_norm", "final_norm"), ("stencil", "stencil"),
                      ("d_k", "kernel_dk"),
                      ("coords", "coords"), ("harmonics", "harmonics"), ("coord_features", "coord_features"),
                      ("coord_sigma", "coord_sigma"), ("dt_input", "dt_input"), ("conserve", "conserve"),
                      ("condition_on_field", "condition_on_field")]:
        assert sig[name].default == core[key], name
    assert core["kernel_heads"] == sig["n_heads"].default and core["kernel_layers"] == sig["n_layers"].default
    train = attnphys._core.surrogate.train_defaults()
    tsig = inspect.signature(Trainer.__init__).parameters
    for name in ["lr", "weight_decay", "batch", "steps", "seed", "clip_norm", "min_lr_ratio", "eval_every",
                 "patience", "max_seconds", "unroll", "unroll_grad", "unroll_warmup_steps"]:
        assert tsig[name].default == train[name], name
    assert train["optimizer"] == tsig["optimizer"].default and train["schedule"] == "warmup_cosine"
    m = Surrogate("kernel", n_heads=2, d_k=6, harmonics=3, dim=1)
    assert m.kind == "kernel" and m.options["kernel_heads"] == 2 and m.options["kernel_dk"] == 6
    assert m.dim == 1 and m.lengths == (1.0,) and not m.trained


def test_kernel_kind_in_1d_from_generate_pairs():
    x, y = attnphys.heat.generate_pairs((32,), 1.0 / 32, count=48, seed=4, delta_t=25.0 / (32 * 32 * 2))
    model = Surrogate("kernel", n_heads=2, d_k=8, harmonics=4, dim=1)
    Trainer(model, steps=150, batch=8).fit(x[:40], y[:40])
    err, trivial = _rel_l2(model.predict(x[40:]), y[40:]).mean(), _rel_l2(x[40:], y[40:]).mean()
    assert trivial > 0.1 and err < 0.3 * trivial, (err, trivial)


# ---------------------------------------------------------------------------------------------------- the CLI's numbers

@pytest.fixture(scope="module")
def lognormal_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("operator_cli")
    path = d / "lognormal.h5"
    attnphys.heat.write_dataset(path, (N, N), H, samples=48, nt=2, delta_t=DT, seed=3,
                                family={"kappa": "lognormal"})
    return d, path


CLI = ["data.n_train=32", "data.n_val=8", "data.n_test=8", 'data.channels=["kappa"]', "model.kind=transformer",
       "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "train.steps=40", "train.batch=8",
       "train.eval_every=20", "train.progress=false", "optimizer.lr=0.03",  # the Trainer's default lr
       "train.unroll=1", "model.conserve=false"]  # the Trainer's and Surrogate's defaults (the CLI's main job differs)


def _cli(args):
    p = subprocess.run([EXE] + args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_cli_checkpoint_loads_and_predicts_what_eval_heat_computes(lognormal_file):
    h5py = pytest.importorskip("h5py")
    d, path = lognormal_file
    sets = []
    for s in CLI + [f"data.file={path}", f"train.out_dir={d / 'run'}"]:
        sets += ["--set", s]
    run = _cli(["train", "heat", "--json"] + sets)
    ckpt = d / "run" / "checkpoint.h5"
    ev = _cli(["eval", "heat", "--checkpoint", str(ckpt), "--out", str(d / "eval"), "--json"])
    assert ev["test_rel_l2"] == pytest.approx(run["test_rel_l2"], rel=1e-12)
    model = Surrogate.load(ckpt)
    assert model.kind == "transformer" and model.channels == ("kappa",) and model.grid_shape == (N, N)
    assert model.n_parameters == run["n_parameters"]
    with h5py.File(d / "eval" / "eval.h5", "r") as f:
        inputs, prediction = f["fields/input"][()], f["fields/prediction"][()]
    with h5py.File(path, "r") as f:  # the test samples [40, 44); channels are [sample, x, y] in the file
        kappa = np.transpose(f["kappa"][40:44], (0, 2, 1)).astype(np.float64)
        np.testing.assert_array_equal(inputs, np.transpose(f["data"][40:44, 0, :, :, 0], (0, 2, 1)))
    ours = model.predict(inputs, kappa=kappa)
    # The evaluation predicted the whole test split in one batch: equal to float32 rounding (see above).
    np.testing.assert_allclose(ours, prediction, rtol=0, atol=2e-6 * np.abs(prediction).max())

    # Trainer.fit on the same file with the same options is the same training: bit-identical final parameters.
    mine = Surrogate("transformer", d_model=16, n_heads=2, d_ff=32, channels=("kappa",))
    h = Trainer(mine, steps=40, batch=8, eval_every=20, restore_best=False).fit(
        path, channels=["kappa"], n_train=32, n_val=8)
    with h5py.File(ckpt, "r") as f:
        np.testing.assert_array_equal(mine._m.parameters(), f["model/params"][()])
        assert h["best_val_rel_l2"] == f.attrs["best_val_rel_l2"]
    assert h["final_loss"] == pytest.approx(run["final_train_loss"], rel=1e-12)
    assert h["n_train"] == 32 and h["n_val"] == 8 and h["samples"] == 48


def test_a_checkpoint_without_the_grid_loads_from_its_configuration(lognormal_file, tmp_path):
    """Checkpoints written before /grid and the dim/box attributes existed: the problem comes from the stored
    configuration (data.file resolved again)."""
    h5py = pytest.importorskip("h5py")
    import shutil

    d, path = lognormal_file
    ckpt = d / "run" / "checkpoint.h5"  # written by the test above
    if not ckpt.exists():
        pytest.skip("needs the CLI run of test_cli_checkpoint_loads_and_predicts_what_eval_heat_computes")
    old = tmp_path / "old.h5"
    shutil.copy(ckpt, old)
    with h5py.File(old, "r+") as f:
        for a in ("dim", "bc", "box_lengths", "encoding_lengths", "grid_shape", "written_by"):
            del f.attrs[a]
        del f["grid"]
    x = np.random.default_rng(0).normal(size=(3, N, N))
    k = np.exp(np.random.default_rng(1).normal(size=(3, N, N)))
    assert np.array_equal(Surrogate.load(old).predict(x, kappa=k), Surrogate.load(ckpt).predict(x, kappa=k))


def test_default_conditioned_model_of_the_cli_in_1d(tmp_path):
    """The CLI's default (the main job: a log-normal κ family, the conditioned kind) in 1D on generated data:
    Surrogate.load predicts eval.h5's numbers from the inputs and κ(x) the evaluation saved."""
    h5py = pytest.importorskip("h5py")
    sets = []
    for s in ["data.dim=1", "data.n=16", "data.n_train=32", "data.n_val=8", "data.n_test=8", "model.kernel_heads=2",
              "model.kernel_dk=6", "model.harmonics=3", "train.steps=20", "train.batch=8", "train.eval_every=10",
              "train.progress=false", "eval.rollout_steps=2", "eval.transfer_n=0", "eval.speed=false",
              f"train.out_dir={tmp_path}"]:
        sets += ["--set", s]
    _cli(["train", "heat", "--json"] + sets)
    model = Surrogate.load(tmp_path / "checkpoint.h5")
    assert model.kind == "conditioned" and model.dim == 1 and model.grid_shape == (16,)
    assert model.channels == ("kappa",)
    with h5py.File(tmp_path / "eval.h5", "r") as f:
        inputs, prediction = f["fields/input"][:, 0, :], f["fields/prediction"][:, 0, :]
        kappa = f["fields/channels/kappa"][:, 0, :]
    assert np.all(kappa > 0) and np.allclose(kappa.max(axis=1) / kappa.min(axis=1), 5.0)  # every sample's contrast
    # The evaluation predicted all 8 test samples in one batch, this call the first 4 of eval.h5: the conditioned
    # kind's per-sample attention gemms then round differently (float32), so equal to float32 accuracy.
    np.testing.assert_allclose(model.predict(inputs, kappa=kappa), prediction, rtol=1e-5, atol=1e-6)


def test_3d_checkpoint_of_the_cli_loads_and_predicts_eval_numbers(tmp_path):
    """A 3D run of `attnphys train heat` (data.dim = 3, a log-normal κ family, the conditioned kind with its local
    stencil and one attention head): Surrogate.load gives a 3D model on the (nz, ny, nx) grid, predicts eval.h5's
    numbers from the [samples, nz, ny, nx] inputs and κ the evaluation saved, and refuses 2D fields."""
    h5py = pytest.importorskip("h5py")
    sets = []
    for s in ["data.dim=3", "data.n=8", "data.n_train=16", "data.n_val=4", "data.n_test=4", "data.length_scale=0.25",
              "data.horizon_ftcs_steps=4", "data.reference_substeps=4", "model.kernel_heads=1", "model.kernel_dk=4",
              "model.local_radius=1", "model.harmonics=2", "model.d_model=8", "train.steps=20", "train.batch=4",
              "train.eval_every=10", "train.progress=false", "eval.rollout_steps=2", "eval.transfer_n=0",
              "eval.speed=false", f"train.out_dir={tmp_path}"]:
        sets += ["--set", s]
    _cli(["train", "heat", "--json"] + sets)
    model = Surrogate.load(tmp_path / "checkpoint.h5")
    assert model.kind == "conditioned" and model.dim == 3 and model.grid_shape == (8, 8, 8)
    assert model.channels == ("kappa",) and len(model.lengths) == 3
    with h5py.File(tmp_path / "eval.h5", "r") as f:
        inputs, prediction = f["fields/input"][()], f["fields/prediction"][()]
        kappa = f["fields/channels/kappa"][()]
    assert inputs.shape == (4, 8, 8, 8) and kappa.shape == inputs.shape
    assert np.allclose(kappa.max(axis=(1, 2, 3)) / kappa.min(axis=(1, 2, 3)), 5.0)  # the family's contrast
    np.testing.assert_allclose(model.predict(inputs, kappa=kappa), prediction, rtol=1e-5, atol=1e-6)
    one = model.predict(inputs[0], kappa=kappa[0])  # one field [nz, ny, nx]
    assert one.shape == (8, 8, 8)
    with pytest.raises(attnphys.Error, match=r"\[samples, nz, ny, nx\]"):
        model.predict(inputs[:, 0, 0], kappa=kappa[:, 0, 0])


def test_a_time_schedule_decays_over_the_wall_clock_budget():
    """schedule_clock="time": the cosine spans max_seconds, not steps; the run stops at the budget with the learning
    rate near its floor (min_lr_ratio * lr), and decays monotonically after the warm-up."""
    u0 = attnphys.heat.initial_conditions((N,), H, count=48, seed=3)
    u1 = np.stack([attnphys.heat.solve(u, DT, H) for u in u0])
    lrs = []
    h = Trainer(Surrogate("kernel", dim=1), steps=10**7, batch=8, lr=1e-2, warmup_steps=5, min_lr_ratio=0.05,
                max_seconds=1.5, schedule_clock="time", restore_best=False,
                callback=lambda s, i: lrs.append((s, i["lr"], i["seconds"]))).fit(u0[:40], u1[:40])
    assert h["stopped_at_time_limit"] and 10 < len(lrs) < 10**7
    after = [lr for s, lr, _ in lrs if s > 5]
    assert all(a >= b for a, b in zip(after, after[1:]))
    assert lrs[4][1] == pytest.approx(1e-2 * (0.05 + 0.475 * (1 + np.cos(np.pi * lrs[4][2] / 1.5))), rel=0.05)
    assert after[-1] < 1e-2 * 0.15 and after[0] > 1e-2 * 0.9
    with pytest.raises(attnphys.Error, match="max_seconds"):
        Trainer(Surrogate("kernel", dim=1), steps=10, schedule_clock="time").fit(u0[:40], u1[:40])
    with pytest.raises(attnphys.Error, match="schedule_clock"):
        Trainer(Surrogate("kernel", dim=1), schedule_clock="wall")


def test_horizon_input_learns_two_horizons():
    """dt_input: one model for tau = 1 and 2 base horizons; predict(tau=2) follows the longer horizon."""
    n, dt = 32, 25.0 / (32 * 32 * 2)
    x, y1 = attnphys.heat.generate_pairs((n,), 1.0 / n, count=48, seed=6, delta_t=dt)
    _, y2 = attnphys.heat.generate_pairs((n,), 1.0 / n, count=48, seed=6, delta_t=2 * dt)
    model = Surrogate("kernel", n_heads=2, d_k=8, dim=1, dt_input=True)
    Trainer(model, steps=200, batch=16).fit(np.concatenate([x[:40], x[:40]]), np.concatenate([y1[:40], y2[:40]]),
                                            tau=np.repeat([1.0, 2.0], 40))
    e1 = _rel_l2(model.predict(x[40:], tau=1.0), y1[40:]).mean()
    e2 = _rel_l2(model.predict(x[40:], tau=2.0), y2[40:]).mean()
    wrong = _rel_l2(model.predict(x[40:], tau=1.0), y2[40:]).mean()
    assert e1 < 0.3 * _rel_l2(x[40:], y1[40:]).mean() and e2 < 0.5 * wrong, (e1, e2, wrong)
    with pytest.raises(attnphys.Error, match="tau must hold positive finite horizons"):
        model.predict(x[40:], tau=-1.0)


def test_unrolled_training_on_trajectories():
    """Trainer(unroll=K): targets [samples, K, nx]; a curriculum as long as the fit is one-step training (the same
    parameters as unroll=1); unrolled steps differ; one-step targets, too short trajectories and bad options are
    refused with what to pass."""
    n, dt = 32, 25.0 / (32 * 32 * 2)
    x = attnphys.heat.generate_pairs((n,), 1.0 / n, count=24, seed=8, delta_t=dt)[0]
    traj = np.stack([attnphys.heat.generate_pairs((n,), 1.0 / n, count=24, seed=8, delta_t=k * dt)[1]
                     for k in (1, 2, 3)], axis=1)  # [24, 3, 32]: 1, 2, 3 horizons after x

    def fit(**kw):
        model = Surrogate("kernel", n_heads=2, d_k=8, dim=1)
        h = Trainer(model, steps=12, batch=8, eval_every=6, restore_best=False, **kw).fit(
            x[:16], traj[:16], val=(x[16:], traj[16:]))
        return model, h

    plain, _ = fit()
    np.testing.assert_array_equal(fit(unroll=3, unroll_warmup_steps=12)[0]._m.parameters(), plain._m.parameters())
    for grad in ("full", "last"):
        m, h = fit(unroll=3, unroll_grad=grad)
        assert not np.array_equal(m._m.parameters(), plain._m.parameters()) and len(h["val_rel_l2"]) == 2
    with pytest.raises(attnphys.Error, match=r"unroll=3 trains on trajectories: pass targets of shape \(16, 3, 32\)"):
        Trainer(Surrogate("kernel", dim=1), steps=2, unroll=3).fit(x[:16], traj[:16, 0])
    with pytest.raises(attnphys.Error, match="holds? 3 per sample"):
        Trainer(Surrogate("kernel", dim=1), steps=2, unroll=4).fit(x[:16], traj[:16])
    with pytest.raises(attnphys.Error, match="unroll_grad='all' is not one of full, last"):
        Trainer(Surrogate("kernel", dim=1), unroll_grad="all")
    with pytest.raises(attnphys.Error, match="unroll must be >= 1"):
        Trainer(Surrogate("kernel", dim=1), unroll=0)


def test_unrolled_training_from_a_file_needs_enough_snapshots(lognormal_file):
    _, path = lognormal_file  # 2 snapshots per sample: one-step pairs only
    model = Surrogate("transformer", d_model=16, n_heads=2, d_ff=32, channels=("kappa",))
    with pytest.raises(attnphys.Error, match="unroll = 2 needs trajectories of 2 horizons.*needs at least 3"):
        Trainer(model, steps=2, unroll=2).fit(path, channels=["kappa"])


def test_file_that_does_not_fit_the_model(lognormal_file):
    _, path = lognormal_file
    with pytest.raises(attnphys.Error, match=r"the file holds 2D fields but the model is 1D: build it with "
                                             r"Surrogate\(dim=2\)"):
        Trainer(Surrogate(dim=1, channels=("kappa",)), steps=2).fit(path)
    with pytest.raises(attnphys.Error, match=r"the file's box is 1 x 1 \(from its coordinates\) but the model was "
                                             r"built with lengths=\(2, 1\): build it with Surrogate\(lengths=\(1, 1\)\)"):
        Trainer(Surrogate(lengths=(2.0, 1.0), channels=("kappa",)), steps=2).fit(path)
    with pytest.raises(attnphys.Error, match=r"channels=\['nu'\] but the model was built with channels=\('kappa',\)"):
        Trainer(Surrogate(channels=("kappa",)), steps=2).fit(path, channels=["nu"])
    with pytest.raises(attnphys.Error, match="no dataset 'nu'"):
        Trainer(Surrogate(channels=("nu",)), steps=2).fit(path)
    with pytest.raises(attnphys.Error, match="n_train = 45 and n_val = 8 do not fit"):
        Trainer(Surrogate(channels=("kappa",)), steps=2).fit(path, n_train=45, n_val=8)
    with pytest.raises(attnphys.Error, match="a file holds its own targets"):
        Trainer(Surrogate(channels=("kappa",)), steps=2).fit(path, np.zeros((4, N, N)))


# ---------------------------------------------------------------------------------------------------- bad inputs

def test_bad_inputs_raise_attnphys_error_with_what_to_fix(problem, trained):
    u0, u1, kappa = problem
    model, _, _ = trained
    x, k = u0[:4], kappa[:4]
    E = attnphys.Error
    # Shapes: the expected and the given one.
    with pytest.raises(E, match=r"fields must be \[samples, ny, nx\] \(or one field \[ny, nx\]\) for this 2D model "
                                r"\(the last axis x\), got shape \(256,\)"):
        model.predict(x.reshape(4, -1)[0], kappa=k[0])
    with pytest.raises(E, match=r"got shape \(4, 16, 16, 1\)"):
        model.predict(x[..., None], kappa=k)
    with pytest.raises(E, match=r"targets have shape \(4, 16, 8\) but inputs \(4, 16, 16\)"):
        Trainer(model, steps=1).fit(x, u1[:4, :, :8], channels={"kappa": k})
    # dtypes: integers are refused, not converted.
    with pytest.raises(E, match=r"fields has dtype int64 \(integer\); pass floating-point values"):
        model.predict(np.zeros((4, N, N), dtype=np.int64), kappa=k)
    with pytest.raises(E, match=r"channel 'kappa' has dtype bool"):
        model.predict(x, kappa=k > 1)
    with pytest.raises(E, match="complex"):
        Trainer(model, steps=1).fit(x.astype(complex), u1[:4], channels={"kappa": k})
    # NaN / inf in fields and channels: the count and the first index.
    bad = x.copy()
    bad[2, 3, 5] = np.nan
    with pytest.raises(E, match=r"fields holds 1 non-finite value\(s\) \(NaN or inf\), the first at index \(2, 3, 5\)"):
        model.predict(bad, kappa=k)
    badk = k.copy()
    badk[1, 0, 0] = np.inf
    with pytest.raises(E, match=r"channel 'kappa' holds 1 non-finite"):
        model.predict(x, kappa=badk)
    with pytest.raises(E, match=r"targets holds 1 non-finite"):
        Trainer(model, steps=1).fit(x, bad, channels={"kappa": k})
    # Channels: missing, unknown, given twice, wrong shape or sample count.
    with pytest.raises(E, match=r"the model was trained with the channel\(s\) \('kappa',\) and needs 'kappa'"):
        model.predict(x)
    with pytest.raises(E, match=r"unknown channel 'nu': the model takes \('kappa',\)"):
        model.predict(x, channels={"kappa": k, "nu": k})
    with pytest.raises(E, match=r"unknown channel 'kappa': the model takes no channels"):
        Trainer(Surrogate(), steps=1).fit(x, u1[:4], channels={"kappa": k})
    with pytest.raises(E, match=r"channels must be a dict \{name: array\}"):
        Trainer(model, steps=1).fit(x, u1[:4], channels=k)
    with pytest.raises(E, match="given twice"):
        model.predict(x, kappa=k, channels={"kappa": k})
    with pytest.raises(E, match=r"channel 'kappa' must have the fields' shape \(4, 16, 16\) \(or one grid \(16, 16\) "
                                r"for every sample\), got \(3, 16, 16\)"):
        model.predict(x, kappa=k[:3])
    with pytest.raises(E, match=r"tau must be a number or 4 values"):
        model.predict(x, kappa=k, tau=[1.0, 1.0])
    with pytest.raises(E, match="has no horizon input"):
        model.predict(x, kappa=k, tau=2.0)
    # Grids: coordinates of the wrong shape or outside the model's box.
    with pytest.raises(E, match=r"coords must be \(256, 2\) or \(16, 16, 2\)"):
        model.predict(x, kappa=k, coords=np.zeros((256, 1)))
    coords = np.stack(np.meshgrid(np.arange(N) / 8.0, np.arange(N) / 16.0), axis=-1)  # x spans [0, 1.875]
    with pytest.raises(E, match=r"coords along x span \[0, 1.875\], outside the model's box \[0, 1\]"):
        model.predict(x, kappa=k, coords=coords)
    with pytest.raises(E, match="not been trained"):
        Surrogate().predict(x)
    # The 2D model given 1D fields, 1D model given 2D fields.
    with pytest.raises(E, match=r"inputs must be \[samples, nx\] for this 1D model .* got shape \(4, 16, 16\)"):
        Trainer(Surrogate(dim=1), steps=1).fit(x, u1[:4])
    with pytest.raises(E, match=r"val must be \(inputs, targets\) or \(inputs, targets, channels\)"):
        Trainer(model, steps=1).fit(x, u1[:4], channels={"kappa": k}, val=x)


def test_bad_options_raise_attnphys_error_with_what_to_fix():
    E = attnphys.Error
    with pytest.raises(E, match=r"unknown option 'd_modle'; did you mean 'd_model'\?"):
        Surrogate(d_modle=16)
    with pytest.raises(E, match="kind='fno' is not one of transformer, kernel"):
        Surrogate("fno")
    with pytest.raises(E, match=r"d_model must be an integer, got 16.5"):
        Surrogate(d_model=16.5)
    with pytest.raises(E, match=r"d_model \(30\) must be a multiple of n_heads \(4\)"):
        Surrogate(d_model=30)
    with pytest.raises(E, match=r"attention.*'flash' is not one of"):
        Surrogate(attention="flash")
    with pytest.raises(E, match=r"stencil=True applies to kind='transformer', not kind='kernel'"):
        Surrogate("kernel", stencil=True)
    with pytest.raises(E, match=r"d_model=64 applies to kind='transformer', not kind='kernel'"):
        Surrogate("kernel", d_model=64)
    with pytest.raises(E, match=r"kind = kernel is linear in the field and cannot take extra input channels"):
        Surrogate("kernel", channels=("kappa",))
    with pytest.raises(E, match=r"dtype='float64' is not available"):
        Surrogate(dtype="float64")
    with pytest.raises(E, match=r"lengths has 1 value\(s\) for a 2D model"):
        Surrogate(lengths=(1.0,))
    with pytest.raises(E, match="bc='wall' is not one of periodic, dirichlet, neumann"):
        Surrogate(bc="wall")
    with pytest.raises(E, match="dim must be 1, 2 or 3, got 4"):
        Surrogate(dim=4)
    m = Surrogate()
    with pytest.raises(E, match=r"unknown option 'learning_rate'"):
        Trainer(m, learning_rate=1e-3)
    with pytest.raises(E, match="optimizer='lbfgs' is not one of adamw, adam, sgd"):
        Trainer(m, optimizer="lbfgs")
    with pytest.raises(E, match="schedule='cosin' is not one of cosine, constant; did you mean 'cosine'"):
        Trainer(m, schedule="cosin")
    with pytest.raises(E, match="loss='mse' is not one of relative_l2, relative_h1"):
        Trainer(m, loss="mse")
    with pytest.raises(E, match=r"lr must be a finite number > 0"):
        Trainer(m, lr=0.0)
    with pytest.raises(E, match="warmup_steps=50 exceeds steps=10"):
        Trainer(m, steps=10, warmup_steps=50)
    with pytest.raises(E, match="callback must be callable"):
        Trainer(m, callback=3)
    with pytest.raises(E, match="model must be an attnphys.operator.Surrogate"):
        Trainer("transformer")


def test_callback_exceptions_propagate_and_leave_a_usable_model(problem):
    u0, u1, _ = problem

    def stop(step, info):
        if step == 3:
            raise KeyError("stop here")

    model = Surrogate(d_model=16, n_heads=2, d_ff=32)
    with pytest.raises(KeyError, match="stop here"):
        Trainer(model, steps=50, batch=8, callback=stop).fit(u0[:16], u1[:16])
    assert model.trained and np.all(np.isfinite(model.predict(u0[16:18])))
    # The next fit of the same model runs normally, and a callback may call predict on the model it trains.
    seen = []
    Trainer(model, steps=4, batch=8, callback=lambda s, i: seen.append(model.predict(u0[16]).shape)).fit(
        u0[:16], u1[:16])
    assert seen == [(N, N)] * 4
    with pytest.raises(attnphys.Error, match="already being trained"):
        Trainer(model, steps=2, batch=8,
                callback=lambda s, i: Trainer(model, steps=1).fit(u0[:8], u1[:8])).fit(u0[:16], u1[:16])


def test_training_releases_the_gil(problem):
    """Another Python thread keeps running while a fit trains in C++ (between two progress callbacks the GIL is
    free; were it held, the other thread could not tick)."""
    import threading
    import time

    u0, u1, _ = problem
    model = Surrogate(d_model=16, n_heads=2, d_ff=32)
    ticks, seen, done = [0], [], threading.Event()

    def train():
        Trainer(model, steps=30, batch=16, callback=lambda s, i: seen.append(ticks[0])).fit(u0[:32], u1[:32])
        done.set()

    t = threading.Thread(target=train)
    t.start()
    while not done.is_set() and t.is_alive():
        time.sleep(0.0005)
        ticks[0] += 1
    t.join()
    assert done.is_set() and len(seen) == 30
    assert seen[-1] - seen[0] >= 10, seen


def test_conserve_and_field_conditioning_on_nonlinear_heat():
    # u_t = div(kappa(u) grad u), kappa = 1 + 2u^2, periodic 12 x 12: no channel carries kappa, so the conditioned
    # operator is conditioned on the field itself (quasi-linear A(u) u); with conserve=True every prediction keeps
    # its input's mean exactly, as the periodic equation does.
    rng = np.random.default_rng(3)
    n, h, dt = 12, 1.0 / 12, 2.0 / 144 / 4
    x = np.zeros((48, n, n))
    k = np.fft.fftfreq(n) * n
    for s in range(48):
        spec = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
        spec *= np.exp(-0.5 * (k[:, None] ** 2 + k[None, :] ** 2) / 4.0)
        f = np.real(np.fft.ifft2(spec))
        x[s] = f / f.std() + 0.3 * rng.normal()
    law = {"law": "quadratic", "kappa0": 1.0, "beta": 2.0}
    y = np.stack([attnphys.heat.solve(x[s], dt, h, bc="periodic", kappa_law=law) for s in range(48)])
    model = Surrogate("conditioned", condition_on_field=True, conserve=True, n_heads=2, d_k=8)
    Trainer(model, steps=80, batch=8, lr=2e-2).fit(x[:40], y[:40])
    p = model.predict(x[40:])
    np.testing.assert_allclose(p.mean(axis=(1, 2)), x[40:].mean(axis=(1, 2)), atol=2e-6)
    err = np.linalg.norm((p - y[40:]).reshape(8, -1), axis=1) / np.linalg.norm(y[40:].reshape(8, -1), axis=1)
    ident = np.linalg.norm((x[40:] - y[40:]).reshape(8, -1), axis=1) / np.linalg.norm(y[40:].reshape(8, -1), axis=1)
    assert err.mean() < 0.5 * ident.mean(), (err.mean(), ident.mean())
    with pytest.raises(attnphys.Error, match="condition_on_field"):
        Surrogate("transformer", condition_on_field=True)
