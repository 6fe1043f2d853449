"""Put a computed value into the book's text, with or without Jupyter Book.

On the website, ``glue("name", value)`` stores ``value`` so that the prose can show
it with ``{glue:text}`name:.3f``` (myst-nb's glue). In Colab or plain Jupyter, where
myst-nb is not installed, the same call still works: it just shows nothing (or the
value, with ``display=True``), so a notebook runs the same everywhere.

The tests run the notebooks in a Colab-like kernel, without myst-nb, and compare
every output with the stored one, glued values included. That kernel sets
``NORMS_GLUE_RECORD=1``: then, and only then, ``glue`` writes the same hidden
record myst-nb writes (a display of MIME type ``application/papermill.record/...``).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["glue"]

_GLUE_PREFIX = "application/papermill.record/"  # myst_nb.ext.glue.GLUE_PREFIX


def glue(name: str, value: Any, display: bool = False, digits: int | None = None) -> None:
    """Store ``value`` under ``name`` for the text of the page.

    Args:
        name: the key the text refers to, e.g. ``{glue:text}`bn-max-err:.1e```.
        value: the value; numbers, strings and figures all work.
        display: also show the value where the cell is (as myst-nb's ``glue`` does).
        digits: store a real number rounded to this many significant digits: the precision
            the computation supports. The digits after them are rounding noise that differs
            between CPUs (SIMD width, thread count), and the stored value is compared by the
            tests; the text must not show more digits than this.

    Example:
        >>> glue("answer", 42)  # shows nothing; the page text can now use it
    """
    if digits is not None:
        if digits < 1 or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"digits needs a real number and digits >= 1, got {value!r}, {digits}")
        value = float(f"{value:.{digits}g}")
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
