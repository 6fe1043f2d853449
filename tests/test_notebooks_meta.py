"""What every notebook of the book must be: listed in the table of contents, committed
executed in order, opened by the one hidden setup cell that installs `norms` from the
repository in _config.yml, and free of stored widget state and stray errors."""

from __future__ import annotations

import sys

import pytest

from .notebooks import BOOK, ROOT, SETUP_SPEC, notebooks, read, repository_url, toc_files

sys.path.insert(0, str(ROOT / "tools"))
import stored_outputs  # noqa: E402

NOTEBOOKS = notebooks()
IDS = [p.relative_to(BOOK).as_posix() for p in NOTEBOOKS]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def test_every_page_is_in_the_toc_and_every_toc_entry_exists():
    pages = {
        p.relative_to(ROOT).with_suffix("").as_posix()
        for p in BOOK.rglob("*")
        if p.suffix in (".ipynb", ".md")
    }
    pages = {p for p in pages if ".ipynb_checkpoints" not in p}
    assert pages == toc_files()


def test_the_book_has_notebooks():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_setup_cell_installs_norms_from_the_configured_repository(path):
    first = code_cells(read(path))[0]
    assert "remove-cell" in first.metadata.get("tags", []), (
        "the setup cell must be hidden on the website"
    )
    assert SETUP_SPEC.format(url=repository_url()) in first.source, (
        f"{path.name}: the setup cell must install {SETUP_SPEC.format(url=repository_url())!r} "
        "(the URL in _config.yml)"
    )
    assert 'find_spec("norms") is None' in first.source, "install only when norms is missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_executed_in_order_without_stray_errors(path):
    """What make book checks before it shows the stored outputs (tools/stored_outputs.py)."""
    assert stored_outputs.problems(read(path), path.name) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_widget_state_and_no_dead_controls(path):
    nb = read(path)
    assert "widgets" not in nb.metadata, "widget state is stored: it changes on every run"
    for cell in code_cells(nb):
        tags = cell.metadata.get("tags", [])
        shows_widget = any(
            "application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs
        )
        works_on_site = any(
            'class="norms-explorer"' in o.get("data", {}).get("text/html", "") for o in cell.outputs
        )
        if shows_widget and not works_on_site:
            assert "remove-output" in tags, (
                f"{path.name}: a widget would show controls that do nothing on the website: "
                "give it a website version (norms.explore.web) or tag its cell remove-output"
            )
