#!/usr/bin/env python3
"""Plots of a heat-surrogate run directory (written by `attnphys train heat` / `attnphys eval heat`).

    /usr/bin/python3 python/scripts/plot_heat.py runs/heat2d            # writes PNGs into runs/heat2d/plots/

Reads metrics.csv (training curves) and eval.h5 (fields, rollout errors, attention map); writes
loss.png, fields.png (with the sample's κ(x), source and boundary data when the family draws them),
rollout.png, speed.png (the solver's error against its cost, and the surrogate's point) and attention.png. Every figure is built from data the run saved, nothing else.
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read_csv(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path} has no rows: did the training run log anything?")
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def plot_loss(run, out):
    m = read_csv(os.path.join(run, "metrics.csv"))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(m["step"], m["train_loss"], label="train (relative L2 loss)", lw=0.8)
    if "val_rel_l2" in m:
        ok = m["val_rel_l2"] > 0
        ax.semilogy(m["step"][ok], m["val_rel_l2"][ok], "o-", label="validation relative L2", ms=3)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("relative L2 error")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=120)
    plt.close(fig)


def plot_eval(run, out):
    import h5py

    path = os.path.join(run, "eval.h5")
    with h5py.File(path, "r") as f:
        inp = f["fields/input"][0]
        pred = f["fields/prediction"][0]
        ref = f["fields/reference"][0]
        # The sample's own inputs first (κ(x), source, boundary data), when the problem family draws them.
        chans = [(k, f["fields/channels"][k][0]) for k in f["fields/channels"]] if "fields/channels" in f else []
        chans.sort(key=lambda kv: ["kappa", "source", "boundary"].index(kv[0]) if kv[0] in ("kappa", "source", "boundary") else 9)
        ncol = len(chans) + 4
        fig, axes = plt.subplots(1, ncol, figsize=(3.5 * ncol, 3.4))
        for ax, (name, data) in zip(axes, chans):
            im = ax.imshow(data, origin="lower", cmap="viridis")
            ax.set_title({"kappa": "diffusivity κ(x)", "source": "source f(x)", "boundary": "boundary data"}.get(name, name))
            fig.colorbar(im, ax=ax, fraction=0.046)
        axes = axes[len(chans):]
        err = pred - ref
        vmin, vmax = min(inp.min(), ref.min()), max(inp.max(), ref.max())
        for ax, data, title in zip(axes[:3], [inp, pred, ref], ["input u(t)", "prediction", "reference (ADI)"]):
            im = ax.imshow(data, origin="lower", vmin=vmin, vmax=vmax, cmap="inferno")
            ax.set_title(title)
            fig.colorbar(im, ax=ax, fraction=0.046)
        lim = np.abs(err).max()
        im = axes[3].imshow(err, origin="lower", cmap="RdBu_r", vmin=-lim, vmax=lim)
        axes[3].set_title("prediction − reference")
        fig.colorbar(im, ax=axes[3], fraction=0.046)
        for ax in fig.axes[: ncol]:
            ax.set_xticks([])
            ax.set_yticks([])
        fig.tight_layout()
        fig.savefig(os.path.join(out, "fields.png"), dpi=120)
        plt.close(fig)

        if "rollout/rel_l2" in f:
            r = f["rollout/rel_l2"][()]
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.semilogy(np.arange(1, len(r) + 1), r, "o-", ms=3, label="surrogate, autoregressive")
            ax.set_xlabel("rollout step (each one model horizon Δt)")
            ax.set_ylabel("mean relative L2 error")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
            fig.tight_layout()
            fig.savefig(os.path.join(out, "rollout.png"), dpi=120)
            plt.close(fig)

        if "speed/steps" in f:
            # The solver's error against its cost over the step counts the equal-accuracy search ran, and the
            # surrogate's point: where the solver curve crosses the surrogate's error is the equal-accuracy time.
            steps, err_s, ms = f["speed/steps"][()], f["speed/rel_l2"][()], f["speed/solver_ms_per_sample"][()]
            order = np.argsort(steps)
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.loglog(ms[order], err_s[order], "o-", ms=3, label="ADI / CN solver (steps per horizon vary)")
            for st, x, y in zip(steps[order], ms[order], err_s[order]):
                ax.annotate(f"{int(st)}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
            sa = f["speed"].attrs
            ax.loglog([sa["surrogate_ms_per_sample"]], [sa["surrogate_rel_l2"]], "r*", ms=12, label="surrogate")
            ax.set_xlabel("ms per sample")
            ax.set_ylabel("mean relative L2 against the reference")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(os.path.join(out, "speed.png"), dpi=120)
            plt.close(fig)

        if "attention/weights" in f:
            has_op = "attention/operator" in f
            w = f["attention/operator"][()] if has_op else f["attention/weights"][()]
            q = f["attention"].attrs.get("query", [0, 0])
            panels = [(w, "learned operator row b0·δ + Σ a_h P_h" if has_op else "learned attention (mean over heads)")]
            # The solver-based panels exist only when the data's physics is the reference solver's (not for a
            # PDEBench file or a variable-coefficient dataset).
            if "attention/heat_kernel" in f:
                panels += [(f["attention/heat_kernel"][()], "exact heat kernel"),
                           (f["attention/stencil"][()], "ADI response to a unit impulse over Δt")]
            fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
            for ax, (data, title) in zip(axes[0], panels):
                im = ax.imshow(data, origin="lower", cmap="viridis")
                ax.plot([q[1]], [q[0]], "r+", ms=10)
                ax.set_title(title, fontsize=9)
                fig.colorbar(im, ax=ax, fraction=0.046)
            fig.tight_layout()
            fig.savefig(os.path.join(out, "attention.png"), dpi=120)
            plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="run directory (holds metrics.csv and eval.h5)")
    ap.add_argument("--out", help="where to write PNGs (default RUN/plots)")
    a = ap.parse_args()
    if not os.path.isdir(a.run):
        sys.exit(f"run directory '{a.run}' does not exist; train first: build/bin/attnphys train heat")
    out = a.out or os.path.join(a.run, "plots")
    os.makedirs(out, exist_ok=True)
    plot_loss(a.run, out)
    if os.path.exists(os.path.join(a.run, "eval.h5")):
        plot_eval(a.run, out)
    print("wrote", ", ".join(sorted(os.listdir(out))), "to", out)


if __name__ == "__main__":
    main()
