"""`attnphys dmrg`: one resolution step for its settings -- the config file, then --set, then the explicit flags,
the later winning -- and the JSON line of mps::DmrgRunResult::to_json."""
import json
import os
import subprocess

EXE = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")


def run_json(*args):
    r = subprocess.run([EXE, "dmrg", *args, "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_flags_win_over_set_and_file(tmp_path):
    # A chain large enough that the bond dimension reaches its limit: max_bond_dimension is the chi that ran.
    cfg = tmp_path / "f.toml"
    cfg.write_text('[model]\nmodel = "heisenberg"\nn = 20\nbc = "open"\n\n[dmrg]\nchi = 20\nsweeps = 4\n'
                   'variance = false\n')
    assert run_json("--config", str(cfg))["max_bond_dimension"] == 20          # the file
    assert run_json("--config", str(cfg), "--chi", "50")["max_bond_dimension"] == 50  # the flag over the file
    assert run_json("--config", str(cfg), "--set", "dmrg.chi=30")["max_bond_dimension"] == 30  # --set over the file
    # The flag over --set, whatever their order on the command line.
    assert run_json("--chi", "50", "--config", str(cfg), "--set", "dmrg.chi=30")["max_bond_dimension"] == 50
    # Model flags too: --n over the file's n.
    r = run_json("--config", str(cfg), "--n", "12", "--chi", "8")
    assert r["model"].startswith("heisenberg n=12 ") and len(r["entropies"]) == 11
    assert r["max_bond_dimension"] == 8


def test_saved_configuration_records_the_resolved_values(tmp_path):
    import h5py
    cfg = tmp_path / "f.toml"
    cfg.write_text('[model]\nmodel = "xxz"\ndelta = 0.5\nn = 10\n\n[dmrg]\nchi = 4\n')
    out = tmp_path / "psi.h5"
    r = run_json("--config", str(cfg), "--chi", "6", "--delta", "0.25", "--save", str(out))
    assert r["max_bond_dimension"] == 6 and r["symmetry"] == "u1"
    with h5py.File(out, "r") as f:
        text = f.attrs["config"]
        text = text.decode() if isinstance(text, bytes) else str(text)
    assert "chi = 6" in text and "delta = 0.25" in text and str(out) in text


def test_json_has_the_run_result_fields():
    r = run_json("--model", "heisenberg", "--n", "10", "--chi", "16")
    for key in ("model", "energy", "variance", "max_bond_dimension", "truncation_error", "sweeps", "converged",
                "convergence_reason", "energy_change", "symmetry", "davidson_products_last_sweep", "seconds",
                "measure_seconds", "entropy_mid", "entropies", "magnetization", "sweep_energies",
                "bond_dimensions", "n_parameters"):
        assert key in r, key
    assert abs(r["energy"] - (-4.258035207)) < 1e-8  # open Heisenberg N = 10 (ED)
    assert r["n_parameters"] == sum(2 * a * b for a, b in zip([1] + r["bond_dimensions"], r["bond_dimensions"] + [1]))


def test_a_bad_flag_value_is_refused_with_the_key():
    r = subprocess.run([EXE, "dmrg", "--model", "heisenberg", "--n", "8", "--chi", "0"], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "dmrg.chi" in r.stderr


def test_an_unconverged_run_warns_and_says_why_in_the_json():
    # Too few sweeps, and a fixed niter = 1 that stalls: converged false, the reason in the JSON and a warning on
    # stderr; a converged run says converged true with no reason and no warning.
    r = subprocess.run([EXE, "dmrg", "--model", "heisenberg", "--n", "40", "--chi", "16", "--sweeps", "2",
                        "--niter", "1", "--set", "dmrg.davidson_adaptive=false", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout.strip().splitlines()[-1])
    assert j["converged"] is False
    why = j["convergence_reason"]
    # Still noisy at the end (the ramp is cut short), and far from an eigenstate: the variance goal is missed.
    assert "the last sweep still had noise" in why and "raise --sweeps" in why
    assert "above the goal" in why and "(dmrg.variance_tol)" in why and j["variance"] > 1e-3
    assert "warning: DMRG did not converge: " + j["convergence_reason"] in r.stderr
    ok = subprocess.run([EXE, "dmrg", "--model", "xxz", "--delta", "0.5", "--n", "12", "--chi", "64", "--json"],
                        capture_output=True, text=True)
    g = json.loads(ok.stdout.strip().splitlines()[-1])
    assert g["converged"] is True and g["convergence_reason"] is None and "did not converge" not in ok.stderr
    # XXZ Delta = 0.5, N = 12 open: ED -4.33814833092708 (`attnphys ed --model xxz --delta 0.5 --n 12 --bc open`).
    assert abs(g["energy"] - (-4.33814833092708)) < 1e-9 and g["variance"] < 1e-8
