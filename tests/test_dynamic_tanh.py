"""norms.DynamicTanh and norms.convert_ln_to_dyt against the formula of Zhu et al. (2025) and the
parameter layout of the authors' published module.

``AuthorsDynamicTanh`` below is NOT the authors' code: it is written here from the paper's formula,
y = tanh(alpha x) * weight + bias, and the parameter layout of ``dynamic_tanh.py`` in
github.com/jiachenzhu/DyT (``alpha`` of shape (1,) filled with ``alpha_init_value``, ``weight``
ones and ``bias`` zeros of shape ``normalized_shape``; with ``channels_last=False``, ``weight`` and
``bias`` are indexed ``[:, None, None]``), so that the state_dict tests load both ways.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import norms


class AuthorsDynamicTanh(nn.Module):
    def __init__(self, normalized_shape, channels_last, alpha_init_value=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), float(alpha_init_value)))
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.channels_last = channels_last

    def forward(self, x):
        y = torch.tanh(self.alpha * x)
        if self.channels_last:
            return y * self.weight + self.bias
        return y * self.weight[:, None, None] + self.bias[:, None, None]


def _randomize(module, gen):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) + 0.5)


@settings(max_examples=40, deadline=None)
@given(
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    ns=st.lists(st.integers(1, 6), min_size=1, max_size=2),
    alpha=st.floats(0.05, 5.0),
    seed=st.integers(0, 2**16),
)
def test_channels_last_matches_the_formula_and_the_authors_layout(lead, ns, alpha, seed):
    gen = torch.Generator().manual_seed(seed)
    ours = norms.DynamicTanh(ns, alpha_init_value=alpha, dtype=torch.float64)
    assert float(ours.alpha.detach()) == pytest.approx(alpha)
    _randomize(ours, gen)
    x = torch.randn(*lead, *ns, generator=gen, dtype=torch.float64) * 3
    expected = torch.tanh(ours.alpha * x) * ours.weight + ours.bias
    torch.testing.assert_close(ours(x), expected)
    theirs = AuthorsDynamicTanh(ns, True).double()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    torch.testing.assert_close(theirs(x), ours(x))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 3),
    c=st.integers(2, 7),
    h=st.integers(1, 5),
    w=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_channels_first_broadcasts_over_c_and_loads_both_ways(n, c, h, w, seed):
    gen = torch.Generator().manual_seed(seed)
    theirs = AuthorsDynamicTanh(c, False, alpha_init_value=0.8).double()
    _randomize(theirs, gen)
    ours = norms.DynamicTanh(c, channels_last=False, dtype=torch.float64)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x = torch.randn(n, c, h, w, generator=gen, dtype=torch.float64)
    expected = torch.tanh(theirs.alpha * x) * theirs.weight.view(1, c, 1, 1) + theirs.bias.view(
        1, c, 1, 1
    )
    torch.testing.assert_close(ours(x), expected)
    torch.testing.assert_close(ours(x), theirs(x))
    # and back: our state_dict into the authors' layout
    back = AuthorsDynamicTanh(c, False).double()
    back.load_state_dict(ours.state_dict(), strict=True)
    torch.testing.assert_close(back(x), ours(x))


def test_parameters_state_dict_and_repr():
    m = norms.DynamicTanh((3, 4), alpha_init_value=0.25)
    assert list(m.state_dict()) == ["alpha", "weight", "bias"]
    assert m.alpha.shape == (1,) and m.weight.shape == (3, 4) and m.bias.shape == (3, 4)
    assert torch.equal(m.weight, torch.ones(3, 4)) and torch.equal(m.bias, torch.zeros(3, 4))
    assert "alpha_init_value=0.25" in repr(m)
    with torch.no_grad():
        m.alpha.fill_(3.0)
    m.reset_parameters()
    assert float(m.alpha.detach()) == 0.25


def test_gradients_flow_to_alpha():
    m = norms.DynamicTanh(5, dtype=torch.float64)
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda x, a: norms.functional.dynamic_tanh(x, a), (x, m.alpha))


def test_wrong_trailing_shape_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"normalized_shape=\(8,\).*\(2, 3, 5\)"):
        norms.DynamicTanh(8)(torch.randn(2, 3, 5))


def test_channels_first_wrong_channel_count_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"normalized_shape=\(4,\).*\(2, 3, 4, 4\)"):
        norms.DynamicTanh(4, channels_last=False)(torch.randn(2, 3, 4, 4))
    with pytest.raises(RuntimeError, match=r"\(N, 4, H, W\).*\(2, 4, 4\)"):
        norms.DynamicTanh(4, channels_last=False)(torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match="one channel count"):
        norms.DynamicTanh((2, 3), channels_last=False)


def test_authors_layout_would_broadcast_silently():
    # what the error above protects against: the formula alone accepts a mismatched shape
    theirs = AuthorsDynamicTanh(1, True)
    assert theirs(torch.randn(2, 5)).shape == (2, 5)
    with pytest.raises(RuntimeError):
        norms.DynamicTanh(1)(torch.randn(2, 5))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.blocks = nn.Sequential(
            nn.LayerNorm(6), nn.ReLU(), nn.Sequential(norms.LayerNorm([6]), nn.Linear(6, 6))
        )
        self.rms = norms.RMSNorm(6)
        self.bn = nn.BatchNorm1d(6)


def test_convert_replaces_every_layernorm_at_any_depth_and_nothing_else():
    torch.manual_seed(0)
    net = _Net().double()
    before = {k: v.clone() for k, v in net.state_dict().items() if "blocks.0" not in k}
    before = {k: v for k, v in before.items() if "blocks.2.0" not in k}
    out = norms.convert_ln_to_dyt(net)
    assert out is net
    assert isinstance(net.blocks[0], norms.DynamicTanh)
    assert isinstance(net.blocks[2][0], norms.DynamicTanh)
    assert net.blocks[0].normalized_shape == (6,) and net.blocks[2][0].normalized_shape == (6,)
    assert net.blocks[0].weight.dtype == torch.float64
    assert isinstance(net.rms, norms.RMSNorm) and isinstance(net.bn, nn.BatchNorm1d)
    after = net.state_dict()
    for k, v in before.items():
        assert torch.equal(after[k], v), k
    assert not any(isinstance(m, (nn.LayerNorm, norms.LayerNorm)) for m in net.modules())


def test_convert_the_root_and_a_transformer_layer():
    root = norms.convert_ln_to_dyt(nn.LayerNorm((3, 4), dtype=torch.float64))
    assert isinstance(root, norms.DynamicTanh) and root.normalized_shape == (3, 4)
    assert root.weight.dtype == torch.float64
    layer = norms.convert_ln_to_dyt(norms.TransformerEncoderLayer(8, 2, 16, batch_first=True))
    assert isinstance(layer.norm1, norms.DynamicTanh) and isinstance(layer.norm2, norms.DynamicTanh)
    assert layer(torch.randn(2, 5, 8)).shape == (2, 5, 8)


def test_converted_state_dict_loads_into_the_authors_layout():
    net = norms.convert_ln_to_dyt(nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)))
    ref = nn.Sequential(nn.Linear(4, 4), AuthorsDynamicTanh(4, True))
    ref.load_state_dict(net.state_dict(), strict=True)
    net.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(ref(x), net(x))


@settings(max_examples=20, deadline=None)
@given(
    dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32, torch.float64]),
    affine=st.booleans(),
    lib=st.sampled_from(["torch", "norms"]),
    depth=st.integers(0, 2),
)
def test_convert_keeps_the_model_s_dtype_for_layernorms_without_parameters(
    dtype, affine, lib, depth
):
    """Issue 38, item 9: a LayerNorm(elementwise_affine=False) in a bfloat16 or float64 model
    became a float32 DynamicTanh, and the next layer failed on the dtype."""
    ln = (nn.LayerNorm if lib == "torch" else norms.LayerNorm)(
        4, elementwise_affine=affine, dtype=dtype
    )
    inner: nn.Module = ln
    for _ in range(depth):  # parameter-free wrappers around the norm
        inner = nn.Sequential(inner)
    model = nn.Sequential(nn.Linear(4, 4, dtype=dtype), inner, nn.Linear(4, 4, dtype=dtype))
    model = norms.convert_ln_to_dyt(model)
    dyt = next(m for m in model.modules() if isinstance(m, norms.DynamicTanh))
    assert all(p.dtype == dtype for p in dyt.parameters())
    assert model(torch.randn(2, 4).to(dtype)).dtype == dtype
    meta = norms.convert_ln_to_dyt(
        nn.Sequential(nn.Linear(4, 4, device="meta"), nn.LayerNorm(4, elementwise_affine=False))
    )
    assert all(p.device.type == "meta" for p in meta[1].parameters())


@pytest.mark.parametrize("lib", ["torch", "norms"])
@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_convert_matches_the_layernorm_s_parameters_device_and_dtype(
    lib, device, dtype, affine, bias
):
    """Issue 39, item 8: the DynamicTanh of a LayerNorm has the LayerNorm's parameters and alpha
    (none but alpha for elementwise_affine=False, no bias for bias=False), on the LayerNorm's
    device and in its dtype (the model's, when the LayerNorm has no parameter)."""
    LN = nn.LayerNorm if lib == "torch" else norms.LayerNorm
    ln = LN((2, 3), elementwise_affine=affine, bias=bias, device=device, dtype=dtype)
    model = nn.Sequential(nn.Linear(3, 3, device=device, dtype=dtype), ln)
    dyt = norms.convert_ln_to_dyt(model, alpha_init_value=0.7)[1]
    assert isinstance(dyt, norms.DynamicTanh) and dyt.normalized_shape == (2, 3)
    names = [n for n, _ in dyt.named_parameters()]
    assert names == ["alpha"] + [n for n, _ in ln.named_parameters()]
    assert list(dyt.state_dict()) == names
    assert all(p.device.type == device and p.dtype == dtype for p in dyt.parameters())
    x = torch.randn(4, 2, 3, device=device).to(dtype)
    y = model(x)
    assert y.device.type == device and y.dtype == dtype
    if device == "cpu":
        want = torch.tanh(0.7 * model[0](x))
        if affine:  # gamma = 1, beta = 0 at the start
            want = want * dyt.weight + (dyt.bias if bias else 0)
        torch.testing.assert_close(y, want)


def test_without_parameters_the_shape_is_still_checked():
    dyt = norms.DynamicTanh((2, 3), elementwise_affine=False)
    assert list(dyt.state_dict()) == ["alpha"] and dyt.weight is None and dyt.bias is None
    assert "elementwise_affine=False" in repr(dyt)
    assert "bias=False" in repr(norms.DynamicTanh(3, bias=False))
    torch.testing.assert_close(dyt(torch.ones(4, 2, 3)), torch.tanh(torch.full((4, 2, 3), 0.5)))
    with pytest.raises(RuntimeError, match=r"normalized_shape=\(2, 3\).*\(4, 3, 2\)"):
        dyt(torch.ones(4, 3, 2))
    first = norms.DynamicTanh(3, channels_last=False, elementwise_affine=False)
    with pytest.raises(RuntimeError, match=r"\(N, 3, H, W\).*\(2, 4, 5, 5\)"):
        first(torch.ones(2, 4, 5, 5))
    assert first(torch.ones(2, 3, 5, 5)).shape == (2, 3, 5, 5)
