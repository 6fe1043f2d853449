"""The workarounds for the theme and for Sphinx's search (tools/sphinx_local/reader_fixes.py,
the html_theme_options of _config.yml), and tests that tell when upstream has fixed what
they work around, so that they can go. tests/browser/test_reader.py checks the result in
a browser."""

from __future__ import annotations

import re
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))

import reader_fixes  # noqa: E402


def test_figures_become_links_to_themselves():
    body = (
        '<div class="cell_output"><img alt="x" src="../_images/abc.png" />\n</div>'
        '<a href="https://example.org"><img src="../_images/linked.png"></a>'
        '<img src="../_static/logo.svg" class="logo__image">'
    )
    out = reader_fixes.link_figures(body)
    assert (
        '<a class="figure-zoom" href="../_images/abc.png" title="Open the figure full size">'
        '<img alt="x" src="../_images/abc.png" /></a>'
    ) in out
    assert out.count("figure-zoom") == 1  # not inside another link, not the logo


def test_linking_twice_changes_nothing_more():
    once = reader_fixes.link_figures('<p><img src="_images/a.png"></p>')
    assert reader_fixes.link_figures(once) == once


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_theme_has_no_top_bar_and_a_default_mode():
    sphinx = _config()["sphinx"]
    assert sphinx["recursive_update"] is True  # keeps jupyter-book's own theme options
    options = sphinx["config"]["html_theme_options"]
    # With any navbar item, pydata-sphinx-theme renders its top bar, and with it a second
    # (hidden) .primary-toggle that takes the menu buttons' handlers (upstream issue 2451).
    for slot in ("navbar_start", "navbar_center", "navbar_end", "navbar_persistent"):
        assert options[slot] == [], slot
    assert sphinx["config"]["html_context"]["default_mode"] in ("auto", "light", "dark")
    assert "reader_fixes" in sphinx["local_extensions"]


def _theme_script(package: str, name: str) -> str:
    return files(package).joinpath(f"theme/{package}/static/scripts/{name}").read_text()


def test_upstream_still_binds_the_first_menu_button_only():
    """pydata-sphinx-theme issue 2451: the drawer's click handler goes to the first
    ``.primary-toggle`` in the page, and sphinx-book-theme's wide-screen handler too. When
    this fails, upstream binds every button: the top bar (navbar_* in _config.yml) may
    come back."""
    pst = _theme_script("pydata_sphinx_theme", "pydata-sphinx-theme.js")
    sbt = _theme_script("sphinx_book_theme", "sphinx-book-theme.js")
    first_only = re.compile(r"""querySelector\(\s*["']\.primary-toggle["']\s*\)""")
    assert first_only.search(pst), "pydata-sphinx-theme binds every menu button now (#2451)"
    assert first_only.search(sbt), "sphinx-book-theme binds every menu button now"


def _sphinx_static(name: str) -> str:
    return files("sphinx.themes.basic").joinpath(f"static/{name}").read_text()


def test_sphinx_search_still_needs_the_fixes():
    """When this fails, Sphinx highlights search terms on pages that load searchtools.js,
    or builds snippets without TeX: reader_fixes.SCRIPT can lose that part."""
    highlight = _sphinx_static("sphinx_highlight.js")
    assert 'typeof Search === "undefined"' in highlight, "sphinx_highlight.js changed"
    search = _sphinx_static("searchtools.js")
    removed = re.search(r"for \(const removalQuery of \[([^\]]*)\]", search)
    assert removed, "searchtools.js builds its snippets differently now"
    assert "math" not in removed.group(1), "Sphinx drops formulas from snippets itself now"


def test_every_page_loads_searchtools():
    """Why sphinx_highlight.js never highlights: the theme loads searchtools.js (which
    defines ``Search``) on every page, for its search dialog."""
    page = ROOT / "_build" / "html" / "book" / "training.html"
    if not page.exists():
        pytest.skip("no built site (make book builds it before make test runs this)")
    text = page.read_text()
    assert "searchtools.js" in text and "highlightSearchWords" in text


def _book_text() -> dict[str, str]:
    """The text of every page of the book as stored: markdown and notebooks (prose and outputs,
    with the JSON string escapes of a notebook undone as far as quotes go)."""
    texts = {p.name: p.read_text() for p in (ROOT / "book").glob("*.md")}
    for path in (ROOT / "book").glob("*.ipynb"):
        texts[path.name] = path.read_text().replace('\\\\"', '"').replace('\\"', '"')
    return texts


def test_the_student_edition_never_sends_the_reader_to_the_launch_button():
    """It has no launch button (tools/student.py): "the rocket icon" must become the download."""
    left = {name: text.count("rocket") for name, text in _book_text().items()}
    assert sum(left.values()) > 0, "nothing to check: the book no longer names the rocket icon"
    after = {name: reader_fixes.student_wording(text) for name, text in _book_text().items()}
    assert {n: t.count("rocket") for n, t in after.items() if "rocket" in t} == {}
    assert (
        "Download the notebook (the button at the top of the page) and run it"
        in after["batchnorm.ipynb"]
    )


def test_a_figure_gets_its_description_as_alternative_text():
    body = (
        '<img alt="../_images/abc.png" src="../_images/abc.png" width="700">'
        '<img alt="A hand-written alt" src="../_images/def.png">'
    )
    out = reader_fixes.describe_figures(body, {"abc.png": "Figure: a & b", "def.png": "x"}.get)
    assert '<img alt="Figure: a &amp; b" src="../_images/abc.png" width="700">' in out
    assert 'alt="A hand-written alt"' in out


def test_the_description_is_read_from_the_png():
    import io

    from norms.plots.style import BookFigure

    fig = BookFigure(figsize=(3, 2))
    fig.subplots().set_title("a title")
    data, _ = fig._repr_png_()
    assert reader_fixes.png_description(data) == "Figure: a title"
    assert reader_fixes.png_description(io.BytesIO(b"not a png").getvalue()) is None


def test_a_figure_that_sphinx_links_to_itself_zooms_too():
    """Sphinx links an image with a width to itself; that link becomes the zoom link."""
    body = (
        '<a class="reference internal image-reference" href="../_images/abc.png">'
        '<img alt="x" src="../_images/abc.png" style="width: 700px;" /></a>'
    )
    out = reader_fixes.link_figures(body)
    assert out.count("figure-zoom") == 1
    assert '<a class="figure-zoom reference internal image-reference"' in out
    assert 'href="../_images/abc.png"' in out
    assert reader_fixes.link_figures(out) == out


def test_a_figure_without_a_description_is_named_by_its_section():
    body = (
        '<h2>Depth<a class="headerlink" href="#d">#</a></h2><p>text</p>'
        '<img alt="../_images/abc.png" src="../_images/abc.png">'
    )
    out = reader_fixes.describe_figures(body, lambda name: None)
    assert 'alt="Figure of the section “Depth”"' in out
