r"""The ipywidgets front end of the explorers (Jupyter, Colab), drawn with :mod:`norms.plots`.

Each explorer of :mod:`norms.explore.explorers` is an :class:`Explorer`: an ``ipywidgets.VBox``
holding the controls, a status line, an error line and an ``Output`` with the figure. It is drawn
once when built and again whenever a control changes. Nothing is displayed on import or on
construction: put the explorer last in a cell (or call ``display(explorer)``).

* :func:`reduction_explorer`: pick a norm, an input shape, the groups; see
  which elements share a statistic (:func:`norms.plots.plot_reduction`).
* :func:`running_stats_explorer`: BatchNorm's running mean and variance over
  training steps for a momentum (or ``None``, a cumulative average), and how
  eval-mode output then differs from train-mode output.
* :func:`batch_size_explorer`: how much BatchNorm's output for one fixed sample
  moves with the other samples in its batch, next to LayerNorm and GroupNorm.

A bad choice (groups that do not divide the channels, a shape of the wrong
rank, a batch of one in training) shows the layer's own error message in red
instead of a traceback.

Labels and the sentences with the numbers are in the reader's language when the explorer
is built (:func:`norms.get_language`; ``norms.set_language("zh")`` or ``NORMS_LANG=zh``).

The controls are exposed for notebooks and tests as ``explorer.controls``
(a dict of widgets by name); setting ``.value`` on one redraws::

    explorer = reduction_explorer()
    explorer.controls["groups"].value = 3
    explorer.info.value      # the numbers shown, as HTML

Figures are :class:`norms.plots.style.BookFigure` objects made without pyplot, so
they are never registered with pyplot's figure manager (nothing to close, no
leak, and the inline backend never shows them a second time). They are
rendered to PNG into the ``Output``.

On the static website there is no kernel: the same output carries the website's
version of the explorer (:mod:`norms.explore.web`), which needs none.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import ipywidgets as widgets
from matplotlib.figure import Figure

from norms.axes import describe
from norms.lab.simulations import DEFAULT_BATCH_SIZES, simulate_batch_noise, simulate_running_stats
from norms.plots import plot_batch_size, plot_reduction, plot_running_stats
from norms.plots.reductions import check_drawable
from norms.plots.style import BookFigure, png_bytes

from .state import (
    LAST_DIMS_NORMS,
    batch_size_info,
    build_module,
    error_html,
    parse_shape,
    running_stats_info,
    stat_html,
)

__all__ = [
    "Explorer",
    "STYLE",
    "draw_batch_size",
    "draw_reduction",
    "draw_running_stats",
    "values_of",
]

STYLE = {"description_width": "initial"}


# --------------------------------------------------------------------------
# The explorer container
# --------------------------------------------------------------------------


def _png_output(fig: Figure) -> dict:
    """An nbformat ``display_data`` output holding ``fig`` as a PNG."""
    return {
        "output_type": "display_data",
        "data": {
            "image/png": base64.b64encode(png_bytes(fig)).decode("ascii"),
            "text/plain": repr(fig),
        },
        "metadata": {},
    }


class Explorer(widgets.VBox):
    """Controls, a status line, an error line and a figure, redrawn on every change.

    Attributes:
        controls: ``{name: widget}``; set ``.value`` to change a choice.
        info: ``HTML`` with the numbers of the current state (empty after an error).
        error: ``HTML`` with the error message in red (empty when all is well).
        output: ``Output`` holding the current figure as a PNG.

    Args:
        controls: the control widgets by name, laid out in rows of ``per_row``.
        draw: ``draw(explorer) -> (figure, info_html)``; may raise, the message
            is then shown in ``error``.
        per_row: controls per row.
        web: ``web(explorer) -> HTML`` of the website version (see
            :mod:`norms.explore.web`), put in the output as ``text/html`` next to the
            widget view; e.g. ``norms.explore.web.precomputed({"name": [values...]})``.
    """

    def __init__(
        self,
        controls: dict[str, widgets.Widget],
        draw: Callable[[Explorer], tuple[Figure, str]],
        per_row: int = 3,
        web: Callable[[Explorer], str] | None = None,
    ):
        names = list(controls)
        rows = [
            widgets.HBox([controls[n] for n in names[i : i + per_row]])
            for i in range(0, len(names), per_row)
        ]
        info, error, output = widgets.HTML(), widgets.HTML(), widgets.Output()
        super().__init__(children=[*rows, info, error, output])
        self.controls = dict(controls)
        self.info, self.error, self.output = info, error, output
        self._draw = draw
        self._web = web
        self._busy = False
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.refresh()

    def _repr_mimebundle_(self, **kwargs):
        """The widget view (Jupyter, Colab) and, as ``text/html``, the same explorer for the
        website, where there is no kernel (see :mod:`norms.explore.web`)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if self._web is not None and isinstance(bundle, dict):
            bundle["text/html"] = self._web(self)
        return bundle

    def values(self) -> dict[str, object]:
        """The current value of every control."""
        return {name: control.value for name, control in self.controls.items()}

    def draw_state(self, values: dict[str, object]) -> tuple[Figure, str]:
        """``draw`` for the controls set to ``values`` (a figure and the info HTML; it may
        raise), without redrawing the explorer; the controls are put back afterwards.
        :func:`norms.explore.web.precomputed` draws the website's states with it."""
        initial = self.values()
        self._busy = True  # setting a control must not redraw the widget
        try:
            for name, value in values.items():
                self.controls[name].value = value
            return self._draw(self)
        finally:
            for name in values:
                self.controls[name].value = initial[name]
            self._busy = False

    def _on_change(self, _change: dict) -> None:
        if not self._busy:  # a control changed by draw() itself does not redraw again
            self.refresh()

    def refresh(self) -> None:
        """Redraw from the current control values; show an error instead of raising."""
        self._busy = True
        try:
            fig, info = self._draw(self)
            self.output.outputs = (_png_output(fig),)
            self.info.value, self.error.value = info, ""
        except Exception as exc:  # noqa: BLE001 - the reader sees the message, never a traceback
            self.output.outputs = ()
            self.info.value, self.error.value = "", error_html(exc)
        finally:
            self._busy = False


def values_of(explorer: Explorer, *names: str) -> list:
    return [explorer.controls[name].value for name in names]


# --------------------------------------------------------------------------
# reduction_explorer
# --------------------------------------------------------------------------


def draw_reduction(explorer: Explorer) -> tuple[Figure, str]:
    c = explorer.controls
    norm = c["norm"].value
    c["groups"].disabled = norm != "GroupNorm"
    c["last_dims"].disabled = norm not in LAST_DIMS_NORMS
    shape = parse_shape(c["shape"].value)
    module = build_module(norm, shape, c["groups"].value, c["last_dims"].value)
    check_drawable(shape)  # before describe() builds an index of every element
    reduction = describe(module, shape)
    c["highlight"].max = reduction.num_statistics - 1  # clamps the value
    fig = plot_reduction(
        module, shape, highlight=c["highlight"].value, layout=c["layout"].value, figsize=(7, 3.5)
    )
    return fig, stat_html(reduction, tuple(reduction.reduced_dims))


# --------------------------------------------------------------------------
# running_stats_explorer
# --------------------------------------------------------------------------


def draw_running_stats(explorer: Explorer) -> tuple[Figure, str]:
    c = explorer.controls
    c["momentum"].disabled = c["cumulative"].value
    momentum = None if c["cumulative"].value else float(c["momentum"].value)
    trace = simulate_running_stats(
        momentum, int(c["batch_size"].value), int(c["steps"].value), int(c["seed"].value)
    )
    fig = BookFigure(figsize=(7, 2.8), layout="constrained")
    plot_running_stats(axes=fig.subplots(1, 3), trace=trace)
    return fig, running_stats_info(trace)


# --------------------------------------------------------------------------
# batch_size_explorer
# --------------------------------------------------------------------------


def draw_batch_size(explorer: Explorer) -> tuple[Figure, str]:
    c = explorer.controls
    batch_size, trials = int(c["batch_size"].value), int(c["trials"].value)
    sizes = tuple(sorted({*DEFAULT_BATCH_SIZES, batch_size}))
    noise = simulate_batch_noise(
        sizes, trials, int(c["channels"].value), int(c["groups"].value), seed=int(c["seed"].value)
    )
    fig = BookFigure(figsize=(7, 3.0), layout="constrained")
    plot_batch_size(batch_size, axes=fig.subplots(1, 2), noise=noise)
    return fig, batch_size_info(noise, batch_size)
