"""Batch Normalization modules, from scratch: BatchNorm1d, BatchNorm2d, BatchNorm3d."""

from __future__ import annotations

from torch import Tensor

from .. import functional as F
from .. import stats
from ..axes import NORMS
from ._base import NormBase

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]

_ARGS_DOC = r"""
    Args:
        num_features: number of features or channels :math:`C` of the input
        eps: a value added to the variance for numerical stability. Default: 1e-5
        momentum: the value used for the running_mean and running_var
            computation. Can be set to ``None`` for a cumulative moving average
            (i.e. a simple average over all batches seen). Default: 0.1
        affine: if ``True``, this module has learnable affine parameters
            :math:`\gamma` (``weight``, init 1) and :math:`\beta` (``bias``, init 0).
            Default: ``True``
        track_running_stats: if ``True``, this module tracks the running mean
            and variance in buffers and normalizes with them in eval mode. If
            ``False``, the buffers are ``None`` and batch statistics are used in
            both training and eval modes. Default: ``True``
        device, dtype: where and in what dtype to create parameters and buffers
            (``num_batches_tracked`` is always ``torch.long``).
        bias: if ``False``, no additive bias :math:`\beta` is learnt (only
            relevant if :attr:`affine` is ``True``). Default: ``True``
"""


class BatchNormBase(NormBase):
    r"""Shared forward of BatchNorm1d/2d/3d (torch's ``_BatchNorm``).

    Train/eval behaviour is decided by ``self.training`` alone:

    * training: normalize with the batch statistics; if tracking, update the
      running statistics and ``num_batches_tracked``;
    * eval: normalize with the running statistics, or with batch statistics
      when ``track_running_stats=False`` (buffers are ``None``).
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features,
            eps,
            momentum,
            affine,
            track_running_stats,
            device=device,
            dtype=dtype,
            bias=bias,
        )

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)

        # momentum=None: cumulative average, factor 1/k at the k-th batch.
        batches = None
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            batches = self.num_batches_tracked
        exponential_average_factor = stats.running_average_factor(self.momentum, batches)

        # Batch statistics in training, and in eval when there are no buffers.
        if self.training:
            bn_training = True
        else:
            bn_training = (self.running_mean is None) and (self.running_var is None)

        # Only hand the buffers over when they are to be updated (training and
        # tracking) or read (eval).
        use_buffers = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if use_buffers else None,
            self.running_var if use_buffers else None,
            self.weight,
            self.bias,
            bn_training,
            exponential_average_factor,
            self.eps,
        )


class BatchNorm1d(BatchNormBase):
    __doc__ = (
        r"""Batch Normalization over a 2D ``(N, C)`` or 3D ``(N, C, L)`` input.

    From the paper `Batch Normalization: Accelerating Deep Network Training by
    Reducing Internal Covariate Shift <https://arxiv.org/abs/1502.03167>`__
    (Ioffe & Szegedy, 2015).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and variance are computed per channel over the batch (and length)
    dims, i.e. over dims ``(0,)`` or ``(0, 2)``; :math:`\gamma` and
    :math:`\beta` are vectors of size `C`. In training the variance is the
    biased estimator (``torch.var(input, correction=0)``), but the one folded
    into the running variance is unbiased (``correction=1``). The running
    estimates follow :math:`\hat{x}_\text{new} = (1 - \text{momentum})\,\hat{x}
    + \text{momentum}\,x_t` and are used for normalization in eval mode.
"""
        + _ARGS_DOC
        + r"""
    Shape:
        - Input: :math:`(N, C)` or :math:`(N, C, L)`
        - Output: same shape as the input

    Example::

        >>> import torch, norms
        >>> m = norms.BatchNorm1d(4)
        >>> x = torch.randn(16, 4) * 3 + 5
        >>> y = m(x)
        >>> bool(y.mean(0).abs().max() < 1e-5), bool((y.var(0, correction=0) - 1).abs().max() < 1e-3)
        (True, True)
        >>> int(m.num_batches_tracked), m.running_mean.shape
        (1, torch.Size([4]))
    """  # noqa: E501 - doctest; a line break would change the string
    )

    _norm = NORMS["BatchNorm1d"]


class BatchNorm2d(BatchNormBase):
    __doc__ = (
        r"""Batch Normalization over a 4D ``(N, C, H, W)`` input.

    From the paper `Batch Normalization: Accelerating Deep Network Training by
    Reducing Internal Covariate Shift <https://arxiv.org/abs/1502.03167>`__
    (Ioffe & Szegedy, 2015).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and variance are computed per channel over dims ``(0, 2, 3)``
    (batch and both spatial dims): this is "spatial" batch normalization.
    :math:`\gamma` and :math:`\beta` are vectors of size `C`. In training the
    variance is biased, the one folded into the running variance unbiased; the
    running estimates follow :math:`\hat{x}_\text{new} = (1 - \text{momentum})
    \,\hat{x} + \text{momentum}\,x_t` and are used in eval mode.
"""
        + _ARGS_DOC
        + r"""
    Shape:
        - Input: :math:`(N, C, H, W)`
        - Output: :math:`(N, C, H, W)` (same shape as input)

    Example::

        >>> import torch, norms
        >>> m = norms.BatchNorm2d(3, momentum=None)   # cumulative average
        >>> for _ in range(4):
        ...     _ = m(torch.randn(8, 3, 5, 5) + 2)
        >>> int(m.num_batches_tracked)
        4
        >>> m = m.eval()                              # now uses running stats
        >>> m(torch.randn(2, 3, 5, 5)).shape
        torch.Size([2, 3, 5, 5])
    """
    )

    _norm = NORMS["BatchNorm2d"]


class BatchNorm3d(BatchNormBase):
    __doc__ = (
        r"""Batch Normalization over a 5D ``(N, C, D, H, W)`` input.

    From the paper `Batch Normalization: Accelerating Deep Network Training by
    Reducing Internal Covariate Shift <https://arxiv.org/abs/1502.03167>`__
    (Ioffe & Szegedy, 2015).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and variance are computed per channel over dims ``(0, 2, 3, 4)``
    ("volumetric" batch normalization). Otherwise as :class:`BatchNorm2d`.
"""
        + _ARGS_DOC
        + r"""
    Shape:
        - Input: :math:`(N, C, D, H, W)`
        - Output: :math:`(N, C, D, H, W)` (same shape as input)

    Example::

        >>> import torch, norms
        >>> m = norms.BatchNorm3d(2, affine=False)
        >>> m(torch.randn(4, 2, 3, 3, 3)).shape
        torch.Size([4, 2, 3, 3, 3])
        >>> m
        BatchNorm3d(2, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=True)
    """
    )

    _norm = NORMS["BatchNorm3d"]
