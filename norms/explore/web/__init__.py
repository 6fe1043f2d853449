r"""The book's explorers on the static website: controls that work without a kernel.

Design note
-----------
On the website there is no Python, so an explorer has to move in the browser.
Two ways were possible: re-render each state with matplotlib ahead of time (the
same plotting code, but one PNG per state: the reduction explorer alone has
thousands of states over N ≤ 4, C ≤ 8, spatial sizes ≤ 4, every group count and
nine norms, far beyond the 3 MB page budget and the notebooks' time budget), or
ship the *data* of the states and draw it in the browser. The book does the
second, with one small self-written script (:file:`norms/explore/web/explorer.js`, inlined
into the output; no third-party code, nothing loaded from another host):

* **reduction explorer** — the page carries a rule table exported from
  :func:`norms.axes.describe` (for each norm and rank: the dims that index the
  statistics, GroupNorm's channel blocks, γ/β dims) and the exact error messages
  of the invalid choices, produced by the kernel code itself. The script turns
  the rule into statistic ids for any shape in the grid; ``tests/test_web.py``
  runs it under node and compares it with ``describe(...).statistic_index``,
  the numbers and the messages on many shapes, so "which axes" is still defined
  once, in :mod:`norms.axes`.
* **running-statistics and batch-size explorers** — every state of a bounded
  grid is simulated by :mod:`norms.plots` (the same functions the kernel version
  calls) and shipped as the curves and dots to draw plus the numbers as the
  kernel version formats them (the same ``*_info`` functions of
  :mod:`norms.explore.widgets`); the script only draws and switches.
* **any other explorer** — ``Explorer(controls, draw, web=norms.explore.web.precomputed(grid))``
  precomputes every state of a small grid through the explorer's own ``draw``
  (figure as PNG, numbers, error; :func:`states_payload`), so a new explorer works
  on the site with no JavaScript of its own.

**Languages.** Every word an explorer shows (control labels, legends, titles, the
sentences with the numbers, notes, messages) is made by :func:`norms.i18n.tr` from a
template of the catalogs and ships in the payload as ``{"en": ..., "zh": ...}`` (only the
reader's language when one was set with :func:`norms.set_language`); the script shows the
language :func:`norms.i18n.js_language` gives the container: the page's ``<html lang>``, or
the language of the Chinese notebook. The script's own text is maths and names only.
An exception's message is shown as Python gives it (torch's words stay torch's).

The same :class:`norms.explore.widgets.Explorer` object is shown in Jupyter and Colab as
the ipywidgets view (a live kernel) and on the website as its ``text/html``
counterpart: :meth:`~norms.explore.widgets.Explorer._repr_mimebundle_` puts both in the
output and the site prefers ``text/html`` (``nb_mime_priority_overrides`` in
``_config.yml``). States outside the grid say so and point to Colab.
"""

from __future__ import annotations

from .page import html, script
from .payloads import (
    batch_size_payload,
    precomputed,
    reduction_payload,
    reduction_tables,
    running_stats_payload,
    states_payload,
)

__all__ = [
    "html",
    "script",
    "reduction_payload",
    "reduction_tables",
    "running_stats_payload",
    "batch_size_payload",
    "states_payload",
    "precomputed",
]
