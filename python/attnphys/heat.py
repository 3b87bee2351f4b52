"""Heat equation u_t = div(kappa grad u): finite-difference reference solutions, random initial conditions and
training data, as numpy arrays.

Arrays are (nx,), (ny, nx) or (nz, ny, nx) with the last axis x. Periodic grids put point i at x = i*dx;
Dirichlet and Neumann grids are cell-centred, point i at (i + 1/2)*dx with the boundary at 0 and n*dx, and zero
boundary data (u = 0, or no flux). Diffusivity between two points is the harmonic mean of theirs.
"""
import numpy as _np

from . import _core
from ._core import heat as _heat

__all__ = ["solve", "initial_conditions", "random_kappa", "generate_pairs", "write_dataset"]


def _real_array(where, name, a):
    """a as a float64 array; complex, string, object arrays are refused (never cast silently)."""
    arr = _np.asarray(a)
    if arr.dtype.kind not in "fiub":
        what = {"c": "complex: the heat solvers are real; solve the real and imaginary parts apart",
                "O": "object", "U": "string", "S": "bytes"}.get(arr.dtype.kind, "not a real number type")
        raise _core.Error(f"{where}: {name} has dtype {arr.dtype} ({what}); give real numbers, e.g. a float64 array")
    return _np.ascontiguousarray(arr, dtype=_np.float64)


def solve(u0, t_end, dx, kappa=1.0, bc="periodic", method="adi", dt=None, kappa_law=None):
    """The field at t_end from u0 at t = 0.

    method: "ftcs" (explicit; a dt above its stability limit raises attnphys.Error), "cn" (Crank-Nicolson; in 2D/3D
    the same as "adi") or "adi" (Crank-Nicolson in 1D, Peaceman-Rachford in 2D, Douglas in 3D).
    dt=None picks a step whose time error stays below the space error. kappa: a number or an array like u0.

    kappa_law: solve the nonlinear equation u_t = div(kappa(u) grad u) instead, with the [nonlinear] keys of
    `attnphys heat dataset`: {"law": "quadratic", "kappa0": 1.0, "beta": 2.0} (kappa0 (1 + beta u^2)) or
    {"law": "table", "table_u": [...], "table_kappa": [...]} (piecewise linear, clamped), optionally with the
    Picard keys "picard_max" (default 2: lagged kappa plus one correction, second order) and "tol". The diffusivity
    then comes from the law alone (leave kappa at 1.0); method "adi"/"cn" only.
    """
    u0 = _real_array("heat.solve", "u0", u0)
    if kappa_law is not None:
        if not isinstance(kappa, (int, float)) or kappa != 1.0:
            raise _core.Error("heat.solve: kappa_law sets the diffusivity kappa(u); give kappa0 inside kappa_law "
                                 "instead of kappa=")
        return _heat.solve_nonlinear(u0, float(t_end), float(dx), bc, method, 0.0 if dt is None else float(dt),
                                     _overrides("nonlinear", kappa_law))
    if not isinstance(kappa, (int, float)):
        kappa = _real_array("heat.solve", "kappa", kappa)
    return _heat.solve(u0, float(t_end), float(dx), kappa, bc, method, 0.0 if dt is None else float(dt))


def initial_conditions(shape, dx, count=1, seed=0, first=0, bc="periodic", kind="grf", length_scale=0.1, **kw):
    """count random fields [count, *shape]; sample i depends only on (seed, first + i).

    kind: "grf" (Gaussian random field, correlation length length_scale, spectrum="gaussian"|"matern"),
    "fourier" (modes random Fourier modes up to max_wavenumber) or "bumps" (modes Gaussian bumps of bump_width).
    """
    return _heat.initial_conditions(list(shape), float(dx), count, seed, first, bc, kind, length_scale, **kw)


def random_kappa(shape, dx, lo=0.2, hi=2.0, length_scale=0.15, seed=0, bc="periodic"):
    """A random piecewise-smooth diffusivity: about lo or hi on either side of smooth random interfaces."""
    return _heat.random_kappa(list(shape), float(dx), lo, hi, length_scale, seed, bc)


def generate_pairs(shape, dx, count, first=0, seed=0, kappa=1.0, bc="periodic", t_start=0.0, delta_t=0.01,
                   method="adi", dt=None, kind="grf", length_scale=0.1):
    """(inputs, targets), each [count, *shape]: u(t_start) and u(t_start + delta_t) from random initial conditions.

    Deterministic per sample index first + i for a given seed, whatever count is.
    """
    if not isinstance(kappa, (int, float)):
        kappa = _real_array("heat.generate_pairs", "kappa", kappa)
    return _heat.generate_pairs(list(shape), float(dx), count, first, seed, kappa, bc, t_start, delta_t, method,
                                0.0 if dt is None else float(dt), kind, length_scale)


def _overrides(section, options):
    """{"kappa": "lognormal", "kappa_contrast": 10} -> ["family.kappa=lognormal", "family.kappa_contrast=10"]."""
    out = []
    for key, value in (options or {}).items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            text = "[" + ", ".join(repr(float(v)) for v in value) + "]"
        else:
            text = str(value)
        out.append(f"{section}.{key}={text}")
    return out


def write_dataset(path, shape, dx, samples, nt=2, t_start=0.0, delta_t=0.01, seed=0, kappa=1.0, bc="periodic",
                  method="adi", kind="grf", length_scale=0.1, chunk=16, config="", family=None, nonlinear=None):
    """Writes an HDF5 dataset in the PDEBench layout (data[sample, t, x, (y, (z)), 1], grid/x, grid/y, grid/z,
    grid/t) through a temporary file renamed into place; returns a summary dict.

    family: per-sample problem families, the keys of `attnphys heat dataset`'s [family] section, e.g.
        {"kappa": "lognormal", "kappa_contrast": 10, "source": "grf", "boundary": "random"}; varying inputs are
        written as the channels kappa, source, boundary (+ boundary_faces/*).
    nonlinear: the κ(u) law of u_t = div(κ(u) grad u), the [nonlinear] keys, e.g. {"law": "quadratic",
        "kappa0": 1.0, "beta": 2.0} or {"law": "table", "table_u": [...], "table_kappa": [...]}.
    """
    overrides = _overrides("family", family) + _overrides("nonlinear", nonlinear)
    return _heat.write_dataset(str(path), list(shape), float(dx), samples, nt, t_start, delta_t, seed, float(kappa),
                               bc, method, kind, length_scale, chunk, config, overrides)
