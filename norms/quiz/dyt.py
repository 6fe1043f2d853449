"""Questions of the chapters "Transformers without normalization" and "Norms in today's
transformers" (answers computed by running the layers)."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.lab import modern
from norms.lab.transformer import TinyEncoder

from .builders import _choice, _factor, _num, _numeric, _plus, _shape


def q_dyt_value(rng, names=None):
    """DyT's output for one element: tanh(α x)·γ + β, computed by norms.DynamicTanh."""
    alpha, x = rng.choice([0.5, 1.5, 2.0]), rng.choice([-1.5, -1.0, 1.0, 1.5])
    gamma, beta = rng.choice([2.0, 3.0]), rng.choice([1.0, -0.5, 0.25])
    layer = modules.DynamicTanh(1, alpha_init_value=alpha, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.fill_(gamma)
        layer.bias.fill_(beta)
        key = round(float(layer(torch.tensor([[x]], dtype=torch.float64))), 2)
    return _numeric(
        f"A `DynamicTanh` with α = {_num(alpha)}, γ = {_num(gamma)} and β = {_num(beta)} gets the "
        f"value x = {_num(x)}. What does it output (two decimals)?",
        key,
        dict(kind="dyt_value", alpha=alpha, x=x, gamma=gamma, beta=beta, answer=key),
        correct_fb=(
            f"Correct: tanh({_num(alpha)}·{_factor(x)})·{_num(gamma)}{_plus(beta)} = {_num(key)}."
        ),
        wrong=[
            (round(math.tanh(x) * gamma + beta, 2), "That leaves out α: DyT computes tanh(α x)."),
            (round(math.tanh(alpha * x), 2), "That leaves out γ and β, applied after the tanh."),
            (round(math.tanh(alpha * x) * gamma, 2), "β is added after the scaling by γ."),
            (
                round(alpha * x * gamma + beta, 2),
                "That is the straight line α x·γ + β; tanh bends it towards ±1.",
            ),
        ],
        default_fb="DyT maps each element on its own: y = tanh(α x)·γ + β.",
        tol=0.01,
    )


def q_dyt_params(rng, names=None):
    """The number of learnable parameters of DynamicTanh(normalized_shape)."""
    shape = rng.choice([(64,), (256,), (8, 16), (768,)])
    layer = modules.DynamicTanh(shape)
    key = sum(p.numel() for p in layer.parameters())
    n = math.prod(shape)
    arg = shape if len(shape) > 1 else shape[0]
    return _numeric(
        f"How many learnable parameters (numbers) does `norms.DynamicTanh({arg})` have?",
        key,
        dict(kind="dyt_params", shape=shape, answer=key),
        correct_fb=f"Correct: γ and β of shape {_shape(shape)} ({n} each) and one α: 2·{n} + 1.",
        wrong=[
            (2 * n, "That is LayerNorm's count; DyT adds one learnable scalar α."),
            (n + 1, "β is learnable too, as in LayerNorm."),
            (2 * n + n, "α is one scalar for the whole layer, not one per feature."),
        ],
        default_fb="γ and β per feature, plus one scalar α.",
    )


def q_dyt_converted(rng, names=None):
    """How many DynamicTanh layers convert_ln_to_dyt puts into a pre-LN stack."""
    depth = rng.choice([2, 3, 4, 6])
    with torch.random.fork_rng(devices=[]):
        model = modules.convert_ln_to_dyt(TinyEncoder("pre", depth))
    key = sum(isinstance(m, modules.DynamicTanh) for m in model.modules())
    return _numeric(
        f"A pre-LN encoder of {depth} `TransformerEncoderLayer`s with a final LayerNorm goes "
        "through `norms.convert_ln_to_dyt`. How many `DynamicTanh` layers does it have after?",
        key,
        dict(kind="dyt_converted", depth=depth, answer=key),
        correct_fb=f"Correct: two per layer and the final norm: 2·{depth} + 1 = {key}.",
        wrong=[
            (2 * depth, "The final LayerNorm of a pre-LN stack is converted too."),
            (depth + 1, "Each encoder layer has two LayerNorms (norm1, norm2)."),
        ],
        default_fb="Every LayerNorm, at any depth, becomes a DynamicTanh.",
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
            ("the other features of the same token", other_feature, "feature"),
            ("the other samples in the batch", other_sample, "sample"),
        ):
            dep = _depends(dyt, x, change)
            ln = _depends(modules.LayerNorm(6, dtype=torch.float64), x, change)
            bn = _depends(modules.BatchNorm1d(6, dtype=torch.float64), x, change)
            options.append(
                (
                    text,
                    dep,
                    f"Measured: changing {text} changes DyT's output: {dep}; LayerNorm's: {ln}; "
                    f"BatchNorm's (training mode): {bn}.",
                    key,
                )
            )
    options.append(("the learned scalar α", True, "Yes: y = tanh(α x)·γ + β.", "alpha"))
    options.append(("its own input value x", True, "Yes: DyT is a function of each element.", "x"))
    rng.shuffle(options)
    return _choice(
        "One output element of `norms.DynamicTanh` (in training mode) depends on which of these?",
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
            _shape(key),
            True,
            f"Correct: QK-norm normalizes each head's query over its dₕ = "
            f"{d}/{nhead} features; γ is shared by the heads.",
            "d_h",
        ),
        (
            _shape((d,)),
            False,
            "That would normalize the queries of all heads together (some "
            "models do); `norms.modules.Attention` normalizes per head.",
            "d",
        ),
        (_shape((nhead,)), False, "γ scales features, not heads.", "nhead"),
        (
            _shape((nhead, key[0])),
            False,
            "The heads share one γ of dₕ in `norms.modules.Attention`.",
            "h,d_h",
        ),
    ]
    return _choice(
        f"`norms.modules.Attention(d_model={d}, nhead={nhead}, qk_norm=True)`: what is the shape "
        "of `q_norm.weight`?",
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
    return _numeric(
        "With QK-norm (an RMSNorm with γ = 1 on each head's query and key, head size "
        f"dₕ = {d_h}), what is the largest attention logit q·k/√dₕ possible (two decimals)?",
        key,
        dict(kind="qk_bound", d_h=d_h, answer=key),
        correct_fb=f"Correct: ‖q‖ = ‖k‖ = √dₕ after RMSNorm, so q·k ≤ dₕ and the logit ≤ "
        f"√{d_h} = {key}. Only γ can raise it.",
        wrong=[
            (float(d_h), "That is q·k before the division by √dₕ."),
            (1.0, "That is the cosine; q and k have norm √dₕ after RMSNorm."),
        ],
        default_fb="After RMSNorm a vector of dₕ features has norm √dₕ.",
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
            "AdaLN-Zero (gates predicted by a zero-initialized layer)": modern.AdaLNZeroBlock(
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
            options.append(
                (name, same, f"Measured: max |y − x| = {float((y - x).abs().max()):.3g}.", name)
            )
    rng.shuffle(options)
    return _choice(
        "Which of these blocks return their input exactly unchanged at initialization?",
        options,
        dict(kind="identity_at_init"),
        many=True,
    )
