"""The heat surrogate from Python: the bindings and the command-line program give the same numbers."""
import json
import os
import subprocess

import numpy as np
import pytest

import attnphys
import attnphys.heat
import attnphys.training

TINY = [
    "data.dim=1", "data.n=16", "data.n_train=32", "data.n_val=8", "data.n_test=8", "data.length_scale=0.15",
    "model.kernel_heads=2", "model.kernel_dk=6", "model.harmonics=3",
    "train.steps=12", "train.batch=8", "train.eval_every=6", "train.checkpoint_every=6", "train.progress=false",
    "eval.rollout_steps=2", "eval.rollout_samples=4", "eval.transfer_n=32", "eval.transfer_samples=4",
    "eval.speed=false", "family.kappa=constant", "model.kind=kernel", "optimizer.lr=0.03", "train.max_seconds=0",
    "train.unroll=1", "model.conserve=false",  # one-step, unconstrained (the main job adds pushforward and conserve)
]


def test_python_and_cli_agree(tmp_path):
    py = attnphys.training.train_heat("", TINY + [f"train.out_dir={tmp_path / 'py'}"])
    exe = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")
    args = [exe, "train", "heat", "--json"]
    for s in TINY + [f"train.out_dir={tmp_path / 'cli'}"]:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    cli = json.loads(out.strip().splitlines()[-1])
    for key in ["test_rel_l2", "final_train_loss", "rollout10_rel_l2", "transfer_rel_l2", "n_parameters"]:
        if py[key] is None:
            assert cli[key] is None
        else:
            assert cli[key] == pytest.approx(py[key], rel=1e-6, abs=1e-12), key
    # The run directory holds what the plotting script reads.
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "py" / "eval.h5", "r") as f:
        w = f["attention/weights"][()]
        assert w.shape == (1, 16)
        assert np.isclose(w.sum(), 1.0, atol=1e-5)  # softmax rows are distributions
        assert f["fields/prediction"].shape == (4, 1, 16)
        # The training metrics are in the HDF5 file too, equal to metrics.csv.
        table = f["metrics/table"][()]
        cols = f["metrics/table"].attrs["columns"]
        cols = (cols.decode() if isinstance(cols, bytes) else cols).split(",")
        csv = np.genfromtxt(tmp_path / "py" / "metrics.csv", delimiter=",", names=True)
        assert table.shape == (12, len(cols))
        np.testing.assert_allclose(table[:, cols.index("train_loss")], csv["train_loss"], rtol=1e-8)


def test_bad_configuration_is_a_python_error(tmp_path):
    with pytest.raises(attnphys.Error, match="did you mean 'train.steps'"):
        attnphys.training.train_heat("", ["train.stesp=3"])
    with pytest.raises(attnphys.Error, match="out of range"):
        attnphys.training.train_heat("", ["data.n_train=0"])
    with pytest.raises(attnphys.Error, match="does not exist|not an HDF5"):
        attnphys.training.evaluate_heat(str(tmp_path / "missing.h5"))


def test_train_from_a_dataset_file(tmp_path):
    """data.file: the pairs come from a file of `attnphys heat dataset` (here written through attnphys.heat)."""
    path = tmp_path / "heat_1d.h5"
    # 48 samples = n_train + n_val + n_test of TINY; 25 explicit stability limits per horizon, as generated runs use.
    attnphys.heat.write_dataset(path, [16], 1.0 / 16, samples=48, nt=2, delta_t=25.0 / (16 * 16 * 2), seed=2,
                                length_scale=0.15)
    r = attnphys.training.train_heat("", TINY + [f"data.file={path}", f"train.out_dir={tmp_path / 'run'}"])
    assert np.isfinite(r["test_rel_l2"])
    assert len(r["rollout_rel_l2"]) == 2
    # The pairs are the file's: the generator's seed changes nothing but the generated transfer fields...
    r7 = attnphys.training.train_heat("", TINY + [f"data.file={path}", "data.seed=7",
                                                  f"train.out_dir={tmp_path / 'run7'}"])
    for key in ["test_rel_l2", "final_train_loss", "best_val_rel_l2", "rollout10_rel_l2"]:
        assert r7[key] == r[key], key
    # ...while pairs generated from that seed give another run.
    g = attnphys.training.train_heat("", TINY + ["data.seed=7", f"train.out_dir={tmp_path / 'gen'}"])
    assert g["final_train_loss"] != r["final_train_loss"]
    # Grid and file problems are Python errors that say what to change.
    with pytest.raises(attnphys.Error, match="set data.n = 16"):
        attnphys.training.train_heat("", TINY + [f"data.file={path}", "data.n=32", f"train.out_dir={tmp_path / 'x'}"])
    with pytest.raises(attnphys.Error, match="does not exist"):
        attnphys.training.train_heat("", TINY + [f"data.file={tmp_path / 'missing.h5'}",
                                                 f"train.out_dir={tmp_path / 'y'}"])
    with pytest.raises(attnphys.Error, match="holds 48 samples"):
        attnphys.training.train_heat("", TINY + [f"data.file={path}", "data.n_train=64",
                                                 f"train.out_dir={tmp_path / 'z'}"])


def test_two_horizons_with_the_horizon_input(tmp_path):
    r = attnphys.training.train_heat("", TINY + ["data.horizons=[1, 2]", "model.dt_input=true",
                                                "train.steps=40", f"train.out_dir={tmp_path / 'h'}"])
    assert len(r["test_rel_l2_by_horizon"]) == 2
    assert r["test_rel_l2_by_horizon"][0] == pytest.approx(r["test_rel_l2"], rel=1e-9)
    with pytest.raises(attnphys.Error, match="model.dt_input"):
        attnphys.training.train_heat("", TINY + ["data.horizons=[1, 2]", f"train.out_dir={tmp_path / 'b'}"])
