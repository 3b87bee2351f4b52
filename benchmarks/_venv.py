"""The peers' virtual environments of the benchmark scripts (NetKet, PyTorch 2, neuraloperator), made one way.

A peer never becomes a dependency of attnphys: each script that compares against one keeps it in its own venv under
~/.cache/attnphys/ (pip from PyPI), made once. ensure_venv() probes the venv's python (imports the peer and reports
its versions as JSON); a venv that probes well is reused, with the description stored in its marker file
(attnphys-bench-env.json) when it has one; a missing or broken one is removed and made again: python3 -m venv, then
the script's install step, then the probe once more, then the marker written through a temporary file.
"""
import json
import os
import shutil
import subprocess
import sys
import time

MARKER = "attnphys-bench-env.json"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def probe_json(py, code, what):
    """Runs `code` (which prints one JSON object as its last line) in `py`: (dict, None) or (None, last error line)."""
    r = subprocess.run([py, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or [f"import {what} failed"])[-1]
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def read_marker(venv):
    path = os.path.join(venv, MARKER)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_marker(venv, env):
    path = os.path.join(venv, MARKER)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(env, f)
    os.replace(tmp, path)


def ensure_venv(venv, what, probe, install, *, system_site_packages=False, require_marker=False, hint=""):
    """Makes (once) and checks the venv of a peer; returns (info, None) or (None, error).

    what: the peer's name in messages ("NetKet"); probe(py) -> (info, error); install(py) -> dict of what was done
    (stored in the marker; raises CalledProcessError / OSError on failure); require_marker: reuse only a venv this
    helper made (one without the marker is made again); hint: appended to an install failure's message.
    info: the marker's description updated with the probe's answer (and "reused": whether the venv was there).
    """
    py = venv_python(venv)
    if os.path.exists(py):
        marker = read_marker(venv)
        if marker is not None or not require_marker:
            info, err = probe(py)
            if info:  # the marker's description, updated with what the probe found now
                out = dict(marker if marker is not None else
                           {"venv": venv, "made_with": f"found (a {what} venv made before this script's marker)"})
                out.update(info)
                out["reused"] = True
                return out, None
            log(f"{what} venv {venv}: unusable ({err}); making it again")
    if os.path.exists(venv):
        shutil.rmtree(venv)
    log(f"{what} venv: making {venv} (python3 -m venv{' --system-site-packages' if system_site_packages else ''}, "
        "then pip from PyPI; once)")
    os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
    t0 = time.time()
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", *(["--system-site-packages"] if system_site_packages else []),
                        venv], check=True)
        env = {"venv": venv}
        env.update(install(py) or {})
    except (subprocess.CalledProcessError, OSError) as e:
        return None, f"making the {what} venv failed ({e}); rerun with network access to PyPI{hint}"
    info, err = probe(py)
    if not info:
        return None, f"{what} venv {venv} does not work: {err}"
    env["install_s"] = round(time.time() - t0, 1)
    write_marker(venv, env)
    info.update(env)
    info["reused"] = False
    return info, None


def pip_install(py, *specs, constraints=None):
    """pip install -q specs into the venv of `py` (its output on stderr)."""
    cmd = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if constraints:
        cmd += ["-c", constraints]
    subprocess.run(cmd + list(specs), check=True, stdout=sys.stderr)
