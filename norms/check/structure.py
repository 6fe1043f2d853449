"""Checks on the candidate's structure: parameters, buffers, what forward creates or changes."""

from __future__ import annotations

import torch

from norms.i18n import join, tr

from .helpers import fmt_exc, resolve, same, sentence
from .problems import Abort
from .scenarios import ClassRun, make_input


class StructureChecks:
    """Mixed into :class:`norms.check.grader.Grader`. Reads only the grader's settings for the
    whole run (``c``, ``guard``, ``seed``, ``rtol``, ``atol``, ``candidate``, ``ref_kw``);
    what one scenario found comes in as arguments (a :class:`~norms.check.scenarios.ClassRun`)
    and the checks write nothing on the grader but problems, notes and checks."""

    # -- structure checks -------------------------------------------------------------------
    def probe_forward(self, sc, spec, where):
        """Forward once on a fresh instance: which parameters appear/are replaced, is x modified?"""
        try:
            m = self.build(sc.args, where)
        except Abort:
            return None
        before = {n: p for n, p in m.named_parameters()}
        gen = torch.Generator().manual_seed(self.seed + 7)
        x = make_input(gen, sc.train[0], 0)
        x0 = x.clone()

        def forward():
            m.train()
            with torch.no_grad():
                m(x)

        try:
            self.guard.call(forward)
        except Exception:
            return None  # the main loop reports crashes
        if not same(x, x0):
            self.c.add(
                "modifies_input",
                tr("After a forward pass the input tensor had different values."),
                tr("input {shape}", shape=tuple(x.shape)),
            )
        after = {n: p for n, p in m.named_parameters()}
        new = [n for n in after if n not in before]
        replaced = [n for n in after if n in before and after[n] is not before[n]]
        return new, replaced

    def structure_problems(self, run: ClassRun) -> None:
        """What is wrong with the candidate's parameters and running statistics, before any
        output is compared."""
        self.created_problems(run)
        self.parameter_problems(run)
        if not run.running_kind:
            return
        if not run.running:
            if run.spec.kind == "batch":
                self.c.add(
                    "running_stats_missing",
                    tr(
                        "After {call} no tensor of shape ({channels},) holding a running mean "
                        "(zeros) or variance (ones) was found.",
                        call=run.call,
                        channels=run.spec.channels,
                    ),
                    run.call,
                )
            return
        self.running_structure_problems(run)

    def created_problems(self, run: ClassRun) -> None:
        """Parameters that the first forward pass created or replaced."""
        if not run.created:
            return
        new, replaced = run.created
        parts = []
        if new:
            parts.append(
                tr(
                    "new parameter(s) {names} appeared after the first forward",
                    names=", ".join(new),
                )
            )
        if replaced:
            parts.append(
                tr(
                    "parameter(s) {names} were replaced by new objects in forward",
                    names=", ".join(replaced),
                )
            )
        if parts:
            self.c.add("params_created_in_forward", sentence(parts), run.call)

    def parameter_problems(self, run: ClassRun) -> None:
        """γ and β: of the wrong shape, plain tensors, or missing."""
        spec, call = run.spec, run.call
        for n, shp in run.wrong:
            self.c.add(
                "param_shape",
                tr(
                    "{call} has parameter {name} of shape {shape}; torch.nn.{layer} has "
                    "weight/bias of shape {want}.",
                    call=call,
                    name=repr(n),
                    shape=shp,
                    layer=spec.name,
                    want=spec.param_shape(),
                ),
                call,
            )
        plain = run.plain
        if plain:
            self.c.add(
                "params_not_registered",
                tr(
                    "{names} is a plain tensor and not in model.parameters().",
                    names=", ".join("self." + n for n in plain),
                )
                if len(plain) == 1
                else tr(
                    "{names} are plain tensors and not in model.parameters().",
                    names=", ".join("self." + n for n in plain),
                ),
                call,
            )
        created_any = bool(run.created and (run.created[0] or run.created[1]))
        if not run.wants_affine or created_any or run.wrong or plain:
            return
        missing = []
        if run.scale is None:
            missing.append(tr("scale (γ, initialized to ones)"))
        if run.shift is None and "bias" in run.ref_params:
            missing.append(tr("shift (β, initialized to zeros)"))
        if missing:
            self.c.add(
                "params_missing",
                tr(
                    "After {call} there is no parameter of shape {shape} for the {missing}; "
                    "torch.nn.{layer} has one.",
                    call=call,
                    shape=spec.param_shape(),
                    missing=join(missing, tr(" or ")),
                    layer=spec.name,
                ),
                call,
            )

    def running_structure_problems(self, run: ClassRun) -> None:
        """Running statistics that are missing, parameters, plain attributes, absent from the
        state_dict, or left behind by ``.to()``."""
        running, call = run.running, run.call
        for key in ("mean", "var"):
            if key not in running:
                self.c.add(
                    "running_stats_missing",
                    tr(
                        "No running mean (a tensor of shape ({channels},) initialized to "
                        "zeros) was found.",
                        channels=run.spec.channels,
                    )
                    if key == "mean"
                    else tr(
                        "No running var (a tensor of shape ({channels},) initialized to "
                        "ones) was found.",
                        channels=run.spec.channels,
                    ),
                    call,
                )
        kinds = {w for _, w in running.values()}
        if "parameter" in kinds:
            self.c.add(
                "running_stats_parameters",
                tr(
                    "{names} are nn.Parameters, so an optimizer would change them and they get "
                    "gradients.",
                    names=", ".join(n for n, w in running.values() if w == "parameter"),
                ),
                call,
            )
        issues = []
        if "attribute" in kinds:
            issues.append(
                tr(
                    "they are plain attributes ({names})",
                    names=", ".join("self." + n for n, w in running.values() if w == "attribute"),
                )
            )
        issues += self.state_dict_issues(run) + self.device_issues(run)
        if issues and "parameter" not in kinds:
            self.c.add("running_stats_not_buffers", sentence(issues), call)

    def state_dict_issues(self, run: ClassRun) -> list:
        """Running statistics that ``state_dict()`` leaves out."""
        names = [n for n, _ in run.running.values()]
        try:
            sd = self.guard.call(run.module.state_dict)
        except Exception as exc:
            self.c.note(tr("state_dict() raised {error}", error=fmt_exc(exc)))
            return []
        absent = [n for n in names if n not in sd]
        if not absent:
            return []
        return [
            tr(
                "the state_dict lacks {names} (saving and loading the model loses them)",
                names=", ".join(absent),
            )
        ]

    def device_issues(self, run: ClassRun) -> list:
        """Running statistics that ``.to(torch.float64)`` does not move (a second instance)."""
        try:
            m2 = self.guard.call(self.candidate, *run.sc.args, **self.ref_kw)
            self.guard.call(m2.to, torch.float64)
            stay = []
            for n, _ in run.running.values():
                t = resolve(m2, n)
                if isinstance(t, torch.Tensor) and t.dtype != torch.float64:
                    stay.append(n)
            if stay:
                return [
                    tr(
                        "model.to(torch.float64) leaves {names} as {dtype} (so .to('cuda') would "
                        "not move them either)",
                        names=", ".join(stay),
                        dtype=t.dtype,
                    )
                ]
        except Exception as exc:
            self.c.note(
                tr(
                    "building a second instance and calling .to(torch.float64) raised {error}",
                    error=fmt_exc(exc),
                )
            )
        return []
