"""The explorers on a Chinese page (``<html lang="zh-CN">``) and on an English one, at 420 and
1280 pixels: the labels, legends, titles and sentences in the page's language (an exception's
message stays as Python gives it, torch's words), no console error, nothing wider than the
page, no word cut off at the drawing's edge. A standalone page made of the explorers' outputs
(no site build needed); screenshots in _build/screenshots/i18n (look at them)."""

from __future__ import annotations

import functools
import re

import pytest

import norms.explore.web as web

from ..test_explore_i18n import english_prose
from .conftest import SITE

SHOTS = SITE.parent / "screenshots" / "i18n"
CJK = re.compile(r"[\u4e00-\u9fff]")

# What the reader sees of each explorer: the control names, the sentences, the drawing's words.
SHOWN = """root => ({
  names: [...root.querySelectorAll('.ne-name, option')].map(e => e.textContent),
  sentences: [...root.querySelectorAll('.ne-info, .ne-error, .ne-note')].map(e => e.textContent),
  drawing: [...root.querySelectorAll('svg text')].map(e => e.textContent),
  overflow: root.scrollWidth - root.clientWidth,
  cut: [...root.querySelectorAll('svg text:not([transform])')].filter(t => {
    const b = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
    return b.left < s.left - 1 || b.right > s.right + 1;
  }).map(t => t.textContent),
  width: root.getBoundingClientRect().width,
})"""
SET = """(root, a) => { const [name, value] = a, c = root.explorer.controls[name], s = c.spec;
  if (s.type === 'select' || s.type === 'slider') c.input.value = String(s.options.indexOf(value));
  else c.input.value = String(value);
  c.input.dispatchEvent(new Event(s.type === 'text' ? 'change' : 'input')); }"""
# A state of each explorer that says something else: outside the grid, or an error.
OTHER = {
    "reduction": ("shape", "4, 6, 2, 9"),
    "running_stats": ("batch_size", 1),
    "batch_size": ("groups", 3),
}


@functools.lru_cache(maxsize=1)
def outputs() -> str:
    return "".join(
        web.html(p)
        for p in (
            web.reduction_payload("GroupNorm", "4, 6, 2, 2", 2, 3, 0, "auto"),
            web.running_stats_payload(0.1, False, 16, 100, 0),
            web.batch_size_payload(4, 100, 4, 2, 0),
        )
    )


def standalone(lang: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"></head>'
        f'<body><main style="max-width:760px;margin:auto;padding:8px">{body}</main></body></html>'
    )


def open_page(browser, tmp_path, lang: str, width: int, body: str):
    path = tmp_path / f"explorers-{lang}-{width}.html"
    path.write_text(standalone(lang, body), encoding="utf-8")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto(path.as_uri(), wait_until="load")
    return context, page, errors


@pytest.mark.parametrize("width", [420, 1280])
def test_a_chinese_page_shows_the_explorers_in_chinese(browser, tmp_path, width):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context, page, errors = open_page(browser, tmp_path, "zh-CN", width, outputs())
    roots = page.locator(".norms-explorer")
    assert roots.count() == 3
    for i in range(roots.count()):
        root = roots.nth(i)
        kind = root.get_attribute("data-kind")
        root.screenshot(path=str(SHOTS / f"{kind}-zh-{width}.png"))
        before = root.evaluate(SHOWN)
        root.evaluate(SET, list(OTHER[kind]))
        after = root.evaluate(SHOWN)
        assert after["sentences"] != before["sentences"], kind
        for shown in (before, after):
            assert shown["width"] <= width and shown["overflow"] <= 1, (kind, width, shown)
            assert not shown["cut"], (kind, width, shown["cut"])
            # an exception's message is shown as Python gives it (torch's words, in English)
            said = [t for t in shown["sentences"] if not t.startswith("⚠")]
            words = shown["names"] + said + shown["drawing"]
            assert all(not english_prose(w) for w in words), (
                kind,
                [w for w in words if english_prose(w)],
            )
        names = [n for n in before["names"] if not re.fullmatch(r"[\w ()=.,-]*Norm\w*|\d+", n)]
        assert names and all(CJK.search(n) for n in names), (kind, names)
        assert any(CJK.search(t) for t in before["drawing"]), (kind, before["drawing"])
        assert any(CJK.search(t) for t in after["sentences"]), (kind, after["sentences"])
    assert not errors, errors
    context.close()


def test_an_english_page_shows_the_explorers_in_english(browser, tmp_path):
    context, page, errors = open_page(browser, tmp_path, "en", 420, outputs())
    roots = page.locator(".norms-explorer")
    for i in range(roots.count()):
        root = roots.nth(i)
        root.screenshot(path=str(SHOTS / f"{root.get_attribute('data-kind')}-en-420.png"))
        shown = root.evaluate(SHOWN)
        words = shown["names"] + shown["sentences"] + shown["drawing"]
        assert not [w for w in words if CJK.search(w)], words
        assert shown["overflow"] <= 1 and not shown["cut"], shown["cut"]
    assert not errors, errors
    context.close()


def test_a_deferred_explorer_says_it_could_not_load_in_chinese(browser, tmp_path):
    """A payload moved out of the page (tools/sphinx_local/page_weight.py) that does not come:
    the status line is in the page's language."""
    body = re.sub(
        r'<script type="application/json">.*?</script>',
        '<script type="application/json" data-src="missing.json"></script>',
        web.html(web.reduction_payload("GroupNorm", "4, 6, 2, 2", 2, 3, 0, "auto")),
        flags=re.S,
    )
    context, page, _ = open_page(browser, tmp_path, "zh-CN", 420, body)
    status = page.locator(".norms-explorer .ne-info")
    status.wait_for()
    page.wait_for_function(
        "() => document.querySelector('.norms-explorer .ne-info').textContent.includes('未能')",
        timeout=10000,
    )
    assert status.text_content().startswith("交互工具未能加载数据（")
    context.close()
