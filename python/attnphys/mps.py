"""Matrix product states and DMRG (compiled in ``attnphys._core.mps``), in two forms.

The one-line job of ``attnphys dmrg``: ``dmrg(model="heisenberg", n=100, chi=100)`` returns a dict with energy,
variance, max_bond_dimension, truncation_error, sweeps, converged, convergence_reason, symmetry, seconds, entropies,
entropy_mid, magnetization and sweep_energies (C++ ``mps::run_dmrg`` and its ``to_json``). Sz-conserving chains
(heisenberg, xxz, j1j2) run the U(1) block-sparse DMRG unless ``symmetry="none"``.

ITensor's shape, on the same C++ objects::

    sites = mps.SpinHalf(20, conserve_sz=True)
    ampo = mps.AutoMpo(sites)
    for i in range(19):
        ampo += (0.5, "S+", i, "S-", i + 1)
        ampo += (0.5, "S-", i, "S+", i + 1)
        ampo += (1.0, "Sz", i, "Sz", i + 1)
    H = ampo.mpo()
    psi0 = mps.product_state(sites, "Neel")          # or a list of "Up" / "Dn", or mps.random_mps(sites, chi=10)
    sweeps = mps.Sweeps(maxdim=[10, 20, 100, 100, 100], cutoff=1e-12, noise=[1e-6, 1e-7, 0, 0, 0])
    energy, psi = mps.dmrg(H, psi0, sweeps, observer=lambda info: print(info["sweep"], info["energy"]))
    psi.expect("Sz"), psi.correlation("Sz", "Sz"), psi.entropy(9)
    psi.save("gs.h5"); psi2 = mps.load("gs.h5")
    vs = spin.MCState(spin.ExactSampler(spin.Spin(20)), psi.to_ansatz())   # the MPS as a VMC ansatz

Sites are numbered from 0; local state 0 is up (Sz = +1/2). Operators: Id, Sz, S+ (Sp), S-, (Sm), Sx, Sy, X, Y, Z
(X, Y, Z the Pauli matrices). Every error is an ``attnphys.Error`` that names the argument.
"""
import json as _json
import math as _math
import numbers as _numbers
import os as _os

import numpy as _np

from ._core import Error
from ._core import mps as _mps

# ---------------------------------------------------------------------------------------------------- operators
# Each operator as phase * (real 2 x 2 matrix <s'|O|s>), basis 0 = up: expectation values of real states need only
# the real matrices (an odd number of Sy / Y factors has expectation value 0 on a real state).
_SY = ((0.0, 0.5), (-0.5, 0.0))  # Sy = -i * this
_OPS = {
    "Id": (1, ((1.0, 0.0), (0.0, 1.0))),
    "Sz": (1, ((0.5, 0.0), (0.0, -0.5))),
    "S+": (1, ((0.0, 1.0), (0.0, 0.0))),
    "S-": (1, ((0.0, 0.0), (1.0, 0.0))),
    "Sx": (1, ((0.0, 0.5), (0.5, 0.0))),
    "Sy": (-1j, _SY),
    "X": (1, ((0.0, 1.0), (1.0, 0.0))),
    "Y": (-1j, ((0.0, 1.0), (-1.0, 0.0))),
    "Z": (1, ((1.0, 0.0), (0.0, -1.0))),
}
_ALIASES = {"Sp": "S+", "Sm": "S-", "Splus": "S+", "Sminus": "S-"}
# The same operators in the C++ AutoMpo's names: S+, S- and Sz carry definite Sz charges, so an MPO written with
# Sx / Sy is U(1) exactly when its terms combine into charge-conserving ones (Sx Sx + Sy Sy = (S+ S- + S- S+) / 2).
_COMPONENTS = {
    "Id": ((1, "Id"),), "Sz": ((1, "Sz"),), "S+": ((1, "S+"),), "S-": ((1, "S-"),),
    "Sx": ((0.5, "S+"), (0.5, "S-")), "Sy": ((-0.5j, "S+"), (0.5j, "S-")),
    "X": ((1, "S+"), (1, "S-")), "Y": ((-1j, "S+"), (1j, "S-")), "Z": ((2, "Sz"),),
}
_OP_NAMES = "Id, Sz, S+ (Sp), S- (Sm), Sx, Sy, X, Y, Z"


def _op_name(name, where):
    if not isinstance(name, str):
        raise Error(f"{where}: an operator name must be a string, got {name!r}")
    canon = _ALIASES.get(name, name)
    if canon not in _OPS:
        raise Error(f"{where}: unknown operator '{name}': use {_OP_NAMES}")
    return canon


def _is_int(v):
    return isinstance(v, _numbers.Integral) and not isinstance(v, bool)


def _int(name, v, where, lo=None):
    if not _is_int(v):
        raise Error(f"{where}: {name} must be an integer, got {v!r}")
    v = int(v)
    if lo is not None and v < lo:
        raise Error(f"{where}: {name} must be >= {lo}, got {v}")
    return v


def _real(name, v, where, lo=None):
    if isinstance(v, bool) or not isinstance(v, _numbers.Real):
        raise Error(f"{where}: {name} must be a real number, got {v!r}")
    v = float(v)
    if not _math.isfinite(v):
        raise Error(f"{where}: {name} must be a finite number, got {v}")
    if lo is not None and v < lo:
        raise Error(f"{where}: {name} must be >= {lo}, got {v}")
    return v


# ---------------------------------------------------------------------------------------------------- sites
class SpinHalf:
    """n spins 1/2; conserve_sz=True: states and DMRG use U(1) block-sparse tensors (total Sz conserved)."""

    def __init__(self, n, *, conserve_sz=False):
        self.n = _int("n", n, "SpinHalf", lo=1)
        if not isinstance(conserve_sz, bool):
            raise Error(f"SpinHalf: conserve_sz must be True or False, got {conserve_sz!r}")
        self.conserve_sz = conserve_sz

    def __len__(self):
        return self.n

    def __repr__(self):
        return f"SpinHalf({self.n}, conserve_sz={self.conserve_sz})"

    def _site(self, i, where):
        if not _is_int(i):
            raise Error(f"{where}: a site index must be an integer, got {i!r}")
        if not 0 <= i < self.n:
            raise Error(f"{where}: site index {i} out of range 0..{self.n - 1}")
        return int(i)


def _sites_of(sites, where):
    if not isinstance(sites, SpinHalf):
        raise Error(f"{where}: sites must be mps.SpinHalf(n, ...), got {type(sites).__name__}")
    return sites


# ---------------------------------------------------------------------------------------------------- operators
class MPO:
    """A matrix product operator (``AutoMpo(sites).mpo()``), on the C++ ``mps::Mpo``."""

    def __init__(self, impl, sites):
        self._impl, self.sites = impl, sites

    @property
    def n(self):
        return self._impl.n

    def __len__(self):
        return self._impl.n

    @property
    def max_bond_dimension(self):
        return self._impl.max_bond_dimension

    @property
    def conserves_sz(self):
        """Whether every term conserves total Sz (then a U(1) state runs the block-sparse DMRG)."""
        return self._impl.conserves_sz

    def __repr__(self):
        return f"MPO(n={self.n}, max_bond_dimension={self.max_bond_dimension}, conserves_sz={self.conserves_sz})"


class AutoMpo:
    """Sum of operator strings, ITensor's AutoMPO: ``ampo += (coef, "Sz", i, "Sz", j)`` (the coefficient may be
    left out: 1), any number of (operator, site) pairs on distinct sites; ``ampo.mpo()`` builds the MPO."""

    def __init__(self, sites):
        self.sites = _sites_of(sites, "AutoMpo")
        self._terms = {}  # ((site, name), ...) sorted by site -> complex coefficient, in S+ / S- / Sz / Id

    def __iadd__(self, term):
        if not isinstance(term, (tuple, list)):
            raise Error(f"AutoMpo: a term is a tuple (coef, op, site, op, site, ...), got {term!r}")
        self.add(*term)
        return self

    def add(self, *term):
        """add(coef, op1, site1, op2, site2, ...) or add(op1, site1, ...)."""
        where = f"AutoMpo term {term!r}"
        if not term:
            raise Error("AutoMpo: an empty term")
        rest = term
        coef = 1.0
        if not isinstance(term[0], str):
            c = term[0]
            if isinstance(c, bool) or not isinstance(c, _numbers.Number):
                raise Error(f"{where}: the coefficient must be a number, got {c!r}")
            coef = complex(c)
            if not (_math.isfinite(coef.real) and _math.isfinite(coef.imag)):
                raise Error(f"{where}: the coefficient must be finite, got {c}")
            rest = term[1:]
        if not rest or len(rest) % 2:
            raise Error(f"{where}: after the coefficient come (operator, site) pairs")
        ops = []
        for k in range(0, len(rest), 2):
            name = _op_name(rest[k], where)
            site = self.sites._site(rest[k + 1], where)
            ops.append((site, name))
        seen = [s for s, _ in ops]
        if len(set(seen)) != len(seen):
            raise Error(f"{where}: a site appears twice in one term; multiply the operators on a site first")
        ops.sort()
        # Expand into S+ / S- / Sz / Id strings and add to the like terms.
        strings = [(coef, ())]
        for site, name in ops:
            strings = [(c * f, s + ((site, comp),)) for c, s in strings for f, comp in _COMPONENTS[name]]
        for c, s in strings:
            key = tuple(x for x in s if x[1] != "Id") or (s[0],)
            self._terms[key] = self._terms.get(key, 0) + c
        return self

    def __len__(self):
        return len(self._terms)

    def terms(self):
        """The terms as [(coef, [(name, site), ...])] in the names S+, S-, Sz, Id (like terms added up)."""
        big = max((abs(c) for c in self._terms.values()), default=0.0)
        out = []
        for key in sorted(self._terms):
            c = self._terms[key]
            if abs(c) <= 1e-14 * big:
                continue
            if abs(c.imag) > 1e-12 * max(1.0, abs(c)):
                ops = " ".join(f"{n}({s})" for s, n in key)
                raise Error(f"AutoMpo: the operator is not real: {ops} has the coefficient {c} (an odd number of Sy "
                            f"or Y factors); only real Hamiltonians are supported")
            out.append((c.real, [(n, s) for s, n in key]))
        return out

    def mpo(self):
        terms = self.terms()
        if not terms:
            raise Error("AutoMpo: no terms; add some with ampo += (J, 'Sz', i, 'Sz', i + 1)")
        return MPO(_mps._auto_mpo(self.sites.n, terms), self.sites)


# ---------------------------------------------------------------------------------------------------- sweeps
class Sweeps:
    """The DMRG schedule: ``Sweeps(maxdim=[10, 20, 100], cutoff=1e-12, noise=[1e-6, 1e-8, 0], niter=None)``.

    Each keyword is one value for every sweep or a list with one per sweep; nsweeps defaults to the length of the
    lists (every list must have that length). niter: Davidson products per bond; None (default) iterates each
    bond to a residual tolerance instead (adaptive, at most 20 products)."""

    def __init__(self, nsweeps=None, *, maxdim, mindim=1, cutoff=1e-12, noise=0.0, niter=None):
        kw = {"maxdim": maxdim, "mindim": mindim, "cutoff": cutoff, "noise": noise, "niter": niter}
        lists = {k: v for k, v in kw.items() if isinstance(v, (list, tuple, _np.ndarray))}
        if nsweeps is None:
            if not lists:
                raise Error("Sweeps: give nsweeps or a list (e.g. maxdim=[10, 20, 100]) for the number of sweeps")
            first = next(iter(lists))
            nsweeps = len(lists[first])
            origin = f"{first} has {nsweeps}"
        else:
            nsweeps = _int("nsweeps", nsweeps, "Sweeps", lo=1)
            origin = f"nsweeps = {nsweeps}"
        if nsweeps < 1:
            raise Error("Sweeps: at least one sweep (the lists are empty)")
        for k, v in lists.items():
            if len(v) != nsweeps:
                raise Error(f"Sweeps: {k} has {len(v)} entries but there are {nsweeps} sweeps ({origin}): give one "
                            f"value or {nsweeps}")
        self.nsweeps = nsweeps

        def per_sweep(k, conv):
            v = kw[k]
            vals = list(v) if k in lists else [v] * nsweeps
            return [conv(x, f"{k}[{i}]" if k in lists else k) for i, x in enumerate(vals)]

        self.maxdim = per_sweep("maxdim", lambda x, n: _int(n, x, "Sweeps", lo=1))
        self.mindim = per_sweep("mindim", lambda x, n: _int(n, x, "Sweeps", lo=1))
        self.cutoff = per_sweep("cutoff", lambda x, n: _real(n, x, "Sweeps", lo=0.0))
        self.noise = per_sweep("noise", lambda x, n: _real(n, x, "Sweeps", lo=0.0))
        self.adaptive = niter is None
        self.niter = None if niter is None else per_sweep("niter", lambda x, n: _int(n, x, "Sweeps", lo=1))
        for i, (lo, hi) in enumerate(zip(self.mindim, self.maxdim)):
            if lo > hi:
                raise Error(f"Sweeps: mindim {lo} above maxdim {hi} in sweep {i}")

    def __len__(self):
        return self.nsweeps

    def _entries(self):
        niter = self.niter or [4] * self.nsweeps
        return list(zip(self.maxdim, self.mindim, self.cutoff, niter, self.noise))

    def __repr__(self):
        return (f"Sweeps({self.nsweeps}, maxdim={self.maxdim}, cutoff={self.cutoff}, noise={self.noise}, "
                f"niter={self.niter})")


# ---------------------------------------------------------------------------------------------------- states
class MPS:
    """A matrix product state on the C++ ``mps::QMps`` (U(1), sites with conserve_sz) or ``mps::Mps`` (dense).
    Made by product_state, random_mps, dmrg or load."""

    def __init__(self, impl, sites):
        self._impl, self.sites = impl, sites
        self.dmrg_info = None  # the run's summary when dmrg() made this state

    @property
    def n(self):
        return self._impl.n

    def __len__(self):
        return self._impl.n

    @property
    def conserve_sz(self):
        return self._impl.u1

    @property
    def bond_dimensions(self):
        return list(self._impl.bond_dimensions)

    @property
    def max_bond_dimension(self):
        return max(self.bond_dimensions, default=1)

    def __repr__(self):
        return f"MPS(n={self.n}, conserve_sz={self.conserve_sz}, max_bond_dimension={self.max_bond_dimension})"

    def tensors(self):
        """The site tensors A[l, s, r] of the dense form (numpy arrays; U(1) bond states ordered by charge)."""
        return list(self._impl.tensors())

    def expect(self, op):
        """<O_i> on every site (numpy array of n values)."""
        phase, m = _OPS[_op_name(op, "expect")]
        v = _np.asarray(self._impl.expect(_np.array(m)))
        return v if phase == 1 else _np.zeros_like(v)

    def correlation(self, op1, op2):
        """The n x n matrix C[i, j] = <O1_i O2_j> (C[i, i] = <(O1 O2)_i>)."""
        p1, a = _OPS[_op_name(op1, "correlation")]
        p2, b = _OPS[_op_name(op2, "correlation")]
        c = _np.asarray(self._impl.correlation(_np.array(a), _np.array(b)))
        phase = p1 * p2
        return c * phase.real if phase.imag == 0 else _np.zeros_like(c)

    def entropies(self):
        """von Neumann entropy of every bond b = 0 .. n-2 (between sites b and b + 1)."""
        return _np.asarray(self._impl.entropies())

    def entropy(self, b):
        """von Neumann entropy of bond b (between sites b and b + 1), b = 0 .. n-2."""
        if not _is_int(b) or not 0 <= b < self.n - 1:
            raise Error(f"entropy: bond b must be an integer in 0..{self.n - 2} (between sites b and b + 1), got {b!r}")
        return float(self.entropies()[int(b)])

    def save(self, path):
        """Writes the state (the MPS file of ``attnphys dmrg --save``: kind "mps", site_<i> datasets) atomically:
        to a temporary file renamed into place."""
        if not isinstance(path, (str, _os.PathLike)):
            raise Error(f"save: path must be a string or os.PathLike, got {path!r}")
        self._impl.save(_os.fspath(path))

    def to_ansatz(self, *, marshall_sign=False):
        """The state as a VMC ansatz (``spin.Ansatz`` holding exactly its amplitudes, as spin.Mps.from_file): for
        ``spin.MCState(sampler, psi.to_ansatz())``."""
        if not isinstance(marshall_sign, bool):
            raise Error(f"to_ansatz: marshall_sign must be True or False, got {marshall_sign!r}")
        return self._impl.to_ansatz(marshall_sign)

    def copy(self):
        return MPS(self._impl, self.sites)  # states are never changed in place: sharing is safe


_STATE_NAMES = {"up": 0, "dn": 1, "down": 1}


def product_state(sites, state):
    """A product state: "Neel" (Up, Dn, Up, ...), "Up" / "Dn" on every site, or a list of n "Up" / "Dn"."""
    sites = _sites_of(sites, "product_state")
    if isinstance(state, str):
        key = state.lower()
        if key == "neel":
            states = [i % 2 for i in range(sites.n)]
        elif key in _STATE_NAMES:
            states = [_STATE_NAMES[key]] * sites.n
        else:
            raise Error(f"product_state: unknown state '{state}': use 'Neel', 'Up', 'Dn' or a list of 'Up' / 'Dn'")
    elif isinstance(state, (list, tuple)):
        if len(state) != sites.n:
            raise Error(f"product_state: state has {len(state)} entries for {sites.n} sites")
        states = []
        for i, s in enumerate(state):
            if not isinstance(s, str) or s.lower() not in _STATE_NAMES:
                raise Error(f"product_state: state[{i}] = {s!r}: use 'Up' or 'Dn'")
            states.append(_STATE_NAMES[s.lower()])
    else:
        raise Error(f"product_state: state must be 'Neel', 'Up', 'Dn' or a list of 'Up' / 'Dn', got {state!r}")
    return MPS(_mps._product_state(states, sites.conserve_sz), sites)


def random_mps(sites, chi, *, seed=1, total_sz=None):
    """A random normalised state of bond dimension at most chi, deterministic in seed; with conserve_sz sites in the
    sector total_sz (default 0, or 1/2 for odd n)."""
    sites = _sites_of(sites, "random_mps")
    chi = _int("chi", chi, "random_mps", lo=1)
    seed = _int("seed", seed, "random_mps", lo=0)
    if total_sz is None:
        two_sz = sites.n % 2
    else:
        t = _real("total_sz", total_sz, "random_mps")
        two_sz = round(2 * t)
        if abs(2 * t - two_sz) > 1e-12 or abs(two_sz) > sites.n or (two_sz + sites.n) % 2:
            raise Error(f"random_mps: total_sz = {total_sz} is impossible for {sites.n} spins 1/2")
        if not sites.conserve_sz:
            raise Error("random_mps: total_sz needs sites with conserve_sz=True")
    return MPS(_mps._random_state(sites.n, chi, seed, sites.conserve_sz, two_sz), sites)


def load(path, *, conserve_sz=None):
    """Reads a state written by MPS.save, ``attnphys dmrg --save`` or ``mps.dmrg(..., save=)``. conserve_sz: None
    (default) U(1) when every bond state carries a definite Sz (a U(1) run's file, or a dense run from a product
    state), True (refused otherwise), False (dense)."""
    if not isinstance(path, (str, _os.PathLike)):
        raise Error(f"load: path must be a string or os.PathLike, got {path!r}")
    if conserve_sz is not None and not isinstance(conserve_sz, bool):
        raise Error(f"load: conserve_sz must be None, True or False, got {conserve_sz!r}")
    mode = -1 if conserve_sz is None else int(conserve_sz)
    impl = _mps._load_state(_os.fspath(path), mode)
    return MPS(impl, SpinHalf(impl.n, conserve_sz=impl.u1))


def energy(H, psi):
    """<psi|H|psi> / <psi|psi>."""
    _check_pair(H, psi, "energy")
    return psi._impl.energy(H._impl)


def variance(H, psi):
    """<H^2> - <H>^2."""
    _check_pair(H, psi, "variance")
    return psi._impl.variance(H._impl)


def _check_pair(H, psi, where):
    if not isinstance(H, MPO):
        raise Error(f"{where}: H must be an mps.MPO (AutoMpo(sites).mpo()), got {type(H).__name__}")
    if not isinstance(psi, MPS):
        raise Error(f"{where}: psi must be an mps.MPS, got {type(psi).__name__}")
    if H.n != psi.n:
        raise Error(f"{where}: H has {H.n} sites, psi {psi.n}")


_DMRG_OPTIONS = ("energy_tol", "entropy_tol", "min_sweeps", "davidson_tol", "davidson_max_iter")


def _dmrg_mpo(H, psi0, sweeps, *, observer=None, **options):
    _check_pair(H, psi0, "dmrg")
    if not isinstance(sweeps, Sweeps):
        raise Error(f"dmrg: sweeps must be mps.Sweeps(maxdim=[...], ...), got {type(sweeps).__name__}")
    if observer is not None and not callable(observer):
        raise Error(f"dmrg: observer must be callable (it gets a dict per sweep), got {observer!r}")
    opts = {}
    for k, v in options.items():
        if k not in _DMRG_OPTIONS:
            raise Error(f"dmrg: unknown keyword '{k}' (observer, {', '.join(_DMRG_OPTIONS)})")
        if v is not None:
            opts[k] = _real(k, v, "dmrg", lo=0.0)
    text, impl = _mps._dmrg(H._impl, psi0._impl, sweeps._entries(), sweeps.adaptive, opts, observer)
    psi = MPS(impl, psi0.sites)
    psi.dmrg_info = _json.loads(text)
    return psi.dmrg_info["energy"], psi


def dmrg(*args, **kwargs):
    """Two forms.

    ``energy, psi = dmrg(H, psi0, sweeps, observer=None, energy_tol=, entropy_tol=, min_sweeps=, davidson_tol=)``:
    ITensor's; the U(1) block-sparse DMRG when psi0 conserves Sz (its sites have conserve_sz=True; H must then
    conserve Sz too), dense otherwise; psi0 is not changed. The run stops early once the energy and entropies
    have converged (energy_tol=0 runs every sweep). observer(info) sees a dict per sweep (sweep, energy,
    truncation_error, max_bond_dimension, max_entropy_change, seconds, davidson_products); returning False stops.
    The run's summary (converged, convergence_reason, sweeps, ...) is ``psi.dmrg_info``.

    ``dmrg(model=..., n=..., chi=..., ...)``: the job of ``attnphys dmrg`` (C++ ``mps::run_dmrg``), returning the
    dict of its ``to_json``."""
    if (args and isinstance(args[0], MPO)) or isinstance(kwargs.get("H"), MPO):
        return _dmrg_mpo(*args, **kwargs)
    return _json.loads(_mps._dmrg_job(*args, **kwargs))


__all__ = ["dmrg", "SpinHalf", "AutoMpo", "MPO", "MPS", "Sweeps", "product_state", "random_mps", "load", "energy",
           "variance", "Error"]
