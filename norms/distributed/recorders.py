"""Record what a process sends through ``torch.distributed``."""

from __future__ import annotations

import contextlib

import torch

__all__ = ["record_collectives"]


@contextlib.contextmanager
def record_collectives():
    """Record every ``all_gather``, ``all_reduce`` and ``all_gather_object`` call made in the block.

    Yields a list that fills with ``(name, numbers sent by this process)``
    tuples. The functions are patched on :mod:`torch.distributed` for the
    duration of the block, and restored after it.
    """
    import torch.distributed as dist

    calls: list[tuple[str, int]] = []
    names = ("all_gather", "all_reduce", "all_gather_object")
    originals = {name: getattr(dist, name) for name in names}

    def wrap(name):
        def recorded(*args, **kwargs):
            sent = args[1] if name == "all_gather" else args[0]
            calls.append((name, sent.numel() if isinstance(sent, torch.Tensor) else 0))
            return originals[name](*args, **kwargs)

        return recorded

    for name in names:
        setattr(dist, name, wrap(name))
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)
