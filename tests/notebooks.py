"""Helpers shared by the notebook tests: which notebooks the book has, and its setup cell."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"

sys.path.insert(0, str(ROOT / "tools"))
import toc  # noqa: E402


def repository_url() -> str:
    """The project's git repository, written once in _config.yml."""
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def notebooks() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def toc_files() -> set[str]:
    """Every file named in _toc.yml, relative to the root, without its suffix."""
    return set(toc.pages())


#: The pip requirement the setup cell installs on Colab; {url} is the repository URL.
SETUP_SPEC = "norms[widgets,quiz] @ git+{url}"
