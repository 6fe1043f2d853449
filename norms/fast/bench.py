r"""How fast is a normalization layer? A benchmark of ``torch.nn``, ``norms`` and the fused path.

Every case is one layer on one input shape, timed in two directions:

* ``"fwd"``: the forward pass in training mode under ``torch.no_grad()``;
* ``"fwd+bwd"``: the forward pass, then the gradients of the input and of the
  parameters for a given upstream gradient ``dy`` (``torch.autograd.grad``, so
  no ``.grad`` is accumulated between runs),

for three implementations (``impl``):

* ``"torch"``: the ``torch.nn`` layer (torch's own C++ kernels);
* ``"norms"``: the from-scratch :mod:`norms` layer, op by op, gradients by autograd;
* ``"fused"``: the same :mod:`norms` layer compiled with ``torch.compile``
  (:mod:`norms.fast.fused`; on a CPU, LayerNorm's and GroupNorm's forward and backward
  passes run the one-sweep C++ kernels of :mod:`norms.fast.cpu_kernels`).

Timing uses :mod:`torch.utils.benchmark` with a fixed number of threads: a
warm-up (which also compiles the fused path, timed separately as
``compile_s``), then ``rounds`` blocks of runs per implementation,
*interleaved* (torch, norms, fused, torch, ...), so that a burst of load from
elsewhere on the machine hits every implementation alike. The blocks are merged
into one :class:`~torch.utils.benchmark.Measurement`; we report its median and
interquartile range (IQR).

In the same run, for every input shape, we time ``dst.copy_(src)`` on a tensor
of that shape: reading and writing it once is the least any layer can do, so
its bandwidth (bytes moved / time) is the roof. For each case we count the
bytes a *perfect* kernel must move (:func:`perfect_bytes`) and the floating
point operations of the formula (:func:`flops`), and report the fraction of the
copy bandwidth achieved. A fraction near 1 means the implementation is as fast
as memory allows; ``norms`` as written is far below, because it moves the data
several times.

Two things keep the numbers steady: every case compiles the fused path for its
own shape (static shapes, set for :func:`run` only; the caller's compiled code is
kept), and ``make bench`` calls :func:`steady_allocator_for_this_process` in its own
process, so that glibc reuses freed memory and no implementation pays page faults
at random. On a busy machine the times still
vary from run to run; compare ratios from the same run, never absolute times
from different runs.

Ratios differ between CPUs (their SIMD width, caches and memory bandwidth), so every
record names the CPU (:func:`machine`: its model, its SIMD level, the kernels'
flags) and the thread count; ``make bench`` runs at one thread and at two (Colab's
free tier has two cores).

Entry points: :func:`run` (returns the records), :func:`write` (writes
``results.json`` and ``report.md``), :func:`main` (what ``make bench`` runs),
:data:`CASES` (the realistic shapes) and :data:`TINY_CASES` (for tests and the
chapter).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.utils import benchmark

from .cases import (
    CASES,
    DIRECTIONS,
    FLOPS_PER_ELEMENT,
    IMPLS,
    SMALL_CASES,
    TINY_CASES,
    Case,
    flops,
    make_layer,
    perfect_bytes,
)
from .machine import machine, machine_line
from .report import readme_table, report_markdown, summary, write

__all__ = [
    "Case",
    "CASES",
    "SMALL_CASES",
    "TINY_CASES",
    "IMPLS",
    "DIRECTIONS",
    "FLOPS_PER_ELEMENT",
    "machine",
    "make_layer",
    "perfect_bytes",
    "flops",
    "run",
    "summary",
    "readme_table",
    "report_markdown",
    "write",
    "main",
]


def _functions(case: Case, impl: str, device, dtype) -> dict[str, Callable[[], object]]:
    """The zero-argument functions timed for ``fwd`` and ``fwd+bwd``."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype)
    dy = torch.randn(case.shape, generator=gen).to(device=device, dtype=dtype)
    layer = make_layer(case, impl, device, dtype)
    xg = x.clone().requires_grad_(True)
    inputs = (xg, *layer.parameters())

    def fwd():
        with torch.no_grad():
            return layer(x)

    def fwd_bwd():
        return torch.autograd.grad(layer(xg), inputs, dy)

    return {"fwd": fwd, "fwd+bwd": fwd_bwd}


def steady_allocator_for_this_process() -> bool:
    """Let glibc keep freed blocks up to 32 MB for reuse (Linux only); return whether it did.

    This changes the whole process for the rest of its life (glibc has no way to
    read the old thresholds back): ``make bench`` calls it in its own process,
    :func:`run` never does.

    Every call allocates its output (and ``norms`` its temporaries). By default
    glibc hands large freed blocks back to the operating system and its
    threshold moves with the allocation history, so a later call of the *same*
    code sometimes gets fresh pages and pays a page fault per 4 kB: runs of one
    implementation came out 1x or 5x slower at random. Fixing the thresholds
    (``M_MMAP_THRESHOLD`` = 32 MB, ``M_TRIM_THRESHOLD`` = 1 GB) makes every
    implementation reuse its memory, as a training loop does (PyTorch's CUDA
    caching allocator does the same on a GPU).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(
        libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024) and libc.mallopt(m_trim_threshold, 1 << 30)
    )


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _timed(fn: Callable, device) -> float:
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _interleaved(
    fns: dict[str, Callable],
    label: str,
    sub_label: str,
    threads: int,
    rounds: int,
    block_s: float,
    device,
) -> dict[str, tuple[benchmark.Measurement, int]]:
    """Time every function of ``fns`` in ``rounds`` interleaved blocks.

    Returns, per function, the blocks merged into one Measurement and the number of runs.
    """
    # Imported here, not with the module: importing torch.utils.benchmark loads torch's C++
    # extension tools, which print a warning on a CUDA build of torch without a GPU (a Colab CPU
    # runtime), and `import norms` (through norms.quiz) must stay silent.
    from torch.utils import benchmark

    # one call each to size the blocks (warm-up was done before)
    per_call = {k: max(_timed(f, device), 1e-7) for k, f in fns.items()}
    timers = {
        k: benchmark.Timer(
            stmt="fn()",
            globals={"fn": f},
            num_threads=threads,
            label=label,
            sub_label=sub_label,
            description=k,
        )
        for k, f in fns.items()
    }
    blocks: dict[str, list[benchmark.Measurement]] = {k: [] for k in fns}
    order = list(fns)
    for r in range(rounds):
        for k in order[r % len(order) :] + order[: r % len(order)]:  # rotate who goes first
            number = max(1, int(block_s / per_call[k]))
            blocks[k].append(timers[k].timeit(number))
    return {
        k: (benchmark.Measurement.merge(ms)[0], sum(m.number_per_run * len(m.times) for m in ms))
        for k, ms in blocks.items()
    }


def _iqr(m: benchmark.Measurement) -> float:
    return float(m.iqr)


def run(
    cases: Iterable[Case] = CASES,
    impls: Sequence[str] = IMPLS,
    directions: Sequence[str] = DIRECTIONS,
    *,
    threads: int = 1,
    rounds: int = 7,
    block_s: float = 0.02,
    warmup: int = 2,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    progress: Callable[[str], None] | None = print,
) -> list[dict]:
    """Time ``cases`` and return the records (see the module docstring).

    Args:
        cases: the layers and shapes.
        impls: any of ``"torch"``, ``"norms"``, ``"fused"``.
        directions: any of ``"fwd"``, ``"fwd+bwd"``.
        threads: the number of threads torch uses, fixed for the whole run
            (also while compiling, so the compiled code uses as many).
        rounds: interleaved blocks per implementation; the median and the IQR
            are over all runs of all blocks.
        block_s: the target duration of one block, in seconds.
        warmup: untimed calls before timing (the first one compiles the fused path).
        device, dtype: where and in which dtype to run.
        progress: called with one line of text per measurement (``None``: silent).

    Returns:
        a list of dicts with ``op``, ``shape``, ``direction``, ``impl``,
        ``median_s``, ``iqr_s``, ``bytes`` (what a perfect kernel moves),
        ``flops``, ``runs``, ``threads``, ``device``, ``dtype``, ``what``;
        fused records also have ``compile_s``. Per shape one record with
        ``impl="copy"`` (``dst.copy_(src)``, ``direction="fwd"``, ``bytes`` =
        read plus write). ``copy_fraction`` is the fraction of that copy
        bandwidth each case achieves.
    """
    say = progress or (lambda _s: None)
    cases = list(cases)
    timing = _Timing(threads, rounds, block_s, warmup, device, dtype)
    common = {
        "threads": threads,
        "device": str(torch.device(device)),
        "dtype": str(dtype).removeprefix("torch."),
        **{k: v for k, v in machine(threads).items() if k in ("cpu", "simd")},
    }
    records: list[dict] = []
    copies: dict[tuple, dict] = {}
    with _steady_settings(threads):
        for i, case in enumerate(cases, 1):
            name = f"[{i}/{len(cases)}] {case.op} {tuple(case.shape)}"
            if case.shape not in copies:
                copies[case.shape] = rec = _time_copy(case, timing, common)
                records.append(rec)
                say(
                    f"{name} copy: {rec['median_s'] * 1e3:.2f} ms, "
                    f"{rec['bytes'] / rec['median_s'] / 1e9:.1f} GB/s"
                )
            bandwidth = copies[case.shape]["bytes"] / copies[case.shape]["median_s"]
            for direction in directions:
                found = _time_direction(case, direction, impls, timing, common, bandwidth)
                records += found
                say(f"{name} {direction}: {_progress_line(found)}")
    return records


@dataclass(frozen=True)
class _Timing:
    """How :func:`run` times: its arguments of the same names."""

    threads: int
    rounds: int
    block_s: float
    warmup: int
    device: str | torch.device
    dtype: torch.dtype

    def interleaved(self, fns: dict[str, Callable], label: str, sub_label: str):
        return _interleaved(
            fns, label, sub_label, self.threads, self.rounds, self.block_s, self.device
        )


@contextmanager
def _steady_settings(threads: int):
    """``threads`` threads and static shapes inside :func:`run` only (see the module docstring);
    the caller's settings come back afterwards, also on an error."""
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    static_shapes = torch._dynamo.config.patch(
        automatic_dynamic_shapes=False, recompile_limit=256, accumulated_recompile_limit=4096
    )
    static_shapes.__enter__()
    try:
        yield
    finally:
        static_shapes.__exit__(None, None, None)
        torch.set_num_threads(previous_threads)


def _record(case: Case, direction: str, impl: str, measured, nbytes: int, nflops: int, common):
    """One record of :func:`run` (without ``copy_fraction``) from ``(Measurement, runs)``."""
    m, runs = measured
    return {
        "op": case.op if impl != "copy" else "copy",
        "shape": list(case.shape),
        "direction": direction,
        "impl": impl,
        "median_s": float(m.median),
        "iqr_s": _iqr(m),
        "bytes": nbytes,
        "flops": nflops,
        "runs": runs,
        "what": case.what,
        **common,
    }


def _time_copy(case: Case, timing: _Timing, common: dict) -> dict:
    """The record of ``dst.copy_(src)`` on the shape of ``case``: the roof of the bandwidth."""
    src = torch.randn(case.shape).to(device=timing.device, dtype=timing.dtype)
    dst = torch.empty_like(src)
    copy = lambda dst=dst, src=src: dst.copy_(src)
    for _ in range(timing.warmup):
        copy()
    measured = timing.interleaved({"copy": copy}, "copy", str(case.shape))["copy"]
    nbytes = 2 * math.prod(case.shape) * src.element_size()
    rec = _record(case, "fwd", "copy", measured, nbytes, 0, common)
    rec["copy_fraction"] = 1.0
    return rec


def _time_direction(
    case: Case, direction: str, impls: Sequence[str], timing: _Timing, common: dict, bandwidth
) -> list[dict]:
    """The records of every implementation of ``case`` in one direction, timed interleaved."""
    fns, compile_s = {}, {}
    for impl in impls:
        fn = _functions(case, impl, timing.device, timing.dtype)[direction]
        compile_s[impl] = _timed(fn, timing.device)  # the first call compiles the fused path
        for _ in range(timing.warmup - 1):
            fn()
        fns[impl] = fn
    ms = timing.interleaved(fns, case.op, f"{case.shape} {direction}")
    itemsize = torch.empty((), dtype=timing.dtype).element_size()
    nbytes = perfect_bytes(case, direction, itemsize)
    records = []
    for impl in impls:
        rec = _record(case, direction, impl, ms[impl], nbytes, flops(case, direction), common)
        rec["copy_fraction"] = nbytes / rec["median_s"] / bandwidth
        if impl == "fused":
            rec["compile_s"] = compile_s[impl]
        records.append(rec)
    return records


def _progress_line(records: list[dict]) -> str:
    """The times of one case and direction, as :func:`run` reports its progress."""
    line = ", ".join(
        f"{r['impl']} {r['median_s'] * 1e3:.2f} ms ({100 * r['copy_fraction']:.0f}% of copy)"
        for r in records
    )
    by_impl = {r["impl"]: r["median_s"] for r in records}
    if "torch" in by_impl and "fused" in by_impl:
        line += f"  (fused/torch {by_impl['fused'] / by_impl['torch']:.2f}x)"
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """``make bench``: time :data:`CASES`, print progress, write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="_build/bench", help="output folder (default: _build/bench)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, 2],
        help="torch threads, one run for each (default: 1 2)",
    )
    parser.add_argument(
        "--rounds", type=int, default=7, help="interleaved blocks per implementation (default: 7)"
    )
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (a smoke test)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--ops", nargs="*", help="only these layers, e.g. LayerNorm GroupNorm")
    args = parser.parse_args(argv)
    cases = [c for c in (TINY_CASES if args.tiny else CASES) if not args.ops or c.op in args.ops]
    start = time.perf_counter()
    threads = " and ".join(map(str, args.threads))
    print(
        f"benchmark: {len(cases)} cases x {len(DIRECTIONS)} directions x {len(IMPLS)} "
        f"implementations, {threads} thread(s), {args.device}",
        flush=True,
    )
    records = []
    for n in args.threads:
        print(machine_line(machine(n)), flush=True)
        records += run(
            cases,
            threads=n,
            rounds=args.rounds,
            device=args.device,
            progress=lambda s: print(s, flush=True),
        )
    results, report = write(records, args.out)
    print(report.read_text())
    print(f"wrote {results} and {report} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
