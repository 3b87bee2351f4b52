"""VMC throughput of the transformer wavefunction, and its log psi batch evaluation against PyTorch, in one run.

For N = 20, 50, 100 (periodic Heisenberg chains, the default `attnphys vmc` transformer: patches of 2 spins, d = 16,
2 heads, 1 factored-attention block, FFN 32, complex log-cosh readout with 16 units, symmetrised over the 2
intra-patch shifts) it measures
  * samples_per_s      Metropolis samples with their local energies per second (Vmc.estimate_energy);
  * sr_step_s          seconds per full VMC iteration (sampling, local energies, per-sample gradients, SR solve);
  * logpsi_s / torch_logpsi_s   one log psi evaluation of a batch of B configurations (best of --repeat), attnphys
                       against the same architecture written in PyTorch 1.13 (float64, torch.set_num_threads(2),
                       no_grad), loaded with the same weights and checked to give the same log psi (max |difference|
                       printed). PyTorch runs in its own process (this script with --torch-worker), so that neither
                       side shares a BLAS thread pool or a warm cache with the other, with OPENBLAS_NUM_THREADS=1 (its
                       fastest setting here); attnphys is timed before and after it and keeps its better half.
The last stdout line is JSON; `ratio` is the largest attnphys/PyTorch log psi time over the sizes (floor: <= 0.5).

    python3 benchmarks/vmc_vs_torch.py [--sizes 20,50,100] [--batch 1024] [--repeat 10]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np


def torch_model(theta, blocks, n, periodic):
    """The attnphys transformer ansatz rebuilt in PyTorch from its parameter vector and named parameter blocks."""
    import torch

    W = {}
    for b in blocks:
        size = int(np.prod(b["shape"]))
        W[b["name"]] = torch.tensor(theta[b["offset"]:b["offset"] + size].reshape(b["shape"]), dtype=torch.float64)
    layers = sorted({int(k.split(".")[2]) for k in W if k.startswith("encoder.layers.")})
    b_patch = W["encoder.embed.weight"].shape[1]
    d = W["encoder.embed.weight"].shape[0]
    heads = W[f"encoder.layers.{layers[0]}.self_attn.alpha"].shape[0]
    dh = d // heads
    npatch = n // b_patch
    shifts = b_patch if periodic else 1
    idx = torch.arange(npatch)
    rel = (idx[:, None] - idx[None, :]) % npatch if periodic else idx[:, None] - idx[None, :] + npatch - 1
    ln = torch.nn.functional.layer_norm
    gelu = torch.nn.functional.gelu

    def log_psi(sigma):
        B = sigma.shape[0]
        # Tokens of every intra-patch shift s: sites (p*b + k + s) mod n.
        sites = (torch.arange(npatch)[:, None] * b_patch + torch.arange(b_patch)[None, :])
        toks = torch.stack([sigma[:, (sites + s) % n] for s in range(shifts)], 1)  # [B, S, Np, b]
        x = toks.reshape(B * shifts, npatch, b_patch) @ W["encoder.embed.weight"].T + W["encoder.embed.bias"]
        if "encoder.pos_embed" in W:
            x = x + W["encoder.pos_embed"][:npatch]
        for l in layers:
            p = f"encoder.layers.{l}."
            h = ln(x, (d,), W[p + "norm1.weight"], W[p + "norm1.bias"], 1e-5)
            v = (h @ W[p + "self_attn.v_proj.weight"].T + W[p + "self_attn.v_proj.bias"])
            v = v.reshape(-1, npatch, heads, dh).transpose(1, 2)  # [R, H, Np, dh]
            P = W[p + "self_attn.alpha"][:, rel]                   # [H, Np, Np]
            o = (P @ v).transpose(1, 2).reshape(-1, npatch, d)
            x = x + o @ W[p + "self_attn.out_proj.weight"].T + W[p + "self_attn.out_proj.bias"]
            h = ln(x, (d,), W[p + "norm2.weight"], W[p + "norm2.bias"], 1e-5)
            f = gelu(h @ W[p + "linear1.weight"].T + W[p + "linear1.bias"])
            x = x + f @ W[p + "linear2.weight"].T + W[p + "linear2.bias"]
        x = ln(x, (d,), W["encoder.norm.weight"], W["encoder.norm.bias"], 1e-5)
        z = x.sum(1)
        th = torch.complex(z @ W["out.W_re"].T + W["out.c_re"], z @ W["out.W_im"].T + W["out.c_im"])
        lp = torch.log(torch.cosh(th)).sum(-1).reshape(B, shifts)
        m = lp.real.max(1, keepdim=True).values
        return (m + torch.log(torch.exp(lp - m).sum(1, keepdim=True))).squeeze(1) - math.log(shifts)

    return log_psi


def best_time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def torch_worker(path):
    """--torch-worker PATH: time the PyTorch model saved by main() in PATH (.npz) and write its log psi beside it."""
    import torch

    torch.set_num_threads(2)
    f = np.load(path)
    n, repeat = int(f["n"]), int(f["repeat"])
    tf = torch_model(f["theta"], json.loads(str(f["blocks"])), n, True)
    ts = torch.tensor(f["sigma"])
    with torch.no_grad():
        np.save(path + ".logpsi.npy", tf(ts).numpy())
        t = best_time(lambda: tf(ts), repeat)
    print(json.dumps({"seconds": t, "version": torch.__version__, "threads": torch.get_num_threads()}))


def run_torch(psi, n, sigma, repeat):
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = d + "/model.npz"
        blocks = [{"name": b["name"], "offset": int(b["offset"]), "shape": [int(x) for x in b["shape"]]}
                  for b in psi.parameter_blocks()]
        np.savez(path, theta=psi.get_parameters(), blocks=json.dumps(blocks), sigma=sigma, n=n, repeat=repeat)
        # PyTorch's fastest setting on this machine: its own 2 intra-op threads over a single-threaded OpenBLAS
        # (Debian's torch calls OpenBLAS from inside its threads; letting OpenBLAS start threads of its own as well
        # oversubscribes the cores and was 2-4x slower).
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        out = subprocess.run([sys.executable, __file__, "--torch-worker", path], capture_output=True, text=True,
                             env=env)
        if out.returncode != 0:
            sys.exit(f"N={n}: the PyTorch worker failed:\n{out.stderr}")
        res = json.loads(out.stdout.strip().splitlines()[-1])
        return res, np.load(path + ".logpsi.npy")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,50,100")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--vmc-steps", type=int, default=1)
    ap.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args.torch_worker)
    import attnphys  # not in the PyTorch worker
    from attnphys import spin

    torch_info = {}
    rng = np.random.default_rng(0)
    rows, ratios = [], []
    for n in [int(s) for s in args.sizes.split(",")]:
        model = spin.ChainModel("heisenberg", n=n, bc="periodic")
        psi = spin.Transformer(n, periodic=True, options={"transformer.marshall_sign": False,
                                                          "transformer.init_std": 0.5})
        sigma = np.where(rng.random((args.batch, n)) < 0.5, -1.0, 1.0)
        ours = psi.log_psi(sigma)
        t_before = best_time(lambda: psi.log_psi(sigma), args.repeat)
        torch_info, theirs = run_torch(psi, n, sigma, args.repeat)
        t_torch = torch_info["seconds"]
        t_ours = min(t_before, best_time(lambda: psi.log_psi(sigma), args.repeat))
        d = ours - theirs
        diff = float(np.max(np.abs(d.real + 1j * np.angle(np.exp(1j * d.imag)))))
        if diff > 1e-8:
            sys.exit(f"N={n}: attnphys and PyTorch log psi differ by {diff}: not the same model")

        vmc = spin.Vmc(model, psi, {"sampler.n_samples": 1024, "sampler.n_chains": 64, "sampler.n_discard": 16})
        t0 = time.perf_counter()
        est = vmc.estimate_energy(1024)
        t_est = time.perf_counter() - t0
        hist = vmc.run(args.vmc_steps)
        sr_step = float(np.median([h["seconds"] for h in hist]))
        row = {"n": n, "n_parameters": psi.n_parameters, "batch": args.batch, "logpsi_s": t_ours,
               "torch_logpsi_s": t_torch, "ratio": t_ours / t_torch, "max_abs_diff": diff,
               "samples_per_s": est["n"] / t_est, "sr_step_s": sr_step}
        rows.append(row)
        ratios.append(row["ratio"])
        print(f"N={n:4d}  P={psi.n_parameters:6d}  log psi of {args.batch}: attnphys {t_ours * 1e3:8.2f} ms  "
              f"PyTorch {t_torch * 1e3:8.2f} ms  ratio {row['ratio']:.3f}  (|diff| {diff:.1e})   "
              f"samples/s {row['samples_per_s']:9.0f}   s/SR step {sr_step:.3f}", file=sys.stderr)
    print(json.dumps({"benchmark": "vmc_vs_torch", "sizes": rows, "ratio": max(ratios),
                      "torch_version": torch_info.get("version"), "torch_threads": torch_info.get("threads"),
                      "torch_openblas_threads": 1, "machine": attnphys.machine()}))


if __name__ == "__main__":
    main()
