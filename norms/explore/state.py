"""What an explorer shows, computed once: the kernel explorers and the website's both read it.

The ipywidgets front end (:mod:`norms.explore.widgets`) and the static-site front end
(:mod:`norms.explore.web`) import this module, never each other. Here:

* :func:`parse_shape`, :func:`build_module`: from the controls' values to a ``norms`` layer;
* :func:`stat_html`, :func:`running_stats_info`, :func:`batch_size_info`: the numbers
  shown beside each figure, as HTML, in every language (:func:`norms.i18n.tr`); the
  website fills the same templates (:func:`stat_text`, :func:`running_stats_text`,
  :func:`batch_size_text` with ``{field}`` placeholders) in the browser;
* :func:`error_html` and :data:`ERROR_COLOR`: how an error is shown instead of a traceback.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import numpy as np
import torch

from norms import modules
from norms.axes import NORMS, is_unbatched
from norms.i18n import Text, forms, tr

__all__ = [
    "ERROR_COLOR",
    "LAST_DIMS_NORMS",
    "MAX_RANK",
    "MAX_SIZE",
    "batch_size_info",
    "batch_size_spreads",
    "batch_size_text",
    "build_module",
    "error_html",
    "layout_options",
    "long_number",
    "parse_shape",
    "placeholders",
    "running_stats_info",
    "running_stats_text",
    "shape_messages",
    "stat_html",
    "stat_text",
    "stat_words",
]

#: The colour of an error message, in the kernel and on the website.
ERROR_COLOR = "#B3261E"

# The layers by how the explorer reads their sizes off the shape (norms.axes.NORMS' kinds).
_CHANNEL_NORMS: dict[str, type[torch.nn.Module]] = {
    name: getattr(modules, name) for name, n in NORMS.items() if n.kind in ("batch", "instance")
}
#: The layers that normalize the last dims (LayerNorm, RMSNorm), by name.
LAST_DIMS_NORMS: dict[str, type[torch.nn.Module]] = {
    name: getattr(modules, name) for name, n in NORMS.items() if n.kind in ("layer", "rms")
}

#: The largest size and the most dims :func:`parse_shape` reads (an explorer draws far fewer).
MAX_SIZE = 1_000_000
MAX_RANK = 8


def long_number(head, digits) -> Text:
    """How :func:`parse_shape` shows a number too long to print: its first digits and length."""
    return tr("{head}… ({digits} digits)", head=head, digits=digits)


def shape_messages(text="{text}", got="{got}") -> dict[str, Text]:
    """What :func:`parse_shape` says of a shape it cannot read, in every language (the
    website's script fills the same templates: a field left out keeps its ``{field}``)."""
    return {
        "unreadable": tr(
            "could not read a shape from {text}: type sizes separated by commas, e.g. 4, 6, 2, 2",
            text=text,
        ),
        "too_large": tr("every size must be at most {max}, got {got}", max=MAX_SIZE, got=got),
        "too_many_dims": tr("a shape has at most {max} dims, got {got}", max=MAX_RANK, got=got),
        "empty": tr("type a shape, e.g. 4, 6, 2, 2"),
        "zero": tr("every size must be at least 1, got {got}", got=got),
        "long_number": long_number("{head}", "{digits}"),
    }


def parse_shape(text: str) -> tuple[int, ...]:
    """Read a shape typed by a reader: ``"4, 6, 2, 2"``, ``"(4,6,2,2)"``, ``"4x6x2x2"``.

    Args:
        text: the typed shape.

    Returns:
        the shape as a tuple of ints.

    Raises:
        ValueError: no sizes, a size of 0 or above :data:`MAX_SIZE`, more than
            :data:`MAX_RANK` sizes, or anything but sizes and separators.

    Example:
        >>> parse_shape("(4, 6, 2x2)")
        (4, 6, 2, 2)
    """
    if not re.fullmatch(r"[\s,()\[\]x×*0-9]*", text):
        raise ValueError(shape_messages(text=repr(text))["unreadable"])
    words = re.findall(r"\d+", text)
    for word in words:  # compare the digits before int() reads a 400-digit number
        if len(word.lstrip("0")) > len(str(MAX_SIZE)) or int(word) > MAX_SIZE:
            shown = word if len(word) <= 12 else long_number(word[:6], len(word))
            raise ValueError(shape_messages(got=shown)["too_large"])
    if len(words) > MAX_RANK:
        raise ValueError(shape_messages(got=len(words))["too_many_dims"])
    sizes = tuple(int(s) for s in words)
    if not sizes:
        raise ValueError(shape_messages()["empty"])
    if 0 in sizes:
        raise ValueError(shape_messages(got=sizes)["zero"])
    return sizes


def build_module(
    norm: str, input_shape: Sequence[int], groups: int = 2, last_dims: int = 1
) -> torch.nn.Module:
    """The ``norms`` module the reduction explorer shows for these choices.

    Channel counts are read from the shape: ``C`` is dim 1 (dim 0 for an
    unbatched InstanceNorm input). LayerNorm and RMSNorm normalize the last
    ``last_dims`` dims. A shape the layer rejects raises later, in
    :func:`norms.axes.describe`, with the layer's own message.

    Args:
        norm: one of :data:`norms.axes.NORMS`.
        input_shape: the input shape.
        groups: GroupNorm's number of groups.
        last_dims: how many trailing dims LayerNorm / RMSNorm normalize.

    Returns:
        the module.

    Raises:
        ValueError: an unknown norm, ``last_dims`` larger than the rank, or
            groups that do not divide the channels (GroupNorm's own check).

    Example:
        >>> build_module("GroupNorm", (4, 6, 2, 2), groups=3).num_groups
        3
        >>> build_module("InstanceNorm2d", (3, 8, 8)).num_features  # unbatched (C, H, W)
        3
    """
    shape = tuple(int(s) for s in input_shape)
    if norm in LAST_DIMS_NORMS:
        if not 1 <= last_dims <= len(shape):
            raise ValueError(
                f"{norm} over the last {last_dims} dims needs an input with at least "
                f"{last_dims} dims; {shape} has {len(shape)}"
            )
        return LAST_DIMS_NORMS[norm](list(shape[-last_dims:]))
    if norm == "GroupNorm":
        if len(shape) < 2:
            raise ValueError(f"GroupNorm expects an (N, C, ...) input, got {len(shape)}-D {shape}")
        return modules.GroupNorm(groups, shape[1])
    if norm not in _CHANNEL_NORMS:
        raise ValueError(f"unknown norm {norm!r}; choose one of {tuple(NORMS)}")
    channel_dim = 0 if len(shape) < 2 or is_unbatched(norm, len(shape)) else 1
    return _CHANNEL_NORMS[norm](shape[channel_dim])


def error_html(exc: Exception) -> Text | str:
    """An exception as the explorers show it, in every language when its message is a
    :class:`norms.i18n.Text` (norms' own guidance), else as Python wrote it."""
    name = html.escape(type(exc).__name__, quote=False)

    def one(text: str) -> str:
        message = html.escape(text, quote=False)
        return f'<span style="color:{ERROR_COLOR}"><b>⚠ {name}:</b> {message}</span>'

    if exc.args and isinstance(exc.args[0], Text):
        return Text({lang: one(text) for lang, text in forms(exc.args[0]).items()})
    return one(str(exc))


def layout_options() -> list[tuple[Text, str]]:
    """The reduction explorer's layouts, ``(label, value)``: the labels in the reader's
    language, the values :func:`norms.plots.plot_reduction` takes."""
    return [(tr("auto"), "auto"), (tr("image"), "image"), (tr("sequence"), "sequence")]


def placeholders(*names: str) -> dict[str, str]:
    """``{name: "{name}"}``: a template's fields left for the page's script to fill."""
    return {name: "{" + name + "}" for name in names}


def stat_text(count, what, per, dims, params, eval_note) -> Text:
    """The numbers beside the reduction figure (the website fills the same template)."""
    return tr(
        "<b>{count}</b> {what}, each over <b>{per}</b> elements · reduced dims <b>{dims}</b> · "
        "γ/β shape <b>{params}</b> · eval differs from train: {eval_note}",
        count=count,
        what=what,
        per=per,
        dims=dims,
        params=params,
        eval_note=eval_note,
    )


def stat_words() -> dict[str, Text]:
    """The words :func:`stat_html` chooses between."""
    return {
        "means": tr("means (and as many variances)"),
        "rms": tr("RMS values (no mean)"),
        "none": tr("none"),
        "yes": tr("yes (running statistics)"),
        "no": tr("no"),
    }


def stat_html(reduction, dims: tuple[int, ...]) -> Text:
    """What the reduction explorer says of a :class:`norms.axes.Reduction`: how many
    statistics, over how many elements each, the reduced dims, γ/β's shape, and whether
    eval mode differs from training."""
    words = stat_words()
    return stat_text(
        reduction.num_statistics,
        words["means"] if reduction.has_mean else words["rms"],
        reduction.elements_per_statistic,
        dims,
        words["none"] if reduction.param_shape is None else str(tuple(reduction.param_shape)),
        words["yes"] if reduction.train_eval_differ else words["no"],
    )


def _fmt(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


def running_stats_text(steps, running_mean, true_mean, running_var, true_var, max_gap) -> Text:
    """The numbers beside the running-statistics figure (the website fills the same
    template)."""
    return tr(
        "after <b>{steps}</b> steps: running_mean <b>{running_mean}</b> (true {true_mean}) · "
        "running_var <b>{running_var}</b> (true {true_var}) · on a fresh batch, eval and train "
        "outputs differ by up to <b>{max_gap}</b>",
        steps=steps,
        running_mean=running_mean,
        true_mean=true_mean,
        running_var=running_var,
        true_var=true_var,
        max_gap=max_gap,
    )


def running_stats_info(trace) -> Text:
    """The numbers :func:`running_stats_explorer` shows for a
    :class:`norms.lab.RunningStatsTrace`."""
    return running_stats_text(
        steps=trace.running_mean.shape[0] - 1,
        running_mean=_fmt(trace.running_mean[-1]),
        true_mean=_fmt(trace.true_mean),
        running_var=_fmt(trace.running_var[-1]),
        true_var=_fmt(trace.true_var),
        max_gap=f"{trace.max_gap:.3f}",
    )


def batch_size_text(batch_size, trials, spreads: dict, labels: dict) -> Text:
    """The numbers beside the batch-size figure (the website fills the same template):
    ``spreads`` and ``labels`` by layer (``BatchNorm2d``, ``LayerNorm``, ``GroupNorm``)."""
    return tr(
        "batch size <b>{batch_size}</b>: across {trials} random batches sample 0's output moves "
        "with std <b>{BatchNorm2d}</b> under {BatchNorm2d_label}, <b>{LayerNorm}</b> under "
        "{LayerNorm_label} and <b>{GroupNorm}</b> under {GroupNorm_label}",
        batch_size=batch_size,
        trials=trials,
        **{key: spreads[key] for key in ("BatchNorm2d", "LayerNorm", "GroupNorm")},
        **{f"{key}_label": labels[key] for key in ("BatchNorm2d", "LayerNorm", "GroupNorm")},
    )


def batch_size_spreads(noise, batch_size: int) -> dict[str, str]:
    """The spreads :func:`batch_size_explorer` prints for ``batch_size``, formatted, by layer."""
    i = noise.batch_sizes.index(int(batch_size))
    return {key: f"{float(noise.spread(key)[i]):.3f}" for key in noise.values}


def batch_size_info(noise, batch_size: int) -> Text:
    """The numbers :func:`batch_size_explorer` shows for ``batch_size`` of a
    :class:`norms.lab.BatchNoise`."""
    return batch_size_text(
        batch_size,
        noise.values["BatchNorm2d"].shape[1],
        batch_size_spreads(noise, batch_size),
        noise.labels,
    )
