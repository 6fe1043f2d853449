"""Every page of the built site, in a real browser: self-contained, no broken
requests, no JavaScript errors, all maths typeset, no widget control that
cannot work without a kernel, and (a chapter) at most 1.2 MB with its images loaded lazily
(issue 37: 1.63 MB at most and 1.41 MB the median before, 0.84 MB and 0.60 MB after with most
figures still stored at 1x; figures at 2x weigh about 2.3 times as much; test_layout.py checks
the median).
Each page is loaded once for all of these."""

from __future__ import annotations

import gzip
from urllib.parse import urlparse

import pytest

from .conftest import SITE

# slides/: the reveal.js decks `make book` copies in, checked slide by slide by test_slides.py
SKIPPED_FOLDERS = {"_static", "_sources", "_images", "_downloads", "slides"}
# A chapter page with every lazy image shown, each file gzip-compressed as a server sends it
MAX_PAGE_BYTES = 1_200_000


def site_pages() -> list[str]:
    """Every HTML page of the built site, relative to its root."""
    if not SITE.exists():
        return ["index.html"]  # the `site` fixture then fails with a clear message
    return sorted(
        p.relative_to(SITE).as_posix()
        for p in SITE.rglob("*.html")
        if not SKIPPED_FOLDERS & set(p.relative_to(SITE).parts)
    )


# Text a reader would see if MathJax did not run: TeX delimiters and commands.
FIND_RAW_TEX = r"""() => {
  const skip = new Set(["SCRIPT", "STYLE", "PRE", "CODE", "TEXTAREA", "MJX-CONTAINER", "MJX-ASSISTIVE-MML"]);
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    let el = node.parentElement, skipped = false;
    for (; el; el = el.parentElement) { if (skip.has(el.tagName)) { skipped = true; break; } }
    if (!skipped && /\\\(|\\\[|\$\$|\\begin\{|\\frac|\\mathrm/.test(node.textContent)) {
      raw.push(node.textContent.trim().slice(0, 80));
    }
  }
  return raw;
}"""  # noqa: E501 - JavaScript; a line break would change the string

# Content wider than its box that the reader cannot scroll to: display maths, tables,
# printed output and code. Either its own box hides what overflows, or it (or what
# spills out of it) reaches past the text column and no box in between scrolls.
FIND_CLIPPED = r"""() => {
  const article = document.querySelector(".bd-article") || document.body;
  const right = article.getBoundingClientRect().right + 1;
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const clipped = [];
  for (const el of article.querySelectorAll('mjx-container[display="true"], table, pre')) {
    if (el.getClientRects().length === 0) continue;  // hidden (a collapsed solution)
    const box = el.getBoundingClientRect(), style = getComputedStyle(el).overflowX;
    const spills = el.scrollWidth > el.clientWidth + 1;
    const own = spills && (style === "hidden" || style === "clip");
    // content that spills out of a visible-overflow box reaches past the box
    let out = (spills && style === "visible" ? box.left + el.scrollWidth : box.right) > right;
    for (let a = el; out && a && a !== article; a = a.parentElement) {
      if (scrolls(a) && a.getBoundingClientRect().right <= right) out = false;
    }
    if (own || out) clipped.push(el.tagName.toLowerCase() + ": " + el.textContent.trim().slice(0, 60));
  }
  return clipped;
}"""  # noqa: E501 - JavaScript; a line break would change the string

WIDGET_VIEWS = """() => document.querySelectorAll(
  'script[type="application/vnd.jupyter.widget-view+json"], .jupyter-widgets, .widget-interact'
).length"""


def off_site(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname != "127.0.0.1"


def is_chapter(path: str) -> bool:
    """A chapter page, of either edition (the Chinese one under zh/)."""
    return path.startswith(("book/", "zh/book/"))


# After the scroll, each shown image of the text that has not loaded yet (the browser may
# skip a lazy image the scroll passed quickly on a busy machine) is brought into view and
# waited for, at most IMAGE_WAIT_MS each: a test then reads a loaded image or a broken one.
IMAGE_WAIT_MS = 10000
LOAD_SHOWN_IMAGES = """async (ms) => {
  for (const img of document.querySelectorAll('.bd-article img')) {
    if (!img.getClientRects().length || (img.complete && img.naturalWidth)) continue;
    img.scrollIntoView();
    await Promise.race([img.decode().catch(() => {}), new Promise(r => setTimeout(r, ms))]);
  }
}"""


def scroll_through(page) -> None:
    """Scroll to the bottom as a reader would, so that every lazy image loads."""
    page.evaluate(
        "async () => { for (let y = 0; y < document.body.scrollHeight; y += 600) {"
        " window.scrollTo(0, y); await new Promise(r => setTimeout(r, 30)); } }"
    )
    page.evaluate(LOAD_SHOWN_IMAGES, IMAGE_WAIT_MS)
    page.wait_for_load_state("networkidle")


def check_weight(page, path: str, bodies: dict[str, bytes]) -> None:
    """A chapter weighs at most MAX_PAGE_BYTES once scrolled through; only a page that shows a
    widget loads the ipywidgets manager; every image in the text is loaded lazily."""
    total = sum(len(gzip.compress(body, 6)) for body in bodies.values())
    print(f"{path}: {total / 1e6:.2f} MB compressed, {len(bodies)} files")
    assert total < MAX_PAGE_BYTES, f"{path} weighs {total / 1e6:.2f} MB compressed (at most 1.2 MB)"
    body = (SITE / path).read_text(errors="ignore")
    if "application/vnd.jupyter.widget-view+json" not in body:
        assert not [u for u in bodies if u.endswith(("embed-amd.js", "require.js"))], (
            f"{path} shows no widget but loads the ipywidgets manager"
        )
    images = page.locator(".bd-article img")
    for i in range(images.count()):
        assert images.nth(i).get_attribute("loading") == "lazy", (
            f"{path}: image {i} is not lazily loaded"
        )


@pytest.mark.parametrize("path", site_pages())
def test_page(page, base_url, path):
    bodies: dict[str, bytes] = {}

    def keep(response):
        if urlparse(response.url).hostname == "127.0.0.1" and response.status == 200:
            try:
                bodies[response.url] = response.body()
            except Exception:  # noqa: BLE001 - a redirect or a body already gone
                pass

    if is_chapter(path):
        page.on("response", keep)
    page.goto(f"{base_url}/{path}", wait_until="networkidle")
    math_count = page.evaluate("() => document.querySelectorAll('.math').length")
    if math_count:
        page.wait_for_function("() => window.MathJax && window.MathJax.startup", timeout=15000)
        page.evaluate("() => window.MathJax.startup.promise")
        page.wait_for_load_state("networkidle")
    if is_chapter(path):
        scroll_through(page)
    rec = page.recorder
    assert not [u for u in rec.requests if off_site(u)], f"{path} loads from other hosts"
    assert not rec.bad_responses, f"{path}: failed responses {rec.bad_responses}"
    assert not rec.failed, f"{path}: failed requests {rec.failed}"
    assert not rec.errors, f"{path}: JavaScript errors {rec.errors}"
    if math_count:
        typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
        assert typeset >= math_count, f"{path}: {math_count} maths, only {typeset} typeset"
    assert page.evaluate(FIND_RAW_TEX) == [], f"{path} shows untypeset TeX"
    assert page.evaluate(FIND_CLIPPED) == [], f"{path} clips content at the column's edge"
    assert page.evaluate(WIDGET_VIEWS) == 0, f"{path} shows a widget control that needs a kernel"
    if is_chapter(path):
        check_weight(page, path, bodies)


def test_site_has_pages():
    assert len(site_pages()) >= 3, "the site has fewer pages than the table of contents"
