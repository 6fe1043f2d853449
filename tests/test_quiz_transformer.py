"""The transformer chapter's questions: answer keys re-derived from torch.nn (not from norms)."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

import norms.quiz as quiz
from norms.quiz import transformer as tq

QS = [q for seed in range(4) for q in quiz.questions_for("transformer", 10, seed)]


def _by_kind(kind):
    out = [q for q in QS if q["_meta"]["kind"] == kind]
    out += [getattr(tq, f"q_{kind}")(random.Random(i)) for i in range(6)]
    return out


def _correct(q):
    return [a for a in q["answers"] if a.get("correct")]


def test_topic_draws_every_kind():
    assert {q["_meta"]["kind"] for q in QS} == {
        "ln_stats_btd",
        "gamma_shape",
        "prenorm_position",
        "final_norm",
        "rms_saves",
    }
    assert quiz.questions_for("transformer", 5, 0) == quiz.questions_for("transformer", 5, 0)


def test_ln_stats_btd_against_torch():
    for q in _by_kind("ln_stats_btd"):
        B, T, D = q["_meta"]["shape"]
        # torch's layer_norm returns one mean per normalized row
        _, mean, _ = torch.ops.aten.native_layer_norm(torch.randn(B, T, D), [D], None, None, 1e-5)
        assert _correct(q)[0]["value"] == mean.numel()


def test_gamma_shape_against_torch():
    for q in _by_kind("gamma_shape"):
        d, ff = q["_meta"]["d"], q["_meta"]["ff"]
        layer = nn.TransformerEncoderLayer(d, 2, ff, batch_first=True)
        want = "(" + ", ".join(map(str, layer.norm1.weight.shape)) + ",)"
        assert [a["answer"] for a in _correct(q)] == [want]


def test_prenorm_position_against_torch():
    torch.manual_seed(0)
    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first)
        with torch.no_grad():
            for lin in (layer.self_attn.out_proj, layer.linear2):
                lin.weight.zero_()
                lin.bias.zero_()
            x = torch.randn(3, 2, 8) * 3 + 1
            assert torch.allclose(layer(x), x) == norm_first
    for q in _by_kind("prenorm_position"):
        assert q["_meta"]["on_path"] == {False: True, True: False}
        assert "inside the residual branch" in _correct(q)[0]["answer"]


@pytest.mark.parametrize("depth", [6, 24])
def test_final_norm_numbers_against_torch(depth):
    torch.manual_seed(0)
    layers = [
        nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=True, batch_first=True)
        for _ in range(depth)
    ]
    with torch.no_grad():
        x = torch.randn(4, 8, 32)
        for layer in layers:
            x = layer(x)
    raw, normed = tq.residual_growth(depth)
    assert raw == pytest.approx(float(x.std(-1).mean()), rel=1e-4)
    assert normed == pytest.approx(
        float(nn.LayerNorm(32)(x).std(-1, unbiased=False).mean()), rel=1e-4
    )
    assert raw > 1.0 and abs(normed - 1) < 0.01


def test_rms_saves_against_torch():
    for q in _by_kind("rms_saves"):
        L, d = q["_meta"]["depth"], q["_meta"]["d"]
        n = 2 * L + 1
        ln = sum(p.numel() for p in nn.LayerNorm(d).parameters()) * n
        rms = sum(p.numel() for p in nn.RMSNorm(d).parameters()) * n
        assert _correct(q)[0]["value"] == ln - rms
