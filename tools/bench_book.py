"""Measure how long every notebook takes, per notebook and per cell (``make bench-book``).

The book's speed targets are benchmark figures, never tests (a test must pass on a slow
or busy machine): no cell over ``CELL_BUDGET`` seconds, and each chapter within its
budget, ``CHAPTER_BUDGET`` seconds unless the notebook's metadata says otherwise
(``"norms": {"budget_seconds": 60}`` for a chapter that trains a model). This script
executes each notebook once, one after the other, in the project's kernel, and prints
a report: wall time per notebook against its budget, its slowest cells, every cell
over the cell budget, and the load average before and after (on a shared machine the
wall time is inflated; compare with CPU-bound figures measured on a quiet machine).
The report is also written to ``_build/bench-book.json``.

Exit status: 0 whatever the timings; 1 only if a notebook raises.

Usage: ``python tools/bench_book.py [NOTEBOOK ...]`` (default: every notebook in book/).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
CELL_BUDGET = 20.0  # seconds, one cell, on the 2-core machine (WRITING.md)
CHAPTER_BUDGET = 20.0  # seconds, a whole chapter, unless its metadata sets norms.budget_seconds
TIMEOUT = 600  # seconds per cell: only against a hang


def seconds(cell) -> float | None:
    """Wall time of one executed cell, from the timestamps nbclient records."""
    t = cell.get("metadata", {}).get("execution", {})
    start, end = (
        t.get("iopub.execute_input") or t.get("shell.execute_request"),
        t.get("shell.execute_reply"),
    )
    if not (start and end):
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def bench(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    budget = float(nb.metadata.get("norms", {}).get("budget_seconds", CHAPTER_BUDGET))
    start = time.perf_counter()
    error = None
    try:
        NotebookClient(
            nb,
            timeout=TIMEOUT,
            kernel_name="python3",
            record_timing=True,
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1][:200]
    wall = time.perf_counter() - start
    cells = []
    for i, cell in enumerate(nb.cells):
        s = seconds(cell) if cell.cell_type == "code" else None
        if s is not None:
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            cells.append({"index": i, "seconds": round(s, 3), "first_line": first[:70]})
    return {
        "notebook": str(path.relative_to(ROOT)),
        "wall_seconds": round(wall, 2),
        "budget_seconds": budget,
        "over_budget": wall > budget,
        "cells_over_budget": [c for c in cells if c["seconds"] > CELL_BUDGET],
        "slowest_cells": sorted(cells, key=lambda c: -c["seconds"])[:3],
        "error": error,
    }


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or sorted(
        p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    load_before = os.getloadavg()
    results = []
    print(
        f"bench-book: {len(paths)} notebooks, one at a time; cell budget {CELL_BUDGET:g} s; "
        f"load average {load_before[0]:.2f} on {os.cpu_count()} cores\n"
    )
    print(f"{'notebook':34} {'wall s':>7} {'budget':>7}  slowest cells (index: seconds)")
    for path in paths:
        r = bench(path)
        results.append(r)
        flag = "OVER" if r["over_budget"] else "ok"
        slow = ", ".join(f"{c['index']}: {c['seconds']:.1f}" for c in r["slowest_cells"])
        print(
            f"{r['notebook']:34} {r['wall_seconds']:7.1f} {r['budget_seconds']:6.0f} {flag:4}  "
            f"{slow}"
        )
        for c in r["cells_over_budget"]:
            print(
                f"    cell {c['index']} took {c['seconds']:.1f} s (> {CELL_BUDGET:g} s): "
                f"{c['first_line']}"
            )
        if r["error"]:
            print(f"    ERROR: {r['error']}")
    load_after = os.getloadavg()
    total = sum(r["wall_seconds"] for r in results)
    print(
        f"\ntotal {total:.1f} s; load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
        "after (a load above the core count inflates every wall time)"
    )
    over = [r["notebook"] for r in results if r["over_budget"] or r["cells_over_budget"]]
    print("over a budget: " + (", ".join(over) if over else "none") + " (a report, not a test)")
    out = ROOT / "_build" / "bench-book.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "cell_budget_seconds": CELL_BUDGET,
                "load_before": load_before,
                "load_after": load_after,
                "notebooks": results,
            },
            indent=1,
        )
    )
    print(f"written to {out.relative_to(ROOT)}")
    return 1 if any(r["error"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
