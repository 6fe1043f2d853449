"""norms.plots: the figures mark exactly the elements that share a statistic.

Every reduction figure is read back from its artists (each cell is a polygon
whose gid is ``cell-a-b-c`` and whose fill colour is what the reader sees) and
compared with ``describe(...).statistic_index``, folded here independently:
image-like ``(N, C, *S)`` -> ``(N, C, prod S)``, sequences ``(B, T, D)`` as is.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import norms  # noqa: E402
from norms import plots  # noqa: E402
from norms.axes import (
    describe,  # noqa: E402
    module_label,  # noqa: E402
)
from norms.lab import simulations  # noqa: E402
from norms.plots import reductions  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# (id, module factory, input shape, layout argument, folded shape of the drawing)
CASES = [
    ("bn1d-NC", lambda: norms.BatchNorm1d(6), (4, 6), "auto", (1, 4, 6)),
    ("bn1d-NCL", lambda: norms.BatchNorm1d(3), (4, 3, 5), "auto", (4, 3, 5)),
    ("bn2d", lambda: norms.BatchNorm2d(3), (2, 3, 2, 2), "auto", (2, 3, 4)),
    ("bn2d-HW1", lambda: norms.BatchNorm2d(4), (3, 4, 1, 1), "auto", (3, 4, 1)),
    ("bn3d", lambda: norms.BatchNorm3d(2), (2, 2, 2, 2, 2), "auto", (2, 2, 8)),
    ("ln-D-seq", lambda: norms.LayerNorm(8), (3, 5, 8), "auto", (3, 5, 8)),
    ("ln-TD-seq", lambda: norms.LayerNorm([5, 8]), (3, 5, 8), "auto", (3, 5, 8)),
    ("ln-D-as-image", lambda: norms.LayerNorm(8), (3, 5, 8), "image", (3, 5, 8)),
    ("ln-TD", lambda: norms.LayerNorm(6), (4, 6), "auto", (1, 4, 6)),
    ("ln-vector", lambda: norms.LayerNorm(6), (6,), "auto", (1, 1, 6)),
    ("ln-W", lambda: norms.LayerNorm(4), (2, 3, 4, 4), "auto", (2, 3, 16)),
    ("ln-HW", lambda: norms.LayerNorm([4, 4]), (2, 3, 4, 4), "auto", (2, 3, 16)),
    ("ln-CHW", lambda: norms.LayerNorm([3, 4, 4]), (2, 3, 4, 4), "auto", (2, 3, 16)),
    ("rms-D", lambda: norms.RMSNorm(8), (2, 4, 8), "auto", (2, 4, 8)),
    ("rms-CHW", lambda: norms.RMSNorm([3, 2, 2]), (2, 3, 2, 2), "auto", (2, 3, 4)),
    ("gn1", lambda: norms.GroupNorm(1, 6), (2, 6, 2, 2), "auto", (2, 6, 4)),
    ("gn2", lambda: norms.GroupNorm(2, 6), (2, 6, 2, 2), "auto", (2, 6, 4)),
    ("gn3", lambda: norms.GroupNorm(3, 6), (2, 6, 2, 2), "auto", (2, 6, 4)),
    ("gn6", lambda: norms.GroupNorm(6, 6), (2, 6, 2, 2), "auto", (2, 6, 4)),
    ("gn-NCL", lambda: norms.GroupNorm(2, 4), (3, 4, 5), "auto", (3, 4, 5)),
    ("gn-NC", lambda: norms.GroupNorm(2, 4), (3, 4), "auto", (1, 3, 4)),
    ("in1d", lambda: norms.InstanceNorm1d(3), (2, 3, 5), "auto", (2, 3, 5)),
    ("in1d-unbatched", lambda: norms.InstanceNorm1d(3), (3, 5), "auto", (1, 3, 5)),
    ("in2d", lambda: norms.InstanceNorm2d(3), (2, 3, 2, 2), "auto", (2, 3, 4)),
    ("in2d-unbatched", lambda: norms.InstanceNorm2d(3), (3, 4, 4), "auto", (1, 3, 16)),
    ("in2d-affine", lambda: norms.InstanceNorm2d(3, affine=True), (2, 3, 2, 2), "auto", (2, 3, 4)),
    ("in3d", lambda: norms.InstanceNorm3d(2), (2, 2, 2, 2, 2), "auto", (2, 2, 8)),
    ("in3d-unbatched", lambda: norms.InstanceNorm3d(2), (2, 2, 2, 3), "auto", (1, 2, 12)),
    ("bn1d-as-sequence", lambda: norms.BatchNorm1d(3), (2, 3, 4), "sequence", (2, 3, 4)),
    ("torch-bn2d", lambda: torch.nn.BatchNorm2d(3), (2, 3, 2, 2), "auto", (2, 3, 4)),
    ("torch-gn", lambda: torch.nn.GroupNorm(2, 4), (2, 4, 3), "auto", (2, 4, 3)),
    ("torch-ln", lambda: torch.nn.LayerNorm(5), (2, 3, 5), "auto", (2, 3, 5)),
]


def expected_cells(index: torch.Tensor, folded: tuple[int, int, int], sid: int) -> set:
    grid = index.reshape(folded).numpy()
    return {tuple(int(i) for i in c) for c in np.argwhere(grid == sid)}


def statistic_ids_to_check(n: int) -> list[int]:
    return sorted({0, n // 2, n - 1})


@pytest.mark.parametrize(
    "make, shape, layout, folded", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_highlighted_cells_are_exactly_one_statistic(make, shape, layout, folded):
    module = make()
    reduction = describe(module, shape)
    for sid in statistic_ids_to_check(reduction.num_statistics):
        fig = reductions.plot_reduction(module, shape, highlight=sid, layout=layout)
        assert isinstance(fig, Figure)
        cells = reductions.drawn_cells(fig)
        assert len(cells) == math.prod(shape)  # every element has its cell
        assert {c for c in cells} == {tuple(int(i) for i in c) for c in np.ndindex(*folded)}
        assert reductions.highlighted_cells(fig) == expected_cells(
            reduction.statistic_index, folded, sid
        )
        plt.close(fig)


@pytest.mark.parametrize(
    "make, shape, layout, folded", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_colours_follow_statistics(make, shape, layout, folded):
    """Cells of one statistic share a colour; neighbouring statistics never do."""
    module = make()
    grid = describe(module, shape).statistic_index.reshape(folded).numpy()
    cells = reductions.drawn_cells(
        reductions.plot_reduction(module, shape, highlight=None, layout=layout)
    )
    highlight = to_rgba(plots.HIGHLIGHT_COLOR)
    colour_of = {}
    for coords, rgba in cells.items():
        assert not np.allclose(rgba, highlight)  # highlight=None highlights nothing
        colour_of.setdefault(int(grid[coords]), set()).add(tuple(np.round(rgba, 6)))
    assert all(len(colours) == 1 for colours in colour_of.values())
    for axis in range(3):
        for coords in np.ndindex(*folded):
            nxt = list(coords)
            nxt[axis] += 1
            if nxt[axis] < folded[axis] and grid[coords] != grid[tuple(nxt)]:
                assert colour_of[int(grid[coords])] != colour_of[int(grid[tuple(nxt)])]


@pytest.mark.parametrize(
    "make, shape", [(c[1], c[2]) for c in CASES[::3]], ids=[c[0] for c in CASES[::3]]
)
def test_title_states_the_numbers_from_describe(make, shape):
    module = make()
    reduction = describe(module, shape)
    title = reductions.plot_reduction(module, shape).axes[0].get_title()
    assert type(module).__name__ in title
    assert str(tuple(shape)) in title
    assert str(tuple(reduction.reduced_dims)) in title
    assert f"{reduction.num_statistics} mean" in title or (
        not reduction.has_mean and f"{reduction.num_statistics} RMS" in title
    )
    if reduction.param_shape is None:
        assert "no γ, β" in title
    else:
        assert str(tuple(reduction.param_shape)) in title


def test_rmsnorm_title_says_rms_not_means():
    title = reductions.plot_reduction(norms.RMSNorm(8), (2, 4, 8)).axes[0].get_title()
    assert "8 RMS values" in title and "mean" not in title and "γ: (8,)" in title


def test_block_has_visible_top_and_side_faces_for_surface_cells():
    fig = reductions.plot_reduction(norms.GroupNorm(2, 6), (4, 6, 2, 2))
    gids = [p.get_gid() for p in fig.axes[0].patches]
    tops = [g for g in gids if g.endswith("-top")]
    sides = [g for g in gids if g.endswith("-side")]
    assert len(tops) == 4 * 6 and len(sides) == 4 * 4
    assert all(g.split("-")[3] == "0" for g in tops)  # the top row s = 0
    assert all(g.split("-")[2] == "5" for g in sides)  # the last channel


def test_permute_shows_batchnorm_over_the_features_of_a_sequence():
    # BatchNorm1d(D) on x.transpose(1, 2): feature d is shared by all b and t.
    shape = (2, 3, 4)
    fig = reductions.plot_reduction(
        norms.BatchNorm1d(4), shape, layout="sequence", permute=(0, 2, 1)
    )
    assert reductions.highlighted_cells(fig) == {(b, t, 0) for b in range(2) for t in range(3)}
    title = fig.axes[0].get_title()
    assert "x.transpose(1, 2)" in title and "(0, 1)" in title and "4 means" in title


def test_labels_name_the_axes():
    block = reductions.plot_reduction(norms.BatchNorm2d(3), (2, 3, 2, 2)).axes[0]
    texts = {t.get_text() for t in block.texts}
    assert {"C = 3", "H·W = 4", "N = 2"} <= texts
    panels = reductions.plot_reduction(norms.LayerNorm(8), (3, 5, 8)).axes[0]
    texts = {t.get_text() for t in panels.texts}
    assert {"D = 8", "T = 5", "b = 0", "b = 2"} <= texts
    volume = reductions.plot_reduction(norms.InstanceNorm3d(2), (2, 2, 2, 2, 3)).axes[0]
    assert "D·H·W = 12" in {t.get_text() for t in volume.texts}


BAD_ARGUMENTS = [
    # (id, module, shape, keyword arguments, message)
    ("highlight-high", norms.BatchNorm2d(3), (2, 3, 2, 2), {"highlight": 3}, "not a statistic"),
    ("highlight-negative", norms.BatchNorm2d(3), (2, 3, 2, 2), {"highlight": -1}, "not a stat"),
    ("huge", norms.BatchNorm2d(64), (64, 64, 32, 32), {}, "too many cells"),
    ("too-many-panels", norms.LayerNorm(4), (40, 2, 4), {}, "too many cells"),
    ("rank", norms.BatchNorm2d(3), (2, 3, 4), {}, "expected 4D input"),
    ("groups", norms.GroupNorm(2, 6), (2, 5, 2), {}, "divisible"),
    ("sequence-rank", norms.LayerNorm(2), (2, 3, 2, 2), {"layout": "sequence"}, "'sequence'"),
    ("layout", norms.LayerNorm(2), (3, 2), {"layout": "diagonal"}, "layout must be"),
    ("permute", norms.LayerNorm(2), (3, 2), {"permute": (0, 0)}, "permutation"),
]


@pytest.mark.parametrize(
    "module, shape, kwargs, message",
    [c[1:] for c in BAD_ARGUMENTS],
    ids=[c[0] for c in BAD_ARGUMENTS],
)
def test_bad_arguments_raise_clear_value_errors(module, shape, kwargs, message):
    with pytest.raises(ValueError, match=message):
        reductions.plot_reduction(module, shape, **kwargs)
    assert plt.get_fignums() == []  # nothing half-drawn is left behind


def test_draws_on_given_axes_and_leaves_global_style_alone():
    before = dict(matplotlib.rcParams)
    fig, ax = plt.subplots()
    assert reductions.plot_reduction(norms.GroupNorm(2, 4), (2, 4, 3), ax=ax) is fig
    assert reductions.drawn_cells(ax)
    assert dict(matplotlib.rcParams) == before


@pytest.mark.parametrize(
    "shape, groups", [((4, 6, 2, 2), None), ((2, 4, 3), 4), ((2, 2, 2, 2, 2), 1)]
)
def test_comparison_panels_each_highlight_their_statistic(shape, groups):
    fig = plots.plot_comparison(shape, groups=groups)
    modules = plots.comparison_modules(shape, groups)
    panels = [ax for ax in fig.axes if ax.patches]
    assert [type(m).__name__ for m in modules] == [
        f"BatchNorm{len(shape) - 2}d",
        "LayerNorm",
        f"InstanceNorm{len(shape) - 2}d",
        "GroupNorm",
        "RMSNorm",
    ]
    assert len(panels) == 5
    folded = (shape[0], shape[1], math.prod(shape[2:]))
    for module, ax in zip(modules, panels, strict=True):
        reduction = describe(module, shape)
        assert reductions.highlighted_cells(ax) == expected_cells(
            reduction.statistic_index, folded, 0
        )
        title = ax.get_title()
        assert str(reduction.num_statistics) in title and str(reduction.reduced_dims) in title
    with pytest.raises(ValueError, match="not exactly one"):
        reductions.highlighted_cells(fig)


def test_comparison_rejects_non_image_shapes():
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        plots.plot_comparison((4, 6))


def test_sequence_comparison():
    shape = (2, 3, 4)
    fig = plots.plot_sequence_comparison(shape)
    bn, ln, rms = [ax for ax in fig.axes if ax.patches]
    everywhere = {(b, t) for b in range(2) for t in range(3)}
    assert reductions.highlighted_cells(bn) == {(b, t, 0) for b, t in everywhere}
    assert reductions.highlighted_cells(ln) == {(0, 0, d) for d in range(4)}
    assert reductions.highlighted_cells(rms) == {(0, 0, d) for d in range(4)}
    assert "BatchNorm1d(4) on x.transpose(1, 2)" in bn.get_title()
    assert "6 means" in ln.get_title() and "6 RMS values" in rms.get_title()


def test_module_label():
    assert module_label(norms.BatchNorm2d(6)) == "BatchNorm2d(6)"
    assert module_label(norms.GroupNorm(2, 6)) == "GroupNorm(2, 6)"
    assert module_label(norms.LayerNorm([6, 4])) == "LayerNorm([6, 4])"
    assert module_label(norms.RMSNorm(8)) == "RMSNorm(8)"


# --------------------------------------------------------------------------
# Running statistics
# --------------------------------------------------------------------------


def test_running_stats_start_at_zero_and_one_and_approach_the_truth():
    trace = simulations.simulate_running_stats(momentum=0.1, batch_size=64, steps=150)
    assert trace.running_mean.shape == trace.running_var.shape == (151, 2)
    np.testing.assert_array_equal(trace.running_mean[0], [0.0, 0.0])
    np.testing.assert_array_equal(trace.running_var[0], [1.0, 1.0])
    np.testing.assert_allclose(trace.running_mean[-1], trace.true_mean, atol=0.3)
    np.testing.assert_allclose(trace.running_var[-1], trace.true_var, rtol=0.35)
    assert trace.max_gap < 0.5


def test_small_momentum_is_slow_and_cumulative_average_converges():
    slow = simulations.simulate_running_stats(momentum=0.01, batch_size=32, steps=10)
    assert abs(slow.running_mean[-1, 0] - slow.true_mean[0]) > 1.5  # 1 - 0.99**10 ~ 10% of the way
    assert slow.max_gap > 1.0  # eval mode still uses badly wrong statistics
    cumulative = simulations.simulate_running_stats(momentum=None, batch_size=32, steps=100)
    assert cumulative.momentum is None
    np.testing.assert_allclose(cumulative.running_mean[-1], cumulative.true_mean, atol=0.1)
    # with momentum=None the first step already replaces the initial value entirely
    assert abs(cumulative.running_mean[1, 0] - cumulative.true_mean[0]) < 1.0


def test_running_stats_train_and_eval_outputs_come_from_the_same_fresh_batch():
    trace = simulations.simulate_running_stats(momentum=0.1, batch_size=8, steps=5)
    # train mode normalizes with the batch's own statistics: mean 0 per feature
    np.testing.assert_allclose(trace.train_output.mean(axis=0), 0.0, atol=1e-5)
    assert trace.max_gap == pytest.approx(np.abs(trace.eval_output - trace.train_output).max())


def test_running_stats_batch_of_one_raises_batchnorms_error():
    with pytest.raises(ValueError, match="more than 1 value"):
        simulations.simulate_running_stats(batch_size=1, steps=2)


def test_plot_running_stats():
    fig = plots.plot_running_stats(momentum=None, batch_size=8, steps=20)
    assert len(fig.axes) == 3
    assert "momentum=None" in fig.get_suptitle()
    assert "max |eval − train|" in fig.axes[2].get_title()


# --------------------------------------------------------------------------
# Batch size
# --------------------------------------------------------------------------


def test_batchnorm_output_is_noisy_at_small_batches_and_the_others_are_not():
    noise = simulations.simulate_batch_noise(batch_sizes=(2, 8, 64), trials=60)
    bn = noise.spread("BatchNorm2d")
    assert bn[0] > bn[1] > bn[2] > 0
    assert noise.spread("LayerNorm").max() < 1e-5
    assert noise.spread("GroupNorm").max() < 1e-5
    assert noise.values["BatchNorm2d"].shape == (3, 60)


def test_batch_noise_rejects_indivisible_groups():
    with pytest.raises(ValueError, match="divisible"):
        simulations.simulate_batch_noise(batch_sizes=(2,), trials=5, channels=4, groups=3)


def test_plot_batch_size():
    fig = plots.plot_batch_size(batch_size=5, trials=30)
    spread_ax, strip_ax = fig.axes
    assert 5 in [int(t) for t in spread_ax.get_xticks()]
    assert "batch size 5" in strip_ax.get_title()
    assert len(strip_ax.collections) == 3
    noise = simulations.simulate_batch_noise(batch_sizes=(2, 4), trials=10)
    with pytest.raises(ValueError, match="not 8"):
        plots.plot_batch_size(batch_size=8, noise=noise)


def test_figures_draw_on_given_axes():
    fig = Figure()
    assert plots.plot_running_stats(steps=5, axes=fig.subplots(1, 3)) is fig
    fig = Figure()
    assert plots.plot_batch_size(trials=10, axes=fig.subplots(1, 2)) is fig
    with pytest.raises(ValueError, match="need 3 axes"):
        plots.plot_running_stats(axes=[Figure().add_subplot()])


def test_figures_display_as_png_in_a_kernel_that_never_imported_pyplot():
    """A fresh kernel has no PNG formatter for a Figure until pyplot is imported; the
    book's figures must show as pictures anyway, not as ``<Figure size ...>``."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import norms, norms.plots\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "shell = InteractiveShell.instance()\n"
        "fig = norms.plots.plot_reduction(norms.GroupNorm(2, 6), (2, 6, 3, 4))\n"
        "data, _ = shell.display_formatter.format(fig)\n"
        "assert data['image/png'][:4] == b'\\x89PNG', sorted(data)\n"
        "fig = norms.plots.plot_comparison((2, 6, 3, 4))\n"
        "data, _ = shell.display_formatter.format(fig)\n"
        "assert data['image/png'][:4] == b'\\x89PNG', sorted(data)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "agg"},
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize(
    "module, shape",
    [
        (norms.RMSNorm(6), (2, 4, 6)),
        (norms.LayerNorm(16), (5, 6, 16)),
        (norms.GroupNorm(2, 12), (4, 12, 3, 1)),
        (norms.BatchNorm2d(4), (1, 4, 1, 1)),
    ],
    ids=["rms-2-panels", "ln-5-panels", "gn-wide-block", "bn-one-cell"],
)
def test_nothing_is_cut_off_at_the_figure_edges(module, shape):
    """Wide drawings used to push the title a few points above the figure."""
    import io

    import matplotlib.image as mpimg

    fig = reductions.plot_reduction(module, shape)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    buffer.seek(0)
    dark = mpimg.imread(buffer)[..., :3].mean(-1) < 0.6
    edges = {"top": dark[0], "bottom": dark[-1], "left": dark[:, 0], "right": dark[:, -1]}
    assert [name for name, row in edges.items() if row.any()] == []


def test_a_permuted_sequence_is_drawn_as_a_sequence():
    fig = reductions.plot_reduction(norms.BatchNorm1d(6), (2, 4, 6), permute=(0, 2, 1))
    title = fig.axes[0].get_title()
    assert "reduces B, T (0, 1)" in title, title
