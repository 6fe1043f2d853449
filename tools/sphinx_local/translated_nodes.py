"""Sphinx extension: the nodes of a translated page belong to the page.

Sphinx's ``Locale`` transform (sphinx.transforms.i18n, Sphinx 7.4) parses each translated
message as a small document of its own and moves that document's nodes into the page. The
nodes keep it as their ``document``, and its settings hold the whole build environment.
Sphinx removes the environment from the page's own settings before it pickles the page
(``write_doctree``), but not from these: every page of the Chinese site was pickled with a copy
of the environment (about 9 MB each, an English page about 0.35 MB), and reading the pages back
(for each ``numref``, for the figure numbers, to write them) took most of the Chinese builds'
time. After the read transforms (``doctree-read``), each node's document is the page.
"""

from __future__ import annotations

from docutils import nodes


def adopt(app, doctree: nodes.document) -> None:
    """Make ``doctree`` the document of every node in it."""
    for node in doctree.findall():
        if node.document is not doctree:
            node.document = doctree


def setup(app):
    app.connect("doctree-read", adopt)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
