"""Question builders: jupyterquiz dicts for choice and numeric questions, and number formatting."""

from __future__ import annotations

import html
import re


def _fmt(text: str) -> str:
    """Escape for innerHTML, then turn `code` spans into <code>. jupyterquiz treats `$` as math and
    [a](b) as a link, so the texts here use neither."""
    out = html.escape(text, quote=False)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


SELECT_ALL = "Select all that apply."


def _choice(
    question: str, options: list, meta: dict, code: str | None = None, *, many: bool = False
) -> dict:
    """options: [(answer, correct, feedback[, key])]. The optional keys (what each option stands
    for, for
    tests) go to ``_meta["keys"]``.

    ``many=True`` makes a select-all question: the type is ``many_choice`` whatever the number of
    correct
    options (one, or all of them, is a possible answer and must not show in the wording or the
    type), and
    the question ends with :data:`SELECT_ALL`. Without it the question has exactly one correct
    option and
    the type is ``multiple_choice``."""
    seen = set()
    answers, keys = [], []
    for answer, correct, feedback, *key in options:
        if answer in seen:
            continue
        seen.add(answer)
        answers.append(
            {"answer": _fmt(answer), "correct": bool(correct), "feedback": _fmt(feedback)}
        )
        keys.append(key[0] if key else None)
    if any(k is not None for k in keys):
        meta = dict(meta, keys=keys)
    ncorrect = sum(a["correct"] for a in answers)
    if ncorrect == 0:
        raise AssertionError(f"question without a correct option: {question}")
    if ncorrect > 1 and not many:
        raise AssertionError(f"{ncorrect} correct options in a single-answer question: {question}")
    if "Select all" in question:
        raise AssertionError(f"pass many=True instead of writing 'Select all': {question}")
    if many:
        question = f"{question} {SELECT_ALL}"
    q = {
        "question": _fmt(question),
        "type": "many_choice" if many else "multiple_choice",
        "answers": answers,
    }
    if code:
        q["code"] = html.escape(code, quote=False)
    q["_meta"] = meta
    return q


def _numeric(
    question: str,
    value: float,
    meta: dict,
    *,
    correct_fb: str,
    wrong: list,
    default_fb: str,
    tol: float = 0.0,
    code: str | None = None,
) -> dict:
    """value: the key; wrong: [(value, feedback)] for common mistakes (kept only if clearly
    different)."""

    def entry(v, ok, fb):
        if tol:
            return {
                "type": "range",
                "range": [round(v - tol, 10), round(v + tol, 10)],
                "correct": ok,
                "feedback": _fmt(fb),
            }
        return {"type": "value", "value": v, "correct": ok, "feedback": _fmt(fb)}

    answers = [entry(value, True, correct_fb)]
    taken = [value]
    for v, fb in wrong:
        if all(abs(v - t) > 2.5 * tol + 1e-9 for t in taken):
            answers.append(entry(v, False, fb))
            taken.append(v)
    answers.append({"type": "default", "feedback": _fmt(default_fb)})
    q = {"question": _fmt(question), "type": "numeric", "answers": answers}
    if code:
        q["code"] = html.escape(code, quote=False)
    q["_meta"] = meta
    return q


def _num(v, spec: str = "g") -> str:
    """A number for prose: a true minus sign (−2, not -2)."""
    text = format(v, spec)
    return "−" + text[1:] if text.startswith("-") else text


def _factor(v, spec: str = "g") -> str:
    """A number as an operand after ·, / or −: negatives in parentheses, ``2·(−1)`` instead of
    ``2·-1``."""
    text = _num(v, spec)
    return f"({text})" if text.startswith("−") else text


def _plus(v, spec: str = "g") -> str:
    """`` + v`` or `` − |v|``: an added term with its sign folded into the operator."""
    text = format(v, spec)
    return f" − {text[1:]}" if text.startswith("-") else f" + {text}"


def _shape(s) -> str:
    return "(" + ", ".join(str(int(v)) for v in s) + ("," if len(s) == 1 else "") + ")"
