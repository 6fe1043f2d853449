"""Sphinx extension: the Chinese site's search index without a quadratic look-up.

Sphinx 7.4's Chinese search language (``sphinx.search.zh``) keeps every Latin word it has
split, from every page, in one list (``SearchChinese.latin_terms``, duplicates included), and
asks ``word in latin_terms`` for each word it stems: a scan of a list that grows with the
book (about 29,000 scans of a list of tens of thousands of words, the largest single cost of
the Chinese build in a profile). This gives that list a set beside it for the membership
test: the same answers, so the same index.
"""

from __future__ import annotations

from sphinx.search import zh


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
