"""Learned heat-equation operators with a neural-operator API: numpy in, numpy out, training in C++.

``Surrogate`` is the attention surrogate of `attnphys train heat` (every grid point a token; the same model, loss,
optimizer, checkpoint format and numbers), ``Trainer`` trains it on your arrays or on a PDEBench-layout HDF5 file.

Arrays are in the solver's axis order, the last axis x: fields are ``[samples, nz, ny, nx]`` in 3D, ``[samples, ny, nx]`` in 2D and
``[samples, nx]`` in 1D (``predict`` also takes one field ``[ny, nx]`` / ``[nx]``). Extra input channels (the
diffusivity kappa, a source, boundary data, any static per-sample field) have the shape of the fields. Values must
be floating point (float16/32/64) and finite: integer, boolean or complex arrays, NaN and inf are refused with
``attnphys.Error`` (nothing is converted silently). The model runs in float32; predictions come back as float64.

Coordinates are physical: the model's box is ``[0, L)`` per axis (``lengths``), and grid point i along an axis of n
points sits at ``i*L/n`` on a periodic box and at ``(i + 1/2)*L/n`` otherwise (cell centres, as in attnphys.heat),
unless ``coords=`` says otherwise. A model trained on one resolution predicts on another.

Example (runs as written; tests/python/test_operator_api.py runs this exact text)::

    import numpy as np
    import attnphys.heat
    from attnphys.operator import Surrogate, Trainer

    # 160 problems u(t) -> u(t + dt) with a random diffusivity kappa(x, y) each, periodic 16 x 16 grid
    n, h, dt = 16, 1.0 / 16, 2e-3
    u0 = attnphys.heat.initial_conditions((n, n), h, count=160, seed=1, length_scale=0.2)
    kappa = np.stack([attnphys.heat.random_kappa((n, n), h, 0.3, 3.0, 0.3, seed=s) for s in range(160)])
    u1 = np.stack([attnphys.heat.solve(u, dt, h, kappa=k) for u, k in zip(u0, kappa)])

    model = Surrogate("transformer", d_model=16, n_heads=2, d_ff=32, channels=("kappa",))

    def progress(step, info):
        if step % 50 == 0:
            print(f"step {step}: training loss {info['loss']:.3e}, validation {info['val_rel_l2']:.3e}")

    trainer = Trainer(model, lr=3e-2, steps=200, batch=16, eval_every=50, callback=progress)
    history = trainer.fit(u0[:128], u1[:128], channels={"kappa": kappa[:128]},
                          val=(u0[128:144], u1[128:144], {"kappa": kappa[128:144]}))

    pred = model.predict(u0[144:], kappa=kappa[144:])  # [16, 16, 16], like the inputs
    err = np.linalg.norm(pred - u1[144:], axis=(1, 2)) / np.linalg.norm(u1[144:], axis=(1, 2))
    trivial = np.linalg.norm(u0[144:] - u1[144:], axis=(1, 2)) / np.linalg.norm(u1[144:], axis=(1, 2))
    print(f"test relative L2 {err.mean():.2e} (u(t) itself: {trivial.mean():.2e}), {model.n_parameters} parameters")

    model.save("surrogate.h5")
    assert np.array_equal(Surrogate.load("surrogate.h5").predict(u0[144:], kappa=kappa[144:]), pred)

A checkpoint of `attnphys train heat` loads with ``Surrogate.load`` and predicts what `attnphys eval heat` does;
``Trainer(...).fit("dataset.h5", field="data", channels=["kappa"])`` trains from a file of `attnphys heat dataset`
or any PDEBench-layout file.
"""
import difflib as _difflib
from collections.abc import Mapping as _Mapping
import numbers as _numbers
import os as _os
import re as _re

import numpy as _np

from . import _core
from ._core import Error

_s = _core.surrogate

__all__ = ["Surrogate", "Trainer", "Error"]

# Python keyword -> option key, per model kind.
_COMMON = {"coords": "coords", "harmonics": "harmonics", "coord_features": "coord_features",
           "coord_sigma": "coord_sigma", "dt_input": "dt_input", "conserve": "conserve"}
_TRANSFORMER = {"d_model": "d_model", "n_heads": "n_heads", "n_layers": "n_layers", "d_ff": "d_ff",
                "attention": "attention", "n_slices": "n_slices", "final_norm": "final_norm", "stencil": "stencil",
                "attention_precision": "attention_precision"}
_KERNEL = {"n_heads": "kernel_heads", "n_layers": "kernel_layers", "d_k": "kernel_dk"}
_CONDITIONED = dict(_KERNEL, d_model="d_model", stencil="stencil", local_radius="local_radius",
                    local_edge="local_edge", channel_window="channel_window", layer_repeat="layer_repeat",
                    condition_on_field="condition_on_field", attention_precision="attention_precision")
# Option keys in C++ messages -> the keyword to change.
_MESSAGE_NAMES = {"model.kernel_heads": "n_heads", "model.kernel_dk": "d_k", "model.kernel_layers": "n_layers",
                  "optimizer.kind": "optimizer", "schedule.kind": "schedule", "data.channels": "channels",
                  "model.input_kappa": "channels", "optimizer.lr": "lr", "train.steps": "steps",
                  "train.batch": "batch", "schedule.warmup_steps": "warmup_steps", "data.dim": "dim",
                  "data.bc": "bc"}


def _python_names(message):
    """C++ option keys in an error message, as the keywords of this API."""
    message = _re.sub(r"option '([\w.]+)' \(from [^)]*\)", r"\1", message)
    message = _re.sub(r"^heat surrogate: ", "", message)

    def name(m):
        key = m.group(0)
        return _MESSAGE_NAMES.get(key, key.split(".", 1)[1])

    return _re.sub(r"\b(?:model|optimizer|schedule|train|data)\.\w+", name, message)


class _translated:
    """Re-raises attnphys.Error from the core with the keywords of this API in its message."""

    def __init__(self, where):
        self.where = where

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None and issubclass(kind, Error):
            raise Error(f"{self.where}: {_python_names(str(exc))}") from None
        return False


def _unknown(where, unknown, known):
    name = sorted(unknown)[0]
    close = _difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise Error(f"{where}: unknown option '{name}'{hint} Options: {', '.join(sorted(known))}")


def _int(where, name, v, lo=None):
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise Error(f"{where}: {name} must be an integer, got {v!r} ({type(v).__name__})")
    v = int(v)
    if lo is not None and v < lo:
        raise Error(f"{where}: {name} must be >= {lo}, got {v}")
    return v


def _float(where, name, v, lo=None, strict=False):
    if isinstance(v, bool) or not isinstance(v, _numbers.Real):
        raise Error(f"{where}: {name} must be a number, got {v!r} ({type(v).__name__})")
    v = float(v)
    if not _np.isfinite(v) or (lo is not None and (v <= lo if strict else v < lo)):
        raise Error(f"{where}: {name} must be a finite number {'>' if strict else '>='} {lo}, got {v}")
    return v


def _str(where, name, v, choices=None):
    if not isinstance(v, str):
        raise Error(f"{where}: {name} must be a string, got {v!r} ({type(v).__name__})")
    if choices is not None and v not in choices:
        close = _difflib.get_close_matches(v, choices, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise Error(f"{where}: {name}='{v}' is not one of {', '.join(choices)}{hint}")
    return v


def _bool(where, name, v):
    if not isinstance(v, (bool, _np.bool_)):
        raise Error(f"{where}: {name} must be True or False, got {v!r} ({type(v).__name__})")
    return bool(v)


def _array(where, name, a):
    """a as a finite float64 array; integer, boolean, complex or object arrays and NaN/inf are refused."""
    if isinstance(a, (str, bytes)) or a is None:
        raise Error(f"{where}: {name} must be a numpy array of floating-point values, got {type(a).__name__}")
    arr = _np.asarray(a)
    if arr.dtype.kind != "f":
        kinds = {"i": "integer", "u": "unsigned integer", "b": "boolean", "c": "complex", "O": "object",
                 "U": "string", "S": "bytes"}
        raise Error(f"{where}: {name} has dtype {arr.dtype} ({kinds.get(arr.dtype.kind, 'not floating point')}); "
                    f"pass floating-point values, e.g. {name}.astype(np.float64) (integers are not converted "
                    f"silently)")
    bad = ~_np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in _np.argwhere(bad)[0])
        raise Error(f"{where}: {name} holds {int(bad.sum())} non-finite value(s) (NaN or inf), the first at index "
                    f"{first} (value {arr[first]}); clean or drop those samples")
    return _np.ascontiguousarray(arr, dtype=_np.float64)


def _shape(s):
    return "(" + ", ".join(str(int(x)) for x in s) + ("," if len(s) == 1 else "") + ")"


class Surrogate:
    """The heat surrogate: an attention operator u(t) -> u(t + dt) on a grid, every point a token.

    kind: "transformer" (pre-LN transformer encoder over tokens [u, channels, (horizon), coordinate encoding]; takes
        extra channels, any problem) or "kernel" (coordinate attention, exactly linear in u: one learned attention
        matrix per head, shared by all samples; for constant-coefficient problems; no channels) or "conditioned"
        (kernel attention whose queries, keys, value gains and mixing come from the coordinates and the channels
        through a small MLP: a per-sample attention kernel, still exactly affine in u; needs at least one channel).
    transformer: d_model (token width), n_heads (must divide d_model), n_layers (blocks), d_ff (feed-forward width,
        0: 4*d_model), attention ("dense", "tiled", "galerkin", ...), n_slices (physics attention; None: default),
        final_norm (LayerNorm before the readout), stencil (every token also sees the central differences of u and
        of its channels along each axis; needs a regular grid).
    kernel: n_heads, n_layers, d_k (query/key width per head).
    conditioned: n_heads, n_layers, d_k as kernel; d_model (width of the conditioning MLP); stencil (the channels'
        central differences join the conditioning, never u's); local_radius (r > 0 adds a conditioned local term
        sum_s w_s(z_i) u_(i+s) over the (2r+1)^dim neighbours, still linear in u; 0: none); local_edge (what that
        term reads beyond a non-periodic edge: "clamp", the edge value; "odd", minus the cell mirrored across the
        edge face, for zero Dirichlet sides; "even", that cell, for zero-flux sides); channel_window (w > 0: each
        channel's values at the (2w+1)^dim neighbours join the conditioning; regular grids); layer_repeat (K > 1,
        with n_heads=0 and local_radius > 0: each layer's stencil update runs K times with the same weights, like K
        explicit steps of a learned scheme, for diffusion lengths of several cells per step); condition_on_field (u
        itself joins the conditioning: a quasi-linear A(u) u for nonlinear kappa(u), where no channel carries kappa;
        then no channel is needed).
    attention_precision (conditioned, transformer): "float32", or "bf16" for the global softmax attention's products
        in bf16 with float32 accumulation and a float32 softmax (faster; needs Intel AMX or AVX512-BF16: AMD Zen 4/5,
        Intel Cooper Lake; tiled attention with head width 16: d_k=16 (conditioned), d_model/n_heads=16
        (transformer)). Predictions agree with float32 to bf16 rounding (about 1e-3 relative).
    conserve: every prediction keeps its input's mean exactly (periodic or zero-flux heat without sources).
    coords: "harmonics" (cos/sin(2 pi m x / period), m = 1..harmonics per axis; the period is the box on a periodic
        box, twice it otherwise), "fourier" (coord_features random Fourier features of scale coord_sigma) or "none".
    channels: names of the extra per-point inputs (static per sample), e.g. ("kappa",); each is normalised with its
        own mean and standard deviation over the training data.
    dt_input: the horizon tau = dt / dt_base as an input (train with several tau; predict(tau=...)).
    dim, lengths, bc: the problem's dimension (1, 2 or 3), box lengths per axis (None: 1.0 each) and boundary type
        ("periodic", "dirichlet", "neumann"; sets the coordinate encoding's period).
    dtype: "float32" (the training precision; "float64" is not available).
    seed: parameter initialisation.

    The defaults are those of `attnphys train heat` (SurrogateOptions). Unknown or invalid options raise
    attnphys.Error saying what to change.
    """

    def __init__(self, kind="transformer", *, d_model=32, n_heads=4, n_layers=1, d_ff=64, attention="dense",
                 n_slices=None, final_norm=False, stencil=False, d_k=16, local_radius=0, local_edge="clamp",
                 channel_window=0, layer_repeat=1, coords="harmonics",
                 harmonics=4, coord_features=16, coord_sigma=1.0, channels=(), dt_input=False, conserve=False,
                 condition_on_field=False, attention_precision="float32", dim=2, lengths=None, bc="periodic",
                 dtype="float32", seed=0, **unknown):
        w = "Surrogate"
        if unknown:
            _unknown(w, unknown, list(_TRANSFORMER) + list(_CONDITIONED) + list(_COMMON) +
                     ["kind", "channels", "dim", "lengths", "bc", "dtype", "seed"])
        kind = _str(w, "kind", kind, ("transformer", "kernel", "conditioned"))
        dtype = _str(w, "dtype", dtype, ("float32", "float64"))
        if dtype != "float32":
            raise Error(f"{w}: dtype='{dtype}' is not available: the surrogate trains and predicts in float32 "
                        f"(predictions come back as float64); use dtype='float32'")
        dim = _int(w, "dim", dim)
        if dim not in (1, 2, 3):
            raise Error(f"{w}: dim must be 1, 2 or 3, got {dim}")
        bc = _str(w, "bc", bc, ("periodic", "dirichlet", "neumann"))
        if lengths is None:
            lengths = (1.0,) * dim
        elif isinstance(lengths, _numbers.Real) and not isinstance(lengths, bool):
            lengths = (float(lengths),) * dim
        lengths = tuple(_float(w, "lengths", x, 0.0, strict=True) for x in lengths)
        if len(lengths) != dim:
            raise Error(f"{w}: lengths has {len(lengths)} value(s) for a {dim}D model: give one per axis, "
                        f"e.g. lengths={(1.0,) * dim}")
        if isinstance(channels, str):
            channels = (channels,)
        channels = tuple(_str(w, "channels", c) for c in channels)
        seed = _int(w, "seed", seed, 0)
        # n_heads = 0: the conditioned kind without global attention (its local stencil alone)
        given = {"d_model": _int(w, "d_model", d_model, 1),
                 "n_heads": _int(w, "n_heads", n_heads, 0 if kind == "conditioned" else 1),
                 "n_layers": _int(w, "n_layers", n_layers, 1), "d_ff": _int(w, "d_ff", d_ff, 0),
                 "attention": _str(w, "attention", attention),
                 "final_norm": _bool(w, "final_norm", final_norm), "stencil": _bool(w, "stencil", stencil),
                 "d_k": _int(w, "d_k", d_k, 1), "local_radius": _int(w, "local_radius", local_radius, 0),
                 "local_edge": _str(w, "local_edge", local_edge, ("clamp", "odd", "even")),
                 "channel_window": _int(w, "channel_window", channel_window, 0),
                 "layer_repeat": _int(w, "layer_repeat", layer_repeat, 1),
                 "coords": _str(w, "coords", coords, ("harmonics", "fourier", "none")),
                 "harmonics": _int(w, "harmonics", harmonics, 1),
                 "coord_features": _int(w, "coord_features", coord_features, 1),
                 "coord_sigma": _float(w, "coord_sigma", coord_sigma, 0.0, strict=True),
                 "dt_input": _bool(w, "dt_input", dt_input), "conserve": _bool(w, "conserve", conserve),
                 "condition_on_field": _bool(w, "condition_on_field", condition_on_field),
                 "attention_precision": _str(w, "attention_precision", attention_precision, ("float32", "bf16"))}
        if n_slices is not None:
            given["n_slices"] = _int(w, "n_slices", n_slices, 1)
        own = {"transformer": _TRANSFORMER, "kernel": _KERNEL, "conditioned": _CONDITIONED}[kind]
        defaults = Surrogate._defaults()
        for name, value in given.items():
            if name not in own and name not in _COMMON and value != defaults.get(name, value):
                other = next(k for k, m in (("transformer", _TRANSFORMER), ("conditioned", _CONDITIONED),
                                            ("kernel", _KERNEL)) if name in m and k != kind)
                raise Error(f"{w}: {name}={value!r} applies to kind='{other}', not kind='{kind}' (which takes "
                            f"{', '.join(sorted(set(own) | set(_COMMON)))})")
        options = {"model.kind": kind}
        for name, value in given.items():
            if name in own:
                options["model." + own[name]] = value
            elif name in _COMMON:
                options["model." + _COMMON[name]] = value
        with _translated(w):
            self._m = _s.Model(options, dim, list(lengths), bc, list(channels), seed)

    @staticmethod
    def _defaults():
        """The C++ defaults under this API's keywords (tests check the signature against them)."""
        d = _s.model_defaults()
        return {"d_model": d["d_model"], "n_heads": d["n_heads"], "n_layers": d["n_layers"], "d_ff": d["d_ff"],
                "attention": d["attention"], "final_norm": d["final_norm"], "stencil": d["stencil"],
                "d_k": d["kernel_dk"], "local_radius": d["local_radius"], "local_edge": d["local_edge"],
                "channel_window": d["channel_window"], "layer_repeat": d["layer_repeat"],
                "coords": d["coords"], "harmonics": d["harmonics"], "coord_features": d["coord_features"],
                "coord_sigma": d["coord_sigma"], "dt_input": d["dt_input"], "conserve": d["conserve"],
                "condition_on_field": d["condition_on_field"], "attention_precision": d["attention_precision"],
                "kernel_heads": d["kernel_heads"],
                "kernel_layers": d["kernel_layers"], "kind": d["kind"]}

    @classmethod
    def load(cls, path, *, attention_precision=None):
        """A checkpoint of Surrogate.save or of `attnphys train heat` (the best validated parameters when it holds
        them); predicts what `attnphys eval heat` computes. attention_precision ("float32" or "bf16"; None: as
        stored) replaces the stored one, e.g. to predict on a CPU without a bf16 unit with a model trained in bf16."""
        w = f"Surrogate.load('{_os.fspath(path)}')"
        overrides = []
        if attention_precision is not None:
            prec = _str(w, "attention_precision", attention_precision, ("float32", "bf16"))
            overrides.append(f"model.attention_precision={prec}")
        self = cls.__new__(cls)
        with _translated(w):
            self._m = _s.Model.load(_os.fspath(path), overrides)
        return self

    def save(self, path):
        """Writes the model (parameters, normalisation, channel statistics, grid, configuration) in the checkpoint
        format of `attnphys train heat`, through a temporary file renamed into place."""
        with _translated("save"):
            self._m.save(_os.fspath(path))

    # ---------------------------------------------------------------------------------------------- properties
    @property
    def kind(self):
        return self._m.options["kind"]

    @property
    def options(self):
        """The model's options (SurrogateOptions keys)."""
        return dict(self._m.options)

    @property
    def channels(self):
        return tuple(self._m.channels)

    @property
    def dim(self):
        return int(self._m.grid["dim"])

    @property
    def lengths(self):
        return tuple(self._m.grid["box"])

    @property
    def bc(self):
        return self._m.grid["bc"]

    @property
    def dt_input(self):
        return bool(self._m.options["dt_input"])

    @property
    def n_parameters(self):
        return int(self._m.n_parameters)

    @property
    def trained(self):
        return bool(self._m.trained)

    @property
    def grid_shape(self):
        """The training grid, (nz, ny, nx) in 3D, (ny, nx) in 2D and (nx,) in 1D; None before training."""
        g = self._m.grid
        if not g["nx"]:
            return None
        if g["dim"] == 3:
            return (int(g["nz"]), int(g["ny"]), int(g["nx"]))
        return (int(g["nx"]),) if g["dim"] == 1 else (int(g["ny"]), int(g["nx"]))

    @property
    def normalisation(self):
        """Mean and std of the input fields and of each channel, learned from the training data."""
        return dict(self._m.normalisation)

    def __repr__(self):
        ch = f", channels={self.channels}" if self.channels else ""
        return (f"Surrogate(kind='{self.kind}', dim={self.dim}, lengths={self.lengths}, bc='{self.bc}'{ch}, "
                f"{self.n_parameters} parameters{', trained on ' + str(self.grid_shape) if self.trained else ''})")

    # ---------------------------------------------------------------------------------------------- helpers
    def _fields(self, where, name, a, allow_single):
        """[S, *grid] float64 from a, and whether a was one field without the sample axis."""
        arr = _array(where, name, a)
        d = self.dim
        grid = {1: "[nx]", 2: "[ny, nx]", 3: "[nz, ny, nx]"}[d]
        batched = {1: "[samples, nx]", 2: "[samples, ny, nx]", 3: "[samples, nz, ny, nx]"}[d]
        if arr.ndim == d + 1:
            single = False
        elif allow_single and arr.ndim == d:
            arr, single = arr[None], True
        else:
            also = f" (or one field {grid})" if allow_single else ""
            raise Error(f"{where}: {name} must be {batched}{also} for this {d}D model (the last axis x), got "
                        f"shape {_shape(arr.shape)}")
        if arr.shape[0] < 1 or min(arr.shape[1:]) < 1:
            raise Error(f"{where}: {name} of shape {_shape(arr.shape)} holds no field")
        return arr, single

    def _axes(self, grid):
        """Per axis (x, y) of fields on `grid` = (ny, nx) / (nx,): (origin, offset, spacing). The box along the axis
        is [origin, origin + L]; point i sits at origin + (i + offset) * spacing, with the training grid's origin and
        offset (0 and 0 on a periodic box, 0 and 1/2 otherwise, before training)."""
        n = list(reversed(grid))  # nx, ny, nz
        g = self._m.grid
        out = []
        for a in range(self.dim):
            step = self.lengths[a] / n[a]
            origin, offset = 0.0, (0.0 if self.bc == "periodic" else 0.5)
            if g["coords"] is not None:
                first = float(_np.asarray(g["coords"])[:, a].min())
                h_train = self.lengths[a] / g[("nx", "ny", "nz")[a]]
                cells = first / h_train
                offset = cells - _np.floor(cells + 1e-9)
                origin = first - offset * h_train
            out.append((origin, offset, step))
        return out

    def _coords(self, where, coords, grid):
        """[P, dim] coordinates for fields on `grid` = (ny, nx) / (nx,)."""
        P = int(_np.prod(grid))
        g = self._m.grid
        axes = self._axes(grid)
        if coords is None:
            if g["coords"] is not None and self.grid_shape == tuple(grid):
                return _np.ascontiguousarray(g["coords"], dtype=_np.float64)
            pts = [origin + (offset + _np.arange(n)) * step for (origin, offset, step), n in
                   zip(axes, reversed(grid))]
            if self.dim == 1:
                return pts[0][:, None].copy()
            if self.dim == 3:
                zz, yy, xx = _np.meshgrid(pts[2], pts[1], pts[0], indexing="ij")  # [nz, ny, nx] each
                return _np.ascontiguousarray(_np.stack([xx.ravel(), yy.ravel(), zz.ravel()], axis=1))
            xx, yy = _np.meshgrid(pts[0], pts[1])  # [ny, nx] each
            return _np.ascontiguousarray(_np.stack([xx.ravel(), yy.ravel()], axis=1))
        c = _array(where, "coords", coords)
        ok = (c.shape == (P, self.dim) or c.shape == tuple(grid) + (self.dim,) or
              (self.dim == 1 and c.shape == tuple(grid)))
        if not ok:
            want = f"({P}, {self.dim}) or {_shape(tuple(grid) + (self.dim,))}"
            raise Error(f"{where}: coords must be {want} for fields on a {'x'.join(map(str, reversed(grid)))} grid "
                        f"(points in the fields' order, x fastest), got shape {_shape(c.shape)}")
        c = _np.ascontiguousarray(c.reshape(P, self.dim))
        for a, (origin, _, _) in enumerate(axes):
            L = self.lengths[a]
            tol = 1e-6 * L
            if c[:, a].min() < origin - tol or c[:, a].max() > origin + L + tol:
                raise Error(f"{where}: coords along {'xyz'[a]} span [{c[:, a].min():g}, {c[:, a].max():g}], outside "
                            f"the model's box [{origin:g}, {origin + L:g}] (lengths={self.lengths}); positions are "
                            f"physical, so a grid on another box needs a model built with Surrogate(lengths=...) "
                            f"for that box")
        return c

    def _channels(self, where, given, S, grid):
        """[S, P, C] in the model's channel order from {name: array}, or None without channels."""
        names = self.channels
        if given is not None and not isinstance(given, _Mapping):
            raise Error(f"{where}: channels must be a dict {{name: array}}, e.g. channels={{'kappa': kappa}}, got "
                        f"{type(given).__name__}")
        given = dict(given or {})
        for k in given:
            if not isinstance(k, str):
                raise Error(f"{where}: channel names must be strings, got {k!r}")
        unknown = [k for k in given if k not in names]
        if unknown:
            if not names:
                raise Error(f"{where}: unknown channel '{unknown[0]}': the model takes no channels (build it with "
                            f"Surrogate(channels=({unknown[0]!r},)) to use one)")
            raise Error(f"{where}: unknown channel '{unknown[0]}': the model takes {names}")
        missing = [k for k in names if k not in given]
        if missing:
            raise Error(f"{where}: the model was trained with the channel(s) {names} and needs '{missing[0]}': pass "
                        f"channels={{'{missing[0]}': array}} with the fields' shape")
        if not names:
            return None
        P = int(_np.prod(grid))
        out = _np.empty((S, P, len(names)))
        for c, name in enumerate(names):
            a = _array(where, f"channel '{name}'", given[name])
            if a.shape == (S,) + tuple(grid):
                out[:, :, c] = a.reshape(S, P)
            elif a.shape == tuple(grid):
                out[:, :, c] = a.reshape(1, P)
            else:
                raise Error(f"{where}: channel '{name}' must have the fields' shape {_shape((S,) + tuple(grid))} "
                            f"(or one grid {_shape(tuple(grid))} for every sample), got {_shape(a.shape)}")
        return out

    def _tau(self, where, tau, S):
        if tau is None:
            return None
        t = _np.asarray(tau)
        if t.dtype.kind not in "fiu" or t.dtype.kind == "b":
            raise Error(f"{where}: tau must be a number or one number per sample, got dtype {t.dtype}")
        t = _np.ascontiguousarray(_np.broadcast_to(t.astype(_np.float64), (S,)) if t.ndim == 0 else t,
                                  dtype=_np.float64)
        if t.shape != (S,):
            raise Error(f"{where}: tau must be a number or {S} values (one per sample), got shape {_shape(t.shape)}")
        if not _np.all(_np.isfinite(t)) or _np.any(t <= 0):
            raise Error(f"{where}: tau must hold positive finite horizons (in base horizons), got {t[:4]}")
        if not self.dt_input and _np.any(t != 1.0):
            raise Error(f"{where}: the model has no horizon input, so it predicts one base horizon (tau = 1); build "
                        f"it with Surrogate(dt_input=True) and train on several tau to use other horizons")
        return t

    def _pairs(self, where, inputs, targets, coords, channels, tau, unroll=1):
        x, _ = self._fields(where, "inputs", inputs, False)
        S, grid = x.shape[0], x.shape[1:]
        P = int(_np.prod(grid))
        y = None
        if targets is not None:
            y = _array(where, "targets", targets)
            if y.ndim == x.ndim + 1 and y.shape[0] == S and y.shape[2:] == x.shape[1:] and y.shape[1] >= 1:
                if y.shape[1] < unroll:
                    raise Error(f"{where}: unroll={unroll} trains on trajectories of {unroll} steps but targets hold "
                                f"{y.shape[1]} per sample (shape {_shape(y.shape)}): pass targets of shape "
                                f"{_shape((S, unroll) + tuple(grid))} or lower unroll")
                y = y.reshape(S, y.shape[1], P)  # trajectories: targets[:, j] is j + 1 horizons after the input
            elif y.shape != x.shape:
                raise Error(f"{where}: targets have shape {_shape(y.shape)} but inputs {_shape(x.shape)}: they must "
                            f"match (one target per input, same grid), or be trajectories "
                            f"{_shape((S, unroll) + tuple(grid))} (targets[:, j] the field j + 1 horizons on)")
            elif unroll > 1:
                raise Error(f"{where}: unroll={unroll} trains on trajectories: pass targets of shape "
                            f"{_shape((S, unroll) + tuple(grid))} (targets[:, j] the field j + 1 horizons after "
                            f"inputs), or use unroll=1")
            else:
                y = y.reshape(S, P)
        return {"inputs": x.reshape(S, P), "targets": y,
                "coords": self._coords(where, coords, grid), "channels": self._channels(where, channels, S, grid),
                "tau": self._tau(where, tau, S), "nx": int(grid[-1]), "ny": int(grid[-2]) if self.dim >= 2 else 1,
                "nz": int(grid[0]) if self.dim == 3 else 1}

    # ---------------------------------------------------------------------------------------------- predict
    def predict(self, fields, kappa=None, source=None, boundary=None, channels=None, tau=None, coords=None, batch=32):
        """The fields one horizon (tau horizons with dt_input) later, as float64 of the input's shape.

        fields: [samples, ny, nx] / [samples, nx], or one field [ny, nx] / [nx]. kappa, source, boundary: shorthand
        for channels={"kappa": ...}, etc.; channels: {name: array} with every channel the model was trained with,
        each shaped like the fields (or one grid for all samples). tau: horizon(s) in base horizons (dt_input
        models). coords: [points, dim] (or [ny, nx, dim]) physical coordinates; None: the training grid at the
        training resolution, else a uniform grid on the model's box. batch: samples per forward pass.
        The normalisation and channel statistics learned in fit are applied.
        """
        w = "predict"
        if not self.trained:
            raise Error(f"{w}: the model has not been trained: call Trainer(model).fit(...) first, or load a "
                        f"checkpoint with Surrogate.load(path)")
        batch = _int(w, "batch", batch, 1)
        if channels is not None and not isinstance(channels, _Mapping):
            raise Error(f"{w}: channels must be a dict {{name: array}}, e.g. channels={{'kappa': kappa}}, got "
                        f"{type(channels).__name__}")
        ch = dict(channels or {})
        for name, value in (("kappa", kappa), ("source", source), ("boundary", boundary)):
            if value is not None:
                if name in ch:
                    raise Error(f"{w}: channel '{name}' is given twice ({name}= and channels=)")
                ch[name] = value
        x, single = self._fields(w, "fields", fields, True)
        S, grid = x.shape[0], x.shape[1:]
        P = int(_np.prod(grid))
        co = self._coords(w, coords, grid)
        extra = self._channels(w, ch, S, grid)
        t = self._tau(w, tau, S)
        with _translated(w):
            out = self._m.predict(x.reshape(S, P), extra, co, t, batch)
        out = out.reshape(x.shape)
        return out[0] if single else out


class Trainer:
    """Trains a Surrogate with the loop of `attnphys train heat` (in C++, the GIL released).

    optimizer: "adamw", "adam" or "sgd"; lr, weight_decay, clip_norm (gradient-norm clipping, 0: off).
    schedule: "cosine" (linear warm-up over warmup_steps, None: min(100, steps // 10), then a half cosine down to
        min_lr_ratio * lr at the last step) or "constant". schedule_clock: "steps" (the cosine spans `steps`) or
        "time" (it spans the wall-clock budget max_seconds, which must then be > 0; `steps` is an upper bound and
        the warm-up still counts steps): equal-time comparisons with peers that schedule by time. batch: samples per step; steps: optimizer steps;
        max_seconds: a wall-clock budget (0: none). loss: "relative_l2" (mean over samples of ||pred - y|| / ||y||)
        or "relative_h1" (plus h1_weight times the same for the grid gradients; h1_weight default 1).
    seed: batch order. eval_every: steps between validations (fit(val=...)); patience: validations without
        improvement before stopping (0: never); restore_best: end with the best validated parameters.
    unroll: multi-step training. unroll=K > 1 trains on trajectories (fit targets of shape [samples, K, ...], or
        K + 1 snapshots of a file): the model is applied K times to its own prediction (channels and tau held
        fixed) and the loss is the mean over the K steps of the relative L2. unroll_grad: "full" (back-propagated
        through all K applications; memory K times a one-step batch) or "last" (pushforward: each step runs
        0..K-1 applications without gradient, then trains one on their output). unroll_warmup_steps: one-step training
        before that step. Validation then scores the same K-step rollout (val targets [samples, K, ...]).
        unroll=1 (default) is one-step training.
    callback(step, info): after every step, info = {"loss", "lr", "grad_norm", "seconds", "val_rel_l2" (None when
        not validated at that step), "best_val_rel_l2"}. An exception it raises (or Ctrl-C) stops the fit and
        propagates; the model keeps the parameters of the last completed step.
    The defaults are those of `attnphys train heat`. Each fit starts a fresh optimizer and schedule from the model's
    current parameters; the first fit of a model learns the normalisation, later fits keep it.
    """

    def __init__(self, model, optimizer="adamw", lr=3e-2, weight_decay=1e-4, schedule="cosine", warmup_steps=None,
                 batch=16, steps=3000, loss="relative_l2", seed=0, callback=None, *, clip_norm=1.0,
                 min_lr_ratio=0.02, eval_every=100, patience=0, h1_weight=None, max_seconds=0.0,
                 restore_best=True, unroll=1, unroll_grad="full", unroll_warmup_steps=0, schedule_clock="steps",
                 **unknown):
        w = "Trainer"
        if unknown:
            _unknown(w, unknown, ["optimizer", "lr", "weight_decay", "schedule", "warmup_steps", "batch", "steps",
                                  "loss", "seed", "callback", "clip_norm", "min_lr_ratio", "eval_every", "patience",
                                  "h1_weight", "max_seconds", "restore_best", "unroll", "unroll_grad",
                                  "unroll_warmup_steps", "schedule_clock"])
        if not isinstance(model, Surrogate):
            raise Error(f"{w}: model must be an attnphys.operator.Surrogate, got {type(model).__name__}")
        if callback is not None and not callable(callback):
            raise Error(f"{w}: callback must be callable as callback(step, info), got {type(callback).__name__}")
        loss = _str(w, "loss", loss, ("relative_l2", "relative_h1"))
        if h1_weight is None:
            h1_weight = 1.0 if loss == "relative_h1" else 0.0
        h1_weight = _float(w, "h1_weight", h1_weight, 0.0)
        if loss == "relative_l2" and h1_weight != 0:
            raise Error(f"{w}: h1_weight={h1_weight} needs loss='relative_h1'")
        steps = _int(w, "steps", steps, 1)
        opts = {"train.steps": steps, "train.batch": _int(w, "batch", batch, 1),
                "train.eval_every": _int(w, "eval_every", eval_every, 1),
                "train.patience": _int(w, "patience", patience, 0), "train.h1_weight": h1_weight,
                "train.seed": _int(w, "seed", seed), "train.max_seconds": _float(w, "max_seconds", max_seconds, 0.0),
                "optimizer.kind": _str(w, "optimizer", optimizer, ("adamw", "adam", "sgd")),
                "optimizer.lr": _float(w, "lr", lr, 0.0, strict=True),
                "optimizer.weight_decay": _float(w, "weight_decay", weight_decay, 0.0),
                "optimizer.clip_norm": _float(w, "clip_norm", clip_norm, 0.0),
                "schedule.kind": {"cosine": "warmup_cosine", "constant": "constant"}[
                    _str(w, "schedule", schedule, ("cosine", "constant"))],
                "schedule.min_lr_ratio": _float(w, "min_lr_ratio", min_lr_ratio, 0.0),
                "schedule.clock": _str(w, "schedule_clock", schedule_clock, ("steps", "time")),
                "train.unroll": _int(w, "unroll", unroll, 1),
                "train.unroll_grad": _str(w, "unroll_grad", unroll_grad, ("full", "last")),
                "train.unroll_warmup_steps": _int(w, "unroll_warmup_steps", unroll_warmup_steps, 0)}
        if opts["schedule.min_lr_ratio"] > 1:
            raise Error(f"{w}: min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
        if warmup_steps is not None:
            opts["schedule.warmup_steps"] = _int(w, "warmup_steps", warmup_steps, 0)
            if warmup_steps > steps:
                raise Error(f"{w}: warmup_steps={warmup_steps} exceeds steps={steps}")
        self.model = model
        self.callback = callback
        self.restore_best = _bool(w, "restore_best", restore_best)
        self.unroll = opts["train.unroll"]
        self._options = opts

    def fit(self, inputs, targets=None, coords=None, channels=None, val=None, tau=None, *, field="data",
            n_train=None, n_val=None, horizons=(1,), file_stride=1):
        """Trains on pairs (inputs -> targets) and returns the history.

        Arrays: inputs, targets [samples, ny, nx] / [samples, nx]; coords [points, dim] (None: the model's box at
        this resolution); channels {name: array like inputs} with exactly the model's channels; tau (dt_input):
        each pair's horizon in base horizons; val: (inputs, targets) or (inputs, targets, channels) to validate on.
        With Trainer(unroll=K): targets are trajectories [samples, K, ny, nx] / [samples, K, nx] (targets[:, j]
        the field j + 1 horizons after inputs); val targets may be trajectories too (validated over their steps,
        at most K), or one step. A file gives every start snapshot with its K targets in the file.
        A file: fit("dataset.h5", field="data", channels=[...]) reads pairs from a file of `attnphys heat dataset`
        or any PDEBench-layout file (field [sample, t, x, (y)], channels by name, the file's grid and coordinates;
        its box and boundary type must be the model's): samples [0, n_train) train (default: all but n_val),
        [n_train, n_train + n_val) validate (default: an eighth); pairs are snapshots file_stride * horizons apart.

        Returns {"step", "loss", "lr", "grad_norm", "seconds", "val_step", "val_rel_l2"} (numpy arrays) and
        "steps", "best_val_rel_l2", "final_loss", "train_seconds", "stopped_early", "stopped_at_time_limit".
        """
        w = "fit"
        m = self.model
        if isinstance(inputs, (str, _os.PathLike)):
            path = _os.fspath(inputs)
            if targets is not None or coords is not None or val is not None or tau is not None:
                raise Error(f"{w}('{path}'): a file holds its own targets, coordinates, validation samples and "
                            f"horizons; use n_train=, n_val=, horizons=, file_stride=")
            if channels is None:
                channels = list(m.channels)
            if isinstance(channels, str):
                channels = [channels]
            if isinstance(channels, dict):
                raise Error(f"{w}('{path}'): channels= names the file's datasets, e.g. channels=['kappa']")
            channels = [_str(w, "channels", c) for c in channels]
            if channels != list(m.channels):
                raise Error(f"{w}('{path}'): channels={channels} but the model was built with channels="
                            f"{m.channels}: they must be the same, in the same order")
            field = _str(w, "field", field)
            n_train = -1 if n_train is None else _int(w, "n_train", n_train, 1)
            n_val = -1 if n_val is None else _int(w, "n_val", n_val, 0)
            horizons = [_float(w, "horizons", x, 0.0, strict=True) for x in horizons]
            with _translated(f"{w}('{path}')"):
                h = m._m.fit_file(path, field, channels, n_train, n_val, horizons,
                                  _int(w, "file_stride", file_stride, 1), self._options, self.callback,
                                  self.restore_best)
        else:
            if targets is None:
                raise Error(f"{w}: targets are missing: fit(inputs, targets, ...) or fit('dataset.h5')")
            train = m._pairs(w, inputs, targets, coords, channels, tau, self.unroll)
            vp = None
            if val is not None:
                if not isinstance(val, (tuple, list)) or len(val) not in (2, 3):
                    raise Error(f"{w}: val must be (inputs, targets) or (inputs, targets, channels), got "
                                f"{type(val).__name__}{' of ' + str(len(val)) if isinstance(val, (tuple, list)) else ''}")
                same_grid = _np.shape(val[0])[1:] == _np.shape(inputs)[1:]
                vp = m._pairs(f"{w} (val)", val[0], val[1], train["coords"] if same_grid else None,
                              val[2] if len(val) == 3 else None, None)
            with _translated(w):
                h = m._m.fit(train, vp, self._options, self.callback, self.restore_best)
        for k in ("step", "loss", "lr", "grad_norm", "seconds", "val_step", "val_rel_l2"):
            h[k] = _np.asarray(h[k], dtype=_np.int64 if k in ("step", "val_step") else _np.float64)
        return dict(h)
