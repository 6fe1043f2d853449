"""Ghost Batch Normalization: BatchNorm over virtual batches (Hoffer et al., 2017)."""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from .batchnorm import BatchNorm2d

__all__ = ["GhostBatchNorm2d"]


class GhostBatchNorm2d(BatchNorm2d):
    r"""BatchNorm2d whose training statistics come from virtual batches ("ghost batches").

    From `Train longer, generalize better: closing the generalization gap in large
    batch training of neural networks <https://arxiv.org/abs/1705.08741>`__
    (Hoffer, Hubara & Soudry, 2017).

    In training the batch is split along dim 0 into chunks of ``virtual_batch_size``
    samples (the last one may be smaller); chunk :math:`k` is normalized with its own
    statistics

    .. math::
        y = \frac{x - \mathrm{E}_k[x]}{\sqrt{\mathrm{Var}_k[x] + \epsilon}} \gamma + \beta,

    and the running statistics are updated once per chunk, in order: exactly what
    consecutive :class:`BatchNorm2d` calls on the chunks would do
    (``num_batches_tracked`` counts chunks). In eval mode it is :class:`BatchNorm2d`.
    A virtual batch as large as the batch gives :class:`BatchNorm2d`.

    Args:
        num_features: number of channels :math:`C`.
        virtual_batch_size: samples per chunk in training. Default: 32
        eps, momentum, affine, track_running_stats, device, dtype: as
            :class:`BatchNorm2d`.

    Shape:
        - Input: :math:`(N, C, H, W)`
        - Output: :math:`(N, C, H, W)`

    Example::

        >>> import torch, norms
        >>> m = norms.GhostBatchNorm2d(3, virtual_batch_size=4)
        >>> y = m(torch.randn(10, 3, 5, 5))        # chunks of 4, 4 and 2 samples
        >>> int(m.num_batches_tracked)
        3
        >>> bool(y[:4].mean((0, 2, 3)).abs().max() < 1e-5)
        True
    """

    def __init__(
        self,
        num_features: int,
        virtual_batch_size: int = 32,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        if isinstance(virtual_batch_size, bool) or not isinstance(
            virtual_batch_size, numbers.Integral
        ):
            raise TypeError(
                f"virtual_batch_size must be an int, got {type(virtual_batch_size).__name__}"
            )
        virtual_batch_size = int(virtual_batch_size)  # numpy's integers too, as a plain int
        if virtual_batch_size < 1:
            raise ValueError(
                f"virtual_batch_size must be at least 1 (samples per virtual batch), "
                f"got {virtual_batch_size}"
            )
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype
        )
        self.virtual_batch_size = virtual_batch_size

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if not self.training or input.shape[0] <= self.virtual_batch_size:
            return super().forward(input)
        chunks = input.split(self.virtual_batch_size)  # each (≤ virtual_batch_size, C, H, W)
        last = chunks[-1]
        if last.shape[0] * math.prod(last.shape[2:]) == 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got a last virtual "
                f"batch of size {tuple(last.shape)}: a batch of {input.shape[0]} samples split "
                f"into virtual batches of {self.virtual_batch_size} leaves one sample of 1 × 1 "
                "pixels; choose a batch size or virtual_batch_size that leaves at least 2"
            )
        return torch.cat([super(GhostBatchNorm2d, self).forward(c) for c in chunks])

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, virtual_batch_size={self.virtual_batch_size}, eps={self.eps}, "
            f"momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )
