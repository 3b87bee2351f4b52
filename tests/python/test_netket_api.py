"""attnphys.spin in NetKet's shape: Spin, Heisenberg/Ising/XXZ/J1J2, Metropolis/exact samplers, typed models, MCState,
VMC with Sgd/Adam and SR, expectation values (energy, S_i.S_j, structure factor) against exact sums over the
same wavefunction, save/load, and bad input."""
import csv
import math
import os
import re

import numpy as np
import pytest

import attnphys
from attnphys import spin

# The README example (readme section "VMC from Python in NetKet's shape"), verbatim. When README.md carries the
# section, the test runs the README's own block instead.
EXAMPLE = '''\
# NetKet-shaped VMC: Heisenberg ring of 8 spins, default transformer
import numpy as np
from attnphys import spin

hi = spin.Spin(8, total_sz=0)                    # the sector S^z = 0 (total_sz=None: every sector)
H = spin.Heisenberg(hi, J=1.0, bc="periodic")    # also spin.Ising(hi, h=, J=), spin.XXZ(hi, delta=), spin.J1J2(hi, j2=)
sampler = spin.MetropolisExchange(hi, n_chains=32)   # or spin.MetropolisLocal(hi), spin.ExactSampler(hi)
model = spin.Transformer()                       # or spin.Rbm(alpha=1), spin.Mps(chi=4), spin.Autoregressive()
vs = spin.MCState(sampler, model, n_samples=256, seed=1)
driver = spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(diag_shift=0.01))
log = spin.RuntimeLog()                          # or out="vmc.csv" (the CLI's log columns)
driver.run(40, out=log, callback=lambda step, info: info["variance"] > 1e-6)

E = vs.expect(H, n_samples=2048)                 # Stats: mean, error_of_mean, variance, tau_corr, R_hat
exact = spin.exact_ground_state(H.chain_model())["energy"]
print(E, "relative error", abs(E.mean - exact) / abs(exact))
print("<S0.S1> =", vs.expect(spin.SpinCorrelation(hi, 0, 1)))
print("S(pi) =", vs.expect(spin.StructureFactor(hi, q=np.pi)))

vs.save("heisenberg8.h5")                        # the VMC checkpoint format, plus the objects' description
vs2 = spin.MCState.load("heisenberg8.h5")
assert np.array_equal(vs2.parameters, vs.parameters)
'''


def readme_example():
    src = os.environ.get("ATTNPHYS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    path = os.path.join(src, "README.md")
    if os.path.exists(path):
        text = open(path, encoding="utf-8").read()
        m = re.search(r"```python\n(# NetKet-shaped VMC.*?)```", text, re.S)
        if m:
            return m.group(1)
    return EXAMPLE


def sector_states(n, two_sz):
    s = spin.all_states(n)
    return s[s.sum(axis=1) == two_sz]


def exact_expectations(vs, chain, hilbert):
    """<H>, <S_i.S_j> and the weights |psi|^2 by summing over the whole sector, for the state's own psi."""
    s = sector_states(hilbert.n, hilbert.two_sz) if hilbert.constrained else spin.all_states(hilbert.n)
    lp = vs.log_value(s)
    p = np.exp(2 * (lp.real - lp.real.max()))
    p /= p.sum()
    eloc = vs.ansatz.local_energies(chain, s)
    index = {tuple(r): k for k, r in enumerate(s)}
    psi = np.exp(lp - lp.real.max())

    def corr(i, j):
        if i == j:
            return 0.75  # S_i.S_i = s(s+1)
        val = 0.0
        for k, r in enumerate(s):
            val += p[k] * r[i] * r[j] / 4
            if r[i] != r[j]:
                t = r.copy()
                t[i], t[j] = t[j], t[i]
                val += (np.conj(psi[k]) * psi[index[tuple(t)]]).real / 2 / np.sum(np.abs(psi) ** 2)
        return val

    return float((p * eloc.real).sum()), corr


def test_readme_example_reaches_ed_and_round_trips(tmp_path, capsys):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ns = {}
        exec(compile(readme_example(), "README example", "exec"), ns)
    finally:
        os.chdir(cwd)
    assert abs(ns["E"].mean - ns["exact"]) / abs(ns["exact"]) < 1e-2
    assert ns["E"].mean > ns["exact"] - 5 * ns["E"].error_of_mean - 1e-9  # variational
    assert (tmp_path / "heisenberg8.h5").exists()
    assert "relative error" in capsys.readouterr().out


def test_hilbert_space():
    hi = spin.Spin(8, total_sz=0)
    assert (hi.n, hi.size, hi.two_sz, hi.constrained) == (8, 8, 0, True)
    assert spin.Spin(7, total_sz=0.5).two_sz == 1
    assert spin.Spin(7).constrained is False
    assert hi == spin.Spin(8, total_sz=0) and hi != spin.Spin(8)
    for bad in [dict(n=7, total_sz=0), dict(n=8, total_sz=0.25), dict(n=4, total_sz=3), dict(n=1)]:
        with pytest.raises(attnphys.Error):
            spin.Spin(**bad)


def test_hamiltonians_are_the_cli_chains():
    hi, free = spin.Spin(10, total_sz=0), spin.Spin(10)
    h = spin.Heisenberg(hi, bc="periodic").chain_model()
    assert (h.model, h.n, h.bc, h.J) == ("heisenberg", 10, "periodic", 1.0)
    # Left-out keywords are the C++ defaults (ChainModel): open chains.
    assert spin.XXZ(hi, delta=0.5).chain_model().bc == spin.ChainModel().bc
    assert spin.J1J2(hi, j2=0.24, bc="periodic").chain_model().j2 == 0.24
    t = spin.Ising(free, h=0.5, J=2.0).chain_model()
    assert (t.model, t.h, t.J) == ("tfim", 0.5, 2.0)
    e = spin.exact_ground_state(spin.Ising(free, h=1.0, bc="periodic").chain_model())["energy"]
    assert abs(e - (-2 / math.sin(math.pi / 20))) < 1e-9
    with pytest.raises(attnphys.Error, match="does not conserve"):
        spin.Ising(hi, h=1.0)
    with pytest.raises(attnphys.Error):
        spin.Heisenberg(hi, bc="twisted")


def test_option_objects_take_their_keywords_and_defaults_from_cpp():
    assert spin.Rbm.keywords()["alpha"] == "rbm.alpha"
    assert "patch_size" in spin.Transformer.keywords() and "chi" in spin.Mps.keywords()
    assert set(spin.MetropolisExchange.keywords()) >= {"n_chains", "n_discard", "sweep_size", "global_flip"}
    assert "move" not in spin.MetropolisLocal.keywords()
    assert spin.ExactSampler.keywords() == {}
    # The defaults are the C++ ones, not copies.
    # The defaults are the C++ VmcRunConfig's (the CLI's), not copies: 64 chains there, not SamplerOptions' 128.
    assert spin.MetropolisExchange.defaults()["n_chains"] == 64
    assert spin.Rbm.defaults()["alpha"] == 1 and spin.Transformer.defaults()["d_model"] == 16
    m = spin.Rbm(alpha=2, complex=False)
    assert (m.alpha, m.complex, m.init_std) == (2, False, None)  # None: left to the C++ default
    assert repr(m) == "spin.Rbm(alpha=2, complex=False)"
    # With the chain length first the classes still build the C++ ansatz directly (the pre-NetKet API).
    legacy = spin.Rbm(6, alpha=1)
    assert isinstance(legacy, spin.Ansatz) and legacy.n_sites == 6
    # The SR solve's precision: mixed by default (the C++ default), double on request, nothing else.
    assert spin.SR.keywords()["precision"] == "vmc.sr_precision" and spin.SR.defaults()["precision"] == "mixed"
    assert spin.SR(precision="double")._options()["vmc.sr_precision"] == "double"


def test_api_run_is_the_cli_run():
    """Same dotted keys, same defaults: the API's trajectory equals spin.run_vmc's (the CLI's) step for step."""
    hi = spin.Spin(8, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Mps(chi=3), n_samples=128)
    hist = spin.VMC(H, variational_state=vs).run(6)
    ref = spin.run_vmc({"model.model": "heisenberg", "model.n": 8, "model.bc": "periodic", "ansatz.kind": "mps",
                        "mps.chi": 3, "sampler.n_chains": 16, "sampler.n_samples": 128, "vmc.n_iter": 6,
                        "run.final_samples": 0, "run.reference": "none"})
    assert [s["energy"] for s in hist] == [s["energy"] for s in ref["history"]]
    assert [s["diag_shift"] for s in hist] == [s["diag_shift"] for s in ref["history"]]


def test_a_step_guard_that_never_fires_changes_nothing():
    """spin.SR(guard_sigmas=...) maps to vmc.guard_sigmas / vmc.guard_start; a guard that rejects no step leaves the
    trajectory bit for bit as it was, and every step dict says whether it was rejected."""
    o = spin.SR(0.01, guard_sigmas=1000, guard_start=0)._options()
    assert o["vmc.guard_sigmas"] == 1000 and o["vmc.guard_start"] == 0
    hi = spin.Spin(8, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    runs = []
    for sr in (spin.SR(0.01), spin.SR(0.01, guard_sigmas=1000, guard_start=0)):
        vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Mps(chi=3), n_samples=128, seed=5)
        runs.append(spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=sr).run(8))
    assert [s["energy"] for s in runs[0]] == [s["energy"] for s in runs[1]]
    assert all(s["rejected"] is False for s in runs[1])


def test_expectations_match_exact_sums_over_the_same_state():
    hi = spin.Spin(8, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=32), spin.Mps(chi=4), n_samples=256, seed=3)
    spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(0.01)).run(25)
    energy, corr = exact_expectations(vs, H.chain_model(), hi)
    E = vs.expect(H, n_samples=8192)
    assert abs(E.mean - energy) < 5 * E.error_of_mean + 1e-6
    assert E.variance >= 0 and E.R_hat < 1.1 and abs(E.imag) < 1e-3
    assert vs.expect(H, n_samples=1024).mean == vs.expect(H, n_samples=1024).mean  # pure function of the state
    assert vs.expect(H, n_samples=1024, seed=1).mean != vs.expect(H, n_samples=1024).mean
    for i, j in [(0, 1), (0, 4), (2, 2)]:
        c = vs.expect(spin.SpinCorrelation(hi, i, j), n_samples=4096)
        assert abs(c.mean - corr(i, j)) < 5 * c.error_of_mean + 1e-9, (i, j, c, corr(i, j))
    assert vs.expect(spin.SpinCorrelation(hi, 3, 3)).mean == pytest.approx(0.75)
    zz = vs.expect(spin.SpinCorrelation(hi, 0, 1, component="zz"), n_samples=4096)
    assert zz.mean < 0  # antiferromagnetic
    # S(q) = (1/N) sum_ij cos(q(i-j)) <S_i.S_j>; S(0) = S_tot^2 / N = 0 in the singlet sector up to the fit.
    q = math.pi
    exact_sq = sum(math.cos(q * (a - b)) * corr(a, b) for a in range(8) for b in range(8)) / 8
    sq = vs.expect(spin.StructureFactor(hi, q=q), n_samples=4096)
    assert abs(sq.mean - exact_sq) < 5 * sq.error_of_mean + 1e-9
    # On a ring H = sum_i S_i.S_{i+1}: <H> = 8 <S_0.S_1> for a translation-invariant state, within the errors.
    assert abs(8 * corr(0, 1) - energy) < 0.05


def test_samplers_and_models():
    # TFIM: every sector, local flips; the critical ring's closed-form energy within 1%.
    free = spin.Spin(8)
    H = spin.Ising(free, h=1.0, bc="periodic")
    vs = spin.MCState(spin.MetropolisLocal(free, n_chains=32), spin.Mps(chi=4), n_samples=256, seed=2)
    spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(0.01)).run(30)
    e0 = spin.reference_energy(H.chain_model())
    assert abs(vs.expect(H, n_samples=2048).mean - e0) / abs(e0) < 1e-2
    # Exact sampling of the autoregressive transformer in the Hilbert space's sector; Adam.
    hi = spin.Spin(6, total_sz=0)
    vs = spin.MCState(spin.ExactSampler(hi), spin.Autoregressive(d_model=8, n_layers=1), n_samples=256, seed=1)
    H = spin.XXZ(hi, delta=0.5, bc="open")
    hist = spin.VMC(H, spin.Adam(0.01), variational_state=vs).run(15)
    assert vs._impl.direct_sampling and hist[0]["acceptance"] == 1.0
    assert hist[-1]["energy"] < hist[0]["energy"]
    # Every exact draw lies in the sector: (S^z_tot)^2 = N S_zz(q = 0) vanishes on each sample.
    sz2 = vs.expect(spin.StructureFactor(hi, q=0.0, component="zz"))
    assert abs(sz2.mean) < 1e-12 and sz2.variance < 1e-20
    # Odd N: the sector is whatever the Hilbert space says (2Sz = 1 here), not a guessed default.
    hi7 = spin.Spin(7, total_sz=0.5)
    vs = spin.MCState(spin.MetropolisExchange(hi7, n_chains=8), spin.Rbm(alpha=1), n_samples=64)
    spin.VMC(spin.J1J2(hi7, j2=0.3), spin.Sgd(0.02), variational_state=vs, preconditioner=spin.SR(0.01)).run(2)
    assert vs.expect(spin.J1J2(hi7, j2=0.3)).n == 64
    # A C++ ansatz built already is used as it is.
    vs = spin.MCState(spin.MetropolisExchange(hi7, n_chains=8), spin.Rbm(7, alpha=1), n_samples=64)
    spin.VMC(spin.Heisenberg(hi7), spin.Adam(0.01), variational_state=vs).run(2)
    assert vs.n_parameters == spin.Rbm(7, alpha=1).n_parameters


def test_run_logs_and_callback_stops(tmp_path):
    hi = spin.Spin(8, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Rbm(alpha=1), n_samples=64, seed=1)
    driver = spin.VMC(H, spin.Sgd(0.02), variational_state=vs, preconditioner=spin.SR(0.01))
    seen = []
    hist = driver.run(10, out=str(tmp_path / "log.csv"), callback=lambda step, info: seen.append(step) or step < 2)
    assert seen == [0, 1, 2] and len(hist) == 3 and driver.step_count == 3
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    assert len(rows) == 3 and float(rows[2]["energy"]) == pytest.approx(hist[2]["energy"], rel=1e-9)
    assert {"sample_seconds", "energy_seconds", "gradient_seconds", "update_seconds", "v_score"} <= set(rows[0])
    log = spin.RuntimeLog()
    driver.run(2, out=log)
    assert log["iteration"] == [3.0, 4.0] and vs.iteration == 5


def test_convergence_stops_at_the_plateau_and_two_sided_is_stricter():
    """converge=spin.Convergence(W) maps to vmc.converge_*: the run stops at its first plateau (the C++ criterion,
    tested in test_vmc_monitor.cpp) near the exact energy, well before the maximum; two_sided=True, stricter, stops
    there or later on the same trajectory (same seed: identical steps until the earlier stop)."""
    o = spin.Convergence(15, sigmas=3, variance_drop=0.2, two_sided=True)._options()
    assert o == {"vmc.converge_window": 15, "vmc.converge_sigmas": 3, "vmc.converge_variance_drop": 0.2,
                 "vmc.converge_two_sided": True}
    hi = spin.Spin(6)
    H = spin.Ising(hi, h=1.0, bc="open")
    exact = spin.exact_ground_state(H.chain_model())["energy"]
    runs = []
    for conv in (spin.Convergence(15), spin.Convergence(15, two_sided=True)):
        vs = spin.MCState(spin.MetropolisLocal(hi, n_chains=16), spin.Rbm(alpha=1), n_samples=256, seed=3)
        driver = spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(0.01, diag_shift_steps=20))
        assert not driver.converged
        hist = driver.run(400, converge=conv)
        assert driver.converged and 30 <= len(hist) < 400, len(hist)
        tail = np.mean([s["energy"] for s in hist[-15:]])
        assert abs(tail - exact) < 0.01 * abs(exact), (tail, exact)
        runs.append(hist)
        # A run without converge= afterwards takes all its iterations (the window is per run).
        assert len(driver.run(3)) == 3 and not driver.converged
    one, two = runs
    assert len(two) >= len(one)
    assert [s["energy"] for s in two[:len(one)]] == [s["energy"] for s in one]
    with pytest.raises(spin.OptionError, match="window must be an integer >= 1"):
        spin.Convergence(0)
    with pytest.raises(spin.OptionError, match="two_sided must be a bool"):
        spin.Convergence(10, two_sided="yes")
    with pytest.raises(attnphys.Error, match="converge must be a spin.Convergence"):
        driver.run(5, converge=100)


def test_save_load_round_trip_continues_bit_for_bit(tmp_path):
    hi = spin.Spin(8, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Transformer(d_model=8), n_samples=128, seed=4)
    driver = spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(0.01))
    driver.run(6)
    path = tmp_path / "state.h5"
    vs.save(path)
    vs2 = spin.MCState.load(path)
    assert vs2.iteration == 6 and vs2.n_samples == vs.n_samples
    assert np.array_equal(vs2.parameters, vs.parameters)
    assert repr(vs2.model) == repr(vs.model) and vs2.hilbert == vs.hilbert
    assert vs2.expect(H).mean == vs.expect(H).mean
    a = driver.run(3)
    b = spin.VMC(H, spin.Sgd(0.05), variational_state=vs2, preconditioner=spin.SR(0.01)).run(3)
    assert [s["energy"] for s in a] == [s["energy"] for s in b]
    assert np.array_equal(vs2.parameters, vs.parameters)
    # A state built from a C++ ansatz needs one of the same architecture to load into.
    vs3 = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Rbm(8, alpha=1), n_samples=64)
    spin.VMC(H, spin.Adam(0.01), variational_state=vs3).run(1)
    vs3.save(tmp_path / "rbm.h5")
    with pytest.raises(attnphys.Error, match="model="):
        spin.MCState.load(tmp_path / "rbm.h5")
    vs4 = spin.MCState.load(tmp_path / "rbm.h5", model=spin.Rbm(8, alpha=1))
    assert np.array_equal(vs4.parameters, vs3.parameters)


def test_bad_input():
    hi, hi10 = spin.Spin(8, total_sz=0), spin.Spin(10, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    # Unknown keywords: attnphys.Error and TypeError, naming the valid ones.
    with pytest.raises(spin.OptionError, match="unknown keyword 'alpah'.*alpha"):
        spin.Rbm(alpah=2)
    with pytest.raises(attnphys.Error, match="n_chains"):
        spin.MetropolisExchange(hi, n_chain=4)
    with pytest.raises(TypeError, match="patch_size"):
        spin.Transformer(patch=2)
    with pytest.raises(spin.OptionError, match="must be a bool"):
        spin.Rbm(complex=1)
    with pytest.raises(spin.OptionError, match="must be a number"):
        spin.Mps(chi="big")
    with pytest.raises(TypeError):
        spin.Heisenberg(hi, Jz=1.0)
    with pytest.raises(attnphys.Error, match="not finite"):
        spin.SR(diag_shift=float("nan"))
    with pytest.raises(spin.OptionError, match=r"expected one of double, mixed"):
        spin.SR(precision="half")
    # A choice is checked against the names the C++ declares (the same list the CLI's --help shows).
    with pytest.raises(spin.OptionError, match=r"attention = 'softmax': expected one of factored, dense"):
        spin.Transformer(attention="softmax")
    with pytest.raises(spin.OptionError, match=r"positional = 'none': expected one of learned, sinusoidal"):
        spin.Autoregressive(positional="none")
    assert "attention='factored' (factored | dense)" in spin.Transformer.__doc__
    assert spin.SR(solver="auto")._options() == {"vmc.optimizer": "sr"}  # its own names, translated
    # Values the C++ refuses come back as attnphys.Error with its message.
    vs = spin.MCState(spin.MetropolisExchange(hi), spin.Rbm(alpha=-1.0))
    with pytest.raises(attnphys.Error, match="rbm.alpha"):
        vs.expect(H)
    # Wrong Hilbert sizes between Hamiltonian, sampler and model.
    vs = spin.MCState(spin.MetropolisExchange(hi10, n_chains=8), spin.Rbm(alpha=1), n_samples=32)
    with pytest.raises(attnphys.Error, match="Hamiltonian acts on"):
        spin.VMC(H, spin.Sgd(0.01), variational_state=vs, preconditioner=spin.SR())
    with pytest.raises(attnphys.Error, match="operator acts on 8 sites"):
        vs.expect(H)
    with pytest.raises(attnphys.Error, match="6 sites"):
        spin.MCState(spin.MetropolisExchange(hi), spin.Rbm(6))
    # Parameters before the state met a Hamiltonian; NaN parameters.
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=8), spin.Rbm(alpha=1), n_samples=32)
    with pytest.raises(attnphys.Error, match="no parameters yet"):
        vs.parameters
    vs.expect(H)
    p = vs.parameters
    p[3] = np.nan
    with pytest.raises(attnphys.Error, match="NaN"):
        vs.parameters = p
    with pytest.raises(attnphys.Error, match="expected"):
        vs.parameters = p[:-1]
    # Optimiser / preconditioner pairs the C++ driver does not have; samplers the model cannot use.
    with pytest.raises(attnphys.Error, match="preconditioner"):
        spin.VMC(H, spin.Sgd(0.01), variational_state=vs)
    with pytest.raises(attnphys.Error, match="Adam"):
        spin.VMC(H, spin.Adam(0.01), variational_state=vs, preconditioner=spin.SR())
    with pytest.raises(attnphys.Error, match="directly"):
        spin.MCState(spin.ExactSampler(hi), spin.Rbm(alpha=1)).expect(H)
    with pytest.raises(attnphys.Error, match="local flips leave"):
        spin.MCState(spin.MetropolisLocal(hi), spin.Rbm(alpha=1)).expect(H)
    with pytest.raises(attnphys.Error, match="sites must be"):
        spin.SpinCorrelation(hi, 0, 8)
    with pytest.raises(attnphys.Error, match="no expectation"):
        vs.expect("H")


def test_cli_continues_a_saved_state(tmp_path):
    """vs.to_toml() is the `attnphys vmc` config of the state and vs.save() its checkpoint: the CLI resumes it and
    takes the very steps the Python driver takes."""
    import json
    import shutil
    import subprocess

    exe = os.path.join(os.environ.get("ATTNPHYS_BUILD_DIR", ""), "bin", "attnphys")
    if not os.path.exists(exe):
        pytest.skip("needs the attnphys CLI (ATTNPHYS_BUILD_DIR/bin/attnphys)")
    hi = spin.Spin(8, total_sz=0)
    H = spin.Heisenberg(hi, bc="periodic")
    vs = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Transformer(d_model=8), n_samples=64, seed=2)
    driver = spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(0.01))
    driver.run(4)
    vs.save(tmp_path / "s.h5")
    toml = vs.to_toml()
    assert 'kind = "transformer"' in toml and "d_model = 8" in toml
    (tmp_path / "s.toml").write_text(re.sub(r"(?m)^n_iter = \d+", "n_iter = 6", toml))
    assert vs.sample(16).shape == (16, 8) and np.all(vs.sample(16).sum(axis=1) == 0)
    py = [s["energy"] for s in driver.run(2)]
    out = subprocess.run([exe, "vmc", "--config", str(tmp_path / "s.toml"), "--set", f"run.resume={tmp_path / 's.h5'}",
                          "--set", "run.final_samples=0", "--set", "run.reference=none", "--json"],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    r = json.loads(out[out.index("{"):])
    assert r["iterations"] == 6 and r["energy"] == py[-1]
    # And the other way: a checkpoint the CLI wrote restores into an MCState of the same model and sampler.
    subprocess.run([exe, "vmc", "--config", str(tmp_path / "s.toml"), "--set", "run.final_samples=0", "--set",
                    "run.reference=none", "--set", "vmc.n_iter=3", "--set", f"vmc.checkpoint_path={tmp_path / 'c.h5'}"],
                   capture_output=True, text=True, check=True, cwd=tmp_path)
    with pytest.raises(attnphys.Error, match="restore"):
        spin.MCState.load(tmp_path / "c.h5")
    fresh = spin.MCState(spin.MetropolisExchange(hi, n_chains=16), spin.Transformer(d_model=8), n_samples=64, seed=2)
    fresh.expect(H)
    fresh.restore(tmp_path / "c.h5")
    assert fresh.iteration == 3
