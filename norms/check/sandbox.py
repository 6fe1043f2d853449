"""Running the reader's code: in a child process with a hard time limit, with what it replaces in
torch (and in the grader) put back after every call.

* :class:`Guard` saves the attributes of the modules and classes the grader relies on (torch,
  torch.nn, torch.nn.functional, torch.Tensor, the reference layers, builtins, math, the grader's
  own modules) and torch's global settings, and :meth:`Guard.call` puts them back after every
  call into the reader's code: a forward that replaces ``torch.allclose`` (or
  ``F.layer_norm``, the reference's own function) cannot change what the grader computes next.
* :func:`time_limit` stops Python code with a repeating ``SIGALRM`` (once one is caught, the
  next raises in the reader's next instruction too), in the main thread on POSIX systems.
* :func:`in_child` runs the whole grading in a forked child process and kills it when the time
  limit has passed: this holds against code that catches the alarm, cancels the timer, ignores
  the signal or runs one long C++ operation. The reader's classes need not be importable (a
  forked child has the notebook's objects), and the child's output reaches the notebook as
  any subprocess's does.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import math
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings

import torch
from torch import nn

from norms.i18n import tr

#: grade in a forked child that is killed at the time limit (Linux: Colab, most notebooks);
#: elsewhere (macOS, where forking a process that uses system frameworks is unsafe, Windows,
#: which has no fork) the grading runs in this process under :func:`time_limit`
CHILD_PROCESS = sys.platform.startswith("linux") and hasattr(os, "fork")

#: seconds the child gets, after the time limit, to report what it found before it is killed
_GRACE = 2.0

_MISSING = object()

_HERE = os.path.dirname(os.path.abspath(__file__))


class TimedOut(BaseException):
    """The time limit of :func:`norms.check.grade` ran out."""


def _protected() -> list:
    """The modules and classes whose attributes the reader's code must not change for the grader."""
    import torch.nn.functional as nnf

    from .scenarios import KIND

    objs = [
        builtins,
        math,
        copy,
        torch,
        torch.nn,
        nnf,
        torch.Tensor,
        torch.testing,
        torch.linalg,
    ]
    objs += [torch.autograd, torch.autograd.Function, nn.Module, nn.Parameter]
    for name in KIND:
        cls = getattr(nn, name)
        for klass in cls.__mro__:
            if klass.__module__.startswith("torch.nn") and klass not in objs:
                objs.append(klass)
                module = sys.modules.get(klass.__module__)
                if module is not None and module not in objs:
                    objs.append(module)
    for name, module in list(sys.modules.items()):
        if module is None or not (
            name.startswith("norms.check") or name in ("norms.axes", "norms.functional")
        ):
            continue
        objs.append(module)
        objs += [
            v
            for v in vars(module).values()
            if isinstance(v, type) and v.__module__ == name and v not in objs
        ]
    return objs


def _settings() -> tuple:
    return (
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.get_num_threads(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.is_anomaly_enabled(),
    )


def _set_settings(settings: tuple) -> None:
    dtype, grad, threads, deterministic, warn_only, anomaly = settings
    if torch.get_default_dtype() != dtype:
        torch.set_default_dtype(dtype)
    torch.set_grad_enabled(grad)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    if (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    ) != (deterministic, warn_only):
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    if torch.is_anomaly_enabled() != anomaly:
        torch.autograd.set_detect_anomaly(anomaly)


def _restore(obj, saved: dict) -> None:
    now = vars(obj)
    if len(now) == len(saved) and all(now.get(k, _MISSING) is v for k, v in saved.items()):
        return
    for name in [n for n in now if n not in saved]:
        with contextlib.suppress(AttributeError, TypeError):
            delattr(obj, name)
    for name, value in saved.items():
        if now.get(name, _MISSING) is not value:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(obj, name, value)


class Guard:
    """What the reader's code may change and the grader relies on, saved when grading starts."""

    def __init__(self):
        self.saved = [(obj, dict(vars(obj))) for obj in _protected()]
        self.settings = _settings()

    def restore(self, settings: tuple | None = None) -> None:
        """Put back every saved attribute, and torch's settings (those of the start, or
        ``settings``)."""
        for obj, saved in self.saved:
            _restore(obj, saved)
        _set_settings(self.settings if settings is None else settings)

    def call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` (the reader's code), then everything it replaced put back
        (the settings as they were at the call: the grader may have turned off gradients)."""
        settings = _settings()
        try:
            return fn(*args, **kwargs)
        finally:
            self.restore(settings)


@contextlib.contextmanager
def time_limit(timeout: float | None):
    """Raise :class:`TimedOut` in the reader's code after ``timeout`` seconds, and again every
    0.1 s after that until the block is left. From the second alarm on, the next instruction of
    the reader's code (not the grader's) raises it too, so a loop that catches the exception
    and carries on is left from its ``except`` clause. A ``SIGALRM`` timer: in the
    main thread of a POSIX process only (elsewhere no limit); it cannot stop code that cancels
    the timer, ignores the signal or runs one long C++ operation (:func:`in_child` can)."""
    armed = (
        timeout is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not armed:
        yield
        return
    live, fired, tracer = [True], [0], sys.gettrace()

    def stop(frame, event, arg):
        if not live[0]:
            return None
        if (
            event == "exception"
            or os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _HERE
        ):
            # an exception on its way (raising another would leave it inside the same try), or
            # the grader's own frames, which must unwind and report
            return stop
        frame.f_trace_opcodes = True
        raise TimedOut()  # (a trace function that raises is removed: the next alarm re-adds it)

    def expire(signum, frame):
        if not live[0]:
            return
        fired[0] += 1
        if fired[0] > 1:  # the last one was caught: raise on the next line of the reader's code
            sys.settrace(stop)
            while frame is not None:  # every instruction, not every line: an `except` clause
                frame.f_trace, frame.f_trace_opcodes = (
                    stop,
                    True,
                )  # may have no line of its own
                frame = frame.f_back
        raise TimedOut()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout, 0.1)
    try:
        yield
    finally:
        live[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.settrace(tracer)


class CannotFork(Exception):
    """``os.fork()`` failed (a limit on processes or memory)."""


class ChildEnded(Exception):
    """The child process ended without a result: ``status`` says how."""

    def __init__(self, status: str):
        super().__init__(status)
        self.status = status


def in_child(work, timeout: float | None):
    """``work()`` run in a forked child process; its (pickled) result.

    Raises :class:`TimedOut` when the child has not answered ``timeout`` + :data:`_GRACE`
    seconds after it started (it is then killed; ``None``: no limit), and :class:`ChildEnded`
    when it ended without an answer (``os._exit``, a crash of the interpreter, a signal)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a process with threads (a notebook's kernel has some)
        # may deadlock the child; the child only runs the grader and is killed at the limit
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        try:
            pid = os.fork()
        except OSError:  # no memory or no process left for a child: the caller grades in-process
            os.close(read)
            os.close(write)
            raise CannotFork() from None
    if pid == 0:  # the child: never returns
        status = 0
        try:
            os.close(read)
            # torch's thread pool (OpenMP) does not survive a fork: a parallel operation in the
            # child would wait for threads that exist only in the parent. The grader's tensors
            # are small; one thread is enough.
            torch.set_num_threads(1)
            try:
                data = pickle.dumps(("ok", work()))
            except BaseException as exc:  # noqa: BLE001 - everything goes to the parent
                data = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            view = memoryview(data)
            while view:
                view = view[os.write(write, view) :]
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(BaseException):
                    stream.flush()
            os._exit(status)
    os.close(write)
    chunks, killed, ended = [], False, False
    deadline = None if timeout is None else time.monotonic() + timeout + _GRACE
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                killed = True
                break
            ready, _, _ = select.select([read], [], [], left)
            if ready:
                chunk = os.read(read, 1 << 16)
                if not chunk:
                    ended = True
                    break
                chunks.append(chunk)
    finally:
        os.close(read)
        if not ended:  # the time limit, or an interrupt of the parent: stop the child
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, code = os.waitpid(pid, 0)
    if killed:
        raise TimedOut()
    try:
        kind, value = pickle.loads(b"".join(chunks))
    except Exception:
        if os.WIFSIGNALED(code):
            how = tr("killed by signal {signal}", signal=os.WTERMSIG(code))
        else:
            how = tr("exit status {status}", status=os.WEXITSTATUS(code))
        raise ChildEnded(how) from None
    if kind == "error":
        raise RuntimeError(value)
    return value
