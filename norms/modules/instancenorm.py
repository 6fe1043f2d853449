"""Instance Normalization modules, from scratch: InstanceNorm1d, InstanceNorm2d, InstanceNorm3d."""

from __future__ import annotations

import warnings

from torch import Tensor

from .. import functional as F
from .. import stats
from ..axes import NORMS
from ._base import NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]

_ARGS_DOC = r"""
    Args:
        num_features: number of features or channels :math:`C` of the input
        eps: a value added to the variance for numerical stability. Default: 1e-5
        momentum: the value used for the running_mean and running_var
            computation (``None`` means the running stats are never moved).
            Default: 0.1
        affine: if ``True``, this module has learnable per-channel affine
            parameters, initialized like batch normalization's. Default: ``False``
        track_running_stats: if ``True``, this module keeps running estimates of
            the mean and variance (averaged over the instances of each batch) and
            normalizes with them in eval mode; if ``False`` it always uses the
            instance statistics. Default: ``False``
        device, dtype: where and in what dtype to create parameters and buffers
        bias: if ``False``, no additive bias :math:`\beta` is learnt (only
            relevant if :attr:`affine` is ``True``). Default: ``True``
"""


class InstanceNormBase(NormBase):
    """Shared forward of InstanceNorm1d/2d/3d, batched and unbatched (torch's ``_InstanceNorm``)."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
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

    def _get_no_batch_dim(self) -> int:
        """The rank of an unbatched input ``(C, *S)``: the smaller of :data:`norms.axes.NORMS`'s."""
        return self._norm.ranks[0]

    def _handle_no_batch_input(self, input: Tensor) -> Tensor:
        return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)

    def _apply_instance_norm(self, input: Tensor) -> Tensor:
        return F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            stats.running_average_factor(self.momentum),  # momentum=None: no update
            self.eps,
        )

    def _load_from_state_dict(
        self,
        state_dict,
        prefix,
        local_metadata,
        strict,
        missing_keys,
        unexpected_keys,
        error_msgs,
    ) -> None:
        version = local_metadata.get("version", None)
        # Checkpoints from before torch 0.4 stored running stats even with
        # track_running_stats=False; reject them with torch's explanation.
        if version is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var") if prefix + n in state_dict]
            if keys:
                error_msgs.append(
                    "Unexpected running stats buffer(s) {names} for {klass} "
                    "with track_running_stats=False. If state_dict is a "
                    "checkpoint saved before 0.4.0, this may be expected "
                    "because {klass} does not track running stats by default "
                    "since 0.4.0. Please remove these keys from state_dict. If "
                    "the running stats are actually needed, instead set "
                    "track_running_stats=True in {klass} to enable them. See "
                    "the documentation of {klass} for details.".format(
                        names=" and ".join(f'"{k}"' for k in keys),
                        klass=self.__class__.__name__,
                    )
                )
                for key in keys:
                    state_dict.pop(key)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)

        feature_dim = input.dim() - self._get_no_batch_dim()
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features"
                    f" ({self.num_features}), but got: {input.size(feature_dim)} "
                    f"(input of shape {tuple(input.shape)})."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. "
                "You can silence this warning by not passing in num_features, "
                "which is not used because affine=False",
                stacklevel=2,
            )

        if input.dim() == self._get_no_batch_dim():
            return self._handle_no_batch_input(input)
        return self._apply_instance_norm(input)


class InstanceNorm1d(InstanceNormBase):
    __doc__ = (
        r"""Instance Normalization over a 2D ``(C, L)`` or 3D ``(N, C, L)`` input.

    From the paper `Instance Normalization: The Missing Ingredient for Fast
    Stylization <https://arxiv.org/abs/1607.08022>`__ (Ulyanov, Vedaldi &
    Lempitsky, 2016).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and (biased) variance are computed separately for every channel of
    every sample, over the length dim. By default there are no affine
    parameters and no running statistics, so training and eval behave the same.
"""
        + _ARGS_DOC
        + r"""
    Shape:
        - Input: :math:`(N, C, L)` or :math:`(C, L)`
        - Output: same shape as the input

    Example::

        >>> import torch, norms
        >>> m = norms.InstanceNorm1d(3)
        >>> y = m(torch.randn(2, 3, 10) * 4 - 1)
        >>> bool(y.mean(-1).abs().max() < 1e-5)
        True
        >>> m(torch.randn(3, 10)).shape       # unbatched
        torch.Size([3, 10])
    """
    )

    _norm = NORMS["InstanceNorm1d"]


class InstanceNorm2d(InstanceNormBase):
    __doc__ = (
        r"""Instance Normalization over a 3D ``(C, H, W)`` or 4D ``(N, C, H, W)`` input.

    From the paper `Instance Normalization: The Missing Ingredient for Fast
    Stylization <https://arxiv.org/abs/1607.08022>`__ (Ulyanov, Vedaldi &
    Lempitsky, 2016).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and (biased) variance are computed separately for every channel of
    every sample, over ``(H, W)``: every feature map is normalized on its own.
"""
        + _ARGS_DOC
        + r"""
    Shape:
        - Input: :math:`(N, C, H, W)` or :math:`(C, H, W)`
        - Output: same shape as the input

    Example::

        >>> import torch, norms
        >>> m = norms.InstanceNorm2d(3, affine=True, track_running_stats=True)
        >>> y = m(torch.randn(4, 3, 8, 8))
        >>> m.weight.shape, m.running_var.shape
        (torch.Size([3]), torch.Size([3]))
    """
    )

    _norm = NORMS["InstanceNorm2d"]


class InstanceNorm3d(InstanceNormBase):
    __doc__ = (
        r"""Instance Normalization over a 4D ``(C, D, H, W)`` or 5D ``(N, C, D, H, W)`` input.

    From the paper `Instance Normalization: The Missing Ingredient for Fast
    Stylization <https://arxiv.org/abs/1607.08022>`__ (Ulyanov, Vedaldi &
    Lempitsky, 2016).

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    The mean and (biased) variance are computed separately for every channel of
    every sample, over ``(D, H, W)``.
"""
        + _ARGS_DOC
        + r"""
    Shape:
        - Input: :math:`(N, C, D, H, W)` or :math:`(C, D, H, W)`
        - Output: same shape as the input

    Example::

        >>> import torch, norms
        >>> norms.InstanceNorm3d(2)(torch.randn(1, 2, 3, 4, 5)).shape
        torch.Size([1, 2, 3, 4, 5])
    """
    )

    _norm = NORMS["InstanceNorm3d"]
