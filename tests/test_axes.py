"""norms.axes.describe: checked against what the layers actually compute.

statistic_index is verified independently: per-statistic means and variances
are computed by scattering the input with statistic_index, and torch's own
layer output must equal (x - mean_g) / sqrt(var_g + eps) (RMS for RMSNorm)
for every element. Counts, shapes, reduced dims and parameter shapes are
checked against the modules' real parameters and buffers, for our modules
and torch's alike.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn as tnn
from hypothesis import given, settings
from hypothesis import strategies as st

import norms
from norms import axes
from norms.axes import Reduction, describe

LIBS = [norms, tnn]


@st.composite
def module_and_shape(draw):
    """A module config (built for both libraries) and a valid input shape."""
    kind = draw(st.sampled_from(["bn", "in", "ln", "rms", "gn"]))
    c = draw(st.sampled_from([3, 4, 6]))
    n = draw(st.sampled_from([1, 2, 5]))
    sp = lambda k: tuple(draw(st.lists(st.sampled_from([1, 2, 5]), min_size=k, max_size=k)))  # noqa: E731
    if kind == "bn":
        d = draw(st.sampled_from([1, 2, 3]))
        k = draw(st.sampled_from([0, 1])) if d == 1 else d
        kw = dict(affine=draw(st.booleans()), track_running_stats=draw(st.booleans()))
        return f"BatchNorm{d}d", (c,), kw, (n, c, *sp(k))
    if kind == "in":
        d = draw(st.sampled_from([1, 2, 3]))
        batch = (n,) if draw(st.booleans()) else ()
        kw = dict(affine=draw(st.booleans()), track_running_stats=draw(st.booleans()))
        return f"InstanceNorm{d}d", (c,), kw, (*batch, c, *sp(d))
    if kind == "gn":
        g = draw(st.sampled_from([d for d in range(1, c + 1) if c % d == 0]))
        kw = dict(affine=draw(st.booleans()))
        return "GroupNorm", (g, c), kw, (n, c, *sp(draw(st.integers(0, 2))))
    shape = (n, c, *sp(draw(st.integers(0, 2))))
    k = draw(st.integers(1, len(shape)))
    name = "LayerNorm" if kind == "ln" else "RMSNorm"
    return (
        name,
        (list(shape[len(shape) - k :]),),
        dict(elementwise_affine=draw(st.booleans())),
        shape,
    )


def build(lib, name, args, kw):
    return getattr(lib, name)(*args, **kw, dtype=torch.float64)


def scatter_stats(x, r: Reduction):
    """Per-statistic mean and biased variance (or mean square) grouped by statistic_index."""
    idx = r.statistic_index.reshape(-1)
    flat = x.reshape(-1)
    count = torch.bincount(idx, minlength=r.num_statistics).to(x.dtype)
    s = torch.zeros(r.num_statistics, dtype=x.dtype).index_add_(0, idx, flat)
    if not r.has_mean:
        ms = torch.zeros(r.num_statistics, dtype=x.dtype).index_add_(0, idx, flat * flat) / count
        return None, ms, count
    mean = s / count
    dev = flat - mean[idx]
    var = torch.zeros(r.num_statistics, dtype=x.dtype).index_add_(0, idx, dev * dev) / count
    return mean, var, count


@settings(max_examples=60, deadline=None)
@given(cfg=module_and_shape(), seed=st.integers(0, 2**16))
def test_statistic_index_reproduces_torch(cfg, seed):
    name, args, kw, shape = cfg
    tmod = build(tnn, name, args, kw)
    r = describe(tmod, shape)
    r_ours = describe(build(norms, name, args, kw), torch.Size(shape))
    assert r == r_ours and torch.equal(r.statistic_index, r_ours.statistic_index)

    # bookkeeping
    assert r.norm == name and r.input_shape == shape
    assert r.statistic_index.shape == shape and r.statistic_index.dtype == torch.int64
    idx = r.statistic_index
    assert idx.numel() == 0 or (idx.min() == 0 and idx.max() == r.num_statistics - 1)
    assert torch.prod(torch.tensor(r.stat_shape)).item() == r.num_statistics
    counts = torch.bincount(idx.reshape(-1), minlength=r.num_statistics)
    assert (counts == r.elements_per_statistic).all()
    assert r.num_statistics * r.elements_per_statistic == idx.numel()
    assert sorted(r.reduced_dims + r.kept_dims) == list(range(len(shape)))

    # reduced_dims, by the definition: for a dim of size > 1, listed iff two
    # elements differing only in that coordinate share a statistic
    for d in range(len(shape)):
        if shape[d] > 1:
            shares = bool((idx.select(d, 0) == idx.select(d, 1)).any())
            assert shares == (d in r.reduced_dims), (d, r)

    # parameters and buffers of the real module
    w = getattr(tmod, "weight", None)
    assert r.param_shape == (None if w is None else tuple(w.shape))
    rm = getattr(tmod, "running_mean", None)
    if name.startswith("BatchNorm"):
        assert r.stat_shape == (shape[1],)
        if rm is not None:
            assert tuple(rm.shape) == r.stat_shape
    if rm is not None and name.startswith("InstanceNorm"):
        assert tuple(rm.shape) == (r.stat_shape[-1],)  # per channel, batch-averaged
    assert r.train_eval_differ == (rm is not None)

    # the heart of it: torch's own output, recomputed group by group
    degenerate = r.elements_per_statistic == 1 and name.startswith(
        ("BatchNorm", "GroupNorm", "InstanceNorm")
    )
    if degenerate or 0 in shape:
        return  # torch refuses to train on one value per statistic
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + 2
    tmod.train()
    y = tmod(x).detach()
    center, spread, _ = scatter_stats(x, r)
    eps = tmod.eps if tmod.eps is not None else torch.finfo(torch.float64).eps
    i = idx
    if r.has_mean:
        expected = (x - center[i]) / torch.sqrt(spread[i] + eps)
    else:
        expected = x / torch.sqrt(spread[i] + eps)
    torch.testing.assert_close(y, expected, atol=1e-9, rtol=1e-9)


def test_stats_in_row_major_order_of_stat_shape():
    """stats.view(-1)[statistic_index] lines up with the layer's natural stats tensor."""
    x = torch.randn(4, 6, 5, 3, dtype=torch.float64)
    cases = [
        (tnn.BatchNorm2d(6), x.mean((0, 2, 3))),
        (tnn.InstanceNorm2d(6), x.mean((2, 3))),
        (tnn.GroupNorm(3, 6), x.reshape(4, 3, -1).mean(-1)),
        (tnn.LayerNorm([5, 3]), x.mean((2, 3))),
        (tnn.LayerNorm(3), x.mean(3)),
    ]
    for mod, natural in cases:
        r = describe(mod, x.shape)
        mean, _, _ = scatter_stats(x, r)
        assert tuple(natural.shape) == r.stat_shape
        torch.testing.assert_close(mean.view(r.stat_shape), natural)


@pytest.mark.parametrize("lib", LIBS)
def test_documented_examples(lib):
    shape = (8, 6, 4, 5)
    r = describe(lib.GroupNorm(3, 6), shape)
    assert (r.reduced_dims, r.stat_shape, r.num_statistics, r.elements_per_statistic) == (
        (1, 2, 3),
        (8, 3),
        24,
        2 * 4 * 5,
    )
    assert r.param_shape == (6,) and r.has_mean and not r.train_eval_differ
    assert describe(lib.GroupNorm(6, 6), shape).reduced_dims == (2, 3)
    assert describe(lib.GroupNorm(1, 6), shape).reduced_dims == (1, 2, 3)
    r = describe(lib.LayerNorm([4, 5]), shape)
    assert r.reduced_dims == (2, 3) and r.param_shape == (4, 5) and r.stat_shape == (8, 6)
    r = describe(lib.BatchNorm2d(6), shape)
    assert r.reduced_dims == (0, 2, 3) and r.num_statistics == 6 and r.train_eval_differ
    assert r.elements_per_statistic == 8 * 4 * 5 and r.param_shape == (6,)
    assert describe(lib.BatchNorm2d(6, track_running_stats=False), shape).train_eval_differ is False
    assert describe(lib.BatchNorm2d(6, affine=False), shape).param_shape is None
    r = describe(lib.RMSNorm(5), shape)
    assert not r.has_mean and not r.has_bias and r.num_statistics == 8 * 6 * 4
    r = describe(lib.InstanceNorm2d(6), shape)
    assert r.reduced_dims == (2, 3) and r.stat_shape == (8, 6) and not r.train_eval_differ
    assert describe(lib.InstanceNorm2d(6, track_running_stats=True), shape).train_eval_differ
    r = describe(lib.InstanceNorm2d(6), (6, 4, 5))  # unbatched
    assert r.reduced_dims == (1, 2) and r.stat_shape == (6,) and r.kept_dims == (0,)
    assert describe(lib.BatchNorm1d(6), (10, 6)).reduced_dims == (0,)


def test_reduction_is_frozen_and_summarizes():
    r = describe(norms.BatchNorm2d(3), (2, 3, 4, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.num_statistics = 5
    s = r.summary()
    assert "BatchNorm2d" in s and "(0, 2, 3)" in s and "3 mean+variance" in s
    assert "RMS" in describe(norms.RMSNorm(4), (2, 4)).summary()
    required = {
        "norm",
        "input_shape",
        "reduced_dims",
        "num_statistics",
        "elements_per_statistic",
        "statistic_index",
        "param_shape",
        "train_eval_differ",
        "has_mean",
        "stat_shape",
    }
    assert required <= {f.name for f in dataclasses.fields(Reduction)}


def test_low_level_dims_are_what_functional_uses():
    assert axes.batch_norm_dims(2) == (0,)
    assert axes.batch_norm_dims(5) == (0, 2, 3, 4)
    assert axes.instance_norm_dims(4) == (2, 3)
    assert axes.layer_norm_dims(4, 1) == (3,)
    assert axes.layer_norm_dims(4, 3) == (1, 2, 3)
    assert axes.group_norm_shape((2, 6, 4, 5), 3) == (2, 3, 40)
    assert axes.group_norm_dims(4, 1) == (2, 3) and axes.group_norm_dims(3, 2) == (1, 2)


def test_statistic_index_is_cheap():
    """Built with arange/expand, not Python loops: a 2M-element shape is fast."""
    import time

    t0 = time.perf_counter()
    r = describe(norms.GroupNorm(8, 64), (8, 64, 64, 64))
    assert r.statistic_index.shape == (8, 64, 64, 64)
    assert time.perf_counter() - t0 < 5.0


# ---------------------------------------------------------------- validation

BAD = [
    ("BatchNorm2d", (3,), {}, (4, 3, 5), "expected 4D input (got 3D input)"),
    ("BatchNorm1d", (3,), {}, (4, 3, 5, 5), "expected 2D or 3D input (got 4D input)"),
    ("BatchNorm2d", (3,), {}, (4, 5, 6, 6), "expected 3 channels"),
    ("BatchNorm2d", (3,), dict(affine=False), (4, 5, 6, 6), "expected 3 channels"),
    ("InstanceNorm2d", (3,), {}, (4, 3), "expected 3D or 4D input (got 2D input)"),
    ("InstanceNorm2d", (3,), dict(affine=True), (4, 5, 6, 6), "expected 3 channels"),
    ("InstanceNorm1d", (3,), dict(track_running_stats=True), (5, 7), "expected 3 channels"),
    ("LayerNorm", ([5, 6],), {}, (4, 3, 6, 5), "normalized_shape=[5, 6]"),
    ("LayerNorm", ([3, 5, 6],), {}, (5, 6), "normalized_shape=[3, 5, 6]"),
    ("RMSNorm", (7,), {}, (4, 3, 6), "normalized_shape=[7]"),
    ("GroupNorm", (2, 4), {}, (4, 5, 6), "not divisible by num_groups=2"),
    ("GroupNorm", (2, 4), {}, (4, 6, 6), "expected 4 channels"),
    ("GroupNorm", (2, 4), {}, (4,), "at least 2 dimensions"),
]


@pytest.mark.filterwarnings("ignore:input's size at dim")
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("name,args,kw,shape,fragment", BAD)
def test_rejects_shapes_forward_rejects(lib, name, args, kw, shape, fragment):
    mod = getattr(lib, name)(*args, **kw)
    with pytest.raises(ValueError) as info:
        describe(mod, shape)
    msg = str(info.value)
    assert fragment in msg and str(tuple(shape)) in msg and name in msg
    with pytest.raises((ValueError, RuntimeError)):  # and forward agrees it is bad
        mod(torch.randn(shape))


@pytest.mark.parametrize("lib", LIBS)
def test_accepts_what_forward_accepts(lib):
    """Channel count is only checked where something is sized by C, as in forward."""
    r = describe(lib.BatchNorm2d(3, affine=False, track_running_stats=False), (4, 5, 2, 2))
    assert r.num_statistics == 5 and r.param_shape is None
    assert describe(lib.GroupNorm(2, 4, affine=False), (4, 6, 3)).stat_shape == (4, 2)
    # one value per channel is only refused in training; the grouping is defined
    assert describe(lib.BatchNorm1d(3), (1, 3)).elements_per_statistic == 1


def test_rejects_non_norm_modules_and_tensors():
    with pytest.raises(TypeError, match="normalization module"):
        describe(torch.nn.Linear(3, 3), (2, 3))
    with pytest.raises(TypeError, match="shape"):
        describe(norms.LayerNorm(3), torch.randn(2, 3))


def test_subclasses_are_recognised():
    class MyBN(tnn.BatchNorm2d):
        pass

    assert describe(MyBN(3), (2, 3, 4, 4)).norm == "BatchNorm2d"
