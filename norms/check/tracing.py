"""Which dims did the reader's code reduce?  Recorded while the forward runs again.

When a forward pass crashes, the exception alone ("The size of tensor a (3) must
match the size of tensor b (5) at non-singleton dimension 1") rarely says why.  The
usual cause is statistics of the wrong shape: a mean over the wrong dims, or over the
right dims without ``keepdim=True``.  :func:`reductions` runs the forward once more
under a :class:`torch.overrides.TorchFunctionMode` that records every mean, var, std,
sum, ... taken over a tensor of the input's shape.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from norms.i18n import tr

_REDUCTIONS = {
    "mean",
    "var",
    "std",
    "sum",
    "var_mean",
    "std_mean",
    "amax",
    "amin",
    "nansum",
    "nanmean",
}


class _Recorder(TorchFunctionMode):
    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)
        self.seen: list = []  # (op name, dims reduced, keepdim, output shape)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        entry = None
        if (
            name in _REDUCTIONS
            and args
            and isinstance(args[0], torch.Tensor)
            and tuple(args[0].shape) == self.shape
        ):
            nd = len(self.shape)
            dim = kwargs.get(
                "dim",
                args[1] if len(args) > 1 and not isinstance(args[1], bool) else None,
            )
            if dim is None:
                dims = tuple(range(nd))
            else:  # as written; a dim out of range is kept as it is (it is the bug)
                dims = tuple(
                    d % nd if -nd <= d < nd else d
                    for d in ((dim,) if isinstance(dim, int) else dim)
                )
            entry = [name, dims, bool(kwargs.get("keepdim", False)), None]
            self.seen.append(entry)
        out = func(*args, **kwargs)
        if entry is not None:
            first = out[0] if isinstance(out, tuple) else out
            entry[3] = tuple(first.shape) if isinstance(first, torch.Tensor) else None
        return out


def reductions(fn, x):
    """Run ``fn(x)`` once more (exceptions swallowed) and return what was reduced over x's shape."""
    rec = _Recorder(x.shape)
    try:
        with rec, torch.no_grad():
            fn(x)
    except Exception:
        pass
    return rec.seen


class _Shapes(TorchFunctionMode):
    """Records the shape of every tensor with ``numel`` elements that torch functions get."""

    def __init__(self, numel):
        super().__init__()
        self.numel = numel
        self.seen: set = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for a in args[:1]:
            if isinstance(a, torch.Tensor) and a.numel() == self.numel:
                self.seen.add(tuple(a.shape))
        return func(*args, **(kwargs or {}))


def layout(fn, x):
    """ "channels_last" when ``fn`` (a layer seen through torch's channels-first layout) works on
    ``x`` with its channels moved to the last dim, as a channels-last layer wrapped in
    ``movedim(1, -1)`` does; "channels_first" when it does not; None when the two are one shape
    (a 2-D input) or ``fn`` fails."""
    shape = tuple(x.shape)
    last = (shape[0], *shape[2:], shape[1])
    if len(shape) < 3 or last == shape:
        return None
    rec = _Shapes(x.numel())
    try:
        with rec, torch.no_grad():
            fn(x)
    except Exception:
        return None
    return "channels_last" if last in rec.seen else "channels_first"


def explain_crash(seen, correct, shape, layer):
    """Words for a crash, from the recorded reductions; None when they do not explain it."""
    if correct is None or not seen:
        return None
    wrong = [s for s in seen if tuple(sorted(s[1])) != tuple(correct)]
    keep = tuple(1 if d in correct else n for d, n in enumerate(shape))
    if wrong:
        name, dims, keepdim, out = wrong[0]
        got = (
            tr("giving shape {shape}", shape=out) if out is not None else tr("which itself raised")
        )
        return tr(
            "Before it crashed, your forward took .{name}() over dims {dims} of the input of "
            "shape {shape} ({got}); {layer} reduces over dims {correct} (with keepdim=True the "
            "statistics have shape {keep} and broadcast against the input).",
            name=name,
            dims=dims,
            shape=tuple(shape),
            got=got,
            layer=layer,
            correct=tuple(correct),
            keep=keep,
        )
    no_keep = [s for s in seen if not s[2]]
    if no_keep:
        name, dims, keepdim, out = no_keep[0]
        return tr(
            "Your forward took .{name}() over the right dims {dims} of the input of shape "
            "{shape}, but without keepdim=True: the statistics have shape {out}, which does not "
            "broadcast against the input; with keepdim=True they have shape {keep}.",
            name=name,
            dims=dims,
            shape=tuple(shape),
            out=out,
            keep=keep,
        )
    return None
