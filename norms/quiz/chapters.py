"""Chapter-specific computed questions: BatchNorm folding, LayerNorm shapes, RMS values, groups,
contrast."""

from __future__ import annotations

import math

import torch

from norms import modules
from norms.axes import describe
from norms.i18n import tr

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
                tr("That divides by the variance instead of its square root."),
            ),
            (g * bc / sd + be, tr("That forgets to subtract the running mean from the bias.")),
            (g * (bc - m) / sd, tr("That forgets β.")),
            ((bc - m) / sd + be, tr("That forgets γ.")),
            (bc, tr("The bias does change: BatchNorm's shift and scale move into it.")),
        ]
    else:
        j = rng.randrange(3)
        wc = case["W"][c][j]
        value = round(W_new[c][j], 6)
        wrong = [
            (g * wc / (v + eps), tr("That divides by the variance instead of its square root.")),
            (wc / sd, tr("That forgets γ.")),
            (
                wc * sd / g,
                tr("That is the inverse scale: BatchNorm divides by the std and multiplies by γ."),
            ),
            (wc, tr("The weight does change: every row is scaled by γ/√(running_var + ε).")),
            (g * wc, tr("That forgets to divide by the running std.")),
        ]
    return case, eps, c, what, j, value, wrong


def _fold_draw(rng):
    """A folding question whose distractors all differ from the key: (case, eps, unit, what,
    input, value, wrong)."""
    while True:
        case, eps, c, what, j, value, wrong = _fold_question(rng)
        g, v = case["gamma"][c], case["running_var"][c]
        # |γ/√(var + ε)| = 1 leaves the unit's weights (up to sign) unchanged, and then several
        # mistakes give the right number; any other coincidence between the key and a distractor is
        # drawn again as well, so every distractor is kept
        if abs(abs(g / math.sqrt(v + eps)) - 1) > 0.05 and distinct(
            [value] + [w for w, _ in wrong], 2.5 * _FOLD_TOL
        ):
            return case, eps, c, what, j, value, wrong


def _fold_code(case) -> str:
    """The code of a folding question: a Linear and an eval-mode BatchNorm with the case's
    numbers."""
    t = "torch.tensor"
    return "\n".join(
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


def q_bn_fold(rng, names=None):
    case, eps, c, what, j, value, wrong = _fold_draw(rng)
    g, m, v, be = (
        case["gamma"][c],
        case["running_mean"][c],
        case["running_var"][c],
        case["beta"][c],
    )
    s = g / math.sqrt(v + eps)
    code = _fold_code(case)
    scale = tr(
        "s = γ/√(running_var + ε) = {g}/√({v} + {eps:g}) = {s}",
        g=num(g),
        v=num(v),
        eps=eps,
        s=num(s, ".6g"),
    )
    if what == "bias":
        bc = case["b"][c]
        question = tr(
            "The Linear and BatchNorm below (eval mode, eps = {eps:g}) are folded "
            "into one `nn.Linear(3, 2)` that computes the same output. What is its "
            "bias for output unit {c}? (3 decimals)",
            eps=eps,
            c=c,
        )
        correct_fb = tr(
            "Correct: with {scale}, b′ = s·(b − running_mean) + β = "
            "{s}·({bc}{value}){be} = {value2}.",
            scale=scale,
            s=num(s, ".6g"),
            bc=num(bc),
            value=plus(-m),
            be=plus(be),
            value2=num(value, ".4f"),
        )
        meta_extra = dict(unit=c)
    else:
        wc = case["W"][c][j]
        question = tr(
            "The Linear and BatchNorm below (eval mode, eps = {eps:g}) are folded "
            "into one `nn.Linear(3, 2)` that computes the same output. What is its "
            "weight[{c}, {j}]? (3 decimals)",
            eps=eps,
            c=c,
            j=j,
        )
        correct_fb = tr(
            "Correct: row {c} is scaled by {scale}, so W′[{c}, {j}] = {s}·{wc} = {value}.",
            c=c,
            scale=scale,
            j=j,
            s=num(s, ".6g"),
            wc=factor(wc),
            value=num(value, ".4f"),
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
        default_fb=tr(
            "Not quite. In eval mode BatchNorm is y = s·(z − running_mean) + β with "
            "s = γ/√(running_var + ε); substitute z = W x + b."
        ),
    )


def q_ln_accepts(rng, names=None):
    sizes = rng.sample([3, 4, 5, 6, 7, 8], 4)
    N = rng.choice([2, 9])
    ns = tuple(sizes[: rng.choice([1, 2, 2, 3])])
    other = sizes[3]
    cands = [
        ((N,) + ns, tr("a batch of blocks")),
        ((N, other) + ns, tr("extra leading dims")),
        (ns, tr("no batch dim")),
    ]
    if len(ns) > 1:
        cands += [
            ((N,) + ns[::-1], tr("the same sizes in the wrong order")),
            ((N,) + ns[1:], tr("too few dims")),
        ]
    cands += [
        ((N,) + ns[:-1] + (other,), tr("a different last size")),
        (ns + (N,), tr("the batch dim last")),
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
            (
                tr(
                    "Yes: its last {n} dims are {ns}; the leading dims {lead} only index "
                    "the blocks, each normalized on its own.",
                    n=len(ns),
                    ns=shape_str(ns),
                    lead=shape_str(lead) if lead else tr("(none)"),
                )
                if len(ns) > 1
                else tr(
                    "Yes: its last {n} dim is {ns}; the leading dims {lead} only index "
                    "the blocks, each normalized on its own.",
                    n=len(ns),
                    ns=shape_str(ns),
                    lead=shape_str(lead) if lead else tr("(none)"),
                )
            )
            if ok
            else (
                tr(
                    "No: it raises a {msg}. normalized_shape must match the last {n} "
                    "dims of the input, here {shape}.",
                    msg=msg,
                    n=len(ns),
                    shape=shape_str(shape[-len(ns) :]),
                )
                if len(ns) > 1
                else tr(
                    "No: it raises a {msg}. normalized_shape must match the last {n} "
                    "dim of the input, here {shape}.",
                    msg=msg,
                    n=len(ns),
                    shape=shape_str(shape[-len(ns) :]),
                )
            )
        )
        options.append((shape_str(shape), ok, fb, shape))
    options = sorted(options, key=lambda o: (len(o[3]), o[3]))
    question = tr(
        "`norms.LayerNorm({list})` accepts which of these input shapes (no error)?", list=list(ns)
    )
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
            tr("That is LayerNorm: it subtracts the mean first; RMSNorm does not."),
        ),
        (
            x[i] / math.sqrt(ms * D),
            tr(
                "That divides by the L2 norm √(Σx²), not by the root of the mean square: "
                "the output would shrink with D (here by a factor √{d}{value}).",
                d=D,
                value=(
                    f" = {math.sqrt(D):g}"
                    if math.sqrt(D).is_integer()
                    else f" ≈ {math.sqrt(D):.3f}"
                ),
            ),
        ),
        (x[i] / ms, tr("That divides by the mean square, without the square root.")),
        (x[i] / (sum(abs(v) for v in x) / D), tr("That divides by the mean absolute value.")),
    ]
    question = tr(
        "`norms.RMSNorm({d})` (γ = 1, default eps) gets the vector x = {x}. What "
        "is output element {i}? (3 decimals)",
        d=D,
        x=x,
        i=i,
    )
    return numeric(
        question,
        value,
        dict(kind="rms_value", x=x, index=i),
        correct_fb=tr(
            "Correct: mean(x²) = {ms:.4g}, RMS = √{ms:.4g} = {sqrt:.4g}, and {x} / "
            "{sqrt:.4g} = {value:.4f}.",
            ms=ms,
            sqrt=math.sqrt(ms),
            x=x[i],
            value=value,
        ),
        wrong=wrong,
        tol=0.0015,
        default_fb=tr(
            "Not quite: square every element, average, take the square root, and "
            "divide element {i} by it.",
            i=i,
        ),
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
            fb = tr(
                "Yes: channels {per}…{value} form one group: GroupNorm({g}, {c}) splits "
                "the channels into {g} blocks of {per2} consecutive channels.",
                per=per * (k // per),
                value=per * (k // per) + per - 1,
                g=G,
                c=C,
                per2=per,
            )
        elif j % G == k % G:
            fb = tr(
                "No: groups are blocks of {per} consecutive channels, not channels {g} "
                "apart. Grouping channels {g} apart is the bug of reshaping to (N, "
                "{per}, {g}, …) instead of (N, {g}, {per}, …).",
                per=per,
                g=G,
            )
        else:
            fb = tr(
                "No: channel {j} is in another block of {per} consecutive channels.", j=j, per=per
            )
        options.append((tr("channel {j}", j=j), same, fb, j))
    question = tr(
        "`norms.GroupNorm({g}, {c})` gets an input of shape {value}. Which other "
        "channels share channel {k}'s mean and variance (within one sample)?",
        g=G,
        c=C,
        value=shape_str((N, C, H, W)),
        k=k,
    )
    return choice(
        question,
        options,
        dict(kind="group_members", G=G, C=C, shape=(N, C, H, W), channel=k),
        many=True,
    )


def _contrast_reasons() -> tuple[dict, dict]:
    """Why each layer's output is (``why_yes``) or is not (``why_no``) unchanged when one
    image's contrast and brightness change."""
    why_yes = {
        "InstanceNorm2d": tr(
            "each channel of each image is normalized on its own, so its contrast "
            "and brightness cancel."
        ),
        "LayerNorm": tr(
            "the whole image shares one mean and one std, which absorb a common "
            "contrast and brightness."
        ),
        "GroupNorm": tr(
            "each group of channels shares one mean and std, which absorb a change "
            "common to the group."
        ),
    }
    why_no = {
        "InstanceNorm2d": tr("the change does not cancel."),
        "LayerNorm": (
            tr("one mean and std for the whole image cannot undo a different change per channel.")
        ),
        "GroupNorm": (
            tr("one mean and std per group of channels cannot undo a different change per channel.")
        ),
        "BatchNorm2d": tr(
            "its statistics are shared with the other images of the batch, so "
            "changing one image shifts and rescales its output (and the others')."
        ),
    }
    return why_yes, why_no


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
        change = tr(
            "multiplied by 3 and shifted by 2 (a change of contrast and brightness "
            "of the whole image)"
        )
    else:
        scale = 1 + 3 * torch.rand(
            C, 1, 1, generator=gen, dtype=torch.float64
        )  # ≥ 1: eps stays negligible
        shift = torch.randn(C, 1, 1, generator=gen, dtype=torch.float64) * 2
        change = tr(
            "given its own contrast and brightness per channel: channel c becomes "
            "a·x + b, with a scale a between 1 and 4 and a shift b that differ from "
            "channel to channel"
        )
    x2 = x.clone()
    x2[0] = x[0] * scale + shift
    layers = [
        ("InstanceNorm2d", (C,)),
        ("LayerNorm", ((C, H, W),)),
        ("GroupNorm", (2, C)),
        ("BatchNorm2d", (C,)),
    ]
    why_yes, why_no = _contrast_reasons()
    options = []
    with torch.no_grad():
        for n, a in layers:
            m = make_module(n, a).double().train()
            same = torch.allclose(
                m(x)[0], m(x2)[0], atol=1e-4
            )  # eps = 1e-5 spoils exactness a little
            fb = (
                tr("Yes: {reason}", reason=why_yes.get(n, tr("the change cancels.")))
                if same
                else tr("No: {reason}", reason=why_no[n])
            )
            options.append((f"`{constructor(n, a)}`", same, fb, (n, a)))
    question = tr(
        "In training mode, on a batch of shape {shape}, image 0 is {change}. "
        "With which of these layers is image 0's output unchanged?",
        shape=shape_str(shape),
        change=change,
    )
    return choice(
        question, options, dict(kind="instance_contrast", shape=shape, mode=mode), many=True
    )
