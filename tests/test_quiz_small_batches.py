"""The small-batches and normalizing-weights quiz topics: every key re-derived here from the
formulas (torch ops, no norms layer)."""

from __future__ import annotations

import math

import pytest
import torch

import norms.quiz as quiz

QUESTIONS = [
    q for topic in ("small_batches", "weights") for seed in range(6)
    for q in quiz.questions_for(topic, 10, seed)
]  # fmt: skip


def _key(q):
    a = q["answers"][0]
    assert a["correct"]
    return a["value"] if "value" in a else sum(a["range"]) / 2


def _of(kind):
    qs = [q for q in QUESTIONS if q["_meta"]["kind"] == kind]
    assert qs, kind
    return qs


def test_topics_are_registered_with_their_chapters():
    assert quiz.CHAPTER_OF["small_batches"] == "small-batches"
    assert quiz.CHAPTER_OF["weights"] == "normalizing-weights"
    assert {q["_meta"]["kind"] for q in QUESTIONS} == {
        "ghost_chunks", "renorm_r", "frn_value", "weight_norm_g", "spectral_sigma", "agc_factor",
    }  # fmt: skip


def test_ghost_chunks():
    for q in _of("ghost_chunks"):
        m = q["_meta"]
        assert _key(q) == math.ceil(m["n"] / m["vbs"])


def test_renorm_r():
    for q in _of("renorm_r"):
        m = q["_meta"]
        r = math.sqrt(m["batch_var"] / m["running_var"])
        assert _key(q) == pytest.approx(min(max(r, 1 / m["r_max"]), m["r_max"]), abs=1e-6)


def test_frn_value():
    for q in _of("frn_value"):
        m = q["_meta"]
        x = torch.tensor([m["a"], -m["a"], m["b"], -m["b"]], dtype=torch.float64)
        y = torch.clamp(x / x.pow(2).mean().sqrt(), min=m["tau"])
        assert _key(q) == pytest.approx(float(y[1]), abs=1e-4)


def test_weight_norm_g():
    for q in _of("weight_norm_g"):
        assert _key(q) == pytest.approx(math.hypot(*q["_meta"]["w"]), abs=1e-9)


def test_spectral_sigma():
    for q in _of("spectral_sigma"):
        s1, s2 = q["_meta"]["s"]
        w = torch.tensor([[s1, 0.0], [0.0, s2]], dtype=torch.float64)
        assert _key(q) == pytest.approx(s2 / float(torch.linalg.matrix_norm(w, 2)), abs=1e-4)


def test_agc_factor():
    for q in _of("agc_factor"):
        m = q["_meta"]
        cap = m["clip"] * max(m["w_norm"], 1e-3)
        assert _key(q) == pytest.approx(min(m["g_norm"], cap), abs=1e-6)
