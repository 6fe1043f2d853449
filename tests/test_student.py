"""The student edition (``make student``): no solution's code or output in any student page
or notebook, and every student notebook ran top to bottom without the solutions.

These check what ``make student`` built (``make test`` builds it first); they fail, not
skip, when it is missing or older than the chapters."""

from __future__ import annotations

import html
import re
import sys

import nbformat
import pytest

from .notebooks import ROOT, read

sys.path.insert(0, str(ROOT / "tools"))
import exercises  # noqa: E402
import student  # noqa: E402

pytestmark = pytest.mark.courses

OUT = ROOT / "_build" / "student"
CHAPTERS = student.chapters()


def built(path):
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: run `make student` first")
    stale = [c.name for c in CHAPTERS if c.stat().st_mtime > path.stat().st_mtime]
    if stale:
        pytest.fail(f"{path.relative_to(ROOT)} is older than {stale}: run `make student`")
    return path


def fingerprints(nb, path) -> tuple[list[str], list[str]]:
    """Lines of solution code, and lines of solution output, that appear nowhere else in the
    notebook: if one of them is in a student page or notebook, a solution leaked."""
    inside = exercises.solution_cells(nb, path)
    elsewhere = "\n".join(
        c.source + "\n" + "\n".join(str(o) for o in c.get("outputs", []))
        for i, c in enumerate(nb.cells)
        if i not in inside
    )
    code, outputs = [], []
    for i in sorted(inside):
        cell = nb.cells[i]
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            line = line.strip()
            if len(line) >= 25 and line not in elsewhere and not line.startswith("#"):
                code.append(line)
        for out in cell.get("outputs", []):
            text = out.get("text", "") or out.get("data", {}).get("text/plain", "")
            for line in (text if isinstance(text, str) else "".join(text)).splitlines():
                line = line.strip()
                if len(line) >= 20 and line not in elsewhere:
                    outputs.append(line)
    return code, outputs


def visible_text(page: str) -> str:
    """The text of an HTML page, entities decoded and tags dropped (code spans are split in
    tags)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def with_solutions():
    return [c for c in CHAPTERS if exercises.exercises(read(c), c.name)]


@pytest.mark.parametrize("chapter", with_solutions(), ids=lambda p: p.stem)
def test_no_solution_in_the_student_page(chapter):
    page = built(OUT / "html" / "book" / f"{chapter.stem}.html").read_text()
    text = visible_text(page)
    code, outputs = fingerprints(read(chapter), chapter.name)
    assert code, f"{chapter.name}: no solution line to look for (the check would prove nothing)"
    full = ROOT / "_build" / "html" / "book" / f"{chapter.stem}.html"
    if (
        full.exists() and full.stat().st_mtime > chapter.stat().st_mtime
    ):  # the reader's site shows them
        assert any(line in visible_text(full.read_text()) for line in code)
    assert [line for line in code + outputs if line in text] == []
    assert 'class="solution' not in page


@pytest.mark.parametrize("chapter", with_solutions(), ids=lambda p: p.stem)
def test_no_solution_in_the_student_notebook(chapter):
    nb = nbformat.read(built(OUT / "notebooks" / chapter.name), as_version=4)
    code, outputs = fingerprints(read(chapter), chapter.name)
    everything = "\n".join(
        c.source + "\n" + "\n".join(str(o) for o in c.get("outputs", [])) for c in nb.cells
    )
    assert [line for line in code + outputs if line in everything] == []
    assert not [c for c in nb.cells if c.cell_type == "markdown" and "{solution" in c.source]
    labels = [e.label for e in exercises.exercises(read(chapter), chapter.name)]
    blanks = [c.source for c in nb.cells if "your-solution" in c.metadata.get("tags", [])]
    assert len(blanks) == len(labels), "each gated solution becomes one empty cell for the student"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_ran_top_to_bottom(chapter):
    """make student executed it anew without the solutions: every code cell ran once, in
    order, with no error that the chapter does not mean to show."""
    nb = nbformat.read(built(OUT / "notebooks" / chapter.name), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    errors = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        and any(o.output_type == "error" for o in c.outputs)
        and "raises-exception" not in c.metadata.get("tags", [])
    ]
    assert errors == []


def test_strip_removes_solutions_and_keeps_the_rest():
    cells = [
        nbformat.v4.new_markdown_cell("# T"),
        nbformat.v4.new_markdown_cell(
            ":::{exercise}\n:label: ex-t-1\n:class: core\n\n*Core.* Do.\n:::"
        ),
        nbformat.v4.new_markdown_cell(":::{solution-start} ex-t-1\n:class: dropdown\n:::"),
        nbformat.v4.new_code_cell("secret = 42"),
        nbformat.v4.new_markdown_cell(":::{solution-end}\n:::"),
        nbformat.v4.new_code_cell("print('after')"),
    ]
    cells[3].outputs = [nbformat.v4.new_output("stream", text="42\n")]
    out = student.strip(nbformat.v4.new_notebook(cells=cells), "book/t.ipynb")
    sources = [c.source for c in out.cells]
    assert "secret = 42" not in "\n".join(sources) and "solution-start" not in "\n".join(sources)
    assert sources[0] == "# T" and sources[-1] == "print('after')"
    assert sources[2] == student.YOUR_SOLUTION.format(label="ex-t-1")
    assert all(not c.get("outputs") for c in out.cells if c.cell_type == "code")


def test_a_cell_that_needs_a_solution_stops_the_student_build(tmp_path):
    """A cell after a solution that uses the solution's variables cannot run in the student
    edition: the build stops and names the notebook and the cell."""
    cells = [
        nbformat.v4.new_markdown_cell(
            ":::{exercise}\n:label: ex-t-1\n:class: core\n\n*Core.* Do.\n:::"
        ),
        nbformat.v4.new_markdown_cell(":::{solution-start} ex-t-1\n:class: dropdown\n:::"),
        nbformat.v4.new_code_cell("secret = 42"),
        nbformat.v4.new_markdown_cell(":::{solution-end}\n:::"),
        nbformat.v4.new_code_cell("print(secret)"),
    ]
    path = tmp_path / "t.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    (tmp_path / "out").mkdir()
    with pytest.raises(RuntimeError, match=r"t.ipynb: cell 2 fails without the solutions"):
        student.student_notebook((path, tmp_path / "out"))
    cells[-1].source = "print('no secret needed')"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    student.student_notebook((path, tmp_path / "out"))
    ran = nbformat.read(tmp_path / "out" / "t.ipynb", as_version=4)
    assert [c.execution_count for c in ran.cells if c.cell_type == "code"] == [1, 2]
