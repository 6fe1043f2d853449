"""Float64 re-implementations of a layer and of its usual bugs (hypotheses), and the search
for the simplest hypothesis that reproduces a candidate's output."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch

from norms.i18n import tr

from .helpers import close
from .scenarios import KIND

EPS_GUESSES = (
    1e-12,
    1e-10,
    1e-8,
    1e-7,
    torch.finfo(torch.float32).eps,
    1e-6,
    1e-5,
    1e-4,
    1e-3,
    1e-2,
    1e-1,
)


class Spec:
    """Ground truth about how the reference normalizes a given input."""

    def __init__(self, name, args):
        self.name = name
        self.kind = KIND[name]
        self.args = args
        if self.kind == "group":
            self.groups, self.channels = args
        elif self.kind in ("layer", "rms"):
            ns = args[0]
            self.normalized_shape = (ns,) if isinstance(ns, int) else tuple(ns)
        else:
            self.channels = args[0]

    @property
    def center(self):
        return self.kind != "rms"

    def dims(self, shape):
        nd = len(shape)
        if self.kind == "batch":
            return tuple(d for d in range(nd) if d != 1)
        if self.kind == "instance":
            return tuple(range(2, nd))
        if self.kind in ("layer", "rms"):
            return tuple(range(nd - len(self.normalized_shape), nd))
        return None  # group: see _normalize

    def param_shape(self):
        if self.kind in ("layer", "rms"):
            return self.normalized_shape
        return (self.channels,)

    def param_view(self, shape):
        if self.kind in ("layer", "rms"):
            return self.normalized_shape
        return (1, shape[1]) + (1,) * (len(shape) - 2)

    def describe_dims(self, shape):
        if self.kind == "group":
            return tr(
                "each sample's groups of {n} adjacent channels (together with all their positions)",
                n=self.channels // self.groups,
            )
        return tr("dims {dims}", dims=self.dims(shape))


def _reduce(x, dims, center, divisor):
    """Mean and the squared deviations summed over dims, divided by n, n - 1 or 1 (divisor "n",
    "n-1", "1")."""
    n = 1
    for d in dims:
        n *= x.shape[d]
    if center:
        mean = x.mean(dims, keepdim=True)
        ss = ((x - mean) ** 2).sum(dims, keepdim=True)
    else:
        mean = torch.zeros((), dtype=x.dtype)
        ss = (x**2).sum(dims, keepdim=True)
    denom = {"n": n, "n-1": n - 1, "1": 1}[divisor]
    var = ss / denom if denom > 0 else torch.full_like(ss, float("nan"))
    return mean, var


def standardize(x, mean, var, eps, eps_mode):
    if eps_mode == "inside":
        return (x - mean) / torch.sqrt(var + eps)
    if eps_mode == "outside":
        return (x - mean) / (torch.sqrt(var) + eps)
    return (x - mean) / torch.sqrt(var)


def _normalize(x, spec, dims, center, divisor, eps, eps_mode):
    """dims: tuple of input dims, or 'group' / 'interleaved' for GroupNorm's reshapes."""
    if dims in ("group", "interleaved"):
        N, C = x.shape[:2]
        G = spec.groups
        if dims == "group":
            xr = x.reshape(N, G, -1)
            red = (2,)
        else:
            xr = x.reshape(N, C // G, G, -1)
            red = (1, 3)
        mean, var = _reduce(xr, red, center, divisor)
        return standardize(xr, mean, var, eps, eps_mode).reshape(x.shape)
    mean, var = _reduce(x, dims, center, divisor)
    return standardize(x, mean, var, eps, eps_mode)


@dataclass(frozen=True)
class Hypothesis:
    dims: Any = None  # None = correct
    divisor: str = "n"  # n (right) | n-1 (unbiased variance) | 1 (a sum: the L2 norm)
    eps_mode: str = "inside"
    center_flip: bool = False
    affine: str = "ok"  # ok | none | swapped
    eps: float | None = None  # None = the layer's eps

    def deviations(self):
        return (
            (self.dims is not None)
            + (self.divisor != "n")
            + (self.eps_mode != "inside")
            + self.center_flip
            + (self.affine != "ok")
            + (self.eps is not None)
        )


def _hypotheses(spec, shape, has_affine, has_shift, eps, include_exact=False):
    nd = len(shape)
    dim_variants = [None]
    correct = spec.dims(shape)
    if spec.kind == "group":
        dim_variants.append("interleaved")
    for r in range(1, nd + 1):
        for sub in itertools.combinations(range(nd), r):
            if sub != correct:
                dim_variants.append(sub)
    affines = ["ok"]
    if has_affine:
        affines.append("none")
        if has_shift:
            affines.append("swapped")
    hyps = []
    for dims, div, mode, flip, aff in itertools.product(
        dim_variants,
        ("n", "n-1", "1"),
        ("inside", "outside", "none"),
        (False, True),
        affines,
    ):
        h = Hypothesis(dims, div, mode, flip, aff)
        if (include_exact or h.deviations() > 0) and h.deviations() <= 3:
            hyps.append(h)
    for e in EPS_GUESSES:
        if not math.isclose(e, eps, rel_tol=0.05):
            hyps.append(Hypothesis(eps=e))
    hyps.sort(key=lambda h: h.deviations())
    return hyps


def hypothesis_output(h, x, spec, eps, w, b, cache):
    dims = h.dims
    if dims is None:
        dims = "group" if spec.kind == "group" else spec.dims(tuple(x.shape))
    center = spec.center != h.center_flip
    e = eps if h.eps is None else h.eps
    key = (dims, center, h.divisor, e, h.eps_mode)
    xhat = cache.get(key)
    if xhat is None:
        xhat = cache[key] = _normalize(x, spec, dims, center, h.divisor, e, h.eps_mode)
    if w is None or h.affine == "none":
        return xhat
    wv = w.reshape(spec.param_view(tuple(x.shape)))
    bv = b.reshape(spec.param_view(tuple(x.shape))) if b is not None else None
    if h.affine == "swapped":
        return xhat * bv + wv
    return xhat * wv + (bv if bv is not None else 0)


def diagnose(y, x, spec, eps, w, b, rtol, atol, include_exact=False):
    """Find the simplest hypothesis reproducing the candidate's output y; None if none does."""
    x64 = x.detach().double()
    y64 = y.detach().double()
    w64 = w.detach().double() if w is not None else None
    b64 = b.detach().double() if b is not None else None
    cache: dict = {}
    for h in _hypotheses(spec, tuple(x.shape), w is not None, b is not None, eps, include_exact):
        try:
            out = hypothesis_output(h, x64, spec, eps, w64, b64, cache)
        except RuntimeError:
            continue
        if not bool(torch.isfinite(out).all()):
            continue  # NaN matches NaN (equal_nan): a hypothesis that gives NaN explains nothing
        if close(y64, out, rtol, atol):
            return h
    return None
