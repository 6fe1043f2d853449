"""The book's figures (norms.plots.style.BookFigure) as the site shows them: stored at twice
the resolution they are shown at, every text at least 9 CSS pixels where shown in the
1280-pixel layout, a description for the alternative text, and the same bytes every time."""

from __future__ import annotations

import base64
import functools
import io

import nbformat
import pytest
import torch
from PIL import Image

import norms
from norms.plots import dyt, style


def _ln_io_figure():
    torch.manual_seed(0)
    x = torch.randn(5, 400)
    pairs = [(x[i], torch.tanh(x[i])) for i in range(5)]
    return dyt.plot_ln_io(pairs, [(1.0, 1.0)] * 5, [f"layer {i}" for i in range(5)])


def _wide_small_print():
    fig = style.BookFigure(figsize=(12, 2.5), layout="constrained")
    axes = fig.subplots(1, 4)
    for i, ax in enumerate(axes):
        ax.plot([0, 1], [0, i], label=f"run {i}")
        ax.tick_params(labelsize=7)
        ax.set_title(f"panel {i}", fontsize=8)
    axes[0].legend(fontsize=6)
    return fig


FIGURES = {
    "reduction": lambda: norms.plots.plot_reduction(norms.LayerNorm(8), (4, 6, 8)),
    "comparison": lambda: norms.plots.plot_comparison((4, 6, 3, 3)),
    "running-stats": lambda: norms.plots.plot_running_stats(steps=20),
    "five-panel-row": _ln_io_figure,
    "wide-small-print": _wide_small_print,
}


def _png(fig) -> tuple[Image.Image, dict]:
    data, metadata = fig._repr_png_()
    return Image.open(io.BytesIO(data)), metadata


@functools.cache
def _shown(name: str) -> tuple:
    """(figure, PNG image, metadata) of ``FIGURES[name]``, made and stored as the site shows it,
    once for the two tests below (they only read them)."""
    fig = FIGURES[name]()
    return fig, *_png(fig)


@pytest.mark.parametrize("name", FIGURES)
def test_every_text_is_at_least_9_css_pixels_where_the_site_shows_it(name):
    fig, _, _ = _shown(name)
    assert style.smallest_text_px(fig) >= style.MIN_TEXT_PX - 1e-9


def test_a_wide_figure_with_small_print_is_too_small_until_made_legible():
    """The check can fail: a 12-inch row of 7-point ticks is shown at 60 %, 5.8 px."""
    fig = _wide_small_print()
    assert style.smallest_text_px(fig) < 7
    style.make_legible(fig)
    assert style.smallest_text_px(fig) >= style.MIN_TEXT_PX - 1e-9


@pytest.mark.parametrize("name", FIGURES)
def test_a_figure_is_stored_at_twice_the_width_it_is_shown_at(name):
    fig, image, metadata = _shown(name)
    assert image.width == style.SCALE * metadata["width"]
    assert metadata["width"] == round(fig.get_figwidth() * style.DPI)


def test_a_row_too_wide_for_the_column_wraps_onto_rows():
    """The five LayerNorm panels of "Transformers without normalization" were one 13-inch
    row, shown 56 % of its size (about 80 pixels tall on a phone)."""
    fig = _ln_io_figure()
    assert fig.get_figwidth() <= style.MAX_ROW_INCHES
    rows = {round(ax.get_position().y0, 3) for ax in fig.axes if ax.axison}
    assert len(rows) == 2


def test_the_png_describes_the_figure_and_is_the_same_every_time():
    fig = norms.plots.plot_comparison((4, 6, 3, 3))
    first, _ = fig._repr_png_()
    again, _ = norms.plots.plot_comparison((4, 6, 3, 3))._repr_png_()
    assert first == again
    description = Image.open(io.BytesIO(first)).info["Description"]
    assert description.startswith("Figure with 5 panels: The same input (4, 6, 3, 3)")
    assert "GroupNorm(2, 6)" in description


def test_pyplot_figures_in_ipython_are_shown_as_book_figures():
    """A figure drawn with pyplot in a notebook (why-normalize, rmsnorm) gets the book's PNG,
    also in the cell that starts pyplot's inline backend (which registers its own printer for
    every Figure then)."""
    import nbclient

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import norms.plots.style"),
            nbformat.v4.new_code_cell(
                "import matplotlib.pyplot as plt\n"
                "fig, ax = plt.subplots(figsize=(8, 3))\n"
                "ax.plot([0, 1], label='a line')\n"
                "ax.legend(fontsize=6)\n"
                "plt.close(fig)\n"
                "fig"
            ),
            nbformat.v4.new_code_cell("fig, ax = plt.subplots(figsize=(5, 2))"),
        ]
    )
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    outputs = [o for cell in nb.cells[1:] for o in cell.outputs if "image/png" in o.get("data", {})]
    assert len(outputs) == 2
    for output, width in zip(outputs, (800, 500), strict=True):
        image = Image.open(io.BytesIO(base64.b64decode(output["data"]["image/png"])))
        assert output["metadata"]["image/png"]["width"] == width
        assert image.width == style.SCALE * width
        assert image.info["Description"].startswith("Figure")
