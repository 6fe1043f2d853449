"""Figures of the chapters "Transformers without normalization" and "Norms in today's
transformers": a LayerNorm's input-output map, accuracies over seeds, sensitivity sweeps, curves
over depth and over steps.

Every function takes ``ax=None`` (or ``axes=None``) and returns the figure (a
:class:`norms.plots.style.BookFigure`); none calls ``plt.show()``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .style import OKABE_ITO, BookFigure, axes_row

__all__ = ["plot_ln_io", "plot_seeds", "plot_sensitivity", "plot_lines"]


def plot_ln_io(pairs: Sequence, fits: Sequence, titles: Sequence[str], axes=None) -> BookFigure:
    """One panel per LayerNorm: its input (x axis) against its output before the affine step
    (y axis), a sample of points, with the fitted ``a·tanh(b·x)`` of each ``fits[i] = (a, b,
    ...)`` drawn over it (Zhu et al., 2025, Fig. 2)."""
    fig, axes = axes_row(axes, len(pairs), (2.6 * len(pairs), 2.6))
    for ax, (x, y), fit, title in zip(axes, pairs, fits, titles, strict=True):
        x, y = x.numpy(), y.numpy()
        step = max(1, len(x) // 3000)
        ax.scatter(x[::step], y[::step], s=2, alpha=0.35, color=OKABE_ITO[4], rasterized=True)
        grid = np.linspace(x.min(), x.max(), 200)
        a, b = fit[0], fit[1]
        ax.plot(grid, a * np.tanh(b * grid), color=OKABE_ITO[5], lw=1.5, label="a·tanh(b·x)")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("input x")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("output (before γ, β)")
    axes[0].legend(fontsize=7, loc="upper left")
    return fig


def plot_seeds(
    groups: dict,
    ax=None,
    ylabel: str = "accuracy",
    title: str | None = None,
    paired: bool = False,
) -> BookFigure:
    """``{name: [value per seed]}`` as dots (one per seed, the same seed at the same offset in
    every column), the min–max range over the seeds as a bar and the mean as a black tick, one
    column per name. With ``paired=True`` a thin grey line joins each seed's dots in
    neighbouring columns (the runs of one seed share their initialization and data order), so
    that a reader sees in how many seeds one column is above the next."""
    if ax is None:
        fig = BookFigure(figsize=(3.2 + 0.5 * len(groups), 3), layout="constrained")
        ax = fig.subplots()
    fig = ax.figure
    columns = [np.asarray(values, dtype=float) for values in groups.values()]
    offsets = [i + np.linspace(-0.12, 0.12, len(v)) for i, v in enumerate(columns)]
    if paired:
        for i in range(len(columns) - 1):
            if len(columns[i]) == len(columns[i + 1]):
                xs, vs = np.stack(offsets[i : i + 2]), np.stack(columns[i : i + 2])
                ax.plot(xs, vs, color="0.75", lw=0.7, zorder=1)
    for i, (x, v) in enumerate(zip(offsets, columns, strict=True)):
        color = OKABE_ITO[i % len(OKABE_ITO)]
        ax.scatter(x, v, s=14, color=color, zorder=3)
        ax.plot([i + 0.3, i + 0.3], [v.min(), v.max()], color=color, lw=2.5, alpha=0.6)
        ax.plot([i + 0.22, i + 0.38], [v.mean(), v.mean()], color="black", lw=1.5)
    ax.set_xticks(range(len(groups)), list(groups), fontsize=8)
    ax.set_xlim(-0.5, len(groups) - 0.3)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    return fig


def plot_sensitivity(
    xs: Sequence[float], curves: dict, ax=None, xlabel: str = "", ylabel: str = "accuracy"
) -> BookFigure:
    """``{label: [[value per seed] per x]}`` as the mean against ``x`` (log scale) with the
    min–max range over the seeds as error bars."""
    if ax is None:
        fig = BookFigure(figsize=(4.6, 3), layout="constrained")
        ax = fig.subplots()
    fig = ax.figure
    for i, (label, per_x) in enumerate(curves.items()):
        v = np.asarray(per_x, dtype=float)  # (len(xs), seeds)
        mean = v.mean(1)
        ax.errorbar(
            xs,
            mean,
            yerr=np.stack([mean - v.min(1), v.max(1) - mean]),
            fmt="-o",
            ms=4,
            capsize=3,
            label=label,
            color=OKABE_ITO[i % len(OKABE_ITO)],
        )
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def plot_lines(
    curves: dict,
    ax=None,
    xlabel: str = "",
    ylabel: str = "",
    logy: bool = False,
    title: str | None = None,
    xs: Sequence[float] | None = None,
) -> BookFigure:
    """``{label: [[value per x] per seed]}`` as the mean line over seeds with a band from the
    smallest to the largest seed."""
    if ax is None:
        fig = BookFigure(figsize=(5, 3), layout="constrained")
        ax = fig.subplots()
    fig = ax.figure
    for i, (label, runs) in enumerate(curves.items()):
        v = np.asarray(runs, dtype=float)  # (seeds, len(xs))
        x = np.arange(v.shape[1]) if xs is None else np.asarray(xs)
        color = OKABE_ITO[i % len(OKABE_ITO)]
        ax.plot(x, np.nanmean(v, 0), color=color, label=label, lw=1.4)
        ax.fill_between(x, np.nanmin(v, 0), np.nanmax(v, 0), color=color, alpha=0.2, lw=0)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig
