"""The landing page lists every page of the table of contents, under its part, in the
sidebar's order (tools/intro_chapters.py generates the list from _toc.yml)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import intro_chapters  # noqa: E402


def _listed(text: str) -> list[str]:
    return re.findall(r"^- \{doc\}`([^`]+)`", intro_chapters.current_block(text), re.M)


def test_the_landing_page_lists_the_table_of_contents_in_its_order():
    text = intro_chapters.INTRO.read_text()
    toc = [page for _, pages in intro_chapters.parts() for page in pages]
    assert _listed(text) == toc
    assert text == intro_chapters.generated(text), "run tools/intro_chapters.py"
    assert intro_chapters.MISSING not in text, "a chapter of the list has no description"


def test_a_new_chapter_in_the_table_of_contents_shows_up_undescribed(tmp_path):
    toc = intro_chapters.TOC.read_text().replace(
        "      - file: book/speed\n", "      - file: book/speed\n      - file: book/new-one\n"
    )
    (tmp_path / "_toc.yml").write_text(toc)
    text = intro_chapters.INTRO.read_text()
    new = intro_chapters.generated(text, tmp_path / "_toc.yml")
    assert new != text
    assert f"- {{doc}}`new-one`: {intro_chapters.MISSING}" in new
    assert _listed(new).index("new-one") == _listed(new).index("speed") + 1


def test_a_part_caption_heads_its_chapters():
    block = intro_chapters.current_block(intro_chapters.INTRO.read_text())
    for caption, pages in intro_chapters.parts():
        assert block.index(f"**{caption}**") < block.index(f"{{doc}}`{pages[0]}`")
