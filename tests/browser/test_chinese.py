"""The Chinese edition on the built site (``_build/html/zh``, tools/i18n.py): every page has
its twin in the other language, linked from the header at 420 px too; Chinese pages say
``lang="zh-CN"``, show the theme's own strings in Chinese, carry no untranslated English
paragraph, log no console error on a phone, and search finds Chinese words. The checks of
test_site.py (requests, maths, page weight) run on the Chinese pages too: they are pages of
the same site."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from .conftest import SITE
from .test_reader import NARROW, WIDE, open_page  # noqa: F401 - a fixture
from .test_site import site_pages

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import i18n  # noqa: E402

ZH = i18n.PREFIX + "/"
ENGLISH = [p for p in site_pages() if not p.startswith(ZH) and p.startswith("book/")]

LINK = "() => { const a = document.querySelector('a.language-switch'); return a && {href: a.href, text: a.textContent.trim(), shown: a.getBoundingClientRect().width > 0 && a.getBoundingClientRect().right <= innerWidth}; }"  # noqa: E501

# Paragraphs, list items, headings, captions and table cells of the article, without code
# and maths: the text a reader reads.
ARTICLE_TEXT = """() => {
  const out = [];
  for (const el of document.querySelectorAll('.bd-article p, .bd-article li, .bd-article h1, .bd-article h2, .bd-article h3, .bd-article td, .bd-article th, .bd-article figcaption')) {
    if (el.closest('.cell_output, .output, pre, .jupyterquiz, .quiz, .explorer, .bibliography, .citation')) continue;
    const copy = el.cloneNode(true);
    copy.querySelectorAll('code, mjx-container, .math, pre, a.reference.internal .std-doc').forEach(n => n.remove());
    out.push(copy.textContent.replace(/\\s+/g, ' ').trim());
  }
  return out;
}"""  # noqa: E501


@pytest.mark.parametrize("path", ENGLISH)
def test_every_page_links_to_its_twin_and_back(open_page, path):  # noqa: F811
    english = open_page(path, NARROW)
    link = english.evaluate(LINK)
    assert link and link["text"] == "中文" and link["shown"], f"{path}: {link}"
    assert link["href"].endswith(f"/{ZH}{path}")
    assert (SITE / ZH / path).exists(), f"no Chinese twin of {path}"
    chinese = open_page(ZH + path, NARROW)
    assert chinese.evaluate("document.documentElement.lang") == "zh-CN"
    back = chinese.evaluate(LINK)
    assert back and back["text"] == "English" and back["shown"], f"{ZH}{path}: {back}"
    assert back["href"] == english.url
    errors = [m for m in chinese.console if m.startswith(("error", "warning"))]
    assert not errors and not chinese.recorder.errors, errors + chinese.recorder.errors
    english_runs = [
        run for text in chinese.evaluate(ARTICLE_TEXT) for run in i18n.english_left(text)
    ]
    assert english_runs == [], f"{ZH}{path}: English left: {english_runs[:3]}"


PRINTED = "() => [...document.querySelectorAll('.cell_output .output.stream pre')].map(p => p.textContent)"  # noqa: E501


@pytest.mark.parametrize("path", ENGLISH)
def test_printed_sentences_are_chinese_on_chinese_pages(open_page, path):  # noqa: F811
    """What a chapter printed (its stored outputs) shows in Chinese: no printed line that the
    page's output catalog translates is left in English (tools/sphinx_local/printed_lines.py),
    and the page shows the translated lines."""
    table = i18n.output_translations(path.removesuffix(".html"))
    translated = {k for k, v in table.items() if v != k}
    page = open_page(ZH + path, WIDE)
    lines = [line.strip() for text in page.evaluate(PRINTED) for line in text.splitlines()]
    english = [line for line in lines if i18n.printed_template(line)[0] in translated]
    assert english == [], f"{ZH}{path}: printed lines left in English: {english[:3]}"
    if translated:
        assert any(re.search("[\u4e00-\u9fff]", line) for line in lines), f"{ZH}{path}"


def test_the_theme_speaks_chinese_on_chinese_pages(open_page):  # noqa: F811
    page = open_page(ZH + "book/batchnorm.html", WIDE)
    text = page.evaluate("() => document.body.innerText")
    assert "目录" in text or "内容" in text, "the theme's 'Contents' is not translated"
    placeholder = page.evaluate(
        "() => (document.querySelector('input[name=q], .search-button__default-text') || {}).textContent || document.querySelector('input[name=q]')?.placeholder"  # noqa: E501
    )
    assert placeholder and re.search("[\u4e00-\u9fff]", placeholder), placeholder


def test_search_finds_a_chinese_word(open_page):  # noqa: F811
    page = open_page(ZH + "search.html?q=" + "层归一化", WIDE)
    page.wait_for_selector("#search-results li", timeout=20_000)
    titles = page.evaluate(
        "() => [...document.querySelectorAll('#search-results li a')].map(a => a.textContent)"
    )
    assert any("层归一化" in t for t in titles), titles


def test_the_sidebar_captions_and_solution_titles_are_chinese():
    """The table of contents' captions (tools/sphinx_local/toc_captions.py) and a solution's
    title, which repeats its exercise's (tools/sphinx_local/exercise_titles.py), in Chinese."""
    import polib

    page = (SITE / ZH / "book" / "grade-your-own.html").read_text(encoding="utf-8")
    captions = re.findall(r'caption-text">([^<]*)<', page)
    assert captions and not [c for c in captions if re.search("[A-Za-z]{3,}", c)], captions
    catalog = polib.pofile(str(i18n.CATALOGS / "book" / "grade-your-own.po"))
    titles = [e.msgid for e in catalog if e.msgid in ("find the bugs", "grade your own LayerNorm")]
    assert titles, "the exercise titles are in the page's catalog"
    assert not [t for t in titles if t in page], [t for t in titles if t in page]
