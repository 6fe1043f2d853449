"""A translated page is pickled without a copy of Sphinx's environment
(tools/sphinx_local/translated_nodes.py): a small Sphinx project in Chinese, built with and
without the extension, its page's doctree read back."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import translated_nodes  # noqa: E402

PAGE = "# Batch normalization\n\nIt uses the **batch** statistics.\n"
CATALOG = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Batch normalization"
msgstr "批归一化"

msgid "It uses the **batch** statistics."
msgstr "它使用**批**统计量。"
"""


def _build(tmp_path: Path, extensions: list[str]):
    """The page's doctree as Sphinx pickled it, and the page's HTML. The page is Markdown, read
    by MyST as the book's are: MyST's parser needs the environment in the settings of the
    document it parses each translated message into."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    (src / "locales" / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tools' / 'sphinx_local')!r})\n"
        f"extensions = {['myst_parser', *extensions]!r}\nlanguage = 'zh_CN'\n"
        "locale_dirs = ['locales']\n"
    )
    (src / "index.md").write_text(PAGE)
    (src / "locales" / "zh_CN" / "LC_MESSAGES" / "index.po").write_text(CATALOG, "utf-8")
    doctrees = tmp_path / "doctrees"
    app = Sphinx(str(src), str(src), str(tmp_path / "out"), str(doctrees), "html", status=None)
    app.build()
    data = (doctrees / "index.doctree").read_bytes()
    return data, (tmp_path / "out" / "index.html").read_text("utf-8")


def _others(doctree) -> list:
    return [n for n in doctree.findall() if n.document is not doctree]


def test_sphinx_alone_pickles_the_environment_with_a_translated_page(tmp_path):
    data, html = _build(tmp_path, [])
    assert "批归一化" in html
    assert b"BuildEnvironment" in data
    assert _others(pickle.loads(data))


def test_a_translated_page_is_pickled_alone(tmp_path):
    data, html = _build(tmp_path, ["translated_nodes"])
    assert "批归一化" in html and "<strong>批</strong>" in html
    assert b"BuildEnvironment" not in data
    assert _others(pickle.loads(data)) == []


def test_adopt_gives_every_node_the_page():
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    page = new_document("page", get_default_settings(Parser))
    message = new_document("message", get_default_settings(Parser))
    paragraph = nodes.paragraph()
    page += paragraph
    strong = nodes.strong("", "batch")
    paragraph += strong
    strong.document = message  # as Sphinx's Locale transform leaves a translated node
    assert strong in _others(page)  # and its text, through it
    translated_nodes.adopt(None, page)
    assert _others(page) == []


@pytest.mark.parametrize("build", ["zh-build", "student-build-zh"])
def test_the_books_chinese_doctrees_carry_no_environment(build):
    """The book's own Chinese builds (make book / make test build them first)."""
    doctrees = ROOT / "_build" / build / ".doctrees"
    if not doctrees.exists():
        pytest.fail(f"no Chinese build at {doctrees}: run `make book` first")
    pages = sorted(doctrees.rglob("*.doctree"))
    assert pages
    heavy = [p.name for p in pages if b"BuildEnvironment" in p.read_bytes()]
    assert heavy == [], heavy
