"""Sphinx extension: fail the build on broken exercise markup, naming the file and the cell.

sphinx-exercise renders an exercise without a solution, or a ``solution-start`` whose
``solution-end`` is missing, without complaint (or with a warning that names only the
page). Before any page is read, this reads every notebook of the book with
``tools/exercises.py`` and stops the build at the first exercise without a label, a
difficulty or a solution, at an unbalanced solution marker, and at an exercise still
written in the old convention (run ``tools/convert_exercises.py``).

It also makes sphinx-exercise's ``hide_solutions`` (the student edition, ``make student``)
work with gated solutions: sphinx-exercise 1.2.1 then drops the ``solution-start`` node
only, so the solution's code cells stay on the page and the orphaned ``solution-end``
node crashes the HTML writer. Here ``solution-start`` leaves a marker, and every node from
the marker through its ``solution-end`` is removed when the page is read.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

_TOOLS = Path(__file__).resolve().parent.parent


def _exercises_module():
    spec = importlib.util.spec_from_file_location("book_exercises", _TOOLS / "exercises.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _check_notebooks(app, env, docnames):
    import nbformat

    ex = _exercises_module()
    root = Path(app.srcdir)
    for docname in sorted(env.found_docs):
        path = Path(env.doc2path(docname))
        if path.suffix != ".ipynb":
            continue
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        nb = nbformat.read(path, as_version=4)
        old = ex.old_style_exercises(nb)
        if old:
            raise ExtensionError(
                f"{shown} cell {old[0]}: an exercise in the old admonition convention; "
                "run .venv/bin/python tools/convert_exercises.py"
            )
        try:
            ex.check(nb, shown)
        except ex.ExerciseError as exc:
            raise ExtensionError(str(exc)) from None


class _hidden_solution(nodes.Element):
    """Where a gated solution started, in a build with hide_solutions."""


def _hide_gated_solutions(app, config):
    if not config.hide_solutions:
        return
    from sphinx_exercise.directive import SolutionStartDirective

    class HiddenSolutionStart(SolutionStartDirective):
        def run(self):
            super().run()  # registers the gate; returns nothing under hide_solutions
            return [_hidden_solution()]

    app.add_directive("solution-start", HiddenSolutionStart, override=True)


def _drop_hidden_solutions(app, doctree):
    from sphinx_exercise.nodes import solution_end_node

    for marker in list(doctree.findall(_hidden_solution)):
        parent = marker.parent
        start = parent.index(marker)
        end = next(
            (
                i
                for i in range(start + 1, len(parent.children))
                if isinstance(parent.children[i], solution_end_node)
            ),
            None,
        )
        if end is None:
            raise ExtensionError(f"{app.env.docname}: a solution-start without its solution-end")
        del parent.children[start : end + 1]


def _skip(self, node):
    raise nodes.SkipNode


def setup(app):
    app.connect("env-before-read-docs", _check_notebooks)
    app.add_node(_hidden_solution, html=(_skip, None), latex=(_skip, None), text=(_skip, None))
    app.connect("config-inited", _hide_gated_solutions, priority=900)
    app.connect("doctree-read", _drop_hidden_solutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
