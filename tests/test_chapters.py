"""Every chapter has the parts issue 6 asks for: labelled equations the text refers to,
code checked against norms and torch.nn, the backward pass checked against autograd,
the reduction figure with its explorer (working on the website too), exercises with hidden
solutions, a chapter-end quiz and citations of the original papers.

The checks read the committed notebooks; nbval (make test) re-runs them, so a part
that is present here also runs."""

from __future__ import annotations

import re
import sys

import pytest

from .notebooks import BOOK, ROOT, read, toc_files

sys.path.insert(0, str(ROOT / "tools"))
import exercises  # noqa: E402

ALL = {"eq", "checked", "backward", "figure", "widget", "exercise", "quiz", "cite"}
#: chapter -> (parts it must have, papers it must cite, quiz topics it must show)
CHAPTERS = {
    # Why normalize measures networks; it has no layer of its own to draw or check.
    "why-normalize": (
        ALL - {"backward", "widget", "checked", "figure"},
        {"ioffe2015batch", "santurkar2018how"},
        {"why"},
    ),
    "batchnorm": (ALL, {"ioffe2015batch"}, {"batchnorm"}),
    "layernorm": (ALL, {"ba2016layer"}, {"layernorm"}),
    "rmsnorm": (ALL, {"zhang2019root"}, {"rmsnorm"}),
    "groupnorm": (
        ALL - {"backward"},
        {"wu2018group", "ulyanov2016instance"},
        {"groupnorm", "instancenorm"},
    ),
    "side-by-side": (ALL - {"backward", "checked"}, set(), {"comparison"}),
    # the norms at work inside transformer layers: no new layer to differentiate, no reduction
    # widget
    "transformer": (
        ALL - {"backward", "widget"},
        {
            "vaswani2017attention",
            "xiong2020layer",
            "liu2020understanding",
            "wang2022deepnet",
            "touvron2023llama",
            "zhang2019root",
        },
        {"transformer"},
    ),
    # SyncBatchNorm has no reduction figure of its own to explore (no widget)
    "syncbatchnorm": (
        ALL - {"widget"},
        {"peng2018megdet", "chan1979updating", "hoffer2017train", "wu2018group"},
        {"syncbatchnorm"},
    ),
    # Training and pitfalls train networks; they build no new layer (no backward pass, no reduction
    # widget).
    "training": (
        {"eq", "figure", "exercise", "quiz", "cite"},
        {"wu2018group", "ioffe2015batch", "goyal2017accurate"},
        {"training"},
    ),
    "pitfalls": (
        {"eq", "checked", "figure", "exercise", "quiz", "cite"},
        {"li2019understanding", "goyal2017accurate", "vanlaarhoven2017l2", "wu2021rethinking"},
        {"pitfalls"},
    ),
    # How fast: measures layers; no reduction widget, nothing new to check against torch.nn.
    "speed": (
        {"eq", "backward", "figure", "exercise", "quiz", "cite"},
        {"welford1962note", "williams2009roofline"},
        {"speed"},
    ),
    # Today's transformers: tiny training runs; no new norm to check against torch.nn or to
    # differentiate by hand, no reduction widget.
    "modern-transformers": (
        {"eq", "figure", "exercise", "quiz", "cite"},
        {
            "henry2020query",
            "dehghani2023scaling",
            "wortsman2024small",
            "kim2025peri",
            "jiang2023pre",
            "peebles2023scalable",
        },
        {"modern-transformers"},
    ),
    # Transformers without normalization: DyT is element-wise (no reduction widget, no hand-written
    # backward pass); checked against its formula and torch.nn's LayerNorm in the timing.
    "without-normalization": (
        {"eq", "checked", "figure", "exercise", "quiz", "cite"},
        {"zhu2025transformers", "chen2025stronger"},
        {"without-normalization"},
    ),
    # The small-batch fixes and the weight norms: trained networks, layers checked against
    # torch.nn (small-batches) or torch.nn.utils.parametrizations (normalizing-weights, no
    # nn.*Norm layer to check); no backward pass of their own, no reduction widget.
    "small-batches": (
        {"eq", "checked", "figure", "exercise", "quiz", "cite"},
        {"ioffe2017batch", "hoffer2017train", "singh2020filter", "qiao2019micro", "wu2018group"},
        {"small_batches"},
    ),
    "normalizing-weights": (
        {"eq", "figure", "exercise", "quiz", "cite"},
        {
            "salimans2016weight",
            "miyato2018spectral",
            "qiao2019micro",
            "brock2021high",
            "brock2021characterizing",
            "de2020batch",
            "zhang2019fixup",
        },
        {"weights"},
    ),
}


def tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def has_png(cell) -> bool:
    return any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def parts_of(nb) -> tuple[set[str], set[str], set[str]]:
    """(parts found, papers cited, quiz topics shown) in a notebook."""
    cells = nb.cells
    markdown = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    code = [c for c in cells if c.cell_type == "code"]
    found = set()

    labels = set(re.findall(r"\$\$\s*\((eq-[\w-]+)\)", markdown))
    referenced = set(re.findall(r"\{eq\}`(eq-[\w-]+)`", markdown))
    if labels and labels & referenced:
        found.add("eq")

    source = "\n".join(c.source for c in code)
    if (
        "assert_close" in source
        and re.search(r"\b(?:torch\.)?nn\.\w+Norm", source)
        and "norms" in source
    ):
        found.add("checked")
    if (
        "norms.autograd" in source
        or "from norms import autograd" in source
        or "from norms.autograd" in source
    ):
        if "backward(" in source or "autograd.grad(" in source or "gradcheck" in source:
            found.add("backward")

    for _, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        if (
            "remove-input" in tags(cell)
            and has_png(cell)
            and re.search(r"\bplot_\w+\(", cell.source)
        ):
            found.add("figure")
        if "remove-output" not in tags(cell) and re.search(r"\w+_explorer\(", cell.source):
            # the widget for Jupyter/Colab and its version for the website (norms.explore.web)
            data = [o.get("data", {}) for o in cell.get("outputs", [])]
            widget = any("application/vnd.jupyter.widget-view+json" in d for d in data)
            web = any('class="norms-explorer"' in d.get("text/html", "") for d in data)
            if widget and web:
                found.add("widget")
        if "remove-input" in tags(cell) and re.search(r"quiz\.show\(", cell.source):
            found.add("quiz")

    # exercises with sphinx-exercise (tools/exercises.py): labelled, with a difficulty and a
    # solution; gated solution code collapsed in Jupyter/Colab (the site collapses the dropdown)
    try:
        found_exercises = exercises.check(nb)
    except exercises.ExerciseError:
        found_exercises = []

    def collapsed(i):
        jupyter = cells[i].metadata.get("jupyter", {})
        return jupyter.get("source_hidden") is True and jupyter.get("outputs_hidden") is True

    if found_exercises and all(
        ex.solution_kind == "text"
        or all(collapsed(i) for i in ex.solution_cells if cells[i].cell_type == "code")
        for ex in found_exercises
    ):
        found.add("exercise")

    cited = set()
    for keys in re.findall(r"\{cite:[pt]\}`([^`]+)`", markdown):
        cited |= {k.strip() for k in keys.split(",")}
    if cited:
        found.add("cite")
    topics = set(re.findall(r"quiz\.show\(\s*[\"']([\w-]+)[\"']", source))
    return found, cited, topics


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_chapter_has_every_part(name):
    path = BOOK / f"{name}.ipynb"
    assert f"book/{name}" in toc_files(), f"{name} is not in _toc.yml"
    found, cited, topics = parts_of(read(path))
    wanted, papers, quiz_topics = CHAPTERS[name]
    assert wanted - found == set(), f"{name} lacks: {sorted(wanted - found)}"
    assert papers - cited == set(), f"{name} does not cite {sorted(papers - cited)}"
    assert quiz_topics - topics == set(), f"{name} has no quiz on {sorted(quiz_topics - topics)}"


def test_equation_references_point_at_labels_that_exist():
    labels, refs = set(), {}
    for path in sorted(BOOK.glob("*.ipynb")):
        markdown = "\n".join(c.source for c in read(path).cells if c.cell_type == "markdown")
        mine = re.findall(r"\$\$\s*\((eq-[\w-]+)\)", markdown)
        assert not set(mine) & labels, (
            f"{path.name} reuses equation labels {sorted(set(mine) & labels)}"
        )
        labels |= set(mine)
        for ref in re.findall(r"\{eq\}`(eq-[\w-]+)`", markdown):
            refs.setdefault(ref, path.name)
    assert {r: p for r, p in refs.items() if r not in labels} == {}


def test_parts_detector_can_fail():
    """A notebook with none of the parts is reported as lacking all of them."""
    import nbformat

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("Text, no maths."), nbformat.v4.new_code_cell("x = 1")]
    )
    assert parts_of(nb) == (set(), set(), set())


def test_every_solution_is_hidden_code_and_output():
    """Every exercise has a solution; solution code is collapsed in Jupyter/Colab, in a
    collapsed dropdown on the site, and no solution is left in the old convention."""
    shown = []
    for path in sorted(BOOK.glob("*.ipynb")):
        nb = read(path)
        assert exercises.old_style_exercises(nb) == [], (
            f"{path.name}: run tools/convert_exercises.py"
        )
        for ex in exercises.check(nb, path.name):
            start = nb.cells[ex.solution_cells[0]].source
            if ex.solution_kind == "gated" and ":class: dropdown" not in start:
                shown.append(f"{path.name} cell {ex.solution_cells[0]} (not a dropdown)")
            for i in ex.solution_cells:
                cell = nb.cells[i]
                if cell.cell_type != "code":
                    continue
                jupyter = cell.metadata.get("jupyter", {})
                if not (
                    exercises.SOLUTION_TAG in tags(cell)
                    and jupyter.get("source_hidden")
                    and jupyter.get("outputs_hidden")
                ):
                    shown.append(f"{path.name} cell {i}")
    assert shown == [], f"solutions visible without a click: {shown}"


def _nb(*cells):
    import nbformat

    return nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(c[5:])
            if c.startswith("code:")
            else nbformat.v4.new_markdown_cell(c)
            for c in cells
        ]
    )


EXERCISE = ":::{exercise} A title\n:label: ex-t-1\n:class: core\n\n*Core.* Do it.\n:::"
START = ":::{solution-start} ex-t-1\n:class: dropdown\n:::"
END = ":::{solution-end}\n:::"


@pytest.mark.parametrize(
    "cells, message",
    [
        ((EXERCISE,), "cell 0: exercise 'ex-t-1' has no solution"),
        ((EXERCISE, START, "code:x = 1"), "cell 1: solution-start of 'ex-t-1' has no solution-end"),
        ((EXERCISE, "code:x = 1", END), "cell 2: solution-end without a solution-start"),
        ((EXERCISE, START, END), "cell 1: the solution of 'ex-t-1' has no code cell"),
        (
            (EXERCISE.replace("*Core.* ", ""), START, "code:x = 1", END),
            "cell 0: exercise 'ex-t-1' does not start with its difficulty",
        ),
        ((EXERCISE.replace(":label: ex-t-1\n", ""),), "cell 0: an exercise without a :label:"),
    ],
)
def test_broken_exercise_markup_is_named_by_file_and_cell(cells, message):
    with pytest.raises(exercises.ExerciseError, match=re.escape(f"book/t.ipynb {message}")):
        exercises.check(_nb(*cells), "book/t.ipynb")


def test_well_formed_exercise_passes_the_check():
    [ex] = exercises.check(_nb(EXERCISE, START, "code:x = 1", END), "book/t.ipynb")
    assert (ex.label, ex.difficulty, ex.solution_kind, ex.solution_cells) == (
        "ex-t-1",
        "core",
        "gated",
        [1, 2, 3],
    )


#: notebooks in the table of contents that are pages about the book, not chapters
NOT_CHAPTERS = {"book/instructors"}


def objectives_of(nb) -> tuple[list[str], str] | None:
    """(objectives, prerequisites) from the first markdown cell after the title cell, or None."""
    cells = nb.cells
    title = next(
        (
            i
            for i, c in enumerate(cells)
            if c.cell_type == "markdown" and re.match(r"#\s", c.source)
        ),
        None,
    )
    after = (
        next((c for c in cells[title + 1 :] if c.cell_type == "markdown"), None)
        if title is not None
        else None
    )
    if after is None:
        return None
    m = re.match(
        r":::\{admonition\} Learning objectives\n:class: learning-objectives\nAfter this chapter "
        r"you can:\n((?:- .+\n)+):::\n\n\*\*Prerequisites:\*\* (.+)$",
        after.source.strip() + "\n",
        re.M,
    )
    if m is None:
        return None
    return [line[2:] for line in m.group(1).splitlines()], m.group(2)


def test_every_chapter_opens_with_objectives_and_prerequisites():
    """CONVENTIONS.md #1: 3 to 6 objectives, then the prerequisites, after the title."""
    bad = {}
    for name in sorted(toc_files()):
        path = ROOT / f"{name}.ipynb"
        if not path.exists() or name in NOT_CHAPTERS:
            continue
        found = objectives_of(read(path))
        if found is None or not 3 <= len(found[0]) <= 6:
            bad[path.name] = found
    assert bad == {}, f"chapters without a learning-objectives cell after the title: {bad}"


def test_objectives_detector_can_fail():
    assert objectives_of(_nb("# Title", ":::{note}\nNo.\n:::")) is None
    good = _nb(
        "# T",
        ":::{admonition} Learning objectives\n:class: learning-objectives\n"
        "After this chapter you can:\n- derive a\n- implement b\n- explain c\n:::\n\n"
        "**Prerequisites:** none.",
    )
    assert objectives_of(good) == (["derive a", "implement b", "explain c"], "none.")


def test_every_chapter_has_exercises_with_difficulty_and_a_quiz():
    """Issue 15: every chapter ends with its quiz and exercises, each exercise with its
    difficulty."""
    missing = {}
    for name in sorted(toc_files()):
        path = ROOT / f"{name}.ipynb"
        if not path.exists() or name in NOT_CHAPTERS:
            continue
        nb = read(path)
        lacks = []
        try:
            if not exercises.check(nb, path.name):
                lacks.append("exercises")
        except exercises.ExerciseError as exc:
            lacks.append(str(exc))
        if not any(
            c.cell_type == "code" and re.search(r"quiz\.(show|self_quiz)\(", c.source)
            for c in nb.cells
        ):
            lacks.append("quiz")
        if lacks:
            missing[path.name] = lacks
    assert missing == {}
