"""norms: normalization layers from scratch, drop-in compatible with ``torch.nn``.

The modules (:class:`BatchNorm1d`/``2d``/``3d``, :class:`LayerNorm`,
:class:`RMSNorm`, :class:`GroupNorm`, :class:`InstanceNorm1d`/``2d``/``3d``)
have torch.nn's constructor signatures, parameter and buffer names and
``state_dict`` layout, and compute through :mod:`norms.functional`, which is
written from tensor primitives. :mod:`norms.axes` is the one definition of
which axes each of them reduces over.

Also here: :mod:`norms.autograd` (hand-derived backward passes),
:mod:`norms.quiz` (quizzes whose answers norms computes), :mod:`norms.check`
(a grader for your own implementation) and :mod:`norms.glue`. The figures and
widgets (:mod:`norms.viz`, :mod:`norms.widgets`) need matplotlib and ipywidgets
and are imported explicitly: ``import norms.viz``.

The transformer layers :class:`TransformerEncoderLayer` and
:class:`TransformerDecoderLayer` (with their :class:`MLP` block) are drop-in for
``torch.nn``'s with :class:`LayerNorm` norms; :mod:`norms.llama` (the RMSNorm block of
LLaMA-style models) and :mod:`norms.transformer_train` (the transformer chapter's tiny
training runs) are imported explicitly, like :mod:`norms.transformer_plots`.

Importing ``norms`` is cheap: it imports torch and nothing else (no plotting).
"""

from . import autograd, axes, check, functional, glue, quiz
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .groupnorm import GroupNorm
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .layernorm import LayerNorm
from .rmsnorm import RMSNorm
from .transformer import MLP, TransformerDecoderLayer, TransformerEncoderLayer
from .syncbatchnorm import SyncBatchNorm
from . import distributed

__all__ = [
    "autograd",
    "axes",
    "check",
    "functional",
    "glue",
    "quiz",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "MLP",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "SyncBatchNorm",
    "distributed",
]
