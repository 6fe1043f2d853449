"""The explorers in Chinese (issue 36, item 3): every word an explorer shows, on the website and
in Jupyter, in both languages; the English as it was.

On the website each text of the payload is ``{"en": ..., "zh": ...}`` (made by
``norms.i18n.tr`` from a template of the catalogs) and the page's script shows the language of
``norms.i18n.js_language()``; tests/browser/test_explorers_i18n.py looks at the pages.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import pytest

import norms
import norms.explore.web as web
from norms.i18n import JS_AUTO, catalog, for_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import i18n as tools_i18n  # noqa: E402

# Code, maths, numbers and names stay English in a Chinese text: identifiers with _ = . ( ) [ ]
# or digits, CamelCase names (BatchNorm1d, GroupNorm), a template's {fields}.
_FIELD = re.compile(r"\{[^{}]*\}")
_CODE = re.compile(r"\S*[_=()\[\]0-9|/.]\S*|\b[A-Z][a-z]+[A-Z]\w*")
_PROSE = re.compile(r"\b[A-Za-z][a-z']+(?:[ ,;:]+[A-Za-z][a-z']+){2,}")


def english_prose(text: str) -> list[str]:
    """Runs of three or more English words outside tags, code, maths and fields."""
    plain = re.sub(r"<[^>]+>", " ", text)
    return _PROSE.findall(_CODE.sub(" ", _FIELD.sub(" ", plain)))


def test_the_prose_check_can_fail():
    assert english_prose("on a fresh batch, eval and train outputs differ")
    assert english_prose("批大小 <b>4</b>：across random batches sample") == [
        "across random batches sample"
    ]
    assert not english_prose("<b>{steps}</b> 步之后：running_mean <b>[1.00, 2.00]</b>")
    assert not english_prose("BatchNorm1d，momentum=None（累积平均），批大小 16")


@functools.lru_cache(maxsize=1)
def payloads() -> dict[str, dict]:
    """One payload of each kind, as the chapters make them."""
    from norms.plots.style import BookFigure

    def draw(values):
        fig = BookFigure(figsize=(2, 1))
        fig.subplots().plot(range(values["n"] + 1))
        return fig, norms.i18n.tr("{name} in {values}", name="n", values=values["n"])

    return {
        "reduction": web.reduction_payload("GroupNorm", "4, 6, 2, 2", 2, 3, 0, "auto"),
        "running_stats": web.running_stats_payload(0.1, False, 16, 100, 0),
        "batch_size": web.batch_size_payload(4, 100, 4, 2, 0),
        "states": web.states_payload(draw, {"n": [1, 2]}, {"n": 2}, labels={"n": "n"}),
    }


def shown_texts(payload: dict) -> dict[str, object]:
    """Every text of a payload the page shows, by where it is: control labels and option
    labels, the note, the Colab line, the script's words, the grid's words."""
    found = {"note": payload["note"], "colab": payload["colab"]}
    for c in payload["controls"]:
        if c["name"] != "n":  # the test explorer's own label, a name
            found[f"controls.{c['name']}"] = c["label"]
        for i, label in enumerate(c.get("labels", [])):
            found[f"controls.{c['name']}.labels[{i}]"] = label
    found |= {f"text.{k}": v for k, v in payload["text"].items()}
    if "grid" in payload["data"]:
        found["data.grid.words"] = payload["data"]["grid"]["words"]
    return found


@pytest.mark.parametrize("kind", ["reduction", "running_stats", "batch_size", "states"])
def test_every_text_of_the_payload_is_in_both_languages(kind):
    texts = shown_texts(payloads()[kind])
    assert len(texts) >= 4
    for where, text in texts.items():
        assert isinstance(text, dict) and set(text) == {"en", "zh"}, (kind, where, text)
        assert text["zh"] != text["en"], (kind, where, "not translated")
        assert not english_prose(text["zh"]), (kind, where, text["zh"])
        assert re.search(r"[\u4e00-\u9fff]", text["zh"]), (kind, where, text["zh"])


def test_the_precomputed_states_carry_their_info_in_both_languages():
    states = payloads()["states"]["data"]["states"]
    assert states["0"]["info"] == {"en": "n in 1", "zh": "n 取 1"}


@functools.lru_cache(maxsize=1)
def explorer_templates() -> list[tuple[re.Pattern, re.Pattern]]:
    """(English, Chinese) patterns of every template of norms/explore: a field is any text."""
    messages, bad = tools_i18n.norms_messages()
    assert not bad, bad

    def pattern(template: str) -> re.Pattern:
        parts = re.split(r"(\{[^{}]*\})", template)
        return re.compile(
            "".join(".*?" if p.startswith("{") else re.escape(p) for p in parts), re.S
        )

    zh = catalog("zh")
    return [
        (pattern(msgid), pattern(zh[msgid]))
        for msgid, places in messages.items()
        if any(p.startswith("norms/explore/") for p in places)
    ]


@pytest.mark.parametrize("kind", ["reduction", "running_stats", "batch_size", "states"])
def test_every_text_is_a_template_of_the_catalogs(kind):
    """The English of each text is its template's (the catalogs hold it), the Chinese its
    translation: nothing the page shows is written outside the templates."""
    templates = explorer_templates()
    for where, text in shown_texts(payloads()[kind]).items():
        matches = [i for i, (en, _) in enumerate(templates) if en.fullmatch(text["en"])]
        assert matches, (kind, where, text["en"])
        assert any(templates[i][1].fullmatch(text["zh"]) for i in matches), (kind, where, text)


def test_the_english_is_as_before():
    """The English words of the explorers, as main had them before the Chinese came."""
    reduction, running, batch = (
        payloads()[k] for k in ("reduction", "running_stats", "batch_size")
    )
    en = {k: v["en"] for k, v in reduction["text"].items()}
    assert en["legend"] == "same colour block = elements sharing one statistic"
    assert en["highlighted"] == "statistic {index} (highlighted)"
    assert en["stat"] == (
        "<b>{count}</b> {what}, each over <b>{per}</b> elements · reduced dims <b>{dims}</b> · "
        "γ/β shape <b>{params}</b> · eval differs from train: {eval_note}"
    )
    assert reduction["note"]["en"] == (
        "This explorer runs in your browser for shapes of at most 5 dims, each of size at most 8 "
        "and groups up to 8. Open the notebook in Colab (the rocket icon at the top of the page) "
        "to try any value."
    )
    assert [c["label"]["en"] for c in running["controls"]] == [
        "momentum",
        "momentum=None (cumulative)",
        "batch size",
        "steps",
        "seed",
    ]
    assert running["text"]["info"]["en"] == (
        "after <b>{steps}</b> steps: running_mean <b>{running_mean}</b> (true {true_mean}) · "
        "running_var <b>{running_var}</b> (true {true_var}) · on a fresh batch, eval and train "
        "outputs differ by up to <b>{max_gap}</b>"
    )
    assert batch["note"]["en"] == (
        "The page holds batch sizes 2, 4, 8, 16, 32, 64; 50 or 100 random batches; seed 0; "
        "1 to 8 channels with every group count. Open the notebook in Colab (the rocket icon "
        "at the top of the page) to try any value."
    )


@pytest.fixture
def chinese():
    norms.set_language("zh")
    yield
    norms.set_language(None)


def test_the_widgets_speak_the_readers_language(chinese):
    from norms.explore.explorers import batch_size_explorer, reduction_explorer

    explorer = reduction_explorer()
    labels = {n: c.description for n, c in explorer.controls.items()}
    assert labels["shape"] == "输入形状" and labels["groups"] == "组数（GN）", labels
    assert [label for label, _ in explorer.controls["layout"].options] == ["自动", "图像", "序列"]
    assert explorer.controls["layout"].value == "auto"
    assert "个均值" in explorer.info.value and not english_prose(explorer.info.value)
    explorer = batch_size_explorer(trials=50)
    assert explorer.controls["batch_size"].description == "批大小"
    assert "随机批次中" in explorer.info.value and not english_prose(explorer.info.value)


def test_the_widgets_in_english_as_before():
    from norms.explore.explorers import reduction_explorer, running_stats_explorer

    explorer = reduction_explorer()
    assert [c.description for c in explorer.controls.values()] == [
        "norm",
        "input shape",
        "layout",
        "groups (GN)",
        "last dims (LN, RMS)",
        "highlight statistic",
    ]
    assert explorer.info.value == (
        "<b>8</b> means (and as many variances), each over <b>12</b> elements · reduced dims "
        "<b>(1, 2, 3)</b> · γ/β shape <b>(6,)</b> · eval differs from train: no"
    )
    assert running_stats_explorer(steps=20).info.value.startswith("after <b>20</b> steps: ")


def test_a_chosen_language_gives_a_payload_in_that_language_only(chinese):
    payload = web.reduction_payload("GroupNorm", "4, 6, 2, 2", 2, 3, 0, "auto")
    assert payload["controls"][1]["label"] == "输入形状"
    assert all(isinstance(v, str) for v in payload["text"].values())
    html = web.html(payload)
    assert "norms-lang:zh" in html and JS_AUTO not in html


def test_the_output_follows_the_page_or_the_chinese_notebook():
    """Without a chosen language the output lets the page decide (js_language); the Chinese
    notebooks tell it Chinese."""
    html = web.html(payloads()["reduction"])
    assert "dataset.lang=(function(m)" in html and JS_AUTO in html
    assert "norms-lang:zh" in for_notebook(html, "zh")


def test_the_script_has_no_words_of_its_own():
    """explorer.js draws only what the payload says: its string literals hold no English
    prose (but the loading line of an output made before the Chinese, and a bug report)."""
    source = (ROOT / "norms" / "explore" / "web" / "explorer.js").read_text(encoding="utf-8")
    code = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", source, flags=re.S))
    literals = re.findall(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'", code)
    assert len(literals) > 100
    allowed = {'"The explorer could not load its data ({error})."', '"no rule for "'}
    prose = [s for s in literals if english_prose(s[1:-1]) and s not in allowed]
    assert not prose, prose
