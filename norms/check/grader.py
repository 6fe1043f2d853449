"""The grader: runs the candidate and the reference side by side, scenario by scenario."""

from __future__ import annotations

import functools
import inspect
import traceback
from collections.abc import Callable

import torch
from torch import nn

from norms.i18n import forms, tr

from .copying import Uncopyable, copy_module
from .diagnosis import Diagnosis
from .helpers import close, fmt_exc, is_number, lowered, resolve, same
from .hypotheses import Spec
from .inspection import EPS_NAMES, find_affine, find_eps, find_running
from .problems import Abort, Collector
from .report import Report
from .running_stats import RunningStatsChecks
from .sandbox import (
    CHILD_PROCESS,
    CannotFork,
    ChildEnded,
    Guard,
    TimedOut,
    in_child,
    time_limit,
)
from .scenarios import (
    KIND,
    SCENARIOS,
    ClassRun,
    build_reference,
    call_str,
    make_input,
    reference_name,
)
from .structure import StructureChecks
from .tracing import explain_crash, reductions


class Grader(StructureChecks, RunningStatsChecks, Diagnosis):
    def __init__(
        self,
        candidate,
        reference,
        seed,
        rtol,
        atol,
        num_groups,
        ref_kw=None,
        guard=None,
    ):
        self.candidate = candidate
        self.guard = guard if guard is not None else Guard()
        self.ref_name = reference
        self.ref_kw = dict(ref_kw or {})  # keywords of a functools.partial reference
        self.seed = seed
        self.rtol, self.atol = rtol, atol
        self.num_groups = num_groups
        self.kind = KIND[reference]
        self.c = Collector(self.kind)
        self.passed: list = []  # training input shapes on which the output matched
        self.failed: list = []

    def shape_hint(self):
        if not (self.passed and self.failed):
            return
        for code in ("wrong_dims", "wrong_groups", "output_mismatch"):
            p = self.c.problems.get(code)
            if p is not None and "right for" not in forms(p.detail)["en"]:
                p.detail = p.detail + tr(
                    " The output was right for input {passed} but not for {failed}: look for "
                    "code that is right only for particular shapes (a hard-coded reshape, or a "
                    "dim index that coincides for that shape).",
                    passed=self.passed[0],
                    failed=self.failed[0],
                )

    # -- calling the reader's code ------------------------------------------------
    def call(self, fn, *args, what, where, trace=None, crash="forward_failed", **kw):
        """Call the reader's code; a crash becomes the problem ``crash``, ``what`` (a
        :func:`~norms.i18n.tr` text) saying which call it was.  ``trace = (fn, x, spec)``
        re-runs a crashed forward to see which dims its statistics were taken over."""
        try:
            return self.guard.call(fn, *args, **kw)
        except SystemExit as exc:  # sys.exit() in the reader's code: reported, never raised
            self.c.add(
                "exited",
                tr("{what} called sys.exit({code})", what=what, code=repr(exc.code)),
                where,
            )
            raise Abort from None
        except Exception as exc:  # the reader's code may raise anything
            self.c.add(crash, tr("{what} raised {error}", what=what, error=fmt_exc(exc)), where)
            if trace is not None:
                self.explain_crash(*trace, where)
            raise Abort from None

    def guarded(self, fn):
        """``fn`` (the reader's code) called through the guard: what it replaces in torch is
        put back after every call."""
        return functools.partial(self.guard.call, fn)

    def explain_crash(self, fn, x, spec, where):
        correct = spec.dims(tuple(x.shape))
        text = explain_crash(
            reductions(fn, x.detach().clone()),
            correct,
            tuple(x.shape),
            f"torch.nn.{spec.name}",
        )
        if text:
            self.c.add("wrong_dims", text, where)

    def check_output(self, y, x, where):
        if not isinstance(y, torch.Tensor):
            self.c.add(
                "wrong_type",
                tr("The output is a {type}, not a torch.Tensor.", type=type(y).__name__),
                where,
            )
            raise Abort
        if tuple(y.shape) != tuple(x.shape):
            self.c.add(
                "wrong_shape",
                tr(
                    "For an input of shape {shape} the output has shape {got}.",
                    shape=tuple(x.shape),
                    got=tuple(y.shape),
                ),
                where,
            )
            raise Abort
        if y.dtype != x.dtype:
            self.c.add(
                "wrong_dtype",
                tr(
                    "For a {dtype} input the output is {got}.",
                    dtype=x.dtype,
                    got=y.dtype,
                ),
                where,
            )

    # -- entry ----------------------------------------------------------------------
    def run(self):
        cand = self.candidate
        if isinstance(cand, nn.Module):
            self.c.note(
                tr(
                    "grade() got an instance; grading its class {name} instead.",
                    name=type(cand).__name__,
                )
            )
            cand = self.candidate = type(cand)
        if inspect.isclass(cand) or (
            isinstance(cand, functools.partial) and inspect.isclass(cand.func)
        ):
            self.cand_name = cand.__name__ if inspect.isclass(cand) else cand.func.__name__
            for sc in SCENARIOS[self.ref_name]:
                if sc.optional and self.c.problems:
                    continue  # fix the basics first
                self.scenario(self.run_class_scenario, sc)
                if any(k in self.c.problems for k in ("constructor_failed", "not_a_module")):
                    break
            self.shape_hint()
        elif callable(cand):
            self.cand_name = getattr(cand, "__name__", type(cand).__name__)
            for sc in SCENARIOS[self.ref_name]:
                if sc.optional and self.c.problems:
                    continue
                self.scenario(self.run_function_scenario, sc)
            self.shape_hint()
        else:
            self.cand_name = repr(cand)[:60]
            self.c.add(
                "not_gradeable",
                tr(
                    "Got {type}, which is neither a class nor a function.",
                    type=type(cand).__name__,
                ),
            )

    def scenario(self, runner, sc):
        """Run one scenario; findings of an optional one (a tuple normalized_shape) become notes."""
        main = self.c
        if sc.optional:
            self.c = Collector(self.kind)
        try:
            runner(sc)
        except Abort:
            pass
        finally:
            if sc.optional:
                opt, self.c = self.c, main
                main.checks.extend(opt.checks)
                for p in opt.problems.values():
                    main.note(
                        tr(
                            "With a tuple normalized_shape {shape} (torch allows it, the book "
                            "does not need it): {title}. {detail}",
                            shape=sc.args[0],
                            title=lowered(p.title),
                            detail=p.detail,
                        )
                    )

    # -- plain functions --------------------------------------------------------------
    def function_args(self, spec):
        try:
            params = list(inspect.signature(self.candidate).parameters.values())
        except (TypeError, ValueError):
            params = []
        eps = "missing"
        kw, pos = {}, []
        required = [
            p
            for p in params[1:]
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        for p in params:
            if p.name.lower() in EPS_NAMES and is_number(p.default):
                eps = p.default
            elif p.name in ("running_mean", "running_var") and p.default is inspect.Parameter.empty:
                kw[p.name] = None  # functional APIs like torch.nn.functional.batch_norm
            elif p.name == "training":
                kw[p.name] = True
        required = [p for p in required if p.name not in kw]
        if spec.kind == "group":
            names = [
                p
                for p in params
                if p.name.lower() in ("num_groups", "groups", "g", "n_groups", "num_group")
            ]
            if names:
                kw[names[0].name] = spec.groups
            elif required:
                pos.append(spec.groups)
        elif spec.kind in ("layer", "rms"):
            names = [
                p
                for p in params
                if p.name.lower() in ("normalized_shape", "shape", "dim", "dims", "d")
            ]
            if names:
                kw[names[0].name] = spec.args[0]
            elif required:
                pos.append(spec.args[0])
        return pos, kw, eps

    def shape_argument(self, sc, size, pos, kw, shape_arg):
        """An int or a tuple normalized_shape? The first the function accepts (positional
        ``pos`` or the keyword ``shape_arg``)."""
        probe = torch.zeros(sc.train[0])
        for variant in (size, (size,)):
            p2 = [variant] if pos else []
            k2 = dict(kw, **({shape_arg[0]: variant} if shape_arg else {}))
            try:
                self.guard.call(self.candidate, probe, *p2, **k2)
            except Exception:
                continue
            return p2, k2
        return pos, kw

    def run_function_scenario(self, sc):
        """One scenario of a plain function, compared with torch's layer in training mode."""
        args = sc.args
        if self.ref_name == "GroupNorm":
            args = (self.num_groups, sc.args[1])
        spec = Spec(self.ref_name, args)
        pos, kw, eps = self.function_args(spec)
        shape_arg = [
            n for n in kw if n.lower() in ("normalized_shape", "shape", "dim", "dims", "d")
        ]
        if (
            spec.kind in ("layer", "rms")
            and not pos
            and not shape_arg
            and not isinstance(args[0], int)
        ):
            return  # f(x) cannot be told to normalize several trailing dims
        if spec.kind in ("layer", "rms") and isinstance(args[0], int) and (pos or shape_arg):
            pos, kw = self.shape_argument(sc, args[0], pos, kw, shape_arg)
        ref = build_reference(
            self.ref_name, args, affine=False, eps=eps, momentum="missing", track=False
        )
        ref.train()
        ref_eps = ref.eps if ref.eps is not None else torch.finfo(torch.float32).eps
        gen = torch.Generator().manual_seed(self.seed)
        for step, shape in enumerate(sc.train + sc.eval):
            where = tr("shape {shape}", shape=shape)
            x = make_input(gen, shape, step)
            xc = x.clone().requires_grad_(True)
            xr = x.clone().requires_grad_(True)
            try:
                y = self.call(
                    self.candidate,
                    xc,
                    *pos,
                    what=tr("calling the function"),
                    where=where,
                    trace=(
                        self.guarded(lambda x: self.candidate(x, *pos, **kw)),
                        x,
                        spec,
                    ),
                    **kw,
                )
                self.check_output(y, x, where)
            except Abort:
                continue
            yr = ref(xr)
            if close(y, yr, self.rtol, self.atol):
                self.passed.append(shape)
                self.c.checks.append(tr("output on {shape}", shape=shape))
                if step == 0:
                    self.check_gradients(y, yr, xc, xr, [], where, gen, ref, spec)
            else:
                self.failed.append(shape)
                self.explain_mismatch(
                    y,
                    x,
                    spec,
                    ref_eps,
                    None,
                    None,
                    where,
                    yr,
                    probe=self.guarded(lambda x: self.candidate(x, *pos, **kw)),
                )
        if spec.center:
            self.check_cancellation(
                self.guarded(lambda x: self.candidate(x, *pos, **kw)),
                sc.train[0],
                tr("shape {shape}", shape=sc.train[0]),
            )

    # -- classes ----------------------------------------------------------------------
    def build(self, args, where):
        # a functools.partial candidate is configured already: build it as given
        kw = {} if isinstance(self.candidate, functools.partial) else self.ref_kw
        m = self.call(
            self.candidate,
            *args,
            what=tr("constructor"),
            where=where,
            crash="constructor_failed",
            **kw,
        )
        if not isinstance(m, nn.Module):
            self.c.add(
                "not_a_module",
                tr(
                    "{name} instances are {type} objects.",
                    name=self.cand_name,
                    type=type(m).__name__,
                ),
            )
            raise Abort
        return m

    def run_class_scenario(self, sc):
        """One scenario of a class candidate, in named phases that pass a :class:`ClassRun`."""
        run = self.inspect_module(sc)
        run.created = self.probe_forward(sc, run.spec, run.call)
        self.structure_problems(run)
        self.build_matching_reference(run)
        self.set_parameters(run)
        if run.running_kind and run.running:
            self.check_running_init(run.module, run.ref, run.running, run.call)
        self.call(run.module.train, what=tr("calling .train()"), where=run.call)
        run.ref.train()
        failed_before = len(self.failed)
        for step, shape in enumerate(sc.train):
            self.train_step(run, step, shape)
        try:
            self.call(run.module.eval, what=tr("calling .eval()"), where=run.call)
        except Abort:
            return
        run.ref.eval()
        run.train_failed = len(self.failed) > failed_before
        for k, shape in enumerate(sc.eval):
            self.eval_step(run, k, shape)
        # Both checks compare the candidate with itself, so they run whatever else is wrong:
        # every bug they can see is reported in one run.
        if run.running_kind:
            self.check_mode_source(run.module, sc, run.call, run.gen)
        if run.spec.center:
            m = run.module
            self.check_cancellation(
                self.guarded(lambda x: copy_module(m).train()(x)),
                sc.train[0],
                tr("training, {call}, input {shape}", call=run.call, shape=sc.train[0]),
            )

    def inspect_module(self, sc) -> ClassRun:
        """Build the candidate and find its parameters, eps, momentum and running statistics."""
        spec = Spec(self.ref_name, sc.args)
        call = call_str(self.cand_name, sc.args, self.ref_kw)
        m = self.build(sc.args, call)
        scale, shift, wrong, plain = self.guard.call(find_affine, m, spec)
        eps_name, eps = self.guard.call(find_eps, m)
        momentum = self.guard.call(getattr, m, "momentum", "missing")
        if not (momentum is None or is_number(momentum)):
            momentum = "missing"
        ref_default = build_reference(
            self.ref_name,
            sc.args,
            affine=True if spec.kind not in ("instance",) else False,
            eps="missing",
            momentum="missing",
            track=spec.kind == "batch",
            fixed=self.ref_kw,
        )
        run = ClassRun(
            sc=sc,
            spec=spec,
            call=call,
            module=m,
            scale=scale,
            shift=shift,
            wrong=wrong,
            plain=plain,
            eps=eps,
            momentum=momentum,
            ref_params={n for n, _ in ref_default.named_parameters()},
            wants_affine=any(True for _ in ref_default.parameters()),
            running_kind=spec.kind == "batch" and ref_default.track_running_stats,
        )
        if spec.kind in ("batch", "instance"):
            running = self.guard.call(find_running, m, spec, {n for n in (scale, shift) if n})
            if spec.kind == "instance" and running and self.ref_kw.get("track_running_stats", True):
                run.running_kind = True
            if run.running_kind:
                run.running = running
        return run

    def build_matching_reference(self, run: ClassRun) -> None:
        """torch's layer with the candidate's settings (eps, momentum, affine, running
        statistics); a scale or shift that torch's layer does not have is left out of the
        comparison, with a problem that says so."""
        spec, sc = run.spec, run.sc
        affine = run.scale is not None or run.shift is not None
        if spec.kind in ("layer", "rms", "group", "batch"):
            affine = affine or run.wants_affine
        ref = build_reference(
            self.ref_name,
            sc.args,
            affine=affine,
            eps=run.eps,
            momentum=run.momentum,
            track=run.running_kind,
            fixed=self.ref_kw,
        )
        run.ref = ref
        run.affine = getattr(ref, "weight", None) is not None
        run.ref_eps = ref.eps if ref.eps is not None else torch.finfo(torch.float32).eps
        run.gen = torch.Generator().manual_seed(self.seed * 1000 + len(sc.train))
        torch_call = call_str("torch.nn." + spec.name, sc.args, self.ref_kw)
        if getattr(ref, "bias", None) is None and run.shift is not None:
            why = (
                tr("RMSNorm only rescales: it has a scale γ and no shift β")
                if spec.kind == "rms"
                else tr("{call} has no bias", call=torch_call)
            )
            self.c.add(
                "extra_shift",
                tr(
                    "{name} has a shift parameter {param}; {why}. It was left at its initial "
                    "value for the comparison.",
                    name=self.cand_name,
                    param=repr(run.shift),
                    why=why,
                ),
                run.call,
            )
            run.shift = None
        if not run.affine and run.scale is not None:
            self.c.add(
                "extra_scale",
                tr(
                    "{name} has a scale parameter {param}; {call} has no learnable parameters. "
                    "It was left at its initial value for the comparison.",
                    name=self.cand_name,
                    param=repr(run.scale),
                    call=torch_call,
                ),
                run.call,
            )
            run.scale = None

    def set_parameters(self, run: ClassRun) -> None:
        """The same non-trivial γ and β in the candidate and in torch's layer."""
        spec, ref, m = run.spec, run.ref, run.module
        if run.affine:
            w = torch.rand(spec.param_shape(), generator=run.gen) + 0.5
            b = torch.randn(spec.param_shape(), generator=run.gen) * 0.5
            if run.scale is None:
                w = torch.ones(spec.param_shape())
            if run.shift is None:
                b = torch.zeros(spec.param_shape())
            with torch.no_grad():
                for name, value in ((run.scale, w), (run.shift, b)):
                    if name is not None:
                        p = resolve(m, name)
                        p.copy_(value.reshape(p.shape))
                ref.weight.copy_(w)
                if getattr(ref, "bias", None) is not None:
                    ref.bias.copy_(b)
                else:
                    b = None
            run.w, run.b = w, b
        run.pairs = [
            (n, r)
            for n, r in (
                (run.scale, ref.weight if run.affine else None),
                (run.shift, getattr(ref, "bias", None) if run.affine else None),
            )
            if n is not None and r is not None
        ]
        run.mom = ref.momentum if spec.kind in ("batch", "instance") else None

    def torch_running(self, run: ClassRun):
        """torch's running statistics before a step (float64 copies), or None."""
        if not (run.running_kind and run.running):
            return None
        return {
            "mean": run.ref.running_mean.double().clone(),
            "var": run.ref.running_var.double().clone(),
        }

    def train_step(self, run: ClassRun, step: int, shape) -> None:
        """One training step: the output, the gradients (first step) and the running
        statistics, each compared with torch's."""
        m, spec = run.module, run.spec
        where = tr("training, {call}, input {shape}", call=run.call, shape=shape)
        x = make_input(run.gen, shape, step)
        prev = self.read_running(m, run.running)
        prev_ref = self.torch_running(run)
        xc = x.clone().requires_grad_(True)
        xr = x.clone().requires_grad_(True)
        try:
            m_before = self.guard.call(copy_module, m)
            y = self.call(
                m,
                xc,
                what=tr("forward (training mode)"),
                where=where,
                trace=(self.guarded(lambda x, m=m_before: m.train()(x)), x, spec),
            )
            self.check_output(y, x, where)
        except Abort:
            self.failed.append(shape)
            return
        if run.running_kind and not run.running and step == 0:
            prev, prev_ref = self.running_created_in_forward(run, prev, prev_ref)
        yr = run.ref(xr)
        if close(y, yr, self.rtol, self.atol):
            self.passed.append(shape)
            self.c.checks.append(
                tr("training output, {call}, input {shape}", call=run.call, shape=shape)
            )
            if step == 0:
                pairs = [(n, resolve(m, n), r) for n, r in run.pairs]
                self.check_gradients(y, yr, xc, xr, pairs, where, run.gen, run.ref, spec)
        else:
            self.failed.append(shape)
            m_after = self.guard.call(copy_module, m)
            self.explain_mismatch(
                y,
                x,
                spec,
                run.ref_eps,
                run.w,
                run.b,
                where,
                yr,
                probe=self.guarded(lambda x, m=m_after: m.train()(x)),
            )
        if run.running_kind and run.running:
            self.check_running(run, prev, prev_ref, x, where)

    def running_created_in_forward(self, run: ClassRun, prev, prev_ref):
        """Running statistics created by the first forward pass (CS231n's bn_param dict, say):
        found, noted, and the checks start from torch's initial values."""
        m, spec = run.module, run.spec
        exclude = {n for n in (run.scale, run.shift) if n}
        run.running = self.guard.call(find_running, m, spec, exclude)
        if not run.running:
            return prev, prev_ref
        self.c.problems.pop("running_stats_missing", None)  # they exist after all
        self.c.note(
            tr(
                "Your running statistics appear only in the first forward pass; torch "
                "creates them in __init__ as zeros (running_mean) and ones "
                "(running_var), and the checks start from those values."
            )
        )
        zeros = torch.zeros(spec.channels, dtype=torch.float64)
        return {"mean": zeros, "var": torch.ones_like(zeros)}, self.torch_running(run)

    def eval_step(self, run: ClassRun, k: int, shape) -> None:
        """One forward in eval mode: the output compared with torch's, the running statistics
        left unchanged."""
        m = run.module
        where = tr("eval, {call}, input {shape}", call=run.call, shape=shape)
        x = make_input(run.gen, shape, k)
        prev = self.read_running(m, run.running)
        try:
            with torch.no_grad():
                y = self.call(m, x.clone(), what=tr("forward (eval mode)"), where=where)
            self.check_output(y, x, where)
        except Abort:
            return
        with torch.no_grad():
            yr = run.ref(x.clone())
        if run.running_kind and run.running:
            now = self.read_running(m, run.running)
            if any(not same(prev[k2], now[k2]) for k2 in prev if k2 in now):
                self.c.add(
                    "running_stats_updated_in_eval",
                    tr("The running statistics changed during a forward pass in eval mode."),
                    where,
                )
        if close(y, yr, self.rtol, self.atol):
            self.c.checks.append(
                tr("eval output, {call}, input {shape}", call=run.call, shape=shape)
            )
            return
        self.explain_eval_mismatch(y, x, yr, where, run)


def grade(
    candidate: Callable,
    reference,
    *,
    seed: int = 0,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    num_groups: int = 2,
    timeout: float | None = 300.0,
) -> Report:
    """Compare ``candidate`` (a class or a function of x) with the torch.nn layer ``reference``.

    ``reference`` is a torch.nn class (``torch.nn.BatchNorm2d``) or a ``functools.partial``
    of one with keyword arguments (``partial(torch.nn.LayerNorm, bias=False)``,
    ``partial(torch.nn.BatchNorm1d, momentum=0.3, track_running_stats=False)``); a class
    candidate is then built with the same keywords.

    Returns a :class:`Report`; ``report.ok`` is True when nothing differs.  Never raises
    because of the candidate's code (an unknown ``reference`` or keyword is a ValueError).

    ``num_groups`` is only used for a plain GroupNorm function that takes no group argument.

    Isolation: on Linux (Colab, most notebooks) the grading runs in a forked child process
    (a notebook's classes need not be importable), which is killed when ``timeout`` seconds
    (``None``: no limit) and a grace of two seconds have passed: the limit holds against code
    that loops while catching the alarm, cancels the timer, ignores the signal or runs one
    long C++ operation, and nothing the candidate does (``os._exit()`` included) reaches this
    process. Elsewhere it runs in this process, limited by a repeating ``SIGALRM`` timer (main
    thread of macOS; no limit on Windows), which stops Python code that does not cancel it.
    Either way the candidate runs on copies of any module it is given, and after every call
    into its code the grader puts back torch's global settings (default dtype, grad mode,
    threads, deterministic algorithms, anomaly detection; the random state at the end) and
    every attribute of ``torch``, ``torch.nn``, ``torch.nn.functional``, ``torch.Tensor``,
    the reference layers, ``builtins``, ``math`` and ``norms.check`` itself; it compares with
    its own references to ``torch.allclose`` and the like, so a candidate that replaces them
    cannot pass. ``sys.exit()``, the time limit and a crash become problems in the report.
    What it cannot undo (in this process): changes the candidate makes elsewhere (files,
    other modules, global variables of the notebook).
    """
    name, ref_kw = reference_name(reference)
    cand_name = _candidate_name(candidate)

    def work():
        return _grade_here(candidate, name, ref_kw, seed, rtol, atol, num_groups, timeout)

    if not CHILD_PROCESS:
        return work()
    problems = Collector(KIND[name])
    try:
        return in_child(work, timeout)
    except CannotFork:
        return work()
    except TimedOut:
        problems.add("timed_out", _timed_out(cand_name, timeout))
    except ChildEnded as exc:
        problems.add(
            "crashed",
            tr(
                "The process grading {name} ended ({status}) before it could report.",
                name=cand_name,
                status=exc.status,
            ),
        )
    except Exception as exc:  # a bug in the grader must still not surface as a traceback
        problems.add("grader_error", fmt_exc(exc))
    return _report(cand_name, name, ref_kw, problems)


def _candidate_name(candidate) -> str:
    if isinstance(candidate, nn.Module):
        candidate = type(candidate)
    if isinstance(candidate, functools.partial):
        candidate = candidate.func
    return getattr(candidate, "__name__", None) or repr(candidate)[:60]


def _timed_out(cand_name, timeout) -> str:
    return tr(
        "{name} did not finish in {timeout:g} s: grading stopped it there.",
        name=cand_name,
        timeout=timeout,
    )


def _report(cand_name, name, ref_kw, c: Collector) -> Report:
    return Report(
        candidate=cand_name,
        reference=call_str(f"torch.nn.{name}", (), ref_kw) if ref_kw else f"torch.nn.{name}",
        problems=list(c.problems.values()),
        notes=c.notes,
        checks=c.checks,
    )


def _grade_here(candidate, name, ref_kw, seed, rtol, atol, num_groups, timeout) -> Report:
    """Grade in this process: the reader's code under a :class:`Guard` and :func:`time_limit`."""
    cand_name = _candidate_name(candidate)
    guard = Guard()
    g = Grader(candidate, name, seed, rtol, atol, num_groups, ref_kw, guard)
    try:
        try:
            with time_limit(timeout), torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                g.run()
        finally:
            guard.restore()
    except TimedOut:
        g.c.add("timed_out", _timed_out(getattr(g, "cand_name", cand_name), timeout))
    except SystemExit as exc:  # raised outside a guarded call: still reported, never raised
        g.c.add("exited", tr("your code called sys.exit({code})", code=repr(exc.code)))
    except Uncopyable as exc:
        g.c.add(
            "not_copyable",
            tr("copy.deepcopy of your module raised {error}", error=str(exc)),
        )
    except Exception as exc:  # a bug in the grader must still not surface as a traceback
        g.c.add("grader_error", fmt_exc(exc) + "\n" + traceback.format_exc(limit=-3))
    return _report(getattr(g, "cand_name", cand_name), name, ref_kw, g.c)
