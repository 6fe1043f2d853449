"""The grader speaks the reader's language (issue 36): a reader who submits a layer on the
Chinese page gets Chinese advice, in English by default, exactly as before."""

import re

import pytest
from torch import nn

import norms
from norms import i18n
from norms.check import grade, grader
from tests.test_check import (
    BUGS,
    DetachedStatsBN,
    GradEnabledModeBN,
    Hardcoded4dGroupNorm,
    InterleavedGroupNorm,
    KerasMomentumBN,
    LazyParamsBN,
    PlainAttrBN,
    ReaderBatchNorm,
)

_CJK = re.compile("[\u4e00-\u9fff]")
_WORD = re.compile(r"[A-Za-z]+[,;:.]?")


#: an exception of the reader's code, quoted as Python wrote it ("ValueError: not enough
#: values to unpack"), up to the grader's own words about where it happened
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Exit|Interrupt): [^（\n]*")


def english_left(text: str) -> list[str]:
    """Runs of three or more English words in ``text``, outside code and quoted exceptions: a
    token with any other character (``torch.sqrt(var``, ``running_mean``, ``x̂·β``, ``(8,``,
    a CJK character) is code, maths, a number or Chinese, and ends a run."""
    runs, run = [], []
    for token in _EXCEPTION.sub(" ", re.sub(r"`[^`]*`", " ", text)).split():
        if _WORD.fullmatch(token):
            run.append(token)
            continue
        if len(run) >= 3:
            runs.append(" ".join(run))
        run = []
    if len(run) >= 3:
        runs.append(" ".join(run))
    return runs


def everything(report) -> str:
    """Every message of a report a reader can see: its text (problems, notes) and checks."""
    return "\n".join([str(report), *map(str, report.checks)])


@pytest.fixture
def chinese():
    norms.set_language("zh")
    yield
    norms.set_language(None)


#: one bug per family of messages: eps, dims and groups, running statistics and momentum,
#: the backward's terms, the mode, the structure, a crash explained from the reductions
SAMPLE = [
    b
    for b in BUGS
    if b[0]
    in (
        DetachedStatsBN,
        GradEnabledModeBN,
        Hardcoded4dGroupNorm,
        InterleavedGroupNorm,
        KerasMomentumBN,
        LazyParamsBN,
        PlainAttrBN,
    )
    or b[2] in ("eps_outside_sqrt", "wrong_dims", "sum_instead_of_mean", "variance_cancellation")
]


def test_the_detector_finds_english_prose():
    """The check below can fail: on the English report it finds English sentences."""
    report = grade(PlainAttrBN, nn.BatchNorm1d)
    assert not _CJK.search(str(report))
    assert len(english_left(everything(report))) > 3, str(report)


@pytest.mark.parametrize("cand,ref,code", SAMPLE, ids=[f"{b[0].__name__}-{b[2]}" for b in SAMPLE])
def test_a_buggy_layer_graded_in_chinese_gets_chinese_advice(cand, ref, code, chinese):
    report = grade(cand, ref)
    assert code in report.codes, str(report)
    text = everything(report)
    assert _CJK.search(text), text
    assert english_left(text) == [], (english_left(text), text)
    p = report.problems[report.codes.index(code)]
    for part in (p.title, p.detail, p.fix):
        assert _CJK.search(part), part


def test_a_correct_layer_is_praised_in_chinese(chinese):
    report = grade(ReaderBatchNorm, nn.BatchNorm2d)
    assert report.ok
    assert str(report).startswith("✓") and _CJK.search(str(report)), str(report)
    assert english_left(everything(report)) == [], everything(report)


def test_english_by_default_and_after_going_back():
    assert norms.get_language() == "en"
    before = grade(KerasMomentumBN, nn.BatchNorm1d)
    assert not _CJK.search(everything(before)), str(before)
    norms.set_language("zh")
    try:
        assert _CJK.search(str(grade(KerasMomentumBN, nn.BatchNorm1d)))
    finally:
        norms.set_language(None)
    after = grade(KerasMomentumBN, nn.BatchNorm1d)
    assert everything(after) == everything(before)


@pytest.mark.parametrize("child", [True, False], ids=["child process", "in process"])
@pytest.mark.parametrize("how", ["set_language", "NORMS_LANG"])
def test_the_grading_process_speaks_the_readers_language(child, how, monkeypatch):
    """The grading runs in a forked child on Linux: the report it sends back speaks the
    language the reader chose in this process (set_language, or the environment variable the
    Chinese notebooks set). Its messages carry every language, so nothing the child renders
    is left in another one."""
    if child and not grader.CHILD_PROCESS:
        pytest.skip("grading in a child process is Linux's")
    monkeypatch.setattr(grader, "CHILD_PROCESS", child)
    if how == "NORMS_LANG":
        monkeypatch.setenv(i18n.ENV, "zh_CN")
    else:
        norms.set_language("zh")
    try:
        report = grade(KerasMomentumBN, nn.BatchNorm1d)
        assert "momentum_convention" in report.codes
        assert english_left(everything(report)) == [], str(report)
        assert "动量" in str(report), str(report)
    finally:
        norms.set_language(None)


def test_the_stored_html_carries_both_languages():
    """A stored output (no language chosen) holds English and Chinese; the page shows the one
    of its <html lang>. A language chosen: that language only."""
    report = grade(KerasMomentumBN, nn.BatchNorm1d)
    page = report._repr_html_()
    assert 'lang="zh-CN"' in page and 'lang="en"' in page and i18n.CSS in page
    assert "Momentum follows the TensorFlow/Keras convention" in page and "动量" in page
    norms.set_language("zh")
    try:
        chinese_page = grade(KerasMomentumBN, nn.BatchNorm1d)._repr_html_()
    finally:
        norms.set_language(None)
    assert "动量" in chinese_page and "TensorFlow/Keras convention" not in chinese_page


def test_show_prints_the_chapters_layout_in_each_language():
    """norms.check.show (the chapter "Grade your own layer"): in English the layout the
    chapter printed with textwrap (ok, "[code] title. detail", "Fix: ...", notes); in
    Chinese the same items, in Chinese, unwrapped (the page wraps them)."""
    import textwrap

    from norms.check.report import show_lines

    report = grade(KerasMomentumBN, nn.BatchNorm2d)
    assert not report.ok
    old = ["ok: False"]
    for p in report.problems:
        old.append(textwrap.fill(f"[{p.code}] {p.title}. {p.detail}", 78, subsequent_indent="    "))
        old.append(
            textwrap.fill(f"Fix: {p.fix}", 78, initial_indent="    ", subsequent_indent="    ")
        )
    for note in report.notes:
        old.append(textwrap.fill(f"note: {note}", 78, subsequent_indent="    "))
    shown = show_lines(report)
    assert shown.forms["en"] == "\n".join(old)
    zh = shown.forms["zh"]
    assert zh.startswith("ok: False") and _CJK.search(zh) and english_left(zh) == [], zh
    assert all(f"[{code}]" in zh for code in report.codes)
    checks = show_lines(grade(ReaderBatchNorm, nn.BatchNorm2d), checks=True)
    assert checks.forms["en"].count("\n") + 1 == len(grade(ReaderBatchNorm, nn.BatchNorm2d).checks)
    assert english_left(checks.forms["zh"]) == [], checks.forms["zh"]
