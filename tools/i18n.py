"""The Chinese edition (中文版): English is the source, gettext carries the translation.

Sphinx's gettext builder extracts every message of the book (paragraphs, headings, list
items, admonitions, captions, table cells, exercises and solutions, the table of contents'
captions) into one template per page; ``sphinx-intl`` merges them into the catalogs
committed under ``locales/zh_CN/LC_MESSAGES/`` (one ``.po`` file per page). An English
paragraph that changes becomes a *fuzzy* entry there (its old translation kept as a hint),
a new one an untranslated entry, and :func:`problems` (``make test``) fails on both, so the
Chinese edition cannot fall behind the English one silently. Sphinx applies the catalogs when
it builds the site with ``language = "zh_CN"`` (myst-nb applies them to notebooks too).

Usage::

    python tools/i18n.py update      # make translations: extract, then update the catalogs
    python tools/i18n.py check       # every entry translated, none fuzzy, markup intact
    python tools/i18n.py html [OUT]  # the Chinese site (make book: _build/html/zh)
    python tools/i18n.py notebooks   # the Chinese notebooks for Colab and download (zh/)

The Chinese notebooks (``zh/book/NAME.ipynb``, committed so that Colab opens them from the
repository) are the English notebooks with every markdown message replaced by its
translation: the same code cells and stored outputs. ``tests/test_i18n.py`` regenerates
them and fails when the committed ones differ (an English or catalog edit without
``make translations``, or a hand edit of a Chinese notebook).
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import toc  # noqa: E402

LANGUAGE = "zh_CN"
LOCALES = ROOT / "locales"
CATALOGS = LOCALES / LANGUAGE / "LC_MESSAGES"
TEMPLATES = ROOT / "_build" / "gettext-build" / "gettext"  # its own doctrees, beside
#: where the Chinese site goes inside the English one: its pages keep the English URLs
#: under this prefix (book/batchnorm.html -> zh/book/batchnorm.html)
PREFIX = "zh"
#: the Chinese notebooks, as the repository holds them (zh/book/NAME.ipynb)
NOTEBOOKS = ROOT / "zh"
#: the catalogs of the sentences the chapters print (their stored outputs), one per page;
#: outside LC_MESSAGES, so Sphinx does not take them for page catalogs
OUTPUTS = LOCALES / LANGUAGE / "outputs"
#: the catalogs of the text norms computes (quizzes, explorers, the grader: norms.i18n.tr),
#: one per module of norms
NORMS_CATALOGS = ROOT / "norms" / "locale" / LANGUAGE / "LC_MESSAGES"

# Markup a translation must carry over unchanged: roles and their targets, inline code,
# inline maths, glued values, substitutions.
_ROLE = re.compile(r"\{[a-z:-]+\}`[^`]*`")
_CODE = re.compile(r"(?<![}`])``?[^`]+``?")
_MATH = re.compile(r"\$\$?[^$]+\$\$?")
_SUBST = re.compile(r"\{\{[^}]*\}\}")
_TEX_COMMAND = re.compile(r"\\[a-zA-Z]+")
_BRACED = re.compile(r"\{[^{}]*\}")
_WORD = re.compile(r"[A-Za-z]{3,}")
# CommonMark's emphasis does not close after a full-width punctuation mark followed by a
# character (**预备知识：**无 shows its asterisks), nor open before one after a character:
# put the punctuation outside the asterisks.
_CJK_PUNCT = re.compile("[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]")
_EMPHASIS = re.compile(r"(?<![*\\])\*{1,2}(?!\*)")


def stuck_emphasis(text: str) -> bool:
    """Whether an emphasis opens before, or closes after, a full-width punctuation mark
    with a character on its other side: CommonMark then shows the asterisks."""
    is_open = {1: False, 2: False}
    for m in _EMPHASIS.finditer(text):
        before, after = text[m.start() - 1 : m.start()], text[m.end() : m.end() + 1]
        inner, outer = (before, after) if is_open[len(m[0])] else (after, before)
        if _CJK_PUNCT.match(inner) and outer.strip() and not _CJK_PUNCT.match(outer):
            return True
        is_open[len(m[0])] = not is_open[len(m[0])]
    return False


def _build(builder: str, out: Path, overrides: dict) -> None:
    from jupyter_book.sphinx import build_sphinx

    result = build_sphinx(
        ROOT,
        out,
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides={
            "external_toc_path": (ROOT / "_toc.yml").as_posix(),
            "latex_individualpages": False,
            **overrides,
        },
        doctreedir=out.parent / ".doctrees",
        builder=builder,
        warningiserror=True,
        keep_going=True,
        quiet=True,
    )
    if result:
        raise SystemExit(f"i18n: the {builder} build failed ({result})")


def extract(out: Path = TEMPLATES) -> Path:
    """The English messages, one ``.pot`` template per page, into ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    _build("gettext", out, {})
    return out


def update() -> list[str]:
    """Extract, then merge the templates into the catalogs (new entries untranslated,
    changed ones fuzzy, removed ones dropped). Returns the catalogs written."""
    from sphinx_intl.basic import update as intl_update

    pot = extract()
    intl_update(str(LOCALES), str(pot), (LANGUAGE,), line_width=-1, ignore_obsolete=True)
    keep = {p.relative_to(pot).with_suffix(".po") for p in pot.rglob("*.pot")}
    for po in CATALOGS.rglob("*.po"):  # a page that left the book takes its catalog along
        if po.relative_to(CATALOGS) not in keep:
            po.unlink()
    fill_untranslatable()
    update_norms_catalog()
    update_outputs()
    update_assignments()
    return sorted(str(p.relative_to(ROOT)) for p in CATALOGS.rglob("*.po"))


def norms_messages(package: Path = ROOT / "norms") -> tuple[dict[str, list[str]], list[str]]:
    """Every template norms passes to ``tr`` (``{msgid: [file:line, ...]}``, in source
    order), read from the source, and the calls whose template is not a string literal
    (``tr(f"...")``, a variable): those cannot be extracted, so they are errors."""
    import ast

    found: dict[str, list[str]] = {}
    bad: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        calls = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if _is_tr(n)]
        for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
            first = node.args[0]
            where = f"{rel}:{node.lineno}"
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.setdefault(first.value, []).append(where)
            else:
                bad.append(
                    f"{where}: tr() needs a string literal template, got {ast.unparse(first)[:60]}"
                )
    return found, bad


# A printed line with words to translate: two English words or more (a table's row label
# "loss ... train acc" as much as a sentence), not counting identifiers (running_mean,
# torch.float32, lr=, f(...)). Lines of code (a listing of generated C++, a shell command)
# are not sentences.
_WORD_IN_LINE = re.compile(r"(?<![\w.\-])[A-Za-z][a-z]+(?![\w(=.\-])")
_CODE_LINE = re.compile(
    r"(;\s*(//.*)?$|//|#pragma|#include|^\s*[{}]|^\s*[A-Za-z_][\w.]*\s*[-+*]?=\s[^:]*$"
    r"|\bconst \w|::|\bint64_t\b|\w\* |^\s*(for|while|if|def|return|template)\b|\brange\("
    r"|^riscv64|^x86_64)"
)
_QUOTED_NAME = re.compile(r"'[^'\s]*'")
_NOT_WORDS = re.compile(r"\b(inf|nan|tensor|True|False|dtype|torch\.\w+)\b")


def is_sentence(line: str) -> bool:
    """Whether a printed line holds a sentence to translate (not code, not a tensor)."""
    text = _QUOTED_NAME.sub(" ", _NOT_WORDS.sub(" ", line))  # 'mean', 'sub': names, not words
    words = _WORD_IN_LINE.findall(text)
    label = len(words) == 1 and re.search(r"(?<![\w.\-])[A-Za-z][a-z]+:", text)
    return (len(words) >= 2 or bool(label)) and not _CODE_LINE.search(line)


def printed_lines(nb) -> list[str]:
    """The printed lines of a notebook's stored outputs that hold a sentence, each once, in
    order, as templates (:func:`printed_template`): the messages of the page's output
    catalog."""
    seen: dict[str, None] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") != "stream":
                continue
            for line in output["text"].splitlines():
                if is_sentence(line):
                    seen.setdefault(printed_template(line.strip())[0], None)
    return list(seen)


# a number that stands alone (not the 2 of BatchNorm2d, not a version's parts)
_LONE_NUMBER = re.compile(r"(?<![\w.])[-−]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?x?(?![\w])")


def printed_template(line: str) -> tuple[str, list[str]]:
    """A printed line as a message whose numbers are fields ``{0}``, ``{1}``, ... (a timing
    that differs on the next run keeps its translation), and the numbers."""
    numbers: list[str] = []

    def field(m: re.Match) -> str:
        numbers.append(m[0])
        return "{" + str(len(numbers) - 1) + "}"

    escaped = line.replace("{", "{{").replace("}", "}}")
    return _LONE_NUMBER.sub(field, escaped), numbers


def merge_catalog(path: Path, messages: dict[str, list[tuple[str, int]]], known=None) -> None:
    """Merge ``messages`` (msgid -> locations) into the catalog at ``path``: new entries
    untranslated, changed ones fuzzy (the old translation kept as a hint), gone ones
    dropped; an untranslated entry takes its translation from ``known`` if it has one."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po, write_po

    fixed = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)  # no churn in diffs
    template = Catalog(project="norms", fuzzy=False, creation_date=fixed, revision_date=fixed)
    for msgid, places in messages.items():
        flags = (
            ("python-brace-format",)
            if FIELD.search(msgid) and path.parent == NORMS_CATALOGS
            else ()
        )
        template.add(msgid, locations=places, flags=flags)
    if path.exists():
        with path.open("rb") as f:
            catalog = read_po(f, locale=LANGUAGE)
    else:
        catalog = Catalog(locale=LANGUAGE, project="norms", fuzzy=False, revision_date=fixed)
    catalog.update(template, update_header_comment=False)
    catalog.obsolete.clear()
    for message in catalog:
        if message.id and not message.string and known and message.id in known:
            message.string = known[message.id]
            message.flags.discard("fuzzy")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=0, sort_output=False, ignore_obsolete=True)


def update_outputs(out: Path = OUTPUTS) -> int:
    """The output catalogs: the printed lines of every page (:func:`printed_lines`)."""
    import nbformat

    n = 0
    for path in book_notebooks():
        page = path.relative_to(ROOT).with_suffix("").as_posix()
        catalog = out / f"{page}.po"
        lines = printed_lines(nbformat.read(path, as_version=4))
        if not lines:
            catalog.unlink(missing_ok=True)
            continue
        merge_catalog(catalog, {line: [(path.name, 0)] for line in lines})
        prefill_from_norms(catalog)
        n += len(lines)
    return n


def prefill_from_norms(catalog: Path) -> int:
    """Fill the empty entries of an output catalog that are made only of text norms
    translates (a grader's problem title printed by a chapter): each such piece replaced by
    its translation from norms' catalogs, when no English is left. Returns how many."""
    import polib

    from norms.i18n import catalog as norms_catalog

    table = {k: v for k, v in norms_catalog("zh").items() if len(k.split()) >= 3 and "{" not in k}
    po = polib.pofile(str(catalog), wrapwidth=0)
    filled = 0
    for entry in po:
        if entry.msgstr or entry.obsolete:
            continue
        text = entry.msgid
        for english in sorted(table, key=len, reverse=True):
            if english in text:
                text = text.replace(english, table[english])
        if text != entry.msgid and not is_sentence(text):
            entry.msgstr, filled = text, filled + 1
    if filled:
        po.save(str(catalog))
    return filled


def output_translations(page: str, out: Path = OUTPUTS) -> dict[str, str]:
    """printed line -> its translation, for a page (``book/batchnorm``)."""
    path = out / f"{page}.po"
    return read_po_file(path) if path.exists() else {}


def translate_printed(text: str, table: dict[str, str]) -> str:
    """A stored output's text with each printed line the catalog has translated (its
    indentation kept)."""
    if not table:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        template, numbers = printed_template(line.strip())
        if template in table:
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = indent + table[template].format(*numbers)
    return "\n".join(lines)


def output_problems(out: Path = OUTPUTS) -> list[str]:
    """The output catalogs: untranslated or fuzzy entries, a translation that lost or
    changed a number of the printed line, a page whose catalog is stale."""
    import nbformat
    import polib

    found = []
    for path in book_notebooks():
        page = path.relative_to(ROOT).with_suffix("").as_posix()
        po_path = out / f"{page}.po"
        lines = printed_lines(nbformat.read(path, as_version=4))
        entries = {e.msgid: e for e in polib.pofile(str(po_path))} if po_path.exists() else {}
        rel = po_path.relative_to(ROOT) if po_path.is_relative_to(ROOT) else po_path
        for line in lines:
            if line not in entries:
                found.append(
                    f"{rel}: printed line not in the catalog (make translations): {line[:70]!r}"
                )
        for msgid, e in entries.items():
            if e.obsolete:
                continue
            if e.fuzzy or not e.msgstr.strip():
                found.append(
                    f"{rel}:{e.linenum}: {'fuzzy' if e.fuzzy else 'untranslated'}: {msgid[:70]!r}"
                )
            elif sorted(FIELD.findall(msgid)) != sorted(FIELD.findall(e.msgstr)):
                found.append(f"{rel}:{e.linenum}: number fields differ: {msgid[:70]!r}")
    return found


def _is_tr(node) -> bool:
    import ast

    if not isinstance(node, ast.Call) or not node.args:
        return False
    return (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "tr"


def norms_catalog_of(place: str, catalogs: Path = NORMS_CATALOGS) -> Path:
    """The catalog a template belongs to: the one of the module that first uses it
    (``norms/quiz/why.py:12`` -> ``norms.quiz.why.po``); one catalog per module keeps
    merges and reviews per module, as the book keeps one per page."""
    return catalogs / (place.rsplit(":", 1)[0].removesuffix(".py").replace("/", ".") + ".po")


def update_norms_catalog(catalogs: Path = NORMS_CATALOGS) -> int:
    """Merge norms' templates into its catalogs (new: untranslated; changed: fuzzy, with
    the old translation as a hint; moved to another module: its translation moves along;
    gone: dropped). Returns the number of entries."""
    messages, _ = norms_messages()
    by_file: dict[Path, dict[str, list[str]]] = {}
    for msgid, places in messages.items():
        by_file.setdefault(norms_catalog_of(places[0], catalogs), {})[msgid] = places
    known: dict[str, str] = {}
    for path in sorted(catalogs.glob("*.po")) if catalogs.exists() else []:
        known |= {k: v for k, v in read_po_file(path).items() if k not in known}
        if path not in by_file:
            path.unlink()
    for path, msgs in by_file.items():
        locations = {
            m: [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in places]
            for m, places in msgs.items()
        }
        merge_catalog(path, locations, known)
    return len(messages)


def read_po_file(path: Path) -> dict[str, str]:
    """The translated, non-fuzzy entries of one catalog (norms' own reader)."""
    from norms.i18n import read_po

    return read_po(path)


FIELD = re.compile(r"(?<!\{)\{([^{}]*)\}(?!\})")


def norms_problems(catalogs: Path = NORMS_CATALOGS) -> list[str]:
    """norms' catalogs: a template without its translation (or fuzzy), a translation whose
    ``{fields}`` differ from the template's, a ``tr`` call that cannot be extracted, a
    template missing from the catalogs (``make translations`` not run)."""
    import polib

    messages, found = norms_messages()
    entries = {}
    for path in sorted(catalogs.glob("*.po")) if catalogs.exists() else []:
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for e in polib.pofile(str(path)):
            if not e.obsolete:
                entries.setdefault(e.msgid, (rel, e))
    for msgid in messages:
        if msgid not in entries:
            found.append(f"norms: not in the catalog (run make translations): {msgid[:70]!r}")
    for msgid, (rel, entry) in entries.items():
        if entry.fuzzy or not entry.msgstr.strip():
            what = "fuzzy" if entry.fuzzy else "untranslated"
            found.append(f"{rel}:{entry.linenum}: {what}: {msgid[:70]!r}")
        elif sorted(FIELD.findall(msgid)) != sorted(FIELD.findall(entry.msgstr)):
            found.append(
                f"{rel}:{entry.linenum}: fields differ: {sorted(FIELD.findall(msgid))} "
                f"vs {sorted(FIELD.findall(entry.msgstr))}: {msgid[:70]!r}"
            )
    return found


def untranslatable(msgid: str) -> bool:
    """Whether a message has nothing to translate: display maths, a bare reference, code.
    Its translation is the message itself (:func:`update` fills it in)."""
    text = _ROLE.sub(" ", msgid)
    text = _MATH.sub(" ", _CODE.sub(" ", text))
    text = _TEX_COMMAND.sub(" ", text)
    while _BRACED.search(text):
        text = _BRACED.sub(" ", text)
    return not _WORD.search(text)


def fill_untranslatable(catalogs: Path = CATALOGS) -> int:
    """Give every message with nothing to translate itself as its translation (and drop
    Babel's format flags); returns how many were filled."""
    import polib

    filled = 0
    for po_path in sorted(catalogs.rglob("*.po")):
        po = polib.pofile(str(po_path), wrapwidth=0)
        changed = False
        for entry in po:
            # Babel marks a message with "%" or "{…}" as a format string; none of the book's is
            # one, and the flag would make msgfmt --check compare placeholders
            formats = [f for f in entry.flags if f.endswith("-format")]
            if formats:
                entry.flags = [f for f in entry.flags if f not in formats]
                changed = True
            if not entry.obsolete and not entry.msgstr and untranslatable(entry.msgid):
                entry.msgstr, changed = entry.msgid, True
                filled += 1
        if changed:
            po.save()
    return filled


_GLUE_ZH = re.compile(r"^(\{glue(?::[a-z]*)?\}`[^`:]+?)\.zh(?=[`:])")
_TITLED = re.compile(r"^(\{[a-z:-]+\})`[^`<]*<([^`>]*)>`$")


def markup(text: str) -> list[str]:
    """The pieces of MyST markup in a message that its translation must keep as they are
    (a reference's own link text, as in ``{ref}`the section <label>```, is translated)."""
    roles = [_TITLED.sub(r"\1`<\2>`", role) for role in _ROLE.findall(text)]
    # a glued English sentence has a Chinese twin under the key + ".zh" (glue_comparison)
    roles = [_GLUE_ZH.sub(r"\1", role) for role in roles]
    rest = _ROLE.sub(" ", text)
    return sorted(roles + _CODE.findall(rest) + _MATH.findall(rest) + _SUBST.findall(rest))


def entry_problems(msgid: str, msgstr: str, fuzzy: bool) -> list[str]:
    """What is wrong with one catalog entry (empty when nothing is)."""
    if fuzzy:
        return ["fuzzy: the English changed since it was translated"]
    if not msgstr.strip():
        return ["untranslated"]
    problems = []
    if msgstr.count("`") % 2 != msgid.count("`") % 2:
        problems.append("unbalanced backticks")
    if "*" in msgid and stuck_emphasis(_CODE.sub(" ", _MATH.sub(" ", msgstr))):
        problems.append("emphasis next to full-width punctuation does not render")
    missing = sorted(set(markup(msgid)) - set(markup(msgstr)))
    if missing:
        problems.append(f"markup lost or changed: {', '.join(missing)}")
    return problems


def problems(catalogs: Path = CATALOGS) -> list[str]:
    """Every entry of the catalogs that is untranslated, fuzzy or breaks the markup, as
    ``file:line: problem: msgid``; empty when the Chinese edition is complete."""
    import polib

    found = []
    if not catalogs.exists():
        return [f"{catalogs}: no catalogs (run make translations)"]
    for po_path in sorted(catalogs.rglob("*.po")):
        rel = po_path.relative_to(ROOT) if po_path.is_relative_to(ROOT) else po_path
        for entry in polib.pofile(str(po_path)):
            if entry.obsolete:
                continue
            for problem in entry_problems(entry.msgid, entry.msgstr, entry.fuzzy):
                found.append(f"{rel}:{entry.linenum}: {problem}: {entry.msgid[:70]!r}")
    if catalogs == CATALOGS:
        found += norms_problems() + output_problems() + assignment_problems()
    return found


def translations(page: str) -> dict[str, str]:
    """msgid -> msgstr of a page's catalog (``page`` as in the table of contents)."""
    import polib

    path = CATALOGS / f"{page}.po"
    if not path.exists():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path)) if e.msgstr and not e.fuzzy}


_LINE_START = re.compile(r"^(?:[ \t>]*(?:#{1,6} |[-*+] |\d+\. )?|.*\| |:::+\{[a-z-]+\} )\**$")
#: a space of a message (Sphinx joins a paragraph's lines) where the source may break the line
_SPACE = r"(?:[ \t]*\n[ \t]*|[ \t]+)"
_LINE_END = re.compile(r"^\**[ \t]*(?:\||$)")


def translate_markdown(text: str, table: dict[str, str]) -> str:
    """``text`` with each message of ``table`` replaced, longest first, where it stands as a
    whole block, line, list item, heading or table cell (never inside a longer message)."""
    for msgid in sorted(table, key=len, reverse=True):
        if msgid == table[msgid]:
            continue
        pattern = _SPACE.join(re.escape(word) for word in msgid.split())
        out, pos = [], 0
        for m in re.finditer(pattern, text):
            line_before = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
            end = text.find("\n", m.end())
            line_after = text[m.end() : end if end >= 0 else len(text)]
            if _LINE_START.match(line_before) and _LINE_END.match(line_after):
                out += [text[pos : m.start()], table[msgid]]
                pos = m.end()
        text = "".join(out) + text[pos:]
    return text


#: the catalogs of the assignments' text (assignments/NAME.ipynb), one per assignment
ASSIGNMENTS = LOCALES / LANGUAGE / "assignments"
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_HEADING = re.compile(r"^#{1,6}\s+")


def markdown_messages(text: str) -> list[str]:
    """The messages of a markdown text as Sphinx would cut it: each paragraph, heading and
    list item, its lines joined by spaces."""
    found = []
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)  # code is not translated
    for block in re.split(r"\n\s*\n", text):
        items: list[list[str]] = []
        for line in block.strip().splitlines():
            if _HEADING.match(line):
                items.append([_HEADING.sub("", line)])
                items.append([])
            elif _ITEM.match(line) or not items:
                items.append([_ITEM.sub("", line)])
            else:
                items[-1].append(line.strip())
        found += [" ".join(i).strip() for i in items if " ".join(i).strip()]
    return found


def assignment_messages(nb) -> list[str]:
    """The messages of an assignment's master notebook (its markdown cells)."""
    seen: dict[str, None] = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for message in markdown_messages(cell.source):
                if not untranslatable(message):
                    seen.setdefault(message, None)
    return list(seen)


def update_assignments(masters: Path = ROOT / "assignments", out: Path = ASSIGNMENTS) -> int:
    """The assignments' catalogs: one per master notebook."""
    import nbformat

    n = 0
    paths = sorted(masters.glob("*.ipynb"))
    for stale in set(out.glob("*.po")) - {out / f"{p.stem}.po" for p in paths}:
        stale.unlink()
    for path in paths:
        messages = assignment_messages(nbformat.read(path, as_version=4))
        merge_catalog(out / f"{path.stem}.po", {m: [(path.name, 0)] for m in messages})
        n += len(messages)
    return n


# the points tools/assignments.py adds to a question's title
_POINTS = re.compile(
    r"\*(?P<total>[\d.]+) points? \((?P<q>[\w-]+)\): (?P<public>[\d.]+) from the public tests "
    r"that `(?P<call>[^`]+)` runs, (?P<hidden>[\d.]+) from hidden tests run after you submit\.\*"
)
_POINTS_ZH = (
    "*{total} 分（{q}）：其中 {public} 分来自 `{call}` 运行的公开测试，"
    "{hidden} 分来自提交后运行的隐藏测试。*"
)


def chinese_assignment(student: Path, name: str) -> dict:
    """The Chinese student notebook of an assignment: its markdown translated from the
    assignment's catalog, its code (and so its grading) the same."""
    import nbformat

    nb = nbformat.read(student, as_version=4)
    path = ASSIGNMENTS / f"{name}.po"
    table = read_po_file(path) if path.exists() else {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = _POINTS.sub(lambda m: _POINTS_ZH.format(**m.groupdict()), cell.source)
            cell.source = translate_markdown(source, table)
    return nb


def assignment_problems(out: Path = ASSIGNMENTS) -> list[str]:
    """The assignments' catalogs: untranslated or fuzzy entries, broken markup, a master
    whose messages are not all in its catalog."""
    import nbformat
    import polib

    found = []
    for master in sorted((ROOT / "assignments").glob("*.ipynb")):
        po_path = out / f"{master.stem}.po"
        rel = po_path.relative_to(ROOT) if po_path.is_relative_to(ROOT) else po_path
        entries = {e.msgid: e for e in polib.pofile(str(po_path))} if po_path.exists() else {}
        for message in assignment_messages(nbformat.read(master, as_version=4)):
            if message not in entries:
                found.append(f"{rel}: not in the catalog (make translations): {message[:70]!r}")
        for e in entries.values():
            for problem in entry_problems(e.msgid, e.msgstr, e.fuzzy):
                found.append(f"{rel}:{e.linenum}: {problem}: {e.msgid[:70]!r}")
    return found


def chinese_notebook(path: Path) -> dict:
    """The Chinese notebook of ``path`` (a notebook of the book): markdown translated,
    code cells, outputs and metadata as they are, images found from ``zh/book/``."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    page = path.relative_to(ROOT).with_suffix("").as_posix()
    table = translations(page)
    printed = output_translations(page)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = translate_markdown(cell.source, table)
            cell.source = re.sub(r"\]\((?!https?:|#)(images/)", r"](../../book/\1", source)
        elif cell.source.startswith(SETUP_START):
            cell.source += SETUP_LANGUAGE
        for output in cell.get("outputs", []):
            localize_output(output)
            if output.get("output_type") == "stream":
                output["text"] = translate_printed(output["text"], printed)
    nb.metadata["language_info"] = nb.metadata.get("language_info", {})
    return nb


#: how a chapter's setup cell starts (it installs norms on Colab); the Chinese notebook's
#: also sets norms' language, so what norms computes when the reader runs a cell is Chinese
SETUP_START = "# Setup:"
SETUP_LANGUAGE = (
    '\n\nimport os\n\nos.environ["NORMS_LANG"] = "zh"  # norms 的测验和评分建议用中文\n'
)


def localize_output(output: dict, language: str = "zh") -> None:
    """An output of the English notebook as the Chinese one stores it (in place): norms'
    bilingual text keeps its Chinese half, scripts show Chinese (``norms.i18n.for_notebook``)."""
    from norms.i18n import for_notebook

    if "text" in output:
        output["text"] = for_notebook(output["text"], language)
    for mime, value in output.get("data", {}).items():
        if isinstance(value, str) and (mime.startswith("text/") or "javascript" in mime):
            output["data"][mime] = for_notebook(value, language)


_ENGLISH_RUN = re.compile(r"[A-Za-z][a-z']+(?:[ ,;:]+[A-Za-z][a-z']+){5,}")
_DIRECTIVE_LINE = re.compile(r"^\s*(?::::*|```+|:[a-z-]+:)")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_QUOTED = re.compile(r"“[^”]*”")


def english_left(markdown: str) -> list[str]:
    """Runs of six or more English words in a Chinese markdown text, outside code (inline
    and fenced), maths, roles, link targets, directive lines and “quoted” messages (shown as
    the program prints them): a paragraph the catalogs did not translate."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```") and not line.lstrip().startswith("```{"):
            fenced = not fenced
            continue
        if fenced or _DIRECTIVE_LINE.match(line):
            continue
        text = _LINK_TARGET.sub("]", _MATH.sub(" ", _CODE.sub(" ", _ROLE.sub(" ", line))))
        text = _QUOTED.sub(" ", text)  # a message quoted as the reader sees it, in English
        found += _ENGLISH_RUN.findall(text)
    return found


def book_notebooks() -> list[Path]:
    """The notebooks the table of contents lists, in its order."""
    return toc.notebooks()


def write_notebooks(out: Path = NOTEBOOKS) -> list[Path]:
    """Write the Chinese notebook of every notebook of the book under ``out``."""
    import nbformat

    written = []
    for path in book_notebooks():
        target = out / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(chinese_notebook(path), target)
        written.append(target)
    return written


_GLUE_TEXT = re.compile(r"\{glue:text\}`([^`]+)`")
# A translation is parsed on its own, and Sphinx keeps it only if it parses as a paragraph: a
# heading such as "1. BatchNorm after dropout" would parse as a list and stay English, so its
# marker is escaped ("1\. …") in the catalogs the site is built from.
_LIST_MARKER = re.compile(r"^(\d+)([.)] )")


def glued_text(notebook: Path) -> dict[str, str]:
    """The text/plain of every value a notebook glued, by key (as myst-nb stores it)."""
    import nbformat

    from norms.glue import stored_text

    return stored_text(nbformat.read(notebook, as_version=4))


def paste_glue(msgstr: str, values: dict[str, str], where: str) -> str:
    """``msgstr`` with each ``{glue:text}`key:fmt``` replaced by the value it shows.

    Sphinx parses a translation as a document of its own, after the page was read, where
    myst-nb's glue roles find no notebook; so the Chinese site is built from catalogs whose
    glued values are pasted in, formatted as myst-nb formats them."""
    from myst_nb.core.variables import format_plain_text

    def one(m: re.Match) -> str:
        key, fmt = m[1].rsplit(":", 1) if ":" in m[1] else (m[1], "")
        if key not in values:
            raise SystemExit(f"{where}: no glued value {key!r} for {m[0]}")
        return format_plain_text(values[key], fmt)

    return _GLUE_TEXT.sub(one, msgstr)


def pasted_catalogs(out: Path) -> Path:
    """A copy of the catalogs with the glued values pasted in (:func:`paste_glue`)."""
    import polib

    shutil.rmtree(out, ignore_errors=True)
    for po_path in CATALOGS.rglob("*.po"):
        rel = po_path.relative_to(CATALOGS)
        notebook = ROOT / rel.with_suffix(".ipynb")
        values = glued_text(notebook) if notebook.exists() else {}
        po = polib.pofile(str(po_path), wrapwidth=0)
        for entry in po:
            if "{glue:text}" in entry.msgstr:
                entry.msgstr = paste_glue(entry.msgstr, values, f"{po_path}: {entry.msgid[:40]!r}")
            entry.msgstr = _LIST_MARKER.sub(r"\1\\\2", entry.msgstr)
        target = out / LANGUAGE / "LC_MESSAGES" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        po.save(str(target))
    return out


#: theme options whose text the theme does not translate itself
THEME_TEXT = {"search_bar_text": "搜索本书……"}


def build_html(out: Path) -> None:
    """The Chinese site into ``out`` (built beside, then moved: nothing of an earlier build
    stays)."""
    from student import site_theme_options

    work = ROOT / "_build" / "zh-build"
    shutil.rmtree(work / "html", ignore_errors=True)
    # the Colab and repository links open the Chinese notebooks (zh/book/NAME.ipynb)
    options = (
        site_theme_options()
        | THEME_TEXT
        | {
            "path_to_docs": NOTEBOOKS.relative_to(ROOT).as_posix(),
        }
    )
    _build(
        "html",
        work / "html",
        {
            "language": LANGUAGE,
            "locale_dirs": [str(pasted_catalogs(work / "locales"))],
            "gettext_compact": False,
            "html_theme_options": options,
        },
    )
    for source in (work / "html" / "_sources").rglob("*.ipynb"):  # the download button
        chinese = NOTEBOOKS / source.relative_to(work / "html" / "_sources")
        if chinese.exists():
            shutil.copyfile(chinese, source)
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(work / "html", out)
    print(f"Chinese site built: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("update", help="extract the English messages and update the catalogs")
    sub.add_parser("check", help="fail on an untranslated, fuzzy or broken entry")
    html = sub.add_parser("html", help="build the Chinese site")
    html.add_argument("out", nargs="?", type=Path, default=ROOT / "_build" / "html" / PREFIX)
    sub.add_parser("notebooks", help="write the Chinese notebooks (zh/)")
    args = parser.parse_args(argv)
    if args.command == "update":
        written = update()
        print(f"catalogs: {len(written)} in {CATALOGS.relative_to(ROOT)}")
        print(f"Chinese notebooks: {len(write_notebooks())} in {NOTEBOOKS.relative_to(ROOT)}")
        left = problems()
        print(f"{len(left)} entries to translate or review" if left else "all translated")
    elif args.command == "check":
        left = problems()
        print("\n".join(left) or "every entry translated")
        return 1 if left else 0
    elif args.command == "notebooks":
        print(f"Chinese notebooks: {len(write_notebooks())} in {NOTEBOOKS.relative_to(ROOT)}")
    else:
        build_html(args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
