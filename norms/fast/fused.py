r"""The fused path: the very same from-scratch layers, compiled with ``torch.compile``.

Written op by op, a normalization layer makes several passes over its input
(a mean, a subtraction, a square, a second mean, a multiply, an add), and each
pass reads or writes a full-size tensor in memory. These layers do about one
floating-point operation per byte they move, so memory traffic, not
arithmetic, decides their speed. ``torch.compile`` (TorchInductor) traces the
Python code of :mod:`norms`, sees the whole chain of ops, and emits one loop
nest (C++ with OpenMP and SIMD on a CPU, Triton on a GPU) that keeps each
statistic's row in registers or cache: the statistics in one sweep, the
output in a second. For the backward pass, AOTAutograd differentiates the
same traced graph and Inductor fuses the gradient formula the same way.

Nothing is rewritten for BatchNorm, RMSNorm and InstanceNorm: each class below
is the :mod:`norms` module of the same name whose ``forward`` is wrapped by
``torch.compile``. LayerNorm and GroupNorm carry a hand-derived backward pass
(compiled too), because the one autograd derives makes the compiled loops move
more data (see :class:`_LayerNormFunction` and :class:`_GroupNormFunction`).
And on a CPU, two places still read the input from memory twice in the code
Inductor emits: LayerNorm's backward pass sums the gradients of gamma and beta
down the columns in a second sweep, and GroupNorm's forward pass writes its
output in a sweep after the one for all the statistics. There the fused layers
call the small C++ kernels of :mod:`norms.fast.cpu_kernels` (LayerNorm and GroupNorm,
forward and backward: one sweep each); :class:`CompiledLayerNorm` is
LayerNorm compiled alone, for comparison and for a GPU.

The fused layers take the same arguments, have the same parameters, buffers and
state dict, and give the same numbers (to float rounding) as :mod:`norms` and
:mod:`torch.nn`. The tests check outputs and gradients on random shapes and
configs; ``make bench`` measures the speed.

The first call with a new input shape, dtype or configuration compiles (a few
seconds on a CPU: Inductor writes C++ and runs the C++ compiler); later calls
reuse the compiled code. Shapes are specialised on the first call and become
dynamic when a second shape arrives (``torch.compile``'s default), so a model
fed many shapes does not recompile for each.

Example::

    >>> import torch, norms.fast.fused
    >>> ln = norms.fast.fused.LayerNorm(768)
    >>> y = ln(torch.randn(4, 16, 768))      # compiles on the first call
    >>> y.shape
    torch.Size([4, 16, 768])

:func:`fuse` compiles any module (for instance a model that uses :mod:`norms`
layers) the same way; :mod:`norms.fast.codegen` shows the code the compiler writes.
"""

from __future__ import annotations

import functools
import warnings

import torch
from torch import Tensor, nn

from .. import compat, stats
from .. import functional as F
from ..modules import batchnorm, groupnorm, instancenorm, layernorm, rmsnorm
from . import cpu_kernels

__all__ = [
    "fuse",
    "compile_options",
    "can_compile",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "CompiledLayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
]


def compile_options() -> dict:
    """The keyword arguments every fused layer passes to ``torch.compile``.

    Inductor is the default backend; ``mode`` is the default too (no CUDA graphs,
    no autotuning), so compiling stays a matter of seconds. We leave
    ``cpp.enable_unsafe_math_opt_flag`` off, although it speeds up the compiled sums
    (the C++ compiler may then reorder additions): with g++ before 13 it links
    ``crtfastmath.o``, which flushes subnormal floats to zero in the whole process.
    """
    return {"backend": "inductor"}


def fuse(module: nn.Module) -> nn.Module:
    """``module`` compiled with ``torch.compile``: same parameters, buffers and numbers, fused
    loops.

    Args:
        module: any module, e.g. a :mod:`norms` layer or a model built from them.

    Returns:
        the compiled wrapper (its ``state_dict`` keys gain an ``_orig_mod.``
        prefix, as with any ``torch.compile``-d module) Without a C++ compiler
        (:func:`can_compile`), ``module`` itself. Prefer the classes of
        this module when you want a drop-in layer with unchanged keys.
    """
    if not can_compile():
        return module
    return torch.compile(module, **compile_options())


@torch.compiler.assume_constant_result
def can_compile() -> bool:
    """Whether ``torch.compile`` finds the C++ compiler its CPU code needs (``$CXX`` or ``g++``).

    Without one, every fused layer runs the plain :mod:`norms` code (same numbers, not fused)
    and the first call warns once.
    """
    return _can_compile()


@functools.cache
def _can_compile() -> bool:
    try:
        compat.find_cpp_compiler()
    except Exception as error:  # InvalidCxxCompiler, or whatever the search raises
        warnings.warn(
            f"norms.fast.fused: torch.compile finds no C++ compiler ({type(error).__name__}: "
            f"set $CXX or install g++); the fused layers run the plain norms code, unfused",
            RuntimeWarning,
            stacklevel=4,
        )
        return False
    return True


def _compiled(function):
    """``function`` compiled by ``torch.compile``, or ``function`` itself when there is no C++
    compiler (:func:`can_compile`)."""
    compiled = torch.compile(function, **compile_options())

    @functools.wraps(function)
    def run(*args, **kwargs):
        if can_compile():
            return compiled(*args, **kwargs)
        return function(*args, **kwargs)

    return run


def _fused(cls: type[nn.Module]) -> type[nn.Module]:
    """A subclass of ``cls`` whose ``forward`` is ``cls.forward`` compiled with
    ``torch.compile`` (or, with no C++ compiler, ``cls.forward`` itself)."""
    forward = _compiled(cls.forward)
    doc = (
        f"``norms.{cls.__name__}`` with its forward compiled by ``torch.compile``.\n\n"
        f"Same arguments, parameters, buffers and numbers as :class:`norms.{cls.__name__}`; "
        "see :mod:`norms.fast.fused`.\n"
    )
    return type(cls.__name__, (cls,), {"forward": forward, "__doc__": doc, "__module__": __name__})


BatchNorm1d = _fused(batchnorm.BatchNorm1d)
BatchNorm2d = _fused(batchnorm.BatchNorm2d)
BatchNorm3d = _fused(batchnorm.BatchNorm3d)


# ---------------------------------------------------------------------------
# LayerNorm: the backward pass written by hand
# ---------------------------------------------------------------------------


def _sum_rows(t: Tensor, k: int) -> Tensor:
    """Sum ``t`` over every dim but the last ``k``: ``(*, *S) -> S``, in blocks of rows.

    A plain ``t.sum(leading dims)`` makes the compiled loop walk down the
    columns, one cache line per row; summing blocks of 32 consecutive rows first
    keeps it walking along memory, about 3x faster on a CPU. Same sum, other order.
    """
    tail = t.shape[t.dim() - k :]
    rows = t.reshape(-1, *tail)  # (R, *S)
    block = 32
    if rows.shape[0] % block == 0 and rows.shape[0] > block:
        return (
            rows.reshape(-1, block, *tail).sum(1).sum(0)
        )  # (R // 32, 32, *S) -> (R // 32, *S) -> S
    return rows.sum(0)


class _LayerNormFunction(torch.autograd.Function):
    r"""Forward: :func:`norms.functional.layer_norm`. Backward: the hand-derived formula.

    The formula is the one of :class:`norms.autograd.LayerNormFunction`:
    :math:`\mathrm{d}x = \frac{1}{\sigma}(g - \langle g\rangle - \hat x\langle g\hat x\rangle)`
    with :math:`g = \mathrm{d}y\cdot\gamma`. The function saves ``x`` and the
    parameters and writes the mean and :math:`1/\sigma` again from ``x``; compiled,
    AOTAutograd's partitioner may instead keep the forward pass's per-row mean and
    :math:`1/\sigma` (a few numbers per row), which is what Inductor's loops load.
    Autograd would differentiate the forward graph instead; the compiler can
    fuse that too, but it sums :math:`\mathrm{d}\gamma` and
    :math:`\mathrm{d}\beta` column by column (see :func:`_sum_rows`).
    """

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        ctx.save_for_backward(x, weight)
        ctx.k, ctx.eps, ctx.bias_dtype = (
            len(normalized_shape),
            eps,
            None if bias is None else bias.dtype,
        )
        return F.layer_norm(x, normalized_shape, weight, bias, eps)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        dx, dweight, dbias = cpu_kernels.backward_in_ops(
            x.to(dtype),
            dy.to(dtype),
            None if weight is None else weight.to(dtype),
            ctx.k,
            ctx.eps,
            _sum_rows,
        )
        dweight = None if weight is None else dweight.to(weight.dtype)
        dbias = None if ctx.bias_dtype is None else dbias.to(ctx.bias_dtype)
        return dx.to(x.dtype), None, dweight, dbias, None


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _LayerNormFunction.apply(input, tuple(normalized_shape), weight, bias, eps)


_compiled_layer_norm = _compiled(_layer_norm)


class CompiledLayerNorm(layernorm.LayerNorm):
    """``norms.LayerNorm``, compiled by ``torch.compile``, with the hand-derived backward pass,
    on every device.

    Same arguments, parameters, buffers and numbers as :class:`norms.LayerNorm`;
    see :mod:`norms.fast.fused` and :class:`_LayerNormFunction`. :class:`LayerNorm`
    runs the same compiled code on a GPU; on a CPU it runs the C++ kernel, which is faster
    there.
    """

    def forward(self, input: Tensor) -> Tensor:
        return _compiled_layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class LayerNorm(layernorm.LayerNorm):
    """``norms.LayerNorm`` fused, like every layer of this module: in one sweep, by the C++
    kernel on a CPU, by ``torch.compile`` elsewhere.

    Same arguments, parameters, buffers and numbers as :class:`norms.LayerNorm`.
    For float32 and float64 tensors on a CPU, forward and backward run the kernel of
    :mod:`norms.fast.cpu_kernels` (the gradients of gamma and beta summed in the
    same loop as the input's): no compiled code. Otherwise (a GPU, half precision, no C++
    compiler) it runs the compiled code of :class:`CompiledLayerNorm`, which it does not
    subclass: on a CPU it is not that layer.
    """

    def forward(self, input: Tensor) -> Tensor:
        if can_compile() and cpu_kernels.supports(input, self.weight, self.bias):
            F.check_layer_norm(input, self.normalized_shape, self.weight, self.bias)
            return cpu_kernels.layer_norm(
                input, self.normalized_shape, self.weight, self.bias, self.eps
            )
        return _compiled_layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


RMSNorm = _fused(rmsnorm.RMSNorm)


# ---------------------------------------------------------------------------
# GroupNorm: the backward pass written by hand, two sweeps like torch's kernel
# ---------------------------------------------------------------------------


class _GroupNormFunction(torch.autograd.Function):
    r"""Forward: :func:`norms.functional.group_norm`. Backward: the hand-derived formula in two
    sweeps.

    With :math:`g = \mathrm{d}y\cdot\gamma_c`, the gradient is the one of
    :class:`norms.autograd.LayerNormFunction` over each group of :math:`m =
    (C/G)\cdot HW` elements, :math:`\mathrm{d}x = \frac{1}{\sigma}(g - \langle
    g\rangle - \hat x\langle g\hat x\rangle)`. Every group mean in it follows from four
    sums per ``(n, c)`` row, taken in one sweep over ``x`` and ``dy``: the row's mean
    and squared deviations (combined into the group's variance with the formula of
    Chan, Golub and LeVeque, no :math:`E[x^2]-E[x]^2`), :math:`\sum \mathrm{d}y` and
    :math:`\sum \mathrm{d}y\,x`. A second sweep writes
    :math:`\mathrm{d}x = a\,\mathrm{d}y + b\,x + c` with one :math:`(a, b, c)` per
    ``(n, c)``. Autograd's derived backward writes a full-size temporary in between.
    Where the C++ kernels run the forward pass (``kernel``), the backward pass is the
    kernel :func:`norms.fast.cpu_kernels.group_norm_backward`: the same formula in one
    sweep, each group's sums taken while it is in cache, with the mean and
    :math:`1/\sigma` the forward kernel saved. (:class:`GroupNorm` calls the kernels'
    differentiable op :func:`norms.fast.cpu_kernels.group_norm` directly, without this
    Function and without ``torch.compile``: nothing is left to compile around a kernel,
    and each call would pay for the compiled function's guards.)
    """

    @staticmethod
    def forward(ctx, x, num_groups, weight, bias, eps, kernel):
        ctx.groups, ctx.eps, ctx.bias_dtype = num_groups, eps, None if bias is None else bias.dtype
        ctx.kernel = kernel
        if kernel:  # one sweep over memory instead of two (norms.fast.cpu_kernels)
            y, mean, rstd = torch.ops.norms.group_norm_cpu(x, num_groups, weight, bias, eps)
            ctx.save_for_backward(x, weight, mean, rstd)
            return y
        ctx.save_for_backward(x, weight)
        return F.group_norm(x, num_groups, weight, bias, eps)

    @staticmethod
    def backward(ctx, dy):
        if ctx.kernel:  # one sweep over x and dy (norms.fast.cpu_kernels)
            x, weight, mean, rstd = ctx.saved_tensors
            dx, dweight, dbias = cpu_kernels.group_norm_backward(
                dy, x, ctx.groups, weight, ctx.eps, mean, rstd
            )
            dweight = None if weight is None else dweight
            dbias = None if ctx.bias_dtype is None else dbias
            return dx, None, dweight, dbias, None, None
        x, weight = ctx.saved_tensors
        dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        n, c, g = x.shape[0], x.shape[1], ctx.groups
        xr = x.to(dtype).reshape(n, c, -1)  # (N, C, HW)
        dyr = dy.to(dtype).reshape(n, c, -1)  # (N, C, HW)
        hw, m = xr.shape[-1], xr.shape[-1] * (c // g)  # elements per row, per group
        # sweep 1: four sums per (n, c) row
        mean_c, m2_c = stats.mean_m2(xr, -1)  # (N, C) each row's mean and squared deviations
        db = dyr.sum(-1)  # (N, C) sum of dy
        ds = (dyr * xr).sum(-1)  # (N, C) sum of dy * x
        # the group's mean and variance from its channels' (Chan et al.): (N, G, 1) each
        _, mean, m2 = stats.combine(hw, mean_c.reshape(n, g, -1), m2_c.reshape(n, g, -1), dim=-1)
        rstd = torch.rsqrt(m2 / m + ctx.eps)  # (N, G, 1)
        mean_c2 = mean.expand(n, g, c // g).reshape(n, c)  # (N, C) the group's mean, per channel
        rstd_c = rstd.expand(n, g, c // g).reshape(n, c)  # (N, C)
        dy_xhat = (ds - mean_c2 * db) * rstd_c  # (N, C) sum of dy * x_hat per row
        w = torch.ones(c, dtype=dtype, device=x.device) if weight is None else weight.to(dtype)
        g_mean = (db * w).reshape(n, g, -1).sum(-1, keepdim=True) / m  # (N, G, 1) <g>
        gx_mean = (dy_xhat * w).reshape(n, g, -1).sum(-1, keepdim=True) / m  # (N, G, 1) <g x_hat>
        # sweep 2: the shared formula, with the group means broadcast to each channel
        per_channel = (n, c, 1)
        dx = F.normalization_backward(
            dyr * w.view(1, c, 1),  # g = dy * weight, (N, C, HW)
            (xr - mean_c2.view(per_channel)) * rstd_c.view(per_channel),  # x_hat, (N, C, HW)
            rstd_c.view(per_channel),
            g_mean.expand(n, g, c // g).reshape(per_channel),
            gx_mean.expand(n, g, c // g).reshape(per_channel),
        )
        dweight = None if weight is None else dy_xhat.sum(0).to(weight.dtype)
        dbias = None if ctx.bias_dtype is None else db.sum(0).to(ctx.bias_dtype)
        return dx.reshape(x.shape).to(x.dtype), None, dweight, dbias, None, None


def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, kernel=False):
    return _GroupNormFunction.apply(input, num_groups, weight, bias, eps, kernel)


_compiled_group_norm = _compiled(_group_norm)


class GroupNorm(groupnorm.GroupNorm):
    """``norms.GroupNorm``, compiled by ``torch.compile``, with the hand-derived backward pass.

    Same arguments, parameters and numbers as :class:`norms.GroupNorm`; see
    :mod:`norms.fast.fused` and :class:`_GroupNormFunction`. For float32 and float64
    tensors on a CPU, forward and backward run the C++ kernels of
    :mod:`norms.fast.cpu_kernels`.
    """

    def forward(self, input: Tensor) -> Tensor:
        kernel = can_compile() and cpu_kernels.supports(input, self.weight, self.bias)
        if kernel or input.numel() == 0:
            F.check_group_norm(input, self.num_groups, self.weight, self.bias)
        if input.numel() == 0:  # an empty batch: nothing to fuse (Inductor cannot split zero rows)
            return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)
        if kernel:  # the kernels' op, differentiable (see _GroupNormFunction)
            return cpu_kernels.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)
        return _compiled_group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


InstanceNorm1d = _fused(instancenorm.InstanceNorm1d)
InstanceNorm2d = _fused(instancenorm.InstanceNorm2d)
InstanceNorm3d = _fused(instancenorm.InstanceNorm3d)
