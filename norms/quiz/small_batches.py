"""Questions of the chapters on small batches and on normalizing the weights: Ghost BatchNorm's
chunks, Batch Renorm's corrections, FRN's output, weight norm's length, spectral norm's σ and
adaptive gradient clipping (every key computed with the layers of norms)."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.i18n import tr

from .builders import num, numeric


def q_ghost_chunks(rng, names=None):
    n = rng.choice([10, 12, 20, 33])
    vbs = rng.choice([4, 8, 16])
    m = modules.GhostBatchNorm2d(2, virtual_batch_size=vbs)
    m(torch.randn(n, 2, 3, 3, generator=torch.Generator().manual_seed(0)))
    value = int(m.num_batches_tracked)
    question = tr(
        "`GhostBatchNorm2d(C, virtual_batch_size={vbs})` in training mode gets one batch of "
        "{n} images. By how much does its `num_batches_tracked` grow?",
        vbs=vbs,
        n=n,
    )
    return numeric(
        question,
        float(value),
        dict(kind="ghost_chunks", n=n, vbs=vbs),
        correct_fb=tr(
            "Correct: ⌈{n}/{vbs}⌉ = {value} chunks, each one BatchNorm2d call that "
            "updates the running statistics once.",
            n=n,
            vbs=vbs,
            value=value,
        ),
        wrong=[
            (1.0, tr("That counts the batch; every chunk updates the statistics on its own.")),
            (float(n // vbs), tr("That drops the last, smaller chunk; it is normalized too.")),
            (float(n), tr("That counts the images; the statistics are updated once per chunk.")),
        ],
        default_fb=tr("Not quite: split the batch into chunks of the virtual batch size."),
    )


def q_renorm_r(rng, names=None):
    running_var = rng.choice([1.0, 4.0, 9.0])
    ratio = rng.choice([0.25, 0.5, 2.0, 5.0])
    r_max = rng.choice([2.0, 3.0])
    batch_var = running_var * ratio**2
    m = modules.BatchRenorm2d(1, eps=1e-12, r_max=r_max, affine=False, dtype=torch.float64)
    with torch.no_grad():
        m.running_var.fill_(running_var)
    # two values with mean 0 and biased variance batch_var
    x = torch.tensor([-1.0, 1.0], dtype=torch.float64).view(2, 1, 1, 1) * math.sqrt(batch_var)
    with torch.no_grad():
        y = m(x)
    value = round(float(y[1]), 6)  # = r (the batch mean is 0 = running mean, so d = 0)
    r = min(max(ratio, 1 / r_max), r_max)
    assert abs(value - r) < 1e-6
    question = tr(
        "`BatchRenorm2d(C, r_max={r_max:g})` in training mode (ε negligible) has running mean 0 "
        "and running variance {running_var:g} in one channel. The batch's values there have mean "
        "0 and biased variance {batch_var:g}. What is the correction r?",
        r_max=r_max,
        running_var=running_var,
        batch_var=batch_var,
    )
    return numeric(
        question,
        value,
        dict(kind="renorm_r", running_var=running_var, batch_var=batch_var, r_max=r_max),
        correct_fb=tr(
            "Correct: σ_B/σ = {s_b:g}/{s:g} = {ratio:g}, clipped to [1/{r_max:g}, {r_max:g}]: "
            "r = {r:g}.",
            s_b=math.sqrt(batch_var),
            s=math.sqrt(running_var),
            ratio=ratio,
            r_max=r_max,
            r=r,
        ),
        wrong=[
            (ratio, tr("That forgets the clipping to [1/r_max, r_max].")),
            (1 / ratio, tr("That is σ/σ_B, upside down.")),
            (ratio**2, tr("That compares variances, not standard deviations.")),
        ],
        tol=1e-3,
        default_fb=tr("Not quite: r = σ_B/σ, clipped to [1/r_max, r_max]."),
    )


def q_frn_value(rng, names=None):
    a = rng.choice([1.0, 2.0, 3.0])
    b = rng.choice([4.0, 5.0, 7.0])  # b ≠ a: then ν ≠ 1 and every wrong option differs
    tau = rng.choice([-0.5, 0.0, 0.5])
    vals = [a, -a, b, -b]  # one channel of one sample, 2 × 2 pixels
    m = modules.FilterResponseNorm2d(1, eps=1e-12, dtype=torch.float64)
    with torch.no_grad():
        m.tau.fill_(tau)
    x = torch.tensor(vals, dtype=torch.float64).view(1, 1, 2, 2)
    with torch.no_grad():
        value = round(float(m(x).flatten()[1]), 4)
    nu = math.sqrt((a * a + b * b) / 2)
    question = tr(
        "One channel of one sample has the 2 × 2 pixels {a:g}, −{a:g}, {b:g}, −{b:g}. "
        "`FilterResponseNorm2d` with γ = 1, β = 0, τ = {tau} and negligible ε: what does it "
        "output for the pixel −{a:g}?",
        a=a,
        b=b,
        tau=num(tau),
    )
    return numeric(
        question,
        value,
        dict(kind="frn_value", a=a, b=b, tau=tau),
        correct_fb=tr(
            "Correct: ν = √(mean of squares) = {nu:.4g}, so −{a:g}/ν = {scaled}, and the TLU "
            "keeps the larger of that and τ = {tau}: {value}.",
            nu=nu,
            a=a,
            scaled=num(-a / nu, ".4g"),
            tau=num(tau),
            value=num(value),
        ),
        wrong=[
            (round(-a / nu, 4), tr("That forgets the TLU: max(·, τ).")),
            (
                max(round(-a / nu, 4), 0.0),
                tr("That is the ReLU; the TLU's threshold is τ, not 0."),
            ),
            (-a, tr("That is the input itself: FRN first divides by ν, the root mean square.")),
            (tau, tr("That is τ; compare it with the normalized value and keep the larger.")),
        ],
        tol=1e-3,
        default_fb=tr(
            "Not quite: divide by the root mean square of the pixels (no mean "
            "subtracted), then take the maximum with τ."
        ),
    )


def q_weight_norm_g(rng, names=None):
    a, b = rng.choice([(3, 4), (5, 12), (8, 15), (6, 8)])
    with torch.random.fork_rng(devices=[]):  # Linear's initialization draws: leave the caller's
        lin = torch.nn.Linear(2, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[float(a), float(b)]], dtype=torch.float64))
    modules.weight_norm(lin)
    value = float(lin.parametrizations.weight.original0.detach().item())
    question = tr(
        "`norms.weight_norm` (dim=0) is applied to a Linear layer whose one row of weights is "
        "[{a}, {b}]. What is the length g it stores (`original0`)?",
        a=a,
        b=b,
    )
    return numeric(
        question,
        value,
        dict(kind="weight_norm_g", w=(a, b)),
        correct_fb=tr(
            "Correct: g = ‖w‖ = √({a}² + {b}²) = {value:g}, and v = w, so g·v/‖v‖ = w.",
            a=a,
            b=b,
            value=value,
        ),
        wrong=[
            (1.0, tr("g starts at the row's length, so that the weight is unchanged.")),
            (float(a + b), tr("That is the sum; the length is the Euclidean norm.")),
        ],
        tol=1e-3,
        default_fb=tr("Not quite: g is the Euclidean norm of the row."),
    )


def q_spectral_sigma(rng, names=None):
    s1, s2 = rng.choice([(3.0, 1.0), (2.0, 0.5), (5.0, 4.0), (4.0, 2.0)])
    w = torch.tensor([[s1, 0.0], [0.0, s2]], dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):  # the draws of Linear and of u, v: not the caller's
        torch.manual_seed(0)
        lin = torch.nn.Linear(2, 2, bias=False, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(w)
        modules.spectral_norm(lin, n_power_iterations=5)
    for _ in range(20):
        w_sn = lin.weight
    value = round(float(w_sn.detach()[1, 1]), 4)
    question = tr(
        "`norms.spectral_norm` is applied to a Linear layer with weight [[{s1:g}, 0], "
        "[0, {s2:g}]], and the power iteration has converged. What is the entry [1, 1] "
        "of the weight the layer uses?",
        s1=s1,
        s2=s2,
    )
    return numeric(
        question,
        value,
        dict(kind="spectral_sigma", s=(s1, s2)),
        correct_fb=tr(
            "Correct: σ(W) = {s1:g} (the largest singular value), so the entry is "
            "{s2:g}/{s1:g} = {entry:.4g}.",
            s1=s1,
            s2=s2,
            entry=s2 / s1,
        ),
        wrong=[
            (round(s2 / math.hypot(s1, s2), 4), tr("That divides by the Frobenius norm.")),
            (1.0, tr("Only the largest singular value becomes 1.")),
        ],
        tol=1e-3,
        default_fb=tr("Not quite: divide every entry by the largest singular value."),
    )


def q_agc_factor(rng, names=None):
    w_norm = rng.choice([2.0, 5.0, 10.0])  # never 1: the cap then differs from clip_factor
    g_norm = rng.choice([0.05, 0.2, 1.0])
    clip = rng.choice([0.01, 0.02, 0.1])
    p = torch.nn.Parameter(torch.tensor([[w_norm, 0.0]], dtype=torch.float64))
    p.grad = torch.tensor([[0.0, g_norm]], dtype=torch.float64)
    modules.adaptive_clip_grad_(p, clip_factor=clip)
    value = round(float(p.grad.norm()), 6)
    question = tr(
        "A unit (one row) of a weight matrix has norm {w_norm:g} and its gradient norm "
        "{g_norm:g}. What is the gradient's norm after `adaptive_clip_grad_(p, "
        "clip_factor={clip:g})`?",
        w_norm=w_norm,
        g_norm=g_norm,
        clip=clip,
    )
    return numeric(
        question,
        value,
        dict(kind="agc_factor", w_norm=w_norm, g_norm=g_norm, clip=clip),
        correct_fb=(
            tr(
                "Correct: the cap is {clip:g}·{w_norm:g} = {cap:g}; the gradient is scaled down "
                "to it.",
                clip=clip,
                w_norm=w_norm,
                cap=clip * w_norm,
            )
            if g_norm >= clip * w_norm
            else tr(
                "Correct: the cap is {clip:g}·{w_norm:g} = {cap:g}; the gradient is below it and "
                "stays.",
                clip=clip,
                w_norm=w_norm,
                cap=clip * w_norm,
            )
        ),
        wrong=[
            (clip * w_norm, tr("That is the cap itself; a gradient below it is left alone.")),
            (clip * g_norm, tr("The cap scales the weight's norm, not the gradient's.")),
            (g_norm, tr("Compare ‖g‖ with clip_factor·‖w‖ first.")),
            (clip, tr("That is the clip factor alone; the cap is clip_factor · ‖w‖.")),
            (w_norm, tr("That is ‖w‖ itself; the cap is clip_factor · ‖w‖.")),
        ],
        tol=1e-4,
        default_fb=tr("Not quite: the largest allowed ‖g‖ is clip_factor · max(‖w‖, 1e-3)."),
    )
