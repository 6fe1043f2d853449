"""BatchNorm's running statistics over training steps, and train vs eval output."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from norms.lab.simulations import RunningStatsTrace, simulate_running_stats

from .style import OKABE_ITO, axes_row

__all__ = ["plot_running_stats"]

#: The colours of the features in the running-statistics figures (and the website's explorer).
FEATURE_COLORS = (OKABE_ITO[4], OKABE_ITO[0])


def _momentum_words(momentum: float | None) -> str:
    return "momentum=None (cumulative)" if momentum is None else f"momentum={momentum:g}"


def _plot_trace(ax: Axes, values: np.ndarray, truth: np.ndarray, what: str, legend: bool) -> None:
    steps = np.arange(values.shape[0])
    for f in range(values.shape[1]):
        color = FEATURE_COLORS[f % len(FEATURE_COLORS)]
        ax.plot(steps, values[:, f], color=color, lw=1.6, label=f"feature {f}")
        ax.axhline(truth[f], color=color, lw=1.0, ls="--")
    ax.set_xlabel("training step")
    ax.set_title(what, fontsize=10)
    if legend:
        ax.plot([], [], color="0.3", ls="--", lw=1.0, label="true value")
        ax.legend(fontsize=8, frameon=False)


def plot_running_stats(
    momentum: float | None = 0.1,
    batch_size: int = 16,
    steps: int = 100,
    seed: int = 0,
    axes=None,
    *,
    trace: RunningStatsTrace | None = None,
    figsize: tuple[float, float] = (7, 2.8),
) -> Figure:
    """Running mean and variance over training steps, and train vs eval output.

    Three panels: ``running_mean`` and ``running_var`` per step with the true
    values dashed, and the eval-mode output against the train-mode output on a
    fresh batch (points off the diagonal: the two modes disagree).

    Args:
        momentum, batch_size, steps, seed: see :func:`simulate_running_stats`.
        axes: three axes; a new figure when ``None``.
        trace: an already computed trace (the other settings are then ignored).
        figsize: size of the new figure.

    Returns:
        the figure.

    Example:
        >>> fig = plot_running_stats(momentum=None, steps=30)
        >>> len(fig.axes)
        3
    """
    trace = trace or simulate_running_stats(momentum, batch_size, steps, seed)
    fig, (ax_mean, ax_var, ax_out) = axes_row(axes, 3, figsize)
    _plot_trace(ax_mean, trace.running_mean, trace.true_mean, "running_mean", legend=True)
    _plot_trace(ax_var, trace.running_var, trace.true_var, "running_var", legend=False)
    for f in range(trace.train_output.shape[1]):
        ax_out.scatter(
            trace.train_output[:, f],
            trace.eval_output[:, f],
            s=12,
            color=FEATURE_COLORS[f % len(FEATURE_COLORS)],
            alpha=0.85,
        )
    both = np.concatenate([trace.train_output.ravel(), trace.eval_output.ravel()])
    lo, hi = float(both.min()), float(both.max())
    ax_out.plot([lo, hi], [lo, hi], color="0.5", lw=1.0, ls=":")
    ax_out.set_xlabel("train-mode output")
    ax_out.set_ylabel("eval-mode output")
    ax_out.set_title(f"max |eval − train| = {trace.max_gap:.3f}", fontsize=10)
    fig.suptitle(
        f"BatchNorm1d, {_momentum_words(trace.momentum)}, batch size {trace.batch_size}",
        fontsize=10.5,
    )
    return fig
