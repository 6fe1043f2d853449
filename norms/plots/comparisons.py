"""Several norms side by side: which elements share a statistic in each, on one input.

:func:`plot_comparison` draws the five norms of :func:`comparison_modules` on an image-like
input, :func:`plot_sequence_comparison` LayerNorm, RMSNorm and BatchNorm on a
transformer's ``(B, T, D)``. Each panel is a :func:`norms.plots.reductions.plot_reduction`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from norms.modules import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    RMSNorm,
)

from .reductions import EDGE_COLOR, HIGHLIGHT_EDGE, TINT_BASES, plot_reduction, tint
from .style import HIGHLIGHT_COLOR, axes_grid

__all__ = ["comparison_modules", "plot_comparison", "plot_sequence_comparison"]


_BATCH_NORMS = {1: BatchNorm1d, 2: BatchNorm2d, 3: BatchNorm3d}
_INSTANCE_NORMS = {1: InstanceNorm1d, 2: InstanceNorm2d, 3: InstanceNorm3d}


def _default_groups(channels: int) -> int:
    """The smallest number of groups > 1 that leaves several channels per group."""
    for g in range(2, channels):
        if channels % g == 0:
            return g
    return 1


def comparison_modules(
    input_shape: Sequence[int], groups: int | None = None
) -> list[torch.nn.Module]:
    """The five norms of :func:`plot_comparison` for an ``(N, C, *S)`` input.

    Args:
        input_shape: ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        groups: GroupNorm's groups; default the smallest divisor of ``C`` above 1
            that still puts several channels in a group (1 if there is none).

    Returns:
        ``[BatchNorm{k}d(C), LayerNorm(shape[1:]), InstanceNorm{k}d(C),
        GroupNorm(groups, C), RMSNorm(shape[1:])]`` from ``norms``.

    Example:
        >>> from norms.axes import module_label
        >>> [module_label(m) for m in comparison_modules((4, 6, 2, 2))][:2]
        ['BatchNorm2d(6)', 'LayerNorm([6, 2, 2])']
    """
    shape = tuple(int(s) for s in input_shape)
    if len(shape) not in (3, 4, 5):
        raise ValueError(
            f"plot_comparison needs an (N, C, L), (N, C, H, W) or (N, C, D, H, W) "
            f"input, got {len(shape)}-D {shape}"
        )
    k, channels = len(shape) - 2, shape[1]
    groups = _default_groups(channels) if groups is None else groups
    return [
        _BATCH_NORMS[k](channels),
        LayerNorm(list(shape[1:])),
        _INSTANCE_NORMS[k](channels),
        GroupNorm(groups, channels),
        RMSNorm(list(shape[1:])),
    ]


def _shared_legend(fig: Figure, highlight: int | None, spare: list[Axes]) -> None:
    """The colour key once for a figure of several panels: in a spare cell if any."""
    if highlight is None:
        return
    handles = [
        Patch(
            facecolor=HIGHLIGHT_COLOR,
            edgecolor=HIGHLIGHT_EDGE,
            label=f"statistic {highlight}: elements that\nshare one statistic",
        ),
        Patch(
            facecolor=tint(TINT_BASES[0]),
            edgecolor=EDGE_COLOR,
            label="other statistics\n(light tints)",
        ),
    ]
    if spare:
        spare[0].legend(handles=handles, loc="center", frameon=False, fontsize=9, labelspacing=1.2)
    else:
        for handle in handles:
            handle.set_label(handle.get_label().replace("\n", " "))
        fig.legend(
            handles=handles, loc="outside lower center", ncols=2, frameon=False, fontsize=8.5
        )


def plot_comparison(
    input_shape: Sequence[int] = (4, 6, 2, 2),
    axes=None,
    *,
    groups: int | None = None,
    highlight: int | None = 0,
    figsize: tuple[float, float] = (7, 4.9),
) -> Figure:
    """BatchNorm, LayerNorm, InstanceNorm, GroupNorm and RMSNorm on the same input.

    One panel per norm (see :func:`comparison_modules`), each drawn by
    :func:`plot_reduction` with statistic ``highlight`` marked; a new figure
    has two rows of three panels, the sixth cell holding the colour key.

    Args:
        input_shape: ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        axes: five axes to draw on; a new figure when ``None``.
        groups: GroupNorm's groups (default: see :func:`comparison_modules`).
        highlight: statistic id highlighted in every panel (``None``: none).
        figsize: size of the new figure.

    Returns:
        the figure.

    Example:
        >>> fig = plot_comparison((4, 6, 2, 2))
        >>> len([ax for ax in fig.axes if ax.patches])  # the sixth cell is the key
        5
    """
    shape = tuple(int(s) for s in input_shape)
    modules = comparison_modules(shape, groups)
    fig, axes, spare = axes_grid(axes, len(modules), figsize, ncols=3)
    for module, ax in zip(modules, axes, strict=True):
        plot_reduction(module, shape, ax=ax, highlight=highlight, layout="image", compact=True)
    fig.suptitle(f"The same input {shape}, five ways to share statistics", fontsize=10.5)
    _shared_legend(fig, highlight, spare)
    return fig


def plot_sequence_comparison(
    input_shape: Sequence[int] = (2, 4, 6),
    axes=None,
    *,
    highlight: int | None = 0,
    figsize: tuple[float, float] = (7, 3.2),
) -> Figure:
    """What BatchNorm, LayerNorm and RMSNorm share on a transformer's ``(B, T, D)`` input.

    BatchNorm1d expects channels in dim 1, so it is applied the way sequence
    models must use it: to ``x.transpose(1, 2)``, i.e. one statistic per feature
    ``d`` over all sequences and tokens. LayerNorm(D) and RMSNorm(D) take one
    statistic per token.

    Args:
        input_shape: ``(B, T, D)``.
        axes: three axes to draw on; a new figure when ``None``.
        highlight: statistic id highlighted in every panel (``None``: none).
        figsize: size of the new figure.

    Returns:
        the figure.

    Example:
        >>> fig = plot_sequence_comparison((2, 4, 6))
        >>> len(fig.axes)
        3
    """
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3:
        raise ValueError(f"plot_sequence_comparison needs a (B, T, D) input, got {shape}")
    d = shape[2]
    panels = [
        (BatchNorm1d(d), (0, 2, 1)),
        (LayerNorm(d), None),
        (RMSNorm(d), None),
    ]
    fig, axes, spare = axes_grid(axes, len(panels), figsize)
    for (module, perm), ax in zip(panels, axes, strict=True):
        plot_reduction(
            module, shape, ax=ax, highlight=highlight, layout="sequence", permute=perm, compact=True
        )
    fig.suptitle(f"A batch of sequences (B, T, D) = {shape}", fontsize=10.5)
    _shared_legend(fig, highlight, spare)
    return fig
