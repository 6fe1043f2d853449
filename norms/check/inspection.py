"""Finding the candidate's eps, scale and shift parameters and running statistics."""

from __future__ import annotations

import torch

from .helpers import dict_tensor_attrs, is_number, leaf, plain_tensor_attrs, squeezed

_SCALE_NAMES = ("weight", "gamma", "scale", "g", "alpha", "w", "gain")
_SHIFT_NAMES = ("bias", "beta", "shift", "b", "offset")
EPS_NAMES = ("eps", "epsilon", "variance_epsilon", "var_eps")
_STAT_WORDS = ("run", "moving", "mean", "var", "avg", "ema", "stat")


def find_eps(obj):
    for name in EPS_NAMES:
        v = getattr(obj, name, "missing")
        if v is None or is_number(v):
            return name, v
    return None, "missing"


def find_affine(module, spec):
    """Return (scale_name, shift_name, wrong_shaped, plain_tensors) found on a freshly built
    module."""
    target = squeezed(spec.param_shape())
    params = [
        (n, p) for n, p in module.named_parameters() if not any(w in leaf(n) for w in _STAT_WORDS)
    ]
    fitting = [(n, p) for n, p in params if squeezed(p.shape) == target]

    def pick(names, value):
        for n, _ in fitting:
            if leaf(n) in names:
                return n
        for n, p in fitting:
            if bool(torch.all(p.detach() == value)):
                return n
        return None

    scale = pick(_SCALE_NAMES, 1.0)
    shift = pick(_SHIFT_NAMES, 0.0)
    if shift == scale:
        shift = None
    wrong = [
        (n, tuple(p.shape))
        for n, p in params
        if squeezed(p.shape) != target and (leaf(n) in _SCALE_NAMES + _SHIFT_NAMES)
    ]
    plain = [
        n
        for n, t in plain_tensor_attrs(module).items()
        if (t.requires_grad or n.lower() in _SCALE_NAMES + _SHIFT_NAMES)
        and not any(w in n.lower() for w in _STAT_WORDS)
    ]
    return scale, shift, wrong, plain


def find_running(module, spec, exclude):
    """Locate running mean/var: returns {'mean': (name, where), 'var': (name, where)}."""
    C = spec.channels
    pool = []  # (name, tensor, where)
    for n, t in module.named_buffers():
        pool.append((n, t, "buffer"))
    for n, t in plain_tensor_attrs(module).items():
        pool.append((n, t, "attribute"))
    for n, t in dict_tensor_attrs(module).items():
        pool.append((n, t, "attribute"))
    for n, t in module.named_parameters():
        if n not in exclude:
            pool.append((n, t, "parameter"))
    pool = [(n, t, w) for n, t, w in pool if t.is_floating_point() and t.numel() == C]
    found = {}
    for key, words, value in (("mean", ("mean",), 0.0), ("var", ("var",), 1.0)):
        named = [
            e
            for e in pool
            if any(wd in leaf(e[0]) for wd in words)
            and any(s in leaf(e[0]) for s in ("run", "moving", "avg", "ema", "mean", "var"))
        ]
        named.sort(
            key=lambda e: (not any(s in leaf(e[0]) for s in ("run", "moving")), e[2] != "buffer")
        )
        if named:
            found[key] = named[0][:1] + named[0][2:]
            continue
        by_value = [e for e in pool if bool(torch.all(e[1].detach() == value))]
        if by_value:
            found[key] = by_value[0][:1] + by_value[0][2:]
        if key in found:
            pool = [e for e in pool if e[0] != found[key][0]]
    if "mean" in found and "var" in found and found["mean"][0] == found["var"][0]:
        del found["var"]
    return found
