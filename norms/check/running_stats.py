"""Checks on running statistics, step by step against torch's."""

from __future__ import annotations

import torch

from norms.i18n import tr

from .helpers import close, maxerr, resolve, same
from .scenarios import ClassRun


class RunningStatsChecks:
    """Mixed into :class:`norms.check.grader.Grader`. Reads only the grader's settings for the
    whole run (``c``, ``guard``, ``seed``, ``rtol``, ``atol``, ``candidate``, ``ref_kw``);
    what one scenario found comes in as arguments (a :class:`~norms.check.scenarios.ClassRun`)
    and the checks write nothing on the grader but problems, notes and checks."""

    # -- running statistics ---------------------------------------------------------------
    def read_running(self, m, running):
        out = {}
        for key, (name, _) in running.items():
            try:
                t = resolve(m, name)
            except AttributeError:
                continue
            if isinstance(t, torch.Tensor):
                out[key] = t.detach().double().reshape(-1).clone()
        return out

    def check_running_init(self, m, ref, running, where):
        """Right after construction the running statistics must equal torch's (zeros, ones)."""
        now = self.read_running(m, running)
        refs = {"mean": ref.running_mean.double(), "var": ref.running_var.double()}
        for key, got in now.items():
            if got.shape != refs[key].shape or same(got, refs[key]):
                continue
            name = running[key][0]
            vals = sorted({round(float(v), 4) for v in got[:4]})
            self.c.add(
                "running_stats_init",
                tr(
                    "After {call} {name} holds {values}...; torch starts running_mean at zeros.",
                    call=where,
                    name=name,
                    values=vals,
                )
                if key == "mean"
                else tr(
                    "After {call} {name} holds {values}...; torch starts running_var at ones.",
                    call=where,
                    name=name,
                    values=vals,
                ),
                where,
            )

    def check_running(self, run: ClassRun, prev, prev_ref, x, where):
        """After a training step: the running statistics outside autograd, and each one equal to
        torch's, else named by the update rule it follows (``prev``: the candidate's before the
        step, ``prev_ref``: torch's)."""
        self.running_autograd_problems(run.module, run.running, where)
        now = self.read_running(run.module, run.running)
        refs = {
            "mean": run.ref.running_mean.double(),
            "var": run.ref.running_var.double(),
        }
        batch, n = _batch_statistics(x, run.spec)
        m_ = run.mom if run.mom is not None else 0.1
        for key in ("mean", "var"):
            if key not in now or key not in prev:
                continue
            got = now[key]
            if got.shape != refs[key].shape or close(got, refs[key], 1e-4, 1e-5):
                continue
            self.explain_running(
                run.running[key][0],
                key,
                got,
                prev[key],
                prev_ref,
                refs,
                batch[key],
                m_,
                n,
                where,
            )

    def running_autograd_problems(self, m, running, where):
        """Running statistics that require gradients or carry a graph."""
        for _, (name, _) in running.items():
            try:
                t = resolve(m, name)
            except AttributeError:
                continue
            if isinstance(t, torch.Tensor) and (t.requires_grad or t.grad_fn is not None):
                self.c.add(
                    "running_stats_autograd",
                    tr(
                        "After a training step {name} has requires_grad={requires_grad} and "
                        "grad_fn={grad_fn}: every step extends a graph that is never freed.",
                        name=name,
                        requires_grad=t.requires_grad,
                        grad_fn=type(t.grad_fn).__name__ if t.grad_fn is not None else None,
                    ),
                    where,
                )

    def explain_running(self, name, key, got, old, prev_ref, refs, batch, m_, n, where):
        """A running statistic ``got`` that differs from torch's: which update rule it follows."""
        # hypotheses, from torch's previous value (so every step is judged against torch, and a
        # bug shows at every step, whatever the earlier ones did) ...
        matches = (
            _fits(got, prev_ref[key], batch, m_) if prev_ref is not None and key in prev_ref else []
        )
        if not matches:
            # ... then from its own previous value: a right update of a value that was already
            # wrong (a wrong start, or an earlier step) is not a new bug
            own = _fits(got, old, batch, m_)
            if ("torch", "unbiased") in own:
                if not any(c in self.c.problems for c in _EARLIER_RUNNING_PROBLEMS):
                    self.c.add(
                        "running_stats_mismatch",
                        tr(
                            "{name} is updated the right way, but from a value that differs "
                            "from torch's running_{key} by up to {err:.3g}.",
                            name=name,
                            key=key,
                            err=maxerr(old, prev_ref[key]) if prev_ref else 0,
                        ),
                        where,
                    )
                return
            matches = own
        if matches:
            self.running_rule_problems(name, matches[0], m_, n, where)
        elif same(got, old):
            self.c.add(
                "running_stats_not_updated",
                tr("{name} did not change during a training step.", name=name),
                where,
            )
        else:
            self.c.add(
                "running_stats_mismatch",
                tr(
                    "After a training step {name} differs from torch's running_{key} by up to "
                    "{err:.3g}.",
                    name=name,
                    key=key,
                    err=maxerr(got, refs[key]),
                ),
                where,
            )

    def running_rule_problems(self, name, match, m_, n, where):
        """The update rule a running statistic follows: Keras's momentum, the biased variance."""
        conv, vk = match
        if conv == "keras":
            self.c.add(
                "momentum_convention",
                tr(
                    "{name} matches {m:g}·old + {rest:g}·batch, i.e. momentum weighs the old "
                    "value; PyTorch computes {rest:g}·old + {m:g}·batch.",
                    name=name,
                    m=m_,
                    rest=1 - m_,
                ),
                where,
            )
        if vk == "biased":
            self.c.add(
                "running_var_biased",
                tr(
                    "{name} matches an update with the biased batch variance (÷n, n={n}); "
                    "torch.nn uses the unbiased one (÷(n-1)) for running_var.",
                    name=name,
                    n=n,
                ),
                where,
            )


#: problems after which a right update of a wrong running value says nothing new
_EARLIER_RUNNING_PROBLEMS = (
    "running_stats_init",
    "running_var_biased",
    "momentum_convention",
    "running_stats_mismatch",
)


def _batch_statistics(x, spec):
    """The candidate statistics of the batch ``x`` an update may use, per key ("mean": the
    mean; "var": the unbiased and the biased variance), and the count n per statistic."""
    x64 = x.double()
    dims = spec.dims(tuple(x.shape))
    if spec.kind == "batch":
        bm = x64.mean(dims)
        n = x.numel() // x.shape[1]
        bvb = x64.var(dims, unbiased=False)
    else:  # instance norm with running stats: per-instance stats averaged over the batch
        n = x[0, 0].numel()
        bm = x64.mean(dims).mean(0)
        bvb = x64.var(dims, unbiased=False).mean(0)
    bvu = bvb * n / (n - 1) if n > 1 else bvb
    return {"mean": {"unbiased": bm}, "var": {"unbiased": bvu, "biased": bvb}}, n


def _fits(got, start, batch, m_):
    """The update rules (convention, variance) that take ``start`` to ``got``: torch's
    (1 − m)·old + m·batch or Keras's m·old + (1 − m)·batch, with each batch statistic."""
    found = []
    for conv in ("torch", "keras"):
        for vk, bs in batch.items():
            exp = (1 - m_) * start + m_ * bs if conv == "torch" else m_ * start + (1 - m_) * bs
            if close(got, exp, 1e-4, 1e-5):
                found.append((conv, vk))
    return found
