"""Questions of the 'Why normalize' chapter: depth, saturation, scale invariance (all computed)."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.i18n import tr

from .builders import choice, numeric
from .cases import make_module


def _relu_rate(c, gen, width=256, batch=256, depth=17):
    """Measured factor per layer of the std of the pre-activations of a plain ReLU MLP, weights
    N(0, (c/√width)²), no bias, no normalization: geometric mean over depth − 1 steps."""
    h = torch.randn(batch, width, generator=gen, dtype=torch.float64)
    stds = []
    for _ in range(depth):
        w = torch.randn(width, width, generator=gen, dtype=torch.float64) * (c / math.sqrt(width))
        z = h @ w.T
        stds.append(float(z.std()))
        h = torch.relu(z)
    return (stds[-1] / stds[0]) ** (1 / (depth - 1))


def q_relu_depth(rng, names=None):
    c = rng.choice([0.5, 1.0, 2.0, 3.0])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    rate = _relu_rate(c, gen)
    cands = [
        (
            math.sqrt(c * c / 2),
            tr(
                "Var[zₗ] = n σ² E[h²] and ReLU keeps half of a symmetric z, so E[h²] = Var[z]/2: "
                "the variance changes by nσ²/2 = c²/2 per layer and the std by its square root."
            ),
        ),
        (c, tr("that forgets that ReLU sets half of z to zero, which halves E[h²].")),
        (
            c * c / 2,
            tr(
                "that is the factor for the variance, nσ²/2 = c²/2; the std changes by its square "
                "root."
            ),
        ),
        (1.0, tr("the std stays constant only when nσ² = 2, i.e. c = √2 (He initialization).")),
        (c * c, tr("that is nσ², the variance factor of a linear layer without the ReLU.")),
    ]
    best = min(cands, key=lambda t: abs(t[0] - rate))[0]
    if (
        abs(best - rate) > 0.1 * best
    ):  # the measurement is within a few %; the other candidates are ≥ 29% away
        raise AssertionError(f"no candidate matches the measured rate {rate} for c = {c}")
    options = []
    for value, why in cands:
        ok = value == best
        fb = (
            tr(
                "Correct: {why} Measured on a {width}-wide network: {rate:.3f} per layer.",
                why=why,
                width=256,
                rate=rate,
            )
            if ok
            else tr("No: {why} The measured factor is {rate:.3f}.", why=why, rate=rate)
        )
        options.append((f"{value:.3g}", ok, fb, value))
    options.sort(key=lambda o: o[3])
    question = tr(
        "A plain MLP without normalization computes zₗ = Wₗ hₗ₋₁ and hₗ = ReLU(zₗ) (no "
        "bias), width n = 256, every weight drawn from N(0, σ²) with σ = c/√n and c = {c:g}. By "
        "what factor does the std of the pre-activations z change from one layer to the next?",
        c=c,
    )
    return choice(question, options, dict(kind="relu_depth", c=c, rate=rate))


def _saturation(seed, N, C, s, mu):
    z = torch.randn(N, C, generator=torch.Generator().manual_seed(seed)) * s + mu
    with torch.no_grad():
        zn = modules.BatchNorm1d(C).train()(z)
    return float((z.tanh().abs() > 0.99).float().mean()), float(
        (zn.tanh().abs() > 0.99).float().mean()
    )


def q_saturation(rng, names=None):
    N, C = rng.choice([1024, 2048]), rng.choice([8, 16])
    s, mu = rng.choice([3.0, 5.0, 10.0]), rng.choice([0.0, 1.0, -2.0])
    seed = rng.randrange(2**31)
    before, after = _saturation(seed, N, C, s, mu)

    def text(b, a):
        return tr("about {b:.0%} without normalization, {a:.1%} after it", b=b, a=a)

    share = (
        tr("most of z ({before:.1%})", before=before)
        if before > 0.5
        else tr("{before:.1%} of z", before=before)
    )
    options = [
        (
            text(before, after),
            True,
            tr(
                "Correct: with mean {mu:g} and std {s:g}, {share} lies beyond ±artanh(0.99) ≈ "
                "±2.65, where tanh is flat. BatchNorm rescales every unit to mean 0 and std 1, "
                "and a standard normal has only about 0.8% of its mass beyond ±2.65.",
                mu=mu,
                s=s,
                share=share,
            ),
            (before, after),
        ),
        (
            text(before, before),
            False,
            tr("No: the normalized z has std 1, so far fewer values reach the flat parts of tanh."),
            (before, before),
        ),
        (
            text(after, before),
            False,
            tr(
                "No: that is the wrong way round: the large std saturates, the normalized one "
                "hardly does."
            ),
            (after, before),
        ),
        (
            text(before, 0.0),
            False,
            tr(
                "No: normalization does not remove saturation entirely: a standard normal still "
                "has about 0.8% of its mass beyond artanh(0.99) ≈ 2.65."
            ),
            (before, 0.0),
        ),
    ]
    shift = "" if mu == 0 else f" {'+' if mu > 0 else '-'} {abs(mu):g}"
    code = (
        f"z = torch.randn({N}, {C}, "
        f"generator=torch.Generator().manual_seed({seed})) * {s:g}{shift}\n"
        f"z_bn = norms.BatchNorm1d({C})(z)   # training mode"
    )
    question = tr(
        "The pre-activations z of a tanh layer have mean {mu:g} and std {s:g} (below). What "
        "fraction of them is saturated, |tanh z| > 0.99, without normalization and after "
        "`norms.BatchNorm1d({C})`?",
        mu=mu,
        s=s,
        C=C,
    )
    return choice(
        question, options, dict(kind="saturation", seed=seed, N=N, C=C, s=s, mu=mu), code=code
    )


# "Ignore ε" in a question: BatchNorm refuses eps = 0 in training; 1e-30 added to any variance above
# ~1e-14 is lost in float64 rounding, so it changes nothing.
_NO_EPS = 1e-30


def _linear_then(norm_name, width):
    """(description, callable z -> output) for a layer after a linear map; eps = 0, float64."""
    if norm_name == "none":
        return tr("no normalization (just ReLU)"), torch.relu
    m = make_module(norm_name, (width,), {"eps": _NO_EPS}).double().train()
    return f"`norms.{norm_name}({width})`", m


def q_scale_invariance(rng, names=None):
    n_in, width, N = rng.choice([8, 16, 32]), rng.choice([4, 6, 8]), rng.choice([16, 32])
    a = rng.choice([0.25, 0.5, 4.0, 8.0])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    rows = torch.exp(
        torch.randn(width, 1, generator=gen, dtype=torch.float64)
    )  # a positive factor per row
    cases = [
        ("BatchNorm1d", "all"),
        ("LayerNorm", "all"),
        ("BatchNorm1d", "rows"),
        ("LayerNorm", "rows"),
        ("none", "all"),
    ]
    why = {
        ("BatchNorm1d", "all"): (
            tr("scaling W scales every unit's mean and std by a, which cancels."),
            "",
        ),
        ("LayerNorm", "all"): (
            tr("scaling W scales every sample's mean and std over the units by a, which cancels."),
            "",
        ),
        ("BatchNorm1d", "rows"): (
            tr(
                "BatchNorm normalizes each output unit on its own (over the batch), so each "
                "row of W may have its own factor."
            ),
            "",
        ),
        ("LayerNorm", "rows"): (
            "",
            tr(
                "LayerNorm normalizes each sample over the units, so only a factor common to "
                "all rows cancels; different factors change the pattern across units."
            ),
        ),
        ("none", "all"): (
            "",
            tr("without a normalization nothing removes the scale: ReLU(a·z) = a·ReLU(z)."),
        ),
    }
    options = []
    with torch.no_grad():
        for norm_name, how in cases:
            desc, f = _linear_then(norm_name, width)
            scaled = W * a if how == "all" else W * rows
            same = torch.allclose(f(x @ W.T), f(x @ scaled.T), atol=1e-9)
            text = (
                tr("{desc}: multiplying all of W by a = {a:g}", desc=desc, a=a)
                if how == "all"
                else tr(
                    "{desc}: multiplying each row of W (one output unit each) by its own positive "
                    "factor",
                    desc=desc,
                )
            )
            yes, no = why[(norm_name, how)]
            fb = (
                tr("Yes: {why}", why=yes or tr("the output does not change."))
                if same
                else tr("No: {why}", why=no or tr("it changes."))
            )
            statement = tr("{statement} leaves the output unchanged.", statement=text)
            options.append((statement, same, fb, (norm_name, how)))
    question = tr(
        "A linear layer z = W x (no bias, W of shape ({width}, {n_in})) is followed by the layer "
        "named below, in training mode on a batch of inputs. Ignore ε. Which statements hold?",
        width=width,
        n_in=n_in,
    )
    return choice(
        question, options, dict(kind="scale_invariance", a=a, width=width, n_in=n_in), many=True
    )


def _grad_at(norm, x, W, target):
    W = W.clone().requires_grad_()
    loss = ((norm(x @ W.T) - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, W)
    return grad


def q_grad_scale(rng, names=None):
    norm_name = rng.choice(["BatchNorm1d", "LayerNorm"])
    n_in, width, N = rng.choice([8, 16]), rng.choice([4, 8]), 32
    a = rng.choice([0.25, 0.5, 2.0, 4.0, 8.0])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    target = torch.randn(N, width, generator=gen, dtype=torch.float64)
    norm = make_module(norm_name, (width,), {"eps": _NO_EPS}).double().train()
    g1, ga = _grad_at(norm, x, W, target), _grad_at(norm, x, W * a, target)
    factor = float(ga.norm() / g1.norm())
    if not torch.allclose(ga, g1 * factor, atol=1e-9):
        raise AssertionError("the gradient at a·W is not a multiple of the one at W")
    value = round(factor, 6)
    question = tr(
        "The weights W of a linear layer feed `norms.{norm_name}({width})` (training mode, ignore "
        "ε), and a loss L is computed downstream. W is replaced by a·W with a = {a:g}. By what "
        "factor does the gradient ∂L/∂W change (evaluated at a·W instead of W)?",
        norm_name=norm_name,
        width=width,
        a=a,
    )
    wrong = [
        (
            a,
            tr(
                "That is how z itself scales. The loss does not change with a, so the gradient "
                "cannot grow with it."
            ),
        ),
        (
            1.0,
            tr("The loss is the same, but its gradient is not: it is taken at a different point."),
        ),
        (
            a * a,
            tr(
                "The gradient shrinks as W grows; a² is the factor of the learning rate that "
                "compensates."
            ),
        ),
        (
            1 / (a * a),
            tr("That is how the effective learning rate η/‖W‖² changes, not the gradient."),
        ),
    ]
    return numeric(
        question,
        value,
        dict(kind="grad_scale", norm=norm_name, a=a),
        correct_fb=tr(
            "Correct: L(a·W) = L(W) for every a > 0; differentiating gives "
            "a·∇L(a·W) = ∇L(W), so the gradient at a·W is 1/a = {value:g} times the one at W.",
            value=value,
        ),
        wrong=wrong,
        tol=0.0005,
        default_fb=tr("Not quite. Differentiate L(a·W) = L(W) with respect to W."),
    )


def q_bias_before_norm(rng, names=None):
    n_in, width, N = rng.choice([8, 16]), rng.choice([4, 6, 8]), rng.choice([16, 32])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    b = torch.rand(width, generator=gen, dtype=torch.float64) * 6 - 3  # differs between units
    common = torch.full((width,), float(rng.choice([-2, 1, 3])), dtype=torch.float64)
    x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        bn, ln = modules.BatchNorm1d(width).double().train(), modules.LayerNorm(width).double()
        cases = {
            "bn": torch.allclose(bn(x @ W.T + b), bn(x @ W.T), atol=1e-9),
            "ln": torch.allclose(ln(x @ W.T + b), ln(x @ W.T), atol=1e-9),
            "ln_common": torch.allclose(ln(x @ W.T + common), ln(x @ W.T), atol=1e-9),
        }
    texts = {
        "bn": tr(
            "`norms.BatchNorm1d({width})`, with a bias that differs between units", width=width
        ),
        "ln": tr("`norms.LayerNorm({width})`, with a bias that differs between units", width=width),
        "ln_common": tr(
            "`norms.LayerNorm({width})`, with the same bias for every unit", width=width
        ),
    }
    fbs = {
        "bn": (
            tr(
                "BatchNorm subtracts each unit's batch mean; the bias adds the same number to "
                "every sample of a unit, so it moves that mean by exactly the bias and cancels "
                "(its gradient is zero too)."
            ),
            tr("it changes the output."),
        ),
        "ln": (
            tr("it cancels."),
            tr(
                "LayerNorm subtracts each sample's mean over the units; a bias that differs "
                "between units changes the pattern across units and does not cancel."
            ),
        ),
        "ln_common": (
            tr(
                "LayerNorm subtracts each sample's mean over the units, so a shift common to all "
                "units cancels; only the part of a bias that varies between units survives."
            ),
            tr("it changes the output."),
        ),
    }
    options = [
        (
            texts[k],
            same,
            tr("Yes: {why}", why=fbs[k][0]) if same else tr("No: {why}", why=fbs[k][1]),
            k,
        )
        for k, same in cases.items()
    ]
    question = tr(
        "`nn.Linear({n_in}, {width})` with a non-zero bias feeds a normalization layer (training "
        "mode). In which cases is the bias dead weight: removing it leaves the output unchanged?",
        n_in=n_in,
        width=width,
    )
    return choice(
        question, options, dict(kind="bias_before_norm", n_in=n_in, width=width), many=True
    )


def q_weight_norm_growth(rng, names=None):
    norm_name = rng.choice(["BatchNorm1d", "LayerNorm"])
    n_in, width, N = rng.choice([8, 16]), rng.choice([4, 8]), 32
    lr, steps = rng.choice([0.1, 0.5, 1.0]), 5
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    norm = make_module(norm_name, (width,), {"eps": _NO_EPS}).double().train()
    sq, predicted = [float(W.pow(2).sum())], []
    for _ in range(steps):
        x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
        target = torch.randn(N, width, generator=gen, dtype=torch.float64)
        g = _grad_at(norm, x, W, target)
        predicted.append(sq[-1] + lr**2 * float(g.pow(2).sum()))
        W = W - lr * g
        sq.append(float(W.pow(2).sum()))
    diffs = [b - a for a, b in zip(sq, sq[1:], strict=False)]
    pythagoras = all(
        math.isclose(p, s, rel_tol=1e-9) for p, s in zip(predicted, sq[1:], strict=True)
    )
    outcome = (
        "grows"
        if all(d > 0 for d in diffs) and pythagoras
        else "shrinks"
        if all(d < 0 for d in diffs)
        else "same"
        if all(abs(d) < 1e-12 for d in diffs)
        else "depends"
    )
    options = [
        (
            tr("It grows at every step: ‖Wₜ₊₁‖² = ‖Wₜ‖² + η²‖gₜ‖²."),
            outcome == "grows",
            tr(
                "Correct: the loss does not depend on ‖W‖, so the gradient is orthogonal to W, "
                "and by Pythagoras each step can only add length. The effective learning rate "
                "η/‖W‖² therefore decays by itself (weight decay counteracts it)."
            )
            if outcome == "grows"
            else tr("No: here the norm does not grow at every step."),
            "grows",
        ),
        (
            tr("It shrinks at every step, like with weight decay."),
            outcome == "shrinks",
            tr("No: without weight decay nothing pulls W towards 0; the step is orthogonal to W.")
            if outcome != "shrinks"
            else tr("Correct."),
            "shrinks",
        ),
        (
            tr("It stays constant, because the layer is scale-invariant."),
            outcome == "same",
            tr(
                "No: scale invariance makes the gradient orthogonal to W, and a step orthogonal "
                "to W lengthens it."
            )
            if outcome != "same"
            else tr("Correct."),
            "same",
        ),
        (
            tr("It grows or shrinks depending on the sign of the gradient."),
            outcome == "depends",
            tr("No: the gradient has no component along W, so the sign does not matter.")
            if outcome != "depends"
            else tr("Correct."),
            "depends",
        ),
    ]
    question = tr(
        "The weights W of a linear layer feed `norms.{norm_name}({width})` (training mode, ignore "
        "ε). Plain SGD, W ← W − η g with η = {lr:g}, no weight decay. What happens to ‖W‖?",
        norm_name=norm_name,
        width=width,
        lr=lr,
    )
    return choice(question, options, dict(kind="weight_norm_growth", norm=norm_name, lr=lr))
