"""Every layer of :mod:`norms`, one family a file, as ``torch/nn/modules/`` is laid out.

* :mod:`~norms.modules.batchnorm`, :mod:`~norms.modules.layernorm`,
  :mod:`~norms.modules.rmsnorm`, :mod:`~norms.modules.groupnorm`,
  :mod:`~norms.modules.instancenorm`: the five families, drop-in for ``torch.nn``
  (:mod:`~norms.modules._base` holds what BatchNorm and InstanceNorm share);
* :mod:`~norms.modules.syncbatchnorm`: BatchNorm with statistics over every process;
* :mod:`~norms.modules.frozen_batchnorm`, :mod:`~norms.modules.masked_batchnorm`:
  the BatchNorm variants of the pitfalls chapter;
* :mod:`~norms.modules.transformer`: ``torch.nn``'s transformer layers with
  :class:`~norms.LayerNorm`; :mod:`~norms.modules.llama`: the RMSNorm block of
  LLaMA-style models;
* :mod:`~norms.modules.dynamic_tanh`: Dynamic Tanh, the element-wise stand-in for
  LayerNorm, and :func:`~norms.modules.dynamic_tanh.convert_ln_to_dyt`.
* :mod:`~norms.modules.ghost_batchnorm`, :mod:`~norms.modules.batch_renorm`,
  :mod:`~norms.modules.filter_response_norm`: the small-batch fixes;
  :mod:`~norms.modules.std_conv`, :mod:`~norms.modules.weight_norms`: normalizing the
  weights (weight standardization, weight and spectral normalization, adaptive
  gradient clipping).

Every layer computes through :mod:`norms.functional`; none imports a teaching tool.
"""

from .batch_renorm import BatchRenorm2d
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .dynamic_tanh import DynamicTanh, convert_ln_to_dyt
from .filter_response_norm import FilterResponseNorm2d
from .frozen_batchnorm import FrozenBatchNorm
from .ghost_batchnorm import GhostBatchNorm2d
from .groupnorm import GroupNorm
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .layernorm import LayerNorm
from .llama import Attention, LlamaBlock, LlamaStack, SwiGLU
from .masked_batchnorm import MaskedBatchNorm1d
from .rmsnorm import RMSNorm
from .std_conv import ScaledStdConv2d, StdConv2d
from .syncbatchnorm import SyncBatchNorm
from .transformer import MLP, TransformerDecoderLayer, TransformerEncoderLayer
from .weight_norms import adaptive_clip_grad_, spectral_norm, weight_norm

__all__ = [
    "Attention",
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
    "LlamaBlock",
    "LlamaStack",
    "MLP",
    "MaskedBatchNorm1d",
    "RMSNorm",
    "SwiGLU",
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
