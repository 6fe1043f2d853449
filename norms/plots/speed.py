"""Figures for the chapter "How fast is a normalization layer?": a roofline of measured cases.

The roofline model {Williams, Waterman & Patterson 2009} bounds what a kernel
can reach: with arithmetic intensity ``I`` (floating-point operations per byte
moved), it runs at most at ``min(peak, I * bandwidth)`` operations per second.
We draw the bandwidth roof from the copy bandwidth measured in the same run
(:mod:`norms.fast.bench`, ``impl="copy"``) and, when given, a compute roof from a
measured matrix product. Each measured case is a point at its intensity
(:func:`norms.fast.bench.flops` over :func:`norms.fast.bench.perfect_bytes`) and its
achieved rate (flops over the median time).

Figures are :class:`norms.plots.style.BookFigure` (shown as PNG, no pyplot).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.lines import Line2D

from .style import BookFigure

__all__ = ["IMPL_STYLE", "plot_roofline"]

#: Colour and marker of each implementation (Okabe & Ito colours, as in norms.plots).
IMPL_STYLE = {
    "torch": {"color": "#0072B2", "marker": "o", "label": "torch.nn"},
    "norms": {"color": "#E69F00", "marker": "s", "label": "norms (op by op)"},
    "fused": {"color": "#009E73", "marker": "^", "label": "norms, compiled (fused)"},
}


def plot_roofline(
    records: Sequence[dict],
    peak_flops: float | None = None,
    ax=None,
    figsize: tuple[float, float] = (7.0, 4.2),
    title: str | None = None,
):
    """Roofline of benchmark records: achieved GFLOP/s against arithmetic intensity.

    Args:
        records: records of :func:`norms.fast.bench.run` (with ``flops``, ``bytes``,
            ``median_s``, ``impl``; the ``"copy"`` records give the roof).
        peak_flops: a measured compute peak in FLOP/s (e.g. a matrix product);
            drawn as a flat roof when given.
        ax: draw into this axes; by default a new figure.
        figsize: size of the new figure.
        title: the title (default: one naming the device and thread count).

    Returns:
        the figure.
    """
    copies = [r for r in records if r["impl"] == "copy"]
    cases = [r for r in records if r["impl"] in IMPL_STYLE and r.get("flops")]
    if not copies or not cases:
        raise ValueError(
            f"plot_roofline needs copy records and timed cases, got {len(copies)} copy and "
            f"{len(cases)} case records"
        )
    if ax is None:
        fig = BookFigure(figsize=figsize, layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.figure
    bandwidth = float(np.median([r["bytes"] / r["median_s"] for r in copies]))  # B/s
    intensity = np.array([r["flops"] / r["bytes"] for r in cases])
    _draw_roofs(ax, bandwidth, intensity, peak_flops)
    _draw_cases(ax, cases)
    _roofline_axes(ax, records[0], title)
    _roofline_legend(ax)
    return fig


def _draw_roofs(ax, bandwidth: float, intensity: np.ndarray, peak_flops: float | None) -> None:
    """The slanted memory roof (copy bandwidth × intensity) and the flat compute roof."""
    lo, hi = (
        intensity.min() / 4,
        max(intensity.max() * 4, (peak_flops / bandwidth * 4) if peak_flops else 0),
    )
    xs = np.geomspace(lo, hi, 200)
    roof = xs * bandwidth
    if peak_flops:
        roof = np.minimum(roof, peak_flops)
        ax.axhline(peak_flops / 1e9, color="0.6", lw=0.8, ls=":")
        ax.annotate(
            f"compute: {peak_flops / 1e9:.0f} GFLOP/s (matmul)",
            (hi, peak_flops / 1e9),
            ha="right",
            va="bottom",
            fontsize=8,
            color="0.35",
        )
    ax.plot(xs, roof / 1e9, color="0.2", lw=1.5)
    ax.annotate(
        f"memory: {bandwidth / 1e9:.1f} GB/s (copy)",
        (xs[8], roof[8] / 1e9),
        rotation=0,
        ha="left",
        va="bottom",
        fontsize=8,
        color="0.2",
    )


def _draw_cases(ax, cases: Sequence[dict]) -> None:
    """One point per record: filled for the forward pass, open for forward + backward."""
    jitter = {"torch": 0.94, "norms": 1.0, "fused": 1.06}  # side by side at equal intensity
    for impl, style in IMPL_STYLE.items():
        pts = [
            (
                r["flops"] / r["bytes"] * jitter[impl],
                r["flops"] / r["median_s"] / 1e9,
                r["direction"] == "fwd",
            )
            for r in cases
            if r["impl"] == impl
        ]
        if not pts:
            continue
        x, y, fwd = (np.array(v) for v in zip(*pts, strict=True))
        ax.scatter(x[fwd], y[fwd], color=style["color"], marker=style["marker"], s=36, zorder=3)
        ax.scatter(
            x[~fwd],
            y[~fwd],
            facecolor="white",
            edgecolor=style["color"],
            marker=style["marker"],
            s=36,
            zorder=3,
            linewidth=1.5,
        )


def _roofline_axes(ax, first: dict, title: str | None) -> None:
    """Log-log axes with plain tick labels, the axis labels and the title."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP per byte a perfect kernel moves)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(
        title
        or f"Measured on this machine: {first.get('device', '?')}, "
        f"{first.get('threads', '?')} thread(s)",
        fontsize=10,
    )


def _roofline_legend(ax) -> None:
    """The key: one marker per implementation, filled and open for the two directions."""
    handles = [
        Line2D([], [], color=s["color"], marker=s["marker"], ls="", label=s["label"])
        for s in IMPL_STYLE.values()
    ]
    handles += [
        Line2D([], [], color="0.3", marker="o", ls="", label="forward (filled)"),
        Line2D(
            [],
            [],
            color="0.3",
            marker="o",
            ls="",
            markerfacecolor="white",
            label="forward + backward (open)",
        ),
    ]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
