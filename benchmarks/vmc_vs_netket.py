"""VMC side by side with NetKet, in one run: the same model, Hamiltonian and SR settings in attnphys and in NetKet.

Cases (all periodic chains, Sz = 0 sector, Metropolis exchange moves, SR with a constant diagonal shift):
  rbm          RBM alpha = 1 (complex parameters, visible and hidden biases, init std 0.01) on Heisenberg N = 22,
               1008 samples = 16 chains x 63, no sign rule in either (both learn the sign);
  vit_heis     our default VMC transformer (patches of 2, d = 16, 2 heads, 1 factored-attention block, FFN 32,
               complex log-cosh readout with 16 units, symmetrised over the 2 intra-patch shifts, Marshall sign) on
               Heisenberg N = 20, 1024 samples = 64 chains x 16;
  vit_j1j2     the same transformer on J1-J2, J2 = 0.24, N = 20.
The transformer is ported exactly to Flax (the log psi of benchmarks/vmc_vs_torch.py's PyTorch port, in jax) and
NetKet starts from attnphys' initial parameters; the worker checks that both give the same log psi (|diff| printed,
`max_abs_logpsi_diff`). The RBMs start from their own random draws (same distribution).

Conventions (the mapping): NetKet writes Heisenberg in Pauli matrices, sigma.sigma = 4 S.S; the NetKet side runs
0.25 * nk.operator.Heisenberg(...) so that both energies are in S.S units (attnphys'). NetKet's gradient of real
parameters is 2 Re<O* dE>, attnphys' SR right-hand side is Re<O* dE>; with the same S (Re of the centred O^dag O) and
the same absolute diagonal shift, attnphys' learning rate lr equals NetKet's lr / 2 step for step, so NetKet runs with
learning rate lr / 2. Sampling: NetKet MetropolisExchange with d_max = N / 2 (every pair on the ring, as attnphys'
exchange over all pairs), sweep = N proposals, n_discard_per_chain = 2 (attnphys: 16 sweeps of burn-in on the first
iteration, 2 afterwards). attnphys proposes in float32 (its default; kept samples in float64), NetKet in float64.
NetKet SR: nk.optimizer.SR(diag_shift) with its default QGT and solver (`netket_sr` in the JSON; --netket-solver
cholesky for the direct solve that attnphys does).

Timing: seconds per iteration, median over the iterations after --warmup (NetKet's first ones include jit
compilation), each code in its own process with 2 threads (attnphys: ATTNPHYS_NUM_THREADS=2; NetKet/XLA:
intra_op_parallelism_threads=2, OPENBLAS/OMP/NUMBA threads = 2). `ratio` = attnphys / NetKet seconds per iteration;
`ratio_rbm`, `ratio_vit` (the worse of the two transformer cases) at the top level. Energies: the last iteration's
estimate and the mean over the last 10 iterations, both sides, after the same number of iterations, with ED.

NetKet and jax[cpu] come from PyPI into ~/.cache/attnphys/bench-venv-netket (made once, or --venv /
ATTNPHYS_NETKET_VENV); never a dependency of attnphys.

    benchmarks/run vmc_vs_netket [--cases rbm,vit_heis,vit_j1j2] [--iters-rbm 60] [--iters-vit 30] [--warmup 5]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import _venv  # benchmarks/_venv.py: the peers' venvs
from _venv import venv_python

NETKET_SPEC = ["netket", "jax[cpu]"]
CASES = {
    "rbm": {"model": "heisenberg", "n": 22, "j2": 0.0, "ansatz": "rbm", "n_samples": 1008, "n_chains": 16,
            "lr": 0.02, "diag_shift": 0.01},
    "vit_heis": {"model": "heisenberg", "n": 20, "j2": 0.0, "ansatz": "transformer", "n_samples": 1024,
                 "n_chains": 64, "lr": 0.05, "diag_shift": 0.01},
    "vit_j1j2": {"model": "j1j2", "n": 20, "j2": 0.24, "ansatz": "transformer", "n_samples": 1024,
                 "n_chains": 64, "lr": 0.05, "diag_shift": 0.01},
}
THREADS = 2


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# The NetKet venv.


def probe(py):
    return _venv.probe_json(py, "import json, netket, jax, flax; print(json.dumps({'netket': netket.__version__, "
                                "'jax': jax.__version__, 'flax': flax.__version__}))", "netket")


def ensure_netket_venv(venv):
    """Makes (once) and checks the venv (benchmarks/_venv.py); returns (info, error)."""
    def install(py):
        _venv.pip_install(py, *NETKET_SPEC)
        return {"made_with": f"python3 -m venv; pip install {' '.join(NETKET_SPEC)} (PyPI)"}
    return _venv.ensure_venv(venv, "NetKet", probe, install)


# ---------------------------------------------------------------------------------------------------------------
# The NetKet worker (runs in the venv's python: no attnphys there).


def jax_transformer_log_psi(W, n, periodic, marshall):
    """benchmarks/vmc_vs_torch.py's port of the attnphys transformer, in jax; W: name -> array."""
    import jax
    import jax.numpy as jnp

    layers = sorted({int(k.split(".")[2]) for k in W if k.startswith("encoder.layers.")})
    d, b_patch = W["encoder.embed.weight"].shape
    heads = W[f"encoder.layers.{layers[0]}.self_attn.alpha"].shape[0]
    dh = d // heads
    npatch = n // b_patch
    shifts = b_patch if periodic else 1
    idx = np.arange(npatch)
    rel = (idx[:, None] - idx[None, :]) % npatch if periodic else idx[:, None] - idx[None, :] + npatch - 1
    sites = np.arange(npatch)[:, None] * b_patch + np.arange(b_patch)[None, :]
    gather = np.stack([(sites + s) % n for s in range(shifts)], 0)  # [S, Np, b]
    even = (np.arange(n) % 2 == 0).astype(np.float64)

    def ln(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * w + b

    def log_psi(sigma):
        shape = sigma.shape[:-1]
        sigma = sigma.reshape(-1, n)
        B = sigma.shape[0]
        toks = sigma[:, gather]  # [B, S, Np, b]
        x = toks.reshape(B * shifts, npatch, b_patch) @ W["encoder.embed.weight"].T + W["encoder.embed.bias"]
        if "encoder.pos_embed" in W:
            x = x + W["encoder.pos_embed"][:npatch]
        for l in layers:
            p = f"encoder.layers.{l}."
            h = ln(x, W[p + "norm1.weight"], W[p + "norm1.bias"])
            v = h @ W[p + "self_attn.v_proj.weight"].T + W[p + "self_attn.v_proj.bias"]
            v = v.reshape(-1, npatch, heads, dh)
            P = W[p + "self_attn.alpha"][:, rel]  # [H, Np, Np]
            o = jnp.einsum("hij,rjhd->rihd", P, v).reshape(-1, npatch, d)
            x = x + o @ W[p + "self_attn.out_proj.weight"].T + W[p + "self_attn.out_proj.bias"]
            h = ln(x, W[p + "norm2.weight"], W[p + "norm2.bias"])
            f = jax.nn.gelu(h @ W[p + "linear1.weight"].T + W[p + "linear1.bias"], approximate=False)
            x = x + f @ W[p + "linear2.weight"].T + W[p + "linear2.bias"]
        x = ln(x, W["encoder.norm.weight"], W["encoder.norm.bias"])
        z = x.sum(1)
        th = (z @ W["out.W_re"].T + W["out.c_re"]) + 1j * (z @ W["out.W_im"].T + W["out.c_im"])
        lp = jnp.log(jnp.cosh(th)).sum(-1).reshape(B, shifts)
        m = jax.lax.stop_gradient(lp.real.max(1, keepdims=True))
        out = (m + jnp.log(jnp.exp(lp - m).sum(1, keepdims=True)))[:, 0] - math.log(shifts)
        if marshall:  # (-1)^(up spins on even sites)
            out = out + 1j * jnp.pi * ((sigma > 0) @ even)
        return out.reshape(shape)

    return log_psi


def netket_worker(path):
    """--netket-worker PATH: one case (PATH.json written by main()); prints one JSON line."""
    with open(path) as f:
        case = json.load(f)
    import jax
    import jax.numpy as jnp
    import flax.linen as nn
    import netket as nk

    n = case["n"]
    hi = nk.hilbert.Spin(s=0.5, N=n, total_sz=0)
    nn_edges = [[i, (i + 1) % n, 0] for i in range(n)]
    if case["model"] == "j1j2":
        g = nk.graph.Graph(edges=nn_edges + [[i, (i + 2) % n, 1] for i in range(n)])
        H = 0.25 * nk.operator.Heisenberg(hi, g, J=[1.0, case["j2"]], sign_rule=[False, False])
    else:
        g = nk.graph.Chain(n, pbc=True)
        H = 0.25 * nk.operator.Heisenberg(hi, g, J=1.0, sign_rule=False)
    sampler = nk.sampler.MetropolisExchange(hi, graph=g if case["model"] != "j1j2" else nk.graph.Chain(n, pbc=True),
                                            d_max=n // 2, n_chains=case["n_chains"], sweep_size=n)
    result = {}
    if case["ansatz"] == "rbm":
        model = nk.models.RBM(alpha=1, param_dtype=complex, use_visible_bias=True, use_hidden_bias=True)
        result["netket_model"] = "nk.models.RBM(alpha=1, param_dtype=complex) (the same RBM)"
    else:
        blocks = case["blocks"]
        theta = np.load(case["theta"])

        class AttnphysTransformer(nn.Module):
            @nn.compact
            def __call__(self, sigma):
                W = {b["name"]: self.param(b["name"].replace(".", "__"), nn.initializers.zeros, tuple(b["shape"]),
                                           jnp.float64) for b in blocks}
                return jax_transformer_log_psi(W, n, True, case["marshall"])(sigma)

        model = AttnphysTransformer()
        result["netket_model"] = ("AttnphysTransformer (Flax): the attnphys transformer ported exactly, started "
                                  "from attnphys' initial parameters")
    vs = nk.vqs.MCState(sampler, model, n_samples=case["n_samples"], n_discard_per_chain=2, seed=1, sampler_seed=1)
    if case["ansatz"] != "rbm":
        params = {b["name"].replace(".", "__"): jnp.asarray(theta[b["offset"]:b["offset"] + int(np.prod(b["shape"]))]
                                                           .reshape(b["shape"])) for b in blocks}
        vs.parameters = params
        sig = np.load(case["sigma"])
        ours = np.load(case["logpsi"])
        theirs = np.asarray(vs.log_value(jnp.asarray(sig)))
        dd = ours - theirs
        result["max_abs_logpsi_diff"] = float(np.max(np.abs(dd.real + 1j * np.angle(np.exp(1j * dd.imag)))))
    result["n_parameters"] = int(sum(x.size * (2 if jnp.iscomplexobj(x) else 1)
                                     for x in jax.tree_util.tree_leaves(vs.parameters)))
    if case["netket_solver"] == "cholesky":
        sr = nk.optimizer.SR(diag_shift=case["diag_shift"], solver=nk.optimizer.solver.cholesky)
    else:
        sr = nk.optimizer.SR(diag_shift=case["diag_shift"])
    result["netket_sr"] = repr(sr).replace("\n", " ")[:300]
    driver = nk.driver.VMC(H, nk.optimizer.Sgd(learning_rate=case["lr"] / 2), variational_state=vs,
                           preconditioner=sr)
    times, energies = [], []
    last = [time.perf_counter()]

    def cb(step, log_data, drv):
        jax.block_until_ready(drv.state.parameters)
        t = time.perf_counter()
        times.append(t - last[0])
        last[0] = t
        energies.append(float(np.real(log_data["Energy"].mean)))
        return True

    last[0] = time.perf_counter()
    driver.run(case["n_iter"], out=None, show_progress=False, callback=cb)
    result.update({"seconds": times, "energies": energies, "netket": nk.__version__, "jax": jax.__version__,
                   "jax_devices": str(jax.devices())})
    print(json.dumps(result))


# ---------------------------------------------------------------------------------------------------------------
# attnphys.


def attnphys_case(name, case, n_iter, seed=1):
    from attnphys import spin

    n = case["n"]
    hi = spin.Spin(n, total_sz=0)
    H = (spin.J1J2(hi, j2=case["j2"], bc="periodic") if case["model"] == "j1j2"
         else spin.Heisenberg(hi, bc="periodic"))
    sampler = spin.MetropolisExchange(hi, n_chains=case["n_chains"], n_discard=16, n_discard_continue=2)
    model = spin.Rbm(alpha=1) if case["ansatz"] == "rbm" else spin.Transformer()
    vs = spin.MCState(sampler, model, n_samples=case["n_samples"], seed=seed)
    driver = spin.VMC(H, spin.Sgd(case["lr"]), variational_state=vs,
                      preconditioner=spin.SR(diag_shift=case["diag_shift"], diag_shift_final=case["diag_shift"]))
    driver.run(0)  # creates the parameters (the state met its Hamiltonian)
    theta0 = np.array(vs.parameters)
    hist = driver.run(n_iter)
    return {"seconds": [h["seconds"] for h in hist], "energies": [h["energy"] for h in hist],
            "phases": {k: float(np.median([h[k] for h in hist[1:]] or [0.0]))
                       for k in ("sample_seconds", "energy_seconds", "gradient_seconds", "update_seconds")},
            "n_parameters": int(theta0.size), "theta0": theta0, "H": H}


def run_netket(py, case, threads):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "case.json")
        with open(path, "w") as f:
            json.dump(case, f)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   NUMBA_NUM_THREADS=str(threads), JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}")
        env.pop("PYTHONPATH", None)
        out = subprocess.run([py, os.path.abspath(__file__), "--netket-worker", path], capture_output=True,
                             text=True, env=env)
        if out.returncode != 0:
            sys.exit(f"the NetKet worker failed:\n{out.stderr[-4000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="rbm,vit_heis,vit_j1j2")
    ap.add_argument("--iters-rbm", type=int, default=60)
    ap.add_argument("--iters-vit", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="iterations left out of the median (jit, burn-in)")
    ap.add_argument("--netket-solver", choices=("default", "cholesky"), default="default")
    ap.add_argument("--no-ed", action="store_true", help="skip the exact energies")
    ap.add_argument("--venv", default=os.environ.get("ATTNPHYS_NETKET_VENV",
                                                     os.path.expanduser("~/.cache/attnphys/bench-venv-netket")))
    ap.add_argument("--netket-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.netket_worker:
        return netket_worker(args.netket_worker)
    os.environ.setdefault("ATTNPHYS_NUM_THREADS", str(THREADS))
    info, err = ensure_netket_venv(args.venv)
    if err:
        sys.exit(err)
    import attnphys
    from attnphys import spin

    rows = {}
    t_start = time.time()
    load_before = os.getloadavg()
    for name in [c for c in args.cases.split(",") if c]:
        if name not in CASES:
            sys.exit(f"unknown case '{name}'; available: {', '.join(CASES)}")
        case = dict(CASES[name])
        n_iter = args.iters_rbm if case["ansatz"] == "rbm" else args.iters_vit
        if n_iter <= args.warmup + 1:
            sys.exit(f"{name}: {n_iter} iterations leave nothing after --warmup {args.warmup}")
        log(f"[{name}] attnphys: {n_iter} iterations")
        ours = attnphys_case(name, case, n_iter)
        nk_case = dict(case, n_iter=n_iter, netket_solver=args.netket_solver, marshall=case["model"] != "tfim")
        with tempfile.TemporaryDirectory() as d:
            if case["ansatz"] == "transformer":
                psi = spin.Transformer(case["n"], periodic=True, options={"transformer.marshall_sign": True})
                psi.set_parameters(ours["theta0"])
                rng = np.random.default_rng(0)
                sig = np.array([rng.permutation([1.0] * (case["n"] // 2) + [-1.0] * (case["n"] // 2))
                                for _ in range(64)])
                np.save(os.path.join(d, "theta.npy"), ours["theta0"])
                np.save(os.path.join(d, "sigma.npy"), sig)
                np.save(os.path.join(d, "logpsi.npy"), psi.log_psi(sig))
                nk_case.update(blocks=[{"name": b["name"], "offset": int(b["offset"]),
                                        "shape": [int(x) for x in b["shape"]]} for b in psi.parameter_blocks()],
                               theta=os.path.join(d, "theta.npy"), sigma=os.path.join(d, "sigma.npy"),
                               logpsi=os.path.join(d, "logpsi.npy"))
            log(f"[{name}] NetKet: {n_iter} iterations")
            theirs = run_netket(venv_python(args.venv), nk_case, THREADS)
        if theirs.get("max_abs_logpsi_diff", 0.0) > 1e-8:
            sys.exit(f"{name}: attnphys and the NetKet port differ in log psi by {theirs['max_abs_logpsi_diff']}")
        exact = None if args.no_ed else float(spin.exact_ground_state(ours["H"].chain_model())["energy"])
        w = args.warmup
        a_s = float(statistics.median(ours["seconds"][w:]))
        n_s = float(statistics.median(theirs["seconds"][w:]))

        def energies(e):
            tail = e[-10:]
            d = {"energy_last": e[-1], "energy_last10": float(np.mean(tail))}
            if exact is not None:
                d["relative_error_last10"] = abs(d["energy_last10"] - exact) / abs(exact)
            return d

        row = {"model": case["model"], "n": case["n"], "j2": case["j2"], "ansatz": case["ansatz"],
               "n_samples": case["n_samples"], "n_chains": case["n_chains"], "lr": case["lr"],
               "netket_lr": case["lr"] / 2, "diag_shift": case["diag_shift"], "n_iter": n_iter, "warmup": w,
               "attnphys_s_per_iter": a_s, "netket_s_per_iter": n_s, "ratio": a_s / n_s,
               "attnphys_phases": ours["phases"], "netket_first_iter_s": theirs["seconds"][0],
               "n_parameters": ours["n_parameters"], "netket_n_parameters": theirs["n_parameters"],
               "netket_model": theirs["netket_model"], "netket_sr": theirs["netket_sr"], "exact": exact,
               "attnphys": energies(ours["energies"]), "netket": energies(theirs["energies"])}
        if "max_abs_logpsi_diff" in theirs:
            row["max_abs_logpsi_diff"] = theirs["max_abs_logpsi_diff"]
        rows[name] = row
        log(f"[{name}] s/iter attnphys {a_s:.4f}  NetKet {n_s:.4f}  ratio {a_s / n_s:.3f}   E(last 10) attnphys "
            f"{row['attnphys']['energy_last10']:.5f}  NetKet {row['netket']['energy_last10']:.5f}  exact {exact}")
    out = {"benchmark": "vmc_vs_netket", "cases": rows, "threads": THREADS,
           "netket_version": theirs["netket"], "jax_version": theirs["jax"], "netket_env": info,
           "energy_units": "S.S (attnphys); NetKet runs 0.25 * its Pauli-matrix Heisenberg",
           "load_before": load_before, "load_after": os.getloadavg(), "wall_s": time.time() - t_start,
           "machine": attnphys.machine()}
    if "rbm" in rows:
        out["ratio_rbm"] = rows["rbm"]["ratio"]
    vit = [rows[k]["ratio"] for k in ("vit_heis", "vit_j1j2") if k in rows]
    if vit:
        out["ratio_vit"] = max(vit)
    out["ratio"] = max(r["ratio"] for r in rows.values())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
