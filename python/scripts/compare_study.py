#!/usr/bin/env python3
"""Energy error against parameter count: DMRG, VMC with an MPS ansatz and the transformer ansatz.

Runs `attnphys compare` once per chain length (critical TFIM and Heisenberg, open chains), keeping
<out>/compare_n<N>.csv and .md, then draws <out>/compare.png: |ΔE|/|E| against the number of parameters on log-log
axes, one panel per model. With --plot-only it only redraws from the CSV files already in <out>.

    /usr/bin/python3 python/scripts/compare_study.py --cli build/bin/attnphys --n 16 32 --iters 100 --out docs/study
"""
import argparse
import csv
import glob
import os
import subprocess
import sys


def run(cli, n, args):
    prefix = os.path.join(args.out, f"compare_n{n}")
    cmd = [cli, "compare", "--n", str(n), "--iters", str(args.iters), "--out", prefix,
           "--models", ",".join(args.models)]
    cmd += sum((["--set", s] for s in args.set), [])
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def load(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "compare_n*.csv"))):
        with open(path) as f:
            rows += list(csv.DictReader(f))
    return rows


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in rows}, key=lambda m: (m != "tfim", m))
    sizes = sorted({int(r["n"]) for r in rows})
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.6), squeeze=False)
    style = {"dmrg": ("o", "-", "DMRG"), "vmc_mps": ("s", "--", "VMC, MPS ansatz"),
             "transformer": ("*", "", "VMC, transformer")}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    floor = 1e-15
    for ax, model in zip(axes[0], models):
        for k, n in enumerate(sizes):
            for method, (marker, line, label) in style.items():
                sel = sorted((r for r in rows if r["model"] == model and int(r["n"]) == n and r["method"] == method),
                             key=lambda r: int(r["n_parameters"]))
                if not sel:
                    continue
                x = [int(r["n_parameters"]) for r in sel]
                y = [max(float(r["relative_error"]), floor) for r in sel]
                yerr = [float(r["energy_error"]) / abs(float(r["reference"])) for r in sel]
                ax.errorbar(x, y, yerr=None if method == "dmrg" else yerr, marker=marker, linestyle=line or "none",
                            color=colors[k % len(colors)], markersize=11 if marker == "*" else 6, capsize=2,
                            label=f"{label}, N={n}")
                if method != "transformer":
                    for r, xi, yi in zip(sel, x, y):
                        ax.annotate(f"χ={r['chi']}", (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("variational parameters")
        ax.set_ylabel("|ΔE| / |E|")
        title = "critical TFIM (h = 1), open" if model == "tfim" else "Heisenberg chain, open"
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    print("wrote", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", default=os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys"))
    p.add_argument("--n", type=int, nargs="+", default=[16, 32])
    p.add_argument("--iters", type=int, default=100, help="VMC iterations per run (MPS and transformer alike)")
    p.add_argument("--models", nargs="+", default=["tfim", "heisenberg"])
    p.add_argument("--set", action="append", default=[], help="extra option for every VMC run (section.key=value)")
    p.add_argument("--out", default="docs/study")
    p.add_argument("--plot-only", action="store_true")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if not args.plot_only:
        for n in args.n:
            run(args.cli, n, args)
    rows = load(args.out)
    if not rows:
        sys.exit(f"no compare_n*.csv in {args.out}")
    plot(rows, os.path.join(args.out, "compare.png"))


if __name__ == "__main__":
    main()
