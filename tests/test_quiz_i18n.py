"""norms.quiz in Chinese: the questions of every converted question module read as Chinese
(no English prose left outside code and maths), the rendered quiz carries both languages
and jupyterquiz's own feedback in Chinese, a reader who chose a language gets that one only,
and the English is what it was before the questions became templates."""

from __future__ import annotations

import inspect
import json
import random
import re

import pytest

import norms
import norms.quiz as quiz
from norms import i18n
from norms.quiz import rendering

SEEDS = [0, 1, 2]

# Runs of three or more English words left in a Chinese text are prose that was not
# translated. Code (<code>…</code>, `…`), layer and option names (one word, or joined by _ .
# /) and maths do not count: a run needs three words of letters separated by spaces.
_CODE = re.compile(r"<code>.*?</code>|`[^`]*`", re.S)
_RUN = re.compile(r"[A-Za-z][a-z]+(?:[ ,;:'-]+[A-Za-z][a-z]+){2,}")
# names and citations that stay as they are in the Chinese text
_KEPT = re.compile(r"Ioffe|Szegedy|Santurkar|Keras|TensorFlow|et al")
# a list of ATen op names (speed's questions quote the ops a layer runs): code, not prose
_OPS = re.compile(r"\b(?:[a-z_]+\d*, ){2,}[a-z_]+\d*\b")


ATEN_OPS = set(
    "mean sub mul add addcmul div neg sum pow rsqrt sqrt var var_mean native_layer_norm "
    "native_group_norm native_batch_norm copy_ add_ mul_ exp tanh expand view".split()
)


def english_left(text: str) -> list[str]:
    """The runs of English prose in ``text`` (a question, option or feedback in Chinese)."""
    text = _CODE.sub(" ", text)
    text = _OPS.sub(lambda m: " " if all(w in ATEN_OPS for w in m[0].split(", ")) else m[0], text)
    return [run for run in _RUN.findall(text) if not _KEPT.search(run)]


def test_the_check_finds_english_prose_and_passes_chinese_with_code_and_maths():
    assert english_left("正确：the running mean is an average。") == [
        "the running mean is an average"
    ]
    assert english_left("No: it does not raise.") == ["No: it does not raise"]
    assert (
        english_left(
            "正确：<code>norms.LayerNorm([3, 4])</code> 在维度 (2, 3) 上归约，"
            "√(σ² + ε) ≥ √ε，track_running_stats=True，BatchNorm2d 与 GroupNorm(2, 8)。"
        )
        == []
    )


def _module_of(generator) -> str:
    """The question module a topic's generator comes from (``norms.quiz.computed``, ...)."""
    inner = inspect.getclosurevars(generator).nonlocals.get("gen", generator)
    return inner.__module__


def _converted(module: str) -> bool:
    """Whether ``module``'s questions are templates (it has a catalog): the modules are
    converted one by one, and each is checked as soon as it is."""
    return (i18n.catalog_dir("zh") / f"{module}.po").exists()


def _texts(question: dict, language: str) -> list[str]:
    """Every text a reader sees of ``question`` in ``language``: the wording, the options and
    the feedback (not the code, which stays as it is)."""
    shown = rendering._in_language(rendering._clean([question]), language)[0]
    texts = [shown["question"]]
    for answer in shown["answers"]:
        texts += [answer[k] for k in ("answer", "feedback") if k in answer]
    return texts


def _generated(topic: str):
    for generator in quiz.TOPICS[topic]:
        module = _module_of(generator)
        if _converted(module):
            for seed in SEEDS:
                yield module, generator(random.Random(f"{topic}:{seed}"))


@pytest.mark.parametrize("topic", quiz.topics())
def test_every_topic_reads_as_chinese(topic):
    checked, left = 0, []
    for module, question in _generated(topic):
        checked += 1
        for text in _texts(question, "zh"):
            left += [(module, run, text) for run in english_left(text)]
    if not checked:
        pytest.skip(f"no question module of {topic!r} is converted yet")
    assert not left, "English prose in the Chinese quiz:\n" + "\n".join(map(str, left[:10]))


def test_the_self_quiz_bank_reads_as_chinese():
    modules = {_module_of(g) for gens in quiz.TOPICS.values() for g in gens}
    waiting = sorted(m for m in modules if not _converted(m))
    if waiting:
        pytest.skip(f"question modules not converted yet: {waiting}")
    left = [
        (run, text)
        for question in quiz.bank(seed=0, size=120)
        for text in _texts(question, "zh")
        for run in english_left(text)
    ]
    assert not left, "English prose in the Chinese self-quiz:\n" + "\n".join(map(str, left[:10]))


def test_the_chinese_keeps_the_numbers_code_and_answer_key():
    """The two languages differ in their words only: the same options are right, the same
    numbers are the key, the code is the same."""
    for topic in quiz.topics():
        for question in quiz.questions_for(topic, 4, seed=0):
            en, zh = (
                rendering._in_language(rendering._clean([question]), lang)[0]
                for lang in ("en", "zh")
            )
            assert en.get("code") == zh.get("code") and en["type"] == zh["type"]
            for a, b in zip(en["answers"], zh["answers"], strict=True):
                assert {k: v for k, v in a.items() if k not in ("answer", "feedback")} == {
                    k: v for k, v in b.items() if k not in ("answer", "feedback")
                }


# What these questions said before they became templates (main at 3bb63ac): a guard on the
# English of the templates that compose several pieces (plural, "No: " + a lower-case reason,
# a capitalised option). The whole English of every topic (5 seeds) and of three self-quiz
# banks was compared once with main's, see the report of i36-quiz-a.
_ENGLISH_BEFORE = [
    (
        "computed",
        "q_num_statistics",
        0,
        ["BatchNorm2d"],
        "<code>norms.BatchNorm2d(3)</code> is applied in training mode to an input of shape "
        "(4, 3, 5, 7). How many means does it compute?",
        "12 is what InstanceNorm2d(3) would compute on this input: it reduces over dims (2, 3) "
        "(statistics of shape (4, 3)). BatchNorm2d(3) reduces over dims (0, 2, 3) (statistics "
        "of shape (3,)).",
    ),
    (
        "running",
        "q_eps",
        3,
        ["LayerNorm"],
        "Which formula does <code>norms.LayerNorm(4, eps=0.1)</code> compute before applying γ "
        "and β? (μ and σ² are the mean and (biased) variance over the reduced dims.)",
        "No: adding ε after the square root also avoids dividing by zero, but it is not what "
        "torch.nn (and norms) compute: the outputs differ when the variance is small.",
    ),
    (
        "running",
        "q_biased_unbiased",
        0,
        None,
        "<code>norms.BatchNorm1d(3)</code> gets an input of shape (n, 3) with n = 5, in training "
        "mode: each channel's mean and variance come from the n values in its column. The "
        "layer …",
        "Normalizes with the biased (÷n) variance and stores the unbiased (÷(n−1)) one in "
        "running_var: 1.25 times the variance it normalized with (n/(n−1) for n = 5).",
    ),
    (
        "chapters",
        "q_ln_accepts",
        1,
        None,
        "<code>norms.LayerNorm([4, 7, 3])</code> accepts which of these input shapes (no "
        "error)? Select all that apply.",
        "Yes: its last 3 dims are (4, 7, 3); the leading dims (none) only index the blocks, "
        "each normalized on its own.",
    ),
]


@pytest.mark.parametrize(("module", "name", "seed", "names", "question", "text"), _ENGLISH_BEFORE)
def test_the_english_is_what_it_was(module, name, seed, names, question, text):
    import importlib

    generator = getattr(importlib.import_module(f"norms.quiz.{module}"), name)
    made = generator(random.Random(seed), names)
    assert _texts(made, "en")[0] == question
    assert text in _texts(made, "en")
    assert text not in _texts(made, "zh") and question not in _texts(made, "zh")


def _lists(js: str) -> dict[str, list]:
    """The question lists in a rendered script, by language."""
    found = re.findall(r"^var questions[A-Za-z]+(?:_(\w+))?=(.*?);\n", js, re.M)
    return {lang or "en": json.loads(body) for lang, body in found}


def test_the_rendered_quiz_carries_both_languages_and_shows_the_pages():
    questions = quiz.questions_for("batchnorm", 4, seed=1)
    out = quiz.render(questions, key="k")
    lists = _lists(out["javascript"])
    assert set(lists) == {"en", "zh"}
    for lang in ("en", "zh"):
        assert lists[lang] == rendering._in_language(rendering._clean(questions), lang)
    assert lists["zh"] != lists["en"]
    call = out["javascript"][out["javascript"].index("NormsQuiz.show(") :]
    assert i18n.js_language() in call and i18n.JS_AUTO in call
    # the Chinese notebook keeps the script and tells it the language
    assert "norms-lang:zh" in i18n.for_notebook(out["javascript"], "zh")


def test_jupyterquiz_and_the_score_speak_chinese():
    js = quiz.render(quiz.questions_for("rmsnorm", 2, seed=0), key="k")["javascript"]
    strings_line = re.search(r"^window\.NormsQuiz\.strings = (\{.*?\});\n", js, re.M)
    jupyterquiz = js[strings_line.end() :]  # jupyterquiz's script, after norms' score.js
    for text in rendering._JQ_NAMES:  # its own texts all go through the translation
        assert f'NormsQuiz.t("{text}")' in jupyterquiz
        assert f'"{text}"' not in jupyterquiz.replace(f'NormsQuiz.t("{text}")', "")
    strings = json.loads(strings_line[1])
    assert strings["zh"]["Correct!"] == "正确！"
    assert strings["zh"]["Incorrect -- try again."] == "不对，再试一次。"
    assert strings["zh"]["Type numeric answer here:"] == "在此输入数值答案："
    for name, text in strings["zh"].items():
        assert not english_left(text), (name, text)
        fields = sorted(re.findall(r"\{\w+\}", strings["en"][name]))
        assert sorted(re.findall(r"\{\w+\}", text)) == fields, (name, text)


def test_a_chosen_language_renders_that_language_only():
    questions = quiz.questions_for("layernorm", 3, seed=0)
    both = quiz.render(questions, key="k")
    try:
        norms.set_language("zh")
        only = quiz.render(questions, key="k")
    finally:
        norms.set_language(None)
    assert only["div_id"] == both["div_id"]  # the id comes from the English
    assert _lists(only["javascript"]) == {
        "en": rendering._in_language(rendering._clean(questions), "zh")
    }
    assert "norms-lang:zh" in only["javascript"]
