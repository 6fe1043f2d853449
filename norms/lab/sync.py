"""The SyncBatchNorm chapter's runs: the layer on several processes against one BatchNorm.

Each worker is ``worker(rank, world_size, *args)``, importable by name, for
:func:`norms.distributed.launch`; the data are :func:`norms.distributed.global_batch` and its
slices.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..distributed import global_batch, median_time, record_collectives, slice_of
from ..modules import batchnorm
from ..modules.syncbatchnorm import SyncBatchNorm

__all__ = ["compare_with_batchnorm", "reference_batchnorm", "time_sync_step"]

#: BatchNorm for an input with this many spatial dims
_BATCHNORM = {
    0: batchnorm.BatchNorm1d,
    1: batchnorm.BatchNorm1d,
    2: batchnorm.BatchNorm2d,
    3: batchnorm.BatchNorm3d,
}


def compare_with_batchnorm(
    rank: int,
    world_size: int,
    seed: int,
    sizes: Sequence[int],
    channels: int,
    spatial: Sequence[int] = (),
    steps: int = 3,
    mean: float = 0.0,
    layer_kwargs: dict | None = None,
) -> dict:
    """Train ``norms.SyncBatchNorm`` on this rank's slice for ``steps`` steps; return what it
    computed.

    Every step draws a new global batch (seeded, identical in every process),
    keeps rank ``rank``'s ``sizes[rank]`` samples, and runs forward and
    backward with the upstream gradient ``dy`` drawn the same way. Returns the
    last step's output, input gradient and parameter gradients, the
    collectives it made (see :func:`record_collectives`), and the running
    statistics after every step. The caller compares them with one
    :class:`norms.BatchNorm2d` (or 1d/3d) run on the whole batch.
    """
    torch.manual_seed(seed)
    layer = _with_affine(SyncBatchNorm(channels, **(layer_kwargs or {})), channels)
    running = []
    for step in range(steps):
        dtype = layer.running_mean.dtype if layer.running_mean is not None else torch.float32
        x = slice_of(global_batch(seed + step, sizes, channels, spatial, mean), sizes, rank).to(
            dtype
        )
        dy = slice_of(global_batch(seed + 1000 + step, sizes, channels, spatial), sizes, rank).to(
            dtype
        )
        x.requires_grad_(True)
        layer.zero_grad(set_to_none=True)
        with record_collectives() as calls:
            y = layer(x)
            y.backward(dy)
        running.append(running_stats(layer))
    return step_result(layer, x, y, running) | {"collectives": calls}


def _with_affine(layer, channels: int):
    """Give ``layer`` the non-trivial γ and β both sides of a comparison share; return it."""
    with torch.no_grad():
        layer.weight.copy_(torch.linspace(0.5, 2.0, channels))
        if layer.bias is not None:
            layer.bias.copy_(torch.linspace(-1.0, 1.0, channels))
    return layer


def reference_batchnorm(
    seed: int,
    sizes: Sequence[int],
    channels: int,
    spatial: Sequence[int] = (),
    steps: int = 3,
    mean: float = 0.0,
    layer_kwargs: dict | None = None,
    dtype=torch.float32,
) -> dict:
    """What :func:`compare_with_batchnorm` computes, by one :class:`norms.BatchNorm1d`/``2d``/``3d``
    on the whole batch.

    Same layer, same batches, same upstream gradients, in one process and in
    ``dtype``. Its ``y`` and ``dx`` are the concatenation of the slices; its
    ``dweight`` and ``dbias`` are the sums over the processes.
    """
    bn_class = _BATCHNORM[len(spatial)]
    dtype = (layer_kwargs or {}).get("dtype", dtype)
    layer = _with_affine(bn_class(channels, **(layer_kwargs or {})).to(dtype), channels)
    running = []
    for step in range(steps):
        x = global_batch(seed + step, sizes, channels, spatial, mean).to(dtype).requires_grad_(True)
        dy = global_batch(seed + 1000 + step, sizes, channels, spatial).to(dtype)
        layer.zero_grad(set_to_none=True)
        y = layer(x)
        y.backward(dy)
        running.append(running_stats(layer))
    return step_result(layer, x, y, running)


def running_stats(layer) -> tuple:
    """(running_mean, running_var, num_batches_tracked) of a BatchNorm layer, copied."""
    return layer.running_mean.clone(), layer.running_var.clone(), int(layer.num_batches_tracked)


def step_result(layer, x, y, running) -> dict:
    """What one side of a comparison gives after its last step: the output, the gradients
    of the input and of γ, β, and the running statistics after each step."""
    return {
        "y": y.detach(),
        "dx": x.grad,
        "dweight": layer.weight.grad.clone(),
        "dbias": None if layer.bias is None else layer.bias.grad.clone(),
        "running": running,
    }


def time_sync_step(
    rank: int,
    world_size: int,
    channels: int = 64,
    per_process: int = 8,
    spatial: Sequence[int] = (8, 8),
    repeats: int = 10,
) -> dict | None:
    """Time one training step of BatchNorm and SyncBatchNorm in groups of 1, 2, ..., ``world_size``
    processes.

    One launch serves every group size: the first ``p`` ranks form a group
    (``torch.distributed.new_group``) and time, in that group, a plain
    BatchNorm step on the local slice, a SyncBatchNorm step (forward and
    backward), and one ``all_reduce`` of ``2 * channels`` float32 numbers.
    Rank 0 returns ``{p: {"plain": s, "sync": s, "all_reduce": s}}`` (median
    seconds on its clock); the other ranks return ``None``.
    """
    import torch.distributed as dist

    groups = {p: dist.new_group(list(range(p))) for p in range(1, world_size + 1)}
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(per_process, channels, *spatial, generator=g)
    dy = torch.randn(x.shape, generator=g)
    bn_class = _BATCHNORM[len(spatial)]
    out = {}
    for p, group in groups.items():
        if rank < p:
            plain, sync = bn_class(channels), SyncBatchNorm(channels, process_group=group)
            sums = torch.ones(2 * channels)

            def step(layer):
                xr = x.clone().requires_grad_(True)
                layer(xr).backward(dy)

            out[p] = {
                "plain": median_time(lambda layer=plain: step(layer), group, repeats),
                "sync": median_time(lambda layer=sync: step(layer), group, repeats),
                "all_reduce": median_time(
                    lambda t=sums, g=group: dist.all_reduce(t, group=g), group, repeats
                ),
            }
        dist.barrier()
    return out if rank == 0 else None
