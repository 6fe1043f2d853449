"""Sphinx extension: fail the build on broken exercise markup, naming the file and the cell.

sphinx-exercise renders an exercise without a solution, or a ``solution-start`` whose
``solution-end`` is missing, without complaint (or with a warning that names only the
page). Before any page is read, this reads every notebook of the book with
``tools/exercises.py`` and stops the build at the first exercise without a label, a
difficulty or a solution, at an unbalanced solution marker, and at an exercise still
written in the old convention (run ``tools/convert_exercises.py``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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
            raise ExtensionError(f"{shown} cell {old[0]}: an exercise in the old admonition convention; "
                                 "run .venv/bin/python tools/convert_exercises.py")
        try:
            ex.check(nb, shown)
        except ex.ExerciseError as exc:
            raise ExtensionError(str(exc)) from None


def setup(app):
    app.connect("env-before-read-docs", _check_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
