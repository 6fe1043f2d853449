"""The reader's language for the text norms computes: quizzes, explorer labels, the grader's
advice, the sentences a chapter prints.

English is the source. A message is a template with named fields, written once::

    tr("Measured on a {width}-wide network: {rate:.3f} per layer.", width=256, rate=r)

and the Chinese catalog (``norms/locale/zh_CN/LC_MESSAGES/``, one ``.po`` per module, kept by
``make translations`` like the book's catalogs) holds each template's translation, with the
same fields. :func:`tr` returns a :class:`Text`: a ``str`` in the current language (so
``print`` and string operations work as before) that also carries every language's
rendering, so that a stored output can hold both and the page shows the one of its
``<html lang>``.

The language is English unless :func:`set_language` (or the environment variable
``NORMS_LANG``) says otherwise::

    >>> import norms
    >>> text = tr("higher in {k} of {n} seeds", k=5, n=5)
    >>> text, sorted(text.forms)
    ('higher in 5 of 5 seeds', ['en', 'zh'])
    >>> norms.set_language("zh-CN")  # from now on, str(tr(...)) is the Chinese
    >>> norms.set_language(None)     # back to the default: NORMS_LANG, else English

Stored outputs. :func:`html` writes a message for a web page or a notebook: both languages,
each in a ``<span class="norms-lang" lang=...>`` that :data:`CSS` shows or hides by the
page's ``<html lang>``, unless a language was set explicitly (then that language only).
Scripts read the language from :func:`js_language`. The Chinese notebooks are generated
from the English ones by :func:`for_notebook`, which keeps the Chinese half of every such
output.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import warnings
from pathlib import Path

#: The languages norms speaks: English (the source) and Chinese.
LANGUAGES = ("en", "zh")
#: The environment variable read when no language was set: ``NORMS_LANG=zh``.
ENV = "NORMS_LANG"
#: Where each language's catalog is (English has none: it is the source).
LOCALE = Path(__file__).resolve().parent / "locale"
_CATALOG_LANG = {"zh": "zh_CN"}
_HTML_LANG = {"en": "en", "zh": "zh-CN"}
_ALIASES = {
    "en": "en",
    "en_us": "en",
    "en_gb": "en",
    "english": "en",
    "zh": "zh",
    "zh_cn": "zh",
    "zh_hans": "zh",
    "zh_sg": "zh",
    "chinese": "zh",
    "中文": "zh",
}

_chosen: str | None = None  # set by set_language; None: the environment, else English


def _normalize(language: str, where: str) -> str:
    key = str(language).strip().lower().replace("-", "_")
    if key in _ALIASES:
        return _ALIASES[key]
    warnings.warn(
        f"norms: unknown language {language!r} ({where}); norms speaks "
        f"{', '.join(LANGUAGES)}: using English",
        stacklevel=3,
    )
    return "en"


def set_language(language: str | None) -> None:
    """Speak ``language`` from now on: ``"en"`` or ``"zh"`` (``"zh-CN"``, ``"zh_CN"`` too).
    An unknown language gives a warning and English; ``None`` goes back to the default
    (``NORMS_LANG``, else English, and stored outputs in both languages)."""
    global _chosen
    _chosen = None if language is None else _normalize(language, "set_language")


def get_language() -> str:
    """The current language: the one set by :func:`set_language`, else ``NORMS_LANG``, else
    ``"en"``."""
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV)
    return _normalize(env, f"the environment variable {ENV}") if env else "en"


def explicit_language() -> str | None:
    """The language the reader chose (:func:`set_language` or ``NORMS_LANG``), or ``None``
    when none was chosen: stored outputs then carry every language."""
    if _chosen is not None:
        return _chosen
    return get_language() if os.environ.get(ENV) else None


# -- catalogs -------------------------------------------------------------------------


def catalog_dir(language: str) -> Path:
    """The folder of ``language``'s catalogs: one ``.po`` file per module of norms
    (``norms.quiz.why.po``)."""
    return LOCALE / _CATALOG_LANG[language] / "LC_MESSAGES"


_PO_LINE = re.compile(r'^(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+(".*")\s*$')


def read_po(path: Path) -> dict[str, str]:
    """The translated, non-fuzzy entries of a gettext catalog, ``{msgid: msgstr}`` (a small
    reader, so that norms needs no gettext package at run time)."""
    entries: dict[str, str] = {}
    fields: dict[str, str] = {}
    fuzzy = False
    current = None

    def flush():
        nonlocal fuzzy
        if fields.get("msgid") and fields.get("msgstr") and not fuzzy:
            entries[fields["msgid"]] = fields["msgstr"]
        fields.clear()
        fuzzy = False

    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        m = _PO_LINE.match(line)
        starts_entry = line.startswith("#") or (m is not None and m[1] in ("msgctxt", "msgid"))
        if starts_entry and current == "msgstr":  # the previous entry is complete
            flush()
            current = None
        if line.startswith("#,") and "fuzzy" in line:
            fuzzy = True
        elif m is not None:
            current = "msgstr" if m[1].startswith("msgstr") else m[1]
            fields[current] = ast.literal_eval(m[2])
        elif line.startswith('"') and current:
            fields[current] += ast.literal_eval(line)
    flush()
    return entries


@functools.lru_cache(maxsize=None)
def catalog(language: str) -> dict[str, str]:
    """``language``'s translations ``{English template: translation}`` (empty for English)."""
    if language == "en":
        return {}
    table: dict[str, str] = {}
    for path in sorted(catalog_dir(language).glob("*.po")):
        table |= read_po(path)
    return table


# -- messages -------------------------------------------------------------------------


class Text(str):
    """A message in every language: the ``str`` is the current language's (when it was
    made), :attr:`forms` maps each language to its rendering."""

    forms: dict[str, str]

    def __new__(cls, forms: dict[str, str]):
        self = super().__new__(cls, forms.get(get_language(), forms["en"]))
        self.forms = dict(forms)
        return self

    def __getnewargs__(self):
        return (self.forms,)

    def in_language(self, language: str) -> str:
        """This message in ``language`` (``"en"`` or ``"zh"``)."""
        return self.forms.get(language, self.forms["en"])

    def __add__(self, other):
        return join([self, other], "")

    def __radd__(self, other):
        return join([other, self], "")


def _in(value, language: str):
    return value.in_language(language) if isinstance(value, Text) else value


def tr(template: str, /, **fields) -> Text:
    """``template`` (an English string literal with ``{named}`` fields, as ``str.format``
    takes them) in every language, with ``fields`` filled in. A field that is itself a
    :class:`Text` is filled in with its own rendering in each language. A template without a
    translation stays English in every language (``make test`` fails on it)."""
    forms = {}
    for language in LANGUAGES:
        pattern = catalog(language).get(template, template)
        values = {k: _in(v, language) for k, v in fields.items()}
        forms[language] = pattern.format(**values)
    return Text(forms)


def join(parts, sep: str | Text = " ") -> Text:
    """``sep.join(parts)`` in every language (parts and ``sep`` may be :class:`Text` or
    ``str``; a ``str`` is the same in every language)."""
    parts = list(parts)
    return Text({lang: _in(sep, lang).join(str(_in(p, lang)) for p in parts) for lang in LANGUAGES})


def forms(value) -> dict[str, str]:
    """``{language: text}`` of a :class:`Text`, or of a plain ``str`` (the same in each)."""
    return {lang: str(_in(value, lang)) for lang in LANGUAGES}


# -- stored outputs -------------------------------------------------------------------

#: Shows the page's language and hides the other (``<html lang="zh-CN">`` on the Chinese
#: site); include it once in an output that uses :func:`html`.
CSS = (
    "<style>.norms-lang[lang=zh-CN]{display:none}"
    "html[lang|=zh] .norms-lang[lang=en]{display:none}"
    "html[lang|=zh] .norms-lang[lang=zh-CN]{display:inline}</style>"
)
_END = "<!--/norms-lang-->"
_SPAN = re.compile(
    r'<span class="norms-lang" lang="(?P<lang>[A-Za-z-]+)">(?P<body>.*?)</span>' + _END, re.S
)
#: In a script, the placeholder :func:`for_notebook` replaces: see :func:`js_language`.
JS_AUTO = "norms-lang:auto"


def html(value, escape: bool = True) -> str:
    """``value`` (a :class:`Text` or ``str``) as HTML: one ``span`` per language, each
    shown on the pages of its language (:data:`CSS`); only the chosen language when the
    reader set one. ``escape=False`` when the text is HTML already."""
    import html as _html

    chosen = explicit_language()
    out = []
    for language, text in forms(value).items():
        if chosen is not None and language != chosen:
            continue
        body = _html.escape(text, quote=False) if escape else text
        if chosen is not None:
            return body
        out.append(f'<span class="norms-lang" lang="{_HTML_LANG[language]}">{body}</span>{_END}')
    return "".join(out)


def js_language() -> str:
    """A JavaScript expression for the language a script should show: the one the reader
    set in Python, else (stored outputs) the page's ``<html lang>``: ``"zh"`` or ``"en"``."""
    chosen = explicit_language()
    marker = f"norms-lang:{chosen}" if chosen else JS_AUTO
    return (
        f'(function(m){{if(m.slice(11)!=="auto")return m.slice(11);'
        f'var l=(document.documentElement.lang||"").toLowerCase();'
        f'return l.indexOf("zh")===0?"zh":"en";}})("{marker}")'
    )


def for_notebook(text: str, language: str) -> str:
    """An output of the English notebook as ``language``'s notebook stores it: the other
    languages' spans removed, scripts told the language. Applied to every text output when
    the Chinese notebooks are generated (``tools/i18n.py notebooks``)."""
    keep = _HTML_LANG[language]

    def one(m):
        return m["body"] if m["lang"] == keep else ""

    return _SPAN.sub(one, text).replace(JS_AUTO, f"norms-lang:{language}")


class Said:
    """A sentence a chapter prints (:func:`say`): plain text in the current language, and
    HTML in both languages for the page."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return str(_in(self.value, get_language()))

    def _repr_html_(self) -> str:
        return f'{CSS}<pre class="norms-said">{html(self.value)}</pre>'


def say(*parts, sep: str = " ") -> None:
    """Print a sentence that carries a chapter's lesson, in the reader's language: like
    ``print(*parts)``, but a stored output keeps every language (parts made with :func:`tr`)."""
    from IPython.display import display

    display(Said(join(parts, sep)))
