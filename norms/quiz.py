"""Self-check quizzes whose answer keys are computed by ``norms`` itself.

A notebook cell only needs::

    import norms.quiz
    norms.quiz.show("batchnorm")          # a few questions on one chapter's topic
    norms.quiz.self_quiz()                # a big generated bank, a random few per visit

Questions are dicts in jupyterquiz's format (``"question"``, ``"type"`` one of
``"multiple_choice"``/``"many_choice"``/``"numeric"``, ``"answers"`` with
``"answer"``/``"correct"``/``"feedback"``, numeric answers with ``"value"`` or
``"range"``), and every option carries feedback. Select-all questions are always ``"many_choice"`` and
end with the same "Select all that apply.", however many options are right (even one), and the rendered
script is patched so that jupyterquiz styles them by that type. Numbers in the answer keys
are never typed in: they come from :func:`norms.axes.describe`, from the
modules' parameters and state_dict, or from running a module (a BatchNorm
step, a batch of size one, an input with a small variance, ...).

Every generator takes a ``random.Random`` and returns one question, so
``questions_for(topic, n, seed)`` and ``bank(seed, size)`` are deterministic.
Each question also carries ``"_meta"`` (what was asked: layer, arguments, input
shape, ...) for tests; :func:`show` strips it before display.

Rendering (:func:`show`, :func:`self_quiz`, :func:`render`) goes through
``jupyterquiz.display_quiz`` with the questions passed inline (nothing is
fetched), a container id derived from the content instead of a random one (so
the output is identical on every run), and jupyterquiz's fallback that loads
MathJax from cdn.jsdelivr.net removed: the page loads nothing from other hosts.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import random
import re
import warnings
from typing import Callable

import torch

import norms
from norms.axes import batch_norm_dims, describe

__all__ = ["TOPICS", "topics", "questions_for", "bank", "show", "self_quiz", "render", "display_questions"]


# ----------------------------------------------------------------------------
# Question builders
# ----------------------------------------------------------------------------

def _fmt(text: str) -> str:
    """Escape for innerHTML, then turn `code` spans into <code>. jupyterquiz treats `$` as math and
    [a](b) as a link, so the texts here use neither."""
    out = html.escape(text, quote=False)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


SELECT_ALL = "Select all that apply."


def _choice(question: str, options: list, meta: dict, code: str | None = None, *, many: bool = False) -> dict:
    """options: [(answer, correct, feedback[, key])]. The optional keys (what each option stands for, for
    tests) go to ``_meta["keys"]``.

    ``many=True`` makes a select-all question: the type is ``many_choice`` whatever the number of correct
    options (one, or all of them, is a possible answer and must not show in the wording or the type), and
    the question ends with :data:`SELECT_ALL`. Without it the question has exactly one correct option and
    the type is ``multiple_choice``."""
    seen = set()
    answers, keys = [], []
    for answer, correct, feedback, *key in options:
        if answer in seen:
            continue
        seen.add(answer)
        answers.append({"answer": _fmt(answer), "correct": bool(correct), "feedback": _fmt(feedback)})
        keys.append(key[0] if key else None)
    if any(k is not None for k in keys):
        meta = dict(meta, keys=keys)
    ncorrect = sum(a["correct"] for a in answers)
    if ncorrect == 0:
        raise AssertionError(f"question without a correct option: {question}")
    if ncorrect > 1 and not many:
        raise AssertionError(f"{ncorrect} correct options in a single-answer question: {question}")
    if "Select all" in question:
        raise AssertionError(f"pass many=True instead of writing 'Select all': {question}")
    if many:
        question = f"{question} {SELECT_ALL}"
    q = {"question": _fmt(question), "type": "many_choice" if many else "multiple_choice", "answers": answers}
    if code:
        q["code"] = html.escape(code, quote=False)
    q["_meta"] = meta
    return q


def _numeric(question: str, value: float, meta: dict, *, correct_fb: str, wrong: list, default_fb: str,
             tol: float = 0.0, code: str | None = None) -> dict:
    """value: the key; wrong: [(value, feedback)] for common mistakes (kept only if clearly different)."""
    def entry(v, ok, fb):
        if tol:
            return {"type": "range", "range": [round(v - tol, 10), round(v + tol, 10)], "correct": ok,
                    "feedback": _fmt(fb)}
        return {"type": "value", "value": v, "correct": ok, "feedback": _fmt(fb)}

    answers = [entry(value, True, correct_fb)]
    taken = [value]
    for v, fb in wrong:
        if all(abs(v - t) > 2.5 * tol + 1e-9 for t in taken):
            answers.append(entry(v, False, fb))
            taken.append(v)
    answers.append({"type": "default", "feedback": _fmt(default_fb)})
    q = {"question": _fmt(question), "type": "numeric", "answers": answers}
    if code:
        q["code"] = html.escape(code, quote=False)
    q["_meta"] = meta
    return q


def _num(v, spec: str = "g") -> str:
    """A number for prose: a true minus sign (−2, not -2)."""
    text = format(v, spec)
    return "−" + text[1:] if text.startswith("-") else text


def _factor(v, spec: str = "g") -> str:
    """A number as an operand after ·, / or −: negatives in parentheses, ``2·(−1)`` instead of ``2·-1``."""
    text = _num(v, spec)
    return f"({text})" if text.startswith("−") else text


def _plus(v, spec: str = "g") -> str:
    """`` + v`` or `` − |v|``: an added term with its sign folded into the operator."""
    text = format(v, spec)
    return f" − {text[1:]}" if text.startswith("-") else f" + {text}"


def _shape(s) -> str:
    return "(" + ", ".join(str(int(v)) for v in s) + ("," if len(s) == 1 else "") + ")"


# ----------------------------------------------------------------------------
# Random layers and inputs
# ----------------------------------------------------------------------------

def _ctor(name: str, args: tuple, kwargs: dict | None = None) -> str:
    parts = [repr(list(a)) if isinstance(a, tuple) else repr(a) for a in args]
    parts += [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"norms.{name}({', '.join(parts)})"


def _case(rng: random.Random, name: str) -> tuple:
    """(name, args, kwargs, input_shape) for a random but sensible use of layer ``name``.
    Every dim is >= 2 (so 'reduced or not' is never vacuous) and shapes stay small."""
    N = rng.choice([2, 4, 8])
    if name == "BatchNorm1d":
        C = rng.choice([3, 4, 6, 16])
        shape = (N, C) if rng.random() < 0.5 else (N, C, rng.choice([5, 7, 10]))
        return name, (C,), {}, shape
    if name == "BatchNorm2d":
        C = rng.choice([3, 8, 16])
        return name, (C,), {}, (N, C, rng.choice([4, 5, 7]), rng.choice([4, 6, 7]))
    if name == "BatchNorm3d":
        C = rng.choice([2, 3, 4])
        return name, (C,), {}, (N, C, rng.choice([2, 3]), rng.choice([4, 5]), rng.choice([4, 6]))
    if name.startswith("InstanceNorm"):
        d = int(name[-2])
        C = rng.choice([3, 4, 8])
        spatial = tuple(rng.choice([4, 5, 6, 7]) for _ in range(d))
        kwargs = {"affine": True} if rng.random() < 0.5 else {}
        return name, (C,), kwargs, (N, C) + spatial
    if name in ("LayerNorm", "RMSNorm"):
        r = rng.random()
        if r < 0.5 or name == "RMSNorm":
            D = rng.choice([8, 16, 32])
            shape = (N, rng.choice([3, 5, 10]), D) if rng.random() < 0.7 else (N, D)
            return name, (D,), {}, shape
        C, H, W = rng.choice([3, 4, 8]), rng.choice([4, 5]), rng.choice([6, 7])
        ns = (C, H, W) if r < 0.8 else (H, W)
        return name, (ns,), {}, (N, C, H, W)
    if name == "GroupNorm":
        C = rng.choice([6, 8, 12, 16])
        G = rng.choice([g for g in range(2, C) if C % g == 0])
        spatial = (rng.choice([3, 4, 5]), rng.choice([4, 6, 7])) if rng.random() < 0.8 else (rng.choice([5, 9]),)
        return name, (G, C), {}, (N, C) + spatial
    raise ValueError(name)


def _module(name, args, kwargs=None):
    return getattr(norms, name)(*args, **(kwargs or {}))


_ALL = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "RMSNorm", "GroupNorm",
        "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


def _what(name):
    return {"BatchNorm1d": "BatchNorm", "BatchNorm2d": "BatchNorm", "BatchNorm3d": "BatchNorm",
            "InstanceNorm1d": "InstanceNorm", "InstanceNorm2d": "InstanceNorm", "InstanceNorm3d": "InstanceNorm",
            "LayerNorm": "LayerNorm", "RMSNorm": "RMSNorm", "GroupNorm": "GroupNorm"}[name]


def _alternatives(shape):
    """Other layers that accept ``shape``: [(name, args, Reduction)], for distractors."""
    nd = len(shape)
    layers = []
    C = shape[1]
    if nd in (2, 3):
        layers.append(("BatchNorm1d", (C,)))
    if nd in (4, 5):
        layers.append(("BatchNorm2d" if nd == 4 else "BatchNorm3d", (C,)))
    if nd >= 3:
        layers.append((f"InstanceNorm{nd - 2}d", (C,)))
        layers.append(("LayerNorm", (tuple(shape[1:]),)))
    layers.append(("LayerNorm", (shape[-1],)))
    for g in (2, 4, 3):
        if C % g == 0 and C != g:
            layers.append(("GroupNorm", (g, C)))
            break
    return [(n, a, describe(_module(n, a), shape)) for n, a in layers]


def _label(name, args) -> str:
    """``LayerNorm([3, 4])``, ``GroupNorm(2, 8)``: a layer as the reader would construct it."""
    return _ctor(name, args)[len("norms."):]


def _grouping(name, args, r) -> str:
    """What shares a statistic, in words that tell the layers apart. GroupNorm is described by its blocks
    of channels: its reduced dims (1, 2, ...) are the same tuple as LayerNorm's over (C, ...), yet channels in
    different blocks never share a statistic."""
    if name == "GroupNorm":
        G, C = args
        where = ", over every position of those channels" if len(r.input_shape) > 2 else ""
        return (f"computes one statistic per sample and block of C/G = {C // G} consecutive channels{where} "
                f"(statistics of shape (N, G) = {_shape(r.stat_shape)})")
    return f"reduces over dims {r.reduced_dims} (statistics of shape {_shape(r.stat_shape)})"


def _stat_words(r) -> str:
    return "means (and as many variances)" if r.has_mean else "root-mean-square values"


# ----------------------------------------------------------------------------
# Computed questions
# ----------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------
# "Why normalize": depth, saturation, scale invariance (computed)
# ----------------------------------------------------------------------------

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
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    rate = _relu_rate(c, gen)
    cands = [
        (math.sqrt(c * c / 2), "Var[z_l] = n σ² E[h²] and ReLU keeps half of a symmetric z, so E[h²] = Var[z]/2: "
                               "the variance changes by nσ²/2 = c²/2 per layer and the std by its square root."),
        (c, "that forgets that ReLU sets half of z to zero, which halves E[h²]."),
        (c * c / 2, "that is the factor for the variance, nσ²/2 = c²/2; the std changes by its square root."),
        (1.0, "the std stays constant only when nσ² = 2, i.e. c = √2 (He initialization)."),
        (c * c, "that is nσ², the variance factor of a linear layer without the ReLU."),
    ]
    best = min(cands, key=lambda t: abs(t[0] - rate))[0]
    if abs(best - rate) > 0.1 * best:   # the measurement is within a few %; the other candidates are ≥ 29% away
        raise AssertionError(f"no candidate matches the measured rate {rate} for c = {c}")
    options = []
    for value, why in cands:
        ok = value == best
        fb = (f"Correct: {why} Measured on a {256}-wide network: {rate:.3f} per layer." if ok
              else f"No: {why} The measured factor is {rate:.3f}.")
        options.append((f"{value:.3g}", ok, fb, value))
    options.sort(key=lambda o: o[3])
    question = (f"A plain MLP without normalization computes z_l = W_l h_(l−1) and h_l = ReLU(z_l) (no bias), "
                f"width n = 256, every weight drawn from N(0, σ²) with σ = c/√n and c = {c:g}. By what factor "
                "does the std of the pre-activations z change from one layer to the next?")
    return _choice(question, options, dict(kind="relu_depth", c=c, rate=rate))


def _saturation(seed, N, C, s, mu):
    z = torch.randn(N, C, generator=torch.Generator().manual_seed(seed)) * s + mu
    with torch.no_grad():
        zn = norms.BatchNorm1d(C).train()(z)
    return float((z.tanh().abs() > 0.99).float().mean()), float((zn.tanh().abs() > 0.99).float().mean())


def q_saturation(rng, names=None):
    N, C = rng.choice([1024, 2048]), rng.choice([8, 16])
    s, mu = rng.choice([3.0, 5.0, 10.0]), rng.choice([0.0, 1.0, -2.0])
    seed = rng.randrange(2 ** 31)
    before, after = _saturation(seed, N, C, s, mu)

    def text(b, a):
        return f"about {b:.0%} without normalization, {a:.1%} after it"

    share = f"most of z ({before:.1%})" if before > 0.5 else f"{before:.1%} of z"
    options = [
        (text(before, after), True,
         f"Correct: with mean {mu:g} and std {s:g}, {share} lies beyond ±artanh(0.99) ≈ ±2.65, where tanh is flat. "
         "BatchNorm rescales every unit to mean 0 and std 1, and a standard normal has only about 0.8% of its "
         "mass beyond ±2.65.", (before, after)),
        (text(before, before), False,
         "No: the normalized z has std 1, so far fewer values reach the flat parts of tanh.", (before, before)),
        (text(after, before), False,
         "No: that is the wrong way round: the large std saturates, the normalized one hardly does.",
         (after, before)),
        (text(before, 0.0), False,
         "No: normalization does not remove saturation entirely: a standard normal still has about 0.8% of its "
         "mass beyond artanh(0.99) ≈ 2.65.", (before, 0.0)),
    ]
    shift = "" if mu == 0 else f" {'+' if mu > 0 else '-'} {abs(mu):g}"
    code = (f"z = torch.randn({N}, {C}, generator=torch.Generator().manual_seed({seed})) * {s:g}{shift}\n"
            f"z_bn = norms.BatchNorm1d({C})(z)   # training mode")
    question = (f"The pre-activations z of a tanh layer have mean {mu:g} and std {s:g} (below). What fraction of "
                f"them is saturated, |tanh z| > 0.99, without normalization and after `norms.BatchNorm1d({C})`?")
    return _choice(question, options, dict(kind="saturation", seed=seed, N=N, C=C, s=s, mu=mu), code=code)


# "Ignore ε" in a question: BatchNorm refuses eps = 0 in training; 1e-30 added to any variance above ~1e-14
# is lost in float64 rounding, so it changes nothing.
_NO_EPS = 1e-30


def _linear_then(norm_name, width):
    """(description, callable z -> output) for a layer after a linear map; eps = 0, float64."""
    if norm_name == "none":
        return "no normalization (just ReLU)", torch.relu
    m = _module(norm_name, (width,), {"eps": _NO_EPS}).double().train()
    return f"`norms.{norm_name}({width})`", m


def q_scale_invariance(rng, names=None):
    n_in, width, N = rng.choice([8, 16, 32]), rng.choice([4, 6, 8]), rng.choice([16, 32])
    a = rng.choice([0.25, 0.5, 4.0, 8.0])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    rows = torch.exp(torch.randn(width, 1, generator=gen, dtype=torch.float64))   # a positive factor per row
    cases = [("BatchNorm1d", "all"), ("LayerNorm", "all"), ("BatchNorm1d", "rows"), ("LayerNorm", "rows"),
             ("none", "all")]
    why = {
        ("BatchNorm1d", "all"): ("scaling W scales every unit's mean and std by a, which cancels.", ""),
        ("LayerNorm", "all"): ("scaling W scales every sample's mean and std over the units by a, which cancels.",
                               ""),
        ("BatchNorm1d", "rows"): ("BatchNorm normalizes each output unit on its own (over the batch), so each "
                                  "row of W may have its own factor.", ""),
        ("LayerNorm", "rows"): ("", "LayerNorm normalizes each sample over the units, so only a factor common to "
                                    "all rows cancels; different factors change the pattern across units."),
        ("none", "all"): ("", "without a normalization nothing removes the scale: ReLU(a·z) = a·ReLU(z)."),
    }
    options = []
    with torch.no_grad():
        for norm_name, how in cases:
            desc, f = _linear_then(norm_name, width)
            scaled = W * a if how == "all" else W * rows
            same = torch.allclose(f(x @ W.T), f(x @ scaled.T), atol=1e-9)
            text = (f"{desc}: multiplying all of W by a = {a:g}" if how == "all" else
                    f"{desc}: multiplying each row of W (one output unit each) by its own positive factor")
            yes, no = why[(norm_name, how)]
            fb = ("Yes: " + (yes or "the output does not change.")) if same else ("No: " + (no or "it changes."))
            options.append((text + " leaves the output unchanged.", same, fb, (norm_name, how)))
    question = (f"A linear layer z = W x (no bias, W of shape ({width}, {n_in})) is followed by the layer named "
                "below, in training mode on a batch of inputs. Ignore ε. Which statements hold?")
    return _choice(question, options, dict(kind="scale_invariance", a=a, width=width, n_in=n_in), many=True)


def _grad_at(norm, x, W, target):
    W = W.clone().requires_grad_()
    loss = ((norm(x @ W.T) - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, W)
    return grad


def q_grad_scale(rng, names=None):
    norm_name = rng.choice(["BatchNorm1d", "LayerNorm"])
    n_in, width, N = rng.choice([8, 16]), rng.choice([4, 8]), 32
    a = rng.choice([0.25, 0.5, 2.0, 4.0, 8.0])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    target = torch.randn(N, width, generator=gen, dtype=torch.float64)
    norm = _module(norm_name, (width,), {"eps": _NO_EPS}).double().train()
    g1, ga = _grad_at(norm, x, W, target), _grad_at(norm, x, W * a, target)
    factor = float(ga.norm() / g1.norm())
    if not torch.allclose(ga, g1 * factor, atol=1e-9):
        raise AssertionError("the gradient at a·W is not a multiple of the one at W")
    value = round(factor, 6)
    question = (f"The weights W of a linear layer feed `norms.{norm_name}({width})` (training mode, ignore ε), and "
                f"a loss L is computed downstream. W is replaced by a·W with a = {a:g}. By what factor does the "
                "gradient ∂L/∂W change (evaluated at a·W instead of W)?")
    wrong = [(a, "That is how z itself scales. The loss does not change with a, so the gradient cannot grow with it."),
             (1.0, "The loss is the same, but its gradient is not: it is taken at a different point."),
             (a * a, "The gradient shrinks as W grows; a² is the factor of the learning rate that compensates."),
             (1 / (a * a), "That is how the effective learning rate η/‖W‖² changes, not the gradient.")]
    return _numeric(question, value, dict(kind="grad_scale", norm=norm_name, a=a),
                    correct_fb=f"Correct: L(a·W) = L(W) for every a > 0; differentiating gives a·∇L(a·W) = ∇L(W), "
                               f"so the gradient at a·W is 1/a = {value:g} times the one at W.",
                    wrong=wrong, tol=0.0005,
                    default_fb="Not quite. Differentiate L(a·W) = L(W) with respect to W.")


def q_bias_before_norm(rng, names=None):
    n_in, width, N = rng.choice([8, 16]), rng.choice([4, 6, 8]), rng.choice([16, 32])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    b = torch.rand(width, generator=gen, dtype=torch.float64) * 6 - 3          # differs between units
    common = torch.full((width,), float(rng.choice([-2, 1, 3])), dtype=torch.float64)
    x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        bn, ln = norms.BatchNorm1d(width).double().train(), norms.LayerNorm(width).double()
        cases = {"bn": torch.allclose(bn(x @ W.T + b), bn(x @ W.T), atol=1e-9),
                 "ln": torch.allclose(ln(x @ W.T + b), ln(x @ W.T), atol=1e-9),
                 "ln_common": torch.allclose(ln(x @ W.T + common), ln(x @ W.T), atol=1e-9)}
    texts = {"bn": f"`norms.BatchNorm1d({width})`, with a bias that differs between units",
             "ln": f"`norms.LayerNorm({width})`, with a bias that differs between units",
             "ln_common": f"`norms.LayerNorm({width})`, with the same bias for every unit"}
    fbs = {
        "bn": ("BatchNorm subtracts each unit's batch mean; the bias adds the same number to every sample of a "
               "unit, so it moves that mean by exactly the bias and cancels (its gradient is zero too).",
               "it changes the output."),
        "ln": ("it cancels.",
               "LayerNorm subtracts each sample's mean over the units; a bias that differs between units changes "
               "the pattern across units and does not cancel."),
        "ln_common": ("LayerNorm subtracts each sample's mean over the units, so a shift common to all units "
                      "cancels; only the part of a bias that varies between units survives.", "it changes the output."),
    }
    options = [(texts[k], same, ("Yes: " + fbs[k][0]) if same else ("No: " + fbs[k][1]), k)
               for k, same in cases.items()]
    question = (f"`nn.Linear({n_in}, {width})` with a non-zero bias feeds a normalization layer (training mode). In "
                "which cases is the bias dead weight: removing it leaves the output unchanged?")
    return _choice(question, options, dict(kind="bias_before_norm", n_in=n_in, width=width), many=True)


def q_weight_norm_growth(rng, names=None):
    norm_name = rng.choice(["BatchNorm1d", "LayerNorm"])
    n_in, width, N = rng.choice([8, 16]), rng.choice([4, 8]), 32
    lr, steps = rng.choice([0.1, 0.5, 1.0]), 5
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    W = torch.randn(width, n_in, generator=gen, dtype=torch.float64)
    norm = _module(norm_name, (width,), {"eps": _NO_EPS}).double().train()
    sq, predicted = [float(W.pow(2).sum())], []
    for _ in range(steps):
        x = torch.randn(N, n_in, generator=gen, dtype=torch.float64)
        target = torch.randn(N, width, generator=gen, dtype=torch.float64)
        g = _grad_at(norm, x, W, target)
        predicted.append(sq[-1] + lr ** 2 * float(g.pow(2).sum()))
        W = W - lr * g
        sq.append(float(W.pow(2).sum()))
    diffs = [b - a for a, b in zip(sq, sq[1:])]
    pythagoras = all(math.isclose(p, s, rel_tol=1e-9) for p, s in zip(predicted, sq[1:]))
    outcome = ("grows" if all(d > 0 for d in diffs) and pythagoras else "shrinks" if all(d < 0 for d in diffs)
               else "same" if all(abs(d) < 1e-12 for d in diffs) else "depends")
    options = [
        ("It grows at every step: ‖W_(t+1)‖² = ‖W_t‖² + η²‖g_t‖².", outcome == "grows",
         "Correct: the loss does not depend on ‖W‖, so the gradient is orthogonal to W, and by Pythagoras each "
         "step can only add length. The effective learning rate η/‖W‖² therefore decays by itself (weight decay "
         "counteracts it)." if outcome == "grows" else "No: here the norm does not grow at every step.", "grows"),
        ("It shrinks at every step, like with weight decay.", outcome == "shrinks",
         "No: without weight decay nothing pulls W towards 0; the step is orthogonal to W." if outcome != "shrinks"
         else "Correct.", "shrinks"),
        ("It stays constant, because the layer is scale-invariant.", outcome == "same",
         "No: scale invariance makes the gradient orthogonal to W, and a step orthogonal to W lengthens it."
         if outcome != "same" else "Correct.", "same"),
        ("It grows or shrinks depending on the sign of the gradient.", outcome == "depends",
         "No: the gradient has no component along W, so the sign does not matter." if outcome != "depends"
         else "Correct.", "depends"),
    ]
    question = (f"The weights W of a linear layer feed `norms.{norm_name}({width})` (training mode, ignore ε). Plain "
                f"SGD, W ← W − η g with η = {lr:g}, no weight decay. What happens to ‖W‖?")
    return _choice(question, options, dict(kind="weight_norm_growth", norm=norm_name, lr=lr))


# ----------------------------------------------------------------------------
# Chapter-specific computed questions
# ----------------------------------------------------------------------------

def _fold_case(rng):
    n_in, width = 3, 2
    W = [[rng.randint(-2, 3) or 1 for _ in range(n_in)] for _ in range(width)]
    b = [rng.randint(-3, 3) for _ in range(width)]
    rm = [rng.choice([-2.0, -1.0, 0.5, 1.0, 2.0]) for _ in range(width)]
    rv = [rng.choice([0.25, 4.0, 16.0]) for _ in range(width)]
    gamma = [rng.choice([0.5, 2.0, 3.0, -1.0]) for _ in range(width)]
    beta = [rng.choice([-1.0, 0.5, 1.0, 2.0]) for _ in range(width)]
    return dict(W=W, b=b, running_mean=rm, running_var=rv, gamma=gamma, beta=beta)


def _folded(case):
    """(W', b') of the single Linear equal to Linear -> norms.BatchNorm1d (eval), read off by running it."""
    # skip_init: no random initialization (it would draw from torch's global generator); every value is set below
    lin = torch.nn.utils.skip_init(torch.nn.Linear, len(case["W"][0]), len(case["W"])).double()
    bn = norms.BatchNorm1d(len(case["W"])).double().eval()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(case["W"]))
        lin.bias.copy_(torch.tensor(case["b"]))
        bn.running_mean.copy_(torch.tensor(case["running_mean"]))
        bn.running_var.copy_(torch.tensor(case["running_var"]))
        bn.weight.copy_(torch.tensor(case["gamma"]))
        bn.bias.copy_(torch.tensor(case["beta"]))
        n_in = lin.in_features
        f = lambda t: bn(lin(t))  # noqa: E731
        b_new = f(torch.zeros(1, n_in, dtype=torch.float64))[0]
        W_new = (f(torch.eye(n_in, dtype=torch.float64)) - b_new).T
    return W_new.tolist(), b_new.tolist(), bn.eps


_FOLD_TOL = 0.0015


def _fold_question(rng):
    """One draw: (case, folded W′ and b′, eps, unit, "bias"/"weight", input index, the key, the distractors)."""
    case = _fold_case(rng)
    W_new, b_new, eps = _folded(case)
    c = rng.randrange(2)
    what = rng.choice(["bias", "weight"])
    g, m, v, be = case["gamma"][c], case["running_mean"][c], case["running_var"][c], case["beta"][c]
    sd = math.sqrt(v + eps)
    if what == "bias":
        j, bc = None, case["b"][c]
        value = round(b_new[c], 6)
        wrong = [(g * (bc - m) / (v + eps) + be, "That divides by the variance instead of its square root."),
                 (g * bc / sd + be, "That forgets to subtract the running mean from the bias."),
                 (g * (bc - m) / sd, "That forgets β."),
                 ((bc - m) / sd + be, "That forgets γ."),
                 (bc, "The bias does change: BatchNorm's shift and scale move into it.")]
    else:
        j = rng.randrange(3)
        wc = case["W"][c][j]
        value = round(W_new[c][j], 6)
        wrong = [(g * wc / (v + eps), "That divides by the variance instead of its square root."),
                 (wc / sd, "That forgets γ."),
                 (wc * sd / g, "That is the inverse scale: BatchNorm divides by the std and multiplies by γ."),
                 (wc, "The weight does change: every row is scaled by γ/√(running_var + ε)."),
                 (g * wc, "That forgets to divide by the running std.")]
    return case, eps, c, what, j, value, wrong


def q_bn_fold(rng, names=None):
    while True:
        case, eps, c, what, j, value, wrong = _fold_question(rng)
        g, m, v, be = case["gamma"][c], case["running_mean"][c], case["running_var"][c], case["beta"][c]
        sd = math.sqrt(v + eps)
        # |γ/√(var + ε)| = 1 leaves the unit's weights (up to sign) unchanged, and then several mistakes give the
        # right number; any other coincidence between the key and a distractor is drawn again as well, so every
        # distractor is kept
        if abs(abs(g / sd) - 1) > 0.05 and _distinct([value] + [w for w, _ in wrong], 2.5 * _FOLD_TOL):
            break
    s = g / sd
    t = "torch.tensor"
    code = "\n".join([
        "lin, bn = nn.Linear(3, 2), norms.BatchNorm1d(2)",
        "with torch.no_grad():",
        f"    lin.weight.copy_({t}({case['W']}))",
        f"    lin.bias.copy_({t}({case['b']}))",
        f"    bn.running_mean.copy_({t}({case['running_mean']}))",
        f"    bn.running_var.copy_({t}({case['running_var']}))",
        f"    bn.weight.copy_({t}({case['gamma']}))   # γ",
        f"    bn.bias.copy_({t}({case['beta']}))     # β",
        "bn.eval()",
    ])
    scale = f"s = γ/√(running_var + ε) = {_num(g)}/√({_num(v)} + {eps:g}) = {_num(s, '.6g')}"
    if what == "bias":
        bc = case["b"][c]
        question = (f"The Linear and BatchNorm below (eval mode, eps = {eps:g}) are folded into one `nn.Linear(3, 2)` "
                    f"that computes the same output. What is its bias for output unit {c}? (3 decimals)")
        correct_fb = (f"Correct: with {scale}, b′ = s·(b − running_mean) + β = "
                      f"{_num(s, '.6g')}·({_num(bc)}{_plus(-m)}){_plus(be)} = {_num(value, '.4f')}.")
        meta_extra = dict(unit=c)
    else:
        wc = case["W"][c][j]
        question = (f"The Linear and BatchNorm below (eval mode, eps = {eps:g}) are folded into one `nn.Linear(3, 2)` "
                    f"that computes the same output. What is its weight[{c}, {j}]? (3 decimals)")
        correct_fb = (f"Correct: row {c} is scaled by {scale}, so "
                      f"W′[{c}, {j}] = {_num(s, '.6g')}·{_factor(wc)} = {_num(value, '.4f')}.")
        meta_extra = dict(unit=c, input=j)
    return _numeric(question, value, dict(kind="bn_fold", what=what, case=case, **meta_extra),
                    correct_fb=correct_fb, wrong=wrong, tol=_FOLD_TOL, code=code,
                    default_fb="Not quite. In eval mode BatchNorm is y = s·(z − running_mean) + β with "
                               "s = γ/√(running_var + ε); substitute z = W x + b.")


def q_ln_accepts(rng, names=None):
    sizes = rng.sample([3, 4, 5, 6, 7, 8], 4)
    N = rng.choice([2, 9])
    ns = tuple(sizes[:rng.choice([1, 2, 2, 3])])
    other = sizes[3]
    cands = [((N,) + ns, "a batch of blocks"), ((N, other) + ns, "extra leading dims"), (ns, "no batch dim")]
    if len(ns) > 1:
        cands += [((N,) + ns[::-1], "the same sizes in the wrong order"), ((N,) + ns[1:], "too few dims")]
    cands += [((N,) + ns[:-1] + (other,), "a different last size"), (ns + (N,), "the batch dim last")]
    m = norms.LayerNorm(list(ns))
    options = []
    for shape, _ in cands:
        try:
            with torch.no_grad():
                m(torch.zeros(shape))
            ok, msg = True, ""
        except Exception as exc:  # noqa: BLE001 - the point is to see whether it raises
            ok, msg = False, type(exc).__name__
        lead = shape[:len(shape) - len(ns)]
        fb = (f"Yes: its last {len(ns)} dim{'s are' if len(ns) > 1 else ' is'} {_shape(ns)}; the leading dims "
              f"{_shape(lead) if lead else '(none)'} only index the blocks, each normalized on its own." if ok else
              f"No: it raises a {msg}. normalized_shape must match the last {len(ns)} dim"
              f"{'s' if len(ns) > 1 else ''} of the input, here {_shape(shape[-len(ns):])}.")
        options.append((_shape(shape), ok, fb, shape))
    options = sorted(options, key=lambda o: (len(o[3]), o[3]))
    question = (f"`norms.LayerNorm({list(ns)})` accepts which of these input shapes (no error)?")
    return _choice(question, options, dict(kind="ln_accepts", normalized_shape=ns), many=True)


def q_rms_value(rng, names=None):
    D = rng.choice([3, 4, 5])
    while True:
        x = [rng.randint(-3, 4) for _ in range(D)]
        if len(set(x)) > 1 and abs(sum(x)) >= 1 and x[0] != 0:
            break
    i = rng.randrange(D)
    while x[i] == 0:
        i = rng.randrange(D)
    with torch.no_grad():
        y = norms.RMSNorm(D)(torch.tensor([x], dtype=torch.float32))[0]
    value = round(float(y[i]), 6)
    ms = sum(v * v for v in x) / D
    mean = sum(x) / D
    var = sum((v - mean) ** 2 for v in x) / D
    wrong = [((x[i] - mean) / math.sqrt(var), "That is LayerNorm: it subtracts the mean first; RMSNorm does not."),
             (x[i] / math.sqrt(ms * D), "That divides by the L2 norm √(Σx²), not by the root of the mean square: "
                                         "the output would shrink with D (here by a factor √" + str(D)
                                         + (f" = {math.sqrt(D):g}" if math.sqrt(D).is_integer()
                                            else f" ≈ {math.sqrt(D):.3f}") + ")."),
             (x[i] / ms, "That divides by the mean square, without the square root."),
             (x[i] / (sum(abs(v) for v in x) / D), "That divides by the mean absolute value.")]
    question = (f"`norms.RMSNorm({D})` (γ = 1, default eps) gets the vector x = {x}. What is output element "
                f"{i}? (3 decimals)")
    return _numeric(question, value, dict(kind="rms_value", x=x, index=i),
                    correct_fb=f"Correct: mean(x²) = {ms:.4g}, RMS = √{ms:.4g} = {math.sqrt(ms):.4g}, "
                               f"and {x[i]} / {math.sqrt(ms):.4g} = {value:.4f}.",
                    wrong=wrong, tol=0.0015,
                    default_fb="Not quite: square every element, average, take the square root, and divide "
                               f"element {i} by it.")


def q_group_members(rng, names=None):
    C = rng.choice([6, 8])
    G = rng.choice([g for g in range(2, C) if C % g == 0 and g != C])
    N, H, W = 2, rng.choice([3, 4]), rng.choice([4, 5])
    k = rng.randrange(C)
    r = describe(norms.GroupNorm(G, C), (N, C, H, W))
    idx = r.statistic_index[0, :, 0, 0]
    per = C // G
    options = []
    for j in range(C):
        if j == k:
            continue
        same = bool(idx[j] == idx[k])
        if same:
            fb = (f"Yes: channels {per * (k // per)}…{per * (k // per) + per - 1} form one group: GroupNorm({G}, {C}) "
                  f"splits the channels into {G} blocks of {per} consecutive channels.")
        elif j % G == k % G:
            fb = (f"No: groups are blocks of {per} consecutive channels, not channels {G} apart. Grouping channels "
                  f"{G} apart is the bug of reshaping to (N, {per}, {G}, …) instead of (N, {G}, {per}, …).")
        else:
            fb = f"No: channel {j} is in another block of {per} consecutive channels."
        options.append((f"channel {j}", same, fb, j))
    question = (f"`norms.GroupNorm({G}, {C})` gets an input of shape {_shape((N, C, H, W))}. Which other "
                f"channels share channel {k}'s mean and variance (within one sample)?")
    return _choice(question, options, dict(kind="group_members", G=G, C=C, shape=(N, C, H, W), channel=k),
                   many=True)


def q_instance_contrast(rng, names=None):
    N, C, H, W = rng.choice([2, 4]), rng.choice([4, 6]), rng.choice([4, 5]), rng.choice([5, 6])
    shape = (N, C, H, W)
    mode = rng.choice(["image", "channels"])
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if mode == "image":
        scale, shift = torch.full((C, 1, 1), 3.0, dtype=torch.float64), torch.full((C, 1, 1), 2.0, dtype=torch.float64)
        change = "multiplied by 3 and shifted by 2 (a change of contrast and brightness of the whole image)"
    else:
        scale = 1 + 3 * torch.rand(C, 1, 1, generator=gen, dtype=torch.float64)   # ≥ 1: eps stays negligible
        shift = torch.randn(C, 1, 1, generator=gen, dtype=torch.float64) * 2
        change = ("given its own contrast and brightness per channel: channel c becomes a_c·x + b_c, with a "
                  "scale a_c between 1 and 4 and a shift b_c that differ from channel to channel")
    x2 = x.clone()
    x2[0] = x[0] * scale + shift
    layers = [("InstanceNorm2d", (C,)), ("LayerNorm", ((C, H, W),)), ("GroupNorm", (2, C)), ("BatchNorm2d", (C,))]
    why_yes = {"InstanceNorm2d": "each channel of each image is normalized on its own, so its contrast and "
                                 "brightness cancel.",
               "LayerNorm": "the whole image shares one mean and one std, which absorb a common contrast and "
                            "brightness.",
               "GroupNorm": "each group of channels shares one mean and std, which absorb a change common to "
                            "the group."}
    why_no = {"InstanceNorm2d": "the change does not cancel.",
              "LayerNorm": "one mean and std for the whole image cannot undo a different change per channel.",
              "GroupNorm": "one mean and std per group of channels cannot undo a different change per channel.",
              "BatchNorm2d": "its statistics are shared with the other images of the batch, so changing one image "
                             "shifts and rescales its output (and the others')."}
    options = []
    with torch.no_grad():
        for n, a in layers:
            m = _module(n, a).double().train()
            same = torch.allclose(m(x)[0], m(x2)[0], atol=1e-4)   # eps = 1e-5 spoils exactness a little
            fb = ("Yes: " + why_yes.get(n, "the change cancels.")) if same else ("No: " + why_no[n])
            options.append((f"`{_ctor(n, a)}`", same, fb,
                            (n, a)))
    question = (f"In training mode, on a batch of shape {_shape(shape)}, image 0 is {change}. With which of these "
                "layers is image 0's output unchanged?")
    return _choice(question, options, dict(kind="instance_contrast", shape=shape, mode=mode), many=True)


# ----------------------------------------------------------------------------
# Conceptual questions (hand-written; each option explains itself)
# ----------------------------------------------------------------------------

_CONCEPTS = {
    "affine": (
        "Why do normalization layers multiply by γ and add β after normalizing?",
        [("So the layer can still produce any scale and offset, including undoing the normalization "
          "(γ = σ, β = μ) when that suits the next layer.", True,
          "Correct: normalizing alone would force every feature to mean 0 and variance 1; γ and β give that "
          "freedom back as two learned numbers per feature, decoupled from the batch statistics."),
         ("To keep the output's variance exactly 1.", False,
          "No: normalizing already gives variance 1; γ moves it away from 1."),
         ("To avoid dividing by zero.", False, "No: that is what ε is for."),
         ("So that the layer in front of the normalization becomes scale-invariant.", False,
          "No: the normalization does that on its own (scaling W scales μ and σ by the same factor, which "
          "cancels); γ and β are applied afterwards and do not depend on W.")]),
    "layernorm_transformers": (
        "Why do transformers use LayerNorm (or RMSNorm) rather than BatchNorm?",
        [("Each token is normalized over its own features, so nothing depends on the other sequences in the "
          "batch, on padding or on batch size, and training and inference compute the same thing.", True,
          "Correct: BatchNorm's statistics mix tokens from different sequences and positions, need running "
          "averages at inference, and are noisy with small or variable batches."),
         ("LayerNorm is much cheaper to compute.", False,
          "No: both compute a mean and a variance per statistic; the cost is about the same."),
         ("LayerNorm has no learnable parameters, so it cannot overfit.", False,
          "No: LayerNorm has γ and β, one per feature (d_model of each)."),
         ("BatchNorm cannot be applied to 3-D (batch, time, feature) tensors.", False,
          "No: BatchNorm1d accepts (N, C, L); the problem is what its statistics mix, not the shape.")]),
    "eps_purpose": (
        "What is ε (eps) for?",
        [("It keeps the denominator away from zero when a group of values has (almost) zero variance.", True,
          "Correct: √(σ² + ε) ≥ √ε, so constant inputs give 0 instead of 0/0, and tiny variances do not blow "
          "up the output."),
         ("It is a learning rate for γ and β.", False, "No: ε is a fixed constant, not an optimizer setting."),
         ("It keeps the weights in front of the normalization from growing during training.", False,
          "No: nothing in the layer limits ‖W‖; under plain SGD it grows at every step (weight decay is what "
          "pulls it back)."),
         ("It makes the normalization exactly scale-invariant.", False,
          "No: the opposite. ε is the one term that does not scale with the input, so L(aW) = L(W) holds only up "
          "to ε; to make it exact, ε has to be scaled by a² as well.")]),
    "small_batches": (
        "Why does BatchNorm work poorly with very small batches (say 2 samples per GPU)?",
        [("The batch mean and variance are then noisy estimates, so each sample's output depends strongly on "
          "which other samples it was batched with, and the running averages are poor.", True,
          "Correct: this is why GroupNorm and LayerNorm, whose statistics are per sample, are used there."),
         ("The running mean overflows.", False, "No: the running mean is an average; it cannot overflow."),
         ("γ and β cannot be learned with small batches.", False,
          "No: they get gradients as usual; the problem is the statistics."),
         ("BatchNorm refuses any batch smaller than 8.", False,
          "No: it only refuses a single value per channel in training.")]),
    "running_stats_why": (
        "Why does BatchNorm keep running averages of the mean and variance?",
        [("At inference there may be one sample, or samples that must not influence each other, so eval mode "
          "uses fixed statistics estimated during training.", True,
          "Correct: the running averages make the eval-mode layer a fixed affine map per channel."),
         ("To speed up training.", False, "No: training normalizes with the batch's own statistics anyway."),
         ("Because the gradient needs them.", False,
          "No: the gradient flows through the batch statistics; the running ones are buffers without gradient."),
         ("To initialize γ and β.", False, "No: γ starts at 1 and β at 0, independently of the data.")]),
    "covariate_shift": (
        "Santurkar et al. (2018) added random noise with a non-zero mean and a non-unit variance after every "
        "BatchNorm layer, drawn afresh at each step, so that the inputs of the later layers shifted more than in a "
        "network without BatchNorm. What did they find?",
        [("The noisy network trained about as well as the standard BatchNorm network: reducing internal "
          "covariate shift is not what makes BatchNorm work.", True,
          "Correct: more shift, yet the benefit stayed (the chapter repeats this at toy scale). What BatchNorm does "
          "change is the loss landscape: the loss and its gradient vary less along the gradient, so large steps "
          "are safe."),
         ("It trained as badly as the network without normalization, confirming the explanation of Ioffe and "
          "Szegedy (2015).", False,
          "No: that is what the covariate-shift explanation predicts, and it is not what happened."),
         ("The next BatchNorm removed the noise, so the experiment tested nothing.", False,
          "No: the noise changes the input of the next linear layer at every step, which is exactly the shift "
          "the explanation is about; measured, it was larger than without BatchNorm."),
         ("It diverged: noise after a normalization makes the loss explode.", False,
          "No: it trained; the normalization in front still bounds the activations.")]),
    "what_helps": (
        "Which of these are supported explanations of why normalization layers help training?",
        [("They keep every layer's signal at a fixed scale, whatever the scale of the weights.", True,
          "Yes: mean 0 and std 1 at every depth, for any initialization scale."),
         ("The layers in front of them become scale-invariant, so the effective learning rate η/‖W‖² adapts "
          "by itself (and weight decay controls it).", True,
          "Yes: L(aW) = L(W), the gradient is orthogonal to W and scales as 1/a."),
         ("The loss and its gradient change much more slowly along the gradient (measured by Santurkar et al. "
          "2018), so larger learning rates stay useful.", True,
          "Yes: Santurkar et al. (2018) measured a smoother loss landscape with BatchNorm: along the gradient "
          "direction the loss and its gradient vary much less, so a larger step still lands where the gradient "
          "predicted. It is a measured property of the networks they trained, not a guarantee."),
         ("They remove internal covariate shift, the change of each layer's input distribution during training.",
          False,
          "No: that was the original explanation (Ioffe and Szegedy, 2015); a network with more shift injected "
          "after each BatchNorm trains about as well."),
         ("They make the initialization irrelevant.", False,
          "No: they make the scale of the weights irrelevant; the direction of the weights still matters, and so "
          "does every part of the network that is not normalized, such as the last layer.")]),
}


_SELECT_ALL_CONCEPTS = {"what_helps"}


def _concept(key):
    def gen(rng, names=None):
        question, options = _CONCEPTS[key]
        return _choice(question, list(options), dict(kind="concept", concept=key), many=key in _SELECT_ALL_CONCEPTS)
    gen.__name__ = f"concept_{key}"
    return gen


# ----------------------------------------------------------------------------
# Topics
# ----------------------------------------------------------------------------

def _for(gen, names):
    def g(rng):
        return gen(rng, names)
    g.__name__ = f"{gen.__name__}[{','.join(names) if names else 'all'}]"
    return g


_BN = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
_IN = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]

TOPICS: dict[str, list[Callable]] = {
    "batchnorm": [_for(q_num_statistics, _BN), _for(q_param_shape, _BN), _for(q_reduced_dims, _BN),
                  _for(q_train_eval, _BN), _for(q_running_var, None), _for(q_running_mean, None),
                  _for(q_eps, ["BatchNorm1d"]), _for(q_batch_one, _BN), _for(q_keras_momentum, None),
                  _for(q_biased_unbiased, None), _for(q_state_dict, _BN), _for(q_bn_fold, None),
                  _concept("running_stats_why"), _concept("small_batches"), _concept("affine"),
                  _concept("eps_purpose")],
    "layernorm": [_for(q_num_statistics, ["LayerNorm"]), _for(q_param_shape, ["LayerNorm"]),
                  _for(q_reduced_dims, ["LayerNorm"]), _for(q_train_eval, ["LayerNorm"]),
                  _for(q_eps, ["LayerNorm"]), _for(q_batch_one, ["LayerNorm"]), _for(q_ln_accepts, None),
                  _concept("layernorm_transformers"), _for(q_state_dict, ["LayerNorm"])],
    "rmsnorm": [_for(q_num_statistics, ["RMSNorm"]), _for(q_param_shape, ["RMSNorm"]),
                _for(q_reduced_dims, ["RMSNorm"]), _for(q_state_dict, ["RMSNorm"]), _for(q_eps, ["RMSNorm"]),
                _for(q_invariance, None), _for(q_rms_value, None)],
    "groupnorm": [_for(q_num_statistics, ["GroupNorm"]), _for(q_param_shape, ["GroupNorm"]),
                  _for(q_reduced_dims, ["GroupNorm"]), _for(q_train_eval, ["GroupNorm"]),
                  _for(q_groupnorm_special, None), _for(q_eps, ["GroupNorm"]), _for(q_batch_one, ["GroupNorm"]),
                  _for(q_group_members, None), _concept("small_batches")],
    "instancenorm": [_for(q_num_statistics, _IN), _for(q_reduced_dims, _IN), _for(q_train_eval, _IN),
                     _for(q_state_dict, _IN), _for(q_param_shape, _IN), _for(q_eps, ["InstanceNorm1d"]),
                     _for(q_instance_contrast, None)],
    # what why-normalize.ipynb teaches: drift and saturation with depth, scale invariance and the covariate-shift
    # debate (γ, β, ε and the running statistics come in the BatchNorm chapter)
    "why": [_for(q_relu_depth, None), _for(q_saturation, None), _for(q_scale_invariance, None),
            _for(q_grad_scale, None), _for(q_weight_norm_growth, None), _for(q_bias_before_norm, None),
            _concept("covariate_shift"), _concept("what_helps")],
    "comparison": [_for(q_which_layer, None), _for(q_batch_independent, None), _for(q_num_statistics, None),
                   _for(q_reduced_dims, None), _for(q_train_eval, None), _for(q_batch_one, None),
                   _for(q_invariance, None), _for(q_groupnorm_special, None)],
}
TOPICS["running"] = [_for(q_running_var, None), _for(q_running_mean, None), _for(q_keras_momentum, None),
                     _for(q_biased_unbiased, None), _for(q_train_eval, _BN)]


def topics() -> list:
    """Names accepted by :func:`questions_for` and :func:`show`."""
    return list(TOPICS)


def _generate(gens, n, rng, tries_per_question=20):
    out, seen = [], set()
    order = []
    attempts = 0
    while len(out) < n and attempts < n * tries_per_question:
        if not order:
            order = list(gens)
            rng.shuffle(order)
        gen = order.pop()
        attempts += 1
        q = gen(rng)
        key = (q["question"], q.get("code"))
        if key in seen:
            continue
        seen.add(key)
        out.append(q)
    return out


def questions_for(topic: str, n: int = 4, seed: int = 0) -> list:
    """``n`` distinct questions on ``topic`` (see :func:`topics`), deterministic in ``seed``."""
    if topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}; choose from {', '.join(TOPICS)}")
    return _generate(TOPICS[topic], n, random.Random(f"{topic}:{seed}"))


def bank(seed: int = 0, size: int = 60) -> list:
    """A mixed bank of ``size`` distinct questions from every topic, deterministic in ``seed``."""
    gens = [g for t in TOPICS for g in TOPICS[t]]
    return _generate(gens, size, random.Random(f"bank:{seed}"))


# ----------------------------------------------------------------------------
# Rendering through jupyterquiz, deterministic and without external loads
# ----------------------------------------------------------------------------

_MATHJAX_CDN_BLOCK = re.compile(
    r"else\s*\{\s*console\.log\('WARNING: Trying to force load MathJax 3'\);.*?\}\)\(\);\s*\}", re.S)
_MATHJAX_WAIT = ("else { if (MathJax.startup && MathJax.startup.promise) { "
                 "MathJax.startup.promise.then(function () { MathJax.typeset([container]); }); } }")
_EXTERNAL_SRC = re.compile(r"""\w+\.src\s*=\s*['"]https?://[^'"]*['"]\s*;""")
_shown: dict = {}


def _clean(questions):
    return [{k: v for k, v in q.items() if not k.startswith("_")} for q in questions]


# jupyterquiz (2.9.6) looks up the question class by "type" but then styles and scores a question by its
# number of correct options: one correct option gives the single-answer colour and radio behaviour even for
# "many_choice". A select-all question with one right answer would give itself away, so the type decides.
_MANY_CHOICE_PATCHES = [
    ("if (num_correct > 1) {", "if (num_correct > 1 || qa.type == \"many_choice\") {"),
    ("this.fbDiv.dataset.numcorrect = numCorrect;",
     "this.fbDiv.dataset.numcorrect = numCorrect; "
     "this.fbDiv.dataset.many = (this.qa.type == \"many_choice\") ? 1 : 0;"),
    ("if (fb.dataset.numcorrect <= 1) {", "if (fb.dataset.numcorrect <= 1 && fb.dataset.many != 1) {"),
]


def _patch_js(js: str) -> str:
    """Remove jupyterquiz's MathJax-from-CDN fallback (it would also overwrite the page's MathJax),
    tolerate a MathJax that is configured but not loaded yet, and let ``many_choice`` decide how a
    question looks and is scored (see ``_MANY_CHOICE_PATCHES``)."""
    js = _MATHJAX_CDN_BLOCK.sub(_MATHJAX_WAIT, js)
    for old, new in _MANY_CHOICE_PATCHES:
        if js.count(old) != 1:
            warnings.warn(f"norms.quiz: jupyterquiz changed, cannot patch {old!r}; a select-all question with one "
                          "correct option may look like a single-answer one")
        js = js.replace(old, new)
    js = _EXTERNAL_SRC.sub("/* external load removed by norms.quiz */", js)
    js = js.replace("version[0] ==", "(version || '')[0] ==").replace("v[0] ===", "(v || '')[0] ===")
    js = js.replace("} else {\n                MathJax.typeset([container]);",
                    "} else if (MathJax.typeset) {\n                MathJax.typeset([container]);")
    if "://" in js:
        warnings.warn("norms.quiz: the jupyterquiz script still mentions a URL; check it loads nothing external")
    return js


def render(questions: list, *, key: str | None = None, **options) -> dict:
    """Run ``jupyterquiz.display_quiz`` on ``questions`` and return what it displays, cleaned:
    ``{"html": ..., "javascript": ..., "div_id": ...}``. ``options`` are display_quiz's
    (``num``, ``shuffle_answers``, ``colors``, ...). The container id is derived from the
    questions, the options and ``key`` (not random), so the output is the same on every run."""
    try:
        import jupyterquiz.dynamic.display as jq_display
    except ImportError as exc:  # an optional dependency: pip install "norms[quiz]"
        raise ImportError("norms.quiz needs jupyterquiz to display quizzes: pip install jupyterquiz") from exc

    qs = _clean(questions)
    payload = json.dumps([qs, sorted(options.items()), key], sort_keys=True, default=str)
    digest = hashlib.sha256(payload.encode()).hexdigest()
    count = _shown.get(digest, 0)          # the same quiz twice on one page needs two ids
    _shown[digest] = count + 1
    captured = []
    saved_display, saved_random = jq_display.display, jq_display.random
    jq_display.display = lambda *objs, **kw: captured.extend(objs)
    jq_display.random = random.Random(f"{digest}:{count}")   # display_quiz draws its div id from here
    try:
        jq_display.display_quiz(qs, **options)
    finally:
        jq_display.display, jq_display.random = saved_display, saved_random
    html_out = "".join(o.data for o in captured if type(o).__name__ == "HTML")
    if html_out.count("<div") > html_out.count("</div>"):
        html_out += "</div>"  # jupyterquiz leaves its container open
    js_out = _patch_js("".join(o.data for o in captured if type(o).__name__ == "Javascript"))
    m = re.search(r'<div id="([A-Za-z0-9_]+)"', html_out)
    return {"html": html_out, "javascript": js_out, "div_id": m.group(1) if m else None}


def display_questions(questions: list, *, key: str | None = None, **options) -> None:
    """Display ``questions`` (jupyterquiz dicts) in the notebook; see :func:`render`."""
    from IPython.display import HTML, Javascript, display

    out = render(questions, key=key, **options)
    display(HTML(out["html"]))
    display(Javascript(out["javascript"]))


def show(topic: str, n: int = 4, seed: int = 0, **options) -> None:
    """Display ``n`` questions on ``topic`` (e.g. ``norms.quiz.show("batchnorm")``). Works without a
    kernel on the built site: everything is in the cell's output."""
    display_questions(questions_for(topic, n, seed), key=f"{topic}:{n}:{seed}", **options)


def self_quiz(bank_size: int = 60, num: int = 5, seed: int = 0, **options) -> None:
    """Embed a bank of ``bank_size`` generated questions; the browser shows a random ``num`` of them
    on each visit (reload the page, or re-run the cell, for new ones). Every option has feedback."""
    display_questions(bank(seed, bank_size), key=f"self_quiz:{bank_size}:{seed}", num=num, **options)
