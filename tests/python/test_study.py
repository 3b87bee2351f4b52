"""The transformer-versus-MPS study command (python/scripts/compare_study.py, issue 20) on a tiny case: N = 6, two
transformer sizes, two seeds, a few iterations.

- an uninterrupted run writes every table (points, P(eps, N), fits) with the documented columns, its P(eps, N)
  follows from the points, and no temporary file is left;
- a run killed with SIGKILL in the middle of a VMC point, then started again, skips the points it had finished
  (their files untouched, "skip" in study.log), resumes the interrupted one from its checkpoint ("resume" in
  study.log), and ends with the same energies as the uninterrupted run, point for point;
- the tables are written atomically: a write that fails half-way leaves the previous table whole and no temporary;
- two studies on one folder share its points (each point held by the process running it), and --jobs runs points
  side by side with the same results.
"""
import csv
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

BUILD = os.environ.get("ATTNPHYS_BUILD_DIR", "build")
EXE = os.path.abspath(os.path.join(BUILD, "bin", "attnphys"))
SRC = os.environ.get("ATTNPHYS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "python", "scripts", "compare_study.py")
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", ATTNPHYS_NUM_THREADS="1")

pytestmark = pytest.mark.skipif(not os.path.exists(EXE), reason="attnphys CLI not built")

pytest.importorskip("h5py")

TINY = ["--cli", EXE, "--n", "6", "--chains", "tfim", "--sizes", "xs", "s", "--seeds", "1", "2",
        "--dmrg-chi", "1,2,4", "--vmc-chi", "2", "--eps", "1e-2", "1e-3", "--samples", "128",
        "--final-samples", "1024", "--window", "5", "--shift-steps", "10", "--checkpoint-every", "2", "--no-plots"]


def study(out, extra=(), max_iters=60):
    return [sys.executable, SCRIPT] + TINY + ["--max-iters", str(max_iters), "--out", str(out)] + list(extra)


def load_module():
    spec = importlib.util.spec_from_file_location("compare_study", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def energies(out):
    """Every point's energy and iterations, by key (not its times)."""
    res = {}
    for name in sorted(os.listdir(os.path.join(out, "points"))):
        with open(os.path.join(out, "points", name)) as f:
            p = json.load(f)
        if p["ansatz"] == "dmrg":
            res[p["key"]] = [r["energy"] for r in p["rows"]]
        else:
            res[p["key"]] = (p["energy"], p["energy_error"], p["iterations"], p["converged"], p["params"])
    return res


def no_temporaries(out):
    left = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if ".tmp" in f]
    assert not left, left


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("study_ref")
    subprocess.run(study(out), check=True, env=ENV, stdout=subprocess.PIPE)
    return out


def test_study_writes_every_table_with_its_columns(reference_run):
    out = reference_run
    for name in ("points.csv", "points.md", "p_of_n.csv", "p_of_n.md", "fits.csv", "fits.md", "study.log"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    no_temporaries(out)
    p = read_csv(os.path.join(out, "p_of_n.csv"))
    assert list(p[0].keys())[:6] == ["chain", "ansatz", "n", "eps", "params", "seeds"]
    # One row per ansatz and eps; the VMC ansätze ran every seed.
    assert {(r["ansatz"], float(r["eps"])) for r in p} == {(a, e) for a in ("dmrg", "vmc_mps", "transformer")
                                                           for e in (1e-2, 1e-3)}
    assert all(r["seeds"] == ("1" if r["ansatz"] == "dmrg" else "2") for r in p)
    assert all(r["complete"] == "true" for r in p)  # every planned size and seed ran
    pts = read_csv(os.path.join(out, "points.csv"))
    tr = [r for r in pts if r["ansatz"] == "transformer"]
    assert len(tr) == 4 and len({r["params"] for r in tr}) == 2  # two sizes x two seeds
    # P(eps) of DMRG from its points: chi = 1 (a product state) misses 1e-2 on the critical TFIM, chi = 2 reaches
    # it, so P lies between their parameter counts (interpolated), and equals neither.
    d = sorted((int(r["params"]), float(r["relative_error"])) for r in pts if r["ansatz"] == "dmrg")
    assert d[0][1] > 1e-2 >= d[1][1], d
    row = next(r for r in p if r["ansatz"] == "dmrg" and float(r["eps"]) == 1e-2)
    assert row["bound"] == "interp" and d[0][0] < float(row["params"]) < d[1][0]
    # Every VMC point's relative error is that of its energy against the reference (ED/closed form at N = 6).
    for r in tr:
        assert abs(float(r["relative_error"]) - abs(float(r["energy"]) - float(r["reference"])) /
                   abs(float(r["reference"]))) < 1e-12


def test_interrupted_study_resumes_without_redoing_finished_points(reference_run, tmp_path):
    out = tmp_path / "study"
    # Start, and kill -9 the whole process group once the second transformer point has written a checkpoint.
    proc = subprocess.Popen(study(out), env=ENV, stdout=subprocess.DEVNULL, start_new_session=True)
    target = out / "work" / "tfim_n6_transformer_xs_s2.h5"
    t0 = time.time()
    while not target.exists() and proc.poll() is None and time.time() - t0 < 300:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {}
    for name in os.listdir(out / "points"):
        st = os.stat(out / "points" / name)
        finished[name] = (st.st_mtime_ns, (out / "points" / name).read_bytes())
    assert "tfim_n6_dmrg.json" in finished and "tfim_n6_transformer_xs_s1.json" in finished, finished.keys()
    # The point runs 60 iterations after its first checkpoint at iteration 2: the kill lands inside it.
    assert "tfim_n6_transformer_xs_s2.json" not in finished, "the kill came after the point had finished"
    # Every file the kill left is whole: the tables parse, the points are JSON.
    for name in finished:
        json.loads(finished[name][1])
    for name in ("points.csv", "p_of_n.csv"):
        if (out / name).exists():
            read_csv(out / name)

    subprocess.run(study(out), check=True, env=ENV, stdout=subprocess.PIPE)
    for name, (mtime, data) in finished.items():  # nothing finished was redone
        st = os.stat(out / "points" / name)
        assert st.st_mtime_ns == mtime and (out / "points" / name).read_bytes() == data, name
    log = (out / "study.log").read_text()
    second = log[log.rindex("study: "):]
    for name in finished:
        if name != "tfim_n6_dmrg.json":
            assert f"skip {name[:-5]}: finished before" in second, name
    assert "resume tfim_n6_transformer_xs_s2 from its checkpoint at iteration" in second, second
    # The resumed study ends where the uninterrupted one did, point for point (VMC resumes are bit-identical).
    assert energies(out) == energies(reference_run)
    no_temporaries(out)


def test_a_stop_signal_ends_the_running_point_and_says_so(tmp_path):
    """SIGTERM to the study command alone (not its group): the running attnphys ends too, study.log names it, the
    exit status is 128 + 15, and the next command resumes the point from its checkpoint."""
    out = tmp_path / "study"
    # No convergence stop (--window 0) and 400 iterations: the point is still running well after its first checkpoint.
    flags = ["--window", "0"]
    proc = subprocess.Popen(study(out, extra=flags, max_iters=400), env=ENV, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    target = out / "work" / "tfim_n6_transformer_xs_s1.h5"
    t0 = time.time()
    while not target.exists() and proc.poll() is None and time.time() - t0 < 300:
        time.sleep(0.005)
    assert proc.poll() is None, "the study ended before its first transformer checkpoint"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    log = (out / "study.log").read_text()
    last = log.strip().splitlines()[-1]
    assert "stopped by SIGTERM: 1 running point(s) ended (tfim_n6_transformer_xs_s1)" in last, last
    # No attnphys of this study is left running.
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        assert str(target) not in cmdline, f"pid {pid} still runs the point: {cmdline}"
    assert not (out / "points" / "tfim_n6_transformer_xs_s1.json").exists()
    subprocess.run(study(out, extra=flags + ["--sizes", "xs", "--seeds", "1"], max_iters=400), check=True, env=ENV,
                   stdout=subprocess.PIPE)
    second = (out / "study.log").read_text()
    assert "resume tfim_n6_transformer_xs_s1 from its checkpoint at iteration" in second[len(log):]
    assert (out / "points" / "tfim_n6_transformer_xs_s1.json").exists()


def test_tables_are_written_atomically(tmp_path, monkeypatch):
    mod = load_module()
    path = tmp_path / "p_of_n.csv"
    mod.write_atomic(str(path), "chain,ansatz\nold,table\n")

    class Boom(Exception):
        pass

    real_replace = os.replace

    def failing_replace(a, b):
        raise Boom()

    monkeypatch.setattr(mod.os, "replace", failing_replace)
    with pytest.raises(Boom):
        mod.write_atomic(str(path), "chain,ansatz\nnew,half")
    monkeypatch.setattr(mod.os, "replace", real_replace)
    assert path.read_text() == "chain,ansatz\nold,table\n"
    assert [p.name for p in tmp_path.iterdir()] == ["p_of_n.csv"]


def test_smallest_params_interpolates_log_log_and_marks_bounds():
    mod = load_module()
    pts = [(100, 1e-2), (1000, 1e-4)]
    p, bound = mod.smallest_params(pts, 1e-3)
    assert bound == "interp" and abs(p - 316.227766) < 1e-4  # half-way in log error: the geometric mean
    assert mod.smallest_params(pts, 1e-1) == (100.0, "upper")
    assert mod.smallest_params(pts, 1e-5) == (None, "none")
    # A fit of exact power laws recovers them, and their crossing.
    a, b, _ = mod.fit([16, 32, 64], [3 * 16 ** 1.5, 3 * 32 ** 1.5, 3 * 64 ** 1.5])
    assert abs(b - 1.5) < 1e-12 and abs(a - __import__("math").log(3)) < 1e-12


def test_a_vmc_point_reaches_eps_only_at_two_error_bars():
    mod = load_module()
    dmrg = {"key": "tfim_n6_dmrg", "chain": "tfim", "n": 6, "ansatz": "dmrg", "reference": -10.0,
            "rows": [{"chi": 2, "params": 40, "energy": -9.99, "seconds": 0.1}]}
    below = {"chain": "tfim", "n": 6, "ansatz": "transformer", "size": "xs", "chi": None, "seed": 1, "params": 500,
             "energy": -10.0003, "energy_error": 1e-4, "reference": -10.0, "relative_error": 3e-5, "iterations": 9,
             "converged": True, "seconds": 1.0, "train_seconds": 0.9}
    above = dict(below, seed=2, energy=-9.9997, relative_error=3e-5)
    # 10 standard errors below the exact energy (a frozen sampler): not variational, reaches nothing.
    frozen = dict(below, seed=3, size="s", params=400, energy=-10.001, relative_error=1e-4)
    # Above the exact energy, but its final estimate's chains accepted no move (frozen): reaches nothing either; a
    # chain that accepts a tenth of its moves is healthy.
    stuck = dict(above, seed=4, acceptance=0.0)
    healthy = dict(above, seed=5, acceptance=0.1)
    rows = {r.get("seed"): r for r in mod.point_rows([dmrg, below, above, frozen, stuck, healthy])}
    assert abs(rows[5]["error_bound"] - 5e-5) < 1e-15
    assert rows[3]["error_bound"] == math.inf and "10 standard errors below the exact -10" in rows[3]["failed"]
    assert rows[4]["error_bound"] == math.inf and "chains were frozen" in rows[4]["failed"]
    assert rows[None]["error_bound"] == rows[None]["relative_error"] and abs(rows[None]["error_bound"] - 1e-3) < 1e-15
    assert abs(rows[1]["error_bound"] - 2e-5) < 1e-15       # below exact: only the noise, 2 sigma
    assert abs(rows[2]["error_bound"] - 5e-5) < 1e-15       # above: its distance plus 2 sigma
    p = {r["eps"]: r for r in mod.p_of_n_rows(list(rows.values()), [1e-5, 3e-5]) if r["ansatz"] == "transformer"}
    assert p[1e-5]["bound"] == "none" and p[3e-5]["params"] == 500.0


def test_time_to_eps_leaves_out_the_steps_the_guard_rejected(tmp_path):
    # A log of a guarded run (vmc.guard_sigmas) whose iteration 2 was rejected with a wild estimate (-10.5, below the
    # reference -10): averaged in, it would put the window (-9.5, -10.5) right on the reference and eps would be
    # "reached" at 3 s. Left out (it still counts in the time), eps = 1e-2 is reached at 5 s and 1e-3 at 6 s.
    mod = load_module()
    log = tmp_path / "run.csv"
    rows = [(-9.0, 0), (-9.5, 0), (-10.5, 1), (-9.9, 0), (-9.99, 0), (-9.999, 0)]

    def write(with_column):
        with open(log, "w") as f:
            f.write("iteration,energy,seconds" + (",rejected" if with_column else "") + "\n")
            for i, (e, r) in enumerate(rows):
                f.write(f"{i},{e},1.0" + (f",{r}" if with_column else "") + "\n")

    write(True)
    total, first = mod.log_seconds(str(log), -10.0, [1e-2, 1e-3], 2)
    assert total == 6.0 and first == {1e-2: 5.0, 1e-3: 6.0}
    # An unguarded run's log (no column) takes every row.
    write(False)
    assert mod.log_seconds(str(log), -10.0, [1e-2, 1e-3], 2) == (6.0, {1e-2: 3.0, 1e-3: 3.0})


def test_a_diverged_point_is_recorded_and_the_study_goes_on(tmp_path):
    # vmc.lr = 1e4 makes every transformer run diverge at its first iteration: each point records it (the run would
    # diverge again on every attempt), reaches no eps, and the study ends normally with its tables.
    out = tmp_path / "study"
    cmd = study(out, ["--ansatze", "transformer", "--set", "vmc.lr=1e4"], max_iters=10)
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.PIPE)
    with open(out / "points" / "tfim_n6_transformer_xs_s1.json") as f:
        p = json.load(f)
    assert "diverged" in p["failed"] and p["energy"] is None and p["iterations"] == 1 and p["params"] > 0
    rows = read_csv(out / "p_of_n.csv")
    assert {r["bound"] for r in rows if r["ansatz"] == "transformer"} == {"none"}
    assert all("diverged" in r["failed"] for r in read_csv(out / "points.csv") if r["ansatz"] == "transformer")
    # Run again: the failed points count as finished.
    log = subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.PIPE, text=True).stdout
    assert "skip tfim_n6_transformer_s_s2: finished before" in log


def test_a_point_whose_step_guard_gives_up_is_recorded_as_diverged(tmp_path):
    # With the step guard on, lr = 1e4 gets every other step rejected until the guard gives up ("keeps diverging",
    # kGuardMaxRejections): the point records that, and the study goes on (it used to stop with the CLI's error).
    out = tmp_path / "study"
    cmd = study(out, ["--ansatze", "transformer", "--sizes", "xs", "--seeds", "1", "--window", "0",
                      "--set", "vmc.lr=1e4", "--set", "vmc.guard_sigmas=8", "--set", "vmc.guard_start=0"],
                max_iters=30)
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.PIPE)
    with open(out / "points" / "tfim_n6_transformer_xs_s1.json") as f:
        p = json.load(f)
    assert "keeps diverging" in p["failed"] and p["energy"] is None and p["params"] > 0
    assert 12 <= p["iterations"] < 30


def test_a_study_refuses_to_mix_points_made_with_other_settings(reference_run, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(reference_run, out)
    before = {n: (out / "points" / n).read_bytes() for n in os.listdir(out / "points")}
    r = subprocess.run(study(out, ["--window", "7"]), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert r.returncode != 0
    assert "was made with other settings (window: 5 there, 7 now)" in r.stderr, r.stderr
    assert {n: (out / "points" / n).read_bytes() for n in os.listdir(out / "points")} == before


def test_two_studies_on_one_folder_share_its_points(reference_run, tmp_path):
    # Two processes on one --out once ran the same points at once (2026-12-06): they wrote one checkpoint and one log,
    # and both crashed on the mixed log. Now each point is held by the process that runs it: a second study waits for
    # a DMRG point another is running (the VMC points need its reference), skips the VMC points another is running
    # and says which process holds them, and runs the rest.
    out = tmp_path / "study"
    os.makedirs(out / "work")
    mod = load_module()
    dmrg, _ = mod.try_hold(str(out / "work" / "tfim_n6_dmrg.lock"))
    xs2, _ = mod.try_hold(str(out / "work" / "tfim_n6_transformer_xs_s2.lock"))
    assert dmrg is not None and xs2 is not None
    assert mod.try_hold(str(out / "work" / "tfim_n6_dmrg.lock")) == (None, str(os.getpid()))
    cmd = study(out, ["--ansatze", "transformer", "--sizes", "xs"])
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL)
    t0 = time.time()
    while "wait for tfim_n6_dmrg" not in ((out / "study.log").read_text() if (out / "study.log").exists() else ""):
        assert proc.poll() is None and time.time() - t0 < 60, "the study did not wait for the DMRG point"
        time.sleep(0.01)
    assert not os.path.exists(out / "points" / "tfim_n6_dmrg.json")
    dmrg.close()  # the other study "finished" without writing it: this one runs it
    assert proc.wait(timeout=300) == 0
    log = (out / "study.log").read_text()
    assert f"skip tfim_n6_transformer_xs_s2: running in another study (pid {os.getpid()})" in log, log
    assert sorted(os.listdir(out / "points")) == ["tfim_n6_dmrg.json", "tfim_n6_transformer_xs_s1.json"]
    xs2.close()
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.PIPE)
    assert "start tfim_n6_transformer_xs_s2" in (out / "study.log").read_text().split("study: ")[-1]
    ref = energies(reference_run)
    assert energies(out) == {k: v for k, v in ref.items() if k in ("tfim_n6_dmrg", "tfim_n6_transformer_xs_s1",
                                                                   "tfim_n6_transformer_xs_s2")}
    no_temporaries(out)


def test_jobs_run_points_side_by_side_with_the_same_results(reference_run, tmp_path):
    out = tmp_path / "study"
    subprocess.run(study(out, ["--jobs", "2", "--threads", "1"]), check=True, env=ENV, stdout=subprocess.PIPE)
    assert energies(out) == energies(reference_run)  # a point's result does not depend on what runs beside it
    events = [line.split("] ", 1)[1].split(" ")[:2] for line in (out / "study.log").read_text().splitlines()
              if "] start " in line or "] done " in line]
    vmc = [e for e in events if "_dmrg" not in e[1]]
    assert vmc[0][0] == "start" and vmc[1][0] == "start", vmc  # two points began before either finished
    rows = [r for r in read_csv(out / "points.csv") if r["ansatz"] != "dmrg"]
    assert rows and all(r["threads"] == "1" and r["jobs"] == "2" for r in rows), rows
    assert all(r["threads"] == "" and r["jobs"] == "1" for r in read_csv(reference_run / "points.csv")
               if r["ansatz"] != "dmrg")
    for bad in (["--jobs", "0"], ["--threads", "-1"]):
        r = subprocess.run(study(tmp_path / "bad", bad), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        assert r.returncode == 2 and "take a positive integer" in r.stderr, r.stderr
    no_temporaries(out)


def test_tables_only_redraws_the_plots(reference_run, tmp_path):
    pytest.importorskip("matplotlib")
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(reference_run, out)
    cmd = [sys.executable, SCRIPT, "--tables-only", "--out", str(out), "--n", "6", "--sizes", "xs", "s", "--seeds",
           "1", "2", "--vmc-chi", "2", "--eps", "1e-2", "1e-3"]
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.PIPE)
    for name in ("p_of_n.png", "error_vs_params.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    no_temporaries(out)


def test_a_command_that_runs_a_subset_keeps_the_whole_plan(reference_run, tmp_path):
    """The tables judge "complete" against every size and seed any command on the folder asked for (plan.json), not
    against the last command's subset: with one point of size xs gone, a command for size s alone must not call the
    transformer rows complete."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(reference_run, out)
    assert json.loads((out / "plan.json").read_text()) == {"sizes": ["xs", "s"], "vmc_chi": [2], "seeds": [1, 2]}
    os.remove(out / "points" / "tfim_n6_transformer_xs_s2.json")
    subprocess.run(study(out, ["--ansatze", "transformer", "--sizes", "s", "--seeds", "1"]), check=True, env=ENV,
                   stdout=subprocess.PIPE)
    assert json.loads((out / "plan.json").read_text())["sizes"] == ["xs", "s"]  # not shrunk
    assert "start" not in (out / "study.log").read_text().split("--sizes s --seeds 1")[-1]  # all skipped
    tr = [r for r in read_csv(out / "p_of_n.csv") if r["ansatz"] == "transformer"]
    assert tr and all(r["complete"] == "false" for r in tr), tr
    # --tables-only judges against the stored plan too, whatever its own options say.
    cmd = [sys.executable, SCRIPT, "--tables-only", "--no-plots", "--out", str(out), "--sizes", "s", "--seeds", "1",
           "--eps", "1e-2", "1e-3"]
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.PIPE)
    assert all(r["complete"] == "false" for r in read_csv(out / "p_of_n.csv") if r["ansatz"] == "transformer")
    # A damaged plan is refused with what to do, and nothing is rewritten.
    (out / "plan.json").write_text("{")
    before = (out / "p_of_n.csv").read_bytes()
    r = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode != 0 and "plan.json is unreadable" in r.stderr and "delete it" in r.stderr, r.stderr
    assert (out / "p_of_n.csv").read_bytes() == before
    for bad in ('["xs"]', '{"sizes": ["xs", ["s"]], "vmc_chi": [2], "seeds": [1]}',
                '{"sizes": ["xs"], "vmc_chi": [2], "seeds": ["1"]}'):
        (out / "plan.json").write_text(bad)
        r = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert r.returncode == 1 and "must be an object with lists" in r.stderr and "Traceback" not in r.stderr, bad
        assert (out / "p_of_n.csv").read_bytes() == before
