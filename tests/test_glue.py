"""norms.glue outside Jupyter Book: silent for readers, a myst-nb record in the test kernel."""

from __future__ import annotations

import sys

import IPython.display
import pytest

from norms.glue import glue


@pytest.fixture
def shown(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # as on Colab: no myst-nb
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: calls.append((a, kw)))
    return calls


def test_without_myst_nb_glue_shows_nothing(shown, monkeypatch):
    monkeypatch.delenv("NORMS_GLUE_RECORD", raising=False)
    glue("answer", 42)
    assert shown == []


def test_test_kernel_records_the_value_as_myst_nb_does(shown, monkeypatch):
    """The Colab-like kernel sets NORMS_GLUE_RECORD=1 so that nbval compares glued values."""
    monkeypatch.setenv("NORMS_GLUE_RECORD", "1")
    glue("answer", 42)
    ((args, kwargs),) = shown
    assert args[0] == {"application/papermill.record/text/plain": "42"}
    assert kwargs["raw"] is True and kwargs["metadata"]["scrapbook"]["name"] == "answer"


def test_digits_records_only_the_digits_the_computation_supports(shown, monkeypatch):
    """Two values that differ in rounding noise only (another CPU) give the same record."""
    monkeypatch.setenv("NORMS_GLUE_RECORD", "1")
    glue("a", 0.9601431887555449, digits=6)
    glue("b", 0.9601431887555448, digits=6)
    glue("c", 1.1658053398132324, digits=5)
    records = [args[0]["application/papermill.record/text/plain"] for args, _ in shown]
    assert records == ["0.960143", "0.960143", "1.1658"]
    glue("s", (0.12345678, 2.0), digits=3)  # per-seed values: each rounded
    assert shown[-1][0][0]["application/papermill.record/text/plain"] == "(0.123, 2.0)"
    with pytest.raises(ValueError, match="digits needs a real number"):
        glue("d", "text", digits=3)
    with pytest.raises(ValueError, match="digits needs a real number"):
        glue("d", ("a", 1.0), digits=3)
    with pytest.raises(ValueError, match="digits >= 1"):
        glue("e", 1.5, digits=0)


def test_paired_claims_take_a_count_and_two_keys(shown, monkeypatch):
    monkeypatch.setenv("NORMS_GLUE_RECORD", "1")
    glue("w", 3, paired=("a", "b"), apart=False)
    assert shown[-1][0][0]["application/papermill.record/text/plain"] == "3"
    assert shown[-2][0][0]["application/papermill.record/text/plain"] == (
        '\'{"apart": false, "paired": ["a", "b"]}\''
    )
    with pytest.raises(ValueError, match="count of seeds"):
        glue("w", 0.5, paired=("a", "b"))
    with pytest.raises(ValueError, match="two glue keys"):
        glue("w", 2, paired=("a",))
    with pytest.raises(ValueError, match="apart is a claim about"):
        glue("w", 2, apart=True)


def own_glue_wrappers(source: str) -> list[str]:
    """The functions named ``glue`` a cell's code defines (a wrapper around norms.glue.glue)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: not a definition anyway
        return []
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "glue"]


#: Chapters that still glue through a wrapper of their own (rounding floats and Spreads to 4
#: digits); to go the way small-batches' went (issue 39). Can only shrink.
GLUE_WRAPPERS_LEFT = {"modern-transformers.ipynb", "without-normalization.ipynb"}


def test_no_chapter_wraps_glue():
    """Issue 39: a chapter glues with norms.glue.glue and ``digits=`` itself; a wrapper of its
    own (small-batches had one that rounded every float) hides what is stored."""
    from pathlib import Path

    import nbformat

    book = Path(__file__).resolve().parents[1] / "book"
    found = [
        path.name
        for path in sorted(book.glob("*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "code" and own_glue_wrappers(cell.source)
    ]
    assert set(found) == GLUE_WRAPPERS_LEFT, (
        f"chapters with a glue wrapper of their own: {found} (expected {GLUE_WRAPPERS_LEFT})"
    )


def test_the_wrapper_check_can_fail():
    assert own_glue_wrappers("def glue(name, value, **kw):\n    pass\n") == ["glue"]
    assert own_glue_wrappers("from norms.glue import glue\nglue('a', 1.5, digits=3)\n") == []
