"""Figures of the chapter on normalizing the weights: the direction of the weight-norm
gradient, the power iteration's estimate of σ step by step, and the residual stream's
standard deviation through depth. (Its accuracies over seeds are
:func:`norms.plots.seeds.plot_spreads`.)

Example:
    >>> fig = plot_power_iteration([0.5, 0.9, 0.99], sigma=1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle

from .style import OKABE_ITO, axes_row

__all__ = ["COLORS", "plot_power_iteration", "plot_stream_std", "plot_weight_norm_gradient"]

#: The Okabe–Ito palette without its yellow, too pale for a thin line or a dot on white.
COLORS: tuple[str, ...] = tuple(c for c in OKABE_ITO if c != "#F0E442")


def _arrow(ax: Axes, start, delta, color: str, label: str) -> None:
    ax.annotate(
        "",
        xy=(start[0] + delta[0], start[1] + delta[1]),
        xytext=(start[0], start[1]),
        arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6, shrinkA=0, shrinkB=0),
    )
    ax.plot([], [], color=color, lw=1.6, label=label)  # the legend's entry


def plot_weight_norm_gradient(
    v: Sequence[float],
    grad_w: Sequence[float],
    grad_v: Sequence[float],
    lr: float = 1.0,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (4.2, 4.2),
) -> Figure:
    """One unit with two weights: its direction ``v`` on the circle of radius ‖v‖, the
    descent direction of the weight ``−lr·∇_w L`` and that of the direction ``−lr·∇_v L``
    drawn from the tip of ``v``, the tangent to the circle there (dotted), and where the step
    on ``v`` lands (outside the circle when ``∇_v L`` is orthogonal to ``v``)."""
    v, gw, gv = (np.asarray(t, dtype=float).reshape(2) for t in (v, grad_w, grad_v))
    fig, (ax,) = axes_row(None if ax is None else [ax], 1, figsize)
    radius = float(np.linalg.norm(v))
    ax.add_patch(Circle((0, 0), radius, fill=False, ls="--", lw=0.8, color="0.5"))
    tangent = np.array([-v[1], v[0]]) / radius
    ax.plot(*np.stack([v - 2 * radius * tangent, v + 2 * radius * tangent]).T, ":", lw=0.8,
            color="0.4")  # fmt: skip
    _arrow(ax, (0, 0), v, "black", "v")
    _arrow(ax, v, -lr * gw, OKABE_ITO[0], "−η ∇w L")
    _arrow(ax, v, -lr * gv, OKABE_ITO[4], "−η ∇v L")
    new = v - lr * gv
    ax.plot(*new, "o", ms=4, color=OKABE_ITO[4])
    ax.plot([0, new[0]], [0, new[1]], ":", lw=0.8, color=OKABE_ITO[4])
    reach = 1.15 * max(radius, float(np.linalg.norm(new)), float(np.linalg.norm(v - lr * gw)))
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.85", lw=0.6)
    ax.axvline(0, color="0.85", lw=0.6)
    ax.set_title(f"the step moves v off its circle: ‖v‖ {radius:.3f} → {np.linalg.norm(new):.3f}",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=8, frameon=False, loc="lower left")
    return fig


def plot_power_iteration(
    estimates: Sequence[float],
    sigma: float,
    axes: Sequence[Axes] | None = None,
    figsize: tuple[float, float] = (7.5, 2.8),
) -> Figure:
    """The power iteration's estimate of σ after every step, next to σ (left), and its
    relative error ``(σ − estimate)/σ`` on a log scale (right)."""
    est = np.asarray(estimates, dtype=float)
    steps = np.arange(1, len(est) + 1)
    fig, (left, right) = axes_row(axes, 2, figsize)
    left.plot(steps, est, "o-", ms=3, color=OKABE_ITO[4], label="estimate uᵀWv")
    left.axhline(sigma, ls="--", color="black", lw=1, label="σ (SVD)")
    left.set_xlabel("power-iteration steps")
    left.set_ylabel("σ")
    left.legend(fontsize=8, frameon=False, loc="lower right")
    error = (sigma - est) / sigma
    right.semilogy(steps, error, "o-", ms=3, color=OKABE_ITO[5])
    right.set_xlabel("power-iteration steps")
    right.set_ylabel("(σ − estimate) / σ")
    right.set_title("positive at every step: from below", fontsize=9)
    return fig


def plot_stream_std(
    signal: Mapping[str, Sequence[float]],
    ax: Axes | None = None,
    figsize: tuple[float, float] = (5.5, 3.2),
) -> Figure:
    """The standard deviation of the residual stream after the stem (0) and after every
    block, one line per version of the network, on a log scale."""
    fig, (ax,) = axes_row(None if ax is None else [ax], 1, figsize)
    for j, (label, stds) in enumerate(signal.items()):
        ax.semilogy(range(len(stds)), stds, "o-", ms=3, color=COLORS[j % len(COLORS)],
                    label=label)  # fmt: skip
    ax.set_xlabel("residual block (0: after the stem)")
    ax.set_ylabel("std of the stream")
    ax.legend(fontsize=7.5, frameon=False)
    return fig
