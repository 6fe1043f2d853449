"""BatchNorm over padded sequences, with statistics from the real tokens only."""

from __future__ import annotations

import torch
from torch import Tensor

from .batchnorm import BatchNorm1d

__all__ = ["MaskedBatchNorm1d"]


class MaskedBatchNorm1d(BatchNorm1d):
    r"""BatchNorm over the last dim of padded sequences ``(B, T, D)``, statistics from real tokens
    only.

    ``forward(x, mask)`` with ``mask`` ``(B, T)`` true at real tokens: the real tokens
    ``x[mask]`` (shape ``(n, D)``) go through :class:`norms.BatchNorm1d` (statistics per
    feature over the ``n`` tokens, running statistics updated from them alone); padded
    positions of the output are 0. Without a mask every token counts. Same arguments,
    parameters and buffers as :class:`norms.BatchNorm1d` (``num_features = D``).

    Shape:
        input ``(B, T, D)``, mask ``(B, T)``; output ``(B, T, D)``.

    Example::

        >>> import torch, norms
        >>> bn = norms.MaskedBatchNorm1d(4)
        >>> x = torch.randn(2, 5, 4)
        >>> mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])  # 7 real tokens
        >>> y = bn(x, mask)
        >>> torch.allclose(y[mask], norms.BatchNorm1d(4)(x[mask])), y[~mask].abs().max().item()
        (True, 0.0)
        >>> torch.allclose(bn.running_mean, 0.1 * x[mask].mean(0))  # from the real tokens only
        True
    """

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:  # type: ignore[override]
        if x.dim() != 3 or x.shape[-1] != self.num_features:
            raise ValueError(
                f"expected (B, T, {self.num_features}) with features last, got {tuple(x.shape)}"
            )
        if mask is None:
            return super().forward(x.reshape(-1, x.shape[-1])).view_as(x)
        if mask.shape != x.shape[:2] or mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor of shape {tuple(x.shape[:2])}, got "
                f"{mask.dtype} {tuple(mask.shape)}"
            )
        out = x.new_zeros(x.shape)
        out[mask] = super().forward(x[mask])  # (n_real_tokens, D)
        return out
