"""Figures of the chapters on small batches and on normalizing the weights: accuracies over
several seeds, every seed drawn, so the spread is visible next to the mean."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .style import OKABE_ITO, axes_row

__all__ = ["plot_seed_spread", "plot_seed_strips", "plot_statistic_noise"]


def plot_seed_spread(
    batch_sizes: Sequence[int],
    accuracy: Mapping[str, np.ndarray],
    ax: Axes | None = None,
    title: str = "",
    figsize: tuple[float, float] = (7, 3.4),
) -> Figure:
    """Test accuracy against the batch size, one colour per method: the mean over seeds as a
    line, every seed as a dot, the range over seeds as a bar.

    ``accuracy[label]`` is an array ``(len(batch_sizes), seeds)`` (nan where a method was
    not run). Methods are shifted a little along x so their dots do not overlap.
    """
    fig, (ax,) = axes_row(None if ax is None else [ax], 1, figsize)
    labels = list(accuracy)
    xs = np.arange(len(batch_sizes), dtype=float)
    width = 0.7
    for j, label in enumerate(labels):
        acc = 100 * np.asarray(accuracy[label], dtype=float)  # (B, S)
        shift = (j - (len(labels) - 1) / 2) * width / len(labels)
        color = OKABE_ITO[j % len(OKABE_ITO)]
        ok = ~np.isnan(acc).all(axis=1)
        mean = np.where(ok, np.nanmean(np.where(ok[:, None], acc, 0.0), axis=1), np.nan)
        ax.plot(xs[ok] + shift, mean[ok], "-", color=color, lw=1.3, label=label)
        for i in np.flatnonzero(ok):
            ax.vlines(xs[i] + shift, np.nanmin(acc[i]), np.nanmax(acc[i]), color=color, lw=0.8)
            ax.plot(np.full(acc.shape[1], xs[i] + shift), acc[i], "o", ms=2.5, color=color)
    ax.set_xticks(xs, [str(b) for b in batch_sizes])
    ax.set_xlabel("batch size")
    ax.set_ylabel("test accuracy (%)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7.5, frameon=False, ncol=2, loc="lower right")
    return fig


def plot_seed_strips(
    accuracy: Mapping[str, Sequence[float]],
    ax: Axes | None = None,
    title: str = "",
    figsize: tuple[float, float] = (5, 2.8),
) -> Figure:
    """One column per label: every seed's accuracy as a dot, the mean as a bar."""
    fig, (ax,) = axes_row(None if ax is None else [ax], 1, figsize)
    for j, accs in enumerate(accuracy.values()):
        a = 100 * np.asarray(accs, dtype=float)
        color = OKABE_ITO[j % len(OKABE_ITO)]
        ax.hlines(a.mean(), j - 0.25, j + 0.25, color=color, lw=2)
        ax.plot(np.full(len(a), j), a, "o", ms=4, color=color, alpha=0.8)
    ax.set_xticks(range(len(accuracy)), list(accuracy), fontsize=8)
    ax.set_ylabel("test accuracy (%)")
    ax.margins(x=0.2)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_statistic_noise(
    batch_sizes: Sequence[int],
    errors: Mapping[str, Sequence[float]],
    ax: Axes | None = None,
    figsize: tuple[float, float] = (4.5, 3.0),
) -> Figure:
    """The typical relative error of a batch statistic against the batch size (log-log)."""
    fig, (ax,) = axes_row(None if ax is None else [ax], 1, figsize)
    for j, (label, err) in enumerate(errors.items()):
        ax.plot(batch_sizes, err, "o-", ms=3.5, color=OKABE_ITO[j], label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(batch_sizes), [str(b) for b in batch_sizes])
    ax.minorticks_off()
    ax.set_xlabel("batch size")
    ax.set_ylabel("typical error of the statistic")
    ax.legend(fontsize=7.5, frameon=False)
    return fig
