"""Checks on the candidate's structure: parameters, buffers, what forward creates or changes."""

from __future__ import annotations

import torch

from .helpers import fmt_exc, resolve, same
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
                "After a forward pass the input tensor had different values.",
                f"input {tuple(x.shape)}",
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
                    f"After {run.call} no tensor of shape ({run.spec.channels},) "
                    "holding a running mean (zeros) or variance (ones) was found.",
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
            parts.append(f"new parameter(s) {', '.join(new)} appeared after the first forward")
        if replaced:
            parts.append(
                f"parameter(s) {', '.join(replaced)} were replaced by new objects in forward"
            )
        if parts:
            text = "; ".join(parts)
            self.c.add("params_created_in_forward", text[:1].upper() + text[1:] + ".", run.call)

    def parameter_problems(self, run: ClassRun) -> None:
        """γ and β: of the wrong shape, plain tensors, or missing."""
        spec, call = run.spec, run.call
        for n, shp in run.wrong:
            self.c.add(
                "param_shape",
                f"{call} has parameter {n!r} of shape {shp}; torch.nn.{spec.name} "
                f"has weight/bias of shape {spec.param_shape()}.",
                call,
            )
        plain = run.plain
        if plain:
            self.c.add(
                "params_not_registered",
                f"{', '.join('self.' + n for n in plain)} "
                f"{'is a plain tensor' if len(plain) == 1 else 'are plain tensors'}"
                " and not in model.parameters().",
                call,
            )
        created_any = bool(run.created and (run.created[0] or run.created[1]))
        if not run.wants_affine or created_any or run.wrong or plain:
            return
        missing = []
        if run.scale is None:
            missing.append("scale (γ, initialized to ones)")
        if run.shift is None and "bias" in run.ref_params:
            missing.append("shift (β, initialized to zeros)")
        if missing:
            self.c.add(
                "params_missing",
                f"After {call} there is no parameter of shape "
                f"{spec.param_shape()} for the {' or '.join(missing)}; "
                f"torch.nn.{spec.name} has one.",
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
                    f"No running {key} (a tensor of shape ({run.spec.channels},) "
                    f"initialized to {'zeros' if key == 'mean' else 'ones'}) "
                    "was found.",
                    call,
                )
        kinds = {w for _, w in running.values()}
        if "parameter" in kinds:
            self.c.add(
                "running_stats_parameters",
                f"{', '.join(n for n, w in running.values() if w == 'parameter')} "
                "are nn.Parameters, so an optimizer would change them and they get gradients.",
                call,
            )
        issues = []
        if "attribute" in kinds:
            issues.append(
                "they are plain attributes ("
                + ", ".join("self." + n for n, w in running.values() if w == "attribute")
                + ")"
            )
        issues += self.state_dict_issues(run) + self.device_issues(run)
        if issues and "parameter" not in kinds:
            text = "; ".join(issues)
            self.c.add("running_stats_not_buffers", text[:1].upper() + text[1:] + ".", call)

    def state_dict_issues(self, run: ClassRun) -> list:
        """Running statistics that ``state_dict()`` leaves out."""
        names = [n for n, _ in run.running.values()]
        try:
            sd = self.guard.call(run.module.state_dict)
        except Exception as exc:
            self.c.note(f"state_dict() raised {fmt_exc(exc)}")
            return []
        absent = [n for n in names if n not in sd]
        if not absent:
            return []
        return [
            f"the state_dict lacks {', '.join(absent)} (saving and loading the model loses them)"
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
                    f"model.to(torch.float64) leaves {', '.join(stay)} as {t.dtype} "
                    "(so .to('cuda') would not move them either)"
                ]
        except Exception as exc:
            self.c.note(
                f"building a second instance and calling .to(torch.float64) raised {fmt_exc(exc)}"
            )
        return []
