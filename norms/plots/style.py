"""The figure class every plotting function in ``norms`` returns.

Figures are made without pyplot, so they never sit in pyplot's figure manager (no
figure to close, nothing the inline backend shows twice). A plain
:class:`matplotlib.figure.Figure` made this way has no rich display of its own: in a
fresh kernel where pyplot was never imported, IPython would print ``<Figure ...>``
instead of the picture. :class:`BookFigure` adds ``_repr_png_``, so returning it
from a cell shows the figure in Jupyter, Colab, nbclient and myst-nb alike.
"""

from __future__ import annotations

import io
import math

import numpy as np
from matplotlib.figure import Figure

__all__ = [
    "BookFigure",
    "DPI",
    "HIGHLIGHT_COLOR",
    "OKABE_ITO",
    "axes_grid",
    "axes_row",
    "png_bytes",
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
"""Resolution of every figure the book shows (readable at the book's width)."""


def png_bytes(fig: Figure, dpi: int = DPI) -> bytes:
    """``fig`` rendered as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


class BookFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that IPython displays as a PNG."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)

    def __repr__(self) -> str:
        return f"<Figure size {self.get_figwidth():g}x{self.get_figheight():g} in>"


def axes_grid(axes, count: int, figsize: tuple[float, float], ncols: int | None = None):
    """``(figure, count axes, spare axes)``: the given axes, or a new grid of them.

    A new grid has ``ncols`` columns (default: one row); the cells it has
    beyond ``count`` are returned, switched off, as spare axes.
    """
    if axes is not None:
        axes = list(np.ravel(axes))
        if len(axes) < count:
            raise ValueError(f"need {count} axes, got {len(axes)}")
        return axes[0].figure, axes[:count], []
    ncols = ncols or count
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
