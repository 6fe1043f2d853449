"""Check the outputs stored in the notebooks before the site shows them (run by ``make book``).

The site shows the outputs stored in each notebook, not outputs computed at build time:
``make test`` re-executes every notebook under nbval and fails when a stored output, text or
figure, differs from what the code produces now, so what the site shows is what the code
computes. This check makes ``make book`` fail, naming the notebook and the cell, when a
notebook is not fit to be shown: a code cell never executed, cells run out of order, or an
error stored in a cell that is not tagged ``raises-exception`` (a notebook that raised).

Usage: ``python tools/stored_outputs.py [NOTEBOOK ...]`` (default: every notebook of the toc).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import toc  # noqa: E402


def problems(nb: nbformat.NotebookNode, name: str) -> list[str]:
    """What is wrong with the stored outputs of ``nb``; empty when it can be shown."""
    found = []
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.execution_count for c in cells]
    if None in counts:
        i = counts.index(None)
        found.append(f"{name}: code cell {i + 1} was never executed: run `make execute`")
    elif counts != list(range(1, len(counts) + 1)):
        found.append(f"{name}: the cells were not run top to bottom once: run `make execute`")
    for i, cell in enumerate(cells, 1):
        tags = cell.metadata.get("tags", [])
        raised = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        if raised != ("raises-exception" in tags):
            what = (
                "stores an error but is not" if raised else "is tagged raises-exception but is not"
            )
            found.append(f"{name}: code cell {i} {what} tagged raises-exception")
    return found


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or toc.notebooks()
    found = []
    for path in paths:
        found += problems(nbformat.read(path, as_version=4), str(path.relative_to(ROOT)))
    for line in found:
        print(f"make: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
