r"""The small models of the experiments, whose normalization is an argument.

* :func:`make_norm`: one normalization layer of ``norms`` by name (``"none"``,
  ``"batch"``, ``"layer"``, ``"group"``, ``"rms"``) for a feature shape ``(C,)`` or
  ``(C, H, W)``.
* :class:`Block`, :class:`DigitsMLP`, :class:`CNN`, :class:`ResidualMLP`: the models, each a
  stack of blocks *weight layer → norm → activation* whose normalization is an
  argument. Each block can capture its pre-activation (the input of its
  nonlinearity) and that tensor's gradient for :func:`~norms.lab.training.train` to record.
* :func:`seeded`, :func:`default_dtype`: the contexts the models draw their initial
  parameters in (the same numbers on every CPU).

:mod:`norms.lab.training` trains them (and re-exports every name here).

Example:
    >>> model = DigitsMLP("layer", seed=0)
    >>> model(torch.zeros(2, 1, 8, 8, dtype=DTYPE)).shape
    torch.Size([2, 10])
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from ..modules.batchnorm import BatchNorm1d, BatchNorm2d
from ..modules.groupnorm import GroupNorm
from ..modules.layernorm import LayerNorm
from ..modules.rmsnorm import RMSNorm

__all__ = [
    "NORM_KINDS",
    "NORM_LABELS",
    "DTYPE",
    "make_norm",
    "seeded",
    "default_dtype",
    "Block",
    "DigitsMLP",
    "CNN",
    "ResidualBlock",
    "ResidualMLP",
]

#: The names :func:`make_norm` accepts, in the order the chapters show them.
NORM_KINDS: tuple[str, ...] = ("none", "batch", "layer", "group", "rms")
#: The floating-point type of the data and models of the experiments: float64, because a float32
#: training run gives other numbers on another CPU (SIMD width, thread count), a float64 one does
#: not at the size of these models.
DTYPE = torch.float64
#: How the figures and summary lines name each kind.
NORM_LABELS: dict[str, str] = {
    "none": "no norm",
    "batch": "BatchNorm",
    "layer": "LayerNorm",
    "group": "GroupNorm",
    "rms": "RMSNorm",
}


def make_norm(kind: str, shape: Sequence[int], groups: int = 4) -> nn.Module:
    """The normalization layer ``kind`` for features of shape ``(C,)`` or ``(C, H, W)``.

    * ``"none"``: :class:`torch.nn.Identity`;
    * ``"batch"``: :class:`~norms.BatchNorm1d` (``(C,)``) or :class:`~norms.BatchNorm2d`
      (``(C, H, W)``): statistics per channel over the batch (and the pixels);
    * ``"layer"``: :class:`~norms.LayerNorm` over the whole ``shape``: statistics per
      sample over every feature (for images: over C, H and W, as in Wu & He, 2018;
      its γ and β have one entry per element);
    * ``"group"``: :class:`~norms.GroupNorm` with ``groups`` groups of channels;
    * ``"rms"``: :class:`~norms.RMSNorm` over the whole ``shape``.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) not in (1, 3):
        raise ValueError(f"shape must be (C,) or (C, H, W), got {shape}")
    channels = shape[0]
    if kind == "none":
        return nn.Identity()
    if kind == "batch":
        return BatchNorm1d(channels) if len(shape) == 1 else BatchNorm2d(channels)
    if kind == "layer":
        return LayerNorm(shape)
    if kind == "group":
        return GroupNorm(groups, channels)
    if kind == "rms":
        return RMSNorm(shape)
    raise ValueError(f"unknown norm {kind!r}; choose from {', '.join(NORM_KINDS)}")


@contextmanager
def default_dtype(dtype: torch.dtype):
    """A context in which new floating-point tensors (parameters included) have ``dtype``.

    The models of this module draw their initial parameters inside it: drawn in float64, they
    are the same on every CPU to the last bit or two; drawn in float32 and then cast, they differ
    by a float32 rounding between CPUs whose SIMD kernels round ``uniform_`` differently."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def seeded(seed: int):
    """A context in which torch's global generator starts from ``seed`` and is restored after."""
    ctx = torch.random.fork_rng(devices=[])

    class _Seeded:
        def __enter__(self):
            ctx.__enter__()
            torch.manual_seed(seed)

        def __exit__(self, *exc):
            return ctx.__exit__(*exc)

    return _Seeded()


class Block(nn.Module):
    """``layer → norm → activation → dropout`` (or ``layer → activation → norm`` with
    ``norm_after_activation=True``).

    With :attr:`capture` set, :meth:`forward` keeps the input of the activation in
    :attr:`z` (pre-activation; with the norm before the activation this is the norm's
    output) and retains its gradient, for :func:`~norms.lab.training.train` to record.

    Args:
        layer: the weight layer (``nn.Linear`` or ``nn.Conv2d``).
        norm: the normalization layer (``nn.Identity()`` for none).
        dropout: dropout probability after the activation (0: no dropout layer).
        norm_after_activation: put the norm after the activation instead of before.
    """

    def __init__(
        self,
        layer: nn.Module,
        norm: nn.Module,
        dropout: float = 0.0,
        norm_after_activation: bool = False,
    ) -> None:
        super().__init__()
        self.layer = layer
        self.norm = norm
        self.act = nn.ReLU()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.norm_after_activation = norm_after_activation
        self.capture = False
        self.z: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        h = self.layer(x)
        z = h if self.norm_after_activation else self.norm(h)
        if self.capture:
            if z.requires_grad:
                z.retain_grad()
            self.z = z
        out = self.act(z)
        if self.norm_after_activation:
            out = self.norm(out)
        return self.dropout(out)

    def extra_repr(self) -> str:
        return "norm after activation" if self.norm_after_activation else ""


class _Stack(nn.Module):
    """Shared: ``blocks`` (a ModuleList of :class:`Block`) and ``head``."""

    blocks: nn.ModuleList
    head: nn.Module
    norm_kind: str

    def norm_layers(self) -> list[nn.Module]:
        """The normalization layer of every block, first to last."""
        return [b.norm for b in self.blocks]


class DigitsMLP(_Stack):
    """``depth`` blocks Linear → norm → ReLU on flattened 8 × 8 images, then a linear head.

    A linear layer followed by a norm has no bias (BatchNorm would subtract it, the
    other norms have their own β); without a norm it has one.

    Args:
        norm: a kind of :func:`make_norm` (``"none"``, ``"batch"``, ``"layer"``,
            ``"group"``, ``"rms"``).
        width: hidden width. depth: number of hidden blocks.
        in_features, num_classes: input size (64 pixels) and number of classes.
        groups: groups of GroupNorm. dropout: dropout after every activation.
        norm_after_activation: see :class:`Block`.
        seed: parameters are initialized from this seed (torch's global generator is
            left as it was).
        dtype: floating-point type of the parameters (default :data:`DTYPE`, float64).

    Shape:
        input ``(N, 1, 8, 8)`` or ``(N, 64)``; output ``(N, num_classes)``.
    """

    def __init__(
        self,
        norm: str = "none",
        width: int = 64,
        depth: int = 3,
        in_features: int = 64,
        num_classes: int = 10,
        groups: int = 8,
        dropout: float = 0.0,
        norm_after_activation: bool = False,
        seed: int = 0,
        dtype: torch.dtype = DTYPE,
    ) -> None:
        super().__init__()
        self.norm_kind = norm
        with seeded(seed), default_dtype(dtype):
            self.blocks = nn.ModuleList(
                Block(
                    nn.Linear(in_features if i == 0 else width, width, bias=norm == "none"),
                    make_norm(norm, (width,), groups),
                    dropout,
                    norm_after_activation,
                )
                for i in range(depth)
            )
            self.head = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = x.flatten(1)  # (N, 64)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class CNN(_Stack):
    """Three blocks Conv2d(3 × 3) → norm → ReLU on 8 × 8 images, global average pooling,
    a linear head.

    Channels ``channels`` at 8 × 8, then ``2·channels`` at 4 × 4 and 2 × 2 (stride 2).
    The norms see feature maps of shape ``(C, 8, 8)``, ``(2C, 4, 4)`` and ``(2C, 2, 2)``.

    Args:
        norm: a kind of :func:`make_norm`. channels: channels of the first block.
        groups: groups of GroupNorm (must divide ``channels``).
        num_classes: classes. seed: initialization seed (global generator restored).
        dtype: floating-point type of the parameters (default :data:`DTYPE`, float64).

    Shape:
        input ``(N, 1, 8, 8)``; output ``(N, num_classes)``.
    """

    def __init__(
        self,
        norm: str = "none",
        channels: int = 16,
        groups: int = 4,
        num_classes: int = 10,
        seed: int = 0,
        dtype: torch.dtype = DTYPE,
    ) -> None:
        super().__init__()
        self.norm_kind = norm
        c1, c2 = channels, 2 * channels
        specs = [(1, c1, 1, 8), (c1, c2, 2, 4), (c2, c2, 2, 2)]  # (in, out, stride, output side)
        with seeded(seed), default_dtype(dtype):
            self.blocks = nn.ModuleList(
                Block(
                    nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=norm == "none"),
                    make_norm(norm, (cout, side, side), groups),
                )
                for cin, cout, stride, side in specs
            )
            self.head = nn.Linear(c2, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1:] != (1, 8, 8):
            raise ValueError(f"CNN expects images of shape (N, 1, 8, 8), got {tuple(x.shape)}")
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=(2, 3)))  # (N, 2C) after global average pooling


class ResidualBlock(nn.Module):
    """``x + norm2(linear2(relu(norm1(linear1(x)))))``, then ReLU (the ResNet basic block,
    fully connected). With ``zero_init=True`` the γ of ``norm2`` starts at 0, so the
    block starts as the identity (Goyal et al., 2017)."""

    def __init__(self, width: int, norm: str, zero_init: bool = False, groups: int = 8) -> None:
        super().__init__()
        bias = norm == "none"
        self.linear1, self.norm1 = (
            nn.Linear(width, width, bias=bias),
            make_norm(norm, (width,), groups),
        )
        self.linear2, self.norm2 = (
            nn.Linear(width, width, bias=bias),
            make_norm(norm, (width,), groups),
        )
        if zero_init:
            if getattr(self.norm2, "weight", None) is None:
                raise ValueError(f"zero_init needs a norm with a learnable γ, got {norm!r}")
            nn.init.zeros_(self.norm2.weight)

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(x + self.norm2(self.linear2(torch.relu(self.norm1(self.linear1(x))))))


class ResidualMLP(nn.Module):
    """A linear stem, ``depth`` :class:`ResidualBlock` s of width ``width``, a linear head.

    Args:
        norm: a kind of :func:`make_norm`. width, depth: size. zero_init: start the last
        norm of every residual block with γ = 0. seed: initialization seed.
        dtype: floating-point type of the parameters (default :data:`DTYPE`, float64).

    Shape:
        input ``(N, 1, 8, 8)`` or ``(N, 64)``; output ``(N, num_classes)``.
    """

    def __init__(
        self,
        norm: str = "batch",
        width: int = 64,
        depth: int = 4,
        in_features: int = 64,
        num_classes: int = 10,
        zero_init: bool = False,
        seed: int = 0,
        dtype: torch.dtype = DTYPE,
    ) -> None:
        super().__init__()
        self.norm_kind = norm
        with seeded(seed), default_dtype(dtype):
            self.stem = nn.Linear(in_features, width)
            self.blocks = nn.ModuleList(ResidualBlock(width, norm, zero_init) for _ in range(depth))
            self.head = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.relu(self.stem(x.flatten(1)))
        for block in self.blocks:
            x = block(x)
        return self.head(x)
