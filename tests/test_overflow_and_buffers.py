"""Issue 25, layers: LayerNorm/GroupNorm on inputs whose variance overflows (never a silent
zero), running statistics that require grad (torch's error), InstanceNorm with eps=0 on a
constant instance (torch's zero, not NaN).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.testing import assert_close

import norms
from norms import functional as F
from norms import stats

# --------------------------------------------------------------------------
# overflow of the variance: a scaled computation, only where it overflowed
# --------------------------------------------------------------------------


def _rows(scale: float, dtype: torch.dtype) -> torch.Tensor:
    """(3, 4, 6) with non-trivial rows of magnitude ``scale`` (every row spans ~``scale``)."""
    g = torch.Generator().manual_seed(0)
    base = torch.rand(3, 4, 6, generator=g, dtype=torch.float64) * 2 - 1  # in (-1, 1)
    base[0, 0] = torch.tensor([1.0, -1.0, 0.5, -0.25, 0.75, -0.9], dtype=torch.float64)
    return (base * scale).to(dtype)


def _exact_layer_norm(x, k, weight=None, bias=None):
    """The normalized input computed in float64 on x / max|x| (no overflow), cast back."""
    xd = x.double()
    return nn.functional.layer_norm(
        xd / xd.abs().max(),
        x.shape[-k:],
        None if weight is None else weight.double(),
        None if bias is None else bias.double(),
        eps=0.0,
    ).to(x.dtype)


def _exact_group_norm(x, groups, weight=None, bias=None):
    xd = x.double()
    return nn.functional.group_norm(
        xd / xd.abs().max(),
        groups,
        None if weight is None else weight.double(),
        None if bias is None else bias.double(),
        eps=0.0,
    ).to(x.dtype)


LARGE = [
    (1e20, torch.float32),
    (1e30, torch.float32),
    (0.9 * torch.finfo(torch.float32).max, torch.float32),
    (1e200, torch.float64),
    (0.9 * torch.finfo(torch.float64).max, torch.float64),
]


@pytest.mark.parametrize("scale, dtype", LARGE)
def test_layer_norm_of_huge_inputs_is_the_normalized_input_not_zeros(scale, dtype):
    x = _rows(scale, dtype)
    weight = torch.linspace(0.5, 2.0, 6, dtype=dtype)
    bias = torch.linspace(-1.0, 1.0, 6, dtype=dtype)
    layer = norms.LayerNorm(6, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    for got in (F.layer_norm(x, [6], weight, bias), layer(x).detach()):
        assert torch.isfinite(got).all()
        assert_close(got, _exact_layer_norm(x, 1, weight, bias), atol=1e-5, rtol=1e-5)
    # two normalized dims
    assert_close(F.layer_norm(x, [4, 6]), _exact_layer_norm(x, 2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale, dtype", LARGE)
def test_group_norm_of_huge_inputs_is_the_normalized_input_not_zeros(scale, dtype):
    x = _rows(scale, dtype)  # (N=3, C=4, L=6)
    weight = torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=dtype)
    bias = torch.tensor([-1.0, 0.0, 0.5, 1.0], dtype=dtype)
    layer = norms.GroupNorm(2, 4, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    for got in (F.group_norm(x, 2, weight, bias), layer(x).detach()):
        assert torch.isfinite(got).all()
        assert_close(got, _exact_group_norm(x, 2, weight, bias), atol=1e-5, rtol=1e-5)


def test_huge_rows_do_not_change_the_ordinary_rows_of_the_same_batch():
    x = _rows(1.0, torch.float32)
    big = x.clone()
    big[1] *= 1e20
    got = F.layer_norm(big, [6])
    assert torch.equal(got[0], F.layer_norm(x, [6])[0])
    assert torch.equal(got[2], F.layer_norm(x, [6])[2])
    assert_close(got[1], _exact_layer_norm(big[1], 1), atol=1e-5, rtol=1e-5)


def test_gradient_through_huge_rows_is_finite():
    x = _rows(1e20, torch.float32).requires_grad_(True)
    F.layer_norm(x, [6]).pow(2).mul(torch.arange(6.0)).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_a_non_finite_input_still_gives_nan():
    x = _rows(1.0, torch.float32)
    x[0, 0, 0] = float("inf")
    assert torch.isnan(F.layer_norm(x, [6])[0, 0]).all()
    assert torch.isnan(nn.functional.layer_norm(x, [6])[0, 0]).all()


def _plain_layer_norm(x, k, eps):
    """Today's formula, as it was before the overflow path: the result must not change."""
    dims = tuple(range(x.dim() - k, x.dim()))
    xo = x.to(F.opmath(x.dtype))
    xc = xo - xo.mean(dims, keepdim=True)
    return (xc * torch.rsqrt((xc * xc).mean(dims, keepdim=True) + eps)).to(x.dtype)


def _plain_group_norm(x, groups, eps):
    xo = x.to(F.opmath(x.dtype)).reshape(x.shape[0], groups, -1)
    xc = xo - xo.mean(-1, keepdim=True)
    return (xc * torch.rsqrt((xc * xc).mean(-1, keepdim=True) + eps)).view(x.shape).to(x.dtype)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 4),
    g=st.integers(1, 3),
    per=st.integers(1, 3),
    length=st.integers(2, 7),
    log_scale=st.integers(-30, 18),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    eps=st.sampled_from([1e-5, 1e-3, 0.0]),
    seed=st.integers(0, 2**16),
)
def test_ordinary_inputs_give_exactly_todays_result_and_match_torch(
    n, g, per, length, log_scale, dtype, eps, seed
):
    c = g * per
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, c, length, generator=gen, dtype=torch.float64) * 10.0**log_scale).to(dtype)
    x = x + 3.0  # a non-zero mean
    ln, gn = F.layer_norm(x, [length], eps=eps), F.group_norm(x, g, eps=eps)
    # bit for bit (a constant row with eps=0 is NaN in both, as in torch)
    assert_close(ln, _plain_layer_norm(x, 1, eps), rtol=0, atol=0, equal_nan=True)
    assert_close(gn, _plain_group_norm(x, g, eps), rtol=0, atol=0, equal_nan=True)
    if eps > 0 and dtype == torch.float64:
        assert_close(ln, nn.functional.layer_norm(x, [length], eps=eps))
        assert_close(gn, nn.functional.group_norm(x, g, eps=eps))


# --------------------------------------------------------------------------
# running statistics that require grad: torch's RuntimeError
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, x",
    [
        (lambda m: m.BatchNorm1d(3), torch.randn(4, 3)),
        (lambda m: m.BatchNorm2d(3), torch.randn(2, 3, 2, 2)),
        (lambda m: m.InstanceNorm1d(3, track_running_stats=True), torch.randn(2, 3, 5)),
    ],
)
@pytest.mark.parametrize("buffer", ["running_mean", "running_var"])
@pytest.mark.parametrize("training", [False, True])
def test_a_running_buffer_that_requires_grad_raises_as_in_torch(make, x, buffer, training):
    for module in (torch.nn, norms):
        layer = make(module)
        getattr(layer, buffer).requires_grad_(True)
        layer.train(training)
        with pytest.raises(RuntimeError) as caught:
            layer(x)
        if module is norms:
            assert buffer in str(caught.value) and "requires_grad" in str(caught.value)
        with torch.no_grad():  # no graph: nothing to differentiate, as in torch
            layer(x)


def test_the_functional_forms_raise_too():
    rm, rv = torch.zeros(3, requires_grad=True), torch.ones(3)
    with pytest.raises(RuntimeError, match="running_mean"):
        F.batch_norm(torch.randn(4, 3), rm, rv, training=False)
    with pytest.raises(RuntimeError, match="running_mean"):
        F.instance_norm(torch.randn(2, 3, 4), rm, rv)


# --------------------------------------------------------------------------
# InstanceNorm, eps=0, constant instance
# --------------------------------------------------------------------------


@pytest.mark.parametrize("track", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_with_eps_zero_on_a_constant_instance_matches_torch(track, affine):
    x = torch.randn(2, 3, 5)
    x[0, 1] = 4.0  # one constant instance
    x[1, 2] = 0.0
    ours = norms.InstanceNorm1d(3, eps=0.0, affine=affine, track_running_stats=track)
    theirs = nn.InstanceNorm1d(3, eps=0.0, affine=affine, track_running_stats=track)
    if affine:
        with torch.no_grad():
            for m in (ours, theirs):
                m.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
                m.bias.copy_(torch.tensor([0.1, -0.3, 0.7]))
    got, want = ours(x), theirs(x)
    assert not torch.isnan(got).any()
    assert_close(got, want)


# --------------------------------------------------------------------------
# issue 38, item 5: BatchNorm and InstanceNorm where the sum overflows
# --------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    scale=st.floats(1e36, 1.5e38),  # above, x - mean itself can overflow (in torch's fold not)
    layer=st.sampled_from(["BatchNorm1d", "BatchNorm2d", "InstanceNorm2d"]),
    seed=st.integers(0, 2**16),
)
def test_batch_and_instance_norm_keep_a_finite_running_mean_like_torch(scale, layer, seed):
    """Inputs near float32's largest value: the per-channel sum overflows, torch's mean does
    not. Outputs, running_mean and running_var are torch's (running_var is inf in both)."""
    shape = {"BatchNorm1d": (8, 3, 5), "BatchNorm2d": (4, 3, 5, 5), "InstanceNorm2d": (2, 3, 5, 5)}
    gen = torch.Generator().manual_seed(seed)
    x = ((torch.rand(shape[layer], generator=gen, dtype=torch.float64) * 2 - 1) * scale).float()
    kw = {"track_running_stats": True} if layer.startswith("Instance") else {}
    ours, theirs = getattr(norms, layer)(3, **kw), getattr(nn, layer)(3, **kw)
    y, y_ref = ours(x), theirs(x)
    assert not torch.isnan(y).any()
    assert torch.isfinite(ours.running_mean).all()
    assert_close(y, y_ref)
    assert_close(ours.running_mean, theirs.running_mean, rtol=1e-4, atol=scale * 1e-6)
    assert_close(ours.running_var, theirs.running_var)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 4),
    c=st.integers(1, 3),
    length=st.integers(2, 7),
    log_scale=st.integers(-30, 30),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    seed=st.integers(0, 2**16),
)
def test_ordinary_batch_statistics_are_exactly_today_s(n, c, length, log_scale, dtype, seed):
    """The overflow-safe mean changes no bit of an ordinary one (BatchNorm's two-stage mean,
    InstanceNorm's), nor of the output and the running statistics."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, c, length, generator=gen, dtype=torch.float64) * 10.0**log_scale).to(dtype)
    x = x + 3.0
    xo = x.to(F.opmath(dtype))
    mean = xo.mean(2, keepdim=True).mean(0, keepdim=True)  # the formula before issue 38
    xc = xo - mean
    var = (xc * xc).mean(2, keepdim=True).mean(0, keepdim=True)
    got_mean, got_xc, got_var = stats.batch_moments(xo)
    assert torch.equal(got_mean, mean) and torch.equal(got_xc, xc) and torch.equal(got_var, var)
    if n * length > 1:
        rm, rv = torch.zeros(c, dtype=dtype), torch.ones(c, dtype=dtype)
        y = F.batch_norm(x, rm, rv, training=True)
        want = (xc * torch.rsqrt(var + 1e-5)).to(dtype)
        assert_close(y, want, rtol=0, atol=0)
    rm = torch.zeros(c, dtype=dtype)
    F.instance_norm(x, rm, torch.ones(c, dtype=dtype))
    want = torch.zeros(c, dtype=dtype)
    want.copy_(want.to(xo.dtype) * 0.9 + xo.mean(2).mean(0) * 0.1)
    assert_close(rm, want, rtol=0, atol=0)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 3),
    length=st.integers(2, 7),
    log_scale=st.integers(-30, 15),  # ordinary: the variance fits float32
    dtype=st.sampled_from([torch.float32, torch.float64]),
    seed=st.integers(0, 2**16),
)
def test_traced_layer_norm_is_eager_s_bit_for_bit(n, length, log_scale, dtype, seed):
    """Under vmap the overflow path is computed and selected by torch.where (no branch on values):
    ordinary rows give the plain formula's bits, huge rows the eager scaled result."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(2, n, length, generator=gen, dtype=torch.float64) * 10.0**log_scale).to(dtype)
    got = torch.func.vmap(lambda t: F.layer_norm(t, [length]))(x)
    assert_close(got, _plain_layer_norm(x, 1, 1e-5), rtol=0, atol=0, equal_nan=True)
    big = x / x.abs().amax().clamp_min(1e-30) * (torch.finfo(dtype).max / 2)
    got = torch.func.vmap(lambda t: F.layer_norm(t, [length]))(big)
    assert torch.isfinite(got).all()
    assert torch.equal(got, F.layer_norm(big, [length]))
