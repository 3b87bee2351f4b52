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
from ._core import (  # noqa: F401
    Error,
    Optimizer,
    ParameterBuffer,
    ParameterBufferF32,
    clip_grad_norm,
    gemm,
    info,
    random_normal,
    random_uniform,
    scheduled_lr,
)

__version__ = info()["version"]


def _shutdown():
    # Kokkos must outlive every object holding its memory; finalise only when none is left.
    _gc.collect()
    _core._finalize_if_safe()


_atexit.register(_shutdown)
