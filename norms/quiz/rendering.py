"""Rendering through jupyterquiz, deterministic and without external loads."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import warnings
from importlib.resources import files

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


def _add_score(js: str, key: str, persist: bool) -> str:
    """Let norms' score script (``score.js``) pick and show the questions, so it can score them."""
    if len(_SHOW_CALL.findall(js)) != 1:
        warnings.warn(
            "norms.quiz: jupyterquiz changed, cannot add the score; the quiz shows no score",
            stacklevel=2,
        )
        return js
    call = (
        r"NormsQuiz.show(\1, '\2', show_questions, "
        + _js_string(key).replace("\\", "\\\\")
        + (", true);" if persist else ", false);")
    )
    return _score_js() + "\n" + _SHOW_CALL.sub(call, js)


def render(questions: list, *, key: str | None = None, persist: bool = False, **options) -> dict:
    """Run ``jupyterquiz.display_quiz`` on ``questions`` and return what it displays, cleaned:
    ``{"html": ..., "javascript": ..., "div_id": ...}``. ``options`` are display_quiz's
    (``num``, ``shuffle_answers``, ``colors``, ...). The container id is derived from the
    questions, the options and ``key`` (not random, and not from anything shown before), so
    the output is the same on every run; to show the same questions twice on one page, give
    each a different ``key``.

    The quiz shows the reader's score (``score.js``); with ``persist=True`` it also keeps a
    tally across visits in the browser's localStorage (under ``key``), with a reset and a
    retry of the questions answered wrongly."""
    try:
        import jupyterquiz.dynamic.display as jq_display
    except ImportError as exc:  # an optional dependency: pip install "norms[quiz]"
        raise ImportError(
            "norms.quiz needs jupyterquiz to display quizzes: pip install jupyterquiz"
        ) from exc

    qs = _clean(questions)
    payload = json.dumps([qs, sorted(options.items()), key], sort_keys=True, default=str)
    digest = hashlib.sha256(payload.encode()).hexdigest()
    captured = []
    saved_display, saved_random = jq_display.display, jq_display.random
    jq_display.display = lambda *objs, **kw: captured.extend(objs)
    jq_display.random = random.Random(digest)  # display_quiz draws its div id from here
    try:
        jq_display.display_quiz(qs, **options)
    finally:
        jq_display.display, jq_display.random = saved_display, saved_random
    html_out = "".join(o.data for o in captured if type(o).__name__ == "HTML")
    if html_out.count("<div") > html_out.count("</div>"):
        html_out += "</div>"  # jupyterquiz leaves its container open
    js_out = _patch_js("".join(o.data for o in captured if type(o).__name__ == "Javascript"))
    m = re.search(r'<div id="([A-Za-z0-9_]+)"', html_out)
    div_id = m.group(1) if m else None
    js_out = _add_score(js_out, key or div_id or digest, persist)
    return {"html": _SCORE_STYLE + html_out, "javascript": js_out, "div_id": div_id}


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
