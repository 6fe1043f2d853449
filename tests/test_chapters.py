"""Every chapter has the parts issue 6 asks for: labelled equations the text refers to,
code checked against norms and torch.nn, the backward pass checked against autograd,
the reduction figure with its widget and static fallback, exercises with hidden
solutions, a chapter-end quiz and citations of the original papers.

The checks read the committed notebooks; nbval (make test) re-runs them, so a part
that is present here also runs."""

from __future__ import annotations

import re

import pytest

from .notebooks import BOOK, read, toc_files

ALL = {"eq", "checked", "backward", "figure", "widget", "exercise", "quiz", "cite"}
#: chapter -> (parts it must have, papers it must cite, quiz topics it must show)
CHAPTERS = {
    # Why normalize measures networks; it has no layer of its own to draw or check.
    "why-normalize": (ALL - {"backward", "widget", "checked", "figure"}, {"ioffe2015batch", "santurkar2018how"}, {"why"}),
    "batchnorm": (ALL, {"ioffe2015batch"}, {"batchnorm"}),
    "layernorm": (ALL, {"ba2016layer"}, {"layernorm"}),
    "rmsnorm": (ALL, {"zhang2019root"}, {"rmsnorm"}),
    "groupnorm": (ALL - {"backward"}, {"wu2018group", "ulyanov2016instance"}, {"groupnorm", "instancenorm"}),
    "side-by-side": (ALL - {"backward", "checked"}, set(), {"comparison"}),
    # How fast: measures layers; no reduction widget, nothing new to check against torch.nn.
    "speed": ({"eq", "backward", "figure", "exercise", "quiz", "cite"}, {"welford1962note", "williams2009roofline"},
              {"speed"}),
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
    if "assert_close" in source and re.search(r"\b(?:torch\.)?nn\.\w+Norm", source) and "norms" in source:
        found.add("checked")
    if "norms.autograd" in source or "from norms import autograd" in source or "from norms.autograd" in source:
        if "backward(" in source or "autograd.grad(" in source or "gradcheck" in source:
            found.add("backward")

    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        if "remove-input" in tags(cell) and has_png(cell) and re.search(r"\bplot_\w+\(", cell.source):
            found.add("figure")
        if "remove-output" in tags(cell) and re.search(r"\w+_explorer\(", cell.source):
            rest = cells[i + 1 : i + 4]
            static = any(c.cell_type == "code" and "remove-input" in tags(c) and has_png(c) for c in rest)
            colab = any(c.cell_type == "markdown" and "Colab" in c.source for c in rest)
            if static and colab:
                found.add("widget")
        if "remove-input" in tags(cell) and re.search(r"quiz\.show\(", cell.source):
            found.add("quiz")
        if cell.cell_type == "code" and "hide-cell" in tags(cell):
            # the solution's code and output both collapsed, on the site and in Jupyter/Colab
            jupyter = cell.metadata.get("jupyter", {})
            hidden = jupyter.get("source_hidden") is True and jupyter.get("outputs_hidden") is True
            before = [c for c in cells[max(0, i - 3) : i] if c.cell_type == "markdown"]
            if hidden and any(re.search(r"\{admonition\}\s*Exercise", c.source) for c in before):
                found.add("exercise")

    cited = set()
    for keys in re.findall(r"\{cite:[pt]\}`([^`]+)`", markdown):
        cited |= {k.strip() for k in keys.split(",")}
    if cited:
        found.add("cite")
    topics = set(re.findall(r"quiz\.show\(\s*[\"'](\w+)[\"']", source))
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
        assert not set(mine) & labels, f"{path.name} reuses equation labels {sorted(set(mine) & labels)}"
        labels |= set(mine)
        for ref in re.findall(r"\{eq\}`(eq-[\w-]+)`", markdown):
            refs.setdefault(ref, path.name)
    assert {r: p for r, p in refs.items() if r not in labels} == {}


def test_parts_detector_can_fail():
    """A notebook with none of the parts is reported as lacking all of them."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("Text, no maths."),
                                         nbformat.v4.new_code_cell("x = 1")])
    assert parts_of(nb) == (set(), set(), set())


def test_every_solution_is_hidden_code_and_output():
    """A solution cell shows neither its code nor its output until the reader asks."""
    shown = []
    for path in sorted(BOOK.glob("*.ipynb")):
        for i, cell in enumerate(read(path).cells):
            if cell.cell_type != "code" or not cell.source.lstrip().startswith("# Solution"):
                continue
            jupyter = cell.metadata.get("jupyter", {})
            if not ("hide-cell" in tags(cell) and jupyter.get("source_hidden") and jupyter.get("outputs_hidden")):
                shown.append(f"{path.name} cell {i}")
    assert shown == [], f"solutions visible without a click: {shown}"
