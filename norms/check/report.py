"""The report a reader sees: plain text and HTML, in the reader's language."""

from __future__ import annotations

import html as _html
from dataclasses import dataclass, field

from norms.i18n import CSS, LANGUAGES, Text, forms, html, join, tr

from .helpers import PLACES_SEP


@dataclass
class Report:
    """Result of :func:`grade`.  ``ok`` is True when no problem was found.

    Its messages are :func:`norms.i18n.tr` texts: ``str(report)`` is in the reader's language
    (:func:`norms.get_language`), and the HTML of a stored output carries every language (the
    page shows the one of its ``<html lang>``)."""

    candidate: str
    reference: str
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    checks: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def codes(self) -> list:
        return [p.code for p in self.problems]

    def __contains__(self, code):
        return code in self.codes

    def _headline(self) -> Text:
        if self.ok:
            return tr(
                "✓ {candidate} behaves like {reference} ({n} checks passed).",
                candidate=self.candidate,
                reference=self.reference,
                n=len(self.checks),
            )
        n = len(self.problems)
        if n == 1:
            return tr(
                "✗ {candidate} differs from {reference}: {n} problem.",
                candidate=self.candidate,
                reference=self.reference,
                n=n,
            )
        return tr(
            "✗ {candidate} differs from {reference}: {n} problems.",
            candidate=self.candidate,
            reference=self.reference,
            n=n,
        )

    def text(self) -> Text:
        """The report as plain text, in every language (``str(report)``: the reader's)."""
        lines = [self._headline()]
        for i, p in enumerate(self.problems, 1):
            lines.append(f"  {i}. [{p.code}] " + p.text())
        for note in self.notes:
            lines.append("  " + tr("note: {note}", note=note))
        return join(lines, "\n")

    def __str__(self):
        return str(self.text())

    __repr__ = __str__

    def _repr_html_(self):
        color = "#1a7f37" if self.ok else "#b42318"
        parts = [
            f'<div class="norms-grade" style="border-left:4px solid {color};padding:0.4em 0.8em;">',
            CSS,  # shows the page's language (a stored output carries both)
            f'<p style="margin:0.2em 0;font-weight:bold;color:{color}">'
            f"{html(self._headline())}</p>",
        ]
        if self.problems:
            parts.append('<ol style="margin:0.2em 0 0.2em 1.2em;padding:0">')
            parts.extend(_problem_html(p) for p in self.problems)
            parts.append("</ol>")
        if self.notes:
            parts.append('<ul style="margin:0.2em 0 0.2em 1.2em;padding:0;opacity:0.8">')
            parts.extend(f"<li>{html(tr('note: {note}', note=n))}</li>" for n in self.notes)
            parts.append("</ul>")
        if self.ok and self.checks:
            parts.append(f"<details><summary>{html(tr('checks'))}</summary><ul>")
            parts.extend(f"<li>{html(c)}</li>" for c in self.checks)
            parts.append("</ul></details>")
        parts.append("</div>")
        return "".join(parts)


def _problem_html(p) -> str:
    where = ""
    if p.where:
        shown = join(p.where[:3] + (["…"] if len(p.where) > 3 else []), PLACES_SEP)
        where = f" <small>{html(tr('(seen at: {shown})', shown=shown))}</small>"
    return (
        f"<li><b>{html(p.title)}</b>{where}<br>{html(p.detail)}<br>"
        f"<i>{html(tr('Fix:'))}</i> {html(p.fix)} "
        f"<code style='opacity:0.6'>{_html.escape(p.code)}</code></li>"
    )


#: how many characters a line of :func:`show` holds, per language; Chinese is not wrapped
#: (it has no spaces to break at: the page wraps it)
SHOW_WIDTH = {"en": 78, "zh": None}


def _wrap(text: str, language: str, first: str = "", rest: str = "    ") -> str:
    import textwrap

    width = SHOW_WIDTH.get(language, 78)
    if width is None:
        return first + text
    return textwrap.fill(text, width, initial_indent=first, subsequent_indent=rest)


def show_lines(report: Report, checks: bool = False) -> Text:
    """What :func:`show` prints, in every language: ``ok``, then each problem (its code,
    what was seen, the fix) and each note, wrapped; with ``checks=True`` the checks that
    passed, one a line, instead."""
    shown = {}
    for language in LANGUAGES:
        if checks:
            shown[language] = "\n".join(forms(c)[language] for c in report.checks)
            continue
        lines = [f"ok: {report.ok}"]
        for p in report.problems:
            said = tr("{title}. {detail}", title=p.title, detail=p.detail).forms[language]
            lines.append(_wrap(f"[{p.code}] {said}", language))
            lines.append(_wrap(tr("Fix: {fix}", fix=p.fix).forms[language], language, "    "))
        for note in report.notes:
            lines.append(_wrap(tr("note: {note}", note=note).forms[language], language))
        shown[language] = "\n".join(lines)
    return Text(shown)


def show(report: Report, checks: bool = False) -> None:
    """Print a report as the chapter "Grade your own layer" reads it: whether it passed, then
    each problem (code, what was seen, how to fix it) and note; with ``checks=True`` the
    checks that passed. In the reader's language; a stored output keeps both."""
    from norms.i18n import say

    say(show_lines(report, checks))
