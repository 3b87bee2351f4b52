#!/usr/bin/env python3
"""Transformer or MPS? The parameters P(eps, N) each ansatz needs for a relative energy error eps, against N.

For every chain (critical TFIM h = 1 and the Heisenberg chain, open ends) and chain length N, the study runs

  * DMRG over a list of bond dimensions chi (`attnphys compare --methods dmrg`; parameters = entries of the MPS);
  * the same MPS form optimised by VMC (`attnphys vmc --ansatz mps --chi chi`), each chi with every seed;
  * the relative-position transformer in a family of sizes (--sizes; `--list-sizes` prints them), every size with
    every seed (default 3),

each VMC run trained to convergence: the run stops when the energy and its variance have plateaued
(`vmc.converge_window` = --window: over the last two windows of W iterations the mean energy fell by at most 2
standard errors and the median variance by less than 10 %, checked once the SR diagonal shift has reached its final
value after --shift-steps iterations), or at --max-iters, which the tables then say. Then it finds, for each eps,
the smallest parameter count that reaches it (interpolated log-log between neighbouring sizes / bond dimensions),
fits P(eps, N) = a N^b per ansatz, says where the fits cross, and draws the plots. A VMC run reaches eps when its
final estimate shows it at two standard errors: error_bound = (max(E - E_exact, 0) + 2 sigma) / |E_exact| <= eps
(an estimate below the exact energy is noise; the best of three seeds would otherwise pick lucky fluctuations).

Every run is a *point* with its own result file `<out>/points/<key>.json`, written to a temporary file and renamed;
a point whose file exists is never run again. A VMC point checkpoints every --checkpoint-every iterations into
`<work>/<key>.h5` (default work: <out>/work), and a point that was interrupted (kill -9 included) resumes from its
checkpoint and ends bit-identical to an uninterrupted run. `<out>/study.log` records what each invocation started,
skipped, resumed and finished; SIGTERM, SIGINT (Ctrl-C) or SIGHUP ends the running point commands and logs which
(`stopped by SIGTERM: ...`) before the command exits with 128 + the signal. Several study commands may run on one
folder at once (one per N on separate nodes, say): each point is held by the process running it
(`<work>/<key>.lock`), a second command skips the points another is running and says which process holds them, and
the tables and plan.json are rewritten under `<out>/.study.lock`.
--jobs J runs up to J points of one command side by side, each with --threads T threads (ATTNPHYS_NUM_THREADS,
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS of its `attnphys`). A point's result does not depend on --jobs; another
thread count changes its trajectory in the last digits (and from there statistically, as another CPU does); wall
times depend on both: points.csv records each point's threads and jobs.
One command per size:

    /usr/bin/python3 python/scripts/compare_study.py --n 16 --out docs/study
    /usr/bin/python3 python/scripts/compare_study.py --n 32 --out docs/study     # and so on; rerun to continue

Outputs (each written atomically, rebuilt from every point file on each invocation, or alone with --tables-only):
  points.csv / points.md     every point: chain, n, ansatz, size, chi, seed, params, energy, error bar,
                             relative error, the error bar relative to |E|, error_bound, iterations, converged,
                             wall seconds, threads and jobs (the point's --threads, empty for the environment's
                             count, and --jobs; both empty for points made before 2026-12-07 14:00 UTC)
  p_of_n.csv / p_of_n.md     chain, ansatz, n, eps, params (best seed), seeds, params_median, params_worst, bound,
                             seconds (wall time to reach eps), complete (every planned size and seed has run;
                             incomplete rows are not fitted)
  plan.json                  the plan the tables judge "complete" against: every transformer size, VMC-MPS bond
                             dimension and seed that any study command on this folder asked for (a command that
                             runs a subset, such as --sizes xs --seeds 3, adds to the plan and does not shrink it)
  fits.csv / fits.md         P(eps, N) = a N^b per chain, ansatz and eps, and the N where the fits cross
  p_of_n.png                 P(eps, N), log-log, with the fits
  error_vs_params.png        relative error against parameters, one panel per chain and N, one curve per ansatz
"""
import argparse
import csv
import fcntl
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

# The transformer family: (d_model, heads, d_ff, patch size, readout units). Parameters grow ~ d_model^2; the learned
# absolute positions of open chains add ~ d_model * N / patch.
SIZES = {
    "xxxs": dict(d_model=2, n_heads=1, d_ff=4, patch_size=2, hidden=2),
    "xxs": dict(d_model=4, n_heads=1, d_ff=8, patch_size=2, hidden=4),
    "xs": dict(d_model=8, n_heads=1, d_ff=16, patch_size=2, hidden=8),
    "s": dict(d_model=12, n_heads=2, d_ff=24, patch_size=2, hidden=12),
    "m": dict(d_model=16, n_heads=2, d_ff=32, patch_size=2, hidden=16),
    "l": dict(d_model=24, n_heads=4, d_ff=48, patch_size=2, hidden=24),
    "xl": dict(d_model=32, n_heads=4, d_ff=64, patch_size=2, hidden=32),
}
CHAINS = ("tfim", "heisenberg")
ANSATZ_ORDER = ("dmrg", "vmc_mps", "transformer")
POINT_COLUMNS = ["chain", "n", "ansatz", "size", "chi", "seed", "params", "energy", "energy_error", "reference",
                 "relative_error", "relative_stat_error", "error_bound", "iterations", "converged", "seconds",
                 "train_seconds", "failed", "guard_rejections", "threads", "jobs"]
P_COLUMNS = ["chain", "ansatz", "n", "eps", "params", "seeds", "params_median", "params_worst", "bound", "seconds",
             "complete"]
FIT_COLUMNS = ["chain", "ansatz", "eps", "n_values", "a", "b", "b_error", "b_median", "crossing_with", "crossing_n",
               "crossing_n_median"]


# ---------------------------------------------------------------------------------------------------------------
# Files: every table and point is written to "<path>.tmp-<pid>" and renamed into place, so a reader (or a kill -9)
# sees the old file or the new one, never a part of either.

def write_atomic(path, text):
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def csv_text(columns, rows):
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: fmt(r.get(k)) for k in columns})
    return buf.getvalue()


def md_text(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(k), md=True) for k in columns) + " |")
    return "\n".join(out) + "\n"


def fmt(v, md=False):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-" if md else ""
    if isinstance(v, bool):
        return "yes" if (md and v) else ("no" if md else str(v).lower())
    if isinstance(v, float):
        return f"{v:.3g}" if md else repr(v)
    return str(v)


class StudyLog:
    """Appends one line per event to <out>/study.log (and prints it)."""

    def __init__(self, path):
        self.path = path
        self.mutex = threading.Lock()  # --jobs: points finish on worker threads

    def __call__(self, text):
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{os.getpid()}] {text}"
        with self.mutex:
            print(line, flush=True)
            with open(self.path, "a") as f:  # one write of a whole line: O_APPEND keeps other processes' lines whole
                f.write(line + "\n")


# The point commands running now (Popen -> point key), so that a stop signal can end them and say which they were.
_RUNNING = {}
_RUNNING_LOCK = threading.Lock()


def run_child(key, cmd, env=None):
    """subprocess.run(cmd) with stdout and stderr captured, registered as point `key` while it runs."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        with _RUNNING_LOCK:
            _RUNNING[p] = key
        try:
            out, err = p.communicate()
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(p, None)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def install_stop_handler(log_path):
    """SIGTERM, SIGINT or SIGHUP: end the running point commands (each resumes from its last checkpoint when a command
    runs it again), append one line that says so to study.log, and exit with 128 + the signal. Finished points and
    the tables are whole files at every moment (written by rename), so nothing finished is lost."""

    def on_signal(signum, frame):
        kids = dict(_RUNNING)  # no lock here: the interrupted thread may hold it
        for p in kids:
            try:
                p.terminate()
            except OSError:
                pass
        for p in kids:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        name = signal.Signals(signum).name
        what = (f"{len(kids)} running point(s) ended ({', '.join(sorted(kids.values()))}); each resumes from its last "
                f"checkpoint when a command runs it again") if kids else "no point was running"
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{os.getpid()}] stopped by {name}: {what}\n"
        try:  # one write of the whole line (O_APPEND), without StudyLog's lock, which the interrupted thread may hold
            fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, line.encode())
            os.close(fd)
            os.write(1, line.encode())
        except OSError:
            pass
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)


def try_hold(path):
    """Takes the exclusive lock of file `path` (created if missing) without waiting: (the open file, holding it until
    closed or this process ends, kill -9 included), or (None, the holder's pid) when another process holds it."""
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        pid = f.read().strip() or "?"
        f.close()
        return None, pid
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f, None


class FolderLock:
    """<out>/.study.lock, held (waiting for it) while a process rewrites plan.json or the tables, so that two study
    commands on one folder do not interleave their read-modify-writes."""

    def __init__(self, out):
        self.path = os.path.join(out, ".study.lock")

    def __enter__(self):
        self.f = open(self.path, "a+")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()


def child_env(args):
    """The environment of a point's `attnphys`: --threads threads, or this one's (None)."""
    if args.threads is None:
        return None
    t = str(args.threads)
    return dict(os.environ, ATTNPHYS_NUM_THREADS=t, OMP_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t)


# ---------------------------------------------------------------------------------------------------------------
# Points

def point_key(chain, n, ansatz, size=None, chi=None, seed=None):
    if ansatz == "dmrg":
        return f"{chain}_n{n}_dmrg"
    what = f"chi{chi}" if ansatz == "vmc_mps" else size
    return f"{chain}_n{n}_{ansatz}_{what}_s{seed}"


def chain_flags(chain, n):
    model = "tfim" if chain == "tfim" else "heisenberg"
    flags = ["--model", model, "--n", str(n), "--bc", "open"]
    return flags + (["--h", "1"] if chain == "tfim" else [])


def run_dmrg_point(args, chain, n, log):
    key = point_key(chain, n, "dmrg")
    path = os.path.join(args.out, "points", key + ".json")
    if os.path.exists(path):
        log(f"skip {key}: finished before")
        return
    held, pid = try_hold(os.path.join(args.work, key + ".lock"))
    if held is None:  # the VMC points need its reference: wait for the other study to finish it (seconds)
        log(f"wait for {key}: running in another study (pid {pid})")
        held = open(os.path.join(args.work, key + ".lock"), "a+")
        fcntl.flock(held, fcntl.LOCK_EX)
    with held:
        if os.path.exists(path):
            log(f"skip {key}: finished by another study")
            return
        dmrg_point(args, chain, n, key, path, log)


def dmrg_point(args, chain, n, key, path, log):
    cmd = [args.cli, "compare", "--json", "--methods", "dmrg", "--models", chain, "--n", str(n),
           "--dmrg-chi", ",".join(map(str, args.dmrg_chi)), "--ref-chi", str(args.ref_chi)]
    log(f"start {key}: {' '.join(cmd)}")
    t0 = time.time()
    proc = run_child(key, cmd)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)
    rows = json.loads(proc.stdout.strip().splitlines()[-1])["rows"]
    res = {"key": key, "chain": chain, "n": n, "ansatz": "dmrg", "reference": rows[0]["reference"],
           "reference_source": rows[0]["reference_source"],
           "rows": [{"chi": r["chi"], "params": r["n_parameters"], "energy": r["energy"], "seconds": r["seconds"]}
                    for r in rows]}
    write_atomic(path, json.dumps(res, indent=1))
    log(f"done {key} in {time.time() - t0:.1f} s")


def vmc_command(args, chain, n, ansatz, size, chi, seed, ck, logfile, count_only=False):
    """The point's `attnphys vmc` command; count_only: the same ansatz, no iteration (its parameter count)."""
    cmd = [args.cli, "vmc", "--json"] + chain_flags(chain, n)
    iters = 0 if count_only else args.max_iters
    cmd += ["--iters", str(iters), "--samples", str(args.samples), "--seed", str(seed)]
    sets = [f"vmc.converge_window={args.window}", f"vmc.diag_shift_steps={args.shift_steps}",
            f"run.final_samples={args.final_samples}", "run.reference=none",
            f"vmc.checkpoint_every={args.checkpoint_every}"]
    if ansatz == "vmc_mps":
        cmd += ["--ansatz", "mps", "--chi", str(chi)]
        sets.append(f"mps.seed={seed}")
    else:
        cmd += ["--ansatz", "transformer"]
        sets += [f"transformer.{k}={v}" for k, v in SIZES[size].items()] + [f"transformer.seed={seed}"]
    sets += args.set
    if count_only:
        sets += ["run.final_samples=0"]
    for s in sets:
        cmd += ["--set", s]
    if not count_only:
        cmd += ["--checkpoint", ck, "--log", logfile]
    return cmd


def point_settings(args):
    """What a VMC point's result depends on besides its chain, size/chi and seed. Points made with other settings
    must not be mixed into one table."""
    return {"max_iters": args.max_iters, "window": args.window, "shift_steps": args.shift_steps,
            "samples": args.samples, "final_samples": args.final_samples, "set": list(args.set)}


def check_settings(args, path):
    """Refuses to continue a study whose finished point `path` was made with other settings."""
    with open(path) as f:
        had = json.load(f).get("settings")
    now = point_settings(args)
    if had is not None and had != now:
        diff = ", ".join(f"{k}: {had.get(k)!r} there, {now[k]!r} now" for k in now if had.get(k) != now[k])
        sys.exit(f"compare_study: {path} was made with other settings ({diff}); continue with the same options, "
                 f"or give this study its own --out")


def log_seconds(logfile, reference, eps_list, window):
    """Training wall time in all (sum of the log's per-iteration seconds, across resumes) and, for each eps, the time
    at which the mean energy over the last `window` iterations first came within eps of the reference. Iterations
    the step guard rejected (vmc.guard_sigmas: `rejected` = 1) count in the time, not in the means."""
    with open(logfile) as f:
        rows = list(csv.DictReader(f))
    t = [float(r["seconds"]) for r in rows]
    total, first = sum(t), {}
    w = max(1, window)
    acc, kept = 0.0, []
    for i, r in enumerate(rows):
        acc += t[i]
        if float(r.get("rejected") or 0) == 0:
            kept.append(float(r["energy"]))
        if len(kept) < w:
            continue
        mean = sum(kept[-w:]) / w
        rel = abs(mean - reference) / abs(reference)
        for eps in eps_list:
            if eps not in first and rel <= eps:
                first[eps] = acc
    return total, first


def run_vmc_point(args, chain, n, ansatz, size, chi, seed, reference, log):
    """Runs the point unless it has finished or another process is running it (then says so)."""
    key = point_key(chain, n, ansatz, size, chi, seed)
    path = os.path.join(args.out, "points", key + ".json")
    if os.path.exists(path):
        return
    held, pid = try_hold(os.path.join(args.work, key + ".lock"))
    if held is None:
        log(f"skip {key}: running in another study (pid {pid})")
        return
    with held:
        if os.path.exists(path):  # finished by another study since this one listed the folder
            log(f"skip {key}: finished by another study")
            return
        vmc_point(args, chain, n, ansatz, size, chi, seed, reference, log, key, path)


def vmc_point(args, chain, n, ansatz, size, chi, seed, reference, log, key, path):
    ck = os.path.join(args.work, key + ".h5")
    logfile = os.path.join(args.work, key + ".csv")
    cmd = vmc_command(args, chain, n, ansatz, size, chi, seed, ck, logfile)
    if os.path.exists(ck):
        it = "?"
        try:
            import h5py

            with h5py.File(ck, "r") as f:
                it = int(f.attrs["iteration"])
        except Exception:  # noqa: BLE001 - the CLI reports an unreadable checkpoint itself
            pass
        cmd += ["--resume", ck]
        log(f"resume {key} from its checkpoint at iteration {it}")
    log(f"start {key}: {' '.join(cmd)}")
    t0 = time.time()
    proc = run_child(key, cmd, env=child_env(args))
    said = [line for line in proc.stderr.splitlines() if line.startswith("attnphys:")]
    for line in said:  # the warnings and errors, not the progress bar
        print(line, flush=True)
    if proc.returncode != 0:
        err = next((line for line in said if line.startswith("attnphys: error:")), "")
        if "diverg" not in err:  # "diverged" (a NaN energy) or "keeps diverging" (the step guard gave up)
            raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)
        # A diverged run is a result of this size and seed, not a reason to stop the study (it would diverge
        # again): the point records it and reaches no eps.
        m = re.search(r"at iteration (\d+)", err)
        count = subprocess.run(vmc_command(args, chain, n, ansatz, size, chi, seed, None, None, count_only=True),
                               check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env=child_env(args)).stdout
        res = {"key": key, "chain": chain, "n": n, "ansatz": ansatz, "size": size, "chi": chi, "seed": seed,
               "params": json.loads(count.strip().splitlines()[-1])["n_parameters"], "energy": None,
               "energy_error": None, "reference": reference, "relative_error": None,
               "iterations": int(m.group(1)) if m else None, "converged": False, "failed": err,
               "settings": point_settings(args), "threads": args.threads, "jobs": args.jobs,
               "seconds": time.time() - t0, "train_seconds": time.time() - t0, "command": " ".join(cmd)}
        write_atomic(path, json.dumps(res, indent=1))
        log(f"done {key}: the run diverged ({err})")
        return
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    train_seconds, to_eps = log_seconds(logfile, reference, args.eps, args.window or 20)
    res = {"key": key, "chain": chain, "n": n, "ansatz": ansatz, "size": size, "chi": chi, "seed": seed,
           "params": r["n_parameters"], "energy": r["energy"], "energy_error": r["energy_error"],
           "variance": r["variance"], "reference": reference,
           "relative_error": abs(r["energy"] - reference) / abs(reference), "iterations": r["iterations"],
           "converged": r["converged"], "guard_rejections": r.get("guard_rejections", 0),
           "seconds": train_seconds + r["estimate_seconds"],
           "train_seconds": train_seconds, "seconds_to_eps": {repr(k): v for k, v in to_eps.items()},
           "settings": point_settings(args), "threads": args.threads, "jobs": args.jobs,
           "acceptance": r.get("acceptance"), "warnings": r.get("warnings", []),
           "command": " ".join(cmd)}
    write_atomic(path, json.dumps(res, indent=1))
    log(f"done {key} in {time.time() - t0:.1f} s: {r['iterations']} iterations"
        f"{' (converged)' if r['converged'] else ' (max-iters, not converged)'}, rel. error {res['relative_error']:.3g}"
        f"{', %d step(s) rejected by the guard' % res['guard_rejections'] if res['guard_rejections'] else ''}")


# ---------------------------------------------------------------------------------------------------------------
# Tables, fits, plots

def load_points(out):
    pts = []
    d = os.path.join(out, "points")
    if not os.path.isdir(d):
        return pts
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                pts.append(json.load(f))
    return pts


BELOW_EXACT_SIGMAS = 5  # a VMC estimate further below the exact energy than this is not variational
# A final estimate whose Metropolis chains accepted at most this share of their moves was frozen (attnphys vmc's
# threshold, ProgressWarningOptions::frozen_acceptance in vmc/monitor.hpp, where it also warns; exact sampling: 1).
FROZEN_ACCEPTANCE = 1e-3


def point_rows(points):
    rows = []
    for p in points:
        if p["ansatz"] == "dmrg":
            for r in p["rows"]:
                rel = abs(r["energy"] - p["reference"]) / abs(p["reference"])
                rows.append({"chain": p["chain"], "n": p["n"], "ansatz": "dmrg", "chi": r["chi"], "params": r["params"],
                             "energy": r["energy"], "reference": p["reference"], "relative_error": rel,
                             "error_bound": rel, "seconds": r["seconds"]})
        elif p.get("failed"):  # a diverged run: no energy, reaches no eps
            row = {k: p.get(k) for k in POINT_COLUMNS}
            row["error_bound"] = math.inf
            row["failed"] = p["failed"]
            rows.append(row)
        elif p.get("acceptance") is not None and p["acceptance"] <= FROZEN_ACCEPTANCE:
            # The final estimate's Metropolis chains accepted (almost) no move (attnphys vmc warns too): its energy is
            # that of the configurations they were stuck in, above or below the exact one. (Points from before stop
            # 45 have no acceptance.)
            row = {k: p.get(k) for k in POINT_COLUMNS}
            row["error_bound"] = math.inf
            row["failed"] = "the final estimate's Metropolis chains were frozen: not a variational estimate"
            rows.append(row)
        elif p["energy"] < p["reference"] - BELOW_EXACT_SIGMAS * p["energy_error"] - 1e-9 * abs(p["reference"]):
            # Far below the exact energy: not a variational estimate. A Heisenberg N = 32 run whose Metropolis chains
            # froze (acceptance 0 from some iteration on) estimated -18.02 +- 0.32 against the exact -13.997; its
            # bound would be 2 sigma alone. Such a point reaches no eps.
            row = {k: p.get(k) for k in POINT_COLUMNS}
            row["error_bound"] = math.inf
            row["failed"] = (f"energy {p['energy']:.6g} +- {p['energy_error']:.2g} lies "
                             f"{(p['reference'] - p['energy']) / max(p['energy_error'], 1e-300):.0f} standard errors "
                             f"below the exact {p['reference']:.6g}: not a variational estimate (its sampler did not "
                             f"mix)")
            rows.append(row)
        else:
            row = {k: p.get(k) for k in POINT_COLUMNS}
            row["relative_stat_error"] = p["energy_error"] / abs(p["reference"])  # the final estimate's error bar
            # What the estimate shows at 2 standard errors: a VMC energy is an upper bound of the ground state's, so
            # an estimate below the exact energy is noise, and its error is at most that noise.
            row["error_bound"] = (max(p["energy"] - p["reference"], 0.0) + 2 * p["energy_error"]) / abs(p["reference"])
            row["seconds_to_eps"] = p.get("seconds_to_eps")
            rows.append(row)
    order = {a: i for i, a in enumerate(ANSATZ_ORDER)}
    rows.sort(key=lambda r: (r["chain"], r["n"], order[r["ansatz"]], r["params"], r.get("seed") or 0))
    return rows


def curves(rows, chain, n, ansatz):
    """Per parameter count (a size or a bond dimension): the error bounds of its seeds (sorted) and its runs."""
    by = {}
    for r in rows:
        if r["chain"] == chain and r["n"] == n and r["ansatz"] == ansatz:
            by.setdefault(r["params"], []).append(r)
    return [(p, sorted(x["error_bound"] for x in by[p]), by[p]) for p in sorted(by)]


def smallest_params(points, eps):
    """points: [(params, error)] by increasing params. The smallest parameter count reaching eps, interpolated
    log-log between the last size above eps and the first at or below it; ("interp" | "upper" | "none")."""
    for k, (p, e) in enumerate(points):
        if e <= eps:
            if k == 0:
                return float(p), "upper"  # the smallest size already reaches eps: P <= p
            p0, e0 = points[k - 1]
            if e0 <= e or e <= 0 or not math.isfinite(e0):  # no log-log line to follow (e0: a diverged size)
                return float(p), "interp"
            f = (math.log(e0) - math.log(eps)) / (math.log(e0) - math.log(e))
            return math.exp(math.log(p0) + f * (math.log(p) - math.log(p0))), "interp"
    return None, "none"


def p_of_n_rows(rows, eps_list, family=None):
    """family: {ansatz: (the sizes or bond dimensions planned, seeds planned)}; a row is complete when every one of
    them has a point for every seed (otherwise its P may still fall when the rest arrive)."""
    out = []
    for chain in sorted({r["chain"] for r in rows}):
        for ansatz in ANSATZ_ORDER:
            for n in sorted({r["n"] for r in rows if r["chain"] == chain and r["ansatz"] == ansatz}):
                cur = curves(rows, chain, n, ansatz)
                seeds = min(len(errs) for _, errs, _ in cur)
                for eps in eps_list:
                    best = [(p, errs[0]) for p, errs, _ in cur]
                    med = [(p, errs[len(errs) // 2]) for p, errs, _ in cur]
                    worst = [(p, errs[-1]) for p, errs, _ in cur]
                    pb, bound = smallest_params(best, eps)
                    pm, _ = smallest_params(med, eps)
                    pw, _ = smallest_params(worst, eps)
                    # Wall time to reach eps: the cheapest run that reached it (DMRG: the whole run at that chi;
                    # VMC: training time until the windowed mean energy came within eps).
                    secs = []
                    for _, _, runs in cur:
                        for r in runs:
                            if r["error_bound"] > eps:
                                continue
                            if ansatz == "dmrg":
                                secs.append(r["seconds"])
                            else:
                                t = (r.get("seconds_to_eps") or {}).get(repr(eps))
                                secs.append(t if t is not None else r["train_seconds"])
                    # Final once every size up to the first that reaches eps (on the best, median and worst
                    # curves alike) has all its seeds: larger sizes cannot change P. Without such a size, every
                    # planned size must have run.
                    complete = True
                    if family and ansatz in family:
                        what, n_seeds = family[ansatz]
                        have = {}
                        for r in rows:
                            if r["chain"] == chain and r["n"] == n and r["ansatz"] == ansatz:
                                k = r["chi"] if ansatz == "vmc_mps" else r["size"]
                                have[k] = have.get(k, 0) + 1
                        params_of = {}
                        for r in rows:
                            if r["chain"] == chain and r["n"] == n and r["ansatz"] == ansatz:
                                params_of[r["chi"] if ansatz == "vmc_mps" else r["size"]] = r["params"]
                        reached = [next((p for p, e in curve if e <= eps), None) for curve in (best, med, worst)]
                        limit = None if None in reached else max(reached)
                        need = []  # `what` runs from the smallest size up: its prefix through the size at `limit`
                        for w in what:
                            need.append(w)
                            if limit is not None and (w not in params_of or params_of[w] >= limit):
                                break
                        complete = all(have.get(w, 0) >= n_seeds for w in need)
                    out.append({"chain": chain, "ansatz": ansatz, "n": n, "eps": eps, "params": pb,
                                "params_median": pm, "params_worst": pw, "seeds": seeds, "bound": bound,
                                "seconds": min(secs) if secs else None, "complete": complete})
    return out


def fit(ns, ps):
    x = [math.log(v) for v in ns]
    y = [math.log(v) for v in ps]
    m = len(x)
    mx, my = sum(x) / m, sum(y) / m
    sxx = sum((a - mx) ** 2 for a in x)
    b = sum((a - mx) * (c - my) for a, c in zip(x, y)) / sxx
    a = my - b * mx
    if m > 2:
        res = sum((c - a - b * xi) ** 2 for xi, c in zip(x, y))
        b_err = math.sqrt(res / (m - 2) / sxx)
    else:
        b_err = None
    return a, b, b_err


def fit_rows(prow):
    """P(eps, N) = a N^b per chain, ansatz and eps (interpolated points only, at least two N), also from the median
    seed (b_median), and the N where the transformer's fit crosses DMRG's (crossing_n; crossing_n_median from the
    median-seed fit: the seeds' spread)."""
    out = []
    groups = {}
    for r in prow:
        if r["params"] is not None and r["bound"] == "interp" and r.get("complete", True):
            groups.setdefault((r["chain"], r["ansatz"], r["eps"]), []).append(r)
    fits, fits_median = {}, {}
    for (chain, ansatz, eps), rs in sorted(groups.items()):
        if len({r["n"] for r in rs}) < 2:
            continue
        a, b, be = fit([r["n"] for r in rs], [r["params"] for r in rs])
        fits[(chain, ansatz, eps)] = (a, b)
        row = {"chain": chain, "ansatz": ansatz, "eps": eps, "n_values": " ".join(str(r["n"]) for r in rs),
               "a": math.exp(a), "b": b, "b_error": be}
        med = [r for r in rs if r["params_median"] is not None]
        if len({r["n"] for r in med}) >= 2:
            am, bm, _ = fit([r["n"] for r in med], [r["params_median"] for r in med])
            fits_median[(chain, ansatz, eps)] = (am, bm)
            row["b_median"] = bm
        out.append(row)

    def crossing(f1, f2):
        if f1 is None or f2 is None or abs(f2[1] - f1[1]) < 1e-12:
            return None
        return math.exp((f1[0] - f2[0]) / (f2[1] - f1[1]))

    for r in out:  # where P_transformer(N) = P_mps(N)
        if r["ansatz"] != "transformer":
            continue
        key = (r["chain"], "transformer", r["eps"])
        mps = fits.get((r["chain"], "dmrg", r["eps"]))
        if mps:
            r["crossing_with"] = "dmrg"
            r["crossing_n"] = crossing(fits[key], mps)
            r["crossing_n_median"] = crossing(fits_median.get(key), mps)
    return out


def plot(rows, prow, frows, out, eps_list):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chains = sorted({r["chain"] for r in rows})
    colors = {"dmrg": "C0", "vmc_mps": "C1", "transformer": "C3"}
    label = {"dmrg": "MPS (DMRG)", "vmc_mps": "MPS (VMC)", "transformer": "transformer (VMC)"}
    marks = ["o", "s", "^", "D"]
    fig, axes = plt.subplots(1, len(chains), figsize=(6.4 * len(chains), 4.8), squeeze=False)
    for ax, chain in zip(axes[0], chains):
        for ansatz in ANSATZ_ORDER:
            for k, eps in enumerate(eps_list):
                sel = [r for r in prow if r["chain"] == chain and r["ansatz"] == ansatz and r["eps"] == eps
                       and r["params"] is not None]
                if not sel:
                    continue
                x = [r["n"] for r in sel]
                y = [r["params"] for r in sel]
                lo = [r["params"] - (r["params"] if r["params_median"] is None else min(r["params"], r["params_median"]))
                      for r in sel]
                hi = [(r["params_worst"] or r["params"]) - r["params"] for r in sel]
                filled = [r["bound"] == "interp" for r in sel]
                ax.errorbar(x, y, yerr=[lo, hi], color=colors[ansatz], marker=marks[k % 4], linestyle="none",
                            capsize=2, mfc=None, label=f"{label[ansatz]}, ε={eps:g}")
                for xi, yi, f in zip(x, y, filled):
                    if not f:  # an upper bound: the smallest size already reached eps
                        ax.annotate("≤", (xi, yi), textcoords="offset points", xytext=(-10, -4), fontsize=8)
                fr = [f for f in frows if f["chain"] == chain and f["ansatz"] == ansatz and f["eps"] == eps]
                if fr:
                    ns = sorted({r["n"] for r in rows if r["chain"] == chain})
                    grid = [ns[0] * (ns[-1] * 2 / ns[0]) ** (i / 40) for i in range(41)]
                    ax.plot(grid, [fr[0]["a"] * g ** fr[0]["b"] for g in grid], color=colors[ansatz],
                            linestyle=["-", "--", ":", "-."][k % 4], linewidth=0.8)
        log_axes(ax, "chain length N", "parameters P(ε, N)",
                 ("critical TFIM (h = 1)" if chain == "tfim" else "Heisenberg chain") + ", open", 7, xbase=2)
    save_figure(plt, fig, os.path.join(out, "p_of_n.png"), 120)

    sizes = sorted({r["n"] for r in rows})
    fig, axes = plt.subplots(len(chains), len(sizes), figsize=(4.2 * len(sizes), 3.6 * len(chains)), squeeze=False)
    for i, chain in enumerate(chains):
        for j, n in enumerate(sizes):
            ax = axes[i][j]
            for ansatz in ANSATZ_ORDER:
                cur = curves(rows, chain, n, ansatz)
                if not cur:
                    continue
                x = [p for p, _, _ in cur]
                best = [min(max(e[0], 1e-16), 10.0) for _, e, _ in cur]  # 10: every seed diverged
                worst = [min(max(e[-1], 1e-16), 10.0) for _, e, _ in cur]
                ax.errorbar(x, best, yerr=[[0] * len(x), [w - b for w, b in zip(worst, best)]], color=colors[ansatz],
                            marker="o", capsize=2, label=label[ansatz])
            for eps in eps_list:
                ax.axhline(eps, color="gray", linewidth=0.5, linestyle=":")
            log_axes(ax, "parameters", "(ΔE⁺ + 2σ) / |E|: best seed, bar to worst", f"{chain}, N = {n}", 6)
    save_figure(plt, fig, os.path.join(out, "error_vs_params.png"), 110)


def log_axes(ax, xlabel, ylabel, title, legend_size, xbase=10):
    ax.set_xscale("log", base=xbase)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9 if legend_size < 7 else None)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_figure(plt, fig, path, dpi):
    """Drawn to a temporary file and renamed, as the tables."""
    fig.tight_layout()
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=dpi)
    os.replace(tmp, path)
    plt.close(fig)


def read_plan(out):
    """The stored plan of <out> (plan.json), or None before any study command has run there."""
    try:
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        sys.exit(f"compare_study: {out}/plan.json is unreadable ({e}); delete it and rerun the study commands "
                 f"(their points are kept), or restore it from version control")
    ok = (isinstance(plan, dict) and all(isinstance(plan.get(k), list) for k in ("sizes", "vmc_chi", "seeds"))
          and all(isinstance(s, str) and s in SIZES for s in plan["sizes"])
          and all(isinstance(v, int) and not isinstance(v, bool) for k in ("vmc_chi", "seeds") for v in plan[k]))
    if not ok:
        sys.exit(f"compare_study: {out}/plan.json must be an object with lists 'sizes' (of {', '.join(SIZES)}), "
                 f"'vmc_chi' and 'seeds' (integers); fix or delete it")
    return plan


def merge_plan(args):
    """Adds this command's sizes, bond dimensions and seeds to <out>/plan.json (written atomically) and returns the
    union: a command that runs a subset of the family adds to the plan and does not shrink it."""
    old = read_plan(args.out) or {"sizes": [], "vmc_chi": [], "seeds": []}
    plan = {"sizes": [s for s in SIZES if s in old["sizes"] or s in args.sizes],
            "vmc_chi": sorted(set(old["vmc_chi"]) | set(args.vmc_chi)),
            "seeds": sorted(set(old["seeds"]) | set(args.seeds))}
    if plan != old:
        write_atomic(os.path.join(args.out, "plan.json"), json.dumps(plan, indent=1) + "\n")
    return plan


def table_plan(args):
    """What the tables judge completeness against: the stored plan (with this command's own sizes and seeds added
    when it runs points: see merge_plan), or this command's options where no plan is stored."""
    return read_plan(args.out) or {"sizes": args.sizes, "vmc_chi": args.vmc_chi, "seeds": args.seeds}


def write_tables(args, log=None):
    with FolderLock(args.out):  # another study on this folder may be rewriting them too
        return write_tables_held(args, log)


def write_tables_held(args, log):
    rows = point_rows(load_points(args.out))
    if not rows:
        return None
    plan = table_plan(args)
    prow = p_of_n_rows(rows, args.eps, {"transformer": (plan["sizes"], len(plan["seeds"])),
                                        "vmc_mps": (plan["vmc_chi"], len(plan["seeds"]))})
    frows = fit_rows(prow)
    write_atomic(os.path.join(args.out, "points.csv"), csv_text(POINT_COLUMNS, rows))
    write_atomic(os.path.join(args.out, "points.md"), md_text(POINT_COLUMNS, rows))
    write_atomic(os.path.join(args.out, "p_of_n.csv"), csv_text(P_COLUMNS, prow))
    write_atomic(os.path.join(args.out, "p_of_n.md"), md_text(P_COLUMNS, prow))
    write_atomic(os.path.join(args.out, "fits.csv"), csv_text(FIT_COLUMNS, frows))
    write_atomic(os.path.join(args.out, "fits.md"), md_text(FIT_COLUMNS, frows))
    if not args.no_plots:
        plot(rows, prow, frows, args.out, args.eps)
    if log:
        log(f"tables: {len(rows)} rows in points.csv, {len(prow)} in p_of_n.csv, {len(frows)} fits")
    return rows, prow, frows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", default=os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys"),
                   help="the attnphys program (default: $ATTNPHYS_BUILD_DIR/bin/attnphys or build/bin/attnphys)")
    p.add_argument("--n", type=int, nargs="+", default=[16], help="chain lengths (one command per size is the plan)")
    p.add_argument("--chains", nargs="+", default=list(CHAINS), choices=CHAINS)
    p.add_argument("--ansatze", nargs="+", default=list(ANSATZ_ORDER), choices=ANSATZ_ORDER)
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES),
                   help="transformer sizes (--list-sizes; the seven span 95x in parameters at N = 16)")
    p.add_argument("--list-sizes", action="store_true", help="print the transformer family and exit")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3],
                   help="seeds of every VMC point (initialisation and sampler)")
    p.add_argument("--dmrg-chi", type=lambda s: [int(v) for v in s.split(",")],
                   default=[2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48], help="DMRG bond dimensions (comma list)")
    p.add_argument("--ref-chi", type=int, default=128, help="DMRG bond dimension of the reference when N > 22")
    p.add_argument("--vmc-chi", type=lambda s: [int(v) for v in s.split(",")], default=[2, 4, 8],
                   help="bond dimensions of the VMC-optimised MPS (comma list)")
    p.add_argument("--eps", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5], help="target relative errors")
    p.add_argument("--max-iters", type=int, default=3000, help="most VMC iterations of a point")
    p.add_argument("--window", type=int, default=100,
                   help="convergence window W (vmc.converge_window; 0: run --max-iters iterations)")
    p.add_argument("--shift-steps", type=int, default=300,
                   help="iterations of the SR diagonal-shift decay (vmc.diag_shift_steps); convergence is checked "
                        "from there on")
    p.add_argument("--samples", type=int, default=1024, help="VMC samples per iteration")
    p.add_argument("--final-samples", type=int, default=65536, help="samples of each final energy estimate")
    p.add_argument("--checkpoint-every", type=int, default=10, help="VMC iterations between checkpoints")
    p.add_argument("--set", action="append", default=[], help="extra option for every VMC run (section.key=value)")
    p.add_argument("--out", default="docs/study", help="tables, plots, points/ and study.log")
    p.add_argument("--work", default=None, help="VMC checkpoints and logs (default: <out>/work)")
    p.add_argument("--tables-only", action="store_true",
                   help="only rebuild the tables and plots from points/ (complete: judged against plan.json)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--jobs", type=int, default=1,
                   help="VMC points run side by side (default 1); give each a share of the cores with --threads")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of each point's attnphys (ATTNPHYS_NUM_THREADS, OMP_NUM_THREADS, "
                        "OPENBLAS_NUM_THREADS; default: this environment's)")
    a = p.parse_args(argv)
    if a.jobs < 1 or (a.threads is not None and a.threads < 1):
        p.error("--jobs and --threads take a positive integer")
    a.work = a.work or os.path.join(a.out, "work")
    return a


def run_points(args, pending, log):
    """Runs the VMC points `pending`, up to --jobs at a time, and rewrites the tables as each finishes. A point that
    fails stops the study: the points not yet started are dropped, the running ones finish (or are resumed by the
    next command), then the error is raised."""
    if args.jobs == 1:
        for p in pending:
            run_vmc_point(args, *p, log)
            write_tables(args, log)
        return
    error = None
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        running = {pool.submit(run_vmc_point, args, *p, log) for p in pending}
        while running:
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                if not f.cancelled() and f.exception() is not None and error is None:
                    error = f.exception()
                    log(f"a point failed ({error!r}); the points not yet started are dropped")
                    for g in running:
                        g.cancel()
            write_tables(args, log)
    if error is not None:
        raise error


def main(argv=None):
    args = parse_args(argv)
    if args.list_sizes:
        for k, v in SIZES.items():
            print(k, " ".join(f"{a}={b}" for a, b in v.items()))
        return 0
    os.makedirs(os.path.join(args.out, "points"), exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    log = StudyLog(os.path.join(args.out, "study.log"))
    if not args.tables_only:
        install_stop_handler(log.path)
        log(f"study: {' '.join(sys.argv[1:] if argv is None else argv)}")
        with FolderLock(args.out):
            merge_plan(args)
        done = set(n[:-5] for n in os.listdir(os.path.join(args.out, "points")) if n.endswith(".json"))
        pending = []
        for n in args.n:
            for chain in args.chains:
                run_dmrg_point(args, chain, n, log)  # also the reference energy of the VMC points
                with open(os.path.join(args.out, "points", point_key(chain, n, "dmrg") + ".json")) as f:
                    reference = json.load(f)["reference"]
                kinds = []
                if "vmc_mps" in args.ansatze:
                    kinds += [("vmc_mps", None, chi) for chi in args.vmc_chi]
                if "transformer" in args.ansatze:
                    kinds += [("transformer", size, None) for size in args.sizes]
                for ansatz, size, chi in kinds:
                    for seed in args.seeds:
                        key = point_key(chain, n, ansatz, size, chi, seed)
                        if key in done:
                            check_settings(args, os.path.join(args.out, "points", key + ".json"))
                            log(f"skip {key}: finished before")
                            continue
                        pending.append((chain, n, ansatz, size, chi, seed, reference))
        run_points(args, pending, log)
    if write_tables(args, log) is None:
        sys.exit(f"no points in {args.out}/points yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
