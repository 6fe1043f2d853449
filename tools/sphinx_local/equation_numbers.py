"""Sphinx extension: equation numbers restart in every chapter.

With ``numfig`` and ``math_numfig`` (jupyter-book's settings) and a table of contents whose
chapters are not numbered, Sphinx counts labelled display equations across the whole
book, in the order of the table of contents: a chapter's only equation was "(79)". After
Sphinx assigns its numbers, each page's equations are numbered anew from (1), in the
order they come on the page; references to them (``{eq}`label```) read the same numbers.
A page inside a numbered part of a table of contents ("3.1") keeps Sphinx's numbers.
"""

from __future__ import annotations

FIGTYPE = "displaymath"


def per_page(fignumbers: dict) -> dict:
    """``env.toc_fignumbers`` with each page's unsectioned equation numbers counted from 1."""
    for numbers in fignumbers.values():
        equations = numbers.get(FIGTYPE)
        if not equations or any(len(n) != 1 for n in equations.values()):
            continue  # none, or numbered by section: Sphinx's own numbers already restart
        ordered = sorted(equations, key=lambda label: equations[label])
        numbers[FIGTYPE] = {label: (i,) for i, label in enumerate(ordered, start=1)}
    return fignumbers


def _renumber(app, env):
    per_page(env.toc_fignumbers)
    return []


def setup(app):
    # after sphinx.environment.collectors.toctree (priority 500) assigns the numbers
    app.connect("env-get-updated", _renumber, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
