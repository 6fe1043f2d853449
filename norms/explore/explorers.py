"""The three explorers of the book, each in a kernel and, in the same output, for the website.

Each function returns an :class:`~norms.explore.widgets.Explorer` (the ipywidgets
front end) whose output also carries the static website's version
(:mod:`norms.explore.web`), both computed by :mod:`norms.explore.state`. This module
is the one place the two front ends meet.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets

from norms.axes import NORMS
from norms.i18n import tr

from . import web
from .state import layout_options
from .widgets import STYLE, Explorer, draw_batch_size, draw_reduction, draw_running_stats, values_of

__all__ = ["batch_size_explorer", "reduction_explorer", "running_stats_explorer"]


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
    :data:`tuple(NORMS)`), ``shape`` (text, e.g. ``4, 6, 2, 2``), ``groups``
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
        "norm": widgets.Dropdown(
            options=tuple(NORMS), value=norm, description=tr("norm"), style=STYLE
        ),
        "shape": widgets.Text(
            value=", ".join(str(s) for s in input_shape),
            description=tr("input shape"),
            continuous_update=False,
            style=STYLE,
        ),
        "layout": widgets.Dropdown(
            options=layout_options(), value=layout, description=tr("layout"), style=STYLE
        ),
        "groups": widgets.BoundedIntText(
            value=groups,
            min=1,
            max=64,
            description=tr("groups (GN)"),
            style=STYLE,
            layout=widgets.Layout(width="150px"),
        ),
        "last_dims": widgets.BoundedIntText(
            value=last_dims,
            min=1,
            max=5,
            description=tr("last dims (LN, RMS)"),
            style=STYLE,
            layout=widgets.Layout(width="190px"),
        ),
        "highlight": widgets.IntSlider(
            value=highlight,
            min=0,
            max=max(highlight, 1000),
            description=tr("highlight statistic"),
            style=STYLE,
            continuous_update=False,
        ),
    }
    return Explorer(
        controls,
        draw_reduction,
        web=lambda ex: web.html(
            web.reduction_payload(
                *values_of(ex, "norm", "shape", "groups", "last_dims", "highlight", "layout")
            )
        ),
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
    ``seed``. See :func:`norms.lab.simulate_running_stats`. A batch size of 1
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
        "momentum": widgets.FloatSlider(
            value=momentum,
            min=0.01,
            max=1.0,
            step=0.01,
            description=tr("momentum"),
            readout_format=".2f",
            continuous_update=False,
            style=STYLE,
        ),
        "cumulative": widgets.Checkbox(
            value=cumulative, description=tr("momentum=None (cumulative)"), style=STYLE
        ),
        "batch_size": widgets.IntSlider(
            value=batch_size,
            min=1,
            max=256,
            description=tr("batch size"),
            continuous_update=False,
            style=STYLE,
        ),
        "steps": widgets.IntSlider(
            value=steps,
            min=1,
            max=500,
            description=tr("steps"),
            continuous_update=False,
            style=STYLE,
        ),
        "seed": widgets.IntText(
            value=seed, description=tr("seed"), style=STYLE, layout=widgets.Layout(width="130px")
        ),
    }
    return Explorer(
        controls,
        draw_running_stats,
        web=lambda ex: web.html(
            web.running_stats_payload(
                *values_of(ex, "momentum", "cumulative", "batch_size", "steps", "seed")
            )
        ),
    )


def batch_size_explorer(
    batch_size: int = 4, trials: int = 200, channels: int = 4, groups: int = 2, seed: int = 0
) -> Explorer:
    """How noisy BatchNorm's batch statistics are at small batch sizes.

    Sample 0 is fixed and batched with random others; the figure shows how much
    its normalized value moves across random batches under BatchNorm2d,
    LayerNorm and GroupNorm (see :func:`norms.lab.simulate_batch_noise`).
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
        "batch_size": widgets.IntSlider(
            value=batch_size,
            min=2,
            max=64,
            description=tr("batch size"),
            continuous_update=False,
            style=STYLE,
        ),
        "trials": widgets.IntSlider(
            value=trials,
            min=20,
            max=1000,
            step=10,
            description=tr("random batches"),
            continuous_update=False,
            style=STYLE,
        ),
        "seed": widgets.IntText(
            value=seed, description=tr("seed"), style=STYLE, layout=widgets.Layout(width="130px")
        ),
        "channels": widgets.IntSlider(
            value=channels,
            min=1,
            max=16,
            description=tr("channels"),
            continuous_update=False,
            style=STYLE,
        ),
        "groups": widgets.IntSlider(
            value=groups,
            min=1,
            max=16,
            description=tr("groups (GN)"),
            continuous_update=False,
            style=STYLE,
        ),
    }
    return Explorer(
        controls,
        draw_batch_size,
        web=lambda ex: web.html(
            web.batch_size_payload(
                *values_of(ex, "batch_size", "trials", "channels", "groups", "seed")
            )
        ),
    )
