"""Sphinx extension: the site as readers use it, on a phone and from a search.

* Every figure of the book (a PNG under ``_images/``) is a link to itself, and a click or
  a tap opens it in a zoom view over the page (a ``<dialog>``): the figure at least at
  the size it was drawn for (stored at twice that), to be scrolled and pinch-zoomed,
  closed by its button, Esc or a tap beside it. On a 420-pixel screen a 700-pixel figure
  is shown 390 pixels wide, its labels too small to read. Without JavaScript the link
  opens the image itself.
* The student edition (``hide_solutions``, tools/student.py) has no launch button: where
  the text sends the reader to "the rocket icon", it says to download the notebook with
  the button at the top of the page instead (``STUDENT_WORDING``).
* A figure's alternative text says what it shows: a figure made by ``norms.plots``
  carries its description in its PNG (``Description``, see norms/plots/style.py), which
  becomes the ``alt`` of the ``<img>`` (Sphinx gave it the file's path).
* The search page fetches a result's page, for its snippet, only when the result comes
  near the screen (Sphinx's search fetched every matching page at once: 5.8 MB for a
  common word), and each page once.
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

import html
import re
import struct
import zlib
from pathlib import Path

# An <img> of a figure: Sphinx copies every output image to _images/.
_FIGURE = re.compile(
    r'<img\b[^>]*?\bsrc="(?P<src>[^"]*_images/[^"]+\.(?:png|svg|jpe?g|gif))"[^>]*>'
)
ZOOM_CLASS = "figure-zoom"
_IMAGE_REFERENCE = re.compile(
    r'<a class="reference internal image-reference" href="(?P<href>[^"]*_images/[^"]+)">'
)

SCRIPT = r"""
// The search page fetches a result's page (for its snippet) only when the result comes near
// the screen, and each page once: searchtools.js fetched every matching page at once.
if (/\/search\.html$/.test(location.pathname) && "IntersectionObserver" in window) {
  const realFetch = window.fetch.bind(window);
  const texts = new Map();
  const text = (url) => {
    const page = url.split("#")[0];
    if (!texts.has(page)) texts.set(page, realFetch(page).then((r) => r.text()));
    return texts.get(page).then((body) => new Response(body));
  };
  window.fetch = (url, options) => {
    if (typeof url !== "string" || !/\.html(#.*)?$/.test(url)) return realFetch(url, options);
    return new Promise((resolve, reject) => setTimeout(() => {
      // searchtools.js appends the result's <li> right after asking for its page
      const item = [...document.querySelectorAll("#search-results li")].pop();
      if (!item) return text(url).then(resolve, reject);
      const seen = new IntersectionObserver((entries) => {
        if (!entries.some((e) => e.isIntersecting)) return;
        seen.disconnect();
        text(url).then(resolve, reject);
      }, { rootMargin: "300px 0px" });
      seen.observe(item);
    }, 0));
  };
}
// The chapter list scrolls on its own (book.css): bring the current chapter into view, once
// the page is laid out and again when it has loaded (a late image or font can move the list).
const showCurrentChapter = () => {
  const current = [...document.querySelectorAll(".bd-docs-nav li.active > a")].pop();
  const list = current && current.closest(".sidebar-primary-item");
  if (list && list.scrollHeight > list.clientHeight) {
    const below = current.getBoundingClientRect().bottom - list.getBoundingClientRect().bottom;
    if (below > 0) list.scrollTop += below + list.clientHeight / 3;
  }
};
window.addEventListener("load", showCurrentChapter);
document.addEventListener("DOMContentLoaded", () => {
  showCurrentChapter();
  // A figure opens in a zoom view over the page.
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a.figure-zoom");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button) return;
    const img = link.querySelector("img");
    if (!img || !img.naturalWidth) return;
    event.preventDefault();
    let view = document.getElementById("figure-zoom-view");
    if (!view) {
      view = document.createElement("dialog");
      view.id = "figure-zoom-view";
      view.className = "figure-zoom-view";
      view.innerHTML = '<button type="button" class="figure-zoom-close"'
        + ' aria-label="Close the figure">\u00d7</button>'
        + '<div class="figure-zoom-body"><img alt=""></div>';
      view.addEventListener("click", (e) => {
        if (e.target === view || e.target.closest(".figure-zoom-close")) view.close();
      });
      document.body.append(view);
    }
    const big = view.querySelector(".figure-zoom-body img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    // at least the size it was drawn for (its width attribute), and 1.6 times the size shown
    const drawn = parseFloat(img.getAttribute("width")) || img.naturalWidth / 2;
    const shown = img.getBoundingClientRect().width;
    big.style.width = Math.min(img.naturalWidth, Math.max(drawn, 1.6 * shown)) + "px";
    view.showModal();
    view.querySelector(".figure-zoom-body").scrollTo(0, 0);
  });
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

    # Sphinx links a figure with a width (every figure of norms.plots) to itself already
    body = _IMAGE_REFERENCE.sub(
        f'<a class="{ZOOM_CLASS} reference internal image-reference" '
        'title="Open the figure full size" href="\\g<href>">',
        body,
    )
    return _FIGURE.sub(wrap, body)


#: text of the book (prose and stored outputs) that names the launch button, and what the
#: student edition, which has none, says instead
STUDENT_WORDING = {
    "Open the notebook in Colab (the rocket icon at the top of the page)": (
        "Download the notebook (the button at the top of the page) and run it in Colab or Jupyter"
    ),
    "Every notebook page has a launch button (the rocket icon at the top).": (
        "Download a chapter's notebook with the button at the top of its page and open it "
        "in Colab (File, Upload notebook)."
    ),
    "(the rocket icon at the top)": "(download the notebook with the button at the top)",
}


def student_wording(text: str) -> str:
    """``text`` as the student edition says it (``STUDENT_WORDING``)."""
    for old, new in STUDENT_WORDING.items():
        text = text.replace(old, new)
    return text


def png_description(data: bytes) -> str | None:
    """The ``Description`` text chunk of a PNG (tEXt or iTXt), or None."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        chunk = data[at + 8 : at + 8 + length]
        if kind == b"tEXt" and chunk.startswith(b"Description\0"):
            return chunk.split(b"\0", 1)[1].decode("latin-1")
        if kind == b"iTXt" and chunk.startswith(b"Description\0"):
            rest = chunk.split(b"\0", 1)[1]
            compressed, _method = rest[0], rest[1]
            text = rest[2:].split(b"\0", 2)[2]
            return (zlib.decompress(text) if compressed else text).decode("utf-8")
        if kind == b"IEND":
            break
        at += 12 + length
    return None


_IMG_TAG = re.compile(r'<img\b[^>]*\bsrc="(?P<src>[^"]*_images/(?P<name>[^"/]+\.png))"[^>]*>')


_HEADING = re.compile(r"<h[1-6]\b[^>]*>(.*?)</h[1-6]>", re.S)


def _section_title(body: str, at: int) -> str | None:
    """The text of the last heading before position ``at`` of ``body``."""
    headings = [m for m in _HEADING.finditer(body, 0, at)]
    if not headings:
        return None
    text = re.sub(r"<[^>]+>", "", headings[-1][1]).replace("#", "")
    return html.unescape(" ".join(text.split())) or None


def describe_figures(body: str, describe) -> str:
    """Give each figure ``<img>`` whose alt is missing, empty or a file path the alternative
    text ``describe(file name)`` returns, or else (a figure that carries no description,
    such as one drawn with pyplot) "Figure of the section "<its heading>"."."""

    def fix(m: re.Match) -> str:
        tag = m[0]
        alt = re.search(r'\balt="([^"]*)"', tag)
        if alt and alt[1].strip() and not re.search(r"\.(png|svg|jpe?g|gif)$", alt[1]):
            return tag
        text = describe(m["name"])
        if not text:
            section = _section_title(body, m.start())
            text = f"Figure of the section \u201c{section}\u201d" if section else None
        if not text:
            return tag
        text = html.escape(text, quote=True)
        if alt:
            return tag[: alt.start(1)] + text + tag[alt.end(1) :]
        return tag.replace("<img", f'<img alt="{text}"', 1)

    return _IMG_TAG.sub(fix, body)


def _describer(app):
    """``describe(name)``: the Description of the source PNG that Sphinx copies to
    ``_images/name``."""
    sources = {dest: src for src, dest in getattr(app.builder, "images", {}).items()}

    def describe(name: str) -> str | None:
        source = sources.get(name)
        if source is None:
            return None
        path = Path(app.srcdir) / source
        return png_description(path.read_bytes()) if path.exists() else None

    return describe


def _page(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body", "")
    if body:
        body = link_figures(describe_figures(body, _describer(app)))
        if app.config.hide_solutions:
            body = student_wording(body)
        context["body"] = body


def setup(app):
    app.add_js_file(None, body=SCRIPT)
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
