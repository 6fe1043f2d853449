"""The instructors' page (book/instructors.ipynb): the 90-minute lecture's quiz draws only
from the topics of the chapters that lecture covers (``norms.quiz.topics_for_chapters``,
``bank(topics=...)``, ``self_quiz(topics=...)``)."""

from __future__ import annotations

import ast
import importlib
import json

import pytest

import norms.quiz

from .notebooks import ROOT

quiz_topics = importlib.import_module("norms.quiz.topics")  # the module, not the function


def lecture_plan():
    """The LECTURE table of the instructors' page: [(minutes, chapter, what to show)]."""
    nb = json.loads((ROOT / "book" / "instructors.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    source = next(s for s in code if "LECTURE = [" in s)
    node = next(
        n
        for n in ast.parse(source).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "LECTURE"
    )
    return ast.literal_eval(node.value), "\n".join(code)


def test_the_lecture_quiz_draws_only_from_what_the_lecture_covers(monkeypatch):
    plan, code = lecture_plan()
    chapters = {chapter for _, chapter, _ in plan}
    topics = norms.quiz.topics_for_chapters(chapters)
    assert topics and {norms.quiz.CHAPTER_OF[t] for t in topics} <= chapters
    outside = [t for t in norms.quiz.topics() if t not in topics]
    assert {"transformer", "speed", "syncbatchnorm", "pitfalls"} <= set(outside)

    def refuse(rng):
        raise AssertionError("a question from a topic the lecture does not cover")

    for t in outside:
        monkeypatch.setitem(quiz_topics.TOPICS, t, [refuse])
    quiz = norms.quiz.bank(seed=90, size=30, topics=topics)
    assert len(quiz) == 30
    with pytest.raises(AssertionError, match="does not cover"):
        norms.quiz.bank(seed=90, size=30)  # the whole-book bank does draw from them
    # the page's lecture quiz is this call, on the chapters of its LECTURE table
    assert "norms.quiz.topics_for_chapters(lecture_chapters)" in code
    assert "topics=lecture_topics" in code


def test_self_quiz_takes_the_topics(monkeypatch):
    seen = {}
    monkeypatch.setattr(
        "norms.quiz.rendering.display_questions", lambda qs, **kw: seen.update(qs=qs, **kw)
    )
    norms.quiz.self_quiz(bank_size=12, num=3, seed=1, topics=["rmsnorm"])
    assert seen["qs"] == norms.quiz.bank(1, 12, topics=["rmsnorm"])
    assert seen["key"] == "self_quiz:12:1:rmsnorm"
    norms.quiz.self_quiz(bank_size=12, num=3, seed=1)
    assert seen["qs"] == norms.quiz.bank(1, 12) and seen["key"] == "self_quiz:12:1"


def test_unknown_topics_and_chapters_are_errors():
    with pytest.raises(ValueError, match="unknown topics"):
        norms.quiz.bank(topics=["batchnorm", "nope"])
    with pytest.raises(ValueError, match="no quiz topic"):
        norms.quiz.topics_for_chapters(["first-look"])


def test_training_and_pitfalls_get_rmsnorm_as_a_prerequisite():
    """The page adds RMSNorm's chapter to the prerequisites of the chapters that use it."""
    _, code = lecture_plan()
    assert 'RMSNORM_BEFORE == ["training", "pitfalls"]' in code
