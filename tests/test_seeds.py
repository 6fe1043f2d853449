"""norms.lab.seeds: the spread of an experiment over seeds, and the verdict rule."""

import json

import pytest

from norms.glue import check_claims
from norms.lab.seeds import SEEDS, Spread, compare, glue_comparison, over_seeds, verdict
from norms.plots.seeds import plot_spreads


def test_over_seeds_runs_every_seed_once_in_order():
    calls = []
    spread = over_seeds(lambda s: calls.append(s) or s * 0.5)
    assert calls == list(SEEDS) and len(SEEDS) >= 5
    assert spread.values == tuple(s * 0.5 for s in SEEDS) and spread.seeds == SEEDS
    assert (spread.lo, spread.hi, spread.mean) == (0.0, 2.0, 1.0)
    assert spread.width == 2.0 and spread.n == 5


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((0.1, 0.2), (0.2, 0.3), "two seeds do not separate them (lower in 2 of 2)"),  # touching
        ((0.3, 0.4), (0.1, 0.2), "higher in 2 of 2 seeds"),
        ((0.1, 0.2), (0.3, 0.4), "lower in 2 of 2 seeds"),
        ((0.0, 1.0), (0.4, 0.5), "two seeds do not separate them (higher in 1 of 2)"),  # inside
        (
            (0.5, 0.9, 0.6, 0.8, 0.7),
            (0.4, 0.8, 0.5, 0.9, 0.6),
            "five seeds do not separate them (higher in 4 of 5)",
        ),
    ],
)
def test_verdict_never_says_no_difference_and_counts_the_pairs(a, b, expected):
    seeds = tuple(range(len(a)))
    sa, sb = Spread(a, seeds), Spread(b, seeds)
    assert verdict(sa, sb) == expected
    assert sa.overlaps(sb) == sb.overlaps(sa) == ("separate" in expected)
    assert "differ" not in expected and "no difference" not in expected


def test_wins_are_paired_by_seed_not_by_rank():
    """Sorted, every value of a is above b's; paired by seed, a is higher in 3 of 5 only."""
    a = Spread((0.9, 0.5, 0.8, 0.6, 0.7), SEEDS)
    b = Spread((0.85, 0.55, 0.75, 0.65, 0.45), SEEDS)
    assert a.wins(b) == 3 and b.wins(a) == 2
    c = compare(a, b)
    assert (c.wins, c.losses, c.n, c.apart) == (3, 2, 5, False)
    with pytest.raises(ValueError, match="same seeds"):
        a.wins(Spread(b.values, (5, 6, 7, 8, 9)))


def test_the_chinese_sentence_says_the_same():
    apart = compare(Spread((0.9, 0.8), (0, 1)), Spread((0.5, 0.4), (0, 1)))
    assert (str(apart), apart.zh) == ("higher in 2 of 2 seeds", "2 个随机种子中有 2 个更高")
    overlap = compare(Spread((0.5, 0.9, 0.6), (0, 1, 2)), Spread((0.6, 0.8, 0.7), (0, 1, 2)))
    assert str(overlap) == "three seeds do not separate them (lower in 2 of 3)"
    assert overlap.zh == "三个随机种子不足以区分二者（3 个随机种子中有 2 个更低）"


def test_ties_count_for_neither_side():
    c = compare(Spread((1.0, 2.0, 3.0), (0, 1, 2)), Spread((1.0, 1.0, 4.0), (0, 1, 2)))
    assert (c.wins, c.losses) == (1, 1)
    assert str(c) == "three seeds do not separate them (higher in 1 of 3)"


def _recorded(monkeypatch):
    """What glue records in the test kernel, as a notebook's outputs."""
    import sys

    import IPython.display

    outputs = []
    monkeypatch.setitem(sys.modules, "myst_nb", None)
    monkeypatch.setenv("NORMS_GLUE_RECORD", "1")

    def show(bundle, raw=False, metadata=None):
        outputs.append({"output_type": "display_data", "data": bundle, "metadata": metadata})

    monkeypatch.setattr(IPython.display, "display", show)
    return outputs


def test_glue_comparison_stores_a_claim_the_check_can_fail(monkeypatch):
    outputs = _recorded(monkeypatch)
    ln = Spread((0.991, 0.995, 0.993, 0.990, 0.996), SEEDS)
    dyt = Spread((0.980, 0.996, 0.970, 0.985, 0.960), SEEDS)
    result = glue_comparison("ln-dyt", ln, dyt, digits=3)
    assert str(result) == "five seeds do not separate them (higher in 4 of 5)"
    notebook = {"cells": [{"cell_type": "code", "outputs": outputs}]}
    assert check_claims(notebook) == []
    stored = {o["metadata"]["scrapbook"]["name"]: o for o in outputs}
    assert set(stored) >= {
        "ln-dyt",
        "ln-dyt.zh",
        "ln-dyt.a",
        "ln-dyt.b",
        "ln-dyt.wins",
        "ln-dyt.wins.claim",
    }
    # doctor one stored per-seed value: the stored count no longer fits
    key = "application/papermill.record/text/plain"
    stored["ln-dyt.b"]["data"][key] = repr((0.98, 0.996, 0.97, 0.985, 0.999))
    problems = check_claims(notebook)
    assert "ln-dyt.wins = 4 but ln-dyt.a is higher than ln-dyt.b in 3 seeds" in problems
    # and a claim that the ranges are apart when they overlap
    claim = json.loads(eval(stored["ln-dyt.wins.claim"]["data"][key]))
    assert claim == {"apart": False, "paired": ["ln-dyt.a", "ln-dyt.b"]}


def test_format_shows_mean_and_range_and_count():
    assert f"{Spread((0.9, 0.95, 1.0), (0, 1, 2)):.1%}" == "95.0% (90.0%–100.0%, 3 seeds)"
    assert str(Spread((2.0,), (7,))) == "2 (2–2, 1 seed)"


def test_spread_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="one value per seed"):
        Spread((1.0, 2.0), (0,))
    with pytest.raises(ValueError, match="at least one seed"):
        Spread((), ())


def test_plot_spreads_draws_one_row_per_setting():
    fig = plot_spreads({"a": Spread((0.9, 0.92), (0, 1)), "b": Spread((0.8, 0.85), (0, 1))})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["b", "a"]
    assert any("91.0%" in t.get_text() for t in ax.texts)
    with pytest.raises(ValueError, match="at least one spread"):
        plot_spreads({})
