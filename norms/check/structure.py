"""Checks on the candidate's structure: parameters, buffers, what forward creates or changes."""

from __future__ import annotations

import torch

from .helpers import fmt_exc, resolve, same
from .problems import Abort
from .scenarios import call_str, make_input


class StructureChecks:
    """Mixed into :class:`norms.check.grader._Grader`."""

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

    def structure_problems(
        self,
        m,
        spec,
        sc,
        scale,
        shift,
        wrong,
        plain,
        running,
        running_kind,
        wants_affine,
        created,
        where,
    ):
        call = call_str(self.cand_name, sc.args, self.ref_kw)
        if created:
            new, replaced = created
            if new or replaced:
                parts = []
                if new:
                    parts.append(
                        f"new parameter(s) {', '.join(new)} appeared after the first forward"
                    )
                if replaced:
                    parts.append(
                        f"parameter(s) {', '.join(replaced)} were replaced by new objects in "
                        "forward"
                    )
                text = "; ".join(parts)
                self.c.add("params_created_in_forward", text[:1].upper() + text[1:] + ".", call)
        created_any = bool(created and (created[0] or created[1]))
        for n, shp in wrong:
            self.c.add(
                "param_shape",
                f"{call} has parameter {n!r} of shape {shp}; torch.nn.{spec.name} "
                f"has weight/bias of shape {spec.param_shape()}.",
                call,
            )
        if plain:
            self.c.add(
                "params_not_registered",
                f"{', '.join('self.' + n for n in plain)} "
                f"{'is a plain tensor' if len(plain) == 1 else 'are plain tensors'}"
                " and not in model.parameters().",
                call,
            )
        if (
            wants_affine
            and (scale is None or shift is None)
            and not created_any
            and not wrong
            and not plain
        ):
            missing = []
            if scale is None:
                missing.append("scale (γ, initialized to ones)")
            if shift is None and "bias" in self.ref_params:
                missing.append("shift (β, initialized to zeros)")
            if missing:
                self.c.add(
                    "params_missing",
                    f"After {call} there is no parameter of shape "
                    f"{spec.param_shape()} for the {' or '.join(missing)}; "
                    f"torch.nn.{spec.name} has one.",
                    call,
                )
        if not running_kind:
            return
        if not running:
            if spec.kind == "batch":
                self.c.add(
                    "running_stats_missing",
                    f"After {call} no tensor of shape ({spec.channels},) "
                    "holding a running mean (zeros) or variance (ones) was found.",
                    call,
                )
            return
        for key in ("mean", "var"):
            if key not in running:
                self.c.add(
                    "running_stats_missing",
                    f"No running {key} (a tensor of shape ({spec.channels},) "
                    f"initialized to {'zeros' if key == 'mean' else 'ones'}) "
                    "was found.",
                    call,
                )
        kinds = {w for _, w in running.values()}
        names = [n for n, _ in running.values()]
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
        try:
            sd = self.guard.call(m.state_dict)
            absent = [n for n in names if n not in sd]
            if absent:
                issues.append(
                    f"the state_dict lacks {', '.join(absent)} (saving and loading the model loses "
                    "them)"
                )
        except Exception as exc:
            self.c.note(f"state_dict() raised {fmt_exc(exc)}")
        # does .to(float64) move them?
        try:
            m2 = self.guard.call(self.candidate, *sc.args, **self.ref_kw)
            self.guard.call(m2.to, torch.float64)
            stay = []
            for n, _ in running.values():
                t = resolve(m2, n)
                if isinstance(t, torch.Tensor) and t.dtype != torch.float64:
                    stay.append(n)
            if stay:
                issues.append(
                    f"model.to(torch.float64) leaves {', '.join(stay)} as {t.dtype} "
                    "(so .to('cuda') would not move them either)"
                )
        except Exception as exc:
            self.c.note(
                f"building a second instance and calling .to(torch.float64) raised {fmt_exc(exc)}"
            )
        if issues and "parameter" not in kinds:
            text = "; ".join(issues)
            self.c.add("running_stats_not_buffers", text[:1].upper() + text[1:] + ".", call)
