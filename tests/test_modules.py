"""norms modules against torch.nn: construction, training steps, eval, state dicts.

Hypothesis draws the layer, its config (momentum incl. None, affine, bias,
track_running_stats, eps, groups other than 1 and C) and input shapes (C
different from every spatial size). Both layers get the same random gamma/beta,
run several training steps and then eval; outputs, input and parameter
gradients, running statistics, num_batches_tracked and state dicts must agree,
to 1e-10 in float64 and to dtype tolerance in float32/bfloat16/float16.
"""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch
import torch.nn as tnn
from hypothesis import given, settings
from hypothesis import strategies as st

import norms
from norms.modules._base import NormBase

CLASSES = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
]
TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.float16: dict(atol=5e-3, rtol=5e-3),
    torch.bfloat16: dict(atol=5e-2, rtol=2e-2),
}
GRAD_TOL = {torch.float64: TOL[torch.float64], torch.float32: dict(atol=2e-4, rtol=2e-4)}


def close(a, b, tol):
    assert (a is None) == (b is None)
    if a is None:
        return
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    torch.testing.assert_close(a.double(), b.double(), **tol)


def randn(shape, seed, dtype, scale=2.0, shift=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale + shift).to(dtype)


# Shapes: N = 3, C in {4, 6}, spatial sizes in {5, 7}, so no dim is mistaken
# for another and every statistic is over >= 3 elements (with 2 the input
# gradient is ~0 and pure rounding noise below float64).
N = 3
CS = [4, 6]
SPATIAL = [5, 7]


@st.composite
def layer_configs(draw, names=tuple(CLASSES)):
    """(class name, constructor args, kwargs, input shapes for the steps)."""
    name = draw(st.sampled_from(names))
    c = draw(st.sampled_from(CS))
    sp = lambda k: tuple(draw(st.lists(st.sampled_from(SPATIAL), min_size=k, max_size=k)))  # noqa: E731
    kwargs = {}
    if name.startswith("BatchNorm"):
        k = int(name[-2]) if name != "BatchNorm1d" else draw(st.sampled_from([0, 1]))
        shape = (N, c, *sp(k))
        args = (c,)
        kwargs = dict(
            momentum=draw(st.sampled_from([0.1, 0.3, 1.0, None])),
            affine=draw(st.booleans()),
            track_running_stats=draw(st.booleans()),
            bias=draw(st.booleans()),
            eps=draw(st.sampled_from([1e-5, 1e-3])),
        )
    elif name.startswith("InstanceNorm"):
        k = int(name[-2])
        batched = draw(st.booleans())
        shape = ((N,) if batched else ()) + (c, *sp(k))
        args = (c,)
        kwargs = dict(
            momentum=draw(st.sampled_from([0.1, 0.5, None])),
            affine=draw(st.booleans()),
            track_running_stats=draw(st.booleans()),
            bias=draw(st.booleans()),
        )
    elif name == "GroupNorm":
        shape = (N, c, *sp(draw(st.integers(1, 2))))
        divisors = [d for d in range(1, c + 1) if c % d == 0]
        g = draw(st.sampled_from(divisors))
        args = (g, c)
        kwargs = dict(affine=draw(st.booleans()), bias=draw(st.booleans()))
    else:  # LayerNorm / RMSNorm
        shape = (N, c, *sp(draw(st.integers(0, 2))))
        k = draw(st.integers(1, len(shape) - 1))
        ns = list(shape[len(shape) - k :])
        args = (ns if k > 1 or draw(st.booleans()) else ns[0],)
        if name == "LayerNorm":
            kwargs = dict(
                elementwise_affine=draw(st.booleans()),
                bias=draw(st.booleans()),
                eps=draw(st.sampled_from([1e-5, 1e-2])),
            )
        else:
            kwargs = dict(
                elementwise_affine=draw(st.booleans()),
                eps=draw(st.sampled_from([None, 1e-6])),
            )
    return name, args, kwargs, shape


def make_pair(name, args, kwargs, dtype):
    ours = getattr(norms, name)(*args, **kwargs, dtype=dtype)
    theirs = getattr(tnn, name)(*args, **kwargs, dtype=dtype)
    return ours, theirs


def randomize_params(ours, theirs, seed):
    """Same random gamma/beta in both (gamma kept away from 0)."""
    with torch.no_grad():
        for i, ((n1, p1), (n2, p2)) in enumerate(
            zip(ours.named_parameters(), theirs.named_parameters(), strict=True)
        ):
            assert n1 == n2
            v = randn(p1.shape, seed + i, p1.dtype, scale=0.5, shift=1.0)
            p1.copy_(v)
            p2.copy_(v)


def compare_state(ours, theirs, tol):
    s1, s2 = ours.state_dict(), theirs.state_dict()
    assert list(s1) == list(s2)
    for k in s1:
        assert s1[k].dtype == s2[k].dtype and s1[k].shape == s2[k].shape, k
        if s1[k].is_floating_point():
            close(s1[k], s2[k], tol)
        else:
            assert torch.equal(s1[k], s2[k]), k
    assert s1._metadata[""] == s2._metadata[""]  # state-dict version


def step(ours, theirs, shape, seed, dtype, backward=True):
    x = randn(shape, seed, dtype)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = ours(x1), theirs(x2)
    close(y1, y2, TOL[dtype])
    if backward:
        go = randn(shape, seed + 1000, dtype, scale=1.0, shift=0.0)
        for p in list(ours.parameters()) + list(theirs.parameters()):
            p.grad = None
        y1.backward(go)
        y2.backward(go)
        gt = GRAD_TOL.get(dtype, TOL[dtype])
        close(x1.grad, x2.grad, gt)
        for (_, p1), (_, p2) in zip(
            ours.named_parameters(), theirs.named_parameters(), strict=True
        ):
            close(p1.grad, p2.grad, gt)
    compare_state(ours, theirs, TOL[dtype])


def run_scenario(name, args, kwargs, shape, dtype, seed, backward=True):
    ours, theirs = make_pair(name, args, kwargs, dtype)
    assert repr(ours) == repr(theirs)
    compare_state(ours, theirs, dict(atol=0, rtol=0))  # initial values identical
    randomize_params(ours, theirs, seed)
    for i in range(3):  # training steps
        step(ours, theirs, shape, seed + 10 * i, dtype, backward)
    ours.eval()
    theirs.eval()
    step(ours, theirs, shape, seed + 99, dtype, backward)
    if name.startswith("BatchNorm") and ours.track_running_stats:
        assert int(ours.num_batches_tracked) == 3  # InstanceNorm never counts (torch neither)
    return ours, theirs


@settings(max_examples=60, deadline=None)
@given(
    cfg=layer_configs(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 2**16),
)
def test_matches_torch_train_then_eval(cfg, dtype, seed):
    name, args, kwargs, shape = cfg
    ours, theirs = run_scenario(name, args, kwargs, shape, dtype, seed)

    # state dicts load both ways, strictly, and give the same eval outputs
    fresh_torch = getattr(tnn, name)(*args, **kwargs, dtype=dtype).eval()
    fresh_ours = getattr(norms, name)(*args, **kwargs, dtype=dtype).eval()
    fresh_torch.load_state_dict(ours.state_dict(), strict=True)
    fresh_ours.load_state_dict(theirs.state_dict(), strict=True)
    compare_state(fresh_ours, theirs, dict(atol=0, rtol=0))
    compare_state(ours, fresh_torch, dict(atol=0, rtol=0))
    x = randn(shape, seed + 7, dtype)
    close(fresh_ours(x), theirs(x), TOL[dtype])
    close(ours(x), fresh_torch(x), TOL[dtype])


@settings(max_examples=20, deadline=None)
@given(
    cfg=layer_configs(),
    dtype=st.sampled_from([torch.float16, torch.bfloat16]),
    seed=st.integers(0, 2**16),
)
def test_low_precision_forward_and_running_stats(cfg, dtype, seed):
    """float16/bfloat16 parameters and input: outputs and buffers to dtype tolerance."""
    name, args, kwargs, shape = cfg
    with torch.no_grad():
        run_scenario(name, args, kwargs, shape, dtype, seed, backward=False)


# ---------------------------------------------------------------- construction


@pytest.mark.parametrize("name", CLASSES)
def test_constructor_signature_matches_torch(name):
    ours = inspect.signature(getattr(norms, name).__init__)
    theirs = inspect.signature(getattr(tnn, name).__init__)
    assert list(ours.parameters) == list(theirs.parameters)
    for p, q in zip(ours.parameters.values(), theirs.parameters.values(), strict=True):
        assert (p.kind, p.default) == (q.kind, q.default), (name, p.name)


CTOR_CASES = [
    ("BatchNorm2d", (5,), {}),
    ("BatchNorm1d", (5,), dict(affine=False)),
    ("BatchNorm3d", (5,), dict(track_running_stats=False, bias=False)),
    ("InstanceNorm2d", (5,), {}),
    ("InstanceNorm1d", (5,), dict(affine=True, track_running_stats=True)),
    ("InstanceNorm3d", (5,), dict(affine=True, bias=False)),
    ("LayerNorm", ([3, 4],), {}),
    ("LayerNorm", (4,), dict(elementwise_affine=False)),
    ("LayerNorm", (torch.Size([4]),), dict(bias=False)),
    ("RMSNorm", ([3, 4],), {}),
    ("RMSNorm", (4,), dict(eps=1e-6, elementwise_affine=False)),
    ("GroupNorm", (2, 6), {}),
    ("GroupNorm", (3, 6), dict(affine=False)),
    ("GroupNorm", (3, 6), dict(bias=False)),
]


@pytest.mark.parametrize("name,args,kwargs", CTOR_CASES)
@pytest.mark.parametrize("dtype", [None, torch.float64, torch.float16])
def test_construction_matches_torch(name, args, kwargs, dtype):
    ours = getattr(norms, name)(*args, **kwargs, dtype=dtype)
    theirs = getattr(tnn, name)(*args, **kwargs, dtype=dtype)
    assert repr(ours) == repr(theirs)
    assert ours.extra_repr() == theirs.extra_repr()
    # registered names, including the ones registered as None, in the same order
    assert list(ours._parameters) == list(theirs._parameters)
    assert list(ours._buffers) == list(theirs._buffers)
    for d1, d2 in ((ours._parameters, theirs._parameters), (ours._buffers, theirs._buffers)):
        for k in d1:
            a, b = d1[k], d2[k]
            assert (a is None) == (b is None), k
            if a is not None:
                assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
                assert torch.equal(a, b), k
                assert a.requires_grad == b.requires_grad
    for attr in (
        "num_features",
        "eps",
        "momentum",
        "affine",
        "track_running_stats",
        "normalized_shape",
        "elementwise_affine",
        "num_groups",
        "num_channels",
    ):
        assert getattr(ours, attr, "absent") == getattr(theirs, attr, "absent"), attr
    compare_state(ours, theirs, dict(atol=0, rtol=0))
    if getattr(ours, "num_batches_tracked", None) is not None:
        assert ours.num_batches_tracked.dtype == torch.long


def test_meta_device():
    m = norms.BatchNorm2d(3, device="meta")
    assert m.weight.device.type == "meta" and m.running_mean.device.type == "meta"
    assert m.num_batches_tracked.device.type == "meta"
    assert norms.LayerNorm(4, device="meta").weight.device.type == "meta"


def test_class_hierarchy():
    for name in (
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
    ):
        assert issubclass(getattr(norms, name), NormBase)
        assert issubclass(getattr(norms, name), torch.nn.Module)
    for name in ("LayerNorm", "RMSNorm", "GroupNorm"):
        assert issubclass(getattr(norms, name), torch.nn.Module)
        assert not issubclass(getattr(norms, name), NormBase)


def test_reset_parameters_and_running_stats():
    m = norms.BatchNorm2d(3)
    with torch.no_grad():
        m.weight.fill_(2.0)
        m.bias.fill_(3.0)
    m(torch.randn(4, 3, 5, 5) + 7)
    assert m.num_batches_tracked.item() == 1 and m.running_mean.abs().sum() > 0
    m.reset_running_stats()
    assert torch.equal(m.running_mean, torch.zeros(3))
    assert torch.equal(m.running_var, torch.ones(3))
    assert m.num_batches_tracked.item() == 0
    assert m.weight.eq(2).all()  # untouched by reset_running_stats
    m.reset_parameters()
    assert m.weight.eq(1).all() and m.bias.eq(0).all()


# ---------------------------------------------------------------- train / eval semantics


def test_mode_comes_from_self_training_not_grad_mode():
    m, t = norms.BatchNorm1d(3), tnn.BatchNorm1d(3)
    x = torch.randn(8, 3) * 2 + 1
    with torch.no_grad():  # still training: batch stats and updates
        y1, y2 = m(x), t(x)
    torch.testing.assert_close(y1, y2)
    assert m.num_batches_tracked.item() == 1
    torch.testing.assert_close(m.running_mean, t.running_mean)
    m.eval()
    t.eval()
    xr = x.clone().requires_grad_()  # grad enabled, but eval: running stats, no update
    torch.testing.assert_close(m(xr), t(x))
    assert m.num_batches_tracked.item() == 1


def test_momentum_none_is_cumulative_average():
    m = norms.BatchNorm1d(2, momentum=None)
    xs = [torch.randn(5, 2, dtype=torch.float64) * (i + 1) + i for i in range(4)]
    for x in xs:
        m(x.to(torch.float32))
    expected = torch.stack([x.float().mean(0) for x in xs]).mean(0)
    torch.testing.assert_close(m.running_mean, expected)
    expected_var = torch.stack([x.float().var(0, correction=1) for x in xs]).mean(0)
    torch.testing.assert_close(m.running_var, expected_var, rtol=1e-5, atol=1e-5)


def test_track_running_stats_false_uses_batch_stats_in_eval():
    m = norms.BatchNorm2d(3, track_running_stats=False)
    assert m.running_mean is None and m.running_var is None and m.num_batches_tracked is None
    assert "running_mean" not in m.state_dict()
    x = torch.randn(4, 3, 5, 5)
    y_train = m(x)
    y_eval = m.eval()(x)
    torch.testing.assert_close(y_train, y_eval)
    torch.testing.assert_close(y_eval, tnn.BatchNorm2d(3, track_running_stats=False).eval()(x))


def test_instance_norm_unbatched_and_channel_warning():
    m, t = norms.InstanceNorm2d(3), tnn.InstanceNorm2d(3)
    x = torch.randn(3, 5, 7)
    torch.testing.assert_close(m(x), t(x))
    with pytest.warns(UserWarning, match="does not match num_features"):
        y = m(torch.randn(2, 4, 5, 7))  # affine=False: C unused, like torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(y.shape, t(torch.randn(2, 4, 5, 7)).shape)


def test_modules_compute_through_norms_functional(monkeypatch):
    calls = []
    for fname in ("batch_norm", "instance_norm", "layer_norm", "rms_norm", "group_norm"):
        real = getattr(norms.functional, fname)

        def spy(*a, _real=real, _name=fname, **k):
            calls.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(norms.functional, fname, spy)
    x = torch.randn(3, 4, 5)
    norms.BatchNorm1d(4)(x)
    norms.InstanceNorm1d(4)(x)
    norms.LayerNorm(5)(x)
    norms.RMSNorm(5)(x)
    norms.GroupNorm(2, 4)(x)
    assert calls == ["batch_norm", "instance_norm", "layer_norm", "rms_norm", "group_norm"]


# ---------------------------------------------------------------- state dict compatibility


@pytest.mark.parametrize("src_lib,dst_lib", [(norms, tnn), (tnn, norms)])
def test_old_state_dict_without_num_batches_tracked(src_lib, dst_lib):
    """Pre-version-2 BatchNorm checkpoints lack num_batches_tracked: loads with 0."""
    src = src_lib.BatchNorm2d(3)
    src(torch.randn(4, 3, 2, 2))
    sd = src.state_dict()
    del sd["num_batches_tracked"]
    sd._metadata[""]["version"] = 1
    dst = dst_lib.BatchNorm2d(3)
    dst.load_state_dict(sd, strict=True)
    assert dst.num_batches_tracked.item() == 0
    torch.testing.assert_close(dst.running_mean, src.running_mean)


def test_state_dict_nested_roundtrip():
    """Inside a Sequential, keys, values and dtypes carry over both ways."""
    ours = torch.nn.Sequential(norms.BatchNorm1d(4), norms.LayerNorm(4), norms.GroupNorm(2, 4))
    theirs = torch.nn.Sequential(tnn.BatchNorm1d(4), tnn.LayerNorm(4), tnn.GroupNorm(2, 4))
    ours(torch.randn(5, 4))
    theirs.load_state_dict(ours.state_dict(), strict=True)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    compare_state(ours, theirs, dict(atol=0, rtol=0))


def test_instance_norm_rejects_prehistoric_running_stats():
    sd = {"running_mean": torch.zeros(3), "running_var": torch.ones(3)}
    for lib in (norms, tnn):
        with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
            lib.InstanceNorm1d(3).load_state_dict(sd)


# ---------------------------------------------------------------- docstrings


# (every docstring example of norms/ runs in tests/test_doctests.py)


@pytest.mark.parametrize("name", CLASSES)
def test_docstrings_cite_the_paper_and_show_the_maths(name):
    doc = getattr(norms, name).__doc__
    for section in (".. math::", "Args:", "Shape:", "Example::", "arxiv.org"):
        assert section in doc, (name, section)
