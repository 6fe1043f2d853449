"""Quizzes work on the static website, without a kernel: a click on a right and on a
wrong answer shows the feedback norms.quiz wrote for that option."""

from __future__ import annotations

import re

from .conftest import SITE
from .test_site import QUIZ_PAGES, ZH


def quiz_page() -> str:
    """A chapter page with a multiple-choice quiz (the first in the site)."""
    for path in sorted(SITE.rglob("*.html")):
        if "_static" not in path.parts and "MultipleChoiceQn" in path.read_text(errors="ignore"):
            return path.relative_to(SITE).as_posix()
    # jupyterquiz builds its DOM in JavaScript; the class name is in the inline script.
    raise AssertionError("no page of the built site has a multiple-choice quiz")


def plain(html: str | None) -> str:
    """The text of an option's feedback, as the reader sees it."""
    assert html, "every option must carry feedback"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def test_right_and_wrong_answers_show_their_feedback(page, base_url, site):
    page.goto(f"{base_url}/{quiz_page()}", wait_until="networkidle")
    # jupyterquiz: div.Quiz > (div.MultipleChoiceQn, div.Answer > label.MCButton, div.Feedback)
    question = page.locator(".Quiz:has(.MultipleChoiceQn)").first
    question.wait_for(state="visible", timeout=15000)
    buttons = question.locator(".MCButton")
    correct = question.locator('.MCButton[data-correct="true"]').first
    wrong = question.locator('.MCButton:not([data-correct="true"])').first
    assert buttons.count() >= 2
    feedback = question.locator(".Feedback")

    wrong.click()
    assert re.search(r"\bincorrectButton\b", wrong.get_attribute("class"))
    wrong_text = feedback.inner_text().strip()
    assert plain(wrong.get_attribute("data-feedback"))[:40] in wrong_text, (
        "the wrong option's feedback is not shown"
    )

    correct.click()
    assert re.search(r"\bcorrectButton\b", correct.get_attribute("class"))
    right_text = feedback.inner_text().strip()
    assert plain(correct.get_attribute("data-feedback"))[:40] in right_text, (
        "the right option's feedback is not shown"
    )
    assert right_text != wrong_text
    assert not page.recorder.errors, page.recorder.errors


def test_every_chapter_with_a_quiz_has_one_on_the_page(site):
    """The chapters that end with a quiz have it on their page, in both editions; each such page
    shows its quizzes drawn with their answers in test_site.py's visit (check_quizzes_render)."""
    chapters = {
        "batchnorm",
        "layernorm",
        "rmsnorm",
        "groupnorm",
        "why-normalize",
        "side-by-side",
        "self-quiz",
    }
    for chapter in chapters:
        for path in (f"book/{chapter}.html", f"{ZH}book/{chapter}.html"):
            assert path in QUIZ_PAGES, f"{path} has no quiz"


def test_a_select_all_question_with_one_right_answer_stays_select_all(page):
    """norms.quiz patches jupyterquiz so that the question type, not the number of right
    answers, decides: a many_choice question with one right answer must not turn into a
    single-answer question (which would tell the reader that only one answer is right)."""
    import norms.quiz

    def rendered(kind):
        out = norms.quiz.render(
            [
                {
                    "question": "Which letters are vowels? Select all that apply.",
                    "type": kind,
                    "answers": [
                        {"answer": a, "correct": a == "a", "feedback": "yes" if a == "a" else "no"}
                        for a in ("a", "b", "c")
                    ],
                }
            ],
            key=kind,
        )
        page.set_content(out["html"] + f"<script>{out['javascript']}</script>")
        page.locator(".Quiz").first.wait_for(state="attached", timeout=15000)
        return page.evaluate(
            "() => [...document.querySelectorAll('.Quiz div')].map(d => d.className)"
            ".filter(c => /ChoiceQn/.test(c))"
        )

    assert rendered("many_choice") == ["ManyChoiceQn"]
    assert rendered("multiple_choice") == ["MultipleChoiceQn"]  # the check can tell them apart


def score(page) -> dict:
    """What the first quiz's score panel says, as numbers (norms/quiz/score.js)."""
    data = page.locator(".nq-score").first.evaluate("el => Object.assign({}, el.dataset)")
    return {k: int(v) for k, v in data.items()}


def test_a_chapter_quiz_shows_the_score(page, base_url, site):
    page.goto(f"{base_url}/book/batchnorm.html", wait_until="networkidle")
    question = page.locator(".Quiz:has(.MultipleChoiceQn)").first
    question.wait_for(state="visible", timeout=15000)
    assert score(page) == {"right": 0, "answered": 0}
    question.locator('.MCButton[data-correct="true"]').first.click()
    assert score(page) == {"right": 1, "answered": 1}
    assert "1 right of 1 answered" in page.locator(".nq-score").first.inner_text()
    question.locator('.MCButton:not([data-correct="true"])').first.click()  # a question counts once
    assert score(page) == {"right": 1, "answered": 1}
    assert page.locator(".nq-tally").count() == 0, "chapter quizzes keep nothing across visits"


def test_the_self_quiz_keeps_a_tally_across_visits(page, base_url, site):
    url = f"{base_url}/book/self-quiz.html"
    page.goto(url, wait_until="networkidle")
    page.evaluate("() => window.localStorage.clear()")
    quiz = page.locator("[data-norms-quiz='persist']")  # the self-quiz (norms.quiz.self_quiz)

    def visit():
        page.reload(wait_until="networkidle")
        quiz.locator(".Quiz").first.wait_for(state="visible", timeout=15000)

    def tally() -> dict:
        data = quiz.evaluate("el => Object.assign({}, el.nextElementSibling.dataset)")
        return {k: int(v) for k, v in data.items()}

    # A visit draws its questions at random: visit until one holds a multiple-choice question
    # (an unanswered draw changes no tally; the CI run of 2026-11-28 drew none and timed out)
    for _ in range(20):
        visit()
        if quiz.locator(".Quiz .MultipleChoiceQn").count():
            break
    else:
        raise AssertionError("20 visits of the self-quiz drew no multiple-choice question")
    assert quiz.count() == 1
    assert tally()["seen"] == 0 and page.locator(".nq-retry").is_disabled()

    question = quiz.locator(".Quiz:has(.MultipleChoiceQn)").first
    text = question.locator(".MultipleChoiceQn").inner_text()
    question.locator('.MCButton:not([data-correct="true"])').first.click()
    assert tally() == {"right": 0, "answered": 1, "seen": 1, "good": 0, "wrong": 1}

    visit()  # a new visit: new questions, the tally stays
    assert tally() == {"right": 0, "answered": 0, "seen": 1, "good": 0, "wrong": 1}
    assert "0 right of 1 question answered" in page.locator(".nq-tally").inner_text()

    page.locator(".nq-retry").click()  # only the question answered wrongly comes back
    assert quiz.locator(".Quiz").count() == 1
    assert quiz.locator(".Quiz .MultipleChoiceQn").inner_text() == text
    quiz.locator('.Quiz .MCButton[data-correct="true"]').first.click()
    assert tally() == {"right": 1, "answered": 1, "seen": 1, "good": 1, "wrong": 0}

    visit()
    assert tally()["good"] == 1
    ours = [
        k
        for k in page.evaluate("() => Object.keys(window.localStorage)")
        if k.startswith("norms-quiz:")
    ]
    assert len(ours) == 1 and "self_quiz" in ours[0], "one entry, for the self-quiz"
    page.locator(".nq-reset").click()
    assert tally()["seen"] == 0
    visit()
    assert tally()["seen"] == 0, "the reset is kept"
    assert not [
        k
        for k in page.evaluate("() => Object.keys(window.localStorage)")
        if k.startswith("norms-quiz:")
    ]
    assert not [u for u in page.recorder.requests if not u.startswith(base_url)], (
        "nothing is sent anywhere"
    )
    assert not page.recorder.errors, page.recorder.errors
