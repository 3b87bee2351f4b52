"""Crash consistency at random points: `kill -9` the command-line program at a seeded random moment and check what
it leaves behind.

For each command (`attnphys train heat`, `attnphys vmc`, `attnphys heat dataset`, `attnphys dmrg --save`,
`attnphys compare --out`) one
uninterrupted reference run is timed, then a chain of runs is started, each killed with SIGKILL after a delay drawn
uniformly from [0, 1.1 x the reference time] (random.Random(seed); the delays are reproducible, where the process
is when the signal lands is not). After every kill:

- every output file that exists is complete: the HDF5 files open with h5py, carry their attnphys_kind and every
  dataset of the reference run with its shape; summary.json parses; every CSV line has all its fields;
- training and VMC resume from the checkpoint (when one exists, else start afresh) and the next run of the chain
  is again killed, until a run ends by itself; the final checkpoint (parameters, optimizer moments, best
  parameters, sampler chains) and the reported numbers are then bit-identical to the uninterrupted run;
- the dataset and the MPS file, when present after a kill, are bit-identical to the reference's.

After the successful run no temporary file (".tmp") is left in the output directory: h5::Writer removes the
temporaries that killed writers of the same path left behind (test_stale_temporaries_of_dead_writers_are_removed).
Known defects outside the files of this test (metrics logs appended to from the checkpoint, numbers of a resume from
the final checkpoint) are checked too; when one shows up the test reports it and is marked xfail.

CI: ATTNPHYS_CRASH_KILLS (default 3) kills per command, ATTNPHYS_CRASH_SEED (default 22). The longer documented
run (README, reliability):

    cd build && ATTNPHYS_CRASH_KILLS=20 PYTHONPATH=python ATTNPHYS_BUILD_DIR=$PWD \\
        /usr/bin/python3 -m pytest -q -s ../tests/python/test_crash_consistency.py

prints one line per command with the number of kills and where they landed (with -s).
"""
import glob
import json
import os
import random
import signal
import subprocess
import time

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

BUILD = os.environ.get("ATTNPHYS_BUILD_DIR", "build")
EXE = os.path.join(BUILD, "bin", "attnphys")
KILLS = int(os.environ.get("ATTNPHYS_CRASH_KILLS", "3"))
SEED = int(os.environ.get("ATTNPHYS_CRASH_SEED", "22"))
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

pytestmark = pytest.mark.skipif(not os.path.exists(EXE), reason="attnphys CLI not built")


def sets(pairs):
    out = []
    for p in pairs:
        out += ["--set", p]
    return out


# The tiny 1D training run of test_training.py (TINY), longer so that the kills land among many checkpoints.
TRAIN = [
    "data.dim=1", "data.n=16", "data.n_train=32", "data.n_val=8", "data.n_test=8", "data.length_scale=0.15",
    "model.kernel_heads=2", "model.kernel_dk=6", "model.harmonics=3",
    "train.steps=1500", "train.batch=8", "train.eval_every=30", "train.checkpoint_every=50", "train.progress=false",
    "eval.rollout_steps=2", "eval.rollout_samples=4", "eval.transfer_n=32", "eval.transfer_samples=4",
    "eval.speed=false", "family.kappa=constant", "model.kind=kernel", "optimizer.lr=0.03", "train.max_seconds=0",
]
# With a convergence stop (vmc.converge_window) that ends the run at iteration 22 of at most 40: a resumed run must
# continue the checkpoint's energy trace to stop at the same iteration.
VMC = ["--model", "heisenberg", "--n", "6", "--bc", "periodic", "--iters", "40", "--samples", "64",
       "--set", "transformer.d_model=8", "--set", "run.final_samples=256", "--set", "vmc.checkpoint_every=3",
       "--set", "vmc.converge_window=4", "--set", "vmc.converge_variance_drop=0.5", "--set", "vmc.diag_shift_steps=10"]


def run_killed(args, delay):
    """Starts args, sends SIGKILL after `delay` seconds. Returns (killed, completed process output or None)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    try:
        out, err = p.communicate(timeout=delay)
        return False, (p.returncode, out.decode(), err.decode())
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        out, err = p.communicate()
        if p.returncode != -signal.SIGKILL:  # it ended (a zombie not yet reaped) just before the signal
            return False, (p.returncode, out.decode(), err.decode())
        return True, None


def run_ok(args):
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    return time.monotonic() - t0, json.loads(r.stdout.strip().splitlines()[-1])


def h5_layout(path):
    """{dataset: shape} and the attnphys kind of a file that must open. A VMC checkpoint's energy and variance traces
    (trace/*) hold one value per iteration so far: their shape must be (iteration,), whatever the iteration."""
    layout = {}
    with h5py.File(path, "r") as f:
        kind = f.attrs["attnphys_kind"]

        def visit(name, obj):
            if not isinstance(obj, h5py.Dataset):
                return
            if name.startswith("trace/"):
                assert obj.shape == (int(f.attrs["iteration"]),), (path, name, obj.shape)
                layout[name] = "one per iteration"
            else:
                layout[name] = obj.shape

        f.visititems(visit)
    return (kind.decode() if isinstance(kind, bytes) else kind), layout


def h5_data(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
        attrs = {k: f.attrs[k] for k in f.attrs if k not in ("created_utc",)}
    return out, attrs


# Attributes that name the output path or the time of writing.
SKIP_ATTRS = ("config", "created_utc")


def assert_same_h5(a, b, skip_attrs=SKIP_ATTRS):
    da, aa = h5_data(a)
    db, ab = h5_data(b)
    assert sorted(da) == sorted(db), (a, b)
    for k in da:
        assert da[k].dtype == db[k].dtype and da[k].shape == db[k].shape, k
        assert np.array_equal(da[k].view(np.uint8), db[k].view(np.uint8)), f"{k} differs: {a} vs {b}"
    for k in aa:
        if k in skip_attrs:
            continue
        assert k in ab, k
        assert np.array_equal(np.asarray(aa[k]), np.asarray(ab[k])), f"attribute {k} differs: {a} vs {b}"


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def check_outputs(files, reference):
    """Every file that exists is complete: HDF5 with the reference's kind and layout, JSON that parses, CSV lines
    with all their fields."""
    for path, ref in zip(files, reference):
        if not os.path.exists(path):
            continue
        if path.endswith(".h5"):
            assert h5_layout(path) == h5_layout(ref), f"{path} is not complete"
        elif path.endswith(".json"):
            with open(path) as f:
                json.load(f)
        elif path.endswith(".csv"):
            with open(path) as f:
                text = f.read()
            if not text:
                continue
            assert text.endswith("\n"), f"{path}: last line cut"
            lines = text.splitlines()
            width = len(lines[0].split(","))
            with open(ref) as f:
                ref_lines = f.read().splitlines()
            numeric = len(ref_lines) > 1 and all(_is_number(x) for x in ref_lines[1].split(","))
            for ln in lines[1:]:
                assert len(ln.split(",")) == width, f"{path}: incomplete line '{ln}'"
                assert not numeric or all(_is_number(x) for x in ln.split(",")), f"{path}: incomplete line '{ln}'"


def no_temp_files(directory):
    left = [n for n in os.listdir(directory) if ".tmp" in n]
    assert not left, f"temporary files left behind in {directory}: {left}"


class Tally:
    def __init__(self, name):
        self.name, self.kills, self.present, self.mid_write, self.resumes, self.runs = name, 0, 0, 0, 0, 0
        self.completed = 0  # runs of a chain that ended by themselves, each checked against the reference
        self.known = {}  # known defects seen (outside the files this test may fix; see the tests), with one example

    def note(self, defect, example):
        self.known.setdefault(defect, example)

    def report(self):
        known = "; ".join(f"{k} ({v})" for k, v in self.known.items())
        print(f"\n[crash] {self.name}: {self.kills} kills (outputs present after {self.present}, a temporary file "
              f"left by {self.mid_write}: killed mid-write), {self.resumes} resumes from a checkpoint, {self.runs} "
              f"runs, {self.completed} completed chains checked; 0 truncated or unreadable files, every completed "
              f"chain bit-identical to the uninterrupted run" + (f"; known defects seen: {known}" if known else ""))

    def finish(self):
        self.report()
        if self.known:
            pytest.xfail("known defects (outside the files of this test): " + "; ".join(self.known))


def duplicated_rows(csv_path):
    """Step/iteration numbers (first column) logged more than once."""
    with open(csv_path) as f:
        steps = [ln.split(",")[0] for ln in f.read().splitlines()[1:]]
    return len(steps) - len(set(steps))


def kill_chain(tally, rng, t_ref, start_args, resume_args, checkpoint, files, ref_files, out_dir, verify,
               identical=False):
    """Runs chains: each run is killed at a random moment and the next resumes from the checkpoint (or starts afresh
    when there is none, or for commands without resume), until a run ends by itself; verify(json) then checks it
    against the uninterrupted run, the directory is emptied and a new chain starts, until KILLS kills have landed.
    The last run is left to finish."""
    kills = 0
    while True:
        resume = resume_args is not None and checkpoint is not None and os.path.exists(checkpoint)
        args = resume_args if resume else start_args
        tally.runs += 1
        tally.resumes += resume
        if kills >= KILLS:
            r = subprocess.run(args, capture_output=True, text=True, env=ENV)
            assert r.returncode == 0, r.stderr
            tally.completed += 1
            verify(json.loads(r.stdout.strip().splitlines()[-1]))
            return
        killed, done = run_killed(args, rng.uniform(0.0, 1.1 * t_ref))
        if not killed:
            rc, out, err = done
            assert rc == 0, err
            tally.completed += 1
            verify(json.loads(out.strip().splitlines()[-1]))
            for f in glob.glob(os.path.join(out_dir, "*")):
                if os.path.isfile(f):
                    os.remove(f)
            continue
        kills += 1
        tally.kills += 1
        tally.mid_write += any(".tmp" in n for n in os.listdir(out_dir))
        check_outputs(files, ref_files)
        tally.present += any(os.path.exists(f) for f in files)
        if identical:  # a file renamed into place before the kill is the finished one
            for f, g in zip(files, ref_files):
                if os.path.exists(f):
                    assert_same_h5(f, g, SKIP_ATTRS)


def test_train_heat_kill_and_resume(tmp_path):
    rng = random.Random(SEED)
    ref = tmp_path / "ref"
    base = [EXE, "train", "heat", "--json"] + sets(TRAIN)
    t_ref, ref_json = run_ok(base + sets([f"train.out_dir={ref}"]))
    no_temp_files(ref)
    names = ["checkpoint.h5", "eval.h5", "summary.json", "metrics.csv"]
    out = tmp_path / "run"
    out.mkdir()
    ckpt = str(out / "checkpoint.h5")
    tally = Tally("attnphys train heat")
    start = base + sets([f"train.out_dir={out}"])
    resume = start + sets([f"train.resume={ckpt}"])

    def verify(got):
        no_temp_files(out)
        # Bit-identical: parameters, Adam moments, best parameters, step counters, and every reported number.
        assert_same_h5(ckpt, ref / "checkpoint.h5")
        for key in ["test_rel_l2", "test_rmse", "test_max_err", "rollout_rel_l2", "transfer_rel_l2",
                    "best_val_rel_l2", "attention_kernel_overlap", "n_parameters", "steps"]:
            assert got[key] == ref_json[key], key
        with h5py.File(out / "eval.h5", "r") as a, h5py.File(ref / "eval.h5", "r") as b:
            for k in ["fields/prediction", "rollout/rel_l2", "attention/weights"]:
                assert np.array_equal(a[k][()], b[k][()]), k
            # Known defects (solvers/src/training/heat_training.cpp, not this test's to fix): eval.h5's metrics
            # table holds only the rows logged since the last resume (none, and no table, after a resume from the
            # final checkpoint); metrics.csv is appended to from the checkpoint's step, so the steps a killed run
            # logged after its last checkpoint appear twice; a resume from the final checkpoint (a kill during the
            # evaluation) reports final_train_loss = 0.
            rows = a["metrics/table"].shape[0] if "metrics/table" in a else 0
            if rows != b["metrics/table"].shape[0]:
                tally.note("eval.h5 metrics/table holds only the rows since the last resume",
                           f"{rows} rows, uninterrupted {b['metrics/table'].shape[0]}")
        dup = duplicated_rows(out / "metrics.csv")
        if dup:
            tally.note("metrics.csv logs the steps after the last checkpoint twice", f"{dup} steps")
        if got["final_train_loss"] != ref_json["final_train_loss"]:
            tally.note("final_train_loss after a resume from the final checkpoint",
                       f"{got['final_train_loss']}, uninterrupted {ref_json['final_train_loss']}")

    kill_chain(tally, rng, t_ref, start, resume, ckpt, [str(out / n) for n in names], [str(ref / n) for n in names],
               str(out), verify)
    tally.finish()


def test_vmc_kill_and_resume(tmp_path):
    rng = random.Random(SEED + 1)
    ref = tmp_path / "ref"
    ref.mkdir()
    t_ref, ref_json = run_ok([EXE, "vmc", "--json"] + VMC + ["--checkpoint", str(ref / "vmc.h5"),
                                                            "--log", str(ref / "vmc.csv")])
    assert ref_json["converged"] and ref_json["iterations"] < 40, ref_json  # the stop this test resumes into
    no_temp_files(ref)
    out = tmp_path / "run"
    out.mkdir()
    ckpt = str(out / "vmc.h5")
    tally = Tally("attnphys vmc")
    start = [EXE, "vmc", "--json"] + VMC + ["--checkpoint", ckpt, "--log", str(out / "vmc.csv")]

    def verify(got):
        no_temp_files(out)
        assert_same_h5(ckpt, ref / "vmc.h5")
        for key in ["energy", "energy_error", "variance", "tau", "r_hat", "iterations", "reference", "converged",
                    "acceptance"]:
            assert got[key] == ref_json[key], key
        # Both once known defects, fixed: the log kept the iterations a killed run logged after its last checkpoint
        # twice (CsvLogger::resume), and a resume from the final checkpoint (a kill during the final estimate)
        # reported acceptance 0 (VmcDriver::estimate_acceptance).
        assert not duplicated_rows(out / "vmc.csv"), "vmc.csv logs iterations twice"

    kill_chain(tally, rng, t_ref, start, start + ["--resume", ckpt], ckpt, [ckpt, str(out / "vmc.csv")],
               [str(ref / "vmc.h5"), str(ref / "vmc.csv")], str(out), verify)
    tally.finish()


def test_heat_dataset_kill(tmp_path):
    rng = random.Random(SEED + 2)
    args = [EXE, "heat", "dataset", "--json"] + sets(
        ["problem.dim=2", "problem.nx=16", "problem.ny=16", "dataset.samples=160", "dataset.chunk=8", "dataset.nt=3",
         "dataset.progress=false"])
    ref = str(tmp_path / "ref.h5")
    t_ref, _ = run_ok(args + sets([f"dataset.output={ref}"]))
    run = tmp_path / "run"
    run.mkdir()
    out = str(run / "d.h5")
    tally = Tally("attnphys heat dataset")

    def verify(got):
        assert_same_h5(out, ref)
        no_temp_files(run)  # the dead writers' temporaries too (h5::Writer removes them)

    kill_chain(tally, rng, t_ref, args + sets([f"dataset.output={out}"]), None, None, [out], [ref], str(run), verify,
               identical=True)
    tally.finish()


def test_dmrg_save_kill(tmp_path):
    rng = random.Random(SEED + 3)
    args = [EXE, "dmrg", "--model", "heisenberg", "--n", "40", "--chi", "40", "--bc", "open", "--json"]
    ref = str(tmp_path / "ref.h5")
    t_ref, ref_json = run_ok(args + ["--save", ref])
    run = tmp_path / "run"
    run.mkdir()
    out = str(run / "mps.h5")
    tally = Tally("attnphys dmrg --save")

    def verify(got):
        assert got["energy"] == ref_json["energy"]
        assert_same_h5(out, ref)
        no_temp_files(run)

    kill_chain(tally, rng, t_ref, args + ["--save", out], None, None, [out], [ref], str(run), verify, identical=True)
    tally.finish()


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    """A writer killed before its rename leaves "<path>.tmp-<pid>"; the next writer of that path removes those
    whose process is gone and that nobody holds open, and keeps the others."""
    import fcntl

    out = tmp_path / "mps.h5"
    gone = subprocess.Popen(["true"])
    gone.wait()
    alive = subprocess.Popen(["sleep", "30"])
    try:
        dead = tmp_path / f"mps.h5.tmp-{gone.pid}"
        live = tmp_path / f"mps.h5.tmp-{alive.pid}"
        other = tmp_path / f"other.h5.tmp-{gone.pid}"  # another output's temporary
        held = tmp_path / "mps.h5.tmp-999999999"  # no such process, but someone holds it locked
        for p in (dead, live, other, held):
            p.write_bytes(b"\x89HDF partial")
        with open(held, "rb") as h:
            fcntl.flock(h, fcntl.LOCK_EX)
            r = subprocess.run([EXE, "dmrg", "--model", "heisenberg", "--n", "8", "--chi", "8", "--save", str(out)],
                               capture_output=True, text=True, env=ENV)
            assert r.returncode == 0, r.stderr
        assert h5_layout(out)[0] == "mps"
        left = sorted(n for n in os.listdir(tmp_path) if ".tmp" in n)
        assert left == sorted([live.name, other.name, held.name])
    finally:
        alive.kill()
        alive.wait()


def test_compare_study_kill(tmp_path):
    """`attnphys compare --out`: the CSV and markdown tables are each written to a temporary file and renamed; after
    a kill each is absent or complete, and a completed run's numbers are the uninterrupted run's."""
    rng = random.Random(SEED + 4)
    args = [EXE, "compare", "--n", "6", "--models", "tfim", "heisenberg", "--iters", "30", "--samples", "64",
            "--final-samples", "64", "--dmrg-chi", "2", "4", "--vmc-chi", "2", "--set", "transformer.d_model=8",
            "--json"]
    ref = str(tmp_path / "ref")
    t_ref, _ = run_ok(args + ["--out", ref])
    run = tmp_path / "run"
    run.mkdir()
    out = str(run / "study")
    tally = Tally("attnphys compare --out")

    def table(path):  # the CSV without its timing columns
        with open(path) as f:
            return [ln.split(",")[:-2] for ln in f.read().splitlines()]

    def check_tables():
        for ext in (".csv", ".md"):
            if os.path.exists(out + ext):
                with open(out + ext) as f, open(ref + ext) as g:
                    got, want = f.read(), g.read()
                assert got.endswith("\n") and len(got.splitlines()) == len(want.splitlines()), f"{out}{ext} cut"
        if os.path.exists(out + ".csv"):
            assert table(out + ".csv") == table(ref + ".csv")

    def verify(got):
        check_tables()
        assert os.path.exists(out + ".csv") and os.path.exists(out + ".md")
        no_temp_files(run)

    kill_chain(tally, rng, t_ref, args + ["--out", out], None, None, [out + ".csv", out + ".md"],
               [ref + ".csv", ref + ".md"], str(run), verify)
    check_tables()
    tally.finish()
