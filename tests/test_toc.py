"""tools/toc.py reads ``_toc.yml``, and nothing else does."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import toc  # noqa: E402

#: Reading the table of contents: opening _toc.yml (``ROOT / "_toc.yml"`` then read/open/
#: safe_load on the same line). Naming it elsewhere (a Sphinx setting, a message) is fine.
_READS_TOC = re.compile(r"_toc\.yml\"\)\s*\.(read_text|open)\(|safe_load\(.*_toc\.yml")


def readers(text: str) -> list[int]:
    """The lines of ``text`` that read _toc.yml themselves."""
    return [i for i, line in enumerate(text.splitlines(), 1) if _READS_TOC.search(line)]


def test_only_tools_toc_reads_the_table_of_contents():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("tools", "tests", "norms")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name not in ("toc.py", "test_toc.py")
        for line in readers(path.read_text(encoding="utf-8"))
    ]
    assert not found, "read _toc.yml through tools/toc.py:\n" + "\n".join(found)


def test_the_reader_check_can_fail():
    assert readers('    toc = (ROOT / "_toc.yml").read_text()\n') == [1]
    assert readers('x = yaml.safe_load((ROOT / "_toc.yml").read_text())\n') == [1]
    assert readers('"external_toc_path": (ROOT / "_toc.yml").as_posix(),\n') == []


def test_pages_in_order_with_sections(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        "  - caption: One\n    chapters:\n      - file: book/a\n"
        "        sections:\n          - file: book/a1\n      - file: book/b\n"
        "  - caption: Two\n    chapters:\n      - file: book/c\n"
    )
    (tmp_path / "book").mkdir()
    for name in ("intro", "a", "c"):
        (tmp_path / "book" / f"{name}.ipynb").write_text("{}")
    path = tmp_path / "_toc.yml"
    assert toc.parts(path) == [("One", ["book/a", "book/a1", "book/b"]), ("Two", ["book/c"])]
    assert toc.pages(path) == ["book/intro", "book/a", "book/a1", "book/b", "book/c"]
    assert [p.stem for p in toc.notebooks(path)] == ["intro", "a", "c"]


def test_the_book_starts_at_the_intro_and_lists_every_chapter_once():
    pages = toc.pages()
    assert pages[0] == "book/intro" and len(pages) == len(set(pages))
    assert all(p.exists() for p in toc.notebooks())
