"""Every page of the built site (both editions), in a real browser, opened twice: once on a
wide screen and once on a phone, each visit scrolled through as a reader would (lazy images
loaded, explorers and quizzes drawn) and then put through every check for that width. A visit
reports every check that fails, not only the first.

On a wide screen (WIDE, 1280 px, then DESKTOP, 1200 px, without reloading):
  - check_requests: self-contained, no broken requests, no JavaScript errors;
  - check_maths: all maths typeset, no untypeset TeX shown;
  - check_no_widget_controls: no widget control that cannot work without a kernel;
  - check_nothing_clipped: no display maths, table or output cut off at the column's edge, at
    1280 px and at 1200 px (the narrowest width with both sidebars: the narrowest text
    column of a wide screen);
  - check_weight (a chapter): at most 1.2 MB with its images loaded lazily (issue 37: 1.63 MB
    at most and 1.41 MB the median before, 0.84 MB and 0.60 MB after with most figures still
    stored at 1x; figures at 2x weigh about 2.3 times as much); the English chapters' weights
    also go to test_the_median_chapter_is_within_the_budget;
  - check_figures_are_sharp (a page with figures): every figure sharp and shown at least at
    the size its text was made legible for (norms.plots.style);
  - check_printed_sentences_are_chinese (a Chinese chapter): what the chapter printed is shown
    in Chinese;
  - check_quizzes_render (a page with a quiz): every quiz drawn, at least three questions, each
    multiple-choice one with its answers.
On a phone (NARROW, 420 px):
  - check_nothing_is_wider_than_the_screen;
  - check_wide_equations_scroll: every equation that does not fit shows that it scrolls;
  - check_figures_are_readable (a page with figures): shown at their own size or opening
    full size;
  - check_link_to_the_chinese_twin (an English chapter) and check_the_chinese_page (a Chinese
    chapter): the language switch, shown at 420 px, leads to the same page in the other
    language; a Chinese page says lang="zh-CN", logs no console error and shows no English
    paragraph.
"""

from __future__ import annotations

import gzip
import re
import statistics
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from norms.plots import style

from .conftest import SITE, PageRecorder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import i18n  # noqa: E402

NARROW, WIDE = 420, 1280
# pydata-sphinx-theme shows both sidebars from 1200 px up: the narrowest text column of a
# wide screen, where content is clipped first
DESKTOP = 1200
ZH = i18n.PREFIX + "/"

# slides/: the reveal.js decks `make book` copies in, checked slide by slide by test_slides.py
SKIPPED_FOLDERS = {"_static", "_sources", "_images", "_downloads", "slides"}
# A chapter page with every lazy image shown, each file gzip-compressed as a server sends it
MAX_PAGE_BYTES = 1_200_000
#: the median English chapter, weighed the same way
MEDIAN_CHAPTER_BYTES = 700_000  # half of the 1.41 MB median before (issue 37)


def site_pages() -> list[str]:
    """Every HTML page of the built site, relative to its root."""
    if not SITE.exists():
        return ["index.html"]  # the `site` fixture then fails with a clear message
    return sorted(
        p.relative_to(SITE).as_posix()
        for p in SITE.rglob("*.html")
        if not SKIPPED_FOLDERS & set(p.relative_to(SITE).parts)
    )


def _pages_with(marker: str) -> list[str]:
    """The pages whose HTML contains ``marker``."""
    return [p for p in site_pages() if marker in (SITE / p).read_text(errors="ignore")]


def off_site(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname != "127.0.0.1"


def is_chapter(path: str) -> bool:
    """A chapter page, of either edition (the Chinese one under zh/)."""
    return path.startswith(("book/", "zh/book/"))


# the English chapters (their Chinese twins are ZH + each)
ENGLISH = [p for p in site_pages() if p.startswith("book/")]
# the pages showing a figure drawn by a cell
FIGURE_PAGES = set(_pages_with("_images/"))
# the pages with a quiz (jupyterquiz builds it in JavaScript: the class is in its inline script)
QUIZ_PAGES = set(_pages_with("MultipleChoiceQn"))


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


# A screen's height at a time, each position shown for two frames: every part of the page is
# on the screen once and the browser has drawn it (and run its intersection observers, which
# fetch lazy images and an explorer's data) before the next step, however busy the machine.
# (The scroll stepped 600 px every 30 ms before: more steps, and on a busy machine no frame
# was sure to be drawn in 30 ms.) Headless Chromium now and then stops drawing frames for a
# page: a frame not drawn within FRAME_WAIT_MS is not waited for longer.
FRAME_WAIT_MS = 100
SCROLL_A_SCREEN_AT_A_TIME = """async (ms) => {
  const frame = () => new Promise((r) => { requestAnimationFrame(r); setTimeout(r, ms); });
  for (let y = 0; y < document.body.scrollHeight; y += innerHeight) {
    window.scrollTo(0, y); await frame(); await frame();
  }
}"""


def scroll_through(page) -> None:
    """Scroll to the bottom as a reader would, so that every lazy image loads."""
    page.evaluate(SCROLL_A_SCREEN_AT_A_TIME, FRAME_WAIT_MS)
    page.evaluate(LOAD_SHOWN_IMAGES, IMAGE_WAIT_MS)
    page.wait_for_load_state("networkidle")


def visit(browser, base_url: str, path: str, width: int, bodies: dict | None = None):
    """``path`` in a fresh browser (nothing stored) ``width`` px wide, its maths typeset,
    scrolled through; the page records its requests, errors and console messages (and, given
    ``bodies``, keeps every file the site sent, by URL). Returns (context, page): close the
    context."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.recorder = PageRecorder(page)
    page.console = []
    page.on("console", lambda m: page.console.append(f"{m.type}: {m.text}"))

    def keep(response):
        if urlparse(response.url).hostname == "127.0.0.1" and response.status == 200:
            try:
                bodies[response.url] = response.body()
            except Exception:  # noqa: BLE001 - a redirect or a body already gone
                pass

    if bodies is not None:
        page.on("response", keep)
    try:
        # (index.html redirects once loaded: the network idle, the page is the one it leads to)
        page.goto(f"{base_url}/{path}", wait_until="networkidle")
        page.math_count = page.evaluate("() => document.querySelectorAll('.math').length")
        if page.math_count:
            page.wait_for_function("() => window.MathJax && window.MathJax.startup", timeout=15000)
            page.evaluate("() => window.MathJax.startup.promise")
        scroll_through(page)  # ends with the network idle: no wait for it before
    except BaseException:
        context.close()
        raise
    return context, page


class Checks:
    """Runs the checks of one visit and reports every one that fails, each under its name."""

    def __init__(self, path: str):
        self.path = path
        self.failures: list[str] = []

    def run(self, check, *args) -> None:
        try:
            check(*args)
        except AssertionError as error:
            self.failures.append(f"{check.__name__}: {error}")

    def report(self) -> None:
        assert not self.failures, f"{self.path}: {len(self.failures)} checks fail\n" + "\n".join(
            self.failures
        )


# ---------------------------------------------------------------------------------------
# The wide screen's checks

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

# Each figure from a cell (under _images/, with the width it was drawn for): its pixels,
# its drawn width (the width in its style) and the width it is shown at.
CELL_FIGURES = """() => [...document.querySelectorAll('.bd-article .cell_output img[src*="_images/"]')]
  .map((img) => ({ src: img.getAttribute('src').split('/').pop().slice(0, 12),
                   natural: img.naturalWidth, drawn: parseFloat(img.style.width) || null,
                   shown: img.getBoundingClientRect().width }))"""  # noqa: E501 - JavaScript

PRINTED = "() => [...document.querySelectorAll('.cell_output .output.stream pre')].map(p => p.textContent)"  # noqa: E501


def check_requests(page, path: str) -> None:
    """Everything the page loaded came from the site and arrived; no JavaScript error."""
    rec = page.recorder
    assert not [u for u in rec.requests if off_site(u)], f"{path} loads from other hosts"
    assert not rec.bad_responses, f"{path}: failed responses {rec.bad_responses}"
    assert not rec.failed, f"{path}: failed requests {rec.failed}"
    assert not rec.errors, f"{path}: JavaScript errors {rec.errors}"


def check_maths(page, path: str) -> None:
    """Every maths element typeset by MathJax, and no TeX shown raw."""
    if page.math_count:
        typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
        assert typeset >= page.math_count, (
            f"{path}: {page.math_count} maths, only {typeset} typeset"
        )
    assert page.evaluate(FIND_RAW_TEX) == [], f"{path} shows untypeset TeX"


def check_no_widget_controls(page, path: str) -> None:
    """No ipywidgets control: on a static page it cannot work without a kernel."""
    assert page.evaluate(WIDGET_VIEWS) == 0, f"{path} shows a widget control that needs a kernel"


def check_nothing_clipped(page, path: str) -> None:
    """No display maths, table or printed output cut off at the text column's edge."""
    clipped = page.evaluate(FIND_CLIPPED)
    width = page.viewport_size["width"]
    assert clipped == [], f"{path} clips content at the column's edge at {width} px: {clipped}"


def weigh(bodies: dict[str, bytes]) -> int:
    """The bytes of every file, each gzip-compressed as a server sends it."""
    return sum(len(gzip.compress(body, 6)) for body in bodies.values())


def check_weight(page, path: str, bodies: dict[str, bytes]) -> None:
    """A chapter weighs at most MAX_PAGE_BYTES once scrolled through; only a page that shows a
    widget loads the ipywidgets manager; every image in the text is loaded lazily."""
    total = weigh(bodies)
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


def check_figures_are_sharp(page, path: str) -> None:
    """norms.plots.style makes every text of a figure at least MIN_TEXT_PX where the figure is
    shown min(drawn width, COLUMN_PX) wide; here the page shows it at least that wide at
    1280 px, from twice as many pixels."""
    figures = page.evaluate(CELL_FIGURES)
    assert figures, f"{path}: no figure"
    for fig in figures:
        assert fig["drawn"], f"{path}: {fig['src']} has no drawn width (stored before 2x)"
        assert fig["natural"] >= style.SCALE * fig["drawn"] - 1, f"{path}: {fig} not sharp"
        least = min(fig["drawn"], style.COLUMN_PX)
        assert fig["shown"] >= least - 1, (
            f"{path}: {fig['src']} shown {fig['shown']:.0f} px wide, its text needs {least}"
        )


def check_printed_sentences_are_chinese(page, path: str) -> None:
    """What a chapter printed (its stored outputs) shows in Chinese: no printed line that the
    page's output catalog translates is left in English (tools/sphinx_local/printed_lines.py),
    and the page shows the translated lines."""
    table = i18n.output_translations(path.removeprefix(ZH).removesuffix(".html"))
    translated = {k for k, v in table.items() if v != k}
    lines = [line.strip() for text in page.evaluate(PRINTED) for line in text.splitlines()]
    english = [line for line in lines if i18n.printed_template(line)[0] in translated]
    assert english == [], f"{path}: printed lines left in English: {english[:3]}"
    if translated:
        assert any(re.search("[\u4e00-\u9fff]", line) for line in lines), f"{path}"


# Each quiz on the page: how many multiple-choice questions it shows, and their answer buttons.
QUIZZES_SHOWN = """() => [...document.querySelectorAll('.Quiz')].map(q =>
  [q.querySelectorAll('.MultipleChoiceQn').length, q.querySelectorAll('.MCButton').length])"""


def check_quizzes_render(page, path: str) -> None:
    """The page's quizzes are drawn: at least three questions, and each multiple-choice one
    shows at least two answers (tests/browser/test_quiz.py clicks them)."""
    shown = page.evaluate(QUIZZES_SHOWN)
    assert len(shown) >= 3, f"{path}: only {len(shown)} quiz questions drawn"
    empty = [i for i, (choice, buttons) in enumerate(shown) if choice and buttons < 2]
    assert not empty, f"{path}: questions {empty} show no answers to choose from"


#: the English chapters' weights (check_weight's measure), by page, for the median's test
CHAPTER_WEIGHTS: dict[str, int] = {}


@pytest.mark.parametrize("path", site_pages())
def test_page_on_a_wide_screen(browser, base_url, path):
    bodies: dict[str, bytes] | None = {} if is_chapter(path) else None
    context, page = visit(browser, base_url, path, WIDE, bodies)
    try:
        checks = Checks(path)
        if is_chapter(path):
            if not path.startswith(ZH):
                CHAPTER_WEIGHTS[path] = weigh(bodies)
            checks.run(check_weight, page, path, bodies)
        if path in FIGURE_PAGES:
            checks.run(check_figures_are_sharp, page, path)
        if is_chapter(path) and path.startswith(ZH):
            checks.run(check_printed_sentences_are_chinese, page, path)
        if path in QUIZ_PAGES:
            checks.run(check_quizzes_render, page, path)
        checks.run(check_nothing_clipped, page, path)
        page.set_viewport_size({"width": DESKTOP, "height": 900})
        checks.run(check_nothing_clipped, page, path)
        checks.run(check_maths, page, path)
        checks.run(check_no_widget_controls, page, path)
        checks.run(check_requests, page, path)  # last: what the resize may have loaded too
        checks.report()
    finally:
        context.close()


def test_the_median_chapter_is_within_the_budget(browser, base_url):
    """The English chapters' median weight, each weighed as check_weight does. The wide visits
    above leave their weights in CHAPTER_WEIGHTS; a chapter they did not visit (a -k
    selection, another worker) is visited here."""
    for path in ENGLISH:
        if path not in CHAPTER_WEIGHTS:
            bodies: dict[str, bytes] = {}
            context, _ = visit(browser, base_url, path, WIDE, bodies)
            context.close()
            CHAPTER_WEIGHTS[path] = weigh(bodies)
    weights = {path: CHAPTER_WEIGHTS[path] for path in ENGLISH}
    median = statistics.median(weights.values())
    print({k: round(v / 1e6, 2) for k, v in weights.items()}, f"median {median / 1e6:.2f} MB")
    assert median <= MEDIAN_CHAPTER_BYTES, f"the median chapter weighs {median / 1e6:.2f} MB"


# ---------------------------------------------------------------------------------------
# The phone's checks

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

# Every figure (an image under _images/) is shown at its own size or opens full size.
ARTICLE_FIGURES = """() => [...document.querySelectorAll('.bd-article img[src*="_images/"]')].map(img => {
  const link = img.closest('a.figure-zoom');
  return { src: img.src, shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
           zoom: link ? new URL(link.href, location.href).href : null };
})"""  # noqa: E501

LINK = "() => { const a = document.querySelector('a.language-switch'); return a && {href: a.href, text: a.textContent.trim(), shown: a.getBoundingClientRect().width > 0 && a.getBoundingClientRect().right <= innerWidth}; }"  # noqa: E501

# Paragraphs, list items, headings, captions and table cells of the article, without code
# and maths: the text a reader reads.
ARTICLE_TEXT = """() => {
  const out = [];
  for (const el of document.querySelectorAll('.bd-article p, .bd-article li, .bd-article h1, .bd-article h2, .bd-article h3, .bd-article td, .bd-article th, .bd-article figcaption')) {
    if (el.closest('.cell_output, .output, pre, .jupyterquiz, .quiz, .explorer, .bibliography, .citation')) continue;
    const copy = el.cloneNode(true);
    copy.querySelectorAll('code, mjx-container, .math, pre, a.reference.internal .std-doc').forEach(n => n.remove());
    out.push(copy.textContent.replace(/\\s+/g, ' ').trim());
  }
  return out;
}"""  # noqa: E501


def check_nothing_is_wider_than_the_screen(page, path: str) -> None:
    """Neither the page nor anything in its text reaches past a phone's screen unless a box
    around it scrolls."""
    assert page.evaluate(TOO_WIDE) == [], f"{path} at {NARROW} px"


def check_wide_equations_scroll(page, path: str) -> None:
    """A display equation wider than the screen scrolls and shows that it does."""
    clipped = page.evaluate(CLIPPED_EQUATIONS)
    bad = [c for c in clipped if not (c["scrolls"] and c["hint"])]
    assert not bad, f"{path}: equations cut off without a visible way to the rest: {bad}"


def check_figures_are_readable(page, path: str) -> None:
    """Every figure is shown at (nearly) its own size or opens full size."""
    figures = page.evaluate(ARTICLE_FIGURES)
    assert figures
    for fig in figures:
        small = fig["natural"] and fig["shown"] < 0.9 * fig["natural"]
        assert not small or fig["zoom"] == fig["src"], (
            f"{path}: {fig['src']} is shown {fig['shown']:.0f} of {fig['natural']} px wide "
            "and does not open full size"
        )


def check_link_to_the_chinese_twin(page, path: str) -> None:
    """An English chapter's header shows "中文", leading to its Chinese twin, which exists."""
    link = page.evaluate(LINK)
    assert link and link["text"] == "中文" and link["shown"], f"{path}: {link}"
    assert link["href"].endswith(f"/{ZH}{path}")
    assert (SITE / ZH / path).exists(), f"no Chinese twin of {path}"


def check_the_chinese_page(page, path: str, english_url: str) -> None:
    """A Chinese chapter says lang="zh-CN", its header shows "English" leading back to its
    twin, it logs no console error or warning, and its text has no English left."""
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    back = page.evaluate(LINK)
    assert back and back["text"] == "English" and back["shown"], f"{path}: {back}"
    assert back["href"] == english_url
    errors = [m for m in page.console if m.startswith(("error", "warning"))]
    assert not errors and not page.recorder.errors, errors + page.recorder.errors
    english_runs = [run for text in page.evaluate(ARTICLE_TEXT) for run in i18n.english_left(text)]
    assert english_runs == [], f"{path}: English left: {english_runs[:3]}"


@pytest.mark.parametrize("path", site_pages())
def test_page_on_a_phone(browser, base_url, path):
    context, page = visit(browser, base_url, path, NARROW)
    try:
        checks = Checks(path)
        checks.run(check_nothing_is_wider_than_the_screen, page, path)
        checks.run(check_wide_equations_scroll, page, path)
        if path in FIGURE_PAGES:
            checks.run(check_figures_are_readable, page, path)
        if path in ENGLISH:
            checks.run(check_link_to_the_chinese_twin, page, path)
        if path.removeprefix(ZH) in ENGLISH and path.startswith(ZH):
            english_url = f"{base_url}/{path.removeprefix(ZH)}"
            checks.run(check_the_chinese_page, page, path, english_url)
        checks.report()
    finally:
        context.close()


def test_site_has_pages():
    assert len(site_pages()) >= 3, "the site has fewer pages than the table of contents"
