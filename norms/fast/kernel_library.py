"""Building and loading the C++ kernels of :mod:`norms.fast.cpu_kernels`.

:func:`load` compiles ``norms/fast/csrc/kernels.cpp`` with the system's C++ compiler
(``$NORMS_CXX``, ``$CXX`` or ``g++``, with the flags of :func:`flags` for this CPU) the
first time the kernels are needed on a machine, into a cache folder keyed by the source,
the flags, the compiler and the CPU, and loads the library with :mod:`ctypes`; without a
compiler, or when the source does not compile, it warns once and returns ``None`` (the
callers then run the plain code). :mod:`norms.fast.cpu_kernels` calls what it loads.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path

import torch

__all__ = ["SOURCE", "FLAGS", "flags", "cpu_features", "source_of", "load", "available"]

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
