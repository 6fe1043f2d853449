"""What counts as a pass over memory: one definition, read off the ATen ops a function runs.

A normalization layer moves about one byte per floating-point operation, so its speed
is decided by how often it reads or writes a full-size tensor. :func:`full_size_ops`
records the ATen ops (torch's kernels) that ``fn`` runs with a
``TorchDispatchMode`` and keeps the ones that touch a tensor with as many elements as
the first argument. A view (``view``, ``expand``, ``transpose``, ``_unsafe_view`` ...)
moves no data, so it is not a pass; an op on the statistics or the parameters (a few
numbers per row or channel) is not either.

The speed chapter, its quiz and the transformer chapter (LayerNorm against RMSNorm)
all count passes with this function.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["full_size_ops", "moves_data"]


def _tensors(values) -> list[torch.Tensor]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            out += _tensors(v)
    return out


def moves_data(func, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> bool:
    """False for an op that only makes a view: its outputs share their storage with an input and it
    writes nothing in place. (``func.is_view`` misses ``_unsafe_view``, hence the storage test.)"""
    if func.is_view:
        return False
    if func._schema.is_mutable or not outputs:
        return True
    storages = {t.untyped_storage().data_ptr() for t in inputs if t.layout == torch.strided}
    return not all(
        t.layout == torch.strided and t.untyped_storage().data_ptr() in storages for t in outputs
    )


class _Record(TorchDispatchMode):
    def __init__(self, numel: int) -> None:
        super().__init__()
        self.numel = numel
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = _tensors([*args, *kwargs.values()])
        outputs = _tensors([out])
        full = any(t.numel() == self.numel for t in inputs + outputs)
        if full and moves_data(func, inputs, outputs):
            self.ops.append(func.overloadpacket.__name__)
        return out


def full_size_ops(fn: Callable, *args, **kwargs) -> list[str]:
    """The ATen ops that ``fn(*args, **kwargs)`` runs on full-size tensors: one entry per pass.

    An op counts when one of its inputs or outputs has as many elements as the first
    argument and it moves data (see :func:`moves_data`): each such op reads or writes
    the whole tensor once. ``backward()`` calls inside ``fn`` are recorded too.

    >>> import torch, norms
    >>> full_size_ops(norms.functional.rms_norm, torch.randn(4, 8), [8])
    ['mul', 'mean', 'mul']
    """
    recorder = _Record(args[0].numel())
    with recorder:
        fn(*args, **kwargs)
    return recorder.ops
