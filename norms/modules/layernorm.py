"""Layer Normalization module, from scratch."""

from __future__ import annotations

import numbers

import torch
from torch import Size, Tensor
from torch.nn import Module, Parameter, init

from .. import functional as F

__all__ = ["LayerNorm"]

_shape_t = int | list[int] | Size


class LayerNorm(Module):
    r"""Layer Normalization over the last ``D`` dims of the input.

    From the paper `Layer Normalization <https://arxiv.org/abs/1607.06450>`__
    (Ba, Kiros & Hinton, 2016).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and (biased) variance are computed over the last ``D =
    len(normalized_shape)`` dims, separately for every position of the leading
    dims: for ``normalized_shape=(3, 5)`` that is ``input.mean((-2, -1))``.
    Unlike Batch and Instance Normalization, :math:`\gamma` and :math:`\beta`
    are *per element*, of shape ``normalized_shape``. The same statistics are
    used in training and eval mode.

    Args:
        normalized_shape (int or list or torch.Size): the trailing shape
            :math:`[\ldots, \text{normalized\_shape}[0], \ldots,
            \text{normalized\_shape}[-1]]` of the expected input; an int means
            the last dim only.
        eps: a value added to the variance for numerical stability. Default: 1e-5
        elementwise_affine: if ``True``, learnable per-element :math:`\gamma`
            (init 1) and :math:`\beta` (init 0). Default: ``True``
        bias: if ``False``, no :math:`\beta` is learnt (only relevant if
            :attr:`elementwise_affine` is ``True``). Default: ``True``
        device, dtype: where and in what dtype to create the parameters

    Shape:
        - Input: :math:`(N, *)`, ending in ``normalized_shape``
        - Output: :math:`(N, *)` (same shape as input)

    Example::

        >>> import torch, norms
        >>> batch, tokens, dim = 4, 7, 16
        >>> ln = norms.LayerNorm(dim)
        >>> y = ln(torch.randn(batch, tokens, dim) * 3 + 1)
        >>> bool(y.mean(-1).abs().max() < 1e-5)
        True
        >>> norms.LayerNorm([5, 5])(torch.randn(2, 3, 5, 5)).shape   # over (H, W)
        torch.Size([2, 3, 5, 5])
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]
    normalized_shape: tuple[int, ...]
    eps: float
    elementwise_affine: bool

    def __init__(
        self,
        normalized_shape: _shape_t,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(torch.empty(self.normalized_shape, **factory_kwargs))
            if bias:
                self.bias = Parameter(torch.empty(self.normalized_shape, **factory_kwargs))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """gamma to 1, beta to 0."""
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, "
            "bias={use_bias}".format(**self.__dict__, use_bias=self.bias is not None)
        )
