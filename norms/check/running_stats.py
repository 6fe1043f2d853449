"""Checks on running statistics, step by step against torch's."""

from __future__ import annotations

import torch

from .helpers import close, maxerr, resolve, same


class RunningStatsChecks:
    """Mixed into :class:`norms.check.grader._Grader`."""

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
            want = "zeros" if key == "mean" else "ones"
            vals = sorted({round(float(v), 4) for v in got[:4]})
            self.c.add(
                "running_stats_init",
                f"After {where} {name} holds {vals}...; torch starts running_{key} at {want}.",
                where,
            )

    def check_running(self, m, ref, running, prev, x, spec, mom, where, prev_ref=None):
        for _, (name, _) in running.items():
            try:
                t = resolve(m, name)
            except AttributeError:
                continue
            if isinstance(t, torch.Tensor) and (t.requires_grad or t.grad_fn is not None):
                self.c.add(
                    "running_stats_autograd",
                    f"After a training step {name} has requires_grad={t.requires_grad} and "
                    f"grad_fn={type(t.grad_fn).__name__ if t.grad_fn is not None else None}: "
                    "every step extends a graph that is never freed.",
                    where,
                )
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
            if close(got, refs[key], 1e-4, 1e-5):
                continue
            # hypotheses, from torch's previous value (so every step is judged against torch, and a
            # bug shows at every step, whatever the earlier ones did) ...
            batch = {"mean": {"unbiased": bm}, "var": {"unbiased": bvu, "biased": bvb}}[key]

            def fits(start, batch=batch, got=got):
                found = []
                for conv in ("torch", "keras"):
                    for vk, bs in batch.items():
                        exp = (
                            (1 - m_) * start + m_ * bs
                            if conv == "torch"
                            else m_ * start + (1 - m_) * bs
                        )
                        if close(got, exp, 1e-4, 1e-5):
                            found.append((conv, vk))
                return found

            matches = fits(prev_ref[key]) if prev_ref is not None and key in prev_ref else []
            name = running[key][0]
            if not matches:
                # ... then from its own previous value: a right update of a value that was already
                # wrong (a wrong start, or an earlier step) is not a new bug
                own = fits(old)
                if ("torch", "unbiased") in own:
                    if not any(
                        c in self.c.problems
                        for c in (
                            "running_stats_init",
                            "running_var_biased",
                            "momentum_convention",
                            "running_stats_mismatch",
                        )
                    ):
                        self.c.add(
                            "running_stats_mismatch",
                            f"{name} is updated the right way, but from a value that differs from "
                            f"torch's running_{key} by up to "
                            f"{maxerr(old, prev_ref[key]) if prev_ref else 0:.3g}.",
                            where,
                        )
                    continue
                matches = own
            if matches:
                conv, vk = matches[0]
                if conv == "keras":
                    self.c.add(
                        "momentum_convention",
                        f"{name} matches {m_:g}·old + {1 - m_:g}·batch, i.e. momentum weighs the "
                        f"old value; PyTorch computes {1 - m_:g}·old + {m_:g}·batch.",
                        where,
                    )
                if vk == "biased":
                    self.c.add(
                        "running_var_biased",
                        f"{name} matches an update with the biased batch variance (÷n, n={n}); "
                        "torch.nn uses the unbiased one (÷(n-1)) for running_var.",
                        where,
                    )
            elif same(got, old):
                self.c.add(
                    "running_stats_not_updated",
                    f"{name} did not change during a training step.",
                    where,
                )
            else:
                err = maxerr(got, refs[key])
                self.c.add(
                    "running_stats_mismatch",
                    f"After a training step {name} differs from torch's running_{key} by up to "
                    f"{err:.3g}.",
                    where,
                )
