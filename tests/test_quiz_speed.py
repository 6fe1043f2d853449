"""The 'speed' quiz topic: every answer re-derived here without norms.fast.bench or the
generators' helpers."""

from __future__ import annotations

import math
import random

import torch

import norms.quiz as quiz
from norms.quiz import speed

QS = [q for seed in range(4) for q in quiz.questions_for("speed", 8, seed)]


def _by_kind(kind):
    qs = [q for q in QS if q["_meta"]["kind"] == kind]
    assert qs, f"no {kind} question drawn"
    return qs


def _key(q):
    return next(a for a in q["answers"] if a.get("correct"))


def test_every_generator_is_drawn():
    assert {q["_meta"]["kind"] for q in QS} == {
        "perfect_bytes",
        "intensity",
        "passes",
        "backward_sweeps",
        "variance_formula",
    }


def test_perfect_bytes_from_the_shapes():
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2}
    for q in _by_kind("perfect_bytes"):
        m = q["_meta"]
        n = math.prod(m["shape"])
        d = m["shape"][-1]
        params = d if m["op"] == "RMSNorm" else 2 * d
        elements = 2 * n + params + (3 * n + 2 * params if m["direction"] == "fwd+bwd" else 0)
        lo, hi = _key(q)["range"]
        assert lo <= elements * sizes[m["dtype"]] / 1e6 <= hi and hi - lo < 0.2 + 0.01 * hi


def test_intensity_from_the_counts():
    for q in _by_kind("intensity"):
        m = q["_meta"]
        flops = 4 if m["op"] == "RMSNorm" else 7
        per_elem_bytes = 2 * {"float32": 4, "float16": 2, "bfloat16": 2}[m["dtype"]]
        lo, hi = _key(q)["range"]
        assert lo <= flops / per_elem_bytes <= hi


def test_passes_against_an_op_count_by_hand():
    # LayerNorm: mean, sub, mul, mean, mul (rstd), addcmul; RMSNorm: mul, mean, mul, mul;
    # GroupNorm: mean, sub, mul, mean, mul, addcmul (views ignored)
    expected = {"layer_norm": 6, "rms_norm": 4, "group_norm": 6}
    for q in _by_kind("passes"):
        assert _key(q)["answer"] == str(expected[q["_meta"]["fn"]])


def test_backward_sweeps_from_the_shapes():
    """Two sweeps: x and dy read twice, dx written once: five full-size tensors."""
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2}
    for q in _by_kind("backward_sweeps"):
        m = q["_meta"]
        mb = 5 * math.prod(m["shape"]) * sizes[m["dtype"]] / 1e6
        lo, hi = _key(q)["range"]
        assert lo <= mb <= hi and hi - lo < 0.2 + 0.01 * hi
        assert not lo <= 3 * mb / 5 <= hi  # one sweep's bytes are not the key


def test_variance_formula_against_float64():
    seen_naive_fail = False
    for q in _by_kind("variance_formula") + [
        speed.q_variance_formula(random.Random(i)) for i in range(4)
    ]:
        m = q["_meta"]
        gen = torch.Generator().manual_seed(m["seed"])
        x = (m["mean"] + m["std"] * torch.randn(4096, generator=gen, dtype=torch.float64)).float()
        truth = x.double().var(unbiased=False).item()
        naive = ((x * x).mean() - x.mean() ** 2).item()
        right = {a["answer"].startswith("E[x²]"): a["correct"] for a in q["answers"]}
        assert right[True] == (abs(naive - truth) <= 0.01 * truth)
        assert all(a["correct"] for a in q["answers"] if not a["answer"].startswith("E[x²]"))
        seen_naive_fail |= not right[True]
    assert seen_naive_fail, "the question should show the cancellation at least once"
