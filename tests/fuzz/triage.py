#!/usr/bin/env python3
"""Sorts the inputs a fuzz run kept (crash-*, timeout-*, oom-*, leak-*) by where they fail, run one at a time:

  attnphys      the first frame of the report that is not the sanitizer, libFuzzer or libc runtime is attnphys code
                (or an uncaught exception / a finding of the target's own checks): a defect to fix;
  libhdf5       it is inside libhdf5 (Debian 1.10.8, not instrumented), reached through a corrupted file;
  not reproducible  the input passes when run alone (a leak seen only in the long-running process, say).

    tests/fuzz/triage.py build-fuzz/bin/fuzz_hdf5 build-fuzz/artifacts/fuzz_hdf5/*

Prints one line per input and a summary; exits 1 when any input fails in attnphys code. Used by scripts/fuzz.
"""
import os
import re
import subprocess
import sys

RUNTIME = ("__sanitizer", "__asan", "__lsan", "__ubsan", "__interceptor", "fuzzer::", "libc.so", "malloc", "calloc",
           "realloc", "operator new", "__memcpy", "__memmove", "memcpy", "memmove", "abort", "raise", "pthread_kill",
           "__cxa", "std::terminate", "__gnu_cxx::__verbose_terminate", "libstdc++", "libgcc",
           " in main ", "__libc_start")  # libFuzzer's main: an out-of-memory report starts with its stack
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+")


def classify(binary, path):
    try:
        r = subprocess.run([binary, "-timeout=3", "-rss_limit_mb=2048", path], capture_output=True, text=True,
                           errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        return "libhdf5?", "hung for 60 s when run alone"
    out = r.stdout + r.stderr
    if r.returncode == 0:
        return "not reproducible", "passes when run alone"
    lines = out.splitlines()
    start = next((i for i, ln in enumerate(lines) if re.search(r"ERROR: |runtime error:|Direct leak|"
                                                               r"uncaught exception|fuzz_options: the", ln)), 0)
    head = lines[start] if lines else ""
    if "runtime error:" in head:  # UBSan: only instrumented code (attnphys, Kokkos headers) reports
        return "attnphys", head.strip()
    for ln in lines[start:]:
        if FRAME.match(ln) and not any(k in ln for k in RUNTIME):
            return ("libhdf5" if "libhdf5" in ln else "attnphys"), head.strip() + " | " + ln.strip()
    return "attnphys", head.strip() or out[-300:]


def main():
    binary, paths = sys.argv[1], sys.argv[2:]
    counts = {}
    for p in paths:
        where, why = classify(binary, p)
        counts[where] = counts.get(where, 0) + 1
        print(f"  {os.path.basename(p)}: {where}: {why[:300]}")
    print("  triage: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no failing inputs"))
    return 1 if counts.get("attnphys") else 0


if __name__ == "__main__":
    sys.exit(main())
