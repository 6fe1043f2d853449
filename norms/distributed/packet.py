"""The packet :class:`norms.SyncBatchNorm` all-gathers, once in forward and once in backward.

A packet is a header of :data:`HEADER` numbers, then 2 numbers per channel (float64; small
integers and eps/momentum are exact). The header says what the process is doing (the forward
or the backward pass of its k-th training step of this layer), with which settings and
which input; :mod:`norms.distributed.checks` reads every process's header after the
collective, so processes that disagree raise the same error instead of hanging.

The layer fills the fields of its settings (:func:`layer_header`), the autograd Function
those of its input (:func:`with_input`), and :func:`all_gather` sends it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from . import forensics

__all__ = [
    "FWD",
    "BWD",
    "HEADER",
    "all_gather",
    "comm_device",
    "layer_header",
    "with_input",
]

#: dtypes the header can name; anything else is "not floating point"
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# The fields of the header, in order.
(
    PHASE,  # FWD: forward (mean, M2 follow); BWD: backward (sum dy, sum dy*x_hat follow)
    STEP,  # this layer's synchronized forwards before this one, on this process
    EVALS,  # this layer's eval-mode forwards in a group since its last synchronized one
    EPS,
    MOMENTUM,  # -1 for None (cumulative average)
    TRACK,  # track_running_stats
    WEIGHT_RG,  # weight.requires_grad (-1: no weight)
    BIAS_RG,  # bias.requires_grad (-1: no bias)
    INPUT_RG,  # 1 if the input needs a gradient: a backward collective follows
    NUM_FEATURES,
    NDIM,
    CHANNELS,
    COUNT,  # values per channel in this process's slice
    DEVICE_OK,  # 1 if the backend can reduce the input's device
    DTYPE,  # index in DTYPES, -1 if not floating point
) = range(15)
#: numbers in a header
HEADER = 15
#: the values of the PHASE field
FWD, BWD = 1.0, 2.0


def layer_header(
    step: int,
    evals: int,
    eps: float,
    momentum: float | None,
    track_running_stats: bool,
    weight: Tensor | None,
    bias: Tensor | None,
    num_features: int,
) -> tuple[float, ...]:
    """The layer's part of a forward header: its step, its eval-mode forwards since, its
    settings. :func:`with_input` adds the input's part."""
    header = [0.0] * HEADER
    header[PHASE] = FWD
    header[STEP] = float(step)
    header[EVALS] = float(evals)
    header[EPS] = float(eps)
    header[MOMENTUM] = -1.0 if momentum is None else float(momentum)
    header[TRACK] = float(track_running_stats)
    header[WEIGHT_RG] = -1.0 if weight is None else float(weight.requires_grad)
    header[BIAS_RG] = -1.0 if bias is None else float(bias.requires_grad)
    header[NUM_FEATURES] = float(num_features)
    return tuple(header)


def with_input(
    header, input: Tensor, needs_grad: bool, types: list[str]
) -> tuple[list[float], bool]:
    """``header`` with the input's fields, and whether this process can compute its statistics
    (at least 2 dims, floating point, on a device the backend reduces, the layer's channels)."""
    header = list(header)
    ndim = input.dim()
    c = input.shape[1] if ndim >= 2 else 0
    header[NDIM] = float(ndim)
    header[CHANNELS] = float(c)
    header[COUNT] = float(input.numel() // c if c > 0 else 0)
    header[DEVICE_OK] = float(input.device.type in types)
    header[DTYPE] = float(DTYPES.index(input.dtype) if input.dtype in DTYPES else -1)
    header[INPUT_RG] = float(needs_grad)
    ok = ndim >= 2 and header[DEVICE_OK] == 1 and header[DTYPE] >= 0
    return header, ok and c == header[NUM_FEATURES]


def comm_device(types: list[str], input: Tensor) -> torch.device:
    """Where the packet lives: the input's device if the backend reduces it (``types``, from
    :func:`norms.compat.group_device_types`), else the backend's own."""
    if input.device.type in types:
        return input.device
    kind = "cpu" if "cpu" in types else types[0]
    if kind == "cpu":
        return torch.device("cpu")
    return torch.device(kind, getattr(torch, kind).current_device())


def all_gather(
    header: list[float], body: Tensor, device, group, world_size: int, what: str
) -> tuple[Tensor, Tensor]:
    """All-gather ``header + body`` (float64) from every process: the one collective of a
    forward or a backward pass (``what``). Returns the headers on the host ``(P, HEADER)``
    and the bodies ``(P, 2, C)`` on ``device``."""
    mine = torch.cat([torch.tensor(header, dtype=torch.float64, device=device), body.reshape(-1)])
    gathered = [torch.empty_like(mine) for _ in range(world_size)]
    with forensics.collective(what, group):
        dist.all_gather(gathered, mine, group=group)
    table = torch.stack(gathered)  # (P, HEADER + 2C)
    return table[:, :HEADER].cpu(), table[:, HEADER:].reshape(world_size, 2, -1)
