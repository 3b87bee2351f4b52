"""attnphys: self-attention for physics.

Learned heat-equation operators (every grid point a token) and transformer wavefunctions for 1D spin chains,
on Kokkos (CPU or GPU) with a C++ core. This package re-exports the compiled ``attnphys._core``.
"""
import atexit as _atexit
import gc as _gc

from . import _core
from . import nn  # noqa: F401,E402
from . import spin  # noqa: F401,E402
from . import mps  # noqa: F401,E402
from . import heat  # noqa: F401,E402
from . import training  # noqa: F401,E402
from . import operator  # noqa: F401,E402
from ._core import (  # noqa: F401
    Error,
    Optimizer,
    ParameterBuffer,
    ParameterBufferF32,
    clip_grad_norm,
    gemm,
    get_num_threads,
    info,
    random_normal,
    random_uniform,
    scheduled_lr,
    set_num_threads,
)

__version__ = info()["version"]
if info()["blas_warning"]:  # generic fallback BLAS kernels on a CPU that supports far faster ones
    import warnings as _warnings

    _warnings.warn(info()["blas_warning"], RuntimeWarning, stacklevel=2)


def machine():
    """The CPU, the BLAS and the kernel core OpenBLAS chose, as every benchmark records them (figures depend on the
    core: Debian's OpenBLAS 0.3.21 falls back to its Prescott kernels on some CPUs; `blas_warning` then says what
    to set)."""
    i = info()
    keys = ("cpu_model", "cpu_simd", "blas", "blas_core", "blas_threads", "blas_thread_timeout", "openblas_coretype",
            "blas_warning", "amx_bf16",
            "default_execution_space", "concurrency", "host_threads")
    return {k: i[k] for k in keys}


def _shutdown():
    # Kokkos must outlive every object holding its memory; finalise only when none is left.
    _gc.collect()
    _core._finalize_if_safe()


_atexit.register(_shutdown)
