"""Tests for norms/autograd.py: the hand-derived backward passes.

What we check:

* ``gradcheck`` and ``gradgradcheck`` in float64 for every Function, with and
  without weight and bias.
* Outputs and gradients against torch's own ``batch_norm`` (training mode),
  ``layer_norm`` and ``rms_norm``. Shapes, data and upstream gradients come
  from hypothesis. Tolerance is 1e-10 in float64 and about 1e-5 in float32.
* Second derivatives against torch's double backward.
* No torch normalization op is dispatched.
* Bad input raises the exception torch.nn.functional raises, and the message names both shapes.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck, gradgradcheck
from torch.utils._python_dispatch import TorchDispatchMode

from norms.autograd import (
    BatchNormFunction,
    LayerNormFunction,
    RMSNormFunction,
    batch_norm,
    layer_norm,
    rms_norm,
)

F64 = torch.float64
KINDS = ("batch", "layer", "rms")


# ---------------------------------------------------------------------------
# helpers: one call signature for all three layers, ours and torch's
# ---------------------------------------------------------------------------


def param_shape(kind: str, x_shape: tuple[int, ...], k: int | None) -> tuple[int, ...]:
    if kind == "batch":
        return (x_shape[1],)
    return tuple(x_shape[len(x_shape) - k :])


def ours(kind, x, k, w, b, eps):
    if kind == "batch":
        return batch_norm(x, w, b, eps)
    shape = tuple(x.shape[x.dim() - k :])
    if kind == "layer":
        return layer_norm(x, shape, w, b, eps)
    assert b is None
    return rms_norm(x, shape, w, eps)


def reference(kind, x, k, w, b, eps):
    if kind == "batch":
        return F.batch_norm(x, None, None, w, b, training=True, eps=eps)
    shape = list(x.shape[x.dim() - k :])
    if kind == "layer":
        return F.layer_norm(x, shape, w, b, eps)
    assert b is None
    return F.rms_norm(x, shape, w, eps)


def make_leaves(kind, shape, k, use_w, use_b, dtype, gen, scale=1.0, offset=0.0):
    x = torch.randn(shape, generator=gen, dtype=dtype) * scale + offset
    ps = param_shape(kind, shape, k)
    # gamma around 1 and beta around 0, but clearly not 1 and 0, so bugs show.
    w = 1.0 + 0.5 * torch.randn(ps, generator=gen, dtype=dtype) if use_w else None
    b = torch.randn(ps, generator=gen, dtype=dtype) if use_b else None
    return x, w, b


# ---------------------------------------------------------------------------
# gradcheck / gradgradcheck
# ---------------------------------------------------------------------------

GRAD_CASES = [
    # (kind, x shape, k = number of normalized trailing dims)
    ("batch", (3, 4, 2, 5), None),  # C=4 differs from N and the spatial sizes
    ("batch", (5, 3), None),  # (N, C): no spatial dims
    ("layer", (3, 4, 5), 1),
    ("layer", (3, 4, 5), 2),
    ("layer", (4, 5), 2),  # no leading dims: dgamma is not a sum
    ("rms", (3, 4, 5), 1),
    ("rms", (3, 4, 5), 2),
]
AFFINE = {
    "plain": (False, False),
    "weight": (True, False),
    "bias": (False, True),
    "affine": (True, True),
}


def _id(case):
    kind, shape, k = case
    return f"{kind}-{'x'.join(map(str, shape))}" + ("" if k is None else f"-k{k}")


GRADCHECK_PARAMS = [
    pytest.param(case, use_w, use_b, id=f"{_id(case)}-{name}")
    for case in GRAD_CASES
    for name, (use_w, use_b) in AFFINE.items()
    if not (case[0] == "rms" and use_b)  # RMSNorm has no bias
]


@pytest.mark.parametrize("case,use_w,use_b", GRADCHECK_PARAMS)
def test_gradcheck_and_gradgradcheck(case, use_w, use_b):
    kind, shape, k = case
    gen = torch.Generator().manual_seed(0)
    x, w, b = make_leaves(kind, shape, k, use_w, use_b, F64, gen)
    present = [t for t in (x, w, b) if t is not None]
    for t in present:
        t.requires_grad_(True)

    def fn(*args):
        it = iter(args)
        xx = next(it)
        ww = next(it) if use_w else None
        bb = next(it) if use_b else None
        return ours(kind, xx, k, ww, bb, 1e-3)

    assert gradcheck(fn, tuple(present))
    assert gradgradcheck(fn, tuple(present))


# ---------------------------------------------------------------------------
# against torch's own autograd, on hypothesis shapes
# ---------------------------------------------------------------------------


@st.composite
def problems(draw, kind):
    if kind == "batch":
        n = draw(st.integers(1, 4))
        c = draw(st.integers(1, 5))
        spatial = draw(st.lists(st.integers(1, 4), max_size=2))
        shape = (n, c, *spatial)
        assume(math.prod(shape) // c > 1)
        k = None
    else:
        lead = draw(st.lists(st.integers(1, 4), max_size=2))
        norm = draw(st.lists(st.integers(1, 6), min_size=1, max_size=2))
        shape = (*lead, *norm)
        k = len(norm)
    use_w = draw(st.booleans())
    use_b = kind != "rms" and draw(st.booleans())
    eps_choices = [1e-5, 1e-3, 0.1] + ([None] if kind == "rms" else [])
    eps = draw(st.sampled_from(eps_choices))
    # which leaves ask for a gradient; exercises needs_input_grad
    req_x = draw(st.booleans())
    req_w = use_w and draw(st.booleans())
    req_b = use_b and draw(st.booleans())
    if not (req_x or req_w or req_b):
        req_x = True
    return dict(
        shape=shape,
        k=k,
        use_w=use_w,
        use_b=use_b,
        eps=eps,
        req=(req_x, req_w, req_b),
        scale=draw(st.sampled_from([0.01, 1.0, 30.0])),
        offset=draw(st.sampled_from([0.0, 3.0])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def _max_rstd(kind, x, k, eps):
    """The largest 1/sigma (1/r for RMSNorm), computed in float64."""
    x = x.double()
    dims = (0, *range(2, x.dim())) if kind == "batch" else tuple(range(x.dim() - k, x.dim()))
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    if kind == "rms":
        ms = x.square().mean(dim=dims)
    else:
        ms = x.var(dim=dims, unbiased=False)
    return torch.rsqrt(ms + eps).max().item()


def check_against_torch(kind, p, dtype, tol):
    gen = torch.Generator().manual_seed(p["seed"])
    x, w, b = make_leaves(
        kind, p["shape"], p["k"], p["use_w"], p["use_b"], dtype, gen, p["scale"], p["offset"]
    )
    dy = torch.randn(p["shape"], generator=gen, dtype=dtype)
    rstd_max = _max_rstd(kind, x, p["k"], p["eps"])
    if dtype == torch.float32:
        # Rounding x to float32 moves x_hat by about ulp(|x|) / sigma. Torch's
        # kernels and ours round differently, so allow for |x| / sigma. Most
        # draws have |x| / sigma of a few. It is large only for a near-constant
        # row or channel (or m = 1), where sigma is close to sqrt(eps).
        tol = tol * max(1.0, x.abs().max().item() * rstd_max)

    def leaves():
        out = [
            None if t is None else t.clone().requires_grad_(r)
            for t, r in zip((x, w, b), p["req"], strict=True)
        ]
        return out, [t for t in out if t is not None and t.requires_grad]

    (x1, w1, b1), wrt1 = leaves()
    (x2, w2, b2), wrt2 = leaves()
    y1 = ours(kind, x1, p["k"], w1, b1, p["eps"])
    y2 = reference(kind, x2, p["k"], w2, b2, p["eps"])
    torch.testing.assert_close(y1, y2, rtol=tol, atol=tol)

    g1 = torch.autograd.grad(y1, wrt1, dy)
    g2 = torch.autograd.grad(y2, wrt2, dy)
    g = dy if w is None else dy * (w.reshape(-1, *[1] * (x.dim() - 2)) if kind == "batch" else w)
    for t, a, e in zip(wrt1, g1, g2, strict=True):
        # Compare each gradient at its natural size. dx = (1/sigma)(g - ...),
        # so it is of size max(1/sigma) * max|g| even when it nearly cancels
        # (exactly 0 when m = 1). Parameter gradients are sums: use their size.
        size = e.abs().max().item()
        if t is wrt1[0] and p["req"][0]:
            size = max(size, rstd_max * g.abs().max().item())
        torch.testing.assert_close(a, e, rtol=tol, atol=tol * max(1.0, size))


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_matches_torch_float64(kind, data):
    check_against_torch(kind, data.draw(problems(kind)), F64, 1e-10)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_matches_torch_float32(kind, data):
    p = data.draw(problems(kind))
    # x = 3 + 0.01 * noise is badly conditioned in float32: |x| / sigma is
    # about 300. We test that case in float64 only.
    assume(p["offset"] == 0.0 or p["scale"] >= 1.0)
    check_against_torch(kind, p, torch.float32, 1e-5)


# ---------------------------------------------------------------------------
# second derivatives against torch's double backward
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", GRAD_CASES, ids=[_id(c) for c in GRAD_CASES])
def test_double_backward_matches_torch(case):
    kind, shape, k = case
    use_b = kind != "rms"
    gen = torch.Generator().manual_seed(1)
    x, w, b = make_leaves(kind, shape, k, True, use_b, F64, gen)
    dy = torch.randn(shape, generator=gen, dtype=F64)
    vx = torch.randn(shape, generator=gen, dtype=F64)
    vw = torch.randn(w.shape, generator=gen, dtype=F64)

    def second(fn):
        xx = x.clone().requires_grad_()
        ww = w.clone().requires_grad_()
        bb = None if b is None else b.clone().requires_grad_()
        gy = dy.clone().requires_grad_()
        y = fn(kind, xx, k, ww, bb, 1e-3)
        dx, dw = torch.autograd.grad(y, (xx, ww), gy, create_graph=True)
        # a scalar function of the first derivatives, differentiated again
        s = (dx * vx).sum() + (dw * vw).sum()
        return torch.autograd.grad(s, (xx, ww, gy))

    for a, e in zip(second(ours), second(reference), strict=True):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------
# no torch normalization kernel anywhere
# ---------------------------------------------------------------------------


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("case", GRAD_CASES[:1] + GRAD_CASES[2:3] + GRAD_CASES[5:6], ids=KINDS)
def test_uses_no_torch_norm_ops(case):
    kind, shape, k = case
    gen = torch.Generator().manual_seed(2)
    x, w, b = make_leaves(kind, shape, k, True, kind != "rms", F64, gen)
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    rec = _RecordOps()
    with rec:
        y = ours(kind, x, k, w, b, 1e-5)
        grads = torch.autograd.grad(y.square().sum(), leaves, create_graph=True)
        torch.autograd.grad(sum(g.sum() for g in grads), leaves)
    assert rec.names, "dispatch mode recorded nothing"
    assert not [n for n in rec.names if "norm" in n], sorted(rec.names)


def test_functions_are_autograd_functions():
    for fn in (BatchNormFunction, LayerNormFunction, RMSNormFunction):
        assert issubclass(fn, torch.autograd.Function)
    x = torch.randn(2, 3, 4, dtype=F64, requires_grad=True)
    y = layer_norm(x, 4)
    assert type(y.grad_fn).__name__ == "LayerNormFunctionBackward"


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def _raises_naming(call, *fragments, torch_call=None):
    """``call`` raises, with every fragment in the message, and the exception type that
    ``torch_call`` (torch.nn.functional on the same input) raises; RuntimeError by default."""
    expected = RuntimeError
    if torch_call is not None:
        with pytest.raises(Exception) as ref:
            torch_call()
        expected = type(ref.value)
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is expected, (
        f"{type(info.value).__name__} where torch raises {expected.__name__}"
    )
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"


def test_batch_norm_one_value_per_channel_mirrors_torch():
    x = torch.randn(1, 4)
    with pytest.raises(ValueError) as ref:
        F.batch_norm(x, None, None, training=True)
    with pytest.raises(
        ValueError,
        match=re.escape("Expected more than 1 value per channel when training, got input size"),
    ) as got:
        batch_norm(x)
    assert str(got.value) == str(ref.value)
    x = torch.randn(1, 4, 1, 1)
    _raises_naming(
        lambda: batch_norm(x),
        "torch.Size([1, 4, 1, 1])",
        torch_call=lambda: F.batch_norm(x, None, None, training=True),
    )


def test_batch_norm_needs_channel_dim():
    x = torch.randn(4)
    _raises_naming(
        lambda: batch_norm(x),
        "(N, C, *)",
        "(4,)",
        torch_call=lambda: F.batch_norm(x, None, None, training=True),
    )


@pytest.mark.parametrize("which", ["weight", "bias"])
def test_batch_norm_param_shape(which):
    x = torch.randn(2, 4, 5)
    bad = torch.ones(3)
    kwargs = {which: bad}
    _raises_naming(lambda: batch_norm(x, **kwargs), which, "3", "(2, 4, 5)")


@pytest.mark.parametrize("fn", ["layer", "rms"])
def test_normalized_shape_must_match_trailing_dims(fn):
    call = layer_norm if fn == "layer" else rms_norm
    ref = F.layer_norm if fn == "layer" else F.rms_norm
    for shape, ns, fragments in [
        ((3, 4), (5,), ("(5,)", "(3, 4)")),
        ((3, 4), (3,), ("(3,)", "(3, 4)")),
        ((4,), (3, 4), ("(3, 4)", "(4,)")),
        ((3, 4), (), ("normalized_shape",)),
    ]:
        x = torch.randn(shape)
        _raises_naming(lambda: call(x, ns), *fragments, torch_call=lambda: ref(x, list(ns)))  # noqa: B023


@pytest.mark.parametrize("fn,which", [("layer", "weight"), ("layer", "bias"), ("rms", "weight")])
def test_normalized_shape_param_shape(fn, which):
    x = torch.randn(2, 3, 4)
    bad = torch.ones(4)
    if fn == "layer":
        call = lambda: layer_norm(x, (3, 4), **{which: bad})  # noqa: E731
    else:
        call = lambda: rms_norm(x, (3, 4), bad)  # noqa: E731
    _raises_naming(call, which, "(3, 4)", "(4,)")  # torch: RuntimeError


def test_function_apply_validates_too():
    # The checks live in forward, so calling the Function directly is safe too.
    _raises_naming(
        lambda: BatchNormFunction.apply(torch.randn(2, 4), torch.ones(3), None, 1e-5),
        "3",
        "(2, 4)",
    )
    _raises_naming(
        lambda: LayerNormFunction.apply(torch.randn(2, 4), (5,), None, None, 1e-5), "(5,)", "(2, 4)"
    )
    _raises_naming(
        lambda: RMSNormFunction.apply(torch.randn(2, 4), (5,), None, 1e-5), "(5,)", "(2, 4)"
    )
