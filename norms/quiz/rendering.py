"""Rendering through jupyterquiz, deterministic and without external loads, in every language.

The question generators run once: their dicts hold :class:`norms.i18n.Text` values, and the
output carries one jupyterquiz list per language built from the same dicts (only the reader's
language when one was set, :func:`norms.i18n.explicit_language`). The script shows the
language of :func:`norms.i18n.js_language` (the page's ``<html lang>``), and so do the
feedback jupyterquiz writes itself ("Correct!", "Incorrect -- try again.") and the score."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import warnings
from importlib.resources import files

from norms.i18n import LANGUAGES, Text, explicit_language, js_language, tr

from .topics import bank, questions_for

_MATHJAX_CDN_BLOCK = re.compile(
    r"else\s*\{\s*console\.log\('WARNING: Trying to force load MathJax 3'\);.*?\}\)\(\);\s*\}", re.S
)
_MATHJAX_WAIT = (
    "else { if (MathJax.startup && MathJax.startup.promise) { "
    "MathJax.startup.promise.then(function () { MathJax.typeset([container]); }); } }"
)
_EXTERNAL_SRC = re.compile(r"""\w+\.src\s*=\s*['"]https?://[^'"]*['"]\s*;""")


def _clean(questions):
    return [{k: v for k, v in q.items() if not k.startswith("_")} for q in questions]


def _in_language(value, language: str):
    """``value`` (questions: dicts and lists holding :class:`~norms.i18n.Text`) with every text
    in ``language``: what jupyterquiz takes."""
    if isinstance(value, Text):
        return value.in_language(language)
    if isinstance(value, dict):
        return {k: _in_language(v, language) for k, v in value.items()}
    if isinstance(value, list):
        return [_in_language(v, language) for v in value]
    return str(value) if isinstance(value, str) else value


def _strings() -> dict:
    """The texts the script shows itself, ``{language: {name: text}}``: score.js's (by name,
    with ``{fields}`` it fills in) and jupyterquiz's feedback (by its English text)."""
    keep = {k: "{" + k + "}" for k in ("right", "answered", "shown", "good", "seen", "wrong")}
    keep["percent"] = "{percent}"
    texts = {
        "retry": tr("Retry the questions I got wrong"),
        "reset": tr("Reset my tally"),
        "new": tr("New questions"),
        "score_one": tr(
            "Your score: {right} right of {answered} answered ({shown} question).", **keep
        ),
        "score_many": tr(
            "Your score: {right} right of {answered} answered ({shown} questions).", **keep
        ),
        "tally_none": tr(
            "Across your visits (kept in this browser only): {good} right of {seen} questions "
            "answered; {wrong} to retry.",
            **keep,
        ),
        "tally_one": tr(
            "Across your visits (kept in this browser only): {good} right of {seen} question "
            "answered ({percent}%); {wrong} to retry.",
            **keep,
        ),
        "tally_many": tr(
            "Across your visits (kept in this browser only): {good} right of {seen} questions "
            "answered ({percent}%); {wrong} to retry.",
            **keep,
        ),
        "Correct!": tr("Correct!"),
        "Correct": tr("Correct"),
        "Incorrect -- try again.": tr("Incorrect -- try again."),
        "Incorrect. Try again.": tr("Incorrect. Try again."),
        "Type numeric answer here:": tr("Type numeric answer here:"),
        "Type your answer here:": tr("Type your answer here:"),
    }
    return {lang: {k: v.in_language(lang) for k, v in texts.items()} for lang in LANGUAGES}


# jupyterquiz's own texts (string literals in its script), shown through NormsQuiz.t
_JQ_NAMES = (
    "Correct!",
    "Correct",
    "Incorrect -- try again.",
    "Incorrect. Try again.",
    "Type numeric answer here:",
    "Type your answer here:",
)
_JQ_TEXTS = re.compile('"(' + "|".join(re.escape(t) for t in _JQ_NAMES) + ')"')


# jupyterquiz (2.9.6) looks up the question class by "type" but then styles and scores a question by
# its number of correct options: one correct option gives the single-answer colour and radio
# behaviour even for "many_choice". A select-all question with one right answer would give itself
# away, so the type decides.
_MANY_CHOICE_PATCHES = [
    ("if (num_correct > 1) {", 'if (num_correct > 1 || qa.type == "many_choice") {'),
    (
        "this.fbDiv.dataset.numcorrect = numCorrect;",
        "this.fbDiv.dataset.numcorrect = numCorrect; "
        'this.fbDiv.dataset.many = (this.qa.type == "many_choice") ? 1 : 0;',
    ),
    (
        "if (fb.dataset.numcorrect <= 1) {",
        "if (fb.dataset.numcorrect <= 1 && fb.dataset.many != 1) {",
    ),
]


def _patch_js(js: str) -> str:
    """Remove jupyterquiz's MathJax-from-CDN fallback (it would also overwrite the page's MathJax),
    tolerate a MathJax that is configured but not loaded yet, and let ``many_choice`` decide how a
    question looks and is scored (see ``_MANY_CHOICE_PATCHES``)."""
    js = _MATHJAX_CDN_BLOCK.sub(_MATHJAX_WAIT, js)
    for old, new in _MANY_CHOICE_PATCHES:
        if js.count(old) != 1:
            warnings.warn(
                f"norms.quiz: jupyterquiz changed, cannot patch {old!r}; a select-all question "
                "with one correct option may look like a single-answer one",
                stacklevel=2,
            )
        js = js.replace(old, new)
    js = _EXTERNAL_SRC.sub("/* external load removed by norms.quiz */", js)
    js = js.replace("version[0] ==", "(version || '')[0] ==").replace(
        "v[0] ===", "(v || '')[0] ==="
    )
    js = js.replace(
        "} else {\n                MathJax.typeset([container]);",
        "} else if (MathJax.typeset) {\n                MathJax.typeset([container]);",
    )
    if "://" in js:
        warnings.warn(
            "norms.quiz: the jupyterquiz script still mentions a URL; check it loads nothing "
            "external",
            stacklevel=2,
        )
    return js


_SHOW_CALL = re.compile(r"show_questions\((questions\w+), (\w+)\);")
_SCORE_STYLE = (
    "<style>.nq-score{max-width:600px;margin:.5em auto 1em;font-size:.95em}"
    ".nq-buttons button{margin:.3em .5em 0 0;font:inherit;padding:2px 8px}</style>"
)


@functools.lru_cache(maxsize=1)
def _score_js() -> str:
    return files("norms.quiz").joinpath("score.js").read_text(encoding="utf-8")


def _js_string(text: str) -> str:
    """``text`` as a JavaScript string literal that is safe inside an HTML ``<script>``: no ``<``,
    ``>`` or ``&`` (so no ``</script>`` or ``<!--``), ASCII only."""
    literal = json.dumps(str(text), ensure_ascii=True)
    return literal.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _translate_js(js: str) -> str:
    """jupyterquiz's own texts through ``NormsQuiz.t``, so they follow the quiz's language."""
    if set(_JQ_TEXTS.findall(js)) != set(_JQ_NAMES):
        warnings.warn(
            "norms.quiz: jupyterquiz changed its feedback texts; some may stay English",
            stacklevel=3,
        )
    return _JQ_TEXTS.sub(r'NormsQuiz.t("\1")', js)


def _add_score(js: str, key: str, persist: bool, banks: str | None) -> str:
    """Let norms' score script (``score.js``) pick and show the questions, so it can score them,
    in the language of :func:`norms.i18n.js_language`. ``banks``: a JavaScript expression for
    ``{language: questions}`` when the output carries several languages (else jupyterquiz's
    own list)."""
    if len(_SHOW_CALL.findall(js)) != 1:
        warnings.warn(
            "norms.quiz: jupyterquiz changed, cannot add the score; the quiz shows no score",
            stacklevel=2,
        )
        return js

    def call(m):
        return (
            f"NormsQuiz.show({banks or m[1]}, '{m[2]}', show_questions, {_js_string(key)}, "
            f"{'true' if persist else 'false'}, {js_language()});"
        )

    strings = json.dumps(_strings(), ensure_ascii=False, sort_keys=True)
    head = f"{_score_js()}\nwindow.NormsQuiz.strings = {strings};\n"
    return head + _translate_js(_SHOW_CALL.sub(call, js))


def render(questions: list, *, key: str | None = None, persist: bool = False, **options) -> dict:
    """Run ``jupyterquiz.display_quiz`` on ``questions`` and return what it displays, cleaned:
    ``{"html": ..., "javascript": ..., "div_id": ...}``. ``options`` are display_quiz's
    (``num``, ``shuffle_answers``, ``colors``, ...). The container id is derived from the
    questions (in English), the options and ``key`` (not random, and not from anything shown
    before), so the output is the same on every run; to show the same questions twice on one
    page, give each a different ``key``.

    The texts of ``questions`` may be :class:`norms.i18n.Text`: the output then carries the
    questions in every language (in the reader's only, when one was set) and the script shows
    the page's. The quiz shows the reader's score (``score.js``); with ``persist=True`` it also
    keeps a tally across visits in the browser's localStorage (under ``key``), with a reset and
    a retry of the questions answered wrongly."""
    try:
        import jupyterquiz.dynamic.display as jq_display
    except ImportError as exc:  # an optional dependency: pip install "norms[quiz]"
        raise ImportError(
            "norms.quiz needs jupyterquiz to display quizzes: pip install jupyterquiz"
        ) from exc

    clean = _clean(questions)
    english = _in_language(clean, "en")
    chosen = explicit_language()
    shown = english if chosen is None else _in_language(clean, chosen)
    payload = json.dumps([english, sorted(options.items()), key], sort_keys=True, default=str)
    digest = hashlib.sha256(payload.encode()).hexdigest()
    captured = []
    saved_display, saved_random = jq_display.display, jq_display.random
    jq_display.display = lambda *objs, **kw: captured.extend(objs)
    jq_display.random = random.Random(digest)  # display_quiz draws its div id from here
    try:
        jq_display.display_quiz(shown, **options)
    finally:
        jq_display.display, jq_display.random = saved_display, saved_random
    html_out = "".join(o.data for o in captured if type(o).__name__ == "HTML")
    if html_out.count("<div") > html_out.count("</div>"):
        html_out += "</div>"  # jupyterquiz leaves its container open
    js_out = _patch_js("".join(o.data for o in captured if type(o).__name__ == "Javascript"))
    m = re.search(r'<div id="([A-Za-z0-9_]+)"', html_out)
    div_id = m.group(1) if m else None
    banks = None
    if chosen is None and div_id is not None:
        js_out, banks = _add_languages(js_out, div_id, clean)
    js_out = _add_score(js_out, key or div_id or digest, persist, banks)
    return {"html": _SCORE_STYLE + html_out, "javascript": js_out, "div_id": div_id}


def _add_languages(js: str, div_id: str, clean: list) -> tuple[str, str | None]:
    """Declare the questions in the other languages after jupyterquiz's (English) list;
    returns the script and the expression ``{"en": ..., "zh": ...}`` (``None`` if jupyterquiz
    changed and its list was not found)."""
    declaration = f"var questions{div_id}=" + json.dumps(_in_language(clean, "en")) + ";\n"
    if js.count(declaration) != 1:
        warnings.warn(
            "norms.quiz: jupyterquiz changed, cannot add the other languages; the quiz is "
            "English only",
            stacklevel=3,
        )
        return js, None
    others = ""
    banks = [f'"en": questions{div_id}']
    for language in LANGUAGES[1:]:
        name = f"questions{div_id}_{language}"
        listed = json.dumps(_in_language(clean, language), ensure_ascii=False)
        others += f"var {name}={listed};\n"
        banks.append(f'"{language}": {name}')
    return js.replace(declaration, declaration + others), "{" + ", ".join(banks) + "}"


def display_questions(
    questions: list, *, key: str | None = None, persist: bool = False, **options
) -> None:
    """Display ``questions`` (jupyterquiz dicts) in the notebook; see :func:`render`."""
    from IPython.display import HTML, Javascript, display

    out = render(questions, key=key, persist=persist, **options)
    display(HTML(out["html"]))
    display(Javascript(out["javascript"]))


def show(topic: str, n: int = 4, seed: int = 0, **options) -> None:
    """Display ``n`` questions on ``topic`` (e.g. ``norms.quiz.show("batchnorm")``). Works without a
    kernel on the built site: everything is in the cell's output."""
    display_questions(questions_for(topic, n, seed), key=f"{topic}:{n}:{seed}", **options)


def self_quiz(bank_size: int = 60, num: int = 5, seed: int = 0, topics=None, **options) -> None:
    """Embed a bank of ``bank_size`` generated questions; the browser shows a random ``num`` of them
    on each visit (reload the page, or re-run the cell, for new ones). Every option has feedback.
    The reader's tally is kept across visits in the browser (localStorage), with a reset and a
    retry of the questions answered wrongly.

    ``topics``: the bank draws from these topics only (names of :func:`norms.quiz.topics`; for
    the chapters a lecture covered, :func:`norms.quiz.topics_for_chapters`); ``None``: from
    every topic, i.e. the whole book."""
    key = f"self_quiz:{bank_size}:{seed}" + ("" if topics is None else ":" + ",".join(topics))
    display_questions(
        bank(seed, bank_size, topics=topics), key=key, num=num, persist=True, **options
    )
