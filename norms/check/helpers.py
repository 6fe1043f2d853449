"""Small helpers on tensors, names and exceptions."""

from __future__ import annotations

import ast
import os
import traceback

import torch
from torch import nn

_HERE = os.path.dirname(os.path.abspath(__file__))


def _fmt_exc(exc: BaseException) -> str:
    """'TypeError: msg (line 12 in forward: `var = ...`)' — points at the reader's code."""
    msg = f"{type(exc).__name__}: {exc}".strip()
    if len(msg) > 300:
        msg = msg[:300] + "…"
    frames = traceback.extract_tb(exc.__traceback__)
    user = [
        f
        for f in frames
        if os.path.dirname(os.path.abspath(f.filename)) != _HERE
        and "torch" not in f.filename.replace("\\", "/").split("/")
    ]
    if user:
        f = user[-1]
        src = f" `{f.line.strip()}`" if f.line else ""
        msg += f" (line {f.lineno} in {f.name}{src})"
    return msg


def _shape(t):
    return tuple(t) if t is not None else None


def _sq(shape):
    return tuple(s for s in shape if s != 1)


def _close(a, b, rtol, atol):
    if a.shape != b.shape:
        return False
    return bool(
        torch.allclose(
            a.detach().double(), b.detach().double(), rtol=rtol, atol=atol, equal_nan=True
        )
    )


def _maxerr(a, b):
    d = (a.detach().double() - b.detach().double()).abs()
    d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
    return float(d.max()) if d.numel() else 0.0


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _leaf(name):
    return name.rsplit(".", 1)[-1].lower()


def _resolve(obj, dotted):
    """``a.b`` -> obj.a.b; ``stats['var']`` -> obj.stats['var'] (a tensor kept in a dict)."""
    key = None
    if dotted.endswith("]") and "[" in dotted:
        dotted, key = dotted[:-1].split("[", 1)
        key = ast.literal_eval(key)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    if key is not None:
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError):
            raise AttributeError(f"{dotted}[{key!r}]") from None
    return obj


def _plain_tensor_attrs(m):
    try:
        items = vars(m).items()
    except TypeError:
        return {}
    return {
        k: v for k, v in items if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter)
    }


def _dict_tensor_attrs(m):
    """Tensors kept in a plain dict attribute, named ``attr['key']`` (e.g. self.stats['var'])."""
    try:
        items = vars(m).items()
    except TypeError:
        return {}
    return {
        f"{k}[{kk!r}]": v
        for k, d in items
        if isinstance(d, dict) and not k.startswith("_")
        for kk, v in d.items()
        if isinstance(v, torch.Tensor) and isinstance(kk, (str, int))
    }
