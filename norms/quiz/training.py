"""Questions of the 'Training on real data' chapter: statistics per batch, the learning-rate
scaling rule,
the update-to-weight ratio, BatchNorm's two modes, which norm at small batches (all computed)."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.axes import describe
from norms.i18n import tr

from .builders import choice, numeric, shape_str
from .cases import constructor, make_module


def q_values_per_statistic(rng, names=None):
    """How many values one statistic of BatchNorm2d / GroupNorm / LayerNorm averages in a CNN
    block."""
    B = rng.choice([2, 4, 8, 32])
    C, side = rng.choice([(16, 8), (32, 4), (32, 2)])
    layer = rng.choice(["BatchNorm2d", "GroupNorm", "LayerNorm"])
    args = {"BatchNorm2d": (C,), "GroupNorm": (4, C), "LayerNorm": ((C, side, side),)}[layer]
    shape = (B, C, side, side)
    value = describe(make_module(layer, args), shape).elements_per_statistic
    per = {
        "BatchNorm2d": tr("one channel, over the batch and the pixels: B·H·W"),
        "GroupNorm": tr("one sample and one group of C/G channels: (C/G)·H·W"),
        "LayerNorm": tr("one sample, over all of C·H·W"),
    }[layer]
    wrong = [
        (
            B * side * side,
            tr("That is B·H·W, what BatchNorm averages: all samples of one channel."),
        ),
        (C * side * side // 4, tr("That is (C/G)·H·W, one group of GroupNorm for one sample.")),
        (C * side * side, tr("That is C·H·W, everything LayerNorm sees in one sample.")),
        (B, tr("That counts only the samples; the pixels of a feature map are pooled too.")),
        (B * C * side * side, tr("That is the whole tensor.")),
    ]
    wrong = [(v, fb) for v, fb in wrong if v != value]
    question = tr(
        "A convolutional block's output has shape {shape} (batch B = {B}, C = {C} "
        "channels of {side} × {side} pixels) and goes through `{layer}` in training "
        "mode. How many values does each mean it computes average over?",
        shape=shape_str(shape),
        B=B,
        C=C,
        side=side,
        layer=constructor(layer, args),
    )
    return numeric(
        question,
        float(value),
        dict(kind="values_per_statistic", layer=layer, shape=shape),
        correct_fb=tr(
            "Correct: each statistic covers {per} = {value} values.", per=per, value=value
        ),
        wrong=wrong,
        default_fb=tr("Not quite: list the axes the layer reduces over and multiply their sizes."),
    )


def q_linear_scaling(rng, names=None):
    b0 = rng.choice([32, 64, 256])
    lr0 = rng.choice([0.1, 0.2, 0.05])
    b = rng.choice([2, 4, 8, 16])
    value = round(lr0 * b / b0, 8)
    question = tr(
        "A network trains well with SGD at learning rate {lr0:g} and batches of {b0}. You must "
        "shrink the batch to {b} (memory). Under the linear scaling rule that Goyal et al. (2017) "
        "and Wu & He (2018) use, which learning rate do you start from?",
        lr0=lr0,
        b0=b0,
        b=b,
    )
    wrong = [
        (
            lr0,
            tr(
                "That keeps the learning rate: each step now averages far fewer samples, so it is "
                "a much larger step per sample seen."
            ),
        ),
        (
            round(lr0 * math.sqrt(b / b0), 8),
            tr("That is the square-root rule, a different heuristic."),
        ),
        (
            round(lr0 * b0 / b, 8),
            tr("That scales the wrong way: a smaller batch gets a smaller learning rate."),
        ),
    ]
    return numeric(
        question,
        value,
        dict(kind="linear_scaling", b0=b0, lr0=lr0, b=b),
        correct_fb=tr(
            "Correct: η = {lr0:g} · {b}/{b0} = {value:g}, so the same number of samples "
            "moves the weights about as far.",
            lr0=lr0,
            b=b,
            b0=b0,
            value=value,
        ),
        wrong=wrong,
        tol=value * 1e-3,
        default_fb=tr("Not quite: scale the learning rate in proportion to the batch size."),
    )


def q_update_ratio(rng, names=None):
    a, b = rng.choice([(3, 4), (6, 8), (5, 12), (8, 15)])
    g1, g2 = rng.choice([(1, 0), (0, 2), (2, 0), (0, 1)])
    lr = rng.choice([0.01, 0.1, 0.05])
    W = torch.tensor([[float(a), float(b)]], dtype=torch.float64)
    grad = torch.tensor([[float(g1), float(g2)]], dtype=torch.float64)
    W_new = W - lr * grad  # one plain SGD step
    value = round(float((W_new - W).norm() / W.norm()), 8)
    question = tr(
        "A weight matrix W = [[{a}, {b}]] gets the gradient [[{g1}, {g2}]] and takes one plain "
        "SGD step with learning rate {lr:g}. What is the update-to-weight ratio ‖ΔW‖/‖W‖ of that "
        "step?",
        a=a,
        b=b,
        g1=g1,
        g2=g2,
        lr=lr,
    )
    norm_w = math.hypot(a, b)
    wrong = [
        (round(math.hypot(g1, g2) / norm_w, 8), tr("That forgets the learning rate: ΔW = −η·g.")),
        (round(lr * math.hypot(g1, g2), 8), tr("That is ‖ΔW‖ itself; divide by ‖W‖.")),
        (
            round(float(W_new.norm() / W.norm()), 8),
            tr(
                "That is ‖W + ΔW‖/‖W‖, how the length of W changes; "
                "the update ratio measures the change itself."
            ),
        ),
    ]
    return numeric(
        question,
        value,
        dict(kind="update_ratio", W=(a, b), g=(g1, g2), lr=lr),
        correct_fb=tr(
            "Correct: ‖ΔW‖ = {lr:g}·{g:g} and ‖W‖ = {norm_w:g}, so the ratio is {value:g}.",
            lr=lr,
            g=math.hypot(g1, g2),
            norm_w=norm_w,
            value=value,
        ),
        wrong=wrong,
        tol=value * 1e-3,
        default_fb=tr("Not quite: ΔW = −η·g; divide its norm by ‖W‖."),
    )


def _depends_on_batch(name, args, shape, gen, training):
    """Does sample 0's output change when the other samples change (trained running stats; in
    `training`)?"""
    layer = make_module(name, args)
    with torch.no_grad():
        for _ in range(3):  # collect some running statistics
            layer.train()(torch.randn(shape, generator=gen) * 2 + 1)
        layer.train(training)
        x = torch.randn(shape, generator=gen)
        y = x.clone()
        y[1:] = torch.randn(y[1:].shape, generator=gen) * 3
        return not torch.allclose(layer(x)[0], layer(y)[0], atol=1e-6)


def q_prediction_depends_on_batch(rng, names=None):
    N, C = rng.choice([4, 8]), rng.choice([4, 6])
    shape = (N, C, 3, 3)
    mode = rng.choice(["train", "eval"])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    layers = [("BatchNorm2d", (C,)), ("GroupNorm", (2, C)), ("LayerNorm", ((C, 3, 3),))]
    options = []
    for n, a in layers:
        dep = _depends_on_batch(n, a, shape, gen, mode == "train")
        if dep:
            fb = tr(
                "Yes: in training mode BatchNorm normalizes with the statistics of the current "
                "batch."
            )
        elif n.startswith("BatchNorm"):
            fb = tr("No: in evaluation mode BatchNorm uses its running statistics, fixed numbers.")
        else:
            fb = tr("No: its statistics come from the sample itself, in both modes.")
        options.append((f"`{constructor(n, a)}`", dep, fb, (n, a)))
    none = not any(o[1] for o in options)
    options.append(
        (
            tr("None of them"),
            none,
            tr("Yes: in evaluation mode every one of these layers treats each image on its own.")
            if none
            else tr("No: in training mode BatchNorm mixes the images of a batch."),
            "none",
        )
    )
    where = tr("`model.train()` (as during training)") if mode == "train" else "`model.eval()`"
    question = tr(
        "After training, a test image is classified in a batch of {N} test images, with the model "
        "in {where}; inputs to the norm have shape {shape}. With which layers does the "
        "prediction for that image change when the other images of its batch change?",
        N=N,
        where=where,
        shape=shape_str(shape),
    )
    return choice(
        question,
        options,
        dict(kind="prediction_depends_on_batch", mode=mode, shape=shape),
        many=True,
    )


def q_small_batch_choice(rng, names=None):
    """Which norms keep their statistics from the same number of values when the batch shrinks
    (computed)."""
    C, side = rng.choice([(16, 8), (32, 4)])
    small, big = rng.choice([2, 4]), 32
    layers = [
        ("BatchNorm2d", (C,)),
        ("GroupNorm", (4, C)),
        ("LayerNorm", ((C, side, side),)),
        ("InstanceNorm2d", (C,)),
    ]
    options = []
    for n, a in layers:
        m_small = describe(make_module(n, a), (small, C, side, side)).elements_per_statistic
        m_big = describe(make_module(n, a), (big, C, side, side)).elements_per_statistic
        same = m_small == m_big
        options.append(
            (
                f"`{constructor(n, a)}`",
                same,
                (
                    tr("Yes: each statistic averages {m} values at either batch size.", m=m_small)
                    if same
                    else tr(
                        "No: its statistics average {m_big} values at batch {big} but only "
                        "{m_small} at batch {small}.",
                        m_big=m_big,
                        big=big,
                        m_small=m_small,
                        small=small,
                    )
                ),
                (n, a),
            )
        )
    question = tr(
        "You shrink the batch of a CNN from {big} to {small} images; a block's output has "
        "{C} channels of {side} × {side} pixels. Which layers compute each statistic from as many "
        "values as before?",
        big=big,
        small=small,
        C=C,
        side=side,
    )
    return choice(
        question, options, dict(kind="small_batch_choice", C=C, side=side, small=small), many=True
    )


def q_running_after_small_batches(rng, names=None):
    """BatchNorm's running variance after training on batches of n values: the mean of unbiased
    batch variances
    (close to the population's), while training normalized with biased ones (smaller on average)."""
    n = rng.choice([2, 4, 8])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    K = 20000  # 20000 independent units, one batch of n values each
    bn = modules.BatchNorm1d(K, momentum=None)
    x = torch.randn(n, K, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        y = bn.double().train()(x)
    # what training divided by: recover the variance from the output
    # (y = (x - mean) / sqrt(var + eps))
    used = ((x - x.mean(0)) / y).pow(2).mean(0) - bn.eps
    run = float(bn.running_var.mean())
    mean_biased = float(used.mean())
    ratio = mean_biased / run
    expected = (n - 1) / n
    if abs(ratio - expected) > 0.05:
        raise AssertionError(f"measured {ratio} for n = {n}, expected about {expected}")
    options = [
        (
            tr(
                "about {expected:.2g}: training divided by the biased variance, whose mean is "
                "(n − 1)/n of the true one",
                expected=expected,
            ),
            True,
            tr(
                "Correct: with n = {n} values per statistic the biased batch variance averages "
                "(n − 1)/n = {expected:.3g} of σ² (measured: {ratio:.3f}), while the running "
                "variance stores the unbiased estimate, about σ². Evaluation mode therefore "
                "divides by a larger variance than training did, on top of the noise.",
                n=n,
                expected=expected,
                ratio=ratio,
            ),
            "biased",
        ),
        (
            tr("about 1: the running variance equals what training used"),
            False,
            tr(
                "No: the running variance is unbiased, training used the biased variance of each "
                "batch."
            ),
            "one",
        ),
        (
            tr("about {inverse:.2g}: training used the larger variance", inverse=n / (n - 1)),
            False,
            tr("No: that is the wrong way round; the biased variance is the smaller one."),
            "inverse",
        ),
    ]
    question = tr(
        "BatchNorm trains on batches that give each statistic only n = {n} values of a unit with "
        "variance σ² = 1. On average, what is (variance used to normalize in training) / (running "
        "variance used in evaluation)?",
        n=n,
    )
    return choice(question, options, dict(kind="running_after_small_batches", n=n, ratio=ratio))
