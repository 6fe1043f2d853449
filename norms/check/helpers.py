"""Small helpers on tensors, names and exceptions."""

from __future__ import annotations

import ast
import os
import traceback

import torch
from torch import nn

from norms.i18n import LANGUAGES, Text, forms, join, tr

_HERE = os.path.dirname(os.path.abspath(__file__))

# The grader's own references to what it compares with, taken when norms.check is imported: a
# reader's code that replaces torch.allclose, torch.Tensor.double or builtins.bool while it runs
# (or returns a Tensor subclass whose __torch_function__ answers for them) cannot change a
# comparison. The sandbox also puts back whatever the reader's code replaced, after every call.
_allclose = torch.allclose
_equal = torch.equal
isnan = torch.isnan
isfinite = torch.isfinite
_where = torch.where
_full_like = torch.full_like
nonzero = torch.nonzero
_detach = torch.Tensor.detach
_to_double = torch.Tensor.double
_size = torch.Tensor.size
_numel = torch.Tensor.numel
_abs = torch.Tensor.abs
_amax = torch.amax
_no_torch_function = torch._C.DisableTorchFunction
_bool, _float, _tuple = bool, float, tuple


def fmt_exc(exc: BaseException) -> str:
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
        msg = msg + tr(
            " (line {line} in {function}{source})",
            line=f.lineno,
            function=f.name,
            source=src,
        )
    return msg


def current(text) -> Text:
    """``text`` (a message made earlier, e.g. when norms.check was imported) in the language of
    the moment."""
    return Text(forms(text))


def lowered(text) -> Text:
    """``text`` lowercased where the language has cases (English), as it reads inside a
    sentence."""
    return Text({k: v.lower() if k == "en" else v for k, v in forms(text).items()})


def sentence(parts) -> Text:
    """Clauses joined into one sentence: "a; b; c." in English (the first letter capitalized),
    "a；b；c。" in Chinese."""
    texts = [forms(p) for p in parts]
    out = {}
    for language in LANGUAGES:
        if language == "zh":
            out[language] = "；".join(t[language] for t in texts) + "。"
        else:
            joined = "; ".join(t[language] for t in texts)
            out[language] = joined[:1].upper() + joined[1:] + "."
    return Text(out)


#: between the places a problem was seen ("training, M(3), input (8, 3)"), which may contain
#: commas themselves: a comma in English, a semicolon in Chinese (punctuation, not a message)
PLACES_SEP = Text({"en": ", ", "zh": "；"})


def places(where: list) -> Text:
    """The first three places a problem was seen, and "..." when there are more."""
    return join(where[:3] + (["..."] if len(where) > 3 else []), PLACES_SEP)


def _shape(t):
    return tuple(t) if t is not None else None


def squeezed(shape):
    return tuple(s for s in shape if s != 1)


def f64(t):
    """A plain float64 copy of the tensor ``t``, detached (whatever subclass it is)."""
    with _no_torch_function():
        return _to_double(_detach(t))


def close(a, b, rtol, atol):
    """Same shape and allclose (NaN equal to NaN), computed in float64 with the grader's own
    functions."""
    with _no_torch_function():
        if _tuple(_size(a)) != _tuple(_size(b)):
            return False
        return _bool(_allclose(f64(a), f64(b), rtol=rtol, atol=atol, equal_nan=True))


def same(a, b):
    """torch.equal, with the grader's own reference to it."""
    with _no_torch_function():
        return _bool(_equal(_detach(a), _detach(b)))


def maxerr(a, b):
    with _no_torch_function():
        d = _abs(f64(a) - f64(b))
        d = _where(isnan(d), _full_like(d, _float("inf")), d)
        return _float(_amax(d)) if _numel(d) else 0.0


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def leaf(name):
    return name.rsplit(".", 1)[-1].lower()


def resolve(obj, dotted):
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


def plain_tensor_attrs(m):
    try:
        items = vars(m).items()
    except TypeError:
        return {}
    return {
        k: v for k, v in items if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter)
    }


def dict_tensor_attrs(m):
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
