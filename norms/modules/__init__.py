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

Every layer computes through :mod:`norms.functional`; none imports a teaching tool.
"""

from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .dynamic_tanh import DynamicTanh, convert_ln_to_dyt
from .frozen_batchnorm import FrozenBatchNorm
from .groupnorm import GroupNorm
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .layernorm import LayerNorm
from .llama import Attention, LlamaBlock, LlamaStack, SwiGLU
from .masked_batchnorm import MaskedBatchNorm1d
from .rmsnorm import RMSNorm
from .syncbatchnorm import SyncBatchNorm
from .transformer import MLP, TransformerDecoderLayer, TransformerEncoderLayer

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
]
