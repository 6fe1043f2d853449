"""The figure class every plotting function in ``norms`` returns.

Figures are made without pyplot, so they never sit in pyplot's figure manager (no
figure to close, nothing the inline backend shows twice). A plain
:class:`matplotlib.figure.Figure` made this way has no rich display of its own: in a
fresh kernel where pyplot was never imported, IPython would print ``<Figure ...>``
instead of the picture. :class:`BookFigure` adds ``_repr_png_``, so returning it
from a cell shows the figure in Jupyter, Colab, nbclient and myst-nb alike.

Every figure is shown the same way, on any screen:

* **Sharp.** The PNG has ``SCALE`` (2) device pixels per CSS pixel, and its output
  metadata gives the width to show it at (``DPI`` CSS pixels per inch, as Jupyter's
  "retina" format does), so it stays sharp on a high-density screen and when zoomed.
* **Legible.** The book's text column is ``COLUMN_PX`` wide at a 1280-pixel window; a
  wider figure is shrunk to fit it. Before it is drawn, every text of the figure is
  raised to at least ``MIN_TEXT_PX`` CSS pixels *as shown* (:func:`make_legible`), so
  no tick label or legend is smaller than the page's small print.
* **Described.** The PNG carries its alternative text (:func:`describe`: the figure's
  titles, axis labels and legend entries) as its ``Description``; the site's build
  (``tools/sphinx_local/figures.py``) makes it the ``alt`` of the ``<img>``.
* **Reproducible.** Agg rasterises deterministically; the PNG's metadata holds no date.

In IPython (Jupyter, Colab, nbclient) a figure drawn with pyplot is shown the same way:
once this module is imported, pyplot's new figures are BookFigures (``figure.hooks``).
"""

from __future__ import annotations

import io
import math
import re

import numpy as np
from matplotlib.figure import Figure
from matplotlib.text import Text

__all__ = [
    "BookFigure",
    "DPI",
    "HIGHLIGHT_COLOR",
    "OKABE_ITO",
    "COLUMN_PX",
    "MAX_ROW_INCHES",
    "MIN_TEXT_PX",
    "SCALE",
    "axes_grid",
    "axes_row",
    "book_png",
    "describe",
    "make_legible",
    "min_fontsize",
    "png_bytes",
    "shown_scale",
    "smallest_text_px",
]

#: Okabe & Ito (2008), "Color Universal Design": orange, sky blue, bluish green,
#: yellow, blue, vermillion, reddish purple, black. Every figure draws from it.
OKABE_ITO: tuple[str, ...] = (
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
    "#000000",
)

#: The highlighted statistic of a reduction figure (Okabe–Ito vermillion).
HIGHLIGHT_COLOR = OKABE_ITO[5]

DPI = 100
"""CSS pixels per inch of figure: a figure ``w`` inches wide is shown ``100 w`` pixels wide
(at most the text column's width)."""

SCALE = 2
"""Device pixels per CSS pixel of a stored figure: sharp on a high-density screen."""

COLUMN_PX = 680
"""The width a figure gets in the book's text column at a 1280-pixel window (the column is
688 px; tests/browser/test_layout.py checks that figures are shown at least this wide)."""

MIN_TEXT_PX = 9.0
"""The smallest text a figure may show, in CSS pixels where it is shown at 1280 pixels."""


def shown_scale(fig: Figure) -> float:
    """How much the site shrinks ``fig``: 1 when it fits the text column."""
    return min(1.0, COLUMN_PX / (fig.get_figwidth() * DPI))


def min_fontsize(fig: Figure) -> float:
    """The smallest font size (points) that is ``MIN_TEXT_PX`` CSS pixels where ``fig`` is
    shown (a point is ``DPI / 72`` CSS pixels before the column shrinks the figure)."""
    return MIN_TEXT_PX / shown_scale(fig) * 72 / DPI


def _texts(fig: Figure) -> list[Text]:
    """Every text ``fig`` draws: titles, labels, tick labels (of axes that show them),
    annotations and legends."""
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel, *fig.texts]
    texts += [t for legend in fig.legends for t in legend.get_texts()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                if axis.get_visible():
                    texts += [axis.label, axis.offsetText]
                    texts += axis.get_ticklabels(which="both")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            texts += [legend.get_title(), *legend.get_texts()]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text().strip()]


def smallest_text_px(fig: Figure) -> float:
    """The size in CSS pixels, as shown at 1280 pixels, of ``fig``'s smallest visible text."""
    fig.canvas.draw()  # tick labels exist once drawn
    sizes = [t.get_fontsize() for t in _texts(fig)]
    return min(sizes, default=math.inf) * DPI / 72 * shown_scale(fig)


def make_legible(fig: Figure) -> Figure:
    """Raise every text of ``fig`` smaller than :func:`min_fontsize` to it (tick labels,
    legends, annotations and titles alike); larger text is left as drawn. Returns ``fig``."""
    floor = min_fontsize(fig)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                ticks = axis.get_major_ticks() if which == "major" else axis.get_minor_ticks()
                size = ticks[0].label1.get_fontsize() if ticks else floor
                if size < floor:
                    axis.set_tick_params(which=which, labelsize=floor)
    fig.canvas.draw()
    for text in _texts(fig):
        if text.get_fontsize() < floor:
            text.set_fontsize(floor)
    return fig


def describe(fig: Figure) -> str:
    """The figure's alternative text: what it shows, from its own words (the suptitle, each
    panel's title, axis labels and legend entries)."""
    parts = []
    if getattr(fig, "_suptitle", None) is not None and fig._suptitle.get_text().strip():
        parts.append(fig._suptitle.get_text().strip())
    panels = [ax for ax in fig.axes if ax.get_visible() and (ax.axison or ax.get_title())]
    for ax in panels:
        what = [ax.get_title(loc).strip() for loc in ("left", "center", "right")]
        what = [" ".join(w.split()) for w in what if w]
        labels = (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if ax.axison else ()
        axes = [f"{name}: {label}" for name, label in labels if label.strip()]
        legend = ax.get_legend()
        entries = [t.get_text() for t in legend.get_texts()] if legend is not None else []
        if entries:
            axes.append("key: " + ", ".join(entries))
        piece = "; ".join(what + axes)
        if piece:
            parts.append(piece)
    for legend in fig.legends:
        entries = [t.get_text() for t in legend.get_texts()]
        if entries:
            parts.append("key: " + ", ".join(entries))
    count = len(panels)
    head = "Figure" if count <= 1 else f"Figure with {count} panels"
    text = ". ".join(parts)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text).replace("$", "")  # "$\\epsilon$": "epsilon"
    return f"{head}: {text}" if text else head


def png_bytes(fig: Figure, dpi: float = DPI, description: str | None = None) -> bytes:
    """``fig`` rendered as PNG bytes (with ``description`` as its PNG ``Description``)."""
    buffer = io.BytesIO()
    metadata = {"Description": description} if description else None
    fig.savefig(buffer, format="png", dpi=dpi, metadata=metadata)
    return buffer.getvalue()


class BookFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that IPython displays as a sharp, legible PNG."""

    def _repr_png_(self) -> tuple[bytes, dict]:
        """PNG bytes at ``SCALE`` times the shown size, and the width to show them at."""
        return book_png(self)

    def __repr__(self) -> str:
        return f"<Figure size {self.get_figwidth():g}x{self.get_figheight():g} in>"


MAX_ROW_INCHES = 9.0
"""A new row of panels wider than this wraps onto more rows (:func:`axes_grid`): shrunk into
the text column, a wider row's panels would be too small to read."""


def axes_grid(axes, count: int, figsize: tuple[float, float], ncols: int | None = None):
    """``(figure, count axes, spare axes)``: the given axes, or a new grid of them.

    A new grid has ``ncols`` columns (default: one row, wrapped onto as many rows as
    needed when that row would be wider than ``MAX_ROW_INCHES``; ``figsize`` is then
    the size of one row of panels); the cells it has beyond ``count`` are returned,
    switched off, as spare axes.
    """
    if axes is not None:
        axes = list(np.ravel(axes))
        if len(axes) < count:
            raise ValueError(f"need {count} axes, got {len(axes)}")
        return axes[0].figure, axes[:count], []
    if ncols is None:
        ncols = count
        width, height = figsize
        if width > MAX_ROW_INCHES and count > 1:
            panel = width / count
            ncols = max(1, min(count, int(MAX_ROW_INCHES // panel)))
            figsize = (panel * ncols, height * math.ceil(count / ncols))
    nrows = math.ceil(count / ncols)
    fig = BookFigure(figsize=figsize, layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False)
    flat = list(grid.ravel())
    for extra in flat[count:]:
        extra.set_axis_off()
    return fig, flat[:count], flat[count:]


def axes_row(axes, count: int, figsize: tuple[float, float]):
    """``(figure, count axes)``: the given axes, or a new row of ``count`` of them."""
    fig, used, _ = axes_grid(axes, count, figsize)
    return fig, used


def book_png(fig: Figure) -> tuple[bytes, dict]:
    """Any figure as :class:`BookFigure` shows itself: legible, at twice its resolution, with
    the width to show it at and its description."""
    make_legible(fig)
    data = png_bytes(fig, dpi=DPI * SCALE, description=describe(fig))
    return data, {"width": round(fig.get_figwidth() * DPI)}


def as_book_figure(fig: Figure) -> None:
    """A ``figure.hooks`` entry: a figure pyplot makes becomes a :class:`BookFigure` (the same
    figure; the class adds only how it is shown)."""
    if type(fig) is Figure:
        fig.__class__ = BookFigure


_HOOK = f"{__name__}:as_book_figure"


def _ipython_setup() -> None:
    """In IPython, every figure shows as :func:`book_png` makes it, pyplot's too: the printer
    is registered for :class:`BookFigure` (pyplot's inline backend registers its own for
    ``Figure`` only, and a subclass's printer comes first), and pyplot's new figures become
    BookFigures (matplotlib's ``figure.hooks``)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    shell.display_formatter.formatters["image/png"].for_type(BookFigure, book_png)
    import matplotlib

    if _HOOK not in matplotlib.rcParams["figure.hooks"]:
        matplotlib.rcParams["figure.hooks"] = [*matplotlib.rcParams["figure.hooks"], _HOOK]


_ipython_setup()
