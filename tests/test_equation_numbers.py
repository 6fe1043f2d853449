"""Equation numbers restart in every chapter (tools/sphinx_local/equation_numbers.py): a
small Sphinx project with jupyter-book's numbering settings, built with and without it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import equation_numbers  # noqa: E402

CHAPTER = """{title}
======

.. math:: a = {n}
   :label: {label}-one

.. math:: b = {n}
   :label: {label}-two

See :eq:`{label}-two`.
"""


def _build(tmp_path: Path, extensions: list[str]) -> dict[str, list[str]]:
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tools' / 'sphinx_local')!r})\n"
        f"extensions = {extensions!r}\nnumfig = True\nmath_numfig = True\n"
    )
    (src / "index.rst").write_text("Book\n====\n\n.. toctree::\n\n   first\n   second\n")
    (src / "first.rst").write_text(CHAPTER.format(title="First", n=1, label="first"))
    (src / "second.rst").write_text(CHAPTER.format(title="Second", n=2, label="second"))
    out = tmp_path / "out"
    app = Sphinx(str(src), str(src), str(out), str(tmp_path / "doctrees"), "html", status=None)
    app.build()
    return {
        page: re.findall(r'class="eqno">\((\d+)\)', (out / f"{page}.html").read_text())
        + re.findall(r'href="#equation-[^"]+">\((\d+)\)</a>', (out / f"{page}.html").read_text())
        for page in ("first", "second")
    }


def test_sphinx_alone_counts_equations_across_the_book(tmp_path):
    numbers = _build(tmp_path, [])
    assert numbers["second"][:2] == ["3", "4"]


def test_every_chapter_counts_its_equations_from_one(tmp_path):
    numbers = _build(tmp_path, ["equation_numbers"])
    assert numbers["first"] == ["1", "2", "2"]  # two equations, one reference to the second
    assert numbers["second"] == ["1", "2", "2"]


@pytest.mark.parametrize(
    "before, after",
    [
        ({"a": {"displaymath": {"x": (79,), "y": (80,)}}}, {"x": (1,), "y": (2,)}),
        ({"a": {"displaymath": {"x": (3, 1)}}}, {"x": (3, 1)}),  # numbered by section
    ],
)
def test_per_page(before, after):
    assert equation_numbers.per_page(before)["a"]["displaymath"] == after
