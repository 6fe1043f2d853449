"""Convert exercises from the old convention to sphinx-exercise, in place and idempotently.

Old convention (WRITING.md before issue 15): a markdown cell with
``:::{admonition} Exercise N[: title]`` ... ``:::`` whose body starts with the difficulty
(``*Warm-up.*``, ``*Core.*`` or ``*Challenge.*``), then the worked solution in the next
code cell, tagged ``hide-cell``.

New convention (tools/exercises.py)::

    :::{exercise} title
    :label: ex-CHAPTER-N
    :class: core

    *Core.* task ...
    :::

    (markdown cell)  :::{solution-start} ex-CHAPTER-N
                     :class: dropdown
                     :::
    (code cell, tagged "solution", collapsed in Jupyter) the solution
    (markdown cell)  :::{solution-end}
                     :::

Cells already in the new convention are left as they are, so the script can be re-run
on every notebook after merging branches. It stops with the file and the cell named when
an old exercise has no solution cell after it or does not state its difficulty, and it
checks every converted notebook with tools/exercises.py.

Usage: ``python tools/convert_exercises.py [--check] [NOTEBOOK ...]`` (default: every
notebook in book/). ``--check`` changes nothing and exits 1 if a notebook would change.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exercises import DIFFICULTIES, SOLUTION_TAG, ExerciseError, chapter_of, check, directives  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
_TITLE = re.compile(r"^Exercise\s+(?P<n>\d+)\s*(?:[:.\u2014-]\s*(?P<title>.*))?$")
_DIFFICULTY = re.compile(r"^\s*\*(Warm-up|Core|Challenge)\.\*")
_HIDDEN = {
    "hide-cell",
    "hide-input",
}  # how the old convention hid a solution (or it starts "# Solution")


def _md(source: str, cell_id: str):
    cell = nbformat.v4.new_markdown_cell(source)
    cell["id"] = cell_id  # stable: a re-run or another branch makes the same cell
    return cell


def _convert_cell(source: str, chapter: str, path, i):
    """Rewrite every old exercise admonition of one markdown source; return (source, labels)."""
    out, labels, pos = [], [], 0
    for d in directives(source):
        m = _TITLE.match(d.arg) if d.name == "admonition" else None
        if m is None:
            continue
        diff = _DIFFICULTY.match(d.body)
        if diff is None:
            raise ExerciseError(
                f"{path} cell {i}: {d.arg!r} does not start with its difficulty "
                f"({', '.join(f'*{w}.*' for w in DIFFICULTIES)})"
            )
        label = f"ex-{chapter}-{m.group('n')}"
        title = (m.group("title") or "").strip()
        head = f":::{{exercise}} {title}".rstrip()
        opts = "".join(f":{k}: {v}\n" for k, v in d.options.items() if k not in ("class", "label"))
        out.append(source[pos : d.start])
        out.append(
            f"{head}\n:label: {label}\n:class: {DIFFICULTIES[diff.group(1)]}\n{opts}\n{d.body}\n:::"
        )
        labels.append(label)
        pos = d.end
    out.append(source[pos:])
    return "".join(out), labels


def convert(nb, path="notebook") -> bool:
    """Convert one notebook in memory; return True if anything changed."""
    chapter = chapter_of(path)
    cells, changed, i = [], False, 0
    while i < len(nb.cells):
        cell = nb.cells[i]
        if cell.cell_type != "markdown":
            cells.append(cell)
            i += 1
            continue
        source, labels = _convert_cell(cell.source, chapter, path, i)
        if not labels:
            cells.append(cell)
            i += 1
            continue
        if len(labels) > 1:
            raise ExerciseError(
                f"{path} cell {i}: {len(labels)} exercises in one cell; give each its own "
                "cell, followed by its solution"
            )
        solution = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
        if (
            solution is None
            or solution.cell_type != "code"
            or not (
                _HIDDEN & set(solution.metadata.get("tags", []))
                or solution.source.lstrip().startswith("# Solution")
            )
        ):
            raise ExerciseError(
                f"{path} cell {i}: exercise {labels[0]!r} has no solution (a code cell tagged "
                "hide-cell right after it)"
            )
        cell.source = source
        # the solution: that cell and every hidden code cell right after it
        end = i + 2
        while (
            end < len(nb.cells)
            and nb.cells[end].cell_type == "code"
            and _HIDDEN & set(nb.cells[end].metadata.get("tags", []))
        ):
            end += 1
        solution = nb.cells[i + 1 : end]
        for code in solution:
            tags = [t for t in code.metadata.get("tags", []) if t not in _HIDDEN]
            code.metadata["tags"] = tags + ([SOLUTION_TAG] if SOLUTION_TAG not in tags else [])
            code.metadata.pop("mystnb", None)  # the prompts of hide-cell's toggle
            code.metadata["jupyter"] = {
                "source_hidden": True,
                "outputs_hidden": True,
            }  # collapsed in Jupyter
        cells += [
            cell,
            _md(
                f":::{{solution-start}} {labels[0]}\n:label: {labels[0]}-solution\n"
                ":class: dropdown\n:::",
                f"{labels[0]}-solution-start",
            ),
            *solution,
            _md(":::{solution-end}\n:::", f"{labels[0]}-solution-end"),
        ]
        changed = True
        i = end
    if changed:
        nb.cells = cells
    check(nb, path)
    return changed


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a notebook would change"
    )
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(
        p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    stale = []
    for path in paths:
        shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        nb = nbformat.read(path, as_version=4)
        try:
            changed = convert(nb, shown)
        except ExerciseError as exc:
            print(f"convert_exercises: {exc}", file=sys.stderr)
            return 2
        if changed:
            stale.append(shown)
            if not args.check:
                nbformat.write(nb, path)
                print(f"converted {shown}")
    if args.check and stale:
        print(
            "convert_exercises: old-style exercises in " + ", ".join(map(str, stale)),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
