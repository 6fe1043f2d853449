r"""Fixes for the pitfalls of normalization in practice (``book/pitfalls.ipynb``).

* :func:`param_groups`: optimizer parameter groups that keep weight decay off the
  normalization parameters (γ, β) and the biases.
* :class:`FrozenBatchNorm` and :func:`freeze_batchnorm`: BatchNorm with fixed statistics
  and affine parameters that ``model.train()`` cannot switch back on (as
  ``torchvision.ops.FrozenBatchNorm2d``).
* :class:`MaskedBatchNorm1d`: BatchNorm over the features of padded sequences
  ``(B, T, D)``, with statistics from the real tokens only.

For recalibrating running statistics see :func:`norms.training.recalibrate_batchnorm`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .batchnorm import BatchNorm1d, _BatchNorm

__all__ = ["param_groups", "FrozenBatchNorm", "freeze_batchnorm", "MaskedBatchNorm1d"]


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two parameter groups for an optimizer: weight decay on every weight matrix or kernel
    (``ndim >= 2``), none on vectors (``ndim <= 1``: biases and the γ and β of normalization
    layers).

    Decay on γ shrinks the scale the normalization sets; decay on β and on biases pulls
    offsets to 0. Neither is what weight decay is for, so a common recipe excludes them
    (e.g. :cite:t:`goyal2017accurate` use no decay on γ, β and biases in some settings;
    most transformer codebases do it always). Frozen parameters (``requires_grad=False``)
    are left out.

    Example:
        >>> groups = param_groups(nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)), 1e-2)
        >>> [len(g["params"]) for g in groups], [g["weight_decay"] for g in groups]
        ([1, 3], [0.01, 0.0])
    """
    decay, no_decay = [], []
    for p in model.parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class FrozenBatchNorm(nn.Module):
    r"""BatchNorm with frozen statistics and affine parameters, for any input ``(N, C, *)``.

    .. math::
        y = \frac{x - \text{running\_mean}}{\sqrt{\text{running\_var} + \epsilon}} \cdot \gamma + \beta

    always, in ``train()`` and ``eval()`` mode alike; γ, β and the statistics are buffers,
    so no optimizer sees them and nothing updates them.

    Args:
        num_features: C. eps: as in BatchNorm.

    Shape:
        input ``(N, C)`` or ``(N, C, *)``; output the same shape.
    """

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.num_features, self.eps = num_features, eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    @classmethod
    def from_batchnorm(cls, bn: _BatchNorm) -> FrozenBatchNorm:
        """A frozen copy of ``bn``'s current statistics and γ, β (1 and 0 if it has none)."""
        if bn.running_mean is None:
            raise ValueError("cannot freeze a BatchNorm with track_running_stats=False: it has no statistics")
        frozen = cls(bn.num_features, bn.eps)
        with torch.no_grad():
            frozen.running_mean.copy_(bn.running_mean)
            frozen.running_var.copy_(bn.running_var)
            if bn.weight is not None:
                frozen.weight.copy_(bn.weight)
            if getattr(bn, "bias", None) is not None:
                frozen.bias.copy_(bn.bias)
        return frozen

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(f"expected input (N, {self.num_features}, *), got {tuple(x.shape)}")
        shape = (1, -1) + (1,) * (x.dim() - 2)  # broadcast over N and the positions
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * scale.view(shape) + shift.view(shape)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


def freeze_batchnorm(model: nn.Module) -> nn.Module:
    """Replace every BatchNorm in ``model`` (in place) by a :class:`FrozenBatchNorm` with its
    statistics and γ, β. Returns ``model``."""
    for name, child in model.named_children():
        if isinstance(child, _BatchNorm):
            setattr(model, name, FrozenBatchNorm.from_batchnorm(child))
        else:
            freeze_batchnorm(child)
    return model


class MaskedBatchNorm1d(BatchNorm1d):
    r"""BatchNorm over the last dim of padded sequences ``(B, T, D)``, statistics from real tokens only.

    ``forward(x, mask)`` with ``mask`` ``(B, T)`` true at real tokens: the real tokens
    ``x[mask]`` (shape ``(n, D)``) go through :class:`norms.BatchNorm1d` (statistics per
    feature over the ``n`` tokens, running statistics updated from them alone); padded
    positions of the output are 0. Without a mask every token counts. Same arguments,
    parameters and buffers as :class:`norms.BatchNorm1d` (``num_features = D``).

    Shape:
        input ``(B, T, D)``, mask ``(B, T)``; output ``(B, T, D)``.
    """

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:  # type: ignore[override]
        if x.dim() != 3 or x.shape[-1] != self.num_features:
            raise ValueError(f"expected (B, T, {self.num_features}) with features last, got {tuple(x.shape)}")
        if mask is None:
            return super().forward(x.reshape(-1, x.shape[-1])).view_as(x)
        if mask.shape != x.shape[:2] or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor of shape {tuple(x.shape[:2])}, got "
                             f"{mask.dtype} {tuple(mask.shape)}")
        out = x.new_zeros(x.shape)
        out[mask] = super().forward(x[mask])  # (n_real_tokens, D)
        return out
