"""The Chinese edition's catalogs and notebooks (tools/i18n.py): complete, with their markup
intact, and the Chinese notebooks generated from the English ones and the catalogs."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import nbformat
import polib
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402


def test_every_catalog_entry_is_translated_and_keeps_its_markup():
    """An English edit makes its entry fuzzy (or new and untranslated): this fails until the
    Chinese is brought along (make translations, then translate; WRITING.md)."""
    assert i18n.problems() == []


def test_every_page_of_the_book_has_a_catalog():
    pages = {p.relative_to(ROOT).with_suffix("").as_posix() for p in i18n.book_notebooks()}
    pages |= {"book/intro", "book/glossary", "book/references"}
    catalogs = {
        p.relative_to(i18n.CATALOGS).with_suffix("").as_posix() for p in i18n.CATALOGS.rglob("*.po")
    }
    assert pages <= catalogs, sorted(pages - catalogs)


@pytest.mark.parametrize(
    ("msgid", "msgstr", "fuzzy", "expected"),
    [
        ("The mean", "均值", False, []),
        ("The mean", "", False, ["untranslated"]),
        ("The mean", "均值", True, ["fuzzy: the English changed since it was translated"]),
        (
            "Run `norms.check`.",
            "运行 `norms.check。",
            False,
            ["unbalanced backticks", "markup lost or changed: `norms.check`"],
        ),
        (
            "See {doc}`batchnorm` and $\\mu$.",
            "见 {doc}`layernorm` 和 $\\mu$。",
            False,
            ["markup lost or changed: {doc}`batchnorm`"],
        ),
        ("It is {glue:text}`bn-m`.", "它是 {glue:text}`bn-m`。", False, []),
        ("See {ref}`the section <rms-low>`.", "见{ref}`低精度一节 <rms-low>`。", False, []),
        ("LN is {glue:text}`ln-dyt`.", "层归一化：{glue:text}`ln-dyt.zh`。", False, []),
        ("LN is {glue:}`ln-dyt`.", "层归一化：{glue:}`ln-dyt.zh`。", False, []),
        (
            "See {ref}`the section <rms-low>`.",
            "见{ref}`低精度一节 <rms-high>`。",
            False,
            ["markup lost or changed: {ref}`<rms-low>`"],
        ),
        (
            "**Prerequisites:** none.",
            "**预备知识：**无。",
            False,
            ["emphasis next to full-width punctuation does not render"],
        ),
        ("**Prerequisites:** none.", "**预备知识**：无。", False, []),
        ("a *biased* variance", "*有偏*方差", False, []),
        (
            "a *biased* variance",
            "一个*（有偏的）*方差",
            False,
            ["emphasis next to full-width punctuation does not render"],
        ),
    ],
)
def test_entry_problems_catch_what_breaks_the_chinese_page(msgid, msgstr, fuzzy, expected):
    assert i18n.entry_problems(msgid, msgstr, fuzzy) == expected


def test_a_broken_catalog_is_named_with_its_file_and_line(tmp_path):
    po = polib.POFile()
    po.append(polib.POEntry(msgid="Exercise", msgstr="练习"))
    po.append(polib.POEntry(msgid="The `eps` term", msgstr="`eps 项"))
    po.save(str(tmp_path / "page.po"))
    problems = i18n.problems(tmp_path)
    assert problems and all("page.po:" in p and "eps" in p for p in problems)
    assert any("unbalanced backticks" in p for p in problems)


@pytest.mark.parametrize(
    ("msgid", "expected"),
    [
        ("\n\\mu_c = \\frac{1}{m} \\sum_{n,h,w} x_{nchw}\n", True),
        ("{doc}`first-look`", True),
        ("`momentum=0.1`", True),
        ("Exercise", False),
        ("$\\gamma$ is the scale", False),
    ],
)
def test_only_messages_without_words_are_copied_untranslated(msgid, expected):
    assert i18n.untranslatable(msgid) is expected


def test_markdown_is_translated_block_by_block_never_inside_a_longer_message():
    table = {
        "Exercise": "练习",
        "The mean and the variance are per channel.": "均值和方差按通道计算。",
        "Learning objectives": "学习目标",
    }
    text = (
        "## Exercise\n\n:::{admonition} Learning objectives\n"
        "The mean and the variance\nare per channel.\n\n"
        "An Exercise inside a sentence stays.\n"
    )
    assert i18n.translate_markdown(text, table) == (
        "## 练习\n\n:::{admonition} 学习目标\n均值和方差按通道计算。\n\n"
        "An Exercise inside a sentence stays.\n"
    )


def _cells(nb, kind):
    return [(c.source, c.get("outputs")) for c in nb.cells if c.cell_type == kind]


def _english_code(nb):
    """The code cells of an English notebook as the Chinese one must hold them: the setup
    cell also sets the language, and norms' bilingual outputs keep their Chinese half."""
    cells = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        c = copy.deepcopy(c)
        if c.source.startswith(i18n.SETUP_START):
            c.source += i18n.SETUP_LANGUAGE
        for output in c.get("outputs", []):
            i18n.localize_output(output)
        cells.append((c.source, c.get("outputs")))
    return cells


@pytest.mark.parametrize("path", i18n.book_notebooks(), ids=lambda p: p.stem)
def test_the_chinese_notebook_is_up_to_date(path):
    """zh/book/NAME.ipynb is what `make translations` writes: the English code cells and
    stored outputs, the markdown from the catalogs. A hand edit or a stale copy fails."""
    committed = i18n.NOTEBOOKS / path.relative_to(ROOT)
    assert committed.exists(), f"{committed} is missing: run make translations"
    fresh = i18n.chinese_notebook(path)
    stored = nbformat.read(committed, as_version=4)
    english = nbformat.read(path, as_version=4)
    assert _cells(stored, "code") == _english_code(english), f"{committed}: code or outputs differ"
    assert json.loads(nbformat.writes(stored)) == json.loads(nbformat.writes(fresh)), (
        f"{committed} differs from what the catalogs give: run make translations "
        "(a Chinese notebook is generated, never edited by hand)"
    )


@pytest.mark.parametrize("path", i18n.book_notebooks(), ids=lambda p: p.stem)
def test_no_english_paragraph_is_left_in_a_chinese_notebook(path):
    nb = i18n.chinese_notebook(path)
    left = [
        run for c in nb.cells if c.cell_type == "markdown" for run in i18n.english_left(c.source)
    ]
    assert left == [], f"{path.stem}: English left in the Chinese notebook: {left[:3]}"


def test_the_english_check_can_fail():
    assert i18n.english_left(
        "批归一化按通道计算。\nThe mean and the variance are taken per channel."
    )
    assert not i18n.english_left("用 `torch.testing.assert_close` 检查 $\\mu_c = \\frac{1}{m}$。")
    assert not i18n.english_left(":::{admonition} Learning objectives and more words here ok")
    assert not i18n.english_left(
        "用法：\n```bash\nmake book   # the site, and the notebooks it caches\n```"
    )


def test_glued_values_are_pasted_into_the_chinese_text_as_myst_nb_formats_them():
    values = {"m": "0.123456", "v": "'5 个随机种子中有 5 个更高'"}
    text = "均值为 {glue:text}`m:.2f`；{glue:text}`v`。"
    assert i18n.paste_glue(text, values, "page") == "均值为 0.12；5 个随机种子中有 5 个更高。"
    with pytest.raises(SystemExit, match="no glued value 'w'"):
        i18n.paste_glue("{glue:text}`w:.1f`", values, "page")


def test_every_glue_key_of_the_catalogs_is_stored_in_its_notebook(tmp_path):
    """The Chinese site's catalogs, with every glued value pasted in: a catalog that names a
    key its notebook does not glue fails here (and would fail the Chinese build)."""
    pasted = i18n.pasted_catalogs(tmp_path)
    left = [
        e.msgstr for p in pasted.rglob("*.po") for e in polib.pofile(str(p)) if "{glue" in e.msgstr
    ]
    assert left == []
