"""norms.quiz: every answer key is re-derived here from torch.nn (never from norms), every option
has
feedback, and the jupyterquiz rendering is deterministic and loads nothing from other hosts."""

import functools
import json
import math
import random
import re

import pytest
import torch
from torch import nn

import norms.quiz as quiz
from norms.quiz import chapters, computed, concepts, rendering, running, why

from .test_quiz_practice import SELECT_ALL_KINDS as PRACTICE_SELECT_ALL_KINDS

SEEDS = [0, 1, 2]


def _all_questions():
    qs = []
    for topic in quiz.topics():
        for seed in SEEDS:
            qs += quiz.questions_for(topic, 8, seed)
    qs += quiz.bank(seed=0, size=120)
    return qs


QUESTIONS = _all_questions()


@pytest.fixture(autouse=True)
def _seeded():
    """The torch.nn re-derivations below draw their own random inputs: the same ones on every
    run."""
    torch.manual_seed(0)


def _torch_module(name, args, kwargs=None):
    return getattr(nn, name)(
        *[list(a) if isinstance(a, tuple) else a for a in args], **(kwargs or {})
    )


def _group_of_first(module, shape):
    """Mask of input elements sharing element 0's statistic, from torch autograd (training mode):
    y[0] depends on x[j] iff x[j] is in the same normalization group."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
    module = module.double().train()
    module(x).reshape(-1)[0].backward()
    return x.grad != 0


def _reduced_dims(module, shape):
    """Dims d such that element 0 and the element one step along d share a statistic (torch
    autograd)."""
    mask = _group_of_first(module, shape)
    return tuple(
        d for d in range(len(shape)) if mask[tuple(1 if k == d else 0 for k in range(len(shape)))]
    )


def _key_of_correct(q):
    return [k for k, a in zip(q["_meta"]["keys"], q["answers"], strict=True) if a["correct"]]


def _numeric_key(q):
    return [a for a in q["answers"] if a.get("correct")]


def _accepts(q, value):
    """Would jupyterquiz accept ``value`` as correct? (first matching entry wins, like
    numeric.js)"""
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
    json.dumps(rendering._clean([q]))
    texts = [q["question"]] + [a.get("answer", "") + a.get("feedback", "") for a in q["answers"]]
    for t in texts:
        assert "$" not in t and "](" not in t, t  # jupyterquiz would turn them into math / links
        assert "<" not in re.sub(r"</?code>", "", t), t  # only our <code> tags reach innerHTML
    if q["type"] == "numeric":
        correct = [a for a in q["answers"] if a.get("correct")]
        assert len(correct) == 1
        assert q["answers"][0]["correct"], (
            "the key must come first (numeric.js stops at the first match)"
        )
        assert q["answers"][-1]["type"] == "default" and q["answers"][-1]["feedback"]
        for a in q["answers"][:-1]:
            assert a["type"] in ("value", "range") and a["feedback"]
        # distractor ranges do not swallow the key
        ranges = [a["range"] for a in q["answers"] if "range" in a]
        for (lo1, hi1), (lo2, hi2) in zip(ranges, ranges[1:], strict=False):
            assert hi1 <= lo2 or hi2 <= lo1 or (lo1, hi1) == ranges[0]
    else:
        n_correct = sum(a["correct"] for a in q["answers"])
        # select-all questions are many_choice whatever the number of right answers (even one)
        assert n_correct == 1 if q["type"] == "multiple_choice" else n_correct >= 1
        assert (q["type"] == "many_choice") == q["question"].endswith(quiz.SELECT_ALL), q[
            "question"
        ]
        assert len(q["answers"]) >= 3
        assert len({a["answer"] for a in q["answers"]}) == len(q["answers"])
        for a in q["answers"]:
            assert a["answer"] and a["feedback"], a
            assert (
                a["feedback"].startswith(("Correct", "Yes")) == a["correct"]
                or q["type"] == "many_choice"
            )


def test_deterministic_and_varied():
    assert quiz.questions_for("batchnorm", 6, seed=3) == quiz.questions_for("batchnorm", 6, seed=3)
    assert quiz.questions_for("batchnorm", 6, seed=3) != quiz.questions_for("batchnorm", 6, seed=4)
    b = quiz.bank(seed=5, size=80)
    assert len(b) == 80 and len({(q["question"], q.get("code")) for q in b}) == 80
    kinds = {q["_meta"]["kind"] for q in b}
    assert {
        "num_statistics",
        "reduced_dims",
        "param_shape",
        "train_eval",
        "eps",
        "batch_one",
    } <= kinds
    with pytest.raises(ValueError):
        quiz.questions_for("nope")


def test_every_topic_has_questions():
    for topic in [
        "batchnorm",
        "layernorm",
        "rmsnorm",
        "groupnorm",
        "instancenorm",
        "why",
        "comparison",
    ]:
        assert len(quiz.questions_for(topic, 5)) == 5


# Maths written the ASCII way (W_(t+1), h_(l-1), x^(-2k)): a reader sees the underscore
# and brackets. Quiz texts are plain text (no MathJax in Colab), so they use Unicode
# sub- and superscripts (Wₜ₊₁, x⁻²ᵏ).
ASCII_MATHS = re.compile(r"[A-Za-zͰ-Ͽ]_\(|\^\(|\b[A-Za-z]_[a-z]\b")


def test_quiz_maths_reads_as_maths():
    texts = []
    for topic in quiz.topics():
        for seed in range(2):
            for q in quiz.questions_for(topic, 4, seed):
                texts.append(re.sub(r"<code>.*?</code>", "", q["question"]))
                for a in q["answers"]:
                    texts.append(re.sub(r"<code>.*?</code>", "", a.get("answer", "")))
                    texts.append(re.sub(r"<code>.*?</code>", "", a.get("feedback", "")))
    bad = sorted({m.string for t in texts if (m := ASCII_MATHS.search(t))})
    assert not bad, f"quiz texts with ASCII maths: {bad[:5]}"


def test_concepts_cover_the_issue():
    texts = " ".join(
        q["question"]
        for q in QUESTIONS
        if q["_meta"]["kind"] in ("concept", "invariance", "keras_momentum", "biased_unbiased")
    )
    for needle in [
        "γ and add β",
        "transformers",
        "feature vector x of one token",
        "Keras",
        "shape (n, ",
    ]:
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


@pytest.mark.parametrize(
    "kind,attr,channel", [("running_var", "running_var", 0), ("running_mean", "running_mean", 1)]
)
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
        formulas = {
            "inside": (x - mean) / torch.sqrt(var + eps),
            "outside": (x - mean) / (torch.sqrt(var) + eps),
            "after": (x - mean) / torch.sqrt(var) + eps,
            "numerator": (x - mean + eps) / torch.sqrt(var),
        }
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
        for (name, args), a in zip(q["_meta"]["keys"], q["answers"], strict=True):
            dims = _reduced_dims(_torch_module(name, args), shape)
            assert (dims == tuple(q["_meta"]["dims"])) == a["correct"]


def test_batch_independence_against_torch():
    for q in _by_kind("batch_independent"):
        shape = tuple(q["_meta"]["shape"])
        for (name, args), a in zip(q["_meta"]["keys"], q["answers"], strict=True):
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
            for (name, args), a in zip(m["keys"], q["answers"], strict=True):
                same = torch.allclose(y, _torch_module(name, args)(x), atol=1e-5)
                assert same == a["correct"], (q["question"], name)


def test_invariance_against_torch():
    qs = _by_kind("invariance")
    assert qs
    for q in qs:
        m = q["_meta"]
        x = torch.randn(5, m["D"], dtype=torch.float64) * 2 + 0.5
        layers = {
            "LayerNorm": nn.LayerNorm(m["D"], eps=0.0).double(),
            "RMSNorm": nn.RMSNorm(m["D"], eps=0.0).double(),
        }
        moves = {"shift": lambda t, m=m: t + m["c"], "scale": lambda t, m=m: t * m["a"]}
        with torch.no_grad():
            for (norm, move), a in zip(m["keys"], q["answers"], strict=True):
                f = layers[norm]
                assert torch.allclose(f(x), f(moves[move](x)), atol=1e-9) == a["correct"]
        # LayerNorm: both invariances; RMSNorm: re-scaling only
        assert sorted(_key_of_correct(q)) == [
            ("LayerNorm", "scale"),
            ("LayerNorm", "shift"),
            ("RMSNorm", "scale"),
        ]


def test_keras_momentum_against_torch():
    qs = _by_kind("keras_momentum")
    assert qs
    for q in qs:
        k = q["_meta"]["keras"]
        x = torch.randn(6, 3, dtype=torch.float64) + 1
        old = torch.randn(3, dtype=torch.float64)
        keras = k * old + (1 - k) * x.mean(0)
        for mom, a in zip(q["_meta"]["keys"], q["answers"], strict=True):
            bn = nn.BatchNorm1d(3, momentum=mom).double().train()
            bn.running_mean.copy_(old)
            bn(x)
            assert torch.allclose(bn.running_mean, keras, atol=1e-9) == a["correct"], (k, mom)


def _biased_unbiased_questions():
    return _by_kind("biased_unbiased") + [
        running.q_biased_unbiased(random.Random(i)) for i in range(12)
    ]


def test_biased_unbiased_against_torch():
    """The key, and the factor n/(n−1) it states, come out of torch.nn.BatchNorm1d on an (n, C)
    input."""
    ns = set()
    for q in _biased_unbiased_questions():
        n, C = q["_meta"]["n"], q["_meta"]["C"]
        ns.add(n)
        x = torch.randn(n, C, dtype=torch.float64) * 3
        bn = nn.BatchNorm1d(C, momentum=1.0, affine=False).double().train()
        y = bn(x)
        vb, vu = x.var(0, unbiased=False), x.var(0, unbiased=True)
        nb = torch.allclose(y, (x - x.mean(0)) / torch.sqrt(vb + bn.eps))
        su = torch.allclose(bn.running_var, vu)
        assert _key_of_correct(q) == [(nb, su)] == [(True, True)]
        ratio = (bn.running_var / vb).mean().item()  # n/(n−1), measured
        key = next(a for a in q["answers"] if a["correct"])
        assert f"{ratio:.4g} times" in key["answer"] and f"{ratio:.4g} times" in key["feedback"], (
            key
        )
        # unambiguous: BatchNorm1d on (n, C), and n is stated
        assert (
            f"BatchNorm1d({C})</code>" in q["question"]
            and f"shape (n, {C}) with n = {n}" in q["question"]
        )
    assert ns == {2, 3, 4, 5}
    by_n = {}
    for q in _biased_unbiased_questions():
        by_n.setdefault(q["_meta"]["n"], set()).add(tuple(a["answer"] for a in q["answers"]))
    # the options themselves depend on n (not only the question)
    assert len({opts for s in by_n.values() for opts in s}) >= len(by_n)
    assert all(not (by_n[a] & by_n[b]) for a in by_n for b in by_n if a != b)


def test_every_kind_is_checked_against_torch():
    checked = {
        "num_statistics",
        "reduced_dims",
        "param_shape",
        "state_dict",
        "train_eval",
        "running_var",
        "running_mean",
        "eps",
        "batch_one",
        "which_layer",
        "batch_independent",
        "groupnorm_special",
        "invariance",
        "keras_momentum",
        "biased_unbiased",
        "concept",
        "relu_depth",
        "saturation",
        "scale_invariance",
        "grad_scale",
        "bias_before_norm",
        "weight_norm_growth",
        "bn_fold",
        "ln_accepts",
        "rms_value",
        "group_members",
        "instance_contrast",
    }
    # the transformer chapter's kinds are checked against torch.nn in tests/test_quiz_transformer.py
    checked |= {"ln_stats_btd", "gamma_shape", "prenorm_position", "final_norm", "rms_saves"}
    # checked in tests/test_quiz_syncbatchnorm.py
    checked |= {
        "sync_numbers",
        "chan_variance",
        "running_count",
        "local_or_global",
        "eval_communication",
    }
    from .test_quiz_practice import CHECKED_KINDS  # the training and pitfalls topics, checked there

    checked |= CHECKED_KINDS
    checked |= {
        "perfect_bytes",
        "intensity",
        "passes",
        "backward_sweeps",
        "variance_formula",
    }  # test_quiz_speed.py
    from .test_lab_modern import QUIZ_KINDS  # norms.quiz.dyt, checked against its formulas there

    checked |= QUIZ_KINDS
    checked |= {
        "ghost_chunks",
        "renorm_r",
        "frn_value",
        "weight_norm_g",
        "spectral_sigma",
        "agc_factor",
    }  # tests/test_quiz_small_batches.py
    assert {q["_meta"]["kind"] for q in QUESTIONS} <= checked


def _texts(q):
    return " ".join(
        [q["question"]] + [a.get("answer", "") + " " + a["feedback"] for a in q["answers"]]
    )


def _eps_questions():
    direct = [
        running.q_eps(random.Random(i), [name])
        for i in range(3)
        for name in ("BatchNorm1d", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm1d")
    ]
    return _by_kind("eps") + direct


def test_eps_wording_follows_the_statistic():
    """RMSNorm divides by the root mean square: no 'variance' anywhere in its question; the
    others' key talks
    about the variance. Which layers centre is decided by torch.nn: shifting the input changes
    RMSNorm's output."""
    seen = set()
    for q in _eps_questions():
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"]).double()
        x = torch.randn(m["shape"], dtype=torch.float64)
        with torch.no_grad():
            centres = torch.allclose(module(x), module(x + 3.0), atol=1e-6)
        key_fb = next(a["feedback"] for a in q["answers"] if a["correct"])
        seen.add(centres)
        if centres:
            assert "variance" in key_fb, key_fb
        else:
            assert "varian" not in _texts(q), _texts(q)
            assert "mean square" in key_fb and "√ε" in key_fb, key_fb
    assert seen == {True, False}


def test_eps_question_mentions_gamma_and_beta_only_when_the_module_has_them():
    seen = set()
    for q in _eps_questions():
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"])
        has_w, has_b = module.weight is not None, getattr(module, "bias", None) is not None
        seen.add((m["norm"], has_w))
        assert ("γ" in q["question"]) == has_w, q["question"]
        assert ("β" in q["question"]) == has_b, q["question"]
    assert (
        ("InstanceNorm1d", False) in seen
        and ("RMSNorm", True) in seen
        and ("LayerNorm", True) in seen
    )


def _state_dict_questions():
    direct = [
        computed.q_state_dict(random.Random(i), [name])
        for i in range(6)
        for name in ("BatchNorm1d", "BatchNorm2d", "InstanceNorm1d", "InstanceNorm2d")
    ]
    return _by_kind("state_dict") + direct


def test_num_batches_tracked_feedback_against_torch():
    """What num_batches_tracked does, found by running torch.nn with momentum=None: BatchNorm
    counts the
    batches and keeps the cumulative average; InstanceNorm leaves the counter at 0 and the running
    stats alone."""
    kinds = set()
    for q in _state_dict_questions():
        m = q["_meta"]
        if (
            "num_batches_tracked"
            not in _torch_module(m["norm"], m["args"], m["kwargs"]).state_dict()
        ):
            continue
        module = (
            _torch_module(m["norm"], m["args"], dict(m["kwargs"], momentum=None)).double().train()
        )
        shape = tuple(m["shape"])
        dims = (0,) + tuple(range(2, len(shape)))
        xs = [torch.randn(shape, dtype=torch.float64) * 2 + 1 for _ in range(3)]
        with torch.no_grad():
            for x in xs:
                module(x)
        cumulative = torch.allclose(
            module.running_mean, torch.stack([x.mean(dims) for x in xs]).mean(0)
        )
        counter = int(module.num_batches_tracked)
        frozen = torch.equal(module.running_mean, torch.zeros_like(module.running_mean))
        fb = q["answers"][m["keys"].index("num_batches_tracked")]["feedback"]
        kinds.add((m["norm"][:5], cumulative, counter, frozen))
        assert ("cumulative average" in fb) == cumulative, fb
        assert ("never increments" in fb) == (counter == 0), fb
        assert ("not updated at all" in fb) == frozen, fb
        # with the default momentum the counter plays no part: the update is the plain exponential
        # average
        default = _torch_module(m["norm"], m["args"], m["kwargs"]).double().train()
        ema = torch.zeros_like(default.running_mean)
        with torch.no_grad():
            for x in xs:
                default(x)
                ema = (1 - default.momentum) * ema + default.momentum * x.mean(dims)
        only_counted = cumulative and torch.allclose(default.running_mean, ema)
        assert (
            f"default momentum ({default.momentum:g}) it is only counted" in fb
        ) == only_counted, fb
        if only_counted:
            assert "used for the average only when momentum=None" in fb, fb
    assert kinds == {("Batch", True, 3, False), ("Insta", False, 0, True)}


def test_keras_feedback_uses_the_asked_momentum():
    qs = _by_kind("keras_momentum") + [
        running.q_keras_momentum(random.Random(i)) for i in range(16)
    ]
    asked = set()
    for q in qs:
        k = q["_meta"]["keras"]
        asked.add(k)
        x = torch.randn(6, 3, dtype=torch.float64)
        right = []
        for mom in q["_meta"]["keys"]:
            bn = nn.BatchNorm1d(3, momentum=mom).double().train()
            bn(x)
            if torch.allclose(bn.running_mean, (1 - k) * x.mean(0)):
                right.append(mom)
        assert len(right) == 1
        for mom, a in zip(q["_meta"]["keys"], q["answers"], strict=True):
            if a["correct"]:
                continue
            assert f"{k}" in a["feedback"] and f"{right[0]:g}" in a["feedback"], (
                k,
                mom,
                a["feedback"],
            )
            if "0.99" in a["feedback"].replace(f"{k}", "") and k != 0.99:
                assert "default" in a["feedback"], a["feedback"]  # 0.99 only as Keras's default
        if k != 0.99:
            assert "0.99 corresponds" not in _texts(q)
    assert len(asked) >= 3


_NOT_YET_TAUGHT = {
    "keras_momentum",
    "biased_unbiased",
    "running_var",
    "running_mean",
    "state_dict",
    "bn_fold",
}


def test_why_topic_only_asks_what_its_chapter_teaches():
    kinds = set()
    for seed in range(6):
        for q in quiz.questions_for("why", 12, seed):
            kind = q["_meta"]["kind"]
            kinds.add(kind if kind != "concept" else "concept:" + q["_meta"]["concept"])
            text = _texts(q)
            for word in ("running", "momentum", "Keras", "unbiased", "num_batches"):
                assert word not in text, (word, q["question"])
    assert not kinds & _NOT_YET_TAUGHT
    # γ, β and ε are taught in the BatchNorm chapter, not in why-normalize
    assert not kinds & {
        "concept:running_stats_why",
        "concept:small_batches",
        "concept:layernorm_transformers",
        "concept:affine",
        "concept:eps_purpose",
    }
    # computed questions on depth, saturation and scale invariance, plus the covariate-shift debate
    assert {
        "relu_depth",
        "saturation",
        "scale_invariance",
        "grad_scale",
        "weight_norm_growth",
        "bias_before_norm",
        "concept:covariate_shift",
    } <= kinds


@pytest.mark.parametrize(
    "topic,kinds",
    [
        ("batchnorm", {"bn_fold"}),
        ("layernorm", {"ln_accepts"}),
        ("rmsnorm", {"rms_value", "invariance"}),
        ("groupnorm", {"group_members", "groupnorm_special"}),
        ("instancenorm", {"instance_contrast"}),
    ],
)
def test_chapter_topics_have_their_own_questions(topic, kinds):
    got = {q["_meta"]["kind"] for seed in range(3) for q in quiz.questions_for(topic, 12, seed)}
    assert kinds <= got
    for other in set(quiz.topics()) - {topic, "comparison"}:
        others = _kinds_drawn(other)
        assert not (kinds - {"invariance", "groupnorm_special"}) & others, other


@functools.cache
def _kinds_drawn(topic) -> frozenset:
    """The kinds of twelve questions of ``topic`` drawn with seed 0 (drawn once for the five
    chapters' tests above: a draw is deterministic)."""
    return frozenset(q["_meta"]["kind"] for q in quiz.questions_for(topic, 12, 0))


def test_relu_depth_against_torch():
    qs = _by_kind("relu_depth")
    assert qs
    g = torch.Generator().manual_seed(123)
    for q in qs:
        c = q["_meta"]["c"]
        h, stds = torch.randn(1024, 256, generator=g, dtype=torch.float64), []
        for _ in range(17):
            z = nn.functional.linear(
                h, torch.randn(256, 256, generator=g, dtype=torch.float64) * c / 16
            )
            stds.append(z.std().item())
            h = torch.relu(z)
        rate = (stds[-1] / stds[0]) ** (1 / 16)
        values = q["_meta"]["keys"]
        closest = min(values, key=lambda v: abs(v - rate))
        assert _key_of_correct(q) == [closest] and abs(closest - rate) < 0.1 * closest, (c, rate)
        assert math.isclose(closest, math.sqrt(c * c / 2))  # eq-why-relu


def test_saturation_against_torch():
    qs = _by_kind("saturation")
    assert qs
    for q in qs:
        m = q["_meta"]
        z = (
            torch.randn(m["N"], m["C"], generator=torch.Generator().manual_seed(m["seed"])) * m["s"]
            + m["mu"]
        )
        with torch.no_grad():
            zn = nn.BatchNorm1d(m["C"]).train()(z)
        before = (z.tanh().abs() > 0.99).float().mean().item()
        after = (zn.tanh().abs() > 0.99).float().mean().item()
        [(b, a)] = _key_of_correct(q)
        assert math.isclose(b, before, abs_tol=1e-4) and math.isclose(a, after, abs_tol=1e-4)
        assert f"{after:.1%}" in next(x["answer"] for x in q["answers"] if x["correct"])
        assert before > 0.3 and after < 0.02
        assert f"manual_seed({m['seed']})" in q["code"]


def test_scale_invariance_against_torch():
    qs = _by_kind("scale_invariance")
    assert qs
    for q in qs:
        m = q["_meta"]
        x = torch.randn(32, m["n_in"], dtype=torch.float64)
        W = torch.randn(m["width"], m["n_in"], dtype=torch.float64)
        rows = torch.rand(m["width"], 1, dtype=torch.float64) * 3 + 0.5
        layers = {
            "BatchNorm1d": nn.BatchNorm1d(m["width"], eps=1e-30).double(),
            "LayerNorm": nn.LayerNorm(m["width"], eps=0.0).double(),
            "none": torch.relu,
        }
        with torch.no_grad():
            for (norm, how), a in zip(m["keys"], q["answers"], strict=True):
                f = layers[norm]
                scaled = W * m["a"] if how == "all" else W * rows
                assert torch.allclose(f(x @ W.T), f(x @ scaled.T), atol=1e-9) == a["correct"], (
                    norm,
                    how,
                )
        assert sorted(_key_of_correct(q)) == [
            ("BatchNorm1d", "all"),
            ("BatchNorm1d", "rows"),
            ("LayerNorm", "all"),
        ]


def test_grad_scale_against_torch():
    qs = _by_kind("grad_scale")
    assert qs
    for q in qs:
        m = q["_meta"]
        norm = getattr(nn, m["norm"])(4, eps=1e-30).double()
        x, W, t = (
            torch.randn(16, 8, dtype=torch.float64),
            torch.randn(4, 8, dtype=torch.float64),
            torch.randn(16, 4),
        )
        grads = []
        for w in (W, W * m["a"]):
            w = w.clone().requires_grad_()
            ((norm(x @ w.T) - t) ** 2).mean().backward()
            grads.append(w.grad)
        factor = (grads[1].norm() / grads[0].norm()).item()
        assert _accepts(q, factor) and _accepts(q, round(factor, 3)), (m, factor)
        assert not _accepts(q, m["a"])


def test_bias_before_norm_against_torch():
    qs = _by_kind("bias_before_norm")
    assert qs
    for q in qs:
        m = q["_meta"]
        W = torch.randn(m["width"], m["n_in"], dtype=torch.float64)
        x = torch.randn(16, m["n_in"], dtype=torch.float64)
        biases = {
            "bn": torch.rand(m["width"], dtype=torch.float64) * 6 - 3,
            "ln": torch.rand(m["width"], dtype=torch.float64) * 6 - 3,
            "ln_common": torch.full((m["width"],), 1.5, dtype=torch.float64),
        }
        layers = {
            "bn": nn.BatchNorm1d(m["width"]).double(),
            "ln": nn.LayerNorm(m["width"]).double(),
        }
        with torch.no_grad():
            same = {
                key: torch.allclose(
                    layers[key[:2]](x @ W.T + b), layers[key[:2]](x @ W.T), atol=1e-9
                )
                for key, b in biases.items()
            }
        for key, a in zip(m["keys"], q["answers"], strict=True):
            assert same[key] == a["correct"], key
        assert same == {"bn": True, "ln": False, "ln_common": True}


def test_weight_norm_growth_against_torch():
    qs = _by_kind("weight_norm_growth")
    assert qs
    for q in qs:
        m = q["_meta"]
        norm = getattr(nn, m["norm"])(4, eps=1e-30).double()
        W = torch.randn(4, 8, dtype=torch.float64)
        growth = []
        for _ in range(5):
            w = W.clone().requires_grad_()
            (
                (norm(torch.randn(32, 8, dtype=torch.float64) @ w.T) - torch.randn(32, 4)) ** 2
            ).mean().backward()
            W = W - m["lr"] * w.grad
            growth.append(W.norm().item() - w.norm().item())
        outcome = (
            "grows"
            if all(d > 0 for d in growth)
            else "shrinks"
            if all(d < 0 for d in growth)
            else "depends"
        )
        assert _key_of_correct(q) == [outcome] == ["grows"]


def test_bn_fold_against_torch():
    qs = _by_kind("bn_fold")
    assert {q["_meta"]["what"] for q in qs} == {"bias", "weight"}
    for q in qs:
        m, case = q["_meta"], q["_meta"]["case"]
        lin, bn = nn.Linear(3, 2).double().eval(), nn.BatchNorm1d(2).double().eval()
        with torch.no_grad():
            for tensor, values in (
                (lin.weight, case["W"]),
                (lin.bias, case["b"]),
                (bn.running_mean, case["running_mean"]),
                (bn.running_var, case["running_var"]),
                (bn.weight, case["gamma"]),
                (bn.bias, case["beta"]),
            ):
                tensor.copy_(torch.tensor(values, dtype=torch.float64))
        fused = torch.nn.utils.fusion.fuse_linear_bn_eval(lin, bn)
        value = (
            fused.bias[m["unit"]] if m["what"] == "bias" else fused.weight[m["unit"], m["input"]]
        ).item()
        assert _accepts(q, value) and _accepts(q, round(value, 3)), (q["question"], value)
        for line in (str(case["W"]), str(case["running_var"]), str(case["gamma"])):
            assert line in q["code"]


def test_ln_accepts_against_torch():
    qs = _by_kind("ln_accepts") + [chapters.q_ln_accepts(random.Random(i)) for i in range(8)]
    assert {len(q["_meta"]["normalized_shape"]) for q in qs} >= {1, 2}
    for q in qs:
        ln = nn.LayerNorm(list(q["_meta"]["normalized_shape"]))
        for shape, a in zip(q["_meta"]["keys"], q["answers"], strict=True):
            try:
                ln(torch.randn(shape))
                ok = True
            except RuntimeError:
                ok = False
            assert ok == a["correct"], (q["question"], shape)


def test_rms_value_against_torch():
    qs = _by_kind("rms_value")
    assert qs
    for q in qs:
        m = q["_meta"]
        with torch.no_grad():
            y = nn.RMSNorm(len(m["x"]))(torch.tensor([m["x"]], dtype=torch.float32))[
                0, m["index"]
            ].item()
        assert _accepts(q, y) and _accepts(q, round(y, 3)), (q["question"], y)
        assert str(m["x"]) in q["question"]


def test_group_members_against_torch():
    qs = _by_kind("group_members")
    assert qs
    for q in qs:
        m = q["_meta"]
        x = torch.randn(m["shape"], dtype=torch.float64, requires_grad=True)
        nn.GroupNorm(m["G"], m["C"]).double()(x)[0, m["channel"], 0, 0].backward()
        shares = {j for j in range(m["C"]) if x.grad[0, j].abs().sum() > 0} - {m["channel"]}
        assert set(_key_of_correct(q)) == shares, q["question"]
        assert shares and len(shares) == m["C"] // m["G"] - 1


def test_instance_contrast_against_torch():
    # direct draws too: which kinds the mixed bank holds changes whenever a topic is added
    qs = _by_kind("instance_contrast") + [
        chapters.q_instance_contrast(random.Random(i)) for i in range(12)
    ]
    assert {q["_meta"]["mode"] for q in qs} == {"image", "channels"}
    for q in qs:
        m = q["_meta"]
        N, C, H, W = m["shape"]
        x = torch.randn(m["shape"], dtype=torch.float64)
        x2 = x.clone()
        if m["mode"] == "image":
            x2[0] = 3 * x[0] + 2
        else:
            x2[0] = x[0] * (1 + 3 * torch.rand(C, 1, 1, dtype=torch.float64)) + torch.randn(C, 1, 1)
        with torch.no_grad():
            for (name, args), a in zip(m["keys"], q["answers"], strict=True):
                module = _torch_module(name, args).double()
                assert torch.allclose(module(x)[0], module(x2)[0], atol=1e-4) == a["correct"], (
                    name,
                    m["mode"],
                )


# ----------------------------------------------------------------------------
# Review fixes: feedback that follows the module, neutral select-all questions, no degenerate draws
# ----------------------------------------------------------------------------


@functools.cache
def many_questions() -> list:
    """Every topic, seeds 0..9, plus three banks: what a reader can meet (drawn once, on first
    use: every pytest worker collects this file, one runs it)."""
    qs = [
        q
        for topic in quiz.topics()
        for seed in range(10)
        for q in quiz.questions_for(topic, 8, seed)
    ]
    return qs + [q for seed in range(3) for q in quiz.bank(seed)]


def _feedbacks(q):
    return [a["feedback"] for a in q["answers"]]


def test_whole_generation_is_sound():
    for q in many_questions():
        if q["type"] == "numeric":
            values = [a for a in q["answers"] if a["type"] != "default"]
            assert sum(a["correct"] for a in values) == 1 and len(values) >= 3, q["question"]
        else:
            assert any(a["correct"] for a in q["answers"]) and len(q["answers"]) >= 3, q["question"]


def test_train_eval_affine_feedback_follows_the_module():
    """'eval mode switches off γ and β': the feedback names only the parameters the module has."""
    qs = _by_kind("train_eval") + [
        running.q_train_eval(random.Random(i), [name])
        for i in range(4)
        for name in ("InstanceNorm1d", "RMSNorm", "LayerNorm", "BatchNorm2d")
    ]
    seen = set()
    for q in qs:
        m = q["_meta"]
        module = _torch_module(m["norm"], m["args"], m["kwargs"])
        has_w, has_b = module.weight is not None, getattr(module, "bias", None) is not None
        seen.add((has_w, has_b))
        fb = q["answers"][m["keys"].index("affine")]["feedback"]
        assert ("γ and β are applied in both modes" in fb) == (has_w and has_b), fb
        assert ("has γ but no β" in fb) == (has_w and not has_b), fb
        assert ("has no γ or β at all" in fb) == (not has_w), fb
    assert seen == {(True, True), (True, False), (False, False)}


def test_num_statistics_per_element_distractor_follows_the_statistic():
    qs = _by_kind("num_statistics") + [
        computed.q_num_statistics(random.Random(i), ["RMSNorm"]) for i in range(3)
    ]
    seen = set()
    for q in qs:
        m = q["_meta"]
        [fb] = [a["feedback"] for a in q["answers"] if a.get("value") == math.prod(m["shape"])]
        x = torch.randn(m["shape"])
        module = _torch_module(m["norm"], m["args"], m["kwargs"])
        with torch.no_grad():
            centres = torch.allclose(module(x), module(x + 3.0), atol=1e-5)
        seen.add(centres)
        assert ("its own mean" in fb and "all zeros" in fb) == centres, fb
        assert ("its own RMS" in fb and "±1" in fb) == (not centres), fb
    assert seen == {True, False}


def _dims_tuples(text):
    return re.findall(r"dims (\([\d, ]+\))", text)


def test_groupnorm_is_described_by_its_blocks():
    """GroupNorm's reduced dims (1, 2, ...) are the same tuple as LayerNorm's over (C, ...): no
    feedback may
    contrast two layers by the same dims tuple, and GroupNorm is described by its blocks and (N, G)
    statistics, whose shape is checked against torch."""
    qs = [q for q in many_questions() if q["_meta"]["kind"] in ("num_statistics", "which_layer")]
    qs += [
        computed.q_num_statistics(random.Random(i), ["GroupNorm", "LayerNorm"]) for i in range(12)
    ]
    qs += [computed.q_which_layer(random.Random(i)) for i in range(12)]
    described = 0
    for q in qs:
        for fb in _feedbacks(q):
            dims = _dims_tuples(fb)
            assert len(dims) == len(set(dims)), fb
            for sentence in re.split(r"(?<=\.) ", fb):
                for G, C in re.findall(r"GroupNorm\((\d+), (\d+)\)", sentence):
                    described += 1
                    assert "dims (" not in sentence, sentence
                    assert f"block of C/G = {int(C) // int(G)} consecutive channels" in sentence, (
                        sentence
                    )
                    N = q["_meta"]["shape"][0]
                    shape = (N, int(C)) + tuple(q["_meta"]["shape"][2:])
                    module = nn.GroupNorm(int(G), int(C))
                    n_stats = math.prod(shape) // int(_group_of_first(module, shape).sum())
                    assert f"(N, G) = ({N}, {n_stats // N})" in sentence, sentence
    assert described > 10


def test_reduced_dims_groupnorm_channels_share_only_within_a_block():
    qs = [q for q in _by_kind("reduced_dims") if q["_meta"]["norm"] == "GroupNorm"]
    qs += [computed.q_reduced_dims(random.Random(i), ["GroupNorm"]) for i in range(4)]
    for q in qs:
        m = q["_meta"]
        G, C = m["args"]
        mask = _group_of_first(nn.GroupNorm(G, C), tuple(m["shape"]))
        block = int(
            mask[0, :].flatten(1).any(1).sum()
        )  # channels sharing channel 0's statistic (torch)
        assert 1 < block < C
        fb = q["answers"][m["keys"].index(1)]["feedback"]
        assert (
            f"only if both channels are in the same block of C/G = {block} consecutive channels"
            in fb
        ), fb
        assert "differ only in dim 1 share a statistic." not in fb


def test_saturation_says_most_only_for_a_majority():
    qs = _by_kind("saturation") + [why.q_saturation(random.Random(i)) for i in range(24)]
    seen = set()
    for q in qs:
        m = q["_meta"]
        z = (
            torch.randn(m["N"], m["C"], generator=torch.Generator().manual_seed(m["seed"])) * m["s"]
            + m["mu"]
        )
        before = (z.tanh().abs() > 0.99).float().mean().item()
        fb = next(a["feedback"] for a in q["answers"] if a["correct"])
        seen.add(before > 0.5)
        assert bool(re.search(r"\bmost\b", fb)) == (before > 0.5), (before, fb)
        assert f"{before:.1%}" in fb, (before, fb)
    assert seen == {True, False}


def test_running_var_never_stays_at_its_start():
    """The batch's unbiased variance is never ~1, so the answer is never the starting value 1.000,
    and every
    distractor (including 'unchanged') is kept."""
    qs = _by_kind("running_var") + [running.q_running_var(random.Random(i)) for i in range(40)]
    for q in qs:
        m = q["_meta"]
        bn = nn.BatchNorm1d(2, momentum=m["momentum"]).train()
        bn(torch.tensor(m["rows"], dtype=torch.float32))
        value = bn.running_var[0].item()
        unbiased = torch.tensor(m["rows"], dtype=torch.float64)[:, 0].var().item()
        assert abs(unbiased - 1) >= 0.1 and round(value, 3) != 1.0, (m, value)
        assert _accepts(q, value) and not _accepts(q, 1.0)
        values = [a for a in q["answers"] if a["type"] != "default"]
        assert len(values) == 7 and any("starting value" in a["feedback"] for a in values), q[
            "question"
        ]


def _fold_scale(q):
    case, unit = q["_meta"]["case"], q["_meta"]["unit"]
    bn = nn.BatchNorm1d(2)
    return case["gamma"][unit] / math.sqrt(case["running_var"][unit] + bn.eps)


def test_bn_fold_is_never_degenerate():
    qs = _by_kind("bn_fold") + [chapters.q_bn_fold(random.Random(i)) for i in range(40)]
    for q in qs:
        assert abs(abs(_fold_scale(q)) - 1) > 0.05, q["_meta"]
        values = [a for a in q["answers"] if a["type"] != "default"]
        assert (
            len(values) >= 4 and sum(a["correct"] for a in values) == 1
        )  # the key and >= 3 distractors
        assert len(values) == 6  # in fact all five mistakes


_BAD_SIGN = re.compile(r"[+−·/(]\s*-\d|[+−]\s*−\d|−\s*\(\s*-")


def test_signs_are_formatted():
    """No '+ -1', '(3 − -1)' or '·-2': negative numbers after an operator are folded into it or
    bracketed."""
    qs = (
        many_questions()
        + [chapters.q_bn_fold(random.Random(i)) for i in range(40)]
        + [running.q_running_mean(random.Random(i)) for i in range(20)]
    )
    for q in qs:
        for text in [q["question"]] + _feedbacks(q):
            assert not _BAD_SIGN.search(text), text


def test_no_cannot_explode_and_the_smoothness_claim_is_a_measurement():
    for q in many_questions() + [concepts.concept("what_helps")(random.Random(0))]:
        assert "cannot explode" not in _texts(q), q["question"]
    q = concepts.concept("what_helps")(random.Random(0))
    [smooth] = [a for a in q["answers"] if "Santurkar" in a["answer"]]
    assert (
        smooth["correct"]
        and "measured" in smooth["answer"]
        and "not a guarantee" in smooth["feedback"]
    )


def test_affine_and_eps_concepts_are_in_the_batchnorm_topic():
    def concepts(topic):
        return {g.__name__.split("[")[0] for g in quiz.TOPICS[topic]}

    assert {"concept_affine", "concept_eps_purpose"} <= concepts("batchnorm")
    assert not {"concept_affine", "concept_eps_purpose"} & concepts("why")
    asked = {
        q["_meta"].get("concept") for seed in range(10) for q in quiz.questions_for("why", 8, seed)
    }
    assert not {"affine", "eps_purpose"} & asked
    assert len(quiz.TOPICS["why"]) >= 8 and len(quiz.questions_for("why", 12, 0)) == 12


def test_eps_question_states_training_mode_for_batchnorm():
    for q in _eps_questions():
        m = q["_meta"]
        tracks = (
            getattr(_torch_module(m["norm"], m["args"], m["kwargs"]), "running_mean", None)
            is not None
        )
        assert ("in training mode" in q["question"]) == tracks, q["question"]


_SELECT_ALL_KINDS = {
    "state_dict",
    "reduced_dims",
    "batch_independent",
    "invariance",
    "scale_invariance",
    "bias_before_norm",
    "ln_accepts",
    "group_members",
    "instance_contrast",
    "variance_formula",
}  # variance_formula: tests/test_quiz_speed.py
_SELECT_ALL_KINDS |= (
    PRACTICE_SELECT_ALL_KINDS  # the training and pitfalls topics: tests/test_quiz_practice.py
)
_SELECT_ALL_KINDS |= {"dyt_depends", "identity_at_init"}  # norms.quiz.dyt: tests/test_lab_modern.py


def test_select_all_questions_are_many_choice_and_neutral():
    """A select-all question never gives away how many options are right: type many_choice even
    with one
    right option, and a wording that does not change with the count."""
    extra = [computed.q_reduced_dims(random.Random(i), ["LayerNorm", "RMSNorm"]) for i in range(6)]
    extra += [computed.q_state_dict(random.Random(i), ["RMSNorm"]) for i in range(2)]
    extra += [chapters.q_group_members(random.Random(i)) for i in range(12)]
    extra += [chapters.q_instance_contrast(random.Random(i)) for i in range(12)]
    one_right = set()
    for q in many_questions() + extra:
        kind = q["_meta"]["kind"]
        if kind in _SELECT_ALL_KINDS or q["_meta"].get("concept") == "what_helps":
            assert q["type"] == "many_choice" and q["question"].endswith(quiz.SELECT_ALL), q[
                "question"
            ]
            if sum(a["correct"] for a in q["answers"]) == 1:
                one_right.add(kind)
        else:
            assert q["type"] != "many_choice", q["question"]
    assert {"reduced_dims", "state_dict", "group_members", "instance_contrast"} <= one_right

    def asked(q):
        """The sentence that asks (the last one before 'Select all…'), numbers and code blanked
        out."""
        last = re.split(r"(?<=[.)]) (?=[A-Z])", q["question"][: -len(quiz.SELECT_ALL)].strip())[-1]
        return re.sub(r"<code>.*?</code>|\d+", "#", last)

    for kind in ("group_members", "instance_contrast"):
        counts, templates = set(), set()
        for q in [q for q in many_questions() + extra if q["_meta"]["kind"] == kind]:
            counts.add(sum(a["correct"] for a in q["answers"]))
            templates.add(asked(q))
        assert len(counts) > 1, kind
        assert len(templates) == 1, (
            templates
        )  # the same question, whatever the number of right options
    for q in extra:
        assert "different a_c between" not in q["question"]


def test_rendered_quiz_styles_select_all_by_type():
    """jupyterquiz styles and scores by the number of right options; the rendered script is
    patched so the
    type decides (a select-all question with one right option still looks and behaves like one)."""
    js = quiz.render([computed.q_state_dict(random.Random(0), ["RMSNorm"])], key="t")["javascript"]
    for _, patched in rendering._MANY_CHOICE_PATCHES:
        assert js.count(patched) == 1, patched
    assert 'qa.type == "many_choice"' in js and "fb.dataset.many != 1" in js


def test_param_shape_calls_dim_1_a_position_for_sequences():
    qs = _by_kind("param_shape") + [
        computed.q_param_shape(random.Random(i), [name])
        for i in range(20)
        for name in ("LayerNorm", "RMSNorm")
    ]
    seen = False
    for q in qs:
        shape = q["_meta"]["shape"]
        if q["_meta"]["norm"] in ("LayerNorm", "RMSNorm") and len(shape) == 3:
            assert "per channel" not in _texts(q), q["question"]
            seen |= "per position (dim 1 is T here)" in _texts(q)
    assert seen


def test_rms_value_writes_the_factor():
    for q in [chapters.q_rms_value(random.Random(i)) for i in range(12)] + _by_kind("rms_value"):
        D = len(q["_meta"]["x"])
        [fb] = [a["feedback"] for a in q["answers"] if "L2 norm" in a["feedback"]] or [None]
        if fb:
            assert re.search(rf"√{D} (= {math.sqrt(D):g}|≈ {math.sqrt(D):.3f})", fb), fb


def test_generation_leaves_the_global_random_state_alone(monkeypatch):
    """questions_for, bank and show draw from their own generators: a notebook's torch and random
    state is
    the same after a quiz cell as before."""
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: None)
    torch.manual_seed(1234)
    random.seed(1234)
    torch_state, py_state = torch.random.get_rng_state(), random.getstate()
    for topic in quiz.topics():
        quiz.questions_for(topic, 8, seed=5)
        quiz.show(topic, n=4, seed=5)
    quiz.bank(seed=5)
    quiz.self_quiz(bank_size=20, seed=5)
    for name in ("BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "InstanceNorm1d"):
        for i in range(3):
            running.q_batch_one(random.Random(i), [name])
    for i in range(5):
        chapters.q_bn_fold(random.Random(i))
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert random.getstate() == py_state


# ----------------------------------------------------------------------------
# Rendering through jupyterquiz
# ----------------------------------------------------------------------------


def _questions_in(js):
    # after norms' score script (norms/quiz/score.js), which rendering puts first
    # (the English list; the other languages' follow it, see tests/test_quiz_i18n.py)
    m = re.search(r"^var questions([A-Za-z0-9]+)=(.*?);\n", js, re.M)
    assert m, js[:200]
    return m.group(1), json.loads(m.group(2))


def test_render_is_deterministic_and_self_contained():
    qs = quiz.questions_for("batchnorm", 4, seed=1)
    a = quiz.render(qs, key="k")
    assert quiz.render(qs, key="k") == a  # nothing shown before changes the output
    assert quiz.render(qs, key="k2")["div_id"] != a["div_id"]  # the same quiz twice: two keys
    assert re.fullmatch(r"[A-Za-z]+", a["div_id"])
    assert f'<div id="{a["div_id"]}"' in a["html"] and a["html"].endswith("</div>")
    div_id, embedded = _questions_in(a["javascript"])
    assert div_id == a["div_id"]
    assert embedded == rendering._clean(qs)  # passed inline, without the _meta
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


def test_every_topic_has_a_chapter_in_the_book():
    from .notebooks import toc_files

    assert set(quiz.CHAPTER_OF) == set(quiz.topics())
    missing = {t: c for t, c in quiz.CHAPTER_OF.items() if f"book/{c}" not in toc_files()}
    assert missing == {}, f"topics whose chapter is not in _toc.yml: {missing}"


def test_a_hostile_quiz_key_does_not_reach_the_script_unescaped():
    questions = quiz.questions_for("batchnorm", 1, 0)
    key = "</script><!--<script>alert('x')</script>\u2028"
    js = rendering.render(questions, key=key)["javascript"]
    call = js[js.index("NormsQuiz.show(") :]
    for bad in ("</script", "<!--", "<script", "\u2028"):
        assert bad not in call, bad
    assert (
        json.dumps(key, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e") in call
    )


@pytest.mark.parametrize("n", [-1, 0, 2.5, True, "3"])
def test_questions_for_refuses_a_count_that_is_not_positive(n):
    with pytest.raises(
        ValueError, match=f"positive whole number of questions, got {re.escape(repr(n))}"
    ):
        quiz.questions_for("batchnorm", n)


def test_the_self_quiz_tells_its_questions_apart_by_text_and_code():
    """score.js keeps a reader's tally per question, identified by its text and its code: two
    questions of the book's bank (120 questions, seed 0) may share a text (the passes question
    asks it of three functions), never both. Keyed by the text alone, answering one wrongly
    marked both for a retry. The script must key on both."""
    bank = quiz.bank(0, 120)
    texts = [q["question"] for q in bank]
    ids = [(q["question"], q.get("code", "")) for q in bank]
    assert len(set(ids)) == len(ids)
    assert len(set(texts)) < len(texts), "this bank no longer shows the case the key is for"
    script = (rendering.files("norms.quiz") / "score.js").read_text()
    assert 'hash(qa.question + "\\u0000" + (qa.code || ""))' in script
    assert "hash(qa.question)" not in script
