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

from matplotlib.figure import Figure

__all__ = ["BookFigure", "DPI", "png_bytes"]

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
