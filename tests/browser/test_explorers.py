"""The explorers on the built site, without a kernel: every control changes the figure and
the numbers to the state norms computes for that choice; invalid choices show the kernel's
message; states outside the page's grid say so. Also screenshots at 1280 and 420 pixels (in
_build/screenshots, to look at). The weight of every chapter page is checked by test_site.py."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import pytest

from norms import plots
from norms.axes import describe
from norms.explore.state import (
    batch_size_info,
    build_module,
    error_html,
    running_stats_info,
    stat_html,
)
from norms.i18n import Text
from norms.lab import simulations

from .conftest import SITE
from .test_site import off_site, site_pages

SHOTS = SITE.parent / "screenshots"

# An explorer's drawing: the CSS pixels of its smallest text (9 units in the SVG).
EXPLORER_TEXT = """() => [...document.querySelectorAll('.norms-explorer svg')].map(svg => {
  const box = svg.getBoundingClientRect(), view = svg.viewBox.baseVal;
  return { kind: svg.getAttribute('class'), px: 9 * box.width / view.width };
})"""


def explorer_pages() -> list[str]:
    if not SITE.exists():
        return ["book/batchnorm.html"]
    return [
        p for p in site_pages() if 'class="norms-explorer"' in (SITE / p).read_text(errors="ignore")
    ]


def plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


class Ex:
    """One explorer on a page: set its controls as a reader would, read what it shows."""

    def __init__(self, page, index: int):
        self.page, self.root = page, page.locator(".norms-explorer").nth(index)
        # a large payload is fetched once the explorer comes near the screen (page_weight.py)
        self.root.scroll_into_view_if_needed()
        self.root.evaluate(
            "el => new Promise(done => { const t = setInterval(() => "
            "{ if (el.explorer) { clearInterval(t); done(); } }, 50); })"
        )
        self.payload = self.root.evaluate("el => el.explorer.payload")
        self.lang = self.root.evaluate("el => el.explorer.lang")  # the page's language
        self.kind = self.payload["kind"]
        self.specs = {c["name"]: c for c in self.payload["controls"]}
        self.values = {}  # what this test set each control to

    def set(self, name, value) -> None:
        """Set a control as a reader would; not again to the value this test last gave it (the
        control holds it: a reader changes a control or leaves it, and half of the settings of
        check_reduction were such repeats, each a round trip and a redraw)."""
        if name in self.values and self.values[name] == value:
            return
        self.values[name] = value
        spec, control = self.specs[name], self.root.locator(f"[name='{name}']")
        if spec["type"] == "select":
            control.select_option(str(spec["options"].index(value)))
        elif spec["type"] == "checkbox":
            control.set_checked(bool(value))
        elif spec["type"] == "text":
            control.fill(value)
            control.dispatch_event("change")
        else:
            index = spec["options"].index(value) if spec["type"] == "slider" else value
            control.evaluate(
                "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }", index
            )

    def state(self) -> dict:
        return json.loads(self.root.get_attribute("data-state"))

    def info(self) -> str:
        return self.root.locator(".ne-info").inner_html()

    def error(self) -> str:
        return self.root.locator(".ne-error").inner_html()

    def cells(self) -> list[int]:
        return [
            int(v)
            for v in self.root.locator(".ne-figure rect[data-stat]").evaluate_all(
                "els => els.map(e => e.getAttribute('data-stat'))"
            )
        ]

    def figure(self) -> str:
        return self.root.locator(".ne-figure").inner_html()

    def shown(self) -> dict:
        """state(), info(), error() and cells() read in one call to the page (each call is a
        round trip through the driver), and the number of cells drawn highlighted."""
        shown = self.root.evaluate(SHOWN, plots.HIGHLIGHT_COLOR)
        return dict(shown, cells=[int(v) for v in shown["cells"]])


# What an explorer shows, as Ex reads it; like a locator, one element of each kind or an error.
SHOWN = """(el, lit) => {
  const one = (css) => { const found = el.querySelectorAll(css);
    if (found.length !== 1) throw new Error(`${found.length} elements match ${css}`);
    return found[0]; };
  return { state: JSON.parse(el.getAttribute('data-state')), info: one('.ne-info').innerHTML,
           error: one('.ne-error').innerHTML,
           cells: [...el.querySelectorAll('.ne-figure rect[data-stat]')].map(e => e.getAttribute('data-stat')),
           lit: el.querySelectorAll(`.ne-figure rect[data-stat][fill='${lit}']`).length };
}"""  # noqa: E501 - JavaScript


def said(text, lang: str) -> str:
    """What norms says (a norms.i18n.Text, or a plain str) in the page's language."""
    return text.in_language(lang) if isinstance(text, Text) else str(text)


def same_error(shown: str, exc: Exception, lang: str = "en") -> bool:
    """The page shows the kernel's message (in the page's language where norms has one)."""
    message = said(exc.args[0], lang) if exc.args else str(exc)
    return plain(shown) == plain(error_html(type(exc)(message)))


# What the kernel computes for a choice does not depend on the page or its language: each is
# computed once per test run (the pages of both editions make the same choices), not per page.
@functools.cache
def kernel_reduction(norm, shape, groups, last_dims, layout):
    """norms.axes' reduction for these choices, or the ValueError the kernel raises for them
    (building the module, describing it, or drawing it: the kernel's own checks of what it
    can draw)."""
    try:
        module = build_module(norm, shape, groups, last_dims)
        reduction = describe(module, shape)
        plots.plot_reduction(module, shape, layout=layout)
    except ValueError as exc:
        return exc
    return reduction


@functools.cache
def running_stats_trace(momentum, batch_size, steps, seed):
    """simulations.simulate_running_stats, once per choice."""
    return simulations.simulate_running_stats(momentum, batch_size, steps, seed)


@functools.cache
def batch_noise(sizes, trials, channels, groups, seed):
    """simulations.simulate_batch_noise, once per choice."""
    return simulations.simulate_batch_noise(sizes, trials, channels, groups, seed=seed)


def check_reduction(ex: Ex, norm, shape, groups=2, last_dims=1, layout="auto", highlight=0) -> None:
    for name, value in (
        ("norm", norm),
        ("groups", groups),
        ("last_dims", last_dims),
        ("layout", layout),
        ("shape", ", ".join(map(str, shape))),
        ("highlight", highlight),
    ):
        ex.set(name, value)
    reduction = kernel_reduction(norm, shape, groups, last_dims, layout)
    page = ex.shown()
    if isinstance(reduction, ValueError):
        exc = reduction
        assert same_error(page["error"], exc, ex.lang), (
            norm,
            shape,
            groups,
            page["error"],
            str(exc),
        )
        assert page["cells"] == []
        return
    want = reduction.statistic_index.view(-1).tolist()
    assert page["state"]["ids"] == want, (norm, shape, groups, last_dims)
    assert page["cells"] == want, "the figure's cells are not the statistics of norms.axes"
    assert page["info"] == said(stat_html(reduction, tuple(reduction.reduced_dims)), ex.lang)
    shown = min(highlight, reduction.num_statistics - 1)
    lit = page["lit"]
    assert lit == int((reduction.statistic_index == shown).sum()), "the highlighted statistic"


def exercise_reduction(ex: Ex) -> None:
    before = ex.figure()
    check_reduction(ex, "GroupNorm", (4, 6, 2, 2), groups=3)
    check_reduction(ex, "GroupNorm", (4, 6, 2, 2), groups=2, highlight=5)
    assert ex.figure() != before or ex.payload["controls"][0]["value"] != "GroupNorm"
    check_reduction(
        ex, "GroupNorm", (4, 6, 2, 2), groups=4
    )  # groups must divide C: the kernel's message
    for g in (1, 2, 4, 8):
        check_reduction(ex, "GroupNorm", (2, 8, 3), groups=g)
    for norm in (
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
    ):
        check_reduction(ex, norm, (4, 8, 4, 4))
        check_reduction(ex, norm, (3, 5, 2))
    for last in (1, 2, 3):
        check_reduction(ex, "LayerNorm", (2, 4, 6), last_dims=last, layout="sequence", highlight=3)
        check_reduction(ex, "RMSNorm", (3, 4, 2, 2), last_dims=last, layout="image")
    check_reduction(
        ex, "BatchNorm3d", (4, 8, 4, 4, 4)
    )  # in the grid, too many cells to draw: the kernel says so
    check_reduction(
        ex, "LayerNorm", (4, 3, 2, 2), layout="sequence"
    )  # sequence layout needs <= 3 dims
    ex.set("shape", "4, 6, 2, 9")
    assert ex.state() == {"outside": True} and "Colab" in ex.error()
    ex.set("shape", "4, six")
    with pytest.raises(ValueError) as exc:
        from norms.explore.state import parse_shape

        parse_shape("4, six")
    assert same_error(ex.error(), exc.value, ex.lang)


def exercise_running_stats(ex: Ex) -> None:
    grid = {s["name"]: s for s in ex.payload["controls"]}
    cases = [
        dict(momentum=0.1, cumulative=False, batch_size=16, steps=100, seed=0),
        dict(momentum=0.5, cumulative=False, batch_size=16, steps=100, seed=0),
        dict(momentum=0.5, cumulative=False, batch_size=4, steps=100, seed=0),
        dict(momentum=0.5, cumulative=False, batch_size=4, steps=20, seed=0),
        dict(momentum=0.5, cumulative=False, batch_size=4, steps=20, seed=1),
        dict(momentum=0.5, cumulative=True, batch_size=256, steps=500, seed=1),
        dict(momentum=0.03, cumulative=False, batch_size=2, steps=200, seed=0),
    ]
    figures = set()
    for case in cases:
        for name, value in case.items():
            assert name in grid
            ex.set(name, value)
        momentum = None if case["cumulative"] else case["momentum"]
        trace = running_stats_trace(momentum, case["batch_size"], case["steps"], case["seed"])
        state = ex.state()
        np.testing.assert_allclose(
            state["running_mean"], trace.running_mean[-1], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            state["running_var"], trace.running_var[-1], rtol=1e-5, atol=1e-6
        )
        assert state["max_gap"] == pytest.approx(trace.max_gap, abs=2e-4)
        want = said(running_stats_info(trace), ex.lang)
        # the same text, up to a last digit where float rounding lands on the other side
        assert (
            len(ex.info()) == len(want)
            and sum(a != b for a, b in zip(ex.info(), want, strict=True)) <= 2
        ), (
            ex.info(),
            want,
        )
        figures.add(ex.figure())
        assert ex.root.locator("[name='momentum']").is_disabled() == case["cumulative"]
    assert len(figures) == len(cases), "every change must redraw the figure"
    ex.set("batch_size", 1)  # BatchNorm rejects one value per channel in training
    with pytest.raises(ValueError) as exc:
        simulations.simulate_running_stats(0.1, 1, 1, 0)
    assert same_error(ex.error(), exc.value, ex.lang)


def exercise_batch_size(ex: Ex) -> None:
    cases = [
        dict(batch_size=4, trials=100, seed=0, channels=4, groups=2),
        dict(batch_size=32, trials=100, seed=0, channels=4, groups=2),
        dict(batch_size=32, trials=50, seed=0, channels=4, groups=2),
        dict(batch_size=2, trials=50, seed=0, channels=6, groups=3),
        dict(batch_size=2, trials=50, seed=0, channels=8, groups=1),
    ]
    figures = set()
    sizes = tuple(ex.payload["data"]["sizes"])
    for case in cases:
        for name, value in case.items():
            ex.set(name, value)
        noise = batch_noise(sizes, case["trials"], case["channels"], case["groups"], case["seed"])
        assert ex.info() == said(batch_size_info(noise, case["batch_size"]), ex.lang)
        figures.add(ex.figure())
    assert len(figures) == len(cases), "every change must redraw the figure"
    ex.set("groups", 3)  # 8 channels do not split into 3 groups: the kernel's message
    with pytest.raises(ValueError) as exc:
        simulations.simulate_batch_noise(sizes, 50, 8, 3)
    assert same_error(ex.error(), exc.value, ex.lang)


EXERCISE = {
    "reduction": exercise_reduction,
    "running_stats": exercise_running_stats,
    "batch_size": exercise_batch_size,
}


def test_every_chapter_with_an_explorer_has_one_on_the_page(site):
    assert {
        "book/batchnorm.html",
        "book/groupnorm.html",
        "book/layernorm.html",
        "book/rmsnorm.html",
        "book/side-by-side.html",
    } <= set(explorer_pages())


@pytest.mark.parametrize("path", explorer_pages())
def test_explorers_follow_their_controls(page, base_url, site, path):
    page.set_default_timeout(20000)
    page.goto(f"{base_url}/{path}", wait_until="networkidle")
    count = page.locator(".norms-explorer").count()
    assert count >= 1
    kinds = set()
    for i in range(count):
        ex = Ex(page, i)
        assert ex.root.get_attribute("data-state"), f"{path}: explorer {i} shows nothing"
        EXERCISE[ex.kind](ex)
        kinds.add(ex.kind)
    rec = page.recorder
    assert not [u for u in rec.requests if off_site(u)], f"{path} loads from other hosts"
    assert not rec.errors, f"{path}: JavaScript errors {rec.errors}"


@pytest.mark.parametrize("path", explorer_pages())
def test_screenshots(browser, base_url, site, path):
    """Screenshots of every explorer at 1280 and 420 pixels wide: _build/screenshots (look at
    them). Each fits the page, and its drawings' smallest text is at least 8 CSS pixels."""
    SHOTS.mkdir(exist_ok=True)
    for width in (1280, 420):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(f"{base_url}/{path}", wait_until="networkidle")
        page.wait_for_selector(".norms-explorer svg")
        drawings = page.evaluate(EXPLORER_TEXT)
        assert drawings, f"{path}: no explorer drawing"
        for drawing in drawings:
            assert drawing["px"] >= 8, f"{path} at {width} px: {drawing} text smaller than 8 px"
        explorers = page.locator(".norms-explorer")
        for i in range(explorers.count()):
            box = explorers.nth(i)
            box.scroll_into_view_if_needed()
            assert box.bounding_box()["width"] <= width, (
                f"{path}: explorer {i} is wider than the page"
            )
            overflow = box.evaluate("el => el.scrollWidth - el.clientWidth")
            assert overflow <= 1, (
                f"{path}: explorer {i} overflows its box by {overflow}px at {width}px"
            )
            box.screenshot(
                path=str(
                    SHOTS
                    / f"{Path(path).with_suffix('').as_posix().replace('/', '-')}-{i}-{width}.png"
                )
            )
        context.close()
