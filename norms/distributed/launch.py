"""Run a function on several local processes joined by ``torch.distributed`` (``gloo``), with a time
limit.

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
:func:`launch` then raises :class:`TimeoutError`; when a worker raises, the
others get ``grace`` seconds, and :class:`WorkerError` names the rank that
failed first. A SIGTERM to the launching process kills the workers and removes
the temporary directory before the process ends as SIGTERM would end it.

The worker must be importable by name (defined in a module, not in a notebook
cell): processes are started with the ``forkserver`` method (``spawn`` where
there is none), which pickle the function by name. The workers the
chapter runs are in :mod:`norms.lab.sync` and :mod:`norms.distributed.workers`.
"""

from __future__ import annotations

import datetime
import math
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import forensics

__all__ = ["launch", "WorkerError", "loopback_interface"]


class WorkerError(RuntimeError):
    """A worker raised. ``errors`` maps rank -> (exception type name, message, traceback text), for
    every rank that failed; ``rank`` is the rank whose exception came first (by the clock), the
    cause: the others usually fail after it, waiting for it ("Connection closed by peer"). The
    message shows that rank's error and lists the others."""

    def __init__(self, errors: dict[int, tuple[str, str, str]], first: int | None = None):
        self.errors = errors
        self.rank = min(errors) if first is None else first
        kind, message, tb = errors[self.rank]
        others = "".join(
            f"\n  then rank {r}: {k}: {m.splitlines()[0] if m else ''}"
            for r, (k, m, _) in sorted(errors.items())
            if r != self.rank
        )
        super().__init__(
            f"{len(errors)} worker(s) raised; first rank {self.rank}: {kind}: {message}"
            f"{others}\n{tb}"
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
    when = None  # the wall-clock time of fn's exception: the launcher reports the first
    try:
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)
        dist.init_process_group(
            "gloo",
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout),
        )
        try:
            result = {"value": fn(rank, world_size, *args)}
            forensics.publish_activity(rank)
        except BaseException:
            when = time.time()  # before destroy_process_group() lets the peers fail too
            raise
        finally:
            dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        result = {"error": (type(e).__name__, str(e), traceback.format_exc())}
        result["when"] = when if when is not None else time.time()
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
    previous, terminated = None, False
    if threading.current_thread() is threading.main_thread():
        # SIGTERM to the launcher: kill the workers and remove the folder first (see the end)
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        for p in procs:
            p.start()
        _wait(procs, work, timeout, grace)
        return _collect(procs, work, return_errors)
    except _Terminated:
        terminated = True
        raise
    finally:
        _clean_up(procs, work)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
            if terminated:  # workers and folder gone: now what SIGTERM would have done
                os.kill(os.getpid(), signal.SIGTERM)


def _wait(procs, work: str, timeout: float, grace: float) -> None:
    """Wait for every process to end; once one has failed, the others get ``grace`` seconds.
    Raises :class:`TimeoutError` at the time limit."""
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
                f"{len(hung)} of {len(procs)} processes still running after the time limit "
                f"(ranks {hung}); killed them"
            )
        time.sleep(0.02)


def _collect(procs, work: str, return_errors: bool) -> list[Any]:
    """The results in rank order, from the files the processes left; raises
    :class:`WorkerError` naming the rank that failed first unless ``return_errors``."""
    results, errors, times = [], {}, {}
    for rank, p in enumerate(procs):
        path = os.path.join(work, f"rank{rank}.pt")
        if not os.path.exists(path):
            errors[rank] = ("ProcessDied", f"exit code {p.exitcode}", "")
            times[rank] = -math.inf  # died without a word: likely the cause
            results.append(errors[rank])
            continue
        out = torch.load(path, weights_only=False)
        if "error" in out:
            errors[rank], times[rank] = out["error"], out.get("when", math.inf)
            results.append(out["error"])
        else:
            results.append(out["value"])
    if errors and not return_errors:
        raise WorkerError(errors, first=min(errors, key=lambda r: (times[r], r)))
    return results


def _clean_up(procs, work: str) -> None:
    """Kill the processes still running, wait for them, remove the folder."""
    started = [p for p in procs if p.pid is not None]
    for p in started:
        if p.is_alive():
            p.kill()
    for p in started:
        p.join(timeout=10)
    shutil.rmtree(work, ignore_errors=True)


class _Terminated(BaseException):
    """SIGTERM arrived while :func:`launch` waited for its workers."""


def _terminate(signum, frame):
    raise _Terminated()


def _failed(work: str, rank: int) -> bool:
    path = os.path.join(work, f"rank{rank}.pt")
    if not os.path.exists(path):
        return True
    try:
        return "error" in torch.load(path, weights_only=False)
    except Exception:  # noqa: BLE001 - still being written
        return False
