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
    return sorted(str(p.relative_to(ROOT)) for p in CATALOGS.rglob("*.po"))


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


def chinese_notebook(path: Path) -> dict:
    """The Chinese notebook of ``path`` (a notebook of the book): markdown translated,
    code cells, outputs and metadata as they are, images found from ``zh/book/``."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    page = path.relative_to(ROOT).with_suffix("").as_posix()
    table = translations(page)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = translate_markdown(cell.source, table)
            cell.source = re.sub(r"\]\((?!https?:|#)(images/)", r"](../../book/\1", source)
    nb.metadata["language_info"] = nb.metadata.get("language_info", {})
    return nb


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


def build_html(out: Path) -> None:
    """The Chinese site into ``out`` (built beside, then moved: nothing of an earlier build
    stays)."""
    from student import site_theme_options

    work = ROOT / "_build" / "zh-build"
    shutil.rmtree(work / "html", ignore_errors=True)
    # the Colab and repository links open the Chinese notebooks (zh/book/NAME.ipynb)
    options = site_theme_options() | {
        "path_to_docs": NOTEBOOKS.relative_to(ROOT).as_posix(),
        "search_bar_text": "搜索本书……",  # sphinx-book-theme's own text has no translation
    }
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
