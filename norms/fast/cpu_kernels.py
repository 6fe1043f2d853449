r"""Small C++ kernels for the CPU (LayerNorm and GroupNorm, forward and backward): building,
loading, calling.

The kernels are ``norms/fast/csrc/kernels.cpp``, about 300 lines of plain loops and
comments (read them: they are the lesson). :func:`load` compiles them with the
system's C++ compiler (``$NORMS_CXX``, ``$CXX`` or ``g++``, with the flags of
:func:`flags` for this CPU, e.g. ``-O3 -march=native -fopenmp``: about a second) the
first time they are needed on a machine, into a cache folder keyed by the source, the
flags, the compiler and the CPU, and loads them with :mod:`ctypes`. Custom operators
(:func:`torch.library.custom_op`) call them, so that autograd, ``torch.compile``
and the dispatcher see ordinary torch ops:

* ``norms::layer_norm_cpu(input, normalized_shape, weight, bias, eps) -> (y, mean, rstd)``,
  differentiable in ``y`` (``mean`` and ``rstd``, one per row, are kept for the backward
  pass): its backward pass is
* ``norms::layer_norm_cpu_backward(dy, input, normalized_shape, weight, eps, mean=None,
  rstd=None) -> (dx, dw, db)``;
* ``norms::group_norm_cpu(input, num_groups, weight, bias, eps) -> (y, mean, rstd)`` and
* ``norms::group_norm_cpu_backward(dy, input, num_groups, weight, eps, mean=None,
  rstd=None) -> (dx, dw, db)``.

:func:`layer_norm` and :func:`group_norm` return ``y``. In eager mode they call the kernels
without the operators' Python layers (``_eager``: an ``autograd.Function`` when
gradients are needed, the kernel alone otherwise); while ``torch.compile`` traces, under a
dispatch mode, for tensor subclasses and under ``torch.func``, they call the operators.

They take float32 or float64 CPU tensors (:func:`supports` says which calls
qualify); :mod:`norms.fast.fused` uses them there and compiled code everywhere else (a
GPU, half precision, no compiler). A second derivative (``create_graph=True``) is taken
with the same formula written in torch ops (LayerNorm), or with ``torch.func.vjp`` of the
:mod:`norms` formula (GroupNorm), which autograd can differentiate again.

Why kernels at all, when the rest of :mod:`norms.fast.fused` is ``torch.compile``? On
a CPU, the code Inductor emits reads ``x`` from memory twice in two places: in
LayerNorm's backward pass it sums the gradients of gamma and beta in a second
sweep over ``x`` and ``dy`` (sums down the columns do not fit its row loop), and
in GroupNorm's forward pass it takes all the statistics in one sweep and writes
the output in another. The kernels make one sweep. ``make bench`` measures both.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from .. import axes, compat, stats
from .. import functional as F

__all__ = [
    "SOURCE",
    "FLAGS",
    "flags",
    "source_of",
    "load",
    "available",
    "supports",
    "layer_norm",
    "group_norm",
    "group_norm_backward",
    "backward_in_ops",
]

#: The kernels' source file.
SOURCE = Path(__file__).with_name("csrc") / "kernels.cpp"


def flags(
    machine: str | None = None, features: str | None = None, target: str = "native"
) -> tuple[str, ...]:
    """The compiler flags for a CPU: ``-O3``, OpenMP, and the instruction set of the CPU.

    * x86-64: ``-march=<target>`` (``native``: this CPU's widest SIMD registers, AVX2
      or AVX-512), plus ``-mprefer-vector-width=512`` where the CPU has AVX-512 (g++
      otherwise keeps to 256-bit vectors);
    * aarch64 (ARM): ``-mcpu=native`` (NEON, and SVE where the CPU has it), or
      ``-march=<target>`` for a named target (g++ knows no ``-march=native`` there for
      every version, nor ``-mprefer-vector-width``);
    * anything else: no instruction-set flag (the compiler's default).

    Args:
        machine: ``platform.machine()`` of the CPU (default: this one's).
        features: its feature flags as ``/proc/cpuinfo`` lists them (default: this
            CPU's); only ``avx512f`` matters.
        target: ``"native"`` for the CPU that compiles, or an ``-march`` value such as
            ``"x86-64-v3"`` or ``"armv8.2-a"`` (what the cross-compilation test uses).
    """
    machine = (machine or platform.machine()).lower()
    if features is None:
        features = cpu_features()
    if machine in ("x86_64", "amd64"):
        isa = (f"-march={target}",)
        if target == "native" and "avx512f" in features.split():
            isa += ("-mprefer-vector-width=512",)
    elif machine in ("aarch64", "arm64"):
        isa = ("-mcpu=native",) if target == "native" else (f"-march={target}",)
    else:
        isa = ()
    return ("-O3", *isa, "-funroll-loops", "-fopenmp", "-std=c++17", "-shared", "-fPIC")


def cpu_features() -> str:
    """The ``flags`` (x86) or ``Features`` (ARM) line of ``/proc/cpuinfo``; empty if there is
    none."""
    try:
        return next(
            (
                line
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith(("flags", "Features"))
            ),
            "",
        )
    except OSError:
        return ""


#: The compiler flags for this CPU (:func:`flags`).
FLAGS = flags()

_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}  # the C function for each dtype


def source_of(name: str) -> str:
    """One function of the kernels' source, with the comment above it, e.g.
    ``source_of("layer_norm_backward")``."""
    blocks = SOURCE.read_text().split("\n\n")  # functions are separated by blank lines
    for block in blocks:
        if f" {name}(" in block and "extern" not in block:
            return block.strip("\n")
    raise ValueError(f"no function {name!r} in {SOURCE.name}")


def _compiler() -> str | None:
    """``$NORMS_CXX``, else ``$CXX``, else ``g++``, if it is on the PATH."""
    return shutil.which(os.environ.get("NORMS_CXX") or os.environ.get("CXX") or "g++")


@functools.cache
def _machine(cxx: str) -> str:
    """What the build depends on besides the source and the flags: the compiler's version and this
    CPU."""
    try:
        version = subprocess.run(
            [cxx, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    # -march=native: the library runs on CPUs with these features only
    return "\n".join([version, platform.machine(), cpu_features()])


def _cache_folder() -> Path | None:
    """``$NORMS_KERNEL_CACHE``, else ``$TMPDIR/norms-kernels-<uid>`` (created private, mode 700);
    ``None`` if that folder cannot be made, is another user's, or cannot be written (then each
    process builds in a temporary folder of its own and removes it)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(
        os.environ.get("NORMS_KERNEL_CACHE") or Path(tempfile.gettempdir()) / f"norms-kernels-{uid}"
    )
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        mine = not hasattr(os, "getuid") or folder.stat().st_uid == uid
    except OSError:
        return None
    return folder if mine and os.access(folder, os.W_OK | os.X_OK) else None


def _warn(what: str) -> None:
    warnings.warn(
        f"norms.fast.fused: {what}; LayerNorm and GroupNorm use compiled code instead of the "
        "C++ kernels",
        RuntimeWarning,
        stacklevel=3,
    )


#: A ``.tmp.so`` older than this (seconds) is what a killed build left: a build is stopped
#: after 600 s.
_STALE = 3600


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _intact(library: Path) -> bool:
    """Whether ``library`` is the file that was built: its SHA-256 is the one written next to it
    (``.sha256``) after the build. A truncated or replaced file is not loaded (loading a truncated
    library can kill the process with SIGBUS)."""
    try:
        return _digest(library) == library.with_suffix(".sha256").read_text().strip()
    except OSError:
        return False


def _remove(library: Path) -> None:
    for path in (library, library.with_suffix(".sha256")):
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def _clean(folder: Path) -> None:
    """Remove the ``.tmp.so`` files of builds that were killed (older than :data:`_STALE`)."""
    now = time.time()
    for partial in folder.glob("kernels-*.tmp.so"):
        try:
            if now - partial.stat().st_mtime > _STALE:
                partial.unlink()
        except OSError:
            pass


def _build(cxx: str, library: Path) -> str | None:
    """Compile the kernels into ``library`` (a temporary name, then an atomic rename), with its
    ``.sha256`` written first; the compiler's complaint if that fails, else ``None``."""
    try:
        fd, partial = tempfile.mkstemp(
            prefix=f"{library.stem}.", suffix=".tmp.so", dir=library.parent
        )
        os.close(fd)
    except OSError as error:
        return f"cannot write in {library.parent} ({error})"
    try:
        done = subprocess.run(
            [cxx, *FLAGS, str(SOURCE), "-o", partial],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as error:
        done = subprocess.CompletedProcess([], 1, "", str(error))
    try:
        if done.returncode != 0:
            return f"compiling {SOURCE.name} failed. The compiler said:\n{done.stderr[-2000:]}"
        checksum = library.with_suffix(".sha256")
        checksum.with_suffix(".sha256.tmp").write_text(_digest(Path(partial)))
        os.replace(checksum.with_suffix(".sha256.tmp"), checksum)
        os.replace(partial, library)  # atomic: other processes see the whole file or none
        return None
    except OSError as error:
        return f"cannot write in {library.parent} ({error})"
    finally:
        Path(partial).unlink(missing_ok=True)


@contextlib.contextmanager
def _build_lock(folder: Path, key: str):
    """An exclusive lock on ``folder/kernels-<key>.lock`` (``fcntl.flock``): one process builds,
    the others wait for its library. Where there is no ``fcntl``, no lock (the rename is atomic)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    try:
        handle = open(folder / f"kernels-{key}.lock", "a")  # noqa: SIM115 - closed below
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _open(library: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library))
    p, n, d, i = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double, ctypes.c_int
    for suffix in ("f32", "f64"):
        getattr(lib, f"layer_norm_forward_{suffix}").argtypes = [p, p, p, n, n, d, i, p, p, p]
        getattr(lib, f"layer_norm_backward_{suffix}").argtypes = [
            *(p, p, p, p, p, n, n, d, i, p, p, p)
        ]
        getattr(lib, f"group_norm_forward_{suffix}").argtypes = [
            *(p, p, p, n, n, n, n, d, i, p, p, p)
        ]
        getattr(lib, f"group_norm_backward_{suffix}").argtypes = [
            *(p, p, p, p, p, n, n, n, n, d, i, p, p, p)
        ]
        for name in ("layer_norm_forward", "layer_norm_backward"):
            getattr(lib, f"{name}_{suffix}").restype = None
        for name in ("group_norm_forward", "group_norm_backward"):
            getattr(lib, f"{name}_{suffix}").restype = None
    return lib


def _load(cxx: str) -> ctypes.CDLL | None:
    key = hashlib.sha256(
        "\n".join([SOURCE.read_text(), cxx, *FLAGS, _machine(cxx)]).encode()
    ).hexdigest()[:16]
    folder = _cache_folder()
    with contextlib.ExitStack() as stack:
        if folder is None:  # no usable shared folder: build in a private one, removed afterwards
            try:
                folder = Path(
                    stack.enter_context(tempfile.TemporaryDirectory(prefix="norms-kernels-"))
                )
            except OSError as error:
                _warn(f"no folder to build the kernels in ({error})")
                return None
        else:
            stack.enter_context(_build_lock(folder, key))
            _clean(folder)
        library = folder / f"kernels-{key}.so"
        if not _intact(library):
            _remove(library)  # a damaged or foreign file (or none)
            problem = _build(cxx, library)
            if problem is not None:
                _warn(problem)
                return None
        try:
            return _open(library)  # stays loaded when a temporary folder is removed
        except (OSError, AttributeError) as error:  # e.g. a noexec folder: rebuild next time
            _remove(library)
            _warn(f"loading {library} failed ({error})")
            return None


_LOCK = threading.Lock()
_LIBRARY: ctypes.CDLL | None = None
_FAILED: tuple | None = None  # what failed: the compiler and the source's time stamp


def _attempt() -> tuple:
    try:
        stamp = SOURCE.stat().st_mtime_ns
    except OSError:
        stamp = None
    return _compiler(), stamp


def load() -> ctypes.CDLL | None:
    """The compiled kernels, built on first use; ``None`` (with a warning) if they cannot be built
    or loaded.

    The shared library lands in ``$NORMS_KERNEL_CACHE`` or else
    ``$TMPDIR/norms-kernels-<uid>``, as ``kernels-<hash>.so``, where the hash covers the
    source, the flags, the compiler and its version, and this CPU's features, so an edit
    rebuilds it and processes on this machine share it (builds of other sources stay: two
    checkouts do not evict each other). It is written to a temporary name, its SHA-256
    next to it, then renamed: no process sees a half-written file, and a file that is not
    the one built (truncated, replaced) is rebuilt, never loaded. One process builds
    while the others wait (a file lock); a folder that cannot be used (another user's,
    read-only) makes a private temporary build, removed once loaded. A failure is
    remembered, so it warns once, until the compiler (``$NORMS_CXX``, ``$CXX``, ``PATH``)
    or the source changes. Once loaded, no lock is taken.
    """
    global _LIBRARY, _FAILED
    if _LIBRARY is not None:
        return _LIBRARY
    attempt = _attempt()
    if attempt == _FAILED:
        return None
    with _LOCK:
        if _LIBRARY is not None or attempt == _FAILED:
            return _LIBRARY
        cxx = attempt[0]
        if cxx is None:
            _warn("no C++ compiler (g++) found")
            _LIBRARY = None
        else:
            _LIBRARY = _load(cxx)
        if _LIBRARY is None:
            _FAILED = attempt
        return _LIBRARY


@torch.compiler.assume_constant_result
def available() -> bool:
    """Whether the kernels are built (or can be): a C++ compiler is there and the source compiles.

    Inside ``torch.compile`` the answer is taken as a constant, so a compiled model that
    contains a :mod:`norms.fast.fused` layer traces without a graph break.
    """
    return load() is not None


def supports(input: Tensor, *params: Tensor | None) -> bool:
    """Whether the kernels can run this call: CPU, float32 or float64, parameters of the same dtype,
    not empty."""
    return (
        input.device.type == "cpu"
        and input.dtype in _SUFFIX
        and input.numel() > 0
        and all(p is None or (p.device.type == "cpu" and p.dtype == input.dtype) for p in params)
        and available()
    )


def _ptr(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _kernel(name: str, dtype: torch.dtype):
    """The C function ``<name>_f32`` or ``<name>_f64`` of the loaded kernels."""
    return getattr(load(), f"{name}_{_SUFFIX[dtype]}")


def _rows_cols(input: Tensor, normalized_shape: Sequence[int]) -> tuple[int, int]:
    cols = math.prod(normalized_shape)
    return input.numel() // cols, cols


def _eager(input: Tensor, *params: Tensor | None) -> bool:
    """Whether a call may skip the operators and call the kernels' Python functions directly
    (autograd through :class:`_LayerNormKernel` or :class:`_GroupNormKernel`): nothing but
    eager autograd would handle the operators.

    Through an operator, a call passes through several Python layers of ``torch.library``
    (autograd, dispatch, a check that outputs do not alias inputs). They cost little in
    themselves (about 20 microseconds a call on small tensors), but they run right after
    the kernel has streamed a tensor through the caches, which then hold none of the
    interpreter's data: measured on bench-sized tensors, they took 0.1 to 0.3 ms a call in
    each direction. The operators stay where something needs them: while
    ``torch.compile`` traces, under a dispatch mode (fake tensors, the op recorder of
    :mod:`norms.fast.passes`), for tensor subclasses, and under ``torch.func`` transforms.
    """
    tensors = [t for t in (input, *params) if t is not None]
    return (
        not torch.compiler.is_compiling()
        and compat.dispatch_stack_depth() == 0  # None: this torch cannot tell
        and type(input) is Tensor
        and all(type(t) in (Tensor, torch.nn.Parameter) for t in tensors)
        and all(compat.functorch_wrapped(t) is False for t in tensors)
    )


def _needs_grad(*tensors: Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


# Each forward op returns, with y, the mean and 1/sigma of every row (LayerNorm) or group
# (GroupNorm), shape (rows,): the backward op reads them instead of computing them again
# (a second pass of arithmetic over x), as torch's own kernels do. They are not
# differentiable (nothing outside this module sees them).


def _layer_norm_forward(input, normalized_shape, weight, bias, eps, stats=True):
    """``(y, mean, rstd)``: y of ``input``'s shape, mean and 1/sigma per row, ``(rows,)`` (both
    ``None`` unless ``stats``: no backward pass will need them)."""
    x = input.contiguous()
    rows, cols = _rows_cols(x, normalized_shape)  # x seen as (rows, cols)
    w = None if weight is None else weight.contiguous()
    b = None if bias is None else bias.contiguous()
    y = torch.empty_like(x)  # (rows, cols)
    mean, rstd = (x.new_empty(rows), x.new_empty(rows)) if stats else (None, None)
    _kernel("layer_norm_forward", x.dtype)(
        x.data_ptr(),
        _ptr(w),
        _ptr(b),
        rows,
        cols,
        eps,
        torch.get_num_threads(),
        y.data_ptr(),
        _ptr(mean),
        _ptr(rstd),
    )
    return y, mean, rstd


def _layer_norm_kernel(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(y, mean, rstd)``: y of ``input``'s shape, mean and 1/sigma per row, ``(rows,)``."""
    return _layer_norm_forward(input, normalized_shape, weight, bias, eps)


_layer_norm = torch.library.custom_op("norms::layer_norm_cpu", _layer_norm_kernel, mutates_args=())


@_layer_norm.register_fake
def _(input, normalized_shape, weight, bias, eps):
    rows = input.numel() // math.prod(normalized_shape)
    y = torch.empty_like(input, memory_format=torch.contiguous_format)
    return y, input.new_empty(rows), input.new_empty(rows)


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: float,
) -> Tensor:
    """LayerNorm's forward pass by the kernel (the op ``norms::layer_norm_cpu``): ``y`` of
    ``input``'s shape, differentiable. Call only when :func:`supports`."""
    if not _eager(input, weight, bias):
        return _layer_norm(input, normalized_shape, weight, bias, eps)[0]
    if _needs_grad(input, weight, bias):
        return _LayerNormKernel.apply(input, tuple(normalized_shape), weight, bias, eps)
    return _layer_norm_forward(input, normalized_shape, weight, bias, eps, stats=False)[0]


def _layer_norm_backward_kernel(
    dy: Tensor,
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    eps: float,
    mean: Tensor | None = None,
    rstd: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """dx, d weight, d bias (the last two of shape ``normalized_shape``), in one sweep over
    ``input`` and ``dy``; ``mean`` and ``rstd`` (``(rows,)``, from the forward op) or, if they
    are not given, computed from ``input`` and ``eps``."""
    x, dy = input.contiguous(), dy.contiguous()
    rows, cols = _rows_cols(x, normalized_shape)  # x, dy seen as (rows, cols)
    w = None if weight is None else weight.contiguous()
    dx = torch.empty_like(x)  # (rows, cols)
    shape = tuple(normalized_shape)
    dw, db = x.new_empty(shape), x.new_empty(shape)
    _kernel("layer_norm_backward", x.dtype)(
        x.data_ptr(),
        dy.data_ptr(),
        _ptr(w),
        _ptr(mean),
        _ptr(rstd),
        rows,
        cols,
        eps,
        torch.get_num_threads(),
        dx.data_ptr(),
        dw.data_ptr(),
        db.data_ptr(),
    )
    return dx, dw, db


_backward = torch.library.custom_op(
    "norms::layer_norm_cpu_backward", _layer_norm_backward_kernel, mutates_args=()
)


@_backward.register_fake
def _(dy, input, normalized_shape, weight, eps, mean=None, rstd=None):
    shape = tuple(normalized_shape)
    return (
        torch.empty_like(input, memory_format=torch.contiguous_format),
        input.new_empty(shape),
        input.new_empty(shape),
    )


def _group_norm_forward(input, num_groups, weight, bias, eps, stats=True):
    """``(y, mean, rstd)``: y of ``input``'s shape, mean and 1/sigma per group, ``(N * G,)`` (both
    ``None`` unless ``stats``)."""
    x = input.contiguous()  # (N, C, *S)
    n, c = x.shape[0], x.shape[1]
    w = None if weight is None else weight.contiguous()
    b = None if bias is None else bias.contiguous()
    y = torch.empty_like(x)  # (N, C, *S)
    rows = n * num_groups
    mean, rstd = (x.new_empty(rows), x.new_empty(rows)) if stats else (None, None)
    _kernel("group_norm_forward", x.dtype)(
        x.data_ptr(),
        _ptr(w),
        _ptr(b),
        n,
        c,
        num_groups,
        x.numel() // (n * c),
        eps,
        torch.get_num_threads(),
        y.data_ptr(),
        _ptr(mean),
        _ptr(rstd),
    )
    return y, mean, rstd


def _group_norm_kernel(
    input: Tensor, num_groups: int, weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """``(y, mean, rstd)``: y of ``input``'s shape, mean and 1/sigma per group, ``(N * G,)``."""
    return _group_norm_forward(input, num_groups, weight, bias, eps)


_group_norm = torch.library.custom_op("norms::group_norm_cpu", _group_norm_kernel, mutates_args=())


@_group_norm.register_fake
def _(input, num_groups, weight, bias, eps):
    rows = input.shape[0] * num_groups
    y = torch.empty_like(input, memory_format=torch.contiguous_format)
    return y, input.new_empty(rows), input.new_empty(rows)


def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None, bias: Tensor | None, eps: float
) -> Tensor:
    """GroupNorm's forward pass by the kernel (the op ``norms::group_norm_cpu``): ``y`` of
    ``input``'s shape, differentiable. Call only when :func:`supports`."""
    if not _eager(input, weight, bias):
        return _group_norm(input, num_groups, weight, bias, eps)[0]
    if _needs_grad(input, weight, bias):
        return _GroupNormKernel.apply(input, num_groups, weight, bias, eps)
    return _group_norm_forward(input, num_groups, weight, bias, eps, stats=False)[0]


def _group_norm_backward_kernel(
    dy: Tensor,
    input: Tensor,
    num_groups: int,
    weight: Tensor | None,
    eps: float,
    mean: Tensor | None = None,
    rstd: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """GroupNorm's backward pass by the kernel: dx, d weight, d bias (the last two of shape
    ``(C,)``), in one sweep over ``input`` and ``dy``; ``mean`` and ``rstd`` (``(N * G,)``, from
    the forward op) or, if they are not given, computed from ``input`` and ``eps``. Call only
    when :func:`supports`."""
    x, dy = input.contiguous(), dy.contiguous()  # (N, C, *S)
    n, c = x.shape[0], x.shape[1]
    w = None if weight is None else weight.contiguous()
    dx = torch.empty_like(x)  # (N, C, *S)
    dw, db = x.new_empty(c), x.new_empty(c)
    _kernel("group_norm_backward", x.dtype)(
        x.data_ptr(),
        dy.data_ptr(),
        _ptr(w),
        _ptr(mean),
        _ptr(rstd),
        n,
        c,
        num_groups,
        x.numel() // (n * c),
        eps,
        torch.get_num_threads(),
        dx.data_ptr(),
        dw.data_ptr(),
        db.data_ptr(),
    )
    return dx, dw, db


group_norm_backward = torch.library.custom_op(
    "norms::group_norm_cpu_backward", _group_norm_backward_kernel, mutates_args=()
)


@group_norm_backward.register_fake
def _(dy, input, num_groups, weight, eps, mean=None, rstd=None):
    c = input.shape[1]
    return (
        torch.empty_like(input, memory_format=torch.contiguous_format),
        input.new_empty(c),
        input.new_empty(c),
    )


def backward_in_ops(
    x: Tensor, dy: Tensor, weight: Tensor | None, k: int, eps: float, sum_rows=None
):
    r"""LayerNorm's backward pass in torch ops: ``(dx, dw, db)``, differentiable again.

    The formula of :func:`norms.functional.normalization_backward`:
    :math:`\mathrm{d}x = \frac{1}{\sigma}(g - \langle g\rangle - \hat x\langle g\hat x\rangle)`
    with :math:`g = \mathrm{d}y\cdot\gamma`, over the last ``k`` dims. ``sum_rows(t, k)``
    sums ``t`` over its leading dims (default: ``t.sum``). Used for a second derivative
    of the kernel's op, and by :class:`norms.fast.fused.CompiledLayerNorm` (compiled).
    """
    dims = axes.layer_norm_dims(x.dim(), k)  # the normalized dims
    _, xc, var = stats.moments(x, dims)  # (*, *S), (*, 1, ..., 1)
    rstd = stats.rstd_without_overflow(x, var, dims, eps)  # (*, 1, ..., 1), also at 1e20
    x_hat = xc * rstd  # (*, *S)
    g = dy if weight is None else dy * weight
    dx = F.normalization_backward_over(g, x_hat, rstd, dims)
    if sum_rows is None:

        def sum_rows(t, k):
            return t.sum(tuple(range(t.dim() - k)))  # over the leading dims: (*, *S) -> S

    return dx, sum_rows(dy * x_hat, k), sum_rows(dy, k)


def _setup_context(ctx, inputs, output):
    input, normalized_shape, weight, bias, eps = inputs
    _, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)
    ctx.save_for_backward(input, weight, mean, rstd)
    ctx.normalized_shape, ctx.eps, ctx.has_bias = tuple(normalized_shape), eps, bias is not None


def _layer_norm_grad(ctx, dy, _dmean=None, _drstd=None, backward=_backward):
    x, weight, mean, rstd = ctx.saved_tensors
    if torch.is_grad_enabled():
        # create_graph=True (autograd runs a backward pass with grad mode on only then):
        # the same formula in torch ops, so that it can be differentiated once more
        dx, dw, db = backward_in_ops(x, dy, weight, len(ctx.normalized_shape), ctx.eps)
    else:
        dx, dw, db = backward(dy, x, ctx.normalized_shape, weight, ctx.eps, mean, rstd)
    return dx, None, None if weight is None else dw, db if ctx.has_bias else None, None


_layer_norm.register_autograd(_layer_norm_grad, setup_context=_setup_context)


def _group_norm_setup_context(ctx, inputs, output):
    input, num_groups, weight, bias, eps = inputs
    _, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)
    ctx.save_for_backward(input, weight, bias, mean, rstd)
    ctx.num_groups, ctx.eps = num_groups, eps


def _group_norm_grad(ctx, dy, _dmean=None, _drstd=None, backward=group_norm_backward):
    x, weight, bias, mean, rstd = ctx.saved_tensors
    if torch.is_grad_enabled():
        # create_graph=True: the gradient of the norms formula (torch ops) by torch.func.vjp,
        # which the outer autograd can differentiate once more
        primals = [t for t in (x, weight, bias) if t is not None]

        def forward(x, *params):
            params = iter(params)
            w = None if weight is None else next(params)
            b = None if bias is None else next(params)
            return F.group_norm(x, ctx.num_groups, w, b, ctx.eps)

        grads = iter(torch.func.vjp(forward, *primals)[1](dy))
        dx, dw, db = (None if t is None else next(grads) for t in (x, weight, bias))
    else:
        dx, dw, db = backward(dy, x, ctx.num_groups, weight, ctx.eps, mean, rstd)
    return dx, None, None if weight is None else dw, None if bias is None else db, None


_group_norm.register_autograd(_group_norm_grad, setup_context=_group_norm_setup_context)


class _LayerNormKernel(torch.autograd.Function):
    """The op ``norms::layer_norm_cpu`` and its autograd, without the operator's Python layers
    (see :func:`_eager`): the same kernels, the same formulas."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        y, mean, rstd = _layer_norm_kernel(input, normalized_shape, weight, bias, eps)
        _setup_context(ctx, (input, normalized_shape, weight, bias, eps), (y, mean, rstd))
        return y

    @staticmethod
    def backward(ctx, dy):
        return _layer_norm_grad(ctx, dy, backward=_layer_norm_backward_kernel)


class _GroupNormKernel(torch.autograd.Function):
    """The op ``norms::group_norm_cpu`` and its autograd, without the operator's Python layers
    (see :func:`_eager`)."""

    @staticmethod
    def forward(ctx, input, num_groups, weight, bias, eps):
        y, mean, rstd = _group_norm_kernel(input, num_groups, weight, bias, eps)
        _group_norm_setup_context(ctx, (input, num_groups, weight, bias, eps), (y, mean, rstd))
        return y

    @staticmethod
    def backward(ctx, dy):
        return _group_norm_grad(ctx, dy, backward=_group_norm_backward_kernel)
