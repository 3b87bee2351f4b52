"""One training step (forward, backward, AdamW) of a transformer encoder: attnphys, PyTorch 2 and PyTorch 1.13 in one run.

Encoder d = 64, 4 heads, 4 layers, FFN 256, pre-LN, GELU, sequence 1024 (a 32x32 grid), batch 16, float32.
Sides, each a process that warms up once and then waits for commands, so that their timed rounds interleave:
  attnphys     build/benchmarks/bench_attention_train_vs_torch --serve (it also measures this machine's sgemm);
  torch 1.13   Debian's python3-torch: torch.nn.TransformerEncoder (norm_first, dropout 0), the `ratio` column;
  torch 2      from PyPI, in a virtual environment this script makes itself (default
               ~/.cache/attnphys/bench-venv-torch2, or --venv / ATTNPHYS_TORCH2_VENV; `python3 -m venv`, then
               `pip install torch numpy` from PyPI; the PyPI build is a CUDA build and runs here on the CPU). The same
               model written with torch.nn.functional.scaled_dot_product_attention, run eager ("eager") and through
               torch.compile ("compile"; skipped with its error where it does not work), and with
               --precision bf16 also eager under torch.autocast(bfloat16) ("eager_bf16").
Every side gets the same thread count (--threads, default 2: torch.set_num_threads, OMP/MKL/OPENBLAS_NUM_THREADS)
and the same BLAS setting (OPENBLAS_CORETYPE passes through unchanged). After one warm-up step (two for compile),
each of --repeats rounds times --steps steps per side; a side's round figure is its median step. ratio =
attnphys / torch 1.13 and ratio_torch2 = attnphys / (the faster torch-2 mode) are the medians over the rounds of
the per-round ratios, all rounds listed. --precision bf16 runs our side with encoder.attention_precision = bf16
(AMX, or AVX512-BF16 without AMX: AMD Zen 4/5, Intel Cooper Lake) and adds ratio_torch2_bf16 = attnphys /
eager_bf16, the same-precision comparison; ratio_torch2 stays against PyTorch 2 in float32. --matmul-precision
(default auto: bf16 with --precision bf16 where the CPU has AMX, else float32) sets encoder.matmul_precision, whose
bf16 products need AMX; the JSON's config names the precisions used. The last stdout line is JSON.

    python3 benchmarks/attention_train_vs_torch.py [--steps 5] [--repeats 3] [--modes eager,compile] [--no-torch2]
                                                   [--precision float32|bf16] [--matmul-precision auto|float32|bf16]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _venv  # benchmarks/_venv.py: the peers' venvs
from _venv import venv_python

HERE = os.path.abspath(__file__)
D, HEADS, LAYERS, FF = 64, 4, 4, 256
TORCH2_SPEC = "torch>=2"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------------------------
# Worker: one PyTorch side. Protocol on stdout: one JSON line "ready", then one JSON line per command read on stdin.


def build_torch113(torch, batch, n):
    layer = torch.nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=FF, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
    return torch.nn.TransformerEncoder(layer, LAYERS, norm=torch.nn.LayerNorm(D), enable_nested_tensor=False)


def build_sdpa(torch, batch, n):
    import torch.nn.functional as F

    nn = torch.nn
    dh = D // HEADS

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.in_proj, self.out_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.linear1, self.linear2 = nn.Linear(D, FF), nn.Linear(FF, D)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.in_proj(self.norm1(x)).view(b, t, 3, HEADS, dh).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, D)
            x = x + self.out_proj(a)
            return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.norm = nn.LayerNorm(D)

        def forward(self, x):
            for blk in self.layers:
                x = blk(x)
            return self.norm(x)

    return Encoder()


def worker(mode, batch, n, threads, steps):
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_torch113(torch, batch, n) if mode == "torch113" else build_sdpa(torch, batch, n)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    x = torch.randn(batch, n, D)
    dy = torch.randn(batch, n, D) / (batch * n)
    fn = model
    if mode == "compile":
        fn = torch.compile(model)
    bf16 = mode == "eager_bf16"  # the same model under torch.autocast(bfloat16): bf16 linear layers and SDPA

    def step():
        opt.zero_grad(set_to_none=True)
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = fn(x)
        else:
            y = fn(x)
        (y.float() * dy).sum().backward()
        opt.step()

    serve(torch, model, step, 2 if mode == "compile" else 1, steps)


def serve(torch, model, step, warmups, steps):
    """The worker protocol: warm up (reporting ready or the error), then time `steps` steps per "run" on stdin."""
    ready = {"ready": True, "torch_version": torch.__version__, "threads": torch.get_num_threads(),
             "parameters": sum(p.numel() for p in model.parameters())}
    try:
        t0 = time.perf_counter()
        for _ in range(warmups):
            step()
        ready["warmup_s"] = time.perf_counter() - t0
    except Exception as e:  # torch.compile may not work on this CPU / compiler
        print(json.dumps({"ready": False, "error": f"{type(e).__name__}: {str(e)[:400]}"}), flush=True)
        return
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        if cmd != "run":
            print(json.dumps({"error": f"unknown command {cmd!r}"}), flush=True)
            continue
        t = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            t.append(time.perf_counter() - t0)
        print(json.dumps({"step_s": t, "median_s": statistics.median(t)}), flush=True)


# ---------------------------------------------------------------------------------------------------------------
# The torch-2 environment.


def probe(py):
    info, err = _venv.probe_json(py, "import json, torch; print(json.dumps({'torch': torch.__version__}))", "torch")
    if info and int(info["torch"].split(".")[0]) < 2:
        return None, f"torch {info['torch']} is not PyTorch 2"
    return info, err


def ensure_torch2_venv(venv):
    """Makes (once) and checks the venv (benchmarks/_venv.py; a few GB); returns (info, error)."""
    def install(py):
        _venv.pip_install(py, TORCH2_SPEC, "numpy")
        return {"made_with": f"python3 -m venv; pip install '{TORCH2_SPEC}' numpy (PyPI)"}
    return _venv.ensure_venv(venv, "torch-2", probe, install, hint=", or --no-torch2")


# ---------------------------------------------------------------------------------------------------------------
# Orchestration.


class Side:
    def __init__(self, name, cmd, env):
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     bufsize=1)
        self.ready = self.read()
        self.rounds = []

    def read(self):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name}: the process ended (exit {self.proc.wait()})")
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass
        self.proc.wait(timeout=60)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--len", type=int, default=1024)
    p.add_argument("--attention", default="tiled", choices=["dense", "tiled"],
                   help="attention memory mode of the attnphys side (tiled: the fused kernels)")
    p.add_argument("--precision", default="float32", choices=["float32", "bf16"],
                   help="arithmetic of the attnphys side's attention (bf16: AMX tiles, or AVX512-BF16 without AMX;"
                        " PyTorch 2 then also runs eager_bf16, its SDPA model under autocast(bfloat16))")
    p.add_argument("--matmul-precision", default="auto", choices=["auto", "float32", "bf16"],
                   help="the attnphys side's dense products (encoder.matmul_precision; bf16 needs AMX): auto = bf16"
                        " with --precision bf16 where the CPU has AMX, else float32")
    p.add_argument("--steps", type=int, default=5, help="timed steps per side per round (after the warm-up)")
    p.add_argument("--repeats", type=int, default=3, help="rounds; every figure is the median over them")
    p.add_argument("--threads", type=int, default=2, help="threads of every side (BLAS, torch intra-op)")
    p.add_argument("--modes", default=None,
                   help="torch-2 modes: eager (SDPA), compile, eager_bf16 (autocast); default eager,compile, plus "
                        "eager_bf16 with --precision bf16")
    p.add_argument("--no-torch2", action="store_true", help="only attnphys and torch 1.13")
    p.add_argument("--no-torch113", action="store_true", help="skip Debian's torch 1.13")
    p.add_argument("--venv", default=os.environ.get("ATTNPHYS_TORCH2_VENV",
                                                    os.path.expanduser("~/.cache/attnphys/bench-venv-torch2")))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.batch, args.len, args.threads, args.steps)
        return

    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(args.threads)
    build = os.environ.get("ATTNPHYS_BUILD_DIR", "build")
    exe = os.path.join(build, "benchmarks", "bench_attention_train_vs_torch")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build with -DATTNPHYS_ENABLE_BENCHMARKS=ON (benchmarks/run does)")
    torch2, torch2_error = (None, "--no-torch2") if args.no_torch2 else ensure_torch2_venv(args.venv)
    if torch2_error and not args.no_torch2:
        log(f"torch 2: {torch2_error}")
    load_before = loadavg()

    common = ["--batch", str(args.batch), "--len", str(args.len), "--threads", str(args.threads),
              "--steps", str(args.steps)]
    sides = {}
    skipped = {}
    log("attnphys: warming up")
    if args.modes is None:
        args.modes = "eager,compile" + (",eager_bf16" if args.precision == "bf16" else "")
    if args.matmul_precision == "auto":
        args.matmul_precision = "float32"
        if args.precision == "bf16":
            import attnphys  # noqa: E402 (benchmarks/run puts the build's package on PYTHONPATH)
            if attnphys.info().get("amx_bf16"):
                args.matmul_precision = "bf16"
            else:
                log("attnphys: no AMX here, so the dense products stay float32 (--matmul-precision auto)")
    sides["attnphys"] = Side("attnphys", [exe, "--serve", "--attention", args.attention, "--precision", args.precision,
                                          "--matmul-precision", args.matmul_precision, "--batch", str(args.batch),
                                          "--len", str(args.len), "--steps", str(args.steps)], env)
    plan = [] if args.no_torch113 else [("torch113", "/usr/bin/python3")]
    if torch2:
        plan += [(m, venv_python(args.venv)) for m in args.modes.split(",") if m]
    for mode, py in plan:
        log(f"{mode}: warming up")
        s = Side(mode, [py, HERE, "--worker", mode] + common, env)
        if not s.ready.get("ready"):
            skipped[mode] = s.ready.get("error", "did not start")
            log(f"{mode}: skipped ({skipped[mode]})")
            s.close()
            continue
        sides[mode] = s
    for r in range(args.repeats):
        for name, s in sides.items():
            out = s.ask("run")
            s.rounds.append(out["median_s"])
            log(f"round {r + 1}/{args.repeats} {name}: median {out['median_s']:.3f} s "
                f"(steps {' '.join(f'{t:.3f}' for t in out['step_s'])}) load {loadavg()}")
    ours = sides["attnphys"]
    sgemm = ours.ask("sgemm")["sgemm_gflops"]
    load_after = loadavg()
    for s in sides.values():
        s.close()

    flop = ours.ready["flop"]
    med = {name: statistics.median(s.rounds) for name, s in sides.items()}
    result = {
        "benchmark": "attention_train_vs_torch",
        "config": {"d_model": D, "heads": HEADS, "layers": LAYERS, "d_ff": FF, "len": args.len, "batch": args.batch,
                   "dtype": "float32", "attention": args.attention, "attention_precision": args.precision,
                   "matmul_precision": args.matmul_precision,
                   "optimizer": "adamw", "threads": args.threads,
                   "steps_per_round": args.steps, "rounds": args.repeats,
                   "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "")},
        "attnphys_s": med["attnphys"],
        "rounds_s": {name: s.rounds for name, s in sides.items()},
        "flop": flop,
        "gflops": flop / med["attnphys"] / 1e9,
        "sgemm_gflops": sgemm,
        "gflops_over_sgemm": flop / med["attnphys"] / 1e9 / sgemm if sgemm > 0 else None,
        "blas_core": ours.ready["machine"].get("blas_core", ""),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }
    ratio_rounds = lambda other: [a / b for a, b in zip(ours.rounds, sides[other].rounds)]  # noqa: E731
    if "torch113" in sides:
        result.update({"torch_s": med["torch113"], "torch_version": sides["torch113"].ready["torch_version"],
                       "torch_gflops": flop / med["torch113"] / 1e9, "ratios": ratio_rounds("torch113")})
        result["ratio"] = statistics.median(result["ratios"])
    modes2 = [m for m in ("eager", "compile") if m in sides]
    if modes2:
        best = min(modes2, key=lambda m: med[m])
        result.update({"torch2_version": sides[best].ready["torch_version"], "torch2_best_mode": best,
                       "ratios_torch2": ratio_rounds(best)})
        for m in modes2:
            result[f"torch2_{m}_s"] = med[m]
            result[f"torch2_{m}_warmup_s"] = sides[m].ready.get("warmup_s")
        result["ratio_torch2"] = statistics.median(result["ratios_torch2"])
        result["torch2_gflops"] = flop / med[best] / 1e9
    if "eager_bf16" in sides:  # the same-precision comparison: PyTorch 2 with bf16 autocast
        result["torch2_eager_bf16_s"] = med["eager_bf16"]
        result["ratios_torch2_bf16"] = ratio_rounds("eager_bf16")
        result["ratio_torch2_bf16"] = statistics.median(result["ratios_torch2_bf16"])
    if torch2_error:
        result["torch2_error"] = torch2_error
    for m, e in skipped.items():
        result[f"torch2_{m}_error" if m != "torch113" else "torch_error"] = e
    if torch2:
        result["torch2_env"] = {k: torch2[k] for k in ("venv", "made_with") if k in torch2}
    line = f"attnphys {med['attnphys']:.3f} s"
    if "ratio" in result:
        line += f"  torch {result['torch_s']:.3f} s  ratio {result['ratio']:.3f}"
    if "ratio_torch2" in result:
        line += f"  torch2 {result['torch2_best_mode']} {med[result['torch2_best_mode']]:.3f} s  ratio_torch2 " \
                f"{result['ratio_torch2']:.3f}"
    if "ratio_torch2_bf16" in result:
        line += f"  torch2 eager_bf16 {med['eager_bf16']:.3f} s  ratio_torch2_bf16 {result['ratio_torch2_bf16']:.3f}"
    line += f"  {result['gflops']:.1f} GFLOP/s (sgemm {sgemm:.1f}, core {result['blas_core']})  load {load_after}"
    log(line)
    import attnphys  # CPU, BLAS and its kernel core, as every benchmark records them

    result["machine"] = attnphys.machine()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
