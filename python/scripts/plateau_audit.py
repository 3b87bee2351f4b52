#!/usr/bin/env python3
"""Where the VMC plateau test (vmc.converge_window; spin.Convergence) stops a run, one-sided and two-sided.

Reads VMC logs in the CLI's CSV layout (`attnphys vmc --log`, VMC.run(out="x.csv"): the columns iteration, energy,
variance and, with the step guard, rejected; any others are ignored; .csv.gz too), so that a trace can be checked
against either form of the test without rerunning it. For each log it prints the first iteration (counting
iterations run, as the driver does) at which the one-sided test (the default: the energy fell by at most `sigmas`
standard errors and the median variance by less than `variance_drop` over the last window) and the two-sided test
(vmc.converge_two_sided: neither a fall nor a rise beyond those bounds) hold, or "-" when they hold nowhere in the
log, and whether each holds at the log's last iteration. The test is the library's own (attnphys.spin.plateaued).
Rejected iterations count as holes (NaN), as in the driver; the driver also waits a window after a rejection, which
this script does too.

    PYTHONPATH=build/python /usr/bin/python3 python/scripts/plateau_audit.py LOG.csv [LOG.csv ...]
        [--window 100] [--start 300] [--sigmas 2] [--variance-drop 0.1] [--json]

The last line with --json is one JSON object: {"logs": [{log, iterations, one_sided_first, two_sided_first,
one_sided_at_end, two_sided_at_end}], "window", "start", ...}.
"""
import argparse
import csv
import gzip
import json
import math
import os
import sys


def read_log(path):
    """(energies, variances, rejected flags) of a CLI log; a clear error when a column is missing or unreadable."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as x:  # missing, unreadable, truncated gzip
        raise SystemExit(f"plateau_audit: cannot read {path}: {x}")
    if not rows:
        raise SystemExit(f"plateau_audit: {path} has no rows")
    for col in ("energy", "variance"):
        if col not in rows[0]:
            raise SystemExit(f"plateau_audit: {path} has no '{col}' column (a VMC log in the CLI's layout is needed: "
                             f"attnphys vmc --log, or VMC.run(out=...))")
    e, v, rej = [], [], []
    for i, r in enumerate(rows):
        try:
            bad = (r.get("rejected") or "0").strip().lower() in ("1", "true")
            e.append(math.nan if bad else float(r["energy"]))
            v.append(math.nan if bad else float(r["variance"]))
            rej.append(bad)
        except (ValueError, TypeError) as x:  # a non-number, or a short row (its missing fields are None)
            raise SystemExit(f"plateau_audit: {path}, data row {i + 1}: {x}")
    return e, v, rej


def first_plateau(plateaued, e, v, rej, window, start, **kw):
    """The first iteration count t (1-based: t iterations run) at which the test holds on e[:t], or None."""
    last_reject = -1
    for t in range(1, len(e) + 1):
        if rej[t - 1]:
            last_reject = t - 1
        # The driver's wait: no convergence within a window of a rejection (iter - event <= window).
        if last_reject >= 0 and t - last_reject <= window:
            continue
        if t >= max(2 * window, start) and plateaued(e[:t], v[:t], window, start=start, **kw):
            return t
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="VMC CSV logs (the CLI's layout)")
    ap.add_argument("--window", type=int, default=100, help="vmc.converge_window (default 100, the study's)")
    ap.add_argument("--start", type=int, default=300,
                    help="first iteration count the test may hold (the end of SR's diagonal-shift decay; default 300)")
    ap.add_argument("--sigmas", type=float, default=2.0, help="vmc.converge_sigmas (default 2)")
    ap.add_argument("--variance-drop", type=float, default=0.1, help="vmc.converge_variance_drop (default 0.1)")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    a = ap.parse_args(argv)
    if a.window < 1:
        ap.error("--window must be >= 1")
    if not (math.isfinite(a.sigmas) and a.sigmas >= 0):
        ap.error("--sigmas must be finite and >= 0")
    if not 0 <= a.variance_drop <= 1:
        ap.error("--variance-drop must lie in [0, 1]")
    from attnphys import spin

    kw = {"sigmas": a.sigmas, "variance_drop": a.variance_drop}
    out = []
    print(f"{'log':48s} {'iters':>6s} {'one-sided':>10s} {'two-sided':>10s}  at the end (one / two)")
    for path in a.logs:
        e, v, rej = read_log(path)
        rec = {"log": os.path.basename(path), "iterations": len(e)}
        for name, two in (("one_sided", False), ("two_sided", True)):
            rec[name + "_first"] = first_plateau(spin.plateaued, e, v, rej, a.window, a.start, two_sided=two, **kw)
            rec[name + "_at_end"] = len(e) >= max(2 * a.window, a.start) and bool(
                spin.plateaued(e, v, a.window, start=a.start, two_sided=two, **kw))
        out.append(rec)
        show = lambda t: "-" if t is None else str(t)  # noqa: E731
        print(f"{rec['log'][:48]:48s} {len(e):6d} {show(rec['one_sided_first']):>10s} "
              f"{show(rec['two_sided_first']):>10s}  {rec['one_sided_at_end']!s:>5s} / {rec['two_sided_at_end']!s}")
    ends = [r for r in out if r["one_sided_at_end"]]
    goes_on = [r for r in ends if not r["two_sided_at_end"]]
    print(f"{len(ends)} of {len(out)} logs end on a one-sided plateau; the two-sided test holds at the end of "
          f"{len(ends) - len(goes_on)} of them (a two-sided run would have gone on in {len(goes_on)})")
    if a.json:
        print(json.dumps({"logs": out, "window": a.window, "start": a.start, "sigmas": a.sigmas,
                          "variance_drop": a.variance_drop, "one_sided_ends": len(ends),
                          "two_sided_would_continue": len(goes_on)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
