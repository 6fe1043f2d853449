"""Re-run notebooks top to bottom and store their outputs in place (``make execute``).

Notebooks are committed executed so that Colab and GitHub show their outputs, and
nbval (``make test``) re-runs them and compares every output with the stored one.
Widget state and per-cell timing are not stored: both change on every run.

The outputs are stored with the machine's own SIMD kernels and two threads
(``STORE_ENV``); ``make test-portable`` re-runs them with ATen's generic kernels and one
thread (``NBVAL_CPU`` in the Makefile), so a stored output that depends on either fails there.
Solution cells run isolated (``tools/solution_isolation.py``), as nbval runs them: the cells
after a solution see nothing it did, so the stored outputs are the student edition's too.

Usage: ``python tools/execute.py [NOTEBOOK ...]`` (default: every notebook in book/).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solution_isolation import AFTER, BEFORE, is_solution  # noqa: E402

CELL_TIMEOUT = (
    600  # seconds: only against a hang; speed is measured by `make bench-book`, never enforced
)
ROOT = Path(__file__).resolve().parent.parent
#: The CPU settings the outputs are stored with (the kernels inherit the environment).
STORE_ENV = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}


class IsolatingClient(NotebookClient):
    """nbclient's client, with each solution cell run isolated (its effects taken back)."""

    async def _silent(self, code: str, cell_index: int) -> None:
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        reply = await self.async_wait_for_reply(msg_id)
        content = reply["content"] if reply else {"status": "error", "evalue": "no reply"}
        if content["status"] != "ok":
            raise RuntimeError(
                f"solution cell {cell_index}: {content.get('ename')}: {content.get('evalue')}"
            )

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        if not is_solution(cell):
            return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        await self._silent(BEFORE, cell_index)
        try:
            result = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        except BaseException:
            with contextlib.suppress(Exception):  # the cell's own error is the one to report
                await self._silent(AFTER, cell_index)
            raise
        await self._silent(AFTER, cell_index)
        return result


def execute(path: Path) -> tuple[Path, float]:
    """Execute one notebook in its own folder and write it back; return its run time."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    IsolatingClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        store_widget_state=False,
        coalesce_streams=True,  # one box per cell for printed text, as nbval compares it
    ).execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    nbformat.write(nb, path)
    return path, time.perf_counter() - start


def main(argv: list[str]) -> int:
    os.environ.pop("ATEN_CPU_CAPABILITY", None)  # the machine's own SIMD width
    os.environ.update(STORE_ENV)
    paths = [Path(a).resolve() for a in argv] or sorted(
        p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    with ProcessPoolExecutor(max_workers=2) as pool:
        for path, seconds in pool.map(execute, paths):
            print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
