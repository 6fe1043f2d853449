"""Several processes on one machine: the launcher, what they send, and the chapter's workers.

* :mod:`norms.distributed.launch`: :func:`launch` runs a function on local ``gloo``
  processes with a time limit; :class:`WorkerError`.
* :mod:`norms.distributed.recorders`: :func:`record_collectives`, the collectives a
  block makes and the numbers each sends.
* :mod:`norms.distributed.workers`: the SyncBatchNorm chapter's workers and data.

The layer itself is :class:`norms.SyncBatchNorm` (:mod:`norms.modules.syncbatchnorm`).
"""

from ..lazy import lazy_submodules
from .launch import WorkerError, launch, loopback_interface
from .recorders import record_collectives
from .workers import (
    compare_with_batchnorm,
    global_batch,
    reference_batchnorm,
    slice_of,
    time_all_reduce,
    time_collectives,
    time_sync_step,
)

__all__ = [
    "WorkerError",
    "compare_with_batchnorm",
    "global_batch",
    "launch",
    "loopback_interface",
    "record_collectives",
    "reference_batchnorm",
    "slice_of",
    "time_all_reduce",
    "time_collectives",
    "time_sync_step",
]


# a submodule loads on first use: ``norms.distributed.x`` works after ``import norms``
__getattr__ = lazy_submodules(__name__)
