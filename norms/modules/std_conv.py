"""Weight Standardization (Qiao et al., 2019): a Conv2d whose weight is standardized per
output channel at every forward pass."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .. import stats

__all__ = ["ScaledStdConv2d", "StdConv2d", "standardize_weight"]


def standardize_weight(weight: Tensor, eps: float = 1e-6) -> Tensor:
    r"""The weight standardized per output unit (dim 0), over all its other dims.

    .. math::
        \hat W_{o} = \frac{W_{o} - \operatorname{mean}(W_{o})}
        {\sqrt{\operatorname{Var}(W_{o}) + \epsilon}}

    with the biased variance over the ``in_channels/groups × kH × kW`` entries of
    output channel :math:`o` (for a ``Linear`` weight, over its inputs).
    """
    if weight.dim() < 2:
        raise ValueError(
            f"standardize_weight expects a weight with an output dim and at least one input "
            f"dim (out, in, ...), got shape {tuple(weight.shape)}"
        )
    dims = tuple(range(1, weight.dim()))  # everything but the output unit
    var, mean = stats.var_mean(weight, dims)  # (out, 1, ...)
    return (weight - mean) * torch.rsqrt(var + eps)


class StdConv2d(nn.Conv2d):
    r"""A :class:`torch.nn.Conv2d` whose weight is standardized at every forward pass.

    From `Micro-Batch Training with Batch-Channel Normalization and Weight
    Standardization <https://arxiv.org/abs/1903.10520>`__ (Qiao et al., 2019).
    The convolution uses :func:`standardize_weight` of ``weight``: zero mean and unit
    (biased) variance over each output channel's ``in_channels/groups × kH × kW``
    entries, ε inside the square root. The stored parameter stays as it is, so the
    state_dict is :class:`~torch.nn.Conv2d`'s.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
        bias, padding_mode, device, dtype: as :class:`torch.nn.Conv2d`.
        eps: added to the variance. Default: 1e-6

    Shape:
        as :class:`torch.nn.Conv2d`.

    Example::

        >>> import torch, norms
        >>> conv = norms.StdConv2d(3, 8, 3, padding=1)
        >>> conv(torch.randn(2, 3, 6, 6)).shape
        torch.Size([2, 8, 6, 6])
        >>> list(conv.state_dict())
        ['weight', 'bias']
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
        eps: float = 1e-6,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device=device, dtype=dtype,
        )  # fmt: skip
        if not eps >= 0:
            raise ValueError(f"eps must be non-negative, got {eps}")
        self.eps = eps

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, standardize_weight(self.weight, self.eps), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, eps={self.eps}"


class ScaledStdConv2d(StdConv2d):
    r"""The scaled weight standardization of normalizer-free ResNets.

    From `Characterizing signal propagation to close the performance gap in unnormalized
    ResNets <https://arxiv.org/abs/2101.08692>`__ (Brock, De & Smith, 2021):

    .. math::
        \hat W_{o} = g_o\, \gamma\, \frac{W_{o} - \operatorname{mean}(W_{o})}
        {\sqrt{N\,(\operatorname{Var}(W_{o}) + \epsilon)}},

    with :math:`N` the fan-in (``in_channels/groups × kH × kW``), a learned gain
    :math:`g` of shape ``(out_channels, 1, 1, 1)`` (init 1, the parameter ``gain``) and
    :math:`\gamma` the constant that gives the activation's output unit variance
    (:math:`\sqrt{2/(1 - 1/\pi)}` for ReLU, the default: :math:`\gamma^2\,
    \mathrm{Var}[\mathrm{ReLU}(z)] = 1` for a unit Gaussian :math:`z`). The weights of each
    output channel sum to 0 and their squares to :math:`g_o^2 \gamma^2`, so the
    pre-activation's variance is :math:`g_o^2 \gamma^2` times the input's *variance*
    (for inputs independent of each other): with :math:`g = 1`, an input that is the ReLU
    of unit Gaussians (the previous layer's activations) gives unit-variance
    pre-activations, with no statistic of the activations; a unit-Gaussian input gives
    :math:`\gamma^2 \approx 2.93`.

    Args:
        as :class:`StdConv2d`, plus ``gamma`` (default: the ReLU constant).

    Example::

        >>> import torch, norms
        >>> _ = torch.manual_seed(0)
        >>> conv = norms.ScaledStdConv2d(64, 64, 3, padding=1, bias=False)
        >>> z = torch.randn(16, 64, 16, 16)
        >>> inner = (..., slice(1, -1), slice(1, -1))  # away from the zero padding
        >>> with torch.no_grad():
        ...     round(float(conv(torch.relu(z))[inner].var()), 1), round(float(conv(z)[inner].var()), 1)
        (1.0, 2.9)
    """  # noqa: E501 - doctest; a line break would change the example

    RELU_GAMMA = (2.0 / (1.0 - 1.0 / torch.pi)) ** 0.5

    def __init__(self, *args, gamma: float = RELU_GAMMA, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gamma = gamma
        self.gain = nn.Parameter(
            torch.ones(self.out_channels, 1, 1, 1, device=self.weight.device,
                       dtype=self.weight.dtype)
        )  # fmt: skip

    def reset_parameters(self) -> None:
        """The convolution's weight and bias as ``nn.Conv2d`` draws them, and the gain back to 1
        (as timm's ``ScaledStdConv2d``; ``nn.Conv2d.__init__`` calls this before the gain
        exists)."""
        super().reset_parameters()
        if hasattr(self, "gain"):
            nn.init.ones_(self.gain)

    def forward(self, input: Tensor) -> Tensor:
        fan_in = self.weight[0].numel()
        w = standardize_weight(self.weight, self.eps) * (self.gain * self.gamma / fan_in**0.5)
        return self._conv_forward(input, w, self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, gamma={self.gamma:.4g}"
