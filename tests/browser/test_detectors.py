"""The page checks themselves must be able to fail: each detector flags a page that
has the fault it looks for."""

from __future__ import annotations

from .test_site import FIND_CLIPPED, FIND_RAW_TEX, WIDGET_VIEWS, off_site


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
