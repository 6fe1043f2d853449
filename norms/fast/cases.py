"""What the benchmark measures: the layers and shapes (cases), and what a perfect kernel costs.

A :class:`Case` is one layer on one input shape; :data:`CASES` are the realistic shapes of
``make bench``, :data:`SMALL_CASES` and :data:`TINY_CASES` smaller ones for the chapter and
the tests. :func:`perfect_bytes` counts the bytes a perfect kernel must move and
:func:`flops` the floating-point operations of the formula; :func:`make_layer` builds the
layer of a case for each implementation (:data:`IMPLS`). :mod:`norms.fast.bench` times them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from norms import modules

__all__ = [
    "IMPLS",
    "DIRECTIONS",
    "Case",
    "CASES",
    "SMALL_CASES",
    "TINY_CASES",
    "FLOPS_PER_ELEMENT",
    "perfect_bytes",
    "flops",
    "make_layer",
]

#: The implementations timed: torch.nn, norms op by op, norms compiled (:mod:`norms.fast.fused`).
IMPLS = ("torch", "norms", "fused")
#: The directions timed: the forward pass, and the forward then the backward pass.
DIRECTIONS = ("fwd", "fwd+bwd")


@dataclass(frozen=True)
class Case:
    """One layer on one input shape.

    Args:
        op: the layer's class name, e.g. ``"LayerNorm"`` (the same name in
            ``torch.nn``, :mod:`norms` and :mod:`norms.fast.fused`).
        shape: the input shape.
        args: positional constructor arguments, e.g. ``(768,)``.
        kwargs: keyword constructor arguments, e.g. ``{"affine": True}``.
        what: where such a shape occurs (for the report).
    """

    op: str
    shape: tuple[int, ...]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    what: str = ""


#: Realistic shapes: two per layer, 3 to 6.6 million float32 elements (13 to 26 MB:
#: far larger than the caches, as in training, and below glibc's 32 MB limit for
#: reusing freed memory, see :func:`steady_allocator_for_this_process`).
CASES: tuple[Case, ...] = (
    Case("BatchNorm2d", (32, 64, 56, 56), (64,), what="ResNet-50, first stage, batch 32"),
    Case("BatchNorm2d", (32, 128, 28, 28), (128,), what="ResNet-50, second stage, batch 32"),
    Case("LayerNorm", (32, 256, 768), (768,), what="BERT-base, 32 sequences of 256 tokens"),
    Case("LayerNorm", (4, 1024, 1024), (1024,), what="GPT-2 medium, 4 sequences of 1024 tokens"),
    Case("RMSNorm", (8, 512, 2048), (2048,), what="a 1B-parameter LLaMA-style model"),
    Case("RMSNorm", (2, 512, 4096), (4096,), what="LLaMA-7B, 2 sequences of 512 tokens"),
    Case(
        "GroupNorm", (32, 64, 56, 56), (32, 64), what="ResNet-50 stage 1 with GroupNorm (Wu & He)"
    ),
    Case("GroupNorm", (4, 320, 64, 64), (32, 320), what="a diffusion U-Net block, batch 4"),
    Case(
        "InstanceNorm2d", (4, 64, 128, 128), (64,), {"affine": True}, what="style transfer, 128x128"
    ),
    Case(
        "InstanceNorm2d",
        (32, 64, 56, 56),
        (64,),
        {"affine": True},
        what="image-to-image network, 56x56",
    ),
)

#: Small shapes, one per layer, about half a million elements (2 MB): what the chapter
#: times on a CPU (compiling and timing all five layers takes well under a minute).
#: They fit in the caches, so the roof there is cache bandwidth, measured the same way.
SMALL_CASES: tuple[Case, ...] = (
    Case("BatchNorm2d", (16, 32, 28, 28), (32,), what="small"),
    Case("LayerNorm", (8, 128, 512), (512,), what="small"),
    Case("RMSNorm", (8, 128, 512), (512,), what="small"),
    Case("GroupNorm", (16, 32, 28, 28), (8, 32), what="small"),
    Case("InstanceNorm2d", (16, 32, 28, 28), (32,), {"affine": True}, what="small"),
)

#: Tiny shapes, one per layer: the same code path in a fraction of a second (tests, the chapter on
#: a CPU).
TINY_CASES: tuple[Case, ...] = (
    Case("BatchNorm2d", (4, 6, 10, 12), (6,), what="tiny"),
    Case("LayerNorm", (4, 10, 48), (48,), what="tiny"),
    Case("RMSNorm", (4, 10, 48), (48,), what="tiny"),
    Case("GroupNorm", (4, 6, 10, 12), (3, 6), what="tiny"),
    Case("InstanceNorm2d", (4, 6, 10, 12), (6,), {"affine": True}, what="tiny"),
)


# ---------------------------------------------------------------------------
# what a perfect kernel must do
# ---------------------------------------------------------------------------

#: Floating-point operations per input element, counted on the formulas (the
#: work per statistic, a few operations per row or channel, is left out).
#:
#: Forward with affine parameters (LayerNorm-like): sum for the mean (1),
#: subtract it (1), square and sum (2), multiply by 1/sigma (1), times gamma plus
#: beta (2): 7. RMSNorm: square and sum (2), times 1/rms (1), times gamma (1): 4.
#:
#: Backward (see :mod:`norms.autograd`): g = dy * gamma (1), x_hat from x (2),
#: sum g (1), g * x_hat and its sum (2), dx = rstd * (g - <g> - x_hat <g x_hat>)
#: (4), dgamma = sum dy * x_hat (2), dbeta = sum dy (1): 13. RMSNorm has no
#: mean and no beta: x_hat (1), g (1), g * x_hat and sum (2), dx (3), dgamma (2): 9.
FLOPS_PER_ELEMENT = {
    "centred": {"fwd": 7, "fwd+bwd": 7 + 13},
    "rms": {"fwd": 4, "fwd+bwd": 4 + 9},
}


def _params(case: Case) -> int:
    """Number of elements in the layer's parameters (weight and bias)."""
    return sum(p.numel() for p in make_layer(case, "torch", device="meta").parameters())


def perfect_bytes(case: Case, direction: str, itemsize: int = 4) -> int:
    """Bytes a perfect kernel must move: every input read once, every output written once.

    Forward: read ``x`` and the parameters, write ``y``. Forward and backward: the
    forward's traffic, then read ``x`` and ``dy`` and the parameters, write ``dx`` and
    the parameter gradients. (The forward and backward are separate calls, so ``x``
    is read twice.) Statistics (a few numbers per row or channel) are left out.

    >>> perfect_bytes(Case("LayerNorm", (2, 3, 4), (4,)), "fwd")   # (24 + 24) * 4 + 8 * 4
    224
    """
    n = math.prod(case.shape)
    p = _params(case)
    if direction == "fwd":
        elements = 2 * n + p
    elif direction == "fwd+bwd":
        elements = (2 * n + p) + (3 * n + 2 * p)
    else:
        raise ValueError(f"direction must be 'fwd' or 'fwd+bwd', got {direction!r}")
    return elements * itemsize


def flops(case: Case, direction: str) -> int:
    """Floating-point operations of the formula (:data:`FLOPS_PER_ELEMENT` times the input size)."""
    kind = "rms" if case.op == "RMSNorm" else "centred"
    return FLOPS_PER_ELEMENT[kind][direction] * math.prod(case.shape)


# ---------------------------------------------------------------------------
# layers and the functions we time
# ---------------------------------------------------------------------------


def make_layer(
    case: Case, impl: str, device: str | torch.device = "cpu", dtype=torch.float32
) -> nn.Module:
    """The layer of ``case`` from ``torch.nn`` (``"torch"``), :mod:`norms` or
    :mod:`norms.fast.fused`.

    Parameters get non-trivial values (the same in every implementation, from a
    fixed seed), and the layer is in training mode.
    """
    if impl == "torch":
        cls = getattr(nn, case.op)
    elif impl == "norms":
        cls = getattr(modules, case.op)
    elif impl == "fused":
        # imported here: the fused layers bring torch.compile (about 2 s of imports), which
        # what reads only the cases (the quizzes, the figures) does not need
        from . import fused

        cls = getattr(fused, case.op)
    else:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    layer = cls(*case.args, **case.kwargs, device=device, dtype=dtype)
    if str(device) != "meta":
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in layer.parameters():
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
    return layer.train()
