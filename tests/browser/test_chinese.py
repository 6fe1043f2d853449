"""The Chinese edition on the built site (``_build/html/zh``, tools/i18n.py): the theme's own
strings in Chinese, search finds Chinese words, the sidebar's captions and solution titles
translated. test_site.py's visits check the rest on every page of both editions: each chapter
links to its twin in the other language from the header at 420 px too; Chinese pages say
``lang="zh-CN"``, carry no untranslated English paragraph, log no console error on a phone
and show their printed sentences in Chinese; and the checks of every page (requests, maths,
page weight) run on the Chinese pages too."""

from __future__ import annotations

import re

import pytest

from .conftest import SITE
from .test_reader import open_page  # noqa: F401 - a fixture
from .test_site import WIDE, ZH, i18n


def test_the_theme_speaks_chinese_on_chinese_pages(open_page):  # noqa: F811
    page = open_page(ZH + "book/batchnorm.html", WIDE)
    text = page.evaluate("() => document.body.innerText")
    assert "目录" in text or "内容" in text, "the theme's 'Contents' is not translated"
    placeholder = page.evaluate(
        "() => (document.querySelector('input[name=q], .search-button__default-text') || {}).textContent || document.querySelector('input[name=q]')?.placeholder"  # noqa: E501
    )
    assert placeholder and re.search("[\u4e00-\u9fff]", placeholder), placeholder


def _search(open_page, query):  # noqa: F811
    page = open_page(ZH + "search.html?q=" + query, WIDE)
    page.wait_for_selector("#search-results li", timeout=20_000)
    return page.evaluate(
        "() => [...document.querySelectorAll('#search-results li a')].map(a => a.textContent)"
    )


def test_search_finds_a_chinese_word(open_page):  # noqa: F811
    titles = _search(open_page, "层归一化")
    assert any("层归一化" in t for t in titles), titles


@pytest.mark.parametrize(("query", "least"), [("层归一化", 10), ("滑动平均", 5), ("批量归一化", 1)])
def test_search_finds_every_page_that_uses_a_glossary_term(open_page, query, least):  # noqa: F811
    """The query is split into the index's words (tools/sphinx_local/search_zh.py): the pages
    whose text uses the term are found, not only a page with it in its title (before, a query
    of Chinese characters was one word that no page had). 批量归一化 is a synonym the glossary
    lists (no chapter uses it): it finds the glossary, as the glossary says."""
    titles = _search(open_page, query)
    assert len(titles) >= least and any("术语表" in t for t in titles), (query, titles)


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
