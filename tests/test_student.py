"""The student edition (``make student``): no solution's code or output in any student page
or notebook, and every student notebook carries the chapter's outputs, which the cells print
without the solutions (nbval and ``make execute`` run each solution cell isolated:
``tools/solution_isolation.py``, tested here too).

These check what ``make student`` built (``make test`` builds it first); they fail, not
skip, when it is missing or older than the chapters."""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import re
import sys
import urllib.parse
import warnings

import nbformat
import pytest

from .notebooks import ROOT, repository_url
from .notebooks import read as _read_notebook

sys.path.insert(0, str(ROOT / "tools"))
import exercises  # noqa: E402
import student  # noqa: E402

pytestmark = pytest.mark.courses

OUT = ROOT / "_build" / "student"
CHAPTERS = student.chapters()
#: the editions: (folder under _build/student/html and /notebooks, where its notebooks are)
EDITIONS = {"en": ("", ROOT), "zh": ("zh", ROOT / "zh")}


@functools.cache
def read(path) -> nbformat.NotebookNode:
    """A chapter (or its Chinese notebook), read once per session: collection and every test
    of this file read the same few notebooks many times, and no caller changes them."""
    return _read_notebook(path)


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


@pytest.mark.parametrize("language", EDITIONS)
@pytest.mark.parametrize("chapter", with_solutions(), ids=lambda p: p.stem)
def test_no_solution_in_the_student_page(chapter, language):
    folder, _ = EDITIONS[language]
    page = built(OUT / "html" / folder / "book" / f"{chapter.stem}.html").read_text()
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


@pytest.mark.parametrize("language", EDITIONS)
@pytest.mark.parametrize("chapter", with_solutions(), ids=lambda p: p.stem)
def test_no_solution_in_the_student_notebook(chapter, language):
    folder, _ = EDITIONS[language]
    nb = nbformat.read(built(OUT / "notebooks" / folder / chapter.name), as_version=4)
    code, outputs = fingerprints(read(chapter), chapter.name)
    everything = "\n".join(
        c.source + "\n" + "\n".join(str(o) for o in c.get("outputs", [])) for c in nb.cells
    )
    assert [line for line in code + outputs if line in everything] == []
    assert not [c for c in nb.cells if c.cell_type == "markdown" and "{solution" in c.source]
    gated = [
        e.label
        for e in exercises.exercises(read(chapter), chapter.name)
        if e.solution_kind == "gated"  # a solution in words leaves no cell to fill in
    ]
    blanks = [c.source for c in nb.cells if "your-solution" in c.metadata.get("tags", [])]
    assert len(blanks) == len(gated), "each gated solution becomes one empty cell for the student"


@pytest.mark.parametrize("language", EDITIONS)
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_carries_the_chapters_outputs(chapter, language):
    """Every code cell but the solutions, with the chapter's stored outputs (which nbval
    confirms the cells print without the solutions), numbered from 1 in order, and no error
    that the chapter does not mean to show. The Chinese student notebooks come from the
    Chinese notebooks (``zh/``)."""
    folder, source = EDITIONS[language]
    nb = nbformat.read(built(OUT / "notebooks" / folder / chapter.name), as_version=4)
    full = read(source / chapter.relative_to(ROOT))
    inside = exercises.solution_cells(full, chapter.name)
    kept = [c for i, c in enumerate(full.cells) if c.cell_type == "code" and i not in inside]
    code = [c for c in nb.cells if c.cell_type == "code"]
    mine = [c for c in code if "your-solution" not in c.metadata.get("tags", [])]
    assert [c.source for c in mine] == [c.source for c in kept]
    strip_count = lambda outs: [
        {k: v for k, v in o.items() if k != "execution_count"} for o in outs
    ]
    assert [strip_count(c.outputs) for c in mine] == [strip_count(c.outputs) for c in kept]
    assert [c.execution_count for c in mine] == list(range(1, len(mine) + 1))
    assert all(not c.outputs and c.execution_count is None for c in code if c not in mine)
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


def _exercise(before: str, solution: str, *after: str):
    """A notebook: the cell ``before``, an exercise whose solution is ``solution``, then the
    cells ``after``."""
    cells = [
        nbformat.v4.new_code_cell(before),
        nbformat.v4.new_markdown_cell(
            ":::{exercise}\n:label: ex-t-1\n:class: core\n\n*Core.* Do.\n:::"
        ),
        nbformat.v4.new_markdown_cell(":::{solution-start} ex-t-1\n:class: dropdown\n:::"),
        nbformat.v4.new_code_cell(solution, metadata={"tags": [exercises.SOLUTION_TAG]}),
        nbformat.v4.new_markdown_cell(":::{solution-end}\n:::"),
    ] + [nbformat.v4.new_code_cell(c) for c in after]
    return nbformat.v4.new_notebook(cells=cells)


BEFORE = "import torch\ntorch.manual_seed(0)\nx = torch.ones(3)\nsecret = 1"
SOLVED = (
    "secret, leaked = 42, 1\n"
    "torch.rand(5)\n"
    "torch.set_default_dtype(torch.float64)\n"
    "torch.set_grad_enabled(False)\n"
    "y = x.clone().add_(1)\n"
    "print('solved', y.tolist())"
)
AFTER = (
    "print(secret, torch.rand(2).tolist(), torch.get_default_dtype(), "
    "torch.is_grad_enabled(), 'leaked' in dir())"
)


def _execute(nb, tmp_path):
    import execute

    execute.IsolatingClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    return nb


def _text(cell):
    return "".join(o.get("text", "") for o in cell.outputs)


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """``_exercise(BEFORE, SOLVED, AFTER)`` executed by make execute's client, once for the
    tests that read it (neither changes it)."""
    return _execute(_exercise(BEFORE, SOLVED, AFTER), tmp_path_factory.mktemp("solved"))


def test_the_cells_after_a_solution_see_nothing_it_did(solved, tmp_path):
    """make execute runs a solution cell isolated: its names are taken back, the random
    number generators and torch's settings restored, so the next cell prints what it prints
    in the student edition (which has no solutions), and the solution's own output stays."""
    nb = solved
    without = _execute(_exercise(BEFORE, "", AFTER), tmp_path)
    assert _text(nb.cells[3]) == "solved [2.0, 2.0, 2.0]\n"
    assert "1 [" in _text(nb.cells[-1]) and "torch.float32 True False" in _text(nb.cells[-1])
    assert _text(nb.cells[-1]) == _text(without.cells[-1])


def test_a_solution_builds_on_an_earlier_solution(tmp_path):
    """One exercise may use another's solution (as in the full chapter): a solution sees what
    the solutions before it bound, unless a cell that is not a solution bound the name since."""
    nb = _exercise(BEFORE, "helper = lambda: 'from the solution'\nshadowed = 'solution'")
    nb.cells += [
        nbformat.v4.new_code_cell("shadowed = 'chapter'"),
        nbformat.v4.new_code_cell(
            "print(helper(), shadowed)", metadata={"tags": [exercises.SOLUTION_TAG]}
        ),
        nbformat.v4.new_code_cell("print('helper' in dir(), shadowed)"),
    ]
    nb = _execute(nb, tmp_path)
    assert _text(nb.cells[-2]) == "from the solution chapter\n"
    assert _text(nb.cells[-1]) == "False chapter\n"


def test_a_cell_that_needs_a_solution_fails_naming_it(tmp_path):
    """A cell that uses a solution's names cannot run in the student edition: make execute
    (and nbval) fail on it."""
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError, match=r"NameError.*name 'leaked' is not defined"):
        _execute(_exercise(BEFORE, SOLVED, "print(leaked)"), tmp_path)


@pytest.mark.parametrize(
    "solution, named",
    [
        ("x.add_(1)", "can see: x."),
        ("m.eval()", "can see: m (train/eval mode)."),
        ("m(torch.ones(1, 3)).sum().backward()", "can see: m.bias, m.weight."),
    ],
)
def test_a_solution_that_changes_an_object_in_place_fails(tmp_path, solution, named):
    """What a solution changes in place cannot be taken back: it fails, naming the object."""
    before = BEFORE + "\nm = torch.nn.Linear(3, 2)"
    with pytest.raises(RuntimeError, match=r"solution cell 3: RuntimeError: .*" + re.escape(named)):
        _execute(_exercise(before, solution, "print(1)"), tmp_path)


def test_nbval_runs_solution_cells_isolated(solved, tmp_path):
    """The conftest hook: nbval over a notebook whose last cell needs a solution fails on
    that cell; the same notebook without that cell passes (without the hook, its last cell
    would print the solution's values and fail)."""
    import copy
    import subprocess

    good = solved
    nbformat.write(good, tmp_path / "good.ipynb")
    bad = copy.deepcopy(good)
    bad.cells.append(nbformat.v4.new_code_cell("print(leaked)", execution_count=4))
    bad.cells[-1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nbformat.write(bad, tmp_path / "bad.ipynb")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "conftest", "--nbval"]
        + ["--nbval-current-env", "-rf", str(tmp_path / "good.ipynb"), str(tmp_path / "bad.ipynb")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 1, run.stdout[-3000:]
    assert "NameError" in run.stdout and "1 failed, 6 passed" in run.stdout, run.stdout[-3000:]
    assert re.search(r"FAILED .*bad\.ipynb::Cell 3", run.stdout), run.stdout[-3000:]


# --- Every file of the student edition, and every link of its pages ---------------------

#: where a link must not lead from the student edition: the notebook launchers and the
#: repository, which open or hold the full notebooks
FORBIDDEN_HOSTS = ("colab.research.google.com", "mybinder.org", "deepnote.com", "jupyterhub")


@functools.cache
def solution_material() -> tuple[dict[str, str], dict[str, str]]:
    """{line: chapter} of solution code and outputs found in no other cell of any chapter,
    and {sha256 of an image: chapter} of the images solutions output (computed once per
    session: every scan uses the same chapters; no caller changes the dicts)."""
    chapters = with_solutions()
    elsewhere = []
    for c in CHAPTERS:
        nb = read(c)
        inside = exercises.solution_cells(nb, c.name)
        elsewhere += [
            cell.source + "\n" + "\n".join(str(o) for o in cell.get("outputs", []))
            for i, cell in enumerate(nb.cells)
            if i not in inside
        ]
    elsewhere = "\n".join(elsewhere)
    lines, images = {}, {}
    for c in chapters:
        nb = read(c)
        code, outputs = fingerprints(nb, c.name)
        lines.update({line: c.name for line in code + outputs if line not in elsewhere})
        for i in exercises.solution_cells(nb, c.name):
            for out in nb.cells[i].get("outputs", []):
                for mime, data in out.get("data", {}).items():
                    if mime.startswith("image/") and mime != "image/svg+xml":
                        blob = base64.b64decode("".join(data))
                        images[hashlib.sha256(blob).hexdigest()] = c.name
                        lines["".join(data).replace("\n", "")[:200]] = c.name
    return lines, images


def views(path) -> list[str]:
    """The texts of a file in which a solution could be read: raw, HTML text, notebook
    cells."""
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    out = [raw, html.unescape(raw)]
    if path.suffix in {".html", ".htm", ".xml", ".svg"}:
        out.append(visible_text(raw))
    if path.suffix == ".ipynb":
        nb = nbformat.reads(raw, as_version=4)
        out.append(
            "\n".join(
                c.source + "\n" + "\n".join(str(o) for o in c.get("outputs", [])) for c in nb.cells
            )
        )
    if path.suffix in {".js", ".json"}:
        with warnings.catch_warnings():  # "\c", "\{" in scripts: invalid escapes, kept as text
            warnings.simplefilter("ignore", DeprecationWarning)
            out.append(raw.encode().decode("unicode_escape", errors="ignore"))
    return out


def third_party(data: bytes, by_size: dict[int, list]) -> bool:
    """Whether ``data`` is byte for byte a file of ``node_modules`` (the site's MathJax, widget
    and reveal.js scripts, as ``npm ci`` installed them from the lock file): such a copy cannot
    hold a solution, and scanning these 60 MB took three quarters of the scan's time."""
    return any(p.read_bytes() == data for p in by_size.get(len(data), []))


@functools.cache
def npm_files_by_size() -> dict[int, list]:
    """size -> the files of ``node_modules`` of that size (listed once per session)."""
    by_size: dict[int, list] = {}
    for path in (ROOT / "node_modules").rglob("*"):
        if path.is_file() and not path.is_symlink():
            by_size.setdefault(path.stat().st_size, []).append(path)
    return by_size


def leaks(folder) -> list[str]:
    """Every place under ``folder`` where a solution's code, text output or image is (files that
    are copies of ``node_modules`` files apart)."""
    lines, images = solution_material()
    by_size = npm_files_by_size()
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if third_party(data, by_size):
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest in images:
            found.append(f"{path}: an image a solution of {images[digest]} outputs")
        texts = list(dict.fromkeys(views(path)))  # a text twice (no entity to unescape): once
        for line in lines_in(texts, lines):
            found.append(f"{path}: solution of {lines[line]}: {line[:80]!r}")
    return found


WORD = re.compile(r"\w+")


@functools.cache
def inner_words(line: str) -> frozenset[str]:
    """The words of ``line`` with a non-word character on each side inside the line (all but
    its first and last): wherever ``line`` stands in a text, these are whole words of the text."""
    return frozenset(WORD.findall(line)[1:-1])


def lines_in(texts: list[str], lines) -> list[str]:
    """The ``lines`` that stand in one of ``texts``. A line whose inner words are not all words
    of a text is not in it, a test of a set instead of a search through the text: the scan of
    the student edition (2,600 files, 500 lines) took 15.7 s, 8.7 s now."""
    found = []
    for text in texts:
        words = set(WORD.findall(text))
        found += [line for line in lines if inner_words(line) <= words and line in text]
    return list(dict.fromkeys(found))


def links(site) -> list[tuple[str, str]]:
    """(page, target) of every href and src of every HTML page of ``site`` (not the theme's
    Jinja macros under ``_static``, nor the replacement patterns of inline scripts)."""
    out = []
    for page in sorted(site.rglob("*.html")):
        if "_static" in page.relative_to(site).parts:
            continue
        for target in re.findall(r'(?:href|src)\s*=\s*"([^"]*)"', page.read_text()):
            if "$" not in target and "{{" not in target:
                out.append((page, html.unescape(target)))
    return out


def test_no_solution_in_any_file_of_the_student_edition():
    """Pages, ``_sources`` (the download button's notebooks), images, search index, student
    notebooks: every file of ``_build/student``."""
    built(OUT / "html" / "index.html")
    lines, images = solution_material()
    assert len(lines) > 50, "too few solution fingerprints to prove anything"
    assert leaks(OUT) == []


def test_every_link_of_the_student_site_stays_clear_of_solutions():
    """A local link leads to a file of the student site (scanned above); no link leads to a
    notebook launcher (Colab, Binder: they open the full notebooks) or to the repository."""
    site = built(OUT / "html" / "index.html").parent
    repository = repository_url().rstrip("/")
    found = links(site)
    assert len(found) > 100
    bad = []
    for page, target in found:
        parts = urllib.parse.urlsplit(target)
        if parts.scheme in {"http", "https"} or target.startswith("//"):
            if any(h in parts.netloc for h in FORBIDDEN_HOSTS) or target.startswith(repository):
                bad.append((page.relative_to(site), target))
        elif parts.scheme in {"", "file"} and parts.path:
            local = (page.parent / urllib.parse.unquote(parts.path)).resolve()
            if not local.is_relative_to(site.resolve()) or not local.exists():
                bad.append((page.relative_to(site), target))
    assert bad == []
    downloads = [t for _, t in found if "_sources/" in t and t.endswith(".ipynb")]
    assert downloads, "the download button offers the student notebooks"
    assert (site / "zh" / "index.html").exists(), "the Chinese student edition is missing"


def test_the_chinese_student_edition_is_chinese_and_links_to_the_english_one():
    site = built(OUT / "html" / "zh" / "book" / "batchnorm.html")
    page = site.read_text()
    assert 'lang="zh-CN"' in page and "批归一化" in visible_text(page)
    switch = re.search(r'class="[^"]*language-switch" href="([^"]+)"', page)
    assert switch, "no link to the English student edition"
    assert (site.parent / switch[1]).resolve() == (OUT / "html" / "book" / "batchnorm.html")
    notebook = nbformat.read(built(OUT / "notebooks" / "zh" / "batchnorm.ipynb"), as_version=4)
    assert "批归一化" in "".join(c.source for c in notebook.cells if c.cell_type == "markdown")


def test_the_word_test_keeps_every_line_wherever_it_stands():
    """lines_in finds every solution line glued to other words on both sides, as in a minified
    script or a notebook's JSON, and a line that is not there is not found."""
    lines = solution_material()[0]
    text = "".join(f"x{line}_9" for line in lines)
    assert lines_in([text], lines) == list(lines)
    missing = next(line for line in lines if len(WORD.findall(line)) > 2)
    assert lines_in([text.replace(missing, "")], [missing]) == []


def test_the_leak_scan_finds_a_full_notebook_and_a_colab_link(tmp_path):
    """The scan can fail: a full chapter copied into a folder is found, and so is a page
    linking to Colab."""
    chapter = with_solutions()[0]
    (tmp_path / "_sources").mkdir()
    (tmp_path / "_sources" / chapter.name).write_bytes(chapter.read_bytes())
    assert leaks(tmp_path)
    page = tmp_path / "p.html"
    page.write_text(
        '<a href="https://colab.research.google.com/github/x/y/blob/main/book/a.ipynb">Colab</a>'
    )
    assert [t for _, t in links(tmp_path) if "colab" in t]
    # a copy of an npm file is skipped; the same file with a solution's line in it is not
    by_size = npm_files_by_size()
    require = (ROOT / "node_modules" / "requirejs" / "require.js").read_bytes()
    assert third_party(require, by_size)
    line = next(iter(solution_material()[0]))
    assert not third_party(require + line.encode(), by_size)
    (tmp_path / "_sources" / chapter.name).unlink()
    (tmp_path / "p.html").unlink()
    (tmp_path / "require.js").write_bytes(require)
    assert leaks(tmp_path) == []
    (tmp_path / "require.js").write_bytes(require + b"\n" + line.encode())
    assert [f for f in leaks(tmp_path) if "require.js" in f]
