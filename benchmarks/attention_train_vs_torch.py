"""One training step (forward, backward, AdamW) of a transformer encoder, attnphys against PyTorch in one run.

Encoder d = 64, 4 heads, 4 layers, FFN 256, pre-LN, GELU, sequence 1024 (a 32x32 grid), batch 16, float32. The C++
side is build/benchmarks/bench_attention_train_vs_torch (it also measures this machine's sgemm); PyTorch runs the
same model (torch.nn.TransformerEncoder, norm_first, dropout 0) with torch.set_num_threads(2). The last stdout line
is JSON with ratio = attnphys_s / torch_s.

    python3 benchmarks/attention_train_vs_torch.py [--batch 16] [--len 1024] [--torch-steps 1] [--attention dense]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def run_attnphys(args):
    build = os.environ.get("ATTNPHYS_BUILD_DIR", "build")
    exe = os.path.join(build, "benchmarks", "bench_attention_train_vs_torch")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build with -DATTNPHYS_ENABLE_BENCHMARKS=ON (benchmarks/run does)")
    cmd = [exe, "--batch", str(args.batch), "--len", str(args.len), "--attention", args.attention,
           "--steps", str(args.steps)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_torch(args):
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    d, heads, layers, ff = 64, 4, 4, 256
    layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, norm=torch.nn.LayerNorm(d), enable_nested_tensor=False)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    x = torch.randn(args.batch, args.len, d)
    dy = torch.randn(args.batch, args.len, d) / (args.batch * args.len)

    def step():
        opt.zero_grad()
        y = model(x)
        (y * dy).sum().backward()
        opt.step()

    step()  # warm-up (allocations)
    t0 = time.perf_counter()
    for _ in range(args.torch_steps):
        step()
    return (time.perf_counter() - t0) / args.torch_steps, torch.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--len", type=int, default=1024)
    p.add_argument("--attention", default="dense", choices=["dense", "tiled"])
    p.add_argument("--steps", type=int, default=3, help="timed attnphys steps")
    p.add_argument("--torch-steps", type=int, default=1, help="timed PyTorch steps (each ~17 s at full size)")
    args = p.parse_args()
    ours = run_attnphys(args)
    torch_s, torch_version = run_torch(args)
    result = {
        "benchmark": "attention_train_vs_torch",
        "config": {"d_model": 64, "heads": 4, "layers": 4, "d_ff": 256, "len": args.len, "batch": args.batch,
                   "dtype": "float32", "attention": args.attention, "optimizer": "adamw"},
        "attnphys_s": ours["attnphys_s"],
        "torch_s": torch_s,
        "torch_version": torch_version,
        "ratio": ours["attnphys_s"] / torch_s,
        "flop": ours["flop"],
        "gflops": ours["gflops"],
        "torch_gflops": ours["flop"] / torch_s / 1e9,
        "sgemm_gflops": ours["sgemm_gflops"],
    }
    print(f"attnphys {result['attnphys_s']:.3f} s  torch {torch_s:.3f} s  ratio {result['ratio']:.3f}  "
          f"{result['flop'] / 1e9:.1f} GFLOP  {result['gflops']:.1f} GFLOP/s (sgemm {result['sgemm_gflops']:.1f})",
          file=sys.stderr)
    import attnphys  # CPU, BLAS and its kernel core, as every benchmark records them

    result["machine"] = attnphys.machine()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
