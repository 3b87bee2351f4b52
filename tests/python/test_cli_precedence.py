"""`attnphys ed`, `vmc` and `train heat` resolve their settings in one step, as `attnphys dmrg` does
(test_dmrg_cli.py): the config file, then --set, then the explicit flags, the later winning, whatever their order
on the command line. Defaults that follow other options (VMC's sector, the training schedule) follow the resolved
values, wherever those came from. --print-config shows the resolved configuration without running the job."""
import json
import os
import subprocess
import tomllib

import pytest

EXE = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")


def run(*args):
    r = subprocess.run([EXE, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def resolved(*args):
    return tomllib.loads(run(*args, "--print-config"))


def ed_json(*args):
    return json.loads(run("ed", *args, "--json").strip().splitlines()[-1])


def test_ed_flags_win_over_set_and_file(tmp_path):
    cfg = tmp_path / "f.toml"
    cfg.write_text('[model]\nmodel = "heisenberg"\nn = 8\nbc = "periodic"\n\n[ed]\nn_states = 2\n')
    r = ed_json("--config", str(cfg))
    assert (r["model"], r["n"], r["bc"], len(r["energies"])) == ("heisenberg", 8, "periodic", 2)
    assert ed_json("--config", str(cfg), "--set", "model.n=10")["n"] == 10             # --set over the file
    assert ed_json("--n", "6", "--config", str(cfg), "--set", "model.n=10")["n"] == 6  # the flag over both
    r = ed_json("--config", str(cfg), "--n-states", "3", "--model", "xxz", "--delta", "0.5")
    assert (r["model"], r["delta"], len(r["energies"])) == ("xxz", 0.5, 3)
    # The 8-site periodic Heisenberg ring: E0 = -3.651093408937 (exact).
    assert abs(ed_json("--config", str(cfg))["energy"] + 3.651093408937) < 1e-9
    c = resolved("ed", "--config", str(cfg), "--set", "ed.n_states=4", "--bc", "open")
    assert c["model"]["bc"] == "open" and c["ed"]["n_states"] == 4 and c["model"]["n"] == 8


def test_vmc_flags_win_over_set_and_file(tmp_path):
    cfg = tmp_path / "f.toml"
    cfg.write_text('[model]\nmodel = "heisenberg"\nn = 8\n\n[ansatz]\nkind = "mps"\n\n[mps]\nchi = 3\n\n'
                   '[sampler]\nn_samples = 128\n')
    c = resolved("vmc", "--config", str(cfg))
    assert (c["model"]["n"], c["ansatz"]["kind"], c["mps"]["chi"], c["sampler"]["n_samples"]) == (8, "mps", 3, 128)
    c = resolved("vmc", "--config", str(cfg), "--set", "mps.chi=5", "--set", "sampler.n_samples=256")
    assert (c["mps"]["chi"], c["sampler"]["n_samples"]) == (5, 256)
    c = resolved("vmc", "--chi", "7", "--samples", "512", "--config", str(cfg), "--set", "mps.chi=5",
                 "--set", "sampler.n_samples=256")
    assert (c["mps"]["chi"], c["sampler"]["n_samples"]) == (7, 512)
    assert resolved("vmc", "--config", str(cfg), "--set", "ansatz.kind=rbm", "--ansatz", "transformer")[
        "ansatz"]["kind"] == "transformer"


def test_vmc_model_dependent_defaults_follow_the_resolved_model(tmp_path):
    cfg = tmp_path / "f.toml"
    cfg.write_text('[model]\nmodel = "heisenberg"\nn = 8\nbc = "open"\n\n[vmc]\nn_iter = 30\n')
    c = resolved("vmc", "--config", str(cfg))
    assert c["sampler"]["fixed_sz"] is True and c["transformer"]["marshall_sign"] is True
    assert c["vmc"]["diag_shift_steps"] == 20 and c["mps"]["periodic"] is False
    # The same default whether n came from the file, --set or the flag: odd N has no 2Sz = 0 sector.
    for extra in (["--set", "model.n=9"], ["--n", "9"]):
        assert resolved("vmc", "--config", str(cfg), "--ansatz", "rbm", *extra)["sampler"]["fixed_sz"] is False
    c = resolved("vmc", "--config", str(cfg), "--model", "tfim", "--bc", "periodic", "--iters", "60")
    assert c["sampler"]["fixed_sz"] is False and c["transformer"]["marshall_sign"] is False
    assert c["vmc"]["diag_shift_steps"] == 40 and c["mps"]["periodic"] is True
    # A key given explicitly is kept, from any source.
    assert resolved("vmc", "--config", str(cfg), "--set", "sampler.fixed_sz=false")["sampler"]["fixed_sz"] is False


def test_dmrg_resolves_the_same_way(tmp_path):
    # The run itself is tested in test_dmrg_cli.py; here the resolved configuration, as for ed and vmc.
    cfg = tmp_path / "f.toml"
    cfg.write_text('[model]\nmodel = "xxz"\nn = 12\n\n[dmrg]\nchi = 20\nsave = "a.h5"\n')
    c = resolved("dmrg", "--config", str(cfg), "--set", "dmrg.chi=30", "--chi", "50", "--delta", "0.25",
                 "--save", "b \"c\".h5")
    assert (c["dmrg"]["chi"], c["model"]["delta"], c["model"]["n"], c["dmrg"]["save"]) == (50, 0.25, 12, 'b "c".h5')
    assert resolved("dmrg", "--config", str(cfg), "--set", "dmrg.chi=30")["dmrg"]["chi"] == 30


def test_train_set_wins_over_file_and_schedule_follows(tmp_path):
    cfg = tmp_path / "f.toml"
    cfg.write_text("[train]\nsteps = 40\n")
    c = resolved("train", "heat", "--config", str(cfg))
    assert c["train"]["steps"] == 40 and c["schedule"]["total_steps"] == 40
    c = resolved("train", "heat", "--set", "train.steps=60", "--config", str(cfg))
    assert c["train"]["steps"] == 60 and c["schedule"]["total_steps"] == 60
    cfg.write_text("[train]\nsteps = 40\n\n[schedule]\ntotal_steps = 100\n")
    assert resolved("train", "heat", "--config", str(cfg), "--set", "train.steps=60")["schedule"]["total_steps"] == 100


@pytest.mark.parametrize("args,needle", [
    (["vmc", "--model", "heisenberg", "--n", "1"], "option 'model.n' (from --n) = 1 is out of range"),
    (["vmc", "--set", "vmc.optimizer=adamw"], "'adamw' is not one of: sr, pxp, minsr, adam; did you mean 'adam'?"),
    (["ed", "--n", "x"], "option 'model.n' (from --n) expects an integer"),
])
def test_a_bad_value_names_the_key_and_the_choices(args, needle):
    r = subprocess.run([EXE, *args, "--print-config"], capture_output=True, text=True)
    assert r.returncode != 0 and needle in r.stderr, r.stderr
