"""The landing page's chapter list (book/intro.md), generated from the table of contents.

The list sits between two markers in book/intro.md. It has the parts of ``_toc.yml`` as
headings and every page of the table of contents under its part, in the sidebar's order;
each page's one-line description is kept from the list as it is (a page new to the
table of contents gets ``DESCRIBE ME``, which tests/test_intro.py rejects).

    .venv/bin/python tools/intro_chapters.py          # rewrite the list in book/intro.md
    .venv/bin/python tools/intro_chapters.py --check  # exit 1 when it differs
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import toc  # noqa: E402

ROOT = toc.ROOT
TOC = toc.TOC
INTRO = ROOT / "book" / "intro.md"
START = (
    "<!-- chapters: generated from _toc.yml by tools/intro_chapters.py; edit descriptions only -->"
)
END = "<!-- end of chapters -->"
MISSING = "DESCRIBE ME"
_ITEM = re.compile(r"^- \{doc\}`(?P<doc>[^`]+)`: (?P<text>.*)$")


def parts(toc_path: Path = TOC) -> list[tuple[str, list[str]]]:
    """``[(caption, [page, ...]), ...]`` of the table of contents (pages relative to book/)."""
    return [(caption, [Path(p).name for p in pages]) for caption, pages in toc.parts(toc_path)]


def descriptions(block: str) -> dict[str, str]:
    """``{page: description}`` of a list block (an item's continuation lines joined)."""
    found: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        m = _ITEM.match(line)
        if m:
            current = m["doc"]
            found[current] = m["text"].strip()
        elif current and line.startswith("  ") and line.strip():
            found[current] += " " + line.strip()
        else:
            current = None
    return found


def _wrap(text: str, width: int = 88) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


def render(toc_parts, known: dict[str, str]) -> str:
    """The list block: a bold caption per part, then one item per page."""
    out = [START, ""]
    for caption, pages in toc_parts:
        out += [f"**{caption}**", ""]
        for page in pages:
            out += _wrap(f"- {{doc}}`{page}`: {known.get(page, MISSING)}")
        out.append("")
    return "\n".join(out + [END])


def current_block(text: str) -> str:
    if START not in text or END not in text:
        raise SystemExit(f"{INTRO}: the markers of the chapter list are missing ({START!r})")
    return text[text.index(START) : text.index(END) + len(END)]


def generated(text: str, toc_path: Path = TOC) -> str:
    """``text`` (book/intro.md) with its chapter list generated anew."""
    block = current_block(text)
    return text.replace(block, render(parts(toc_path), descriptions(block)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if book/intro.md differs")
    args = parser.parse_args(argv)
    text = INTRO.read_text(encoding="utf-8")
    new = generated(text)
    if args.check:
        if new != text:
            print(
                "book/intro.md: the chapter list differs from _toc.yml; run tools/intro_chapters.py"
            )
            return 1
        return 0
    INTRO.write_text(new, encoding="utf-8")
    if MISSING in current_block(new):
        print(f"book/intro.md: write a description where it says {MISSING}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
