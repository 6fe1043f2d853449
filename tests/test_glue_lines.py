"""The pages hide the glue bookkeeping (tools/sphinx_local/glue_lines.py)."""

from __future__ import annotations

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
        "for k in keys:\n    glue(k, 1)",  # inside a loop: the loop is the code
        "%%time\nglue('a', 1)",  # a cell magic is not Python
        "value = glue_free(3)",
        "print(glue)",
    ],
)
def test_what_is_not_a_top_level_glue_call_stays(source):
    assert glue_lines.strip_glue(source) == source


def test_a_cell_of_only_glue_is_left_empty():
    assert glue_lines.strip_glue("from norms.glue import glue\nglue('a', 1)\n") == ""


def test_no_chapter_shows_a_top_level_glue_call():
    """Every code cell of every chapter, as the pages show it."""
    shown = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                shown += [
                    line
                    for line in glue_lines.strip_glue(cell.source).splitlines()
                    if line.startswith(("glue(", "norms.glue.glue("))
                ]
    assert shown == []
