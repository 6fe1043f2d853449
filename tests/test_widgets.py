"""norms.explore.widgets: explorers construct, redraw on every control, and show errors, never
raise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from norms.explore import explorers  # noqa: E402
from norms.explore.state import parse_shape  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def png(explorer) -> str:
    """The figure currently shown (base64 PNG); fails if none is shown."""
    (output,) = explorer.output.outputs
    return output["data"]["image/png"]


def assert_ok(explorer) -> None:
    assert explorer.error.value == ""
    assert explorer.info.value != ""
    assert png(explorer)


def assert_error(explorer, fragment: str) -> None:
    assert fragment in explorer.error.value
    assert "color:" in explorer.error.value  # shown in red
    assert explorer.output.outputs == ()  # no stale figure next to the message
    assert explorer.info.value == ""


def change(explorer, name: str, value) -> tuple[str, str]:
    """Set one control; return (info, png) before the change, asserting it redrew."""
    before = explorer.info.value, png(explorer)
    explorer.controls[name].value = value
    assert_ok(explorer)
    assert (explorer.info.value, png(explorer)) != before, f"{name} -> {value!r} changed nothing"
    return before


@pytest.fixture(autouse=True)
def _no_pyplot_figures():
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before  # explorers never register figures with pyplot


def test_importing_widgets_displays_nothing():
    code = "import norms.explore.widgets, norms.plots"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


# --------------------------------------------------------------------------
# reduction_explorer
# --------------------------------------------------------------------------


def test_reduction_explorer_initial_state():
    explorer = explorers.reduction_explorer()
    assert_ok(explorer)
    assert set(explorer.controls) == {"norm", "shape", "layout", "groups", "last_dims", "highlight"}
    info = explorer.info.value
    # GroupNorm(2, 6) on (4, 6, 2, 2): 4 x 2 statistics of 3 x 2 x 2 elements
    assert "<b>8</b> means" in info and "<b>12</b> elements" in info
    assert "<b>(1, 2, 3)</b>" in info and "<b>(6,)</b>" in info
    assert explorer.controls["highlight"].max == 7
    assert isinstance(explorer, ipywidgets.VBox)  # displayed as a cell's value
    assert explorer.children[-1] is explorer.output


def test_reduction_explorer_every_control_redraws():
    explorer = explorers.reduction_explorer()
    change(explorer, "groups", 3)
    assert "<b>12</b> means" in explorer.info.value
    change(explorer, "highlight", 5)
    change(explorer, "shape", "2, 6, 2, 2")
    assert "<b>6</b> means" in explorer.info.value
    change(explorer, "norm", "BatchNorm2d")
    assert "<b>6</b> means" in explorer.info.value and "<b>(0, 2, 3)</b>" in explorer.info.value
    assert explorer.controls["groups"].disabled and explorer.controls["last_dims"].disabled
    change(explorer, "norm", "LayerNorm")
    assert not explorer.controls["last_dims"].disabled
    assert "<b>2</b> means" in explorer.info.value  # last_dims = 3: one per sample
    change(explorer, "last_dims", 1)
    assert "<b>24</b> means" in explorer.info.value and "<b>(3,)</b>" in explorer.info.value
    explorer.controls["layout"].value = "sequence"  # (2, 6, 2, 2) is 4-D: not a sequence
    assert_error(explorer, "layout='sequence'")


def test_reduction_explorer_layout_and_rms():
    explorer = explorers.reduction_explorer(norm="RMSNorm", input_shape=(2, 3, 4), last_dims=1)
    assert "<b>6</b> RMS values" in explorer.info.value
    change(explorer, "layout", "image")
    change(explorer, "norm", "InstanceNorm1d")
    assert "γ/β shape <b>none</b>" in explorer.info.value


def test_reduction_explorer_highlight_is_clamped_to_the_statistics():
    explorer = explorers.reduction_explorer(norm="InstanceNorm2d", input_shape=(2, 3, 2, 2))
    explorer.controls["highlight"].value = 5
    explorer.controls["norm"].value = "BatchNorm2d"  # 3 statistics
    assert_ok(explorer)
    assert explorer.controls["highlight"].max == 2
    assert explorer.controls["highlight"].value == 2


@pytest.mark.parametrize(
    "settings, fragment",
    [
        ({"groups": 4}, "divisible"),
        ({"norm": "BatchNorm2d", "shape": "2, 6, 4"}, "expected 4D input (got 3D input)"),
        ({"norm": "InstanceNorm2d", "shape": "6, 4"}, "expected 3D or 4D input"),
        ({"norm": "LayerNorm", "last_dims": 3, "shape": "6, 4"}, "at least 3 dims"),
        ({"shape": "four, six"}, "could not read a shape"),
        ({"shape": ""}, "type a shape"),
        ({"shape": "64, 64, 32, 32"}, "too many cells"),
    ],
    ids=["groups", "rank", "instance-rank", "last-dims", "text", "empty", "huge"],
)
def test_reduction_explorer_shows_errors_and_recovers(settings, fragment):
    explorer = explorers.reduction_explorer()
    for name, value in settings.items():
        explorer.controls[name].value = value
    assert_error(explorer, fragment)
    explorer.controls["norm"].value = "GroupNorm"
    explorer.controls["groups"].value = 2
    explorer.controls["shape"].value = "4, 6, 2, 2"
    assert_ok(explorer)


def test_parse_shape():
    assert parse_shape("4, 6, 2, 2") == (4, 6, 2, 2)
    assert parse_shape("(2,3)") == (2, 3)
    assert parse_shape("2x3×4") == (2, 3, 4)
    for bad in ("", "a", "2, 0", "2.5"):
        with pytest.raises(ValueError):
            parse_shape(bad)


# --------------------------------------------------------------------------
# running_stats_explorer
# --------------------------------------------------------------------------


def test_running_stats_explorer_every_control_redraws():
    explorer = explorers.running_stats_explorer(steps=20)
    assert_ok(explorer)
    assert "after <b>20</b> steps" in explorer.info.value
    assert set(explorer.controls) == {"momentum", "cumulative", "batch_size", "steps", "seed"}
    change(explorer, "steps", 30)
    assert "after <b>30</b> steps" in explorer.info.value
    change(explorer, "momentum", 0.5)
    change(explorer, "batch_size", 4)
    change(explorer, "seed", 1)
    assert not explorer.controls["momentum"].disabled
    change(explorer, "cumulative", True)
    assert explorer.controls["momentum"].disabled


def test_running_stats_explorer_reports_the_train_eval_gap():
    explorer = explorers.running_stats_explorer(momentum=0.01, steps=5)
    assert "differ by up to <b>" in explorer.info.value
    gap_slow = float(explorer.info.value.rsplit("<b>", 1)[1].split("<")[0])
    explorer.controls["momentum"].value = 0.5
    explorer.controls["steps"].value = 100
    explorer.controls["batch_size"].value = 128
    gap_fast = float(explorer.info.value.rsplit("<b>", 1)[1].split("<")[0])
    assert gap_slow > 1.0 > gap_fast


def test_running_stats_explorer_batch_of_one_shows_the_error():
    explorer = explorers.running_stats_explorer(steps=5)
    explorer.controls["batch_size"].value = 1
    assert_error(explorer, "more than 1 value per channel")
    explorer.controls["batch_size"].value = 2
    assert_ok(explorer)


# --------------------------------------------------------------------------
# batch_size_explorer
# --------------------------------------------------------------------------


def test_batch_size_explorer_every_control_redraws():
    explorer = explorers.batch_size_explorer(trials=20, channels=2, groups=1)
    assert_ok(explorer)
    assert set(explorer.controls) == {"batch_size", "trials", "seed", "channels", "groups"}
    assert "batch size <b>4</b>" in explorer.info.value
    change(explorer, "batch_size", 2)
    assert "batch size <b>2</b>" in explorer.info.value
    change(explorer, "trials", 30)
    assert "across 30 random batches" in explorer.info.value
    change(explorer, "seed", 3)
    change(explorer, "channels", 4)
    assert "BatchNorm2d(4)" in explorer.info.value
    change(explorer, "groups", 2)
    assert "GroupNorm(2, 4)" in explorer.info.value
    # LayerNorm and GroupNorm never depend on the rest of the batch
    assert explorer.info.value.count("<b>0.000</b>") == 2


def test_batch_size_explorer_indivisible_groups_show_the_error():
    explorer = explorers.batch_size_explorer(trials=20, channels=4, groups=2)
    explorer.controls["groups"].value = 3
    assert_error(explorer, "divisible")
    explorer.controls["channels"].value = 6
    assert_ok(explorer)


def test_parse_shape_rejects_huge_sizes_and_ranks_with_a_message():
    for text, words in [
        ("9" * 400, "at most 1000000, got 999999… (400 digits)"),
        ("2, 1000001", "at most 1000000, got 1000001"),
        ("1 " * 9, "at most 8 dims, got 9"),
    ]:
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            parse_shape(text)
    assert parse_shape("0001000000, 2") == (1000000, 2)


@pytest.mark.parametrize("text", ["100000,100000,100000", "2, 64, 2000, 2000"])
def test_reduction_explorer_refuses_a_huge_shape_before_indexing_it(monkeypatch, text):
    """The size check comes before describe(), which builds an index of every element."""

    def no_describe(*args):
        raise AssertionError("describe() ran on a shape too large to draw")

    import norms.explore.widgets as widgets_module

    monkeypatch.setattr(widgets_module, "describe", no_describe)
    explorer = explorers.reduction_explorer()
    explorer.controls["shape"].value = text
    assert "too many cells to draw" in explorer.error.value, explorer.error.value
