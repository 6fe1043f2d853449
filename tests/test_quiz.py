"""norms.quiz: every answer key is re-derived here from torch.nn (never from norms), every option has
feedback, and the jupyterquiz rendering is deterministic and loads nothing from other hosts."""
import json
import math
import re

import pytest
import torch
from torch import nn

import norms.quiz as quiz

SEEDS = [0, 1, 2]


def _all_questions():
    qs = []
    for topic in quiz.topics():
        for seed in SEEDS:
            qs += quiz.questions_for(topic, 8, seed)
    qs += quiz.bank(seed=0, size=120)
    return qs


QUESTIONS = _all_questions()


def _torch_module(name, args, kwargs=None):
    return getattr(nn, name)(*[list(a) if isinstance(a, tuple) else a for a in args], **(kwargs or {}))


def _group_of_first(module, shape):
    """Mask of input elements sharing element 0's statistic, from torch autograd (training mode):
    y[0] depends on x[j] iff x[j] is in the same normalization group."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
    module = module.double().train()
    module(x).reshape(-1)[0].backward()
    return x.grad != 0


def _reduced_dims(module, shape):
    """Dims d such that element 0 and the element one step along d share a statistic (torch autograd)."""
    mask = _group_of_first(module, shape)
    return tuple(d for d in range(len(shape)) if mask[tuple(1 if k == d else 0 for k in range(len(shape)))])


def _key_of_correct(q):
    return [k for k, a in zip(q["_meta"]["keys"], q["answers"]) if a["correct"]]


def _numeric_key(q):
    return [a for a in q["answers"] if a.get("correct")]


def _accepts(q, value):
    """Would jupyterquiz accept ``value`` as correct? (first matching entry wins, like numeric.js)"""
    for a in q["answers"]:
        if "value" in a and value == a["value"]:
            return a["correct"]
        if "range" in a and a["range"][0] <= value < a["range"][1]:
            return a["correct"]
    return False


# ----------------------------------------------------------------------------
# Format
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("i", range(len(QUESTIONS)))
def test_format(i):
    q = QUESTIONS[i]
    assert q["question"] and q["type"] in ("multiple_choice", "many_choice", "numeric")
    json.dumps(quiz._clean([q]))
    texts = [q["question"]] + [a.get("answer", "") + a.get("feedback", "") for a in q["answers"]]
    for t in texts:
        assert "$" not in t and "](" not in t, t      # jupyterquiz would turn them into math / links
        assert "<" not in re.sub(r"</?code>", "", t), t  # only our <code> tags reach innerHTML
    if q["type"] == "numeric":
        correct = [a for a in q["answers"] if a.get("correct")]
        assert len(correct) == 1
        assert q["answers"][0]["correct"], "the key must come first (numeric.js stops at the first match)"
        assert q["answers"][-1]["type"] == "default" and q["answers"][-1]["feedback"]
        for a in q["answers"][:-1]:
            assert a["type"] in ("value", "range") and a["feedback"]
        # distractor ranges do not swallow the key
        ranges = [a["range"] for a in q["answers"] if "range" in a]
        for (lo1, hi1), (lo2, hi2) in zip(ranges, ranges[1:]):
            assert hi1 <= lo2 or hi2 <= lo1 or (lo1, hi1) == ranges[0]
    else:
        n_correct = sum(a["correct"] for a in q["answers"])
        assert n_correct == 1 if q["type"] == "multiple_choice" else n_correct >= 2
        assert len(q["answers"]) >= 2
        assert len({a["answer"] for a in q["answers"]}) == len(q["answers"])
        for a in q["answers"]:
            assert a["answer"] and a["feedback"], a
            assert a["feedback"].startswith(("Correct", "Yes")) == a["correct"] or q["type"] == "many_choice"


def test_deterministic_and_varied():
    assert quiz.questions_for("batchnorm", 6, seed=3) == quiz.questions_for("batchnorm", 6, seed=3)
    assert quiz.questions_for("batchnorm", 6, seed=3) != quiz.questions_for("batchnorm", 6, seed=4)
    b = quiz.bank(seed=5, size=80)
    assert len(b) == 80 and len({(q["question"], q.get("code")) for q in b}) == 80
    kinds = {q["_meta"]["kind"] for q in b}
    assert {"num_statistics", "reduced_dims", "param_shape", "train_eval", "eps", "batch_one"} <= kinds
    with pytest.raises(ValueError):
        quiz.questions_for("nope")


def test_every_topic_has_questions():
    for topic in ["batchnorm", "layernorm", "rmsnorm", "groupnorm", "instancenorm", "why", "comparison"]:
        assert len(quiz.questions_for(topic, 5)) == 5


def test_concepts_cover_the_issue():
    texts = " ".join(q["question"] for q in QUESTIONS if q["_meta"]["kind"] in ("concept", "invariance",
                                                                                 "keras_momentum",
                                                                                 "biased_unbiased"))
    for needle in ["γ and add β", "transformers", "feature vector x of one token", "Keras", "batch of n"]:
        assert needle in texts, needle


# ----------------------------------------------------------------------------
# Answer keys against torch.nn
# ----------------------------------------------------------------------------

def _by_kind(kind):
    return [q for q in QUESTIONS if q["_meta"]["kind"] == kind]


def test_num_statistics_against_torch():
    qs = _by_kind("num_statistics")
    assert len(qs) > 5
    for q in qs:
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"])
        shape = tuple(m["shape"])
        count = math.prod(shape) // int(_group_of_first(module, shape).sum())
        if m["norm"].startswith("BatchNorm"):
            assert count == module.running_mean.numel()
        assert _accepts(q, count), (q["question"], count)
        for wrong in q["answers"][1:-1]:
            assert not _accepts(q, wrong["value"]) or wrong["value"] == count


def test_reduced_dims_against_torch():
    qs = _by_kind("reduced_dims")
    assert len(qs) > 5
    for q in qs:
        m = q["_meta"]
        shape = tuple(m["shape"])
        reduced = _reduced_dims(_torch_module(m["norm"], m["args"], m["kwargs"]), shape)
        assert tuple(sorted(_key_of_correct(q))) == reduced, q["question"]


def test_param_shape_against_torch():
    for q in _by_kind("param_shape"):
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"])
        assert _key_of_correct(q) == [tuple(module.weight.shape)]


def test_state_dict_against_torch():
    for q in _by_kind("state_dict"):
        m = q["_meta"]
        keys = set(_torch_module(m["norm"], m["args"], m["kwargs"]).state_dict())
        assert set(_key_of_correct(q)) == keys, q["question"]
        assert set(m["keys"]) >= keys


def test_train_eval_against_torch():
    qs = _by_kind("train_eval")
    assert {q["_meta"]["norm"][:5] for q in qs} >= {"Batch", "Layer"}
    for q in qs:
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"])
        shape = tuple(m["shape"])
        module.train()(torch.randn(shape) * 2 + 1)
        x = torch.randn(shape)
        with torch.no_grad():
            differ = not torch.allclose(module.train()(x), module.eval()(x), atol=1e-5)
        assert _key_of_correct(q) == ["differ" if differ else "same"], q["question"]


@pytest.mark.parametrize("kind,attr,channel", [("running_var", "running_var", 0), ("running_mean", "running_mean", 1)])
def test_running_stats_against_torch(kind, attr, channel):
    qs = _by_kind(kind)
    assert qs
    for q in qs:
        m = q["_meta"]
        bn = nn.BatchNorm1d(2, momentum=m["momentum"]).train()
        bn(torch.tensor(m["rows"], dtype=torch.float32))
        value = float(getattr(bn, attr)[channel])
        assert _accepts(q, value) and _accepts(q, round(value, 3)), (q["question"], value)
        assert str(m["rows"]).replace(" ", "") in q["code"].replace(" ", "")


def test_eps_against_torch():
    qs = _by_kind("eps")
    assert {q["_meta"]["norm"] for q in qs} >= {"BatchNorm1d", "LayerNorm", "RMSNorm"}
    for q in qs:
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"]).double().train()
        eps = m["kwargs"]["eps"]
        shape = tuple(m["shape"])
        x = torch.randn(shape, dtype=torch.float64) * 0.05
        with torch.no_grad():
            y = module(x)
        dims = _reduced_dims(_torch_module(m["norm"], m["args"], m["kwargs"]), shape)
        center = m["norm"] != "RMSNorm"
        mean = x.mean(dims, keepdim=True) if center else 0.0
        var = ((x - mean) ** 2).mean(dims, keepdim=True)
        formulas = {"inside": (x - mean) / torch.sqrt(var + eps), "outside": (x - mean) / (torch.sqrt(var) + eps),
                    "after": (x - mean) / torch.sqrt(var) + eps, "numerator": (x - mean + eps) / torch.sqrt(var)}
        match = [k for k, f in formulas.items() if torch.allclose(y, f, atol=1e-9)]
        assert _key_of_correct(q) == match == ["inside"]


def test_batch_one_against_torch():
    qs = _by_kind("batch_one")
    seen = set()
    for q in qs:
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"])
        shape = tuple(m["shape"])
        if m["mode"] == "eval":
            module.train()(torch.randn((4,) + shape[1:]))
            module.eval()
        try:
            module(torch.randn(shape))
            outcome = "works"
        except (ValueError, RuntimeError):
            outcome = "raises"
        seen.add(outcome)
        assert _key_of_correct(q) == [outcome], q["question"]
    assert seen == {"works", "raises"}


def test_which_layer_against_torch():
    for q in _by_kind("which_layer"):
        shape = tuple(q["_meta"]["shape"])
        for (name, args), a in zip(q["_meta"]["keys"], q["answers"]):
            dims = _reduced_dims(_torch_module(name, args), shape)
            assert (dims == tuple(q["_meta"]["dims"])) == a["correct"]


def test_batch_independence_against_torch():
    for q in _by_kind("batch_independent"):
        shape = tuple(q["_meta"]["shape"])
        for (name, args), a in zip(q["_meta"]["keys"], q["answers"]):
            mask = _group_of_first(_torch_module(name, args), shape)
            assert (not mask[1:].any()) == a["correct"]


def test_groupnorm_special_against_torch():
    qs = _by_kind("groupnorm_special")
    assert qs
    for q in qs:
        m = q["_meta"]
        x = torch.randn(m["shape"])
        with torch.no_grad():
            y = nn.GroupNorm(m["G"], m["C"])(x)
            for (name, args), a in zip(m["keys"], q["answers"]):
                same = torch.allclose(y, _torch_module(name, args)(x), atol=1e-5)
                assert same == a["correct"], (q["question"], name)


def test_invariance_against_torch():
    qs = _by_kind("invariance")
    assert qs
    for q in qs:
        m = q["_meta"]
        x = torch.randn(5, m["D"], dtype=torch.float64) * 2 + 0.5
        layers = {"LayerNorm": nn.LayerNorm(m["D"], eps=0.0).double(),
                  "RMSNorm": nn.RMSNorm(m["D"], eps=0.0).double()}
        moves = {"shift": lambda t: t + m["c"], "scale": lambda t: t * m["a"]}
        with torch.no_grad():
            for (norm, move), a in zip(m["keys"], q["answers"]):
                f = layers[norm]
                assert torch.allclose(f(x), f(moves[move](x)), atol=1e-9) == a["correct"]
        # LayerNorm: both invariances; RMSNorm: re-scaling only
        assert sorted(_key_of_correct(q)) == [("LayerNorm", "scale"), ("LayerNorm", "shift"), ("RMSNorm", "scale")]


def test_keras_momentum_against_torch():
    qs = _by_kind("keras_momentum")
    assert qs
    for q in qs:
        k = q["_meta"]["keras"]
        x = torch.randn(6, 3, dtype=torch.float64) + 1
        old = torch.randn(3, dtype=torch.float64)
        keras = k * old + (1 - k) * x.mean(0)
        for mom, a in zip(q["_meta"]["keys"], q["answers"]):
            bn = nn.BatchNorm1d(3, momentum=mom).double().train()
            bn.running_mean.copy_(old)
            bn(x)
            assert torch.allclose(bn.running_mean, keras, atol=1e-9) == a["correct"], (k, mom)


def test_biased_unbiased_against_torch():
    for q in _by_kind("biased_unbiased"):
        n = q["_meta"]["n"]
        x = torch.randn(n, 1, dtype=torch.float64) * 3
        bn = nn.BatchNorm1d(1, momentum=1.0, affine=False).double().train()
        y = bn(x)
        nb = torch.allclose(y, (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + bn.eps))
        su = torch.allclose(bn.running_var, x.var(unbiased=True).reshape(1))
        assert _key_of_correct(q) == [(nb, su)] == [(True, True)]


def test_every_kind_is_checked_against_torch():
    checked = {"num_statistics", "reduced_dims", "param_shape", "state_dict", "train_eval", "running_var",
               "running_mean", "eps", "batch_one", "which_layer", "batch_independent", "groupnorm_special",
               "invariance", "keras_momentum", "biased_unbiased", "concept"}
    assert {q["_meta"]["kind"] for q in QUESTIONS} <= checked


# ----------------------------------------------------------------------------
# Rendering through jupyterquiz
# ----------------------------------------------------------------------------

def _questions_in(js):
    m = re.match(r"var questions([A-Za-z0-9_]+)=(.*?);\n\nif \(typeof Question", js, re.S)
    assert m, js[:200]
    return m.group(1), json.loads(m.group(2))


def test_render_is_deterministic_and_self_contained(monkeypatch):
    qs = quiz.questions_for("batchnorm", 4, seed=1)
    monkeypatch.setattr(quiz, "_shown", {})
    a = quiz.render(qs, key="k")
    b = quiz.render(qs, key="k")
    assert a["div_id"] != b["div_id"]           # the same quiz twice on a page gets two ids
    monkeypatch.setattr(quiz, "_shown", {})
    assert quiz.render(qs, key="k") == a         # ... but a fresh run reproduces the output exactly
    assert re.fullmatch(r"[A-Za-z]+", a["div_id"])
    assert f'<div id="{a["div_id"]}"' in a["html"] and a["html"].endswith("</div>")
    div_id, embedded = _questions_in(a["javascript"])
    assert div_id == a["div_id"]
    assert embedded == quiz._clean(qs)           # passed inline, without the _meta
    for text in (a["html"], a["javascript"]):
        assert "://" not in text and "cdn" not in text.lower() and "@import" not in text
    assert "force load MathJax" not in a["javascript"]
    assert "MathJax.startup.promise" in a["javascript"]


def test_show_displays_html_and_javascript_with_the_questions(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    quiz.show("layernorm", n=3, seed=2)
    kinds = [type(o).__name__ for o in shown]
    assert kinds == ["HTML", "Javascript"]
    js = shown[1].data
    for q in quiz.questions_for("layernorm", 3, seed=2):
        assert json.dumps(q["question"])[1:-1] in js
    assert "jq-multiple-choice-bg" in shown[0].data


def test_self_quiz_embeds_bank_and_picks_subset_in_browser(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    quiz.self_quiz(bank_size=30, num=4, seed=1)
    html, js = shown[0].data, shown[1].data
    assert 'data-numquestions="4"' in html
    _, embedded = _questions_in(js)
    assert len(embedded) == 30 and all("_meta" not in q for q in embedded)
    assert all(a.get("feedback") for q in embedded for a in q["answers"])
