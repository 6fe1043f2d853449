"""Sphinx extension: the site as readers use it, on a phone and from a search.

* Every figure of the book (a PNG under ``_images/``) is a link to itself: a tap opens
  it full size, where a phone's browser zooms. On a 420-pixel screen a 1,000-pixel
  figure is shown about 390 pixels wide, too small to read its labels.
* Search result snippets without raw TeX. Sphinx's search (``searchtools.js``) builds a
  snippet from the text of the fetched page, where a formula is still its TeX source
  (MathJax typesets it in the browser), so snippets showed ``\\sigma^2_c + \\rho\\,\\frac``.
  A formula becomes "…" in the snippet.
* The current chapter is scrolled into view in the sidebar's chapter list, which scrolls
  on its own under the logo and the search box (book.css).
* Following a search result highlights the term on the page again. sphinx_highlight.js
  only highlights where ``searchtools.js`` is not loaded (it takes such a page for the
  search page), and pydata-sphinx-theme 0.17 loads it on every page for its search
  dialog, so it never did. The script below calls it on every page but the search page.

The script is added inline (``app.add_js_file(None, body=...)``): the site keeps no
``.js`` file of its own under ``_static``. tests/browser/test_reader.py checks them
in a browser; tests/test_reader_fixes.py tells when Sphinx no longer needs them.
"""

from __future__ import annotations

import re

# An <img> of a figure: Sphinx copies every output image to _images/.
_FIGURE = re.compile(
    r'<img\b[^>]*?\bsrc="(?P<src>[^"]*_images/[^"]+\.(?:png|svg|jpe?g|gif))"[^>]*>'
)
ZOOM_CLASS = "figure-zoom"

SCRIPT = r"""
document.addEventListener("DOMContentLoaded", () => {
  // The chapter list scrolls on its own (book.css): bring the current chapter into view.
  const current = [...document.querySelectorAll(".bd-docs-nav li.active > a")].pop();
  const list = current && current.closest(".sidebar-primary-item");
  if (list && list.scrollHeight > list.clientHeight) {
    const below = current.getBoundingClientRect().bottom - list.getBoundingClientRect().bottom;
    if (below > 0) list.scrollTop += below + list.clientHeight / 3;
  }
  if (typeof Search === "undefined") return;
  // Snippets from the fetched page's text: a formula's TeX source becomes "…".
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".math, mjx-container").forEach((el) => el.replaceWith(" … "));
    return htmlToText(doc.documentElement.outerHTML, anchor);
  };
  // A page opened from the search results: highlight the terms searched for.
  if (!document.getElementById("search-results") && typeof SphinxHighlight !== "undefined") {
    SphinxHighlight.highlightSearchWords();
  }
});
"""


def link_figures(body: str) -> str:
    """Wrap each figure's ``<img>`` in a link to the image itself (full size), unless it
    is inside a link already."""

    def wrap(m: re.Match) -> str:
        before = body[: m.start()]
        if before.rfind("<a ") > before.rfind("</a>"):
            return m[0]
        link = f'<a class="{ZOOM_CLASS}" href="{m["src"]}" title="Open the figure full size">'
        return f"{link}{m[0]}</a>"

    return _FIGURE.sub(wrap, body)


def _page(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body", "")
    if body:
        context["body"] = link_figures(body)


def setup(app):
    app.add_js_file(None, body=SCRIPT)
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
