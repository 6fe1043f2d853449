"""Grade a reader's own normalization layer against the torch.nn layer it imitates.

    >>> from norms.check import grade
    >>> report = grade(MyBatchNorm, torch.nn.BatchNorm1d)
    >>> report.ok, report.problems

``candidate`` is a class (built with the same positional arguments as the
reference: ``num_features``; ``normalized_shape``; ``num_groups, num_channels``)
or a plain function of ``x`` (compared with the reference in training mode,
without affine parameters).  The grader runs both on several shapes, batch
sizes and steps, in training and evaluation mode, and when they disagree it
tests hypotheses (unbiased variance, eps outside the square root, wrong
reduced dims, wrong momentum convention, ...) to name the bug.  It never lets
an exception from the reader's code escape: crashes become problems in the
report.

Only torch is needed.
"""
from __future__ import annotations

import html
import inspect
import itertools
import math
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch import nn

__all__ = ["grade", "Report", "Problem", "PROBLEM_CODES"]

# ----------------------------------------------------------------------------
# What the grader knows about each reference layer
# ----------------------------------------------------------------------------

_KIND = {
    "BatchNorm1d": "batch", "BatchNorm2d": "batch", "BatchNorm3d": "batch",
    "InstanceNorm1d": "instance", "InstanceNorm2d": "instance", "InstanceNorm3d": "instance",
    "LayerNorm": "layer", "RMSNorm": "rms", "GroupNorm": "group",
}


@dataclass
class _Scenario:
    args: tuple                 # positional constructor arguments
    train: list                 # input shapes of the successive training steps
    eval: list                  # input shapes in evaluation mode (after training)
    optional: bool = False      # a crash only gives a note (feature torch has, book does not need)


# Shapes are chosen so that no other size coincides with the channel count (or
# the normalized size), and the sizes change from step to step: an implementation
# that reduces over the wrong dims (or hard-codes a reshape) cannot pass by luck.
_SCENARIOS = {
    "BatchNorm1d": [
        _Scenario((3,), [(8, 3), (5, 3), (6, 3)], [(4, 3)]),
        _Scenario((4,), [(2, 4, 5), (6, 4, 7), (3, 4, 5)], [(5, 4, 7)]),
    ],
    "BatchNorm2d": [
        _Scenario((3,), [(4, 3, 5, 7), (2, 3, 7, 5), (5, 3, 4, 4)], [(2, 3, 6, 5)]),
    ],
    "BatchNorm3d": [
        _Scenario((2,), [(3, 2, 3, 4, 5), (4, 2, 5, 3, 4), (5, 2, 3, 3, 4)], [(3, 2, 4, 5, 3)]),
    ],
    "InstanceNorm1d": [
        _Scenario((3,), [(4, 3, 5), (2, 3, 7), (1, 3, 6)], [(2, 3, 5)]),
    ],
    "InstanceNorm2d": [
        _Scenario((3,), [(2, 3, 5, 7), (4, 3, 6, 4), (1, 3, 5, 5)], [(2, 3, 4, 6)]),
    ],
    "InstanceNorm3d": [
        _Scenario((2,), [(3, 2, 3, 4, 5), (1, 2, 4, 5, 3), (4, 2, 3, 3, 4)], [(3, 2, 5, 3, 4)]),
    ],
    "LayerNorm": [
        _Scenario((5,), [(4, 5), (3, 7, 5), (2, 3, 6, 5), (1, 5)], [(3, 4, 5)]),
        _Scenario(((4, 5),), [(3, 4, 5), (2, 6, 4, 5)], [(1, 4, 5)], optional=True),
    ],
    "RMSNorm": [
        _Scenario((5,), [(4, 5), (3, 7, 5), (2, 3, 6, 5), (1, 5)], [(3, 4, 5)]),
        _Scenario(((4, 5),), [(3, 4, 5), (2, 6, 4, 5)], [(1, 4, 5)], optional=True),
    ],
    "GroupNorm": [
        _Scenario((2, 6), [(2, 6, 3, 7), (4, 6, 5, 2), (1, 6, 4, 3)], [(3, 6, 2, 5)]),
        _Scenario((3, 6), [(4, 6, 5), (2, 6, 7)], [(5, 6, 4)]),
    ],
}

_SCALE_NAMES = ("weight", "gamma", "scale", "g", "alpha", "w", "gain")
_SHIFT_NAMES = ("bias", "beta", "shift", "b", "offset")
_EPS_NAMES = ("eps", "epsilon", "variance_epsilon", "var_eps")
_STAT_WORDS = ("run", "moving", "mean", "var", "avg", "ema", "stat")
_EPS_GUESSES = (1e-12, 1e-10, 1e-8, 1e-7, torch.finfo(torch.float32).eps, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


# ----------------------------------------------------------------------------
# Problems and the report
# ----------------------------------------------------------------------------

# code -> (title, fix).  The observation (what was seen, where) is filled in per case.
PROBLEM_CODES = {
    "not_gradeable": ("Cannot grade this candidate",
                      "Pass a class (e.g. grade(MyBatchNorm, torch.nn.BatchNorm1d)) or a function of x."),
    "constructor_failed": ("The constructor raised an exception",
                           "Accept the same positional arguments as the torch.nn layer and give every "
                           "extra argument a default value."),
    "not_a_module": ("The class is not a torch.nn.Module",
                     "Subclass torch.nn.Module and call super().__init__() first, so that parameters, "
                     "buffers, .train()/.eval() and .to() work."),
    "forward_failed": ("The forward pass raised an exception",
                       "Make forward work for every input shape the torch layer accepts; avoid "
                       "hard-coded sizes and reshapes."),
    "wrong_type": ("The output is not a tensor",
                   "Return just the normalized tensor (a torch.Tensor), not a tuple, list or array."),
    "wrong_shape": ("The output has the wrong shape",
                    "Normalization keeps the input's shape: compute statistics with keepdim=True (or "
                    "reshape back) so that they broadcast against x."),
    "wrong_dtype": ("The output has the wrong dtype",
                    "Create constants and statistics with x.dtype/x.device (e.g. torch.zeros_like) "
                    "instead of default float64/NumPy values."),
    "modifies_input": ("The forward pass modifies its input in place",
                       "Use out-of-place operations (x - mean, not x -= mean) so the caller's tensor "
                       "is left untouched."),
    "unbiased_variance": ("Normalizes with the unbiased variance",
                          "Normalize with the biased (population) variance: x.var(dim, unbiased=False), "
                          "i.e. divide by n, not n - 1."),
    "eps_outside_sqrt": ("eps is added outside the square root",
                         "Use (x - mean) / torch.sqrt(var + eps), not / (torch.sqrt(var) + eps)."),
    "sum_instead_of_mean": ("Divides by a sum of squares instead of their mean",
                            "Divide by torch.sqrt(((x - mean) ** 2).mean(dims, keepdim=True) + eps): the "
                            "mean of the squared deviations (the variance), not their sum."),
    "eps_missing": ("eps is missing (or far smaller than it should be)",
                    "Add eps inside the square root: torch.sqrt(var + eps), with eps=1e-5 by default "
                    "(stored as self.eps)."),
    "eps_value": ("eps has a different value than the layer says",
                  "Take eps as a constructor argument with torch's default and store it as self.eps; "
                  "use self.eps in forward."),
    "wrong_dims": ("Statistics are computed over the wrong dims",
                   "Reduce over exactly the dims the layer normalizes, derived from x.dim() (not from a "
                   "hard-coded shape or a dim index that only works for one shape)."),
    "wrong_groups": ("GroupNorm groups are made of the wrong channels",
                     "Group adjacent channels: x.reshape(N, G, C // G, *spatial) and reduce over dims 2 and "
                     "beyond (x.reshape(N, C // G, G, ...) interleaves channels)."),
    "subtracts_mean": ("RMSNorm subtracts the mean",
                       "RMSNorm does not re-center: divide x by sqrt(mean(x**2) + eps) without subtracting "
                       "the mean."),
    "no_mean_subtraction": ("The mean is not subtracted",
                            "Subtract the mean before dividing: (x - mean) / sqrt(var + eps)."),
    "affine_not_applied": ("The scale and shift are not applied",
                           "Return x_hat * weight + bias (γ·x̂ + β), with the parameters broadcast along "
                           "the normalized features."),
    "affine_swapped": ("Scale and shift are swapped",
                       "Multiply by the scale (initialized to ones) and add the shift (initialized to "
                       "zeros): γ·x̂ + β."),
    "variance_cancellation": ("The variance is computed as E[x²] − E[x]²",
                              "Compute it as the mean of squared deviations, ((x - mean) ** 2).mean(dims) or "
                              "x.var(dims, unbiased=False): the difference of two large, nearly equal numbers "
                              "loses the variance's digits when the mean is large compared with the spread."),
    "output_mismatch": ("The output differs from the torch layer",
                        "Compare your forward step by step with the torch layer on a small input."),
    "gradient_mismatch": ("Outputs agree but gradients do not",
                          "Do not detach the statistics (no .detach(), .data, .item() or torch.no_grad() "
                          "around the mean and variance used in the output)."),
    "backward_failed": ("Backpropagating through the layer raised an exception",
                        "Avoid in-place changes to tensors autograd needs and keep the output connected "
                        "to the input."),
    "params_missing": ("No learnable scale/shift parameter found",
                       "Create them in __init__ as nn.Parameter(torch.ones(shape)) (scale) and "
                       "nn.Parameter(torch.zeros(shape)) (shift)."),
    "param_shape": ("A parameter has the wrong shape",
                    "Give the scale and shift the same shape as the torch layer's weight and bias."),
    "params_not_registered": ("Scale/shift are plain tensors, not parameters",
                              "Wrap them in nn.Parameter so that model.parameters() (and hence the "
                              "optimizer) sees them."),
    "params_created_in_forward": ("Parameters are created inside forward",
                                  "Create every nn.Parameter once, in __init__; an optimizer built before "
                                  "the first forward would never see (or would lose) them."),
    "running_stats_missing": ("No running statistics found",
                              "Register running_mean (zeros) and running_var (ones) buffers in __init__, "
                              "update them in training and use them in eval mode."),
    "running_stats_not_buffers": ("Running statistics are plain attributes, not buffers",
                                  "Use self.register_buffer('running_mean', torch.zeros(num_features)) "
                                  "(same for running_var), and assign to self.running_mean in forward."),
    "running_stats_parameters": ("Running statistics are nn.Parameters",
                                 "They are not learned by gradient descent: register them as buffers "
                                 "(self.register_buffer) instead."),
    "running_stats_autograd": ("Running statistics carry autograd history",
                               "Update them without building a graph: inside `with torch.no_grad():` or "
                               "from mean.detach() / var.detach()."),
    "running_var_biased": ("running_var is updated with the biased variance",
                           "PyTorch stores the unbiased variance in running_var: use var * n / (n - 1) "
                           "(x.var(dim, unbiased=True)) for the update, while still normalizing with the "
                           "biased one."),
    "momentum_convention": ("Momentum follows the TensorFlow/Keras convention",
                            "PyTorch's momentum weighs the new batch: running = (1 - momentum) * running "
                            "+ momentum * batch_stat, with momentum=0.1 by default."),
    "running_stats_not_updated": ("Running statistics are not updated in training",
                                  "In training mode update running_mean/running_var after computing the "
                                  "batch statistics."),
    "running_stats_updated_in_eval": ("Running statistics change in eval mode",
                                      "Only update them when self.training is True."),
    "running_stats_mismatch": ("Running statistics differ from the torch layer",
                               "Update with running = (1 - momentum) * running + momentum * batch_stat, "
                               "using the batch mean and the unbiased batch variance."),
    "eval_uses_batch_stats": ("Eval mode still normalizes with batch statistics",
                              "When self.training is False, normalize with running_mean and running_var."),
    "mode_from_grad_enabled": ("Train/eval mode is chosen from torch.is_grad_enabled()",
                               "Decide with self.training alone: model.eval() may run with gradients on "
                               "(e.g. to compute input gradients), and training steps may run under "
                               "torch.no_grad() (e.g. to recompute statistics)."),
    "eval_mismatch": ("The eval-mode output differs from the torch layer",
                      "In eval mode compute (x - running_mean) / sqrt(running_var + eps) * weight + bias."),
    "grader_error": ("The grader itself failed",
                     "This is a bug in norms.check; please report it with your class."),
}


@dataclass
class Problem:
    """One thing the candidate does differently from the torch layer."""
    code: str
    title: str
    detail: str
    fix: str
    where: list = field(default_factory=list)

    def __str__(self):
        where = ""
        if self.where:
            shown = ", ".join(self.where[:3]) + (", ..." if len(self.where) > 3 else "")
            where = f" (seen at: {shown})"
        return f"{self.title}{where}. {self.detail} Fix: {self.fix}"


@dataclass
class Report:
    """Result of :func:`grade`.  ``ok`` is True when no problem was found."""
    candidate: str
    reference: str
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    checks: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def codes(self) -> list:
        return [p.code for p in self.problems]

    def __contains__(self, code):
        return code in self.codes

    def _headline(self):
        if self.ok:
            return f"✓ {self.candidate} behaves like {self.reference} ({len(self.checks)} checks passed)."
        n = len(self.problems)
        return f"✗ {self.candidate} differs from {self.reference}: {n} problem{'s' if n > 1 else ''}."

    def __str__(self):
        lines = [self._headline()]
        for i, p in enumerate(self.problems, 1):
            lines.append(f"  {i}. [{p.code}] {p}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self):
        e = html.escape
        color = "#1a7f37" if self.ok else "#b42318"
        parts = [f'<div class="norms-grade" style="border-left:4px solid {color};padding:0.4em 0.8em;">',
                 f'<p style="margin:0.2em 0;font-weight:bold;color:{color}">{e(self._headline())}</p>']
        if self.problems:
            parts.append('<ol style="margin:0.2em 0 0.2em 1.2em;padding:0">')
            for p in self.problems:
                where = ""
                if p.where:
                    where = (" <small>(seen at: " + e(", ".join(p.where[:3]))
                             + (", …" if len(p.where) > 3 else "") + ")</small>")
                parts.append(f"<li><b>{e(p.title)}</b>{where}<br>{e(p.detail)}<br>"
                             f"<i>Fix:</i> {e(p.fix)} <code style='opacity:0.6'>{e(p.code)}</code></li>")
            parts.append("</ol>")
        if self.notes:
            parts.append('<ul style="margin:0.2em 0 0.2em 1.2em;padding:0;opacity:0.8">')
            parts.extend(f"<li>note: {e(n)}</li>" for n in self.notes)
            parts.append("</ul>")
        if self.ok and self.checks:
            parts.append("<details><summary>checks</summary><ul>")
            parts.extend(f"<li>{e(c)}</li>" for c in self.checks)
            parts.append("</ul></details>")
        parts.append("</div>")
        return "".join(parts)

# Where the generic fix speaks of a mean and a variance, RMSNorm gets its own wording;
# where it speaks of running statistics, layers that have none get theirs.
_FIX_BY_KIND = {
    ("eps_outside_sqrt", "rms"): "Use x / torch.sqrt(x.pow(2).mean(dims, keepdim=True) + eps), not "
                                 "x / (torch.sqrt(x.pow(2).mean(dims, keepdim=True)) + eps).",
    ("sum_instead_of_mean", "rms"): "Divide by torch.sqrt(x.pow(2).mean(dims, keepdim=True) + eps): the mean "
                                    "of the squares, not their sum (x.norm(dim) is sqrt(n) times the RMS).",
    ("eps_missing", "rms"): "Add eps inside the square root: torch.sqrt(x.pow(2).mean(dims, keepdim=True) + eps); "
                            "torch's default eps=None means torch.finfo(x.dtype).eps.",
    **{("eval_mismatch", k): "This layer has no running statistics: eval mode must compute exactly what "
                             "training mode computes, so do not branch on self.training."
       for k in ("layer", "rms", "group")},
}


class _Collector:
    def __init__(self, kind=None):
        self.problems: dict = {}
        self.notes: list = []
        self.checks: list = []
        self.kind = kind

    def add(self, code, detail, where=None):
        title, fix = PROBLEM_CODES[code]
        fix = _FIX_BY_KIND.get((code, self.kind), fix)
        p = self.problems.get(code)
        if p is None:
            p = self.problems[code] = Problem(code, title, detail, fix)
        if where and where not in p.where:
            p.where.append(where)
        return p

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)


class _Abort(Exception):
    """Stop grading this scenario (a problem has been recorded)."""


# ----------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------

def _fmt_exc(exc: BaseException) -> str:
    """'TypeError: msg (line 12 in forward: `var = ...`)' — points at the reader's code."""
    msg = f"{type(exc).__name__}: {exc}".strip()
    if len(msg) > 300:
        msg = msg[:300] + "…"
    frames = traceback.extract_tb(exc.__traceback__)
    here = __file__.rstrip("c")
    user = [f for f in frames if f.filename != here and "torch" not in f.filename.replace("\\", "/").split("/")]
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
    return bool(torch.allclose(a.detach().double(), b.detach().double(), rtol=rtol, atol=atol, equal_nan=True))


def _maxerr(a, b):
    d = (a.detach().double() - b.detach().double()).abs()
    d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
    return float(d.max()) if d.numel() else 0.0


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _leaf(name):
    return name.rsplit(".", 1)[-1].lower()


def _resolve(obj, dotted):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _plain_tensor_attrs(m):
    try:
        items = vars(m).items()
    except TypeError:
        return {}
    return {k: v for k, v in items if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter)}


# ----------------------------------------------------------------------------
# Normalization hypotheses (float64)
# ----------------------------------------------------------------------------

class _Spec:
    """Ground truth about how the reference normalizes a given input."""

    def __init__(self, name, args):
        self.name = name
        self.kind = _KIND[name]
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
            return (f"each sample's groups of {self.channels // self.groups} adjacent channels "
                    f"(together with all their positions)")
        return f"dims {self.dims(shape)}"


def _reduce(x, dims, center, divisor):
    """Mean and the squared deviations summed over dims, divided by n, n - 1 or 1 (divisor "n", "n-1", "1")."""
    n = 1
    for d in dims:
        n *= x.shape[d]
    if center:
        mean = x.mean(dims, keepdim=True)
        ss = ((x - mean) ** 2).sum(dims, keepdim=True)
    else:
        mean = torch.zeros((), dtype=x.dtype)
        ss = (x ** 2).sum(dims, keepdim=True)
    denom = {"n": n, "n-1": n - 1, "1": 1}[divisor]
    var = ss / denom if denom > 0 else torch.full_like(ss, float("nan"))
    return mean, var


def _scale(x, mean, var, eps, eps_mode):
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
        return _scale(xr, mean, var, eps, eps_mode).reshape(x.shape)
    mean, var = _reduce(x, dims, center, divisor)
    return _scale(x, mean, var, eps, eps_mode)


@dataclass(frozen=True)
class _Hyp:
    dims: Any = None          # None = correct
    divisor: str = "n"        # n (right) | n-1 (unbiased variance) | 1 (a sum: the L2 norm)
    eps_mode: str = "inside"
    center_flip: bool = False
    affine: str = "ok"        # ok | none | swapped
    eps: Optional[float] = None  # None = the layer's eps

    def deviations(self):
        return (self.dims is not None) + (self.divisor != "n") + (self.eps_mode != "inside") + self.center_flip \
            + (self.affine != "ok") + (self.eps is not None)


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
            dim_variants, ("n", "n-1", "1"), ("inside", "outside", "none"), (False, True), affines):
        h = _Hyp(dims, div, mode, flip, aff)
        if (include_exact or h.deviations() > 0) and h.deviations() <= 3:
            hyps.append(h)
    for e in _EPS_GUESSES:
        if not math.isclose(e, eps, rel_tol=0.05):
            hyps.append(_Hyp(eps=e))
    hyps.sort(key=lambda h: h.deviations())
    return hyps


def _hyp_output(h, x, spec, eps, w, b, cache):
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


def _explain(h, spec, shape, eps):
    """Problems (code, detail) that a matching hypothesis stands for."""
    out = []
    if h.dims == "interleaved":
        out.append(("wrong_groups", "Your output matches GroupNorm with interleaved groups (channels "
                                    f"g, g + {spec.groups}, g + {2 * spec.groups}, ... in group g) instead "
                                    "of adjacent channels."))
    elif h.dims is not None:
        out.append(("wrong_dims", f"Your output matches statistics over dims {h.dims} of an input of "
                                  f"shape {shape}; {spec.name} uses {spec.describe_dims(shape)}."))
    if h.center_flip:
        if spec.center:
            out.append(("no_mean_subtraction", "Your output matches dividing by the root mean square "
                                               "without subtracting the mean (that is RMSNorm)."))
        else:
            out.append(("subtracts_mean", "Your output matches LayerNorm-style centering (x - mean); "
                                          "RMSNorm only rescales."))
    if h.divisor == "1":
        if spec.center:
            out.append(("sum_instead_of_mean", "Your output matches dividing by the square root of the sum "
                                               "of squared deviations instead of their mean (the variance)."))
        else:
            out.append(("sum_instead_of_mean", "Your output matches dividing by the L2 norm sqrt(sum(x²)) "
                                               "(x.norm(dim=-1)), which is sqrt(n) times the root mean square "
                                               f"(n = {math.prod(spec.normalized_shape)} here)."))
    elif h.divisor == "n-1":
        out.append(("unbiased_variance", "Your output matches normalizing with the unbiased variance "
                                         "(divided by n - 1) instead of the biased one (divided by n)."))
    small = "a small variance" if spec.center else "small values"
    if h.eps_mode == "outside":
        form = "(x - mean) / (sqrt(var) + eps)" if spec.center else "x / (sqrt(mean(x²)) + eps)"
        out.append(("eps_outside_sqrt", f"Your output matches {form} with eps={eps:g}; "
                                        f"the difference shows on inputs with {small}."))
    elif h.eps_mode == "none":
        form = "sqrt(var)" if spec.center else "sqrt(mean(x²))"
        const = "constant inputs" if spec.center else "all-zero inputs"
        out.append(("eps_missing", f"Your output matches dividing by {form} with no eps; the difference "
                                   f"shows on inputs with {small} (and it divides by zero on {const})."))
    if h.eps is not None:
        out.append(("eps_value", f"Your output matches eps={h.eps:g}, but the layer's eps is {eps:g} "
                                 "(taken from your .eps attribute, or torch's default if there is none)."))
    if h.affine == "none":
        out.append(("affine_not_applied", "Your output matches the normalized input without the scale and "
                                          "shift, although the layer has (non-trivial) parameters."))
    elif h.affine == "swapped":
        out.append(("affine_swapped", "Your output matches x̂·β + γ instead of γ·x̂ + β."))
    return out


def _diagnose(y, x, spec, eps, w, b, rtol, atol, include_exact=False):
    """Find the simplest hypothesis reproducing the candidate's output y; None if none does."""
    x64 = x.detach().double()
    y64 = y.detach().double()
    w64 = w.detach().double() if w is not None else None
    b64 = b.detach().double() if b is not None else None
    cache: dict = {}
    for h in _hypotheses(spec, tuple(x.shape), w is not None, b is not None, eps, include_exact):
        try:
            out = _hyp_output(h, x64, spec, eps, w64, b64, cache)
        except RuntimeError:
            continue
        if _close(y64, out, rtol, atol):
            return h
    return None


# ----------------------------------------------------------------------------
# Finding the candidate's parameters and running statistics
# ----------------------------------------------------------------------------

def _find_eps(obj):
    for name in _EPS_NAMES:
        v = getattr(obj, name, "missing")
        if v is None or _num(v):
            return name, v
    return None, "missing"


def _find_affine(module, spec):
    """Return (scale_name, shift_name, wrong_shaped, plain_tensors) found on a freshly built module."""
    target = _sq(spec.param_shape())
    params = [(n, p) for n, p in module.named_parameters()
              if not any(w in _leaf(n) for w in _STAT_WORDS)]
    fitting = [(n, p) for n, p in params if _sq(p.shape) == target]

    def pick(names, value):
        for n, p in fitting:
            if _leaf(n) in names:
                return n
        for n, p in fitting:
            if bool(torch.all(p.detach() == value)):
                return n
        return None

    scale = pick(_SCALE_NAMES, 1.0)
    shift = pick(_SHIFT_NAMES, 0.0)
    if shift == scale:
        shift = None
    wrong = [(n, tuple(p.shape)) for n, p in params
             if _sq(p.shape) != target and (_leaf(n) in _SCALE_NAMES + _SHIFT_NAMES)]
    plain = [n for n, t in _plain_tensor_attrs(module).items()
             if (t.requires_grad or n.lower() in _SCALE_NAMES + _SHIFT_NAMES)
             and not any(w in n.lower() for w in _STAT_WORDS)]
    return scale, shift, wrong, plain


def _find_running(module, spec, exclude):
    """Locate running mean/var: returns {'mean': (name, where), 'var': (name, where)}."""
    C = spec.channels
    pool = []  # (name, tensor, where)
    for n, t in module.named_buffers():
        pool.append((n, t, "buffer"))
    for n, t in _plain_tensor_attrs(module).items():
        pool.append((n, t, "attribute"))
    for n, t in module.named_parameters():
        if n not in exclude:
            pool.append((n, t, "parameter"))
    pool = [(n, t, w) for n, t, w in pool if t.is_floating_point() and t.numel() == C]
    found = {}
    for key, words, value in (("mean", ("mean",), 0.0), ("var", ("var",), 1.0)):
        named = [e for e in pool if any(wd in _leaf(e[0]) for wd in words)
                 and any(s in _leaf(e[0]) for s in ("run", "moving", "avg", "ema", "mean", "var"))]
        named.sort(key=lambda e: (not any(s in _leaf(e[0]) for s in ("run", "moving")), e[2] != "buffer"))
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


# ----------------------------------------------------------------------------
# The grader
# ----------------------------------------------------------------------------

def _build_reference(name, args, *, affine, eps, momentum, track):
    cls = getattr(nn, name)
    kw = {}
    kind = _KIND[name]
    if kind in ("layer", "rms"):
        kw["elementwise_affine"] = affine
    else:
        kw["affine"] = affine
    if eps != "missing":
        kw["eps"] = eps
    if kind in ("batch", "instance"):
        if momentum != "missing":
            kw["momentum"] = momentum
        kw["track_running_stats"] = track
    return cls(*args, **kw)


def _data(gen, shape, step):
    """Step 1 uses a tiny scale (eps matters there); the others an offset, non-unit scale."""
    x = torch.randn(shape, generator=gen)
    if step % 3 == 1:
        return x * 0.01
    return x * 2.0 + (1.0 if step % 3 == 0 else -0.5)


def _call_str(cls_name, args):
    return f"{cls_name}({', '.join(repr(a) for a in args)})"


class _Grader:
    def __init__(self, candidate, reference, seed, rtol, atol, num_groups):
        self.candidate = candidate
        self.ref_name = reference
        self.seed = seed
        self.rtol, self.atol = rtol, atol
        self.num_groups = num_groups
        self.kind = _KIND[reference]
        self.c = _Collector(self.kind)
        self.train_failed = False  # in the current scenario (read by explain_eval_mismatch)
        self.passed: list = []   # training input shapes on which the output matched
        self.failed: list = []

    def shape_hint(self):
        if not (self.passed and self.failed):
            return
        for code in ("wrong_dims", "wrong_groups", "output_mismatch"):
            p = self.c.problems.get(code)
            if p is not None and "right for" not in p.detail:
                p.detail += (f" The output was right for input {self.passed[0]} but not for {self.failed[0]}: "
                             "look for code that is right only for particular shapes (a hard-coded reshape, "
                             "or a dim index that coincides for that shape).")

    # -- calling the reader's code ------------------------------------------------
    def call(self, fn, *args, what, where, **kw):
        try:
            return fn(*args, **kw)
        except Exception as exc:  # the reader's code may raise anything
            code = "constructor_failed" if what == "constructor" else (
                "backward_failed" if what == "backward" else "forward_failed")
            self.c.add(code, f"{what} raised {_fmt_exc(exc)}", where)
            raise _Abort from None

    def check_output(self, y, x, where):
        if not isinstance(y, torch.Tensor):
            self.c.add("wrong_type", f"The output is a {type(y).__name__}, not a torch.Tensor.", where)
            raise _Abort
        if tuple(y.shape) != tuple(x.shape):
            self.c.add("wrong_shape", f"For an input of shape {tuple(x.shape)} the output has shape "
                                      f"{tuple(y.shape)}.", where)
            raise _Abort
        if y.dtype != x.dtype:
            self.c.add("wrong_dtype", f"For a {x.dtype} input the output is {y.dtype}.", where)

    # -- entry ----------------------------------------------------------------------
    def run(self):
        cand = self.candidate
        if isinstance(cand, nn.Module):
            self.c.note(f"grade() got an instance; grading its class {type(cand).__name__} instead.")
            cand = self.candidate = type(cand)
        if inspect.isclass(cand):
            self.cand_name = cand.__name__
            for sc in _SCENARIOS[self.ref_name]:
                if sc.optional and self.c.problems:
                    continue  # fix the basics first
                self.scenario(self.run_class_scenario, sc)
                if any(k in self.c.problems for k in ("constructor_failed", "not_a_module")):
                    break
            self.shape_hint()
        elif callable(cand):
            self.cand_name = getattr(cand, "__name__", type(cand).__name__)
            for sc in _SCENARIOS[self.ref_name]:
                if sc.optional and self.c.problems:
                    continue
                self.scenario(self.run_function_scenario, sc)
            self.shape_hint()
        else:
            self.cand_name = repr(cand)[:60]
            self.c.add("not_gradeable", f"Got {type(cand).__name__}, which is neither a class nor a function.")

    def scenario(self, runner, sc):
        """Run one scenario; findings of an optional one (a tuple normalized_shape) become notes."""
        main = self.c
        if sc.optional:
            self.c = _Collector(self.kind)
        try:
            runner(sc)
        except _Abort:
            pass
        finally:
            if sc.optional:
                opt, self.c = self.c, main
                main.checks.extend(opt.checks)
                for p in opt.problems.values():
                    main.note(f"With a tuple normalized_shape {sc.args[0]} (torch allows it, the book does not "
                              f"need it): {p.title.lower()}. {p.detail}")

    # -- plain functions --------------------------------------------------------------
    def function_args(self, spec):
        try:
            params = list(inspect.signature(self.candidate).parameters.values())
        except (TypeError, ValueError):
            params = []
        eps = "missing"
        kw, pos = {}, []
        required = [p for p in params[1:] if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for p in params:
            if p.name.lower() in _EPS_NAMES and _num(p.default):
                eps = p.default
            elif p.name in ("running_mean", "running_var") and p.default is inspect.Parameter.empty:
                kw[p.name] = None      # functional APIs like torch.nn.functional.batch_norm
            elif p.name == "training":
                kw[p.name] = True
        required = [p for p in required if p.name not in kw]
        if spec.kind == "group":
            names = [p for p in params if p.name.lower() in ("num_groups", "groups", "g", "n_groups", "num_group")]
            if names:
                kw[names[0].name] = spec.groups
            elif required:
                pos.append(spec.groups)
        elif spec.kind in ("layer", "rms"):
            names = [p for p in params if p.name.lower() in ("normalized_shape", "shape", "dim", "dims", "d")]
            if names:
                kw[names[0].name] = spec.args[0]
            elif required:
                pos.append(spec.args[0])
        return pos, kw, eps

    def run_function_scenario(self, sc):
        args = sc.args
        if self.ref_name == "GroupNorm":
            args = (self.num_groups, sc.args[1])
        spec = _Spec(self.ref_name, args)
        pos, kw, eps = self.function_args(spec)
        shape_arg = [n for n in kw if n.lower() in ("normalized_shape", "shape", "dim", "dims", "d")]
        if spec.kind in ("layer", "rms") and not pos and not shape_arg and not isinstance(args[0], int):
            return  # f(x) cannot be told to normalize several trailing dims
        if spec.kind in ("layer", "rms") and isinstance(args[0], int) and (pos or shape_arg):
            # int or tuple normalized_shape? use the first the function accepts
            probe = torch.zeros(sc.train[0])
            for variant in (args[0], (args[0],)):
                p2 = [variant] if pos else []
                k2 = dict(kw, **({shape_arg[0]: variant} if shape_arg else {}))
                try:
                    self.candidate(probe, *p2, **k2)
                except Exception:
                    continue
                pos, kw = p2, k2
                break
        ref = _build_reference(self.ref_name, args, affine=False, eps=eps, momentum="missing", track=False)
        ref.train()
        ref_eps = ref.eps if ref.eps is not None else torch.finfo(torch.float32).eps
        gen = torch.Generator().manual_seed(self.seed)
        for step, shape in enumerate(sc.train + sc.eval):
            where = f"shape {shape}"
            x = _data(gen, shape, step)
            xc = x.clone().requires_grad_(True)
            xr = x.clone().requires_grad_(True)
            try:
                y = self.call(self.candidate, xc, *pos, what="calling the function", where=where, **kw)
                self.check_output(y, x, where)
            except _Abort:
                continue
            yr = ref(xr)
            if _close(y, yr, self.rtol, self.atol):
                self.passed.append(shape)
                self.c.checks.append(f"output on {shape}")
                if step == 0:
                    self.check_gradients(y, yr, xc, xr, [], where, gen)
            else:
                self.failed.append(shape)
                self.explain_mismatch(y, x, spec, ref_eps, None, None, where, yr)
        if spec.center and self.passed and not self.failed and not self.c.problems:
            fresh = _build_reference(self.ref_name, args, affine=False, eps=eps, momentum="missing", track=False)
            self.check_cancellation(lambda x: self.candidate(x, *pos, **kw), fresh.train(), sc.train[0],
                                    f"shape {sc.train[0]}")

    # -- classes ----------------------------------------------------------------------
    def build(self, args, where):
        m = self.call(self.candidate, *args, what="constructor", where=where)
        if not isinstance(m, nn.Module):
            self.c.add("not_a_module", f"{self.cand_name} instances are {type(m).__name__} objects.")
            raise _Abort
        return m

    def run_class_scenario(self, sc):
        spec = _Spec(self.ref_name, sc.args)
        call = _call_str(self.cand_name, sc.args)
        where0 = f"{call}"
        m = self.build(sc.args, where0)
        # -- structure after __init__ --------------------------------------------------
        scale, shift, wrong, plain = _find_affine(m, spec)
        eps_name, eps = _find_eps(m)
        momentum = getattr(m, "momentum", "missing")
        if not (momentum is None or _num(momentum)):
            momentum = "missing"
        ref_default = _build_reference(self.ref_name, sc.args, affine=True if spec.kind not in ("instance",)
                                       else False, eps="missing", momentum="missing",
                                       track=spec.kind == "batch")
        wants_affine = any(True for _ in ref_default.parameters())
        running_kind = spec.kind == "batch"
        running = {}
        if spec.kind in ("batch", "instance"):
            running = _find_running(m, spec, {n for n in (scale, shift) if n})
            if spec.kind == "instance" and running:
                running_kind = True
        param_ids = {n: id(p) for n, p in m.named_parameters()}
        # probe: a separate instance, one forward without grad, to see what forward changes
        created = self.probe_forward(sc, spec, where0)
        self.structure_problems(m, spec, sc, scale, shift, wrong, plain, running, running_kind,
                                    wants_affine, created, where0)
        if spec.kind in ("batch", "instance") and running_kind and not running:
            running = {}
        # -- reference with the same settings and the same non-trivial parameters ---------
        affine = scale is not None or shift is not None
        if spec.kind in ("layer", "rms", "group", "batch"):
            affine = affine or wants_affine
        ref = _build_reference(self.ref_name, sc.args, affine=affine, eps=eps, momentum=momentum,
                               track=running_kind)
        ref_eps = ref.eps if ref.eps is not None else torch.finfo(torch.float32).eps
        gen = torch.Generator().manual_seed(self.seed * 1000 + len(sc.train))
        if affine and getattr(ref, "bias", None) is None and shift is not None:
            self.c.note(f"{self.cand_name} has a parameter {shift!r} that torch.nn.{spec.name} does not have; "
                        "it was left at its initial value.")
            shift = None
        w = b = None
        if affine:
            w = torch.rand(spec.param_shape(), generator=gen) + 0.5
            b = torch.randn(spec.param_shape(), generator=gen) * 0.5
            if scale is None:
                w = torch.ones(spec.param_shape())
            if shift is None:
                b = torch.zeros(spec.param_shape())
            with torch.no_grad():
                if scale is not None:
                    p = _resolve(m, scale)
                    p.copy_(w.reshape(p.shape))
                if shift is not None:
                    p = _resolve(m, shift)
                    p.copy_(b.reshape(p.shape))
                ref.weight.copy_(w)
                if getattr(ref, "bias", None) is not None:
                    ref.bias.copy_(b)
                else:
                    b = None
        pairs = [(n, r) for n, r in ((scale, ref.weight if affine else None),
                                    (shift, getattr(ref, "bias", None) if affine else None))
                 if n is not None and r is not None]
        mom = ref.momentum if spec.kind in ("batch", "instance") else None
        m.train()
        ref.train()
        passed, failed = self.passed, self.failed
        failed_before = len(failed)
        for step, shape in enumerate(sc.train):
            where = f"training, {call}, input {shape}"
            x = _data(gen, shape, step)
            prev = self.read_running(m, running)
            xc = x.clone().requires_grad_(True)
            xr = x.clone().requires_grad_(True)
            try:
                y = self.call(m, xc, what="forward (training mode)", where=where)
                self.check_output(y, x, where)
            except _Abort:
                failed.append(shape)
                continue
            yr = ref(xr)
            if _close(y, yr, self.rtol, self.atol):
                passed.append(shape)
                self.c.checks.append(f"training output, {call}, input {shape}")
                if step == 0:
                    self.check_gradients(y, yr, xc, xr, [(_resolve(m, n), r) for n, r in pairs], where, gen)
            else:
                failed.append(shape)
                self.explain_mismatch(y, x, spec, ref_eps, w, b, where, yr)
            if running_kind and running:
                self.check_running(m, ref, running, prev, x, spec, mom, where)
        # -- eval mode ---------------------------------------------------------------------
        try:
            self.call(m.eval, what="calling .eval()", where=call)
        except _Abort:
            return
        ref.eval()
        self.train_failed = len(failed) > failed_before
        eval_ok = []
        for k, shape in enumerate(sc.eval):
            where = f"eval, {call}, input {shape}"
            x = _data(gen, shape, k)
            prev = self.read_running(m, running)
            try:
                with torch.no_grad():
                    y = self.call(m, x.clone(), what="forward (eval mode)", where=where)
                self.check_output(y, x, where)
            except _Abort:
                eval_ok.append(False)
                continue
            with torch.no_grad():
                yr = ref(x.clone())
            if running_kind and running:
                now = self.read_running(m, running)
                if any(not torch.equal(prev[k2], now[k2]) for k2 in prev if k2 in now):
                    self.c.add("running_stats_updated_in_eval",
                               "The running statistics changed during a forward pass in eval mode.", where)
            if _close(y, yr, self.rtol, self.atol):
                self.c.checks.append(f"eval output, {call}, input {shape}")
                eval_ok.append(True)
                continue
            eval_ok.append(False)
            self.explain_eval_mismatch(y, x, spec, ref_eps, w, b, where, yr, m, running, running_kind)
        train_ok = len(failed) == failed_before
        if running_kind and running and train_ok and eval_ok and all(eval_ok):  # right in the usual setup
            self.check_mode_source(m, ref, sc, call, gen)
        if spec.center and train_ok and not self.c.problems:  # last check: it changes m and ref
            try:
                self.call(m.train, what="calling .train()", where=call)
            except _Abort:
                return
            self.check_cancellation(m, ref.train(), sc.train[0], f"training, {call}, input {sc.train[0]}")

    def check_mode_source(self, m, ref, sc, call, gen):
        """Mode must come from ``self.training``, never from ``torch.is_grad_enabled()`` (d2l's bug):
        eval mode with gradients on, then one training step under ``torch.no_grad()``."""
        shape = sc.eval[0]
        x = _data(gen, shape, 7)
        where = f"eval with gradients enabled, {call}, input {shape}"
        try:
            with torch.enable_grad():
                y = self.call(m, x.clone().requires_grad_(True), what="forward (eval mode)", where=where)
            self.check_output(y, x, where)
            with torch.no_grad():
                yr = ref(x.clone())
            if not _close(y, yr, self.rtol, self.atol):
                self.c.add("mode_from_grad_enabled",
                           "In eval mode your output is right under torch.no_grad() but differs by "
                           f"{_maxerr(y, yr):.3g} when gradients are enabled.", where)
                return
            where = f"training under torch.no_grad(), {call}, input {shape}"
            self.call(m.train, what="calling .train()", where=call)
            ref.train()
            with torch.no_grad():
                y = self.call(m, x.clone(), what="forward (training mode)", where=where)
                self.check_output(y, x, where)
                yr = ref(x.clone())
            if not _close(y, yr, self.rtol, self.atol):
                self.c.add("mode_from_grad_enabled",
                           "In training mode your output is right with gradients on but differs by "
                           f"{_maxerr(y, yr):.3g} under torch.no_grad().", where)
        except _Abort:
            return
        finally:
            m.eval()
            ref.eval()

    # -- structure checks -------------------------------------------------------------------
    def probe_forward(self, sc, spec, where):
        """Forward once on a fresh instance: which parameters appear/are replaced, is x modified?"""
        try:
            m = self.build(sc.args, where)
        except _Abort:
            return None
        before = {n: p for n, p in m.named_parameters()}
        gen = torch.Generator().manual_seed(self.seed + 7)
        x = _data(gen, sc.train[0], 0)
        x0 = x.clone()
        try:
            m.train()
            with torch.no_grad():
                m(x)
        except Exception:
            return None  # the main loop reports crashes
        if not torch.equal(x, x0):
            self.c.add("modifies_input", "After a forward pass the input tensor had different values.",
                       f"input {tuple(x.shape)}")
        after = {n: p for n, p in m.named_parameters()}
        new = [n for n in after if n not in before]
        replaced = [n for n in after if n in before and after[n] is not before[n]]
        return new, replaced

    def structure_problems(self, m, spec, sc, scale, shift, wrong, plain, running, running_kind,
                           wants_affine, created, where):
        call = _call_str(self.cand_name, sc.args)
        if created:
            new, replaced = created
            if new or replaced:
                parts = []
                if new:
                    parts.append(f"new parameter(s) {', '.join(new)} appeared after the first forward")
                if replaced:
                    parts.append(f"parameter(s) {', '.join(replaced)} were replaced by new objects in forward")
                text = "; ".join(parts)
                self.c.add("params_created_in_forward", text[:1].upper() + text[1:] + ".", call)
        created_any = bool(created and (created[0] or created[1]))
        for n, shp in wrong:
            self.c.add("param_shape", f"{call} has parameter {n!r} of shape {shp}; torch.nn.{spec.name} "
                                      f"has weight/bias of shape {spec.param_shape()}.", call)
        if plain:
            self.c.add("params_not_registered", f"{', '.join('self.' + n for n in plain)} "
                                                f"{'is a plain tensor' if len(plain) == 1 else 'are plain tensors'}"
                                                " and not in model.parameters().", call)
        if wants_affine and (scale is None or shift is None) and not created_any and not wrong and not plain:
            missing = []
            if scale is None:
                missing.append("scale (γ, initialized to ones)")
            if shift is None and spec.kind != "rms":
                missing.append("shift (β, initialized to zeros)")
            if missing:
                self.c.add("params_missing", f"After {call} there is no parameter of shape "
                                             f"{spec.param_shape()} for the {' or '.join(missing)}; "
                                             f"torch.nn.{spec.name} has one.", call)
        if not running_kind:
            return
        if not running:
            if spec.kind == "batch":
                self.c.add("running_stats_missing", f"After {call} no tensor of shape ({spec.channels},) "
                                                    "holding a running mean (zeros) or variance (ones) was found.",
                           call)
            return
        for key in ("mean", "var"):
            if key not in running:
                self.c.add("running_stats_missing", f"No running {key} (a tensor of shape ({spec.channels},) "
                                                    f"initialized to {'zeros' if key == 'mean' else 'ones'}) "
                                                    "was found.", call)
        kinds = {w for _, w in running.values()}
        names = [n for n, _ in running.values()]
        if "parameter" in kinds:
            self.c.add("running_stats_parameters",
                       f"{', '.join(n for n, w in running.values() if w == 'parameter')} "
                       "are nn.Parameters, so an optimizer would change them and they get gradients.", call)
        issues = []
        if "attribute" in kinds:
            issues.append("they are plain attributes (" + ", ".join(
                "self." + n for n, w in running.values() if w == "attribute") + ")")
        try:
            sd = m.state_dict()
            absent = [n for n in names if n not in sd]
            if absent:
                issues.append(f"the state_dict lacks {', '.join(absent)} (saving and loading the model loses them)")
        except Exception as exc:
            self.c.note(f"state_dict() raised {_fmt_exc(exc)}")
        # does .to(float64) move them?
        try:
            m2 = self.candidate(*sc.args)
            m2.to(torch.float64)
            stay = []
            for n, _ in running.values():
                t = _resolve(m2, n)
                if isinstance(t, torch.Tensor) and t.dtype != torch.float64:
                    stay.append(n)
            if stay:
                issues.append(f"model.to(torch.float64) leaves {', '.join(stay)} as {t.dtype} "
                              "(so .to('cuda') would not move them either)")
        except Exception as exc:
            self.c.note(f"building a second instance and calling .to(torch.float64) raised {_fmt_exc(exc)}")
        if issues and "parameter" not in kinds:
            text = "; ".join(issues)
            self.c.add("running_stats_not_buffers", text[:1].upper() + text[1:] + ".", call)

    # -- running statistics ---------------------------------------------------------------
    def read_running(self, m, running):
        out = {}
        for key, (name, _) in running.items():
            try:
                t = _resolve(m, name)
            except AttributeError:
                continue
            if isinstance(t, torch.Tensor):
                out[key] = t.detach().double().reshape(-1).clone()
        return out

    def check_running(self, m, ref, running, prev, x, spec, mom, where):
        for key, (name, _) in running.items():
            try:
                t = _resolve(m, name)
            except AttributeError:
                continue
            if isinstance(t, torch.Tensor) and (t.requires_grad or t.grad_fn is not None):
                self.c.add("running_stats_autograd",
                           f"After a training step {name} has requires_grad={t.requires_grad} and "
                           f"grad_fn={type(t.grad_fn).__name__ if t.grad_fn is not None else None}: "
                           "every step extends a graph that is never freed.", where)
        now = self.read_running(m, running)
        refs = {"mean": ref.running_mean.double(), "var": ref.running_var.double()}
        x64 = x.double()
        if spec.kind == "batch":
            dims = spec.dims(tuple(x.shape))
            bm = x64.mean(dims)
            n = x.numel() // x.shape[1]
            bvb = x64.var(dims, unbiased=False)
        else:  # instance norm with running stats: per-instance stats averaged over the batch
            dims = spec.dims(tuple(x.shape))
            n = x[0, 0].numel()
            bm = x64.mean(dims).mean(0)
            bvb = x64.var(dims, unbiased=False).mean(0)
        bvu = bvb * n / (n - 1) if n > 1 else bvb
        m_ = mom if mom is not None else 0.1
        for key in ("mean", "var"):
            if key not in now or key not in prev:
                continue
            got, old = now[key], prev[key]
            if got.shape != refs[key].shape:
                continue
            if _close(got, refs[key], 1e-4, 1e-5):
                continue
            # hypotheses, from the candidate's own previous value (so one bug is not counted twice)
            batch = {"mean": {"unbiased": bm}, "var": {"unbiased": bvu, "biased": bvb}}[key]
            matches = []
            for conv in ("torch", "keras"):
                for vk, bs in batch.items():
                    exp = (1 - m_) * old + m_ * bs if conv == "torch" else m_ * old + (1 - m_) * bs
                    if _close(got, exp, 1e-4, 1e-5):
                        matches.append((conv, vk))
            if ("torch", "unbiased") in matches:
                continue  # consistent with its own history: an earlier step was already reported
            name = running[key][0]
            if matches:
                conv, vk = matches[0]
                if conv == "keras":
                    self.c.add("momentum_convention",
                               f"{name} matches {m_:g}·old + {1 - m_:g}·batch, i.e. momentum weighs the old "
                               f"value; PyTorch computes {1 - m_:g}·old + {m_:g}·batch.", where)
                if vk == "biased":
                    self.c.add("running_var_biased",
                               f"{name} matches an update with the biased batch variance (÷n, n={n}); "
                               "torch.nn uses the unbiased one (÷(n-1)) for running_var.", where)
            elif torch.equal(got, old):
                self.c.add("running_stats_not_updated", f"{name} did not change during a training step.", where)
            else:
                err = _maxerr(got, refs[key])
                self.c.add("running_stats_mismatch",
                           f"After a training step {name} differs from torch's running_{key} by up to {err:.3g}.",
                           where)

    # -- diagnosis -----------------------------------------------------------------------------
    def explain_mismatch(self, y, x, spec, eps, w, b, where, yr):
        h = _diagnose(y, x, spec, eps, w, b, self.rtol, self.atol)
        if h is not None:
            for code, detail in _explain(h, spec, tuple(x.shape), eps):
                self.c.add(code, detail, where)
            return
        err = _maxerr(y, yr)
        self.c.add("output_mismatch",
                   f"Output differs from torch's: max abs error {err:.3g} for an input of shape "
                   f"{tuple(x.shape)}; no single known bug explains it.", where)

    def check_cancellation(self, fn, ref, shape, where):
        """Inputs with mean 3000 and spread 1: E[x²] − E[x]² in float32 loses every digit of the
        variance there (x² ≈ 9e6, whose float32 spacing is 1), while the mean of squared
        deviations stays accurate to about 1e-4.  Called only when ordinary inputs pass."""
        gen = torch.Generator().manual_seed(self.seed + 7)
        x = torch.randn(shape, generator=gen) + 3000.0
        try:
            with torch.no_grad():
                y = fn(x.clone())
        except Exception:
            return  # ordinary inputs worked; a crash here says nothing about the variance
        if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(x.shape):
            return
        with torch.no_grad():
            yr = ref.double()(x.double())
        if _close(y.double(), yr, 1e-2, 1e-2):
            self.c.checks.append(f"inputs with a large mean, {where}")
            return
        err = "NaN" if torch.isnan(y).any() else f"{_maxerr(y.double(), yr):.3g}"
        self.c.add("variance_cancellation",
                   f"Right on ordinary inputs, but on float32 inputs of mean 3000 and standard deviation 1 "
                   f"(shape {shape}) the output is off by up to {err}; torch's is accurate to about 1e-4 "
                   "there. That is what E[x²] − E[x]² does.", where)

    def explain_eval_mismatch(self, y, x, spec, eps, w, b, where, yr, m, running, running_kind):
        x64, y64 = x.double(), y.detach().double()
        if running_kind and running:
            now = self.read_running(m, running)
            if "mean" in now and "var" in now:
                view = (1, -1) + (1,) * (x.dim() - 2)
                rm, rv = now["mean"].reshape(view), now["var"].reshape(view)
                wv = w.double().reshape(view) if w is not None else 1.0
                bv = b.double().reshape(view) if b is not None else 0.0
                tries = [("inside", eps, None), ("outside", eps, "eps_outside_sqrt"), ("none", eps, "eps_missing")]
                tries += [("inside", e, "eps_value") for e in _EPS_GUESSES if not math.isclose(e, eps, rel_tol=0.05)]
                for mode, e, code in tries:
                    out = _scale(x64, rm, rv, e, mode) * wv + bv
                    if _close(y64, out, self.rtol, self.atol):
                        if code == "eps_value":
                            self.c.add(code, f"In eval mode your output matches eps={e:g} with your running "
                                             f"statistics, but the layer's eps is {eps:g}.", where)
                        elif code:
                            desc = "(x - mean) / (sqrt(var) + eps)" if mode == "outside" else "no eps at all"
                            self.c.add(code, f"In eval mode your output matches {desc} with your running "
                                             "statistics.", where)
                        return  # uses its own running stats correctly: their problems are reported above
        h = _diagnose(y, x, spec, eps, w, b, self.rtol, self.atol, include_exact=running_kind)
        if running_kind and h is not None:
            self.c.add("eval_uses_batch_stats", "In eval mode your output matches normalizing with the "
                                                "statistics of the current batch.", where)
            for code, detail in _explain(h, spec, tuple(x.shape), eps):
                self.c.add(code, detail, where)
            return
        if running_kind and not running:
            self.c.add("running_stats_missing", "In eval mode the output matches no normalization with "
                                                "batch statistics, and no running statistics were found.", where)
            return
        if h is not None:
            for code, detail in _explain(h, spec, tuple(x.shape), eps):
                self.c.add(code, detail, where)
            return
        if not running_kind and self.train_failed:
            return  # no running statistics: the training-mode problems explain this too
        self.c.add("eval_mismatch", f"Eval-mode output differs from torch's: max abs error "
                                    f"{_maxerr(y, yr):.3g} for an input of shape {tuple(x.shape)}.", where)

    def check_gradients(self, y, yr, xc, xr, param_pairs, where, gen):
        g = torch.randn(y.shape, generator=gen)
        try:
            y.backward(g)
        except Exception as exc:
            self.c.add("backward_failed", f"y.backward() raised {_fmt_exc(exc)}", where)
            return
        yr.backward(g)
        bad = []
        if xc.grad is None:
            bad.append("the input gets no gradient")
        elif not _close(xc.grad, xr.grad, 1e-3, 1e-4):
            bad.append(f"the input gradient differs by up to {_maxerr(xc.grad, xr.grad):.3g}")
        for p, r in param_pairs:
            if p.grad is None:
                bad.append("a parameter gets no gradient")
            elif not _close(p.grad.reshape(r.grad.shape), r.grad, 1e-3, 1e-4):
                bad.append(f"a parameter gradient differs by up to {_maxerr(p.grad.reshape(r.grad.shape), r.grad):.3g}")
        if bad:
            text = "; ".join(bad)
            self.c.add("gradient_mismatch", text[:1].upper() + text[1:] + ".", where)
        else:
            self.c.checks.append(f"gradients, {where}")


def _reference_name(reference) -> str:
    name = reference if isinstance(reference, str) else getattr(reference, "__name__", None)
    if name is None and isinstance(reference, nn.Module):
        name = type(reference).__name__
    if name not in _KIND:
        raise ValueError(f"reference must be one of torch.nn.{', torch.nn.'.join(_KIND)}; got {reference!r}")
    return name


def grade(candidate: Callable, reference, *, seed: int = 0, rtol: float = 1e-4, atol: float = 1e-4,
          num_groups: int = 2) -> Report:
    """Compare ``candidate`` (a class or a function of x) with the torch.nn layer ``reference``.

    Returns a :class:`Report`; ``report.ok`` is True when nothing differs.  Never raises
    because of the candidate's code (an unknown ``reference`` is a ValueError).

    ``num_groups`` is only used for a plain GroupNorm function that takes no group argument.
    """
    name = _reference_name(reference)
    g = _Grader(candidate, name, seed, rtol, atol, num_groups)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            g.run()
    except Exception as exc:  # a bug in the grader must still not surface as a traceback
        g.c.add("grader_error", f"{_fmt_exc(exc)}\n{traceback.format_exc(limit=-3)}")
    cand_name = getattr(g, "cand_name", getattr(candidate, "__name__", repr(candidate)[:60]))
    return Report(candidate=cand_name, reference=f"torch.nn.{name}", problems=list(g.c.problems.values()),
                  notes=g.c.notes, checks=g.c.checks)
