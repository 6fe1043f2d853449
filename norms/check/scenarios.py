"""What the grader runs: the reference layers it knows, their scenarios (constructor
arguments and input shapes), the data, and building the reference layer."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
from torch import nn

from norms.axes import NORMS

KIND = {name: norm.kind for name, norm in NORMS.items()}  # batch, instance, layer, rms, group


@dataclass
class Scenario:
    args: tuple  # positional constructor arguments
    train: list  # input shapes of the successive training steps
    eval: list  # input shapes in evaluation mode (after training)
    optional: bool = False  # a crash only gives a note (feature torch has, book does not need)


@dataclass
class ClassRun:
    """One scenario of a class candidate, as its phases find and pass it on: the candidate's
    module and what was found in it, torch's matching layer, and the outcome so far.

    The grader's phases (``inspect_module``, ``structure_problems``,
    ``build_matching_reference``, ``set_parameters``, ``train_step``, ``eval_step``) take it
    as an argument; nothing about one scenario is kept on the grader itself."""

    sc: Scenario
    spec: object  # hypotheses.Spec: the reference's dims and shapes
    call: str  # how the candidate was built, e.g. "MyBatchNorm(3)"
    module: nn.Module  # the candidate
    scale: str | None  # the name of its γ (None: not found, or left out of the comparison)
    shift: str | None  # the name of its β
    wrong: list  # (name, shape) of parameters with another shape than torch's γ, β
    plain: list  # names of γ, β kept as plain tensors (not registered)
    eps: object  # the candidate's eps, or "missing"
    momentum: object  # the candidate's momentum (a number or None), or "missing"
    ref_params: set  # the names of the default reference's parameters (weight, bias)
    wants_affine: bool  # torch's layer with these arguments has γ (and β)
    running_kind: bool  # torch's layer with these arguments keeps running statistics
    running: dict = field(default_factory=dict)  # "mean"/"var" -> (name, how it is kept)
    created: tuple | None = None  # parameters (new, replaced) by the first forward pass
    ref: nn.Module | None = None  # torch's layer with the candidate's settings
    affine: bool = False  # whether the reference has γ
    ref_eps: float = 0.0  # the eps the reference uses
    gen: torch.Generator | None = None  # the scenario's inputs and parameters
    w: torch.Tensor | None = None  # the γ given to both
    b: torch.Tensor | None = None  # the β given to both
    pairs: list = field(default_factory=list)  # (candidate's name, torch's parameter)
    mom: float | None = None  # the reference's momentum (batch and instance norms)
    train_failed: bool = False  # a training step of this scenario failed


# Shapes are chosen so that no other size coincides with the channel count (or
# the normalized size), and the sizes change from step to step: an implementation
# that reduces over the wrong dims (or hard-codes a reshape) cannot pass by luck.
SCENARIOS = {
    "BatchNorm1d": [
        Scenario((3,), [(8, 3), (5, 3), (6, 3)], [(4, 3)]),
        Scenario((4,), [(2, 4, 5), (6, 4, 7), (3, 4, 5)], [(5, 4, 7)]),
    ],
    "BatchNorm2d": [
        Scenario((3,), [(4, 3, 5, 7), (2, 3, 7, 5), (5, 3, 4, 4)], [(2, 3, 6, 5)]),
    ],
    "BatchNorm3d": [
        Scenario((2,), [(3, 2, 3, 4, 5), (4, 2, 5, 3, 4), (5, 2, 3, 3, 4)], [(3, 2, 4, 5, 3)]),
    ],
    "InstanceNorm1d": [
        Scenario((3,), [(4, 3, 5), (2, 3, 7), (1, 3, 6)], [(2, 3, 5)]),
    ],
    "InstanceNorm2d": [
        Scenario((3,), [(2, 3, 5, 7), (4, 3, 6, 4), (1, 3, 5, 5)], [(2, 3, 4, 6)]),
    ],
    "InstanceNorm3d": [
        Scenario((2,), [(3, 2, 3, 4, 5), (1, 2, 4, 5, 3), (4, 2, 3, 3, 4)], [(3, 2, 5, 3, 4)]),
    ],
    "LayerNorm": [
        Scenario((5,), [(4, 5), (3, 7, 5), (2, 3, 6, 5), (1, 5)], [(3, 4, 5)]),
        Scenario(((4, 5),), [(3, 4, 5), (2, 6, 4, 5)], [(1, 4, 5)], optional=True),
    ],
    "RMSNorm": [
        Scenario((5,), [(4, 5), (3, 7, 5), (2, 3, 6, 5), (1, 5)], [(3, 4, 5)]),
        Scenario(((4, 5),), [(3, 4, 5), (2, 6, 4, 5)], [(1, 4, 5)], optional=True),
    ],
    "GroupNorm": [
        Scenario((2, 6), [(2, 6, 3, 7), (4, 6, 5, 2), (1, 6, 4, 3)], [(3, 6, 2, 5)]),
        Scenario((3, 6), [(4, 6, 5), (2, 6, 7)], [(5, 6, 4)]),
    ],
}


# Keyword arguments a functools.partial reference may fix, per kind of layer.
_KEYWORDS = {
    "batch": ("eps", "momentum", "affine", "track_running_stats"),
    "instance": ("eps", "momentum", "affine", "track_running_stats"),
    "layer": ("eps", "elementwise_affine", "bias"),
    "rms": ("eps", "elementwise_affine"),
    "group": ("eps", "affine"),
}


def build_reference(name, args, *, affine, eps, momentum, track, fixed=None):
    """The torch layer with the candidate's settings; ``fixed`` (the keywords of a
    functools.partial reference) overrides them."""
    cls = getattr(nn, name)
    kw = {}
    kind = KIND[name]
    if kind in ("layer", "rms"):
        kw["elementwise_affine"] = affine
    else:
        kw["affine"] = affine
    if eps != "missing":
        kw["eps"] = eps
    if kind in ("batch", "instance"):
        if momentum != "missing":
            kw["momentum"] = momentum
        kw["track_running_stats"] = track
    kw.update(fixed or {})
    return cls(*args, **kw)


def make_input(gen, shape, step):
    """Step 1 uses a tiny scale (eps matters there); the others an offset, non-unit scale."""
    x = torch.randn(shape, generator=gen)
    if step % 3 == 1:
        return x * 0.01
    return x * 2.0 + (1.0 if step % 3 == 0 else -0.5)


def call_str(cls_name, args, kwargs=None):
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"{cls_name}({', '.join(parts)})"


def reference_name(reference):
    """(name, keywords): ``torch.nn.BatchNorm2d`` gives ("BatchNorm2d", {}); a
    ``functools.partial(torch.nn.LayerNorm, bias=False)`` gives ("LayerNorm", {"bias": False})."""
    keywords = {}
    if isinstance(reference, functools.partial):
        if reference.args:
            raise ValueError(
                f"a functools.partial reference may fix keyword arguments only; got positional "
                f"arguments {reference.args!r} in {reference!r}"
            )
        keywords = dict(reference.keywords)
        reference = reference.func
    name = reference if isinstance(reference, str) else getattr(reference, "__name__", None)
    if name is None and isinstance(reference, nn.Module):
        name = type(reference).__name__
    if name not in KIND:
        raise ValueError(
            f"reference must be one of torch.nn.{', torch.nn.'.join(KIND)} (or a "
            f"functools.partial of one with keyword arguments); got {reference!r}"
        )
    allowed = _KEYWORDS[KIND[name]]
    unknown = [k for k in keywords if k not in allowed]
    if unknown:
        raise ValueError(
            f"torch.nn.{name} keywords the grader can fix: {', '.join(allowed)}; got {unknown}"
        )
    return name, keywords
