"""norms.plots.sync: the per-slice spread is what it claims, and the figures draw what they are
given."""

from __future__ import annotations

import pytest
import torch

from norms.plots import sync as sync_plots
from norms.plots.style import BookFigure


def test_slice_spread_matches_a_direct_computation():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 3, 2, 2, generator=g, dtype=torch.float64) * torch.tensor(
        [1.0, 2.0, 5.0]
    ).view(1, 3, 1, 1)
    spread = sync_plots.slice_spread(x, [12, 3])
    assert spread[12][0] < 1e-12 and spread[12][1] < 1e-12  # one slice: the global statistics
    slices = torch.split(x, 3)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3), correction=0)
    means = torch.stack([s.mean((0, 2, 3)) for s in slices])
    variances = torch.stack([s.var((0, 2, 3), correction=0) for s in slices])
    want_mean = (((means - mean) ** 2).mean(0).sqrt() / var.sqrt()).mean().item()
    want_var = (variances / var - 1).abs().mean().item()
    assert abs(spread[3][0] - want_mean) < 1e-12 and abs(spread[3][1] - want_var) < 1e-12


def test_digit_features_are_deterministic_conv_outputs():
    a, b = sync_plots.digit_features(), sync_plots.digit_features()
    assert a.shape == (1797, 8, 6, 6) and torch.equal(a, b)
    assert (a < 0).any()  # conv outputs, before any ReLU


def test_plots_return_figures_with_the_data():
    spread = {1: (0.2, 0.3), 4: (0.1, 0.15)}
    fig = sync_plots.plot_slice_spread(spread, elements_per_sample=4)
    assert isinstance(fig, BookFigure)
    lines = fig.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines[:2]] == [[0.2, 0.1], [0.3, 0.15]]
    timings = {
        1: {"plain": 1e-3, "sync": 1e-3, "all_reduce": 1e-5},
        2: {"plain": 1e-3, "sync": 4e-3, "all_reduce": 1e-3},
    }
    fig = sync_plots.plot_sync_cost(timings)
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == [1.0, 1.0, 1.0, 4.0, 0.01, 1.0]


def test_collective_cost_plot_draws_the_medians_and_the_range():
    costs = {
        (16, 1): [1e-4, 2e-4, 3e-4],
        (256, 1): [1e-4, 1e-4, 5e-4],
        (16, 2): [2e-4, 4e-4, 6e-4],
        (256, 2): [3e-4, 4e-4, 4e-4],
    }
    fig = sync_plots.plot_collective_cost(costs)
    lines = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    assert [list(line.get_ydata()) for line in lines[:2]] == [
        pytest.approx([0.2, 0.1]),
        pytest.approx([0.4, 0.4]),
    ]
