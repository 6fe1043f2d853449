"""Put a computed value into the book's text, with or without Jupyter Book.

On the website, ``glue("name", value)`` stores ``value`` so that the prose can show
it with ``{glue:text}`name:.3f``` (myst-nb's glue). In Colab or plain Jupyter, where
myst-nb is not installed, the same call still works: it just shows nothing (or the
value, with ``display=True``), so a notebook runs the same everywhere.

The tests run the notebooks in a Colab-like kernel, without myst-nb, and compare
every output with the stored one, glued values included. That kernel sets
``NORMS_GLUE_RECORD=1``: then, and only then, ``glue`` writes the same hidden
record myst-nb writes (a display of MIME type ``application/papermill.record/...``).

A number the prose interprets ("lower", "never diverges", "higher in 5 of 5 seeds") carries
its claim: ``glue("bn-hi", v, below="plain-lo")`` also glues ``bn-hi.claim``, and so does
``glue("ln-wins", 5, paired=("ln-acc", "dyt-acc"))`` (5 is the number of seeds where the
stored per-seed values of ``ln-acc`` are higher than those of ``dyt-acc``;
:func:`norms.lab.seeds.glue_comparison` writes these). :func:`check_claims` re-checks every
such claim of a notebook from its stored outputs (``tests/test_claims.py`` does it for every
chapter), so a re-executed chapter whose numbers no longer support its sentences fails
``make test``.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any

__all__ = ["check_claims", "glue", "stored_text"]

_GLUE_PREFIX = "application/papermill.record/"  # myst_nb.ext.glue.GLUE_PREFIX
_CLAIM_SUFFIX = ".claim"  # the key of the claim glued with a value
_RELATIONS = {"below": float.__lt__, "above": float.__gt__}


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rounded(value: Any, digits: int) -> Any:
    """``value`` (a real number, or a sequence of them) to ``digits`` significant digits."""
    if digits < 1:
        raise ValueError(f"digits needs digits >= 1, got {digits}")
    if isinstance(value, (list, tuple)) and value and all(_is_real(v) for v in value):
        return tuple(float(f"{v:.{digits}g}") for v in value)
    if not _is_real(value):
        raise ValueError(
            f"digits needs a real number (or a sequence of them) and digits >= 1, got "
            f"{value!r}, {digits}"
        )
    return float(f"{value:.{digits}g}")


def _claim(name: str, value: Any, claim: dict) -> dict:
    """Check the arguments of a claim; false numeric claims fail at once."""
    if "paired" in claim:
        pair = claim["paired"]
        if not (isinstance(value, int) and not isinstance(value, bool)) or value < 0:
            raise ValueError(f"a paired claim needs a count of seeds, got {value!r}")
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"paired takes two glue keys, got {pair!r}")
        if not all(isinstance(k, str) for k in pair):
            raise ValueError(f"paired takes two glue keys, got {pair!r}")
        claim["paired"] = list(pair)
    if "apart" in claim and not isinstance(claim["apart"], bool):
        raise ValueError(f"apart is True or False, got {claim['apart']!r}")
    if "apart" in claim and "paired" not in claim:
        raise ValueError("apart is a claim about the two spreads of a paired claim")
    for relation in ("below", "above"):
        if relation not in claim:
            continue
        other = claim[relation]
        if not _is_real(value):
            raise ValueError(f"a claim needs a real number, got {value!r}")
        if not isinstance(other, (str, int, float)):
            raise ValueError(f"below/above take a glue key or a number, got {claim!r}")
        if not isinstance(other, str) and not _RELATIONS[relation](float(value), float(other)):
            raise ValueError(f"claim {name} {relation} {other!r} is false: {value!r}")
    return claim


def glue(
    name: str,
    value: Any,
    display: bool = False,
    digits: int | None = None,
    *,
    below: str | float | None = None,
    above: str | float | None = None,
    paired: tuple[str, str] | None = None,
    apart: bool | None = None,
) -> None:
    """Store ``value`` under ``name`` for the text of the page.

    Args:
        name: the key the text refers to, e.g. ``{glue:text}`bn-max-err:.1e```.
        value: the value; numbers, strings and figures all work, and a
            :class:`~norms.lab.seeds.Spread` is stored as its tuple of per-seed values. A
            string with a Chinese twin (``value.zh``, e.g. :func:`~norms.lab.seeds.verdict`'s)
            also glues the twin, as ``name.zh``, for the Chinese edition's text.
        display: also show the value where the cell is (as myst-nb's ``glue`` does).
        digits: store a real number (or each number of a sequence) rounded to this many
            significant digits: the precision the computation supports. The digits after
            them are rounding noise that differs between CPUs (SIMD width, thread count),
            and the stored value is compared by the tests; the text must not show more
            digits than this.
        below, above: the claim the text makes about the (stored) value: it is below
            (above) the glued value of that key, or that number. Glued as ``name.claim``
            and re-checked from the stored outputs by :func:`check_claims`.
        paired: two glue keys of per-seed values ``(a, b)``, paired by position: the claim
            that ``value`` is the number of seeds where ``a``'s value is higher than ``b``'s.
        apart: with ``paired``: the claim that the min–max ranges of ``a`` and ``b`` do
            (``True``) or do not (``False``) stay apart.

    Example:
        >>> glue("answer", 42)  # shows nothing; the page text can now use it
    """
    if hasattr(value, "values") and hasattr(value, "seeds"):  # a Spread: its per-seed values
        value = tuple(value.values)
    if isinstance(value, str) and isinstance(getattr(value, "zh", None), str):
        glue(f"{name}.zh", value.zh)  # a sentence's Chinese twin, for the Chinese edition
        value = str(value)
    if digits is not None:
        value = _rounded(value, digits)
    given = {"below": below, "above": above, "paired": paired, "apart": apart}
    claim = {k: v for k, v in given.items() if v is not None}
    if claim:
        claim = _claim(name, value, claim)
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


def stored_text(notebook: dict) -> dict[str, str]:
    """The text/plain of every value an executed notebook (a dict as in the .ipynb) glued,
    by key, as myst-nb stores it (the Chinese edition pastes these into its text)."""
    texts = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get(_GLUE_PREFIX + "text/plain")
            if name is not None and text is not None:
                texts[name] = "".join(text) if isinstance(text, list) else text
    return texts


def _stored_values(notebook: dict) -> dict[str, Any]:
    """Every glued value of an executed notebook, by key (a figure or an object as its text)."""
    values = {}
    for name, text in stored_text(notebook).items():
        try:
            values[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            values[name] = text  # a figure or an object: not a number
    return values


def _paired_problems(name: str, value: Any, claim: dict, values: dict) -> list[str]:
    """What is wrong with a paired claim (see :func:`glue`'s ``paired`` and ``apart``)."""
    key_a, key_b = claim["paired"]
    a, b = values.get(key_a), values.get(key_b)
    if not all(isinstance(s, (list, tuple)) and s and all(map(_is_real, s)) for s in (a, b)):
        return [f"{name}: {key_a} and {key_b} have no stored per-seed numbers"]
    if len(a) != len(b):
        return [f"{name}: {key_a} has {len(a)} seeds, {key_b} has {len(b)}: not paired"]
    problems = []
    count = sum(x > y for x, y in zip(a, b, strict=True))
    if value != count:
        problems.append(f"{name} = {value!r} but {key_a} is higher than {key_b} in {count} seeds")
    if "apart" in claim:
        apart = min(a) > max(b) or min(b) > max(a)
        if claim["apart"] != apart:
            problems.append(
                f"{name}: the ranges of {key_a} and {key_b} are "
                f"{'apart' if apart else 'overlapping'}, the claim says otherwise"
            )
    return problems


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
        claim = json.loads(claim)
        if "paired" in claim:
            problems += _paired_problems(name, value, claim, values)
            continue
        for relation, other in claim.items():
            bound = values.get(other) if isinstance(other, str) else other
            reference = f"{other} = {bound!r}" if isinstance(other, str) else repr(other)
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                problems.append(f"{name} {relation} {other}: {other!r} has no stored number")
            elif not _RELATIONS[relation](float(value), float(bound)):
                problems.append(f"{name} = {value!r} is not {relation} {reference}")
    return problems
