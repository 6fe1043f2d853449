"""norms.fast.cpu_kernels (the C++ kernels for LayerNorm and GroupNorm on the CPU) against torch.

Outputs and gradients on hypothesis-drawn shapes and configurations, in float64
(where any real difference shows above the rounding) and float32; with one and two
threads (the backward pass sums the gradients of gamma and beta per thread); the
ops through torch.library.opcheck (schema, fake tensors, autograd, torch.compile);
second derivatives; the fallback when no compiler is found; and the flags of each
architecture, by compiling the kernels for aarch64 (Debian's cross compiler) and for
x86-64 without AVX-512 (``-march=x86-64-v3``). No timing here: speed is measured by
``make bench``.
"""

from __future__ import annotations

import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import norms
import norms.fast.fused
from norms.fast import cpu_kernels, kernel_library

FEW = settings(max_examples=12, deadline=None, derandomize=True)
TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=2e-5, rtol=2e-5)}

pytestmark = pytest.mark.skipif(not cpu_kernels.available(), reason="no C++ compiler")


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"], scope="module")
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def _inductor_cache() -> dict:
    """The environment that gives a subprocess this process's Inductor cache folder.

    The fault tests give each subprocess a fresh ``$TMPDIR`` (for a fresh kernel cache), and
    Inductor's default cache folder is under ``$TMPDIR`` too: every fallback to the compiled
    path would compile its C++ again (about 30 s a test on a busy 2-core machine). These
    tests are about the kernels' cache, not Inductor's, so they share this one."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return {"TORCHINDUCTOR_CACHE_DIR": cache_dir()}


#: For a subprocess whose subject is the kernels' loader, not what the fused layers run without
#: the kernels: torch.compile runs the functions as they are (compiling them costs about 10 s of
#: CPU a process). The compiled fallback itself is run by
#: test_a_compiler_that_rejects_the_flags_falls_back_cleanly and tests/test_fused.py.
NO_TORCH_COMPILE = {"TORCH_COMPILE_DISABLE": "1"}


def _run(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **_inductor_cache(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _seed(cache) -> None:
    """Put this process's build of the kernels (and its checksum) into the cache folder ``cache``,
    for a test whose subject is not the build: the subprocess finds it instead of compiling (the
    library's name covers the source, the flags, the compiler and the CPU, as in this process)."""
    library = Path(cpu_kernels.load()._name)
    cache.mkdir(mode=0o700, exist_ok=True)
    for path in (library, library.with_suffix(".sha256")):
        shutil.copy2(path, cache / path.name)


def _params(shape, dtype, seed, present=True):
    gen = torch.Generator().manual_seed(seed)
    if not present:
        return None
    return (
        (1 + 0.5 * torch.randn(shape, generator=gen, dtype=torch.float64))
        .to(dtype)
        .requires_grad_(True)
    )


def _grads(y, inputs, dy):
    inputs = [t for t in inputs if t is not None]
    return torch.autograd.grad(y, inputs, dy)


@FEW
@given(
    lead=st.sampled_from([(3,), (2, 5), (2, 3, 4), (70,)]),
    last=st.sampled_from([(7,), (3, 8), (33,), (2100,)]),
    weight=st.booleans(),
    bias=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 99),
)
def test_layer_norm_matches_torch(threads, lead, last, weight, bias, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = (
        (3 + 2 * torch.randn((*lead, *last), generator=gen, dtype=torch.float64))
        .to(dtype)
        .requires_grad_(True)
    )
    dy = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(dtype)
    w, b = _params(last, dtype, seed, weight), _params(last, dtype, seed + 1, bias)
    got = cpu_kernels.layer_norm(x, list(last), w, b, 1e-5)
    want = torch.nn.functional.layer_norm(x, last, w, b, 1e-5)
    torch.testing.assert_close(got, want, **TOL[dtype])
    for g, h in zip(_grads(got, (x, w, b), dy), _grads(want, (x, w, b), dy), strict=True):
        torch.testing.assert_close(g, h, **TOL[dtype])


@FEW
@given(
    n=st.integers(1, 5),
    groups_channels=st.sampled_from([(1, 3), (2, 6), (3, 6), (4, 4), (32, 64)]),
    spatial=st.sampled_from([(), (5,), (5, 7), (2, 3, 5), (48, 48)]),
    affine=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 99),
)
def test_group_norm_matches_torch(threads, n, groups_channels, spatial, affine, dtype, seed):
    g, c = groups_channels
    assume(n * (c // g) * math.prod(spatial) > 1)  # else torch raises: one value per group
    gen = torch.Generator().manual_seed(seed)
    x = (3 + 2 * torch.randn((n, c, *spatial), generator=gen, dtype=torch.float64)).to(dtype)
    w, b = _params((c,), dtype, seed, affine), _params((c,), dtype, seed + 1, affine)
    # against torch in float64 on the same numbers: in float32, torch's own rounding is
    # the larger error where a group's variance is 0 (a group of one number)
    want = torch.nn.functional.group_norm(
        x.double(), g, *(None if p is None else p.double() for p in (w, b))
    )
    torch.testing.assert_close(
        cpu_kernels.group_norm(x, g, w, b, 1e-5), want.to(dtype), **TOL[dtype]
    )


@FEW
@given(
    n=st.integers(1, 5),
    groups_channels=st.sampled_from([(1, 3), (2, 6), (3, 6), (4, 4), (32, 64)]),
    spatial=st.sampled_from([(), (5,), (5, 7), (2, 3, 5), (48, 48)]),
    affine=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
    seed=st.integers(0, 99),
)
def test_group_norm_backward_matches_torch(
    threads, n, groups_channels, spatial, affine, dtype, seed
):
    """dx, d weight, d bias of the one-sweep kernel against torch's GroupNorm (float64
    autograd on the same numbers)."""
    g, c = groups_channels
    assume(n * (c // g) * math.prod(spatial) > 1)  # else torch raises: one value per group
    gen = torch.Generator().manual_seed(seed)
    x = (3 + 2 * torch.randn((n, c, *spatial), generator=gen, dtype=torch.float64)).to(dtype)
    dy = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(dtype)
    w, b = _params((c,), dtype, seed, affine), _params((c,), dtype, seed + 1, affine)
    x64 = x.double().requires_grad_(True)
    w64, b64 = (None if p is None else p.detach().double().requires_grad_(True) for p in (w, b))
    y = torch.nn.functional.group_norm(x64, g, w64, b64, 1e-5)
    want = _grads(y, (x64, w64, b64), dy.double())
    dx, dw, db = cpu_kernels.group_norm_backward(dy, x, g, None if w is None else w.detach(), 1e-5)
    got = (dx, dw, db) if affine else (dx,)
    # in float32, a group with a tiny variance magnifies rounding by 1/sigma
    tol = TOL[dtype] if dtype == torch.float64 else dict(atol=2e-4, rtol=2e-4)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e.to(dtype), **tol)


def test_group_norm_backward_does_not_depend_on_the_thread_count():
    """The per-thread partial sums of d weight and d bias add up to the same gradients (76800
    numbers: above the 32768 under which a kernel runs on one thread)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8, 40, 40, generator=gen, dtype=torch.float64)
    dy, w = torch.randn_like(x), torch.randn(8, generator=gen, dtype=torch.float64)
    before, results = torch.get_num_threads(), []
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            results.append(cpu_kernels.group_norm_backward(dy, x, 4, w, 1e-5))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


@pytest.mark.parametrize("rows", [1, 3])
def test_few_long_rows_on_two_threads(rows):
    """Rows of 40000 numbers (above the one-thread limit of 32768): with 2 threads, one row goes to
    one thread (the other has none), three rows are split 2 + 1; forward and gradients as
    torch's."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        gen = torch.Generator().manual_seed(rows)
        x = (3 + 2 * torch.randn(rows, 40000, generator=gen, dtype=torch.float64)).requires_grad_()
        w = (1 + torch.randn(40000, generator=gen, dtype=torch.float64)).requires_grad_()
        dy = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        got = cpu_kernels.layer_norm(x, [40000], w, None, 1e-5)
        want = torch.nn.functional.layer_norm(x, [40000], w, None, 1e-5)
        torch.testing.assert_close(got, want, **TOL[torch.float64])
        for a, b in zip(_grads(got, (x, w), dy), _grads(want, (x, w), dy), strict=True):
            torch.testing.assert_close(a, b, **TOL[torch.float64])
        xg = x.detach().reshape(1, rows * 4, 10000).requires_grad_()  # one sample, `rows` groups
        wg = (1 + torch.randn(rows * 4, generator=gen, dtype=torch.float64)).requires_grad_()
        got = cpu_kernels.group_norm(xg, rows, wg, None, 1e-5)
        want = torch.nn.functional.group_norm(xg, rows, wg, None, 1e-5)
        torch.testing.assert_close(got, want, **TOL[torch.float64])
        dyg = dy.reshape(xg.shape)
        for a, b in zip(_grads(got, (xg, wg), dyg), _grads(want, (xg, wg), dyg), strict=True):
            torch.testing.assert_close(a, b, **TOL[torch.float64])
    finally:
        torch.set_num_threads(before)


def test_group_norm_gradcheck_through_the_kernels():
    """The fused GroupNorm's autograd.Function with the kernels forward and backward (not
    compiled)."""
    x = torch.randn(2, 6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)

    def op(x, w, b):
        return norms.fast.fused._GroupNormFunction.apply(x, 3, w, b, 1e-5, True)

    assert torch.autograd.gradcheck(op, (x, w, b))


def test_the_backward_kernels_with_the_saved_statistics_match_the_recomputed_ones(threads):
    """The forward ops return each row's (group's) mean and 1/sigma; the backward ops given them
    give the gradients they give when they compute them again from x."""
    gen = torch.Generator().manual_seed(0)
    x = 3 + 2 * torch.randn(5, 7, 33, generator=gen, dtype=torch.float64)
    dy, w = torch.randn_like(x), torch.randn(33, generator=gen, dtype=torch.float64)
    _, mean, rstd = torch.ops.norms.layer_norm_cpu(x, [33], w, None, 1e-5)
    assert mean.shape == rstd.shape == (35,)
    torch.testing.assert_close(mean, x.mean(-1).reshape(-1), **TOL[torch.float64])
    torch.testing.assert_close(
        rstd, (x.var(-1, unbiased=False) + 1e-5).rsqrt().reshape(-1), **TOL[torch.float64]
    )
    saved = torch.ops.norms.layer_norm_cpu_backward(dy, x, [33], w, 1e-5, mean, rstd)
    again = torch.ops.norms.layer_norm_cpu_backward(dy, x, [33], w, 1e-5)
    for a, b in zip(saved, again, strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float64])
    xg = x.reshape(5, 21, 11)  # GroupNorm: 5 samples, 21 channels in 3 groups
    wg = torch.randn(21, generator=gen, dtype=torch.float64)
    _, mean, rstd = torch.ops.norms.group_norm_cpu(xg, 3, wg, None, 1e-5)
    assert mean.shape == rstd.shape == (15,)
    saved = torch.ops.norms.group_norm_cpu_backward(
        dy.reshape(xg.shape), xg, 3, wg, 1e-5, mean, rstd
    )
    again = torch.ops.norms.group_norm_cpu_backward(dy.reshape(xg.shape), xg, 3, wg, 1e-5)
    for a, b in zip(saved, again, strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


def test_group_norm_gradcheck_and_second_derivative_through_the_op():
    """The fused GroupNorm's path on a CPU: the kernels' op with its registered autograd; a second
    derivative (create_graph=True) by autograd's own gradient of the norms formula."""
    x = torch.randn(2, 6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)

    def op(x, w, b):
        return cpu_kernels.group_norm(x, 3, w, b, 1e-5)

    assert torch.autograd.gradcheck(op, (x, w, b))
    assert torch.autograd.gradgradcheck(op, (x, w, b))
    assert torch.autograd.gradgradcheck(lambda x: cpu_kernels.group_norm(x, 3, None, None, 1e-5), x)


def test_eager_calls_skip_the_operator_only_where_nothing_else_needs_it():
    """In eager mode the layers call the kernels directly (cpu_kernels._eager), with autograd
    through an autograd.Function; while torch.compile traces, or under a dispatch mode, they go
    through the op."""
    x = torch.randn(2, 4, 6)
    w = torch.nn.Parameter(torch.randn(6))
    assert cpu_kernels._eager(x, w, None)
    y = cpu_kernels.layer_norm(x, [6], w, None, 1e-5)
    assert type(y.grad_fn).__name__ == "_LayerNormKernelBackward", y.grad_fn
    y = cpu_kernels.group_norm(x, 2, w[:4], None, 1e-5)
    assert type(y.grad_fn).__name__ == "_GroupNormKernelBackward", y.grad_fn
    with torch.no_grad():
        assert cpu_kernels.layer_norm(x, [6], w, None, 1e-5).grad_fn is None
    with torch.no_grad():  # the op recorder (a dispatch mode) sees the op
        ops = norms.fast.passes.full_size_ops(norms.fast.fused.LayerNorm(6), x)
    assert ops == ["layer_norm_cpu"], ops
    compiled = torch.compile(norms.fast.fused.LayerNorm(6), fullgraph=True)
    torch.testing.assert_close(compiled(x), torch.nn.functional.layer_norm(x, [6], *_affine(6)))


def _affine(n):
    return torch.ones(n), torch.zeros(n)


def test_rows_longer_than_a_chunk_keep_the_variance_exact():
    """Rows of 5000 numbers (chunks of 2048, 2048 and 896, and 8 last numbers: every merge of
    row_stats) with mean 1e4: no cancellation."""
    gen = torch.Generator().manual_seed(0)
    x = (1e4 + torch.randn(3, 5000, generator=gen, dtype=torch.float64)).float()
    want = torch.nn.functional.layer_norm(x.double(), [5000]).float()
    torch.testing.assert_close(
        cpu_kernels.layer_norm(x, [5000], None, None, 1e-5), want, atol=2e-3, rtol=0
    )


def test_non_contiguous_input():
    x = torch.randn(6, 8, 10, dtype=torch.float64).transpose(0, 1)  # (8, 6, 10), not contiguous
    w = torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(
        cpu_kernels.layer_norm(x, [10], w, None, 1e-5),
        torch.nn.functional.layer_norm(x, [10], w, None, 1e-5),
        **TOL[torch.float64],
    )
    xg = torch.randn(4, 6, 5, 3, dtype=torch.float64).permute(0, 1, 3, 2)  # (4, 6, 3, 5)
    torch.testing.assert_close(
        cpu_kernels.group_norm(xg, 3, None, None, 1e-5),
        torch.nn.functional.group_norm(xg, 3, None, None, 1e-5),
        **TOL[torch.float64],
    )


def test_gradcheck_and_second_derivative():
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)

    def op(x, w, b):
        return cpu_kernels.layer_norm(x, [6], w, b, 1e-5)

    assert torch.autograd.gradcheck(op, (x, w, b))
    assert torch.autograd.gradgradcheck(op, (x, w, b))


@pytest.mark.parametrize(
    "which", ["layer_norm", "layer_norm_backward", "group_norm", "group_norm_backward"]
)
def test_opcheck(which):
    """torch.library.opcheck: the schema, the fake (meta) implementation, autograd registration,
    torch.compile."""
    x = torch.randn(4, 6, 5, dtype=torch.float64)
    w, b = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    if which == "layer_norm":
        torch.library.opcheck(
            torch.ops.norms.layer_norm_cpu, (x.requires_grad_(), [5], w.requires_grad_(), b, 1e-5)
        )
    elif which == "layer_norm_backward":
        torch.library.opcheck(
            torch.ops.norms.layer_norm_cpu_backward, (torch.randn_like(x), x, [5], w, 1e-5)
        )
    elif which == "group_norm":
        wc, bc = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
        torch.library.opcheck(torch.ops.norms.group_norm_cpu, (x, 3, wc, bc, 1e-5))
    else:
        wc = torch.randn(6, dtype=torch.float64)
        torch.library.opcheck(
            torch.ops.norms.group_norm_cpu_backward, (torch.randn_like(x), x, 3, wc, 1e-5)
        )


def test_fused_layers_run_the_kernels_on_a_cpu():
    x = torch.randn(2, 4, 8, requires_grad=True)
    # eager: the kernels through cpu_kernels._LayerNormKernel (the op's Python layers skipped)
    assert type(norms.fast.fused.LayerNorm(8)(x).grad_fn).__name__ == "_LayerNormKernelBackward"
    ops = norms.fast.passes.full_size_ops(norms.fast.fused.LayerNorm(8), torch.randn(2, 4, 8))
    assert ops == ["layer_norm_cpu"], ops
    ops = norms.fast.passes.full_size_ops(norms.fast.fused.GroupNorm(2, 4), torch.randn(2, 4, 6))
    assert "group_norm_cpu" in ops, ops

    def forward_backward(x, layer):
        layer(x).sum().backward()

    ops = norms.fast.passes.full_size_ops(
        forward_backward, torch.randn(2, 4, 6, requires_grad=True), norms.fast.fused.GroupNorm(2, 4)
    )
    assert "group_norm_cpu_backward" in ops, ops


def test_fused_layer_norm_falls_back_where_the_kernel_does_not_apply():
    """Half precision is not a kernel dtype: the compiled path runs, with norms' numbers."""
    x = torch.randn(2, 3, 8).to(torch.bfloat16)
    layer = norms.fast.fused.LayerNorm(8, dtype=torch.bfloat16)
    assert not cpu_kernels.supports(x, layer.weight, layer.bias)
    torch.testing.assert_close(layer(x), norms.LayerNorm(8, dtype=torch.bfloat16)(x))


def test_bad_input_raises_the_norms_error_on_the_kernel_path():
    with pytest.raises(RuntimeError, match=r"got input of shape \(2, 3, 5\)"):
        norms.fast.fused.LayerNorm(4)(torch.randn(2, 3, 5))
    with pytest.raises(
        RuntimeError, match=r"weight of shape \(6,\) and input of shape \(2, 4, 5\)"
    ):
        norms.fast.fused.GroupNorm(2, 6)(torch.randn(2, 4, 5))


def test_without_a_compiler_the_fused_layers_still_work_and_another_compiler_is_tried(tmp_path):
    """NORMS_CXX names no compiler: a warning, and LayerNorm/GroupNorm run the compiled path (fresh
    process); the failure is remembered (no second attempt), until NORMS_CXX names a compiler."""
    _seed(_cache_of(tmp_path))  # the second compiler's build is there: nothing to compile
    done = _run(
        """
        import os, shutil, warnings, torch, norms, norms.fast.fused
        from norms.fast import cpu_kernels
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert not cpu_kernels.available()
        assert any("no C++ compiler" in str(w.message) for w in caught), [str(w.message) for w in caught]
        x = torch.randn(2, 3, 8, dtype=torch.float64)
        torch.testing.assert_close(norms.fast.fused.LayerNorm(8, dtype=torch.float64)(x),
                                   torch.nn.functional.layer_norm(x, [8]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert not cpu_kernels.available()
            assert not cpu_kernels.available()
        os.environ["NORMS_CXX"] = shutil.which("g++")
        assert cpu_kernels.load() is not None
        print("ok")
    """,  # noqa: E501 - Python source; a line break would change the string
        {
            "NORMS_CXX": str(tmp_path / "no-such-compiler-for-norms"),
            "TMPDIR": str(tmp_path),
            **NO_TORCH_COMPILE,
        },
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_the_kernel_source_is_shipped_and_builds_in_a_fresh_cache(tmp_path):
    """The .cpp is package data next to the module, and a new cache folder gets a fresh build."""
    assert cpu_kernels.SOURCE.is_file()
    done = _run(
        "from norms.fast import cpu_kernels; assert cpu_kernels.available()",
        {"TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(tmp_path.glob("norms-kernels-*/kernels-*.so")), list(tmp_path.rglob("*"))


def test_a_library_that_does_not_load_falls_back(tmp_path):
    """A 'compiler' that writes a damaged .so: a warning, the compiled path, and the bad file
    removed."""
    fake = tmp_path / "fake-cxx"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\necho junk > "$2"\n')
    fake.chmod(0o755)
    done = _run(
        """
        import tempfile, warnings, torch, norms.fast.fused
        from pathlib import Path
        from norms.fast import cpu_kernels
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert not cpu_kernels.available()
        assert any("loading" in str(w.message) for w in caught), [str(w.message) for w in caught]
        assert not list(Path(tempfile.gettempdir()).glob("norms-kernels-*/kernels-*.so"))
        x = torch.randn(2, 3, 8, dtype=torch.float64)
        torch.testing.assert_close(norms.fast.fused.LayerNorm(8, dtype=torch.float64)(x), torch.nn.functional.layer_norm(x, [8]))
        print("ok")
    """,  # noqa: E501 - Python source; a line break would change the string
        {"NORMS_CXX": str(fake), "TMPDIR": str(tmp_path), **NO_TORCH_COMPILE},
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_threads_that_load_at_once_build_once(tmp_path):
    """Eight threads ask for the kernels in a fresh cache folder: one build, every thread gets
    it."""
    done = _run(
        """
        import threading
        from norms.fast import cpu_kernels
        results = []
        threads = [threading.Thread(target=lambda: results.append(cpu_kernels.load())) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert len(results) == 8 and results[0] is not None and all(r is results[0] for r in results)
        print("ok")
    """,  # noqa: E501 - Python source; a line break would change the string
        {"TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
    assert len(list(tmp_path.glob("norms-kernels-*/*.so"))) == 1, list(tmp_path.rglob("*"))


def test_fused_layers_keep_subnormal_numbers():
    """No fused layer turns on flush-to-zero for the process (as -ffast-math code linked by g++ < 13
    does)."""
    done = _run("""
        import torch, norms.fast.fused
        tiny = torch.tensor([1e-39])
        assert (tiny * 1.0).item() != 0.0
        for layer, shape in [(norms.fast.fused.LayerNorm(8), (2, 3, 8)), (norms.fast.fused.GroupNorm(2, 4), (2, 4, 5)),
                             (norms.fast.fused.RMSNorm(8), (2, 3, 8)), (norms.fast.fused.BatchNorm2d(4), (2, 4, 3, 3)),
                             (norms.fast.fused.InstanceNorm2d(4), (2, 4, 3, 3))]:
            x = torch.randn(shape, requires_grad=True)
            layer(x).sum().backward()
            assert (tiny * 1.0).item() != 0.0, type(layer).__name__
        print("ok")
    """)  # noqa: E501 - Python source; a line break would change the string
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_compiled_model_with_a_fused_layer_has_no_graph_break():
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8), norms.fast.fused.LayerNorm(8), torch.nn.ReLU()
    )
    explanation = torch._dynamo.explain(model)(torch.randn(4, 8))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


# ---------------------------------------------------------------------------
# Flags per architecture, and the kernels compiled for other CPUs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "machine, features, target, isa",
    [
        (
            "x86_64",
            "flags : fpu sse4_2 avx2 avx512f",
            "native",
            ["-march=native", "-mprefer-vector-width=512"],
        ),
        ("x86_64", "flags : fpu sse4_2 avx2 fma", "native", ["-march=native"]),
        ("x86_64", "flags : avx512f", "x86-64-v3", ["-march=x86-64-v3"]),
        ("aarch64", "Features : fp asimd", "native", ["-mcpu=native"]),
        ("aarch64", "Features : fp asimd", "armv8.2-a", ["-march=armv8.2-a"]),
        ("riscv64", "", "native", []),
    ],
)
def test_flags_per_architecture(machine, features, target, isa):
    got = cpu_kernels.flags(machine, features, target)
    assert [f for f in got if f.startswith(("-march", "-mcpu", "-mprefer"))] == isa, got
    assert {"-O3", "-fopenmp", "-shared", "-fPIC"} <= set(got), got


def test_the_flags_of_this_cpu_are_the_ones_used():
    assert cpu_kernels.FLAGS == cpu_kernels.flags()


# The assembly of each target must hold SIMD arithmetic on full vectors: packed float
# adds/multiplies on ymm (256-bit AVX2) registers, or on NEON's v registers (.4s: four
# floats, .2d: two doubles).
_VECTOR_CODE = {
    "aarch64": re.compile(r"\bf(add|mul|mla|sub)\s+v\d+\.(4s|2d)"),
    "x86-64-v3": re.compile(r"\bv(add|mul|fmadd\w*|sub)p[sd]\s+[^\n]*%ymm"),
}


def _cross_compile(cxx: str, flags: tuple[str, ...], tmp_path) -> str:
    """Compile the kernels with ``cxx`` and ``flags`` to assembly; return it."""
    flags = tuple(f for f in flags if f not in ("-shared", "-fPIC"))
    out = tmp_path / "kernels.s"
    done = subprocess.run(
        [cxx, *flags, "-S", str(cpu_kernels.SOURCE), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out.read_text()


def test_the_kernels_compile_to_neon_code_for_aarch64(tmp_path):
    """Debian's cross compiler builds the kernels with the flags of an ARM CPU (named target: the
    cross compiler cannot see the CPU that will run them)."""
    cxx = "g++" if platform.machine() == "aarch64" else shutil.which("aarch64-linux-gnu-g++")
    if cxx is None:
        pytest.skip("no aarch64 cross compiler: apt-get install g++-aarch64-linux-gnu (see README)")
    assembly = _cross_compile(cxx, cpu_kernels.flags("aarch64", "", "armv8-a"), tmp_path)
    for name in (
        "layer_norm_forward",
        "layer_norm_backward",
        "group_norm_forward",
        "group_norm_backward",
    ):
        assert f"{name}_f32" in assembly and f"{name}_f64" in assembly, name
    assert len(_VECTOR_CODE["aarch64"].findall(assembly)) > 20


def test_the_kernels_compile_to_avx2_code_for_x86_64_v3(tmp_path):
    """The flags of an x86-64 CPU without AVX-512 (AVX2, FMA: ``-march=x86-64-v3``) give 256-bit
    SIMD code and no 512-bit register."""
    cxx = "g++" if platform.machine() == "x86_64" else shutil.which("x86_64-linux-gnu-g++")
    if cxx is None:
        pytest.skip("no x86-64 compiler: apt-get install g++-x86-64-linux-gnu")
    assembly = _cross_compile(cxx, cpu_kernels.flags("x86_64", "", "x86-64-v3"), tmp_path)
    assert len(_VECTOR_CODE["x86-64-v3"].findall(assembly)) > 20
    assert "%zmm" not in assembly


# ---------------------------------------------------------------------------
# Faults in the cache, each in a fresh process with its own cache folder ($TMPDIR)
# and a time limit (_run: 300 s)
# ---------------------------------------------------------------------------

_FUSED_OK = """
import warnings, torch, norms.fast.fused
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    layer = norms.fast.fused.LayerNorm(8, dtype=torch.float64)
    y = layer(x)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, [8], layer.weight, layer.bias))
    y.sum().backward()
    g = torch.randn(2, 4, 5, dtype=torch.float64)
    torch.testing.assert_close(norms.fast.fused.GroupNorm(2, 4, dtype=torch.float64)(g),
                               torch.nn.functional.group_norm(g, 2))
messages = [str(w.message) for w in caught if "norms.fast.fused" in str(w.message)]
print("warnings:", len(messages), messages)
print("ok")
"""


def _cache_of(tmp_path):
    return tmp_path / f"norms-kernels-{os.getuid()}"


def test_a_truncated_library_is_rebuilt_not_loaded(tmp_path):
    """Loading a truncated .so can kill the process (SIGBUS): the loader checks the file first."""
    env = {"TMPDIR": str(tmp_path)}
    _seed(_cache_of(tmp_path))  # a good build, as a first process would leave it
    (library,) = _cache_of(tmp_path).glob("kernels-*.so")
    size = library.stat().st_size
    with open(library, "r+b") as f:
        f.truncate(size // 2)
    done = _run(
        _FUSED_OK + "from norms.fast import cpu_kernels; assert cpu_kernels.available()", env
    )
    assert done.returncode == 0 and "ok" in done.stdout, (done.returncode, done.stderr[-3000:])
    assert "warnings: 0" in done.stdout, done.stdout
    assert library.stat().st_size == size  # rebuilt


def _read_only(command: list[str], folder) -> list[str]:
    """``command`` run with ``folder`` read-only: mode 500, and for root (who ignores modes) a
    read-only bind mount in a mount namespace of its own."""
    folder.chmod(0o500)
    if os.getuid() != 0:
        return command
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=60).returncode
        != 0
    ):
        pytest.skip("running as root without unshare: cannot make a folder read-only")
    mount = f"mount --bind -o ro {shlex.quote(str(folder))} {shlex.quote(str(folder))}"
    return ["unshare", "-m", "sh", "-c", f"{mount} && exec {shlex.join(command)}"]


def test_a_cache_folder_that_cannot_be_written_builds_privately(tmp_path):
    """The cache folder is read-only: the kernels are built in a temporary folder, which is
    removed; the fused layers work, without a warning."""
    cache = _cache_of(tmp_path)
    cache.mkdir(mode=0o700)
    command = _read_only([sys.executable, "-c", _FUSED_OK], cache)
    done = subprocess.run(
        command,
        env={**os.environ, **_inductor_cache(), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    cache.chmod(0o700)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]
    assert "warnings: 0" in done.stdout, done.stdout
    assert [p.name for p in tmp_path.glob("norms-kernels-*")] == [cache.name], list(
        tmp_path.rglob("*")
    )


def test_a_cache_path_that_is_not_a_folder_leaves_no_temporary_folder(tmp_path):
    cache = _cache_of(tmp_path)
    cache.write_text("not a folder")
    done = _run(_FUSED_OK, {"TMPDIR": str(tmp_path)})
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]
    assert [p.name for p in tmp_path.glob("norms-kernels-*")] == [cache.name], list(
        tmp_path.rglob("*")
    )


def test_without_any_compiler_every_fused_layer_runs_the_plain_code_with_one_warning(tmp_path):
    """No g++ on the PATH and $CXX pointing nowhere: torch.compile cannot build either, so every
    fused layer runs the norms code (correct numbers, gradients) and warns once."""
    done = _run(
        """
        import warnings, torch, norms.fast.fused as fused
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for layer, ref, shape in [
                (fused.LayerNorm(8), torch.nn.LayerNorm(8), (2, 3, 8)),
                (fused.CompiledLayerNorm(8), torch.nn.LayerNorm(8), (2, 3, 8)),
                (fused.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4), (2, 4, 5)),
                (fused.RMSNorm(8), torch.nn.RMSNorm(8), (2, 3, 8)),
                (fused.BatchNorm2d(4), torch.nn.BatchNorm2d(4), (2, 4, 3, 3)),
                (fused.InstanceNorm2d(4), torch.nn.InstanceNorm2d(4), (2, 4, 3, 3)),
            ]:
                x = torch.randn(shape, requires_grad=True)
                y = layer(x)
                torch.testing.assert_close(y, ref(x))
                (gx,) = torch.autograd.grad(y.square().sum(), x)
                torch.testing.assert_close(gx, torch.autograd.grad(ref(x).square().sum(), x)[0])
            model = fused.fuse(torch.nn.Linear(3, 3))
            model(torch.randn(2, 3))
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1 and "no C++ compiler" in messages[0], messages
        print("ok")
        """,
        {
            "PATH": str(tmp_path),
            "CXX": str(tmp_path / "no-such-g++"),
            "NORMS_CXX": "",
            "TMPDIR": str(tmp_path),
        },
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_compiler_that_rejects_the_flags_falls_back_cleanly(tmp_path):
    """As g++ on ARM rejects an x86 flag: one warning with the compiler's words, the compiled path,
    and no partial file left."""
    fake = tmp_path / "picky-cxx"
    fake.write_text(
        "#!/bin/sh\necho \"error: unrecognized command-line option '$3'\" >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    done = _run(_FUSED_OK, {"NORMS_CXX": str(fake), "TMPDIR": str(tmp_path)})
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]
    assert "warnings: 1" in done.stdout, done.stdout
    assert "unrecognized command-line option" in done.stdout, done.stdout
    assert not list(_cache_of(tmp_path).glob("*.so")), list(tmp_path.rglob("*"))


def test_two_processes_building_at_once_share_one_library(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = "from norms.fast import cpu_kernels; assert cpu_kernels.available(); print('ok')"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    codes = [p.returncode for p in procs]
    assert codes == [0, 0] and [out.strip() for out, _ in outs] == ["ok", "ok"], outs
    names = sorted(p.name for p in _cache_of(tmp_path).iterdir())
    assert len([n for n in names if n.endswith(".so")]) == 1, names
    assert not [n for n in names if n.endswith(".tmp.so")], names


def test_other_builds_stay_and_killed_builds_are_swept(tmp_path):
    """Another checkout's library is not deleted; a .tmp.so older than an hour (a killed build)
    is."""
    cache = _cache_of(tmp_path)
    cache.mkdir(mode=0o700)
    other = cache / "kernels-0123456789abcdef.so"
    other.write_text("another checkout's build")
    leftover, recent = cache / "kernels-0123456789abcdef.x1.tmp.so", cache / "kernels-a.x2.tmp.so"
    leftover.write_text("killed")
    recent.write_text("being written")
    hours_ago = time.time() - 7200
    os.utime(leftover, (hours_ago, hours_ago))
    _seed(cache)  # this checkout's build is there: the sweep does not depend on a build
    done = _run(
        "from norms.fast import cpu_kernels; assert cpu_kernels.available()",
        {"TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert other.exists() and recent.exists() and not leftover.exists()


def test_a_loaded_library_is_returned_without_the_build_lock():
    """Once loaded, load() takes no lock (a build elsewhere must not stall every forward)."""
    assert cpu_kernels.load() is not None
    result = []
    with kernel_library._LOCK:
        thread = threading.Thread(target=lambda: result.append(cpu_kernels.load()), daemon=True)
        thread.start()
        thread.join(timeout=60)
    assert result and result[0] is not None


def test_a_cache_folder_owned_by_another_user_is_left_alone_and_the_private_build_removed(
    tmp_path,
):
    """Issue 25: a cache folder of another user made each process build into a fresh temporary
    folder and never remove it. As root the folder is given to another uid (os.chown); otherwise
    the subprocess reports another uid (os.getuid patched), which is what the loader compares."""
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o777)
    (cache / "kernels-decoy.so").write_bytes(b"not ours")
    code = _FUSED_OK
    if os.getuid() == 0:
        os.chown(cache, 54321, 54321)
    else:
        code = "import os\n_uid = os.getuid()\nos.getuid = lambda: _uid + 1\n" + code
    before = sorted(p.name for p in cache.iterdir())
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={
            **os.environ,
            **_inductor_cache(),
            "TMPDIR": str(tmp_path),
            "NORMS_KERNEL_CACHE": str(cache),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]
    assert "warnings: 0" in done.stdout, done.stdout
    assert sorted(p.name for p in cache.iterdir()) == before  # nothing written into theirs
    assert (cache / "kernels-decoy.so").read_bytes() == b"not ours"
    assert not list(tmp_path.glob("norms-*")), list(tmp_path.rglob("norms-*"))


@settings(max_examples=20, deadline=None)
@given(
    scale=st.sampled_from([1e20, 1e30, 3e37]),
    rows=st.integers(1, 4),
    cols=st.integers(2, 3000),
    grad=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_kernels_on_rows_whose_variance_overflows_give_norms_results(
    threads, scale, rows, cols, grad, seed
):
    """Issue 38, item 4 in norms.fast: on inputs of 1e20 the kernels' squared deviations
    overflowed (NaN or zeros out); the row is then looked at again scaled by its largest
    magnitude, as norms.functional does. Ordinary rows of the same batch keep their numbers."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(rows + 1, cols, generator=gen) * 2 - 1
    ordinary = x[-1].clone()
    x[:-1] *= scale
    weight, bias = _affine(cols)
    want = norms.functional.layer_norm(x, [cols], weight, bias)
    ln = norms.fast.fused.LayerNorm(cols)
    with torch.no_grad():
        ln.weight.copy_(weight)
        ln.bias.copy_(bias)
    xg = x.clone().requires_grad_(grad)
    got = ln(xg)
    torch.testing.assert_close(got, want, **TOL[torch.float32])
    assert torch.equal(got[-1], ln(ordinary[None])[0])
    if grad:
        got.sum().backward()
        assert torch.isfinite(xg.grad).all()
    gn = norms.fast.fused.GroupNorm(1, rows + 1, affine=False)
    x3 = x[None]  # (1, rows + 1, cols): one group over every row
    torch.testing.assert_close(gn(x3), norms.functional.group_norm(x3, 1), **TOL[torch.float32])
