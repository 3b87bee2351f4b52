"""The main job's training step (the κ-conditioned attention operator): attnphys and the same model in PyTorch 2.

The architecture is the one `attnphys train heat` trains by default (configs/heat2d.toml, model.kind = conditioned):
per token the conditioning vector c = [harmonic coordinate features (4 per axis, cos and sin: 16 in 2D), the
normalised κ]; z = [GELU(W1 c + b1) (width 32), c]; per layer q, k, g = linear maps of z (4 heads × 16), m = a linear
map of z (4·16 + 2); v = g ⊙ û; o = softmax(q kᵀ/√16) v per head; ŷ = m_b0 ⊙ û + m_e + Σ_hr m_A ⊙ o (1 layer).
13 476 parameters on both sides (checked). Batch 8 of a 32×32 grid (1024 tokens), float32, relative-L2 loss,
gradient clipping at norm 1, AdamW.

Sides:
  attnphys   `attnphys train heat` (the main job; only the data counts and the evaluation are cut, which do not enter
             the step), its median step time from metrics.csv (steps without a validation, after the first);
  torch 2    from PyPI, in the virtual environment of benchmarks/attention_train_vs_torch.py (default
             ~/.cache/attnphys/bench-venv-torch2, or --venv / ATTNPHYS_TORCH2_VENV; made on first use), the same model
             with torch.nn.functional.scaled_dot_product_attention, eager and through torch.compile ("compile"; its
             error is recorded and the run goes on where it does not work).
--precision bf16 trains our side with model.attention_precision = bf16 (the attention's products in bf16 with float32
accumulation and softmax: AMX, or AVX512-BF16 on CPUs without AMX) and adds PyTorch 2 eager under
torch.autocast("cpu", bfloat16) ("eager_bf16") as the same-precision column: ratio_torch2_bf16 = attnphys / eager_bf16.
`ratio` stays attnphys / the faster float32 torch-2 mode (eager or compile).
Both sides get the same thread count (--threads: torch.set_num_threads, OMP/MKL/OPENBLAS_NUM_THREADS) and the same
OPENBLAS_CORETYPE (passed through). Rounds interleave the sides so that load drifts hit both; a side's round figure
is its median step; ratio = attnphys / (the faster torch-2 mode), the median of the per-round ratios (all listed).
The last stdout line is JSON.

    benchmarks/run operator_train_vs_torch [--steps 40] [--repeats 3] [--threads 2] [--precision float32|bf16]
                                           [--modes eager,compile[,eager_bf16]]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_train_vs_torch import Side, ensure_torch2_venv, loadavg, log, serve, venv_python  # noqa: E402
from operator_vs_fno import median_step_seconds  # noqa: E402

HERE = os.path.abspath(__file__)
HEADS, DK, D, HARMONICS, LAYERS, CHANNELS, DIM = 4, 16, 32, 4, 1, 1, 2


# ---------------------------------------------------------------------------------------------------------------
# Worker: the PyTorch side (protocol: one JSON line "ready", then one JSON line per "run" read on stdin).


def build_conditioned(torch):
    import torch.nn.functional as F

    nn = torch.nn
    fc = 2 * HARMONICS * DIM + CHANNELS
    dz = D + fc
    hd = HEADS * DK

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.g = nn.Linear(dz, hd), nn.Linear(dz, hd), nn.Linear(dz, hd)
            self.m = nn.Linear(dz, hd + 2)

        def forward(self, z, f):
            b, t, _ = z.shape
            heads = lambda x: x.view(b, t, HEADS, DK).transpose(1, 2)  # noqa: E731
            v = heads(self.g(z)) * f[:, None, :, None]
            o = F.scaled_dot_product_attention(heads(self.q(z)), heads(self.k(z)), v)
            o = o.transpose(1, 2).reshape(b, t, hd)
            m = self.m(z)
            return m[..., hd] * f + m[..., hd + 1] + (m[..., :hd] * o).sum(-1)

    class Conditioned(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(fc, D)
            self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])

        def forward(self, u, c):
            z = torch.cat([F.gelu(self.w1(c)), c], dim=-1)
            f = u
            for layer in self.layers:
                f = layer(z, f)
            return f

    return Conditioned()


def worker(mode, batch, n, threads, steps, pool):
    import math

    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_conditioned(torch)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-2, weight_decay=1e-4)
    tokens = n * n
    # The data pipeline's part: a pool of samples (field, κ, target) and the harmonic features of the grid.
    x = (torch.arange(n, dtype=torch.float32) + 0.5) / n
    gx, gy = torch.meshgrid(x, x, indexing="xy")
    feats = []
    for g in (gx.reshape(-1), gy.reshape(-1)):
        for m in range(1, HARMONICS + 1):
            feats += [torch.cos(2 * math.pi * m * g), torch.sin(2 * math.pi * m * g)]
    harm = torch.stack(feats, dim=-1)  # [tokens, 16]
    u_pool = torch.randn(pool, tokens)
    k_pool = torch.randn(pool, tokens, CHANNELS)
    t_pool = u_pool + 0.1 * torch.randn(pool, tokens)
    gen = torch.Generator().manual_seed(1)
    fn = torch.compile(model) if mode == "compile" else model
    bf16 = mode == "eager_bf16"  # the same model under torch.autocast(bfloat16): bf16 linear layers and SDPA

    def step():
        idx = torch.randint(0, pool, (batch,), generator=gen)
        u, t = u_pool[idx], t_pool[idx]
        c = torch.cat([harm.expand(batch, tokens, harm.shape[1]), k_pool[idx]], dim=-1)
        opt.zero_grad(set_to_none=True)
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                p = fn(u, c).float()
        else:
            p = fn(u, c)
        loss = ((p - t).norm(dim=1) / t.norm(dim=1)).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    serve(torch, model, step, 3 if mode == "compile" else 2, steps)


# ---------------------------------------------------------------------------------------------------------------
# The attnphys side: the CLI's main job, cut to the training steps.


def run_ours(exe, steps, env, work, r, precision):
    out_dir = os.path.join(work, f"ours{r}")
    sets = [f"train.steps={steps}", f"train.eval_every={steps + 1}", f"train.checkpoint_every={steps + 1}",
            "train.max_seconds=0", f"train.out_dir={out_dir}", "train.progress=false", "data.n_train=64",
            "data.n_val=8", "data.n_test=8", "eval.rollout_steps=0", "eval.transfer_n=0", "eval.speed=false",
            f"schedule.total_steps={steps}", f"model.attention_precision={precision}"]
    cmd = [exe, "train", "heat", "--json"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"attnphys train heat failed:\n{' '.join(cmd)}\n{out.stderr[-4000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return median_step_seconds(os.path.join(out_dir, "metrics.csv")), res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40, help="timed steps per side per round")
    p.add_argument("--repeats", type=int, default=3, help="rounds; every figure is the median over them")
    p.add_argument("--threads", type=int, default=2, help="threads of both sides (BLAS, torch intra-op)")
    p.add_argument("--precision", default="float32", choices=["float32", "bf16"],
                   help="our side's attention arithmetic (bf16: model.attention_precision = bf16, on AMX or "
                        "AVX512-BF16; PyTorch 2 then also runs eager_bf16, its model under autocast(bfloat16))")
    p.add_argument("--modes", default=None,
                   help="torch-2 modes: eager (SDPA), compile, eager_bf16 (autocast); default eager,compile, plus "
                        "eager_bf16 with --precision bf16")
    p.add_argument("--venv", default=os.environ.get("ATTNPHYS_TORCH2_VENV",
                                                    os.path.expanduser("~/.cache/attnphys/bench-venv-torch2")))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    batch, n = 8, 32
    if args.worker:
        worker(args.worker, batch, n, args.threads, args.steps, pool=64)
        return

    if args.modes is None:
        args.modes = "eager,compile" + (",eager_bf16" if args.precision == "bf16" else "")
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(args.threads)
    build = os.environ.get("ATTNPHYS_BUILD_DIR", "build")
    exe = os.path.join(build, "bin", "attnphys")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build the CLI first (benchmarks/run does)")
    torch2, torch2_error = ensure_torch2_venv(args.venv)
    if torch2_error:
        sys.exit(f"torch 2: {torch2_error}")
    load_before = loadavg()
    sides, skipped = {}, {}
    for mode in [m for m in args.modes.split(",") if m]:
        log(f"{mode}: warming up")
        s = Side(mode, [venv_python(args.venv), HERE, "--worker", mode, "--threads", str(args.threads),
                        "--steps", str(args.steps)], env)
        if not s.ready.get("ready"):
            skipped[mode] = s.ready.get("error", "did not start")
            log(f"{mode}: skipped ({skipped[mode]})")
            s.close()
            continue
        sides[mode] = s
    if not sides:
        sys.exit(f"no torch-2 mode started: {skipped}")
    ours_rounds, ours_json = [], None
    with tempfile.TemporaryDirectory(prefix="attnphys-optv-") as work:
        for r in range(args.repeats):
            # One warm-up step is the first metrics row, which median_step_seconds skips.
            t, ours_json = run_ours(exe, args.steps + 1, env, work, r, args.precision)
            ours_rounds.append(t)
            log(f"round {r + 1}/{args.repeats} attnphys: median {t:.4f} s/step, load {loadavg()}")
            for name, s in sides.items():
                out = s.ask("run")
                s.rounds.append(out["median_s"])
                log(f"round {r + 1}/{args.repeats} torch2 {name}: median {out['median_s']:.4f} s/step, load {loadavg()}")
    load_after = loadavg()
    for s in sides.values():
        s.close()
    med = {name: statistics.median(s.rounds) for name, s in sides.items()}
    fp32_modes = [m for m in med if m != "eager_bf16"]
    if not fp32_modes:
        sys.exit("no float32 torch-2 mode ran (eager or compile): the ratio needs one")
    best = min(fp32_modes, key=med.get)
    ratios = [a / b for a, b in zip(ours_rounds, sides[best].rounds)]
    params_ours = ours_json.get("n_parameters")
    params_torch = sides[best].ready["parameters"]
    if params_ours != params_torch:
        sys.exit(f"the two models differ: attnphys {params_ours} parameters, torch {params_torch}")
    import attnphys

    result = {
        "benchmark": "operator_train_vs_torch",
        "config": {"model": "conditioned (the main job)", "heads": HEADS, "dk": DK, "d_model": D,
                   "harmonics": HARMONICS, "layers": LAYERS, "grid": f"{n}x{n}", "batch": batch, "dtype": "float32",
                   "attention_precision": args.precision, "optimizer": "adamw + clip 1.0", "threads": args.threads,
                   "steps_per_round": args.steps, "rounds": args.repeats, "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "")},
        "parameters": params_torch,
        "attnphys_step_s": statistics.median(ours_rounds),
        "torch2_step_s": med[best],
        "torch2_best_mode": best,
        "torch2_version": sides[best].ready["torch_version"],
        "rounds_s": {"attnphys": ours_rounds, **{f"torch2_{k}": s.rounds for k, s in sides.items()}},
        "ratios": ratios,
        "ratio": statistics.median(ratios),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "machine": attnphys.machine(),
    }
    for m in med:
        result[f"torch2_{m}_s"] = med[m]
        result[f"torch2_{m}_warmup_s"] = sides[m].ready.get("warmup_s")
    if "eager_bf16" in sides:  # the same-precision comparison: PyTorch 2 with bf16 autocast
        result["ratios_torch2_bf16"] = [a / b for a, b in zip(ours_rounds, sides["eager_bf16"].rounds)]
        result["ratio_torch2_bf16"] = statistics.median(result["ratios_torch2_bf16"])
    for m, e in skipped.items():
        result[f"torch2_{m}_error"] = e
    log(f"attnphys {result['attnphys_step_s']:.4f} s/step, torch 2 ({best}) {med[best]:.4f} s/step: "
        f"ratio {result['ratio']:.3f} (attnphys / torch 2; {params_torch} parameters, {args.threads} threads, "
        f"BLAS core {result['machine'].get('blas_core', '?')}, attention {args.precision})"
        + (f"; torch 2 eager bf16 {med['eager_bf16']:.4f} s/step: ratio_torch2_bf16 {result['ratio_torch2_bf16']:.3f}"
           if "eager_bf16" in med else ""))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
