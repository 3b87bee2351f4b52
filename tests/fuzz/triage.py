#!/usr/bin/env python3
"""Sorts the inputs a fuzz run kept (crash-*, timeout-*, oom-*, leak-*) by where they fail, run one at a time:

  attnphys      the first frame of the report that is not the sanitizer, libFuzzer or libc runtime is attnphys code
                (or an uncaught exception / a finding of the target's own checks): a defect to fix;
  libhdf5       it is inside libhdf5 (Debian 1.10.8, not instrumented), reached through a corrupted file;
  not reproducible  the input passes when run alone (a leak seen only in the long-running process, say).

    tests/fuzz/triage.py build-fuzz/bin/fuzz_hdf5 build-fuzz/artifacts/fuzz_hdf5/*

Each input runs once with its reports unsymbolised; the frames of the target binary are then symbolised in one
llvm-symbolizer call for all of them (a long run keeps thousands of inputs). Prints one line per input and a summary; exits 1 when any input fails in attnphys code. Used by scripts/fuzz.
"""
import bisect
import os
import re
import shutil
import subprocess
import sys

RUNTIME = ("__sanitizer", "__asan", "__lsan", "__ubsan", "__interceptor", "fuzzer::", "libc.so", "malloc", "calloc",
           "realloc", "operator new", "__memcpy", "__memmove", "memcpy", "memmove", "memset",
           "sysdeps/", "abort", "raise", "pthread_kill",
           "__cxa", "std::terminate", "__gnu_cxx::__verbose_terminate", "libstdc++", "libgcc",
           " in main ", "__libc_start",  # libFuzzer's main: an out-of-memory report starts with its stack
           "fuzz_hdf5_cpu_watchdog")  # the target's CPU-time watchdog: the frame below it is where the input was
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+")


UNSYMBOLIZED = re.compile(r"^(\s*#\d+ 0x[0-9a-f]+)\s+\((\S+)\+(0x[0-9a-f]+)\)")


def run_alone(binary, path, slow_unwind=False):
    """Runs one input alone, its reports not symbolised (a symboliser process per report costs more than the run);
    returns (status, output) with status "ok", "hung" or "failed". slow_unwind: the DWARF unwinder for allocation
    and fatal reports (the fast one stops at the first frame of libhdf5, which has no frame pointers)."""
    args = os.environ.get("FUZZ_TRIAGE_ARGS", "-timeout=3 -rss_limit_mb=2048").split()  # the run's limits
    env = dict(os.environ)
    extra = ":symbolize=0" + (":fast_unwind_on_malloc=0:fast_unwind_on_fatal=0" if slow_unwind else "")
    for k in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        env[k] = (env.get(k, "") + extra).lstrip(":")
    try:
        r = subprocess.run([binary, *args, path], capture_output=True, text=True, errors="replace", timeout=60,
                           env=env)
    except subprocess.TimeoutExpired:
        return "hung", ""
    return ("ok" if r.returncode == 0 else "failed"), r.stdout + r.stderr


def symbolize(outputs):
    """Symbolises the frames of every output with one llvm-symbolizer process. The frames of the target binary need
    names (the sanitizer runtime and libFuzzer are linked into it, to be told from attnphys code); those of shared
    libraries keep their module name too (libhdf5, libc, libstdc++)."""
    wanted = set()
    for out in outputs:
        for ln in out.splitlines():
            m = UNSYMBOLIZED.match(ln)
            if m:
                wanted.add((m.group(2), m.group(3)))
    names = {}
    symbolizer = shutil.which("llvm-symbolizer") or shutil.which("llvm-symbolizer-14")
    if wanted and symbolizer:
        keys = sorted(wanted)
        query = "".join(f"{mod} {off}\n" for mod, off in keys)
        r = subprocess.run([symbolizer, "--inlining=false", "--relative-address"], input=query, capture_output=True,
                           text=True, errors="replace")
        blocks = [b.splitlines() for b in r.stdout.strip("\n").split("\n\n")]
        for key, blk in zip(keys, blocks):
            if len(blk) >= 2:
                names[key] = f"in {blk[0]} {blk[1]}"

    # A frame the symboliser cannot name (libFuzzer's code has no line tables; a watchdog signal that lands on the
    # first instruction of libFuzzer's alarm handler) is named from the binary's symbol table: the symbol before it.
    tables = {}

    def from_symtab(mod, off):
        if mod not in tables:
            r = subprocess.run(["nm", "-n", "-C", "--defined-only", mod], capture_output=True, text=True,
                               errors="replace")
            rows = []
            for row in r.stdout.splitlines():
                parts = row.split(" ", 2)
                if len(parts) == 3 and parts[1] in "tTwW":
                    rows.append((int(parts[0], 16), parts[2]))
            tables[mod] = rows
        rows, a = tables[mod], int(off, 16)
        i = bisect.bisect_right([r[0] for r in rows], a) - 1
        return f"in {rows[i][1]} (symbol table)" if i >= 0 else ""

    def rewrite(ln):
        m = UNSYMBOLIZED.match(ln)
        if not m:
            return ln
        name = names.get((m.group(2), m.group(3)), "")
        if name.startswith("in ??") and ".so" not in m.group(2):
            name = from_symtab(m.group(2), m.group(3)) or name
        return f"{m.group(1)} {name} ({m.group(2)}+{m.group(3)})".replace("  ", " ")

    return ["\n".join(rewrite(ln) for ln in out.splitlines()) for out in outputs]


def classify(status, out):
    if status == "hung":
        return "libhdf5?", "hung for 60 s when run alone"
    if status == "ok":
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
    return "attnphys", UNPLACED + (head.strip() or out[-300:])


# classify()'s verdict when no frame outside the runtimes was found: the fast unwinder can stop right above an
# allocation made inside libhdf5 (a `requested allocation size 0xffff...` from H5MM_realloc); main() runs such an
# input again with the slow unwinder before counting it as attnphys'.
UNPLACED = "no frame outside the runtimes: "


def main():
    binary, paths = sys.argv[1], sys.argv[2:]
    counts = {}
    runs = [run_alone(binary, p) for p in paths]
    outputs = symbolize([out for _, out in runs])
    for p, (status, _), out in zip(paths, runs, outputs):
        where, why = classify(status, out)
        if why.startswith(UNPLACED):
            status, again = run_alone(binary, p, slow_unwind=True)
            where, why = classify(status, symbolize([again])[0])
            why = "(slow unwinder) " + why
        counts[where] = counts.get(where, 0) + 1
        print(f"  {os.path.basename(p)}: {where}: {why[:300]}")
    print("  triage: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no failing inputs"))
    return 1 if counts.get("attnphys") else 0


if __name__ == "__main__":
    sys.exit(main())
