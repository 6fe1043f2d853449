"""norms: normalization layers from scratch, drop-in compatible with ``torch.nn``.

``import norms`` loads torch and the layers, nothing else:

* the layers (:mod:`norms.modules`): :class:`BatchNorm1d`/``2d``/``3d``,
  :class:`LayerNorm`, :class:`RMSNorm`, :class:`GroupNorm`,
  :class:`InstanceNorm1d`/``2d``/``3d``, :class:`SyncBatchNorm`, the transformer
  layers :class:`TransformerEncoderLayer` and :class:`TransformerDecoderLayer` (with
  their :class:`MLP` block), :class:`FrozenBatchNorm` and :class:`MaskedBatchNorm1d`;
  for small batches :class:`GhostBatchNorm2d`, :class:`BatchRenorm2d`,
  :class:`FilterResponseNorm2d`; on the weights :class:`StdConv2d`,
  :class:`ScaledStdConv2d`, :func:`weight_norm`, :func:`spectral_norm` and
  :func:`adaptive_clip_grad_`; and :class:`DynamicTanh` with :func:`convert_ln_to_dyt`
  (no norm at all).
  They have torch.nn's constructor signatures, parameter and buffer names and
  ``state_dict`` layout;
* the maths they compute through: :mod:`norms.functional` (forward passes from
  tensor primitives), :mod:`norms.autograd` (the hand-derived backward passes) and
  :mod:`norms.axes` (which axes each layer reduces over, and the list of the norms).

Everything else loads when first used (``norms.quiz.show(...)`` works after a plain
``import norms``): :mod:`norms.fast` (compiled layers, C++ kernels, benchmark),
:mod:`norms.distributed` (several processes), :mod:`norms.lab` (data, models,
training runs), :mod:`norms.plots` (figures), :mod:`norms.explore` (explorers),
:mod:`norms.quiz`, :mod:`norms.check` (a grader for your own layer) and
:mod:`norms.glue`.
"""

from . import autograd, axes, functional, i18n, modules
from .i18n import get_language, set_language
from .lazy import lazy_submodules
from .modules import (
    MLP,
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    BatchRenorm2d,
    DynamicTanh,
    FilterResponseNorm2d,
    FrozenBatchNorm,
    GhostBatchNorm2d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    MaskedBatchNorm1d,
    RMSNorm,
    ScaledStdConv2d,
    StdConv2d,
    SyncBatchNorm,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    adaptive_clip_grad_,
    convert_ln_to_dyt,
    spectral_norm,
    weight_norm,
)

#: The subpackages that load on first use: ``norms.quiz`` imports ``norms.quiz``.
_LAZY = ("check", "distributed", "explore", "fast", "glue", "lab", "plots", "quiz")

__all__ = [
    "autograd",
    "axes",
    "functional",
    "i18n",
    "modules",
    "get_language",
    "set_language",
    *_LAZY,
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "DynamicTanh",
    "FrozenBatchNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm",
    "MLP",
    "MaskedBatchNorm1d",
    "RMSNorm",
    "SyncBatchNorm",
    "TransformerDecoderLayer",
    "TransformerEncoderLayer",
    "convert_ln_to_dyt",
    # small batches, normalizing the weights
    "BatchRenorm2d",
    "FilterResponseNorm2d",
    "GhostBatchNorm2d",
    "ScaledStdConv2d",
    "StdConv2d",
    "adaptive_clip_grad_",
    "spectral_norm",
    "weight_norm",
]


__getattr__ = lazy_submodules(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
