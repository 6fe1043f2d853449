"""Computed questions on the two modes of a layer: train against eval, running statistics,
eps, a batch of one, momentum conventions (Keras), biased and unbiased variance."""

from __future__ import annotations

import json
import math

import torch

from norms import modules
from norms.axes import describe
from norms.i18n import Text, forms, tr

from .builders import choice, factor, num, numeric, shape_str
from .cases import ALL_LAYERS, constructor, family_of, make_module, random_case


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
    name = rng.choice(names or ALL_LAYERS)
    name, args, kwargs, shape = random_case(rng, name)
    if name.startswith("InstanceNorm"):
        kwargs = rng.choice([{}, {"track_running_stats": True}, {"affine": True}])
    m = make_module(name, args, kwargs)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    differ = _differs_in_eval(m, shape, gen)
    has_w, has_b = getattr(m, "weight", None) is not None, getattr(m, "bias", None) is not None
    if has_w and has_b:
        affine_fb = tr("No: γ and β are applied in both modes; only the statistics can differ.")
    elif has_w:
        affine_fb = tr(
            "No: {family_of} has γ but no β, and γ is applied in both modes; only "
            "the statistics can differ.",
            family_of=family_of(name),
        )
    else:
        affine_fb = tr(
            "No: `{layer}` has no γ or β at all (affine=False), so there is nothing "
            "to switch off; only the statistics can differ.",
            layer=constructor(name, args, kwargs),
        )
    tracks = getattr(m, "running_mean", None) is not None
    running_text = tr(
        "in eval mode it normalizes with the running mean and variance collected in training."
    )
    yes_running = tr("Yes: {reason}", reason=running_text)
    no_own = tr(
        "No: it has no running statistics, so both modes normalize each input "
        "with its own statistics."
    )
    options = [
        (
            yes_running,
            differ and tracks,
            tr("Correct: {reason}", reason=running_text)
            if differ
            else tr("No: this layer keeps no running statistics")
            + (
                tr("; InstanceNorm only does with track_running_stats=True.")
                if name.startswith("Instance")
                else "."
            ),
            "differ",
        ),
        (
            no_own,
            not differ,
            tr(
                "Correct: its statistics are computed per sample, from the input itself, "
                "in both modes."
            )
            if not differ
            else tr(
                "No: this layer keeps running statistics (it has "
                "running_mean/running_var buffers) and uses them in eval mode."
            ),
            "same",
        ),
        (tr("Yes: eval mode switches off γ and β."), False, affine_fb, "affine"),
        (
            tr("No: `.eval()` only affects dropout."),
            False,
            tr(
                "No: `.eval()` sets `self.training = False` on every submodule; any "
                "layer may read it (BatchNorm does)."
            ),
            "dropout",
        ),
    ]
    question = tr(
        "Does `{layer}` compute something different in `.train()` and `.eval()` mode?",
        layer=constructor(name, args, kwargs),
    )
    return choice(
        question, options, dict(kind="train_eval", norm=name, args=args, kwargs=kwargs, shape=shape)
    )


def _small_batch(rng, n_rows, n_cols):
    """Small integers; every column varies and has a clearly non-zero mean (so the distractors
    differ)."""
    while True:
        rows = [[rng.randint(-2, 4) for _ in range(n_cols)] for _ in range(n_rows)]
        cols = list(zip(*rows, strict=True))
        if all(len(set(c)) > 1 and abs(sum(c)) / n_rows >= 0.5 for c in cols):
            return rows


def _bn_step(rows, momentum):
    m = modules.BatchNorm1d(len(rows[0]), momentum=momentum)
    m.train()
    x = torch.tensor(rows, dtype=torch.float64)
    m = m.double()
    m(x)
    return m.running_mean.tolist(), m.running_var.tolist()


def distinct(values, gap) -> bool:
    """No two of ``values`` within ``gap`` of each other (so no numeric distractor collapses onto
    another)."""
    return all(abs(a - b) > gap for i, a in enumerate(values) for b in values[i + 1 :])


# momentum 0.5 is left out on purpose: there PyTorch's and Keras's conventions give the same update,
# and the Keras-convention distractor would coincide with the key.
_STEP_MOMENTA = [0.1, 0.2, 0.3]
_STEP_TOL = 0.0015


def _running_var_distractors(mom, vb, vu) -> list:
    """The wrong answers to :func:`q_running_var` (value, why), for momentum ``mom`` and the
    batch's biased ``vb`` and unbiased ``vu`` variance."""
    return [
        (
            (1 - mom) * 1 + mom * vb,
            tr(
                "That uses the biased variance (÷n). BatchNorm normalizes with the "
                "biased variance but stores the unbiased one (÷(n−1)) in running_var."
            ),
        ),
        (
            mom * 1 + (1 - mom) * vu,
            tr(
                "That is the TensorFlow/Keras convention (momentum weighs the old "
                "value). In PyTorch new = (1 − momentum)·old + momentum·batch."
            ),
        ),
        (
            mom * 1 + (1 - mom) * vb,
            tr("That mixes up both: Keras-style momentum and the biased variance."),
        ),
        (
            vu,
            tr(
                "That is the batch's unbiased variance alone; the running value only "
                "moves a fraction momentum towards it."
            ),
        ),
        (
            vb,
            tr(
                "That is the batch's biased variance alone; the running value only moves "
                "a fraction momentum towards it, and it uses the unbiased variance."
            ),
        ),
        (
            1.0,
            tr(
                "That is the starting value: a training step does move running_var "
                "towards the batch's (unbiased) variance."
            ),
        ),
    ]


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
        wrong = _running_var_distractors(mom, vb, vu)
        # a batch whose unbiased variance is (nearly) 1 would leave running_var where it started, so
        # "nothing changes" would be right by accident and the distractors would collapse onto the
        # key: draw again
        if abs(vu - 1) >= 0.1 and distinct([value] + [v for v, _ in wrong], 2.5 * _STEP_TOL):
            break
    question = tr(
        "A fresh `norms.BatchNorm1d(2, momentum={mom})` (so `running_var` starts "
        "as [1, 1]) does one training step on this batch of {n_rows} samples "
        "(one row per sample). What is `running_var[0]` afterwards? (3 decimals)",
        mom=mom,
        n_rows=n_rows,
    )
    code = "x = torch.tensor(" + json.dumps(rows) + ", dtype=torch.float32)"
    return numeric(
        question,
        value,
        dict(kind="running_var", rows=rows, momentum=mom),
        correct_fb=tr(
            "Correct: the unbiased batch variance of channel 0 is {vu:.4g}, and (1 − "
            "{mom})·1 + {mom}·{vu:.4g} = {value:.4f}.",
            vu=vu,
            mom=mom,
            value=value,
        ),
        wrong=wrong,
        tol=_STEP_TOL,
        code=code,
        default_fb=tr(
            "Not quite. Compute channel 0's variance over the batch with n − 1 in "
            "the denominator, then running_var = (1 − momentum)·1 + "
            "momentum·variance."
        ),
    )


def q_running_mean(rng, names=None):
    n_rows = rng.choice([3, 4])
    rows = _small_batch(rng, n_rows, 2)
    mom = rng.choice(_STEP_MOMENTA)
    rm, _ = _bn_step(rows, mom)
    value = round(rm[1], 6)
    mean = sum(r[1] for r in rows) / n_rows
    question = tr(
        "A fresh `norms.BatchNorm1d(2, momentum={mom})` (so `running_mean` "
        "starts as [0, 0]) does one training step on this batch (one row per "
        "sample). What is `running_mean[1]` afterwards? (3 decimals)",
        mom=mom,
    )
    code = "x = torch.tensor(" + json.dumps(rows) + ", dtype=torch.float32)"
    wrong = [
        (
            (1 - mom) * mean,
            tr(
                "That is the TensorFlow/Keras convention (momentum weighs the old "
                "value). In PyTorch new = (1 − momentum)·old + momentum·batch."
            ),
        ),
        (
            mean,
            tr(
                "That is the batch mean itself; the running mean only moves a fraction "
                "momentum towards it."
            ),
        ),
    ]
    return numeric(
        question,
        value,
        dict(kind="running_mean", rows=rows, momentum=mom),
        correct_fb=tr(
            "Correct: channel 1's batch mean is {mean} and (1 − {mom})·0 + "
            "{mom}·{mean2} = {value}.",
            mean=num(mean, ".4g"),
            mom=mom,
            mean2=factor(mean, ".4g"),
            value=num(value, ".4f"),
        ),
        wrong=wrong,
        tol=_STEP_TOL,
        code=code,
        default_fb=tr(
            "Not quite: take the mean of the second column, then running_mean = (1 − "
            "momentum)·0 + momentum·mean."
        ),
    )


_EPS_FORMULAS = {
    True: [
        ("inside", "(x − μ) / √(σ² + ε)"),
        ("outside", "(x − μ) / (√σ² + ε)"),
        ("after", "(x − μ) / √σ² + ε"),
        ("numerator", "(x − μ + ε) / √σ²"),
    ],
    False: [
        ("inside", "x / √(mean(x²) + ε)"),
        ("outside", "x / (√mean(x²) + ε)"),
        ("after", "x / √mean(x²) + ε"),
        ("numerator", "(x + ε) / √mean(x²)"),
    ],
}
_EPS_FEEDBACK = {
    True: {
        "inside": tr(
            "ε goes inside the square root, added to the variance: √(σ² + ε) ≥ √ε "
            "keeps the denominator away from zero even when the values are (almost) "
            "constant."
        ),
        "outside": tr(
            "Adding ε after the square root also avoids dividing by zero, but it is "
            "not what torch.nn (and norms) compute: the outputs differ when the "
            "variance is small."
        ),
        "after": (
            tr(
                "Adding ε to the output would just shift it; it would not protect the "
                "division at all."
            )
        ),
        "numerator": tr("ε in the numerator does not protect against a zero denominator."),
    },
    False: {
        "inside": tr(
            "ε goes inside the square root, added to the mean square: √(mean(x²) + "
            "ε) ≥ √ε keeps the denominator away from zero even when all values are "
            "small."
        ),
        "outside": tr(
            "Adding ε after the square root also avoids dividing by zero, but it is "
            "not what torch.nn (and norms) compute: the outputs differ when the root "
            "mean square is small."
        ),
        "after": (
            tr(
                "Adding ε to the output would just shift it; it would not protect the "
                "division at all."
            )
        ),
        "numerator": (
            tr(
                "ε in the numerator does not protect against a zero denominator (all "
                "values near 0)."
            )
        ),
    },
}


def _lower_first(text: Text) -> Text:
    """``text`` starting with a lower-case letter (in every language), to follow "No: "."""
    return Text({lang: form[:1].lower() + form[1:] for lang, form in forms(text).items()})


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
    name = rng.choice(
        names or ["BatchNorm1d", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm1d"]
    )
    eps = rng.choice([1e-2, 1e-3, 0.1])
    if name == "BatchNorm1d":
        args, shape = (3,), (4, 3)
    elif name in ("LayerNorm", "RMSNorm"):
        args, shape = (4,), (2, 4)
    elif name == "GroupNorm":
        args, shape = (1, 2), (2, 2, 3)
    else:
        args, shape = (2,), (2, 2, 4)
    m = make_module(name, args, {"eps": eps}).double()
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 0.05).requires_grad_(False)
    with torch.no_grad():
        y = m.train()(x)
    r = describe(m, shape)
    dims = r.reduced_dims
    matches = [
        w
        for w, _ in _EPS_FORMULAS[r.has_mean]
        if torch.allclose(y, _eps_formula(x, dims, r.has_mean, eps, w), atol=1e-9)
    ]
    fbs = _EPS_FEEDBACK[r.has_mean]
    options = [
        (
            f,
            w in matches,
            tr("Correct: {reason}", reason=fbs[w])
            if w in matches
            else tr("No: {reason}", reason=_lower_first(fbs[w])),
            w,
        )
        for w, f in _EPS_FORMULAS[r.has_mean]
    ]
    sym = (
        tr("μ and σ² are the mean and (biased) variance")
        if r.has_mean
        else tr("mean(x²) is the mean of the squares")
    )
    affine = getattr(m, "weight", None) is not None
    ctor = constructor(name, args, {"eps": eps})
    # BatchNorm uses the batch's μ and σ² only in training mode (eval mode uses the running
    # statistics)
    mode = tr(" in training mode") if getattr(m, "running_mean", None) is not None else ""
    over = tr("over the reduced dims, here the batch's") if mode else tr("over the reduced dims")
    if affine:
        question = tr(
            "Which formula does `{ctor}` compute{mode} before applying {params}? ({sym} {over}.)",
            ctor=ctor,
            mode=mode,
            params=tr("γ and β") if r.has_bias else "γ",
            sym=sym,
            over=over,
        )
    else:
        question = tr(
            "What does `{ctor}` compute{mode}? It has no learnable scale or shift "
            "(affine=False), so the output is the formula itself. ({sym} {over}.)",
            ctor=ctor,
            mode=mode,
            sym=sym,
            over=over,
        )
    return choice(
        question,
        options,
        dict(kind="eps", norm=name, args=args, kwargs={"eps": eps}, shape=shape, affine=affine),
    )


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
    """Run the layer on a batch of one; ``gen``: a local torch.Generator (torch's global one is
    left alone)."""
    m = make_module(name, args)
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
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    outcome, msg = _batch_one_outcome(name, args, shape, mode, gen)
    per_stat = describe(make_module(name, args), shape).elements_per_statistic
    mode_txt = (
        tr("in training mode") if mode == "train" else tr("in eval mode (after some training)")
    )
    raise_fb = {
        True: tr(
            "Correct: it raises `{msg}`. With {per_stat} value per statistic the "
            "batch variance is 0 and the mean equals the value, so the output would "
            "carry no information (and the running variance would get a division by "
            "n − 1 = 0).",
            msg=msg,
            per_stat=per_stat,
        ),
        False: tr("No: it does not raise. ")
        + (
            tr("In eval mode BatchNorm uses the running statistics, so any batch size works.")
            if mode == "eval"
            else tr(
                "Each statistic is computed from {per_stat} values, which is enough.",
                per_stat=per_stat,
            )
        ),
    }
    works_fb = {
        True: tr(
            "Correct: {reason}",
            reason=tr(
                "in eval mode BatchNorm normalizes with its running statistics, so a "
                "single sample is fine."
            )
            if mode == "eval"
            else tr(
                "each statistic still comes from {per_stat} values of this one sample.",
                per_stat=per_stat,
            ),
        ),
        False: tr("No: it raises `{msg}`.", msg=msg),
    }
    options = [
        (tr("It raises an error."), outcome == "raises", raise_fb[outcome == "raises"], "raises"),
        (
            tr("It runs and returns a normalized output of the same shape."),
            outcome == "works",
            works_fb[outcome == "works"],
            "works",
        ),
        (
            tr("It returns NaN everywhere (0/0)."),
            outcome == "nan",
            tr("No: eps keeps the denominator away from zero, so there is no 0/0; ")
            + (
                tr("and here it raises instead.")
                if outcome == "raises"
                else tr("and here the output is finite.")
            ),
            "nan",
        ),
        (
            tr("It returns the input unchanged."),
            False,
            tr("No: a normalization layer never skips normalizing because the batch is small."),
            "identity",
        ),
    ]
    question = tr(
        "What happens when `{layer}` gets an input of shape {shape} {mode_txt}?",
        layer=constructor(name, args),
        shape=shape_str(shape),
        mode_txt=mode_txt,
    )
    return choice(
        question, options, dict(kind="batch_one", norm=name, args=args, shape=shape, mode=mode)
    )


_KERAS_DEFAULT_MOMENTUM = 0.99  # keras.layers.BatchNormalization(momentum=0.99)


def q_keras_momentum(rng, names=None):
    k = rng.choice([0.99, 0.9, 0.95, 0.999])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(8, 3, generator=gen, dtype=torch.float64) * 2 + 1
    keras = k * torch.zeros(3, dtype=torch.float64) + (1 - k) * x.mean(0)
    cands = sorted({round(k, 3), round(1 - k, 3), 0.1, 0.01, 0.5})[:5]
    options = []
    for mom in cands:
        m = modules.BatchNorm1d(3, momentum=mom).double().train()
        m(x)
        ok = torch.allclose(m.running_mean, keras, atol=1e-12)
        is_default = math.isclose(k, _KERAS_DEFAULT_MOMENTUM)
        keras_default = tr(" (its default)") if is_default else ""
        old_note = tr("; also Keras's default") if is_default else ""
        if ok:
            fb = tr(
                "Correct: PyTorch's momentum is the weight of the new batch, new = (1 − "
                "m)·old + m·batch, so Keras's {k} (the weight of the old "
                "value{old_note}) becomes 1 − {k} = {value:.3g}.",
                k=k,
                old_note=old_note,
                value=1 - k,
            )
        elif math.isclose(mom, k):
            fb = tr(
                "No: the numbers are the same but the conventions are opposite. In Keras "
                "momentum weighs the old value; in PyTorch it weighs the new batch, so "
                "momentum={mom:g} would move the running mean {mom:.3g} of the way to "
                "each batch mean instead of {value:.3g}.",
                mom=mom,
                value=1 - k,
            )
        elif mom == 0.1:
            fb = tr(
                "No: 0.1 is PyTorch's default momentum, not a translation of Keras's "
                "{k}{keras_default}, which corresponds to 1 − {k} = {value:.3g}.",
                k=k,
                keras_default=keras_default,
                value=1 - k,
            )
        else:
            fb = tr(
                "No: with momentum {mom:g} the running mean would move {mom:.3g} of the "
                "way to the batch mean at each step; Keras's {k} moves it {value:.3g} of "
                "the way.",
                mom=mom,
                k=k,
                value=1 - k,
            )
            if math.isclose(mom, 1 - _KERAS_DEFAULT_MOMENTUM):
                fb += tr(
                    " ({mom:g} is the translation of Keras's default, {keras_default_momentum}.)",
                    mom=mom,
                    keras_default_momentum=_KERAS_DEFAULT_MOMENTUM,
                )
        options.append((f"momentum={mom:g}", ok, fb, mom))
    question = tr(
        "Keras's `BatchNormalization(momentum={k})` updates `moving_mean = "
        "{k}·moving_mean + {value:.3g}·batch_mean`. Which `norms.BatchNorm1d` "
        "momentum gives the same update?",
        k=k,
        value=1 - k,
    )
    return choice(question, options, dict(kind="keras_momentum", keras=k))


def q_biased_unbiased(rng, names=None):
    n = rng.choice([2, 3, 4, 5])
    C = rng.choice([2, 3, 4])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(n, C, generator=gen, dtype=torch.float64) * 2 + 1
    m = (
        modules.BatchNorm1d(C, momentum=1.0, affine=False).double().train()
    )  # momentum 1: running_var = the batch's
    y = m(x)
    vb, vu = x.var(0, unbiased=False), x.var(0, unbiased=True)
    norm_biased = torch.allclose(y, (x - x.mean(0)) / torch.sqrt(vb + m.eps), atol=1e-9)
    stored_unbiased = torch.allclose(m.running_var, vu, atol=1e-9)
    # what the layer did, as one number that depends on n: stored variance / the variance it
    # normalized with
    ratio = float((m.running_var / (vb if norm_biased else vu)).mean())
    combos = []
    for nb in (True, False):
        for su in (True, False):
            ok = nb == norm_biased and su == stored_unbiased
            # the ratio each claim implies for this n, from the two variances of this batch
            implied = float(((vu if su else vb) / (vb if nb else vu)).mean())
            size = (
                tr("the same variance")
                if math.isclose(implied, 1.0)
                else tr(
                    "{implied:.4g} times the variance it normalized with (n/(n−1) for n = {n})",
                    implied=implied,
                    n=n,
                )
                if implied > 1
                else tr(
                    "{implied:.4g} times the variance it normalized with ((n−1)/n for n = {n})",
                    implied=implied,
                    n=n,
                )
            )
            text = tr(
                "Normalizes with the {normalized} variance and stores the {stored} one in "
                "running_var: {size}.",
                normalized=tr("biased (÷n)") if nb else tr("unbiased (÷(n−1))"),
                stored=tr("unbiased (÷(n−1))") if su else tr("biased (÷n)"),
                size=size,
            )
            if ok:
                fb = tr(
                    "Correct: the batch is normalized exactly (its own, biased variance "
                    "makes the output have variance 1), while running_var estimates the "
                    "population variance, for which ÷(n−1) is unbiased. With n = {n} the "
                    "variance that goes into running_var is n/(n−1) = {ratio:.4g} times the "
                    "one used for normalizing.",
                    n=n,
                    ratio=ratio,
                )
            elif not nb:
                fb = tr(
                    "No: normalizing with ÷(n−1) would leave the batch with variance (n−1)/n "
                    "= {value:.4g}, not 1; torch.nn and norms normalize with ÷n.",
                    value=(n - 1) / n,
                )
            else:
                fb = tr(
                    "No: running_var gets the unbiased estimate (÷(n−1)); with small batches "
                    "the biased one would systematically underestimate the variance seen at "
                    "inference (by (n−1)/n = {value:.4g} here).",
                    value=(n - 1) / n,
                )
            combos.append((text, ok, fb, (nb, su)))
    question = tr(
        "`norms.BatchNorm1d({c})` gets an input of shape (n, {c}) with n = {n}, "
        "in training mode: each channel's mean and variance come from the n "
        "values in its column. The layer …",
        c=C,
        n=n,
    )
    return choice(question, combos, dict(kind="biased_unbiased", n=n, C=C, ratio=ratio))
