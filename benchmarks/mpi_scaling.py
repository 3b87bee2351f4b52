"""Throughput at 1 and 2 MPI ranks: VMC sampling, VMC iterations (sampling + gradients + SR) and heat-operator
training, each run through the `attnphys` CLI under mpirun with one thread per rank (OMP_NUM_THREADS=1,
OPENBLAS_NUM_THREADS=1), so 2 ranks use the 2 cores of this machine and 1 rank uses one.

  VMC       periodic Heisenberg chain, N = 20, default transformer ansatz; sampling = Metropolis samples with their
            local energies (the final estimate of `attnphys vmc --iters 0`), iteration = median `step_seconds`.
  training  configs/heat2d.toml for a few steps; `train_seconds / steps`.

The last stdout line is JSON with vmc_speedup_2ranks (sampling; floor 1.7), vmc_step_speedup_2ranks and
train_speedup_2ranks.

    python3 benchmarks/mpi_scaling.py [--samples 16384] [--vmc-iters 4] [--train-steps 40]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, ranks):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_PROC_BIND="false")
    mpirun = shutil.which("mpirun")
    if not mpirun:
        sys.exit("mpirun not found: install openmpi-bin (scripts/deps.sh does)")
    full = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
    out = subprocess.run(full, check=True, capture_output=True, text=True, env=env)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if len(lines) != 1:
        sys.exit(f"expected one JSON line from {' '.join(full)}, got {len(lines)}:\n{out.stdout}\n{out.stderr}")
    return json.loads(lines[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=16384)
    ap.add_argument("--vmc-iters", type=int, default=4)
    ap.add_argument("--train-steps", type=int, default=40)
    args = ap.parse_args()
    exe = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build first (benchmarks/run mpi_scaling does)")
    vmc = [exe, "vmc", "--model", "heisenberg", "--n", "20", "--bc", "periodic", "--set", "run.reference=none",
           "--json"]
    res = {"benchmark": "mpi_scaling", "threads_per_rank": 1}
    for r in (1, 2):
        s = run(vmc + ["--iters", "0", "--set", f"run.final_samples={args.samples}"], r)
        res[f"vmc_samples_per_s_{r}ranks"] = args.samples / s["estimate_seconds"]
        it = run(vmc + ["--iters", str(args.vmc_iters), "--set", "run.final_samples=0"], r)
        res[f"vmc_step_s_{r}ranks"] = it["step_seconds"]
        with tempfile.TemporaryDirectory() as out:
            t = run([exe, "train", "heat", "--config", "configs/heat2d.toml", "--set",
                     f"train.steps={args.train_steps}", "--set", f"train.out_dir={out}", "--set", "train.progress=false",
                     "--set", "eval.speed=false", "--set", "eval.rollout_steps=0", "--set", "eval.transfer_n=0",
                     "--json"], r)
        res[f"train_s_per_step_{r}ranks"] = t["train_seconds"] / max(1, t.get("steps", args.train_steps))
        print(f"{r} rank(s): VMC sampling {res[f'vmc_samples_per_s_{r}ranks']:.0f} samples/s, VMC iteration "
              f"{res[f'vmc_step_s_{r}ranks']:.2f} s, training {res[f'train_s_per_step_{r}ranks'] * 1e3:.0f} ms/step",
              file=sys.stderr)
    res["vmc_speedup_2ranks"] = res["vmc_samples_per_s_2ranks"] / res["vmc_samples_per_s_1ranks"]
    res["vmc_step_speedup_2ranks"] = res["vmc_step_s_1ranks"] / res["vmc_step_s_2ranks"]
    res["train_speedup_2ranks"] = res["train_s_per_step_1ranks"] / res["train_s_per_step_2ranks"]
    import attnphys  # CPU, BLAS and its kernel core, as every benchmark records them

    res["machine"] = attnphys.machine()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
