"""Random layers and inputs for the computed questions: a layer, its arguments and an input
shape."""

from __future__ import annotations

import random

from norms import modules
from norms.axes import NORMS, describe
from norms.i18n import tr

from .builders import shape_str


def constructor(name: str, args: tuple, kwargs: dict | None = None) -> str:
    parts = [repr(list(a)) if isinstance(a, tuple) else repr(a) for a in args]
    parts += [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"norms.{name}({', '.join(parts)})"


def random_case(rng: random.Random, name: str) -> tuple:
    """(name, args, kwargs, input_shape) for a random but sensible use of layer ``name``.
    Every dim is >= 2 (so 'reduced or not' is never vacuous) and shapes stay small."""
    N = rng.choice([2, 4, 8])
    if name == "BatchNorm1d":
        C = rng.choice([3, 4, 6, 16])
        shape = (N, C) if rng.random() < 0.5 else (N, C, rng.choice([5, 7, 10]))
        return name, (C,), {}, shape
    if name == "BatchNorm2d":
        C = rng.choice([3, 8, 16])
        return name, (C,), {}, (N, C, rng.choice([4, 5, 7]), rng.choice([4, 6, 7]))
    if name == "BatchNorm3d":
        C = rng.choice([2, 3, 4])
        return name, (C,), {}, (N, C, rng.choice([2, 3]), rng.choice([4, 5]), rng.choice([4, 6]))
    if name.startswith("InstanceNorm"):
        d = int(name[-2])
        C = rng.choice([3, 4, 8])
        spatial = tuple(rng.choice([4, 5, 6, 7]) for _ in range(d))
        kwargs = {"affine": True} if rng.random() < 0.5 else {}
        return name, (C,), kwargs, (N, C) + spatial
    if name in ("LayerNorm", "RMSNorm"):
        r = rng.random()
        if r < 0.5 or name == "RMSNorm":
            D = rng.choice([8, 16, 32])
            shape = (N, rng.choice([3, 5, 10]), D) if rng.random() < 0.7 else (N, D)
            return name, (D,), {}, shape
        C, H, W = rng.choice([3, 4, 8]), rng.choice([4, 5]), rng.choice([6, 7])
        ns = (C, H, W) if r < 0.8 else (H, W)
        return name, (ns,), {}, (N, C, H, W)
    if name == "GroupNorm":
        C = rng.choice([6, 8, 12, 16])
        G = rng.choice([g for g in range(2, C) if C % g == 0])
        spatial = (
            (rng.choice([3, 4, 5]), rng.choice([4, 6, 7]))
            if rng.random() < 0.8
            else (rng.choice([5, 9]),)
        )
        return name, (G, C), {}, (N, C) + spatial
    raise ValueError(name)


def make_module(name, args, kwargs=None):
    return getattr(modules, name)(*args, **(kwargs or {}))


ALL_LAYERS = list(NORMS)  # the nine layers, in the book's order


def family_of(name):
    return NORMS[name].family


def alternatives(shape):
    """Other layers that accept ``shape``: [(name, args, Reduction)], for distractors."""
    nd = len(shape)
    layers = []
    C = shape[1]
    if nd in (2, 3):
        layers.append(("BatchNorm1d", (C,)))
    if nd in (4, 5):
        layers.append(("BatchNorm2d" if nd == 4 else "BatchNorm3d", (C,)))
    if nd >= 3:
        layers.append((f"InstanceNorm{nd - 2}d", (C,)))
        layers.append(("LayerNorm", (tuple(shape[1:]),)))
    layers.append(("LayerNorm", (shape[-1],)))
    for g in (2, 4, 3):
        if C % g == 0 and C != g:
            layers.append(("GroupNorm", (g, C)))
            break
    return [(n, a, describe(make_module(n, a), shape)) for n, a in layers]


def layer_label(name, args) -> str:
    """``LayerNorm([3, 4])``, ``GroupNorm(2, 8)``: a layer as the reader would construct it."""
    return constructor(name, args)[len("norms.") :]


def grouping(name, args, r) -> str:
    """What shares a statistic, in words that tell the layers apart. GroupNorm is described by its
    blocks
    of channels: its reduced dims (1, 2, ...) are the same tuple as LayerNorm's over (C, ...), yet
    channels in
    different blocks never share a statistic."""
    if name == "GroupNorm":
        G, C = args
        where = tr(", over every position of those channels") if len(r.input_shape) > 2 else ""
        return tr(
            "computes one statistic per sample and block of C/G = {c} consecutive "
            "channels{where} (statistics of shape (N, G) = {stat_shape})",
            c=C // G,
            where=where,
            stat_shape=shape_str(r.stat_shape),
        )
    return tr(
        "reduces over dims {reduced_dims} (statistics of shape {stat_shape})",
        reduced_dims=r.reduced_dims,
        stat_shape=shape_str(r.stat_shape),
    )


def stat_words(r) -> str:
    return tr("means (and as many variances)") if r.has_mean else tr("root-mean-square values")
