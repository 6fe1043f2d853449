"""GhostBatchNorm2d, BatchRenorm2d and FilterResponseNorm2d against torch and the papers.

Ghost BatchNorm against consecutive ``torch.nn.BatchNorm2d`` calls on the chunks; Batch
Renorm against ``torch.nn.BatchNorm2d`` with r_max = 1, d_max = 0 and against the
paper's formula (Ioffe, 2017, Algorithm 1) written out here; FRN against the formula of
Singh & Krishnan (2020, Algorithm 1). Hypothesis draws shapes (C different from the
spatial sizes), settings and non-trivial γ, β, τ; float64 to 1e-10.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as tnn
from hypothesis import given, settings
from hypothesis import strategies as st

import norms

TOL = dict(atol=1e-10, rtol=1e-10)


def randn(shape, seed, scale=2.0, shift=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64) * scale + shift


def set_affine(*layers, seed=1):
    c = layers[0].weight.shape[0]
    w, b = randn((c,), seed, 0.5, 1.0), randn((c,), seed + 1, 0.5, 0.0)
    with torch.no_grad():
        for m in layers:
            m.weight.copy_(w)
            m.bias.copy_(b)


# --------------------------------------------------------------------------
# GhostBatchNorm2d
# --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 11),
    vbs=st.integers(2, 6),
    c=st.sampled_from([3, 4]),
    h=st.sampled_from([1, 5]),
    w=st.sampled_from([2, 7]),
    momentum=st.sampled_from([0.1, 0.3, None]),
    affine=st.booleans(),
    track=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_ghost_batchnorm_is_batchnorm_on_chunks(n, vbs, c, h, w, momentum, affine, track, seed):
    if n % vbs == 1 and h * w == 1:
        return
    ours = norms.GhostBatchNorm2d(c, vbs, momentum=momentum, affine=affine,
                                  track_running_stats=track, dtype=torch.float64)  # fmt: skip
    ref = tnn.BatchNorm2d(c, momentum=momentum, affine=affine, track_running_stats=track,
                          dtype=torch.float64)  # fmt: skip
    if affine:
        set_affine(ours, ref, seed=seed)
    assert list(ours.state_dict()) == list(ref.state_dict())
    for step in range(3):
        x = randn((n, c, h, w), seed + step)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya = ours(xa)
        yb = torch.cat([ref(chunk) for chunk in xb.split(vbs)])
        torch.testing.assert_close(ya, yb, **TOL)
        g = randn(ya.shape, seed + 99)
        ya.backward(g)
        yb.backward(g)
        torch.testing.assert_close(xa.grad, xb.grad, **TOL)
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[k], v, **TOL)
    if affine:
        torch.testing.assert_close(ours.weight.grad, ref.weight.grad, **TOL)
    ours.eval(), ref.eval()
    x = randn((n, c, h, w), seed + 7)
    torch.testing.assert_close(ours(x), ref(x), **TOL)


def test_ghost_batchnorm_counts_chunks_and_state_dict_loads_both_ways():
    m = norms.GhostBatchNorm2d(4, virtual_batch_size=3)
    m(torch.randn(10, 4, 2, 2))
    assert int(m.num_batches_tracked) == 4
    ref = tnn.BatchNorm2d(4)
    ref.load_state_dict(m.state_dict())
    m2 = norms.GhostBatchNorm2d(4)
    m2.load_state_dict(ref.state_dict())
    assert "virtual_batch_size=3" in repr(m)


def test_ghost_batchnorm_bad_input():
    with pytest.raises(ValueError, match="virtual_batch_size must be at least 1.*got 0"):
        norms.GhostBatchNorm2d(4, virtual_batch_size=0)
    m = norms.GhostBatchNorm2d(4, virtual_batch_size=2)
    with pytest.raises(ValueError, match=r"last virtual batch of size \(1, 4, 1, 1\)"):
        m(torch.randn(5, 4, 1, 1))
    with pytest.raises(ValueError, match="expected 4D input"):
        m(torch.randn(5, 4, 3))


# --------------------------------------------------------------------------
# BatchRenorm2d
# --------------------------------------------------------------------------


def renorm_reference(x, running_mean, running_var, weight, bias, r_max, d_max, eps, momentum):
    """Ioffe (2017), Algorithm 1, per channel; returns y and the new running statistics."""
    mu = x.mean(dim=(0, 2, 3))
    var = x.var(dim=(0, 2, 3), correction=0)
    sigma_b = (var + eps).sqrt()
    sigma = (running_var + eps).sqrt()
    r = (sigma_b / sigma).detach().clamp(1 / r_max, r_max)
    d = ((mu - running_mean) / sigma).detach().clamp(-d_max, d_max)
    v = lambda t: t.view(1, -1, 1, 1)  # noqa: E731
    y = (x - v(mu)) / v(sigma_b) * v(r) + v(d)
    if weight is not None:
        y = y * v(weight) + v(bias)
    n = x.numel() // x.shape[1]
    new_mean = (1 - momentum) * running_mean + momentum * mu.detach()
    new_var = (1 - momentum) * running_var + momentum * var.detach() * n / (n - 1)
    return y, new_mean, new_var


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 6),
    c=st.sampled_from([3, 4]),
    h=st.sampled_from([1, 5]),
    w=st.sampled_from([2, 7]),
    r_max=st.sampled_from([1.0, 1.5, 3.0]),
    d_max=st.sampled_from([0.0, 0.5, 5.0]),
    momentum=st.sampled_from([0.1, 0.5]),
    affine=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_batch_renorm_matches_the_paper(n, c, h, w, r_max, d_max, momentum, affine, seed):
    m = norms.BatchRenorm2d(c, momentum=momentum, affine=affine, r_max=r_max, d_max=d_max,
                            dtype=torch.float64)  # fmt: skip
    weight = bias = None
    if affine:
        set_affine(m, seed=seed)
        weight, bias = m.weight.detach().clone().requires_grad_(), m.bias.detach().clone()
        bias.requires_grad_()
    rm, rv = torch.zeros(c, dtype=torch.float64), torch.ones(c, dtype=torch.float64)
    for step in range(3):
        # the batch's scale and shift differ from the running statistics: r, d clip
        x = randn((n, c, h, w), seed + step, scale=3.0, shift=2.0)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya = m(xa)
        yb, rm, rv = renorm_reference(xb, rm, rv, weight, bias, r_max, d_max, 1e-5, momentum)
        torch.testing.assert_close(ya, yb, **TOL)
        g = randn(ya.shape, seed + 50)
        ya.backward(g)
        yb.backward(g)
        torch.testing.assert_close(xa.grad, xb.grad, **TOL)
        torch.testing.assert_close(m.running_mean, rm, **TOL)
        torch.testing.assert_close(m.running_var, rv, **TOL)
    if affine:
        torch.testing.assert_close(m.weight.grad, weight.grad, **TOL)
        torch.testing.assert_close(m.bias.grad, bias.grad, **TOL)
    assert int(m.num_batches_tracked) == 3


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 5), c=st.sampled_from([3, 5]), seed=st.integers(0, 1000))
def test_batch_renorm_with_no_correction_is_batchnorm2d(n, c, seed):
    m = norms.BatchRenorm2d(c, r_max=1.0, d_max=0.0, dtype=torch.float64)
    ref = tnn.BatchNorm2d(c, dtype=torch.float64)
    set_affine(m, ref, seed=seed)
    assert list(m.state_dict()) == list(ref.state_dict())
    for step in range(3):
        x = randn((n, c, 4, 6), seed + step)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = m(xa), ref(xb)
        torch.testing.assert_close(ya, yb, **TOL)
        ya.backward(torch.cos(ya.detach()))
        yb.backward(torch.cos(yb.detach()))
        torch.testing.assert_close(xa.grad, xb.grad, **TOL)
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(m.state_dict()[k], v, **TOL)
    m.eval(), ref.eval()
    x = randn((n, c, 4, 6), seed + 9)
    torch.testing.assert_close(m(x), ref(x), **TOL)


def test_batch_renorm_corrections_are_constants_and_settable():
    m = norms.BatchRenorm2d(2, r_max=2.0, d_max=1.0)
    m.r_max, m.d_max = 3.0, 5.0
    assert "r_max=3.0, d_max=5.0" in repr(m)
    with pytest.raises(ValueError, match="r_max must be at least 1.*got 0.5"):
        m.r_max = 0.5
    with pytest.raises(ValueError, match="d_max must be at least 0.*got -1"):
        norms.BatchRenorm2d(2, d_max=-1)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        m(torch.randn(1, 2, 1, 1))


# --------------------------------------------------------------------------
# FilterResponseNorm2d
# --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 4),
    c=st.sampled_from([3, 4]),
    h=st.sampled_from([1, 5]),
    w=st.sampled_from([1, 7]),
    eps=st.sampled_from([1e-6, 1e-2]),
    learnable=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_frn_matches_the_paper(n, c, h, w, eps, learnable, seed):
    m = norms.FilterResponseNorm2d(c, eps=eps, learnable_eps=learnable, dtype=torch.float64)
    set_affine(m, seed=seed)
    with torch.no_grad():
        m.tau.copy_(randn((c,), seed + 5, 0.3, 0.0))
        if learnable:
            m.eps.fill_(-eps)  # |ε| is used, so a negative learned ε is still a floor
    x = randn((n, c, h, w), seed, 1.0, 0.0).requires_grad_()
    y = m(x)
    # Singh & Krishnan (2020), Algorithm 1 (NHWC there; NCHW here)
    nu2 = (x.detach() ** 2).mean(dim=(2, 3), keepdim=True)
    xr = x.detach() * torch.rsqrt(nu2 + abs(eps))
    v = lambda t: t.detach().view(1, -1, 1, 1)  # noqa: E731
    want = torch.maximum(v(m.weight) * xr + v(m.bias), v(m.tau))
    torch.testing.assert_close(y, want, **TOL)
    m.eval()
    torch.testing.assert_close(m(x), y, **TOL)  # no batch statistic: eval is the same
    y.sum().backward()
    assert m.tau.grad is not None and (not learnable or m.eps.grad is not None)
    names = ["weight", "bias", "tau"] + (["eps"] if learnable else [])
    assert [k for k, _ in m.named_parameters()] == names


def test_frn_bad_input():
    m = norms.FilterResponseNorm2d(3)
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\).*\(2, 3, 5\)"):
        m(torch.randn(2, 3, 5))
    with pytest.raises(RuntimeError, match="expected input with 3 channels"):
        m(torch.randn(2, 4, 5, 5))
    assert repr(m) == "FilterResponseNorm2d(3, eps=1e-06, learnable_eps=False)"


# --------------------------------------------------------------------------
# issue 38: empty batches, eps, channels, float16, dtypes, numpy integers
# --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)).filter(
        lambda s: 0 in s
    ),
    momentum=st.sampled_from([0.1, None]),
    seed=st.integers(0, 1000),
)
def test_batch_renorm_on_an_empty_batch_keeps_its_statistics_like_batchnorm2d(
    shape, momentum, seed
):
    """Item 1: N, H or W = 0 gave NaN running statistics for good; BatchNorm2d leaves them."""
    n, h, w = shape
    x = randn((n, 3, h, w), seed).float()
    ours, ref = norms.BatchRenorm2d(3, momentum=momentum), tnn.BatchNorm2d(3, momentum=momentum)
    for m in (ours, ref):
        m(randn((4, 3, 2, 2), seed + 1).float())  # statistics worth keeping
    before = {k: v.clone() for k, v in ours.named_buffers()}
    ref_before = {k: v.clone() for k, v in ref.named_buffers()}
    y, y_ref = ours(x), ref(x)
    assert y.shape == y_ref.shape
    for name in ("running_mean", "running_var"):
        assert torch.equal(getattr(ref, name), ref_before[name])  # torch keeps them
        assert torch.equal(getattr(ours, name), before[name]), name
    assert ours.num_batches_tracked == ref.num_batches_tracked == 2  # both count the call


@pytest.mark.parametrize("eps", [0.0, -1.0, -1e-9])
def test_batch_renorm_rejects_eps_like_batchnorm2d(eps):
    """Item 2: eps=0 on a constant input, or eps < 0, gave NaN without an error."""
    x = torch.ones(2, 3, 2, 2)
    for training in (True, False):
        if not training and eps == 0.0:
            continue  # eval mode accepts eps = 0, as torch does
        with pytest.raises(ValueError) as theirs:
            tnn.BatchNorm2d(3, eps=eps).train(training)(x)
        with pytest.raises(ValueError) as ours:
            norms.BatchRenorm2d(3, eps=eps).train(training)(x)
        want = str(theirs.value).replace("batch_norm", "")
        assert want in str(ours.value)


def test_batch_renorm_names_a_wrong_channel_count_in_training_as_in_eval():
    """Item 14: in training, a raw broadcast error."""
    m = norms.BatchRenorm2d(3)
    for training in (True, False):
        with pytest.raises(RuntimeError, match=r"expected input with 3 channels.*\(2, 4, 3, 3\)"):
            m.train(training)(torch.randn(2, 4, 3, 3))


@settings(max_examples=30, deadline=None)
@given(
    scale=st.floats(100.0, 6e4),
    learnable=st.booleans(),
    params=st.sampled_from([torch.float16, torch.float32]),
    seed=st.integers(0, 1000),
)
def test_frn_in_float16_computes_its_statistic_in_float32(scale, learnable, params, seed):
    """Item 3: x² overflowed float16 (every output 0 around 300); item 14: float32 parameters
    gave a float32 output. The output has the input's dtype and is the float32 result rounded."""
    x = (torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(seed)) * 2 - 1) * scale
    m = norms.FilterResponseNorm2d(3, learnable_eps=learnable, dtype=params)
    set_affine(m, seed=seed)
    ref = norms.FilterResponseNorm2d(3, learnable_eps=learnable)
    ref.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    y = m(x.half())
    assert y.dtype == torch.float16
    torch.testing.assert_close(y, ref(x.half().float()).half())


def test_frn_on_integer_input_names_the_dtype():
    """Item 14: torch's bare ``mean()`` error; now the others' (NotImplementedError, a
    RuntimeError, as torch's normalizations raise for integer input)."""
    with pytest.raises(NotImplementedError, match=r"torch.int64.*\(2, 3, 4, 4\).*x.float\(\)"):
        norms.FilterResponseNorm2d(3)(torch.ones(2, 3, 4, 4, dtype=torch.long))
    with pytest.raises(RuntimeError, match="mixed dtype"):
        norms.FilterResponseNorm2d(3, dtype=torch.float64)(torch.randn(2, 3, 4, 4))


def test_ghost_batchnorm_takes_numpy_integers():
    """Item 14: np.int64(4) was rejected as not an int."""
    np = pytest.importorskip("numpy")
    a, b = norms.GhostBatchNorm2d(3, np.int64(4)), norms.GhostBatchNorm2d(3, 4)
    assert type(a.virtual_batch_size) is int and repr(a) == repr(b)
    x = torch.randn(10, 3, 2, 2)
    assert torch.equal(a(x), b(x))
    for bad in (True, 4.0, "4"):
        with pytest.raises(TypeError, match="virtual_batch_size must be an int"):
            norms.GhostBatchNorm2d(3, bad)


def _frn_before_issue_38(m, x):
    """FilterResponseNorm2d's forward as it was: float32 and float64 results must not change."""
    nu2 = x.pow(2).mean(dim=(2, 3), keepdim=True)
    eps = m.eps.abs() if m.learnable_eps else abs(m.eps)
    y = x * torch.rsqrt(nu2 + eps)
    view = (1, -1, 1, 1)
    return torch.maximum(torch.addcmul(m.bias.view(view), y, m.weight.view(view)), m.tau.view(view))


def _renorm_before_issue_38(m, x):
    """BatchRenorm2d's training forward as it was (statistics before the update)."""
    mean = x.mean((2, 3), keepdim=True).mean(0, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean((2, 3), keepdim=True).mean(0, keepdim=True)
    std_b = torch.sqrt(var + m.eps)
    std = torch.sqrt(m.running_var.view(1, -1, 1, 1) + m.eps)
    r = (std_b / std).clamp(1.0 / m.r_max, m.r_max)
    d = ((mean - m.running_mean.view(1, -1, 1, 1)) / std).clamp(-m.d_max, m.d_max)
    y = xc * (r / std_b) + d
    return torch.addcmul(m.bias.view(1, -1, 1, 1), y, m.weight.view(1, -1, 1, 1))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 4),
    hw=st.integers(1, 5),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    learnable=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_frn_and_batch_renorm_give_today_s_numbers_bit_for_bit(n, hw, dtype, learnable, seed):
    """The fixes of issue 38 change no bit of an ordinary float32 or float64 result."""
    x = randn((n, 3, hw, hw), seed).to(dtype)
    frn = norms.FilterResponseNorm2d(3, learnable_eps=learnable, dtype=dtype)
    set_affine(frn, seed=seed)
    with torch.no_grad():
        frn.tau.copy_(randn((3,), seed + 3, 0.5, -0.5))
        assert torch.equal(frn(x), _frn_before_issue_38(frn, x))
    if n * hw * hw > 1:
        renorm = norms.BatchRenorm2d(3, dtype=dtype)
        set_affine(renorm, seed=seed)
        with torch.no_grad():
            renorm.running_mean.copy_(randn((3,), seed + 2, 0.5, 0.0))
            want = _renorm_before_issue_38(renorm, x)
            assert torch.equal(renorm(x), want)
