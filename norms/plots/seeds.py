"""The figure of several :class:`norms.lab.seeds.Spread` s: one dot per seed, the min–max
range as a line, the mean as a tick, so that a reader sees whether two settings differ by
more than the seeds do.

Example:
    >>> from norms.lab.seeds import over_seeds
    >>> fig = plot_spreads({"a": over_seeds(lambda s: 0.9 + 0.01 * s)})
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..lab.seeds import Spread
from .style import OKABE_ITO, axes_row

__all__ = ["plot_spreads"]


def plot_spreads(
    spreads: Mapping[str, Spread],
    ax: Axes | None = None,
    xlabel: str = "",
    title: str = "",
    percent: bool = True,
    colors: Mapping[str, str] | None = None,
    figsize: tuple[float, float] = (6, 0.5 + 0.45 * 4),
) -> Figure:
    """One row per setting (``spreads[label]``): every seed's value as a dot, the min–max
    range as a line, the mean as a vertical tick, written at the right of the row.

    Args:
        spreads: label → :class:`~norms.lab.seeds.Spread`, drawn top to bottom.
        ax: axes to draw on (default: a new figure).
        xlabel, title: labels of the axes.
        percent: show values ×100 (accuracies).
        colors: label → colour (default: the Okabe–Ito palette in order).
    """
    if not spreads:
        raise ValueError("plot_spreads needs at least one spread")
    fig, (ax,) = axes_row(None if ax is None else [ax], 1, figsize)
    scale = 100.0 if percent else 1.0
    labels = list(spreads)
    for row, label in enumerate(labels):
        s = spreads[label]
        y = len(labels) - 1 - row
        color = (colors or {}).get(label, OKABE_ITO[row % (len(OKABE_ITO) - 1)])
        ax.plot([s.lo * scale, s.hi * scale], [y, y], color=color, lw=2, alpha=0.6)
        ax.plot([v * scale for v in s.values], [y] * s.n, "o", color=color, ms=4)
        ax.plot([s.mean * scale], [y], "|", color="black", ms=12, mew=1.5)
        text = f"{s:.1%}" if percent else f"{s:.3g}"
        ax.annotate(
            text,
            (1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=7.5,
        )
    ax.set_yticks(range(len(labels)), labels[::-1], fontsize=8)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xlabel(xlabel, fontsize=8.5)
    ax.tick_params(axis="x", labelsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return fig
