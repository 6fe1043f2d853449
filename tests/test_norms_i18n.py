"""norms.i18n: the language setting, messages in every language, bilingual stored outputs,
and the catalog of the text norms computes (complete, fields intact)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

import norms
from norms import i18n
from norms.i18n import tr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import i18n as tools_i18n  # noqa: E402


@pytest.fixture(autouse=True)
def _default_language(monkeypatch):
    monkeypatch.delenv(i18n.ENV, raising=False)
    norms.set_language(None)
    yield
    norms.set_language(None)


@pytest.fixture
def zh_catalog(monkeypatch):
    table = {"{k} of {n} seeds": "{n} 个种子中的 {k} 个", "higher": "更高", "Correct!": "正确！"}
    monkeypatch.setattr(i18n, "catalog", lambda lang: table if lang == "zh" else {})
    return table


def test_english_by_default_and_the_setting_switches(zh_catalog):
    assert norms.get_language() == "en"
    assert str(tr("Correct!")) == "Correct!"
    norms.set_language("zh-CN")
    assert norms.get_language() == "zh"
    assert str(tr("Correct!")) == "正确！"


def test_the_environment_variable_sets_the_language(monkeypatch, zh_catalog):
    monkeypatch.setenv(i18n.ENV, "zh_CN")
    assert norms.get_language() == "zh" and i18n.explicit_language() == "zh"
    assert tr("Correct!") == "正确！"


@pytest.mark.parametrize("bad", ["fr", "klingon", ""])
def test_an_unknown_language_warns_and_speaks_english(bad):
    with pytest.warns(UserWarning, match="unknown language"):
        norms.set_language(bad or "xx")
    assert norms.get_language() == "en"


def test_an_unknown_environment_language_warns(monkeypatch):
    monkeypatch.setenv(i18n.ENV, "de")
    with pytest.warns(UserWarning, match="NORMS_LANG"):
        assert norms.get_language() == "en"


def test_fields_are_filled_in_each_language_text_fields_too(zh_catalog):
    t = tr("{k} of {n} seeds", k=tr("higher"), n=5)
    assert t.forms == {"en": "higher of 5 seeds", "zh": "5 个种子中的 更高 个"}
    assert isinstance(t, str) and t == "higher of 5 seeds"


def test_an_untranslated_template_stays_english_in_every_language(zh_catalog):
    assert tr("no translation {x}", x=1).forms == {
        "en": "no translation 1",
        "zh": "no translation 1",
    }


def test_join_and_concatenation_keep_every_language(zh_catalog):
    j = i18n.join([tr("higher"), "(3)"], " ")
    assert j.forms == {"en": "higher (3)", "zh": "更高 (3)"}
    assert (tr("higher") + "!").forms["zh"] == "更高!"
    assert ("» " + tr("higher")).forms["zh"] == "» 更高"


def test_a_text_survives_pickling(zh_catalog):
    t = tr("higher")
    back = pickle.loads(pickle.dumps(t))
    assert back == t and back.forms == t.forms


def test_html_carries_both_languages_unless_one_was_chosen(zh_catalog):
    out = i18n.html(tr("higher") + " <b>")
    assert (
        'lang="en">higher &lt;b&gt;</span>' in out and 'lang="zh-CN">更高 &lt;b&gt;</span>' in out
    )
    norms.set_language("zh")
    assert i18n.html(tr("higher")) == "更高"


def test_the_chinese_notebook_keeps_the_chinese_half(zh_catalog):
    stored = (
        i18n.CSS
        + "<p>"
        + i18n.html(tr("higher"))
        + "</p><script>var l="
        + i18n.js_language()
        + "</script>"
    )
    zh = i18n.for_notebook(stored, "zh")
    assert "更高" in zh and "higher" not in zh.replace(i18n.CSS, "")
    assert "norms-lang:zh" in zh and i18n.JS_AUTO not in zh
    en = i18n.for_notebook(stored, "en")
    assert "更高" not in en and "higher" in en


def test_read_po_skips_fuzzy_and_untranslated_and_joins_lines(tmp_path):
    po = tmp_path / "x.po"
    po.write_text(
        'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        '#: a.py:1\nmsgid "one"\nmsgstr "一"\n\n'
        '#, fuzzy\nmsgid "two"\nmsgstr "二"\n\n'
        'msgid "three"\nmsgstr ""\n\n'
        'msgid ""\n"four "\n"lines"\nmsgstr ""\n"四"\n"行 \\"引\\""\n',
        encoding="utf-8",
    )
    assert i18n.read_po(po) == {"one": "一", "four lines": '四行 "引"'}


def test_the_catalog_check_finds_what_is_wrong(tmp_path, monkeypatch):
    src = tmp_path / "norms"
    src.mkdir()
    (src / "m.py").write_text(
        "from norms.i18n import tr\n"
        'a = tr("ok {n}", n=1)\nb = tr("new")\nc = tr(f"bad {a}")\nd = tr("fields {x}", x=1)\n'
        'e = tr("fuzzy one")\n',
        encoding="utf-8",
    )
    messages, bad = tools_i18n.norms_messages(src)
    assert set(messages) == {"ok {n}", "new", "fields {x}", "fuzzy one"}
    assert len(bad) == 1 and "string literal" in bad[0]
    catalogs = tmp_path / "LC_MESSAGES"
    catalogs.mkdir()
    po = catalogs / "norms.m.po"
    po.write_text(
        'msgid "ok {n}"\nmsgstr "好 {n}"\n\nmsgid "fields {x}"\nmsgstr "字段 {y}"\n\n'
        '#, fuzzy\nmsgid "fuzzy one"\nmsgstr "模糊"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(tools_i18n, "norms_messages", lambda: (messages, list(bad)))
    found = "\n".join(tools_i18n.norms_problems(catalogs))
    assert "not in the catalog" in found and "'new'" in found
    assert "fields differ" in found and "fuzzy" in found and "string literal" in found
    assert "'ok {n}'" not in found


def test_update_writes_one_catalog_per_module_and_carries_translations(tmp_path, monkeypatch):
    catalogs = tmp_path / "LC_MESSAGES"
    messages = {"kept {n}": ["norms/quiz/why.py:3"], "moved": ["norms/check/grader.py:9"]}
    monkeypatch.setattr(tools_i18n, "norms_messages", lambda: (messages, []))
    catalogs.mkdir()
    (catalogs / "norms.quiz.why.po").write_text(
        'msgid "kept {n}"\nmsgstr "保留 {n}"\n\nmsgid "moved"\nmsgstr "移动"\n\n'
        'msgid "gone"\nmsgstr "删除"\n',
        encoding="utf-8",
    )
    (catalogs / "norms.old.po").write_text('msgid "x"\nmsgstr "叉"\n', encoding="utf-8")
    assert tools_i18n.update_norms_catalog(catalogs) == 2
    assert sorted(p.name for p in catalogs.glob("*.po")) == [
        "norms.check.grader.po",
        "norms.quiz.why.po",
    ]
    assert i18n.read_po(catalogs / "norms.quiz.why.po") == {"kept {n}": "保留 {n}"}
    assert i18n.read_po(catalogs / "norms.check.grader.po") == {"moved": "移动"}
    messages["kept {n} now"] = messages.pop("kept {n}")  # an English edit: fuzzy
    tools_i18n.update_norms_catalog(catalogs)
    problems = "\n".join(tools_i18n.norms_problems(catalogs))
    assert "fuzzy: 'kept {n} now'" in problems


def test_norms_catalog_is_complete():
    """Every template norms passes to tr() is in norms' catalog, translated, not fuzzy,
    with the same fields (make translations, then translate)."""
    problems = tools_i18n.norms_problems()
    assert problems == [], "\n".join(problems[:20])


def test_every_catalog_translation_formats_with_the_templates_fields():
    for msgid, msgstr in i18n.catalog("zh").items():
        plain = {k.split(":")[0].split("!")[0]: 1.0 for k in tools_i18n.FIELD.findall(msgid)}
        assert msgstr.format(**plain), msgid


def test_said_prints_the_current_language(zh_catalog):
    said = i18n.Said(tr("higher"))
    assert repr(said) == "higher" and "更高" in said._repr_html_()
    norms.set_language("zh")
    assert repr(said) == "更高"
