"""Question builders: jupyterquiz dicts for choice and numeric questions, and number formatting.

The texts of a question (its wording, options and feedback) may be :class:`norms.i18n.Text`
values from :func:`norms.i18n.tr`: the dicts then hold every language's rendering, and
:mod:`norms.quiz.rendering` builds one jupyterquiz list per language from the same dicts."""

from __future__ import annotations

import html
import re

from norms.i18n import Text, forms, tr


def _fmt_one(text: str) -> str:
    out = html.escape(text, quote=False)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def fmt(text) -> Text:
    """Escape for innerHTML, then turn `code` spans into <code>, in every language of ``text``
    (a :class:`~norms.i18n.Text` or a plain ``str``). jupyterquiz treats `$` as math and [a](b)
    as a link, so the texts here use neither."""
    return Text({lang: _fmt_one(form) for lang, form in forms(text).items()})


def english(text) -> str:
    """The English form of a question's text (a :class:`~norms.i18n.Text` or ``str``): what
    tells two questions or options apart, whatever the reader's language."""
    return forms(text)["en"]


SELECT_ALL = "Select all that apply."


def choice(
    question, options: list, meta: dict, code: str | None = None, *, many: bool = False
) -> dict:
    """options: [(answer, correct, feedback[, key])]. The optional keys (what each option stands
    for, for tests) go to ``_meta["keys"]``. ``question``, the answers and the feedback may be
    :class:`~norms.i18n.Text` (every language) or ``str``; two options with the same English
    text count as one.

    ``many=True`` makes a select-all question: the type is ``many_choice`` whatever the number of
    correct options (one, or all of them, is a possible answer and must not show in the wording
    or the type), and the question ends with :data:`SELECT_ALL`. Without it the question has
    exactly one correct option and the type is ``multiple_choice``."""
    seen = set()
    answers, keys = [], []
    for answer, correct, feedback, *key in options:
        if english(answer) in seen:
            continue
        seen.add(english(answer))
        answers.append({"answer": fmt(answer), "correct": bool(correct), "feedback": fmt(feedback)})
        keys.append(key[0] if key else None)
    if any(k is not None for k in keys):
        meta = dict(meta, keys=keys)
    ncorrect = sum(a["correct"] for a in answers)
    if ncorrect == 0:
        raise AssertionError(f"question without a correct option: {english(question)}")
    if ncorrect > 1 and not many:
        raise AssertionError(
            f"{ncorrect} correct options in a single-answer question: {english(question)}"
        )
    if "Select all" in english(question):
        raise AssertionError(f"pass many=True instead of writing 'Select all': {english(question)}")
    if many:
        question = tr("{question} Select all that apply.", question=question)
    q = {
        "question": fmt(question),
        "type": "many_choice" if many else "multiple_choice",
        "answers": answers,
    }
    if code:
        q["code"] = html.escape(code, quote=False)
    q["_meta"] = meta
    return q


def numeric(
    question,
    value: float,
    meta: dict,
    *,
    correct_fb,
    wrong: list,
    default_fb,
    tol: float = 0.0,
    code: str | None = None,
) -> dict:
    """value: the key; wrong: [(value, feedback)] for common mistakes (kept only if clearly
    different). The texts may be :class:`~norms.i18n.Text` or ``str``."""

    def entry(v, ok, fb):
        if tol:
            return {
                "type": "range",
                "range": [round(v - tol, 10), round(v + tol, 10)],
                "correct": ok,
                "feedback": fmt(fb),
            }
        return {"type": "value", "value": v, "correct": ok, "feedback": fmt(fb)}

    answers = [entry(value, True, correct_fb)]
    taken = [value]
    for v, fb in wrong:
        if all(abs(v - t) > 2.5 * tol + 1e-9 for t in taken):
            answers.append(entry(v, False, fb))
            taken.append(v)
    answers.append({"type": "default", "feedback": fmt(default_fb)})
    q = {"question": fmt(question), "type": "numeric", "answers": answers}
    if code:
        q["code"] = html.escape(code, quote=False)
    q["_meta"] = meta
    return q


def num(v, spec: str = "g") -> str:
    """A number for prose: a true minus sign (−2, not -2)."""
    text = format(v, spec)
    return "−" + text[1:] if text.startswith("-") else text


def factor(v, spec: str = "g") -> str:
    """A number as an operand after ·, / or −: negatives in parentheses, ``2·(−1)`` instead of
    ``2·-1``."""
    text = num(v, spec)
    return f"({text})" if text.startswith("−") else text


def plus(v, spec: str = "g") -> str:
    """`` + v`` or `` − |v|``: an added term with its sign folded into the operator."""
    text = format(v, spec)
    return f" − {text[1:]}" if text.startswith("-") else f" + {text}"


def shape_str(s) -> str:
    """A shape as the book writes it: ``(2, 3)``, ``(4,)``."""
    return "(" + ", ".join(str(int(v)) for v in s) + ("," if len(s) == 1 else "") + ")"
