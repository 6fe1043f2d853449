"""Sphinx extension: a link to the same page in the book's other language, in the header.

The English site is the root of ``_build/html``; the Chinese edition (``tools/i18n.py``) is
the same site under ``zh/`` (``book/batchnorm.html`` and ``zh/book/batchnorm.html``). Each
page's article header (next to the download and full-screen buttons, so it shows at 420 px
too) links to its twin: "中文" on an English page, "English" on a Chinese one. A build
that has no twin (the student edition) sets ``language_switch = False`` and shows no link.
"""

from __future__ import annotations

#: the Chinese edition's folder inside the English site (tools/i18n.py's PREFIX)
PREFIX = "zh"


def twin(pagename: str, language: str | None) -> dict:
    """The link to ``pagename`` in the other language, relative to the page."""
    up = "../" * pagename.count("/")
    if language and language.startswith("zh"):
        return {"href": f"{up}../{pagename}.html", "label": "English", "lang": "en"}
    return {"href": f"{up}{PREFIX}/{pagename}.html", "label": "中文", "lang": "zh-CN"}


def _page(app, pagename, templatename, context, doctree) -> None:
    if app.config.language_switch and doctree is not None:
        context["language_switch"] = twin(pagename, app.config.language)


def setup(app):
    app.add_config_value("language_switch", True, "html")
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
