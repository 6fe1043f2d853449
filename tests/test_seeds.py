"""norms.lab.seeds: the spread of an experiment over seeds, and the verdict rule."""

import pytest

from norms.lab.seeds import SEEDS, Spread, over_seeds, verdict
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
        ((0.1, 0.2), (0.2, 0.3), "no difference at this scale"),  # touching ranges overlap
        ((0.3, 0.4), (0.1, 0.2), "higher"),
        ((0.1, 0.2), (0.3, 0.4), "lower"),
        ((0.0, 1.0), (0.4, 0.5), "no difference at this scale"),  # one inside the other
    ],
)
def test_verdict_says_no_difference_when_ranges_overlap(a, b, expected):
    sa, sb = Spread(a, (0, 1)), Spread(b, (0, 1))
    assert verdict(sa, sb) == expected
    assert sa.overlaps(sb) == sb.overlaps(sa) == (expected == "no difference at this scale")


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
