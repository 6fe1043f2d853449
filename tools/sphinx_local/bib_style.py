"""Sphinx extension: a bibliography whose labels read like the citations in the text.

The chapters cite author-year (``bibtex_reference_style: author_year``), so the text
shows "[Ioffe and Szegedy, 2015]". pybtex's built-in styles label the list
"[IS15]" or "[1]" instead, and the reader cannot match the two. This registers the
pybtex style ``authoryear``: plain's formatting and sorting (by author, year,
title), with labels "Ioffe and Szegedy, 2015" and "Santurkar et al., 2018".
"""

from __future__ import annotations

import codecs

import latexcodec  # noqa: F401  (registers the "ulatex" codec; a dependency of pybtex)
from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle

NAME = "authoryear"


def _last_name(person) -> str:
    """A person's last name(s) as plain text: "M{\\k{a}}dry" becomes "Mądry"."""
    latex = " ".join(person.prelast_names + person.last_names)
    return codecs.decode(latex, "ulatex").replace("{", "").replace("}", "")


def label(entry) -> str:
    """ "A, year", "A and B, year" or "A et al., year", as the text cites it."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in people]
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def labels(entries) -> list[str]:
    """:func:`label` of every entry, in order; entries that would share a label get "a", "b",
    ... after the year (Brock et al., 2021a and 2021b), so every label is unique."""
    base = [label(entry) for entry in entries]
    seen: dict[str, int] = {}
    out = []
    for text in base:
        if base.count(text) > 1:
            seen[text] = seen.get(text, 0) + 1
            text += "abcdefghijklmnopqrstuvwxyz"[seen[text] - 1]
        out.append(text)
    return out


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        yield from labels(list(sorted_entries))


class AuthorYearStyle(PlainStyle):
    default_label_style = NAME


def setup(app):
    register_plugin("pybtex.style.labels", NAME, AuthorYearLabels)
    register_plugin("pybtex.style.formatting", NAME, AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
