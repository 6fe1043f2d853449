"""What ``make grade`` (tools/grade.py) watches inside the processes that run a submission.

``install()`` adds a Python audit hook (``sys.addaudithook``, PEP 578) that refuses, with
``PermissionError``, every write outside the submission's grading folder
(``GRADER_ROOT``), and records it in the grader's report file (``GRADER_REPORT``, one
line per event, kept open from the start). Writes are: ``open`` with a writing mode or
flags (``open``, ``io.open``, ``os.open``, ``pathlib``, ``tempfile``...), ``os.remove``,
``os.rmdir``, ``os.mkdir``, ``os.rename``/``os.replace``, ``os.link``, ``os.symlink``,
``os.truncate``, ``os.chmod``, ``os.chown``, ``os.utime``, ``os.setxattr``,
``os.removexattr``, ``shutil.copyfile``/``copytree``/``move``/``rmtree``/``make_archive``/
``unpack_archive``/``chown``/``copymode``/``copystat`` and ``sqlite3.connect``.
``/dev/null``, ``/dev/stdout``, ``/dev/stderr`` and ``/dev/tty`` are allowed, and so is
``os.mkdir`` of a folder that exists (it writes nothing: ``os.makedirs(...,
exist_ok=True)``). A write into a ``__pycache__`` folder outside is refused but not
recorded (Python's bytecode cache, which the grader turns off with
``PYTHONDONTWRITEBYTECODE``). A write into the grader's own folder (``GRADER_ROOT/.grader``)
is refused and recorded too.

``tools/grade.py`` puts this file and a ``sitecustomize.py`` that calls ``install()`` on
the ``PYTHONPATH`` of ``otter run``, so the hook is in every Python process of the grading:
``otter run`` itself, the Jupyter kernel that runs the notebook (where the notebook's first,
added, cell also calls ``install()`` and ``kernel()``), and a Python started by the
notebook. ``kernel()`` records a call of ``os._exit`` (or ``posix._exit``) in the kernel.

What it does not see (it is not a sandbox): writes by native code (C extensions, ``ctypes``,
``cffi``), by processes that are not Python (a shell command, ``!cp``, ``os.system``), by a
Python started with ``-I`` or ``-S`` or without the inherited ``PYTHONPATH``, paths given
to ``os.open`` relative to a ``dir_fd``, and code that reaches into this hook's closure to
change it. For these ``tools/grade.py`` still compares snapshots of the folders it watches
before and after, and the operating system's permissions apply.
"""

from __future__ import annotations

import errno
import os
import sys

#: events whose argument at the index is a path written to, and the index of the event's
#: ``dir_fd`` (a relative path is relative to it), or None
_PATHS = {
    "os.remove": ((0, 1, False),),
    "os.rmdir": ((0, 1, False),),
    "os.mkdir": ((0, 2, False),),
    "os.chmod": ((0, 2, True),),
    "os.chown": ((0, 3, True),),
    "os.utime": ((0, 3, True),),
    "os.truncate": ((0, None, True),),
    "os.chflags": ((0, None, True),),
    "os.lchflags": ((0, None, False),),
    "os.setxattr": ((0, None, True),),
    "os.removexattr": ((0, None, True),),
    "os.rename": ((0, 2, False), (1, 3, False)),
    "os.link": ((1, 3, False),),
    "os.symlink": ((1, 2, False),),
    "shutil.copyfile": ((1, None, True),),
    "shutil.copymode": ((1, None, True),),
    "shutil.copystat": ((1, None, True),),
    "shutil.copytree": ((1, None, False),),
    "shutil.move": ((0, None, False), (1, None, False)),
    "shutil.rmtree": ((0, None, False),),
    "shutil.chown": ((0, None, True),),
    "shutil.make_archive": ((0, None, False),),
    "shutil.unpack_archive": ((1, None, False),),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_ALLOWED = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")

_installed: list = []  # [note] once installed in this process


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def where(path, dir_fd=None, follow=True) -> str:
    """The absolute, symlink-free path a write to ``path`` reaches (``follow``: the last
    part too, as ``open`` does; else only its folder, as ``os.remove`` does)."""
    if isinstance(path, int):
        return os.path.realpath(_fd_path(path))
    path = os.fsdecode(os.fspath(path))
    if not os.path.isabs(path):
        # the audit events give a dir_fd of -1 (or None) for the current folder
        base = _fd_path(dir_fd) if isinstance(dir_fd, int) and dir_fd >= 0 else os.getcwd()
        path = os.path.join(base, path)
    if follow:
        return os.path.realpath(path)
    head, tail = os.path.split(os.path.normpath(path))
    return os.path.join(os.path.realpath(head), tail)


def written(event: str, args: tuple) -> list[tuple[object, object, bool]]:
    """(path, dir_fd, follow) of every path the audit event ``event`` writes to."""
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, int):  # os.fdopen, open(fd): the descriptor was checked when opened
            return []
        writes = isinstance(mode, str) and any(c in mode for c in "wax+")
        if writes or (isinstance(flags, int) and flags & _WRITE_FLAGS):
            return [(path, None, True)]
        return []
    if event == "sqlite3.connect":
        database = args[0] if args else ":memory:"
        if database in (":memory:", b":memory:", "") or str(database).startswith("file:"):
            return []  # in memory; a URI is opened by SQLite's C code (not seen)
        return [(database, None, True)]
    out = []
    for index, fd_index, follow in _PATHS.get(event, ()):
        if index < len(args) and args[index] is not None:
            dir_fd = args[fd_index] if fd_index is not None and fd_index < len(args) else None
            out.append((args[index], dir_fd, follow))
    return out


def install(root=None, report=None) -> bool:
    """Add the audit hook to this process (once); False where the grader set nothing up."""
    if _installed:
        return True
    root = root or os.environ.get("GRADER_ROOT")
    report = report or os.environ.get("GRADER_REPORT")
    if not root or not report:
        return False
    root = os.path.realpath(root)
    own = os.path.join(root, ".grader")
    report = os.path.realpath(report)
    state = {"fd": os.open(report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "busy": 0}

    def note(kind: str, detail: str) -> None:
        line = f"{kind}\t{os.getpid()}\t{detail}\n".encode(errors="backslashreplace")
        state["busy"] += 1
        try:
            try:
                os.write(state["fd"], line)
            except OSError:  # its descriptor was closed: open the report again
                state["fd"] = os.open(report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.write(state["fd"], line)
        except OSError:
            pass
        finally:
            state["busy"] -= 1

    def inside(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder + os.sep)

    def hook(event, args):
        if state["busy"] or not (event == "open" or event in _PATHS or event == "sqlite3.connect"):
            return
        state["busy"] += 1
        try:
            refused = []
            for path, dir_fd, follow in written(event, args):
                if isinstance(path, (str, bytes)) and os.fsdecode(path) in _ALLOWED:
                    continue
                try:
                    target = where(path, dir_fd, follow)
                except Exception:  # a path that cannot be resolved: refused, named as given
                    target = repr(path)
                if target in _ALLOWED:
                    continue
                if event == "os.mkdir" and os.path.lexists(target):
                    continue  # no write: mkdir raises FileExistsError (makedirs(exist_ok=True))
                if not inside(target, root) or inside(target, own):
                    refused.append(target)
        finally:
            state["busy"] -= 1
        for target in refused:
            # Python's own bytecode cache (where PYTHONDONTWRITEBYTECODE is undone): refused,
            # and importing goes on without it; not the submission's doing, so not recorded
            if os.path.basename(os.path.dirname(target)) != "__pycache__":
                note("write", f"{event}\t{target}")
        if refused:
            raise PermissionError(
                errno.EACCES,
                "the grader allows no writes outside the submission's folder",
                refused[0],
            )

    sys.addaudithook(hook)
    _installed.append(note)
    return True


def kernel() -> None:
    """In the kernel that runs the notebook: record a call of ``os._exit`` (the process
    ends at once, so no cell can report it)."""
    if not _installed or getattr(os._exit, "_grader", False):
        return
    import posix

    note, real, pid = _installed[0], os._exit, os.getpid()

    def _exit(code):
        if os.getpid() == pid:  # not a forked child (multiprocessing ends those with _exit)
            note("exit", repr(code))
        real(code)

    _exit._grader = True
    os._exit = posix._exit = _exit


def note(kind: str, detail: str) -> None:
    """Record an event in the report (after ``install()``)."""
    if _installed:
        _installed[0](kind, detail)


def read(report) -> list[tuple[str, int, str]]:
    """(kind, pid, detail) of every line of a report; [] when there is none."""
    try:
        text = open(report, encoding="utf-8", errors="replace").read()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        pid, _, detail = rest.partition("\t")
        out.append((kind, int(pid) if pid.isdigit() else 0, detail))
    return out
