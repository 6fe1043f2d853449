"""Run a function on several local processes joined by ``torch.distributed`` (``gloo``), with a time limit.

:func:`launch` is what the SyncBatchNorm chapter and its tests use to start
real processes on one machine, CPU only::

    results = norms.distributed.launch(worker, world_size=2, args=(seed,), timeout=60)

Each process calls ``worker(rank, world_size, *args)`` inside an initialized
``gloo`` process group; :func:`launch` returns the workers' return values in
rank order. The processes meet through a :class:`torch.distributed.FileStore`
in a fresh temporary directory, so there is no rendezvous port to pick and two
launches running at the same time (parallel test workers) cannot collide; the
gloo connections listen on the loopback interface, on ports the operating
system assigns. Every process is killed when the time limit is reached, and
:func:`launch` then raises :class:`TimeoutError`.

The worker must be importable by name (defined in a module, not in a notebook
cell): processes are started with the ``forkserver`` method (``spawn`` where
there is none), which pickle the function by name. The workers the
chapter runs are here: :func:`compare_with_batchnorm` and
:func:`time_all_reduce`.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["launch", "WorkerError", "loopback_interface", "record_collectives", "compare_with_batchnorm",
           "reference_batchnorm", "global_batch", "slice_of", "time_all_reduce", "time_sync_step"]


class WorkerError(RuntimeError):
    """A worker raised. ``errors`` maps rank -> (exception type name, message, traceback text)."""

    def __init__(self, errors: dict[int, tuple[str, str, str]]):
        self.errors = errors
        first = min(errors)
        kind, message, tb = errors[first]
        super().__init__(
            f"{len(errors)} worker(s) raised; rank {first}: {kind}: {message}\n{tb}"
        )


def loopback_interface() -> str:
    """Name of the loopback network interface (``lo`` on Linux, ``lo0`` on macOS)."""
    names = [name for _, name in socket.if_nameindex()]
    for name in names:
        if name in ("lo", "lo0"):
            return name
    for name in names:
        if name.startswith("lo"):
            return name
    raise RuntimeError(f"no loopback interface among {names}")


def _context():
    """``forkserver`` with torch and norms preloaded where the platform has it, else ``spawn``.

    A forkserver imports torch once; every process then starts as a fork of it,
    in a fraction of the time a fresh interpreter takes to import torch.
    """
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = torch.multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "torch.distributed", "norms"])
        return ctx
    return torch.multiprocessing.get_context("spawn")


def _entry(fn, rank, world_size, store_path, out_dir, args, timeout, threads, interface):
    """Body of one spawned process: join the group, run ``fn``, save its result or its error."""
    torch.set_num_threads(threads)
    # gloo listens on the interface named here: loopback only
    os.environ["GLOO_SOCKET_IFNAME"] = interface
    result: dict[str, Any]
    try:
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout),
        )
        try:
            result = {"value": fn(rank, world_size, *args)}
        finally:
            dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        result = {"error": (type(e).__name__, str(e), traceback.format_exc())}
    torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))


def launch(
    fn: Callable[..., Any],
    world_size: int,
    args: Sequence[Any] = (),
    timeout: float = 120.0,
    grace: float = 10.0,
    return_errors: bool = False,
    threads: int = 1,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` new processes in one gloo group.

    Args:
        fn: a function importable by name (module level), called in every process
        world_size: number of processes
        args: extra arguments, pickled to every process
        timeout: seconds before every process still running is killed and
            :class:`TimeoutError` is raised (also the group's collective timeout)
        grace: once one process has failed, seconds the others get to finish
            before they are killed (they may be waiting for the failed one)
        return_errors: if ``True``, a rank that raised gives a
            ``(type name, message, traceback)`` tuple in its place; if
            ``False``, :class:`WorkerError` is raised
        threads: ``torch.set_num_threads`` in each process

    Returns:
        the return values, in rank order (they must be picklable with
        ``torch.save``).
    """
    interface = loopback_interface()
    ctx = _context()
    work = tempfile.mkdtemp(prefix="norms-dist-")
    store_path = os.path.join(work, "store")
    procs = [
        ctx.Process(
            target=_entry,
            args=(fn, rank, world_size, store_path, work, tuple(args), timeout, threads, interface),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        while any(p.is_alive() for p in procs):
            now = time.monotonic()
            failed = any(p.exitcode not in (None, 0) for p in procs) or any(
                not p.is_alive() and _failed(work, r) for r, p in enumerate(procs)
            )
            if failed:
                deadline = min(deadline, now + grace)
            if now > deadline:
                hung = [r for r, p in enumerate(procs) if p.is_alive()]
                raise TimeoutError(
                    f"{len(hung)} of {world_size} processes still running after the time limit "
                    f"(ranks {hung}); killed them"
                )
            time.sleep(0.02)
        results, errors = [], {}
        for rank, p in enumerate(procs):
            path = os.path.join(work, f"rank{rank}.pt")
            if not os.path.exists(path):
                errors[rank] = ("ProcessDied", f"exit code {p.exitcode}", "")
                results.append(errors[rank])
                continue
            out = torch.load(path, weights_only=False)
            if "error" in out:
                errors[rank] = out["error"]
                results.append(out["error"])
            else:
                results.append(out["value"])
        if errors and not return_errors:
            raise WorkerError(errors)
        return results
    finally:
        started = [p for p in procs if p.pid is not None]
        for p in started:
            if p.is_alive():
                p.kill()
        for p in started:
            p.join(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


def _failed(work: str, rank: int) -> bool:
    path = os.path.join(work, f"rank{rank}.pt")
    if not os.path.exists(path):
        return True
    try:
        return "error" in torch.load(path, weights_only=False)
    except Exception:  # noqa: BLE001 - still being written
        return False


@contextlib.contextmanager
def record_collectives():
    """Record every ``all_gather``, ``all_reduce`` and ``all_gather_object`` call made in the block.

    Yields a list that fills with ``(name, numbers sent by this process)``
    tuples. The functions are patched on :mod:`torch.distributed` for the
    duration of the block, and restored after it.
    """
    import torch.distributed as dist

    calls: list[tuple[str, int]] = []
    names = ("all_gather", "all_reduce", "all_gather_object")
    originals = {name: getattr(dist, name) for name in names}

    def wrap(name):
        def recorded(*args, **kwargs):
            sent = args[1] if name == "all_gather" else args[0]
            calls.append((name, sent.numel() if isinstance(sent, torch.Tensor) else 0))
            return originals[name](*args, **kwargs)
        return recorded

    for name in names:
        setattr(dist, name, wrap(name))
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


# --------------------------------------------------------------------------
# workers the chapter runs
# --------------------------------------------------------------------------


def global_batch(seed: int, sizes: Sequence[int], channels: int, spatial: Sequence[int] = (),
                 mean: float = 0.0, dtype=torch.float32) -> torch.Tensor:
    """The global batch ``(sum(sizes), C, *spatial)``, the same in every process for the same ``seed``."""
    g = torch.Generator().manual_seed(seed)
    shape = (sum(sizes), channels, *spatial)
    scale = torch.rand(channels, generator=g) * 2 + 0.5
    x = torch.randn(shape, generator=g) * scale.view(1, -1, *([1] * len(spatial))) + mean
    return x.to(dtype)


def slice_of(x: torch.Tensor, sizes: Sequence[int], rank: int) -> torch.Tensor:
    """Rank ``rank``'s slice of the global batch: ``sizes[rank]`` samples along dim 0."""
    start = sum(sizes[:rank])
    return x[start : start + sizes[rank]]


def compare_with_batchnorm(rank: int, world_size: int, seed: int, sizes: Sequence[int],
                           channels: int, spatial: Sequence[int] = (), steps: int = 3,
                           mean: float = 0.0, layer_kwargs: dict | None = None) -> dict:
    """Train ``norms.SyncBatchNorm`` on this rank's slice for ``steps`` steps; return what it computed.

    Every step draws a new global batch (seeded, identical in every process),
    keeps rank ``rank``'s ``sizes[rank]`` samples, and runs forward and
    backward with the upstream gradient ``dy`` drawn the same way. Returns the
    last step's output, input gradient and parameter gradients, the
    collectives it made (see :func:`record_collectives`), and the running
    statistics after every step. The caller compares them with one
    :class:`norms.BatchNorm2d` (or 1d/3d) run on the whole batch.
    """
    from .syncbatchnorm import SyncBatchNorm

    torch.manual_seed(seed)
    layer = _with_affine(SyncBatchNorm(channels, **(layer_kwargs or {})), channels)
    running = []
    for step in range(steps):
        dtype = layer.running_mean.dtype if layer.running_mean is not None else torch.float32
        x = slice_of(global_batch(seed + step, sizes, channels, spatial, mean), sizes, rank).to(dtype)
        dy = slice_of(global_batch(seed + 1000 + step, sizes, channels, spatial), sizes, rank).to(dtype)
        x.requires_grad_(True)
        layer.zero_grad(set_to_none=True)
        with record_collectives() as calls:
            y = layer(x)
            y.backward(dy)
        running.append((layer.running_mean.clone(), layer.running_var.clone(),
                        int(layer.num_batches_tracked)))
    return {"y": y.detach(), "dx": x.grad, "dweight": layer.weight.grad.clone(),
            "dbias": None if layer.bias is None else layer.bias.grad.clone(), "running": running,
            "collectives": calls}


def _with_affine(layer, channels: int):
    """Give ``layer`` the non-trivial γ and β both sides of a comparison share; return it."""
    with torch.no_grad():
        layer.weight.copy_(torch.linspace(0.5, 2.0, channels))
        if layer.bias is not None:
            layer.bias.copy_(torch.linspace(-1.0, 1.0, channels))
    return layer


def reference_batchnorm(seed: int, sizes: Sequence[int], channels: int, spatial: Sequence[int] = (),
                        steps: int = 3, mean: float = 0.0, layer_kwargs: dict | None = None,
                        dtype=torch.float32) -> dict:
    """What :func:`compare_with_batchnorm` computes, by one :class:`norms.BatchNorm1d`/``2d``/``3d`` on the whole batch.

    Same layer, same batches, same upstream gradients, in one process and in
    ``dtype``. Its ``y`` and ``dx`` are the concatenation of the slices; its
    ``dweight`` and ``dbias`` are the sums over the processes.
    """
    from . import batchnorm

    bn_class = {0: batchnorm.BatchNorm1d, 1: batchnorm.BatchNorm1d, 2: batchnorm.BatchNorm2d,
                3: batchnorm.BatchNorm3d}[len(spatial)]
    dtype = (layer_kwargs or {}).get("dtype", dtype)
    layer = _with_affine(bn_class(channels, **(layer_kwargs or {})).to(dtype), channels)
    running = []
    for step in range(steps):
        x = global_batch(seed + step, sizes, channels, spatial, mean).to(dtype).requires_grad_(True)
        dy = global_batch(seed + 1000 + step, sizes, channels, spatial).to(dtype)
        layer.zero_grad(set_to_none=True)
        y = layer(x)
        y.backward(dy)
        running.append((layer.running_mean.clone(), layer.running_var.clone(),
                        int(layer.num_batches_tracked)))
    return {"y": y.detach(), "dx": x.grad, "dweight": layer.weight.grad.clone(),
            "dbias": None if layer.bias is None else layer.bias.grad.clone(), "running": running}


def time_all_reduce(rank: int, world_size: int, numel: int, repeats: int = 50) -> float:
    """Median seconds of one ``all_reduce`` of ``numel`` float32 numbers in this group (rank 0's clock)."""
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


def _median_time(fn, group, repeats: int) -> float:
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


def time_sync_step(rank: int, world_size: int, channels: int = 64, per_process: int = 8,
                   spatial: Sequence[int] = (8, 8), repeats: int = 10) -> dict | None:
    """Time one training step of BatchNorm and SyncBatchNorm in groups of 1, 2, ..., ``world_size`` processes.

    One launch serves every group size: the first ``p`` ranks form a group
    (``torch.distributed.new_group``) and time, in that group, a plain
    BatchNorm step on the local slice, a SyncBatchNorm step (forward and
    backward), and one ``all_reduce`` of ``2 * channels`` float32 numbers.
    Rank 0 returns ``{p: {"plain": s, "sync": s, "all_reduce": s}}`` (median
    seconds on its clock); the other ranks return ``None``.
    """
    import torch.distributed as dist

    from . import batchnorm
    from .syncbatchnorm import SyncBatchNorm

    groups = {p: dist.new_group(list(range(p))) for p in range(1, world_size + 1)}
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(per_process, channels, *spatial, generator=g)
    dy = torch.randn(x.shape, generator=g)
    bn_class = {0: batchnorm.BatchNorm1d, 1: batchnorm.BatchNorm1d, 2: batchnorm.BatchNorm2d,
                3: batchnorm.BatchNorm3d}[len(spatial)]
    out = {}
    for p, group in groups.items():
        if rank < p:
            plain, sync = bn_class(channels), SyncBatchNorm(channels, process_group=group)
            sums = torch.ones(2 * channels)

            def step(layer):
                xr = x.clone().requires_grad_(True)
                layer(xr).backward(dy)

            out[p] = {
                "plain": _median_time(lambda: step(plain), group, repeats),
                "sync": _median_time(lambda: step(sync), group, repeats),
                "all_reduce": _median_time(lambda: dist.all_reduce(sums, group=group), group, repeats),
            }
        dist.barrier()
    return out if rank == 0 else None
