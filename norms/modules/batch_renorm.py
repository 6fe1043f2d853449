"""Batch Renormalization (Ioffe, 2017): BatchNorm corrected towards its running statistics."""

from __future__ import annotations

import torch
from torch import Tensor

from .. import axes, stats
from .. import functional as F
from ..axes import NORMS
from ._base import NormBase

__all__ = ["BatchRenorm2d"]


class BatchRenorm2d(NormBase):
    r"""Batch Renormalization over a 4D ``(N, C, H, W)`` input.

    From `Batch Renormalization: Towards Reducing Minibatch Dependence in
    Batch-Normalized Models <https://arxiv.org/abs/1702.03275>`__ (Ioffe, 2017).

    In training, with the batch mean :math:`\mu_B` and biased variance
    :math:`\sigma_B^2` of each channel, :math:`\sigma_B = \sqrt{\sigma_B^2 + \epsilon}`
    and :math:`\sigma = \sqrt{\text{running\_var} + \epsilon}`:

    .. math::
        r = \operatorname{clip}_{[1/r_{\max},\, r_{\max}]}\!\left(\frac{\sigma_B}{\sigma}\right),
        \quad
        d = \operatorname{clip}_{[-d_{\max},\, d_{\max}]}\!\left(\frac{\mu_B - \text{running\_mean}}
        {\sigma}\right),
        \quad
        y = \left(\frac{x - \mu_B}{\sigma_B}\, r + d\right)\gamma + \beta,

    with :math:`r` and :math:`d` constants for autograd (the gradient flows through
    :math:`\mu_B` and :math:`\sigma_B` only). Then the running statistics are updated
    exactly as :class:`BatchNorm2d` updates them. In eval mode it is
    :class:`BatchNorm2d`'s eval mode. With :math:`r_{\max} = 1, d_{\max} = 0` it is
    :class:`BatchNorm2d`; the paper starts there and raises both on a schedule
    (:attr:`r_max` and :attr:`d_max` are plain attributes a training loop may change).

    Args:
        num_features: number of channels :math:`C`.
        eps, momentum, affine, device, dtype: as :class:`BatchNorm2d` (running
            statistics are always tracked).
        r_max: bound of the scale correction :math:`r \in [1/r_{\max}, r_{\max}]`
            (at least 1). Default: 3.0
        d_max: bound of the shift correction :math:`d \in [-d_{\max}, d_{\max}]`
            (at least 0). Default: 5.0

    Shape:
        - Input: :math:`(N, C, H, W)`
        - Output: :math:`(N, C, H, W)`

    Example::

        >>> import torch, norms
        >>> m = norms.BatchRenorm2d(3, r_max=1.0, d_max=0.0)   # BatchNorm2d
        >>> x = torch.randn(4, 3, 5, 5)
        >>> torch.allclose(m(x), torch.nn.BatchNorm2d(3)(x), atol=1e-6)
        True
    """

    _norm = NORMS["BatchNorm2d"]  # its inputs: (N, C, H, W)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        r_max: float = 3.0,
        d_max: float = 5.0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, True, device=device, dtype=dtype)
        self.r_max = r_max
        self.d_max = d_max

    def __setattr__(self, name, value) -> None:
        if name == "r_max" and not value >= 1.0:
            raise ValueError(f"r_max must be at least 1 (r lies in [1/r_max, r_max]), got {value}")
        if name == "d_max" and not value >= 0.0:
            raise ValueError(f"d_max must be at least 0 (d lies in [-d_max, d_max]), got {value}")
        super().__setattr__(name, value)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if not self.training:
            return F.batch_norm(
                input, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                self.eps,
            )  # fmt: skip
        F.check_floating(input, "batch_renorm")
        F.verify_batch_size(input.size())
        F.check_batch_norm_eps(self.eps, True, "batch_renorm")
        F.check_channels(
            input, "batch_renorm", running_mean=self.running_mean, weight=self.weight,
            bias=self.bias,
        )  # fmt: skip
        self.num_batches_tracked.add_(1)
        factor = stats.running_average_factor(self.momentum, self.num_batches_tracked)
        dtype = F.opmath(input.dtype)
        x = input.to(dtype)  # (N, C, H, W)
        mean, xc, var = stats.batch_moments(x)  # (1, C, 1, 1), (N, C, H, W), (1, C, 1, 1) biased
        std_b = torch.sqrt(var + self.eps)  # σ_B
        with torch.no_grad():
            running_mean = stats.channel_view(self.running_mean, 4, dtype)  # (1, C, 1, 1)
            std = torch.sqrt(stats.channel_view(self.running_var, 4, dtype) + self.eps)  # σ
            r = (std_b / std).clamp(1.0 / self.r_max, self.r_max)
            d = ((mean - running_mean) / std).clamp(-self.d_max, self.d_max)
            if input.numel() > 0:  # an empty batch has no statistics (as in BatchNorm2d)
                n = stats.count(input.shape, axes.batch_norm_dims(4))  # elements per channel
                stats.update_running_stats(
                    self.running_mean, self.running_var, mean.view(-1), var.view(-1), n, factor
                )
        y = xc * (r / std_b) + d  # (N, C, H, W)
        if self.affine:
            y = F.affine(
                y,
                stats.channel_view(self.weight, 4, dtype),
                stats.channel_view(self.bias, 4, dtype),
            )
        return y.to(input.dtype)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, r_max={self.r_max}, d_max={self.d_max}"
        )
