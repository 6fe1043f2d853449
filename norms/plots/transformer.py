"""Figures of the chapter "Norms inside the transformer": block diagrams of post-LN, pre-LN and a
pre-LN stack, gradient norms per layer, loss curves.

Every function takes ``ax=None`` (or ``fig=None``) and returns the figure
(a :class:`norms.plots.style.BookFigure`, shown as PNG); none calls ``plt.show()``.
"""

from __future__ import annotations

from typing import Sequence

from matplotlib import colormaps
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .style import BookFigure

__all__ = ["plot_blocks", "plot_grad_norms", "plot_loss_curves", "BLOCKS"]

NORM, ATTN, MLP, IO = "#f6c85f", "#9dc3e6", "#a9d18e", "#e7e6e6"

#: The diagrams, bottom to top: (kind, label) with kind in box/norm/add/io; residual edges are
#: (from index, to index of an "add").
BLOCKS = {
    "Post-LN layer\n(Vaswani et al., 2017)": (
        [
            ("io", "x"),
            ("attn", "self-attention"),
            ("add", "+"),
            ("norm", "LayerNorm 1"),
            ("mlp", "MLP"),
            ("add", "+"),
            ("norm", "LayerNorm 2"),
            ("io", "y"),
        ],
        [(0, 2), (3, 5)],
    ),
    "Pre-LN layer\n(Xiong et al., 2020)": (
        [
            ("io", "x"),
            ("norm", "LayerNorm 1"),
            ("attn", "self-attention"),
            ("add", "+"),
            ("norm", "LayerNorm 2"),
            ("mlp", "MLP"),
            ("add", "+"),
            ("io", "y"),
        ],
        [(0, 3), (3, 6)],
    ),
    "Pre-LN stack": (
        [
            ("io", "embeddings"),
            ("stack", "pre-LN layer 1"),
            ("stack", "..."),
            ("stack", "pre-LN layer N"),
            ("norm", "final LayerNorm"),
            ("io", "head"),
        ],
        [],
    ),
}
_COLORS = {"norm": NORM, "attn": ATTN, "mlp": MLP, "io": IO, "stack": "#d9d2e9"}


def _draw_block(ax, title: str, nodes, residuals) -> None:
    ys = [i * 1.0 for i in range(len(nodes))]
    w, h = 2.2, 0.56
    for (kind, label), y in zip(nodes, ys, strict=True):
        if kind == "add":
            ax.add_patch(
                FancyBboxPatch(
                    (-0.17, y - 0.17),
                    0.34,
                    0.34,
                    boxstyle="circle,pad=0",
                    fc="white",
                    ec="black",
                    lw=1.2,
                )
            )
            ax.text(0, y, "+", ha="center", va="center", fontsize=12, fontweight="bold")
        elif kind == "io":
            ax.text(0, y, label, ha="center", va="center", fontsize=10, style="italic")
        else:
            ax.add_patch(
                FancyBboxPatch(
                    (-w / 2, y - h / 2),
                    w,
                    h,
                    boxstyle="round,pad=0.02",
                    fc=_COLORS[kind],
                    ec="black",
                    lw=1.0,
                )
            )
            ax.text(
                0,
                y,
                label,
                ha="center",
                va="center",
                fontsize=9,
                fontweight="bold" if kind == "norm" else "normal",
            )
    for y0, y1 in zip(ys, ys[1:], strict=False):
        ax.add_patch(
            FancyArrowPatch((0, y0 + 0.3), (0, y1 - 0.3), arrowstyle="-|>", mutation_scale=10, lw=1)
        )
    for a, b in residuals:
        ya, yb = ys[a] + 0.3, ys[b]
        ax.plot([0, -1.15, -1.15], [ya + 0.1, ya + 0.1, yb], color="#555555", lw=1.2)
        ax.add_patch(
            FancyArrowPatch(
                (-1.15, yb),
                (-0.19, yb),
                arrowstyle="-|>",
                mutation_scale=10,
                lw=1.2,
                color="#555555",
            )
        )
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-1.4, 1.25)
    ax.set_ylim(-0.5, 7.5)
    ax.set_aspect("equal")
    ax.axis("off")


def plot_blocks(which: Sequence[str] | None = None, fig=None) -> BookFigure:
    """Post-LN and pre-LN encoder layers and a pre-LN stack with its final norm, side by side.
    Norms are yellow, attention blue, MLPs green; grey lines are the residual connections."""
    names = list(BLOCKS) if which is None else list(which)
    fig = fig or BookFigure(figsize=(3.0 * len(names), 5.2), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        nodes, residuals = BLOCKS[name]
        _draw_block(ax, name, nodes, residuals)
    return fig


def plot_grad_norms(norms_by_run: dict, ax=None) -> BookFigure:
    """``{(kind, depth): [gradient norm of layer 1, ..., layer L]}`` as lines against the layer
    index (Xiong et al., 2020, Fig. 3): post-LN solid, pre-LN dashed, one colour per depth."""
    if ax is None:
        fig = BookFigure(figsize=(7, 3.6), layout="constrained")
        ax = fig.subplots()
    fig = ax.figure
    depths = sorted({d for _, d in norms_by_run})
    cmap = colormaps["viridis"]
    for (kind, depth), values in sorted(norms_by_run.items()):
        color = cmap(depths.index(depth) / max(1, len(depths) - 1) * 0.85)
        ax.plot(
            range(1, len(values) + 1),
            values,
            "-o" if kind == "post" else "--s",
            ms=3,
            color=color,
            label=f"{'post-LN' if kind == 'post' else 'pre-LN'}, {depth} layers",
        )
    ax.set_yscale("log")
    ax.set_xlabel("layer index")
    ax.set_ylabel("‖∂loss/∂W₂‖ of the layer's MLP")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return fig


def plot_loss_curves(runs: Sequence, ax=None, title: str | None = None) -> BookFigure:
    """Training loss against step for :class:`norms.lab.transformer.Run` s; a run whose loss became
    NaN/inf ends with an ×."""
    if ax is None:
        fig = BookFigure(figsize=(7, 3.4), layout="constrained")
        ax = fig.subplots()
    fig = ax.figure
    styles = {"post": "-", "pre": "--", "deepnorm": ":", "pre-nofinal": "-."}
    for run in runs:
        finite = [
            (s, v)
            for s, v in zip(run.steps, run.losses, strict=True)
            if v == v and abs(v) != float("inf")
        ]
        name = {
            "post": "post-LN",
            "pre": "pre-LN",
            "deepnorm": "DeepNorm",
            "pre-nofinal": "pre-LN, no final norm",
        }
        label = (
            f"{name.get(run.kind, run.kind)}, {run.depth} layers, lr {run.lr:g}, "
            f"warm-up {run.warmup}"
        )
        (line,) = ax.plot(
            [s for s, _ in finite], [v for _, v in finite], styles.get(run.kind, "-"), label=label
        )
        if run.diverged and finite:
            ax.plot(*finite[-1], "x", color=line.get_color(), ms=8)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig
