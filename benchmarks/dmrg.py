#!/usr/bin/env python3
"""DMRG against TeNPy, same cases and settings in one run.

    benchmarks/run dmrg [--n 100] [--chi 100] [--no-tenpy] [--no-dense] [--venv DIR]

Cases: the open Heisenberg chain, N sites, bond dimension chi, from the Neel state; ours U(1) block-sparse and dense
(build/benchmarks/bench_dmrg --case ...), TeNPy two-site DMRG with charge conservation (conserve='Sz') and
without (conserve=None). One process per run, so that each peak memory (max RSS) is that run's own. Settings, the
same for all four: at most 12 sweeps, chi 10, 20, 40, ... up to chi, discarded weight cutoff 1e-12 (TeNPy
trunc_cut = 1e-6, its sqrt), noise / mixer amplitude 1e-5, energy goal 1e-10 relative to max(1, |E|), entropy goal
1e-6, eigensolvers adaptive (ours: residual tied to the truncation error; TeNPy's Lanczos: its defaults, which tie
P_tol to the truncation error too), one BLAS thread each (OPENBLAS/OMP/MKL_NUM_THREADS=1).

TeNPy (physics-tenpy from PyPI) lives in a virtual environment this script makes once under
~/.cache/attnphys/bench-venv-tenpy (or --venv / ATTNPHYS_TENPY_VENV); never a dependency of the library.
Last stdout line: JSON with heisenberg_u1_s, heisenberg_dense_s, tenpy_u1_s, tenpy_dense_s, ratio_u1 (ours U(1) /
TeNPy U(1) time), ratio_dense, the energy errors against the Bethe-ansatz value (N = 100) and max_rss_mib of each.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENPY_SPEC = "physics-tenpy==1.1.1"
EXACT = {100: -44.127739893}  # open Heisenberg, Bethe ansatz (README)

TENPY_RUN = r"""
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import tenpy
from tenpy.models.xxz_chain import XXZChain
from tenpy.networks.mps import MPS
from tenpy.algorithms import dmrg
n, chi, conserve = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
M = XXZChain({"L": n, "Jxx": 1.0, "Jz": 1.0, "hz": 0.0, "bc_MPS": "finite",
              "conserve": None if conserve == "none" else "Sz"})
psi = MPS.from_product_state(M.lat.mps_sites(), ["up", "down"] * (n // 2), bc="finite")
ramp, d, k = {}, 10, 0
while True:
    ramp[k] = min(d, chi)
    if d >= chi:
        break
    d, k = 2 * d, k + 1
opts = {"mixer": True, "mixer_params": {"amplitude": 1e-5, "decay": 100.0, "disable_after": len(ramp) + 2},
        "chi_list": ramp, "max_sweeps": 12, "min_sweeps": 2,
        "trunc_params": {"chi_max": chi, "svd_min": 1e-14, "trunc_cut": 1e-6},
        "max_E_err": 1e-10, "max_S_err": 1e-6}
t0 = time.perf_counter()
eng = dmrg.TwoSiteDMRGEngine(psi, M, opts)
E, psi = eng.run()
t = time.perf_counter() - t0
print(json.dumps({"energy": float(E), "seconds": t, "sweeps": int(eng.sweeps),
                  "max_bond_dimension": int(max(psi.chi)),
                  "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                  "tenpy": tenpy.__version__}))
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def one_thread_env():
    env = dict(os.environ)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    return env


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in the output")


def ensure_tenpy_venv(venv):
    """Makes (once) and checks the venv; returns (python, error)."""
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import tenpy; print(tenpy.__version__)"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py, None
    if os.path.exists(venv):
        shutil.rmtree(venv)
    log(f"TeNPy venv: making {venv} (python3 -m venv, pip install '{TENPY_SPEC}' from PyPI; once)")
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", TENPY_SPEC], check=True,
                       stdout=sys.stderr)
    except (subprocess.CalledProcessError, OSError) as e:
        return None, f"making the TeNPy venv failed ({e}); rerun with access to PyPI, or --no-tenpy"
    if subprocess.run(probe, capture_output=True).returncode != 0:
        return None, f"the venv {venv} does not import tenpy"
    return py, None


def ours(case, n, chi, build):
    exe = os.path.join(build, "benchmarks", "bench_dmrg")
    r = subprocess.run([exe, "--case", case, "--n", str(n), "--chi", str(chi)], capture_output=True, text=True,
                       env=one_thread_env())
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} --case {case} failed ({r.returncode})")
    return last_json(r.stdout)


def tenpy(py, conserve, n, chi):
    r = subprocess.run([py, "-c", TENPY_RUN, str(n), str(chi), conserve], capture_output=True, text=True,
                       env=one_thread_env())
    if r.returncode != 0:
        raise RuntimeError(f"TeNPy ({conserve}) failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    out = last_json(r.stdout)
    log(f"TeNPy {conserve} N={n} chi={chi}: E = {out['energy']:.12f}, {out['sweeps']} sweeps, "
        f"{out['seconds']:.2f} s, max RSS {out['max_rss_mib']:.0f} MiB")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--chi", type=int, default=100)
    ap.add_argument("--no-tenpy", action="store_true")
    ap.add_argument("--no-dense", action="store_true", help="skip the two runs without charge conservation")
    ap.add_argument("--venv", default=os.environ.get("ATTNPHYS_TENPY_VENV",
                                                     os.path.expanduser("~/.cache/attnphys/bench-venv-tenpy")))
    a = ap.parse_args()
    build = os.environ.get("ATTNPHYS_BUILD_DIR", os.path.join(ROOT, "build"))
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    exact = EXACT.get(a.n)
    out = {"case": f"heisenberg open N={a.n} chi={a.chi} from Neel", "exact_energy": exact}

    def record(prefix, r):
        out[prefix + "_s"] = r["seconds"]
        out[prefix + "_energy"] = r["energy"]
        out[prefix + "_error"] = r["energy"] - exact if exact is not None else None
        out[prefix + "_max_rss_mib"] = r["max_rss_mib"]
        out[prefix + "_sweeps"] = r["sweeps"]

    record("heisenberg_u1", ours("heisenberg_u1", a.n, a.chi, build))
    if not a.no_dense:
        record("heisenberg_dense", ours("heisenberg_dense", a.n, a.chi, build))
    if not a.no_tenpy:
        py, err = ensure_tenpy_venv(a.venv)
        if err:
            out["tenpy_error"] = err
            log(err)
        else:
            t = tenpy(py, "Sz", a.n, a.chi)
            record("tenpy_u1", t)
            out["tenpy_version"] = t["tenpy"]
            out["ratio_u1"] = out["heisenberg_u1_s"] / t["seconds"]
            if not a.no_dense:
                record("tenpy_dense", tenpy(py, "none", a.n, a.chi))
                out["ratio_dense"] = out["heisenberg_dense_s"] / out["tenpy_dense_s"]
    out["load_average"] = os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
