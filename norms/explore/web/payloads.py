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
from norms.lab import simulations
from norms.plots import batch_noise, reductions, running_stats
from norms.plots.style import HIGHLIGHT_COLOR, png_bytes

from ..state import (
    BATCH_SIZE_INFO,
    ERROR_COLOR,
    RUNNING_STATS_INFO,
    batch_size_spreads,
    build_module,
    error_html,
)
from .page import COLAB, html

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
    return {"name": name, "label": label, "type": kind, "value": value, **extra}


def _common(kind: str, controls: list, data: dict, note: str) -> dict:
    return {
        "kind": kind,
        "controls": controls,
        "data": data,
        "note": note,
        "colab": COLAB,
        "error_color": ERROR_COLOR,
    }


def reduction_payload(
    norm: str, shape_text: str, groups: int, last_dims: int, highlight: int, layout: str
) -> dict:
    """The reduction explorer's page data, starting from the given control values."""
    g = REDUCTION_GRID
    controls = [
        _control("norm", "norm", "select", norm, options=list(NORMS)),
        _control("shape", "input shape", "text", shape_text),
        _control("layout", "layout", "select", layout, options=["auto", "image", "sequence"]),
        _control(
            "groups",
            "groups (GN)",
            "int",
            min(max(int(groups), 1), g["max_groups"]),
            min=1,
            max=g["max_groups"],
        ),
        _control(
            "last_dims", "last dims (LN, RMS)", "int", min(max(int(last_dims), 1), 5), min=1, max=5
        ),
        _control(
            "highlight",
            "highlight statistic",
            "int",
            int(highlight),
            min=0,
            max=max(int(highlight), 1),
        ),
    ]
    data = {
        **reduction_tables(),
        "grid": {
            **g,
            "words": f"at most {g['max_rank']} dims, each of size at most {g['max_other']}",
        },
        "tints": [_hex(reductions._tint(c)) for c in reductions._TINT_BASES],
        "highlight_color": HIGHLIGHT_COLOR,
        "highlight_edge": _hex(reductions._HIGHLIGHT_EDGE),
        "spatial_names": {str(k): list(v) for k, v in reductions._SPATIAL_NAMES.items()},
        "limits": {
            "max_cells": reductions.MAX_CELLS,
            "block": [reductions._MAX_DEPTH, reductions._MAX_SIDE, reductions._MAX_SIDE],
            "panels": [reductions._MAX_PANELS, reductions._MAX_SIDE, reductions._MAX_SIDE],
        },
        "messages": {
            "too_many_elements": reductions.TOO_MANY_ELEMENTS_MESSAGE,
            "too_many_cells": reductions.TOO_MANY_CELLS_MESSAGE,
            "sequence_rank": reductions.SEQUENCE_RANK_MESSAGE,
        },
    }
    note = (
        f"This explorer runs in your browser for shapes of {data['grid']['words']} and "
        f"groups up to {g['max_groups']}. {COLAB}"
    )
    return _common("reduction", controls, data, note)


def _f32(values) -> list[float]:
    """float32 values as the shortest decimals that read back as the same float32."""
    return [
        float(np.format_float_positional(np.float32(v), unique=True, trim="-"))
        for v in np.asarray(values, dtype=np.float32).ravel()
    ]


def _with(values: Sequence, value) -> list:
    return sorted({*values, value})


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
    max_steps = max(grid["steps"])
    mean_t, std_t = simulations.running_stats_distribution()
    runs, errors = {}, {}
    for b, s in itertools.product(grid["batch_size"], grid["seed"]):
        try:  # the kernel's own check (BatchNorm rejects one value per channel)
            simulations.simulate_running_stats(0.1, b, 1, s)
        except ValueError as exc:
            errors[f"{b}|{s}"] = error_html(exc)
            continue
        batches = simulations.running_stats_batches(b, s)
        means, variances, fresh = [], [], {}
        with torch.no_grad():
            for step in range(max_steps + 1):
                batch = next(batches)  # (b, F)
                if step in grid["steps"]:
                    fresh[str(step)] = _f32(batch)
                if step == max_steps:
                    break
                mean, _, var = stats.batch_moments(batch)  # BatchNorm's: (1, F) each, biased
                means.append(mean.view(-1))
                variances.append(stats.unbiased(var.view(-1), b))
        runs[f"{b}|{s}"] = {
            "mean": _f32(torch.stack(means)),
            "var": _f32(torch.stack(variances)),
            "fresh": fresh,
        }
    momenta = [round(0.01 * i, 2) for i in range(1, 101)]
    controls = [
        _control(
            "momentum",
            "momentum",
            "slider",
            float(momentum),
            options=_with(momenta, float(momentum)),
        ),
        _control("cumulative", "momentum=None (cumulative)", "checkbox", bool(cumulative)),
        _control("batch_size", "batch size", "slider", batch_size, options=grid["batch_size"]),
        _control("steps", "steps", "slider", steps, options=grid["steps"]),
        _control("seed", "seed", "select", seed, options=grid["seed"]),
    ]
    data = {
        "features": int(mean_t.numel()),
        "true_mean": _f32(mean_t),
        "true_var": _f32(std_t**2),
        "eps": 1e-5,
        "runs": runs,
        "errors": errors,
        "info": RUNNING_STATS_INFO,
        "colors": list(running_stats._FEATURE_COLORS),
    }
    note = (
        "The page holds batch sizes "
        + ", ".join(map(str, grid["batch_size"]))
        + ", steps "
        + ", ".join(map(str, grid["steps"]))
        + " and seeds "
        + ", ".join(map(str, grid["seed"]))
        + "; momentum takes every value of the kernel's slider. "
        + COLAB
    )
    return _common("running_stats", controls, data, note)


def _quantized(values: np.ndarray) -> dict:
    """Dot positions for a strip plot: 0..255 between the smallest and largest value."""
    lo, hi = float(values.min()), float(values.max())
    q = np.zeros(values.shape, np.uint8) if hi == lo else np.round((values - lo) / (hi - lo) * 255)
    return {"lo": lo, "hi": hi, "q": base64.b64encode(q.astype(np.uint8).tobytes()).decode("ascii")}


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
    sims, errors = {}, {}
    for c, t, s in itertools.product(grid["channels"], grid["trials"], grid["seed"]):
        sim = {"groups": {}}
        for g in grid["groups"]:
            try:
                noise = simulations.simulate_batch_noise(sizes, t if g == 1 else 1, c, g, seed=s)
            except ValueError as exc:
                errors[f"C{c}|G{g}"] = error_html(exc)
                continue
            # GroupNorm never looks at the other samples: one trial gives its value
            # (tests/test_web.py checks this against the full simulation).
            gn = noise.values["GroupNorm"]
            sim["groups"][str(g)] = {
                "label": noise.labels["GroupNorm"],
                "value": float(gn[0, 0]),
                "spread": [f"{float(v):.3f}" for v in noise.spread("GroupNorm")]
                if g == 1
                else None,
            }
            if g == 1:
                sim["bn"] = [_quantized(row) for row in noise.values["BatchNorm2d"]]
                sim["ln"] = [_quantized(row) for row in noise.values["LayerNorm"]]
                sim["spread"] = {str(b): batch_size_spreads(noise, b) for b in sizes}
                sim["curve"] = {k: [float(v) for v in noise.spread(k)] for k in noise.values}
                sim["labels"] = dict(noise.labels)
        sims[f"{c}|{t}|{s}"] = sim
    controls = [
        _control("batch_size", "batch size", "slider", batch_size, options=grid["batch_size"]),
        _control("trials", "random batches", "slider", trials, options=grid["trials"]),
        _control("seed", "seed", "select", seed, options=grid["seed"]),
        _control("channels", "channels", "int", channels, min=1, max=max(grid["channels"])),
        _control("groups", "groups (GN)", "int", groups, min=1, max=max(grid["groups"])),
    ]
    data = {
        "sims": sims,
        "errors": errors,
        "info": BATCH_SIZE_INFO,
        "sizes": list(sizes),
        "colors": dict(batch_noise._NOISE_COLORS),
    }
    note = (
        "The page holds batch sizes "
        + ", ".join(map(str, sizes))
        + "; "
        + " or ".join(map(str, grid["trials"]))
        + " random batches; seed "
        + " or ".join(map(str, grid["seed"]))
        + "; 1 to "
        + str(max(grid["channels"]))
        + " channels with every group count. "
        + COLAB
    )
    return _common("batch_size", controls, data, note)


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
            states[key] = {"error": error_html(exc)}
        else:
            states[key] = {"info": info, "png": base64.b64encode(png_bytes(fig)).decode("ascii")}
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
    return _common(
        "states",
        controls,
        {"order": names, "states": states},
        "The page holds every combination of "
        + ", ".join(f"{n} in {{{', '.join(map(str, grid[n]))}}}" for n in names)
        + ". "
        + COLAB,
    )


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

        def draw(values: dict) -> tuple[object, str]:
            explorer._busy = True  # setting a control must not redraw the widget
            try:
                for name, value in values.items():
                    explorer.controls[name].value = value
                return explorer._draw(explorer)
            finally:
                for name, value in initial.items():
                    if name in values:
                        explorer.controls[name].value = value
                explorer._busy = False

        return html(
            states_payload(
                draw,
                full,
                initial,
                labels={n: getattr(explorer.controls[n], "description", n) or n for n in grid},
            )
        )

    return payload
