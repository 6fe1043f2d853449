"""The slide decks (``make slides``, tools/slides.py) in a real browser: each deck, stepped
through to its last slide and fragment, loads nothing from another host, logs no error,
typesets every display equation of its chapter (MathJax output, no TeX error, no raw TeX
left outside the speaker notes), loads every figure of its chapter, has speaker notes, and
shows every quiz answer when stepped to. Nothing of any slide leaves the screen, on a laptop
(1200 px, light mode) and on a phone (420 px, dark mode).

These tests need `make slides` to have built _build/slides; `make test` does that first.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest

from .conftest import PageRecorder
from .test_site import FIND_RAW_TEX

ROOT = Path(__file__).resolve().parents[2]
SLIDES = ROOT / "_build" / "slides"
sys.path.insert(0, str(ROOT / "tools"))
import slides as slide_tool  # noqa: E402

DECKS = [p.stem for p in slide_tool.chapters()]
# The site's raw-TeX finder, leaving out the speaker notes (they keep their TeX on purpose: the
# speaker view shows their HTML in a window without MathJax).
RAW_TEX_BUT_NOTES = FIND_RAW_TEX.replace('"MJX-ASSISTIVE-MML"]', '"MJX-ASSISTIVE-MML", "ASIDE"]')
assert RAW_TEX_BUT_NOTES != FIND_RAW_TEX
NARROW, WIDE = 420, 1200
MAX_STEPS = 500  # far more than any deck has; only against a navigation that never ends


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def slides_url():
    """A static file server for _build/slides on 127.0.0.1; fails when it was not built."""
    if not (SLIDES / "index.html").exists():
        pytest.fail(f"no slides at {SLIDES}: run `make slides` first")
    handler = functools.partial(_QuietHandler, directory=str(SLIDES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@functools.cache
def expected(chapter: str) -> dict:
    """What the chapter's notebook has for its deck: display equations and stored figures."""
    deck = slide_tool.outline(nbformat.read(ROOT / "book" / f"{chapter}.ipynb", as_version=4))
    kinds = [kind for sec in deck["sections"] for kind, _ in sec["items"]]
    return {"equations": kinds.count("equation"), "figures": kinds.count("figure")}


def _open(browser, url: str, width: int, scheme: str):
    context = browser.new_context(
        viewport={"width": width, "height": 900 if width > NARROW else 800}, color_scheme=scheme
    )
    page = context.new_page()
    page.recorder = PageRecorder(page)
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.goto(url, wait_until="networkidle")
    page.wait_for_function("() => window.Reveal && Reveal.isReady() && window.MathJax?.startup")
    page.evaluate("() => MathJax.startup.promise")  # every equation typeset
    return context, page


# What of the current slide lies outside the window (elements inside a typeset equation
# are left out: a wide equation scrolls inside its container, which itself must fit).
OUTSIDE = """() => {
  const slide = Reveal.getCurrentSlide(), w = innerWidth, h = innerHeight, out = [];
  for (const el of slide.querySelectorAll('*')) {
    if (el.closest('mjx-container') && el.tagName !== 'MJX-CONTAINER') continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.left < -1 || r.right > w + 1 || r.top < -1 || r.bottom > h + 1)
      out.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(r.left)}..${Math.round(r.right)} x ${Math.round(r.top)}..${Math.round(r.bottom)}`);
  }
  return out.slice(0, 3);
}"""  # noqa: E501 - JavaScript

AT_END = "() => Reveal.isLastSlide() && !Reveal.availableFragments().next"


# One step in one call to the page (each call a round trip through the driver): where the
# deck is, what of the slide lies outside the window, whether it is the end, and if it is not,
# Reveal.next() (read on the next call).
STEP = f"""() => {{
  const step = {{idx: Reveal.getIndices(), outside: ({OUTSIDE})(), end: ({AT_END})()}};
  if (!step.end) Reveal.next();
  return step;
}}"""


def _step_through(page) -> tuple[int, list[str]]:
    """Go from the first slide to the last fragment of the last slide with Reveal.next();
    the number of distinct slides seen, and what of each lies outside the window."""
    page.evaluate("() => Reveal.slide(0, 0, -1)")
    seen, problems = set(), []
    for _ in range(MAX_STEPS):
        step = page.evaluate(STEP)
        idx = step["idx"]
        seen.add((idx["h"], idx.get("v") or 0))
        problems += [f"slide {idx['h']}/{idx.get('v') or 0}: {p}" for p in step["outside"]]
        if step["end"]:
            return len(seen), problems
    pytest.fail(f"still not at the end after {MAX_STEPS} steps")


def _requests_problems(page, base: str) -> list[str]:
    host = urlparse(base).netloc
    rec = page.recorder
    other = [u for u in rec.requests if not u.startswith("data:") and urlparse(u).netloc != host]
    return (
        [f"request to another host: {u}" for u in other]
        + [f"HTTP error: {r}" for r in rec.bad_responses]
        + [f"failed request: {r}" for r in rec.failed]
        + [f"JavaScript error: {e}" for e in rec.errors]
        + [f"console error: {e}" for e in page.console_errors]
    )


@pytest.mark.parametrize("chapter", DECKS)
def test_a_deck_steps_through_offline_with_its_maths_figures_and_answers(
    browser, slides_url, chapter
):
    context, page = _open(browser, f"{slides_url}/{chapter}.html", WIDE, "light")
    try:
        total = page.evaluate("() => Reveal.getTotalSlides()")
        built = {d["chapter"]: d for d in json.loads((SLIDES / "decks.json").read_text())}
        assert total == built[chapter]["slides"], f"{chapter}: {total} slides in the browser"
        seen, outside = _step_through(page)
        assert seen == total, f"{chapter}: stepped through {seen} of {total} slides"
        assert not outside, f"{chapter} at {WIDE} px: " + "; ".join(outside[:5])
        want = expected(chapter)
        maths = page.evaluate(
            """() => ({display: document.querySelectorAll('.slides mjx-container[display="true"]').length,
                       errors: [...document.querySelectorAll('.slides mjx-merror')].map(e => e.textContent)})"""  # noqa: E501
        )
        assert maths["display"] == want["equations"], (
            f"{chapter}: {maths['display']} typeset display equations, the chapter has "
            f"{want['equations']}"
        )
        assert not maths["errors"], f"{chapter}: TeX errors {maths['errors']}"
        assert not page.evaluate(RAW_TEX_BUT_NOTES), f"{chapter}: raw TeX left in the deck"
        notes = page.evaluate("() => document.querySelectorAll('.slides aside.notes').length")
        assert notes > 0, f"{chapter}: no speaker notes"
        images = page.evaluate(
            "() => [...document.querySelectorAll('.slides img')]"
            ".map(i => i.complete && i.naturalWidth > 0)"
        )
        assert len(images) == want["figures"], (
            f"{chapter}: {len(images)} images, the chapter stores {want['figures']} figures"
        )
        assert all(images), f"{chapter}: {images.count(False)} images did not load"
        fragments = page.evaluate(
            "() => [document.querySelectorAll('.slides .fragment').length,"
            " document.querySelectorAll('.slides .fragment.visible').length]"
        )
        assert fragments[0] == fragments[1], f"{chapter}: quiz answers shown {fragments}"
        assert not _requests_problems(page, slides_url), _requests_problems(page, slides_url)
    finally:
        context.close()


@pytest.mark.parametrize("chapter", DECKS)
def test_every_slide_of_a_deck_fits_a_phone_in_dark_mode(browser, slides_url, chapter):
    context, page = _open(browser, f"{slides_url}/{chapter}.html", NARROW, "dark")
    try:
        _, problems = _step_through(page)
        assert not problems, f"{chapter} at {NARROW} px: " + "; ".join(problems[:5])
        assert page.evaluate("() => document.documentElement.scrollWidth") <= NARROW
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background != "rgb(255, 255, 255)", f"{chapter}: a white page in dark mode"
        assert not _requests_problems(page, slides_url), _requests_problems(page, slides_url)
    finally:
        context.close()


def test_the_index_links_every_deck(browser, slides_url):
    context, page = _open_index(browser, slides_url)
    try:
        links = page.evaluate(
            "() => [...document.querySelectorAll('a')].map(a => a.getAttribute('href'))"
        )
        assert links == [f"{c}.html" for c in DECKS]
        assert not _requests_problems(page, slides_url)
    finally:
        context.close()


def _open_index(browser, url: str):
    context = browser.new_context(viewport={"width": NARROW, "height": 800})
    page = context.new_page()
    page.recorder = PageRecorder(page)
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.goto(f"{url}/index.html", wait_until="networkidle")
    return context, page


# Where the deck is, as one number: slides counted in reading order (vertical ones included).
LINEAR_INDEX = "() => Reveal.getSlides().indexOf(Reveal.getCurrentSlide())"


@pytest.mark.parametrize("how", ["ArrowRight", "Space", "control"])
def test_a_phone_reader_steps_through_every_slide_in_order(browser, slides_url, how):
    """At 420 px, → (and space, and the on-screen → control) visit every slide one after
    the other: reveal's default sent → from section title to section title, skipping the
    slides stacked under each (1 → 2 → 8 → 10 ...), which only ↓ reached."""
    chapter = "batchnorm"
    context, page = _open(browser, f"{slides_url}/{chapter}.html", NARROW, "light")
    try:
        total = page.evaluate("() => Reveal.getTotalSlides()")
        page.evaluate("() => Reveal.slide(0, 0, -1)")
        visited = [page.evaluate(LINEAR_INDEX)]
        for _ in range(MAX_STEPS):
            if page.evaluate("() => Reveal.isLastSlide()"):
                break
            if how == "control":
                page.locator(".reveal .controls .navigate-right").click()
            else:
                page.keyboard.press(how)
            now = page.evaluate(LINEAR_INDEX)
            if now != visited[-1]:  # a fragment step stays on the slide
                visited.append(now)
        assert visited == list(range(total)), f"{how} visits slides {visited} of {total}"
    finally:
        context.close()


def test_a_figure_on_a_phone_opens_at_the_size_it_was_drawn_for(browser, slides_url):
    context, page = _open(browser, f"{slides_url}/batchnorm.html", NARROW, "light")
    try:
        n = page.evaluate("() => Reveal.getSlides().findIndex(s => s.querySelector('img'))")
        page.evaluate(
            "(n) => { const i = Reveal.getIndices(Reveal.getSlides()[n]); Reveal.slide(i.h, i.v) }",
            n,
        )
        image = page.locator(".reveal .slides section.present img").first
        shown = image.bounding_box()["width"]
        image.click()
        zoom = page.locator(".deck-zoom img")
        zoom.wait_for(state="visible")
        assert zoom.bounding_box()["width"] >= 1.6 * shown - 1
        page.keyboard.press("Escape")
        assert page.locator(".deck-zoom").count() == 0
        assert page.evaluate("() => Reveal.getSlides().indexOf(Reveal.getCurrentSlide())") == n
    finally:
        context.close()


def test_the_chinese_decks_step_through_in_chinese(browser, slides_url):
    """make slides also builds every deck from the Chinese notebook (zh/book/): the same
    slides, the headings and notes in Chinese."""
    built = {d["chapter"]: d for d in json.loads((SLIDES / "zh" / "decks.json").read_text())}
    english = {d["chapter"]: d for d in json.loads((SLIDES / "decks.json").read_text())}
    assert set(built) == set(english)
    assert all(built[c]["slides"] == english[c]["slides"] for c in built), built
    context, page = _open(browser, f"{slides_url}/zh/batchnorm.html", NARROW, "light")
    try:
        total = page.evaluate("() => Reveal.getTotalSlides()")
        seen, outside = _step_through(page)
        assert seen == total and not outside, outside[:5]
        headings = page.evaluate(
            "() => [...document.querySelectorAll('.slides h1, .slides h2')].map(h => h.textContent)"
        )
        assert headings and all(re.search("[\u4e00-\u9fff]", h) for h in headings[:3]), headings
        assert not _requests_problems(page, slides_url), _requests_problems(page, slides_url)
    finally:
        context.close()
