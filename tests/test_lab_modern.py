"""The training helpers of the chapters "Norms in today's transformers" and "Transformers without
normalization" (norms.lab.modern, norms.lab.dyt): each checked against its formula."""

from __future__ import annotations

import math
import random

import pytest
import torch

import norms
import norms.quiz as quiz
from norms.lab import dyt, modern
from norms.lab.training import seeded
from norms.lab.transformer import TinyEncoder


def _random_pre_ln(seed=0):
    torch.manual_seed(seed)
    model = TinyEncoder("pre", 2, vocab=8, length=8, d_model=16, nhead=2, dim_feedforward=32)
    model = model.double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # non-trivial gamma, beta and biases
    return model


def test_pre_ln_to_pre_rms_computes_the_same_function():
    model = _random_pre_ln()
    x = torch.randint(0, 8, (16, 8))
    with torch.no_grad():
        before = model(x)
        converted = modern.pre_ln_to_pre_rms(model)
        after = converted(x)
    assert not any(isinstance(m, norms.LayerNorm) for m in converted.modules())
    assert sum(isinstance(m, norms.RMSNorm) for m in converted.modules()) == 5
    torch.testing.assert_close(after, before, rtol=1e-12, atol=1e-12)


def test_swapping_the_norms_without_centring_changes_the_function():
    # the check above can fail: RMSNorm in place of LayerNorm alone is not the same function
    model = _random_pre_ln()
    x = torch.randint(0, 8, (16, 8))
    with torch.no_grad():
        before = model(x)
        after = dyt.with_norm(model, "rms")(x)
    assert (after - before).abs().max() > 1e-3


def test_pre_ln_to_pre_rms_refuses_post_ln():
    with pytest.raises(ValueError, match="pre"):
        modern.pre_ln_to_pre_rms(TinyEncoder("post", 1))


def test_blocks_that_start_as_the_identity():
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    torch.manual_seed(0)
    rezero = modern.ReZeroEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    ada = modern.AdaLNZeroBlock(8, 2, 16).double()
    c = torch.randn(2, 8, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(rezero(x), x)
        assert torch.equal(ada(x, c), x)
        ada.modulation.bias.normal_()
        assert not torch.allclose(ada(x, c), x)


def test_adaln_zero_matches_its_formula():
    torch.manual_seed(1)
    ada = modern.AdaLNZeroBlock(8, 2, 16).double()
    with torch.no_grad():
        ada.modulation.weight.normal_()
        ada.modulation.bias.normal_()
    x, c = torch.randn(3, 4, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    m = ada.modulation(c)
    b1, s1, g1, b2, s2, g2 = (m[:, i * 8 : (i + 1) * 8, None].transpose(1, 2) for i in range(6))
    ln = torch.nn.functional.layer_norm
    h = ln(x, (8,)) * (1 + s1) + b1
    x1 = x + g1 * ada.attn(h, h, h)[0]
    want = x1 + g2 * ada.mlp(ln(x1, (8,)) * (1 + s2) + b2)
    torch.testing.assert_close(ada(x, c), want)


def test_peri_ln_normalizes_each_branch_output():
    torch.manual_seed(0)
    layer = modern.PeriLNEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    x = 5 * torch.randn(2, 5, 8, dtype=torch.float64)
    with torch.no_grad():
        added = layer.norm1_out(layer._sa_block(layer.norm1(x), None, None))
        x1 = x + added
        want = x1 + layer.norm2_out(layer._ff_block(layer.norm2(x1)))
        torch.testing.assert_close(layer(x), want)
        torch.testing.assert_close(
            added.std(-1, unbiased=False), torch.ones(2, 5, dtype=x.dtype), atol=1e-3, rtol=0
        )


def test_layerscale_scales_each_branch():
    torch.manual_seed(0)
    layer = modern.LayerScaleEncoderLayer(8, 2, 16, init_value=0.0, dropout=0.0, batch_first=True)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(layer(x), x)
    assert layer.scale1.shape == (8,)


def test_deep_stack_traces_the_stream_and_rejects_unknown_kinds():
    trace = []
    torch.manual_seed(0)
    model = modern.DeepStack("post", 3)
    x = torch.randint(0, 8, (4, 8))
    model(x, trace=trace)
    assert len(trace) == 4
    assert trace[1] == pytest.approx(1.0, abs=1e-3)  # post-LN: LN(…) has RMS 1 (γ=1, β=0)
    with pytest.raises(ValueError, match="kind"):
        modern.DeepStack("middle", 2)


def test_deep_stack_stream_is_what_the_head_reads_and_run_stack_measures_its_peak():
    torch.manual_seed(0)
    model = modern.DeepStack("pre", 2).double()
    x = torch.randint(0, 8, (4, 8))
    trace = []
    stream = model.stream(x, trace=trace)
    torch.testing.assert_close(model(x), model.head(model.norm(stream)))
    assert trace[-1] == pytest.approx(float(stream.pow(2).mean().sqrt()))
    res = modern.run_stack("pre", depth=2, steps=3)
    # the largest |feature| in units of the RMS: at least 1, at most sqrt(number of entries)
    assert 1.0 <= res.peak <= math.sqrt(64 * 8 * 16)


def test_copy_batch_targets_the_copied_tokens():
    x, y = modern.copy_batch(3, 4, 10, torch.Generator().manual_seed(0))
    assert torch.equal(x[:, :4], x[:, 4:])
    assert (y[:, :3] == -100).all() and (y[:, -1] == -100).all()
    assert torch.equal(y[:, 3:7], x[:, 4:])  # position t predicts token t + 1


def test_max_logit_is_the_attention_logit_and_qk_norm_bounds_it():
    torch.manual_seed(0)
    model = modern.CopyLM(qk_norm=True).double()
    tokens = torch.randint(0, 16, (4, 16))
    layer = model.stack.layers[0]
    h = model.embed(tokens) + model.pos
    q = layer.attention.wq(layer.attention_norm(h)).view(4, 16, 2, 16).transpose(1, 2)
    k = layer.attention.wk(layer.attention_norm(h)).view(4, 16, 2, 16).transpose(1, 2)
    q, k = layer.attention.q_norm(q), layer.attention.k_norm(k)
    z = q @ k.transpose(-2, -1) / 4.0
    torch.testing.assert_close(layer.attention.logits(layer.attention_norm(h)), z)
    assert model.max_logit(tokens) <= math.sqrt(16) + 1e-9


def test_logit_bound_is_sqrt_dh_times_the_largest_gamma_product():
    torch.manual_seed(0)
    model = modern.CopyLM(qk_norm=True).double()
    assert model.logit_bound() == 4.0  # d_h = 16, gamma = 1
    with torch.no_grad():
        for layer in model.stack.layers:
            layer.attention.q_norm.weight.normal_(0, 3)
            layer.attention.k_norm.weight.normal_(0, 3)
    want = max(
        4.0 * float((la.attention.q_norm.weight * la.attention.k_norm.weight).abs().max())
        for la in model.stack.layers
    )
    assert model.logit_bound() == pytest.approx(want, rel=1e-15)
    assert want > 4.0
    tokens = torch.randint(0, 16, (8, 16))
    assert model.max_logit(tokens) <= model.logit_bound()
    assert modern.CopyLM(qk_norm=False).logit_bound() == math.inf


def test_run_copy_records_the_bound_that_the_learned_gammas_raise():
    res = modern.run_copy(True, 0.1, steps=20, log_every=10)
    assert 4.0 < res.bound  # the gammas learned: the bound moved from sqrt(d_h)
    assert res.logits[-1] <= res.bound


def test_run_copy_pads_the_logits_of_a_diverged_run(monkeypatch):
    monkeypatch.setattr(modern, "fit", lambda model, batches, steps, lr: [float("nan")] * steps)
    res = modern.run_copy(False, 1.0, steps=20, log_every=10)
    assert res.diverged and len(res.logits) == 3 and math.isnan(res.accuracy)
    assert math.isnan(res.bound)


def test_with_norm_and_layernorm_io():
    torch.manual_seed(0)
    model = TinyEncoder("pre", 1, d_model=8, nhead=2, dim_feedforward=16).double()
    x = torch.randint(0, 10, (3, 10))
    pairs = dyt.layernorm_io(model, x)
    assert len(pairs) == 3
    inp, out = pairs[0]
    rows = inp.view(-1, 8)
    want = (rows - rows.mean(-1, keepdim=True)) / (
        rows.var(-1, unbiased=False, keepdim=True) + 1e-5
    ).sqrt()
    torch.testing.assert_close(out, want.flatten())
    rms = dyt.with_norm(model, "rms")
    assert sum(isinstance(m, norms.RMSNorm) for m in rms.modules()) == 3
    with pytest.raises(ValueError, match="kind"):
        dyt.with_norm(model, "batch")


def test_fit_scaled_tanh_recovers_a_and_b():
    x = torch.linspace(-4, 4, 401, dtype=torch.float64)
    a, b, r2, r2_line = dyt.fit_scaled_tanh(x, 2.0 * torch.tanh(0.7 * x))
    assert a == pytest.approx(2.0, rel=0.02) and b == pytest.approx(0.7, rel=0.02)
    assert r2 > 0.9999 > r2_line


def test_run_cnn_puts_channels_first_dyt_where_batchnorm_was(monkeypatch):
    seen = {}

    def fake_train(model, data, **kw):
        seen["norms"] = [type(b.norm).__name__ for b in model.blocks]
        raise RuntimeError("stop")

    monkeypatch.setattr(dyt, "train", fake_train)
    with pytest.raises(RuntimeError, match="stop"):
        dyt.run_cnn("dyt", None)
    assert seen["norms"] == ["DynamicTanh"] * 3


# --- the quiz questions of both chapters, keys re-derived from the formulas ---------------------


#: The question kinds of norms.quiz.dyt that the tests below check (tests/test_quiz.py reads it).
QUIZ_KINDS = {
    "dyt_value",
    "dyt_params",
    "dyt_converted",
    "dyt_depends",
    "qk_gamma_shape",
    "qk_bound",
    "identity_at_init",
}


def _qs(topic):
    return [q for seed in range(4) for q in quiz.questions_for(topic, 6, seed)]


def _correct(q):
    return [a for a in q["answers"] if a.get("correct")]


def test_quiz_topics_are_deterministic_and_complete():
    kinds = {
        q["_meta"]["kind"] for t in ("without-normalization", "modern-transformers") for q in _qs(t)
    }
    assert kinds == QUIZ_KINDS
    assert quiz.questions_for("modern-transformers", 3, 1) == quiz.questions_for(
        "modern-transformers", 3, 1
    )


def test_quiz_keys_from_the_formulas():
    from norms.quiz import dyt as qd

    for i in range(8):
        q = qd.q_dyt_value(random.Random(i))
        m = q["_meta"]
        want = math.tanh(m["alpha"] * m["x"]) * m["gamma"] + m["beta"]
        lo, hi = _correct(q)[0]["range"]
        assert lo <= want <= hi
        q = qd.q_dyt_params(random.Random(i))
        assert _correct(q)[0]["value"] == 2 * math.prod(q["_meta"]["shape"]) + 1
        q = qd.q_dyt_converted(random.Random(i))
        assert _correct(q)[0]["value"] == 2 * q["_meta"]["depth"] + 1
        q = qd.q_qk_bound(random.Random(i))
        lo, hi = _correct(q)[0]["range"]
        assert lo <= math.sqrt(q["_meta"]["d_h"]) <= hi
        q = qd.q_qk_gamma_shape(random.Random(i))
        assert q["_meta"]["answer"] == (q["_meta"]["d"] // q["_meta"]["nhead"],)
        q = qd.q_identity_at_init(random.Random(i))
        right = {k for k, a in zip(q["_meta"]["keys"], q["answers"], strict=True) if a["correct"]}
        assert {k.split(" ")[0] for k in right} == {"ReZero", "AdaLN-Zero"}
        q = qd.q_dyt_depends(random.Random(i))
        right = {k for k, a in zip(q["_meta"]["keys"], q["answers"], strict=True) if a["correct"]}
        assert right == {"alpha", "x"}


def test_pre_peri_and_layerscale_stacks_start_from_the_same_weights():
    # the chapter pairs them by seed as ablations of pre-LN: one change each, same initial weights
    def weights(kind):
        with seeded(3):
            return modern.DeepStack(kind, 2).state_dict()

    pre = weights("pre")
    for kind in ("peri", "layerscale"):
        other = weights(kind)
        extra = set(other) - set(pre)
        assert extra and all("norm1_out" in k or "norm2_out" in k or "scale" in k for k in extra)
        assert set(pre) <= set(other)
        for k, v in pre.items():
            assert torch.equal(other[k], v), (kind, k)
