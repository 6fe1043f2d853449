"""Build the slides (``make slides``): one reveal.js deck per chapter, from the chapter's notebook.

Nothing is written twice: a deck is made from the same notebook as the book's page, with
``jupyter nbconvert``'s slides exporter. A temporary copy of each notebook gets the slide
metadata nbconvert needs:

- the title (the notebook's H1) and its learning objectives open the deck;
- every ``##`` heading starts a slide, every ``###`` heading a sub-slide below it;
- every display equation (``$$ ... $$``, its label dropped) and every figure (the image
  outputs stored in the notebook: nothing is executed) is a sub-slide under its heading;
- the prose between them becomes the speaker notes of the slide it follows (reveal.js's
  speaker view, key S), its glued numbers filled in from the notebook's stored values;
- the code, exercises' tasks (only their titles are listed) and solutions are left out;
- the quiz closes the deck: the questions the chapter's quiz cell shows
  (``norms.quiz.show(topic, n=..., seed=...)``, drawn again with ``norms.quiz.questions_for``,
  so they are the same questions), and those of every topic ``norms.quiz.CHAPTER_OF`` assigns
  to the chapter that its quiz cell does not show; one question a sub-slide, its answer a
  fragment.

The decks load nothing from another host: reveal.js (npm, ``package.json``) and MathJax
(npm) are copied from ``node_modules`` into ``_build/slides/vendor``, the figures are
inside the page (``data:`` URLs) and the template (``tools/slides_template/deck``) has no
CDN link. ``_build/slides/index.html`` lists the decks. ``tests/browser/test_slides.py``
steps through every deck.

Usage: ``python tools/slides.py [--out DIR] [NOTEBOOK ...]`` (default: every chapter).
"""

from __future__ import annotations

import argparse
import ast
import copy
import html
import inspect
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import toc  # noqa: E402
from exercises import directives, solution_cells  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "slides"
TEMPLATES = Path(__file__).resolve().parent / "slides_template"
NODE_MODULES = ROOT / "node_modules"

#: pages of the table of contents that are not lectures
NOT_A_DECK = {"book/instructors"}

#: files of node_modules the decks load, copied to OUT / "vendor" / the name on the right
VENDOR = {
    "reveal.js/dist/reveal.js": "reveal.js/dist/reveal.js",
    "reveal.js/dist/reveal.css": "reveal.js/dist/reveal.css",
    "reveal.js/dist/theme/white.css": "reveal.js/dist/theme/white.css",
    "reveal.js/dist/theme/black.css": "reveal.js/dist/theme/black.css",
    "reveal.js/dist/plugin/notes.js": "reveal.js/dist/plugin/notes.js",
    "reveal.js/LICENSE": "reveal.js/LICENSE",
    "mathjax/es5": "mathjax",
}

_HEADING = re.compile(r"^(#{1,3})[ \t]+(.+?)[ \t#]*$", re.M)
_EQUATION = re.compile(
    r"^\$\$[ \t]*\n(.*?)\n\$\$[ \t]*(?:\((?P<label>[^)\n]*)\))?[ \t]*$", re.M | re.S
)
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)
_ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<text>[^`]*)`")
_SKIP_DIRECTIVES = {"exercise", "solution", "solution-start", "solution-end"}
_SKIP_TAGS = {"remove-output", "remove-cell", "solution"}


def chapters() -> list[Path]:
    """Every notebook of the table of contents that is a chapter (not the instructors' page)."""
    return [p for p in toc.notebooks() if page(p) not in NOT_A_DECK]


def page(path: Path) -> str:
    """A notebook's page as ``_toc.yml`` names it (``book/batchnorm``)."""
    return path.relative_to(ROOT).with_suffix("").as_posix()


# ----------------------------------------------------------------------------- the outline


def _plain_roles(text: str, glue: dict | None = None) -> str:
    """MyST roles as plain text: {doc}`batchnorm` -> batchnorm, {doc}`this <batchnorm>` -> this,
    {cite:p}`x` -> (x), {eq}`eq-x` -> (eq-x), {glue:text}`key:.2f` -> the value the notebook
    stored under key, formatted as the book formats it."""

    def one(m):
        role, body = m.group("role"), m.group("text")
        body = re.sub(r"\s*<[^>]*>$", "", body)  # {doc}`the text <target>` -> the text
        if role.startswith("cite") or role == "eq":
            return f"({body})"
        if role.startswith("glue"):
            key, _, spec = body.partition(":")
            if glue is None or key not in glue:
                return f"`{body}`"
            try:
                return format(ast.literal_eval(glue[key]), spec)
            except (ValueError, SyntaxError, TypeError):
                return glue[key]
        return body

    return _ROLE.sub(one, text)


def glue_values(nb) -> dict:
    """name -> the text a notebook glued under that name (norms.glue, myst-nb)."""
    found = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None:
                found[name] = o.get("data", {}).get("application/papermill.record/text/plain", "")
    return found


def _prose(text: str) -> str:
    """A stretch of a markdown cell between headings and equations, as speaker notes:
    without labels (``(sec-x)=``) and HTML comments."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"^\([\w:-]+\)=[ \t]*$", "", text, flags=re.M)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _markdown_items(source: str) -> list[tuple[str, str]]:
    """("title"|"h2"|"h3"|"equation"|"objectives"|"exercise"|"prose", text) in the order of a
    markdown cell, leaving out exercises' tasks, solutions and code blocks; the body of any other
    directive (a note) counts as prose."""
    keep = source
    for d in reversed(directives(source)):
        if d.name in _SKIP_DIRECTIVES:
            exercise = ""
            if d.name == "exercise":
                level = d.options.get("class", "").split()
                title = d.arg or d.options.get("label", "")
                exercise = f"\0exercise{json.dumps(title + (f' ({level[0]})' if level else ''))}\0"
            keep = keep[: d.start] + exercise + keep[d.end :]
        elif d.name == "admonition" and d.arg.lower().startswith("learning objectives"):
            items = [ln[2:].strip() for ln in d.body.splitlines() if ln.startswith("- ")]
            keep = keep[: d.start] + f"\0objectives{json.dumps(items)}\0" + keep[d.end :]
        else:
            keep = keep[: d.start] + d.body + keep[d.end :]
    keep = _FENCE.sub("", keep)
    found = []
    pattern = re.compile(
        _HEADING.pattern
        + "|"
        + _EQUATION.pattern
        + r"|\0objectives(?P<objectives>.*?)\0|\0exercise(?P<exercise>.*?)\0",
        re.M | re.S,
    )
    pos = 0
    for m in pattern.finditer(keep):
        if _prose(keep[pos : m.start()]):
            found.append(("prose", _prose(keep[pos : m.start()])))
        pos = m.end()
        if m.group("objectives") is not None:
            found.append(("objectives", m.group("objectives")))
        elif m.group("exercise") is not None:
            found.append(("exercise", _plain_roles(json.loads(m.group("exercise")))))
        elif m.group(1):
            kind = {1: "title", 2: "h2", 3: "h3"}[len(m.group(1))]
            found.append((kind, _plain_roles(m.group(2).strip())))
        else:
            found.append(("equation", m.group(3).strip()))
    if _prose(keep[pos:]):
        found.append(("prose", _prose(keep[pos:])))
    return found


def _figures(cell) -> list[dict]:
    """The image outputs of a code cell that the book shows (as stored: nothing runs)."""
    if cell.cell_type != "code" or _SKIP_TAGS & set(cell.metadata.get("tags", [])):
        return []
    out = []
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        images = {k: v for k, v in data.items() if k.startswith("image/")}
        if images and o.get("output_type") in ("display_data", "execute_result"):
            out.append(images)
    return out


def _show_defaults() -> dict:
    """The n and seed that ``norms.quiz.show`` uses when a call leaves them out."""
    import norms.quiz

    params = inspect.signature(norms.quiz.show).parameters
    return {k: params[k].default for k in ("n", "seed")}


def _quiz_calls(cell) -> list[tuple[str, int, int]]:
    """(topic, n, seed) of every ``norms.quiz.show(...)`` call of a code cell, with show's
    defaults for what the call leaves out."""
    if cell.cell_type != "code" or "quiz.show" not in cell.source:
        return []
    defaults = _show_defaults()
    calls = []
    for node in ast.walk(ast.parse(cell.source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "show"
            and ast.unparse(node.func.value).endswith("quiz")
        ):
            values = [ast.literal_eval(a) for a in node.args]
            args = dict(zip(("topic", "n", "seed")[: len(values)], values, strict=True))
            args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
            calls.append(
                (
                    args["topic"],
                    args.get("n", defaults["n"]),
                    args.get("seed", defaults["seed"]),
                )
            )
    return calls


def outline(nb) -> dict:
    """What a chapter's deck shows: its title, objectives, and a list of sections (heading,
    level, equations and figures in order), and the quiz draws (topic, n, seed)."""
    gated = solution_cells(nb)
    glue = glue_values(nb)
    deck = {"title": "", "objectives": [], "sections": [], "quiz": []}

    def section():
        if not deck["sections"]:
            deck["sections"].append({"heading": deck["title"], "level": 1, "items": []})
        return deck["sections"][-1]

    for i, cell in enumerate(nb.cells):
        if i in gated:
            continue
        if cell.cell_type == "markdown":
            for kind, text in _markdown_items(cell.source):
                if kind == "title" and not deck["title"]:
                    deck["title"] = text
                elif kind == "objectives" and not deck["objectives"]:
                    deck["objectives"] = json.loads(text)
                elif kind in ("h2", "h3"):
                    level = 2 if kind == "h2" else 3
                    deck["sections"].append({"heading": text, "level": level, "items": []})
                elif kind in ("equation", "exercise"):
                    section()["items"].append((kind, text))
                elif kind == "prose":
                    section()["items"].append((kind, _plain_roles(text, glue)))
        else:
            for fig in _figures(cell):
                section()["items"].append(("figure", fig))
            calls = _quiz_calls(cell)
            if calls and not deck["quiz"]:  # the questions go where the chapter asks them
                section()["items"].append(("quiz", None))
            deck["quiz"].extend(calls)
    return deck


def quiz_draws(chapter: str, shown: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The chapter's own quiz draws, then one default draw of every topic that
    ``norms.quiz.CHAPTER_OF`` assigns to the chapter and its quiz cell does not show."""
    import norms.quiz

    defaults = _show_defaults()
    topics = {t for t, _, _ in shown}
    extra = [
        (t, defaults["n"], defaults["seed"])
        for t, c in norms.quiz.CHAPTER_OF.items()
        if c == chapter and t not in topics
    ]
    return list(dict.fromkeys(shown + extra))


# ------------------------------------------------------------------------ the slide notebook


def _md(source: str, slide_type: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["slideshow"] = {"slide_type": slide_type}
    return cell


def _html(body: str, slide_type: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": body})]
    cell.metadata["slideshow"] = {"slide_type": slide_type}
    return cell


def _figure(images: dict, caption: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("")
    output = nbformat.v4.new_output("display_data", data={**images, "text/plain": caption})
    output.metadata["alt"] = f"Figure: {caption}"
    cell.outputs = [output]
    cell.metadata["slideshow"] = {"slide_type": "-"}
    return cell


def _answer_text(a: dict) -> str:
    if "answer" in a:
        return str(a["answer"])
    if "value" in a:
        return f"{a['value']:g}"
    lo, hi = a["range"]
    return f"≈ {(lo + hi) / 2:.6g}"


def question_html(q: dict, number: int) -> tuple[str, str]:
    """A quiz question as HTML (question, code, options) and its answer (the right options
    and the feedback of each). The question's texts are norms.quiz's own (trusted HTML)."""
    parts = [f'<div class="deck-quiz"><p class="deck-q"><b>Q{number}.</b> {q["question"]}</p>']
    if q.get("code"):
        parts.append(f"<pre class='deck-code'>{q['code']}</pre>")
    right = [a for a in q["answers"] if a.get("correct")]
    if q["type"] == "numeric":
        parts.append('<p class="deck-numeric">Your answer: a number.</p>')
    else:
        marker = "☐" if q["type"] == "many_choice" else "○"
        items = "".join(f"<li>{marker} {_answer_text(a)}</li>" for a in q["answers"])
        parts.append(f'<ul class="deck-options">{items}</ul>')
    parts.append("</div>")
    answer = "".join(
        f'<p class="deck-answer"><b>{_answer_text(a)}</b>: {a.get("feedback", "")}</p>'
        for a in right
    )
    return "".join(parts), answer


def _quiz_cells(questions: list[dict]) -> list:
    cells = []
    for k, q in enumerate(questions, 1):
        body, answer = question_html(q, k)
        cells.append(_html(body, "subslide"))
        cells.append(_html(answer, "fragment"))
    return cells


def slide_notebook(nb, chapter: str) -> tuple[nbformat.NotebookNode, dict]:
    """A temporary notebook holding only what the deck shows, with nbconvert's slide metadata
    (the chapter's prose as speaker notes), and what went into it (numbers of headings,
    equations, figures, exercises, quiz questions and slides)."""
    import norms.quiz

    deck = outline(nb)
    title = deck["title"] or chapter
    objectives = "".join(f"\n- {_plain_roles(o)}" for o in deck["objectives"])
    opening = f"# {title}\n" + (
        f"\nAfter this chapter you can:\n{objectives}" if objectives else ""
    )
    cells = [_md(opening, "slide")]
    draws = quiz_draws(chapter, deck["quiz"])
    questions = [q for topic, n, seed in draws for q in norms.quiz.questions_for(topic, n, seed)]
    counts = {"headings": 0, "equations": 0, "figures": 0, "exercises": 0, "questions": 0}
    quiz_placed = False
    for sec in deck["sections"]:
        heading = sec["heading"] or title
        exercises = [text for kind, text in sec["items"] if kind == "exercise"]
        counts["exercises"] += len(exercises)
        if sec["level"] > 1:
            counts["headings"] += 1
            listed = "".join(f"\n- {e}" for e in exercises)
            kind = "slide" if sec["level"] == 2 else "subslide"
            cells.append(_md(f"{'#' * sec['level']} {heading}\n{listed}", kind))
        caption = f'<p class="deck-caption">{html.escape(heading)}</p>'
        for kind, item in sec["items"]:
            if kind == "equation":
                counts["equations"] += 1
                cells.append(_md(f"{caption}\n\n$$\n{item}\n$$", "subslide"))
            elif kind == "figure":
                counts["figures"] += 1
                cells.append(_html(caption, "subslide"))
                cells.append(_figure(item, heading))
            elif kind == "quiz" and questions:
                cells.extend(_quiz_cells(questions))
                quiz_placed = True
            elif kind == "prose":  # one <aside class="notes"> a slide: reveal shows the first
                if cells[-1].metadata["slideshow"]["slide_type"] == "notes":
                    cells[-1].source += "\n\n" + item
                else:
                    cells.append(_md(item, "notes"))
    if questions and not quiz_placed:
        cells.append(_md("## Quiz", "slide"))
        cells.extend(_quiz_cells(questions))
    counts["questions"] = len(questions)
    counts["slides"] = sum(
        c.metadata["slideshow"]["slide_type"] in ("slide", "subslide") for c in cells
    )
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata["title"] = title
    out.metadata["kernelspec"] = copy.deepcopy(nb.metadata.get("kernelspec", {}))
    out.metadata["language_info"] = copy.deepcopy(nb.metadata.get("language_info", {}))
    return out, counts


# ----------------------------------------------------------------------------------- build


def _nbconvert_templates() -> str:
    """nbconvert's own templates (reveal, lab, base), found next to the installed package:
    in a virtual environment that reuses another one's packages they are not under its prefix."""
    import nbconvert

    prefix = Path(nbconvert.__file__).resolve().parents[4]
    return str(prefix / "share" / "jupyter")


def exporter():
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (_nbconvert_templates(), os.environ.get("JUPYTER_PATH", "")) if p
    )
    from nbconvert import SlidesExporter

    return SlidesExporter(
        extra_template_basedirs=[str(TEMPLATES)],
        template_name="deck",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        reveal_url_prefix="vendor/reveal.js",
        reveal_theme="white",
    )


def copy_vendor(out: Path) -> None:
    """reveal.js and MathJax from node_modules (installed by `npm ci`), never committed."""
    for src, dst in VENDOR.items():
        source, target = NODE_MODULES / src, out / "vendor" / dst
        if not source.exists():
            raise SystemExit(f"slides: {source} is missing: run `make setup` (npm ci)")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)


def index_page(decks: list[dict]) -> str:
    rows = "\n".join(
        f'<li><a href="{d["file"]}">{html.escape(d["title"])}</a> '
        f'<span class="count">({d["slides"]} slides: {d["equations"]} equations, '
        f"{d['figures']} figures, {d['questions']} quiz questions)</span></li>"
        for d in decks
    )
    return (TEMPLATES / "index.html").read_text().replace("{{ decks }}", rows)


def build(paths: list[Path], out: Path) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    copy_vendor(out)
    exp = exporter()
    decks = []
    for path in paths:
        start = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        chapter = path.stem
        slides, counts = slide_notebook(nb, chapter)
        body, _ = exp.from_notebook_node(slides, resources={"metadata": {"name": chapter}})
        (out / f"{chapter}.html").write_text(body)
        n = counts["slides"]
        decks.append(
            {
                "chapter": chapter,
                "file": f"{chapter}.html",
                "title": slides.metadata["title"],
                **counts,
            }
        )
        print(f"slides: {chapter}.html: {n} slides ({time.perf_counter() - start:.1f} s)")
    (out / "index.html").write_text(index_page(decks))
    (out / "decks.json").write_text(json.dumps(decks, indent=1) + "\n")
    return decks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--zh", action="store_true", help="the Chinese edition's decks (zh/book/) into OUT/zh"
    )
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or chapters()
    if args.zh:  # the Chinese notebooks: the same code and outputs, the catalogs' markdown
        paths = [ROOT / "zh" / p.relative_to(ROOT) for p in paths]
        args.out = args.out / "zh"
    if not args.notebooks:  # no deck of an earlier build may stay beside the new ones
        for old in args.out.glob("*.html"):
            old.unlink()
    build(paths, args.out)
    print(f"slides: {len(paths)} decks: {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
