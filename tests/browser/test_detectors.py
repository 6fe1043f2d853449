"""The page checks themselves must be able to fail: each detector flags a page that
has the fault it looks for, and a visit reports every check that fails."""

from __future__ import annotations

import pytest

from .conftest import SITE
from .test_site import (
    CLIPPED_EQUATIONS,
    FIND_CLIPPED,
    FIND_RAW_TEX,
    NARROW,
    TOO_WIDE,
    WIDGET_VIEWS,
    Checks,
    check_figures_are_readable,
    check_figures_are_sharp,
    check_link_to_the_chinese_twin,
    check_quizzes_render,
    off_site,
    scroll_through,
)


def test_raw_tex_is_detected(page):
    page.set_content(
        r"<p>The mean \(\mu = \frac{1}{m}\sum x\) is shown raw.</p><pre>\(code is fine\)</pre>"
    )
    assert page.evaluate(FIND_RAW_TEX) == [r"The mean \(\mu = \frac{1}{m}\sum x\) is shown raw."]


def test_widget_views_are_detected(page):
    page.set_content(
        '<script type="application/vnd.jupyter.widget-view+json">{"model_id": "x"}</script>'
    )
    assert page.evaluate(WIDGET_VIEWS) == 1


def test_clipped_content_is_detected(page):
    wide = "x" * 400
    page.set_content(
        '<div class="bd-article" style="width: 300px; overflow: hidden">'
        f'<pre style="overflow: hidden">{wide}</pre>'  # clipped by its own box
        f"<table><tr><td>{wide.replace('x', 'y ')}</td></tr></table>"  # wraps: fits
        '<div style="overflow-x: auto">'
        f'<pre style="overflow: visible">{wide}</pre></div>'  # scrolls: fine
        f'<table style="width: 600px"><tr><td>sticks out</td></tr></table>'  # wider than the column
        "</div>"
    )
    assert page.evaluate(FIND_CLIPPED) == ["pre: " + wide[:60], "table: sticks out"]


def test_off_site_requests_are_detected():
    assert off_site("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js")
    assert off_site("http://localhost:8000/index.html")  # only 127.0.0.1 is the site
    assert not off_site("http://127.0.0.1:8000/_static/vendor/require.js")
    assert not off_site("data:image/png;base64,AAAA")


def test_content_wider_than_a_phone_is_detected(page):
    page.set_viewport_size({"width": NARROW, "height": 900})
    page.set_content(
        '<div class="bd-article">'
        '<div style="overflow-x: auto"><div style="width: 600px">scrolls: fine</div></div>'
        '<div style="width: 600px">sticks out</div></div>'
    )
    found = page.evaluate(TOO_WIDE)
    assert found[0].startswith("the page is 6"), found
    assert [f for f in found[1:] if "scrolls" in f] == [] and "sticks out" in found[1], found


def test_an_equation_cut_off_without_a_scroll_hint_is_detected(page):
    page.set_content(
        '<div class="bd-article" style="width: 200px">'
        '<mjx-container display="true" style="display: block; overflow-x: hidden">'
        '<span style="display: inline-block; width: 400px">cut off</span></mjx-container>'
        '<mjx-container display="true" style="display: block; overflow-x: auto">'
        '<span style="display: inline-block; width: 400px">scrolls</span></mjx-container>'
        "</div>"
    )
    found = {c["what"]: (c["scrolls"], c["hint"]) for c in page.evaluate(CLIPPED_EQUATIONS)}
    assert found == {"cut off": (False, False), "scrolls": (True, False)}, found


def _figure_page(page, base_url, html):
    """``html`` on a page of the site (so that _images/ resolves), with a figure of the site."""
    figure = sorted((SITE / "_images").glob("*.png"))[0].name
    page.set_content(f'<base href="{base_url}/">' + html.format(src=f"_images/{figure}"))
    page.wait_for_function("() => [...document.images].every(i => i.complete && i.naturalWidth)")


def test_a_small_figure_that_does_not_open_full_size_is_detected(page, base_url):
    _figure_page(page, base_url, '<div class="bd-article"><img src="{src}" width="100"></div>')
    with pytest.raises(AssertionError, match="does not open full size"):
        check_figures_are_readable(page, "a page")
    _figure_page(
        page,
        base_url,
        '<div class="bd-article"><a class="figure-zoom" href="{src}">'
        '<img src="{src}" width="100"></a></div>',
    )
    check_figures_are_readable(page, "a page")


def test_a_figure_stored_at_1x_is_detected(page, base_url):
    _figure_page(
        page, base_url, '<div class="bd-article"><div class="cell_output"><img src="{src}">'
    )
    natural = page.evaluate("() => document.images[0].naturalWidth")
    page.evaluate(f"() => {{ document.images[0].style.width = '{natural}px'; }}")
    with pytest.raises(AssertionError, match="not sharp"):
        check_figures_are_sharp(page, "a page")
    page.evaluate(f"() => {{ document.images[0].style.width = '{natural // 2}px'; }}")
    check_figures_are_sharp(page, "a page")


def test_a_missing_or_hidden_language_switch_is_detected(page):
    page.set_content("<p>no switch</p>")
    with pytest.raises(AssertionError):
        check_link_to_the_chinese_twin(page, "book/batchnorm.html")
    page.set_viewport_size({"width": NARROW, "height": 900})
    page.set_content(
        '<a class="language-switch" href="/zh/book/batchnorm.html" '
        'style="position: absolute; left: 500px">中文</a>'
    )
    with pytest.raises(AssertionError, match="'shown': False"):
        check_link_to_the_chinese_twin(page, "book/batchnorm.html")


def test_a_visit_reports_every_failing_check():
    def check_one(path):
        raise AssertionError(f"{path}: first")

    def check_two(path):
        pass

    def check_three(path):
        raise AssertionError(f"{path}: third")

    checks = Checks("a page")
    for check in (check_one, check_two, check_three):
        checks.run(check, "a page")
    with pytest.raises(AssertionError) as failed:
        checks.report()
    message = str(failed.value)
    assert "check_one: a page: first" in message and "check_three: a page: third" in message
    assert "check_two" not in message


def test_scroll_through_shows_every_part_of_the_page(page):
    """Every stretch of a long page comes on screen (an intersection observer without a margin
    sees it), as a lazy image or an explorer needs."""
    page.set_content(
        "<body style='margin: 0'>"
        + "".join(f"<div class='part' style='height: 300px'>{i}</div>" for i in range(40))
        + "<script>window.seen = new Set(); const o = new IntersectionObserver((entries) =>"
        " entries.forEach((e) => e.isIntersecting && seen.add(e.target.textContent)));"
        " document.querySelectorAll('.part').forEach((p) => o.observe(p));</script>"
    )
    scroll_through(page)
    seen = page.evaluate("() => [...window.seen].map(Number).sort((a, b) => a - b)")
    assert seen == list(range(40)), seen


def test_quizzes_not_drawn_or_without_answers_are_detected(page):
    question = '<div class="Quiz"><div class="MultipleChoiceQn">Q?</div>{}</div>'
    buttons = '<label class="MCButton">a</label><label class="MCButton">b</label>'
    page.set_content(question.format(buttons) * 3)
    check_quizzes_render(page, "fine.html")
    page.set_content(question.format(buttons) * 2)
    with pytest.raises(AssertionError, match="only 2 quiz questions drawn"):
        check_quizzes_render(page, "two.html")
    page.set_content(question.format(buttons) * 2 + question.format(""))
    with pytest.raises(AssertionError, match=r"questions \[2\] show no answers"):
        check_quizzes_render(page, "empty.html")
