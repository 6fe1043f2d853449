"""norms.stats: the one place of batch statistics; its rules against torch's and each other."""

from __future__ import annotations

import pytest
import torch

import norms
from norms import stats


def test_batch_moments_are_torchs():
    x = torch.randn(6, 3, 5, 4, dtype=torch.float64) * 3 + 7
    mean, xc, var = stats.batch_moments(x)
    want_var, want_mean = torch.var_mean(x, dim=(0, 2, 3), correction=0, keepdim=True)
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(var, want_var)
    torch.testing.assert_close(xc, x - want_mean)


def test_instance_moments_and_the_running_update_match_torch():
    x = torch.randn(4, 3, 7, dtype=torch.float64)
    mean, _, var = stats.instance_moments(x)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    n = stats.count(x.shape, norms.axes.instance_norm_dims(3))
    stats.update_running_stats(rm, rv, mean.view(4, 3), var.view(4, 3), n, 0.1)
    layer = torch.nn.InstanceNorm1d(3, track_running_stats=True).double()
    layer(x)
    torch.testing.assert_close(rm, layer.running_mean)
    torch.testing.assert_close(rv, layer.running_var)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_running_average_factor_is_torchs_rule(momentum):
    """BatchNorm counts the batch first and passes k; SyncBatchNorm counts after the step and
    passes the count before plus one: the same 1/k."""
    ours, theirs = (
        norms.BatchNorm1d(2, momentum=momentum),
        torch.nn.BatchNorm1d(2, momentum=momentum),
    )
    for k in range(1, 5):
        x = torch.randn(8, 2) + k
        ours(x), theirs(x)
        before = int(ours.num_batches_tracked) - 1
        want = 1.0 / k if momentum is None else momentum
        assert stats.running_average_factor(momentum, ours.num_batches_tracked) == want
        assert stats.running_average_factor(momentum, before + 1) == want
    torch.testing.assert_close(ours.running_mean, theirs.running_mean)
    torch.testing.assert_close(ours.running_var, theirs.running_var)
    assert stats.running_average_factor(None) == 0.0  # no counter: no update


def test_combine_equal_and_unequal_parts_agree_with_the_whole():
    x = torch.randn(10, 3, dtype=torch.float64) + 1e6  # a large offset: no cancellation
    var, mean = torch.var_mean(x, dim=0, correction=0)
    parts = [x[:3], x[3:4], x[4:]]
    counts = torch.tensor([len(p) for p in parts], dtype=torch.float64)
    means = torch.stack([p.mean(0) for p in parts])
    m2s = torch.stack([((p - p.mean(0)) ** 2).sum(0) for p in parts])
    n, mu, m2 = stats.combine(counts, means, m2s)
    assert n == 10
    torch.testing.assert_close(mu, mean)
    torch.testing.assert_close(m2 / n, var)
    rows = x.T.reshape(3, 5, 2)  # per feature: 5 equal parts of 2
    part_mean, part_m2 = stats.mean_m2(rows, -1)  # (3, 5) each
    n, mu, m2 = stats.combine(2, part_mean, part_m2, dim=-1)
    assert n == 10
    torch.testing.assert_close(mu.view(3), mean)
    torch.testing.assert_close(m2.view(3) / n, var)


def test_channel_view_broadcasts_over_the_channels():
    t = torch.arange(3.0)
    x = torch.zeros(2, 3, 4, 5)
    assert torch.equal((x + stats.channel_view(t, x.dim()))[1, :, 2, 3], t)
    assert stats.channel_view(t, 2, torch.float64).dtype == torch.float64
