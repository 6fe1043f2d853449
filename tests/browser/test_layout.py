"""The site's layout beyond what every page's visits check (test_site.py: nothing wider than a
phone, equations that scroll, sharp figures, the page weight and its median): a figure's zoom
view, explorer data fetched only near the screen, the quizzes' contrast and the explorers'
drawings readable."""

from __future__ import annotations

import pytest

from norms.plots import style

from .test_site import NARROW, WIDE, scroll_through


def _open(browser, base_url, path, width, scheme="light"):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{base_url}/{path}", wait_until="networkidle")
    if page.evaluate("() => document.querySelectorAll('.math').length"):
        page.wait_for_function("() => window.MathJax && window.MathJax.startup", timeout=15000)
        page.evaluate("() => window.MathJax.startup.promise")
    return context, page


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
