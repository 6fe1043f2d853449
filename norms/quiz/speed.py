"""Questions of the chapter 'How fast is a normalization layer?': bytes, passes, sweeps,
intensity, variance.

Every answer is computed: byte and flop counts by :mod:`norms.fast.bench`, passes over
memory by recording the ATen ops :mod:`norms.functional` runs, and the trustworthy
variance formulas by running them in float32 against a float64 reference.
"""

from __future__ import annotations

import math

import torch

from norms import functional
from norms.fast import bench
from norms.fast.passes import full_size_ops
from norms.i18n import tr

from .builders import choice, numeric, shape_str

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _case(rng) -> bench.Case:
    return rng.choice([c for c in bench.CASES if c.op in ("LayerNorm", "RMSNorm")])


def q_perfect_bytes(rng, names=None):
    """Megabytes a perfect kernel must move for a forward pass, or a forward and backward pass."""
    case = _case(rng)
    direction = rng.choice(bench.DIRECTIONS)
    dtype = rng.choice(list(_DTYPES))
    itemsize = torch.empty((), dtype=_DTYPES[dtype]).element_size()
    mb = bench.perfect_bytes(case, direction, itemsize) / 1e6
    n_mb = math.prod(case.shape) * itemsize / 1e6  # one full-size tensor
    what = (
        tr("a forward pass (read x, write y)")
        if direction == "fwd"
        else tr(
            "a forward and a backward pass (forward: read x, write y; backward: read x and dy, "
            "write dx)"
        )
    )
    wrong = [
        (n_mb, tr("That is one tensor: a kernel must at least read x and write y.")),
        (
            mb * 4 / itemsize if itemsize != 4 else mb / 2,
            tr("Mind the bytes per element of this dtype."),
        ),
        (
            2 * n_mb if direction == "fwd+bwd" else 3 * n_mb,
            tr("Count the tensors again: every input read once, every output written once."),
        ),
    ]
    return numeric(
        tr(
            "A `{op}` on a {dtype} input of shape {shape}. How many megabytes (10⁶ bytes) must a "
            "perfect kernel move for {what}? Parameters and statistics are small; give one "
            "decimal.",
            op=case.op,
            dtype=dtype,
            shape=shape_str(case.shape),
            what=what,
        ),
        round(mb, 1),
        dict(kind="perfect_bytes", op=case.op, shape=case.shape, direction=direction, dtype=dtype),
        correct_fb=tr(
            "Correct: {mb} MB, every full-size tensor once (plus the parameters).", mb=round(mb, 1)
        ),
        wrong=wrong,
        default_fb=tr("Count the full-size tensors read and written, times the bytes per element."),
        tol=0.1 + 0.002 * mb,
    )


def q_intensity(rng, names=None):
    """Arithmetic intensity of a forward pass, and whether a machine is memory-bound for it."""
    op = rng.choice(["LayerNorm", "RMSNorm"])
    case = next(c for c in bench.CASES if c.op == op)
    dtype = rng.choice(list(_DTYPES))
    itemsize = torch.empty((), dtype=_DTYPES[dtype]).element_size()
    intensity = bench.flops(case, "fwd") / bench.perfect_bytes(case, "fwd", itemsize)
    per_element = bench.FLOPS_PER_ELEMENT["rms" if op == "RMSNorm" else "centred"]["fwd"]
    wrong = [
        (per_element, tr("That is flops per element; divide by the bytes moved per element.")),
        (per_element / itemsize, tr("A kernel reads x and writes y: two tensors per element.")),
        (per_element / (4 * itemsize), tr("Only x and y are full-size: two tensors, not four.")),
    ]
    return numeric(
        tr(
            "A `{op}` forward pass does about {per_element} floating-point operations per element "
            "(count them in the chapter). On {dtype} input, how many operations per byte moved "
            "(arithmetic intensity) does a perfect kernel perform? Two decimals.",
            op=op,
            per_element=per_element,
            dtype=dtype,
        ),
        round(intensity, 2),
        dict(kind="intensity", op=op, dtype=dtype, value=intensity),
        correct_fb=tr(
            "Correct: {per_element} flops per {nbytes} bytes, about {intensity:.2f} flop/byte: "
            "far below the tens of flops per byte a CPU or GPU needs to be compute-bound.",
            per_element=per_element,
            nbytes=2 * itemsize,
            intensity=intensity,
        ),
        wrong=wrong,
        default_fb=tr("Divide the flops per element by the bytes per element read and written."),
        tol=0.02,
    )


def q_passes(rng, names=None):
    """How many full-size passes norms.functional makes, recorded with a TorchDispatchMode."""
    name = rng.choice(["layer_norm", "rms_norm", "group_norm"])
    x = torch.randn(
        2, 6, 5, 7, generator=torch.Generator().manual_seed(rng.randrange(2**31))
    )  # never the global RNG
    if name == "layer_norm":
        args = ([7], torch.ones(7), torch.zeros(7))
        code = "y = norms.functional.layer_norm(x, [7], weight, bias)  # x: (2, 6, 5, 7)"
    elif name == "rms_norm":
        args = ([7], torch.ones(7))
        code = "y = norms.functional.rms_norm(x, [7], weight)  # x: (2, 6, 5, 7)"
    else:
        args = (3, torch.ones(6), torch.zeros(6))
        code = "y = norms.functional.group_norm(x, 3, weight, bias)  # x: (2, 6, 5, 7)"
    ops = full_size_ops(getattr(functional, name), x, *args)
    n = len(ops)
    options = [
        (
            str(k),
            k == n,
            (
                tr("Correct: {ops}: each reads or writes a full-size tensor.", ops=", ".join(ops))
                if k == n
                else tr(
                    "No: recording the ATen ops gives {n}: {ops}. A fused kernel needs "
                    "2 (statistics, then output).",
                    n=n,
                    ops=", ".join(ops),
                )
            ),
            k,
        )
        for k in sorted({1, 2, n - 2, n - 1, n, n + 1} - {0})
    ]
    return choice(
        tr(
            "How many ATen ops that read or write a full-size tensor (passes over memory) does "
            "this forward pass run in `norms` as written, ignoring views?"
        ),
        options,
        dict(kind="passes", fn=name, ops=ops),
        code=code,
    )


def q_backward_sweeps(rng, names=None):
    """Megabytes a LayerNorm backward pass moves when the column sums take a sweep of their own."""
    case = rng.choice([c for c in bench.CASES if c.op == "LayerNorm"])
    dtype = rng.choice(list(_DTYPES))
    itemsize = torch.empty((), dtype=_DTYPES[dtype]).element_size()
    n_mb = math.prod(case.shape) * itemsize / 1e6  # one full-size tensor
    value = 5 * n_mb  # x and dy read twice, dx written once
    wrong = [
        (
            3 * n_mb,
            tr("That is one sweep (read x and dy, write dx): here x and dy are read twice."),
        ),
        (4 * n_mb, tr("Both sweeps read x and dy, and the second also writes dx.")),
        (6 * n_mb, tr("dx is written once, by the second sweep only.")),
    ]
    return numeric(
        tr(
            "A LayerNorm backward pass on a {dtype} input x of shape {shape} makes two "
            "sweeps over memory: the first reads x and dy to sum dγ and dβ down the columns; the "
            "second reads x and dy again and writes dx. How many megabytes (10⁶ bytes) of "
            "full-size tensors does it move? Leave out the parameters and the statistics; one "
            "decimal.",
            dtype=dtype,
            shape=shape_str(case.shape),
        ),
        round(value, 1),
        dict(kind="backward_sweeps", shape=case.shape, dtype=dtype),
        correct_fb=tr(
            "Correct: {mb} MB, five full-size tensors. One sweep moves three ({one} MB): the "
            "kernel of norms.fast.cpu_kernels keeps a partial row of dγ and dβ per thread so the "
            "column sums need no sweep of their own.",
            mb=round(value, 1),
            one=round(3 * n_mb, 1),
        ),
        wrong=wrong,
        default_fb=tr("Count the full-size tensors each loop nest reads or writes, then add."),
        tol=0.1 + 0.002 * value,
    )


def _variances(mean: float, std: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x64 = mean + std * torch.randn(4096, generator=gen, dtype=torch.float64)
    x = x64.float()
    truth = x.double().var(unbiased=False).item()
    naive = ((x * x).mean() - x.mean() ** 2).item()
    two_pass = ((x - x.mean()) ** 2).mean().item()
    var, _ = torch.var_mean(x, unbiased=False)  # Welford (torch's CPU kernel)
    return truth, {"naive": naive, "two_pass": two_pass, "welford": var.item()}


def q_variance_formula(rng, names=None):
    """Which float32 variance formulas are within 1% on data with a large mean (computed)."""
    mean = rng.choice([3000.0, 10000.0, 30000.0])
    std = rng.choice([0.5, 1.0, 2.0])
    seed = rng.randrange(2**31)
    truth, got = _variances(mean, std, seed)
    ok = {k: abs(v - truth) <= 0.01 * truth for k, v in got.items()}
    labels = {
        "naive": tr("E[x²] − E[x]² (one pass, two sums)"),
        "two_pass": tr("the mean first, then the mean of (x − mean)² (two passes)"),
        "welford": tr("Welford's running update (one pass), as in torch.var_mean"),
    }
    options = [
        (
            labels[k],
            ok[k],
            tr("Yes: it gives {got:.4g} against the true {truth:.4g}.", got=got[k], truth=truth)
            if ok[k]
            else tr(
                "No: it gives {got:.4g} against the true {truth:.4g}.", got=got[k], truth=truth
            ),
            k,
        )
        for k in ("naive", "two_pass", "welford")
    ]
    return choice(
        tr(
            "4096 float32 numbers have mean {mean:g} and standard deviation {std:g}. Which ways of "
            "computing their variance in float32 land within 1% of the exact value?",
            mean=mean,
            std=std,
        ),
        options,
        dict(kind="variance_formula", mean=mean, std=std, seed=seed, ok=ok),
        many=True,
    )
