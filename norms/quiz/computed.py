"""Computed questions on any layer: statistics, parameter shapes, state_dict, reduced dims, train/eval,
running statistics, eps, batch of one, invariances, Keras momentum, biased/unbiased variance."""

from __future__ import annotations

import json
import math

import torch

import norms
from norms.axes import batch_norm_dims, describe

from .builders import _choice, _factor, _num, _numeric, _shape
from .cases import _ALL, _alternatives, _case, _ctor, _grouping, _label, _module, _what


def q_num_statistics(rng, names=None):
    name, args, kwargs, shape = _case(rng, rng.choice(names or _ALL))
    m = _module(name, args, kwargs)
    r = describe(m, shape)
    noun = "means" if r.has_mean else "root-mean-square (RMS) values"
    question = (f"`{_ctor(name, args, kwargs)}` is applied in training mode to an input of shape "
                f"{_shape(shape)}. How many {noun} does it compute?")
    wrong = []
    for alt_name, alt_args, alt in _alternatives(shape):
        if alt.num_statistics != r.num_statistics:
            wrong.append((alt.num_statistics, f"{alt.num_statistics} is what {_label(alt_name, alt_args)} would "
                                              f"compute on this input: it {_grouping(alt_name, alt_args, alt)}. "
                                              f"{_label(name, args)} {_grouping(name, args, r)}."))
    if r.has_mean:
        per_element = ("That is one per element: then every element would be its own mean and the output would "
                       "be all zeros.")
    else:
        per_element = ("That is one per element: then every element would be its own RMS, |x|, and the output "
                       "would be x/|x| = ±1, just the sign of x (up to ε).")
    wrong.append((math.prod(shape), per_element))
    correct_fb = (f"Correct: {_label(name, args)} {_grouping(name, args, r)}, each statistic from "
                  f"{r.elements_per_statistic} elements.")
    if not r.has_mean:
        correct_fb += " RMSNorm subtracts no mean at all."
    return _numeric(question, r.num_statistics, dict(kind="num_statistics", norm=name, args=args, kwargs=kwargs,
                                                     shape=shape),
                    correct_fb=correct_fb, wrong=wrong,
                    default_fb=("Not quite. GroupNorm splits the channels into G blocks: count one statistic per "
                                "sample and block." if name == "GroupNorm" else
                                f"Not quite. Work out which dims {name} reduces over; the statistics are indexed "
                                "by the remaining dims."))


def q_param_shape(rng, names=None):
    pool = [n for n in (names or _ALL)]
    name, args, kwargs, shape = _case(rng, rng.choice(pool))
    if name.startswith("InstanceNorm"):
        kwargs = {"affine": True}
    m = _module(name, args, kwargs)
    r = describe(m, shape)
    correct = tuple(m.weight.shape)
    which = "γ (`weight`)"
    question = (f"What is the shape of {which} of `{_ctor(name, args, kwargs)}`, which is used on inputs "
                f"of shape {_shape(shape)}?")
    C = shape[1]
    if name in ("LayerNorm", "RMSNorm") and len(shape) == 3:   # (B, T, D): dim 1 is the position, not a channel
        dim1 = ("one γ per position (dim 1 is T here): parameters that depend on the position in the sequence "
                "would tie the layer to one length; γ runs along the normalized dim D.")
    else:
        dim1 = "one γ per channel: that is BatchNorm, InstanceNorm and GroupNorm."
    cands = [
        ((C,), dim1),
        (tuple(shape[1:]), "one γ per feature of a sample: that is LayerNorm over every dim but the batch."),
        ((shape[-1],), "one γ per entry of the last dim: LayerNorm/RMSNorm over the last dim."),
        (tuple(shape), "that would need a γ per element of the batch, but parameters cannot depend on the "
                       "batch size."),
        ((shape[0], C), "parameters never have a batch dim: the same γ serves every sample."),
        (tuple(r.stat_shape), "that is the shape of the statistics, not of γ."),
        ((1,), "a single scalar γ would not let the layer rescale features independently."),
    ]
    if name == "GroupNorm":
        cands.append(((args[0],), "GroupNorm shares statistics within a group but still has one γ per channel."))
    options = [(_shape(correct), True, f"Correct: {_what(name)}'s γ has shape {_shape(correct)} "
                                       f"(it runs along dims {r.param_dims} of the input).", correct)]
    wrong, seen = [], {correct}
    for s, fb in cands:
        if s not in seen:
            seen.add(s)
            wrong.append((_shape(s), False, f"No: {fb}", s))
    options += rng.sample(wrong, min(3, len(wrong)))
    return _choice(question, options, dict(kind="param_shape", norm=name, args=args, kwargs=kwargs, shape=shape))


def _counter_role(name, args, kwargs, shape, gen, steps=2):
    """What ``num_batches_tracked`` does for this layer, found by running it: ``steps`` training steps
    with ``momentum=None``, and the same steps with the layer as asked (default momentum). Returns
    (counter afterwards, running mean moved?, running mean = the cumulative average of the batches' means?,
    the default momentum, with it the running mean = the plain exponential average, whatever the counter?)."""
    dims = batch_norm_dims(len(shape))   # what a running mean averages over (BatchNorm and InstanceNorm)
    xs = [torch.randn(shape, generator=gen, dtype=torch.float64) * 2 + 1 for _ in range(steps)]
    m = _module(name, args, dict(kwargs, momentum=None)).double().train()
    d = _module(name, args, kwargs).double().train()
    with torch.no_grad():
        for x in xs:
            m(x)
            d(x)
    average = torch.stack([x.mean(dims) for x in xs]).mean(0)
    moved = not torch.allclose(m.running_mean, torch.zeros_like(m.running_mean))
    ema = torch.zeros_like(d.running_mean)
    for x in xs:
        ema = (1 - d.momentum) * ema + d.momentum * x.mean(dims)
    return (int(m.num_batches_tracked), moved, bool(torch.allclose(m.running_mean, average, atol=1e-9)),
            float(d.momentum), bool(torch.allclose(d.running_mean, ema, atol=1e-9)))


def _counter_text(counter, moved, cumulative, momentum, plain_ema, steps=2):
    if cumulative and counter == steps:
        text = ("a counter of training batches. With momentum=None the running statistics are the cumulative "
                "average of all batches so far: the k-th batch gets weight 1/k, with k = num_batches_tracked")
        if plain_ema:
            text += (f". With the default momentum ({momentum:g}) it is only counted: every update is "
                     f"(1 − {momentum:g})·old + {momentum:g}·batch, whatever the count; it is used for the average "
                     "only when momentum=None")
        return text
    if counter == 0 and not moved:
        return ("it keeps the state_dict in BatchNorm's format, but InstanceNorm never increments it (after "
                f"{steps} training steps it is still 0), and with momentum=None its running statistics are not "
                "updated at all")
    return f"a counter of training batches (after {steps} training steps it is {counter})"


def q_state_dict(rng, names=None):
    name = rng.choice(names or _ALL)
    name, args, kwargs, shape = _case(rng, name)
    if name.startswith("InstanceNorm"):
        kwargs = rng.choice([{"affine": True}, {"affine": True, "track_running_stats": True}])
    m = _module(name, args, kwargs)
    keys = set(m.state_dict())
    params = {n for n, _ in m.named_parameters()}
    meta = dict(kind="state_dict", norm=name, args=args, kwargs=kwargs, shape=shape)
    explain = {
        "weight": "γ, the learnable scale",
        "bias": "β, the learnable shift",
        "running_mean": "the running mean used in eval mode",
        "running_var": "the running (unbiased) variance used in eval mode",
    }
    if "num_batches_tracked" in keys:
        gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
        role = _counter_role(name, args, kwargs, shape, gen)
        explain["num_batches_tracked"] = _counter_text(*role)
        meta["counter_role"] = role
    else:
        explain["num_batches_tracked"] = "a counter of training batches"
    options = []
    for k, what in explain.items():
        if k in keys:
            kind = "a parameter" if k in params else "a buffer"
            options.append((f"`{k}`", True, f"Yes: {what}. It is {kind}, so it is saved.", k))
        else:
            options.append((f"`{k}`", False, f"No: `{_ctor(name, args, kwargs)}` has no {k}"
                            + (" (RMSNorm only rescales, so there is no β)." if name == "RMSNorm" and k == "bias"
                               else " (no running statistics: it always normalizes with the statistics of the "
                                    "current input)." if k.startswith(("running", "num")) else "."), k))
    question = f"Which entries does the `state_dict()` of `{_ctor(name, args, kwargs)}` contain?"
    return _choice(question, options, meta, many=True)


def q_reduced_dims(rng, names=None):
    name, args, kwargs, shape = _case(rng, rng.choice(names or _ALL))
    m = _module(name, args, kwargs)
    r = describe(m, shape)
    labels = ["N", "C"] + {2: [], 3: ["L"], 4: ["H", "W"], 5: ["D", "H", "W"]}[len(shape)]
    if name in ("LayerNorm", "RMSNorm") and len(shape) <= 3:
        labels = ["B", "T", "D"][-len(shape):] if len(shape) == 3 else ["N", "D"]
    options = []
    for d, size in enumerate(shape):
        label = f"dim {d} ({labels[d]} = {size})"
        if d in r.reduced_dims and name == "GroupNorm" and d == 1:
            G, C = args
            options.append((label, True, f"Yes, partly: two elements that differ only in dim 1 share a statistic "
                                         f"only if both channels are in the same block of C/G = {C // G} "
                                         f"consecutive channels; GroupNorm({G}, {C}) has {G} such blocks, and "
                                         "channels in different blocks never share one.", d))
        elif d in r.reduced_dims:
            options.append((label, True, f"Yes: two elements that differ only in dim {d} share a statistic.", d))
        else:
            options.append((label, False, f"No: every index along dim {d} gets its own statistics, so it is "
                                          "kept, not reduced.", d))
    none_fb = ("Yes: no dim is reduced." if not r.reduced_dims else
               "No: a statistic of one element would be the element itself (the output would carry no "
               "information); every normalization layer pools several elements into each statistic.")
    options.append(("none: every element is normalized on its own", not r.reduced_dims, none_fb, "none"))
    question = (f"`{_ctor(name, args, kwargs)}` gets an input of shape {_shape(shape)}. Over which dims does it "
                "compute its statistics (which dims are reduced)?")
    return _choice(question, options, dict(kind="reduced_dims", norm=name, args=args, kwargs=kwargs, shape=shape),
                   many=True)


def _differs_in_eval(m, shape, gen):
    """Run one training step, then compare train- and eval-mode outputs on the same input."""
    m.train()
    m(torch.randn(shape, generator=gen) * 2 + 1)
    x = torch.randn(shape, generator=gen)
    with torch.no_grad():
        y_train = m.train()(x)
        y_eval = m.eval()(x)
    m.train()
    return not torch.allclose(y_train, y_eval, atol=1e-5)


def q_train_eval(rng, names=None):
    name = rng.choice(names or _ALL)
    name, args, kwargs, shape = _case(rng, name)
    if name.startswith("InstanceNorm"):
        kwargs = rng.choice([{}, {"track_running_stats": True}, {"affine": True}])
    m = _module(name, args, kwargs)
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    differ = _differs_in_eval(m, shape, gen)
    has_w, has_b = getattr(m, "weight", None) is not None, getattr(m, "bias", None) is not None
    if has_w and has_b:
        affine_fb = "No: γ and β are applied in both modes; only the statistics can differ."
    elif has_w:
        affine_fb = (f"No: {_what(name)} has γ but no β, and γ is applied in both modes; only the statistics "
                     "can differ.")
    else:
        affine_fb = (f"No: `{_ctor(name, args, kwargs)}` has no γ or β at all (affine=False), so there is nothing "
                     "to switch off; only the statistics can differ.")
    tracks = getattr(m, "running_mean", None) is not None
    yes_running = "Yes: in eval mode it normalizes with the running mean and variance collected in training."
    no_own = "No: it has no running statistics, so both modes normalize each input with its own statistics."
    options = [
        (yes_running, differ and tracks,
         "Correct: " + yes_running[5:] if differ else
         "No: this layer keeps no running statistics"
         + ("; InstanceNorm only does with track_running_stats=True." if name.startswith("Instance") else "."),
         "differ"),
        (no_own, not differ,
         "Correct: its statistics are computed per sample, from the input itself, in both modes." if not differ
         else "No: this layer keeps running statistics (it has running_mean/running_var buffers) and uses them "
              "in eval mode.", "same"),
        ("Yes: eval mode switches off γ and β.", False, affine_fb, "affine"),
        ("No: `.eval()` only affects dropout.", False,
         "No: `.eval()` sets `self.training = False` on every submodule; any layer may read it (BatchNorm does).",
         "dropout"),
    ]
    question = f"Does `{_ctor(name, args, kwargs)}` compute something different in `.train()` and `.eval()` mode?"
    return _choice(question, options, dict(kind="train_eval", norm=name, args=args, kwargs=kwargs, shape=shape))


def _small_batch(rng, n_rows, n_cols):
    """Small integers; every column varies and has a clearly non-zero mean (so the distractors differ)."""
    while True:
        rows = [[rng.randint(-2, 4) for _ in range(n_cols)] for _ in range(n_rows)]
        cols = list(zip(*rows))
        if all(len(set(c)) > 1 and abs(sum(c)) / n_rows >= 0.5 for c in cols):
            return rows


def _bn_step(rows, momentum):
    m = norms.BatchNorm1d(len(rows[0]), momentum=momentum)
    m.train()
    x = torch.tensor(rows, dtype=torch.float64)
    m = m.double()
    m(x)
    return m.running_mean.tolist(), m.running_var.tolist()


def _distinct(values, gap) -> bool:
    """No two of ``values`` within ``gap`` of each other (so no numeric distractor collapses onto another)."""
    return all(abs(a - b) > gap for i, a in enumerate(values) for b in values[i + 1:])


# momentum 0.5 is left out on purpose: there PyTorch's and Keras's conventions give the same update, and the
# Keras-convention distractor would coincide with the key.
_STEP_MOMENTA = [0.1, 0.2, 0.3]
_STEP_TOL = 0.0015


def q_running_var(rng, names=None):
    while True:
        n_rows = rng.choice([3, 4])
        rows = _small_batch(rng, n_rows, 2)
        mom = rng.choice(_STEP_MOMENTA)
        _, rv = _bn_step(rows, mom)
        value = round(rv[0], 6)
        col = [r[0] for r in rows]
        mean = sum(col) / n_rows
        ss = sum((v - mean) ** 2 for v in col)
        vb, vu = ss / n_rows, ss / (n_rows - 1)
        wrong = [
            ((1 - mom) * 1 + mom * vb, "That uses the biased variance (÷n). BatchNorm normalizes with the biased "
                                       "variance but stores the unbiased one (÷(n−1)) in running_var."),
            (mom * 1 + (1 - mom) * vu, "That is the TensorFlow/Keras convention (momentum weighs the old value). "
                                       "In PyTorch new = (1 − momentum)·old + momentum·batch."),
            (mom * 1 + (1 - mom) * vb, "That mixes up both: Keras-style momentum and the biased variance."),
            (vu, "That is the batch's unbiased variance alone; the running value only moves a fraction momentum "
                 "towards it."),
            (vb, "That is the batch's biased variance alone; the running value only moves a fraction momentum "
                 "towards it, and it uses the unbiased variance."),
            (1.0, "That is the starting value: a training step does move running_var towards the batch's "
                  "(unbiased) variance."),
        ]
        # a batch whose unbiased variance is (nearly) 1 would leave running_var where it started, so "nothing
        # changes" would be right by accident and the distractors would collapse onto the key: draw again
        if abs(vu - 1) >= 0.1 and _distinct([value] + [v for v, _ in wrong], 2.5 * _STEP_TOL):
            break
    question = (f"A fresh `norms.BatchNorm1d(2, momentum={mom})` (so `running_var` starts as [1, 1]) does one "
                f"training step on this batch of {n_rows} samples (one row per sample). What is `running_var[0]` "
                "afterwards? (3 decimals)")
    code = "x = torch.tensor(" + json.dumps(rows) + ", dtype=torch.float32)"
    return _numeric(question, value, dict(kind="running_var", rows=rows, momentum=mom),
                    correct_fb=f"Correct: the unbiased batch variance of channel 0 is {vu:.4g}, and "
                               f"(1 − {mom})·1 + {mom}·{vu:.4g} = {value:.4f}.",
                    wrong=wrong, tol=_STEP_TOL, code=code,
                    default_fb="Not quite. Compute channel 0's variance over the batch with n − 1 in the "
                               "denominator, then running_var = (1 − momentum)·1 + momentum·variance.")


def q_running_mean(rng, names=None):
    n_rows = rng.choice([3, 4])
    rows = _small_batch(rng, n_rows, 2)
    mom = rng.choice(_STEP_MOMENTA)
    rm, _ = _bn_step(rows, mom)
    value = round(rm[1], 6)
    mean = sum(r[1] for r in rows) / n_rows
    question = (f"A fresh `norms.BatchNorm1d(2, momentum={mom})` (so `running_mean` starts as [0, 0]) does one "
                f"training step on this batch (one row per sample). What is `running_mean[1]` afterwards? "
                "(3 decimals)")
    code = "x = torch.tensor(" + json.dumps(rows) + ", dtype=torch.float32)"
    wrong = [((1 - mom) * mean, "That is the TensorFlow/Keras convention (momentum weighs the old value). In "
                                "PyTorch new = (1 − momentum)·old + momentum·batch."),
             (mean, "That is the batch mean itself; the running mean only moves a fraction momentum towards it.")]
    return _numeric(question, value, dict(kind="running_mean", rows=rows, momentum=mom),
                    correct_fb=f"Correct: channel 1's batch mean is {_num(mean, '.4g')} and "
                               f"(1 − {mom})·0 + {mom}·{_factor(mean, '.4g')} = {_num(value, '.4f')}.",
                    wrong=wrong, tol=_STEP_TOL, code=code,
                    default_fb="Not quite: take the mean of the second column, then "
                               "running_mean = (1 − momentum)·0 + momentum·mean.")


_EPS_FORMULAS = {
    True: [("inside", "(x − μ) / √(σ² + ε)"), ("outside", "(x − μ) / (√σ² + ε)"),
           ("after", "(x − μ) / √σ² + ε"), ("numerator", "(x − μ + ε) / √σ²")],
    False: [("inside", "x / √(mean(x²) + ε)"), ("outside", "x / (√mean(x²) + ε)"),
            ("after", "x / √mean(x²) + ε"), ("numerator", "(x + ε) / √mean(x²)")],
}
_EPS_FEEDBACK = {
    True: {
        "inside": "ε goes inside the square root, added to the variance: √(σ² + ε) ≥ √ε keeps the denominator "
                  "away from zero even when the values are (almost) constant.",
        "outside": "Adding ε after the square root also avoids dividing by zero, but it is not what torch.nn "
                   "(and norms) compute: the outputs differ when the variance is small.",
        "after": "Adding ε to the output would just shift it; it would not protect the division at all.",
        "numerator": "ε in the numerator does not protect against a zero denominator.",
    },
    False: {
        "inside": "ε goes inside the square root, added to the mean square: √(mean(x²) + ε) ≥ √ε keeps the "
                  "denominator away from zero even when all values are small.",
        "outside": "Adding ε after the square root also avoids dividing by zero, but it is not what torch.nn "
                   "(and norms) compute: the outputs differ when the root mean square is small.",
        "after": "Adding ε to the output would just shift it; it would not protect the division at all.",
        "numerator": "ε in the numerator does not protect against a zero denominator (all values near 0).",
    },
}


def _eps_formula(x, dims, center, eps, where):
    mean = x.mean(dims, keepdim=True) if center else torch.zeros((), dtype=x.dtype)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    if where == "inside":
        return (x - mean) / torch.sqrt(var + eps)
    if where == "outside":
        return (x - mean) / (torch.sqrt(var) + eps)
    if where == "after":
        return (x - mean) / torch.sqrt(var) + eps
    return (x - mean + eps) / torch.sqrt(var)


def q_eps(rng, names=None):
    name = rng.choice(names or ["BatchNorm1d", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm1d"])
    eps = rng.choice([1e-2, 1e-3, 0.1])
    if name == "BatchNorm1d":
        args, shape = (3,), (4, 3)
    elif name in ("LayerNorm", "RMSNorm"):
        args, shape = (4,), (2, 4)
    elif name == "GroupNorm":
        args, shape = (1, 2), (2, 2, 3)
    else:
        args, shape = (2,), (2, 2, 4)
    m = _module(name, args, {"eps": eps}).double()
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 0.05).requires_grad_(False)
    with torch.no_grad():
        y = m.train()(x)
    r = describe(m, shape)
    dims = r.reduced_dims
    matches = [w for w, _ in _EPS_FORMULAS[r.has_mean]
               if torch.allclose(y, _eps_formula(x, dims, r.has_mean, eps, w), atol=1e-9)]
    fbs = _EPS_FEEDBACK[r.has_mean]
    options = [(f, w in matches, "Correct: " + fbs[w] if w in matches
                else "No: " + fbs[w][0].lower() + fbs[w][1:], w)
               for w, f in _EPS_FORMULAS[r.has_mean]]
    sym = "μ and σ² are the mean and (biased) variance" if r.has_mean else "mean(x²) is the mean of the squares"
    affine = getattr(m, "weight", None) is not None
    ctor = _ctor(name, args, {"eps": eps})
    # BatchNorm uses the batch's μ and σ² only in training mode (eval mode uses the running statistics)
    mode = " in training mode" if getattr(m, "running_mean", None) is not None else ""
    over = "over the reduced dims, here the batch's" if mode else "over the reduced dims"
    if affine:
        question = (f"Which formula does `{ctor}` compute{mode} before applying γ{' and β' if r.has_bias else ''}? "
                    f"({sym} {over}.)")
    else:
        question = (f"What does `{ctor}` compute{mode}? It has no learnable scale or shift (affine=False), so the "
                    f"output is the formula itself. ({sym} {over}.)")
    return _choice(question, options, dict(kind="eps", norm=name, args=args, kwargs={"eps": eps}, shape=shape,
                                           affine=affine))


_BATCH_ONE_CASES = [
    ("BatchNorm1d", (4,), lambda C: (1, C), "train"),
    ("BatchNorm1d", (4,), lambda C: (1, C, 6), "train"),
    ("BatchNorm1d", (4,), lambda C: (1, C), "eval"),
    ("BatchNorm2d", (3,), lambda C: (1, C, 1, 1), "train"),
    ("BatchNorm2d", (3,), lambda C: (1, C, 5, 5), "train"),
    ("BatchNorm2d", (3,), lambda C: (1, C, 1, 1), "eval"),
    ("LayerNorm", (8,), lambda D: (1, D), "train"),
    ("GroupNorm", (2, 6), lambda _: (1, 6, 4, 4), "train"),
    ("InstanceNorm1d", (3,), lambda C: (1, C, 5), "train"),
]


def _batch_one_outcome(name, args, shape, mode, gen):
    """Run the layer on a batch of one; ``gen``: a local torch.Generator (torch's global one is left alone)."""
    m = _module(name, args)
    if mode == "eval":
        m.train()(torch.randn((4,) + shape[1:], generator=gen))
        m.eval()
    else:
        m.train()
    try:
        y = m(torch.randn(shape, generator=gen))
    except Exception as exc:  # noqa: BLE001 - the point is to see what it raises
        return "raises", f"{type(exc).__name__}: {exc}"
    if torch.isnan(y).any():
        return "nan", ""
    return "works", ""


def q_batch_one(rng, names=None):
    cases = [c for c in _BATCH_ONE_CASES if names is None or c[0] in names] or _BATCH_ONE_CASES
    name, args, mk, mode = rng.choice(cases)
    shape = mk(args[-1])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    outcome, msg = _batch_one_outcome(name, args, shape, mode, gen)
    per_stat = describe(_module(name, args), shape).elements_per_statistic
    mode_txt = "in training mode" if mode == "train" else "in eval mode (after some training)"
    raise_fb = {
        True: f"Correct: it raises `{msg}`. With {per_stat} value per statistic the batch variance is 0 "
              "and the mean equals the value, so the output would carry no information (and the running "
              "variance would get a division by n − 1 = 0).",
        False: "No: it does not raise. " + (
            "In eval mode BatchNorm uses the running statistics, so any batch size works."
            if mode == "eval" else f"Each statistic is computed from {per_stat} values, which is enough."),
    }
    works_fb = {
        True: "Correct: " + ("in eval mode BatchNorm normalizes with its running statistics, so a single sample "
                             "is fine." if mode == "eval" else
                             f"each statistic still comes from {per_stat} values of this one sample."),
        False: f"No: it raises `{msg}`.",
    }
    options = [
        ("It raises an error.", outcome == "raises", raise_fb[outcome == "raises"], "raises"),
        ("It runs and returns a normalized output of the same shape.", outcome == "works",
         works_fb[outcome == "works"], "works"),
        ("It returns NaN everywhere (0/0).", outcome == "nan",
         "No: eps keeps the denominator away from zero, so there is no 0/0; " + (
             "and here it raises instead." if outcome == "raises" else "and here the output is finite."), "nan"),
        ("It returns the input unchanged.", False,
         "No: a normalization layer never skips normalizing because the batch is small.", "identity"),
    ]
    question = f"What happens when `{_ctor(name, args)}` gets an input of shape {_shape(shape)} {mode_txt}?"
    return _choice(question, options, dict(kind="batch_one", norm=name, args=args, shape=shape, mode=mode))


def q_which_layer(rng, names=None):
    """Comparison: which layer reduces over these dims?"""
    N, C, H, W = rng.choice([2, 4, 8]), rng.choice([4, 6, 8]), rng.choice([3, 5]), rng.choice([4, 7])
    shape = (N, C, H, W)
    layers = [("BatchNorm2d", (C,)), ("InstanceNorm2d", (C,)), ("LayerNorm", ((C, H, W),)),
              ("LayerNorm", (W,)), ("GroupNorm", (2, C))]
    descs = [(n, a, describe(_module(n, a), shape)) for n, a in layers]
    unique = [d for d in descs if sum(o[2].reduced_dims == d[2].reduced_dims for o in descs) == 1]
    target = rng.choice(unique)
    options = []
    for n, a, r in descs:
        ok = r.reduced_dims == target[2].reduced_dims
        fb = f"{'Correct' if ok else 'No'}: `{_ctor(n, a)}` {_grouping(n, a, r)}."
        if n == "GroupNorm":
            fb += " Channels in different blocks never share a statistic."
        options.append((f"`{_ctor(n, a)}`", ok, fb, (n, a)))
    question = (f"For an input of shape {_shape(shape)}, which layer computes its statistics over dims "
                f"{target[2].reduced_dims} (elements that differ only along those dims share a mean and a variance)?")
    options = [o for o in options if o[1]] + rng.sample([o for o in options if not o[1]],
                                                        min(3, sum(not o[1] for o in options)))
    return _choice(question, options, dict(kind="which_layer", shape=shape, dims=target[2].reduced_dims,
                                           options=[(n, a) for n, a, _ in descs]))


def _sample_independent(name, args, shape, gen):
    """Does sample 0's output stay the same when sample 1 changes (training mode)?"""
    m = _module(name, args).train()
    x = torch.randn(shape, generator=gen)
    x2 = x.clone()
    x2[1] = x2[1] * 3 + 2
    with torch.no_grad():
        return torch.allclose(m(x)[0], m(x2)[0], atol=1e-6)


def q_batch_independent(rng, names=None):
    N, C, L = rng.choice([4, 8]), rng.choice([4, 6]), rng.choice([5, 7])
    shape = (N, C, L)
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    layers = [("BatchNorm1d", (C,)), ("LayerNorm", (L,)), ("RMSNorm", (L,)), ("GroupNorm", (2, C)),
              ("InstanceNorm1d", (C,))]
    options = []
    for n, a in layers:
        ind = _sample_independent(n, a, shape, gen)
        options.append((f"`{_ctor(n, a)}`", ind,
                        "Yes: its statistics come from one sample only." if ind else
                        "No: its statistics are shared across the batch, so changing another sample changes "
                        "this sample's output (in training mode).", (n, a)))
    question = (f"In training mode, on inputs of shape {_shape(shape)}, which layers give each sample an output "
                "that does not depend on the other samples in the batch?")
    return _choice(question, options, dict(kind="batch_independent", shape=shape, layers=layers), many=True)


def q_groupnorm_special(rng, names=None):
    C = rng.choice([4, 6, 8])
    N, H, W = rng.choice([2, 3]), rng.choice([3, 4]), rng.choice([5, 6])
    shape = (N, C, H, W)
    G = rng.choice([1, C])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(shape, generator=gen)
    with torch.no_grad():
        y = norms.GroupNorm(G, C)(x)
        layers = [("InstanceNorm2d", (C,)), ("LayerNorm", ((C, H, W),)), ("BatchNorm2d", (C,)), ("LayerNorm", (W,))]
        outs = {(n, a): _module(n, a)(x) for n, a in layers}
    options = []
    for (n, a), out in outs.items():
        label = f"`{_ctor(n, a)}`"
        same = torch.allclose(y, out, atol=1e-5)
        options.append((label, same,
                        ("Correct: with G = " + ("1 the single group holds every channel and position of a sample."
                                                 if G == 1 else "C each group is one channel of one sample."))
                        if same else "No: it groups different elements, so the outputs differ.", (n, a)))
    question = (f"At initialization (γ = 1, β = 0), `norms.GroupNorm({G}, {C})` on an input of shape "
                f"{_shape(shape)} computes exactly the same as which layer?")
    return _choice(question, options, dict(kind="groupnorm_special", G=G, C=C, shape=shape))


def q_invariance(rng, names=None):
    D = rng.choice([4, 8, 16])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(3, D, generator=gen, dtype=torch.float64) * 2 + 0.5
    c, a = rng.choice([1.5, -2.0, 3.0]), rng.choice([2.0, 0.5, 5.0])
    ln = norms.LayerNorm(D, eps=0.0).double()
    rms = norms.RMSNorm(D, eps=0.0).double()

    def same(f, g):
        with torch.no_grad():
            return torch.allclose(f(x), f(g(x)), atol=1e-9)

    shift = lambda t: t + c  # noqa: E731
    scale = lambda t: t * a  # noqa: E731
    keys = [("LayerNorm", "shift"), ("RMSNorm", "shift"), ("LayerNorm", "scale"), ("RMSNorm", "scale")]
    facts = [
        (f"LayerNorm(x + c) = LayerNorm(x) (re-centering; here c = {c})", same(ln, shift),
         "LayerNorm subtracts the mean, so adding the same c to every feature cancels out.",
         "It does change: the added constant is not removed."),
        (f"RMSNorm(x + c) = RMSNorm(x) (re-centering; here c = {c})", same(rms, shift),
         "RMSNorm is invariant to re-centering.",
         "RMSNorm does not subtract the mean, so adding c changes both x and its root mean square."),
        (f"LayerNorm(a·x) = LayerNorm(x) (re-scaling; here a = {a})", same(ln, scale),
         "scaling x scales its standard deviation by the same a, which cancels.",
         "It is not invariant to re-scaling."),
        (f"RMSNorm(a·x) = RMSNorm(x) (re-scaling; here a = {a})", same(rms, scale),
         "scaling x scales its root mean square by the same a, which cancels: RMSNorm keeps LayerNorm's "
         "re-scaling invariance and drops the re-centering one.",
         "It is not invariant to re-scaling."),
    ]
    options = [(t, ok, ("Yes: " + yes) if ok else ("No: " + no), key) for (t, ok, yes, no), key in zip(facts, keys)]
    question = (f"Take the feature vector x of one token (D = {D}) and ignore ε. Which of these hold?")
    return _choice(question, options, dict(kind="invariance", D=D, c=c, a=a), many=True)


_KERAS_DEFAULT_MOMENTUM = 0.99   # keras.layers.BatchNormalization(momentum=0.99)


def q_keras_momentum(rng, names=None):
    k = rng.choice([0.99, 0.9, 0.95, 0.999])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(8, 3, generator=gen, dtype=torch.float64) * 2 + 1
    keras = k * torch.zeros(3, dtype=torch.float64) + (1 - k) * x.mean(0)
    cands = sorted({round(k, 3), round(1 - k, 3), 0.1, 0.01, 0.5})[:5]
    options = []
    for mom in cands:
        m = norms.BatchNorm1d(3, momentum=mom).double().train()
        m(x)
        ok = torch.allclose(m.running_mean, keras, atol=1e-12)
        is_default = math.isclose(k, _KERAS_DEFAULT_MOMENTUM)
        keras_default = " (its default)" if is_default else ""
        old_note = "; also Keras's default" if is_default else ""
        if ok:
            fb = (f"Correct: PyTorch's momentum is the weight of the new batch, new = (1 − m)·old + m·batch, "
                  f"so Keras's {k} (the weight of the old value{old_note}) "
                  f"becomes 1 − {k} = {1 - k:.3g}.")
        elif math.isclose(mom, k):
            fb = (f"No: the numbers are the same but the conventions are opposite. In Keras momentum weighs the "
                  f"old value; in PyTorch it weighs the new batch, so momentum={mom:g} would move the running mean "
                  f"{mom:.3g} of the way to each batch mean instead of {1 - k:.3g}.")
        elif mom == 0.1:
            fb = (f"No: 0.1 is PyTorch's default momentum, not a translation of Keras's {k}{keras_default}, which "
                  f"corresponds to 1 − {k} = {1 - k:.3g}.")
        else:
            fb = (f"No: with momentum {mom:g} the running mean would move {mom:.3g} of the way to the batch mean "
                  f"at each step; Keras's {k} moves it {1 - k:.3g} of the way.")
            if math.isclose(mom, 1 - _KERAS_DEFAULT_MOMENTUM):
                fb += f" ({mom:g} is the translation of Keras's default, {_KERAS_DEFAULT_MOMENTUM}.)"
        options.append((f"momentum={mom:g}", ok, fb, mom))
    question = (f"Keras's `BatchNormalization(momentum={k})` updates `moving_mean = {k}·moving_mean + "
                f"{1 - k:.3g}·batch_mean`. Which `norms.BatchNorm1d` momentum gives the same update?")
    return _choice(question, options, dict(kind="keras_momentum", keras=k))


def q_biased_unbiased(rng, names=None):
    n = rng.choice([2, 3, 4, 5])
    C = rng.choice([2, 3, 4])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(n, C, generator=gen, dtype=torch.float64) * 2 + 1
    m = norms.BatchNorm1d(C, momentum=1.0, affine=False).double().train()   # momentum 1: running_var = the batch's
    y = m(x)
    vb, vu = x.var(0, unbiased=False), x.var(0, unbiased=True)
    norm_biased = torch.allclose(y, (x - x.mean(0)) / torch.sqrt(vb + m.eps), atol=1e-9)
    stored_unbiased = torch.allclose(m.running_var, vu, atol=1e-9)
    # what the layer did, as one number that depends on n: stored variance / the variance it normalized with
    ratio = float((m.running_var / (vb if norm_biased else vu)).mean())
    combos = []
    for nb in (True, False):
        for su in (True, False):
            ok = nb == norm_biased and su == stored_unbiased
            # the ratio each claim implies for this n, from the two variances of this batch
            implied = float(((vu if su else vb) / (vb if nb else vu)).mean())
            size = ("the same variance" if math.isclose(implied, 1.0) else
                    f"{implied:.4g} times the variance it normalized with (n/(n−1) for n = {n})" if implied > 1 else
                    f"{implied:.4g} times the variance it normalized with ((n−1)/n for n = {n})")
            text = (f"normalizes with the {'biased (÷n)' if nb else 'unbiased (÷(n−1))'} variance and stores the "
                    f"{'unbiased (÷(n−1))' if su else 'biased (÷n)'} one in running_var: {size}")
            if ok:
                fb = ("Correct: the batch is normalized exactly (its own, biased variance makes the output have "
                      "variance 1), while running_var estimates the population variance, for which ÷(n−1) is "
                      f"unbiased. With n = {n} the variance that goes into running_var is n/(n−1) = {ratio:.4g} "
                      "times the one used for normalizing.")
            elif not nb:
                fb = ("No: normalizing with ÷(n−1) would leave the batch with variance (n−1)/n = "
                      f"{(n - 1) / n:.4g}, not 1; torch.nn and norms normalize with ÷n.")
            else:
                fb = ("No: running_var gets the unbiased estimate (÷(n−1)); with small batches the biased one "
                      f"would systematically underestimate the variance seen at inference (by (n−1)/n = "
                      f"{(n - 1) / n:.4g} here).")
            combos.append((text[0].upper() + text[1:] + ".", ok, fb, (nb, su)))
    question = (f"`norms.BatchNorm1d({C})` gets an input of shape (n, {C}) with n = {n}, in training mode: each "
                "channel's mean and variance come from the n values in its column. The layer …")
    return _choice(question, combos, dict(kind="biased_unbiased", n=n, C=C, ratio=ratio))


