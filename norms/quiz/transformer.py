"""Questions of the chapter "Norms inside the transformer" (answers computed by running the
layers)."""

from __future__ import annotations

import functools

import torch

from norms import modules
from norms.axes import describe
from norms.i18n import tr

from .builders import choice, numeric, shape_str


def q_ln_stats_btd(rng, names=None):
    """How many means a LayerNorm(D) computes on the (B, T, D) activations of a transformer."""
    B, T, D = rng.choice([2, 4, 8]), rng.choice([5, 16, 128]), rng.choice([64, 256, 512])
    spec = describe(modules.LayerNorm(D), (B, T, D))
    key = spec.num_statistics
    return numeric(
        tr(
            "A transformer layer's LayerNorm(d_model={D}) gets activations of shape (B, T, D) = "
            "{shape}. How many means (one per statistic) does it compute?",
            D=D,
            shape=shape_str((B, T, D)),
        ),
        key,
        dict(kind="ln_stats_btd", shape=(B, T, D), answer=key),
        correct_fb=tr(
            "Correct: one mean and one variance per token, over its {D} features: B·T = {key}.",
            D=D,
            key=key,
        ),
        wrong=[
            (
                D,
                tr(
                    "That is the number of features each statistic averages over; there is one "
                    "statistic per token, B·T = {key}.",
                    key=key,
                ),
            ),
            (
                B,
                tr(
                    "That would be one statistic per sequence; LayerNorm(d_model) normalizes each "
                    "token."
                ),
            ),
            (B * T * D, tr("That is the number of elements, not of statistics.")),
            (
                T,
                tr(
                    "Each sequence has {T} tokens, and there are {B} sequences: B·T = {key}.",
                    T=T,
                    B=B,
                    key=key,
                ),
            ),
        ],
        default_fb=tr(
            "LayerNorm(d_model) reduces over the last dim only: one statistic per token, "
            "B·T = {key}.",
            key=key,
        ),
    )


def q_gamma_shape(rng, names=None):
    """The shape of γ of the norms inside a TransformerEncoderLayer."""
    nhead = rng.choice([2, 4, 8])
    d = nhead * rng.choice([8, 16])
    ff = 4 * d
    B, T = rng.choice([3, 8]), rng.choice([10, 20])
    with torch.random.fork_rng(
        devices=[]
    ):  # the layer's random init must not touch the caller's RNG
        layer = modules.TransformerEncoderLayer(d, nhead, ff, dropout=0.0, batch_first=True)
    key = tuple(layer.norm1.weight.shape)
    options = [
        (
            shape_str(key),
            True,
            tr(
                "Correct: one γ per feature of a token, shared by every token and sequence: "
                "norm1.weight has shape {shape}.",
                shape=shape_str(key),
            ),
            "d_model",
        ),
        (
            shape_str((ff,)),
            False,
            tr(
                "The MLP's hidden width is not normalized: the norm sits on the d_model-wide "
                "residual stream."
            ),
            "ff",
        ),
        (
            shape_str((T, d)),
            False,
            tr("γ does not depend on the sequence length; every position shares it."),
            "T,d",
        ),
        (
            shape_str((B, T, d)),
            False,
            tr("That is the activation's shape; γ has the shape of one token."),
            "B,T,d",
        ),
        (
            shape_str((nhead,)),
            False,
            tr("The norm does not know about heads; it scales each of the d_model features."),
            "nhead",
        ),
    ]
    return choice(
        tr(
            "In `TransformerEncoderLayer(d_model={d}, nhead={nhead}, dim_feedforward={ff}, "
            "batch_first=True)` fed with input of shape {shape}, what is the shape of "
            "norm1's γ (`norm1.weight`)?",
            d=d,
            nhead=nhead,
            ff=ff,
            shape=shape_str((B, T, d)),
        ),
        options,
        dict(kind="gamma_shape", answer=key, d=d, ff=ff),
    )


@functools.lru_cache(maxsize=None)
def _norm_on_residual_path(norm_first: bool) -> bool:
    """True when a layer's output goes through a norm even if both sublayers output zero: measured
    by
    zeroing attention's output projection and the MLP's second linear layer (post-LN:
    y = LN(LN(x)) != x)."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():  # the caller's RNG is left alone
        torch.manual_seed(0)
        layer = modules.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, norm_first=norm_first, batch_first=True
        )
        for lin in (layer.self_attn.out_proj, layer.linear2):
            lin.weight.zero_()
            lin.bias.zero_()
        x = torch.randn(2, 3, 8) * 3 + 1
        return not torch.allclose(layer(x), x)


def q_prenorm_position(rng, names=None):
    """Where pre-LN (norm_first=True) puts the norm."""
    on_path = {nf: _norm_on_residual_path(nf) for nf in (False, True)}
    assert on_path == {False: True, True: False}, on_path
    options = [
        (
            tr(
                "At the input of each sublayer, inside the residual branch: x + Attn(LN(x)); the "
                "residual path itself is never normalized."
            ),
            True,
            tr(
                "Correct: with norm_first=True a layer whose sublayers output zero returns its "
                "input unchanged (measured), so the identity path from the first layer to the "
                "last has no norm on it."
            ),
            "branch",
        ),
        (
            tr("After each residual addition: LN(x + Attn(x))."),
            False,
            tr(
                "That is post-LN (norm_first=False), the 2017 transformer: the output goes "
                "through a norm even when the sublayers output zero."
            ),
            "after",
        ),
        (
            tr("Only once, after the last layer."),
            False,
            tr(
                "That final norm is an extra of pre-LN stacks; each pre-LN layer also has its "
                "own norms, one per sublayer."
            ),
            "final",
        ),
        (
            tr("Between the two linear layers of the MLP."),
            False,
            tr("The MLP has no norm inside it in either variant."),
            "mlp",
        ),
    ]
    rng.shuffle(options)
    return choice(
        tr("Where does a pre-LN transformer layer (`norm_first=True`) apply its LayerNorms?"),
        options,
        dict(kind="prenorm_position", on_path=on_path),
    )


@functools.lru_cache(maxsize=None)
def residual_growth(depth: int, d_model: int = 32, seed: int = 0) -> tuple[float, float]:
    """(std of a pre-LN stack's output, std after the final LayerNorm) at initialization, averaged
    over
    tokens of one batch of standard-normal inputs. The caller's RNG is left alone."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        layers = [
            modules.TransformerEncoderLayer(
                d_model, 4, 2 * d_model, dropout=0.0, norm_first=True, batch_first=True
            )
            for _ in range(depth)
        ]
        final = modules.LayerNorm(d_model)
        x = torch.randn(4, 8, d_model)
        for layer in layers:
            x = layer(x)
        return float(x.std(-1).mean()), float(final(x).std(-1, unbiased=False).mean())


def q_final_norm(rng, names=None):
    """What the final norm of a pre-LN stack is for (with measured numbers)."""
    depth = rng.choice([6, 12, 24])
    raw, normed = residual_growth(depth)
    options = [
        (
            tr(
                "The residual stream is a sum of every layer's output and is never normalized "
                "inside a pre-LN stack; its per-token std grows with depth ({raw:.1f} here). The "
                "final norm brings it back to {normed:.2f} before the output head.",
                raw=raw,
                normed=normed,
            ),
            True,
            tr(
                "Correct: without it the head would see activations whose scale depends on the "
                "depth."
            ),
            "scale",
        ),
        (
            tr("It replaces the norms inside the layers, which pre-LN removes."),
            False,
            tr("Pre-LN keeps a norm in front of every sublayer; the final norm is added on top."),
            "replaces",
        ),
        (
            tr("It is needed by post-LN stacks too, for the same reason."),
            False,
            tr("A post-LN stack already ends with a norm: the last layer's LayerNorm 2."),
            "post",
        ),
        (
            tr("It makes the stack's output independent of the batch."),
            False,
            tr(
                "Every LayerNorm is already per token; batch independence is not what the final "
                "norm adds."
            ),
            "batch",
        ),
    ]
    rng.shuffle(options)
    return choice(
        tr(
            "A pre-LN stack of {depth} layers (d_model = 32) ends with a final LayerNorm before "
            "the output head. What is it for?",
            depth=depth,
        ),
        options,
        dict(kind="final_norm", depth=depth, raw=raw),
    )


def q_rms_saves(rng, names=None):
    """Parameters RMSNorm saves over LayerNorm in a pre-norm stack (2 norms per layer + a final
    norm)."""
    depth, d = rng.choice([12, 24, 32]), rng.choice([512, 1024, 4096])

    def count(norm):
        per_layer = [norm(d), norm(d)]  # before attention, before the MLP
        mods = per_layer * depth + [norm(d)]
        return sum(p.numel() for m in mods for p in m.parameters())

    key = count(modules.LayerNorm) - count(modules.RMSNorm)
    return numeric(
        tr(
            "A pre-norm decoder has {depth} layers of width d_model = {d}, two norms per layer "
            "and a final norm. How many parameters does it save by using RMSNorm instead of "
            "LayerNorm in all of them?",
            depth=depth,
            d=d,
        ),
        key,
        dict(kind="rms_saves", depth=depth, d=d, answer=key),
        correct_fb=tr(
            "Correct: RMSNorm has no β, so each of the 2·{depth} + 1 norms saves d_model = {d} "
            "numbers.",
            depth=depth,
            d=d,
        ),
        wrong=[
            (2 * depth * d, tr("Do not forget the final norm: 2·L + 1 norms.")),
            (2 * key, tr("RMSNorm keeps γ; it drops β only, d_model numbers per norm.")),
            (
                (depth + 1) * d,
                tr("Each layer has two norms, one before attention and one before the MLP."),
            ),
        ],
        default_fb=tr("RMSNorm drops β: (2·{depth} + 1)·{d} = {key}.", depth=depth, d=d, key=key),
    )
