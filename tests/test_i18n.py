"""The Chinese edition's catalogs and notebooks (tools/i18n.py): complete, with their markup
intact, and the Chinese notebooks generated from the English ones and the catalogs."""

from __future__ import annotations

import copy
import functools
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


def _english_code(nb, page):
    """The code cells of an English notebook as the Chinese one must hold them: the setup
    cell also sets the language, norms' bilingual outputs keep their Chinese half, and
    printed sentences are translated."""
    printed = i18n.output_translations(page)
    cells = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        c = copy.deepcopy(c)
        if c.source.startswith(i18n.SETUP_START):
            c.source += i18n.SETUP_LANGUAGE
        for output in c.get("outputs", []):
            i18n.localize_output(output)
            if output.get("output_type") == "stream":
                output["text"] = i18n.translate_printed(output["text"], printed)
        cells.append((c.source, c.get("outputs")))
    return cells


@functools.cache
def chinese_notebook(path: Path) -> dict:
    """``i18n.chinese_notebook(path)``, generated once for the two tests below (neither changes
    it): the same catalogs and English notebook give the same notebook."""
    return i18n.chinese_notebook(path)


@pytest.mark.parametrize("path", i18n.book_notebooks(), ids=lambda p: p.stem)
def test_the_chinese_notebook_is_up_to_date(path):
    """zh/book/NAME.ipynb is what `make translations` writes: the English code cells and
    stored outputs, the markdown from the catalogs. A hand edit or a stale copy fails."""
    committed = i18n.NOTEBOOKS / path.relative_to(ROOT)
    assert committed.exists(), f"{committed} is missing: run make translations"
    fresh = chinese_notebook(path)
    stored = nbformat.read(committed, as_version=4)
    english = nbformat.read(path, as_version=4)
    assert _cells(stored, "code") == _english_code(
        english, path.relative_to(ROOT).with_suffix("").as_posix()
    ), f"{committed}: code or outputs differ"
    assert json.loads(nbformat.writes(stored)) == json.loads(nbformat.writes(fresh)), (
        f"{committed} differs from what the catalogs give: run make translations "
        "(a Chinese notebook is generated, never edited by hand)"
    )


@pytest.mark.parametrize("path", i18n.book_notebooks(), ids=lambda p: p.stem)
def test_no_english_paragraph_is_left_in_a_chinese_notebook(path):
    nb = chinese_notebook(path)
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


def test_printed_lines_are_messages_with_their_numbers_as_fields():
    template, numbers = i18n.printed_template("BatchNorm2d on (8, 3): 1.5e-05 off, {x}, 67% of 2")
    assert template == "BatchNorm2d on ({0}, {1}): {2} off, {{x}}, {3}% of {4}"
    assert numbers == ["8", "3", "1.5e-05", "67", "2"]
    table = {template: "BatchNorm2d 作用于 ({0}, {1})：偏差 {2}，{{x}}，{4} 的 {3}%"}
    out = i18n.translate_printed("a\n  BatchNorm2d on (8, 3): 1.5e-05 off, {x}, 67% of 2\n", table)
    assert out == "a\n  BatchNorm2d 作用于 (8, 3)：偏差 1.5e-05，{x}，2 的 67%\n"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("elements per statistic: 160", True),
        ("✓ MyRMSNorm behaves like torch.nn.RMSNorm (6 checks passed).", True),
        (
            "add_partial_sums(part.data(), threads, cols, dw, db);  // after the loop's barrier",
            False,
        ),
        ("[0., 1., -inf, -inf, -inf],", False),
        ("tensor([1., 2.]) torch.float32", False),
        ("#pragma omp simd", False),
        ("DigitsMLP BatchNorm  lr=0.1  batch=32  loss 0.31  train acc 99.1%", True),
        ("after 3 steps running_mean holds a graph of 19 nodes", True),
        ("for x0 in range(0, 512, 16):", False),
        ("eps=1e-05, momentum=0.1, affine=True", False),
    ],
)
def test_only_sentences_are_printed_lines_to_translate(line, expected):
    assert i18n.is_sentence(line) is expected


def test_every_printed_sentence_of_the_chinese_notebooks_is_translated(tmp_path):
    """The output catalogs cover what the chapters print (make translations), and the check
    fails on a printed line the catalog does not have."""
    problems = i18n.output_problems()
    assert problems == [], "\n".join(problems[:20])
    page = i18n.book_notebooks()[0]
    nb = nbformat.read(page, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("print()"))
    nb.cells[-1].outputs = [nbformat.v4.new_output("stream", text="a brand new sentence here\n")]
    assert "a brand new sentence here" in i18n.printed_lines(nb)


def test_the_chinese_site_translates_printed_outputs(monkeypatch):
    sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
    import printed_lines
    from docutils import nodes

    monkeypatch.setattr(
        i18n, "output_translations", lambda page: {"two sweeps move {0} MB": "两遍共搬运 {0} MB"}
    )
    doctree = nodes.section()
    block = nodes.literal_block("", "two sweeps move 10.5 MB\nother", classes=["output", "stream"])
    code = nodes.literal_block("", "two sweeps move 10.5 MB", classes=["cell_input"])
    doctree += [block, code]
    app = type("App", (), {"config": type("C", (), {"language": "zh_CN"})()})()
    printed_lines._translate(app, doctree, "book/speed")
    assert block.astext() == "两遍共搬运 10.5 MB\nother" and code.astext().startswith("two")
    app.config.language = "en"
    block2 = nodes.literal_block("", "two sweeps move 1 MB", classes=["output", "stream"])
    printed_lines._translate(app, nodes.section("", block2), "book/speed")
    assert block2.astext() == "two sweeps move 1 MB"


def test_a_printed_line_made_of_norms_text_takes_norms_translation(tmp_path):
    """A chapter that prints the grader's problem titles gets them from norms' catalogs
    (prefill_from_norms); a line with English of its own stays for a translator."""
    from norms.i18n import catalog

    title = "The output has the wrong shape"
    assert catalog("zh").get(title), "the grader's title is translated in norms' catalogs"
    po = tmp_path / "page.po"
    po.write_text(
        f'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        f'msgid "wrong_shape    {title}"\nmsgstr ""\n\n'
        f'msgid "{title}, and more words here"\nmsgstr ""\n',
        encoding="utf-8",
    )
    assert i18n.prefill_from_norms(po) == 1
    entries = {e.msgid: e.msgstr for e in polib.pofile(str(po))}
    assert entries[f"wrong_shape    {title}"] == "wrong_shape    " + catalog("zh")[title]
    assert entries[f"{title}, and more words here"] == ""
