"""VMC in NetKet's shape, on the C++ objects (re-exported by attnphys.spin).

    from attnphys import spin
    hi = spin.Spin(8, total_sz=0)                       # total_sz=None: every sector
    H = spin.Heisenberg(hi, J=1.0, bc="periodic")
    sampler = spin.MetropolisExchange(hi, n_chains=32)
    vs = spin.MCState(sampler, spin.Rbm(alpha=1), n_samples=512, seed=1)
    driver = spin.VMC(H, spin.Sgd(0.05), variational_state=vs, preconditioner=spin.SR(diag_shift=0.01))
    driver.run(100, out="vmc.csv", callback=lambda step, info: info["error"] > 1e-5)
    vs.expect(H)                                          # Stats: mean, error_of_mean, variance, tau_corr, R_hat
    vs.expect(spin.SpinCorrelation(hi, 0, 4))
    vs.save("state.h5"); vs2 = spin.MCState.load("state.h5")

Every object only collects typed keywords. _translate() turns them into the dotted keys of `attnphys vmc`
(configs/vmc_*.toml) and the C++ VmcRunConfig applies them with its own defaults, so a keyword left out means "the
C++ default" (spin.Rbm.defaults() lists them), and the model-dependent defaults (Marshall sign for
antiferromagnetic chains, the transformer's boundary condition, the diagonal-shift schedule over two thirds of the
first run) are the CLI's. An unknown keyword raises attnphys.OptionError (an attnphys.Error and a TypeError) that
names the valid ones.

The model's parameters are created when the state first meets a Hamiltonian (spin.VMC(...) or vs.expect(H)):
some defaults of the ansatz depend on the chain (Marshall sign, boundary condition).
"""
import json as _json
import math as _math
import os as _os

from . import _core

_sp = _core.spin
Error = _core.Error


class OptionError(Error, TypeError):
    """An unknown or mistyped keyword of a spin API object (the message names the valid ones)."""


# {dotted key: C++ default} for every option of `attnphys vmc` (VmcRunConfig::declare), and what the declarations
# say about each ({help, type, choices}): the keywords are typed and checked from the same declarations as the CLI.
_DEFAULTS = _json.loads(_sp._vmc_option_defaults())
_INFO = _json.loads(_sp._vmc_option_info())


def _check_value(owner, key, name, value):
    default = _DEFAULTS.get(key)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "a bool"
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        want = "a number"
        if ok and not _math.isfinite(value):
            raise Error(f"{owner}: {name} = {value} is not finite")
    elif isinstance(default, str):
        ok = isinstance(value, str)
        want = "a string"
    else:
        ok, want = True, ""
    if not ok:
        raise OptionError(f"{owner}: {name} must be {want}, got {value!r} ({type(value).__name__})")
    choices = _INFO.get(key, {}).get("choices")
    if choices and value not in choices:
        raise OptionError(f"{owner}: {name} = {value!r}: expected one of {', '.join(choices)}")


class _Keywords:
    """Typed keywords mapped onto one section of the C++ options."""

    _section = None  # C++ section: its keys (less _exclude) are this object's keywords
    _exclude = ()
    _own_values = ()  # keywords whose values this class checks and translates itself
    _extra = {}  # keyword -> dotted key, beyond the section

    @classmethod
    def keywords(cls):
        """{keyword: dotted C++ key} that this class accepts."""
        out = {}
        if cls._section:
            pre = cls._section + "."
            for k in _DEFAULTS:
                if k.startswith(pre) and k[len(pre):] not in cls._exclude:
                    out[k[len(pre):]] = k
        out.update(cls._extra)
        return out

    @classmethod
    def defaults(cls):
        """The C++ defaults of this class's keywords (before the model-dependent ones)."""
        return {k: _DEFAULTS.get(key) for k, key in cls.keywords().items()}

    def _take(self, kwargs):
        valid = self.keywords()
        name = type(self).__name__
        for k, v in kwargs.items():
            if k not in valid:
                raise OptionError(f"spin.{name}: unknown keyword '{k}'; valid keywords: {', '.join(sorted(valid))}")
            if v is not None and k not in self._own_values:
                _check_value(f"spin.{name}", valid[k], k, v)
        self._kw = {k: v for k, v in kwargs.items() if v is not None}

    def _options(self):
        valid = self.keywords()
        return {valid[k]: v for k, v in self._kw.items()}

    def _spec(self):
        return {"type": type(self).__name__, "kwargs": dict(self._kw)}

    def __getattr__(self, name):
        kw = self.__dict__.get("_kw")
        if kw is not None and name in kw:
            return kw[name]
        if name in type(self).keywords():
            return None  # left to the C++ default
        raise AttributeError(name)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._kw.items())
        return f"spin.{type(self).__name__}({args})"


# ---------------------------------------------------------------------------------------------------- Hilbert space
class Spin:
    """n spins 1/2; total_sz: the sector Σ S^z = total_sz (None: every sector). Spins are ±1, +1 up."""

    def __init__(self, n, total_sz=None):
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise Error(f"spin.Spin: n must be an integer >= 2, got {n!r}")
        self.n = n
        self.total_sz = total_sz
        if total_sz is not None:
            two = 2 * total_sz
            if isinstance(total_sz, bool) or not isinstance(total_sz, (int, float)) or two != int(two):
                raise Error(f"spin.Spin: total_sz must be a multiple of 1/2 or None, got {total_sz!r}")
            two = int(two)
            if abs(two) > n or (n + two) % 2:
                raise Error(f"spin.Spin: total_sz = {total_sz} is impossible for {n} spins 1/2 (2 total_sz must have "
                            f"the parity of n and |2 total_sz| <= n); use total_sz = {0 if n % 2 == 0 else 0.5} or None")
            self.two_sz = two
        else:
            self.two_sz = None

    @property
    def size(self):
        return self.n

    @property
    def constrained(self):
        return self.total_sz is not None

    def _options(self):
        return {"model.n": self.n, "sampler.fixed_sz": self.total_sz is not None,
                "sampler.two_sz": self.two_sz if self.two_sz is not None else 0}

    def _spec(self):
        return {"n": self.n, "total_sz": self.total_sz}

    def __eq__(self, other):
        return isinstance(other, Spin) and (self.n, self.two_sz) == (other.n, other.two_sz)

    def __hash__(self):
        return hash((self.n, self.two_sz))

    def __repr__(self):
        return f"spin.Spin({self.n}, total_sz={self.total_sz!r})"


def _check_hilbert(owner, hilbert):
    if not isinstance(hilbert, Spin):
        raise Error(f"{owner}: the first argument must be a spin.Spin Hilbert space, got {type(hilbert).__name__}")


# ---------------------------------------------------------------------------------------------------- operators
class _Chain(_Keywords):
    _section = "model"
    _model = None
    _allowed = ()

    @classmethod
    def keywords(cls):
        return {k: "model." + k for k in cls._allowed}

    def __init__(self, hilbert, **kwargs):
        _check_hilbert(f"spin.{type(self).__name__}", hilbert)
        self.hilbert = hilbert
        self._take(kwargs)
        conserves = _sp._chain_model({"model.model": self._model, "model.n": hilbert.n}).conserves_sz
        if hilbert.constrained and not conserves:
            raise Error(f"spin.{type(self).__name__} does not conserve S^z, but its Hilbert space is the sector "
                        f"total_sz = {hilbert.total_sz}: use spin.Spin({hilbert.n}, total_sz=None)")
        self.chain_model()  # validates the values in C++

    def _options(self):
        out = {"model.model": self._model, "model.n": self.hilbert.n}
        out.update(super()._options())
        return out

    def chain_model(self):
        """The spin.ChainModel (for spin.exact_ground_state, spin.reference_energy, ...)."""
        return _sp._chain_model(self._options())

    def _spec(self):
        d = super()._spec()
        d["hilbert"] = self.hilbert._spec()
        return d

    def __repr__(self):
        return f"spin.{type(self).__name__}({self.hilbert!r}{''.join(f', {k}={v!r}' for k, v in self._kw.items())})"


class Heisenberg(_Chain):
    """H = J Σ S_i·S_{i+1} (bc: open | periodic)."""
    _model = "heisenberg"
    _allowed = ("J", "bc")

    def __init__(self, hilbert, *, J=None, bc=None):
        super().__init__(hilbert, J=J, bc=bc)


class Ising(_Chain):
    """Transverse-field Ising chain H = -J Σ Z_i Z_{i+1} - h Σ X_i (Pauli matrices)."""
    _model = "tfim"
    _allowed = ("h", "J", "bc")

    def __init__(self, hilbert, *, h=None, J=None, bc=None):
        super().__init__(hilbert, h=h, J=J, bc=bc)


class XXZ(_Chain):
    """H = J Σ (Sx Sx + Sy Sy + delta Sz Sz)."""
    _model = "xxz"
    _allowed = ("delta", "J", "bc")

    def __init__(self, hilbert, *, delta=None, J=None, bc=None):
        super().__init__(hilbert, delta=delta, J=J, bc=bc)


class J1J2(_Chain):
    """H = J Σ S_i·S_{i+1} + j2 Σ S_i·S_{i+2} (J is J1)."""
    _model = "j1j2"
    _allowed = ("j2", "J", "bc")

    def __init__(self, hilbert, *, j2=None, J=None, bc=None):
        super().__init__(hilbert, j2=j2, J=J, bc=bc)


_COMPONENTS = ("full", "zz")


class SpinCorrelation:
    """S_i·S_j (component='zz': S^z_i S^z_j) for vs.expect."""

    def __init__(self, hilbert, i, j, *, component="full"):
        _check_hilbert("spin.SpinCorrelation", hilbert)
        for s in (i, j):
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < hilbert.n:
                raise Error(f"spin.SpinCorrelation: sites must be integers in 0 .. {hilbert.n - 1}, got {s!r}")
        if component not in _COMPONENTS:
            raise OptionError(f"spin.SpinCorrelation: component must be one of {_COMPONENTS}, got {component!r}")
        self.hilbert, self.i, self.j, self.component = hilbert, i, j, component

    def _terms(self):
        return [self.i], [self.j], [1.0]

    def __repr__(self):
        return f"spin.SpinCorrelation({self.hilbert!r}, {self.i}, {self.j}, component={self.component!r})"


class StructureFactor:
    """S(q) = (1/N) Σ_ij e^{iq(i-j)} S_i·S_j (component='zz': S^z_i S^z_j); q in radians (π: the Néel peak)."""

    def __init__(self, hilbert, q, *, component="full"):
        _check_hilbert("spin.StructureFactor", hilbert)
        if component not in _COMPONENTS:
            raise OptionError(f"spin.StructureFactor: component must be one of {_COMPONENTS}, got {component!r}")
        self.hilbert, self.q, self.component = hilbert, float(q), component

    def _terms(self):
        n = self.hilbert.n
        i, j, w = [], [], []
        for a in range(n):
            for b in range(a, n):
                i.append(a)
                j.append(b)
                w.append((1.0 if a == b else 2.0 * _math.cos(self.q * (a - b))) / n)
        return i, j, w

    def __repr__(self):
        return f"spin.StructureFactor({self.hilbert!r}, q={self.q!r}, component={self.component!r})"


# ---------------------------------------------------------------------------------------------------- samplers
class _Sampler(_Keywords):
    _section = "sampler"
    _exclude = ("move", "n_samples", "seed", "fixed_sz", "two_sz", "periodic")
    _move = None

    def __init__(self, hilbert, **kwargs):
        _check_hilbert(f"spin.{type(self).__name__}", hilbert)
        self.hilbert = hilbert
        self._take(kwargs)

    def _options(self):
        out = {"sampler.move": self._move}
        out.update(super()._options())
        return out

    def _spec(self):
        d = super()._spec()
        d["hilbert"] = self.hilbert._spec()
        return d

    def __repr__(self):
        return f"spin.{type(self).__name__}({self.hilbert!r}{''.join(f', {k}={v!r}' for k, v in self._kw.items())})"


class MetropolisExchange(_Sampler):
    """Metropolis exchange of antiparallel pairs (keeps S^z). Keywords: spin.MetropolisExchange.keywords()."""
    _move = "exchange"

    def __init__(self, hilbert, **kwargs):
        super().__init__(hilbert, **kwargs)


class MetropolisLocal(_Sampler):
    """Metropolis single spin flips (every sector: use spin.Spin(n, total_sz=None))."""
    _move = "local"

    def __init__(self, hilbert, **kwargs):
        super().__init__(hilbert, **kwargs)


class ExactSampler(_Sampler):
    """Independent exact draws from |ψ|² (models that sample themselves: spin.Autoregressive)."""
    _move = "exact"
    _section = None

    def __init__(self, hilbert):
        super().__init__(hilbert)


# ---------------------------------------------------------------------------------------------------- models
class _Model(_Keywords):
    _kind = None
    _legacy = None  # the C++ class spin.<Name>(n, ...) built before this API

    def __new__(cls, *args, **kwargs):
        # spin.Rbm(n, alpha=...) with the chain length first: the C++ ansatz itself, as before this API.
        if args or "n" in kwargs:
            return cls._legacy(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, **kwargs):
        self._take(kwargs)

    def _options(self):
        out = {"ansatz.kind": self._kind}
        out.update(super()._options())
        return out


class Transformer(_Model):
    """The relative-position (factored-attention) transformer; keywords as in [transformer] (spin.Transformer.keywords()).
    spin.Transformer(n, periodic=..., options={...}) with the chain length first builds the C++ ansatz directly."""
    _section, _kind, _legacy = "transformer", "transformer", _sp.Transformer


class Rbm(_Model):
    """Restricted Boltzmann machine (alpha hidden units per site). spin.Rbm(n, ...) builds the C++ ansatz directly."""
    _section, _kind, _legacy = "rbm", "rbm", _sp.Rbm


class Mps(_Model):
    """Matrix product state of bond dimension chi (periodic: the chain's, unless given). spin.Mps(n, ...) as before."""
    _section, _kind, _legacy = "mps", "mps", _sp.Mps
    from_file = staticmethod(_sp.Mps.from_file)


class Autoregressive(_Model):
    """Autoregressive transformer, sampled exactly (its sector follows the Hilbert space unless fixed_sz is given).
    spin.Autoregressive(n, ...) builds the C++ ansatz directly."""
    _section, _kind, _legacy = "autoregressive", "autoregressive", _sp.Autoregressive


_MODELS = {c.__name__: c for c in (Transformer, Rbm, Mps, Autoregressive)}
_SAMPLERS = {c.__name__: c for c in (MetropolisExchange, MetropolisLocal, ExactSampler)}
_CHAINS = {c.__name__: c for c in (Heisenberg, Ising, XXZ, J1J2)}


# ---------------------------------------------------------------------------------------------------- optimisers
class Sgd(_Keywords):
    """Plain steps θ -= learning_rate · δ; with preconditioner=spin.SR the SR step (the only form the C++ has)."""
    _extra = {"learning_rate": "vmc.lr"}

    def __init__(self, learning_rate=None):
        self._take({"learning_rate": learning_rate})


class Adam(_Keywords):
    """Adam on the energy gradient (no preconditioner)."""
    _extra = {"learning_rate": "vmc.lr"}

    def __init__(self, learning_rate=None):
        self._take({"learning_rate": learning_rate})

    def _options(self):
        out = {"vmc.optimizer": "adam"}
        out.update(super()._options())
        return out


_SR_SOLVERS = {"auto": "sr", "pxp": "pxp", "minsr": "minsr"}


class SR(_Keywords):
    """Stochastic reconfiguration: diag_shift decays geometrically to diag_shift_final over diag_shift_steps
    iterations (default: two thirds of the first run); solver: auto (P×P or minSR, the smaller), pxp or minsr;
    precision: mixed (default: a single-precision Gram matrix and Cholesky factor precondition conjugate gradients on
    the double system, solved to a 1e-10 relative residual) or double. guard_sigmas (default 0: off) turns on the
    step guard from iteration guard_start (default 100) on: an energy that is not finite, lies more than guard_sigmas
    standard errors above the run's lowest or has 100 times its variance rejects the step, restores the parameters of
    that lowest energy and multiplies the diagonal shift by 10 for the rest of the run (the step dicts say
    `rejected`); if the very next estimate of those parameters fails again, it becomes the run's lowest and the run
    goes on (a warning says so); that rejection was a false alarm and does not count toward the six after which the
    guard gives up (the raised shift stays). A run with a convergence window does not stop within a window of a
    rejection."""
    _extra = {"diag_shift": "vmc.diag_shift", "diag_shift_final": "vmc.diag_shift_final",
              "diag_shift_steps": "vmc.diag_shift_steps", "rcond": "vmc.rcond", "solver": "vmc.optimizer",
              "precision": "vmc.sr_precision", "guard_sigmas": "vmc.guard_sigmas", "guard_start": "vmc.guard_start"}
    _own_values = ("solver",)  # auto | pxp | minsr, translated to vmc.optimizer below

    def __init__(self, diag_shift=None, *, diag_shift_final=None, diag_shift_steps=None, rcond=None, solver=None,
                 precision=None, guard_sigmas=None, guard_start=None):
        if solver is not None and solver not in _SR_SOLVERS:
            raise OptionError(f"spin.SR: solver must be one of {tuple(_SR_SOLVERS)}, got {solver!r}")
        self._take({"diag_shift": diag_shift, "diag_shift_final": diag_shift_final,
                    "diag_shift_steps": diag_shift_steps, "rcond": rcond, "solver": solver,
                    "precision": precision, "guard_sigmas": guard_sigmas, "guard_start": guard_start})

    def _options(self):
        out = super()._options()
        if "vmc.optimizer" in out:
            out["vmc.optimizer"] = _SR_SOLVERS[out["vmc.optimizer"]]
        return out


class Convergence(_Keywords):
    """Train to a plateau instead of a fixed number of iterations: VMC.run(n_iter, converge=spin.Convergence(100))
    stops at the first iteration where, over its last two windows of `window` iterations, the mean energy fell by at
    most `sigmas` standard errors and the median variance by less than the fraction `variance_drop` (checked from the
    end of SR's diagonal-shift decay on, and not within a window of a step-guard rejection); n_iter is then the
    maximum. two_sided=True also refuses a rise of either beyond the same bounds (the default counts a rise as flat,
    so a run may stop during an excursion). The study of the README uses window=100, one-sided. VMC.converged says
    whether the last run stopped there; the trace behind it travels with checkpoints, so a resumed run continues it."""
    _extra = {"window": "vmc.converge_window", "sigmas": "vmc.converge_sigmas",
              "variance_drop": "vmc.converge_variance_drop", "two_sided": "vmc.converge_two_sided"}

    def __init__(self, window, *, sigmas=None, variance_drop=None, two_sided=None):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise OptionError(f"spin.Convergence: window must be an integer >= 1 (iterations), got {window!r}")
        self._take({"window": window, "sigmas": sigmas, "variance_drop": variance_drop, "two_sided": two_sided})


# ---------------------------------------------------------------------------------------------------- translation
def _translate(hamiltonian, sampler, model, state, optimizer=None, preconditioner=None):
    """The one place that turns the API's objects into the dotted keys of `attnphys vmc`."""
    hi = sampler.hilbert
    if hamiltonian is not None and hamiltonian.hilbert != hi:
        raise Error(f"the Hamiltonian acts on {hamiltonian.hilbert!r}, the sampler on {hi!r}: build both on the "
                    f"same spin.Spin")
    if optimizer is not None and not isinstance(optimizer, (Sgd, Adam)):
        raise Error(f"optimizer must be spin.Sgd(...) or spin.Adam(...), got {type(optimizer).__name__}")
    if preconditioner is not None and not isinstance(preconditioner, SR):
        raise Error(f"preconditioner must be spin.SR(...) or None, got {type(preconditioner).__name__}")
    if isinstance(optimizer, Adam) and preconditioner is not None:
        raise Error("spin.Adam takes the plain energy gradient: use preconditioner=None, or spin.Sgd with spin.SR")
    if isinstance(optimizer, Sgd) and preconditioner is None:
        raise Error("spin.Sgd without a preconditioner (plain gradient descent) is not available in the C++ driver: "
                    "use preconditioner=spin.SR(...), or spin.Adam(...)")
    out = {}
    out.update(hi._options())
    if hamiltonian is not None:
        out.update(hamiltonian._options())
    out.update(sampler._options())
    if isinstance(model, _Model):
        out.update(model._options())
    else:  # a C++ ansatz built already: its kind only picks which ansatz defaults C++ validates (the RBM has none)
        out["ansatz.kind"] = "rbm"
    out.update(state)
    if optimizer is not None:
        out.update(optimizer._options())
    if preconditioner is not None:
        out.update(preconditioner._options())
    return out


class Stats:
    """An estimate: mean, error_of_mean (autocorrelation-aware), variance, tau_corr, R_hat, n samples; imag: the
    mean imaginary part of the local values (≈ 0 for a Hermitian operator)."""

    def __init__(self, d):
        self.mean = d["mean"]
        self.error_of_mean = d["error"]
        self.variance = d["variance"]
        self.tau_corr = d["tau"]
        self.R_hat = d["r_hat"]
        self.n = d["n"]
        self.imag = d["imag"]

    @property
    def error(self):
        return self.error_of_mean

    def to_dict(self):
        return {"mean": self.mean, "error_of_mean": self.error_of_mean, "variance": self.variance,
                "tau_corr": self.tau_corr, "R_hat": self.R_hat, "n": self.n}

    def __float__(self):
        return float(self.mean)

    def __repr__(self):
        return (f"{self.mean:.8g} ± {self.error_of_mean:.2g} [σ²={self.variance:.3g}, τ={self.tau_corr:.2f}, "
                f"R̂={self.R_hat:.4f}, n={self.n}]")


class MCState:
    """A variational state sampled by Monte Carlo: MCState(sampler, model, n_samples=..., seed=...).

    model: spin.Transformer(...), spin.Rbm(...), spin.Mps(...), spin.Autoregressive(...), or a C++ ansatz already
    built for n sites (spin.Rbm(n, ...)). seed seeds the model's parameters and, unless sampler_seed is given, the
    sampler. Parameters exist once the state has met a Hamiltonian (spin.VMC or vs.expect(H))."""

    def __init__(self, sampler, model, *, n_samples=None, seed=None, sampler_seed=None, chunk_size=None):
        if not isinstance(sampler, _Sampler):
            raise Error(f"MCState: sampler must be spin.MetropolisExchange, MetropolisLocal or ExactSampler, got "
                        f"{type(sampler).__name__}")
        if not isinstance(model, (_Model, _sp.Ansatz)):
            raise Error(f"MCState: model must be spin.Transformer, Rbm, Mps or Autoregressive, got "
                        f"{type(model).__name__}")
        self.sampler, self.model, self.hilbert = sampler, model, sampler.hilbert
        if isinstance(model, _sp.Ansatz) and model.n_sites != self.hilbert.n:
            raise Error(f"MCState: the model has {model.n_sites} sites, the sampler's Hilbert space {self.hilbert.n}")
        state = {}
        for name, key, v in (("n_samples", "sampler.n_samples", n_samples), ("chunk_size", "vmc.chunk_size", chunk_size),
                             ("seed", "sampler.seed", sampler_seed if sampler_seed is not None else seed),
                             ("sampler_seed", "sampler.seed", sampler_seed)):
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int):
                    raise OptionError(f"MCState: {name} must be an integer, got {v!r}")
                state[key] = v
        if seed is not None and isinstance(model, _Model):
            own = model._kw.get("seed")
            if own is not None and own != seed:
                raise Error(f"MCState: seed = {seed} but the model has seed = {own}: give one of them")
            state[model._section + ".seed"] = seed
        self._state_kw = {"n_samples": n_samples, "seed": seed, "sampler_seed": sampler_seed, "chunk_size": chunk_size}
        self._state_options = state
        self._impl = None
        self._hamiltonian = None

    # -- the C++ state
    def _bind(self, hamiltonian, optimizer=None, preconditioner=None, extra=None):
        opts = _translate(hamiltonian, self.sampler, self.model, self._state_options, optimizer, preconditioner)
        if extra:
            opts.update(extra)
        if self._impl is None:
            prebuilt = self.model if isinstance(self.model, _sp.Ansatz) else None
            self._impl = _sp._VmcState(opts, prebuilt)
        elif dict(self._impl.options) != opts:
            self._impl.configure(opts)
        self._hamiltonian = hamiltonian

    def _need(self):
        if self._impl is None:
            raise Error("MCState has no parameters yet: the ansatz's defaults follow the Hamiltonian (Marshall sign, "
                        "boundary condition). Create spin.VMC(H, ..., variational_state=vs) or call vs.expect(H) first")
        return self._impl

    @property
    def initialized(self):
        return self._impl is not None

    @property
    def ansatz(self):
        """The C++ spin.Ansatz (log_psi, gradients, parameter_blocks)."""
        return self._need().ansatz

    @property
    def parameters(self):
        """The flat parameter vector (a copy); assigning checks its length and that every value is finite."""
        return self._need().get_parameters()

    @parameters.setter
    def parameters(self, values):
        self._need().set_parameters(values)

    @property
    def n_parameters(self):
        return self._need().ansatz.n_parameters

    @property
    def n_samples(self):
        """Samples per iteration and per estimate (rounded up to a multiple of n_chains, as the C++ does)."""
        return self._need().n_samples

    @property
    def iteration(self):
        """Optimisation steps this state has had."""
        return self._need().iteration

    def log_value(self, sigma):
        """Complex log ψ of a [B, N] array of ±1."""
        return self._need().ansatz.log_psi(sigma)

    def sample(self, n_samples=None, *, seed=0):
        """[n_samples, N] new samples of |ψ|² (±1), drawn as vs.expect draws them."""
        return self._need().sample(0 if n_samples is None else int(n_samples), seed)

    def to_toml(self):
        """The `attnphys vmc --config` file of this state's configuration (every key resolved)."""
        return self._need().to_toml()

    def expect(self, operator, *, n_samples=None, seed=0):
        """Stats of ⟨operator⟩ from new samples (n_samples, default the state's). A pure function of the state and
        seed: the same state gives the same estimate; another seed draws other samples."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise OptionError(f"MCState.expect: seed must be an integer >= 0, got {seed!r}")
        n = 0 if n_samples is None else int(n_samples)
        if isinstance(operator, _Chain):
            if operator.hilbert.n != self.hilbert.n:
                raise Error(f"MCState.expect: the operator acts on {operator.hilbert.n} sites, the state on "
                            f"{self.hilbert.n}")
            if self._impl is None:
                self._bind(operator)
            return Stats(self._impl.expect_chain(operator._options(), n, seed))
        if isinstance(operator, (SpinCorrelation, StructureFactor)):
            if operator.hilbert.n != self.hilbert.n:
                raise Error(f"MCState.expect: the operator acts on {operator.hilbert.n} sites, the state on "
                            f"{self.hilbert.n}")
            i, j, w = operator._terms()
            return Stats(self._need().expect_pairs(i, j, w, operator.component == "zz", n, seed))
        raise Error(f"MCState.expect: no expectation for {type(operator).__name__}; use spin.Heisenberg/Ising/XXZ/"
                    f"J1J2, spin.SpinCorrelation or spin.StructureFactor")

    # -- checkpoints
    def _spec(self):
        if isinstance(self.model, _sp.Ansatz):
            model = None
        else:
            model = self.model._spec()
        return {"format": 1, "hilbert": self.hilbert._spec(), "sampler": self.sampler._spec(), "model": model,
                "state": self._state_kw, "options": {k: v for k, v in self._need().options.items()},
                "hamiltonian": self._hamiltonian._spec() if self._hamiltonian is not None else None}

    def save(self, path):
        """The VMC checkpoint (parameters, optimiser moments, chains, counters, iteration: `attnphys vmc --set
        run.resume=path` continues it when its config matches) plus this state's description."""
        self._need().save(_os.fspath(path), _json.dumps(self._spec()))

    def restore(self, path):
        """Parameters, chains, counters and iteration from a VMC checkpoint of the same model and sampler (one
        written by vs.save, `attnphys vmc` or spin.Vmc) into this state."""
        self._need().load(_os.fspath(path))

    @classmethod
    def load(cls, path, *, model=None):
        """The state saved by vs.save(path), continuing exactly where it was. model: a C++ ansatz of the same
        architecture when the state was built from one (spin.Rbm(n, ...))."""
        path = _os.fspath(path)
        spec = _json.loads(_sp._read_api_spec(path))
        hi = Spin(spec["hilbert"]["n"], spec["hilbert"]["total_sz"])
        s = spec["sampler"]
        sampler = _SAMPLERS[s["type"]](hi, **s["kwargs"])
        if spec["model"] is None:
            if model is None:
                raise Error(f"{path} holds a state built from a C++ ansatz: pass model=spin.<Model>(n, ...) of the same "
                            f"architecture to MCState.load")
        else:
            model = _MODELS[spec["model"]["type"]](**spec["model"]["kwargs"])
        vs = cls(sampler, model, **spec["state"])
        h = spec["hamiltonian"]
        if h is not None:
            vs._hamiltonian = _CHAINS[h["type"]](Spin(h["hilbert"]["n"], h["hilbert"]["total_sz"]), **h["kwargs"])
        prebuilt = model if isinstance(model, _sp.Ansatz) else None
        vs._impl = _sp._VmcState(spec["options"], prebuilt)
        vs._impl.load(path)
        return vs

    def __repr__(self):
        return f"spin.MCState({self.sampler!r}, {self.model!r}, n_samples={self._state_kw['n_samples']!r})"


# ---------------------------------------------------------------------------------------------------- driver
class RuntimeLog:
    """An in-memory logger for VMC.run(out=...): log.data[column] is the list of that column's values."""

    def __init__(self):
        self.data = {}

    def __call__(self, step, info):
        for k, v in info.items():
            self.data.setdefault(k, []).append(v)

    def __getitem__(self, key):
        return self.data[key]


class VMC:
    """VMC(H, optimizer, variational_state=vs, preconditioner=spin.SR(...)); driver.run(n_iter, out=..., callback=...)."""

    def __init__(self, hamiltonian, optimizer=None, *, variational_state, preconditioner=None):
        if not isinstance(hamiltonian, _Chain):
            raise Error(f"spin.VMC: the Hamiltonian must be spin.Heisenberg, Ising, XXZ or J1J2, got "
                        f"{type(hamiltonian).__name__}")
        if not isinstance(variational_state, MCState):
            raise Error(f"spin.VMC: variational_state must be a spin.MCState, got {type(variational_state).__name__}")
        self.hamiltonian, self.optimizer, self.preconditioner = hamiltonian, optimizer, preconditioner
        self.state = variational_state
        _translate(hamiltonian, variational_state.sampler, variational_state.model, variational_state._state_options,
                   optimizer, preconditioner)  # refuse bad combinations now
        self._schedule = None  # vmc.n_iter of the first run (the C++ diagonal-shift default follows it)
        self.step_count = 0

    def run(self, n_iter, out=None, callback=None, converge=None):
        """n_iter iterations. out: a path (CSV log, the CLI's columns), a spin.RuntimeLog or any callable
        out(step, info); callback(step, info) returning False stops the run; converge: a spin.Convergence, which stops
        the run at its plateau (n_iter is then the maximum; VMC.converged says whether it stopped there). Returns the
        list of info dicts."""
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 0:
            raise OptionError(f"VMC.run: n_iter must be an integer >= 0, got {n_iter!r}")
        if converge is not None and not isinstance(converge, Convergence):
            raise Error(f"VMC.run: converge must be a spin.Convergence(window, ...), got {type(converge).__name__}")
        vs = self.state
        if self._schedule is None:
            self._schedule = n_iter if vs._impl is None or vs._impl.iteration == 0 else None
        extra = {"vmc.n_iter": self._schedule} if self._schedule else {}
        if converge is not None:
            extra.update(converge._options())
        vs._bind(self.hamiltonian, self.optimizer, self.preconditioner, extra)
        log_path = ""
        logger = None
        if isinstance(out, (str, _os.PathLike)):
            log_path = _os.fspath(out)
        elif out is not None:
            if not callable(out):
                raise Error(f"VMC.run: out must be a path, a spin.RuntimeLog or a callable, got {type(out).__name__}")
            logger = out

        def on_step(info):
            self.step_count += 1
            step = int(info["iteration"])
            if logger is not None:
                logger(step, info)
            if callback is not None:
                r = callback(step, info)
                return r is None or bool(r)
            return True

        return vs._impl.run(n_iter, on_step, log_path)

    @property
    def converged(self):
        """Whether the state's trace meets the criterion of the last run's spin.Convergence (False without one)."""
        impl = self.state._impl
        return impl is not None and impl.converged

    def estimate(self, n_samples=None):
        """⟨H⟩ of the current state (vs.expect(H))."""
        return self.state.expect(self.hamiltonian, n_samples=n_samples)

    def __repr__(self):
        return (f"spin.VMC({self.hamiltonian!r}, {self.optimizer!r}, variational_state={self.state!r}, "
                f"preconditioner={self.preconditioner!r})")


def _document(cls):
    # help() and inspect.signature() show the keywords and their C++ defaults.
    import inspect

    params = []
    if issubclass(cls, _Sampler):
        params.append(inspect.Parameter("hilbert", inspect.Parameter.POSITIONAL_OR_KEYWORD))
    defaults = cls.defaults()
    for k in cls.keywords():
        params.append(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None))
    cls.__signature__ = inspect.Signature(params)
    if defaults:
        def shown(k, v):
            choices = _INFO.get(cls.keywords()[k], {}).get("choices")
            return f"{k}={v!r}" + (f" ({' | '.join(choices)})" if choices else "")
        cls.__doc__ = (cls.__doc__ or "") + "\n\n    Keywords (None: the C++ default shown): " + ", ".join(
            shown(k, v) for k, v in defaults.items()) + "."


for _cls in (MetropolisExchange, MetropolisLocal, Transformer, Rbm, Mps, Autoregressive):
    _document(_cls)
