"""The quizzes of the training and pitfalls chapters (norms.quiz.training, norms.quiz.pitfalls):
every key is
checked here against torch.nn or against a second computation, and generation leaves the global
RNGs alone."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from norms import quiz
from norms.quiz import pitfalls as qp
from norms.quiz import training as qt


def _key(q):
    """The correct numeric value, or the keys of the correct options."""
    if q["type"] == "numeric":
        (a,) = [a for a in q["answers"] if a.get("correct")]
        return (a["range"][0] + a["range"][1]) / 2 if "range" in a else a["value"]
    keys = q["_meta"].get("keys")
    return {k for k, a in zip(keys, q["answers"], strict=True) if a["correct"]}


TRAINING_KINDS = {
    "values_per_statistic",
    "linear_scaling",
    "update_ratio",
    "prediction_depends_on_batch",
    "small_batch_choice",
    "running_after_small_batches",
}
PITFALL_KINDS = {
    "dropout_shift",
    "frozen_bn",
    "autocast_dtype",
    "padded_mean",
    "btd_without_transpose",
    "momentum_none",
    "decay_effective_lr",
    "no_decay_group",
    "zero_init_block",
}
#: every kind of question these topics generate; each has a test below against torch.nn or a second
#: computation
CHECKED_KINDS = TRAINING_KINDS | PITFALL_KINDS
#: the select-all kinds among them (many_choice, "Select all that apply.")
SELECT_ALL_KINDS = {
    "prediction_depends_on_batch",
    "small_batch_choice",
    "frozen_bn",
    "no_decay_group",
}


@pytest.mark.parametrize(
    "topic, kinds", [("training", TRAINING_KINDS), ("pitfalls", PITFALL_KINDS)]
)
def test_topics_draw_every_generator_deterministically(topic, kinds):
    qs = quiz.questions_for(topic, len(kinds), seed=0)
    assert {q["_meta"]["kind"] for q in qs} == kinds
    assert qs == quiz.questions_for(topic, len(kinds), seed=0)
    assert quiz.questions_for(topic, 4, seed=1) != quiz.questions_for(topic, 4, seed=2)


def test_generation_leaves_the_global_random_state_alone():
    torch.manual_seed(99)
    random.seed(99)
    t, p = torch.random.get_rng_state(), random.getstate()
    for topic in ("training", "pitfalls"):
        quiz.questions_for(topic, 12, seed=3)
    assert torch.equal(torch.random.get_rng_state(), t) and random.getstate() == p


@pytest.mark.parametrize("i", range(6))
def test_values_per_statistic_against_torch(i):
    q = qt.q_values_per_statistic(random.Random(i))
    layer, shape = q["_meta"]["layer"], q["_meta"]["shape"]
    B, C, H, W = shape
    want = {"BatchNorm2d": B * H * W, "GroupNorm": C // 4 * H * W, "LayerNorm": C * H * W}[layer]
    assert _key(q) == want
    if (
        layer == "BatchNorm2d"
    ):  # torch's BatchNorm2d running mean after one step, momentum 1: the mean over B·H·W
        x = torch.randn(shape)
        bn = nn.BatchNorm2d(C, momentum=1.0)
        bn(x)
        torch.testing.assert_close(bn.running_mean, x.sum((0, 2, 3)) / want)


def test_linear_scaling_and_update_ratio_keys():
    for i in range(6):
        q = qt.q_linear_scaling(random.Random(i))
        m = q["_meta"]
        assert _key(q) == pytest.approx(m["lr0"] * m["b"] / m["b0"], rel=1e-6)
        q = qt.q_update_ratio(random.Random(i))
        m = q["_meta"]
        w = torch.tensor([m["W"]], dtype=torch.float64)
        opt_w = nn.Parameter(w.clone())
        opt = torch.optim.SGD([opt_w], lr=m["lr"])
        opt_w.grad = torch.tensor([m["g"]], dtype=torch.float64)
        opt.step()
        assert _key(q) == pytest.approx(float((opt_w.detach() - w).norm() / w.norm()), rel=1e-4)


@pytest.mark.parametrize("i", range(6))
def test_prediction_depends_on_batch_only_for_batchnorm_in_training_mode(i):
    q = qt.q_prediction_depends_on_batch(random.Random(i))
    key = _key(q)
    if q["_meta"]["mode"] == "train":
        assert {k[0] for k in key if k != "none"} == {"BatchNorm2d"}
    else:
        assert key == {"none"}


def test_small_batch_choice_and_running_variance():
    q = qt.q_small_batch_choice(random.Random(0))
    assert {k[0] for k in _key(q)} == {"GroupNorm", "LayerNorm", "InstanceNorm2d"}
    for i in range(4):
        q = qt.q_running_after_small_batches(random.Random(i))
        n = q["_meta"]["n"]
        assert _key(q) == {"biased"} and q["_meta"]["ratio"] == pytest.approx((n - 1) / n, abs=0.05)


@pytest.mark.parametrize("i", range(6))
def test_dropout_shift_against_a_second_measurement(i):
    q = qp.q_dropout_shift(random.Random(i))
    m = q["_meta"]
    g = torch.Generator().manual_seed(i)
    x = torch.randn(300_000, generator=g, dtype=torch.float64) * m["var"] ** 0.5 + m["mu"]
    keep = (torch.rand(x.shape, generator=g, dtype=torch.float64) > m["p"]).double()
    ratio = float((x * keep / (1 - m["p"])).var() / x.var())
    assert _key(q) == pytest.approx(ratio, rel=0.03)


def test_frozen_bn_against_torch():
    q = qp.q_frozen_bn(random.Random(0))
    bn = nn.BatchNorm1d(4)
    for p in bn.parameters():
        p.requires_grad_(False)
    before = {k: v.clone() for k, v in bn.state_dict().items()}
    bn.eval().train()(torch.randn(16, 4) + 3)
    changed = {k for k, v in bn.state_dict().items() if not torch.equal(v, before[k])}
    assert (
        {k for k in _key(q) if k != "output"}
        == changed
        == {"running_mean", "running_var", "num_batches_tracked"}
    )
    assert "output" in _key(q)


def test_autocast_key_is_what_torch_returns():
    for i in range(8):
        q = qp.q_autocast_dtype(random.Random(i))
        assert _key(q) == {q["_meta"]["out"]}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = nn.LayerNorm(8)(nn.Linear(8, 8)(torch.randn(2, 8)))
    assert qp._autocast_dtype("torch.nn.LayerNorm(8)")[1] == out.dtype


@pytest.mark.parametrize("i", range(6))
def test_padded_mean_and_momentum_none_against_torch(i):
    q = qp.q_padded_mean(random.Random(i))
    m = q["_meta"]
    T = max(m["lengths"])
    x = torch.zeros(2, T)
    for b, (n, vals) in enumerate(zip(m["lengths"], m["values"], strict=True)):
        x[b, :n] = torch.tensor(vals[:n], dtype=torch.float32)
    assert _key(q) == pytest.approx(float(x.mean()), abs=1e-5)
    q = qp.q_momentum_none(random.Random(i))
    bn = nn.BatchNorm1d(1, momentum=None)
    for mean in q["_meta"]["means"]:
        bn(torch.tensor([[mean - 1.0], [mean + 1.0]]))
    assert _key(q) == pytest.approx(float(bn.running_mean[0]), abs=1e-6)


@pytest.mark.parametrize("i", range(8))
def test_btd_without_transpose_against_torch(i):
    q = qp.q_btd_without_transpose(random.Random(i))
    B, T, D = q["_meta"]["shape"]
    try:
        nn.BatchNorm1d(D)(torch.randn(B, T, D))
        torch_outcome = "runs_wrong"
    except (RuntimeError, ValueError):
        torch_outcome = "raises"
    assert _key(q) == {torch_outcome} and (torch_outcome == "raises") == (T != D)


def test_decay_no_decay_and_zero_init_keys():
    for i in range(4):
        q = qp.q_decay_effective_lr(random.Random(i))
        m = q["_meta"]
        assert _key(q) == pytest.approx((1 - m["lr"] * m["wd"]) ** (-2 * m["k"]), rel=1e-3)
        q = qp.q_no_decay_group(random.Random(i))
        want = {"1.weight", "1.bias", "4.bias", "5.weight"} | (
            {"0.bias"} if q["_meta"]["conv_bias"] else set()
        )
        assert _key(q) == want
        assert _key(qp.q_zero_init_block(random.Random(i))) == {"relu"}
