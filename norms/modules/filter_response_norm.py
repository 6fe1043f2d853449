"""Filter Response Normalization with a Thresholded Linear Unit (Singh & Krishnan, 2020)."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import Module, Parameter, init

from .. import axes, stats
from .. import functional as F
from ..axes import rank_error_message

__all__ = ["FilterResponseNorm2d"]


class FilterResponseNorm2d(Module):
    r"""Filter Response Normalization followed by its Thresholded Linear Unit.

    From `Filter Response Normalization Layer: Eliminating Batch Dependence in the
    Training of Deep Neural Networks <https://arxiv.org/abs/1911.09737>`__
    (Singh & Krishnan, 2020).

    Per sample and channel, :math:`\nu^2` is the mean of :math:`x^2` over the
    :math:`H \times W` pixels (no mean is subtracted), and

    .. math::
        y = \max\!\left(\gamma \frac{x}{\sqrt{\nu^2 + |\epsilon|}} + \beta,\ \tau\right).

    No statistic crosses samples: training and eval mode compute the same thing, at
    any batch size. The TLU's learned threshold :math:`\tau` replaces the ReLU that
    follows the norm (a layer with :math:`\tau = 0` is FRN then ReLU).

    Args:
        num_features: number of channels :math:`C`.
        eps: :math:`\epsilon`, added to :math:`\nu^2`. Default: 1e-6
        learnable_eps: make ``eps`` a learned parameter of shape ``(1,)`` (the paper
            does so for 1 × 1 feature maps, where :math:`\nu^2 = x^2`). Default: ``False``
        device, dtype: where and in what dtype to create the parameters.

    Parameters ``weight`` (γ, init 1), ``bias`` (β, init 0) and ``tau`` (τ, init 0),
    each of shape ``(C,)``; ``eps`` when ``learnable_eps``.

    Shape:
        - Input: :math:`(N, C, H, W)`
        - Output: :math:`(N, C, H, W)`

    Example::

        >>> import torch, norms
        >>> m = norms.FilterResponseNorm2d(3)
        >>> y = m(torch.randn(2, 3, 5, 5))
        >>> bool((y >= 0).all())           # τ = 0 at first: FRN then ReLU
        True
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-6,
        learnable_eps: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.num_features = num_features
        self.learnable_eps = learnable_eps
        self.weight = Parameter(torch.empty(num_features, **factory_kwargs))
        self.bias = Parameter(torch.empty(num_features, **factory_kwargs))
        self.tau = Parameter(torch.empty(num_features, **factory_kwargs))
        self._init_eps = eps
        if learnable_eps:
            self.eps = Parameter(torch.empty(1, **factory_kwargs))
        else:
            self.eps = eps
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """γ to 1, β and τ to 0, a learnable ε to its initial value."""
        init.ones_(self.weight)
        init.zeros_(self.bias)
        init.zeros_(self.tau)
        if self.learnable_eps:
            init.constant_(self.eps, self._init_eps)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 4:
            raise ValueError(rank_error_message((4,), input.dim(), input.shape, "(N, C, H, W)"))
        if input.shape[1] != self.num_features:
            raise RuntimeError(
                f"FilterResponseNorm2d({self.num_features}) expected input with "
                f"{self.num_features} channels (N, C, H, W), got input of shape "
                f"{tuple(input.shape)}"
            )
        F.check_floating(input, "filter_response_norm")
        params = {"weight": self.weight, "bias": self.bias, "tau": self.tau}
        F.check_param_dtypes(input, "filter_response_norm", **params)
        dtype = F.opmath(input.dtype)  # float16: 300² overflows, so float32 as the others
        x = input.to(dtype)  # (N, C, H, W)
        nu2 = stats.mean_square(x, axes.instance_norm_dims(4))  # (N, C, 1, 1)
        eps = self.eps.abs().to(dtype) if self.learnable_eps else abs(self.eps)
        x = x * torch.rsqrt(nu2 + eps)  # (N, C, H, W)
        view = (1, -1, 1, 1)  # per channel, broadcast over N, H, W
        weight, bias, tau = (p.to(dtype).view(view) for p in params.values())
        y = torch.addcmul(bias, x, weight)
        return torch.maximum(y, tau).to(input.dtype)

    def extra_repr(self) -> str:
        eps = self._init_eps if self.learnable_eps else self.eps
        return f"{self.num_features}, eps={eps}, learnable_eps={self.learnable_eps}"
