"""The book's table of contents, ``_toc.yml``, read in one place.

Every tool and test that needs the book's pages in order asks here: the slides, the
students' copy, the Chinese edition, the stored-output checks, the intro's chapter list
and the tests' notebook lists.

Usage: ``python tools/toc.py`` prints the pages in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TOC = ROOT / "_toc.yml"


def read(path: Path = TOC) -> dict:
    """``_toc.yml`` as a dict."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _files(entries: Iterable[dict]) -> Iterator[str]:
    for entry in entries:
        if "file" in entry:
            yield entry["file"]
        yield from _files(entry.get("sections", []))


def parts(path: Path = TOC) -> list[tuple[str, list[str]]]:
    """``[(caption, [page, ...]), ...]``: each part of the book and its pages, in order (pages
    as ``_toc.yml`` names them: relative to the root, without a suffix)."""
    return [
        (part.get("caption", ""), list(_files(part.get("chapters", []))))
        for part in read(path).get("parts", [])
    ]


def pages(path: Path = TOC) -> list[str]:
    """Every page of the book in its order, the root (``book/intro``) first."""
    return [read(path)["root"]] + [page for _, part in parts(path) for page in part]


def notebooks(path: Path = TOC) -> list[Path]:
    """The notebooks among :func:`pages`, in order (the Markdown pages left out)."""
    root = path.parent
    return [root / f"{p}.ipynb" for p in pages(path) if (root / f"{p}.ipynb").exists()]


if __name__ == "__main__":
    print("\n".join(pages()))
