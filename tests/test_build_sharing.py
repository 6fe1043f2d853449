"""What the four builds of the book (the site, the Chinese site, the student editions) do once
instead of again and again: pybtex's plugin look-ups (bib_style.py)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import bib_style  # noqa: E402

# ------------------------------------------------------------------------- pybtex plugins


@pytest.mark.parametrize(
    ("group", "name"),
    [
        ("pybtex.style.formatting", "plain"),
        ("pybtex.style.labels", "alpha"),
        ("pybtex.style.names", "lastfirst"),
        ("pybtex.style.sorting", "author_year_title"),
        ("pybtex.backends", "latex"),
        ("pybtex.database.input", "bibtex"),
        ("pybtex.style.formatting.aliases", "plain"),
        ("pybtex.database.input.suffixes", ".bib"),
    ],
)
def test_pybtex_finds_the_same_entry_points_from_one_scan(group, name):
    assert list(bib_style.entry_points(group=group, name=name)) == list(
        metadata.entry_points(group=group, name=name)
    )


def test_pybtex_looks_its_plugins_up_in_that_one_scan(monkeypatch):
    import pybtex.plugin

    class App:
        pass

    monkeypatch.setattr(pybtex.plugin, "entry_points", pybtex.plugin.entry_points)
    bib_style.setup(App())
    assert pybtex.plugin.entry_points is bib_style.entry_points
    assert pybtex.plugin.find_plugin("pybtex.style.names", "plain").__name__ == "NameStyle"
