"""Every page as a phone and a laptop show it: nothing wider than a 420-pixel screen, every
equation that does not fit shows that it scrolls, every figure sharp and shown at least at
the size its text was made legible for (norms.plots.style), explorer data fetched only
near the screen, and the site's page weight within its budget."""

from __future__ import annotations

import gzip
import statistics
from urllib.parse import urlparse

import pytest

from norms.plots import style

from .test_reader import NARROW, WIDE, _pages_with
from .test_site import scroll_through, site_pages

# What sticks out of a phone's screen: the page itself, or any element of the article
# that reaches past the viewport without a scrolling box around it.
TOO_WIDE = r"""() => {
  const w = document.documentElement.clientWidth, out = [];
  if (document.documentElement.scrollWidth > w + 1) out.push("the page is " + document.documentElement.scrollWidth + " px wide");
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  for (const el of document.querySelectorAll(".bd-article *")) {
    if (!el.getClientRects().length) continue;
    const r = el.getBoundingClientRect();
    if (r.right <= w + 1 || r.width === 0) continue;
    let a = el.parentElement, inside = false;
    for (; a && !a.classList.contains("bd-article"); a = a.parentElement) {
      if (scrolls(a) && a.getBoundingClientRect().right <= w + 1) { inside = true; break; }
      if (getComputedStyle(a).overflowX === "hidden" && a.getBoundingClientRect().right <= w + 1) { inside = true; break; }
    }
    if (!inside) out.push(el.tagName.toLowerCase() + "." + el.className + " reaches " + Math.round(r.right) + " px: " + (el.textContent || "").trim().slice(0, 50));
  }
  return out.slice(0, 5);
}"""  # noqa: E501 - JavaScript

# A display equation wider than its box: it must scroll (overflow auto/scroll) and show a
# shadow at the edge where there is more (book.css: local and scroll gradients).
CLIPPED_EQUATIONS = r"""() => [...document.querySelectorAll('.bd-article mjx-container[display="true"]')]
  .filter((el) => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)
  .map((el) => { const s = getComputedStyle(el);
    return { what: el.textContent.trim().slice(0, 40), width: el.scrollWidth, box: el.clientWidth,
             scrolls: ["auto", "scroll"].includes(s.overflowX),
             hint: /gradient/.test(s.backgroundImage) && /local/.test(s.backgroundAttachment) }; })"""  # noqa: E501


def _open(browser, base_url, path, width, scheme="light"):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{base_url}/{path}", wait_until="networkidle")
    if page.evaluate("() => document.querySelectorAll('.math').length"):
        page.wait_for_function("() => window.MathJax && window.MathJax.startup", timeout=15000)
        page.evaluate("() => window.MathJax.startup.promise")
    return context, page


@pytest.mark.parametrize("path", site_pages())
def test_nothing_is_wider_than_a_phone(browser, base_url, path):
    context, page = _open(browser, base_url, path, NARROW)
    try:
        scroll_through(page)  # explorers and quizzes drawn, lazy images loaded
        assert page.evaluate(TOO_WIDE) == [], f"{path} at {NARROW} px"
        clipped = page.evaluate(CLIPPED_EQUATIONS)
        bad = [c for c in clipped if not (c["scrolls"] and c["hint"])]
        assert not bad, f"{path}: equations cut off without a visible way to the rest: {bad}"
    finally:
        context.close()


# Each figure from a cell (under _images/, with the width it was drawn for): its pixels,
# its drawn width (the width in its style) and the width it is shown at.
FIGURES = """() => [...document.querySelectorAll('.bd-article .cell_output img[src*="_images/"]')]
  .map((img) => ({ src: img.getAttribute('src').split('/').pop().slice(0, 12),
                   natural: img.naturalWidth, drawn: parseFloat(img.style.width) || null,
                   shown: img.getBoundingClientRect().width }))"""


@pytest.mark.parametrize("path", _pages_with("_images/"))
def test_every_figure_is_sharp_and_shown_as_large_as_its_text_needs(browser, base_url, path):
    """norms.plots.style makes every text of a figure at least MIN_TEXT_PX where the figure is
    shown min(drawn width, COLUMN_PX) wide; here the page shows it at least that wide at
    1280 px, from twice as many pixels."""
    context, page = _open(browser, base_url, path, WIDE)
    try:
        scroll_through(page)
        figures = page.evaluate(FIGURES)
        assert figures, f"{path}: no figure"
        for fig in figures:
            assert fig["drawn"], f"{path}: {fig['src']} has no drawn width (stored before 2x)"
            assert fig["natural"] >= style.SCALE * fig["drawn"] - 1, f"{path}: {fig} not sharp"
            least = min(fig["drawn"], style.COLUMN_PX)
            assert fig["shown"] >= least - 1, (
                f"{path}: {fig['src']} shown {fig['shown']:.0f} px wide, its text needs {least}"
            )
    finally:
        context.close()


def test_a_figure_opens_in_a_zoom_view_on_a_phone(browser, base_url):
    context, page = _open(browser, base_url, "book/side-by-side.html", NARROW)
    try:
        link = page.locator("a.figure-zoom").first
        link.scroll_into_view_if_needed()
        shown = link.locator("img").bounding_box()["width"]
        link.click()
        view = page.locator("dialog.figure-zoom-view")
        view.wait_for(state="visible")
        big = view.locator("img").bounding_box()["width"]
        assert big >= 1.6 * shown - 1, f"the zoom view shows the figure {big} px wide ({shown})"
        assert page.url.endswith("side-by-side.html"), "the zoom left the page"
        view.locator(".figure-zoom-close").click()
        view.wait_for(state="hidden")
    finally:
        context.close()


def test_an_explorers_data_loads_when_it_comes_near(browser, base_url):
    context = browser.new_context(viewport={"width": WIDE, "height": 900})
    page = context.new_page()
    asked = []
    page.on("request", lambda r: "/_explorers/" in r.url and asked.append(r.url))
    try:
        page.goto(f"{base_url}/book/batchnorm.html", wait_until="networkidle")
        assert page.evaluate("() => document.querySelector('script[data-src]') !== null")
        assert asked == [], "the explorer's data loaded before the reader got near it"
        page.locator("script[data-src]").first.evaluate("el => el.parentElement.scrollIntoView()")
        page.wait_for_function(
            "() => document.querySelector('script[data-src]').parentElement.querySelector('svg')"
        )
        assert len(asked) == 1
    finally:
        context.close()


#: a chapter with every lazy image shown, each file gzip-compressed as a server sends it
MEDIAN_CHAPTER_BYTES = 700_000  # half of the 1.41 MB median before (issue 37)


def test_the_median_chapter_is_within_the_budget(browser, base_url):
    weights = {}
    for path in (p for p in site_pages() if p.startswith("book/")):  # the English edition
        context = browser.new_context(viewport={"width": WIDE, "height": 900})
        page = context.new_page()
        bodies: dict[str, bytes] = {}

        def keep(response, bodies=bodies):
            if urlparse(response.url).hostname == "127.0.0.1" and response.status == 200:
                try:
                    bodies[response.url] = response.body()
                except Exception:  # noqa: BLE001 - a redirect or a body already gone
                    pass

        page.on("response", keep)
        page.goto(f"{base_url}/{path}", wait_until="networkidle")
        scroll_through(page)
        weights[path] = sum(len(gzip.compress(b, 6)) for b in bodies.values())
        context.close()
    median = statistics.median(weights.values())
    print({k: round(v / 1e6, 2) for k, v in weights.items()}, f"median {median / 1e6:.2f} MB")
    assert median <= MEDIAN_CHAPTER_BYTES, f"the median chapter weighs {median / 1e6:.2f} MB"


# Every quiz question's header and every verdict button: its text against its background.
QUIZ_COLOURS = """() => [...document.querySelectorAll(
    '.MultipleChoiceQn, .ManyChoiceQn, .NumericQn, .StringQn, .correctButton, .incorrectButton')]
  .filter((el) => el.getClientRects().length)
  .map((el) => { const s = getComputedStyle(el);
    return { what: el.className, fg: s.color, bg: s.backgroundColor }; })"""


def _contrast(fg: str, bg: str) -> float:
    import re

    def luminance(rgb: str) -> float:
        values = [float(v) / 255 for v in re.findall(r"[\d.]+", rgb)[:3]]
        lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in values]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_quiz_headers_meet_wcag_aa_contrast(browser, base_url):
    """jupyterquiz's orange header (#f75c03 under white text) was 3.1:1; AA asks 4.5:1."""
    colours = []
    for path in ("book/groupnorm.html", "book/batchnorm.html", "book/training.html"):
        context, page = _open(browser, base_url, path, WIDE)
        try:
            page.wait_for_selector(".MultipleChoiceQn, .ManyChoiceQn, .NumericQn")
            colours += page.evaluate(QUIZ_COLOURS)
        finally:
            context.close()
    kinds = {c["what"].split()[0] for c in colours}
    assert "ManyChoiceQn" in kinds, kinds
    low = [c for c in colours if _contrast(c["fg"], c["bg"]) < 4.5]
    assert not low, low[:3]


# The smallest text of every explorer drawing as shown: its font size, scaled as its SVG is.
EXPLORER_TEXT = """() => [...document.querySelectorAll('.norms-explorer svg')].map((svg) => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const sizes = [...svg.querySelectorAll('text')].map((t) => parseFloat(getComputedStyle(t).fontSize));
  return { smallest: Math.min(...sizes) * scale, right: svg.getBoundingClientRect().right };
})"""  # noqa: E501 - JavaScript


@pytest.mark.parametrize("width", [NARROW, WIDE])
@pytest.mark.parametrize("path", ["book/batchnorm.html", "book/groupnorm.html"])
def test_explorer_drawings_are_readable(browser, base_url, path, width):
    """Their chart text was 8-9 px and the reduction drawing did not shrink at 420 px."""
    context, page = _open(browser, base_url, path, width)
    try:
        scroll_through(page)
        for i in range(page.locator(".norms-explorer").count()):
            page.locator(".norms-explorer").nth(i).scroll_into_view_if_needed()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.norms-explorer')]"
            ".every(e => e.querySelector('svg'))"
        )
        drawings = page.evaluate(EXPLORER_TEXT)
        assert drawings
        for d in drawings:
            assert d["smallest"] >= style.MIN_TEXT_PX, f"{path} at {width} px: {d}"
            assert d["right"] <= page.evaluate("() => document.documentElement.clientWidth")
    finally:
        context.close()
