"""The explorers' website version (norms.explore.web) against the kernel version.

The page's script (norms/explore/web/explorer.js) runs under node here, without a page:
its statistic ids, numbers and error messages for many reduction-explorer states
must be those of norms.axes.describe / norms.explore.widgets / norms.plots, and its running
statistics those of norms.lab.simulate_running_stats. (tests/browser checks the
explorers on the built pages.)
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import subprocess

import numpy as np
import pytest

import norms.explore.web
from norms.axes import NORMS, describe, module_label
from norms.explore.state import build_module, parse_shape, stat_html
from norms.lab import simulations
from norms.plots import reductions

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (it comes with npm)")

HARNESS = r"""
global.window = {};
global.document = { readyState: "complete", querySelectorAll: () => [] };
const fs = require("fs");
eval(fs.readFileSync(process.argv[2], "utf8"));
const NE = window.NormsExplorer;
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const out = input.cases.map((c) => {
  try {
    if (c.op === "parse") return { shape: NE._parseShape(c.text, input.words) };
    if (c.op === "running") {
      const r = NE._runningStats(input.data, input.data.runs[c.run], c.momentum, c.steps, c.batch_size);
      return { rm: r.rm, rv: r.rv, gap: r.gap };
    }
    const rule = NE._rule(input.data, c.norm, c.shape, c.groups, c.last_dims);
    const st = NE._index(rule, c.shape, c.groups);
    const view = NE._fold(input.data, c.norm, c.shape, c.layout);
    return { ids: st.ids, info: NE._statHtml(st, input.words), grid: view.grid, labels: view.labels,
             title: NE._title(c.norm, c.shape, c.groups, c.last_dims) };
  } catch (e) {
    if (!Array.isArray(e)) throw e;
    return { error: e };
  }
});
process.stdout.write(JSON.stringify(out));
"""  # noqa: E501 - JavaScript; a line break would change the string


def run_js(tmp_path, data: dict, cases: list[dict], words: dict | None = None) -> list[dict]:
    script = tmp_path / "explorer.js"
    script.write_text(norms.explore.web.script())
    harness = tmp_path / "harness.js"
    harness.write_text(HARNESS)
    proc = subprocess.run(
        [NODE, str(harness), str(script)],
        input=json.dumps({"data": data, "cases": cases, "words": words or {}}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def in_language(text: dict, language: str) -> dict:
    """A payload's ``text`` in one language, as the page picks it."""
    return {k: v[language] if isinstance(v, dict) else v for k, v in text.items()}


def kernel_state(norm, shape, groups, last_dims, layout, language="en") -> dict:
    """What the kernel explorer computes for these controls
    (norms.explore.widgets.draw_reduction)."""
    try:
        module = build_module(norm, shape, groups, last_dims)
        reduction = describe(module, shape)
        if (
            math.prod(shape) > reductions.MAX_CELLS
        ):  # plot_reduction's first check (tests/browser runs it)
            raise ValueError(
                reductions.too_many_elements_message(shape, math.prod(shape), reductions.MAX_CELLS)
            )
        index = reduction.statistic_index.numpy()
        kind = reductions._resolve_layout(layout, norm, len(shape))
        view = (
            reductions._image_view(index, norm)
            if kind == "image"
            else reductions._sequence_view(index)
        )
        reductions._check_size(view)
    except ValueError as exc:
        return {"error": [type(exc).__name__, str(exc)]}
    return {
        "ids": index.ravel().tolist(),
        "info": stat_html(reduction, tuple(reduction.reduced_dims)).in_language(language),
        "grid": list(view.grid.shape),
        "labels": list(view.labels),
        "title": module_label(module),
    }


def random_states(count: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    states = []
    for _ in range(count):
        rank = rng.randint(1, 5)
        shape = [rng.randint(1, 8 if d < 2 else 4) for d in range(rank)]
        states.append(
            {
                "norm": rng.choice(tuple(NORMS)),
                "shape": shape,
                "groups": rng.randint(1, 8),
                "last_dims": rng.randint(1, 5),
                "layout": rng.choice(["auto", "image", "sequence"]),
            }
        )
    return states


def every_group_count() -> list[dict]:
    return [
        {"norm": "GroupNorm", "shape": [2, c, 2, 3], "groups": g, "last_dims": 1, "layout": "auto"}
        for c in range(1, 9)
        for g in range(1, 9)
    ]


def every_norm_and_rank() -> list[dict]:
    return [
        {
            "norm": norm,
            "shape": [3, 4, 2, 3, 2][:rank],
            "groups": 2,
            "last_dims": k,
            "layout": layout,
        }
        for norm in tuple(NORMS)
        for rank in range(1, 6)
        for k in range(1, 6)
        for layout in ("auto", "image", "sequence")
    ]


def test_the_page_partitions_as_norms_axes(tmp_path):
    """Statistic ids, numbers, view and messages of the page equal the kernel's, state by state."""
    states = random_states(600) + every_group_count() + every_norm_and_rank()
    payload = norms.explore.web.reduction_payload("GroupNorm", "4, 6, 2, 2", 3, 3, 0, "auto")
    words = in_language(payload["text"], "en")
    got = run_js(tmp_path, payload["data"], [{"op": "reduction", **s} for s in states], words)
    errors = 0
    for state, js in zip(states, got, strict=True):
        want = kernel_state(
            state["norm"],
            tuple(state["shape"]),
            state["groups"],
            state["last_dims"],
            state["layout"],
        )
        if "error" in want:
            errors += 1
            assert js == want, state
            continue
        title = js.pop("title")
        assert js == {k: v for k, v in want.items() if k != "title"}, state
        assert title == want["title"], state
    assert 50 < errors < len(states) - 300, "the states must mix valid and invalid choices"


def test_the_page_says_the_numbers_in_chinese_as_norms_does(tmp_path):
    """On a Chinese page the script fills the Chinese template the kernel fills
    (norms.explore.state.stat_html in Chinese), with the same numbers."""
    states = random_states(80, seed=1) + every_group_count()[:16]
    payload = norms.explore.web.reduction_payload("GroupNorm", "4, 6, 2, 2", 3, 3, 0, "auto")
    words = in_language(payload["text"], "zh")
    got = run_js(tmp_path, payload["data"], [{"op": "reduction", **s} for s in states], words)
    shown = 0
    for state, js in zip(states, got, strict=True):
        args = [tuple(state["shape"]) if k == "shape" else state[k] for k in list(state)]
        want = kernel_state(*args, language="zh")
        if "error" not in want:
            assert js["info"] == want["info"], state
            assert "个" in js["info"] and "each over" not in js["info"], js["info"]
            shown += 1
    assert shown > 20


def test_the_page_reads_shapes_as_parse_shape(tmp_path):
    texts = [
        "4, 6, 2, 2",
        "(4,6,2,2)",
        "4x6x2x2",
        "[2, 3]",
        "  7 ",
        "",
        "4, 0, 2",
        "four",
        "2;3",
        "1 × 2 * 3",
        "99999,99999,99999",
        "2, 1000001",
        "2, 1000000",
        "0001000000",
        "9" * 400,
        "1 " * 9,
    ]
    payload = norms.explore.web.reduction_payload("GroupNorm", "4, 6, 2, 2", 3, 3, 0, "auto")
    for language in ("en", "zh"):
        words = in_language(payload["text"], language)
        got = run_js(tmp_path, {}, [{"op": "parse", "text": t} for t in texts], words)
        errors = 0
        for text, js in zip(texts, got, strict=True):
            try:
                want = {"shape": list(parse_shape(text))}
            except ValueError as exc:
                message = exc.args[0].in_language(language)
                want = {"error": ["ValueError", message]}
                errors += 1
                assert language == "en" or re.search("[\u4e00-\u9fff]", message), message
            assert js == want, (language, text)
        assert errors >= 6


@pytest.mark.parametrize("momentum", [0.1, 0.01, 0.5, 1.0, None])
def test_the_page_running_statistics_are_batchnorms(tmp_path, momentum):
    payload = norms.explore.web.running_stats_payload(0.1, False, 16, 100, 0)
    data = payload["data"]
    cases = [
        {"op": "running", "run": f"{b}|{s}", "momentum": momentum, "steps": steps, "batch_size": b}
        for b in (2, 16, 256)
        for s in (0, 1)
        for steps in (10, 100, 500)
    ]
    got = run_js(tmp_path, data, cases)
    for case, js in zip(cases, got, strict=True):
        b, s = (int(v) for v in case["run"].split("|"))
        trace = simulations.simulate_running_stats(momentum, b, case["steps"], s)
        np.testing.assert_allclose(js["rm"], trace.running_mean[-1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(js["rv"], trace.running_var[-1], rtol=1e-5, atol=1e-6)
        assert js["gap"] == pytest.approx(trace.max_gap, abs=2e-4), case


def test_batch_size_page_data_is_the_simulation():
    """GroupNorm's value from one trial and the stored spreads equal the full simulation's."""
    payload = norms.explore.web.batch_size_payload(4, 50, 4, 2, 0)
    sims = payload["data"]["sims"]
    for channels, groups in [(4, 2), (6, 3), (8, 8), (5, 1)]:
        sim = sims[f"{channels}|50|0"]
        noise = simulations.simulate_batch_noise(
            payload["data"]["sizes"], 50, channels, groups, seed=0
        )
        gn = sim["groups"][str(groups)]
        assert gn["value"] == float(noise.values["GroupNorm"][0, 0])
        assert np.all(noise.values["GroupNorm"] == noise.values["GroupNorm"][0, 0])  # never moves
        assert gn["label"] == noise.labels["GroupNorm"]
        for i, b in enumerate(payload["data"]["sizes"]):
            assert sim["spread"][str(b)]["BatchNorm2d"] == f"{noise.spread('BatchNorm2d')[i]:.3f}"
            assert sim["spread"][str(b)]["LayerNorm"] == f"{noise.spread('LayerNorm')[i]:.3f}"
    assert "C6|G4" in payload["data"]["errors"] and "C6|G3" not in payload["data"]["errors"]


def test_explorer_output_has_the_widget_and_the_page_version():
    from norms.explore.explorers import reduction_explorer

    bundle = reduction_explorer()._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert 'class="norms-explorer"' in html and "NormsExplorer" in html
    no_namespace = html.replace(
        "http://www.w3.org/2000/svg", ""
    )  # SVG's namespace name, not a load
    assert "http://" not in no_namespace and "https://" not in no_namespace, (
        "the page version loads nothing"
    )
    assert html == reduction_explorer()._repr_mimebundle_()["text/html"], (
        "the output must be deterministic"
    )


def test_any_explorer_gets_a_page_version_from_its_own_draw():
    """norms.explore.web.precomputed: every state of the grid drawn by the explorer's draw, errors
    as shown
    by the kernel version, and the widget left as it was."""
    import ipywidgets as widgets

    from norms.explore.state import error_html
    from norms.explore.widgets import Explorer
    from norms.plots.style import BookFigure

    def draw(explorer):
        n = explorer.controls["n"].value
        if n == 3:
            raise ValueError("three is not allowed")
        fig = BookFigure(figsize=(2, 1))
        fig.subplots().plot(range(n + 1))
        return fig, f"<b>{n}</b> points"

    explorer = Explorer(
        {"n": widgets.IntSlider(value=5, min=1, max=9)},
        draw,
        web=norms.explore.web.precomputed({"n": [1, 2, 3]}),
    )
    html = explorer._repr_mimebundle_()["text/html"]
    payload = json.loads(html.split('<script type="application/json">')[1].split("</script>")[0])
    assert payload["kind"] == "states" and payload["data"]["order"] == ["n"]
    assert payload["controls"][0]["options"] == [1, 2, 3, 5]  # the grid and the initial value
    states = payload["data"]["states"]
    assert states["0"]["info"] == "<b>1</b> points" and states["3"]["info"] == "<b>5</b> points"
    assert states["0"]["png"] != states["1"]["png"]
    assert states["2"] == {"error": error_html(ValueError("three is not allowed"))}
    assert explorer.controls["n"].value == 5 and explorer.info.value == "<b>5</b> points"


def test_text_in_a_payload_cannot_end_or_comment_out_the_script():
    """A reader's shape text is embedded in the page: "</script", "<!--" and "<script" inside a
    <script> element change how the HTML parser reads it, so none reaches the page."""
    from norms.explore.web import page

    hostile = "4, 6</script><!--<script>alert(1)</script>&amp;"
    out = page.html({"kind": "reduction", "shape": hostile})
    data = out.split('<script type="application/json">', 1)[1].split("</script>", 1)[0]
    for bad in ("</", "<!--", "<script", "<", ">", "&"):
        assert bad not in data, bad
    assert json.loads(data)["shape"] == hostile
