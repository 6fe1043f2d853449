"""Sphinx extension: the pages do not show the glue bookkeeping as if it were the lesson.

The chapters' numbers in prose come from cells (``glue("bn-m", r.elements_per_statistic)``,
WRITING.md). Those calls record a value for the text and compute nothing the reader needs,
yet the pages showed them in the code as if they were part of it. When a page is read,
every ``glue(...)`` statement (also inside a loop, an ``if`` or a ``with``; a loop of
nothing but glue goes whole) and an import of nothing but ``glue`` leave the code a cell
shows; a cell whose code was only that shows its output alone. The notebooks
(Colab, Jupyter, the downloads) keep the calls, which run as before.
"""

from __future__ import annotations

import ast
import re

from docutils import nodes

GLUE_NAMES = {"glue"}


def _is_glue_call(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in GLUE_NAMES


def _is_glue_import(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and all(
        alias.name in GLUE_NAMES and alias.asname is None for alias in stmt.names
    )


_BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith)


def _glue_only(stmt: ast.stmt) -> bool:
    """A glue call, or a loop, ``if`` or ``with`` that does nothing but glue."""
    if _is_glue_call(stmt) or _is_glue_import(stmt):
        return True
    if isinstance(stmt, _BLOCKS):
        inner = stmt.body + getattr(stmt, "orelse", [])
        return all(_glue_only(s) for s in inner)
    return False


def _glue_lines(body: list[ast.stmt]) -> set[int]:
    """The lines of the glue-only statements of ``body``, at any depth of loops, ``if`` and
    ``with`` (a function's body is left alone: it may be called for its other work)."""
    lines: set[int] = set()
    for stmt in body:
        if _glue_only(stmt):
            lines.update(range(stmt.lineno, stmt.end_lineno + 1))
        elif isinstance(stmt, _BLOCKS):
            lines |= _glue_lines(stmt.body) | _glue_lines(getattr(stmt, "orelse", []))
    return lines


def strip_glue(source: str) -> str:
    """``source`` without its glue calls (and loops of nothing but glue) and glue-only
    imports; unchanged when it is not plain Python (a cell magic) or has none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    drop = _glue_lines(tree.body)
    if not drop:
        return source
    lines = [line for i, line in enumerate(source.splitlines(), start=1) if i not in drop]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)  # no run of blank lines where calls were
    return text.strip("\n")


def _hide_glue(app, doctree) -> None:
    for box in list(doctree.findall(nodes.container)):
        if "cell_input" not in box.get("classes", []):
            continue
        block = next(iter(box.findall(nodes.literal_block)), None)
        if block is None:
            continue
        text = block.astext()
        new = strip_glue(text)
        if new == text:
            continue
        if not new.strip():
            box.parent.remove(box)
            continue
        block.children = [nodes.Text(new)]
        block.rawsource = new


def setup(app):
    app.connect("doctree-read", _hide_glue)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
