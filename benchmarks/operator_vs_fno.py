"""attnphys' attention operator against neuraloperator's FNO: same data, same wall-clock budget, same threads.

Two problem families, each written once by `attnphys heat dataset` and read by both sides (pairs u(t) -> u(t + dt),
nt = 2, split by sample index: [0, n_train) train, then n_val validation, then n_test test):
  a  constant kappa = 1, periodic, 2D 32^2, dt = 25 explicit stability limits h^2/(4 kappa) (the main job's horizon)
  b  log-normal kappa(x) (contrast max/min = 10 per sample), zero Dirichlet sides, 2D 64^2, dt = 0.002
  m  the main job's family: log-normal kappa(x) (contrast 5), periodic, 2D 32^2, dt = 8 explicit limits of kappa-bar,
     1200/100/100 samples (ours: the kappa-conditioned attention operator of the CLI's default with two layers and
     the kappa channel's stencil differences in its conditioning: model.kernel_layers=2, model.stencil=true)
Gaussian random initial fields (correlation length 0.1). The trivial predictor u(t + dt) = u(t) is reported too.

Ours:  `attnphys train heat --set data.file=... [--set data.channels=kappa]` with the family's settings in
       OURS_DEFAULTS below (a: the coordinate-attention kernel model; b: the kappa-conditioned local stencils, which
       read the odd extension across the zero Dirichlet sides (model.local_edge = odd); m: the
       kappa-conditioned attention) plus any `--ours-set key=value` (later ones win). A short probe run measures
       the step time first, which sets the validation interval (10 in the budget); the cosine schedule decays over
       the wall clock (schedule.clock=time, train.max_seconds = the budget), as the peer's does, and the budget
       ends the run. It is evaluated with its best validated parameters.
Peer:  neuraloperator's FNO (PyPI) with its defaults (hidden_channels 32, n_modes (12, 12), 4 layers; grid positional
       embedding), in_channels 1 (u) or 2 (u, kappa), inputs and output normalised with training-split mean/std,
       Adam + cosine schedule over the wall-clock budget, relative L2 loss (neuralop.losses.LpLoss, d = 2, p = 2) on
       the decoded output, 10 validations with the best parameters kept, in its own process (this script under the
       peer's virtual environment with --fno-worker), torch.set_num_threads(2) over a single-threaded OpenBLAS.
Both test errors are attnphys' definition (solvers/src/training/heat_eval.cpp: field_metrics / mean_metrics): per
test sample ||pred - y||_2 / ||y||_2 over the grid, averaged over the samples (the peer's is computed in float64).

The peer's environment is a virtual environment outside the repository (default ~/.cache/attnphys/bench-venv-fno,
--venv or ATTNPHYS_FNO_VENV), made on the first run and reused: `python3 -m venv --system-site-packages` over
Debian's python3-torch, then `pip install neuraloperator==FNO_VERSION` with numpy < 2 (Debian's torch is built
against numpy 1.x). If neuraloperator does not import over that torch, PyTorch 2 is pip-installed into the venv
(its size is reported). The peer is never a dependency of the library and never runs in CI.

Output: a table on stderr; ONE JSON line last on stdout with, per family, attnphys_rel_l2, fno_rel_l2,
trivial_rel_l2, parameter counts, step times, inference ms per sample, steps, budget; `ratio` = attnphys_rel_l2 /
fno_rel_l2 on family b (the variable-kappa family), `ratio_main` on family m; `machine` = attnphys.machine() plus the peer's torch.

    benchmarks/run operator_vs_fno [--budget 300] [--quick] [--families a,b,m] [--ours-set key=value ...]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import _venv  # benchmarks/_venv.py: the peers' venvs
from _venv import venv_python

FNO_VERSION = "2.0.0"  # neuraloperator; its FNO runs on Debian's torch 1.13 (checked when the venv is made)
# Our operator for this benchmark (the CLI's defaults otherwise). --ours-set key=value adds to / overrides these;
# --no-ours-defaults drops them.
# Per family: (a) constant κ is what the coordinate-attention `kernel` model is made for (the CLI's default model,
# linear in the field, one learned N x N operator per head); (b) variable κ on 64² with a short horizon (the heat
# kernel spans a few cells): the conditioned operator's κ-conditioned local term alone, four stacked 5x5 stencils
# whose weights come from κ, its stencil differences and the coordinates (O(N) per layer; the global N² attention
# costs 16x more per sample on 64² than on 32²).
# (m) the main job's family: the kappa-conditioned attention operator (batch 8, lr 2e-2), two layers and stencil
# differences of kappa in the conditioning (the README's comparison; the CLI's main job keeps one layer for its
# 20-horizon rollout).
# `attnphys train heat` starts from the main job, so (a) and (b) state the batch and learning rate they were run with.
OURS_DEFAULTS = {
    "a": ["model.kind=kernel", "train.batch=16", "optimizer.lr=0.03"],
    "b": ["model.kind=conditioned", "model.kernel_heads=0", "model.local_radius=2", "model.kernel_layers=4",
          "model.stencil=true", "model.local_edge=odd", "optimizer.lr=0.005", "train.batch=8"],
    "m": ["model.kind=conditioned", "model.kernel_heads=4", "model.kernel_dk=16", "train.batch=8",
          "optimizer.lr=0.02", "model.kernel_layers=2", "model.stencil=true"],
}
N_VALIDATIONS = 10


def fmt(v, spec=".4f"):
    return "n/a" if v is None else format(v, spec)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ peer environment

def du_mb(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total / 2**20


PROBE = ("import json, torch, neuralop, numpy, h5py; from neuralop.models import FNO; from neuralop.losses import LpLoss;"
         "m = FNO(n_modes=(4, 4), in_channels=1, out_channels=1, hidden_channels=4);"
         "x = torch.randn(2, 1, 8, 8); LpLoss(d=2, p=2)(m(x), x).backward();"
         "print(json.dumps({'torch': torch.__version__, 'neuraloperator': neuralop.__version__,"
         " 'numpy': numpy.__version__, 'h5py': h5py.__version__, 'torch_file': torch.__file__}))")


def probe_venv(py):
    info, err = _venv.probe_json(py, PROBE, "neuralop")
    if info and info["neuraloperator"] != FNO_VERSION:
        return None, f"neuraloperator {info['neuraloperator']}, not {FNO_VERSION}"
    return info, err


def ensure_venv(venv):
    """Makes (once) and checks the peer's virtual environment (benchmarks/_venv.py: a venv over Debian's
    python3-torch, PyTorch 2 from PyPI only where neuraloperator needs it); returns its description for the JSON."""
    def install(py):
        cons = os.path.join(venv, "constraints.txt")
        with open(cons, "w") as f:
            f.write("numpy<2\n")  # Debian's torch 1.13 and h5py are built against numpy 1.x
        _venv.pip_install(py, f"neuraloperator=={FNO_VERSION}", constraints=cons)
        env = {"made_with": f"venv --system-site-packages + pip install neuraloperator=={FNO_VERSION} numpy<2",
               "torch_from": "debian python3-torch"}
        info, err = probe_venv(py)
        if info is None:
            log(f"neuraloperator {FNO_VERSION} does not run over Debian's torch ({err}); installing PyTorch 2 from PyPI")
            before = du_mb(venv)
            _venv.pip_install(py, "torch>=2", constraints=cons)
            env["torch_from"] = "pypi"
            env["torch_install_mb"] = round(du_mb(venv) - before, 1)
        env["venv_mb"] = round(du_mb(venv), 1)
        return env

    info, err = _venv.ensure_venv(venv, "peer (neuraloperator)", probe_venv, install, system_site_packages=True,
                                  require_marker=True)
    if info is None:
        sys.exit(f"the peer's environment {venv} does not work: {err}")
    info.setdefault("make_seconds", info.get("install_s"))
    return info


# ------------------------------------------------------------------------------------------------ data

def families(quick, dt_a, dt_b):
    n_train, n_val, n_test = (128, 32, 32) if quick else (1000, 100, 100)
    common = ["problem.dim=2", "ic.kind=grf", "ic.length_scale=0.1", "dataset.nt=2", "dataset.seed=0",
              "dataset.progress=false", f"dataset.samples={n_train + n_val + n_test}"]
    split_m = (n_train, n_val, n_test) if quick else (1200, 100, 100)  # the main job's split
    return {
        "a": {"name": "constant kappa, periodic, 2D 32^2", "n": 32, "channels": [], "bc": "periodic",
              "delta_t": dt_a,
              "set": common + ["problem.nx=32", "problem.ny=32", "problem.bc=periodic", "problem.kappa=1.0",
                               "family.kappa=constant"],
              "split": (n_train, n_val, n_test)},
        "m": {"name": "the main job: log-normal kappa (contrast 5), periodic, 2D 32^2", "n": 32, "channels": ["kappa"],
              "bc": "periodic", "delta_t": 8 * (1.0 / 32) ** 2 / 4,
              "set": [c for c in common if not c.startswith("dataset.samples=")] +
                     [f"dataset.samples={sum(split_m)}", "problem.nx=32", "problem.ny=32", "problem.bc=periodic",
                      "problem.kappa=1.0", "family.kappa=lognormal", "family.kappa_contrast=5",
                      "family.kappa_length_scale=0.15", "family.source=none", "family.boundary=zero"],
              "split": split_m},
        "b": {"name": "log-normal kappa (contrast 10), Dirichlet, 2D 64^2", "n": 64, "channels": ["kappa"],
              "bc": "dirichlet", "delta_t": dt_b,
              "set": common + ["problem.nx=64", "problem.ny=64", "problem.bc=dirichlet", "problem.kappa=1.0",
                               "family.kappa=lognormal", "family.kappa_contrast=10", "family.source=none",
                               "family.boundary=zero"],
              "split": (n_train, n_val, n_test)},
    }


def write_dataset(exe, fam, path, reuse):
    if reuse and os.path.exists(path):
        log(f"  reusing {path}")
        return 0.0
    cmd = [exe, "heat", "dataset", "--json"]
    for s in fam["set"] + [f"dataset.delta_t={fam['delta_t']!r}", f"dataset.output={path}"]:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"attnphys heat dataset failed:\n{out.stderr}")
    return time.perf_counter() - t0


def rel_l2(pred, ref):
    """attnphys' test relative L2: per sample ||pred - ref|| / ||ref|| over the grid, averaged (float64)."""
    import numpy as np

    p = pred.reshape(pred.shape[0], -1).astype(np.float64)
    r = ref.reshape(ref.shape[0], -1).astype(np.float64)
    e2 = ((p - r) ** 2).sum(1)
    t2 = (r ** 2).sum(1)
    return float(np.mean(np.sqrt(e2 / np.where(t2 > 0, t2, 1.0))))


def load_split(path, split, part):
    import h5py

    n_train, n_val, n_test = split
    lo = {"train": 0, "val": n_train, "test": n_train + n_val}[part]
    hi = lo + {"train": n_train, "val": n_val, "test": n_test}[part]
    with h5py.File(path, "r") as f:
        d = f["data"][lo:hi]  # [sample, t, x, y, 1]
        kappa = f["kappa"][lo:hi] if "kappa" in f else None
    return d[:, 0, ..., 0], d[:, 1, ..., 0], kappa


# ------------------------------------------------------------------------------------------------ ours

def median_step_seconds(csv_path, skip=1):
    """Median time of a training step from metrics.csv (steps without a validation, after the first `skip`)."""
    import numpy as np

    rows = []
    with open(csv_path) as f:
        head = f.readline().strip().split(",")
        for line in f:
            rows.append(dict(zip(head, (float(x) for x in line.strip().split(",")))))
    dts = [rows[i]["seconds"] - rows[i - 1]["seconds"] for i in range(max(1, skip), len(rows))
           if rows[i]["val_rel_l2"] < 0]
    if not dts:  # every step validated (tiny runs): the steps with their validations
        dts = [rows[i]["seconds"] - rows[i - 1]["seconds"] for i in range(1, len(rows))]
    if not dts:
        dts = [rows[0]["seconds"]] if rows else []
    return float(np.median(dts)) if dts else None


def run_ours(exe, fam, path, out_dir, budget, ours_set, probe_steps):
    n_train, n_val, n_test = fam["split"]
    base = [f"data.file={path}", "data.dim=2", "data.n=0", f"data.n_train={n_train}", f"data.n_val={n_val}",
            f"data.n_test={n_test}", f"data.bc={fam['bc']}", "model.kind=transformer", "train.progress=false",
            "eval.rollout_steps=0", "eval.transfer_n=0",
            "train.unroll=1"]  # the files hold one step per sample (the main job's pushforward needs trajectories)
    if fam["channels"]:
        base.append("data.channels=" + ",".join(fam["channels"]))

    def call(extra, tag):
        cmd = [exe, "train", "heat", "--json"]
        for s in base + list(extra):
            cmd += ["--set", s]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"attnphys train heat ({tag}) failed:\n{' '.join(cmd)}\n{out.stderr[-4000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1]), time.perf_counter() - t0, cmd

    # Probe: the step time of this configuration on this machine now.
    probe_dir = out_dir + "_probe"
    _, _, _ = call(ours_set + [f"train.steps={probe_steps}", f"train.eval_every={probe_steps}",
                              f"train.out_dir={probe_dir}", "eval.speed=false"], "probe")
    # The median over the probe's second half: a run's first ~25 steps were measured slower (0.21 s against 0.13 s
    # later on family m), and a probe of those alone planned too few steps (102 s used of a 160 s budget).
    probe_step = median_step_seconds(os.path.join(probe_dir, "metrics.csv"), skip=probe_steps // 2)
    # The cosine decays over the wall clock (schedule.clock = time), as the peer's does, so the whole budget trains
    # whatever the step time turns out to be; train.steps is only an upper bound. (Planning steps from the probe
    # left 15-20 % of the budget unused: 0.8 x budget / probe step, for the validations and the noise.) The probe
    # sets the validation interval: about N_VALIDATIONS in the budget.
    steps = 100_000_000
    planned = max(N_VALIDATIONS, int(budget / probe_step)) if probe_step else 1000
    res, wall, cmd = call(ours_set + [f"train.steps={steps}", f"train.eval_every={max(1, planned // N_VALIDATIONS)}",
                                      "schedule.clock=time", f"train.max_seconds={budget}",
                                      f"train.out_dir={out_dir}"], "run")
    res["probe_step_s"] = probe_step
    res["planned_steps"] = planned
    res["step_s"] = median_step_seconds(os.path.join(out_dir, "metrics.csv"))
    res["wall_s"] = wall
    res["command"] = " ".join(cmd)
    return res


def ours_inference_ms(checkpoint, x, kappa, y, cli_rel_l2):
    """Inference ms per sample through the Python API (attnphys.operator), where the CLI does not time it."""
    import numpy as np

    try:
        from attnphys import operator as op

        model = op.Surrogate.load(checkpoint)
        kw = {"kappa": kappa} if kappa is not None else {}
        np.asarray(model.predict(x[:2], **({"kappa": kappa[:2]} if kappa is not None else {})))  # warm-up
        t0 = time.perf_counter()
        pred = np.asarray(model.predict(x, **kw))
        ms = 1e3 * (time.perf_counter() - t0) / x.shape[0]
        err = rel_l2(pred.reshape(y.shape), y)
        note = (f"ours' inference timed through attnphys.operator.Surrogate.load(checkpoint).predict on the test "
                f"set (one call; the CLI times it only for files with solver physics); its relative L2 there "
                f"{err:.4e}, the CLI's {cli_rel_l2:.4e}")
        if not math.isclose(err, cli_rel_l2, rel_tol=0.05):
            note += ": NOT the same predictions (field layout?), so this timing may not be comparable"
        return ms, note
    except Exception as e:  # the Python API may not exist yet in this build
        return None, f"inference time of ours not measured on this family: the CLI reports surrogate_ms_per_sample " \
                     f"only for files with solver physics, and attnphys.operator was not usable ({type(e).__name__}: " \
                     f"{str(e)[:200]})"


# ------------------------------------------------------------------------------------------------ peer (FNO)

def fno_worker(spec_path):
    """--fno-worker SPEC.json: trains and evaluates the FNO in this (the peer's) interpreter; prints one JSON line."""
    import numpy as np
    import torch
    import neuralop
    from neuralop.models import FNO
    from neuralop.losses import LpLoss

    with open(spec_path) as f:
        S = json.load(f)
    torch.set_num_threads(S["threads"])
    torch.manual_seed(S["seed"])
    np.random.seed(S["seed"])
    split = tuple(S["split"])

    def tensors(part):
        x, y, k = load_split(S["file"], split, part)
        chans = [x] + ([k] if S["use_kappa"] else [])
        return np.stack(chans, 1).astype(np.float32), y[:, None].astype(np.float32), y

    xtr, ytr, _ = tensors("train")
    xva, _, yva64 = tensors("val")
    xte, _, yte64 = tensors("test")
    # Unit-Gaussian normalisation per input channel and of the output, from the training split (neuraloperator's
    # UnitGaussianNormalizer does the same); the loss is taken on the decoded output, in physical units.
    mu_in = xtr.mean((0, 2, 3), keepdims=True)
    sd_in = xtr.std((0, 2, 3), keepdims=True) + 1e-12
    mu_out, sd_out = float(ytr.mean()), float(ytr.std()) + 1e-12
    enc = lambda a: torch.from_numpy((a - mu_in) / sd_in)
    Xtr, Ytr, Xva, Xte = enc(xtr), torch.from_numpy(ytr), enc(xva), enc(xte)

    model = FNO(n_modes=(S["modes"], S["modes"]), in_channels=Xtr.shape[1], out_channels=1,
                hidden_channels=S["width"], n_layers=S["layers"])
    n_params = sum(p.numel() for p in model.parameters())
    loss_fn = LpLoss(d=2, p=2, reduction="mean")
    opt = torch.optim.Adam(model.parameters(), lr=S["lr"], weight_decay=S["weight_decay"])
    budget, B, n = S["budget"], S["batch"], Xtr.shape[0]

    def predict(X, chunk=64):
        model.eval()
        with torch.no_grad():
            out = torch.cat([model(X[i:i + chunk]) for i in range(0, X.shape[0], chunk)])
        model.train()
        return (out * sd_out + mu_out)[:, 0].numpy()

    best_val, best_state, vals = float("inf"), None, []
    step_times, steps, perm, pos = [], 0, torch.randperm(n), 0
    next_val = budget / N_VALIDATIONS
    t0 = time.perf_counter()
    while True:
        elapsed = time.perf_counter() - t0
        if elapsed >= budget:
            break
        lr = S["lr"] * (S["min_lr_ratio"] + (1 - S["min_lr_ratio"]) * 0.5 * (1 + math.cos(math.pi * elapsed / budget)))
        for g in opt.param_groups:
            g["lr"] = lr
        ts = time.perf_counter()
        if pos + B > n:
            perm, pos = torch.randperm(n), 0
        idx = perm[pos:pos + B]
        pos += B
        opt.zero_grad()
        loss = loss_fn(model(Xtr[idx]) * sd_out + mu_out, Ytr[idx])
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - ts)
        steps += 1
        if not math.isfinite(loss.item()):
            print(json.dumps({"error": f"FNO training diverged at step {steps}"}))
            return
        elapsed = time.perf_counter() - t0
        if elapsed >= next_val or elapsed >= budget:
            next_val += budget / N_VALIDATIONS
            v = rel_l2(predict(Xva), yva64)
            vals.append(v)
            if v < best_val:
                best_val = v
                best_state = [t.detach().clone() for t in list(model.parameters()) + list(model.buffers())]
    train_seconds = time.perf_counter() - t0
    if best_state is not None:  # in place: neuraloperator's load_state_dict passes assign=, which needs torch >= 2.1
        with torch.no_grad():
            for t, b in zip(list(model.parameters()) + list(model.buffers()), best_state):
                t.copy_(b)
    test = rel_l2(predict(Xte), yte64)
    # Inference: the whole test set in one batch, median of 3 after a warm-up.
    model.eval()
    times = []
    with torch.no_grad():
        model(Xte)
        for _ in range(3):
            ts = time.perf_counter()
            model(Xte)
            times.append(time.perf_counter() - ts)
    print(json.dumps({
        "rel_l2": test, "best_val_rel_l2": best_val, "val_rel_l2": vals, "n_parameters": n_params,
        "steps": steps, "train_seconds": train_seconds, "step_s": float(np.median(step_times[1:] or step_times)),
        "ms_per_sample": 1e3 * float(np.median(times)) / Xte.shape[0], "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(), "neuraloperator": neuralop.__version__,
        "config": {k: S[k] for k in ("modes", "width", "layers", "lr", "weight_decay", "batch", "min_lr_ratio")},
    }))


def run_fno(venv, fam, path, budget, args, work):
    spec = {"file": path, "split": list(fam["split"]), "use_kappa": bool(fam["channels"]), "budget": budget,
            "threads": args.threads, "seed": 0, "modes": args.fno_modes, "width": args.fno_width,
            "layers": args.fno_layers, "lr": args.fno_lr, "weight_decay": 1e-4, "batch": args.batch,
            "min_lr_ratio": 0.02}
    spec_path = os.path.join(work, f"fno_spec_{os.path.basename(path)}.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    # Debian's torch calls OpenBLAS from inside its own threads: a single-threaded OpenBLAS under torch's 2
    # intra-op threads is its fastest setting here (benchmarks/vmc_vs_torch.py).
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS=str(args.threads))
    env.pop("PYTHONPATH", None)  # the peer does not see attnphys
    t0 = time.perf_counter()
    out = subprocess.run([venv_python(venv), os.path.abspath(__file__), "--fno-worker", spec_path],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"the FNO worker failed:\n{out.stderr[-4000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "error" in res:
        sys.exit(res["error"])
    res["wall_s"] = time.perf_counter() - t0
    return res


# ------------------------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=None, help="training seconds per model per family (300; 30 "
                                                               "with --quick)")
    ap.add_argument("--quick", action="store_true", help="small data (128/32/32 samples), 30 s budgets")
    ap.add_argument("--families", default="a,b,m")
    ap.add_argument("--dt-a", type=float, default=25 * (1.0 / 32) ** 2 / 4,
                    help="horizon of family a (25 explicit limits h^2/(4 kappa) on 32^2, the main job's)")
    ap.add_argument("--dt-b", type=float, default=0.002, help="horizon of family b")
    ap.add_argument("--ours-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra `attnphys train heat --set` for ours (repeatable), e.g. model.attention=galerkin")
    ap.add_argument("--no-ours-defaults", action="store_true", help="drop OURS_DEFAULTS (the CLI's defaults only)")
    ap.add_argument("--fno-lr", type=float, default=3e-3)
    ap.add_argument("--fno-modes", type=int, default=12)
    ap.add_argument("--fno-width", type=int, default=32)
    ap.add_argument("--fno-layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16, help="FNO batch (ours: train.batch, default 16)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--venv", default=os.environ.get("ATTNPHYS_FNO_VENV",
                                                     os.path.expanduser("~/.cache/attnphys/bench-venv-fno")))
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/attnphys/operator_vs_fno"),
                    help="datasets and run directories (outside the repository)")
    ap.add_argument("--reuse-data", action="store_true", help="keep dataset files already in --work")
    ap.add_argument("--fno-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fno_worker:
        return fno_worker(args.fno_worker)
    budget = args.budget if args.budget is not None else (30.0 if args.quick else 300.0)
    build = os.environ.get("ATTNPHYS_BUILD_DIR", "build")
    exe = os.path.abspath(os.path.join(build, "bin", "attnphys"))
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build first (benchmarks/run does)")
    import attnphys  # CPU, BLAS and its kernel core, as every benchmark records them

    os.makedirs(args.work, exist_ok=True)
    peer_env = ensure_venv(args.venv)
    log(f"peer: neuraloperator {peer_env['neuraloperator']} on torch {peer_env['torch']} ({peer_env['torch_from']}), "
        f"numpy {peer_env['numpy']}, venv {args.venv}" + (f" ({peer_env.get('venv_mb')} MB)"
                                                          if peer_env.get("venv_mb") else ""))
    ours_set_of = {k: ([] if args.no_ours_defaults else list(v)) + args.ours_set for k, v in OURS_DEFAULTS.items()}
    tag = "quick" if args.quick else "full"
    fams = families(args.quick, args.dt_a, args.dt_b)
    results = {}
    for key in [k.strip() for k in args.families.split(",") if k.strip()]:
        if key not in fams:
            sys.exit(f"unknown family '{key}' (a, b, m)")
        fam = fams[key]
        path = os.path.join(args.work, f"family_{key}_{tag}_dt{fam['delta_t']:.6g}.h5")
        log(f"family {key}: {fam['name']}, dt = {fam['delta_t']:.6g}, split {fam['split']}, budget {budget:g} s")
        gen_s = write_dataset(exe, fam, path, args.reuse_data)
        x, y, kappa = load_split(path, fam["split"], "test")
        trivial = rel_l2(x, y)
        log(f"  data written in {gen_s:.1f} s; trivial predictor u(t+dt) = u(t): relative L2 {trivial:.3e}")
        ours = run_ours(exe, fam, path, os.path.join(args.work, f"run_{key}_{tag}"), budget, ours_set_of[key],
                        probe_steps=60)
        log(f"  attnphys: {ours['test_rel_l2']:.3e} ({ours['n_parameters']} parameters, {ours['steps']} steps, "
            f"{fmt(ours['step_s'])} s/step, {ours['train_seconds']:.0f} s)")
        notes = []
        ms = ours.get("surrogate_ms_per_sample")
        if not ms:
            ms, note = ours_inference_ms(ours["checkpoint"], x, kappa, y, ours["test_rel_l2"])
            if note:
                notes.append(note)
        fno = run_fno(args.venv, fam, path, budget, args, args.work)
        log(f"  FNO:      {fno['rel_l2']:.3e} ({fno['n_parameters']} parameters, {fno['steps']} steps, "
            f"{fno['step_s']:.3f} s/step, {fno['train_seconds']:.0f} s)")
        results[key] = {
            "family": fam["name"], "grid": [fam["n"], fam["n"]], "bc": fam["bc"], "delta_t": fam["delta_t"],
            "channels": fam["channels"], "n_train": fam["split"][0], "n_val": fam["split"][1],
            "n_test": fam["split"][2], "budget_s": budget, "trivial_rel_l2": trivial,
            "attnphys_rel_l2": ours["test_rel_l2"], "fno_rel_l2": fno["rel_l2"],
            "ratio": ours["test_rel_l2"] / fno["rel_l2"],
            "attnphys_n_parameters": ours["n_parameters"], "fno_n_parameters": fno["n_parameters"],
            "attnphys_step_s": ours["step_s"], "fno_step_s": fno["step_s"],
            "attnphys_ms_per_sample": ms, "fno_ms_per_sample": fno["ms_per_sample"],
            "attnphys_steps": ours["steps"], "fno_steps": fno["steps"],
            "attnphys_planned_steps": ours["planned_steps"], "attnphys_probe_step_s": ours["probe_step_s"],
            "attnphys_stopped_at_time_limit": ours.get("stopped_at_time_limit"),
            "attnphys_train_seconds": ours["train_seconds"], "fno_train_seconds": fno["train_seconds"],
            "attnphys_best_val_rel_l2": ours["best_val_rel_l2"], "fno_best_val_rel_l2": fno["best_val_rel_l2"],
            "attnphys_set": ours_set_of[key], "attnphys_command": ours["command"], "fno_config": fno["config"],
            "notes": notes,
        }

    log("")
    log(f"{'':<28} {'attnphys':>11} {'FNO':>11}")
    for key, r in results.items():
        log(f"family {key}: {r['family']}, dt = {r['delta_t']:.6g}, {r['n_train']}/{r['n_val']}/{r['n_test']} "
            f"samples, budget {r['budget_s']:g} s per model")
        ms_a = f"{r['attnphys_ms_per_sample']:.3f}" if r["attnphys_ms_per_sample"] else "n/a"
        for label, a, b in [("test relative L2", f"{r['attnphys_rel_l2']:.3e}", f"{r['fno_rel_l2']:.3e}"),
                            ("parameters", r["attnphys_n_parameters"], r["fno_n_parameters"]),
                            ("training step, s", fmt(r["attnphys_step_s"]), fmt(r["fno_step_s"])),
                            ("steps in the budget", r["attnphys_steps"], r["fno_steps"]),
                            ("inference, ms / sample", ms_a, f"{r['fno_ms_per_sample']:.3f}")]:
            log(f"  {label:<26} {a!s:>11} {b!s:>11}")
        log(f"  {'trivial u(t+dt) = u(t)':<26} {r['trivial_rel_l2']:>11.3e}   ratio ours/FNO {r['ratio']:.3f}")
        for n in r["notes"]:
            log(f"  note: {n}")
    machine = attnphys.machine()
    machine.update({"peer_torch": peer_env["torch"], "peer_torch_threads": args.threads,
                    "peer_openblas_threads": 1, "peer_neuraloperator": peer_env["neuraloperator"],
                    "peer_numpy": peer_env["numpy"], "peer_torch_from": peer_env["torch_from"],
                    "load_average_at_end": list(os.getloadavg())})
    out = {"benchmark": "operator_vs_fno", "quick": args.quick, "budget_s": budget, "families": results,
           "ratio": results["b"]["ratio"] if "b" in results else None,
           "ratio_main": results["m"]["ratio"] if "m" in results else None,
           "peer_env": {k: v for k, v in peer_env.items() if k != "torch_file"}, "machine": machine}
    for key, r in results.items():  # flat copies of the figures a reader checks first
        for k in ("attnphys_rel_l2", "fno_rel_l2", "attnphys_step_s", "fno_step_s"):
            out[f"{key}_{k}"] = r[k]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
