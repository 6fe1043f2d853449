"""What tools/slides.py puts into a chapter's deck (``make slides``), without a browser:
headings, display equations without their labels, the stored figures the book shows,
the quiz questions the chapter shows, and nothing of exercises' solutions.
tests/browser/test_slides.py checks the built decks in Chromium."""

from __future__ import annotations

import sys

import nbformat
import pytest

import norms.quiz

from .notebooks import ROOT, read, toc_files

sys.path.insert(0, str(ROOT / "tools"))
import slides  # noqa: E402

PNG = (  # a 1x1 image
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)


def _figure_cell(png: str, tags=()):
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png})]
    cell.metadata["tags"] = list(tags)
    return cell


def _notebook():
    md = nbformat.v4.new_markdown_cell
    return nbformat.v4.new_notebook(
        cells=[
            md(
                "# Title\n\nNotes prose.\n\n:::{admonition} Learning objectives\n"
                ":class: learning-objectives\nAfter this chapter you can:\n- derive a thing\n"
                "- implement {doc}`it <batchnorm>`\n:::"
            ),
            md(
                "(sec-a)=\n## Section A\n\nProse.\n\n$$\n\\mu = \\frac{1}{n}\\sum_i x_i\n$$ "
                "(eq-mu)\n\n```python\n# not a heading\n```"
            ),
            _figure_cell(PNG),
            _figure_cell(PNG[:-4] + "AAA=", tags=["remove-output"]),
            md("### Sub {cite:p}`ioffe2015batch`\n\n$$\ny = x\n$$"),
            md(
                "## Exercises\n\n:::{exercise} Do it\n:label: ex-t-1\n:class: core\n\n"
                "*Core.* Work.\n\n$$\nz = 1\n$$\n:::"
            ),
            md(":::{solution-start} ex-t-1\n:label: ex-t-1-solution\n:class: dropdown\n:::"),
            _figure_cell(PNG[:-4] + "BBB=", tags=["solution"]),
            md(":::{solution-end}\n:::"),
            nbformat.v4.new_code_cell('import norms.quiz\n\nnorms.quiz.show("rmsnorm", n=2)'),
        ]
    )


def test_the_outline_has_headings_equations_figures_prose_and_no_solution():
    nb = _notebook()
    nb.cells[1].outputs = []
    glued = nbformat.v4.new_code_cell('glue("n-tok", 0.12345)')
    glued.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"application/papermill.record/text/plain": "0.12345"},
            metadata={
                "scrapbook": {"name": "n-tok", "mime_prefix": "application/papermill.record/"}
            },
        )
    ]
    nb.cells.insert(1, glued)
    nb.cells[2].source = nb.cells[2].source.replace("Prose.", "Prose {glue:text}`n-tok:.2f`.")
    deck = slides.outline(nb)
    assert deck["title"] == "Title"
    assert deck["objectives"] == ["derive a thing", "implement {doc}`it <batchnorm>`"]
    got = [(s["heading"], s["level"], s["items"]) for s in deck["sections"]]
    assert got == [
        ("Title", 1, [("prose", "Notes prose.")]),
        (
            "Section A",
            2,
            [
                ("prose", "Prose 0.12."),
                ("equation", "\\mu = \\frac{1}{n}\\sum_i x_i"),
                ("figure", {"image/png": PNG}),
            ],
        ),
        ("Sub (ioffe2015batch)", 3, [("equation", "y = x")]),
        ("Exercises", 2, [("exercise", "Do it (core)"), ("quiz", None)]),
    ]
    assert deck["quiz"] == [("rmsnorm", 2, 0)]


def test_the_slide_notebook_marks_slides_subslides_notes_and_answer_fragments():
    nb, counts = slides.slide_notebook(_notebook(), "rmsnorm")
    kinds = [c.metadata["slideshow"]["slide_type"] for c in nb.cells]
    # title + notes, A + notes, eq, figure (caption + image), Sub, eq, Exercises, 2 questions
    assert (
        kinds
        == ["slide", "notes", "slide", "notes", "subslide", "subslide", "-"]
        + [
            "subslide",
            "subslide",
            "slide",
        ]
        + ["subslide", "fragment"] * 2
    )
    assert counts == {
        "headings": 3,
        "equations": 2,
        "figures": 1,
        "exercises": 1,
        "questions": 2,
        "slides": 9,
    }
    shown = "\n".join(
        c.source for c in nb.cells if c.metadata["slideshow"]["slide_type"] != "notes"
    )
    shown += "".join(str(o.data) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    notes = "\n".join(
        c.source for c in nb.cells if c.metadata["slideshow"]["slide_type"] == "notes"
    )
    assert "prose" not in shown.lower() and "Notes prose." in notes and "Prose." in notes
    assert "(eq-mu)" not in shown + notes and "(sec-a)=" not in shown + notes
    assert "Work." not in shown + notes and "z = 1" not in shown + notes
    assert "BBB=" not in shown and "AAA=" not in shown
    assert "implement it" in nb.cells[0].source  # roles as plain text


def test_a_deck_asks_the_questions_its_chapter_shows():
    nb, _ = slides.slide_notebook(read(ROOT / "book" / "batchnorm.ipynb"), "batchnorm")
    shown = "".join(
        o.data.get("text/html", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    asked = norms.quiz.questions_for("running", 3, 0) + norms.quiz.questions_for("batchnorm", 6, 0)
    positions = [shown.find(q["question"]) for q in asked]
    assert -1 not in positions and positions == sorted(positions)


@pytest.mark.parametrize("topic", sorted(norms.quiz.CHAPTER_OF))
def test_every_quiz_topic_is_asked_in_its_chapters_deck(topic):
    chapter = norms.quiz.CHAPTER_OF[topic]
    assert chapter in [p.stem for p in slides.chapters()]
    deck = slides.outline(read(ROOT / "book" / f"{chapter}.ipynb"))
    assert topic in [t for t, _, _ in slides.quiz_draws(chapter, deck["quiz"])]


def test_every_chapter_but_the_instructors_page_has_a_deck():
    notebooks = {f for f in toc_files() if (ROOT / f"{f}.ipynb").exists()}
    decks = {p.relative_to(ROOT).with_suffix("").as_posix() for p in slides.chapters()}
    assert decks == notebooks - {"book/instructors"}
