"""The pages hide the glue bookkeeping (tools/sphinx_local/glue_lines.py)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import glue_lines  # noqa: E402

CELL = """r = norms.axes.describe(nn.BatchNorm2d(C), x.shape)
print(r.summary())
glue("bn-m", r.elements_per_statistic)
glue(
    "bn-nstats",
    r.num_statistics,
)
norms.glue.glue("bn-reduced", r.reduced_dims, digits=2)"""


def test_glue_calls_leave_the_code_and_the_rest_stays():
    assert glue_lines.strip_glue(CELL) == (
        "r = norms.axes.describe(nn.BatchNorm2d(C), x.shape)\nprint(r.summary())"
    )


@pytest.mark.parametrize(
    "source",
    [
        "def record(k):\n    glue(k, 1)",  # a function is left whole
        "%%time\nglue('a', 1)",  # a cell magic is not Python
        "value = glue_free(3)",
        "print(glue)",
    ],
)
def test_what_is_not_a_top_level_glue_call_stays(source):
    assert glue_lines.strip_glue(source) == source


def test_glue_inside_a_loop_leaves_and_a_loop_of_only_glue_goes():
    source = (
        "for k, v in runs.items():\n"
        "    acc = v.mean()\n"
        '    glue(f"acc-{k}", acc, digits=3)\n'
        "for k in keys:\n"
        "    if k:\n"
        "        glue(k, 1)\n"
        "print(acc)"
    )
    assert glue_lines.strip_glue(source) == (
        "for k, v in runs.items():\n    acc = v.mean()\nprint(acc)"
    )


def test_a_cell_of_only_glue_is_left_empty():
    assert glue_lines.strip_glue("from norms.glue import glue\nglue('a', 1)\n") == ""


def _glue_calls_outside_functions(source: str) -> set[int]:
    """The lines of the glue calls of ``source`` that are not inside a function's body (a
    function is left alone: it may be called for its other work)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= set(range(node.lineno, node.end_lineno + 1))
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and glue_lines._is_glue_call(node):
            calls |= set(range(node.lineno, node.end_lineno + 1))
    return calls - inside


def test_no_chapter_shows_a_glue_call_outside_a_function():
    """Every code cell of every chapter, as the pages show it."""
    shown = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code":
                kept = _glue_calls_outside_functions(cell.source)
                kept -= glue_lines._glue_lines(ast.parse(cell.source).body) if kept else set()
                shown += [f"{path.stem} cell {i} line {n}" for n in sorted(kept)]
    assert shown == []
