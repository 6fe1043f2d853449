"""What the four builds of the book (the site, the Chinese site, the student editions) share
instead of redoing: the instructors' page's execution (tools/sphinx_local/shared_execution.py),
the palette figures (page_weight.py); and the Chinese search index (search_zh.py)."""

from __future__ import annotations

import fcntl
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import page_weight  # noqa: E402
import shared_execution  # noqa: E402


def _notebook(source="print(1)"):
    """A notebook as a build reads it from its file (the same cell ids each time)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell(source)]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    return nb


class FakeKernel:
    """Stands for jupyter_cache's single_nb_execution: counts the executions, and fails on
    a cell that says so."""

    def __init__(self):
        self.runs = 0

    def __call__(self, nb, cwd, **kwargs):
        self.runs += 1
        err = None
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.execution_count = self.runs
                cell.outputs = [nbformat.v4.new_output("stream", text=f"run {self.runs}\n")]
                if "fail" in cell.source:
                    err = RuntimeError("the cell failed")
        nb.metadata["language_info"] = {"name": "python"}
        return shared_execution.ExecutionResult(nb, cwd, 1.5, err, "traceback" if err else None)


@pytest.fixture
def kernel(monkeypatch):
    fake = FakeKernel()
    monkeypatch.setattr(shared_execution, "_execute", fake)
    return fake


def test_a_notebook_is_executed_once_per_folder_and_each_build_gets_the_executed_notebook(
    kernel, monkeypatch, tmp_path
):
    monkeypatch.setenv(shared_execution.ENV, str(tmp_path / "executed"))
    first, second = _notebook(), _notebook()
    r1 = shared_execution.shared_execution(first, "/book", timeout=600, allow_errors=False)
    r2 = shared_execution.shared_execution(second, "/book", timeout=600, allow_errors=False)
    assert kernel.runs == 1
    assert second == first and second.cells[1].outputs[0].text == "run 1\n"
    assert r2.nb is second  # executed in place, as the execution leaves it
    assert (r2.err, r2.time) == (None, r1.time)


@pytest.mark.parametrize(
    "other",
    [
        lambda: (_notebook("print(2)"), "/book", 600),  # another notebook
        lambda: (_notebook(), "/elsewhere", 600),  # another working folder
        lambda: (_notebook(), "/book", 30),  # other options
    ],
)
def test_another_notebook_folder_or_option_is_executed_again(kernel, monkeypatch, tmp_path, other):
    monkeypatch.setenv(shared_execution.ENV, str(tmp_path))
    shared_execution.shared_execution(_notebook(), "/book", timeout=600, allow_errors=False)
    nb, cwd, timeout = other()
    shared_execution.shared_execution(nb, cwd, timeout=timeout, allow_errors=False)
    assert kernel.runs == 2


def test_without_the_folder_every_build_executes(kernel, monkeypatch):
    monkeypatch.delenv(shared_execution.ENV, raising=False)
    for _ in range(2):
        shared_execution.shared_execution(_notebook(), "/book", timeout=600, allow_errors=False)
    assert kernel.runs == 2


def test_a_failed_execution_is_not_kept_and_fails_again(kernel, monkeypatch, tmp_path):
    monkeypatch.setenv(shared_execution.ENV, str(tmp_path))
    for _ in range(2):
        result = shared_execution.shared_execution(
            _notebook("fail()"), "/book", timeout=600, allow_errors=False
        )
        assert isinstance(result.err, RuntimeError)
    assert kernel.runs == 2


def test_the_extension_replaces_what_myst_nb_executes_with():
    from myst_nb.core.execute import direct

    class App:
        pass

    before = direct.single_nb_execution
    try:
        shared_execution.setup(App())
        assert direct.single_nb_execution is shared_execution.shared_execution
    finally:
        direct.single_nb_execution = before


# ------------------------------------------------------------------------ palette figures


def _figure(path: Path, colour=(200, 30, 60)) -> Path:
    from PIL import Image

    image = Image.new("RGB", (40, 30), colour)
    image.putpixel((3, 4), (0, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return path


@pytest.fixture
def conversions(monkeypatch):
    made = []
    convert = page_weight._convert

    def counted(source, cached):
        made.append(source)
        convert(source, cached)

    monkeypatch.setattr(page_weight, "_convert", counted)
    return made


def test_a_figure_is_converted_once_for_every_build_that_shows_it(conversions, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    site, student = _figure(tmp_path / "site" / "a.png"), _figure(tmp_path / "student" / "a.png")
    assert page_weight._palette_png(site, cache) and page_weight._palette_png(student, cache)
    assert conversions == [site]
    assert site.read_bytes() == student.read_bytes() == (cache / f"{_digest(student)}").read_bytes()


def _digest(converted: Path) -> str:
    return next(p.name for p in converted.parent.parent.glob("cache/*.png"))


def test_a_figure_another_build_is_converting_is_left_for_later_or_waited_for(
    conversions, tmp_path
):
    import hashlib

    cache = tmp_path / "cache"
    cache.mkdir()
    figure = _figure(tmp_path / "site" / "a.png")
    original = figure.read_bytes()
    digest = hashlib.sha256(original).hexdigest()
    with open(cache / f"{digest}.lock", "w") as other_build:
        fcntl.flock(other_build, fcntl.LOCK_EX)
        assert page_weight._palette_png(figure, cache, wait=False) is False
        assert figure.read_bytes() == original and conversions == []
    assert page_weight._palette_png(figure, cache, wait=False) is True
    assert conversions == [figure] and figure.read_bytes() != original


def test_the_site_and_the_student_editions_share_one_figures_cache(
    conversions, monkeypatch, tmp_path
):
    from types import SimpleNamespace

    monkeypatch.setattr(page_weight, "PNG_CACHE", tmp_path / "png_cache")
    for build in ("html", "student-build/html", "zh-build/html"):
        _figure(tmp_path / build / "_images" / "a.png")
        app = SimpleNamespace(outdir=str(tmp_path / build), builder=SimpleNamespace(format="html"))
        page_weight._compress_images(app, None)
    assert len(conversions) == 1


# ---------------------------------------------------------------- the Chinese search index


def test_the_chinese_search_stems_every_word_as_sphinx_does(monkeypatch):
    import search_zh
    from sphinx.search import zh

    class App:
        pass

    text = "层归一化 LayerNorm normalizes over the last dims; RMS has no mean. 批归一化 BatchNorm"
    words = ["LayerNorm", "RMS", "mean", "dims", "BatchNorm", "running", "eps", "层归一化"]

    def stems():
        language = zh.SearchChinese({})
        split = language.split(text)
        return split, [language.stem(w) for w in words + split]

    search_zh.add_glossary_words()  # as setup does: the words are the same on both sides
    monkeypatch.setattr(zh.SearchChinese, "latin_terms", [])
    before = stems()
    monkeypatch.setattr(zh.SearchChinese, "latin_terms", [])
    monkeypatch.setattr(zh.SearchChinese, "js_splitter_code", "")
    search_zh.setup(App())
    assert isinstance(zh.SearchChinese.latin_terms, search_zh.LatinTerms)
    assert stems() == before


def test_the_glossary_terms_are_words_of_the_chinese_index(monkeypatch):
    """A glossary term is a word of the index next to its parts, and the browser's splitter
    is Sphinx's for the Chinese site (tests/browser/test_chinese.py searches with it)."""
    import search_zh
    from sphinx.search import zh

    class App:
        pass

    terms = search_zh.glossary_terms(search_zh.GLOSSARY.read_text(encoding="utf-8"))
    assert {"层归一化", "批归一化", "批量归一化", "滑动平均", "可学习参数"} <= set(terms)
    assert not [t for t in terms if len(t) < 2]
    monkeypatch.setattr(zh.SearchChinese, "js_splitter_code", "")
    search_zh.setup(App())
    assert zh.SearchChinese.js_splitter_code == search_zh.SPLITTER
    split = zh.SearchChinese({}).split("层归一化在每个样本上计算")
    assert "层归一化" in split and "归一化" in split, split


def test_the_latin_terms_answer_in_as_the_list_does():
    import search_zh

    terms = search_zh.LatinTerms(["eps"])
    terms.extend(["RMS", "mean", "RMS"])
    terms.append("dims")
    assert terms == ["eps", "RMS", "mean", "RMS", "dims"]
    for word in ("eps", "RMS", "dims", "mean", "rms", "x", ""):
        assert (word in terms) == (word in list(terms))
