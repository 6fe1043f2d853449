"""Figures of training runs: curves, learning-rate sweeps, per-layer statistics, batch sizes.

Every function draws what :func:`norms.lab.training.train` recorded (a
:class:`~norms.lab.training.TrainLog` or several), takes ``ax=None``/``axes=None`` and returns
the figure; new figures are :class:`norms.plots.style.BookFigure` s made without pyplot, so a
notebook cell whose last line is the call shows the figure once, as a PNG.

One colour per normalization in every figure (Okabe–Ito, safe for colour-blind readers):
:data:`NORM_COLORS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..lab.training import NORM_LABELS, Data, TrainLog
from .style import OKABE_ITO, BookFigure

__all__ = [
    "NORM_COLORS",
    "LAYER_COLORS",
    "color_of",
    "plot_digits",
    "plot_curves",
    "plot_lr_sweep",
    "plot_layer_histograms",
    "plot_layer_stats",
    "plot_batch_size_sweep",
    "plot_bars",
]

#: colour of each normalization, by its label in :data:`norms.lab.training.NORM_LABELS`.
NORM_COLORS: dict[str, str] = {
    "no norm": "#7F7F7F",
    "BatchNorm": OKABE_ITO[5],
    "LayerNorm": OKABE_ITO[4],
    "GroupNorm": OKABE_ITO[2],
    "RMSNorm": OKABE_ITO[6],
}
#: colours of the layers of a network, first to last.
LAYER_COLORS: tuple[str, ...] = (
    OKABE_ITO[1],
    OKABE_ITO[0],
    OKABE_ITO[6],
    OKABE_ITO[2],
    OKABE_ITO[4],
)


def color_of(label: str) -> str:
    """The colour of the normalization named in ``label`` (``"MLP BatchNorm"`` → BatchNorm's)."""
    for name, color in NORM_COLORS.items():
        if name in label:
            return color
    for kind, name in NORM_LABELS.items():
        if label == kind:
            return NORM_COLORS[name]
    return "#000000"


def _figure(axes, n: int, figsize, **kwargs):
    if axes is None:
        fig = BookFigure(figsize=figsize, layout="constrained")
        axes = fig.subplots(1, n, **kwargs)
        axes = list(np.atleast_1d(axes))
        return fig, axes
    axes = list(np.atleast_1d(axes))
    if len(axes) != n:
        raise ValueError(f"need {n} axes, got {len(axes)}")
    return axes[0].figure, axes


def _smooth(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, moving average over ``window`` steps) of ``values``."""
    if len(values) < window:
        return np.arange(1, len(values) + 1), values
    kernel = np.ones(window) / window
    return np.arange(window, len(values) + 1), np.convolve(values, kernel, mode="valid")


def plot_digits(data: Data, n: int = 10, ax: Axes | None = None, figsize=(7, 1.1)) -> Figure:
    """The first training image of each class 0 to ``n - 1``, with its label."""
    fig, axes = _figure(None if ax is None else [ax], 1, figsize)
    ax = axes[0]
    tiles = []
    for k in range(n):
        i = int((data.y_train == k).nonzero()[0])
        tiles.append(data.x_train[i, 0].numpy())
        tiles.append(np.full((8, 1), np.nan))
    ax.imshow(np.concatenate(tiles[:-1], axis=1), cmap="gray_r", interpolation="nearest")
    ax.set_xticks([4 + 9 * k for k in range(n)], [str(k) for k in range(n)])
    ax.set_yticks([])
    ax.tick_params(length=0, labelsize=8)
    for side in ax.spines.values():
        side.set_visible(False)
    return fig


def plot_curves(
    logs: Mapping[str, TrainLog],
    axes=None,
    window: int = 20,
    title: str = "",
    colors: Mapping[str, str] | None = None,
    figsize=(9, 3.0),
) -> Figure:
    """Training loss (moving average over ``window`` steps) and test accuracy per epoch.

    ``logs`` maps a label to a run; its colour is ``colors[label]`` if given, else the
    colour of the normalization the label names.
    """
    fig, (ax_loss, ax_acc) = _figure(axes, 2, figsize)
    for label, log in logs.items():
        color = (colors or {}).get(label) or color_of(label)
        steps, loss = _smooth(log.loss.numpy(), window)
        ax_loss.plot(steps, loss, color=color, lw=1.5, label=label)
        if log.diverged_at is not None:
            ax_loss.plot(
                len(log.loss),
                float(log.loss[-1]) if len(log.loss) else math.log(10),
                "x",
                color=color,
            )
        epochs = np.arange(1, len(log.test_acc) + 1)
        ax_acc.plot(
            epochs, 100 * log.test_acc.numpy(), "o-", ms=3.5, color=color, lw=1.5, label=label
        )
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("SGD step")
    ax_loss.set_ylabel(f"training loss (mean of {window} steps)")
    ax_acc.set_xlabel("epoch")
    ax_acc.set_ylabel("test accuracy (%)")
    ax_acc.xaxis.get_major_locator().set_params(integer=True)
    ax_acc.legend(fontsize=7.5, frameon=False, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=10.5)
    return fig


def plot_lr_sweep(
    lrs: Sequence[float],
    accuracy: Mapping[str, Sequence[float]],
    threshold: float,
    ax: Axes | None = None,
    title: str = "",
    figsize=(5, 3.0),
) -> Figure:
    """Final test accuracy against the learning rate, one line per label; the dotted line is
    ``threshold``, the accuracy a run must reach to count as trained."""
    fig, axes = _figure(None if ax is None else [ax], 1, figsize)
    ax = axes[0]
    for label, accs in accuracy.items():
        ax.plot(
            lrs, [100 * a for a in accs], "o-", ms=3.5, lw=1.5, color=color_of(label), label=label
        )
    ax.axhline(100 * threshold, color="0.5", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate η")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    if title:
        ax.set_title(title, fontsize=10)
    # as large as the axis labels: the sweep is often drawn two to a figure, then shrunk
    ax.legend(fontsize=9, frameon=False, loc="lower left")
    return fig


def plot_layer_histograms(
    logs: Mapping[str, TrainLog],
    which: str = "act",
    record: int = 0,
    axes=None,
    bins: int = 25,
    figsize=(9, 2.6),
) -> Figure:
    """Histograms of each layer's pre-activations (``which="act"``) or of their gradients
    (``"grad"``) at record ``record`` of every run, one panel per run, one line per layer
    (as in Karpathy's lectures). Each panel has its own x range (the gradients of two runs
    can differ by orders of magnitude); the title gives the std per layer. Gradients that
    are exactly 0 (behind an inactive ReLU) are left out."""
    fig, axes = _figure(axes, len(logs), figsize, sharey=False)
    for ax, (label, log) in zip(axes, logs.items(), strict=True):
        values = (log.act_sample if which == "act" else log.grad_sample)[record].numpy()  # (L, S)
        if (
            which == "grad"
        ):  # an inactive ReLU passes exactly 0: leave those out, they would hide the rest
            values = np.where(values == 0, np.nan, values)
        finite = values[np.isfinite(values)]
        span = float(np.quantile(np.abs(finite), 0.99)) if finite.size else 1.0
        # three significant digits: the last bits of the quantile differ between CPUs (float64
        # sums in another order), and the figure's axes must not move with them
        span = float(f"{span:.3g}") if span > 0 else 1.0
        edges = np.linspace(-span, span, bins + 1)
        centers = (edges[1:] + edges[:-1]) / 2
        stds = []
        for layer, row in enumerate(values):
            row = row[np.isfinite(row)]
            counts, _ = np.histogram(np.clip(row, -span, span), bins=edges)
            ax.plot(
                centers,
                counts / max(len(row), 1),
                color=LAYER_COLORS[layer % len(LAYER_COLORS)],
                lw=1.4,
                label=f"layer {layer + 1}",
            )
            stds.append(float(row.std()) if len(row) else float("nan"))
        ax.set_title(
            f"{label}\nstd per layer: " + ", ".join(f"{s:.2g}" for s in stds), fontsize=8.5
        )
        ax.set_xlabel("pre-activation z" if which == "act" else "gradient ∂L/∂z", fontsize=8.5)
        ax.tick_params(labelsize=7.5)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-2, 3))
    axes[0].set_ylabel("fraction of values")
    axes[-1].legend(fontsize=7, frameon=False)
    step = int(next(iter(logs.values())).record_steps[record])
    what = "pre-activations" if which == "act" else "their gradients (exact zeros left out)"
    fig.suptitle(f"{what} at step {step}", fontsize=10)
    return fig


_STAT_LABELS = {
    "act_std": "std of pre-activations z",
    "grad_std": "std of ∂L/∂z",
    "update_ratio": "update / weight  ‖ΔW‖/‖W‖",
    "act_mean": "mean of pre-activations z",
}


def plot_layer_stats(
    logs: Mapping[str, TrainLog],
    stat: str = "act_std",
    axes=None,
    log_scale: bool = True,
    figsize=(9, 2.6),
) -> Figure:
    """A per-layer statistic of :class:`~norms.lab.training.TrainLog` (``"act_std"``,
    ``"grad_std"``, ``"update_ratio"``, ``"act_mean"``) over the training steps, one panel
    per run, one line per layer. Panels share the y axis."""
    if stat not in _STAT_LABELS:
        raise ValueError(f"unknown statistic {stat!r}; choose from {', '.join(_STAT_LABELS)}")
    fig, axes = _figure(axes, len(logs), figsize, sharey=True)
    for ax, (label, log) in zip(axes, logs.items(), strict=True):
        values = getattr(log, stat).numpy()  # (R, L)
        for layer in range(values.shape[1]):
            ax.plot(
                log.record_steps.numpy(),
                values[:, layer],
                "o-",
                ms=2.5,
                color=LAYER_COLORS[layer % len(LAYER_COLORS)],
                lw=1.3,
                label=f"layer {layer + 1}",
            )
        if log_scale:
            ax.set_yscale("log")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("SGD step", fontsize=8.5)
        # minor ticks too: a log axis labels them (2×10⁻¹, ...), at matplotlib's 10 pt
        ax.tick_params(which="both", labelsize=7.5)
    axes[0].set_ylabel(_STAT_LABELS[stat], fontsize=8.5)
    axes[-1].legend(fontsize=7, frameon=False)
    return fig


def plot_batch_size_sweep(
    batch_sizes: Sequence[int],
    error: Mapping[str, Sequence[float]],
    dashed: Mapping[str, Sequence[float]] | None = None,
    ax: Axes | None = None,
    title: str = "",
    ylabel: str = "test error (%)",
    figsize=(5, 3.0),
    ranges: Mapping[str, Sequence[tuple[float, float]]] | None = None,
) -> Figure:
    """Test error against the batch size per sample (log scale, largest batch on the left as
    in Figure 1 of Wu & He, 2018), one line per label; ``dashed`` adds lines drawn dashed
    in the colour of their label (e.g. BatchNorm evaluated with batch statistics).
    ``ranges`` (label → one ``(lo, hi)`` per batch size, e.g. the lowest and the highest
    error over several seeds) draws each range as a vertical bar at its point, the bars of
    the labels side by side."""
    fig, axes = _figure(None if ax is None else [ax], 1, figsize)
    ax = axes[0]
    for k, (label, bounds) in enumerate((ranges or {}).items()):
        shift = 2 ** (0.06 * (k - (len(ranges) - 1) / 2))  # side by side on the log axis
        for b, (lo, hi) in zip(batch_sizes, bounds, strict=True):
            ax.plot([b * shift] * 2, [100 * lo, 100 * hi], color=color_of(label), lw=3, alpha=0.35)
    for label, errs in error.items():
        ax.plot(
            batch_sizes,
            [100 * e for e in errs],
            "o-",
            ms=3.5,
            lw=1.5,
            color=color_of(label),
            label=label,
        )
    for label, errs in (dashed or {}).items():
        ax.plot(
            batch_sizes,
            [100 * e for e in errs],
            "s--",
            ms=3,
            lw=1.2,
            color=color_of(label),
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(batch_sizes), [str(b) for b in batch_sizes])
    ax.minorticks_off()
    ax.invert_xaxis()
    ax.set_xlabel("batch size (samples per batch)")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7.5, frameon=False, loc="upper left")
    return fig


def plot_bars(
    values: Mapping[str, Mapping[str, float]],
    ax: Axes | None = None,
    ylabel: str = "",
    title: str = "",
    percent: bool = True,
    figsize=(6, 2.8),
) -> Figure:
    """Grouped bars: ``values[group][series]``; one colour per series (the series'
    normalization colour if its label names one), value written above each bar."""
    fig, axes = _figure(None if ax is None else [ax], 1, figsize)
    ax = axes[0]
    groups = list(values)
    series = list(dict.fromkeys(s for g in groups for s in values[g]))
    width = 0.8 / len(series)
    palette = iter(LAYER_COLORS)
    for j, name in enumerate(series):
        color = color_of(name) if color_of(name) != "#000000" else next(palette)
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ys = [values[g].get(name, float("nan")) * (100 if percent else 1) for g in groups]
        bars = ax.bar(xs, ys, width=width * 0.92, color=color, label=name)
        for bar, y in zip(bars, ys, strict=True):
            if math.isfinite(y):
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    y,
                    f"{y:.1f}" if percent else f"{y:.3g}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8.5)
    ax.margins(y=0.15)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7.5, frameon=False, loc="lower right")
    return fig
