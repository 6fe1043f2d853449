"""Pytest configuration shared by the unit tests and by nbval over book/.

nbval compares text outputs only and skips PNG images. A notebook committed with a
figure that no longer matches its code would then pass, and Colab and GitHub would
show a stale figure. Here nbval also compares ``image/png`` outputs byte for byte
(matplotlib's Agg output is deterministic for pinned versions), so `make test`
fails on a stale figure; `make execute` refreshes them.

The files run longest first (``tests/file_durations.json``: seconds per file of a recent
``make test``): make test's workers take one file at a time (``--dist loadfile
--no-loadscope-reorder``), so the last files to start are short and no worker is left
running a long notebook alone at the end. ``make test PYTEST_ARGS=--store-file-durations``
refreshes the table; a file missing from it runs after the ones it lists.

nbval runs each solution cell isolated (``tools/solution_isolation.py``): the cells after it
see nothing it did, as in the student edition, which has no solutions. So the stored outputs
that nbval confirms are also the student edition's, and a cell that needs a solution fails
here, naming the solution.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
import solution_isolation  # noqa: E402

FILE_DURATIONS = Path(__file__).resolve().parent / "tests" / "file_durations.json"
COMPARED_IMAGES = ("image/png",)
#: seconds a silent request of the isolation may take (against a dead kernel only)
SILENT_TIMEOUT = 120


def pytest_collectstart(collector):
    skip = getattr(collector, "skip_compare", None)
    if skip is not None and collector.__class__.__name__ == "IPyNbFile":
        collector.skip_compare = tuple(k for k in skip if k not in COMPARED_IMAGES)


def pytest_addoption(parser):
    parser.addoption(
        "--store-file-durations",
        action="store_true",
        help=f"write the seconds each file took to {FILE_DURATIONS.name} (the run order)",
    )


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items):
    """nbval's cells run in the Colab-like kernel (make test, make test-colab): mark them colab,
    so that `make test-colab` (-m colab) runs them too. The files are ordered longest first
    (a stable sort: the tests of a file, and the cells of a notebook, keep their order)."""
    import pytest

    for item in items:
        if type(item).__name__ == "IPyNbCell":
            item.add_marker(pytest.mark.colab)
            if solution_isolation.is_solution(item.cell):
                item.runtest = _isolated(item, item.runtest)
    seconds = json.loads(FILE_DURATIONS.read_text()) if FILE_DURATIONS.exists() else {}
    items.sort(key=lambda item: -seconds.get(_file(item.nodeid), -1.0))  # unknown: last


_SECONDS: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
    _SECONDS[_file(report.nodeid)] += report.duration


def pytest_sessionfinish(session):
    """With --store-file-durations, the main process (not an xdist worker) updates the table
    with the files of this run."""
    config = session.config
    if config.getoption("store_file_durations") and not hasattr(config, "workerinput"):
        table = json.loads(FILE_DURATIONS.read_text()) if FILE_DURATIONS.exists() else {}
        table.update({name: round(s, 1) for name, s in _SECONDS.items()})
        FILE_DURATIONS.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")


def _silent(kernel, code: str) -> dict:
    """Run ``code`` in nbval's kernel without output; return the content of its reply."""
    msg_id = kernel.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
    while True:
        msg = kernel.get_message(stream="shell", timeout=SILENT_TIMEOUT)
        if msg["parent_header"].get("msg_id") == msg_id:
            break
    kernel.await_idle(msg_id, SILENT_TIMEOUT)
    return msg["content"]


def _isolated(item, runtest):
    """``runtest`` of a solution cell, between the isolation's before() and after()."""

    def run():
        kernel = item.parent.kernel
        reply = _silent(kernel, solution_isolation.BEFORE)
        if reply["status"] != "ok":
            item.raise_cell_error(f"solution isolation failed: {reply.get('evalue')}")
        try:
            runtest()
        except BaseException:
            _silent(kernel, solution_isolation.AFTER)
            raise
        reply = _silent(kernel, solution_isolation.AFTER)
        if reply["status"] != "ok":
            item.raise_cell_error(
                f"{reply.get('ename')}: {reply.get('evalue')}\n(tools/solution_isolation.py)"
            )

    return run
