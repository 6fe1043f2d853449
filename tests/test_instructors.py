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


def page_block(after: str) -> str:
    """The first ```bash block of the instructors' page after the words ``after``."""
    nb = json.loads((ROOT / "book" / "instructors.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    rest = text[text.index(after) :]
    return rest.split("```bash\n", 1)[1].split("```", 1)[0]


@pytest.mark.courses
def test_the_single_submission_command_works_as_written(tmp_path):
    """The page's commands to grade one submission by hand, run as they are (in a fresh
    folder, the project's paths and the venv's otter made absolute), give the reference
    full marks in results/results.json."""
    import subprocess
    import sys
    from pathlib import Path

    from .test_assignments import notebook, solutions

    name = "batchnorm-channels-last"
    script = page_block("To grade a single submission by hand")
    assert "otter run" in script and "results" in script, script
    notebook(name, tmp_path / "submission.ipynb", solutions(name))
    script = (
        script.replace(".venv/bin/otter", str(Path(sys.executable).with_name("otter")))
        .replace("_build/", f"{ROOT}/_build/")
        .replace("NAME", name)
    )
    run = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    scored = [t for t in results["tests"] if "max_score" in t]
    assert scored and sum(t["score"] for t in scored) == sum(t["max_score"] for t in scored)
