"""The SyncBatchNorm quiz topic: every key re-derived here another way (torch.nn, explicit data)."""

from __future__ import annotations

import random

import pytest
import torch

import norms.quiz as quiz
from norms.quiz import syncbatchnorm as sq

QUESTIONS = [q for seed in range(6) for q in quiz.questions_for("syncbatchnorm", 10, seed)]


def _key(q):
    a = q["answers"][0]
    assert a["correct"]
    return a["value"] if "value" in a else sum(a["range"]) / 2


def _of(kind):
    qs = [q for q in QUESTIONS if q["_meta"]["kind"] == kind]
    assert qs, kind
    return qs


def test_topic_is_registered_and_varied():
    assert "syncbatchnorm" in quiz.topics()
    assert {q["_meta"]["kind"] for q in QUESTIONS} == {
        "sync_numbers",
        "chan_variance",
        "running_count",
        "local_or_global",
        "eval_communication",
    }


def test_chan_variance_key_is_the_variance_of_explicit_data():
    for q in _of("chan_variance"):
        m = q["_meta"]
        parts = []
        for n, mean, var in zip(m["counts"], m["means"], m["variances"], strict=True):
            # n values with this mean and biased variance: ±sqrt(n var / k) around the mean
            x = torch.zeros(n, dtype=torch.float64)
            if n > 1:
                x[: n // 2 * 2] = torch.tensor([1.0, -1.0] * (n // 2), dtype=torch.float64)
                x = x - x.mean()
                x = x * (var / x.var(correction=0)).sqrt() if var > 0 else x * 0
            parts.append(x + mean)
        truth = torch.cat(parts).var(correction=0).item()
        assert all(n > 1 or v == 0 for n, v in zip(m["counts"], m["variances"], strict=True))
        assert _key(q) == pytest.approx(truth, abs=1e-4)
        wrong = [a for a in q["answers"][1:-1]]
        assert all(not a["correct"] for a in wrong)


def test_running_count_key_matches_torch_batchnorm():
    for q in _of("running_count"):
        m = q["_meta"]
        shape = (sum(m["sizes"]), 3) if m["pixels"] == 1 else (sum(m["sizes"]), 3, 2, 2)
        x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        bn = (
            torch.nn.BatchNorm1d(3, momentum=1.0)
            if m["pixels"] == 1
            else torch.nn.BatchNorm2d(3, momentum=1.0)
        )
        bn.double()(x)
        dims = (0,) if m["pixels"] == 1 else (0, 2, 3)
        factor = (bn.running_var / x.var(dims, correction=0)).mean().item()
        assert _key(q) == pytest.approx(factor, abs=5e-4)


def test_sync_numbers_key_is_two_per_channel():
    # test_syncbatchnorm.test_communication_per_step measures 2C per process in both directions
    for q in _of("sync_numbers"):
        assert _key(q) == 2 * q["_meta"]["channels"]


def test_choice_questions_have_one_key_and_feedback():
    for q in _of("local_or_global") + _of("eval_communication"):
        correct = [a for a in q["answers"] if a["correct"]]
        assert len(correct) == 1 and all(a["feedback"] for a in q["answers"])
    gen = random.Random(0)
    q = sq.q_local_or_global(gen)
    assert [a["answer"] for a in q["answers"] if a["correct"]] == [
        "the gradients of γ and β returned by backward"
    ]
