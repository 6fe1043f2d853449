"""Exercises and solutions in the book's notebooks (sphinx-exercise markup).

One module knows the markup, so the converter (``tools/convert_exercises.py``), the
build-time check (``tools/sphinx_local/exercise_check.py``), the student edition
(``tools/student.py``) and the tests all read it the same way.

The convention (WRITING.md, "Exercises"):

- the task is a markdown cell holding a sphinx-exercise ``exercise`` directive with a
  ``:label:`` and a ``:class:`` naming its difficulty, whose body starts with the same
  difficulty in words (``*Warm-up.*``, ``*Core.*`` or ``*Challenge.*``);
- its solution follows: code between a markdown cell ``:::{solution-start} LABEL`` ...
  ``:::`` and a markdown cell ``:::{solution-end}`` ``:::`` (the cells in between are the
  solution), or a markdown cell ``:::{solution} LABEL`` ... ``:::`` for a solution
  in words.

Problems are reported as ``book/NAME.ipynb cell N: ...`` (cells counted from 0, as
``nbformat`` and Jupyter's cell index do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

#: difficulty word (as written first in the exercise's body) -> the exercise's :class:
DIFFICULTIES = {"Warm-up": "warm-up", "Core": "core", "Challenge": "challenge"}
#: the same words in the Chinese edition (zh/book/*.ipynb, the glossary's terms)
DIFFICULTIES_ZH = {"热身": "warm-up", "核心": "core", "挑战": "challenge"}

SOLUTION_TAG = "solution"  # tag of every code cell of a gated solution

_OPEN = re.compile(r"^(?P<fence>:{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<arg>[^\n]*)$", re.M)
_DIFFICULTY = re.compile(r"^\s*\*(Warm-up|Core|Challenge|热身|核心|挑战)[.。]\*")


class ExerciseError(ValueError):
    """The exercise markup of a notebook is broken; the message names the file and the cell."""


@dataclass
class Directive:
    """One colon-fenced directive of a markdown cell."""

    name: str
    arg: str
    options: dict
    body: str
    start: int  # character offsets of the whole directive in the cell's source
    end: int


@dataclass
class Exercise:
    label: str
    cell: int  # index of the exercise's markdown cell
    difficulty: str | None  # "warm-up", "core", "challenge" or None
    solution_cells: list = field(default_factory=list)  # indices of the cells of its solution
    solution_kind: str | None = None  # "gated" or "text"


def directives(source: str) -> list[Directive]:
    """The top-level colon-fenced directives of a markdown source, in order."""
    found, pos = [], 0
    while True:
        m = _OPEN.search(source, pos)
        if m is None:
            return found
        n = len(m.group("fence"))
        close = re.compile(r"^:{%d,}[ \t]*$" % n, re.M)
        c = close.search(source, m.end())
        if c is None:
            raise ValueError(
                f"the directive {m.group(0).strip()!r} is never closed (no line {':' * n})"
            )
        inner = source[m.end() + 1 : c.start()] if c.start() > m.end() else ""
        options, lines = {}, inner.split("\n")
        while lines and re.match(r"^:[\w-]+:", lines[0]):
            key, _, value = lines.pop(0)[1:].partition(":")
            options[key] = value.strip()
        body = "\n".join(lines).strip("\n")
        found.append(
            Directive(m.group("name"), m.group("arg").strip(), options, body, m.start(), c.end())
        )
        pos = c.end()


def _where(path, i) -> str:
    return f"{path} cell {i}"


def _markdown(cell) -> str:
    return cell.source if cell.cell_type == "markdown" else ""


_SOLUTION_DIRECTIVES = ("solution", "solution-start", "solution-end")


def _solution_cell_alone(items, text: str, path, i: int) -> None:
    """A cell with a solution, solution-start or solution-end holds nothing else: the student
    edition drops that whole cell (tools/student.py), text around the directive included."""
    if not any(d.name in _SOLUTION_DIRECTIVES for d in items):
        return
    body = text.strip()
    if len(items) > 1 or not (body.startswith(":::") and body.endswith(":::")):
        raise ExerciseError(
            f"{_where(path, i)}: a {'/'.join(_SOLUTION_DIRECTIVES)} directive must be alone in "
            "its markdown cell (the student edition drops the whole cell): split the cell"
        )


def exercises(nb, path="notebook") -> list[Exercise]:
    """Every exercise of a notebook with its solution; raises ExerciseError when the markup
    is broken: an exercise without a label or a solution, a solution for no exercise, a
    ``solution-start`` without its ``solution-end`` (or the reverse)."""
    found: dict[str, Exercise] = {}
    order: list[Exercise] = []
    open_gate: tuple[int, str] | None = None  # (cell, label) of a solution-start not yet ended
    for i, cell in enumerate(nb.cells):
        try:
            items = directives(_markdown(cell))
        except ValueError as exc:
            raise ExerciseError(f"{_where(path, i)}: {exc}") from None
        if open_gate is not None and cell.cell_type == "code":
            found[open_gate[1]].solution_cells.append(i)
        _solution_cell_alone(items, _markdown(cell), path, i)
        for d in items:
            if d.name == "exercise":
                label = d.options.get("label")
                if not label:
                    raise ExerciseError(f"{_where(path, i)}: an exercise without a :label:")
                if label in found:
                    raise ExerciseError(f"{_where(path, i)}: a second exercise labelled {label!r}")
                m = _DIFFICULTY.match(d.body)
                ex = Exercise(label, i, (DIFFICULTIES | DIFFICULTIES_ZH)[m.group(1)] if m else None)
                found[label] = ex
                order.append(ex)
            elif d.name in ("solution", "solution-start"):
                if open_gate is not None:
                    raise ExerciseError(
                        f"{_where(path, open_gate[0])}: solution-start of {open_gate[1]!r} "
                        f"has no solution-end before the next solution (cell {i})"
                    )
                ex = found.get(d.arg)
                if ex is None:
                    raise ExerciseError(
                        f"{_where(path, i)}: a solution for {d.arg!r}, which is not an "
                        "exercise above it"
                    )
                if ex.solution_kind is not None:
                    raise ExerciseError(f"{_where(path, i)}: a second solution for {d.arg!r}")
                ex.solution_kind = "text" if d.name == "solution" else "gated"
                ex.solution_cells.append(i)
                if d.name == "solution-start":
                    open_gate = (i, d.arg)
            elif d.name == "solution-end":
                if open_gate is None:
                    raise ExerciseError(f"{_where(path, i)}: solution-end without a solution-start")
                found[open_gate[1]].solution_cells.append(i)
                open_gate = None
            elif d.name in ("exercise-start", "exercise-end"):
                raise ExerciseError(f"{_where(path, i)}: use one exercise directive, not {d.name}")
    if open_gate is not None:
        raise ExerciseError(
            f"{_where(path, open_gate[0])}: solution-start of {open_gate[1]!r} has no solution-end"
        )
    for ex in order:
        if ex.solution_kind is None:
            raise ExerciseError(f"{_where(path, ex.cell)}: exercise {ex.label!r} has no solution")
        if ex.solution_kind == "gated" and len(ex.solution_cells) < 3:
            raise ExerciseError(
                f"{_where(path, ex.solution_cells[0])}: the solution of {ex.label!r} has "
                "no code cell between solution-start and solution-end"
            )
    return order


def check(nb, path="notebook") -> list[Exercise]:
    """Like :func:`exercises`, and every exercise also states its difficulty."""
    found = exercises(nb, path)
    for ex in found:
        if ex.difficulty is None:
            raise ExerciseError(
                f"{_where(path, ex.cell)}: exercise {ex.label!r} does not start with its "
                f"difficulty ({', '.join(f'*{w}.*' for w in DIFFICULTIES)})"
            )
    return found


def solution_cells(nb, path="notebook") -> set[int]:
    """Indices of every cell that belongs to a solution (markers included)."""
    return {i for ex in exercises(nb, path) for i in ex.solution_cells}


def old_style_exercises(nb) -> list[int]:
    """Cells that still hold an exercise in the old convention (``:::{admonition} Exercise``)."""
    return [
        i
        for i, c in enumerate(nb.cells)
        if any(
            d.name == "admonition" and re.match(r"Exercise\b", d.arg)
            for d in directives(_markdown(c))
        )
    ]


def chapter_of(path) -> str:
    """Label prefix of a notebook's exercises: its file name without suffix."""
    return Path(path).stem
