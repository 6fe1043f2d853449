"""Chapter-specific computed questions: BatchNorm folding, LayerNorm shapes, RMS values, groups,
contrast."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.axes import describe

from .builders import choice, factor, num, numeric, plus, shape_str
from .cases import constructor, make_module
from .running import distinct


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
    """(W', b') of the single Linear equal to Linear -> norms.BatchNorm1d (eval), read off by
    running it."""
    # skip_init: no random initialization (it would draw from torch's global generator); every value
    # is set below
    lin = torch.nn.utils.skip_init(torch.nn.Linear, len(case["W"][0]), len(case["W"])).double()
    bn = modules.BatchNorm1d(len(case["W"])).double().eval()
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
    """One draw: (case, folded W′ and b′, eps, unit, "bias"/"weight", input index, the key, the
    distractors)."""
    case = _fold_case(rng)
    W_new, b_new, eps = _folded(case)
    c = rng.randrange(2)
    what = rng.choice(["bias", "weight"])
    g, m, v, be = case["gamma"][c], case["running_mean"][c], case["running_var"][c], case["beta"][c]
    sd = math.sqrt(v + eps)
    if what == "bias":
        j, bc = None, case["b"][c]
        value = round(b_new[c], 6)
        wrong = [
            (
                g * (bc - m) / (v + eps) + be,
                "That divides by the variance instead of its square root.",
            ),
            (g * bc / sd + be, "That forgets to subtract the running mean from the bias."),
            (g * (bc - m) / sd, "That forgets β."),
            ((bc - m) / sd + be, "That forgets γ."),
            (bc, "The bias does change: BatchNorm's shift and scale move into it."),
        ]
    else:
        j = rng.randrange(3)
        wc = case["W"][c][j]
        value = round(W_new[c][j], 6)
        wrong = [
            (g * wc / (v + eps), "That divides by the variance instead of its square root."),
            (wc / sd, "That forgets γ."),
            (
                wc * sd / g,
                "That is the inverse scale: BatchNorm divides by the std and multiplies by γ.",
            ),
            (wc, "The weight does change: every row is scaled by γ/√(running_var + ε)."),
            (g * wc, "That forgets to divide by the running std."),
        ]
    return case, eps, c, what, j, value, wrong


def q_bn_fold(rng, names=None):
    while True:
        case, eps, c, what, j, value, wrong = _fold_question(rng)
        g, m, v, be = (
            case["gamma"][c],
            case["running_mean"][c],
            case["running_var"][c],
            case["beta"][c],
        )
        sd = math.sqrt(v + eps)
        # |γ/√(var + ε)| = 1 leaves the unit's weights (up to sign) unchanged, and then several
        # mistakes give the right number; any other coincidence between the key and a distractor is
        # drawn again as well, so every distractor is kept
        if abs(abs(g / sd) - 1) > 0.05 and distinct(
            [value] + [w for w, _ in wrong], 2.5 * _FOLD_TOL
        ):
            break
    s = g / sd
    t = "torch.tensor"
    code = "\n".join(
        [
            "lin, bn = nn.Linear(3, 2), norms.BatchNorm1d(2)",
            "with torch.no_grad():",
            f"    lin.weight.copy_({t}({case['W']}))",
            f"    lin.bias.copy_({t}({case['b']}))",
            f"    bn.running_mean.copy_({t}({case['running_mean']}))",
            f"    bn.running_var.copy_({t}({case['running_var']}))",
            f"    bn.weight.copy_({t}({case['gamma']}))   # γ",
            f"    bn.bias.copy_({t}({case['beta']}))     # β",
            "bn.eval()",
        ]
    )
    scale = f"s = γ/√(running_var + ε) = {num(g)}/√({num(v)} + {eps:g}) = {num(s, '.6g')}"
    if what == "bias":
        bc = case["b"][c]
        question = (
            f"The Linear and BatchNorm below (eval mode, eps = {eps:g}) are folded into one "
            "`nn.Linear(3, 2)` that computes the same output. What is its bias for output unit "
            f"{c}? (3 decimals)"
        )
        correct_fb = (
            f"Correct: with {scale}, b′ = s·(b − running_mean) + β = "
            f"{num(s, '.6g')}·({num(bc)}{plus(-m)}){plus(be)} = {num(value, '.4f')}."
        )
        meta_extra = dict(unit=c)
    else:
        wc = case["W"][c][j]
        question = (
            f"The Linear and BatchNorm below (eval mode, eps = {eps:g}) are folded into one "
            f"`nn.Linear(3, 2)` that computes the same output. What is its weight[{c}, {j}]? (3 "
            "decimals)"
        )
        correct_fb = (
            f"Correct: row {c} is scaled by {scale}, so "
            f"W′[{c}, {j}] = {num(s, '.6g')}·{factor(wc)} = {num(value, '.4f')}."
        )
        meta_extra = dict(unit=c, input=j)
    return numeric(
        question,
        value,
        dict(kind="bn_fold", what=what, case=case, **meta_extra),
        correct_fb=correct_fb,
        wrong=wrong,
        tol=_FOLD_TOL,
        code=code,
        default_fb="Not quite. In eval mode BatchNorm is y = s·(z − running_mean) + β with "
        "s = γ/√(running_var + ε); substitute z = W x + b.",
    )


def q_ln_accepts(rng, names=None):
    sizes = rng.sample([3, 4, 5, 6, 7, 8], 4)
    N = rng.choice([2, 9])
    ns = tuple(sizes[: rng.choice([1, 2, 2, 3])])
    other = sizes[3]
    cands = [
        ((N,) + ns, "a batch of blocks"),
        ((N, other) + ns, "extra leading dims"),
        (ns, "no batch dim"),
    ]
    if len(ns) > 1:
        cands += [
            ((N,) + ns[::-1], "the same sizes in the wrong order"),
            ((N,) + ns[1:], "too few dims"),
        ]
    cands += [
        ((N,) + ns[:-1] + (other,), "a different last size"),
        (ns + (N,), "the batch dim last"),
    ]
    m = modules.LayerNorm(list(ns))
    options = []
    for shape, _ in cands:
        try:
            with torch.no_grad():
                m(torch.zeros(shape))
            ok, msg = True, ""
        except Exception as exc:  # noqa: BLE001 - the point is to see whether it raises
            ok, msg = False, type(exc).__name__
        lead = shape[: len(shape) - len(ns)]
        fb = (
            f"Yes: its last {len(ns)} dim{'s are' if len(ns) > 1 else ' is'} {shape_str(ns)}; the "
            f"leading dims {shape_str(lead) if lead else '(none)'} only index the blocks, each "
            "normalized on its own."
            if ok
            else f"No: it raises a {msg}. normalized_shape must match the last {len(ns)} dim"
            f"{'s' if len(ns) > 1 else ''} of the input, here {shape_str(shape[-len(ns) :])}."
        )
        options.append((shape_str(shape), ok, fb, shape))
    options = sorted(options, key=lambda o: (len(o[3]), o[3]))
    question = f"`norms.LayerNorm({list(ns)})` accepts which of these input shapes (no error)?"
    return choice(question, options, dict(kind="ln_accepts", normalized_shape=ns), many=True)


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
        y = modules.RMSNorm(D)(torch.tensor([x], dtype=torch.float32))[0]
    value = round(float(y[i]), 6)
    ms = sum(v * v for v in x) / D
    mean = sum(x) / D
    var = sum((v - mean) ** 2 for v in x) / D
    wrong = [
        (
            (x[i] - mean) / math.sqrt(var),
            "That is LayerNorm: it subtracts the mean first; RMSNorm does not.",
        ),
        (
            x[i] / math.sqrt(ms * D),
            "That divides by the L2 norm √(Σx²), not by the root of the mean square: "
            "the output would shrink with D (here by a factor √"
            + str(D)
            + (f" = {math.sqrt(D):g}" if math.sqrt(D).is_integer() else f" ≈ {math.sqrt(D):.3f}")
            + ").",
        ),
        (x[i] / ms, "That divides by the mean square, without the square root."),
        (x[i] / (sum(abs(v) for v in x) / D), "That divides by the mean absolute value."),
    ]
    question = (
        f"`norms.RMSNorm({D})` (γ = 1, default eps) gets the vector x = {x}. What is output "
        f"element {i}? (3 decimals)"
    )
    return numeric(
        question,
        value,
        dict(kind="rms_value", x=x, index=i),
        correct_fb=f"Correct: mean(x²) = {ms:.4g}, RMS = √{ms:.4g} = {math.sqrt(ms):.4g}, "
        f"and {x[i]} / {math.sqrt(ms):.4g} = {value:.4f}.",
        wrong=wrong,
        tol=0.0015,
        default_fb="Not quite: square every element, average, take the square root, and divide "
        f"element {i} by it.",
    )


def q_group_members(rng, names=None):
    C = rng.choice([6, 8])
    G = rng.choice([g for g in range(2, C) if C % g == 0 and g != C])
    N, H, W = 2, rng.choice([3, 4]), rng.choice([4, 5])
    k = rng.randrange(C)
    r = describe(modules.GroupNorm(G, C), (N, C, H, W))
    idx = r.statistic_index[0, :, 0, 0]
    per = C // G
    options = []
    for j in range(C):
        if j == k:
            continue
        same = bool(idx[j] == idx[k])
        if same:
            fb = (
                f"Yes: channels {per * (k // per)}…{per * (k // per) + per - 1} form one group: "
                f"GroupNorm({G}, {C}) splits the channels into {G} blocks of {per} consecutive "
                "channels."
            )
        elif j % G == k % G:
            fb = (
                f"No: groups are blocks of {per} consecutive channels, not channels {G} apart. "
                f"Grouping channels {G} apart is the bug of reshaping to (N, {per}, {G}, …) "
                f"instead of (N, {G}, {per}, …)."
            )
        else:
            fb = f"No: channel {j} is in another block of {per} consecutive channels."
        options.append((f"channel {j}", same, fb, j))
    question = (
        f"`norms.GroupNorm({G}, {C})` gets an input of shape {shape_str((N, C, H, W))}. "
        "Which other "
        f"channels share channel {k}'s mean and variance (within one sample)?"
    )
    return choice(
        question,
        options,
        dict(kind="group_members", G=G, C=C, shape=(N, C, H, W), channel=k),
        many=True,
    )


def q_instance_contrast(rng, names=None):
    N, C, H, W = rng.choice([2, 4]), rng.choice([4, 6]), rng.choice([4, 5]), rng.choice([5, 6])
    shape = (N, C, H, W)
    mode = rng.choice(["image", "channels"])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if mode == "image":
        scale, shift = (
            torch.full((C, 1, 1), 3.0, dtype=torch.float64),
            torch.full((C, 1, 1), 2.0, dtype=torch.float64),
        )
        change = (
            "multiplied by 3 and shifted by 2 (a change of contrast and brightness of the whole "
            "image)"
        )
    else:
        scale = 1 + 3 * torch.rand(
            C, 1, 1, generator=gen, dtype=torch.float64
        )  # ≥ 1: eps stays negligible
        shift = torch.randn(C, 1, 1, generator=gen, dtype=torch.float64) * 2
        change = (
            "given its own contrast and brightness per channel: channel c becomes a·x + b, "
            "with a scale a between 1 and 4 and a shift b that differ from channel to channel"
        )
    x2 = x.clone()
    x2[0] = x[0] * scale + shift
    layers = [
        ("InstanceNorm2d", (C,)),
        ("LayerNorm", ((C, H, W),)),
        ("GroupNorm", (2, C)),
        ("BatchNorm2d", (C,)),
    ]
    why_yes = {
        "InstanceNorm2d": "each channel of each image is normalized on its own, so its contrast "
        "and brightness cancel.",
        "LayerNorm": "the whole image shares one mean and one std, which absorb a common contrast "
        "and brightness.",
        "GroupNorm": "each group of channels shares one mean and std, which absorb a change "
        "common to the group.",
    }
    why_no = {
        "InstanceNorm2d": "the change does not cancel.",
        "LayerNorm": (
            "one mean and std for the whole image cannot undo a different change per channel."
        ),
        "GroupNorm": (
            "one mean and std per group of channels cannot undo a different change per channel."
        ),
        "BatchNorm2d": "its statistics are shared with the other images of the batch, so changing "
        "one image shifts and rescales its output (and the others').",
    }
    options = []
    with torch.no_grad():
        for n, a in layers:
            m = make_module(n, a).double().train()
            same = torch.allclose(
                m(x)[0], m(x2)[0], atol=1e-4
            )  # eps = 1e-5 spoils exactness a little
            fb = ("Yes: " + why_yes.get(n, "the change cancels.")) if same else ("No: " + why_no[n])
            options.append((f"`{constructor(n, a)}`", same, fb, (n, a)))
    question = (
        f"In training mode, on a batch of shape {shape_str(shape)}, image 0 is {change}. "
        "With which "
        "of these layers is image 0's output unchanged?"
    )
    return choice(
        question, options, dict(kind="instance_contrast", shape=shape, mode=mode), many=True
    )
