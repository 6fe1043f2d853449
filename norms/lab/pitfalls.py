r"""Fixes for the pitfalls of normalization in practice (``book/pitfalls.ipynb``).

* :func:`param_groups`: optimizer parameter groups that keep weight decay off the
  normalization parameters (γ, β) and the biases.
* :func:`freeze_batchnorm`: every BatchNorm of a model replaced by a
  :class:`norms.FrozenBatchNorm` (fixed statistics and affine parameters that
  ``model.train()`` cannot switch back on).

The layers the chapter builds, :class:`norms.FrozenBatchNorm` and
:class:`norms.MaskedBatchNorm1d`, are in :mod:`norms.modules`.

For recalibrating running statistics see :func:`norms.lab.training.recalibrate_batchnorm`.
"""

from __future__ import annotations

from torch import nn

from .. import compat
from ..modules.batchnorm import BatchNormBase
from ..modules.frozen_batchnorm import FrozenBatchNorm

__all__ = ["param_groups", "freeze_batchnorm"]


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
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def freeze_batchnorm(model: nn.Module) -> nn.Module:
    """Replace every BatchNorm in ``model`` (:mod:`norms`' or :mod:`torch.nn`'s), in place, by a
    :class:`FrozenBatchNorm` with its statistics and γ, β (same device and dtype). Returns
    ``model``."""
    for name, child in model.named_children():
        if isinstance(child, (BatchNormBase, *compat.torch_batchnorm_classes())):
            setattr(model, name, FrozenBatchNorm.from_batchnorm(child))
        else:
            freeze_batchnorm(child)
    return model
