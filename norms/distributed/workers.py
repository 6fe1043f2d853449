"""The SyncBatchNorm chapter's data, and its workers that time collectives.

Each worker is ``worker(rank, world_size, *args)`` and is importable by name, as
:func:`norms.distributed.launch` needs. The workers that run the layers are in
:mod:`norms.lab.sync`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from .packet import HEADER

__all__ = ["global_batch", "median_time", "slice_of", "time_all_reduce", "time_collectives"]


def global_batch(
    seed: int,
    sizes: Sequence[int],
    channels: int,
    spatial: Sequence[int] = (),
    mean: float = 0.0,
    dtype=torch.float32,
) -> torch.Tensor:
    """The global batch ``(sum(sizes), C, *spatial)``, the same in every process for the same
    ``seed``."""
    g = torch.Generator().manual_seed(seed)
    shape = (sum(sizes), channels, *spatial)
    scale = torch.rand(channels, generator=g) * 2 + 0.5
    x = torch.randn(shape, generator=g) * scale.view(1, -1, *([1] * len(spatial))) + mean
    return x.to(dtype)


def slice_of(x: torch.Tensor, sizes: Sequence[int], rank: int) -> torch.Tensor:
    """Rank ``rank``'s slice of the global batch: ``sizes[rank]`` samples along dim 0."""
    start = sum(sizes[:rank])
    return x[start : start + sizes[rank]]


def time_all_reduce(rank: int, world_size: int, numel: int, repeats: int = 50) -> float:
    """Median seconds of one ``all_reduce`` of ``numel`` float32 numbers in this group (rank 0's
    clock)."""
    import torch.distributed as dist

    t = torch.ones(numel)
    for _ in range(5):  # warm-up: connections, buffers
        dist.all_reduce(t)
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def median_time(fn, group, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs, each after a barrier in ``group``
    (after 3 warm-up runs)."""
    import torch.distributed as dist

    for _ in range(3):  # warm-up: connections, buffers, allocator
        fn()
    times = []
    for _ in range(repeats):
        dist.barrier(group=group)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def time_collectives(
    rank: int,
    world_size: int,
    channels: Sequence[int] = (16, 256, 4096, 65536),
    collectives: Sequence[int] = (1, 2, 3),
    repeats: int = 7,
    inner: int = 15,
) -> dict | None:
    """Time ``k`` all-gathers in a row of SyncBatchNorm's packet (its 15-number header and 2
    numbers per channel, float64) for every number of channels ``C`` and every ``k``.

    Each of ``repeats`` repeats is the median of ``inner`` timed runs, each run after a
    barrier; the configurations are interleaved within a repeat, so a slow moment of the
    machine falls on all of them. Rank 0 returns ``{(C, k): [seconds of each repeat]}``;
    the other ranks return ``None``.
    """
    import torch.distributed as dist

    packets = {c: torch.ones(HEADER + 2 * c, dtype=torch.float64) for c in channels}
    out: dict = {(c, k): [] for c in channels for k in collectives}
    for _ in range(repeats):
        for c in channels:
            mine = packets[c]
            gathered = [torch.empty_like(mine) for _ in range(world_size)]
            for k in collectives:

                def run(k=k, mine=mine, gathered=gathered):
                    for _ in range(k):
                        dist.all_gather(gathered, mine)

                out[(c, k)].append(median_time(run, None, inner))
    return out if rank == 0 else None
