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
