"""spin.plateaued (the driver's plateau test, exposed) and python/scripts/plateau_audit.py, which replays it on VMC
logs: one-sided and two-sided stops on synthetic traces whose answer is known, the step guard's wait, bad input."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import attnphys
from attnphys import spin

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "python", "scripts", "plateau_audit.py")
# The script imports attnphys: from the build tree when the tests use one (conftest.py), else as installed.
ENV = dict(os.environ)
if os.environ.get("ATTNPHYS_BUILD_DIR"):
    ENV["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(os.environ["ATTNPHYS_BUILD_DIR"], "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def trace(n, rise_at=None, rise=0.0, seed=0):
    """Energies -5 + noise 1e-3 (scatter) with, from rise_at on, +rise; variance 0.1."""
    rng = np.random.default_rng(seed)
    e = -5.0 + 1e-3 * rng.standard_normal(n)
    if rise_at is not None:
        e[rise_at:] += rise
    return e, np.full(n, 0.1)


def write_log(path, e, v, rejected=None):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "energy", "error", "variance", "rejected"])
        for i, (ei, vi) in enumerate(zip(e, v)):
            w.writerow([i, repr(float(ei)), 1e-3, repr(float(vi)), int(bool(rejected is not None and rejected[i]))])


def test_plateaued_is_the_driver_test():
    e, v = trace(40)
    assert spin.plateaued(list(e), list(v), 20) and not spin.plateaued(list(e[:39]), list(v[:39]), 20)
    assert not spin.plateaued(list(e), list(v), 20, start=41)
    up = e.copy()
    up[20:] += 0.01  # ~30 standard errors up: flat for the one-sided test only
    assert spin.plateaued(list(up), list(v), 20) and not spin.plateaued(list(up), list(v), 20, two_sided=True)
    with pytest.raises(attnphys.Error, match="window must be >= 1"):
        spin.plateaued(list(e), list(v), 0)
    with pytest.raises(attnphys.Error, match="40 energies but 3 variances"):
        spin.plateaued(list(e), [0.1] * 3, 20)
    with pytest.raises(attnphys.Error, match="variance_drop must lie in"):
        spin.plateaued(list(e), list(v), 20, variance_drop=1.5)


def run_audit(*args):
    r = subprocess.run([sys.executable, SCRIPT, *args, "--json"], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_audit_finds_where_each_test_stops(tmp_path):
    # A: flat from the start: both tests hold first at 2 W = 40.
    e, v = trace(60, seed=1)
    write_log(tmp_path / "flat.csv", e, v)
    # B: a rise of 0.01 (10 scatters) at 30: the one-sided test holds at its first check (40), the two-sided test
    # only once the rise has (nearly) left the earlier window (t = 70: both windows past it).
    e, v = trace(120, rise_at=30, rise=0.01, seed=2)
    write_log(tmp_path / "rise.csv", e, v)
    # C: a falling trace until 70, flat after: neither holds before 70 + ... ; a rejection at 95 makes both wait a
    # window (to t > 115).
    e, v = trace(140, seed=3)
    e[:70] += np.linspace(0.5, 0.0, 70)
    rej = np.zeros(140, bool)
    rej[95] = True
    write_log(tmp_path / "guarded.csv", e, v, rej)
    out = run_audit(str(tmp_path / "flat.csv"), str(tmp_path / "rise.csv"), str(tmp_path / "guarded.csv"),
                    "--window", "20", "--start", "0")
    logs = {r["log"]: r for r in out["logs"]}
    assert logs["flat.csv"]["one_sided_first"] == 40 and logs["flat.csv"]["two_sided_first"] == 40
    rise = logs["rise.csv"]
    assert rise["one_sided_first"] == 40
    assert 60 <= rise["two_sided_first"] <= 70 and rise["one_sided_at_end"] and rise["two_sided_at_end"], rise
    g = logs["guarded.csv"]
    assert g["one_sided_first"] is not None and g["one_sided_first"] > 95 + 20, g
    # The logs end on a one-sided plateau; a two-sided run would have gone on in none (B is flat again at its end).
    assert out["one_sided_ends"] == 3 and out["two_sided_would_continue"] == 0
    # Cut B at 50: one-sided at the end, two-sided not: counted as going on.
    e, v = trace(120, rise_at=30, rise=0.01, seed=2)
    write_log(tmp_path / "cut.csv", e[:50], v[:50])
    out = run_audit(str(tmp_path / "cut.csv"), "--window", "20", "--start", "0")
    assert out["logs"][0]["two_sided_first"] is None and out["two_sided_would_continue"] == 1


def test_audit_refuses_bad_logs_and_options_with_a_clear_error(tmp_path):
    def refused(args, text):
        r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=ENV, timeout=120)
        assert r.returncode != 0 and text in r.stderr and "Traceback" not in r.stderr, r.stderr

    (tmp_path / "bad.csv").write_text("iteration,loss\n0,1.0\n")
    refused([str(tmp_path / "bad.csv")], "has no 'energy' column")
    (tmp_path / "short.csv").write_text("iteration,energy,variance\n0,-1.0,0.1\n1,-1.0\n")
    refused([str(tmp_path / "short.csv")], "data row 2")
    (tmp_path / "cut.csv.gz").write_bytes(b"\x1f\x8b\x08\x00")  # a gzip header and nothing else
    refused([str(tmp_path / "cut.csv.gz")], "cannot read")
    refused([str(tmp_path / "missing.csv")], "cannot read")
    refused([str(tmp_path / "bad.csv"), "--variance-drop", "2"], "--variance-drop must lie in [0, 1]")
