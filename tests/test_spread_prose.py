"""The prose of a chapter never claims a null result that its seeds cannot show (issue 35).

Five seeds whose ranges overlap do not separate two settings; they do not show that the two
"do not differ". The chapters say "five seeds do not separate them" with the paired count
(:func:`norms.lab.seeds.compare`). This test reads every markdown cell and every glued
string of the chapters already written to that rule and fails on the phrases of a null
result. A chapter joins :data:`ON_THE_RULE` once its prose follows the rule.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"

#: The chapters whose prose follows the rule (add a chapter when it does).
ON_THE_RULE = ("small-batches", "pitfalls", "training", "why-normalize")

#: Phrases that assert two settings are the same, which overlapping ranges cannot show.
NULL_RESULT = re.compile(
    r"no\s+difference|do(?:es)?\s+not\s+differ|did\s+as\s+well\s+as|the\s+same\s+accuracy",
    re.IGNORECASE,
)

_GLUED_TEXT = "application/papermill.record/text/plain"


def _prose(notebook: dict) -> list[tuple[int, str]]:
    """(cell index, text) of every markdown cell and every glued value of a notebook."""
    texts = []
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "markdown":
            texts.append((i, "".join(cell["source"])))
        for output in cell.get("outputs", []):
            glued = output.get("data", {}).get(_GLUED_TEXT)
            if glued is not None:
                texts.append((i, "".join(glued) if isinstance(glued, list) else glued))
    return texts


def null_claims(notebook: dict) -> list[str]:
    """Every phrase of a null result in the prose of ``notebook``, with its cell."""
    return [
        f"cell {i}: ...{text[max(0, m.start() - 60) : m.end() + 20]}..."
        for i, text in _prose(notebook)
        for m in NULL_RESULT.finditer(text)
    ]


@pytest.mark.parametrize("name", ON_THE_RULE)
def test_the_prose_claims_no_null_result(name):
    notebook = json.loads((BOOK / f"{name}.ipynb").read_text(encoding="utf-8"))
    assert null_claims(notebook) == []


def test_a_null_claim_is_found_in_text_and_in_glued_values():
    """The check can fail: the old verdict of small_batches, glued, and the old prose."""
    old = {
        "cells": [
            {"cell_type": "markdown", "source": ["Every range overlaps: no difference at\n"]},
            {
                "cell_type": "code",
                "source": "",
                "outputs": [
                    {"data": {_GLUED_TEXT: "'A and B do not differ at this scale'"}},
                    {"data": {_GLUED_TEXT: "'five seeds do not separate them (higher in 3 of 5)'"}},
                ],
            },
        ]
    }
    assert [claim.split(":")[0] for claim in null_claims(old)] == ["cell 0", "cell 1"]
