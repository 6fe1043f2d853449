"""Questions of the chapters "Transformers without normalization" and "Norms in today's
transformers" (answers computed by running the layers)."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.i18n import tr
from norms.lab import modern
from norms.lab.transformer import TinyEncoder

from .builders import choice, factor, num, numeric, plus, shape_str


def q_dyt_value(rng, names=None):
    """DyT's output for one element: tanh(α x)·γ + β, computed by norms.DynamicTanh."""
    alpha, x = rng.choice([0.5, 1.5, 2.0]), rng.choice([-1.5, -1.0, 1.0, 1.5])
    gamma, beta = rng.choice([2.0, 3.0]), rng.choice([1.0, -0.5, 0.25])
    layer = modules.DynamicTanh(1, alpha_init_value=alpha, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.fill_(gamma)
        layer.bias.fill_(beta)
        key = round(float(layer(torch.tensor([[x]], dtype=torch.float64))), 2)
    return numeric(
        tr(
            "A `DynamicTanh` with α = {alpha}, γ = {gamma} and β = {beta} gets the "
            "value x = {x}. What does it output (two decimals)?",
            alpha=num(alpha),
            gamma=num(gamma),
            beta=num(beta),
            x=num(x),
        ),
        key,
        dict(kind="dyt_value", alpha=alpha, x=x, gamma=gamma, beta=beta, answer=key),
        correct_fb=tr(
            "Correct: {formula} = {key}.",
            formula=f"tanh({num(alpha)}·{factor(x)})·{num(gamma)}{plus(beta)}",
            key=num(key),
        ),
        wrong=[
            (
                round(math.tanh(x) * gamma + beta, 2),
                tr("That leaves out α: DyT computes tanh(α x)."),
            ),
            (
                round(math.tanh(alpha * x), 2),
                tr("That leaves out γ and β, applied after the tanh."),
            ),
            (round(math.tanh(alpha * x) * gamma, 2), tr("β is added after the scaling by γ.")),
            (
                round(alpha * x * gamma + beta, 2),
                tr("That is the straight line α x·γ + β; tanh bends it towards ±1."),
            ),
        ],
        default_fb=tr("DyT maps each element on its own: y = tanh(α x)·γ + β."),
        tol=0.01,
    )


def q_dyt_params(rng, names=None):
    """The number of learnable parameters of DynamicTanh(normalized_shape)."""
    shape = rng.choice([(64,), (256,), (8, 16), (768,)])
    layer = modules.DynamicTanh(shape)
    key = sum(p.numel() for p in layer.parameters())
    n = math.prod(shape)
    arg = shape if len(shape) > 1 else shape[0]
    return numeric(
        tr(
            "How many learnable parameters (numbers) does `norms.DynamicTanh({arg})` have?", arg=arg
        ),
        key,
        dict(kind="dyt_params", shape=shape, answer=key),
        correct_fb=tr(
            "Correct: γ and β of shape {shape} ({n} each) and one α: 2·{n} + 1.",
            shape=shape_str(shape),
            n=n,
        ),
        wrong=[
            (2 * n, tr("That is LayerNorm's count; DyT adds one learnable scalar α.")),
            (n + 1, tr("β is learnable too, as in LayerNorm.")),
            (2 * n + n, tr("α is one scalar for the whole layer, not one per feature.")),
        ],
        default_fb=tr("γ and β per feature, plus one scalar α."),
    )


def q_dyt_converted(rng, names=None):
    """How many DynamicTanh layers convert_ln_to_dyt puts into a pre-LN stack."""
    depth = rng.choice([2, 3, 4, 6])
    with torch.random.fork_rng(devices=[]):
        model = modules.convert_ln_to_dyt(TinyEncoder("pre", depth))
    key = sum(isinstance(m, modules.DynamicTanh) for m in model.modules())
    return numeric(
        tr(
            "A pre-LN encoder of {depth} `TransformerEncoderLayer`s with a final LayerNorm goes "
            "through `norms.convert_ln_to_dyt`. How many `DynamicTanh` layers does it have after?",
            depth=depth,
        ),
        key,
        dict(kind="dyt_converted", depth=depth, answer=key),
        correct_fb=tr(
            "Correct: two per layer and the final norm: 2·{depth} + 1 = {key}.",
            depth=depth,
            key=key,
        ),
        wrong=[
            (2 * depth, tr("The final LayerNorm of a pre-LN stack is converted too.")),
            (depth + 1, tr("Each encoder layer has two LayerNorms (norm1, norm2).")),
        ],
        default_fb=tr("Every LayerNorm, at any depth, becomes a DynamicTanh."),
    )


def _depends(layer, x, change) -> bool:
    with torch.no_grad():
        return not torch.allclose(layer(x)[0, 0], layer(change(x))[0, 0])


def q_dyt_depends(rng, names=None):
    """What one output element of DyT, LayerNorm, BatchNorm depends on: measured."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng.randrange(1000))
        x = torch.randn(4, 6, dtype=torch.float64)

        def other_feature(t):
            t = t.clone()
            t[0, 1:] *= 3
            return t

        def other_sample(t):
            t = t.clone()
            t[1:] *= 3
            return t

        dyt = modules.DynamicTanh(6, dtype=torch.float64)
        options = []
        for text, change, key in (
            (tr("the other features of the same token"), other_feature, "feature"),
            (tr("the other samples in the batch"), other_sample, "sample"),
        ):
            dep = _depends(dyt, x, change)
            ln = _depends(modules.LayerNorm(6, dtype=torch.float64), x, change)
            bn = _depends(modules.BatchNorm1d(6, dtype=torch.float64), x, change)
            options.append(
                (
                    text,
                    dep,
                    tr(
                        "Measured: changing {text} changes DyT's output: {dep}; LayerNorm's: "
                        "{ln}; BatchNorm's (training mode): {bn}.",
                        text=text,
                        dep=dep,
                        ln=ln,
                        bn=bn,
                    ),
                    key,
                )
            )
    options.append((tr("the learned scalar α"), True, tr("Yes: y = tanh(α x)·γ + β."), "alpha"))
    options.append(
        (tr("its own input value x"), True, tr("Yes: DyT is a function of each element."), "x")
    )
    rng.shuffle(options)
    return choice(
        tr(
            "One output element of `norms.DynamicTanh` (in training mode) depends on which of "
            "these?"
        ),
        options,
        dict(kind="dyt_depends"),
        many=True,
    )


def q_qk_gamma_shape(rng, names=None):
    """The shape of the γ of QK-norm in norms.modules.Attention: per head, over dₕ."""
    nhead = rng.choice([2, 4, 8])
    d = nhead * rng.choice([16, 32, 64])
    with torch.random.fork_rng(devices=[]):
        attn = modules.Attention(d, nhead, qk_norm=True)
    key = tuple(attn.q_norm.weight.shape)
    options = [
        (
            shape_str(key),
            True,
            tr(
                "Correct: QK-norm normalizes each head's query over its dₕ = "
                "{d}/{nhead} features; γ is shared by the heads.",
                d=d,
                nhead=nhead,
            ),
            "d_h",
        ),
        (
            shape_str((d,)),
            False,
            tr(
                "That would normalize the queries of all heads together (some "
                "models do); `norms.modules.Attention` normalizes per head."
            ),
            "d",
        ),
        (shape_str((nhead,)), False, tr("γ scales features, not heads."), "nhead"),
        (
            shape_str((nhead, key[0])),
            False,
            tr("The heads share one γ of dₕ in `norms.modules.Attention`."),
            "h,d_h",
        ),
    ]
    return choice(
        tr(
            "`norms.modules.Attention(d_model={d}, nhead={nhead}, qk_norm=True)`: what is the "
            "shape of `q_norm.weight`?",
            d=d,
            nhead=nhead,
        ),
        options,
        dict(kind="qk_gamma_shape", d=d, nhead=nhead, answer=key),
    )


def q_qk_bound(rng, names=None):
    """With QK-norm (RMSNorm, γ = 1), |q·k|/√dₕ ≤ √dₕ: measured on aligned q and k."""
    d_h = rng.choice([16, 32, 64, 128])
    rms = modules.RMSNorm(d_h, eps=0.0, dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng.randrange(1000))
        v = torch.randn(d_h, dtype=torch.float64) * 7
    with torch.no_grad():
        q = k = rms(v)
    key = round(float(q @ k) / math.sqrt(d_h), 2)
    return numeric(
        tr(
            "With QK-norm (an RMSNorm with γ = 1 on each head's query and key, head size "
            "dₕ = {d_h}), what is the largest attention logit q·k/√dₕ possible (two decimals)?",
            d_h=d_h,
        ),
        key,
        dict(kind="qk_bound", d_h=d_h, answer=key),
        correct_fb=tr(
            "Correct: ‖q‖ = ‖k‖ = √dₕ after RMSNorm, so q·k ≤ dₕ and the logit ≤ "
            "√{d_h} = {key}. Only γ can raise it.",
            d_h=d_h,
            key=key,
        ),
        wrong=[
            (float(d_h), tr("That is q·k before the division by √dₕ.")),
            (1.0, tr("That is the cosine; q and k have norm √dₕ after RMSNorm.")),
        ],
        default_fb=tr("After RMSNorm a vector of dₕ features has norm √dₕ."),
        tol=0.01,
    )


def q_identity_at_init(rng, names=None):
    """Which blocks return their input unchanged at initialization: measured."""
    d, nhead, ff = 8, 2, 16
    x = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(rng.randrange(1000)))
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        kw = dict(dim_feedforward=ff, dropout=0.0, batch_first=True)
        blocks = {
            "ReZero (x + α·F(x), α = 0)": modern.ReZeroEncoderLayer(d, nhead, **kw),
            tr("AdaLN-Zero (gates predicted by a zero-initialized layer)"): modern.AdaLNZeroBlock(
                d, nhead, ff
            ),
            "LayerScale (x + diag(λ)·F(LN(x)), λ = 0.1)": modern.LayerScaleEncoderLayer(
                d, nhead, **kw
            ),
            "pre-LN (x + F(LN(x)))": modules.TransformerEncoderLayer(
                d, nhead, norm_first=True, **kw
            ),
        }
        options = []
        for name, block in blocks.items():
            y = (
                block(x, torch.randn(2, d))
                if isinstance(block, modern.AdaLNZeroBlock)
                else block(x)
            )
            same = bool(torch.equal(y, x))
            gap = float((y - x).abs().max())
            options.append((name, same, tr("Measured: max |y − x| = {gap:.3g}.", gap=gap), name))
    rng.shuffle(options)
    return choice(
        tr("Which of these blocks return their input exactly unchanged at initialization?"),
        options,
        dict(kind="identity_at_init"),
        many=True,
    )
