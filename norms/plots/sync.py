"""Measurements and figures of the SyncBatchNorm chapter: per-slice statistics, cost of
synchronizing.

Plot functions take ``ax=None``, return the figure (a :class:`norms.plots.style.BookFigure`,
shown as PNG) and never call ``plt.show()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, NullFormatter

from .. import axes, stats
from .style import BookFigure

__all__ = [
    "digit_features",
    "slice_spread",
    "plot_slice_spread",
    "plot_sync_cost",
    "plot_collective_cost",
]


def digit_features(channels: int = 8, seed: int = 0) -> torch.Tensor:
    """Feature maps as a BatchNorm inside a network sees them: scikit-learn's digits through a fixed
    random conv.

    A BatchNorm usually follows a convolution (conv, BatchNorm, ReLU), so these
    are the conv's outputs, the digits in a seeded random order (as a data
    loader shuffles them). Returns a float64 tensor ``(1797, channels, 6, 6)``.
    """
    from sklearn.datasets import load_digits

    images = (
        torch.tensor(load_digits().images, dtype=torch.float64).unsqueeze(1) / 16
    )  # (N, 1, 8, 8)
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(channels, 1, 3, 3, generator=g, dtype=torch.float64) / 3
    bias = torch.randn(channels, generator=g, dtype=torch.float64) * 0.1
    order = torch.randperm(images.shape[0], generator=g)
    return torch.nn.functional.conv2d(images[order], weight, bias)  # (N, C, 6, 6)


def _mean_var(x: torch.Tensor, dims) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and biased variance over ``dims`` (reduced): :func:`norms.stats.mean` and the
    variance of :func:`norms.stats.var_mean` (torch's kernel, as the stored tables have it)."""
    mean = stats.mean(x, dims).squeeze(dims)
    return mean, stats.var_mean(x, dims)[0].squeeze(dims)


def slice_spread(x: torch.Tensor, sizes: Sequence[int]) -> dict[int, tuple[float, float]]:
    """How far per-slice statistics are from the global ones, for slices of ``n`` samples.

    ``x`` is ``(N, C, *S)``. For each ``n`` in ``sizes`` it is cut into
    ``N // n`` slices of ``n`` samples (what one device would see). Returns
    ``{n: (spread of the mean, spread of the variance)}``: the standard
    deviation of the slices' channel means divided by the global standard
    deviation, and the mean of ``|slice variance / global variance - 1|``, both
    averaged over channels.
    """
    c = x.shape[1]
    mean, var = _mean_var(x, axes.batch_norm_dims(x.dim()))  # (C,), (C,)
    out = {}
    for n in sizes:
        k = x.shape[0] // n
        s = (
            x[: k * n].reshape(k, n, c, -1).transpose(1, 2).reshape(k, c, -1)
        )  # (slices, C, n * prod(S))
        slice_mean, slice_var = _mean_var(s, (-1,))  # (slices, C), (slices, C)
        deviation = stats.mean_square(slice_mean - mean, (0,)).sqrt()  # (1, C), RMS over slices
        mean_spread = (deviation / var.sqrt()).mean().item()
        var_spread = (slice_var / var - 1).abs().mean().item()
        out[int(n)] = (mean_spread, var_spread)
    return out


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    return BookFigure(figsize=figsize, layout="constrained").subplots()


def plot_slice_spread(
    spread: dict[int, tuple[float, float]],
    elements_per_sample: int | None = None,
    ax: Axes | None = None,
):
    """Log-log plot of :func:`slice_spread`: per-slice error of the mean and variance against slice
    size.

    With ``elements_per_sample`` (pixels per channel of one sample), also the
    spread the mean would have if every pixel were independent,
    :math:`1/\\sqrt{n \\cdot HW}`.
    """
    ax = _new_axes(ax, (6.4, 3.6))
    n = np.array(sorted(spread))
    ax.plot(
        n,
        [spread[k][0] for k in n],
        "o-",
        color="C0",
        label="mean: std of slice means / global std",
    )
    ax.plot(
        n,
        [spread[k][1] for k in n],
        "s-",
        color="C1",
        label="variance: mean |slice var / global var − 1|",
    )
    if elements_per_sample:
        ax.plot(
            n,
            1 / np.sqrt(n * elements_per_sample),
            ":",
            color="0.4",
            label="mean, if the pixels were independent",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(n, [str(k) for k in n])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks([0.01, 0.02, 0.05, 0.1, 0.2])
    ax.set_xlabel("samples per device (slice size n)")
    ax.set_ylabel("relative error of the slice's statistic")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return ax.figure


def plot_sync_cost(timings: dict[int, dict[str, float]], ax: Axes | None = None):
    """Median time of one training step (forward and backward) per number of processes.

    ``timings`` is what :func:`norms.lab.sync.time_sync_step` returns:
    ``{processes: {"plain": s, "sync": s, "all_reduce": s}}``.
    """
    ax = _new_axes(ax, (6.4, 3.4))
    p = np.array(sorted(timings))
    width = 0.27
    for i, (key, label) in enumerate(
        [
            ("plain", "BatchNorm step, local statistics"),
            ("sync", "SyncBatchNorm step"),
            ("all_reduce", "one all-reduce of 2C numbers"),
        ]
    ):
        ax.bar(
            p + (i - 1) * width,
            [timings[k][key] * 1e3 for k in p],
            width,
            label=label,
            color=f"C{i}",
        )
    ax.set_xticks(p, [str(k) for k in p])
    ax.set_xlabel("processes")
    ax.set_ylabel("median time (ms)")
    ax.set_title("Measured on the machine that built this page", fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    return ax.figure


def plot_collective_cost(costs: dict[tuple[int, int], Sequence[float]], ax: Axes | None = None):
    """Time of ``k`` collectives in a row against the number of channels ``C`` they carry.

    ``costs`` is what :func:`norms.distributed.time_collectives` returns:
    ``{(C, k): [seconds of each repeat]}``. One line per ``k`` through the medians of the
    repeats; the bars span the fastest to the slowest repeat.
    """
    ax = _new_axes(ax, (6.4, 3.4))
    channels = sorted({c for c, _ in costs})
    for i, k in enumerate(sorted({k for _, k in costs})):
        runs = [np.asarray(costs[(c, k)]) * 1e3 for c in channels]
        median = np.array([np.median(r) for r in runs])
        low = median - np.array([r.min() for r in runs])
        high = np.array([r.max() for r in runs]) - median
        ax.errorbar(
            channels,
            median,
            yerr=[low, high],
            marker="o",
            capsize=3,
            color=f"C{i}",
            label=f"{k} collective{'s' if k > 1 else ''} per step",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(channels, [str(c) for c in channels])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("channels C (each collective carries 15 + 2C numbers per process)")
    ax.set_ylabel("time (ms)")
    ax.set_title(
        "Measured on the machine that built this page: median and range of the repeats",
        fontsize=9,
    )
    ax.legend(fontsize=8, frameon=False)
    return ax.figure
