r"""Figures that show which elements of a tensor share one statistic.

Every figure here is *generated* from :func:`norms.axes.describe`: the colour of a
cell is looked up in ``describe(module, input_shape).statistic_index``, never
decided per normalization by hand. So a figure cannot disagree with the layer.

Two drawings of an input tensor:

* ``layout="image"``: a 3-D block of cells for image-like inputs ``(N, C, *S)``,
  after Figure 2 of the GroupNorm paper (Wu & He, 2018). Channels ``C`` run left
  to right, the spatial positions run top to bottom (``H`` and ``W`` folded into
  one axis ``H·W``; ``L`` for ``(N, C, L)``; ``D·H·W`` for 3-D volumes) and the
  samples ``N`` run into the page. A 2-D ``(N, C)`` input is a flat ``N × C`` grid.
* ``layout="sequence"``: transformer-style ``(B, T, D)`` inputs as ``B`` panels
  of ``T × D`` grids (tokens top to bottom, features left to right).

One statistic is highlighted in strong vermillion, the others are light tints of
the Okabe–Ito palette (safe for colour-blind readers); neighbouring statistics
never share a tint.

Every cell is one :class:`matplotlib.patches.Polygon` whose ``gid`` names its
coordinates in the folded tensor: ``"cell-a-b-c"`` (block: ``n, c, s``; panels:
``panel, row, column``). :func:`~norms.plots.cells.drawn_cells` and
:func:`~norms.plots.cells.highlighted_cells` (:mod:`norms.plots.cells`, re-exported here)
read the figure back from those artists, which is how the tests check a drawing.
In the block only the front, top and right faces are visible, but every cell is
drawn (back to front), so every element of the tensor has its artist.

When no axes are given, figures are :class:`matplotlib.figure.Figure` objects
made without pyplot: nothing is registered with pyplot's figure manager, so a
notebook cell whose last line is the call shows the figure exactly once, and
nothing needs closing.

Public names:

* :func:`plot_reduction`: the reduction figure of one layer on one input
  (several side by side: :mod:`norms.plots.comparisons`).
* :func:`drawn_cells`, :func:`highlighted_cells`: read a reduction figure back.

The running-statistics and batch-noise figures are :mod:`norms.plots.running_stats`
and :mod:`norms.plots.batch_noise`; the palette is :mod:`norms.plots.style`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Polygon

from norms.axes import Reduction, describe, is_unbatched, module_label
from norms.i18n import Text, tr

from .cells import cell_gid, drawn_cells, highlighted_cells
from .style import HIGHLIGHT_COLOR, BookFigure

__all__ = [
    "MAX_CELLS",
    "plot_reduction",
    "check_drawable",
    "drawn_cells",
    "highlighted_cells",
]

#: Non-highlighted statistics cycle through light tints (:func:`tint`) of these: Okabe–Ito
#: sky blue, bluish green, yellow, reddish purple, and a neutral grey. Vermillion and
#: its look-alike orange are left out so that nothing resembles the highlight;
#: Okabe–Ito blue is left out because, tinted, it is too close to sky blue. The website's
#: explorers use the same (norms.explore.web).
TINT_BASES = ("#56B4E9", "#009E73", "#F0E442", "#CC79A7", "#8C8C8C")
_TINT_AMOUNT = 0.62  # how far towards white
#: The edge of a cell of a non-highlighted statistic (RGBA).
EDGE_COLOR = (0.25, 0.25, 0.25, 1.0)
#: The edge of a cell of the highlighted statistic (RGBA).
HIGHLIGHT_EDGE = (0.35, 0.12, 0.0, 1.0)

#: The most cells a reduction figure draws (larger shapes raise ValueError).
MAX_CELLS = 1024
#: The most samples (N) a block figure stacks into the page.
MAX_DEPTH = 16
#: The most cells along a side: C and H·W in a block, T and D in panels.
MAX_SIDE = 64
#: The most panels (B) in the sequence layout.
MAX_PANELS = 8

#: The names of the spatial dims of an ``(N, C, *S)`` input, by the number of them.
SPATIAL_NAMES = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}

_LAYOUTS = ("auto", "image", "sequence")

# Messages with named fields: the website's explorers (norms.explore.web) fill the same text
# (their fields given as "{name}", for the page's script to fill).


def sequence_rank_message(ndim) -> Text:
    """The error for a sequence layout of an input of ``ndim`` dims."""
    return tr(
        "layout='sequence' draws (B, T, D), (T, D) or (D,) inputs, got a {ndim}-D shape; "
        "use layout='image'",
        ndim=ndim,
    )


def too_many_elements_message(shape, cells, max_cells) -> Text:
    """The error for an input with more elements than a figure draws."""
    return tr(
        "too many cells to draw: the figure draws every element, and {shape} has {cells} "
        "(at most {max_cells}). Use a smaller shape: which elements share a statistic does not "
        "depend on the sizes.",
        shape=shape,
        cells=cells,
        max_cells=max_cells,
    )


def too_many_cells_message(a, b, c, total, max_cells, la, lb, lc) -> Text:
    """The error for an input that folds to more cells than a figure draws."""
    return tr(
        "too many cells to draw: the figure draws every element, and this input folds to "
        "{a} × {b} × {c} = {total} cells (at most {max_cells}, and at most {la} × {lb} × {lc}). "
        "Use a smaller shape: which elements share a statistic does not depend on the sizes.",
        a=a,
        b=b,
        c=c,
        total=total,
        max_cells=max_cells,
        la=la,
        lb=lb,
        lc=lc,
    )


def tint(color: str, amount: float = _TINT_AMOUNT) -> np.ndarray:
    """``color`` moved ``amount`` of the way towards white, as RGBA (the light tints)."""
    rgba = np.array(to_rgba(color))
    rgba[:3] = rgba[:3] + (1.0 - rgba[:3]) * amount
    return rgba


def _shade(rgba: np.ndarray, factor: float) -> np.ndarray:
    """Lighter (``factor > 0``, towards white) or darker (``< 0``, towards black)."""
    out = np.array(rgba, dtype=float)
    if factor >= 0:
        out[:3] = out[:3] + (1.0 - out[:3]) * factor
    else:
        out[:3] = out[:3] * (1.0 + factor)
    return out


def _neighbours(grid: np.ndarray) -> dict[int, set[int]]:
    """Statistic ids that own neighbouring cells (along any axis of the folded grid)."""
    pairs = []
    for axis in range(grid.ndim):
        a = np.moveaxis(grid, axis, 0)
        left, right = a[:-1].ravel(), a[1:].ravel()
        differ = left != right
        pairs.append(np.stack([left[differ], right[differ]], axis=1))
    adjacent: dict[int, set[int]] = {}
    for i, j in np.unique(np.concatenate(pairs), axis=0):
        adjacent.setdefault(int(i), set()).add(int(j))
        adjacent.setdefault(int(j), set()).add(int(i))
    return adjacent


def _tint_indices(grid: np.ndarray) -> np.ndarray:
    """A tint per statistic id such that neighbouring statistics get different tints.

    Each id prefers tint ``id % 5`` (so consecutive statistics differ, as in
    a plain cycle) but takes the next free one if an earlier neighbour has it.
    A plain cycle is not enough: with 5 channels, InstanceNorm's statistic
    ``n * 5 + c`` would give every sample the same tint per channel and look
    exactly like BatchNorm. Greedy colouring in id order needs at most 4 tints
    here: the statistics are boxes of a 3-D grid, and a box has at most one
    earlier neighbour along each axis.
    """
    count = int(grid.max()) + 1
    adjacent = _neighbours(grid)
    chosen = np.zeros(count, dtype=np.int64)
    for sid in range(count):
        taken = {int(chosen[j]) for j in adjacent.get(sid, ()) if j < sid}
        order = [(sid + k) % len(TINT_BASES) for k in range(len(TINT_BASES))]
        free = [k for k in order if k not in taken]
        chosen[sid] = free[0] if free else sid % len(TINT_BASES)
    return chosen


def _cell_colors(grid: np.ndarray, highlight: int | None) -> np.ndarray:
    """RGBA per cell: the highlight colour for statistic ``highlight``, else a tint."""
    tints = np.stack([tint(c) for c in TINT_BASES])
    colors = tints[_tint_indices(grid)[grid]]
    if highlight is not None:
        colors[grid == highlight] = to_rgba(HIGHLIGHT_COLOR)
    return colors


# --------------------------------------------------------------------------
# What to draw: the folded view of describe(...).statistic_index
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _View:
    """The statistic ids folded to 3-D, and how to label the drawing.

    ``kind`` is ``"block"`` (grid is ``(N, C, S)``: depth, columns, rows) or
    ``"panels"`` (grid is ``(P, R, K)``: panels, rows, columns). A label of
    ``None`` means that axis is not drawn (it has size 1 and no meaning).
    """

    kind: str
    grid: np.ndarray
    labels: tuple[str | None, str | None, str | None]
    dim_names: tuple[str, ...]


def _resolve_layout(layout: str, norm: str, ndim: int) -> str:
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    if layout != "auto":
        return layout
    return "sequence" if norm in ("LayerNorm", "RMSNorm") and ndim <= 3 else "image"


def _image_view(index: np.ndarray, norm: str) -> _View:
    shape, ndim = index.shape, index.ndim
    if ndim == 1:
        return _View("panels", index.reshape(1, 1, -1), (None, None, "C"), ("C",))
    if is_unbatched(norm, ndim):
        spatial = SPATIAL_NAMES.get(ndim - 1, tuple(f"S{i}" for i in range(ndim - 1)))
        grid = index.reshape(1, shape[0], -1)
        return _View("block", grid, (None, "C", "·".join(spatial)), ("C", *spatial))
    if ndim == 2:
        return _View("panels", index.reshape(1, *shape), (None, "N", "C"), ("N", "C"))
    spatial = SPATIAL_NAMES.get(ndim - 2, tuple(f"S{i}" for i in range(ndim - 2)))
    grid = index.reshape(shape[0], shape[1], -1)
    return _View("block", grid, ("N", "C", "·".join(spatial)), ("N", "C", *spatial))


def _sequence_view(index: np.ndarray) -> _View:
    ndim = index.ndim
    if ndim == 3:
        return _View("panels", index, ("b", "T", "D"), ("B", "T", "D"))
    if ndim == 2:
        return _View("panels", index[None], (None, "T", "D"), ("T", "D"))
    if ndim == 1:
        return _View("panels", index.reshape(1, 1, -1), (None, None, "D"), ("D",))
    raise ValueError(sequence_rank_message(ndim))


def _check_size(view: _View) -> None:
    a, b, c = view.grid.shape
    total = a * b * c
    limits = (
        (MAX_DEPTH, MAX_SIDE, MAX_SIDE)
        if view.kind == "block"
        else (
            MAX_PANELS,
            MAX_SIDE,
            MAX_SIDE,
        )
    )
    if total > MAX_CELLS or a > limits[0] or b > limits[1] or c > limits[2]:
        raise ValueError(too_many_cells_message(a, b, c, total, MAX_CELLS, *limits))


def _displayed_index(reduction: Reduction, permute: Sequence[int] | None) -> np.ndarray:
    """``statistic_index`` laid out like the displayed input (undo ``permute``)."""
    index = reduction.statistic_index
    if permute is not None:
        index = index.permute(*np.argsort(permute).tolist())
    return index.numpy()


def _displayed_dims(reduction: Reduction, permute: Sequence[int] | None) -> tuple[int, ...]:
    if permute is None:
        return tuple(reduction.reduced_dims)
    return tuple(sorted(int(permute[d]) for d in reduction.reduced_dims))


def _check_permute(permute: Sequence[int] | None, ndim: int) -> tuple[int, ...] | None:
    if permute is None:
        return None
    perm = tuple(int(p) for p in permute)
    if sorted(perm) != list(range(ndim)):
        raise ValueError(f"permute must be a permutation of range({ndim}), got {permute!r}")
    return perm


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


def _permute_label(permute: tuple[int, ...] | None) -> str:
    if permute is None:
        return ""
    moved = [i for i, p in enumerate(permute) if p != i]
    if len(moved) == 2:
        return f" on x.transpose({moved[0]}, {moved[1]})"
    return f" on x.permute{permute}"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _stat_words(reduction: Reduction) -> str:
    n = reduction.num_statistics
    return _plural(n, "mean") if reduction.has_mean else _plural(n, "RMS value")


def _param_words(reduction: Reduction) -> str:
    if reduction.param_shape is None:
        return "no γ, β"
    names = "γ, β" if reduction.has_bias else "γ"
    return f"{names}: {tuple(reduction.param_shape)}"


def _dims_words(dims: tuple[int, ...], names: tuple[str, ...]) -> str:
    if not dims:
        return "reduces no dims ()"
    named = ", ".join(names[d] for d in dims) if len(names) > max(dims) else ""
    return f"reduces {named} {dims}" if named else f"reduces dims {dims}"


def _title(
    reduction: Reduction,
    label: str,
    shape: tuple[int, ...],
    dims: tuple[int, ...],
    names: tuple[str, ...],
    compact: bool,
) -> str:
    reduces = _dims_words(dims, names)
    if compact:
        return f"{label}\n{reduces}\n{_stat_words(reduction)} · {_param_words(reduction)}"
    per = _plural(reduction.elements_per_statistic, "element")
    return (
        f"{label}, input {shape}\n"
        f"{reduces} → {_stat_words(reduction)} of {per} · {_param_words(reduction)}"
    )


def _legend(ax: Axes, reduction: Reduction, highlight: int | None) -> None:
    shared = "1 mean and 1 variance" if reduction.has_mean else "1 RMS value"
    handles = []
    if highlight is not None:
        handles.append(
            Patch(
                facecolor=HIGHLIGHT_COLOR,
                edgecolor=HIGHLIGHT_EDGE,
                label=f"statistic {highlight}: these elements share {shared}",
            )
        )
    if reduction.num_statistics > (0 if highlight is None else 1):
        tints = [tint(c) for c in TINT_BASES[:3]]
        handles.append(
            Patch(facecolor=tints[0], edgecolor=EDGE_COLOR, label="other statistics (light tints)")
        )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        frameon=False,
        fontsize=8.5,
        ncols=1,
        handlelength=1.2,
    )


# --------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------


def _add_face(ax: Axes, corners: list[tuple[float, float]], color, edge, gid: str) -> None:
    # add_artist, not add_patch: limits are set once, explicitly (much faster).
    ax.add_artist(
        Polygon(
            np.asarray(corners, dtype=float),
            closed=True,
            facecolor=color,
            edgecolor=edge,
            linewidth=0.5,
            gid=gid,
        )
    )


def _edge_for(grid_value: int, highlight: int | None):
    return HIGHLIGHT_EDGE if highlight is not None and grid_value == highlight else EDGE_COLOR


_LABEL_STYLE = {"fontsize": 9, "color": "0.15"}
_LINE_INCHES = 13 / 72  # height of one line of 9 pt label text, with some air
_MAX_CELL_INCHES = 0.42  # a cell is never drawn larger than this


def _axes_inches(ax: Axes, reserved: float) -> tuple[float, float]:
    """Width and height in inches left for the drawing in ``ax``.

    The axes box before any layout engine runs, less ``reserved`` inches of
    height that the title and legend will take.
    """
    box = ax.get_position(original=True)  # not shrunk to an aspect ratio yet
    fig_w, fig_h = ax.figure.get_size_inches()
    return box.width * fig_w, max(box.height * fig_h - reserved, 0.3 * box.height * fig_h)


def _inches_per_unit(ax: Axes, width: float, height: float, reserved: float) -> float:
    """Scale of an equal-aspect drawing of ``width × height`` data units in ``ax``.

    At most :data:`_MAX_CELL_INCHES` per unit: :func:`_set_limits` widens the
    view of a small drawing rather than blowing its cells up.
    """
    box_w, box_h = _axes_inches(ax, reserved)
    return min(box_w / width, box_h / height, _MAX_CELL_INCHES)


def _set_limits(ax: Axes, x: tuple[float, float], y: tuple[float, float], reserved: float) -> None:
    """Set the view to ``x × y``, widened about its centre if cells would be too big."""
    box_w, box_h = _axes_inches(ax, reserved)
    width, height = x[1] - x[0], y[1] - y[0]
    grow = max(1.0, min(box_w / width, box_h / height) / _MAX_CELL_INCHES)
    cx, cy = (x[0] + x[1]) / 2, (y[0] + y[1]) / 2
    ax.set_xlim(cx - grow * width / 2, cx + grow * width / 2)
    ax.set_ylim(cy - grow * height / 2, cy + grow * height / 2)


def _text_pad(ax: Axes, width: float, height: float, reserved: float) -> float:
    """One line of label text, in data units (labels sit outside the cells)."""
    return _LINE_INCHES / _inches_per_unit(ax, width, height, reserved)


def _label(ax: Axes, x: float, y: float, text: str, **kwargs) -> None:
    ax.text(x, y, text, **{**_LABEL_STYLE, **kwargs})


def _block_geometry(n: int, c: int, s: int) -> tuple[float, float, float]:
    """Cell height and the per-sample depth offset (cabinet projection at 45°)."""
    cell_h = min(1.0, max(0.3, 1.5 * max(c, 2) / s))
    depth = 0.5 if n <= 8 else 4.0 / n
    return cell_h, depth, depth


def _draw_block(ax: Axes, view: _View, highlight: int | None, reserved: float) -> None:
    """Draw an ``(N, C, S)`` block: front faces of every cell, back to front,
    plus the top faces of row 0 and the right faces of the last column."""
    grid = view.grid
    n_depth, n_cols, n_rows = grid.shape
    colors = _cell_colors(grid, highlight)
    cell_h, dx, dy = _block_geometry(n_depth, n_cols, n_rows)
    height = n_rows * cell_h

    for n in reversed(range(n_depth)):
        ox, oy = n * dx, n * dy
        for c in range(n_cols):
            for s in range(n_rows):
                x0, y0 = ox + c, oy + (n_rows - 1 - s) * cell_h
                _add_face(
                    ax,
                    [(x0, y0), (x0 + 1, y0), (x0 + 1, y0 + cell_h), (x0, y0 + cell_h)],
                    colors[n, c, s],
                    _edge_for(grid[n, c, s], highlight),
                    cell_gid(n, c, s),
                )
        for c in range(n_cols):  # top faces: row s = 0
            x0, y0 = ox + c, oy + height
            _add_face(
                ax,
                [(x0, y0), (x0 + 1, y0), (x0 + 1 + dx, y0 + dy), (x0 + dx, y0 + dy)],
                _shade(colors[n, c, 0], 0.35),
                _edge_for(grid[n, c, 0], highlight),
                cell_gid(n, c, 0, "top"),
            )
        for s in range(n_rows):  # right faces: column c = C-1
            x0, y0 = ox + n_cols, oy + (n_rows - 1 - s) * cell_h
            _add_face(
                ax,
                [(x0, y0), (x0 + dx, y0 + dy), (x0 + dx, y0 + dy + cell_h), (x0, y0 + cell_h)],
                _shade(colors[n, n_cols - 1, s], -0.18),
                _edge_for(grid[n, n_cols - 1, s], highlight),
                cell_gid(n, n_cols - 1, s, "side"),
            )

    width, top = n_cols + n_depth * dx, height + n_depth * dy
    pad = _text_pad(ax, width + 2, top + 2, reserved)
    depth_label, col_label, row_label = view.labels
    _label(ax, n_cols / 2, -0.2 * pad, f"{col_label} = {n_cols}", ha="center", va="top")
    _label(
        ax, -0.2 * pad, height / 2, f"{row_label} = {n_rows}", ha="right", va="center", rotation=90
    )
    if depth_label is not None:
        mx, my = n_cols + n_depth * dx / 2, n_depth * dy / 2
        _label(
            ax,
            mx + 0.15 * pad,
            my - 0.15 * pad,
            f"{depth_label} = {n_depth}",
            ha="center",
            va="top",
            rotation=45,
            rotation_mode="anchor",
        )
    _set_limits(ax, (-1.3 * pad, width + 1.1 * pad), (-1.3 * pad, top + 0.3 * pad), reserved)


def _panel_columns(
    ax: Axes, n_panels: int, panel_w: float, panel_h: float, gap: float, reserved: float
) -> int:
    """How many panels per row make the cells largest (near-ties: fewer rows)."""
    best, best_scale = n_panels, 0.0
    for cols in range(n_panels, 0, -1):
        rows = math.ceil(n_panels / cols)
        width = cols * panel_w + (cols - 1) * gap
        height = rows * panel_h + rows * gap  # a header line above every row
        scale = _inches_per_unit(ax, width + 2, height + 2, reserved)
        if scale > best_scale * 1.1:
            best, best_scale = cols, scale
    return best


def _draw_panels(ax: Axes, view: _View, highlight: int | None, reserved: float) -> None:
    """Draw ``P`` grids of ``R × K`` cells (row 0 at the top), wrapped into rows."""
    grid = view.grid
    n_panels, n_rows, n_cols = grid.shape
    colors = _cell_colors(grid, highlight)
    cell_h = min(1.0, max(0.4, 1.5 * n_cols / max(n_rows, 1))) if n_panels == 1 else 1.0
    panel_h = n_rows * cell_h
    gap = max(1.5, 0.25 * n_cols)
    cols = _panel_columns(ax, n_panels, n_cols, panel_h, gap, reserved)
    rows = math.ceil(n_panels / cols)
    width = cols * n_cols + (cols - 1) * gap
    panel_label, row_label, col_label = view.labels
    header = 0.0 if panel_label is None else 1.0
    pad = _text_pad(ax, width + 2, rows * (panel_h + header * gap) + 2, reserved)
    step_y = panel_h + max(gap, 1.5 * pad) * header + 0.6 * pad  # row to row
    for p in range(n_panels):
        ox, oy = (p % cols) * (n_cols + gap), -(p // cols) * step_y
        for r in range(n_rows):
            for k in range(n_cols):
                x0, y0 = ox + k, oy + (n_rows - 1 - r) * cell_h
                _add_face(
                    ax,
                    [(x0, y0), (x0 + 1, y0), (x0 + 1, y0 + cell_h), (x0, y0 + cell_h)],
                    colors[p, r, k],
                    _edge_for(grid[p, r, k], highlight),
                    cell_gid(p, r, k),
                )
        if panel_label is not None:
            _label(
                ax,
                ox + n_cols / 2,
                oy + panel_h + 0.15 * pad,
                f"{panel_label} = {p}",
                ha="center",
                va="bottom",
            )
    bottom = -(rows - 1) * step_y
    _label(ax, n_cols / 2, bottom - 0.2 * pad, f"{col_label} = {n_cols}", ha="center", va="top")
    if row_label is not None:
        _label(
            ax,
            -0.2 * pad,
            panel_h / 2,
            f"{row_label} = {n_rows}",
            ha="right",
            va="center",
            rotation=90,
        )
    top = panel_h + (1.4 * pad if panel_label is not None else 0.3 * pad)
    _set_limits(ax, (-1.3 * pad, width + 0.3 * pad), (bottom - 1.3 * pad, top), reserved)


# --------------------------------------------------------------------------
# plot_reduction
# --------------------------------------------------------------------------


def _reserved_inches(title: bool | str, compact: bool, legend: bool) -> float:
    """Height the title and the legend will take from the axes box."""
    if title is True:
        title_lines = 3 if compact else 2
    else:
        title_lines = 1 if title else 0
    return _LINE_INCHES * (1.1 * title_lines + (2.6 if legend else 0.0))


def _grow_to_fit(fig: Figure, tries: int = 4) -> None:
    """Make a figure this module created tall enough that nothing is cut off.

    The constrained layout sizes the axes before the equal aspect shrinks them;
    over a wide drawing the title can then end up partly above the figure. Lay
    the figure out, measure what sticks out, grow the height, and repeat.
    """
    for _ in range(tries):
        fig.draw_without_rendering()
        box = fig.get_tightbbox()  # inches
        over = max(0.0, box.y1 - fig.get_figheight()) + max(0.0, -box.y0)
        if over < 0.01:
            return
        fig.set_size_inches(fig.get_figwidth(), fig.get_figheight() + 2 * over + 0.1)


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    """``ax`` (or the axes of a new figure) set up for cells: equal aspect, no axis lines."""
    if ax is None:
        ax = BookFigure(figsize=figsize, layout="constrained").subplots()
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax


def check_drawable(input_shape: Sequence[int]) -> tuple[int, ...]:
    """``input_shape`` as a tuple if it has at most :data:`MAX_CELLS` elements, else ``ValueError``.

    Call it before :func:`norms.axes.describe`, which builds an index of every element.
    """
    shape = tuple(int(s) for s in input_shape)
    cells = math.prod(shape)
    if cells > MAX_CELLS:
        raise ValueError(too_many_elements_message(shape, cells, MAX_CELLS))
    return shape


def plot_reduction(
    module: torch.nn.Module,
    input_shape: Sequence[int],
    ax: Axes | None = None,
    highlight: int | None = 0,
    *,
    layout: str = "auto",
    permute: Sequence[int] | None = None,
    title: bool | str = True,
    compact: bool = False,
    legend: bool | None = None,
    figsize: tuple[float, float] = (7, 3.5),
) -> Figure:
    """Draw an input tensor and mark which elements share one statistic.

    The grouping comes from ``describe(module, shape).statistic_index``: cells
    with the same id share a mean and a variance (RMSNorm: one RMS value).
    Statistic ``highlight`` is drawn in vermillion, the others in light tints;
    neighbouring statistics never share a tint (there are five tints, so distant
    statistics can).

    Image-like inputs ``(N, C, *S)`` are drawn as a block with ``C`` across,
    the spatial dims folded into one axis down (``H·W``, ``L`` or ``D·H·W``) and
    ``N`` into the page; ``(N, C)`` as a flat grid. Sequence inputs ``(B, T, D)``
    are drawn as ``B`` panels of ``T × D`` grids. Every element gets a cell; an
    input that folds to more than :data:`MAX_CELLS` cells (or more than 16
    samples deep, 8 panels, 64 cells along a side) raises ``ValueError``
    instead of drawing an unreadable figure.

    Args:
        module: a ``norms`` module or the matching ``torch.nn`` one.
        input_shape: shape of the input as the reader sees it.
        ax: axes to draw on; a new ``figsize`` figure when ``None``.
        highlight: id of the statistic to highlight, or ``None`` for none.
        layout: ``"image"``, ``"sequence"`` or ``"auto"`` (LayerNorm and RMSNorm
            on inputs of rank ≤ 3 are sequences, and so is any rank-3 input with
            ``permute``; everything else image-like).
        permute: the module sees ``x.permute(*permute)`` rather than ``x`` (e.g.
            ``(0, 2, 1)``: BatchNorm1d over the features of a ``(B, T, D)``
            input). The figure still shows ``x``; the title says so.
        title: ``True`` for the generated title (norm, input shape, reduced
            dims, number of statistics, γ/β shape), ``False`` for none, or a string.
        compact: a three-line title for small panels.
        legend: draw the colour key below the drawing (default: ``not compact``).
        figsize: size of the new figure when ``ax`` is ``None``.

    Returns:
        the :class:`~matplotlib.figure.Figure` drawn on.

    Raises:
        ValueError: the module rejects the shape, ``highlight`` is not a
            statistic id, the layout does not fit the shape, or the input is too
            large to draw.

    Example:
        >>> import norms
        >>> fig = plot_reduction(norms.GroupNorm(2, 6), (4, 6, 2, 2))
        >>> sorted(highlighted_cells(fig))[:3]
        [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
    """
    shape = check_drawable(input_shape)
    perm = _check_permute(permute, len(shape))
    reduction = _described(module, shape, perm, highlight)
    view = _view(reduction, perm, layout, len(shape))

    own_figure = ax is None
    ax = _new_axes(ax, figsize)
    show_legend = legend if legend is not None else not compact
    reserved = _reserved_inches(title, compact, show_legend)
    (_draw_block if view.kind == "block" else _draw_panels)(ax, view, highlight, reserved)
    if title is True:
        _generated_title(ax, module, reduction, shape, perm, view, compact)
    elif title:
        ax.set_title(str(title), fontsize=10)
    if show_legend:
        _legend(ax, reduction, highlight)
    if own_figure:
        _grow_to_fit(ax.figure)
    return ax.figure


def _described(module, shape: tuple[int, ...], perm, highlight: int | None):
    """:func:`describe` of what the module sees (``x.permute(*perm)``); checks ``highlight``."""
    seen_shape = shape if perm is None else tuple(shape[p] for p in perm)
    reduction = describe(module, seen_shape)
    if highlight is not None and not 0 <= highlight < reduction.num_statistics:
        raise ValueError(
            f"highlight={highlight} is not a statistic id: {reduction.norm} on {seen_shape} "
            f"computes statistics 0 .. {reduction.num_statistics - 1}"
        )
    return reduction


def _generated_title(ax, module, reduction, shape, perm, view: _View, compact: bool) -> None:
    """The title: the norm, the input shape, the reduced dims, the statistics, γ/β's shape."""
    label = module_label(module) + _permute_label(perm)
    dims = _displayed_dims(reduction, perm)
    text = _title(reduction, label, shape, dims, view.dim_names, compact)
    ax.set_title(text, fontsize=8.5 if compact else 10, loc="center")


def _view(reduction, perm, layout: str, rank: int) -> _View:
    """How the figure lays the cells out (a block or panels); raises if it is too large."""
    index = _displayed_index(reduction, perm)
    kind = _resolve_layout(layout, reduction.norm, rank)
    if layout == "auto" and perm is not None and rank == 3:
        kind = "sequence"  # a (B, T, D) input fed to BatchNorm1d as (B, D, T)
    view = _sequence_view(index) if kind == "sequence" else _image_view(index, reduction.norm)
    _check_size(view)
    return view
