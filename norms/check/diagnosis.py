"""Naming the bug behind a mismatch: outputs, eval mode, gradients, cancellation."""

from __future__ import annotations

import dataclasses
import math

import torch

from norms.i18n import Text, join, tr

from .copying import copy_module
from .explanations import explain
from .helpers import close, f64, fmt_exc, isfinite, isnan, maxerr, nonzero
from .hypotheses import EPS_GUESSES, diagnose, hypothesis_output, standardize
from .scenarios import ClassRun, make_input
from .tracing import layout

#: problems that say the output is no normalization at all: the checks that compare the
#: candidate with itself (a large mean) have nothing to add
_NOT_NORMALIZING = (
    "no_mean_subtraction",
    "output_nan",
    "output_is_input",
    "output_ignores_input",
)


class Diagnosis:
    """Mixed into :class:`norms.check.grader.Grader`. Reads only the grader's settings for the
    whole run (``c``, ``guard``, ``seed``, ``rtol``, ``atol``, ``candidate``, ``ref_kw``);
    what one scenario found comes in as arguments (a :class:`~norms.check.scenarios.ClassRun`)
    and the checks write nothing on the grader but problems, notes and checks."""

    # -- diagnosis -----------------------------------------------------------------------------
    def explain_mismatch(self, y, x, spec, eps, w, b, where, yr, probe=None):
        """``probe(x)`` runs the candidate again (on a copy, same mode) for inputs chosen to tell
        apart hypotheses that the first input cannot."""
        if self.nan_output(y, x, where, yr) or self.not_normalized(y, x, spec, w, b, where, probe):
            return
        h = diagnose(y, x, spec, eps, w, b, self.rtol, self.atol)
        if h is not None:
            told = True
            if h.eps_mode in ("outside", "none"):
                h, told = self.separate_eps(h, x, spec, eps, w, b, probe)
            form = None  # the layout matters where there is a channel dim
            if h.dims is not None and probe and spec.kind in ("batch", "instance", "group"):
                form = layout(probe, x.detach().clone())
            for code, detail in explain(h, spec, tuple(x.shape), eps, told, form):
                self.c.add(code, detail, where)
            return
        err = maxerr(y, yr)
        self.c.add(
            "output_mismatch",
            tr(
                "Output differs from torch's: max abs error {err:.3g} for an input of shape "
                "{shape}; no single known bug explains it.",
                err=err,
                shape=tuple(x.shape),
            ),
            where,
        )

    def nan_output(self, y, x, where, yr) -> bool:
        """An output with NaN (or inf) where torch's has none: named as such, with positions, and
        True (no hypothesis is tried: NaN matches every hypothesis that also gives NaN)."""
        shape = tuple(x.shape)
        y64 = f64(y)
        bad = ~isfinite(y64) & isfinite(f64(yr))
        if bool(bad.any()):
            nan, inf = bool(isnan(y64)[bad].any()), bool((~isnan(y64) & bad).any())
            what = tr("NaN or inf") if nan and inf else ("NaN" if nan else "inf")
            at = [tuple(int(i) for i in p) for p in nonzero(bad)[:3].tolist()]
            count = int(bad.sum())
            some = (
                tr("at {count} of {total} positions", count=count, total=bad.numel())
                if count < bad.numel()
                else tr("everywhere")
            )
            self.c.add(
                "output_nan",
                tr(
                    "Your output has {what} {some} for an input of shape {shape} (at {at}); "
                    "torch's output is finite there.",
                    what=what,
                    some=some,
                    shape=shape,
                    at=", ".join(map(str, at)) + (", ..." if count > len(at) else ""),
                ),
                where,
            )
            return True
        return False

    def not_normalized(self, y, x, spec, w, b, where, probe=None) -> bool:
        """The input itself (times γ plus β), or an output that does not depend on the input:
        named as such, and True (a constant or the input matches hypotheses only by accident).
        ``probe(x)`` runs the candidate again, on a copy."""
        shape = tuple(x.shape)
        y64, x64 = f64(y), f64(x)
        view = spec.param_view(shape)
        affine = x64
        if w is not None:
            affine = x64 * f64(w).reshape(view) + (f64(b).reshape(view) if b is not None else 0)
        if close(y64, x64, self.rtol, self.atol) or close(y64, affine, self.rtol, self.atol):
            what = tr("the input x itself") if close(y64, x64, self.rtol, self.atol) else "γ·x + β"
            self.c.add(
                "output_is_input",
                tr(
                    "For an input of shape {shape} your output is {what}: nothing was normalized.",
                    shape=shape,
                    what=what,
                ),
                where,
            )
            return True
        other = None
        if probe is not None:
            gen = torch.Generator().manual_seed(self.seed + 13)
            x2 = torch.randn(shape, generator=gen, dtype=x.dtype) * 3 + 2
            try:
                with torch.no_grad():
                    other = probe(x2)
            except Exception:
                other = None
            if not isinstance(other, torch.Tensor) or tuple(other.shape) != shape:
                other = None
        constant = y64.numel() > 1 and float(y64.max() - y64.min()) <= self.atol
        if (other is not None and close(other, y64, self.rtol, self.atol)) or constant:
            value = (
                tr(" ({value:.3g} everywhere)", value=float(y64.reshape(-1)[0])) if constant else ""
            )
            self.c.add(
                "output_ignores_input",
                tr(
                    "Your output does not depend on the input: it is the same{value} for two "
                    "different inputs of shape {shape}.",
                    value=value,
                    shape=shape,
                )
                if other is not None
                else tr(
                    "Your output is the same{value} for every element of an input of shape "
                    "{shape}.",
                    value=value,
                    shape=shape,
                ),
                where,
            )
            return True
        return False

    def separate_eps(self, h, x, spec, eps, w, b, probe):
        """eps outside the square root, or no eps at all?  With eps=1e-5 and a spread of 0.01 both
        change the output by less than the tolerance, and torch's RMSNorm default (float32's
        machine epsilon, 1.2e-7) makes them agree on almost any input.  An input whose spread is
        10·eps separates them: sqrt(var) + eps is then 10 % larger than sqrt(var).
        Returns (hypothesis, told_apart)."""
        other = dataclasses.replace(h, eps_mode="none" if h.eps_mode == "outside" else "outside")
        x64 = x.detach().double()
        args = (
            spec,
            eps,
            w.detach().double() if w is not None else None,
            b.detach().double() if b is not None else None,
        )
        if not close(
            hypothesis_output(h, x64, *args, {}),
            hypothesis_output(other, x64, *args, {}),
            self.rtol,
            self.atol,
        ):
            return h, True  # this input already tells them apart
        if probe is None:
            return h, False
        gen = torch.Generator().manual_seed(self.seed + 11)
        xp = torch.randn(tuple(x.shape), generator=gen, dtype=x.dtype) * (10 * eps)
        try:
            with torch.no_grad():
                yp = probe(xp)
        except Exception:
            return h, False
        if not isinstance(yp, torch.Tensor) or yp.shape != xp.shape:
            return h, False
        for cand in (h, other):
            if close(yp.double(), hypothesis_output(cand, xp.double(), *args, {}), 1e-3, 1e-3):
                return cand, True
        return h, False

    def check_cancellation(self, fn, shape, where):
        """The same input with and without an offset of 3000: a layer that subtracts the mean gives
        the same output for both (to about 1e-4 in float32).  E[x²] − E[x]² does not: at mean 3000
        x² ≈ 9e6, whose float32 spacing is 1, so every digit of a variance of 1 is lost.

        The candidate is compared with itself, so this runs whatever else is wrong with it
        (except a missing mean subtraction, which is not shift-invariant anyway)."""
        if any(c in self.c.problems for c in _NOT_NORMALIZING):
            return
        gen = torch.Generator().manual_seed(self.seed + 7)
        x = torch.randn(shape, generator=gen)
        # gradients on, as in an ordinary training step (a mode taken from them is another bug)
        try:
            with torch.enable_grad():
                y0 = fn(x.clone())
                y = fn(x + 3000.0)
        except Exception:
            return  # a crash here says nothing about the variance; the main loop reports crashes
        if (
            not (isinstance(y, torch.Tensor) and isinstance(y0, torch.Tensor))
            or y.shape != y0.shape
        ):
            return
        if close(y.double(), y0.double(), 1e-2, 1e-2):
            self.c.checks.append(tr("inputs with a large mean, {where}", where=where))
            return
        err = "NaN" if torch.isnan(y).any() else f"{maxerr(y.double(), y0.double()):.3g}"
        self.c.add(
            "variance_cancellation",
            tr(
                "Adding 3000 to a float32 input of standard deviation 1 (shape {shape}) changes "
                "your output by up to {err}; subtracting the mean should make the two outputs "
                "agree to about 1e-4, as torch's do. That is what E[x²] − E[x]² does.",
                shape=shape,
                err=err,
            ),
            where,
        )

    def explain_eval_mismatch(self, y, x, yr, where, run: ClassRun):
        """An eval-mode output that differs from torch's: named from the candidate's own running
        statistics, else from the batch statistics."""
        spec, eps, w, b = run.spec, run.ref_eps, run.w, run.b
        running, running_kind = run.running, run.running_kind
        if self.nan_output(y, x, where, yr):
            return
        if running_kind and running and self.uses_own_running(y, x, where, run):
            return
        if self.not_normalized(y, x, spec, w, b, where):
            return
        h = diagnose(y, x, spec, eps, w, b, self.rtol, self.atol, include_exact=running_kind)
        if running_kind and h is not None:
            self.c.add(
                "eval_uses_batch_stats",
                tr(
                    "In eval mode your output matches normalizing with the "
                    "statistics of the current batch."
                ),
                where,
            )
            for code, detail in explain(h, spec, tuple(x.shape), eps):
                self.c.add(code, detail, where)
            return
        if running_kind and not running:
            self.c.add(
                "running_stats_missing",
                tr(
                    "In eval mode the output matches no normalization with "
                    "batch statistics, and no running statistics were found."
                ),
                where,
            )
            return
        if h is not None:
            for code, detail in explain(h, spec, tuple(x.shape), eps):
                self.c.add(code, detail, where)
            return
        if not running_kind and run.train_failed:
            return  # no running statistics: the training-mode problems explain this too
        self.c.add(
            "eval_mismatch",
            tr(
                "Eval-mode output differs from torch's: max abs error {err:.3g} for an input of "
                "shape {shape}.",
                err=maxerr(y, yr),
                shape=tuple(x.shape),
            ),
            where,
        )

    def uses_own_running(self, y, x, where, run: ClassRun) -> bool:
        """Does the eval-mode output normalize with the candidate's own running statistics
        (with eps where it belongs, outside the square root, missing, or another value)? The
        problem found is added; True when the output is explained so."""
        now = self.read_running(run.module, run.running)
        if "mean" not in now or "var" not in now:
            return False
        eps, w, b = run.ref_eps, run.w, run.b
        x64, y64 = x.double(), y.detach().double()
        view = (1, -1) + (1,) * (x.dim() - 2)
        rm, rv = now["mean"].reshape(view), now["var"].reshape(view)
        wv = w.double().reshape(view) if w is not None else 1.0
        bv = b.double().reshape(view) if b is not None else 0.0
        tries = [
            ("inside", eps, None),
            ("outside", eps, "eps_outside_sqrt"),
            ("none", eps, "eps_missing"),
        ]
        tries += [
            ("inside", e, "eps_value")
            for e in EPS_GUESSES
            if not math.isclose(e, eps, rel_tol=0.05)
        ]
        for mode, e, code in tries:
            out = standardize(x64, rm, rv, e, mode) * wv + bv
            if not close(y64, out, self.rtol, self.atol):
                continue
            if code == "eps_value":
                self.c.add(
                    code,
                    tr(
                        "In eval mode your output matches eps={e:g} with your running "
                        "statistics, but the layer's eps is {eps:g}.",
                        e=e,
                        eps=eps,
                    ),
                    where,
                )
            elif code:
                desc = (
                    "(x - mean) / (sqrt(var) + eps)" if mode == "outside" else tr("no eps at all")
                )
                self.c.add(
                    code,
                    tr(
                        "In eval mode your output matches {desc} with your running statistics.",
                        desc=desc,
                    ),
                    where,
                )
            # uses its own running stats correctly: their problems are reported above
            return True
        return False

    def check_mode_source(self, m, sc, call, gen):
        """Mode must come from ``self.training``, never from ``torch.is_grad_enabled()`` (d2l's
        bug).

        The candidate is compared with itself: in eval mode with and without gradients, and in
        training mode with and without gradients (each on a fresh copy), so the check does not
        depend on the rest being right."""
        shape = sc.eval[0]
        x = make_input(gen, shape, 7)
        for mode in ("eval", "train"):
            outs = {}
            for grad in (False, True):

                def forward(grad=grad, mode=mode):
                    c = copy_module(m)
                    c.train(mode == "train")
                    with torch.set_grad_enabled(grad):
                        return c(x.clone().requires_grad_(grad))

                try:
                    outs[grad] = self.guard.call(forward)
                except Exception:
                    break  # crashes are reported by the main loop
            if len(outs) < 2 or not all(isinstance(o, torch.Tensor) for o in outs.values()):
                continue
            if not close(outs[False], outs[True], self.rtol, self.atol):
                self.c.add(
                    "mode_from_grad_enabled",
                    _differs_with_grad(mode, maxerr(outs[False], outs[True])),
                    tr("eval mode, {call}, input {shape}", call=call, shape=shape)
                    if mode == "eval"
                    else tr("train mode, {call}, input {shape}", call=call, shape=shape),
                )

    def check_gradients(self, y, yr, xc, xr, param_pairs, where, gen, ref=None, spec=None):
        """The input gradient and each parameter's (``param_pairs``: (name, the candidate's
        parameter, torch's)) after one backward; a wrong one is explained in its own terms."""
        g = torch.randn(y.shape, generator=gen)
        try:
            self.guard.call(y.backward, g)
        except Exception as exc:
            self.c.add(
                "backward_failed",
                tr("y.backward() raised {error}", error=fmt_exc(exc)),
                where,
            )
            return
        yr.backward(g)
        ok = True
        if xc.grad is None:
            ok = False
            self.c.add("gradient_mismatch", tr("The input gets no gradient."), where)
        elif not close(xc.grad, xr.grad, 1e-3, 1e-4):
            ok = False
            err = maxerr(xc.grad, xr.grad)
            fit = _backward_terms_fit(xr.detach(), g, xc.grad, ref) if ref is not None else None
            if fit is not None:
                self.c.add(
                    "backward_term",
                    tr(
                        "The input gradient differs by up to {err:.3g}: {fit}.",
                        err=err,
                        fit=fit,
                    ),
                    where,
                )
            else:
                self.c.add(
                    "gradient_mismatch",
                    tr("The input gradient differs by up to {err:.3g}.", err=err),
                    where,
                )
        for name, p, r in param_pairs:
            ok = self.check_param_gradient(name, p, r, xr, g, yr, where, ref, spec) and ok
        if ok:
            self.c.checks.append(tr("gradients, {where}", where=where))

    def check_param_gradient(self, name, p, r, xr, g, yr, where, ref, spec) -> bool:
        """The gradient of one of the candidate's parameters (``p``, named ``name``) against
        torch's (``r``); a wrong one is explained. True when it matches."""
        which = "weight" if r is getattr(ref, "weight", None) else "bias"
        label = "weight (γ)" if which == "weight" else "bias (β)"
        if p.grad is None:
            self.c.add(
                "param_gradient",
                tr(
                    "Your {label} {name} gets no gradient (None).",
                    label=label,
                    name=repr(name),
                ),
                where,
            )
            return False
        if not close(p.grad.reshape(r.grad.shape), r.grad, 1e-3, 1e-4):
            got = p.grad.reshape(r.grad.shape)
            err = maxerr(got, r.grad)
            fit = None
            if spec is not None:
                fit = _param_gradient_fit(which, got, xr.detach(), g, yr, ref, spec)
            text = (
                tr(
                    "The gradient of your {label} {name} differs by up to {err:.3g}: {fit}.",
                    label=label,
                    name=repr(name),
                    err=err,
                    fit=fit,
                )
                if fit
                else tr(
                    "The gradient of your {label} {name} differs by up to {err:.3g}.",
                    label=label,
                    name=repr(name),
                    err=err,
                )
            )
            self.c.add("param_gradient", text, where)
            return False
        return True


def _differs_with_grad(mode, err) -> Text:
    if mode == "eval":
        return tr(
            "In eval mode your output differs by {err:.3g} between torch.no_grad() and "
            "gradients enabled, for the same input and the same state.",
            err=err,
        )
    return tr(
        "In training mode your output differs by {err:.3g} between torch.no_grad() and "
        "gradients enabled, for the same input and the same state.",
        err=err,
    )


def _param_gradient_fit(which, got, x, dy, yr, ref, spec) -> str | None:
    """Which usual mistake gives the parameter gradient ``got`` (``which``: "weight" or "bias"):
    dγ = Σ dy·x̂ and dβ = Σ dy, summed over the elements that share a parameter. x̂ comes from
    torch's output, (y − β)/γ."""
    shape = tuple(x.shape)
    view = spec.param_view(shape)
    w = f64(ref.weight).reshape(view)
    b = f64(ref.bias).reshape(view) if getattr(ref, "bias", None) is not None else 0.0
    y = f64(yr)
    x_hat = (y - b) / w
    dy = f64(dy)
    keep = len(view) if spec.kind in ("layer", "rms") else None
    lead = tuple(range(len(shape) - keep)) if keep else (0, *range(2, len(shape)))
    count = math.prod(shape[d] for d in lead)

    def total(t):
        return t.sum(lead).reshape(got.shape)

    right = "Σ dy·x̂" if which == "weight" else "Σ dy"
    mean_instead = tr("a mean over the {count} elements instead of a sum", count=count)
    tries = {
        "weight": [
            (total(dy), tr("your gradient is Σ dy: the factor x̂ is missing")),
            (total(dy * x_hat) / count, mean_instead),
            (
                total(dy * f64(x)),
                tr("your gradient is Σ dy·x: it uses the input x instead of x̂"),
            ),
            (
                total(dy * y),
                tr("your gradient is Σ dy·y: it uses the output γ·x̂ + β instead of x̂"),
            ),
        ],
        "bias": [
            (total(dy * x_hat), tr("your gradient is Σ dy·x̂, which is the weight's")),
            (total(dy) / count, mean_instead),
        ],
    }[which]
    for want, said in tries:
        if close(got, want, 1e-3, 1e-4):
            return tr(
                "{said} (torch: {right} over the {count} elements that share each value)",
                said=said,
                right=right,
                count=count,
            )
    return None


#: the three terms of dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = γ·dy, as a reader knows them
_TERMS = (
    tr("the γ·dy/σ term"),
    tr("the mean-of-dy term (−mean(g)/σ)"),
    tr("the x̂·mean(dy·x̂) term (−x̂·mean(g·x̂)/σ)"),
)


def _backward_terms_fit(x, dy, dx, ref) -> str | None:
    """Name the term of a hand-written backward's input gradient that is missing or wrong.

    The three terms are :func:`norms.functional.normalization_backward` with two of its
    inputs zeroed (one formula, in one place), on the statistics of ``ref`` (a torch.nn
    layer in training mode) for ``x``; ``dx`` is fitted by least squares as
    ``a·T1 + b·T2 + c·T3``. Returns a sentence naming each coefficient that is not 1
    (0: the term is missing), or None when the fit does not explain ``dx`` (a mean over
    the wrong dims, say) or every coefficient is 1."""
    from norms.axes import describe
    from norms.functional import normalization_backward

    try:
        spec = describe(ref, tuple(x.shape))
    except Exception:
        return None
    x = x.double()
    idx = spec.statistic_index.reshape(-1)
    n = spec.elements_per_statistic

    def mean(t):  # the mean over the elements that share a statistic, broadcast back
        sums = torch.zeros(spec.num_statistics, dtype=t.dtype).index_add_(0, idx, t.reshape(-1))
        return (sums / n)[idx].reshape(t.shape)

    eps = ref.eps if ref.eps is not None else torch.finfo(torch.float32).eps
    xc = x - mean(x) if spec.has_mean else x
    rstd = 1 / torch.sqrt(mean(xc * xc) + eps)
    x_hat = xc * rstd
    g = dy.double()
    weight = getattr(ref, "weight", None)
    if weight is not None and spec.param_dims is not None:
        view = [x.shape[d] if d in spec.param_dims else 1 for d in range(x.dim())]
        g = g * weight.detach().double().reshape(view)
    zero = torch.zeros_like(g)
    terms = [normalization_backward(g, x_hat, rstd, None, zero)]  # rstd·g
    names = [_TERMS[0]]
    if spec.has_mean:
        terms.append(normalization_backward(zero, x_hat, rstd, mean(g), zero))  # −rstd·mean(g)
        names.append(_TERMS[1])
    terms.append(
        normalization_backward(zero, x_hat, rstd, None, mean(g * x_hat))
    )  # −rstd·x̂·mean(g·x̂)
    names.append(_TERMS[2])
    a = torch.stack([t.reshape(-1) for t in terms], 1)  # (elements, terms)
    b = dx.detach().double().reshape(-1, 1)
    coef = torch.linalg.lstsq(a, b).solution.reshape(-1)
    residual = (a @ coef[:, None] - b).norm() / b.norm().clamp_min(1e-12)
    if not torch.isfinite(coef).all() or residual > 1e-3:
        return None
    off = [(name, c) for name, c in zip(names, coef.tolist(), strict=True) if abs(c - 1) > 0.02]
    if not off:
        return None
    said = [
        tr("{term} is missing", term=name)
        if abs(c) < 0.02
        else tr("{term} has a factor {c:.3g} instead of 1", term=name, c=c)
        for name, c in off
    ]
    constant = len(off) == len(names) - 1 and all(abs(c) < 0.02 for _, c in off)
    if constant:  # only γ·dy/σ: the gradient of a layer whose statistics are constants
        said.append(
            tr(
                "that is the gradient of a layer whose statistics are constants (with autograd: "
                "the mean and variance were detached)"
            )
        )
    return tr(
        "your input gradient is the three-term formula dx = (g − mean(g) − x̂·mean(g·x̂))/σ "
        "(g = γ·dy, means over the elements that share a statistic) where {said}",
        said=join(said, tr("; ")),
    )
