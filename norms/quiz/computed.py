"""Computed questions on any layer: statistics, parameter shapes, state_dict, reduced dims,
which layer, GroupNorm's special cases, invariances, independence of the other samples.

The questions on training and evaluation modes (running statistics, eps, a batch of one,
momentum conventions) are in :mod:`norms.quiz.running`."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.axes import batch_norm_dims, describe
from norms.i18n import tr

from .builders import choice, numeric, shape_str
from .cases import (
    ALL_LAYERS,
    alternatives,
    constructor,
    family_of,
    grouping,
    layer_label,
    make_module,
    random_case,
)


def q_num_statistics(rng, names=None):
    name, args, kwargs, shape = random_case(rng, rng.choice(names or ALL_LAYERS))
    m = make_module(name, args, kwargs)
    r = describe(m, shape)
    noun = tr("means") if r.has_mean else tr("root-mean-square (RMS) values")
    question = tr(
        "`{layer}` is applied in training mode to an input of shape {shape}. How "
        "many {noun} does it compute?",
        layer=constructor(name, args, kwargs),
        shape=shape_str(shape),
        noun=noun,
    )
    wrong = []
    for alt_name, alt_args, alt in alternatives(shape):
        if alt.num_statistics != r.num_statistics:
            wrong.append(
                (
                    alt.num_statistics,
                    tr(
                        "{num_statistics} is what {layer} would compute on this input: it "
                        "{grouping}. {layer2} {grouping2}.",
                        num_statistics=alt.num_statistics,
                        layer=layer_label(alt_name, alt_args),
                        grouping=grouping(alt_name, alt_args, alt),
                        layer2=layer_label(name, args),
                        grouping2=grouping(name, args, r),
                    ),
                )
            )
    if r.has_mean:
        per_element = tr(
            "That is one per element: then every element would be its own mean and "
            "the output would be all zeros."
        )
    else:
        per_element = tr(
            "That is one per element: then every element would be its own RMS, |x|, "
            "and the output would be x/|x| = ±1, just the sign of x (up to ε)."
        )
    wrong.append((math.prod(shape), per_element))
    correct_fb = tr(
        "Correct: {layer} {grouping}, each statistic from {elements_per_statistic} elements.",
        layer=layer_label(name, args),
        grouping=grouping(name, args, r),
        elements_per_statistic=r.elements_per_statistic,
    )
    if not r.has_mean:
        correct_fb += tr(" RMSNorm subtracts no mean at all.")
    return numeric(
        question,
        r.num_statistics,
        dict(kind="num_statistics", norm=name, args=args, kwargs=kwargs, shape=shape),
        correct_fb=correct_fb,
        wrong=wrong,
        default_fb=(
            tr(
                "Not quite. GroupNorm splits the channels into G blocks: count one "
                "statistic per sample and block."
            )
            if name == "GroupNorm"
            else tr(
                "Not quite. Work out which dims {name} reduces over; the statistics are "
                "indexed by the remaining dims.",
                name=name,
            )
        ),
    )


def q_param_shape(rng, names=None):
    pool = [n for n in (names or ALL_LAYERS)]
    name, args, kwargs, shape = random_case(rng, rng.choice(pool))
    if name.startswith("InstanceNorm"):
        kwargs = {"affine": True}
    m = make_module(name, args, kwargs)
    r = describe(m, shape)
    correct = tuple(m.weight.shape)
    which = "γ (`weight`)"
    question = tr(
        "What is the shape of {which} of `{layer}`, which is used on inputs of shape {shape}?",
        which=which,
        layer=constructor(name, args, kwargs),
        shape=shape_str(shape),
    )
    C = shape[1]
    if (
        name in ("LayerNorm", "RMSNorm") and len(shape) == 3
    ):  # (B, T, D): dim 1 is the position, not a channel
        dim1 = tr(
            "one γ per position (dim 1 is T here): parameters that depend on the "
            "position in the sequence would tie the layer to one length; γ runs "
            "along the normalized dim D."
        )
    else:
        dim1 = tr("one γ per channel: that is BatchNorm, InstanceNorm and GroupNorm.")
    cands = [
        ((C,), dim1),
        (
            tuple(shape[1:]),
            tr("one γ per feature of a sample: that is LayerNorm over every dim but the batch."),
        ),
        ((shape[-1],), tr("one γ per entry of the last dim: LayerNorm/RMSNorm over the last dim.")),
        (
            tuple(shape),
            tr(
                "that would need a γ per element of the batch, but parameters cannot "
                "depend on the batch size."
            ),
        ),
        ((shape[0], C), tr("parameters never have a batch dim: the same γ serves every sample.")),
        (tuple(r.stat_shape), tr("that is the shape of the statistics, not of γ.")),
        ((1,), tr("a single scalar γ would not let the layer rescale features independently.")),
    ]
    if name == "GroupNorm":
        cands.append(
            (
                (args[0],),
                tr("GroupNorm shares statistics within a group but still has one γ per channel."),
            )
        )
    options = [
        (
            shape_str(correct),
            True,
            tr(
                "Correct: {family_of}'s γ has shape {correct} (it runs along dims "
                "{param_dims} of the input).",
                family_of=family_of(name),
                correct=shape_str(correct),
                param_dims=r.param_dims,
            ),
            correct,
        )
    ]
    wrong, seen = [], {correct}
    for s, fb in cands:
        if s not in seen:
            seen.add(s)
            wrong.append((shape_str(s), False, tr("No: {reason}", reason=fb), s))
    options += rng.sample(wrong, min(3, len(wrong)))
    return choice(
        question,
        options,
        dict(kind="param_shape", norm=name, args=args, kwargs=kwargs, shape=shape),
    )


def _counter_role(name, args, kwargs, shape, gen, steps=2):
    """What ``num_batches_tracked`` does for this layer, found by running it: ``steps`` training
    steps
    with ``momentum=None``, and the same steps with the layer as asked (default momentum). Returns
    (counter afterwards, running mean moved?, running mean = the cumulative average of the
    batches' means?,
    the default momentum, with it the running mean = the plain exponential average, whatever the
    counter?)."""
    dims = batch_norm_dims(
        len(shape)
    )  # what a running mean averages over (BatchNorm and InstanceNorm)
    xs = [torch.randn(shape, generator=gen, dtype=torch.float64) * 2 + 1 for _ in range(steps)]
    m = make_module(name, args, dict(kwargs, momentum=None)).double().train()
    d = make_module(name, args, kwargs).double().train()
    with torch.no_grad():
        for x in xs:
            m(x)
            d(x)
    average = torch.stack([x.mean(dims) for x in xs]).mean(0)
    moved = not torch.allclose(m.running_mean, torch.zeros_like(m.running_mean))
    ema = torch.zeros_like(d.running_mean)
    for x in xs:
        ema = (1 - d.momentum) * ema + d.momentum * x.mean(dims)
    return (
        int(m.num_batches_tracked),
        moved,
        bool(torch.allclose(m.running_mean, average, atol=1e-9)),
        float(d.momentum),
        bool(torch.allclose(d.running_mean, ema, atol=1e-9)),
    )


def _counter_text(counter, moved, cumulative, momentum, plain_ema, steps=2):
    if cumulative and counter == steps:
        text = tr(
            "a counter of training batches. With momentum=None the running "
            "statistics are the cumulative average of all batches so far: the k-th "
            "batch gets weight 1/k, with k = num_batches_tracked"
        )
        if plain_ema:
            text += tr(
                ". With the default momentum ({momentum:g}) it is only counted: every "
                "update is (1 − {momentum:g})·old + {momentum:g}·batch, whatever the "
                "count; it is used for the average only when momentum=None",
                momentum=momentum,
            )
        return text
    if counter == 0 and not moved:
        return tr(
            "it keeps the state_dict in BatchNorm's format, but InstanceNorm never "
            "increments it (after {steps} training steps it is still 0), and with "
            "momentum=None its running statistics are not updated at all",
            steps=steps,
        )
    return tr(
        "a counter of training batches (after {steps} training steps it is {counter})",
        steps=steps,
        counter=counter,
    )


def q_state_dict(rng, names=None):
    name = rng.choice(names or ALL_LAYERS)
    name, args, kwargs, shape = random_case(rng, name)
    if name.startswith("InstanceNorm"):
        kwargs = rng.choice([{"affine": True}, {"affine": True, "track_running_stats": True}])
    m = make_module(name, args, kwargs)
    keys = set(m.state_dict())
    params = {n for n, _ in m.named_parameters()}
    meta = dict(kind="state_dict", norm=name, args=args, kwargs=kwargs, shape=shape)
    explain = {
        "weight": tr("γ, the learnable scale"),
        "bias": tr("β, the learnable shift"),
        "running_mean": tr("the running mean used in eval mode"),
        "running_var": tr("the running (unbiased) variance used in eval mode"),
    }
    if "num_batches_tracked" in keys:
        gen = torch.Generator().manual_seed(rng.randrange(2**31))
        role = _counter_role(name, args, kwargs, shape, gen)
        explain["num_batches_tracked"] = _counter_text(*role)
        meta["counter_role"] = role
    else:
        explain["num_batches_tracked"] = tr("a counter of training batches")
    options = []
    for k, what in explain.items():
        if k in keys:
            kind = tr("a parameter") if k in params else tr("a buffer")
            options.append(
                (
                    f"`{k}`",
                    True,
                    tr("Yes: {what}. It is {kind}, so it is saved.", what=what, kind=kind),
                    k,
                )
            )
        else:
            options.append(
                (
                    f"`{k}`",
                    False,
                    tr("No: `{layer}` has no {k}", layer=constructor(name, args, kwargs), k=k)
                    + (
                        tr(" (RMSNorm only rescales, so there is no β).")
                        if name == "RMSNorm" and k == "bias"
                        else tr(
                            " (no running statistics: it always normalizes with the statistics of "
                            "the current input)."
                        )
                        if k.startswith(("running", "num"))
                        else "."
                    ),
                    k,
                )
            )
    question = tr(
        "Which entries does the `state_dict()` of `{layer}` contain?",
        layer=constructor(name, args, kwargs),
    )
    return choice(question, options, meta, many=True)


def q_reduced_dims(rng, names=None):
    name, args, kwargs, shape = random_case(rng, rng.choice(names or ALL_LAYERS))
    m = make_module(name, args, kwargs)
    r = describe(m, shape)
    labels = ["N", "C"] + {2: [], 3: ["L"], 4: ["H", "W"], 5: ["D", "H", "W"]}[len(shape)]
    if name in ("LayerNorm", "RMSNorm") and len(shape) <= 3:
        labels = ["B", "T", "D"][-len(shape) :] if len(shape) == 3 else ["N", "D"]
    options = []
    for d, size in enumerate(shape):
        label = tr("dim {d} ({label} = {size})", d=d, label=labels[d], size=size)
        if d in r.reduced_dims and name == "GroupNorm" and d == 1:
            G, C = args
            options.append(
                (
                    label,
                    True,
                    tr(
                        "Yes, partly: two elements that differ only in dim 1 share a statistic "
                        "only if both channels are in the same block of C/G = {c} consecutive "
                        "channels; GroupNorm({g}, {c2}) has {g} such blocks, and channels in "
                        "different blocks never share one.",
                        c=C // G,
                        g=G,
                        c2=C,
                    ),
                    d,
                )
            )
        elif d in r.reduced_dims:
            options.append(
                (
                    label,
                    True,
                    tr("Yes: two elements that differ only in dim {d} share a statistic.", d=d),
                    d,
                )
            )
        else:
            options.append(
                (
                    label,
                    False,
                    tr(
                        "No: every index along dim {d} gets its own statistics, so it is kept, "
                        "not reduced.",
                        d=d,
                    ),
                    d,
                )
            )
    none_fb = (
        tr("Yes: no dim is reduced.")
        if not r.reduced_dims
        else tr(
            "No: a statistic of one element would be the element itself (the output "
            "would carry no information); every normalization layer pools several "
            "elements into each statistic."
        )
    )
    options.append(
        (tr("none: every element is normalized on its own"), not r.reduced_dims, none_fb, "none")
    )
    question = tr(
        "`{layer}` gets an input of shape {shape}. Over which dims does it "
        "compute its statistics (which dims are reduced)?",
        layer=constructor(name, args, kwargs),
        shape=shape_str(shape),
    )
    return choice(
        question,
        options,
        dict(kind="reduced_dims", norm=name, args=args, kwargs=kwargs, shape=shape),
        many=True,
    )


def q_which_layer(rng, names=None):
    """Comparison: which layer reduces over these dims?"""
    N, C, H, W = (
        rng.choice([2, 4, 8]),
        rng.choice([4, 6, 8]),
        rng.choice([3, 5]),
        rng.choice([4, 7]),
    )
    shape = (N, C, H, W)
    layers = [
        ("BatchNorm2d", (C,)),
        ("InstanceNorm2d", (C,)),
        ("LayerNorm", ((C, H, W),)),
        ("LayerNorm", (W,)),
        ("GroupNorm", (2, C)),
    ]
    descs = [(n, a, describe(make_module(n, a), shape)) for n, a in layers]
    unique = [d for d in descs if sum(o[2].reduced_dims == d[2].reduced_dims for o in descs) == 1]
    target = rng.choice(unique)
    options = []
    for n, a, r in descs:
        ok = r.reduced_dims == target[2].reduced_dims
        layer, what = constructor(n, a), grouping(n, a, r)
        fb = (
            tr("Correct: `{layer}` {what}.", layer=layer, what=what)
            if ok
            else tr("No: `{layer}` {what}.", layer=layer, what=what)
        )
        if n == "GroupNorm":
            fb += tr(" Channels in different blocks never share a statistic.")
        options.append((f"`{constructor(n, a)}`", ok, fb, (n, a)))
    question = tr(
        "For an input of shape {shape}, which layer computes its statistics over "
        "dims {reduced_dims} (elements that differ only along those dims share a "
        "mean and a variance)?",
        shape=shape_str(shape),
        reduced_dims=target[2].reduced_dims,
    )
    options = [o for o in options if o[1]] + rng.sample(
        [o for o in options if not o[1]], min(3, sum(not o[1] for o in options))
    )
    return choice(
        question,
        options,
        dict(
            kind="which_layer",
            shape=shape,
            dims=target[2].reduced_dims,
            options=[(n, a) for n, a, _ in descs],
        ),
    )


def _sample_independent(name, args, shape, gen):
    """Does sample 0's output stay the same when sample 1 changes (training mode)?"""
    m = make_module(name, args).train()
    x = torch.randn(shape, generator=gen)
    x2 = x.clone()
    x2[1] = x2[1] * 3 + 2
    with torch.no_grad():
        return torch.allclose(m(x)[0], m(x2)[0], atol=1e-6)


def q_batch_independent(rng, names=None):
    N, C, L = rng.choice([4, 8]), rng.choice([4, 6]), rng.choice([5, 7])
    shape = (N, C, L)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    layers = [
        ("BatchNorm1d", (C,)),
        ("LayerNorm", (L,)),
        ("RMSNorm", (L,)),
        ("GroupNorm", (2, C)),
        ("InstanceNorm1d", (C,)),
    ]
    options = []
    for n, a in layers:
        ind = _sample_independent(n, a, shape, gen)
        options.append(
            (
                f"`{constructor(n, a)}`",
                ind,
                tr("Yes: its statistics come from one sample only.")
                if ind
                else tr(
                    "No: its statistics are shared across the batch, so changing another "
                    "sample changes this sample's output (in training mode)."
                ),
                (n, a),
            )
        )
    question = tr(
        "In training mode, on inputs of shape {shape}, which layers give each "
        "sample an output that does not depend on the other samples in the batch?",
        shape=shape_str(shape),
    )
    return choice(
        question, options, dict(kind="batch_independent", shape=shape, layers=layers), many=True
    )


def q_groupnorm_special(rng, names=None):
    C = rng.choice([4, 6, 8])
    N, H, W = rng.choice([2, 3]), rng.choice([3, 4]), rng.choice([5, 6])
    shape = (N, C, H, W)
    G = rng.choice([1, C])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(shape, generator=gen)
    with torch.no_grad():
        y = modules.GroupNorm(G, C)(x)
        layers = [
            ("InstanceNorm2d", (C,)),
            ("LayerNorm", ((C, H, W),)),
            ("BatchNorm2d", (C,)),
            ("LayerNorm", (W,)),
        ]
        outs = {(n, a): make_module(n, a)(x) for n, a in layers}
    options = []
    for (n, a), out in outs.items():
        label = f"`{constructor(n, a)}`"
        same = torch.allclose(y, out, atol=1e-5)
        options.append(
            (
                label,
                same,
                (
                    tr(
                        "Correct: with G = 1 the single group holds every channel and "
                        "position of a sample."
                    )
                    if G == 1
                    else tr("Correct: with G = C each group is one channel of one sample.")
                )
                if same
                else tr("No: it groups different elements, so the outputs differ."),
                (n, a),
            )
        )
    question = tr(
        "At initialization (γ = 1, β = 0), `norms.GroupNorm({g}, {c})` on an "
        "input of shape {shape} computes exactly the same as which layer?",
        g=G,
        c=C,
        shape=shape_str(shape),
    )
    return choice(question, options, dict(kind="groupnorm_special", G=G, C=C, shape=shape))


def q_invariance(rng, names=None):
    D = rng.choice([4, 8, 16])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(3, D, generator=gen, dtype=torch.float64) * 2 + 0.5
    c, a = rng.choice([1.5, -2.0, 3.0]), rng.choice([2.0, 0.5, 5.0])
    ln = modules.LayerNorm(D, eps=0.0).double()
    rms = modules.RMSNorm(D, eps=0.0).double()

    def same(f, g):
        with torch.no_grad():
            return torch.allclose(f(x), f(g(x)), atol=1e-9)

    shift = lambda t: t + c  # noqa: E731
    scale = lambda t: t * a  # noqa: E731
    keys = [
        ("LayerNorm", "shift"),
        ("RMSNorm", "shift"),
        ("LayerNorm", "scale"),
        ("RMSNorm", "scale"),
    ]
    facts = [
        (
            tr("LayerNorm(x + c) = LayerNorm(x) (re-centering; here c = {c})", c=c),
            same(ln, shift),
            tr("LayerNorm subtracts the mean, so adding the same c to every feature cancels out."),
            tr("It does change: the added constant is not removed."),
        ),
        (
            tr("RMSNorm(x + c) = RMSNorm(x) (re-centering; here c = {c})", c=c),
            same(rms, shift),
            tr("RMSNorm is invariant to re-centering."),
            tr(
                "RMSNorm does not subtract the mean, so adding c changes both x and its "
                "root mean square."
            ),
        ),
        (
            tr("LayerNorm(a·x) = LayerNorm(x) (re-scaling; here a = {a})", a=a),
            same(ln, scale),
            tr("scaling x scales its standard deviation by the same a, which cancels."),
            tr("It is not invariant to re-scaling."),
        ),
        (
            tr("RMSNorm(a·x) = RMSNorm(x) (re-scaling; here a = {a})", a=a),
            same(rms, scale),
            tr(
                "scaling x scales its root mean square by the same a, which cancels: "
                "RMSNorm keeps LayerNorm's re-scaling invariance and drops the "
                "re-centering one."
            ),
            tr("It is not invariant to re-scaling."),
        ),
    ]
    options = [
        (t, ok, tr("Yes: {reason}", reason=yes) if ok else tr("No: {reason}", reason=no), key)
        for (t, ok, yes, no), key in zip(facts, keys, strict=True)
    ]
    question = tr(
        "Take the feature vector x of one token (D = {d}) and ignore ε. Which of these hold?", d=D
    )
    return choice(question, options, dict(kind="invariance", D=D, c=c, a=a), many=True)
