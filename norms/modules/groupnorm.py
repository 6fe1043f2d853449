"""Group Normalization module, from scratch."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import Module, Parameter, init

from .. import functional as F

__all__ = ["GroupNorm"]


class GroupNorm(Module):
    r"""Group Normalization over a mini-batch of inputs.

    From the paper `Group Normalization <https://arxiv.org/abs/1803.08494>`__
    (Wu & He, 2018).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The ``C`` channels are split into :attr:`num_groups` groups of ``C //
    num_groups`` consecutive channels; the mean and (biased) variance are
    computed separately for every (sample, group), over the group's channels
    and all spatial positions. :math:`\gamma` and :math:`\beta` are per
    channel. ``num_groups=1`` is LayerNorm over ``(C, *)`` with per-channel
    affine; ``num_groups=C`` is InstanceNorm. The same statistics are used in
    training and eval mode.

    Args:
        num_groups (int): number of groups to separate the channels into
        num_channels (int): number of channels :math:`C` expected in the input;
            must be divisible by :attr:`num_groups`
        eps: a value added to the variance for numerical stability. Default: 1e-5
        affine: if ``True``, learnable per-channel :math:`\gamma` (init 1) and
            :math:`\beta` (init 0). Default: ``True``
        device, dtype: where and in what dtype to create the parameters
        bias: if ``False``, no :math:`\beta` is learnt (only relevant if
            :attr:`affine` is ``True``). Default: ``True``

    Shape:
        - Input: :math:`(N, C, *)` where :math:`C = \text{num\_channels}`
        - Output: :math:`(N, C, *)` (same shape as input)

    Example::

        >>> import torch, norms
        >>> m = norms.GroupNorm(3, 6)                 # 3 groups of 2 channels
        >>> y = m(torch.randn(4, 6, 5, 5) * 2 + 3)
        >>> groups = y.detach().view(4, 3, 2 * 5 * 5)  # (N, G, C//G * H * W)
        >>> bool(groups.mean(-1).abs().max() < 1e-5)
        True
        >>> norms.GroupNorm(4, 6)
        Traceback (most recent call last):
          ...
        ValueError: num_channels (6) must be divisible by num_groups (4)
    """

    __constants__ = ["num_groups", "num_channels", "eps", "affine"]
    num_groups: int
    num_channels: int
    eps: float
    affine: bool

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(
                f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if self.affine:
            self.weight = Parameter(torch.empty(num_channels, **factory_kwargs))
            if bias:
                self.bias = Parameter(torch.empty(num_channels, **factory_kwargs))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """gamma to 1, beta to 0."""
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None
        )
