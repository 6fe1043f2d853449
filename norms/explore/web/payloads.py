"""What each explorer ships to the page: controls, data computed by ``norms``, messages.

See :mod:`norms.explore.web` for the design. Every number here comes from the kernel
code: :func:`norms.axes.describe` (through :func:`norms.explore.state.build_module`),
:func:`norms.lab.simulations.running_stats_batches` and :func:`norms.lab.simulate_batch_noise`;
every message from the code that raises it in the kernel version.
"""

from __future__ import annotations

import base64
import functools
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import torch

from norms import stats
from norms.axes import NORMS, describe
from norms.i18n import join, tr
from norms.lab import simulations
from norms.plots import batch_noise, reductions, running_stats
from norms.plots.style import HIGHLIGHT_COLOR, png_bytes

from ..state import (
    ERROR_COLOR,
    batch_size_spreads,
    batch_size_text,
    build_module,
    error_html,
    layout_options,
    placeholders,
    running_stats_text,
    shape_messages,
    stat_text,
    stat_words,
)
from .page import bilingual, colab, html

__all__ = [
    "REDUCTION_GRID",
    "reduction_tables",
    "reduction_payload",
    "running_stats_payload",
    "batch_size_payload",
    "states_payload",
    "precomputed",
]

#: The shapes the reduction explorer computes on the page: at most 5 dims, every size
#: at most 8 (so N ≤ 4, C ≤ 8 and spatial sizes ≤ 4 are all inside), groups 1..8.
REDUCTION_GRID = {
    "max_rank": 5,
    "max_first": 8,
    "max_second": 8,
    "max_other": 8,
    "max_groups": 8,
    "max_last_dims": 5,
}
_PROBE = (2, 4, 3, 5, 6)  # sizes >= 2 everywhere, so every kept dim shows; C = 4 with 2 groups

#: Running-statistics explorer: the grid of the page (momentum is continuous, as in the kernel).
RUNNING_STATS_GRID = {
    "batch_size": (1, 2, 4, 8, 16, 32, 64, 256),
    "steps": (10, 20, 50, 100, 200, 500),
    "seed": (0, 1),
}
#: Batch-size explorer: the grid of the page.
BATCH_SIZE_GRID = {
    "batch_size": simulations.DEFAULT_BATCH_SIZES,
    "trials": (50, 100),
    "seed": (0,),
    "channels": tuple(range(1, 9)),
    "groups": tuple(range(1, 9)),
}


def _shape_text(shape: Sequence[int]) -> str:
    return str(tuple(int(s) for s in shape))


def _error(exc: Exception, shape: Sequence[int] | None = None) -> list[str]:
    message = str(exc)
    if shape is not None:
        message = message.replace(_shape_text(shape), "{shape}")
    return [type(exc).__name__, message]


def _rule(reduction) -> dict:
    """Which dims index the statistics, read off ``statistic_index`` of a probe shape."""
    index = reduction.statistic_index
    kept, group_dim = [], None
    for d in range(index.dim()):
        line = index[tuple(slice(None) if k == d else 0 for k in range(index.dim()))].tolist()
        if len(set(line)) > 1:
            kept.append(d)
            if line[1] == line[0]:  # blocks of consecutive positions share a statistic
                group_dim = d
    return {
        "kept": kept,
        "group_dim": group_dim,
        "param_dims": None if reduction.param_dims is None else list(reduction.param_dims),
        "has_mean": reduction.has_mean,
        "eval_differ": reduction.train_eval_differ,
    }


@functools.lru_cache(maxsize=1)
def reduction_tables() -> dict:
    """The rule of every (norm, rank[, last dims]) and the message of every invalid choice.

    Keys: ``"BatchNorm2d|4"``, ``"LayerNorm|4|2"`` (rank 4, last 2 dims),
    ``"GroupNorm|C6|G4"`` (channels, groups). Computed by
    :func:`norms.explore.state.build_module` and :func:`norms.axes.describe` on probe shapes.
    """
    rules, errors = {}, {}
    g = REDUCTION_GRID
    for norm in NORMS:
        per_dims = norm in ("LayerNorm", "RMSNorm")
        for rank in range(1, g["max_rank"] + 1):
            probe = _PROBE[:rank]
            for k in range(1, g["max_last_dims"] + 1) if per_dims else (None,):
                key = f"{norm}|{rank}" + (f"|{k}" if per_dims else "")
                try:
                    reduction = describe(
                        build_module(norm, probe, groups=2, last_dims=k or 1), probe
                    )
                except ValueError as exc:
                    errors[key] = _error(exc, probe)
                else:
                    rules[key] = _rule(reduction)
    for c, groups in itertools.product(
        range(1, g["max_second"] + 1), range(1, g["max_groups"] + 1)
    ):
        probe = (2, c, 3)
        try:
            describe(build_module("GroupNorm", probe, groups=groups), probe)
        except ValueError as exc:
            errors[f"GroupNorm|C{c}|G{groups}"] = _error(exc, probe)
    return {"rules": rules, "errors": errors}


def _hex(rgba) -> str:
    return "#" + "".join(f"{round(float(v) * 255):02x}" for v in rgba[:3])


def _control(name, label, kind, value, **extra) -> dict:
    return {"name": name, "label": bilingual(label), "type": kind, "value": value, **extra}


def _common(kind: str, controls: list, data: dict, note, text: dict) -> dict:
    """The payload: ``text`` holds the words the script draws (legends, titles, messages),
    each in both languages (:func:`norms.explore.web.page.bilingual`)."""
    return {
        "kind": kind,
        "controls": controls,
        "data": data,
        "note": bilingual(note),
        "colab": bilingual(colab()),
        "error_color": ERROR_COLOR,
        "text": {key: bilingual(value) for key, value in text.items()},
    }


def _listed(values, sep=", ") -> str:
    return sep.join(map(str, values))


def _reduction_text(words) -> dict:
    """The words the reduction explorer's script draws and fills in."""
    return {
        "stat": stat_text(**placeholders("count", "what", "per", "dims", "params", "eval_note")),
        **stat_words(),
        "outside": tr(
            "the input shape {shape} is outside the sizes this page can show ({words}).",
            shape="{shape}",
            words=words,
        ),
        "title": tr("{module} on {shape}", **placeholders("module", "shape")),
        "highlighted": tr("statistic {index} (highlighted)", index="{index}"),
        "legend": tr("same colour block = elements sharing one statistic"),
        **{f"shape_{key}": message for key, message in shape_messages().items()},
    }


def reduction_payload(
    norm: str, shape_text: str, groups: int, last_dims: int, highlight: int, layout: str
) -> dict:
    """The reduction explorer's page data, starting from the given control values."""
    g = REDUCTION_GRID
    controls = [
        _control("norm", tr("norm"), "select", norm, options=list(NORMS)),
        _control("shape", tr("input shape"), "text", shape_text),
        _control(
            "layout",
            tr("layout"),
            "select",
            layout,
            options=[value for _, value in layout_options()],
            labels=[bilingual(label) for label, _ in layout_options()],
        ),
        _control(
            "groups",
            tr("groups (GN)"),
            "int",
            min(max(int(groups), 1), g["max_groups"]),
            min=1,
            max=g["max_groups"],
        ),
        _control(
            "last_dims",
            tr("last dims (LN, RMS)"),
            "int",
            min(max(int(last_dims), 1), 5),
            min=1,
            max=5,
        ),
        _control(
            "highlight",
            tr("highlight statistic"),
            "int",
            int(highlight),
            min=0,
            max=max(int(highlight), 1),
        ),
    ]
    words = tr(
        "at most {rank} dims, each of size at most {size}", rank=g["max_rank"], size=g["max_other"]
    )
    data = {
        **reduction_tables(),
        "grid": {**g, "words": bilingual(words)},
        "tints": [_hex(reductions.tint(c)) for c in reductions.TINT_BASES],
        "highlight_color": HIGHLIGHT_COLOR,
        "highlight_edge": _hex(reductions.HIGHLIGHT_EDGE),
        "spatial_names": {str(k): list(v) for k, v in reductions.SPATIAL_NAMES.items()},
        "limits": {
            "max_cells": reductions.MAX_CELLS,
            "block": [reductions.MAX_DEPTH, reductions.MAX_SIDE, reductions.MAX_SIDE],
            "panels": [reductions.MAX_PANELS, reductions.MAX_SIDE, reductions.MAX_SIDE],
        },
        "messages": {  # the page's script fills the fields, in the page's language
            "too_many_elements": bilingual(
                reductions.too_many_elements_message(**placeholders("shape", "cells", "max_cells"))
            ),
            "too_many_cells": bilingual(
                reductions.too_many_cells_message(
                    **placeholders("a", "b", "c", "total", "max_cells", "la", "lb", "lc")
                )
            ),
            "sequence_rank": bilingual(reductions.sequence_rank_message("{ndim}")),
        },
    }
    note = tr(
        "This explorer runs in your browser for shapes of {words} and groups up to {groups}. "
        "{colab}",
        words=words,
        groups=g["max_groups"],
        colab=colab(),
    )
    return _common("reduction", controls, data, note, _reduction_text(words))


def _f32(values) -> list[float]:
    """float32 values as the shortest decimals that read back as the same float32."""
    return [
        float(np.format_float_positional(np.float32(v), unique=True, trim="-"))
        for v in np.asarray(values, dtype=np.float32).ravel()
    ]


def _with(values: Sequence, value) -> list:
    return sorted({*values, value})


def _statistics_run(batch_size: int, seed: int, steps: Sequence[int]) -> dict:
    """One (batch size, seed) of the grid: the batch means and unbiased variances BatchNorm1d
    folds into its running statistics at each step, and the fresh batch after each step
    count of ``steps``."""
    batches = simulations.running_stats_batches(batch_size, seed)
    means, variances, fresh = [], [], {}
    with torch.no_grad():
        for step in range(max(steps) + 1):
            batch = next(batches)  # (b, F)
            if step in steps:
                fresh[str(step)] = _f32(batch)
            if step == max(steps):
                break
            mean, _, var = stats.batch_moments(batch)  # BatchNorm's: (1, F) each, biased
            means.append(mean.view(-1))
            variances.append(stats.unbiased(var.view(-1), batch_size))
    return {
        "mean": _f32(torch.stack(means)),
        "var": _f32(torch.stack(variances)),
        "fresh": fresh,
    }


def _statistics_runs(grid: dict) -> tuple[dict, dict]:
    """Every (batch size, seed) of ``grid``: its run, or the kernel's error message."""
    runs, errors = {}, {}
    for b, s in itertools.product(grid["batch_size"], grid["seed"]):
        try:  # the kernel's own check (BatchNorm rejects one value per channel)
            simulations.simulate_running_stats(0.1, b, 1, s)
        except ValueError as exc:
            errors[f"{b}|{s}"] = bilingual(error_html(exc))
            continue
        runs[f"{b}|{s}"] = _statistics_run(b, s, grid["steps"])
    return runs, errors


def _running_stats_controls(momentum, cumulative, batch_size, steps, seed, grid) -> list:
    momenta = [round(0.01 * i, 2) for i in range(1, 101)]
    return [
        _control(
            "momentum",
            tr("momentum"),
            "slider",
            float(momentum),
            options=_with(momenta, float(momentum)),
        ),
        _control("cumulative", tr("momentum=None (cumulative)"), "checkbox", bool(cumulative)),
        _control("batch_size", tr("batch size"), "slider", batch_size, options=grid["batch_size"]),
        _control("steps", tr("steps"), "slider", steps, options=grid["steps"]),
        _control("seed", tr("seed"), "select", seed, options=grid["seed"]),
    ]


def _running_stats_text() -> dict:
    """The words the running-statistics explorer's script draws and fills in."""
    return {
        "info": running_stats_text(
            **placeholders(
                "steps", "running_mean", "true_mean", "running_var", "true_var", "max_gap"
            )
        ),
        "outside": tr("this choice is outside the grid of this page."),
        "feature": tr("feature {index}", index="{index}"),
        "true_value": tr("true value"),
        "step": tr("training step"),
        "train_output": tr("train-mode output"),
        "eval_output": tr("eval-mode output"),
        "cumulative": tr("momentum=None (cumulative)"),
        "title": tr(
            "BatchNorm1d, {momentum}, batch size {batch_size}",
            **placeholders("momentum", "batch_size"),
        ),
    }


def running_stats_payload(
    momentum: float, cumulative: bool, batch_size: int, steps: int, seed: int
) -> dict:
    """The running-statistics explorer's page data.

    For every batch size and seed of the grid (plus the initial ones): the batch
    means and unbiased variances ``norms.BatchNorm1d`` folds into its running
    statistics at each step (computed with its own ops, so the page can apply
    any momentum, as the kernel slider does), and the fresh batch that follows
    each step count of the grid. The page then runs BatchNorm's update rule on
    them in float32; ``tests/browser`` compares the result with
    :func:`norms.lab.simulate_running_stats`.
    """
    grid = {
        k: _with(v, {"batch_size": batch_size, "steps": steps, "seed": seed}[k])
        for k, v in RUNNING_STATS_GRID.items()
    }
    mean_t, std_t = simulations.running_stats_distribution()
    runs, errors = _statistics_runs(grid)
    controls = _running_stats_controls(momentum, cumulative, batch_size, steps, seed, grid)
    data = {
        "features": int(mean_t.numel()),
        "true_mean": _f32(mean_t),
        "true_var": _f32(std_t**2),
        "eps": 1e-5,
        "runs": runs,
        "errors": errors,
        "colors": list(running_stats.FEATURE_COLORS),
    }
    note = tr(
        "The page holds batch sizes {sizes}, steps {steps} and seeds {seeds}; momentum takes "
        "every value of the kernel's slider. {colab}",
        sizes=_listed(grid["batch_size"]),
        steps=_listed(grid["steps"]),
        seeds=_listed(grid["seed"]),
        colab=colab(),
    )
    return _common("running_stats", controls, data, note, _running_stats_text())


def _quantized(values: np.ndarray) -> dict:
    """Dot positions for a strip plot: 0..255 between the smallest and largest value."""
    lo, hi = float(values.min()), float(values.max())
    q = np.zeros(values.shape, np.uint8) if hi == lo else np.round((values - lo) / (hi - lo) * 255)
    return {"lo": lo, "hi": hi, "q": base64.b64encode(q.astype(np.uint8).tobytes()).decode("ascii")}


def _noise_sim(sizes, channels: int, trials: int, seed: int, groups, errors: dict) -> dict:
    """One (channels, trials, seed) of the grid, for every group count of ``groups``
    (a group count GroupNorm rejects goes to ``errors``)."""
    sim = {"groups": {}}
    for g in groups:
        try:
            noise = simulations.simulate_batch_noise(
                sizes, trials if g == 1 else 1, channels, g, seed=seed
            )
        except ValueError as exc:
            errors[f"C{channels}|G{g}"] = bilingual(error_html(exc))
            continue
        # GroupNorm never looks at the other samples: one trial gives its value
        # (tests/test_web.py checks this against the full simulation).
        gn = noise.values["GroupNorm"]
        sim["groups"][str(g)] = {
            "label": noise.labels["GroupNorm"],
            "value": float(gn[0, 0]),
            "spread": [f"{float(v):.3f}" for v in noise.spread("GroupNorm")] if g == 1 else None,
        }
        if g == 1:
            sim["bn"] = [_quantized(row) for row in noise.values["BatchNorm2d"]]
            sim["ln"] = [_quantized(row) for row in noise.values["LayerNorm"]]
            sim["spread"] = {str(b): batch_size_spreads(noise, b) for b in sizes}
            sim["curve"] = {k: [float(v) for v in noise.spread(k)] for k in noise.values}
            sim["labels"] = dict(noise.labels)
    return sim


def _batch_size_text() -> dict:
    """The words the batch-size explorer's script draws and fills in."""
    layers = ("BatchNorm2d", "LayerNorm", "GroupNorm")
    return {
        "info": batch_size_text(
            "{batch_size}",
            "{trials}",
            spreads=placeholders(*layers),
            labels={k: "{" + k + "_label}" for k in layers},
        ),
        "outside": tr("this choice is outside the grid of this page."),
        "moves": tr("how much sample 0's output moves"),
        "batch_size": tr("batch size"),
        "std": tr("std across batches"),
        "batches": tr(
            "batch size {batch_size}: {trials} random batches",
            **placeholders("batch_size", "trials"),
        ),
        "output": tr("output y[0, 0, 0, 0]"),
        "title": tr("Sample 0 is fixed; only the other samples in its batch change"),
    }


def batch_size_payload(batch_size: int, trials: int, channels: int, groups: int, seed: int) -> dict:
    """The batch-size explorer's page data: every (channels, trials, seed) of the grid simulated
    by :func:`norms.lab.simulate_batch_noise`; the spreads as the kernel prints them."""
    grid = {
        k: _with(
            v,
            {
                "batch_size": batch_size,
                "trials": trials,
                "seed": seed,
                "channels": channels,
                "groups": groups,
            }[k],
        )
        for k, v in BATCH_SIZE_GRID.items()
    }
    sizes = tuple(grid["batch_size"])
    errors = {}
    sims = {
        f"{c}|{t}|{s}": _noise_sim(sizes, c, t, s, grid["groups"], errors)
        for c, t, s in itertools.product(grid["channels"], grid["trials"], grid["seed"])
    }
    controls = [
        _control("batch_size", tr("batch size"), "slider", batch_size, options=grid["batch_size"]),
        _control("trials", tr("random batches"), "slider", trials, options=grid["trials"]),
        _control("seed", tr("seed"), "select", seed, options=grid["seed"]),
        _control("channels", tr("channels"), "int", channels, min=1, max=max(grid["channels"])),
        _control("groups", tr("groups (GN)"), "int", groups, min=1, max=max(grid["groups"])),
    ]
    data = {
        "sims": sims,
        "errors": errors,
        "sizes": list(sizes),
        "colors": dict(batch_noise.NOISE_COLORS),
    }
    note = tr(
        "The page holds batch sizes {sizes}; {trials} random batches; seed {seeds}; 1 to "
        "{channels} channels with every group count. {colab}",
        sizes=_listed(sizes),
        trials=join(map(str, grid["trials"]), tr(" or ")),
        seeds=join(map(str, grid["seed"]), tr(" or ")),
        channels=max(grid["channels"]),
        colab=colab(),
    )
    return _common("batch_size", controls, data, note, _batch_size_text())


def states_payload(
    draw: Callable[[dict], tuple[object, str]],
    grid: dict[str, Sequence],
    initial: dict[str, object],
    labels: dict[str, str] | None = None,
) -> dict:
    """Any explorer on the page: every state of ``grid`` drawn ahead of time by ``draw``.

    ``draw(values) -> (figure, info_html)``; it may raise, the page then shows the
    message as the kernel version does. Keep the grid small: one PNG per state.
    """
    names = list(grid)
    states = {}
    for combo in itertools.product(*(range(len(grid[n])) for n in names)):
        values = {n: grid[n][i] for n, i in zip(names, combo, strict=True)}
        key = "|".join(map(str, combo))
        try:
            fig, info = draw(values)
        except Exception as exc:  # noqa: BLE001 - shown to the reader, as in the kernel
            states[key] = {"error": bilingual(error_html(exc))}
        else:
            states[key] = {
                "info": bilingual(info),
                "png": base64.b64encode(png_bytes(fig)).decode("ascii"),
            }
    controls = [
        _control(
            n,
            (labels or {}).get(n, n),
            "slider" if len(grid[n]) > 1 else "select",
            initial[n],
            options=list(grid[n]),
        )
        for n in names
    ]
    note = tr(
        "The page holds every combination of {values}. {colab}",
        values=join(
            [tr("{name} in {values}", name=n, values="{" + _listed(grid[n]) + "}") for n in names],
            ", ",
        ),
        colab=colab(),
    )
    text = {
        "outside": tr("this combination is outside the grid this page precomputed."),
        "figure": tr("figure"),
    }
    return _common("states", controls, {"order": names, "states": states}, note, text)


def precomputed(grid: dict[str, Sequence]) -> Callable:
    """``web=`` for any :class:`norms.explore.widgets.Explorer`: its own ``draw`` over ``grid``, as
    the page's HTML.

    Example::

        Explorer(
            controls, draw, web=norms.explore.web.precomputed({"steps": [10, 100], "seed": [0, 1]})
        )
    """

    def payload(explorer) -> str:
        initial = explorer.values()
        full = {n: list(grid[n]) + ([] if initial[n] in grid[n] else [initial[n]]) for n in grid}
        return html(
            states_payload(
                explorer.draw_state,
                full,
                initial,
                labels={n: getattr(explorer.controls[n], "description", n) or n for n in grid},
            )
        )

    return payload
