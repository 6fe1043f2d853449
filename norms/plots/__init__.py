"""Figures: one module per figure family, one shared style (:mod:`norms.plots.style`).

* :mod:`~norms.plots.reductions`, :mod:`~norms.plots.comparisons`: which elements
  share a statistic, drawn from :func:`norms.axes.describe`, for one norm or several;
* :mod:`~norms.plots.running_stats`, :mod:`~norms.plots.batch_noise`: the two
  simulations of :mod:`norms.lab.simulations`;
* :mod:`~norms.plots.training`, :mod:`~norms.plots.transformer`,
  :mod:`~norms.plots.speed`, :mod:`~norms.plots.sync`: the figures of one chapter each.

Every function takes ``ax=None`` (or ``axes=None``) and returns the figure, a
:class:`~norms.plots.style.BookFigure` made without pyplot.
"""

from ..lazy import lazy_submodules
from .batch_noise import plot_batch_size
from .comparisons import comparison_modules, plot_comparison, plot_sequence_comparison
from .reductions import drawn_cells, highlighted_cells, plot_reduction
from .running_stats import plot_running_stats
from .style import HIGHLIGHT_COLOR, OKABE_ITO, BookFigure

__all__ = [
    "HIGHLIGHT_COLOR",
    "OKABE_ITO",
    "BookFigure",
    "comparison_modules",
    "drawn_cells",
    "highlighted_cells",
    "plot_batch_size",
    "plot_comparison",
    "plot_reduction",
    "plot_running_stats",
    "plot_sequence_comparison",
]


# a submodule loads on first use: ``norms.plots.x`` works after ``import norms``
__getattr__ = lazy_submodules(__name__)
