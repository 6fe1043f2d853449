"""The measurements of the chapter on normalizing the weights.

* :func:`he_init_`: He (Kaiming) normal initialization of every convolution of the residual
  blocks of a :class:`~norms.lab.small_batches.ResidualCNN`, all drawn from one generator;
* :func:`stream_std`: the standard deviation of the residual stream after the stem and after
  every block;
* :func:`conv_operator_norm`: the spectral norm of a convolution as the linear map it is on
  inputs of a given size, next to that of its kernel reshaped to a matrix (what
  spectral normalization divides by);
* :class:`ClipCount`, :func:`counted_agc_sgd`: SGD with adaptive gradient clipping, as
  :func:`~norms.lab.small_batches.agc_sgd`, that also counts how many unit-steps it clipped.

Example:
    >>> from norms.lab.small_batches import residual_cnn
    >>> model = he_init_(residual_cnn("skipinit", seed=0, depth=2), seed=0)
    >>> len(stream_std(model, torch.randn(4, 1, 8, 8, dtype=torch.float64)))
    3
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..modules.weight_norms import adaptive_clip_grad_, unitwise_norm
from .small_batches import ResidualCNN

__all__ = ["ClipCount", "conv_operator_norm", "counted_agc_sgd", "he_init_", "stream_std"]


@torch.no_grad()
def he_init_(model: ResidualCNN, seed: int) -> ResidualCNN:
    """Draw the weights of every convolution of ``model``'s residual blocks from
    :func:`torch.nn.init.kaiming_normal_` (ReLU gain, fan-in), in place, and set every
    block's ``alpha`` to 1 (each branch added in full).

    One ``torch.Generator`` seeded with ``seed`` draws them all, one convolution after the
    other, so that no two convolutions start from the same weights. The stem, the biases
    and the head are left as they are. Returns ``model``.
    """
    gen = torch.Generator().manual_seed(seed)
    for block in model.blocks:
        block.alpha.fill_(1.0)
        for conv in (block.conv1, block.conv2):
            nn.init.kaiming_normal_(conv.weight, nonlinearity="relu", generator=gen)
    return model


@torch.no_grad()
def stream_std(model: ResidualCNN, x: Tensor) -> list[float]:
    """The standard deviation of the residual stream of ``model`` on ``x``: after the stem,
    then after every block (``depth + 1`` numbers), in the mode ``model`` is in."""
    h = model.stem(x)
    stds = [float(h.std())]
    for block in model.blocks:
        h = block(h)
        stds.append(float(h.std()))
    return stds


@torch.no_grad()
def conv_operator_norm(conv: nn.Conv2d, input_size: tuple[int, int]) -> tuple[float, float]:
    """``(σ of the convolution, σ of its reshaped kernel)``.

    The first is the largest singular value of the linear map ``x ↦ conv(x) − bias`` on
    inputs of shape ``(C_in, *input_size)``, from its full matrix (one column per input
    element: keep the inputs small). The second is the largest singular value of the
    weight reshaped to ``(C_out, C_in · k_H · k_W)``, the matrix that
    :func:`~torch.nn.utils.parametrizations.spectral_norm` normalizes.
    """
    n = conv.in_channels * input_size[0] * input_size[1]
    dtype = conv.weight.dtype
    basis = torch.eye(n, dtype=dtype).reshape(n, conv.in_channels, *input_size)
    columns = nn.functional.conv2d(
        basis, conv.weight, None, conv.stride, conv.padding, conv.dilation, conv.groups
    )
    operator = columns.reshape(n, -1).T  # (outputs, inputs)
    kernel = conv.weight.reshape(conv.out_channels, -1)
    return (
        float(torch.linalg.matrix_norm(operator, ord=2)),
        float(torch.linalg.matrix_norm(kernel, ord=2)),
    )


@dataclass
class ClipCount:
    """How many unit-steps adaptive gradient clipping scaled down (``clipped``) out of all
    the unit-steps it saw (``units``): one unit-step is one unit (one row of a weight, one
    output channel of a kernel; a bias or a gain vector as a whole) at one step."""

    clipped: int = 0
    units: int = 0

    @property
    def fraction(self) -> float:
        """``clipped / units`` (0 before any step)."""
        return self.clipped / self.units if self.units else 0.0


def counted_agc_sgd(
    lr: float, count: ClipCount, clip_factor: float = 0.01, momentum: float = 0.9
) -> Callable[[nn.Module], torch.optim.Optimizer]:
    """:func:`~norms.lab.small_batches.agc_sgd` (the same parameters clipped, the same
    steps) that adds to ``count`` the units whose gradient the clipping scaled down.

    Args:
        lr, clip_factor, momentum: as :func:`~norms.lab.small_batches.agc_sgd`.
        count: a :class:`ClipCount` to add to, at every step.
    """

    def make(model: nn.Module) -> torch.optim.Optimizer:
        head = {id(p) for p in model.head.parameters()}
        clipped = [p for p in model.parameters() if id(p) not in head]
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, foreach=True)

        def clip(*_):
            grads = [p for p in clipped if p.grad is not None]
            before = [unitwise_norm(p.grad).flatten() for p in grads]
            adaptive_clip_grad_(grads, clip_factor)
            for p, b in zip(grads, before, strict=True):
                count.clipped += int((unitwise_norm(p.grad).flatten() < b).sum())
                count.units += b.numel()

        opt.register_step_pre_hook(clip)
        return opt

    return make
