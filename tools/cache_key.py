"""Wipe the execution cache when anything a notebook's outputs depend on changes.

Jupyter Book's cache is keyed on each notebook's code cells only. A change to
``norms/`` (or to a pinned package) changes figures and numbers without changing
any notebook, and the cached outputs would then be stale on the site. This script
hashes those inputs and removes the cache when the hash differs from the one
stored beside it, so the next build re-executes every notebook.

Usage: ``python tools/cache_key.py [ROOT]`` (run by ``make book``).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

#: Files (globs relative to the repo root) whose content the notebook outputs depend on.
INPUTS = ("norms/**/*.py", "norms/**/*.js", "requirements.txt", "pyproject.toml")
CACHE = Path("_build/.jupyter_cache")
KEY = Path("_build/.jupyter_cache.key")


def inputs_key(root: Path) -> str:
    """Return a hash of every input file's path and content."""
    digest = hashlib.sha256()
    files = sorted({p for pattern in INPUTS for p in root.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def refresh(root: Path) -> bool:
    """Remove the cache if its key is missing or stale; return True if it was removed."""
    key_file, cache = root / KEY, root / CACHE
    key = inputs_key(root)
    stale = not key_file.exists() or key_file.read_text().strip() != key
    if stale:
        shutil.rmtree(cache, ignore_errors=True)
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(key + "\n")
    return stale


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    if refresh(root):
        print("make: norms/ or the pinned packages changed: every notebook will be re-executed")
