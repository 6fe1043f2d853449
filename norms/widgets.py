r"""Interactive explorers (ipywidgets 8) built on the figures of :mod:`norms.viz`.

Each function returns an :class:`Explorer`: an ``ipywidgets.VBox`` holding the
controls, a status line, an error line and an ``Output`` with the figure. It is
drawn once when built and again whenever a control changes. Nothing is
displayed on import or on construction: put the explorer last in a cell (or
call ``display(explorer)``).

* :func:`reduction_explorer`: pick a norm, an input shape, the groups; see
  which elements share a statistic (:func:`norms.viz.plot_reduction`).
* :func:`running_stats_explorer`: BatchNorm's running mean and variance over
  training steps for a momentum (or ``None``, a cumulative average), and how
  eval-mode output then differs from train-mode output.
* :func:`batch_size_explorer`: how much BatchNorm's output for one fixed sample
  moves with the other samples in its batch, next to LayerNorm and GroupNorm.

A bad choice (groups that do not divide the channels, a shape of the wrong
rank, a batch of one in training) shows the layer's own error message in red
instead of a traceback.

The controls are exposed for notebooks and tests as ``explorer.controls``
(a dict of widgets by name); setting ``.value`` on one redraws::

    explorer = reduction_explorer()
    explorer.controls["groups"].value = 3
    explorer.info.value      # the numbers shown, as HTML

Figures are :class:`norms.figure.BookFigure` objects made without pyplot, so
they are never registered with pyplot's figure manager (nothing to close, no
leak, and the inline backend never shows them a second time). They are
rendered to PNG into the ``Output``.

On the static website there is no kernel and the controls do nothing; the
chapters show the static counterparts there: :func:`norms.viz.plot_reduction_grid`,
:func:`norms.viz.static_running_stats` and :func:`norms.viz.static_batch_size`.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from norms.axes import describe
from norms.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from norms.figure import BookFigure, png_bytes
from norms.groupnorm import GroupNorm
from norms.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from norms.layernorm import LayerNorm
from norms.rmsnorm import RMSNorm
from norms.viz import (
    DEFAULT_BATCH_SIZES,
    plot_batch_size,
    plot_reduction,
    plot_running_stats,
    simulate_batch_noise,
    simulate_running_stats,
)

__all__ = [
    "Explorer",
    "NORM_CHOICES",
    "build_module",
    "parse_shape",
    "reduction_explorer",
    "running_stats_explorer",
    "batch_size_explorer",
]

_ERROR_COLOR = "#B3261E"
_STYLE = {"description_width": "initial"}

_CHANNEL_NORMS: dict[str, type[torch.nn.Module]] = {
    "BatchNorm1d": BatchNorm1d,
    "BatchNorm2d": BatchNorm2d,
    "BatchNorm3d": BatchNorm3d,
    "InstanceNorm1d": InstanceNorm1d,
    "InstanceNorm2d": InstanceNorm2d,
    "InstanceNorm3d": InstanceNorm3d,
}
_LAST_DIMS_NORMS: dict[str, type[torch.nn.Module]] = {"LayerNorm": LayerNorm, "RMSNorm": RMSNorm}

#: The norms offered by :func:`reduction_explorer`.
NORM_CHOICES: tuple[str, ...] = (
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
)


# --------------------------------------------------------------------------
# Building a module from the controls' values
# --------------------------------------------------------------------------


def parse_shape(text: str) -> tuple[int, ...]:
    """Read a shape typed by a reader: ``"4, 6, 2, 2"``, ``"(4,6,2,2)"``, ``"4x6x2x2"``.

    Args:
        text: the typed shape.

    Returns:
        the shape as a tuple of ints.

    Raises:
        ValueError: no sizes, or a size of 0, or anything but sizes and separators.

    Example:
        >>> parse_shape("(4, 6, 2x2)")
        (4, 6, 2, 2)
    """
    if not re.fullmatch(r"[\s,()\[\]x×*0-9]*", text):
        raise ValueError(
            f"could not read a shape from {text!r}: type sizes separated by commas, e.g. 4, 6, 2, 2"
        )
    sizes = tuple(int(s) for s in re.findall(r"\d+", text))
    if not sizes:
        raise ValueError("type a shape, e.g. 4, 6, 2, 2")
    if 0 in sizes:
        raise ValueError(f"every size must be at least 1, got {sizes}")
    return sizes


def _is_unbatched_instance(norm: str, ndim: int) -> bool:
    return norm.startswith("InstanceNorm") and ndim == int(norm[-2]) + 1


def build_module(
    norm: str, input_shape: Sequence[int], groups: int = 2, last_dims: int = 1
) -> torch.nn.Module:
    """The ``norms`` module the reduction explorer shows for these choices.

    Channel counts are read from the shape: ``C`` is dim 1 (dim 0 for an
    unbatched InstanceNorm input). LayerNorm and RMSNorm normalize the last
    ``last_dims`` dims. A shape the layer rejects raises later, in
    :func:`norms.axes.describe`, with the layer's own message.

    Args:
        norm: one of :data:`NORM_CHOICES`.
        input_shape: the input shape.
        groups: GroupNorm's number of groups.
        last_dims: how many trailing dims LayerNorm / RMSNorm normalize.

    Returns:
        the module.

    Raises:
        ValueError: an unknown norm, ``last_dims`` larger than the rank, or
            groups that do not divide the channels (GroupNorm's own check).

    Example:
        >>> build_module("GroupNorm", (4, 6, 2, 2), groups=3).num_groups
        3
        >>> build_module("InstanceNorm2d", (3, 8, 8)).num_features  # unbatched (C, H, W)
        3
    """
    shape = tuple(int(s) for s in input_shape)
    if norm in _LAST_DIMS_NORMS:
        if not 1 <= last_dims <= len(shape):
            raise ValueError(
                f"{norm} over the last {last_dims} dims needs an input with at least "
                f"{last_dims} dims; {shape} has {len(shape)}"
            )
        return _LAST_DIMS_NORMS[norm](list(shape[-last_dims:]))
    if norm == "GroupNorm":
        if len(shape) < 2:
            raise ValueError(f"GroupNorm expects an (N, C, ...) input, got {len(shape)}-D {shape}")
        return GroupNorm(groups, shape[1])
    if norm not in _CHANNEL_NORMS:
        raise ValueError(f"unknown norm {norm!r}; choose one of {NORM_CHOICES}")
    channel_dim = 0 if len(shape) < 2 or _is_unbatched_instance(norm, len(shape)) else 1
    return _CHANNEL_NORMS[norm](shape[channel_dim])


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


def _error_html(exc: Exception) -> str:
    name, message = html.escape(type(exc).__name__, quote=False), html.escape(str(exc), quote=False)
    return f'<span style="color:{_ERROR_COLOR}"><b>⚠ {name}:</b> {message}</span>'


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
        web: ``web(explorer) -> payload`` for the website version (see
            :mod:`norms.web`), put in the output as ``text/html`` next to the
            widget view; e.g. ``norms.web.precomputed({"name": [values...]})``.
    """

    def __init__(
        self,
        controls: dict[str, widgets.Widget],
        draw: Callable[[Explorer], tuple[Figure, str]],
        per_row: int = 3,
        web: Callable[[Explorer], dict] | None = None,
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
        website, where there is no kernel (see :mod:`norms.web`)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if self._web is not None and isinstance(bundle, dict):
            from norms.web import html as web_html

            bundle["text/html"] = web_html(self._web(self))
        return bundle

    def values(self) -> dict[str, object]:
        """The current value of every control."""
        return {name: control.value for name, control in self.controls.items()}

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
            self.info.value, self.error.value = "", _error_html(exc)
        finally:
            self._busy = False


def _web():
    import norms.web

    return norms.web


def _values(explorer: Explorer, *names: str) -> list:
    return [explorer.controls[name].value for name in names]


# --------------------------------------------------------------------------
# reduction_explorer
# --------------------------------------------------------------------------


def _stat_html(reduction, dims: tuple[int, ...]) -> str:
    what = "means (and as many variances)" if reduction.has_mean else "RMS values (no mean)"
    params = "none" if reduction.param_shape is None else str(tuple(reduction.param_shape))
    eval_note = "yes (running statistics)" if reduction.train_eval_differ else "no"
    return (
        f"<b>{reduction.num_statistics}</b> {what}, each over "
        f"<b>{reduction.elements_per_statistic}</b> elements · reduced dims <b>{dims}</b> · "
        f"γ/β shape <b>{params}</b> · eval differs from train: {eval_note}"
    )


def _draw_reduction(explorer: Explorer) -> tuple[Figure, str]:
    c = explorer.controls
    norm = c["norm"].value
    c["groups"].disabled = norm != "GroupNorm"
    c["last_dims"].disabled = norm not in _LAST_DIMS_NORMS
    shape = parse_shape(c["shape"].value)
    module = build_module(norm, shape, c["groups"].value, c["last_dims"].value)
    reduction = describe(module, shape)
    c["highlight"].max = reduction.num_statistics - 1  # clamps the value
    fig = plot_reduction(module, shape, highlight=c["highlight"].value, layout=c["layout"].value,
                         figsize=(7, 3.5))
    return fig, _stat_html(reduction, tuple(reduction.reduced_dims))


def reduction_explorer(
    norm: str = "GroupNorm",
    input_shape: Sequence[int] = (4, 6, 2, 2),
    groups: int = 2,
    last_dims: int = 3,
    highlight: int = 0,
    layout: str = "auto",
) -> Explorer:
    """Pick a norm and an input shape; see which elements share each statistic.

    Controls (``explorer.controls``): ``norm`` (dropdown of
    :data:`NORM_CHOICES`), ``shape`` (text, e.g. ``4, 6, 2, 2``), ``groups``
    (GroupNorm), ``last_dims`` (how many trailing dims LayerNorm / RMSNorm
    normalize), ``highlight`` (which statistic is highlighted) and ``layout``.
    ``explorer.info`` shows the number of statistics, the elements per
    statistic, the reduced dims and the γ/β shape.

    Args:
        norm, input_shape, groups, last_dims, highlight, layout: initial values.

    Returns:
        the :class:`Explorer`.

    Example:
        >>> explorer = reduction_explorer()
        >>> explorer.controls["groups"].value = 3
        >>> "<b>12</b>" in explorer.info.value  # 4 samples x 3 groups
        True
    """
    controls = {
        "norm": widgets.Dropdown(options=NORM_CHOICES, value=norm, description="norm",
                                 style=_STYLE),
        "shape": widgets.Text(value=", ".join(str(s) for s in input_shape),
                              description="input shape", continuous_update=False, style=_STYLE),
        "layout": widgets.Dropdown(options=("auto", "image", "sequence"), value=layout,
                                   description="layout", style=_STYLE),
        "groups": widgets.BoundedIntText(value=groups, min=1, max=64, description="groups (GN)",
                                         style=_STYLE, layout=widgets.Layout(width="150px")),
        "last_dims": widgets.BoundedIntText(value=last_dims, min=1, max=5,
                                            description="last dims (LN, RMS)", style=_STYLE,
                                            layout=widgets.Layout(width="190px")),
        "highlight": widgets.IntSlider(value=highlight, min=0, max=max(highlight, 1000),
                                       description="highlight statistic", style=_STYLE,
                                       continuous_update=False),
    }
    return Explorer(controls, _draw_reduction, web=lambda ex: _web().reduction_payload(
        *_values(ex, "norm", "shape", "groups", "last_dims", "highlight", "layout")))


# --------------------------------------------------------------------------
# running_stats_explorer
# --------------------------------------------------------------------------


def _fmt(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


def _draw_running_stats(explorer: Explorer) -> tuple[Figure, str]:
    c = explorer.controls
    c["momentum"].disabled = c["cumulative"].value
    momentum = None if c["cumulative"].value else float(c["momentum"].value)
    trace = simulate_running_stats(momentum, int(c["batch_size"].value), int(c["steps"].value),
                                   int(c["seed"].value))
    fig = BookFigure(figsize=(7, 2.8), layout="constrained")
    plot_running_stats(axes=fig.subplots(1, 3), trace=trace)
    return fig, running_stats_info(trace)


#: The numbers beside the running-statistics figure; the website fills the same text.
RUNNING_STATS_INFO = (
    "after <b>{steps}</b> steps: running_mean <b>{running_mean}</b> (true {true_mean}) · "
    "running_var <b>{running_var}</b> (true {true_var}) · on a fresh batch, eval and train "
    "outputs differ by up to <b>{max_gap}</b>"
)


def running_stats_info(trace) -> str:
    """The numbers :func:`running_stats_explorer` shows for a :class:`norms.viz.RunningStatsTrace`."""
    return RUNNING_STATS_INFO.format(
        steps=trace.running_mean.shape[0] - 1, running_mean=_fmt(trace.running_mean[-1]),
        true_mean=_fmt(trace.true_mean), running_var=_fmt(trace.running_var[-1]),
        true_var=_fmt(trace.true_var), max_gap=f"{trace.max_gap:.3f}",
    )


def running_stats_explorer(
    momentum: float = 0.1,
    cumulative: bool = False,
    batch_size: int = 16,
    steps: int = 100,
    seed: int = 0,
) -> Explorer:
    """BatchNorm1d's running statistics over training steps, and eval vs train output.

    Controls: ``momentum`` (slider), ``cumulative`` (checkbox: ``momentum=None``,
    a plain average over all batches so far), ``batch_size``, ``steps``,
    ``seed``. See :func:`norms.viz.simulate_running_stats`. A batch size of 1
    shows BatchNorm's own error (one value per channel cannot be normalized).

    Args:
        momentum, cumulative, batch_size, steps, seed: initial values.

    Returns:
        the :class:`Explorer`.

    Example:
        >>> explorer = running_stats_explorer(steps=20)
        >>> explorer.controls["cumulative"].value = True
        >>> "after <b>20</b> steps" in explorer.info.value
        True
    """
    controls = {
        "momentum": widgets.FloatSlider(value=momentum, min=0.01, max=1.0, step=0.01,
                                        description="momentum", readout_format=".2f",
                                        continuous_update=False, style=_STYLE),
        "cumulative": widgets.Checkbox(value=cumulative, description="momentum=None (cumulative)",
                                       style=_STYLE),
        "batch_size": widgets.IntSlider(value=batch_size, min=1, max=256, description="batch size",
                                        continuous_update=False, style=_STYLE),
        "steps": widgets.IntSlider(value=steps, min=1, max=500, description="steps",
                                   continuous_update=False, style=_STYLE),
        "seed": widgets.IntText(value=seed, description="seed", style=_STYLE,
                                layout=widgets.Layout(width="130px")),
    }
    return Explorer(controls, _draw_running_stats, web=lambda ex: _web().running_stats_payload(
        *_values(ex, "momentum", "cumulative", "batch_size", "steps", "seed")))


# --------------------------------------------------------------------------
# batch_size_explorer
# --------------------------------------------------------------------------


def _draw_batch_size(explorer: Explorer) -> tuple[Figure, str]:
    c = explorer.controls
    batch_size, trials = int(c["batch_size"].value), int(c["trials"].value)
    sizes = tuple(sorted({*DEFAULT_BATCH_SIZES, batch_size}))
    noise = simulate_batch_noise(sizes, trials, int(c["channels"].value), int(c["groups"].value),
                                 seed=int(c["seed"].value))
    fig = BookFigure(figsize=(7, 3.0), layout="constrained")
    plot_batch_size(batch_size, axes=fig.subplots(1, 2), noise=noise)
    return fig, batch_size_info(noise, batch_size)


#: The numbers beside the batch-size figure; the website fills the same text.
BATCH_SIZE_INFO = (
    "batch size <b>{batch_size}</b>: across {trials} random batches sample 0's output moves "
    "with std <b>{BatchNorm2d}</b> under {BatchNorm2d_label}, <b>{LayerNorm}</b> under "
    "{LayerNorm_label} and <b>{GroupNorm}</b> under {GroupNorm_label}"
)


def batch_size_spreads(noise, batch_size: int) -> dict[str, str]:
    """The spreads :func:`batch_size_explorer` prints for ``batch_size``, formatted, by layer."""
    i = noise.batch_sizes.index(int(batch_size))
    return {key: f"{float(noise.spread(key)[i]):.3f}" for key in noise.values}


def batch_size_info(noise, batch_size: int) -> str:
    """The numbers :func:`batch_size_explorer` shows for ``batch_size`` of a :class:`norms.viz.BatchNoise`."""
    labels = {f"{key}_label": label for key, label in noise.labels.items()}
    return BATCH_SIZE_INFO.format(batch_size=batch_size, trials=noise.values["BatchNorm2d"].shape[1],
                                  **batch_size_spreads(noise, batch_size), **labels)


def batch_size_explorer(
    batch_size: int = 4, trials: int = 200, channels: int = 4, groups: int = 2, seed: int = 0
) -> Explorer:
    """How noisy BatchNorm's batch statistics are at small batch sizes.

    Sample 0 is fixed and batched with random others; the figure shows how much
    its normalized value moves across random batches under BatchNorm2d,
    LayerNorm and GroupNorm (see :func:`norms.viz.simulate_batch_noise`).
    Controls: ``batch_size``, ``trials``, ``channels``, ``groups``, ``seed``.
    Groups that do not divide the channels show GroupNorm's error.

    Args:
        batch_size, trials, channels, groups, seed: initial values.

    Returns:
        the :class:`Explorer`.

    Example:
        >>> explorer = batch_size_explorer(trials=50)
        >>> explorer.controls["groups"].value = 3  # 4 channels
        >>> "divisible" in explorer.error.value
        True
    """
    controls = {
        "batch_size": widgets.IntSlider(value=batch_size, min=2, max=64, description="batch size",
                                        continuous_update=False, style=_STYLE),
        "trials": widgets.IntSlider(value=trials, min=20, max=1000, step=10,
                                    description="random batches", continuous_update=False,
                                    style=_STYLE),
        "seed": widgets.IntText(value=seed, description="seed", style=_STYLE,
                                layout=widgets.Layout(width="130px")),
        "channels": widgets.IntSlider(value=channels, min=1, max=16, description="channels",
                                      continuous_update=False, style=_STYLE),
        "groups": widgets.IntSlider(value=groups, min=1, max=16, description="groups (GN)",
                                    continuous_update=False, style=_STYLE),
    }
    return Explorer(controls, _draw_batch_size, web=lambda ex: _web().batch_size_payload(
        *_values(ex, "batch_size", "trials", "channels", "groups", "seed")))
