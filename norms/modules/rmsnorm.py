"""Root Mean Square Layer Normalization module, from scratch."""

from __future__ import annotations

import numbers

import torch
from torch import Size, Tensor
from torch.nn import Module, Parameter, init

from .. import functional as F

__all__ = ["RMSNorm"]

_shape_t = int | list[int] | Size


class RMSNorm(Module):
    r"""Root Mean Square Layer Normalization over the last ``D`` dims of the input.

    From the paper `Root Mean Square Layer Normalization
    <https://arxiv.org/abs/1910.07467>`__ (Zhang & Sennrich, 2019).

    .. math::

        y_i = \frac{x_i}{\mathrm{RMS}(x)} * \gamma_i, \quad
        \text{where} \quad \mathrm{RMS}(x) = \sqrt{\epsilon + \frac{1}{n} \sum_{i=1}^{n} x_i^2}

    LayerNorm without the centring: no mean is subtracted and there is no
    :math:`\beta`. The RMS is taken over the last ``D = len(normalized_shape)``
    dims.

    Args:
        normalized_shape (int or list or torch.Size): the trailing shape of the
            expected input; an int means the last dim only.
        eps (float, optional): a value added to the mean square for numerical
            stability. ``None`` (default) means ``torch.finfo(dtype).eps`` of the
            computation dtype: float32 for float16/bfloat16/float32 input,
            float64 for float64 input.
        elementwise_affine: if ``True``, a learnable per-element :math:`\gamma`
            (init 1). Default: ``True``
        device, dtype: where and in what dtype to create the parameter

    Shape:
        - Input: :math:`(N, *)`, ending in ``normalized_shape``
        - Output: :math:`(N, *)` (same shape as input)

    Example::

        >>> import torch, norms
        >>> rms = norms.RMSNorm([2, 3])
        >>> y = rms(torch.randn(4, 2, 3))
        >>> bool((y.pow(2).mean((-2, -1)) - 1).abs().max() < 1e-4)
        True
        >>> norms.RMSNorm(8)(torch.full((2, 8), 300.0, dtype=torch.float16))[0, :3]   # no overflow
        tensor([1., 1., 1.], dtype=torch.float16, grad_fn=<SliceBackward0>)
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]
    normalized_shape: tuple[int, ...]
    eps: float | None
    elementwise_affine: bool

    def __init__(
        self,
        normalized_shape: _shape_t,
        eps: float | None = None,
        elementwise_affine: bool = True,
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
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """gamma to 1."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(
            **self.__dict__
        )
