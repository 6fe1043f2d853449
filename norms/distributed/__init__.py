"""Several processes on one machine: what SyncBatchNorm sends, the launcher, the recorders.

* :mod:`norms.distributed.packet`: the packet :class:`norms.SyncBatchNorm` all-gathers once
  per pass, a header (what the process does, with which settings and input) and 2 numbers
  per channel;
* :mod:`norms.distributed.checks`: the checks every process makes on the gathered headers,
  so that processes that disagree raise the same error instead of hanging;
* :mod:`norms.distributed.forensics`: what this process's SyncBatchNorm layers did, and the
  message a process gets when a peer left it waiting in a collective;
* :mod:`norms.distributed.launch`: :func:`launch` runs a function on local ``gloo``
  processes with a time limit; :class:`WorkerError`;
* :mod:`norms.distributed.recorders`: :func:`record_collectives`, the collectives a
  block makes and the numbers each sends;
* :mod:`norms.distributed.workers`: the SyncBatchNorm chapter's data, and the timing of
  collectives.

The layer itself is :class:`norms.SyncBatchNorm` (:mod:`norms.modules.syncbatchnorm`); the
chapter's runs of it are in :mod:`norms.lab.sync`.
"""

from ..lazy import lazy_submodules
from .launch import WorkerError, launch, loopback_interface
from .recorders import record_collectives
from .workers import global_batch, median_time, slice_of, time_all_reduce, time_collectives

__all__ = [
    "WorkerError",
    "global_batch",
    "launch",
    "loopback_interface",
    "median_time",
    "record_collectives",
    "slice_of",
    "time_all_reduce",
    "time_collectives",
]


# a submodule loads on first use: ``norms.distributed.x`` works after ``import norms``
__getattr__ = lazy_submodules(__name__)
