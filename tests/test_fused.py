"""norms.fast.fused (the norms layers compiled with torch.compile) against norms and torch.nn.

Outputs, input and parameter gradients and running statistics, on hypothesis-drawn
shapes and configurations, in float64 (so that any real difference shows above the
rounding). The compiler must really run: recompiling past the limit fails the test
instead of silently falling back to eager code. No timing here: speed is measured
by ``make bench`` (norms.fast.bench), never asserted.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import norms
import norms.fast.fused

TOL = dict(atol=1e-10, rtol=1e-10)
FEW = settings(max_examples=4, deadline=None, derandomize=True)


@pytest.fixture(autouse=True)
def _compiler_must_run():
    """Every example compiles or reuses compiled code; none falls back to eager."""
    with torch._dynamo.config.patch(recompile_limit=64, fail_on_recompile_limit_hit=True):
        yield


def _same_params(*layers):
    gen = torch.Generator().manual_seed(0)
    params = [
        1 + 0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
        for p in layers[0].parameters()
    ]
    with torch.no_grad():
        for layer in layers:
            for p, v in zip(layer.parameters(), params, strict=True):
                p.copy_(v)


def _compare(name, args, kwargs, shape, seed, train=True, steps=2, fused_name=None):
    """fused == norms == torch.nn: outputs, grads of input and parameters, buffers, over a few
    steps."""
    classes = (
        getattr(norms.fast.fused, fused_name or name),
        getattr(norms, name),
        getattr(torch.nn, name),
    )
    layers = [cls(*args, **kwargs, dtype=torch.float64) for cls in classes]
    _same_params(*layers)
    for layer in layers:
        layer.train(train)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = 3 + 2 * torch.randn(shape, generator=gen, dtype=torch.float64)
        dy = torch.randn(shape, generator=gen, dtype=torch.float64)
        results = []
        for layer in layers:
            xg = x.clone().requires_grad_(True)
            y = layer(xg)
            grads = torch.autograd.grad(y, (xg, *layer.parameters()), dy)
            results.append((y, grads))
        (y_f, g_f), (y_n, g_n), (y_t, g_t) = results
        for ref_y, ref_g in ((y_n, g_n), (y_t, g_t)):
            torch.testing.assert_close(y_f, ref_y, **TOL)
            assert len(g_f) == len(ref_g)
            for a, b in zip(g_f, ref_g, strict=True):
                torch.testing.assert_close(a, b, **TOL)
        for (k, b_f), (_, b_n), (_, b_t) in zip(
            *(layer.named_buffers() for layer in layers), strict=True
        ):
            torch.testing.assert_close(b_f, b_n, **TOL, msg=k)
            torch.testing.assert_close(b_f, b_t, **TOL, msg=k)


@FEW
@given(
    n=st.integers(2, 5),
    c=st.sampled_from([3, 6]),
    hw=st.sampled_from([(5, 7), (2, 9)]),
    affine=st.booleans(),
    train=st.booleans(),
    seed=st.integers(0, 9),
)
def test_batchnorm2d(n, c, hw, affine, train, seed):
    _compare("BatchNorm2d", (c,), {"affine": affine, "momentum": 0.3}, (n, c, *hw), seed, train)


@FEW
@given(
    lead=st.sampled_from([(2, 5), (3,), (2, 3, 4), (2, 64)]),
    last=st.sampled_from([(7,), (3, 8)]),
    affine=st.booleans(),
    seed=st.integers(0, 9),
)
def test_layernorm(lead, last, affine, seed):
    _compare(
        "LayerNorm",
        (list(last),),
        {"elementwise_affine": affine, "eps": 1e-5},
        (*lead, *last),
        seed,
    )
    # the compiled path alone (what a GPU runs): hand-derived backward, gradients summed in blocks
    # of rows
    _compare(
        "LayerNorm",
        (list(last),),
        {"elementwise_affine": affine, "eps": 1e-5},
        (*lead, *last),
        seed,
        fused_name="CompiledLayerNorm",
    )


@FEW
@given(
    lead=st.sampled_from([(2, 5), (3,), (2, 3, 4)]),
    last=st.sampled_from([(7,), (3, 8)]),
    affine=st.booleans(),
    eps=st.sampled_from([None, 1e-6]),
    seed=st.integers(0, 9),
)
def test_rmsnorm(lead, last, affine, eps, seed):
    _compare(
        "RMSNorm", (list(last),), {"elementwise_affine": affine, "eps": eps}, (*lead, *last), seed
    )


@FEW
@given(
    n=st.integers(1, 4),
    groups_channels=st.sampled_from([(2, 6), (3, 6), (1, 4), (4, 4)]),
    spatial=st.sampled_from([(5,), (5, 7), (2, 3, 5)]),
    affine=st.booleans(),
    seed=st.integers(0, 9),
)
def test_groupnorm(n, groups_channels, spatial, affine, seed):
    g, c = groups_channels
    _compare("GroupNorm", (g, c), {"affine": affine}, (n, c, *spatial), seed)


@FEW
@given(
    n=st.integers(1, 4),
    c=st.sampled_from([3, 6]),
    hw=st.sampled_from([(5, 7), (2, 9)]),
    affine=st.booleans(),
    track=st.booleans(),
    seed=st.integers(0, 9),
)
def test_instancenorm2d(n, c, hw, affine, track, seed):
    _compare(
        "InstanceNorm2d", (c,), {"affine": affine, "track_running_stats": track}, (n, c, *hw), seed
    )


def test_fused_layers_are_the_norms_layers_with_a_compiled_forward():
    for name in (
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "LayerNorm",
        "RMSNorm",
        "GroupNorm",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
    ):
        cls = getattr(norms.fast.fused, name)
        assert issubclass(cls, getattr(norms, name)) and cls.__name__ == name
        assert cls.forward is not getattr(norms, name).forward
    layer = norms.fast.fused.LayerNorm(8)
    assert list(layer.state_dict()) == list(torch.nn.LayerNorm(8).state_dict())


def test_another_cpu_capability_gets_its_own_inductor_cache(monkeypatch):
    import os
    import subprocess
    import sys

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    import norms.fast

    # importing the compiled layers sets the folder, before Inductor reads it (a fresh process)
    fused = "import os, norms.fast.fused; print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))"
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", fused],
        env={**env, "ATEN_CPU_CAPABILITY": "default"},
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == f"{default_cache_dir()}_default", done.stderr[-2000:]

    def folder(capability, inherited=None):
        """What norms.fast's import-time setting gives, in this process's environment."""
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
        if inherited is None:
            monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        else:
            monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", inherited)
        norms.fast._inductor_cache_per_capability()
        return os.environ.get("TORCHINDUCTOR_CACHE_DIR")

    assert folder("avx2") == f"{default_cache_dir()}_avx2"
    assert folder("default", inherited="/tmp/mine") == "/tmp/mine"
    # a parent that compiled something passes Inductor's default folder on: not this one's
    assert folder("default", inherited=default_cache_dir()) == f"{default_cache_dir()}_default"


def test_fused_layer_runs_compiled_code():
    """The first call goes through the compiler: dynamo counts a captured frame. (In bfloat16:
    a float32 GroupNorm on a CPU runs the C++ kernels, with nothing to compile.)"""
    torch._dynamo.reset()  # forget what earlier tests compiled
    torch._dynamo.utils.counters.clear()
    norms.fast.fused.GroupNorm(2, 4, dtype=torch.bfloat16)(torch.randn(3, 4, 5).bfloat16())
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1


def test_bad_input_still_raises_the_norms_error():
    with pytest.raises(RuntimeError, match=r"got input of shape \(2, 3, 5\)"):
        norms.fast.fused.LayerNorm(4)(torch.randn(2, 3, 5))


def test_fuse_compiles_any_module():
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), norms.LayerNorm(6))
    x = torch.randn(4, 6)
    torch.testing.assert_close(norms.fast.fused.fuse(model)(x), model(x))


def test_loop_headers_reads_constant_and_symbolic_bounds():
    source = """
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(ks0*ks1); x0+=static_cast<int64_t>(1L))
    {
        for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(512L); x1+=static_cast<int64_t>(16L))
        {
        }
        for(int64_t x1=static_cast<int64_t>(16L*(c10::div_floor_integer(static_cast<int64_t>(ks2), static_cast<int64_t>(16L)))); x1<static_cast<int64_t>(ks2); x1+=static_cast<int64_t>(1L))
        {
        }
    }
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(8L); x0+=static_cast<int64_t>(1L))
    {
    }
    """  # noqa: E501 - C++ source: a loop header is one line
    assert norms.fast.codegen.loop_headers(source).splitlines() == [
        "for x0 in range(ks0*ks1):",
        "  for x1 in range(0, 512, 16):",
        "  for x1 in range(16*(div_floor_integer(ks2, 16)), ks2):",
        "for x0 in range(8):",
    ]


@pytest.mark.parametrize("cls", ["CompiledLayerNorm", "LayerNorm"])
def test_fused_layer_norm_on_rows_whose_variance_overflows(cls):
    """Issue 38, item 4 in norms.fast: the compiled forward gave zeros on inputs of 1e20, its
    hand-derived backward zero gradients. Both now give the eager layer's numbers."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g)
    x[1:3] *= 1e20
    dy = torch.randn(4, 8, generator=g)
    eager, fused = norms.LayerNorm(8), getattr(norms.fast.fused, cls)(8)
    xe, xf = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ye, yf = eager(xe), fused(xf)
    torch.testing.assert_close(yf, ye, atol=2e-5, rtol=2e-5)
    (ge,) = torch.autograd.grad(ye, xe, dy)
    (gf,) = torch.autograd.grad(yf, xf, dy)
    assert gf[1:3].abs().max() > 0
    torch.testing.assert_close(gf, ge, atol=1e-25, rtol=1e-4)


def test_the_fused_layer_norm_is_not_the_compiled_one():
    """On a CPU fused.LayerNorm runs the C++ kernel, no compiled code: it is not a
    CompiledLayerNorm (it subclassed it once), only a norms.LayerNorm."""
    assert not issubclass(norms.fast.fused.LayerNorm, norms.fast.fused.CompiledLayerNorm)
    assert issubclass(norms.fast.fused.LayerNorm, norms.LayerNorm)
