"""A quiz's stored output shows the page's language: Chinese questions, feedback, jupyterquiz's
own texts and score on a page with <html lang="zh-CN">, English on an English page (a
standalone page written from norms.quiz.render, no site build needed)."""

from __future__ import annotations

import re

import pytest

import norms.quiz as quiz
from norms.quiz import rendering


def _plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def _page(tmp_path, lang: str, out: dict) -> str:
    path = tmp_path / f"quiz-{lang}.html"
    path.write_text(
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"></head><body>'
        f"{out['html']}<script>{out['javascript']}</script></body></html>",
        encoding="utf-8",
    )
    return path.as_uri()


@pytest.mark.parametrize(("lang", "form"), [("zh-CN", "zh"), ("en", "en")])
def test_the_quiz_speaks_the_pages_language(page, tmp_path, lang, form):
    # a numeric question (jupyterquiz's own input label) and choice questions, in order
    questions = quiz.questions_for("rmsnorm", 7, seed=0)
    questions.sort(key=lambda q: q["type"] != "numeric")
    assert questions[0]["type"] == "numeric"
    out = quiz.render(questions, key=f"i18n-{lang}", shuffle_answers=False)
    shown = rendering._in_language(rendering._clean(questions), form)
    page.goto(_page(tmp_path, lang, out))
    page.locator(".Quiz").first.wait_for(state="attached", timeout=15000)

    first = page.locator(".Quiz").first.inner_text()
    assert _plain(shown[0]["question"])[:30] in re.sub(r"\s+", " ", first), first[:200]
    label = page.locator(".InpLabel").first.inner_text().strip()
    assert label == ("在此输入数值答案：" if form == "zh" else "Type numeric answer here:")
    score = page.locator(".nq-score").first.inner_text()
    assert score.startswith("得分：" if form == "zh" else "Your score:"), score

    question = page.locator(".Quiz:has(.MultipleChoiceQn)").first
    wrong = question.locator('.MCButton:not([data-correct="true"])').first
    wrong.click()
    feedback = question.locator(".Feedback").inner_text().strip()
    assert _plain(wrong.get_attribute("data-feedback"))[:20] in feedback
    if form == "zh":
        assert re.search(r"[\u4e00-\u9fff]", feedback), feedback
        assert re.search(r"[\u4e00-\u9fff]", page.locator(".nq-score").first.inner_text())
    else:
        assert not re.search(r"[\u4e00-\u9fff]", page.locator("body").inner_text())
    assert not page.recorder.errors, page.recorder.errors
