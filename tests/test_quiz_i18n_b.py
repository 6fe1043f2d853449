"""The quizzes of norms.quiz.dyt, pitfalls, small_batches, speed, syncbatchnorm, training,
transformer and why in Chinese (issue 36 item 3).

Every question of these modules, generated for several seeds, carries a Chinese form with no
English prose left (a heuristic: runs of three English words outside code, names and
citations; :func:`test_the_heuristic_finds_english` shows it flags every English form) and
with every number of its English form; and the English forms are the ones the modules gave
before they became templates (digests of the English with its numbers masked, see
:func:`english_digests`; numbers are computed, so they are left to the tests of each topic).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from norms.i18n import forms
from norms.quiz import (
    dyt,
    pitfalls,
    small_batches,
    speed,
    syncbatchnorm,
    training,
    transformer,
    why,
)

MODULES = (dyt, pitfalls, small_batches, speed, syncbatchnorm, training, transformer, why)
SEEDS = (0, 1, 2)
GENERATORS = sorted(
    (module.__name__.rsplit(".", 1)[1], name)
    for module in MODULES
    for name, fn in inspect.getmembers(module, inspect.isfunction)
    if name.startswith("q_") and fn.__module__ == module.__name__
)
CASES = [(m, n, seed) for m, n in GENERATORS for seed in SEEDS]
DIGESTS = Path(__file__).with_name("quiz_i18n_b_english.json")


@functools.lru_cache(maxsize=None)
def question(module: str, name: str, seed: int) -> dict:
    return getattr(globals()[module], name)(random.Random(seed))


def texts(q: dict) -> list[tuple[str, dict[str, str]]]:
    """(where, {language: text}) for every text a reader sees: the question, each option and
    each feedback."""
    out = [("question", forms(q["question"]))]
    for i, answer in enumerate(q["answers"]):
        if "answer" in answer:
            out.append((f"answer {i}", forms(answer["answer"])))
        out.append((f"feedback {i}", forms(answer["feedback"])))
    return out


# -- English prose left in a Chinese text ---------------------------------------------

_CODE = re.compile(r"<code>.*?</code>", re.S)
# names and citations stay as they are in the Chinese text
_NAMES = re.compile(r"et al\.|Wu &amp; He|van Laarhoven")
_WORD = r"[A-Za-z][A-Za-z'’-]+"  # two letters or more: not the axes of "(B, T, D)"
_ENGLISH_RUN = re.compile(rf"{_WORD}(?:[ ,]+{_WORD}){{2,}}")


def english_runs(text: str, identifiers=()) -> list[str]:
    """Runs of three or more English words (of two letters or more) in ``text`` outside
    ``<code>``, names, citations and ``identifiers`` (e.g. the ATen ops a question lists)."""
    text = _NAMES.sub(" ", _CODE.sub(" ", text))
    for word in identifiers:
        text = re.sub(rf"\b{re.escape(word)}\b", " ", text)
    return _ENGLISH_RUN.findall(text)


def identifiers(q: dict) -> tuple:
    return tuple(q["_meta"].get("ops", ()))


@pytest.mark.parametrize(("module", "name", "seed"), CASES)
def test_chinese_has_no_english_prose(module, name, seed):
    q = question(module, name, seed)
    left = {
        where: runs
        for where, text in texts(q)
        if (runs := english_runs(text["zh"], identifiers(q)))
    }
    assert not left, f"{module}.{name} seed {seed}: English left in the Chinese: {left}"


def test_the_heuristic_finds_english():
    """The check above can fail: it flags the English form of every question, and a Chinese
    text with one English clause left in it."""
    for module, name, seed in CASES:
        q = question(module, name, seed)
        english = " ".join(text["en"] for _, text in texts(q))
        assert english_runs(english, identifiers(q)), f"{module}.{name}: no English found"
    assert english_runs("正确：每层两个，plus the final norm。")
    assert not english_runs("正确：<code>norms.BatchNorm1d(4)</code> 的 γ 与 β，Li et al. (2019)。")


# -- the same numbers in both languages -------------------------------------------------

_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-−+]?\d+)?")


def missing_numbers(english: str, chinese: str) -> dict[str, int]:
    """The numbers of ``english`` that ``chinese`` lacks (with their count)."""
    return dict(Counter(_NUMBER.findall(english)) - Counter(_NUMBER.findall(chinese)))


def test_the_number_check_finds_a_lost_number():
    assert missing_numbers("two per layer: 2·6 + 1 = 13.", "每层两个：2·6 + 1。") == {"13": 1}
    assert missing_numbers("−0.91 (two decimals)", "−0.91（保留两位小数）") == {}


@pytest.mark.parametrize(("module", "name", "seed"), CASES)
def test_every_number_of_the_english_is_in_the_chinese(module, name, seed):
    q = question(module, name, seed)
    for where, text in texts(q):
        missing = missing_numbers(text["en"], text["zh"])
        assert not missing, f"{module}.{name} seed {seed}, {where}: {missing} missing"
        assert text["zh"] != text["en"] or not english_runs(text["en"]), (
            f"{module}.{name} seed {seed}, {where}: not translated"
        )


# -- the English is unchanged ------------------------------------------------------------


def english_digests() -> dict[str, str]:
    """``{module.name.seed: digest}`` of every question's English texts with their numbers
    masked. After a deliberate change of an English text, regenerate the file with
    ``python -c "import json, tests.test_quiz_i18n_b as t; print(json.dumps(t.english_digests(),
    indent=0, sort_keys=True))" > tests/quiz_i18n_b_english.json``."""
    out = {}
    for module, name, seed in CASES:
        q = question(module, name, seed)
        english = [(where, _NUMBER.sub("#", text["en"])) for where, text in texts(q)]
        english.append(("code", _NUMBER.sub("#", q.get("code", ""))))
        payload = json.dumps(english, ensure_ascii=False)
        out[f"{module}.{name}.{seed}"] = hashlib.sha256(payload.encode()).hexdigest()[:16]
    return out


def test_the_english_is_unchanged():
    """The digests were computed from the modules before they became templates (main at
    3bb63ac), so an English reader sees the same questions."""
    want = json.loads(DIGESTS.read_text(encoding="utf-8"))
    got = english_digests()
    assert sorted(got) == sorted(want)
    changed = sorted(k for k in want if got[k] != want[k])
    assert not changed, f"the English of these questions changed: {changed}"
