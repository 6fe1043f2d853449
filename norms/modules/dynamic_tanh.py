"""Dynamic Tanh (DyT), the element-wise stand-in for LayerNorm, and the conversion to it."""

from __future__ import annotations

import numbers

import torch
from torch import Size, Tensor
from torch.nn import LayerNorm as TorchLayerNorm
from torch.nn import Module, Parameter, init

from .. import functional as F
from .layernorm import LayerNorm

__all__ = ["DynamicTanh", "convert_ln_to_dyt"]

_shape_t = int | list[int] | Size


class DynamicTanh(Module):
    r"""Dynamic Tanh: a LayerNorm replacement that computes no statistic.

    From the paper `Transformers without Normalization <https://arxiv.org/abs/2503.10622>`__
    (Zhu, Chen, He, LeCun & Liu, CVPR 2025).

    .. math::

        y = \tanh(\alpha x) * \gamma + \beta

    :math:`\alpha` is one learnable scalar (it starts at ``alpha_init_value``);
    :math:`\gamma` and :math:`\beta` are per element, of shape ``normalized_shape``, as in
    :class:`norms.LayerNorm`, and as there ``elementwise_affine=False`` drops both and
    ``bias=False`` drops :math:`\beta` (then :math:`\alpha` is all it learns, or
    :math:`\alpha` and :math:`\gamma`). Nothing is averaged: every element is mapped on its
    own, so the layer is the same in training and eval mode and does not depend on the batch
    or on the other features of a token. The parameter names and shapes (``alpha`` of shape
    ``(1,)``, ``weight``, ``bias``) are those of the authors' module, so state_dicts load both
    ways.

    Args:
        normalized_shape (int or list or torch.Size): the shape of :math:`\gamma` and
            :math:`\beta`: the input's trailing dims (``channels_last=True``) or its
            channel count ``C`` (``channels_last=False``).
        channels_last: if ``True`` the input ends in ``normalized_shape``; if ``False`` the
            input is :math:`(N, C, H, W)` and :math:`\gamma, \beta` broadcast over ``C``.
            Default: ``True``
        alpha_init_value: the starting value of :math:`\alpha`. Default: 0.5
        elementwise_affine: if ``True``, learnable :math:`\gamma` (initialized to ones) and
            :math:`\beta` (zeros); if ``False``, neither. Default: ``True``
        bias: if ``False``, no :math:`\beta` (only with ``elementwise_affine=True``).
            Default: ``True``
        device, dtype: where and in what dtype to create the parameters

    Shape:
        - Input: :math:`(*, \text{normalized\_shape})`, or :math:`(N, C, H, W)` with
          ``channels_last=False``
        - Output: the same shape as the input

    Example::

        >>> import torch, norms
        >>> dyt = norms.DynamicTanh(16)
        >>> x = torch.randn(4, 7, 16)
        >>> torch.allclose(dyt(x), torch.tanh(0.5 * x))
        True
        >>> norms.DynamicTanh(3, channels_last=False)(torch.randn(2, 3, 5, 5)).shape
        torch.Size([2, 3, 5, 5])
    """

    __constants__ = ["normalized_shape", "channels_last", "alpha_init_value", "elementwise_affine"]
    normalized_shape: tuple[int, ...]
    channels_last: bool
    alpha_init_value: float
    elementwise_affine: bool

    def __init__(
        self,
        normalized_shape: _shape_t,
        channels_last: bool = True,
        alpha_init_value: float = 0.5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        if not channels_last and len(self.normalized_shape) != 1:
            raise ValueError(
                "DynamicTanh with channels_last=False takes one channel count C, "
                f"got normalized_shape={self.normalized_shape}"
            )
        self.channels_last = channels_last
        self.alpha_init_value = alpha_init_value
        self.elementwise_affine = elementwise_affine
        self.alpha = Parameter(torch.empty(1, **factory_kwargs))
        if elementwise_affine:
            self.weight = Parameter(torch.empty(self.normalized_shape, **factory_kwargs))
            shift = (
                Parameter(torch.empty(self.normalized_shape, **factory_kwargs)) if bias else None
            )
            self.register_parameter("bias", shift)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """alpha to ``alpha_init_value``, gamma to 1, beta to 0."""
        init.constant_(self.alpha, self.alpha_init_value)
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        if self.weight is None:  # no gamma to check the input's shape against: check it here
            self._check_input(input)
        return F.dynamic_tanh(input, self.alpha, self.weight, self.bias, self.channels_last)

    def _check_input(self, input: Tensor) -> None:
        """The shape check F.dynamic_tanh makes against gamma, for a layer without one."""
        ns = self.normalized_shape
        if self.channels_last and tuple(input.shape[input.dim() - len(ns) :]) != ns:
            raise RuntimeError(
                f"DynamicTanh: normalized_shape={ns} needs input of shape "
                f"(*, {', '.join(map(str, ns))}), but got input of shape {tuple(input.shape)}"
            )
        if not self.channels_last and (input.dim() != 4 or input.shape[1] != ns[0]):
            raise RuntimeError(
                f"DynamicTanh with channels_last=False: normalized_shape={ns} needs input of "
                f"shape (N, {ns[0]}, H, W), but got input of shape {tuple(input.shape)}"
            )

    def extra_repr(self) -> str:
        extra = "" if self.elementwise_affine else ", elementwise_affine=False"
        if self.elementwise_affine and self.bias is None:
            extra = ", bias=False"
        return (
            f"normalized_shape={self.normalized_shape}, "
            f"alpha_init_value={self.alpha_init_value}, channels_last={self.channels_last}{extra}"
        )


def convert_ln_to_dyt(module: Module, alpha_init_value: float = 0.5) -> Module:
    r"""Replace every ``torch.nn.LayerNorm`` and :class:`norms.LayerNorm` in ``module`` (at any
    depth, ``module`` itself included) by a :class:`DynamicTanh` of the same
    ``normalized_shape``, on the same device and in the same dtype; every other module and
    parameter is left as it is. Returns the converted module (a new object only when
    ``module`` itself is a LayerNorm; the children are replaced in place), as the authors'
    ``convert_ln_to_dyt`` does.

    The DynamicTanh learns what the LayerNorm learned, plus :math:`\alpha`: its
    :math:`\gamma`, :math:`\beta` start at 1 and 0 (the LayerNorm's trained values are not
    copied: they scaled a normalized input, not a squashed one). A LayerNorm without
    parameters (``elementwise_affine=False``) gives a DynamicTanh without :math:`\gamma` and
    :math:`\beta`, which learns :math:`\alpha` alone; a LayerNorm without :math:`\beta`
    (``bias=False``) gives one without :math:`\beta`. (The authors' function gives every
    DynamicTanh both.) A LayerNorm without parameters has no device or dtype of its own: its
    DynamicTanh takes those of the nearest module around it that has a parameter or buffer
    (torch's defaults when none has).

    Example::

        >>> import torch, norms
        >>> block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
        >>> norms.convert_ln_to_dyt(block)[1]
        DynamicTanh(normalized_shape=(8,), alpha_init_value=0.5, channels_last=True)
        >>> linear = torch.nn.Linear(8, 8, dtype=torch.float64)
        >>> plain = torch.nn.Sequential(linear, torch.nn.LayerNorm(8, elementwise_affine=False))
        >>> dyt = norms.convert_ln_to_dyt(plain)[1]
        >>> [name for name, _ in dyt.named_parameters()], dyt.alpha.dtype  # alpha alone, float64
        (['alpha'], torch.float64)
    """
    return _convert(module, alpha_init_value, _first_tensor(module))


def _first_tensor(module: Module) -> Tensor | None:
    """The first parameter or buffer of ``module`` (at any depth), or None."""
    for t in (*module.parameters(), *module.buffers()):
        return t
    return None


def _convert(module: Module, alpha_init_value: float, like: Tensor | None) -> Module:
    """:func:`convert_ln_to_dyt`; a LayerNorm without parameters takes the device and dtype of
    ``like``, the first tensor of the nearest module around it that has one."""
    if isinstance(module, (TorchLayerNorm, LayerNorm)):
        ref = module.weight if module.weight is not None else like
        kw = {} if ref is None else {"device": ref.device, "dtype": ref.dtype}
        return DynamicTanh(
            module.normalized_shape,
            alpha_init_value=alpha_init_value,
            elementwise_affine=module.weight is not None,
            bias=module.bias is not None,
            **kw,
        )
    first = _first_tensor(module)
    like = like if first is None else first
    for name, child in module.named_children():
        new = _convert(child, alpha_init_value, like)
        if new is not child:
            setattr(module, name, new)
    return module
