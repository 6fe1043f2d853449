"""Put a computed value into the book's text, with or without Jupyter Book.

On the website, ``glue("name", value)`` stores ``value`` so that the prose can show
it with ``{glue:text}`name:.3f``` (myst-nb's glue). In Colab or plain Jupyter, where
myst-nb is not installed, the same call still works: it just shows nothing (or the
value, with ``display=True``), so a notebook runs the same everywhere.

The tests run the notebooks in a Colab-like kernel, without myst-nb, and compare
every output with the stored one, glued values included. That kernel sets
``NORMS_GLUE_RECORD=1``: then, and only then, ``glue`` writes the same hidden
record myst-nb writes (a display of MIME type ``application/papermill.record/...``).

A number the prose interprets ("lower", "never diverges", "overlap") carries its claim:
``glue("bn-hi", v, below="plain-lo")`` also glues ``bn-hi.claim``, and
:func:`check_claims` re-checks every such claim of a notebook from its stored outputs
(``tests/test_claims.py`` does it for every chapter), so a re-executed chapter whose
numbers no longer support its sentences fails ``make test``.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any

__all__ = ["check_claims", "glue"]

_GLUE_PREFIX = "application/papermill.record/"  # myst_nb.ext.glue.GLUE_PREFIX
_CLAIM_SUFFIX = ".claim"  # the key of the claim glued with a value
_RELATIONS = {"below": float.__lt__, "above": float.__gt__}


def glue(
    name: str,
    value: Any,
    display: bool = False,
    digits: int | None = None,
    *,
    below: str | float | None = None,
    above: str | float | None = None,
) -> None:
    """Store ``value`` under ``name`` for the text of the page.

    Args:
        name: the key the text refers to, e.g. ``{glue:text}`bn-max-err:.1e```.
        value: the value; numbers, strings and figures all work.
        display: also show the value where the cell is (as myst-nb's ``glue`` does).
        digits: store a real number rounded to this many significant digits: the precision
            the computation supports. The digits after them are rounding noise that differs
            between CPUs (SIMD width, thread count), and the stored value is compared by the
            tests; the text must not show more digits than this.
        below, above: the claim the text makes about the (stored) value: it is below
            (above) the glued value of that key, or that number. Glued as ``name.claim``
            and re-checked from the stored outputs by :func:`check_claims`.

    Example:
        >>> glue("answer", 42)  # shows nothing; the page text can now use it
    """
    if digits is not None:
        if digits < 1 or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"digits needs a real number and digits >= 1, got {value!r}, {digits}")
        value = float(f"{value:.{digits}g}")
    claim = {k: v for k, v in (("below", below), ("above", above)) if v is not None}
    if claim:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"a claim needs a real number, got {value!r}")
        if not all(isinstance(v, (str, int, float)) for v in claim.values()):
            raise ValueError(f"below/above take a glue key or a number, got {claim!r}")
        for relation, other in claim.items():
            reference = other if isinstance(other, str) else f"{other!r}"
            if not isinstance(other, str) and not _RELATIONS[relation](float(value), float(other)):
                raise ValueError(f"claim {name} {relation} {reference} is false: {value!r}")
        glue(name + _CLAIM_SUFFIX, json.dumps(claim, sort_keys=True))
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        myst_glue = None
    if myst_glue is not None:
        myst_glue(name, value, display=display)
    elif display:
        from IPython.display import display as show

        show(value)
    elif os.environ.get("NORMS_GLUE_RECORD") == "1":  # the test kernel: record it as myst-nb does
        from IPython.core.formatters import format_display_data
        from IPython.display import display as show

        bundle, metadata = format_display_data(value)
        metadata["scrapbook"] = {"name": name, "mime_prefix": _GLUE_PREFIX}
        show({_GLUE_PREFIX + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)


def _stored_values(notebook: dict) -> dict[str, Any]:
    """Every glued value of an executed notebook (a dict as in the .ipynb), by key."""
    values = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get(_GLUE_PREFIX + "text/plain")
            if name is None or text is None:
                continue
            text = "".join(text) if isinstance(text, list) else text
            try:
                values[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                values[name] = text  # a figure or an object: not a number
    return values


def check_claims(notebook: dict) -> list[str]:
    """The claims glued with ``below``/``above`` that the stored values no longer support.

    Args:
        notebook: an executed notebook, as loaded from its ``.ipynb`` (JSON).

    Returns:
        one message per false or unreadable claim; empty when every claim holds.

    Example:
        >>> check_claims({"cells": []})
        []
    """
    values = _stored_values(notebook)
    problems = []
    for key, claim in values.items():
        if not key.endswith(_CLAIM_SUFFIX):
            continue
        name = key[: -len(_CLAIM_SUFFIX)]
        value = values.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{name}: no stored number for its claim {claim}")
            continue
        for relation, other in json.loads(claim).items():
            bound = values.get(other) if isinstance(other, str) else other
            reference = f"{other} = {bound!r}" if isinstance(other, str) else repr(other)
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                problems.append(f"{name} {relation} {other}: {other!r} has no stored number")
            elif not _RELATIONS[relation](float(value), float(bound)):
                problems.append(f"{name} = {value!r} is not {relation} {reference}")
    return problems
