"""Shared base of BatchNorm and InstanceNorm: parameters, running-statistics buffers.

Mirrors ``torch.nn.modules.batchnorm._NormBase`` so that parameter and buffer
names, shapes, dtypes, initial values, ``state_dict`` keys and versions are
identical and state dicts load both ways.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor
from torch.nn import Module, Parameter, init

from ..axes import Norm, rank_error_message


class NormBase(Module):
    """Common base of :class:`BatchNormBase` and :class:`InstanceNormBase`.

    Holds ``weight``/``bias`` (``(C,)``, when ``affine``) and the buffers
    ``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked``
    (a long scalar), which are registered as ``None`` when
    ``track_running_stats=False``.
    """

    # version 2 added num_batches_tracked (same as torch, so state dicts match)
    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]
    num_features: int
    eps: float
    momentum: float | None
    affine: bool
    track_running_stats: bool

    #: The layer's entry of :data:`norms.axes.NORMS`: the input ranks ``forward`` accepts and
    #: their layout, for the error message. Set by subclasses.
    _norm: ClassVar[Norm]

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
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(torch.empty(num_features, **factory_kwargs))
            if bias:
                self.bias = Parameter(torch.empty(num_features, **factory_kwargs))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory_kwargs))
            self.register_buffer("running_var", torch.ones(num_features, **factory_kwargs))
            self.running_mean: Tensor | None
            self.running_var: Tensor | None
            # a counter, not a statistic: always long, whatever dtype was asked for
            self.register_buffer(
                "num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device)
            )
            self.num_batches_tracked: Tensor | None
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean to 0, running variance to 1, batch counter to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()  # type: ignore[union-attr]
            self.running_var.fill_(1)  # type: ignore[union-attr]
            self.num_batches_tracked.zero_()  # type: ignore[union-attr]

    def reset_parameters(self) -> None:
        """Reset the running statistics, and gamma to 1 and beta to 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        ranks = self._norm.ranks
        if input.dim() not in ranks:
            # torch's message ("expected 4D input (got 3D input)"), then the shapes
            raise ValueError(rank_error_message(ranks, input.dim(), input.shape, self._norm.layout))

    def extra_repr(self) -> str:
        return (
            "{num_features}, eps={eps}, momentum={momentum}, affine={affine}, "
            "bias={use_bias}, track_running_stats={track_running_stats}".format(
                **self.__dict__, use_bias=self.bias is not None
            )
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
        if (version is None or version < 2) and self.track_running_stats:
            # State dicts saved before num_batches_tracked existed: start it at 0.
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (
                    self.num_batches_tracked
                    if self.num_batches_tracked is not None
                    and self.num_batches_tracked.device != torch.device("meta")
                    else torch.tensor(0, dtype=torch.long)
                )
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
