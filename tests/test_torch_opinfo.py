"""norms against torch's own test inputs for the same ops and modules.

torch's test suite describes each op by an OpInfo (``op_db`` in
``torch.testing._internal.common_methods_invocations``): sample inputs that
must work and error inputs that must raise. Each module has a ModuleInfo
(``module_db`` in ``common_modules``) with constructor and forward inputs, in
training and in eval mode, and error inputs. Inputs nobody here chose: they
include the edge cases torch's authors met (empty batches, 1-D inputs, eps
and momentum outside the usual range, ``normalized_shape=()``).

Every sample is run through torch and through norms (CPU, float32 and float64):
outputs, running statistics after the call and, for the functions, input
gradients must agree; every error input must raise the same exception type
in norms as in torch.
"""

from __future__ import annotations

import pytest
import torch
import torch.testing._internal.common_methods_invocations as cmi  # noqa: E402  (needs expecttest)
import torch.testing._internal.common_modules as cm  # noqa: E402
from hypothesis import given, settings
from hypothesis import strategies as st

import norms
from norms import functional as NF

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-10, rtol=1e-10)}

# OpInfo name -> norms.functional function
OPS = {
    "nn.functional.batch_norm": NF.batch_norm,
    "nn.functional.layer_norm": NF.layer_norm,
    "nn.functional.group_norm": NF.group_norm,
    "nn.functional.instance_norm": NF.instance_norm,
    "nn.functional.rms_norm": NF.rms_norm,
}
MODULES = {
    torch.nn.BatchNorm1d: norms.BatchNorm1d,
    torch.nn.BatchNorm2d: norms.BatchNorm2d,
    torch.nn.BatchNorm3d: norms.BatchNorm3d,
    torch.nn.LayerNorm: norms.LayerNorm,
    torch.nn.GroupNorm: norms.GroupNorm,
    torch.nn.InstanceNorm1d: norms.InstanceNorm1d,
    torch.nn.InstanceNorm2d: norms.InstanceNorm2d,
    torch.nn.InstanceNorm3d: norms.InstanceNorm3d,
    torch.nn.RMSNorm: norms.RMSNorm,
}


def opinfos(name):
    """Every OpInfo of that name that has CPU dtypes (the cuDNN-only variant has none)."""
    found = [op for op in cmi.op_db if op.name == name and op.supported_dtypes("cpu")]
    assert found, f"torch's op_db has no CPU OpInfo named {name}"
    return found


def clone_args(value):
    """Deep copies, so that torch's and norms' in-place running-stat updates stay apart."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, (tuple, list)):
        return type(value)(clone_args(v) for v in value)
    if isinstance(value, dict):
        return {k: clone_args(v) for k, v in value.items()}
    return value


def tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []


def describe(sample):
    shapes = [tuple(t.shape) for t in tensors([sample.input, sample.args])]
    return f"shapes {shapes}, kwargs {sample.kwargs}"


def outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # compared with torch's below
        return None, exc


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_op_sample_inputs_match_torch(name, dtype):
    count = 0
    for op in opinfos(name):
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for sample in op.sample_inputs("cpu", dtype, requires_grad=True):
            count += 1
            where = f"{op.name} {describe(sample)}"
            ours = clone_args([sample.input, sample.args, sample.kwargs])
            theirs = clone_args([sample.input, sample.args, sample.kwargs])
            y_ref, err_ref = outcome(op.op, theirs[0], *theirs[1], **theirs[2])
            y, err = outcome(OPS[name], ours[0], *ours[1], **ours[2])
            if err_ref is not None:
                assert err is not None and isinstance(err, type(err_ref)), (
                    f"{where}: torch raises {err_ref!r}, norms gives {err!r}"
                )
                continue
            assert err is None, f"{where}: torch works, norms raises {err!r}"
            torch.testing.assert_close(
                y, y_ref, **TOL[dtype], msg=lambda m, where=where: f"{where}: {m}"
            )
            # running statistics (updated in place in training mode) and input gradients
            for a, b in zip(tensors(ours[1:]), tensors(theirs[1:]), strict=True):
                if not a.requires_grad:
                    torch.testing.assert_close(
                        a, b, **TOL[dtype], msg=lambda m, where=where: f"{where}, buffers: {m}"
                    )
            if y_ref.requires_grad and y_ref.numel():
                g = torch.randn_like(y_ref)
                leaves = [t for t in (ours[0], theirs[0])]
                (gx,) = torch.autograd.grad(y, leaves[0], g, allow_unused=True)
                (gx_ref,) = torch.autograd.grad(y_ref, leaves[1], g, allow_unused=True)
                if gx_ref is not None:
                    torch.testing.assert_close(
                        gx,
                        gx_ref,
                        atol=100 * TOL[dtype]["atol"],
                        rtol=100 * TOL[dtype]["rtol"],
                        msg=lambda m, where=where: f"{where}, grad: {m}",
                    )
    assert count > 0, f"no sample inputs for {name} in {dtype}"


def with_error_inputs():
    """The ops whose OpInfo has error inputs (torch 2.13: group_norm and rms_norm)."""
    return [n for n in OPS if any(op.error_inputs_func is not None for op in opinfos(n))]


@pytest.mark.parametrize("name", with_error_inputs())
def test_op_error_inputs_raise_like_torch(name):
    count = 0
    for op in opinfos(name):
        if op.error_inputs_func is None:
            continue
        for error in op.error_inputs("cpu"):
            sample = error.sample_input
            count += 1
            where = f"{op.name} {describe(sample)}"
            with pytest.raises(error.error_type) as theirs:
                op.op(sample.input, *sample.args, **sample.kwargs)
            with pytest.raises(Exception) as ours:
                OPS[name](
                    clone_args(sample.input), *clone_args(sample.args), **clone_args(sample.kwargs)
                )
            assert isinstance(ours.value, type(theirs.value)), (
                f"{where}: torch raises {theirs.value!r}, norms raises {ours.value!r}"
            )
    assert count > 0, f"no error inputs for {name}"


def module_infos():
    infos = {m.module_cls: m for m in cm.module_db if m.module_cls in MODULES}
    missing = [c.__name__ for c in MODULES if c not in infos]
    assert not missing, f"torch's module_db has no ModuleInfo for {missing}"
    return infos


def build_pair(torch_cls, ctor, dtype):
    ref = torch_cls(*ctor.args, **ctor.kwargs).to(dtype)
    ours = MODULES[torch_cls](*ctor.args, **ctor.kwargs).to(dtype)
    with torch.no_grad():  # the same non-trivial parameters in both
        for p in ref.parameters():
            p.copy_(torch.rand_like(p) + 0.5)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("torch_cls", list(MODULES), ids=lambda c: c.__name__)
def test_module_inputs_match_torch(torch_cls, dtype, training):
    info = module_infos()[torch_cls]
    torch.manual_seed(0)
    inputs = info.module_inputs_func(
        info, device="cpu", dtype=dtype, requires_grad=False, training=training
    )
    assert inputs, f"no module inputs for {torch_cls.__name__}"
    for mi in inputs:
        ctor, fwd = mi.constructor_input, mi.forward_input
        where = (
            f"{torch_cls.__name__}(*{ctor.args}, **{ctor.kwargs}) on {describe(fwd_sample(fwd))}"
        )
        ref, ours = build_pair(torch_cls, ctor, dtype)
        ref.train(training)
        ours.train(training)
        for _ in range(2):  # twice: the second call uses the running statistics the first updated
            args_ref, args_ours = clone_args(fwd.args), clone_args(fwd.args)
            y_ref, err_ref = outcome(ref, *args_ref, **fwd.kwargs)
            y, err = outcome(ours, *args_ours, **fwd.kwargs)
            if err_ref is not None:
                assert err is not None and isinstance(err, type(err_ref)), (
                    f"{where}: torch raises {err_ref!r}, norms gives {err!r}"
                )
                break
            assert err is None, f"{where}: torch works, norms raises {err!r}"
            torch.testing.assert_close(
                y, y_ref, **TOL[dtype], msg=lambda m, where=where: f"{where}: {m}"
            )
            sd_ref, sd = ref.state_dict(), ours.state_dict()
            assert list(sd) == list(sd_ref), where
            for k in sd_ref:
                torch.testing.assert_close(
                    sd[k],
                    sd_ref[k],
                    **TOL[dtype],
                    msg=lambda m, where=where, k=k: f"{where}, {k}: {m}",
                )


def fwd_sample(fwd):
    return cmi.SampleInput(
        fwd.args[0] if fwd.args else torch.empty(0), args=tuple(fwd.args[1:]), kwargs=fwd.kwargs
    )


def modules_with_error_inputs():
    """The modules whose ModuleInfo has error inputs (torch 2.13: BatchNorm*d and GroupNorm)."""
    return [c for c, info in module_infos().items() if info.module_error_inputs_func is not None]


@pytest.mark.parametrize("torch_cls", modules_with_error_inputs(), ids=lambda c: c.__name__)
def test_module_error_inputs_raise_like_torch(torch_cls):
    info = module_infos()[torch_cls]
    errors = info.module_error_inputs_func(
        info, device="cpu", dtype=torch.float32, requires_grad=False, training=True
    )
    assert errors
    for e in errors:
        mi = e.module_error_input
        ctor, fwd = mi.constructor_input, mi.forward_input
        where = f"{torch_cls.__name__}(*{ctor.args}, **{ctor.kwargs})"
        if e.error_on == cm.ModuleErrorEnum.CONSTRUCTION_ERROR:
            with pytest.raises(e.error_type) as theirs:
                torch_cls(*ctor.args, **ctor.kwargs)
            with pytest.raises(Exception) as ours:
                MODULES[torch_cls](*ctor.args, **ctor.kwargs)
        else:
            ref = torch_cls(*ctor.args, **ctor.kwargs)
            mine = MODULES[torch_cls](*ctor.args, **ctor.kwargs)
            with pytest.raises(e.error_type) as theirs:
                ref(*clone_args(fwd.args), **fwd.kwargs)
            with pytest.raises(Exception) as ours:
                mine(*clone_args(fwd.args), **fwd.kwargs)
        assert isinstance(ours.value, type(theirs.value)), (
            f"{where}: torch raises {theirs.value!r}, norms raises {ours.value!r}"
        )


def test_empty_1d_batch_norm_returns_empty_like_torch():
    """The two cases the issue found, spelled out (torch's sample inputs include both)."""
    for training in (False, True):
        y = NF.batch_norm(torch.empty(0), torch.empty(0), torch.empty(0), training=training)
        y_ref = torch.nn.functional.batch_norm(
            torch.empty(0), torch.empty(0), torch.empty(0), training=training
        )
        assert y.shape == y_ref.shape == (0,)
        with pytest.raises(IndexError, match=r"\(3,\)"):
            NF.batch_norm(torch.randn(3), torch.empty(0), torch.empty(0), training=training)
        with pytest.raises(IndexError):
            torch.nn.functional.batch_norm(
                torch.randn(3), torch.empty(0), torch.empty(0), training=training
            )
    with pytest.raises(RuntimeError, match="must be empty"):
        NF.batch_norm(torch.randn(3), torch.zeros(3), torch.ones(3))
    with pytest.raises(RuntimeError):
        torch.nn.functional.batch_norm(torch.randn(3), torch.zeros(3), torch.ones(3))


# --------------------------------------------------------------------------
# issue 38, items 7 and 8: torch's inputs on fake and meta tensors and under vmap
# --------------------------------------------------------------------------


def _on(device_or_mode, value):
    """A copy of every tensor in ``value`` on the meta device, or as a fake tensor of ``mode``."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if device_or_mode == "meta":
            return t.to("meta").requires_grad_(value.requires_grad)
        return device_or_mode.from_tensor(t).requires_grad_(value.requires_grad)
    if isinstance(value, (tuple, list)):
        return type(value)(_on(device_or_mode, v) for v in value)
    if isinstance(value, dict):
        return {k: _on(device_or_mode, v) for k, v in value.items()}
    return value


def _symbolic_contexts():
    """("meta", nullcontext) and (a FakeTensorMode, that mode): where tensors have no values."""
    from contextlib import nullcontext

    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    return [("meta", nullcontext()), (mode, mode)]


@pytest.mark.parametrize("name", list(OPS))
def test_op_sample_inputs_run_on_meta_and_fake_tensors_like_torch(name):
    """Every sample torch's OpInfo gives: where torch works on real tensors, norms gives a
    result of torch's shape and dtype on meta and on fake tensors (issue 38, item 7: the
    overflow path of layer_norm and group_norm read the variance's values)."""
    count = 0
    for op in opinfos(name):
        for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
            args = [sample.input, sample.args, sample.kwargs]
            y_ref, err_ref = outcome(op.op, *clone_args([args[0], *args[1]]), **args[2])
            if err_ref is not None:
                continue
            for where, context in _symbolic_contexts():
                with context:
                    x, a, kw = _on(where, clone_args(args))
                    y = OPS[name](x, *a, **kw)
                assert (y.shape, y.dtype) == (y_ref.shape, y_ref.dtype), (
                    f"{name} {describe(sample)}"
                )
                count += 1
    assert count > 0


@pytest.mark.parametrize("name", ["nn.functional.layer_norm", "nn.functional.group_norm"])
def test_op_sample_inputs_under_vmap_match_torch(name):
    """torch.func.vmap over two differently scaled copies of each OpInfo sample input gives
    torch's result for each, bit for bit equal to norms' own eager result."""
    count = 0
    for op in opinfos(name):
        for sample in op.sample_inputs("cpu", torch.float64, requires_grad=False):
            x, args, kwargs = sample.input, sample.args, sample.kwargs
            if x.numel() == 0:
                continue
            stacked = torch.stack([x, 3.0 * x - 1.0])
            got = torch.func.vmap(lambda t, a=args, k=kwargs: OPS[name](t, *a, **k))(stacked)
            for i in range(2):
                torch.testing.assert_close(got[i], op.op(stacked[i], *args, **kwargs))
                assert torch.equal(got[i], OPS[name](stacked[i], *args, **kwargs))
            count += 1
    assert count > 0


def _module_cases():
    """(torch class, norms class, ModuleInfo inputs) for the norms and the transformer layers."""
    pairs = dict(MODULES)
    pairs[torch.nn.TransformerEncoderLayer] = norms.TransformerEncoderLayer
    pairs[torch.nn.TransformerDecoderLayer] = norms.TransformerDecoderLayer
    infos = {m.module_cls: m for m in cm.module_db if m.module_cls in pairs}
    return [(c, pairs[c], infos[c]) for c in pairs]


@pytest.mark.parametrize(
    "torch_cls, ours_cls, info", _module_cases(), ids=lambda v: getattr(v, "__name__", "")
)
def test_module_inputs_run_on_meta_and_fake_tensors_like_torch(torch_cls, ours_cls, info):
    """torch's ModuleInfo inputs, train and eval: wherever torch's module works on the meta
    device and under FakeTensorMode, norms' module does too, with torch's output shape."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    count = 0
    for training in (True, False):
        inputs = info.module_inputs_func(
            info, device="cpu", dtype=torch.float32, requires_grad=False, training=training
        )
        for mi in inputs[:: max(1, len(inputs) // 6)]:  # the transformer layers have 100s
            ctor, fwd = mi.constructor_input, mi.forward_input
            for where in ("meta", "fake"):
                mode = FakeTensorMode(allow_non_fake_inputs=True) if where == "fake" else None
                device = "meta" if mode is None else "cpu"
                with mode if mode is not None else torch.device(device):
                    ref, ours = (
                        cls(*ctor.args, **ctor.kwargs).train(training)
                        for cls in (torch_cls, ours_cls)
                    )
                    if ref.__class__.__name__.startswith("Transformer"):
                        ref.eval(), ours.eval()  # norms has no fast path: compare like with like
                    args = _on(mode or "meta", clone_args(fwd.args))
                    kwargs = _on(mode or "meta", fwd.kwargs)
                    y_ref, err_ref = outcome(ref, *clone_args(args), **kwargs)
                    if err_ref is not None:
                        continue
                    y = ours(*args, **kwargs)
                assert y.shape == y_ref.shape, f"{ours_cls.__name__} on {where}"
                count += 1
    assert count > 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: norms.LayerNorm(8),
        lambda: norms.GroupNorm(2, 8),
        lambda: norms.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        lambda: norms.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
    ],
)
def test_layers_under_vmap_give_each_sample_s_result(make):
    torch.manual_seed(0)
    layer = make().eval()
    xs = torch.randn(3, 2, 5, 8)
    if isinstance(layer, (norms.LayerNorm, norms.GroupNorm)):
        xs[1] *= 1e20  # the overflow path under vmap too (attention's softmax has no such path)

    def run(x):
        if isinstance(layer, norms.TransformerDecoderLayer):
            return layer(x, x)
        if isinstance(layer, norms.GroupNorm):
            return layer(x.transpose(1, 2)).transpose(1, 2)
        return layer(x)

    got = torch.func.vmap(run)(xs)
    for i in range(3):
        torch.testing.assert_close(got[i], run(xs[i]))


def test_layer_norm_and_group_norm_export_with_torch_s_results():
    """torch.export (non-strict, on fake tensors, as by default): the programme gives the
    eager numbers, also on a row of 1e20 whose variance overflows."""
    x = torch.randn(2, 4, 6)
    x[1] *= 1e20
    for layer, ref in ((norms.LayerNorm(6), torch.nn.LayerNorm(6)), (norms.GroupNorm(2, 4), None)):
        program = torch.export.export(layer, (torch.randn(2, 4, 6),))
        assert torch.equal(program.module()(x), layer(x))
        if ref is not None:
            ordinary = torch.randn(2, 4, 6)
            torch.testing.assert_close(program.module()(ordinary), ref(ordinary))
    layer = norms.TransformerEncoderLayer(6, 2, 12, dropout=0.0, batch_first=True).eval()
    program = torch.export.export(layer, (torch.randn(2, 4, 6),))
    ordinary = torch.randn(2, 4, 6)
    torch.testing.assert_close(program.module()(ordinary), layer(ordinary))


def test_layer_norm_compiled_with_fullgraph_handles_overflow_like_eager():
    """Issue 38, item 4: torch.compile(fullgraph=True) gave zeros on inputs of 1e20."""
    pytest.importorskip("torch._inductor")
    from norms.fast.fused import can_compile

    if not can_compile():
        pytest.skip("no C++ compiler for torch.compile")
    layer = norms.LayerNorm(8)
    compiled = torch.compile(layer, fullgraph=True)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    big = x * 1e20
    torch.testing.assert_close(compiled(big), layer(big), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled(x), torch.nn.functional.layer_norm(x, [8]))


# --------------------------------------------------------------------------
# issue 38, item 8: zero-size inputs
# --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    lead=st.lists(st.integers(0, 3), min_size=1, max_size=2),
    last=st.lists(st.integers(0, 3), min_size=1, max_size=2),
    groups=st.integers(1, 3),
    per=st.integers(1, 2),
)
def test_zero_size_inputs_give_torch_s_empty_result(lead, last, groups, per):
    """An input with a zero-size dim: torch's output (empty) and gradients, never amax's
    IndexError."""
    from hypothesis import assume

    x = torch.randn(*lead, *last)
    assume(x.numel() == 0)
    ours, theirs = norms.LayerNorm(last), torch.nn.LayerNorm(last)
    xo, xt = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    y, y_ref = ours(xo), theirs(xt)
    assert y.shape == y_ref.shape
    y.sum().backward()
    y_ref.sum().backward()
    assert xo.grad.shape == xt.grad.shape and ours.weight.grad.shape == theirs.weight.grad.shape
    c = groups * per
    xg = torch.randn(lead[0], c, *last)
    if xg.numel() == 0:
        y, y_ref = norms.GroupNorm(groups, c)(xg), torch.nn.GroupNorm(groups, c)(xg)
        assert y.shape == y_ref.shape
