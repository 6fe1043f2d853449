"""The site as readers use it: on a phone (420 px) and a laptop (1280 px), in light and
dark mode, arriving from a search. The menu buttons open and close the navigation,
wide content shows that it scrolls,
quizzes and explorers have dark-mode colours, search snippets show no TeX and a
followed result is highlighted, and a first visit logs no console error. (Every figure
readable or opening full size on a phone: test_site.py's visit of each page.)

tools/sphinx_local/reader_fixes.py, tools/sphinx_local/static/book.css and the
``html_theme_options`` of _config.yml make these hold.
"""

from __future__ import annotations

import re

import pytest

from .conftest import PageRecorder
from .test_site import NARROW, WIDE, _pages_with  # noqa: F401 - importable from here too

SIZES = [NARROW, WIDE]
SCHEMES = ["light", "dark"]
CHAPTER = "book/training.html"


@pytest.fixture
def open_page(browser, base_url):
    """``open_page(path, width, scheme)``: a page in a fresh browser (nothing stored),
    with a recorder of its console messages."""
    contexts = []

    def _open(path: str, width: int, scheme: str = "light"):
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        page.recorder = PageRecorder(page)
        page.console = []
        page.on("console", lambda m: page.console.append(f"{m.type}: {m.text}"))
        page.goto(f"{base_url}/{path}", wait_until="networkidle")
        return page

    yield _open
    for context in contexts:
        context.close()


def _dialog_open(page, which: str) -> bool:
    return page.evaluate(f"() => document.querySelector('#pst-{which}-sidebar-modal').open")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_menu_buttons_open_and_close_the_navigation_on_a_phone(open_page, scheme):
    page = open_page(CHAPTER, NARROW, scheme)
    for which, label in (("primary", "chapter list"), ("secondary", "contents")):
        button = page.locator(f".bd-header-article .{which}-toggle")
        assert button.is_visible(), f"no visible {label} button at {NARROW} px"
        button.click()
        page.wait_for_timeout(300)
        assert _dialog_open(page, which), f"the {label} button does not open the {label}"
        assert page.locator(f"#pst-{which}-sidebar-modal a").first.is_visible()
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
        assert not _dialog_open(page, which), f"the {label} does not close"
        shown = page.evaluate("() => document.querySelectorAll('.tooltip.show').length")
        assert shown == 0, f"a tooltip stays up after the {label} closed"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_sidebar_button_collapses_the_sidebar_on_a_wide_screen(open_page, scheme):
    page = open_page(CHAPTER, WIDE, scheme)
    sidebar = page.locator("#pst-primary-sidebar")
    button = page.locator(".bd-header-article .primary-toggle")
    assert sidebar.is_visible()
    button.click()
    page.wait_for_timeout(600)
    assert not sidebar.is_visible(), "the sidebar button does not collapse the sidebar"
    assert not _dialog_open(page, "primary")
    button.click()
    page.wait_for_timeout(600)
    assert sidebar.is_visible(), "the sidebar button does not bring the sidebar back"


@pytest.mark.parametrize("width", SIZES)
def test_no_top_bar_and_the_sidebar_keeps_logo_and_search_in_view(open_page, width):
    # the last chapter: the theme scrolls the sidebar furthest for it
    page = open_page("book/references.html", width)
    assert page.evaluate("() => !document.querySelector('#pst-header')?.offsetHeight"), (
        "a top bar holding only a second search box is back"
    )
    if width == WIDE:
        for what in (
            ".bd-sidebar-primary .navbar-brand",
            ".bd-sidebar-primary .search-button-field",
        ):
            box = page.locator(what).bounding_box()
            assert box and box["y"] >= 0 and box["y"] + box["height"] <= 900, f"{what} out of view"
        current = page.locator(".bd-docs-nav li.active > a").last.bounding_box()
        assert current and 0 <= current["y"] and current["y"] + current["height"] <= 900, (
            "the current chapter is out of view in the sidebar"
        )


@pytest.mark.parametrize("path", ["book/references.html", "zh/book/references.html"])
def test_a_logo_that_loads_late_does_not_push_the_current_chapter_out_of_view(
    browser, base_url, path
):
    """The logo's SVG held back until the page's scripts have run (as a slow connection or a
    busy machine does): the chapter list must not move down under it when it arrives."""
    context = browser.new_context(viewport={"width": WIDE, "height": 900})
    try:
        page = context.new_page()
        held = []
        page.route(re.compile(r".*/_static/logo(-dark)?\.svg$"), lambda route: held.append(route))
        page.goto(f"{base_url}/{path}", wait_until="domcontentloaded")
        page.wait_for_timeout(300)
        assert held, "the logo was not requested"
        for route in held:
            route.continue_()
        page.wait_for_load_state("load")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.navbar-brand img.only-light')]"
            ".every(img => img.complete && img.naturalWidth > 0)"
        )
        page.wait_for_timeout(200)
        current = page.locator(".bd-docs-nav li.active > a").last.bounding_box()
        assert current and 0 <= current["y"] and current["y"] + current["height"] <= 900, current
    finally:
        context.close()


@pytest.mark.parametrize("width", SIZES)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_first_visit_logs_no_console_error(open_page, width, scheme):
    page = open_page(CHAPTER, width, scheme)
    errors = [m for m in page.console if m.startswith(("error", "warning"))]
    assert not errors, errors
    assert not page.recorder.errors, page.recorder.errors
    mode = page.evaluate("() => document.documentElement.dataset.theme")
    assert mode == scheme, f"the page shows {mode} mode in a {scheme}-mode browser"


# A box that scrolls sideways shows a shadow at its edges (book.css).
SCROLLERS = """() => [...document.querySelectorAll(
    '.bd-article mjx-container[display="true"], .bd-article table, .bd-article pre')]
  .filter(el => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)
  .map(el => { const s = getComputedStyle(el);
    return { what: el.tagName + ': ' + el.textContent.trim().slice(0, 40),
             hint: /gradient/.test(s.backgroundImage)
                   && /local/.test(s.backgroundAttachment) }; })"""


@pytest.mark.parametrize(
    "path", ["book/batchnorm.html", "book/speed.html", "book/instructors.html"]
)
def test_wide_content_shows_that_it_scrolls(open_page, path):
    page = open_page(path, NARROW)
    page.wait_for_function("() => window.MathJax && window.MathJax.startup")
    page.evaluate("() => window.MathJax.startup.promise")
    scrollers = page.evaluate(SCROLLERS)
    assert scrollers, f"{path}: nothing scrolls sideways at {NARROW} px"
    assert all(s["hint"] for s in scrollers), [s["what"] for s in scrollers if not s["hint"]]


def _luminance(rgb: str) -> float:
    values = [float(v) for v in re.findall(r"[\d.]+", rgb)[:3]]
    return sum(w * v / 255 for w, v in zip((0.2126, 0.7152, 0.0722), values, strict=True))


def _alpha(rgb: str) -> float:
    values = re.findall(r"[\d.]+", rgb)
    return float(values[3]) if len(values) > 3 else 1.0


def test_dark_mode_styles_outputs_explorers_and_quizzes(open_page):
    page = open_page("book/batchnorm.html", WIDE, "dark")
    # the chart explorer's data loads when it comes near the screen
    page.locator(".norms-explorer").last.scroll_into_view_if_needed()
    page.wait_for_selector(".norms-explorer svg .ne-tick")
    page.wait_for_selector(".Quiz code")
    style = page.evaluate("""() => {
      const get = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
      return {
        panel: get('.cell_output .text_html:has(.norms-explorer)', 'backgroundColor'),
        quizPanel: get('.cell_output .text_html:has(.Quiz)', 'backgroundColor'),
        tick: get('.norms-explorer svg .ne-tick', 'fill'),
        code: get('.Quiz code', 'backgroundColor'),
        label: get('.norms-explorer .ne-name', 'color'),
        page: get('body', 'backgroundColor'),
      };
    }""")
    assert _alpha(style["panel"]) == 0 and _alpha(style["quizPanel"]) == 0, (
        "explorers and quizzes sit on a light panel in dark mode"
    )
    assert _luminance(style["page"]) < 0.2
    assert _luminance(style["tick"]) > 0.6, "the explorers' axis text is dark on a dark page"
    assert _luminance(style["label"]) > 0.6, "the explorers' control names are dark on a dark page"
    assert _luminance(style["code"]) < 0.5 or _alpha(style["code"]) < 0.5, "light code in quizzes"


def test_quiz_text_and_feedback(open_page):
    page = open_page("book/batchnorm.html", NARROW)
    page.wait_for_selector(".Quiz code")
    style = page.evaluate("""() => {
      const quiz = getComputedStyle(document.querySelector('.Quiz'));
      const fb = getComputedStyle(document.querySelector('.Quiz .Feedback'));
      const body = getComputedStyle(document.querySelector('.bd-article p'));
      return { line: parseFloat(quiz.lineHeight) / parseFloat(quiz.fontSize),
               fbAlign: fb.textAlign, fbSize: parseFloat(fb.fontSize),
               bodySize: parseFloat(body.fontSize) };
    }""")
    # at a line height of 1.1 the next line covers the underscores of inline code
    assert style["line"] >= 1.3, style
    assert style["fbAlign"] in ("left", "start") and style["fbSize"] <= style["bodySize"], style


def test_search_snippets_show_no_tex_and_a_result_is_highlighted(open_page):
    page = open_page("search.html?q=variance", WIDE)
    page.wait_for_function("() => document.querySelectorAll('#search-results li p').length >= 3")
    page.wait_for_load_state("networkidle")
    snippets = page.evaluate(
        "() => [...document.querySelectorAll('#search-results li p')].map(p => p.textContent)"
    )
    tex = [s for s in snippets if re.search(r"\\[a-zA-Z]+|\\\(|\\\[|\$\$", s)]
    assert not tex, f"search snippets with TeX: {tex[:2]}"
    page.locator("#search-results li a").first.click()
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)
    assert page.evaluate("() => document.querySelectorAll('span.highlighted').length") > 0, (
        "the page opened from a search result does not highlight the term"
    )


def test_no_tooltip_stays_up_after_a_tap_on_a_phone(browser, base_url):
    context = browser.new_context(
        viewport={"width": NARROW, "height": 900}, has_touch=True, is_mobile=True
    )
    try:
        page = context.new_page()
        page.goto(f"{base_url}/{CHAPTER}", wait_until="networkidle")
        page.locator(".bd-header-article .secondary-toggle").tap()
        page.wait_for_timeout(300)
        assert _dialog_open(page, "secondary")
        page.keyboard.press("Escape")  # the drawer closes; the theme refocuses the button
        page.wait_for_timeout(500)
        shown = page.evaluate(
            """() => [...document.querySelectorAll('.tooltip')]
                 .filter(t => getComputedStyle(t).display !== 'none').map(t => t.textContent)"""
        )
        assert not shown, f"tooltips left over the header's icons: {shown}"
    finally:
        context.close()
