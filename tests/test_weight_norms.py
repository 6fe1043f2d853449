"""StdConv2d, ScaledStdConv2d, weight_norm, spectral_norm and adaptive_clip_grad_.

weight_norm and spectral_norm against ``torch.nn.utils.parametrizations`` (same
layout, state dicts both ways, same numbers from the same seed); StdConv2d and
ScaledStdConv2d against the formulas of Qiao et al. (2019) and Brock, De & Smith
(2021); adaptive_clip_grad_ against the unit-wise clipping of the NFNets code
(Brock et al., 2021), written out here.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as tnn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils import parametrizations as tp

import norms

TOL = dict(atol=1e-10, rtol=1e-10)


def randn(shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64) * scale


# --------------------------------------------------------------------------
# StdConv2d
# --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    cin=st.sampled_from([2, 4]),
    cout=st.sampled_from([3, 6]),
    k=st.sampled_from([1, 3]),
    groups=st.sampled_from([1, 2]),
    stride=st.sampled_from([1, 2]),
    bias=st.booleans(),
    eps=st.sampled_from([1e-6, 1e-2]),
    seed=st.integers(0, 1000),
)
def test_std_conv_is_conv_with_the_standardized_weight(cin, cout, k, groups, stride, bias, eps,
                                                       seed):  # fmt: skip
    if cout % groups:
        return
    kw = dict(stride=stride, padding=k // 2, groups=groups, bias=bias, dtype=torch.float64)
    torch.manual_seed(seed)
    ours = norms.StdConv2d(cin, cout, k, eps=eps, **kw)
    ref = tnn.Conv2d(cin, cout, k, **kw)
    ref.load_state_dict(ours.state_dict())
    assert list(ours.state_dict()) == list(ref.state_dict())
    w = ref.weight.detach()
    mean = w.mean(dim=(1, 2, 3), keepdim=True)
    var = ((w - mean) ** 2).mean(dim=(1, 2, 3), keepdim=True)  # biased, Qiao et al. (2019)
    with torch.no_grad():
        ref.weight.copy_((w - mean) / torch.sqrt(var + eps))
    x = randn((2, cin, 5, 7), seed)
    torch.testing.assert_close(ours(x), ref(x), **TOL)
    assert f"eps={eps}" in repr(ours)


def test_scaled_std_conv_keeps_unit_variance():
    torch.manual_seed(0)
    conv = norms.ScaledStdConv2d(64, 64, 3, padding=1, bias=False, gamma=1.0)
    x = torch.randn(16, 64, 12, 12)
    fan_in = 64 * 9
    w = conv.weight.detach()
    mean = w.mean(dim=(1, 2, 3), keepdim=True)
    var = w.var(dim=(1, 2, 3), correction=0, keepdim=True)
    scaled = (w - mean) / torch.sqrt(fan_in * (var + conv.eps))  # Brock, De & Smith (2021)
    want = torch.nn.functional.conv2d(x, scaled, padding=1)
    torch.testing.assert_close(conv(x), want, atol=1e-5, rtol=1e-4)
    # a unit-variance input gives unit-variance outputs (interior pixels: no padding)
    assert abs(float(conv(x).detach()[..., 1:-1, 1:-1].var()) - 1) < 0.1
    assert [k for k, _ in conv.named_parameters()] == ["weight", "gain"]


def test_scaled_std_conv_docstring_says_which_input_has_unit_variance_out():
    """Item 15 of issue 38: the docstring said a unit-variance input gives unit-variance
    pre-activations; that holds for ReLU of unit Gaussians, not for unit Gaussians (γ² ≈ 2.93).
    Its example shows both, and five seeds agree."""
    import doctest

    doc = norms.ScaledStdConv2d.__doc__
    assert "ReLU of unit Gaussians" in " ".join(doc.split())
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(verbose=False)
    test = parser.get_doctest(doc, {}, "ScaledStdConv2d", None, 0)
    assert test.examples
    assert runner.run(test).failed == 0
    for seed in range(5):
        torch.manual_seed(seed)
        conv = norms.ScaledStdConv2d(64, 64, 3, padding=1, bias=False)
        z = torch.randn(16, 64, 12, 12)
        with torch.no_grad():
            relu_var = float(conv(torch.relu(z))[..., 1:-1, 1:-1].var())
            gauss_var = float(conv(z)[..., 1:-1, 1:-1].var())
        assert abs(relu_var - 1) < 0.05, seed
        assert abs(gauss_var / conv.gamma**2 - 1) < 0.05, seed


# --------------------------------------------------------------------------
# weight_norm
# --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(["linear", "conv"]),
    dim=st.sampled_from([0, 1, None, -1, -2]),  # -2: item 11 of issue 38 (an IndexError)
    seed=st.integers(0, 1000),
)
def test_weight_norm_matches_torch(kind, dim, seed):
    def make():
        torch.manual_seed(seed)
        if kind == "linear":
            return tnn.Linear(5, 3, dtype=torch.float64)
        return tnn.Conv2d(4, 6, 3, dtype=torch.float64)

    ours, ref = norms.weight_norm(make(), dim=dim), tp.weight_norm(make(), dim=dim)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[k], v, **TOL)
    # a different g and v, loaded both ways
    sd = {k: v + randn(v.shape, seed + i, 0.3) for i, (k, v) in enumerate(ref.state_dict().items())}
    ours.load_state_dict(sd)
    ref.load_state_dict(sd)
    torch.testing.assert_close(ours.weight, ref.weight, **TOL)
    x = randn((2, 5) if kind == "linear" else (2, 4, 5, 6), seed)
    ya, yb = ours(x), ref(x)
    torch.testing.assert_close(ya, yb, **TOL)
    ya.sum().backward()
    yb.sum().backward()
    for (ka, pa), (kb, pb) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        assert ka == kb
        torch.testing.assert_close(pa.grad, pb.grad, **TOL)
    ref.load_state_dict(ours.state_dict())


def test_weight_norm_bad_input():
    with pytest.raises(ValueError, match="no parameter or buffer with name 'kernel'"):
        norms.weight_norm(tnn.Linear(2, 3), name="kernel")
    for dim in (2, -3):  # torch's IndexError and message, then the weight's shape
        with pytest.raises(IndexError) as theirs:
            tp.weight_norm(tnn.Linear(2, 3), dim=dim)
        with pytest.raises(IndexError, match=r"shape \(3, 2\)") as ours:
            norms.weight_norm(tnn.Linear(2, 3), dim=dim)
        assert str(theirs.value) in str(ours.value)


@pytest.mark.parametrize("dim", [-4, -3, -2, -1, 0, 1, 2, 3])
def test_weight_norm_of_a_conv_takes_torch_s_negative_dims(dim):
    """Item 11 of issue 38: every dim torch accepts for a 4-D weight (-1: the whole tensor)."""
    torch.manual_seed(0)
    conv = tnn.Conv2d(3, 4, 3, dtype=torch.float64)
    ours, ref = norms.weight_norm(copy.deepcopy(conv), dim=dim), tp.weight_norm(conv, dim=dim)
    for k, v in ref.state_dict().items():
        assert ours.state_dict()[k].shape == v.shape, k
        torch.testing.assert_close(ours.state_dict()[k], v, **TOL)
    torch.testing.assert_close(ours.weight, ref.weight, **TOL)


# --------------------------------------------------------------------------
# spectral_norm
# --------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(
    kind=st.sampled_from(["linear", "conv", "convT"]),
    iters=st.sampled_from([1, 3]),
    seed=st.integers(0, 1000),
)
def test_spectral_norm_matches_torch(kind, iters, seed):
    def make():
        torch.manual_seed(seed)
        layer = {
            "linear": lambda: tnn.Linear(7, 4, dtype=torch.float64),
            "conv": lambda: tnn.Conv2d(3, 5, 3, dtype=torch.float64),
            "convT": lambda: tnn.ConvTranspose2d(3, 5, 3, dtype=torch.float64),
        }[kind]()
        return layer

    torch.manual_seed(seed + 1)
    ours = norms.spectral_norm(make(), n_power_iterations=iters)
    torch.manual_seed(seed + 1)
    ref = tp.spectral_norm(make(), n_power_iterations=iters)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    x = randn((2, 7) if kind == "linear" else (2, 3, 5, 6), seed)
    for _ in range(3):
        ya, yb = ours(x), ref(x)
        torch.testing.assert_close(ya, yb, **TOL)
    ya.sum().backward()
    yb.sum().backward()
    torch.testing.assert_close(
        ours.parametrizations.weight.original.grad, ref.parametrizations.weight.original.grad, **TOL
    )
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[k], v, **TOL)
    ours.eval(), ref.eval()
    torch.testing.assert_close(ours(x), ref(x), **TOL)
    ref.load_state_dict(ours.state_dict())


def test_spectral_norm_converges_to_the_largest_singular_value():
    torch.manual_seed(0)
    m = norms.spectral_norm(tnn.Linear(6, 4, dtype=torch.float64))
    for _ in range(100):
        w = m.weight
    assert abs(float(torch.linalg.matrix_norm(w.detach(), 2)) - 1) < 1e-8
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        norms.spectral_norm(tnn.Linear(2, 2), n_power_iterations=0)


# --------------------------------------------------------------------------
# adaptive_clip_grad_
# --------------------------------------------------------------------------


def agc_reference(p, g, clip, eps):
    """NFNets (deepmind-research/nfnets/optim.py): unitwise_norm, then clip."""
    if p.dim() <= 1:
        pn, gn = p.norm(), g.norm()
    else:
        dims = tuple(range(1, p.dim()))
        pn = (p**2).sum(dim=dims, keepdim=True).sqrt()
        gn = (g**2).sum(dim=dims, keepdim=True).sqrt()
    max_norm = pn.clamp_min(eps) * clip
    trigger = gn < max_norm
    return torch.where(trigger, g, g * (max_norm / gn.clamp_min(1e-6)))


@settings(max_examples=30, deadline=None)
@given(
    shape=st.sampled_from([(), (5,), (4, 3), (3, 2, 3, 3)]),
    clip=st.sampled_from([0.0, 0.01, 0.1, 1.0]),
    eps=st.sampled_from([1e-3, 1.0]),
    gscale=st.sampled_from([0.001, 0.1, 10.0]),
    seed=st.integers(0, 1000),
)
def test_agc_matches_the_nfnets_formula(shape, clip, eps, gscale, seed):
    p = torch.nn.Parameter(randn(shape, seed))
    q = torch.nn.Parameter(randn(shape, seed + 1))  # no grad: skipped
    g = randn(shape, seed + 2, gscale)
    p.grad = g.clone()
    want = agc_reference(p.detach(), g, clip, eps)
    norms.adaptive_clip_grad_([p, q], clip_factor=clip, eps=eps)
    torch.testing.assert_close(p.grad, want, **TOL)
    assert q.grad is None
    p.grad = g.clone()
    norms.adaptive_clip_grad_(p, clip_factor=clip, eps=eps)  # a single tensor
    torch.testing.assert_close(p.grad, want, **TOL)


def test_agc_clips_unit_by_unit():
    p = torch.nn.Parameter(torch.tensor([[3.0, 4.0], [0.0, 1.0]]))
    p.grad = torch.tensor([[0.3, 0.4], [0.0, 0.001]])  # ‖g‖/‖w‖: 0.1 and 0.001
    norms.adaptive_clip_grad_(p, clip_factor=0.01)
    torch.testing.assert_close(p.grad, torch.tensor([[0.03, 0.04], [0.0, 0.001]]))
    with pytest.raises(ValueError, match="clip_factor must be non-negative, got -0.1"):
        norms.adaptive_clip_grad_(p, clip_factor=-0.1)


def test_scaled_std_conv_reset_parameters_resets_the_gain_too():
    """As timm's ScaledStdConv2d: reset_parameters() re-draws the weight and sets the gain to 1."""
    from norms.modules import std_conv

    conv = norms.ScaledStdConv2d(3, 4, 3)
    with torch.no_grad():
        conv.gain.mul_(5.0)
        conv.weight.zero_()
    conv.reset_parameters()
    assert torch.equal(conv.gain, torch.ones(4, 1, 1, 1)) and conv.weight.abs().sum() > 0
    assert "ScaledStdConv2d" in std_conv.__all__
