"""Course material (issue 15): the exercise converter, the build-time exercise check,
the student edition and the otter-grader assignments."""

from __future__ import annotations

import sys

import nbformat
import pytest

from .notebooks import ROOT, notebooks, read

sys.path.insert(0, str(ROOT / "tools"))
import convert_exercises  # noqa: E402
import exercises  # noqa: E402

OLD = [
    "# T\n\nText.",
    "## Exercises\n\n:::{admonition} Exercise 1: a title\n*Core.* Do it.\n:::",
    ("code", "# Solution.\nx = 1", {"tags": ["hide-cell"], "jupyter": {"source_hidden": True}}),
    ":::{admonition} Exercise 2\n*Challenge.* And this.\n\n```python\ny = 2\n```\n:::",
    ("code", "# Solution.\ny = 2", {"tags": ["hide-cell"]}),
    ("code", "assert y == 2", {"tags": ["hide-input"]}),
    "Closing words.",
]


def make(cells):
    out = []
    for c in cells:
        if isinstance(c, tuple):
            cell = nbformat.v4.new_code_cell(c[1])
            cell.metadata.update(c[2])
        else:
            cell = nbformat.v4.new_markdown_cell(c)
        out.append(cell)
    return nbformat.v4.new_notebook(cells=out)


def test_converter_turns_old_exercises_into_sphinx_exercise():
    nb = make(OLD)
    assert convert_exercises.convert(nb, "book/t.ipynb") is True
    found = exercises.check(nb, "book/t.ipynb")
    assert [(e.label, e.difficulty, e.solution_kind) for e in found] == [
        ("ex-t-1", "core", "gated"),
        ("ex-t-2", "challenge", "gated"),
    ]
    assert nb.cells[1].source.startswith(
        "## Exercises\n\n:::{exercise} a title\n:label: ex-t-1\n:class: core\n"
    )
    assert "```python\ny = 2\n```" in nb.cells[5].source  # a code fence inside the task survives
    sol = nb.cells[3]
    assert sol.source == "# Solution.\nx = 1" and sol.metadata["tags"] == ["solution"]
    assert sol.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    assert (
        nb.cells[2].source.startswith(":::{solution-start} ex-t-1\n")
        and ":class: dropdown" in nb.cells[2].source
    )
    assert nb.cells[4].source == ":::{solution-end}\n:::"
    assert found[1].solution_cells == [
        6,
        7,
        8,
        9,
    ]  # a solution of two hidden code cells stays whole
    assert nb.cells[10].source == "Closing words."
    assert exercises.old_style_exercises(nb) == []


def test_converter_is_idempotent_on_converted_notebooks():
    nb = make(OLD)
    convert_exercises.convert(nb, "book/t.ipynb")
    once = nbformat.writes(nb)
    assert convert_exercises.convert(nb, "book/t.ipynb") is False
    assert nbformat.writes(nb) == once


def test_every_book_notebook_is_converted():
    stale = [p.name for p in notebooks() if convert_exercises.convert(read(p), p.name)]
    assert stale == [], f"run tools/convert_exercises.py on {stale}"


@pytest.mark.parametrize(
    "cells, message",
    [
        ([OLD[1]], "book/t.ipynb cell 0: exercise 'ex-t-1' has no solution"),
        ([OLD[1], "words"], "book/t.ipynb cell 0: exercise 'ex-t-1' has no solution"),
        (
            [OLD[1].replace("*Core.* ", ""), OLD[2]],
            "book/t.ipynb cell 0: 'Exercise 1: a title' does not start with its difficulty",
        ),
    ],
)
def test_converter_names_file_and_cell_of_a_broken_exercise(cells, message):
    with pytest.raises(exercises.ExerciseError, match=message):
        convert_exercises.convert(make(cells), "book/t.ipynb")


NEW_EXERCISE = ":::{exercise}\n:label: ex-t-1\n:class: core\n\n*Core.* Do.\n:::"


class _Env:
    def __init__(self, path):
        self.found_docs, self.path = {"book/t"}, path

    def doc2path(self, docname):
        return str(self.path)


class _App:
    def __init__(self, srcdir):
        self.srcdir = srcdir


@pytest.mark.parametrize(
    "cells, message",
    [
        ([NEW_EXERCISE], "book/t.ipynb cell 0: exercise 'ex-t-1' has no solution"),
        (
            [
                NEW_EXERCISE,
                ":::{solution-start} ex-t-1\n:class: dropdown\n:::",
                ("code", "x = 1", {}),
            ],
            "book/t.ipynb cell 1: solution-start of 'ex-t-1' has no solution-end",
        ),
        ([OLD[1], OLD[2]], "book/t.ipynb cell 0: an exercise in the old admonition convention"),
    ],
)
def test_build_fails_naming_file_and_cell(tmp_path, cells, message):
    from sphinx.errors import ExtensionError

    sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
    import exercise_check

    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "t.ipynb"
    nbformat.write(make(cells), path)
    with pytest.raises(ExtensionError, match=message):
        exercise_check._check_notebooks(_App(tmp_path), _Env(path), [])
    nbformat.write(make(OLD), path)
    nb = read(path)
    convert_exercises.convert(nb, "book/t.ipynb")
    nbformat.write(nb, path)
    exercise_check._check_notebooks(_App(tmp_path), _Env(path), [])  # a well-formed notebook passes


def test_instructors_page_is_executed_on_every_build():
    """Its tables are computed from the other chapters; the execution cache, keyed on the
    page's own code, would serve stale ones."""
    nb = read(ROOT / "book" / "instructors.ipynb")
    assert nb.metadata.get("mystnb", {}).get("execution_mode") == "force"


@pytest.mark.parametrize(
    "cells",
    [
        [NEW_EXERCISE, ":::{solution} ex-t-1\nA.\n:::\n\n## Quiz"],
        [
            NEW_EXERCISE + "\n\nResults, then the solution:\n\n:::{solution-start} ex-t-1\n:::",
            ("code", "x = 1", {}),
            ":::{solution-end}\n:::",
        ],
        [
            NEW_EXERCISE,
            ":::{solution-start} ex-t-1\n:::",
            ("code", "x = 1", {}),
            ":::{solution-end}\n:::\n\n:::{exercise}\n:label: ex-t-2\n:::",
        ],
    ],
)
def test_a_solution_directive_shares_its_cell_with_nothing(cells):
    """The student edition drops a solution's cells whole: text in the same cell (a result,
    the next exercise, a heading) would vanish from it."""
    with pytest.raises(exercises.ExerciseError, match="must be alone in its markdown cell"):
        exercises.exercises(make(cells), "book/t.ipynb")
