"""The cells of a reduction figure (:mod:`norms.plots.reductions`): their names, read back.

Every cell is one :class:`matplotlib.patches.Polygon` whose ``gid`` names its
coordinates in the folded tensor (:func:`cell_gid`). :func:`drawn_cells` and
:func:`highlighted_cells` read a figure back from those artists, which is how the tests
check a drawing.
"""

from __future__ import annotations

import re

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from .style import HIGHLIGHT_COLOR

__all__ = ["cell_gid", "drawn_cells", "highlighted_cells"]


_CELL_GID = re.compile(r"cell-(\d+)-(\d+)-(\d+)")


def cell_gid(a: int, b: int, c: int, face: str = "") -> str:
    """The ``gid`` of the polygon of cell ``(a, b, c)``: ``"cell-a-b-c"`` for its front face,
    ``"cell-a-b-c-top"`` / ``"-side"`` for the shading faces of the block."""
    return f"cell-{a}-{b}-{c}" + (f"-{face}" if face else "")


def _cell_axes(fig_or_ax: Figure | Axes) -> Axes:
    if isinstance(fig_or_ax, Axes):
        return fig_or_ax
    with_cells = [ax for ax in fig_or_ax.axes if any(_is_cell(a) for a in ax.patches)]
    if len(with_cells) != 1:
        raise ValueError(
            f"the figure has {len(with_cells)} panels with cells, not exactly one; "
            "pass one of fig.axes"
        )
    return with_cells[0]


def _is_cell(artist) -> bool:
    gid = artist.get_gid()
    return isinstance(gid, str) and _CELL_GID.fullmatch(gid) is not None


def drawn_cells(fig_or_ax: Figure | Axes) -> dict[tuple[int, int, int], tuple[float, ...]]:
    """The cells of a reduction figure and the RGBA colour each is filled with.

    Read from the drawn artists: every polygon whose ``gid`` is
    ``"cell-a-b-c"`` (front faces; the shading faces end in ``-top``/``-side``).

    Args:
        fig_or_ax: a figure with one reduction panel, or the panel's axes.

    Returns:
        ``{(a, b, c): rgba}`` in the folded coordinates of the drawing: block
        ``(n, c, s)`` with ``s`` the folded spatial index, panels ``(panel, row, col)``.

    Example:
        >>> import norms
        >>> from norms.plots.reductions import plot_reduction
        >>> cells = drawn_cells(plot_reduction(norms.LayerNorm(8), (2, 4, 8)))
        >>> len(cells)
        64
    """
    ax = _cell_axes(fig_or_ax)
    cells = {}
    for patch in ax.patches:
        match = _CELL_GID.fullmatch(str(patch.get_gid()))
        if match:
            cells[tuple(int(g) for g in match.groups())] = tuple(patch.get_facecolor())
    return cells


def highlighted_cells(fig_or_ax: Figure | Axes) -> set[tuple[int, int, int]]:
    """Coordinates of the cells filled with :data:`HIGHLIGHT_COLOR`.

    Args:
        fig_or_ax: a figure with one reduction panel, or the panel's axes.

    Returns:
        the set of ``(a, b, c)`` folded coordinates (see :func:`drawn_cells`).

    Example:
        >>> import norms
        >>> from norms.plots.reductions import plot_reduction
        >>> fig = plot_reduction(norms.BatchNorm2d(3), (2, 3, 2, 2))
        >>> sorted(highlighted_cells(fig))
        [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 0, 3)]
    """
    target = np.array(to_rgba(HIGHLIGHT_COLOR))
    return {
        coords
        for coords, rgba in drawn_cells(fig_or_ax).items()
        if np.allclose(rgba, target, atol=1e-6)
    }
