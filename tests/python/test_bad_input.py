"""The NaN hunt: every numpy-facing entry point (attnphys.heat, attnphys.operator.Surrogate / Trainer, attnphys.spin,
attnphys.mps) given NaN/inf, the wrong dtype, the wrong shape, empty arrays or impossible sizes raises attnphys.Error
with a message that names the argument and says what to fix; never a crash, never a silent NaN.

All cases run in one child process that reports each case as it goes, so that a segfault or an abort is caught
(and named) instead of taking pytest down with it.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

SETUP = """
import numpy as np
import attnphys, attnphys.heat as heat, attnphys.spin as spin, attnphys.mps as mps
from attnphys.operator import Surrogate, Trainer
nan, inf = np.nan, np.inf
u = np.random.default_rng(0).standard_normal((8, 8))
N = 16
u0 = heat.initial_conditions((N,), 1.0 / N, count=12, seed=1)
u1 = np.stack([heat.solve(x, 2e-3, 1.0 / N) for x in u0])
model = Surrogate("kernel", dim=1, n_heads=2, d_k=4, harmonics=3)
Trainer(model, steps=2, batch=4).fit(u0, u1)
chain = spin.ChainModel("heisenberg", n=4)
rbm = spin.Rbm(4, alpha=1)
"""

# (case, code, regex the attnphys.Error message must match)
CASES = [
    # attnphys.heat.solve: fields, diffusivity, times, grid, dtype, shape.
    ("heat.solve NaN field", "heat.solve(np.full((8, 8), nan), 0.01, 1/8)", r"initial field has 64 NaN or infinite"),
    ("heat.solve inf field", "v = u.copy(); v[2, 3] = inf; heat.solve(v, 0.01, 1/8)",
     r"1 NaN or infinite value\(s\) \(the first at flat index 19"),
    ("heat.solve NaN kappa", "heat.solve(u, 0.01, 1/8, kappa=nan)", r"kappa must be finite and non-negative, got nan"),
    ("heat.solve negative kappa", "heat.solve(u, 0.01, 1/8, kappa=-1.0)", r"kappa must be finite and non-negative"),
    ("heat.solve NaN in kappa field", "k = np.ones((8, 8)); k[1, 1] = nan; heat.solve(u, 0.01, 1/8, kappa=k)",
     r"kappa field has 1 negative, NaN or infinite"),
    ("heat.solve kappa of another shape", "heat.solve(u, 0.01, 1/8, kappa=np.ones((4, 4)))",
     r"shaped like u0 \(8, 8\), got shape \(4, 4\)"),
    ("heat.solve 1D kappa for a 2D field", "heat.solve(u, 0.01, 1/8, kappa=np.ones(2))",
     r"shaped like u0 \(8, 8\), got shape \(2,\)"),
    ("heat.solve NaN t_end", "heat.solve(u, nan, 1/8)", r"t_end must be finite and non-negative, got nan"),
    ("heat.solve inf t_end", "heat.solve(u, inf, 1/8)", r"t_end must be finite and non-negative, got inf"),
    ("heat.solve negative t_end", "heat.solve(u, -1.0, 1/8)", r"t_end must be finite and non-negative"),
    ("heat.solve NaN dx", "heat.solve(u, 0.01, nan)", r"cell width along x must be positive and finite, got nan"),
    ("heat.solve zero dx", "heat.solve(u, 0.01, 0.0)", r"cell width along x must be positive and finite, got 0"),
    ("heat.solve NaN dt", "heat.solve(u, 0.01, 1/8, dt=nan)", r"dt must be positive .*got nan"),
    ("heat.solve FTCS above its limit", "heat.solve(u, 0.01, 1/8, method='ftcs', dt=0.01)", r"stab|dt"),
    ("heat.solve empty field", "heat.solve(np.zeros((0,)), 0.01, 1/8)", r"0 cells along x"),
    ("heat.solve empty rows", "heat.solve(np.zeros((0, 8)), 0.01, 1/8)", r"0 cells along y"),
    ("heat.solve 4D field", "heat.solve(np.zeros((2, 2, 2, 2)), 0.01, 1/8)", r"1-, 2- or 3-dimensional, got 4"),
    ("heat.solve string field", "heat.solve(np.array(['a', 'b', 'c']), 0.01, 1/8)", r"u0 has dtype <U1 \(string\)"),
    ("heat.solve complex field", "heat.solve(np.ones(8) * (1 + 1j), 0.01, 1/8)",
     r"u0 has dtype complex128 \(complex: the heat solvers are real"),
    ("heat.solve object field", "heat.solve(np.array([None] * 8), 0.01, 1/8)", r"u0 has dtype object"),
    ("heat.solve complex kappa", "heat.solve(u, 0.01, 1/8, kappa=np.ones((8, 8), complex))", r"kappa has dtype complex"),
    ("heat.solve unknown bc", "heat.solve(u, 0.01, 1/8, bc='wall')", r"unknown boundary type 'wall'"),
    ("heat.solve unknown method", "heat.solve(u, 0.01, 1/8, method='rk4')", r"unknown heat method 'rk4'"),
    ("heat.solve NaN field, nonlinear",
     "heat.solve(np.full(8, nan), 0.01, 1/8, kappa_law={'law': 'quadratic', 'kappa0': 1, 'beta': 1})",
     r"initial state holds 8 NaN or infinite"),
    ("heat.solve NaN kappa0", "heat.solve(u, 0.01, 1/8, kappa_law={'law': 'quadratic', 'kappa0': nan, 'beta': 1})",
     r"nonlinear.kappa0.*nan is out of range"),
    # The other heat entry points.
    ("heat.initial_conditions NaN dx", "heat.initial_conditions((8, 8), nan)", r"cell width along x"),
    ("heat.initial_conditions count 0", "heat.initial_conditions((8, 8), 1/8, count=0)", r"count must be >= 1"),
    ("heat.initial_conditions no axes", "heat.initial_conditions((), 1/8)", r"got 0 dimensions"),
    ("heat.initial_conditions empty axis", "heat.initial_conditions((0, 8), 1/8)", r"0 cells along y"),
    ("heat.initial_conditions too large", "heat.initial_conditions((8,), 1/8, count=10**15)",
     r"not enough memory for this request.*(Allocation of size|memory space failed to allocate)"),
    ("heat.generate_pairs NaN kappa", "k = np.ones(8); k[0] = nan; heat.generate_pairs((8,), 1/8, 2, kappa=k)",
     r"kappa field has 1 negative, NaN or infinite"),
    ("heat.generate_pairs NaN delta_t", "heat.generate_pairs((8,), 1/8, 2, delta_t=nan)", r"delta_t must be positive"),
    ("heat.random_kappa NaN lo", "heat.random_kappa((8,), 1/8, lo=nan)", r"lo and hi must be positive"),
    ("heat.write_dataset 0 samples", "heat.write_dataset('x.h5', [8], 1/8, samples=0)", r"dataset.samples.*>= 1"),
    ("heat.write_dataset NaN kappa", "heat.write_dataset('x.h5', [8], 1/8, samples=2, kappa=nan)",
     r"kappa must be finite"),
    ("heat.write_dataset empty path", "heat.write_dataset('', [8], 1/8, samples=2)", r"output path is empty"),
    # attnphys.operator: Surrogate.predict / Trainer.fit / save / load.
    ("Surrogate.predict NaN", "model.predict(np.full((2, N), nan))", r"fields holds 32 non-finite value\(s\)"),
    ("Surrogate.predict inf", "x = u0[:2].copy(); x[1, 3] = inf; model.predict(x)",
     r"fields holds 1 non-finite value\(s\) \(NaN or inf\), the first at index \(1, 3\)"),
    ("Surrogate.predict no samples", "model.predict(np.zeros((0, N)))", r"fields of shape \(0, 16\) holds no field"),
    ("Surrogate.predict empty grid", "model.predict(np.zeros((2, 0)))", r"fields of shape \(2, 0\) holds no field"),
    ("Surrogate.predict integers", "model.predict(np.zeros((2, N), dtype=np.int32))",
     r"fields has dtype int32 \(integer\)"),
    ("Surrogate.predict string", "model.predict('abc')", r"fields must be a numpy array"),
    ("Surrogate.predict objects", "model.predict(np.array([None] * N))", r"fields has dtype object"),
    ("Surrogate.predict 2D fields, 1D model", "model.predict(np.zeros((2, N, N)))", r"got shape \(2, 16, 16\)"),
    ("Surrogate.predict NaN coords", "c = np.linspace(0, 1, N, endpoint=False)[:, None]; c[0] = nan; "
     "model.predict(u0[:2], coords=c)", r"coords holds 1 non-finite"),
    ("Surrogate.predict batch 0", "model.predict(u0[:2], batch=0)", r"batch must be >= 1, got 0"),
    ("Trainer.fit NaN inputs", "x = u0.copy(); x[0, 0] = nan; Trainer(Surrogate('kernel', dim=1), steps=2).fit(x, u1)",
     r"inputs holds 1 non-finite"),
    ("Trainer.fit NaN targets", "y = u1.copy(); y[3, 2] = nan; Trainer(Surrogate('kernel', dim=1), steps=2).fit(u0, y)",
     r"targets holds 1 non-finite"),
    ("Trainer.fit no samples", "Trainer(Surrogate('kernel', dim=1), steps=2).fit(np.zeros((0, N)), np.zeros((0, N)))",
     r"inputs of shape \(0, 16\) holds no field"),
    ("Trainer.fit shapes differ", "Trainer(Surrogate('kernel', dim=1), steps=2).fit(u0, u1[:, :8])",
     r"targets have shape \(12, 8\) but inputs \(12, 16\)"),
    ("Trainer.fit complex", "Trainer(Surrogate('kernel', dim=1), steps=2).fit(u0.astype(complex), u1)", r"complex"),
    ("Trainer NaN lr", "Trainer(Surrogate('kernel', dim=1), steps=2, lr=nan)", r"lr must be a finite number"),
    ("Trainer.fit diverging", "Trainer(Surrogate('kernel', dim=1), steps=20, lr=1e30).fit(u0, u1)",
     r"training diverged at step \d+: the loss is .*nan. Lower lr="),
    ("Trainer.fit overflowing data", "Trainer(Surrogate('kernel', dim=1), steps=2).fit(u0 * 1e300, u1 * 1e300)",
     r"training diverged|non-finite"),
    ("Surrogate.save missing directory", "model.save('/nonexistent/s.h5')", r"directory '/nonexistent' does not exist"),
    ("Surrogate.load missing file", "Surrogate.load('/nonexistent/s.h5')", r"does not exist"),
    ("Surrogate.load garbage", "open('g.h5', 'wb').write(b'garbage' * 10); Surrogate.load('g.h5')",
     r"is not an HDF5 file"),
    ("Surrogate.load truncated", "model.save('s.h5'); d = open('s.h5', 'rb').read(); "
     "open('t.h5', 'wb').write(d[:len(d) // 2]); Surrogate.load('t.h5')", r"truncated or corrupted"),
    ("Surrogate.load another kind", "heat.write_dataset('d.h5', [8], 1/8, samples=2); Surrogate.load('d.h5')",
     r"is an attnphys heat_dataset, not a heat_surrogate"),
    # Files attnphys did not write the way it expects (h5py): a list where one value belongs was read into one
    # value's memory (a buffer overflow) before h5::Reader checked the count.
    ("list-valued format version", "import h5py; f = h5py.File('l.h5', 'w'); f.attrs['attnphys_kind'] = 'parameters'; "
     "f.attrs['attnphys_format_version'] = np.array([1, 2, 3], dtype=np.int64); f.close(); "
     "b = attnphys.ParameterBuffer(); b.add('w', [2]); b.allocate(); b.load('l.h5')",
     r"attribute 'attnphys_format_version' of 'l.h5' holds 3 values where one is expected"),
    ("list-valued kind", "import h5py; f = h5py.File('k.h5', 'w'); f.attrs['attnphys_kind'] = ['a', 'b']; "
     "f.attrs['attnphys_format_version'] = 1; f.close(); Surrogate.load('k.h5')",
     r"attribute 'attnphys_kind' of 'k.h5' holds 2 values"),
    ("parameters of another size than their table", "b = attnphys.ParameterBuffer(); b.add('w', [2]); b.allocate(); "
     "b.save('p.h5'); import h5py; f = h5py.File('p.h5', 'a'); t = f['model/params'].attrs['blocks']; "
     "del f['model/params']; f['model/params'] = np.zeros(5); f['model/params'].attrs['blocks'] = t; f.close(); "
     "b.load('p.h5')", r"dataset '/model/params' holds 5 values but its block table lists 2 parameters"),
    # attnphys.spin: spins, parameters, couplings, sizes.
    ("Ansatz.log_psi NaN spins", "rbm.log_psi(np.full((2, 4), nan))", r"sigma must hold only \+1 and -1, found nan"),
    ("Ansatz.log_psi spins of 3", "spin.Transformer(4).log_psi(np.full((1, 4), 3.0))", r"found 3"),
    ("Ansatz.log_psi wrong width", "rbm.log_psi(np.ones((2, 5)))", r"\[B, 4\] array of ±1, got shape \(2, 5\)"),
    ("Ansatz.log_psi 1D spins", "rbm.log_psi(np.ones(4))", r"got shape \(4,\)"),
    ("Ansatz.gradients NaN spins", "rbm.gradients(np.full((1, 4), nan))", r"found nan"),
    ("Ansatz.set_parameters NaN", "rbm.set_parameters(np.full(rbm.n_parameters, nan))",
     r"set_parameters: 48 of the 48 parameters are NaN or infinite \(the first at index 0\)"),
    ("Ansatz.set_parameters inf", "p = rbm.get_parameters(); p[7] = inf; rbm.set_parameters(p)",
     r"1 of the 48 parameters are NaN or infinite \(the first at index 7\)"),
    ("Mps.set_parameters NaN", "m = spin.Mps(4, chi=2); m.set_parameters(np.full(m.n_parameters, nan))",
     r"parameters are NaN or infinite"),
    ("Ansatz.set_parameters wrong count", "rbm.set_parameters(np.ones(3))", r"expected 48 parameters, got shape \(3,\)"),
    ("Ansatz.set_parameters empty", "rbm.set_parameters(np.ones(0))", r"expected 48 parameters, got shape \(0,\)"),
    ("ChainModel NaN J", "spin.ChainModel('heisenberg', n=4, J=nan)", r"couplings must be finite"),
    ("ChainModel inf h", "spin.exact_ground_state(spin.ChainModel('tfim', n=4, h=inf))", r"couplings must be finite"),
    ("exact_ground_state 0 sites", "spin.exact_ground_state(spin.ChainModel('heisenberg', n=0))",
     r"at least 2 sites, got n = 0"),
    ("exact_ground_state too large", "spin.exact_ground_state(spin.ChainModel('heisenberg', n=40))",
     r"n = 40 is too large"),
    ("connected NaN spins", "spin.connected(chain, np.full((1, 4), nan))", r"found nan"),
    ("local_energies other chain", "rbm.local_energies(spin.ChainModel('heisenberg', n=6), np.ones((1, 6)))",
     r"model has 6 sites, the RBM 4"),
    ("Rbm NaN alpha", "spin.Rbm(4, alpha=nan)", r"alpha must be positive, got nan"),
    ("Rbm 0 sites", "spin.Rbm(0, alpha=1)", r"at least one site"),
    ("Transformer 0 sites", "spin.Transformer(0)", r"at least 2 sites, got 0"),
    ("Mps chi 0", "spin.Mps(4, chi=0)", r"bond dimension must be >= 1, got 0"),
    ("Autoregressive 0 sites", "spin.Autoregressive(0, d_model=8, n_heads=2, n_layers=1)", r"at least one site"),
    ("Autoregressive.sample negative", "spin.Autoregressive(4, d_model=8, n_heads=2, n_layers=1).sample(-1)",
     r"n_samples, seed and counter must be >= 0"),
    ("Autoregressive.sample too many", "spin.Autoregressive(4, d_model=8, n_heads=2, n_layers=1).sample(10**13)",
     r"not enough memory for this request"),
    ("Autoregressive.conditionals NaN", "spin.Autoregressive(4, d_model=8, n_heads=2, n_layers=1)"
     ".conditionals(np.full((1, 4), nan))", r"found nan"),
    ("Vmc NaN lr", "spin.Vmc(chain, rbm, {'vmc.lr': nan})", r"vmc.lr.*nan is out of range"),
    ("Vmc chain and ansatz differ", "spin.Vmc(chain, spin.Rbm(6, alpha=1), {})", r"model has 6 sites, the Hamiltonian 4"),
    ("Vmc.run negative", "spin.Vmc(chain, rbm, {}).run(-3)", r"n_iter must be >= 0, got -3"),
    ("Vmc.estimate_energy negative", "spin.Vmc(chain, rbm, {}).estimate_energy(-5)", r"n_samples must be >= 0"),
    ("Vmc.load_checkpoint garbage", "open('g2.h5', 'wb').write(b'x' * 100); spin.Vmc(chain, rbm, {})"
     ".load_checkpoint('g2.h5')", r"is not an HDF5 file"),
    ("Vmc.load_checkpoint other chain", "spin.Vmc(chain, rbm, {}).save_checkpoint('v.h5'); "
     "spin.Vmc(spin.ChainModel('heisenberg', n=6), spin.Rbm(6, alpha=1), {}).load_checkpoint('v.h5')",
     r"do not fit this model"),
    ("run_vmc NaN lr", "spin.run_vmc({'model.model': 'heisenberg', 'model.n': 4, 'vmc.lr': nan, 'vmc.n_iter': 2})",
     r"vmc.lr.*nan is out of range"),
    ("run_vmc NaN J", "spin.run_vmc({'model.model': 'heisenberg', 'model.n': 4, 'model.J': nan, 'vmc.n_iter': 2})",
     r"model.J.*nan is out of range"),
    ("run_vmc inf h", "spin.run_vmc({'model.model': 'tfim', 'model.n': 4, 'model.h': inf, 'vmc.n_iter': 2})",
     r"couplings must be finite"),
    # attnphys.mps.dmrg.
    ("dmrg NaN J", "mps.dmrg(n=8, chi=8, J=nan)", r"couplings must be finite"),
    ("dmrg inf h", "mps.dmrg(model='tfim', n=8, chi=8, h=inf)", r"couplings must be finite"),
    ("dmrg NaN delta", "mps.dmrg(model='xxz', n=8, chi=8, delta=nan)", r"couplings must be finite"),
    ("dmrg NaN j2", "mps.dmrg(model='j1j2', n=8, chi=8, j2=nan)", r"couplings must be finite"),
    ("dmrg NaN cutoff", "mps.dmrg(n=8, chi=8, cutoff=nan)", r"cutoff and noise must be >= 0"),
    ("dmrg NaN noise", "mps.dmrg(n=8, chi=8, noise=nan)", r"cutoff and noise must be >= 0"),
    ("dmrg 1 site", "mps.dmrg(n=1, chi=8)", r"at least 2 sites, got n = 1"),
    ("dmrg chi 0", "mps.dmrg(n=8, chi=0)", r"chi, sweeps and niter must be >= 1"),
    ("dmrg unknown model", "mps.dmrg(model='potts', n=8)", r"unknown model 'potts'"),
    ("dmrg unknown symmetry", "mps.dmrg(n=8, symmetry='su2')", r"unknown DMRG symmetry 'su2'"),
    ("dmrg u1 on the TFIM", "mps.dmrg(model='tfim', n=8, symmetry='u1')", r"does not conserve Sz"),
    ("dmrg save to a missing directory", "mps.dmrg(n=8, chi=4, save='/nonexistent/m.h5')",
     r"directory '/nonexistent' does not exist"),
    # Resource limits: refused before anything is allocated or written, with the size needed (absurd sizes; a
    # cap through ATTNPHYS_MEMORY_LIMIT for an ordinary one).
    ("dmrg chi that cannot fit", "mps.dmrg(model='tfim', n=100, chi=10**6)",
     r"DMRG up to bond dimension [0-9]+ on 100 sites \(dense, MPO bond dimension 3\) needs [0-9.]+ [TP]B of memory, "
     r"more than the .* available .*: lower chi \(dmrg.chi; about [0-9]+ fits\)"),
    ("heat.write_dataset larger than the disk", "heat.write_dataset('big.h5', [16], 1/16, samples=10**13)",
     r"heat dataset '.*big.h5' \(10000000000000 samples x 32 float32 values\) needs 1.28 PB of disk, more than "
     r"the .* free on the file system of"),
    ("exact_ground_state beyond a memory cap",
     "import os\nos.environ['ATTNPHYS_MEMORY_LIMIT'] = '1M'\ntry:\n"
     "    spin.exact_ground_state(spin.ChainModel('heisenberg', n=16))\n"
     "finally:\n    del os.environ['ATTNPHYS_MEMORY_LIMIT']",
     r"ED of 16 sites \(sector 2Sz=0, dimension 12870, .*\) needs 6.59 MB of memory, more than the 1.05 MB available "
     r"\(ATTNPHYS_MEMORY_LIMIT\)"),
]

CHILD = """
import json, sys, traceback
{setup}
cases = json.loads(sys.stdin.read())
for name, code in cases:
    print("START " + name, flush=True)
    try:
        exec(code)
        print("RESULT " + json.dumps([name, "returned", ""]), flush=True)
    except attnphys.Error as e:
        print("RESULT " + json.dumps([name, "error", str(e)]), flush=True)
    except Exception as e:
        print("RESULT " + json.dumps([name, type(e).__name__, str(e)]), flush=True)
"""


def test_bad_inputs_raise_attnphys_error(tmp_path):
    import re

    child = CHILD.format(setup=textwrap.dedent(SETUP))
    import attnphys

    package = os.path.dirname(os.path.dirname(os.path.abspath(attnphys.__file__)))  # the child imports the same one
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", child], input=json.dumps([(n, c) for n, c, _ in CASES]),
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    results, started = {}, None
    for line in p.stdout.splitlines():
        if line.startswith("START "):
            started = line[6:]
        elif line.startswith("RESULT "):
            name, kind, message = json.loads(line[7:])
            results[name] = (kind, message)
    assert p.returncode == 0, (f"the child process died (exit {p.returncode}) in case '{started}':\n"
                               f"{p.stderr[-3000:]}")
    failures = []
    for name, _, pattern in CASES:
        kind, message = results.get(name, ("missing", ""))
        if kind != "error":
            failures.append(f"{name}: {kind} {message[:200]} (expected attnphys.Error matching /{pattern}/)")
        elif not re.search(pattern, message):
            failures.append(f"{name}: attnphys.Error '{message[:300]}' does not match /{pattern}/")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("n_iter", [0])
def test_zero_iterations_and_default_estimate_still_work(n_iter):
    import numpy as np

    import attnphys.spin as spin

    chain = spin.ChainModel("heisenberg", n=4)
    v = spin.Vmc(chain, spin.Rbm(4, alpha=1), {"sampler.n_samples": 64})
    assert v.run(n_iter) == []
    assert np.isfinite(v.estimate_energy(0)["energy"])


def test_cli_overrides_that_are_not_utf8_are_refused_and_stored_configs_parse(tmp_path):
    """Found by tests/fuzz/fuzz_options: a --set value with bytes that are not UTF-8 used to be stored in the
    configuration of checkpoints and outputs, which then no longer parsed as TOML; so did a DEL character."""
    import tomllib

    h5py = pytest.importorskip("h5py")
    exe = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")
    base = [exe.encode(), b"heat", b"dataset", b"--set", b"problem.nx=4", b"--set", b"dataset.samples=1",
            b"--set", b"dataset.nt=2", b"--set", b"dataset.progress=false"]
    r = subprocess.run(base + [b"--set", b"dataset.output=" + bytes(tmp_path) + b"/\xff.h5"], capture_output=True)
    assert r.returncode != 0
    assert b"byte 0xff at position" in r.stderr and b"is not UTF-8" in r.stderr, r.stderr
    out = bytes(tmp_path) + b"/a\x7fb.h5"
    r = subprocess.run(base + [b"--set", b"dataset.output=" + out], capture_output=True)
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        config = f.attrs["config"]
    config = config.decode() if isinstance(config, bytes) else config
    assert tomllib.loads(config)["dataset"]["output"] == out.decode()


def test_cli_refuses_requests_that_cannot_fit_before_they_start(tmp_path):
    """Resource limits through the command line: exit code 2 and the size needed, no std::bad_alloc, no output."""
    exe = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", "build"), "bin", "attnphys")
    cases = [
        (["dmrg", "--model", "tfim", "--n", "100", "--chi", "1000000"], {},
         r"DMRG up to bond dimension [0-9]+ on 100 sites .* needs [0-9.]+ [TP]B of memory, .*: lower chi"),
        (["heat", "dataset", "--set", "problem.dim=1", "--set", "problem.nx=16",
          "--set", "dataset.samples=10000000000000", "--set", f"dataset.output={tmp_path}/big.h5",
          "--set", "dataset.progress=false"], {},
         r"heat dataset '.*big.h5' \(10000000000000 samples x 32 float32 values\) needs 1.28 PB of disk"),
        (["ed", "--model", "heisenberg", "--n", "20"], {"ATTNPHYS_MEMORY_LIMIT": "1M"},
         r"ED of 20 sites \(sector 2Sz=0, dimension 184756, .*\) needs [0-9.]+ MB of memory, more than the 1.05 MB "
         r"available \(ATTNPHYS_MEMORY_LIMIT\)"),
    ]
    import re

    for args, env, pattern in cases:
        r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, OMP_NUM_THREADS="1", **env))
        assert r.returncode == 2, (args, r.returncode, r.stderr[-2000:])
        assert re.search("attnphys: error: " + pattern, r.stderr), (args, r.stderr[-2000:])
        assert "bad_alloc" not in r.stderr
    assert list(tmp_path.iterdir()) == []
