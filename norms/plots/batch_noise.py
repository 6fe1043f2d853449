"""How noisy batch statistics are at small batch sizes (BatchNorm next to LayerNorm, GroupNorm)."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from norms.lab.simulations import DEFAULT_BATCH_SIZES, BatchNoise, simulate_batch_noise

from .style import OKABE_ITO, axes_row

__all__ = ["plot_batch_size"]

#: The colour of each norm in the batch-size figures (and the website's explorer).
NOISE_COLORS = {"BatchNorm2d": OKABE_ITO[5], "LayerNorm": OKABE_ITO[4], "GroupNorm": OKABE_ITO[2]}
_NOISE_MARKERS = {"BatchNorm2d": "o", "LayerNorm": "s", "GroupNorm": "^"}


def _plot_spread(ax: Axes, noise: BatchNoise) -> None:
    sizes = np.array(noise.batch_sizes)
    styles = {"BatchNorm2d": "-", "LayerNorm": "-", "GroupNorm": "--"}
    for key in ("BatchNorm2d", "LayerNorm", "GroupNorm"):
        ax.plot(
            sizes,
            noise.spread(key),
            styles[key],
            marker=_NOISE_MARKERS[key],
            markersize=4.5,
            lw=1.5,
            color=NOISE_COLORS[key],
            label=noise.labels[key],
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("batch size")
    ax.set_ylabel("std across batches")
    ax.set_title("how much sample 0's output moves", fontsize=10)
    ax.legend(fontsize=8, frameon=False)


def _plot_strips(ax: Axes, columns: list[tuple[str, np.ndarray, str]], seed: int) -> None:
    """One column of jittered dots per ``(label, values, colour)``."""
    jitter = np.random.default_rng(seed)
    for i, (_, values, color) in enumerate(columns):
        x = i + jitter.uniform(-0.18, 0.18, size=values.shape)
        ax.scatter(x, values, s=7, color=color, alpha=0.55, linewidths=0)
    ax.set_xticks(range(len(columns)), [label for label, _, _ in columns], fontsize=8.5)
    ax.set_xlim(-0.6, len(columns) - 0.4)
    ax.set_ylabel("output y[0, 0, 0, 0]")


def plot_batch_size(
    batch_size: int = 4,
    trials: int = 200,
    channels: int = 4,
    groups: int = 2,
    seed: int = 0,
    axes=None,
    *,
    noise: BatchNoise | None = None,
    figsize: tuple[float, float] = (7, 3.0),
) -> Figure:
    """How noisy BatchNorm is at small batch sizes, next to LayerNorm and GroupNorm.

    Left: the spread (std across ``trials`` random batches) of sample 0's
    normalized value against the batch size. Right: every trial's value at
    ``batch_size``. See :func:`simulate_batch_noise`.

    Args:
        batch_size: the batch size shown on the right (also added to the curve).
        trials, channels, groups, seed: see :func:`simulate_batch_noise`.
        axes: two axes; a new figure when ``None``.
        noise: an already computed :class:`BatchNoise` whose batch sizes include
            ``batch_size`` (``trials``, ``channels``, ``groups``, ``seed`` are
            then ignored).
        figsize: size of the new figure.

    Returns:
        the figure.

    Example:
        >>> fig = plot_batch_size(batch_size=2, trials=50)
        >>> len(fig.axes)
        2
    """
    if noise is None:
        sizes = tuple(sorted({*DEFAULT_BATCH_SIZES, int(batch_size)}))
        noise = simulate_batch_noise(sizes, trials, channels, groups, seed=seed)
    if int(batch_size) not in noise.batch_sizes:
        raise ValueError(f"noise has batch sizes {noise.batch_sizes}, not {batch_size}")
    trials = noise.values["BatchNorm2d"].shape[1]
    fig, (ax_spread, ax_strip) = axes_row(axes, 2, figsize)
    _plot_spread(ax_spread, noise)
    i = noise.batch_sizes.index(int(batch_size))
    columns = [
        (
            key.replace("Norm2d", "Norm").replace("Norm", "Norm\n").strip(),
            noise.values[key][i],
            NOISE_COLORS[key],
        )
        for key in ("BatchNorm2d", "LayerNorm", "GroupNorm")
    ]
    _plot_strips(ax_strip, columns, seed)
    ax_strip.set_title(f"batch size {batch_size}: {trials} random batches", fontsize=10)
    fig.suptitle("Sample 0 is fixed; only the other samples in its batch change", fontsize=10.5)
    return fig
