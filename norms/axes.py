r"""Which axes does each normalization reduce over? One definition, used everywhere.

Every normalization layer in this package computes a *statistic* (a mean and a
variance, or for RMSNorm a root-mean-square) over some group of input elements,
then rescales each element with the statistic of its group. The layers differ
*only* in how the elements are grouped. This module is the single source of
truth for that grouping:

* the low-level functions :func:`batch_norm_dims`, :func:`instance_norm_dims`,
  :func:`layer_norm_dims` and :func:`group_norm_shape` are what
  :mod:`norms.functional` itself calls to decide which dimensions to reduce, so
  the code and the description cannot disagree;
* :func:`describe` turns a module (ours *or* the matching ``torch.nn`` one) and
  an input shape into a :class:`Reduction` record that the figures, widgets and
  quiz answer keys are generated from.

.. code-block:: text

    norm           input          reduced dims      statistics shape
    BatchNorm2d    (N, C, H, W)   (0, 2, 3)         (C,)
    LayerNorm(W)   (N, C, H, W)   (3,)              (N, C, H)
    LayerNorm(H,W) (N, C, H, W)   (2, 3)            (N, C)
    RMSNorm(W)     (N, C, H, W)   (3,)              (N, C, H)
    InstanceNorm2d (N, C, H, W)   (2, 3)            (N, C)
    GroupNorm(G,C) (N, C, H, W)   (1, 2, 3)*        (N, G)

    * channels are only partly reduced: C//G consecutive channels share a
      statistic. With G == C each channel is alone and the row reads (2, 3).

Example::

    >>> import torch, norms
    >>> r = norms.axes.describe(torch.nn.GroupNorm(2, 4), (8, 4, 5, 5))
    >>> r.reduced_dims, r.num_statistics, r.elements_per_statistic, r.stat_shape
    ((1, 2, 3), 16, 50, (8, 2))
    >>> r.statistic_index[0, :, 0, 0]
    tensor([0, 0, 1, 1])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

__all__ = [
    "NORMS",
    "Norm",
    "Reduction",
    "describe",
    "batch_norm_dims",
    "instance_norm_dims",
    "layer_norm_dims",
    "group_norm_shape",
    "group_norm_dims",
    "rank_error_message",
    "is_unbatched",
    "module_label",
]


# --------------------------------------------------------------------------
# Low-level, pure functions: these are what norms.functional reduces over.
# --------------------------------------------------------------------------


def batch_norm_dims(ndim: int) -> tuple[int, ...]:
    """Dims BatchNorm reduces for an input of rank ``ndim`` laid out ``(N, C, *S)``.

    Everything except the channel dim 1: ``(0, 2, 3, ..., ndim-1)``.

    >>> batch_norm_dims(4)
    (0, 2, 3)
    >>> batch_norm_dims(2)  # BatchNorm1d on (N, C)
    (0,)
    """
    return (0, *range(2, ndim))


def instance_norm_dims(ndim: int) -> tuple[int, ...]:
    """Dims InstanceNorm reduces for a batched input ``(N, C, *S)``: the spatial ones.

    ``(2, ..., ndim-1)``. (Unbatched ``(C, *S)`` input is handled by adding a
    batch dim of size 1 first, as torch does.)

    >>> instance_norm_dims(4)
    (2, 3)
    """
    return tuple(range(2, ndim))


def layer_norm_dims(ndim: int, normalized_ndim: int) -> tuple[int, ...]:
    """Dims LayerNorm / RMSNorm reduce: the last ``normalized_ndim`` of ``ndim``.

    >>> layer_norm_dims(4, 2)  # LayerNorm([H, W]) on (N, C, H, W)
    (2, 3)
    """
    return tuple(range(ndim - normalized_ndim, ndim))


def group_norm_shape(input_shape: Sequence[int], num_groups: int) -> tuple[int, int, int]:
    """The view GroupNorm reduces the *last* dim of: ``(N, C, *S) -> (N, G, C//G * prod(S))``.

    Channels are split into ``num_groups`` blocks of ``C // G`` *consecutive*
    channels; each ``(sample, group)`` pair gets one statistic.

    >>> group_norm_shape((8, 6, 4, 4), 3)
    (8, 3, 32)
    """
    n, c = input_shape[0], input_shape[1]
    return (n, num_groups, (c // num_groups) * math.prod(input_shape[2:]))


def group_norm_dims(ndim: int, channels_per_group: int) -> tuple[int, ...]:
    """Dims of the *original* ``(N, C, *S)`` input that GroupNorm reduces over.

    The channel dim counts as reduced only when a group holds more than one
    channel (``C // G > 1``); with ``G == C`` GroupNorm is InstanceNorm.

    >>> group_norm_dims(4, 2), group_norm_dims(4, 1)
    ((1, 2, 3), (2, 3))
    """
    return ((1,) if channels_per_group > 1 else ()) + tuple(range(2, ndim))


def rank_error_message(
    allowed: Sequence[int], got: int, shape: Sequence[int] | None = None, layout: str | None = None
) -> str:
    """torch.nn's wording for a wrong input rank, plus the shape got and wanted.

    >>> rank_error_message((4,), 3, (3, 5, 6), "(N, C, H, W)")
    'expected 4D input (got 3D input): input of shape (3, 5, 6), wanted (N, C, H, W)'
    """
    want = " or ".join(f"{d}D" for d in allowed)
    msg = f"expected {want} input (got {got}D input)"
    if shape is not None:
        msg += f": input of shape {tuple(shape)}"
        if layout:
            msg += f", wanted {layout}"
    return msg


# --------------------------------------------------------------------------
# The Reduction record
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Reduction:
    """How a normalization layer groups the elements of one input shape.

    Attributes:
        norm: class name of the layer, e.g. ``"BatchNorm2d"``.
        input_shape: the input shape described.
        reduced_dims: dims reduced over. Dim ``d`` is listed iff two elements
            differing only in coordinate ``d`` share a statistic. (For a dim of
            size 1 that test is vacuous; it is then listed iff the layer reduces
            over it by construction, e.g. ``H`` of BatchNorm2d on ``(N, C, 1, 1)``.)
            GroupNorm's channel dim is listed iff ``C // G > 1``.
        kept_dims: the dims not in ``reduced_dims``. The statistics are indexed
            by these, except for GroupNorm with ``C // G > 1`` where they are
            indexed by ``(N, G)`` and the channel dim is only partly reduced.
        num_statistics: how many statistics are computed: how many means, and
            as many variances. RMSNorm computes no mean and no variance but this
            many root-mean-square values.
        elements_per_statistic: how many input elements each statistic is
            computed from (the ``n`` of the ``n / (n - 1)`` Bessel correction
            used for BatchNorm's running variance).
        stat_shape: shape of the tensor of statistics as the layer computes them:
            ``(C,)`` for BatchNorm, ``(N, C)`` for InstanceNorm (``(C,)``
            unbatched), ``(N, G)`` for GroupNorm, ``input_shape[:-k]`` for
            LayerNorm / RMSNorm over ``k`` dims. ``prod(stat_shape) == num_statistics``.
        statistic_index: int64 tensor of shape ``input_shape``; element value is
            the id of the statistic that element belongs to, ids
            ``0 .. num_statistics-1`` in row-major order of ``stat_shape``
            (so ``statistic_index.view(-1)`` scatters straight into
            ``stats.view(-1)``).
        param_shape: shape of ``weight`` (gamma) and ``bias`` (beta); ``None`` when
            the layer has no affine parameters. ``(C,)`` for BatchNorm,
            InstanceNorm and GroupNorm, ``normalized_shape`` for LayerNorm / RMSNorm.
        param_dims: input dims the parameters run along (``(1,)`` for a per-channel
            gamma, the last ``k`` dims for LayerNorm / RMSNorm); ``None`` without
            parameters.
        has_mean: False for RMSNorm (it rescales without centring), else True.
        has_bias: whether there is a beta parameter (never for RMSNorm).
        train_eval_differ: True iff the layer normalizes with running statistics
            in eval mode, i.e. BatchNorm or InstanceNorm with
            ``track_running_stats=True``. The grouping above is the same in both
            modes; in eval those layers read the stored per-channel statistics
            instead of computing them from the input.
    """

    norm: str
    input_shape: tuple[int, ...]
    reduced_dims: tuple[int, ...]
    kept_dims: tuple[int, ...]
    num_statistics: int
    elements_per_statistic: int
    stat_shape: tuple[int, ...]
    param_shape: tuple[int, ...] | None
    param_dims: tuple[int, ...] | None
    has_mean: bool
    has_bias: bool
    train_eval_differ: bool
    statistic_index: torch.Tensor = field(repr=False, compare=False)

    def summary(self) -> str:
        """One line for humans, e.g. ``BatchNorm2d on (8, 3, 4, 4): reduces dims (0, 2, 3) ...``."""
        what = "mean+variance" if self.has_mean else "RMS"
        shape = tuple(self.input_shape)
        s = (
            f"{self.norm} on {shape}: reduces dims {self.reduced_dims}, "
            f"{self.num_statistics} {what} statistic"
            f"{'' if self.num_statistics == 1 else 's'} of "
            f"{self.elements_per_statistic} element"
            f"{'' if self.elements_per_statistic == 1 else 's'} each "
            f"(stats shape {self.stat_shape})"
        )
        if self.param_shape is not None:
            s += f", affine params of shape {self.param_shape}"
        if self.train_eval_differ:
            s += "; eval mode uses running statistics"
        return s


# --------------------------------------------------------------------------
# describe()
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Norm:
    """One normalization layer of the book: the facts every other module reads.

    Attributes:
        name: the class name, the same in ``norms`` and ``torch.nn``.
        kind: ``"batch"``, ``"instance"``, ``"layer"``, ``"rms"`` or ``"group"``:
            which reduction rule of this module it follows.
        family: the layer's family name in prose (``"BatchNorm"`` for all three ranks).
        ranks: the input ranks it accepts (for InstanceNorm the unbatched one
            too, the smaller), or ``None`` for any rank its arguments allow.
        layout: those inputs as the error messages spell them, or ``None``.
    """

    name: str
    kind: str
    family: str
    ranks: tuple[int, ...] | None
    layout: str | None = None


#: The nine layers, in the order the book lists them. Everything that lists the
#: norms (the explorers, the quizzes, the grader, the figures) reads this.
NORMS: dict[str, Norm] = {
    n.name: n
    for n in (
        Norm("BatchNorm1d", "batch", "BatchNorm", (2, 3), "(N, C) or (N, C, L)"),
        Norm("BatchNorm2d", "batch", "BatchNorm", (4,), "(N, C, H, W)"),
        Norm("BatchNorm3d", "batch", "BatchNorm", (5,), "(N, C, D, H, W)"),
        Norm("LayerNorm", "layer", "LayerNorm", None),
        Norm("RMSNorm", "rms", "RMSNorm", None),
        Norm("GroupNorm", "group", "GroupNorm", None),
        Norm("InstanceNorm1d", "instance", "InstanceNorm", (2, 3), "(N, C, L) or (C, L)"),
        Norm("InstanceNorm2d", "instance", "InstanceNorm", (3, 4), "(N, C, H, W) or (C, H, W)"),
        Norm(
            "InstanceNorm3d", "instance", "InstanceNorm", (4, 5), "(N, C, D, H, W) or (C, D, H, W)"
        ),
    )
}

#: The input layouts each fixed-rank layer accepts, for error messages.
LAYOUTS: dict[str, str] = {n.name: n.layout for n in NORMS.values() if n.layout}


def is_unbatched(norm: str, ndim: int) -> bool:
    """True when ``norm`` (a name of :data:`NORMS`) reads a ``ndim``-D input as one unbatched
    sample.

    Only InstanceNorm has an unbatched form: ``(C, *S)``, the smaller of its two ranks.
    """
    info = NORMS[norm]
    return info.kind == "instance" and info.ranks is not None and ndim == info.ranks[0]


def module_label(module: torch.nn.Module) -> str:
    """A short constructor-like label: ``BatchNorm2d(6)``, ``LayerNorm([6, 4])`` ...

    Args:
        module: a ``norms`` or ``torch.nn`` normalization module.

    Returns:
        the label.

    Example:
        >>> module_label(torch.nn.GroupNorm(2, 6))
        'GroupNorm(2, 6)'
    """
    name = type(module).__name__
    if hasattr(module, "num_groups"):
        return f"{name}({module.num_groups}, {module.num_channels})"
    if hasattr(module, "normalized_shape"):
        shape = list(module.normalized_shape)
        return f"{name}({shape[0]})" if len(shape) == 1 else f"{name}({shape})"
    if hasattr(module, "num_features"):
        return f"{name}({module.num_features})"
    return name


def _kind_of(module: object) -> tuple[str, str, tuple[int, ...] | None]:
    for cls in type(module).__mro__:
        if cls.__name__ in NORMS and cls.__module__.split(".")[0] in ("torch", "norms"):
            info = NORMS[cls.__name__]
            return info.name, info.kind, info.ranks
    raise TypeError(
        "describe() expects a norms or torch.nn normalization module "
        f"({', '.join(NORMS)}), got {type(module).__qualname__}"
    )


def _as_shape(input_shape: object) -> tuple[int, ...]:
    if isinstance(input_shape, torch.Tensor):
        raise TypeError("describe() takes an input *shape*; pass tensor.shape")
    try:
        shape = tuple(int(s) for s in input_shape)  # type: ignore[union-attr]
    except TypeError:
        raise TypeError(f"input_shape must be a sequence of ints, got {input_shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"input_shape must not have negative sizes, got {shape}")
    return shape


def _index_over(input_shape: tuple[int, ...], stat_dims: Sequence[int]) -> torch.Tensor:
    """Statistic ids when the kept dims ``stat_dims`` (in order) index the statistics."""
    stat_shape = [input_shape[d] for d in stat_dims]
    view = [1] * len(input_shape)
    for d in stat_dims:
        view[d] = input_shape[d]
    ids = torch.arange(math.prod(stat_shape), dtype=torch.int64)
    return ids.view(view).expand(input_shape).contiguous()


def describe(module: torch.nn.Module, input_shape: Sequence[int] | torch.Size) -> Reduction:
    """Describe which elements share a statistic when ``module`` sees ``input_shape``.

    Args:
        module: a ``norms`` module or the matching ``torch.nn`` one
            (BatchNorm1d/2d/3d, LayerNorm, RMSNorm, GroupNorm, InstanceNorm1d/2d/3d).
        input_shape: a tuple of ints or a ``torch.Size``.

    Returns:
        a :class:`Reduction`.

    Raises:
        ValueError: if ``module`` would reject an input of this shape (wrong rank,
            wrong channel count, ``normalized_shape`` mismatch, channels not
            divisible by the groups). Always ValueError here, even where
            ``forward`` raises torch's RuntimeError. Degenerate shapes that only
            fail in training (one value per channel) are *not* rejected: the
            grouping is still well defined.
        TypeError: if ``module`` is not a supported normalization layer.
    """
    name, kind, ranks = _kind_of(module)
    shape = _as_shape(input_shape)
    ndim = len(shape)

    def fail(msg: str) -> None:
        raise ValueError(f"{name}: input of shape {shape} rejected: {msg}")

    if ranks is not None and ndim not in ranks:
        fail(f"{rank_error_message(ranks, ndim)}, wanted {LAYOUTS[name]}")
    weight = getattr(module, "weight", None)
    param_shape = None if weight is None else tuple(weight.shape)
    layout = _LAYOUT_OF_FAMILY[kind](module, kind, shape, ranks, fail)
    param_dims = layout.pop("param_dims")
    reduced = layout["reduced_dims"]
    return Reduction(
        norm=name,
        input_shape=shape,
        kept_dims=tuple(d for d in range(ndim) if d not in reduced),
        num_statistics=math.prod(layout["stat_shape"]),
        param_shape=param_shape,
        param_dims=None if param_shape is None else param_dims,
        has_mean=kind != "rms",
        has_bias=kind != "rms" and getattr(module, "bias", None) is not None,
        **layout,
    )


def _per_sample_layout(shape, reduced, stat_dims) -> dict:
    """The fields of a :class:`Reduction` shared by the norms with one statistic per index of
    ``stat_dims`` (all but GroupNorm)."""
    return {
        "reduced_dims": reduced,
        "stat_shape": tuple(shape[d] for d in stat_dims),
        "elements_per_statistic": math.prod(shape[d] for d in reduced),
        "statistic_index": _index_over(shape, stat_dims),
    }


def _batch_or_instance_layout(module, kind, shape, ranks, fail) -> dict:
    """BatchNorm's and InstanceNorm's axes: per channel (and per sample for InstanceNorm)."""
    ndim = len(shape)
    num_features = module.num_features
    track = bool(module.track_running_stats)
    if kind == "instance" and ndim == ranks[0]:  # unbatched (C, *S)
        chan, reduced, stat_dims = 0, tuple(range(1, ndim)), (0,)
    else:
        chan = 1
        reduced = batch_norm_dims(ndim) if kind == "batch" else instance_norm_dims(ndim)
        stat_dims = (1,) if kind == "batch" else (0, 1)
    c = shape[chan]
    # Same rules as forward: a mismatch only matters if something is sized by C.
    if c != num_features and (module.affine or track):
        fail(
            f"expected {num_features} channels in dim {chan} (num_features={num_features}), got {c}"
        )
    return {
        **_per_sample_layout(shape, reduced, stat_dims),
        "param_dims": (chan,),
        "train_eval_differ": track,
    }


def _layer_or_rms_layout(module, kind, shape, ranks, fail) -> dict:
    """LayerNorm's and RMSNorm's axes: the last ``len(normalized_shape)`` dims."""
    ndim = len(shape)
    ns = tuple(module.normalized_shape)
    k = len(ns)
    if k == 0:
        fail("normalized_shape must have at least one dimension")
    if ndim < k or shape[ndim - k :] != ns:
        fail(
            f"normalized_shape={list(ns)} needs the input's last {k} dim"
            f"{'' if k == 1 else 's'} to be {ns}, got input shape {shape}"
        )
    reduced = layer_norm_dims(ndim, k)
    return {
        **_per_sample_layout(shape, reduced, tuple(range(ndim - k))),
        "param_dims": reduced,
        "train_eval_differ": False,
    }


def _group_layout(module, kind, shape, ranks, fail) -> dict:
    """GroupNorm's axes: per sample and group of ``C // G`` channels, over the spatial dims."""
    ndim = len(shape)
    g = int(module.num_groups)
    if ndim < 2:
        fail(f"expected at least 2 dimensions (N, C, *), got {ndim}")
    n, c = shape[0], shape[1]
    if c % g != 0:
        fail(f"number of channels {c} (dim 1) is not divisible by num_groups={g}")
    if getattr(module, "weight", None) is not None and c != module.num_channels:
        fail(f"expected {module.num_channels} channels in dim 1 (num_channels), got {c}")
    cpg = c // g
    # id = n * G + c // (C//G), broadcast over the spatial dims.
    ids = (
        torch.arange(n, dtype=torch.int64)[:, None] * g
        + (torch.arange(c, dtype=torch.int64) // max(cpg, 1))[None, :]
    )  # (N, C)
    return {
        "reduced_dims": group_norm_dims(ndim, cpg),
        "stat_shape": (n, g),
        "elements_per_statistic": cpg * math.prod(shape[2:]),
        "statistic_index": ids.view(n, c, *([1] * (ndim - 2))).expand(shape).contiguous(),
        "param_dims": (1,),
        "train_eval_differ": False,
    }


#: The layout of each family's statistics (:func:`describe`).
_LAYOUT_OF_FAMILY = {
    "batch": _batch_or_instance_layout,
    "instance": _batch_or_instance_layout,
    "layer": _layer_or_rms_layout,
    "rms": _layer_or_rms_layout,
    "group": _group_layout,
}
