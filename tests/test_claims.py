"""Every claim the prose makes about a glued number ("lower", "never diverges", "overlap")
still holds for the numbers stored in the chapter (issue 22): ``glue(..., below=/above=)``
records the claim next to the value, and a re-executed chapter whose numbers no longer
support its sentences fails here."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import IPython.display
import pytest

from norms.glue import check_claims, glue

BOOK = Path(__file__).resolve().parent.parent / "book"
NOTEBOOKS = sorted(p for p in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_stored_claim_holds(path):
    assert check_claims(_read(path)) == []


def _record(name: str, value) -> dict:
    """A stored glue output, as myst-nb writes it."""
    return {
        "output_type": "display_data",
        "metadata": {"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}},
        "data": {"application/papermill.record/text/plain": repr(value)},
    }


def _notebook(*records) -> dict:
    return {"cells": [{"cell_type": "code", "source": "", "outputs": list(records)}]}


def test_a_doctored_number_breaks_its_claim():
    """The check can fail: the same chapter with one number moved past its bound."""
    good = _notebook(
        _record("bn-hi", 0.053),
        _record("bn-hi.claim", json.dumps({"below": "plain-lo"})),
        _record("plain-lo", 0.12),
        _record("lr10-lo", 1.52),
        _record("lr10-lo.claim", json.dumps({"above": 0.99})),
    )
    assert check_claims(good) == []
    doctored = copy.deepcopy(good)
    doctored["cells"][0]["outputs"][2] = _record("plain-lo", 0.05)  # the plain network got better
    doctored["cells"][0]["outputs"][3] = _record("lr10-lo", 0.5)  # BatchNorm learns at η = 10
    assert check_claims(doctored) == [
        "bn-hi = 0.053 is not below plain-lo = 0.05",
        "lr10-lo = 0.5 is not above 0.99",
    ]
    missing = copy.deepcopy(good)
    del missing["cells"][0]["outputs"][2]  # the claim names a key that was never glued
    assert check_claims(missing) == ["bn-hi below plain-lo: 'plain-lo' has no stored number"]


def test_a_chapter_with_claims_is_checked():
    """At least one chapter states its comparisons as claims (else the test above is empty)."""
    assert any(
        name.endswith(".claim")
        for path in NOTEBOOKS
        for cell in _read(path)["cells"]
        for output in cell.get("outputs", [])
        for name in [output.get("metadata", {}).get("scrapbook", {}).get("name", "")]
    )


def test_glue_records_the_claim_and_refuses_a_false_one(monkeypatch):
    shown = []
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # the Colab-like test kernel
    monkeypatch.setenv("NORMS_GLUE_RECORD", "1")
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: shown.append((a, kw)))
    glue("bn-hi", 0.0531, digits=2, below="plain-lo")
    names = [kw["metadata"]["scrapbook"]["name"] for _, kw in shown]
    assert names == ["bn-hi.claim", "bn-hi"]
    assert json.loads(eval(shown[0][0][0]["application/papermill.record/text/plain"])) == {
        "below": "plain-lo"
    }
    with pytest.raises(ValueError, match="is false"):
        glue("lr10-lo", 0.5, above=0.99)
    with pytest.raises(ValueError, match="needs a real number"):
        glue("label", "text", below=1.0)
