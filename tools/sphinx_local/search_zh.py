"""Sphinx extension: the Chinese site's search index without a quadratic look-up.

Sphinx 7.4's Chinese search language (``sphinx.search.zh``) keeps every Latin word it has
split, from every page, in one list (``SearchChinese.latin_terms``, duplicates included), and
asks ``word in latin_terms`` for each word it stems: a scan of a list that grows with the
book (about 29,000 scans of a list of tens of thousands of words, the largest single cost of
the Chinese build in a profile). This gives that list a set beside it for the membership
test: the same answers, so the same index.

It also makes a search for a term of the glossary find every page that uses it. Sphinx splits
the pages' Chinese into words with jieba, but the browser splits a query only at spaces and
punctuation: a query 层归一化 was one word that no page had (jieba had split the pages' text
into 层 and 归一化), so only the LayerNorm chapter was found, by its title. Here (1) the
glossary's Chinese terms and synonyms (book/glossary.md) are words for jieba, so the index has
层归一化 and 批量归一化 as well as 归一化, and (2) the browser splits a run of Chinese
characters into the longest words the index has (forward maximum matching, ``SPLITTER``),
leaving out single characters the index never holds (Sphinx indexes words of two characters
or more).
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.search import zh

GLOSSARY = Path(__file__).resolve().parents[2] / "book" / "glossary.md"

#: Replaces searchtools.js's splitQuery on the Chinese site (Sphinx's ``js_splitter_code``).
SPLITTER = r"""
var splitQuery = (query) => {
  const index = (typeof Search !== "undefined" && Search._index) || {};
  const has = (table, w) => Boolean(table) && Object.hasOwn(table, w);
  const known = (w) => has(index.terms, w) || has(index.titleterms, w);
  const out = [];
  for (const part of query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)) {
    for (const run of part.split(/(\p{Script=Han}+)/u)) {
      if (!run) continue;
      if (!/\p{Script=Han}/u.test(run)) { out.push(run); continue; }
      for (let i = 0; i < run.length;) {
        let j = Math.min(run.length, i + 12);
        while (j > i + 1 && !known(run.slice(i, j))) j--;
        if (j > i + 1) out.push(run.slice(i, j));
        i = j;
      }
    }
  }
  return out;
};
"""


def glossary_terms(text: str) -> list[str]:
    """The Chinese words of the glossary's 中文 column (terms and synonyms), two characters
    or more."""
    words = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and line.lstrip().startswith("|"):
            words += [w for w in re.findall(r"[\u4e00-\u9fff]{2,}", cells[1]) if w != "又作"]
    return sorted(set(words))


def add_glossary_words() -> None:
    """The glossary's Chinese terms and synonyms become words for jieba (when Sphinx uses it)."""
    if zh.JIEBA:
        for word in glossary_terms(GLOSSARY.read_text(encoding="utf-8")):
            zh.jieba.add_word(word)


class LatinTerms(list):
    """A list whose ``in`` is a set look-up (only ``extend`` and ``append`` add to it)."""

    def __init__(self, items=()):
        super().__init__(items)
        self._members = set(self)

    def extend(self, items) -> None:
        items = list(items)
        super().extend(items)
        self._members.update(items)

    def append(self, item) -> None:
        super().append(item)
        self._members.add(item)

    def __contains__(self, item) -> bool:
        return item in self._members


def setup(app):
    if not isinstance(zh.SearchChinese.latin_terms, LatinTerms):
        zh.SearchChinese.latin_terms = LatinTerms(zh.SearchChinese.latin_terms)
    zh.SearchChinese.js_splitter_code = SPLITTER
    add_glossary_words()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
