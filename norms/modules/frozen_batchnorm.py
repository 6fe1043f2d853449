"""BatchNorm with frozen statistics and affine parameters (as
``torchvision.ops.FrozenBatchNorm2d``)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .batchnorm import BatchNormBase

__all__ = ["FrozenBatchNorm"]


class FrozenBatchNorm(nn.Module):
    r"""BatchNorm with frozen statistics and affine parameters, for any input ``(N, C, *)``.

    .. math::
        y = \frac{x - \text{running\_mean}}{\sqrt{\text{running\_var} + \epsilon}}
            \cdot \gamma + \beta

    always, in ``train()`` and ``eval()`` mode alike; γ, β and the statistics are buffers,
    so no optimizer sees them and nothing updates them.

    Args:
        num_features: C. eps: as in BatchNorm. device, dtype: of the buffers.

    It loads the state dict of a BatchNorm (``num_batches_tracked`` is dropped, as torchvision's
    ``FrozenBatchNorm2d`` does).

    Shape:
        input ``(N, C)`` or ``(N, C, *)``; output the same shape.

    Example::

        >>> import torch, norms
        >>> bn = norms.BatchNorm2d(3)
        >>> _ = bn(torch.randn(8, 3, 4, 4) * 2 + 1)  # one step of running statistics
        >>> frozen = norms.FrozenBatchNorm.from_batchnorm(bn)
        >>> x = torch.randn(2, 3, 4, 4)
        >>> torch.allclose(frozen.train()(x), bn.eval()(x))  # train() changes nothing
        True
        >>> list(frozen.parameters()), sorted(dict(frozen.named_buffers()))
        ([], ['bias', 'running_mean', 'running_var', 'weight'])
    """

    def __init__(self, num_features: int, eps: float = 1e-5, device=None, dtype=None) -> None:
        super().__init__()
        self.num_features, self.eps = num_features, eps
        factory = {"device": device, "dtype": dtype}
        self.register_buffer("weight", torch.ones(num_features, **factory))
        self.register_buffer("bias", torch.zeros(num_features, **factory))
        self.register_buffer("running_mean", torch.zeros(num_features, **factory))
        self.register_buffer("running_var", torch.ones(num_features, **factory))

    @classmethod
    def from_batchnorm(cls, bn: BatchNormBase | nn.modules.batchnorm._BatchNorm) -> FrozenBatchNorm:
        """A frozen copy of ``bn``'s current statistics and γ, β (1 and 0 if it has none), on the
        device and in the dtype of its statistics. ``bn`` is a :mod:`norms` or ``torch.nn``
        BatchNorm."""
        if bn.running_mean is None:
            raise ValueError(
                "cannot freeze a BatchNorm with track_running_stats=False: it has no statistics"
            )
        stats = bn.running_mean
        frozen = cls(bn.num_features, bn.eps, device=stats.device, dtype=stats.dtype)
        with torch.no_grad():
            frozen.running_mean.copy_(bn.running_mean)
            frozen.running_var.copy_(bn.running_var)
            if bn.weight is not None:
                frozen.weight.copy_(bn.weight)
            if getattr(bn, "bias", None) is not None:
                frozen.bias.copy_(bn.bias)
        return frozen

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        # a BatchNorm's state dict counts its batches; nothing here does (torchvision's
        # FrozenBatchNorm2d drops the key too)
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(f"expected input (N, {self.num_features}, *), got {tuple(x.shape)}")
        shape = (1, -1) + (1,) * (x.dim() - 2)  # broadcast over N and the positions
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * scale.view(shape) + shift.view(shape)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"
