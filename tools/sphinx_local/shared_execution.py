"""Sphinx extension: a page that is executed on every build is executed once per ``make`` run.

The instructors' page is executed whenever the site is built (``mystnb: execution_mode:
force`` in its metadata: its tables come from the other chapters, which no execution cache
keys on). ``make book`` and ``make student`` build the book four times (the site, the Chinese
site, the student edition in both languages), all from the same sources, so the four
executions give the same notebook: a kernel started, norms imported, the chapters read, four
times for one result.

With ``NORMS_SHARED_EXECUTION`` set to a folder (the Makefile sets it for its builds and
empties the folder before them, in ``stored-outputs``), the first build that executes a
notebook stores the executed notebook there, keyed by the notebook as it went in, its working
folder and the execution's options; the other builds take it from there instead of executing
it again. A build that finds another one executing the same notebook waits for it (a lock
per notebook). A failed execution is not stored: the next build executes again and fails
the same way. Without the variable (a build run by hand) every build executes, as before.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
from pathlib import Path

from jupyter_cache.executors.utils import ExecutionResult
from myst_nb.core.execute import direct

ENV = "NORMS_SHARED_EXECUTION"
_execute = direct.single_nb_execution


def _key(nb, cwd, kwargs) -> str:
    text = json.dumps([nb, str(cwd), repr(sorted(kwargs.items()))], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def shared_execution(nb, cwd, **kwargs):
    """``jupyter_cache``'s ``single_nb_execution`` (what myst-nb executes a notebook with),
    done once per folder ``$NORMS_SHARED_EXECUTION``: the same notebook, executed in place,
    and the same result."""
    folder = os.environ.get(ENV)
    if not folder:
        return _execute(nb, cwd, **kwargs)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = _key(nb, cwd, kwargs)
    stored = folder / f"{key}.pickle"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.exists():
            executed, seconds = pickle.loads(stored.read_bytes())
            nb.clear()
            nb.update(executed)  # in place, as an execution leaves it
            return ExecutionResult(nb, cwd, seconds)
        result = _execute(nb, cwd, **kwargs)
        if result.err is None:
            tmp = stored.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps((nb, result.time)))
            tmp.replace(stored)
        return result


def setup(app):
    direct.single_nb_execution = shared_execution
    return {"parallel_read_safe": True, "parallel_write_safe": True}
