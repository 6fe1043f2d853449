"""Questions of the 'Pitfalls' chapter: dropout before BatchNorm, frozen BatchNorm, weight decay
on scale-invariant
layers, padded sequences, (B, T, D) without the transpose, autocast, momentum=None,
zero-initialized γ. Every key is
computed by running torch or norms."""

from __future__ import annotations

import torch
import torch.nn.functional as TF
from torch import nn

from norms import modules
from norms.i18n import tr
from norms.lab.pitfalls import param_groups
from norms.lab.training import ResidualBlock, seeded

from .builders import choice, numeric


def q_dropout_shift(rng, names=None):
    p = rng.choice([0.1, 0.2, 0.5])
    mu, var = rng.choice([0.0, 1.0, 2.0]), rng.choice([1.0, 4.0])
    seed = rng.randrange(2**31)
    value = round(((var + mu * mu) / (1 - p) - mu * mu) / var, 4)  # E[(x m/(1-p))²] − μ², over σ²
    with seeded(seed):  # measured with torch's dropout
        x = torch.randn(400_000, dtype=torch.float64) * var**0.5 + mu
        measured = float(TF.dropout(x, p, training=True).var() / x.var())
    if abs(measured - value) > 0.03 * value:
        raise AssertionError(f"dropout variance ratio: measured {measured}, formula {value}")
    question = tr(
        "A unit x has mean {mu:g} and variance {var:g}. It passes through `nn.Dropout(p={p:g})` "
        "(inverted dropout: kept values are divided by 1 − p) and then a linear layer and "
        "BatchNorm. By what factor is the variance of the dropout output larger in training mode "
        "than in evaluation mode?",
        mu=mu,
        var=var,
        p=p,
    )
    wrong = [
        (1.0, tr("That is what dropout keeps: the mean. The variance is not kept.")),
        (
            round(1 / (1 - p), 4),
            tr("That is the factor for a unit with mean 0; here the mean is not 0."),
        ),
        (round(1 - p, 4), tr("That is the keep probability, and it goes the other way.")),
    ]
    wrong = [(v, fb) for v, fb in wrong if abs(v - value) > 1e-3]
    return numeric(
        question,
        value,
        dict(kind="dropout_shift", p=p, mu=mu, var=var, measured=measured),
        correct_fb=tr(
            "Correct: in training E[y²] = E[x²]/(1 − p) = {second:g}/{keep:g} and the mean stays "
            "{mu:g}, so Var[y] = {var_y:.4g}, {value:.4g} times the {var:g} of evaluation mode "
            "(measured with torch: {measured:.3f}). BatchNorm's running variance remembers the "
            "training value, so in evaluation it divides by too much: the variance shift of Li "
            "et al. (2019).",
            second=var + mu * mu,
            keep=1 - p,
            mu=mu,
            var_y=value * var,
            value=value,
            var=var,
            measured=measured,
        ),
        wrong=wrong,
        tol=0.002,
        default_fb=tr(
            "Not quite: compute E[y²] with y = x·m/(1 − p), m ~ "
            "Bernoulli(1 − p), then subtract the squared mean."
        ),
    )


def q_frozen_bn(rng, names=None):
    C = rng.choice([3, 4, 8])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    bn = modules.BatchNorm1d(C)
    with torch.no_grad():
        bn.train()(torch.randn(16, C, generator=gen) * 2 + 1)  # pretrained statistics
    for p in bn.parameters():
        p.requires_grad_(False)
    bn.eval()
    before = {k: v.clone() for k, v in bn.state_dict().items()}
    probe = torch.randn(4, C, generator=gen)
    out_before = bn(probe)
    bn.train()  # what model.train() does to it
    bn(torch.randn(16, C, generator=gen) * 3 - 2)  # one fine-tuning batch
    after = bn.state_dict()
    changed = {k: not torch.equal(before[k], after[k]) for k in before}
    changed["output"] = not torch.allclose(bn.eval()(probe), out_before)
    options = [
        (
            text,
            changed[k],
            tr("Yes: {why}.", why=why) if changed[k] else tr("No: {why}.", why=why),
            k,
        )
        for k, (text, why) in _frozen_bn_texts().items()
    ]
    question = tr(
        "A pretrained `norms.BatchNorm1d({C})` is frozen with `requires_grad_(False)` on its "
        "parameters and `eval()`. Then the training script calls `model.train()` and runs one "
        "forward pass on a batch of new data. What has changed?",
        C=C,
    )
    return choice(question, options, dict(kind="frozen_bn", changed=changed), many=True)


def _frozen_bn_texts() -> dict:
    """{what: (statement, why it changes or not)} for :func:`q_frozen_bn`."""
    running = tr(
        "training mode updates the running statistics; requires_grad has nothing to do with them"
    )
    return {
        "running_mean": (tr("`running_mean` changes"), running),
        "running_var": (tr("`running_var` changes"), running),
        "num_batches_tracked": (
            tr("`num_batches_tracked` changes"),
            tr("every training-mode forward pass counts"),
        ),
        "weight": (
            tr("γ (`weight`) changes"),
            tr("γ gets no gradient and no optimizer step, and a forward pass never changes it"),
        ),
        "output": (
            tr("the evaluation-mode output for a fixed input changes"),
            tr("the running statistics it normalizes with have moved"),
        ),
    }


def _autocast_dtype(layer_name):
    x = torch.zeros(4, 8)
    layers = {
        "torch.nn.LayerNorm(8)": lambda: nn.LayerNorm(8),
        "torch.nn.GroupNorm(2, 8)": lambda: nn.GroupNorm(2, 8),
        "torch.nn.BatchNorm1d(8)": lambda: nn.BatchNorm1d(8),
        "norms.LayerNorm(8)": lambda: modules.LayerNorm(8),
        "norms.RMSNorm(8)": lambda: modules.RMSNorm(8),
    }
    layer = layers[layer_name]()
    with seeded(0):
        linear = nn.Linear(8, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        h = linear(x)
        return h.dtype, layer(h).dtype


def q_autocast_dtype(rng, names=None):
    layer = rng.choice(
        [
            "torch.nn.LayerNorm(8)",
            "torch.nn.GroupNorm(2, 8)",
            "torch.nn.BatchNorm1d(8)",
            "norms.LayerNorm(8)",
            "norms.RMSNorm(8)",
        ]
    )
    h_dtype, out = _autocast_dtype(layer)
    options = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        ok = dtype == out
        if ok and dtype == torch.float32:
            fb = tr(
                "Correct: CPU autocast lists this op among those it runs in float32: it casts the "
                "bfloat16 input up and returns float32."
            )
        elif ok:
            fb = tr(
                "Correct: this op is not on autocast's float32 list; it receives {h_dtype} and "
                "returns the input's dtype (inside, the statistics are still accumulated in "
                "float32).",
                h_dtype=h_dtype,
            )
        elif dtype == torch.float16:
            fb = tr("No: CPU autocast here was asked for bfloat16; nothing produces float16.")
        else:
            fb = tr("No: run it: the output is {out}.", out=out)
        options.append((str(dtype), ok, fb, str(dtype)))
    question = tr(
        "Inside `torch.autocast('cpu', dtype=torch.bfloat16)`, a float32 batch goes through "
        "`nn.Linear(8, 8)` (which autocast runs in bfloat16) and then `{layer}`. What dtype does "
        "the normalization return?",
        layer=layer,
    )
    return choice(question, options, dict(kind="autocast_dtype", layer=layer, out=str(out)))


def _padded_row(b: int, real: list, pad: int):
    """``sequence 0: 3, 1 then 2 padding zeros``: one row of :func:`q_padded_mean`."""
    values = ", ".join(str(v) for v in real)
    if pad == 0:
        return tr("sequence {b}: {values}", b=b, values=values)
    if pad == 1:
        return tr("sequence {b}: {values} then 1 padding zero", b=b, values=values)
    return tr("sequence {b}: {values} then {pad} padding zeros", b=b, values=values, pad=pad)


def q_padded_mean(rng, names=None):
    B, T = 2, rng.choice([3, 4])
    lengths = [T, rng.randint(1, T - 1)]
    values = [[rng.randint(1, 6) for _ in range(T)] for _ in range(B)]
    x = torch.zeros(B, T, 1)
    for b in range(B):
        for t in range(lengths[b]):
            x[b, t, 0] = float(values[b][t])
    bn = modules.BatchNorm1d(1, momentum=1.0)  # momentum 1: the running mean is the batch mean
    with torch.no_grad():
        bn.train()(x.reshape(B * T, 1))  # every position counts, padding included
    value = round(float(bn.running_mean[0]), 6)
    real = [values[b][t] for b in range(B) for t in range(lengths[b])]
    masked = round(sum(real) / len(real), 6)
    rows = _padded_row(0, values[0][: lengths[0]], T - lengths[0])
    for b in range(1, B):
        row = _padded_row(b, values[b][: lengths[b]], T - lengths[b])
        rows = tr("{rows}; {row}", rows=rows, row=row)
    question = tr(
        "A batch of {B} sequences of one feature, padded with zeros to length {T} ({rows}), is "
        "reshaped to ({BT}, 1) and passed through `norms.BatchNorm1d(1)` in training mode. "
        "What mean does it subtract?",
        B=B,
        T=T,
        rows=rows,
        BT=B * T,
    )
    return numeric(
        question,
        value,
        dict(kind="padded_mean", lengths=lengths, values=values),
        correct_fb=tr(
            "Correct: the zeros count as tokens: {total}/{BT} = {value:g}. The mean over the real "
            "tokens is {masked:g}; the padding drags the statistic towards 0, and by how much "
            "depends on how much padding the batch happens to hold.",
            total=sum(real),
            BT=B * T,
            value=value,
            masked=masked,
        ),
        wrong=[
            (
                masked,
                tr(
                    "That is the mean over the real tokens, what a masked BatchNorm would use. "
                    "The plain layer sees the padding zeros as tokens."
                ),
            ),
            (
                round(sum(real) / (B * T - 1), 6),
                tr("That divides by B·T − 1; a mean divides by the number of rows, B·T."),
            ),
            (
                round(sum(values[0][: lengths[0]]) / lengths[0], 6),
                tr("That is the mean of sequence 0 alone; BatchNorm pools every row of the batch."),
            ),
            (
                0.0,
                tr(
                    "It does not subtract 0: a mean over values that are all ≥ 0, some > 0, is > 0."
                ),
            ),
        ],
        tol=0.0005,
        default_fb=tr("Not quite: BatchNorm averages over every row it is given."),
    )


def q_btd_without_transpose(rng, names=None):
    B, D = rng.choice([2, 4]), rng.choice([4, 8])
    T = rng.choice([D, D + 2, 5 if D != 5 else 6])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(B, T, D, generator=gen)
    bn = modules.BatchNorm1d(D)
    try:
        with torch.no_grad():
            bn(x)
        outcome = "runs_wrong"
    except (RuntimeError, ValueError):
        outcome = "raises"
    raises = outcome == "raises"
    options = [
        (
            tr("It raises an error about the number of channels."),
            raises,
            tr(
                "Yes: BatchNorm1d reads dim 1 as the channels; here that is T = {T} ≠ {D}.",
                T=T,
                D=D,
            )
            if raises
            else tr(
                "No: T = {T} happens to equal D = {D}, so the shapes match and nothing complains.",
                T=T,
                D=D,
            ),
            "raises",
        ),
        (
            tr(
                "It runs, but normalizes each time step over the batch and the features: "
                "silently wrong."
            ),
            not raises,
            tr(
                "Yes: with T = D the layer takes dim 1 (time) as its channels; the fix is "
                "`bn(x.transpose(1, 2)).transpose(1, 2)`."
            )
            if not raises
            else tr("No: it does not get that far: the number of channels does not match."),
            "runs_wrong",
        ),
        (
            tr(
                "It runs and normalizes each feature over the batch and the time steps, as "
                "intended."
            ),
            False,
            tr(
                "No: BatchNorm1d expects (N, C, L) with the channels in dim 1; (B, T, D) has them "
                "last."
            ),
            "right",
        ),
    ]
    question = tr(
        "A transformer-style tensor x of shape (B, T, D) = ({B}, {T}, {D}) goes straight into "
        "`norms.BatchNorm1d({D})` in training mode, without a transpose. What happens?",
        B=B,
        T=T,
        D=D,
    )
    return choice(
        question, options, dict(kind="btd_without_transpose", shape=(B, T, D), outcome=outcome)
    )


def q_momentum_none(rng, names=None):
    while (
        True
    ):  # a non-zero average and batches that differ, so that no distractor coincides with the key
        means = [rng.choice([-2, -1, 0, 1, 2, 3, 4]) for _ in range(rng.choice([3, 4]))]
        if sum(means) != 0 and means[0] != means[-1]:
            break
    bn = modules.BatchNorm1d(1, momentum=None)
    with torch.no_grad():
        for m in means:
            bn.train()(torch.tensor([[m - 1.0], [m + 1.0]]))  # a batch with mean m
    value = round(float(bn.running_mean[0]), 6)
    ema = 0.0
    for m in means:
        ema = 0.9 * ema + 0.1 * m
    question = tr(
        "A fresh `norms.BatchNorm1d(1, momentum=None)` runs in training mode on {k} "
        "batches whose means are {means} (in that order). What is its "
        "`running_mean` now?",
        k=len(means),
        means=", ".join(str(m) for m in means),
    )
    return numeric(
        question,
        value,
        dict(kind="momentum_none", means=means),
        correct_fb=tr(
            "Correct: momentum=None keeps a plain average of the batch statistics, "
            "{total}/{k} = {value:g}, each batch weighted equally. That is what "
            "recalibration after training needs.",
            total=sum(means),
            k=len(means),
            value=value,
        ),
        wrong=[
            (
                round(ema, 6),
                tr("That is the exponential average of the default momentum 0.1, starting from 0."),
            ),
            (float(means[-1]), tr("That is the last batch's mean, momentum = 1.")),
            (
                round(sum(means) / (len(means) + 1), 6),
                tr(
                    "That counts the initial running_mean 0 as one more batch; the average starts "
                    "at the first batch."
                ),
            ),
            (
                float(means[0]),
                tr(
                    "That is the first batch's mean only; momentum=None weighs every batch equally."
                ),
            ),
        ],
        tol=0.0005,
        default_fb=tr("Not quite: momentum=None means a cumulative (plain) average."),
    )


def q_decay_effective_lr(rng, names=None):
    lr, wd, k = rng.choice([0.1, 0.05]), rng.choice([1e-3, 5e-3, 1e-2]), rng.choice([100, 500])
    w = nn.Parameter(torch.ones(4, 4, dtype=torch.float64))
    opt = torch.optim.SGD([w], lr=lr, weight_decay=wd)
    start = float(w.detach().norm())
    for _ in range(k):
        w.grad = torch.zeros_like(w)  # the gradient is orthogonal to w; here only the decay acts
        opt.step()
    value = round((start / float(w.detach().norm())) ** 2, 4)  # η/‖W‖² grows by (‖W₀‖/‖W_k‖)²
    question = tr(
        "The weights W of a linear layer feed a BatchNorm, so the loss ignores ‖W‖ and the "
        "effective learning rate is η/‖W‖². SGD with η = {lr:g} and weight decay λ = {wd:g} runs "
        "{k} steps; ignore the gradient's own (orthogonal) contribution to ‖W‖. By what factor "
        "has the effective learning rate grown?",
        lr=lr,
        wd=wd,
        k=k,
    )
    shrink = round(1 / (1 - lr * wd) ** k, 4)
    return numeric(
        question,
        value,
        dict(kind="decay_effective_lr", lr=lr, wd=wd, k=k),
        correct_fb=tr(
            "Correct: each step multiplies W by 1 − ηλ = {step:g}, so ‖W‖ shrinks by "
            "{shrink:.4g} and η/‖W‖² grows by (1 − ηλ)⁻²ᵏ = {value:.4g}. On a scale-invariant "
            "layer weight decay does not simplify the function; it raises the effective learning "
            "rate (van Laarhoven, 2017).",
            step=1 - lr * wd,
            shrink=1 / shrink,
            value=value,
        ),
        wrong=[
            (
                shrink,
                tr(
                    "That is how much ‖W‖ shrinks (inverted); the effective learning rate goes "
                    "with its square."
                ),
            ),
            (1.0, tr("The function does not change, but the step size does.")),
            (
                round((1 - lr * wd) ** (2 * k), 4),
                tr("That is the inverse: ‖W‖ shrinks, so η/‖W‖² grows."),
            ),
        ],
        tol=value * 1e-3,
        default_fb=tr("Not quite: each step multiplies W by (1 − ηλ)."),
    )


def q_no_decay_group(rng, names=None):
    with seeded(rng.randrange(2**31)):
        conv_bias = rng.random() < 0.5
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, bias=conv_bias),
            modules.BatchNorm2d(8),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(8, 10),
            modules.LayerNorm(10),
        )
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    in_no_decay = {names[id(p)] for p in no_decay["params"]}
    labels = {
        "0.weight": tr("the convolution's kernel (`0.weight`)"),
        "0.bias": tr("the convolution's bias (`0.bias`)"),
        "1.weight": tr("BatchNorm's γ (`1.weight`)"),
        "1.bias": tr("BatchNorm's β (`1.bias`)"),
        "4.weight": tr("the linear layer's weight (`4.weight`)"),
        "4.bias": tr("the linear layer's bias (`4.bias`)"),
        "5.weight": tr("LayerNorm's γ (`5.weight`)"),
    }
    options = []
    for name, text in labels.items():
        if name not in names.values():
            continue
        ok = name in in_no_decay
        options.append(
            (
                text,
                ok,
                (
                    tr("Yes: a vector (ndim 1): a bias, γ or β.")
                    if ok
                    else tr("No: a matrix or kernel (ndim ≥ 2) keeps its weight decay.")
                ),
                name,
            )
        )
    code = (
        "model = nn.Sequential(nn.Conv2d(3, 8, 3" + ("" if conv_bias else ", bias=False") + "), "
        "norms.BatchNorm2d(8), nn.ReLU(),\n"
        "                      nn.Flatten(), nn.Linear(8, 10), norms.LayerNorm(10))\n"
        "decay, no_decay = norms.lab.pitfalls.param_groups(model, weight_decay=0.01)"
    )
    question = tr("Which parameters of this model end up in the group without weight decay?")
    return choice(
        question, options, dict(kind="no_decay_group", conv_bias=conv_bias), code=code, many=True
    )


def q_zero_init_block(rng, names=None):
    width = rng.choice([4, 6])
    seed = rng.randrange(2**31)
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        block = ResidualBlock(width, "batch", zero_init=True)
    x = torch.randn(8, width, generator=gen)
    with torch.no_grad():
        out = block(x)
        cands = {
            "relu": torch.relu(x),
            "x": x,
            "zero": torch.zeros_like(x),
            "double": torch.relu(2 * x),
        }
    texts = {
        "relu": tr("ReLU(x): the residual branch adds exactly 0"),
        "x": tr("x itself"),
        "zero": tr("0: the block is switched off"),
        "double": tr("ReLU(2x): both paths carry x"),
    }
    options = []
    for key, want in cands.items():
        ok = torch.allclose(out, want)
        options.append(
            (
                texts[key],
                ok,
                tr(
                    "Correct: γ = 0 in the branch's last BatchNorm makes the branch output "
                    "β = 0, so the block starts as ReLU(x + 0); with non-negative inputs, as "
                    "after a previous block, that is the identity (Goyal et al., 2017)."
                )
                if ok
                else tr(
                    "No: run the block: the branch's last norm outputs γ·x̂ + β with γ = 0 and "
                    "β = 0."
                ),
                key,
            )
        )
    question = tr(
        "A residual block computes ReLU(x + BN₂(W₂ ReLU(BN₁(W₁ x)))) with width {width}, and the "
        "γ of BN₂ is initialized to zero. What does the block compute at initialization (training "
        "mode)?",
        width=width,
    )
    return choice(question, options, dict(kind="zero_init_block", width=width))
