"""What the four builds of the book (the site, the Chinese site, the student editions) share
instead of redoing: the palette figures (page_weight.py) and pybtex's plugin look-ups
(bib_style.py)."""

from __future__ import annotations

import fcntl
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import bib_style  # noqa: E402
import page_weight  # noqa: E402

# ------------------------------------------------------------------------ palette figures


def _figure(path: Path, colour=(200, 30, 60)) -> Path:
    from PIL import Image

    image = Image.new("RGB", (40, 30), colour)
    image.putpixel((3, 4), (0, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return path


@pytest.fixture
def conversions(monkeypatch):
    made = []
    convert = page_weight._convert

    def counted(source, cached):
        made.append(source)
        convert(source, cached)

    monkeypatch.setattr(page_weight, "_convert", counted)
    return made


def test_a_figure_is_converted_once_for_every_build_that_shows_it(conversions, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    site, student = _figure(tmp_path / "site" / "a.png"), _figure(tmp_path / "student" / "a.png")
    assert page_weight._palette_png(site, cache) and page_weight._palette_png(student, cache)
    assert conversions == [site]
    assert site.read_bytes() == student.read_bytes() == (cache / f"{_digest(student)}").read_bytes()


def _digest(converted: Path) -> str:
    return next(p.name for p in converted.parent.parent.glob("cache/*.png"))


def test_a_figure_another_build_is_converting_is_left_for_later_or_waited_for(
    conversions, tmp_path
):
    import hashlib

    cache = tmp_path / "cache"
    cache.mkdir()
    figure = _figure(tmp_path / "site" / "a.png")
    original = figure.read_bytes()
    digest = hashlib.sha256(original).hexdigest()
    with open(cache / f"{digest}.lock", "w") as other_build:
        fcntl.flock(other_build, fcntl.LOCK_EX)
        assert page_weight._palette_png(figure, cache, wait=False) is False
        assert figure.read_bytes() == original and conversions == []
    assert page_weight._palette_png(figure, cache, wait=False) is True
    assert conversions == [figure] and figure.read_bytes() != original


def test_the_site_and_the_student_editions_share_one_figures_cache(
    conversions, monkeypatch, tmp_path
):
    from types import SimpleNamespace

    monkeypatch.setattr(page_weight, "PNG_CACHE", tmp_path / "png_cache")
    for build in ("html", "student-build/html", "zh-build/html"):
        _figure(tmp_path / build / "_images" / "a.png")
        app = SimpleNamespace(outdir=str(tmp_path / build), builder=SimpleNamespace(format="html"))
        page_weight._compress_images(app, None)
    assert len(conversions) == 1


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
