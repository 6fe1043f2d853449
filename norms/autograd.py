r"""Hand-derived backward passes for batch norm, layer norm and RMSNorm.

Everywhere else in :mod:`norms` we write the forward pass and let autograd
work out the gradients. This file does the backward pass by hand. Each layer
is a :class:`torch.autograd.Function` whose ``backward`` is the short closed
form you get from the chain rule, written with plain tensor operations
(``mean``, ``sum``, ``*``, ``rsqrt``). It never calls torch's own normalization
kernels. The chapters put these formulas next to what autograd computes and
show that the two agree, to about :math:`10^{-10}` in float64.

All three layers share one idea. Call the normalized input :math:`\hat x`. Let
:math:`g = \partial L / \partial \hat x = \mathrm{d}y \cdot \gamma` be the
upstream gradient after the affine step. The statistics are computed from the
very values they normalize, so each :math:`x_j` also moves the mean and the
scale. The gradient for :math:`x` is therefore :math:`g` with two parts
removed. The first is its mean, because shifting every input shifts the mean
and changes nothing after centering (RMSNorm does not center, so it keeps
this part). The second is its component along :math:`\hat x`, because scaling
the inputs scales the standard deviation too.

Notation used in the docstrings: :math:`m` is the number of elements that
share one statistic, :math:`\langle\cdot\rangle` is the mean over those
:math:`m` elements, and :math:`\sum_{\text{rest}}` is the sum over every
dimension that the parameter does not have.

Public names:

* :class:`BatchNormFunction`, :class:`LayerNormFunction`,
  :class:`RMSNormFunction`: the ``autograd.Function`` subclasses.
* :func:`batch_norm`, :func:`layer_norm`, :func:`rms_norm`: thin wrappers
  that take the same arguments as ``torch.nn.functional``. ``batch_norm``
  always uses training mode: it normalizes with the current batch's
  statistics and keeps no running averages.

What we save for backward, and why
----------------------------------
``forward`` saves the input :math:`x`, the weight :math:`\gamma` and the
per-statistic :math:`\mu` and :math:`1/\sigma`. The last two hold a few
numbers per channel or per row. PyTorch's own kernels save the same things.
:math:`\hat x = (x-\mu)\cdot(1/\sigma)` is then one subtract-and-multiply in
``backward``.

Double backward (``create_graph=True``, as used by ``gradgradcheck``,
gradient penalties and Hessian-vector products) also needs autograd to
differentiate our ``backward``. ``backward`` is written with ordinary
differentiable ops, so that mostly works by itself. The exception is the
cached :math:`\mu` and :math:`1/\sigma`. They were computed in ``forward``,
where autograd records nothing, so they look like constants with no link back
to :math:`x`. For the second derivative we therefore recompute them from
:math:`x` with tracked ops. This costs one extra reduction. We pay it only
when ``torch.is_grad_enabled()`` is true inside ``backward``, which is exactly
when the caller asked for ``create_graph=True``. Saving :math:`\hat x` itself
instead of :math:`x` would look cheaper, but double backward would then break
for the same reason.

Everything is computed in the input's dtype. The tests use float64 and
float32. Unlike torch's kernels, we do not upcast float16 or bfloat16 to
float32 internally.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from . import axes, stats
from . import functional as F

__all__ = [
    "BatchNormFunction",
    "LayerNormFunction",
    "RMSNormFunction",
    "batch_norm",
    "layer_norm",
    "rms_norm",
]


# ---------------------------------------------------------------------------
# small helpers: the checks, dims and per-channel views are norms.functional's
# and norms.axes's, so a bad input gets the same error as from the layers
# ---------------------------------------------------------------------------


def _as_shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(d) for d in normalized_shape)


def _sum_leading(t: Tensor, k: int) -> Tensor:
    """Sum ``t`` over every dim except the last ``k``, leaving a tensor of shape ``t.shape[-k:]``.

    ``t.sum(dim=())`` would sum over *all* dims, so the "nothing to sum" case
    needs its own branch.
    """
    lead = tuple(range(t.dim() - k))
    return t.sum(dim=lead) if lead else t


def _mean_rstd(x: Tensor, dims: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor]:
    """Mean and ``1/sqrt(biased variance + eps)`` over ``dims``, kept broadcastable."""
    mean, _, var = stats.moments(x, dims)
    return mean, torch.rsqrt(var + eps)


def _x_hat(
    x: Tensor, mean: Tensor, rstd: Tensor, dims: tuple[int, ...], eps: float
) -> tuple[Tensor, Tensor]:
    """``(x̂, 1/σ)`` in ``backward`` from the mean and ``1/σ`` that ``forward`` cached. Under
    ``create_graph=True`` (grad mode is on in ``backward`` only then) the cached statistics
    carry no history, so they are rebuilt from ``x`` for autograd to trace (see the module
    docstring)."""
    if torch.is_grad_enabled():
        mean, rstd = _mean_rstd(x, dims, eps)
    return (x - mean) * rstd, rstd


def _rms_rstd(x: Tensor, dims: tuple[int, ...], eps: float) -> Tensor:
    """``1/sqrt(mean(x^2) + eps)`` over ``dims``, kept broadcastable."""
    return torch.rsqrt(stats.mean_square(x, dims) + eps)


def _check_batch_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> None:
    """torch.nn.functional.batch_norm's checks in training mode, with its exception types."""
    F.check_floating(x, "batch_norm")
    if x.dim() < 2:
        F.batch_norm_no_channel_dim(x, True, weight=weight, bias=bias)
    F.verify_batch_size(x.size())
    F.check_channels(x, "batch_norm", weight=weight, bias=bias)


def _check_normalized_shape(
    fn: str, x: Tensor, shape: tuple[int, ...], **params: Tensor | None
) -> None:
    """torch.nn.functional.layer_norm's (or rms_norm's) checks, with its exception types."""
    F.normalized_shape_tuple(shape, fn)
    F.check_floating(x, fn)
    F.check_normalized_shape(x, shape, fn, **params)


# ---------------------------------------------------------------------------
# batch norm
# ---------------------------------------------------------------------------


class BatchNormFunction(torch.autograd.Function):
    r"""Training-mode batch norm with a hand-written backward.

    The input has shape :math:`(N, C, *)`. Each channel :math:`c` is normalized
    with statistics over the other dims, which hold :math:`m = N \cdot
    \prod(*)` elements:

    .. math::

        \mu = \langle x \rangle, \qquad
        \sigma = \sqrt{\langle (x-\mu)^2 \rangle + \epsilon}, \qquad
        \hat x = \frac{x-\mu}{\sigma}, \qquad
        y = \gamma \hat x + \beta .

    The variance is the biased one: it divides by :math:`m`, not :math:`m-1`.

    **Backward.** Set :math:`g = \mathrm{d}y \cdot \gamma`. The mean and the
    standard deviation move with every input:

    .. math::

        \frac{\partial \mu}{\partial x_j} = \frac{1}{m}, \qquad
        \frac{\partial \sigma}{\partial x_j} = \frac{x_j-\mu}{m\,\sigma}
            = \frac{\hat x_j}{m}.

    So one normalized value depends on every input of its channel:

    .. math::

        \frac{\partial \hat x_i}{\partial x_j}
            = \frac{1}{\sigma}\Big(\delta_{ij} - \frac{1}{m}
              - \frac{\hat x_i \hat x_j}{m}\Big).

    Summing :math:`g_i\,\partial \hat x_i/\partial x_j` over :math:`i` gives
    the compact form:

    .. math::

        \mathrm{d}x = \frac{1}{\sigma}\Big(g - \langle g \rangle
            - \hat x\,\langle g\,\hat x \rangle\Big), \qquad
        \mathrm{d}\gamma = \sum_{\text{rest}} \mathrm{d}y\,\hat x, \qquad
        \mathrm{d}\beta = \sum_{\text{rest}} \mathrm{d}y .

    Here :math:`\langle\cdot\rangle` and :math:`\sum_{\text{rest}}` both run
    over every dim except the channel dim.

    ``apply(x, weight, bias, eps)``: ``weight`` and ``bias`` are ``(C,)`` or
    ``None``.
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float) -> Tensor:
        _check_batch_norm(x, weight, bias)
        dims = axes.batch_norm_dims(x.dim())
        mean, rstd = _mean_rstd(x, dims, eps)
        y = (x - mean) * rstd  # x_hat
        if weight is not None:
            y = y * stats.channel_view(weight, x.dim())
        if bias is not None:
            y = y + stats.channel_view(bias, x.dim())
        # x and weight are inputs: during double backward they come back with
        # their autograd history. mean and rstd are cheap first-order caches.
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy: Tensor):
        x, weight, mean, rstd = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dims = axes.batch_norm_dims(x.dim())
        dx = dweight = dbias = None

        if need_x or need_w:
            x_hat, rstd = _x_hat(x, mean, rstd, dims, ctx.eps)
        if need_x:
            g = dy if weight is None else dy * stats.channel_view(weight, x.dim())
            dx = F.normalization_backward_over(g, x_hat, rstd, dims)
        if need_w:
            dweight = (dy * x_hat).sum(dim=dims)
        if need_b:
            dbias = dy.sum(dim=dims)
        return dx, dweight, dbias, None


# ---------------------------------------------------------------------------
# layer norm
# ---------------------------------------------------------------------------


class LayerNormFunction(torch.autograd.Function):
    r"""Layer norm with a hand-written backward.

    Statistics are taken over the last :math:`k` = ``len(normalized_shape)``
    dims, so each row has :math:`m = \prod(\text{normalized\_shape})`
    elements. :math:`\gamma` and :math:`\beta` have shape ``normalized_shape``:

    .. math::

        \mu = \langle x \rangle, \qquad
        \sigma = \sqrt{\langle (x-\mu)^2 \rangle + \epsilon}, \qquad
        \hat x = \frac{x-\mu}{\sigma}, \qquad
        y = \gamma \hat x + \beta .

    **Backward.** The derivation is the batch norm one. Only the dims that
    :math:`\langle\cdot\rangle` averages over change: here they are the
    trailing :math:`k` dims, one statistic per row. With :math:`g =
    \mathrm{d}y \cdot \gamma`:

    .. math::

        \mathrm{d}x = \frac{1}{\sigma}\Big(g - \langle g \rangle
            - \hat x\,\langle g\,\hat x \rangle\Big), \qquad
        \mathrm{d}\gamma = \sum_{\text{rest}} \mathrm{d}y\,\hat x, \qquad
        \mathrm{d}\beta = \sum_{\text{rest}} \mathrm{d}y .

    :math:`\sum_{\text{rest}}` runs over the *leading* dims: the batch and
    sequence positions that share :math:`\gamma` and :math:`\beta`.

    ``apply(x, normalized_shape, weight, bias, eps)``.
    """

    @staticmethod
    def forward(
        ctx,
        x: Tensor,
        normalized_shape: int | Sequence[int],
        weight: Tensor | None,
        bias: Tensor | None,
        eps: float,
    ) -> Tensor:
        shape = _as_shape(normalized_shape)
        _check_normalized_shape("layer_norm", x, shape, weight=weight, bias=bias)
        dims = axes.layer_norm_dims(x.dim(), len(shape))
        mean, rstd = _mean_rstd(x, dims, eps)
        y = (x - mean) * rstd  # x_hat
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.k = len(shape)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy: Tensor):
        x, weight, mean, rstd = ctx.saved_tensors
        need_x, _, need_w, need_b = ctx.needs_input_grad[:4]
        dims = axes.layer_norm_dims(x.dim(), ctx.k)
        dx = dweight = dbias = None

        if need_x or need_w:
            x_hat, rstd = _x_hat(x, mean, rstd, dims, ctx.eps)
        if need_x:
            g = dy if weight is None else dy * weight
            dx = F.normalization_backward_over(g, x_hat, rstd, dims)
        if need_w:
            dweight = _sum_leading(dy * x_hat, ctx.k)
        if need_b:
            dbias = _sum_leading(dy, ctx.k)
        return dx, None, dweight, dbias, None


# ---------------------------------------------------------------------------
# RMSNorm
# ---------------------------------------------------------------------------


class RMSNormFunction(torch.autograd.Function):
    r"""RMSNorm with a hand-written backward.

    RMSNorm skips the centering and has no bias. It divides by the root mean
    square over the last :math:`k` dims, which hold :math:`m` elements per row:

    .. math::

        r = \sqrt{\langle x^2 \rangle + \epsilon}, \qquad
        \hat x = \frac{x}{r}, \qquad
        y = \gamma \hat x .

    **Backward.** Only :math:`r` depends on the other inputs:

    .. math::

        \frac{\partial r}{\partial x_j} = \frac{x_j}{m\,r} = \frac{\hat x_j}{m},
        \qquad
        \frac{\partial \hat x_i}{\partial x_j}
            = \frac{1}{r}\Big(\delta_{ij} - \frac{\hat x_i \hat x_j}{m}\Big).

    With :math:`g = \mathrm{d}y \cdot \gamma`, the :math:`-\langle g\rangle`
    term of layer norm is gone, because there is no mean to subtract:

    .. math::

        \mathrm{d}x = \frac{1}{r}\Big(g - \hat x\,\langle g\,\hat x \rangle\Big),
        \qquad
        \mathrm{d}\gamma = \sum_{\text{rest}} \mathrm{d}y\,\hat x .

    ``apply(x, normalized_shape, weight, eps)``. ``eps`` must be a float here.
    The :func:`rms_norm` wrapper turns ``eps=None`` into
    ``torch.finfo(x.dtype).eps``.
    """

    @staticmethod
    def forward(
        ctx,
        x: Tensor,
        normalized_shape: int | Sequence[int],
        weight: Tensor | None,
        eps: float,
    ) -> Tensor:
        shape = _as_shape(normalized_shape)
        _check_normalized_shape("rms_norm", x, shape, weight=weight)
        dims = axes.layer_norm_dims(x.dim(), len(shape))
        rstd = _rms_rstd(x, dims, eps)
        y = x * rstd  # x_hat
        if weight is not None:
            y = y * weight
        ctx.save_for_backward(x, weight, rstd)
        ctx.k = len(shape)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy: Tensor):
        x, weight, rstd = ctx.saved_tensors
        need_x, _, need_w = ctx.needs_input_grad[:3]
        dims = axes.layer_norm_dims(x.dim(), ctx.k)
        dx = dweight = None

        if need_x or need_w:
            if torch.is_grad_enabled():
                # create_graph=True: recompute 1/r with tracked ops.
                rstd = _rms_rstd(x, dims, ctx.eps)
            x_hat = x * rstd
        if need_x:
            g = dy if weight is None else dy * weight
            dx = F.normalization_backward_over(g, x_hat, rstd, dims, centred=False)
        if need_w:
            dweight = _sum_leading(dy * x_hat, ctx.k)
        return dx, None, dweight, None


# ---------------------------------------------------------------------------
# user-facing wrappers
# ---------------------------------------------------------------------------


def batch_norm(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Training-mode batch norm over an ``(N, C, *)`` input, with one statistic per channel.

    Gives the same result as ``torch.nn.functional.batch_norm(x, None, None,
    weight, bias, training=True, eps=eps)``, using :class:`BatchNormFunction`'s
    hand-written backward. No running statistics are kept.
    """
    return BatchNormFunction.apply(x, weight, bias, float(eps))


def layer_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Layer norm over the last ``len(normalized_shape)`` dims.

    Gives the same result as ``torch.nn.functional.layer_norm``, using
    :class:`LayerNormFunction`'s hand-written backward.
    """
    return LayerNormFunction.apply(x, _as_shape(normalized_shape), weight, bias, float(eps))


def rms_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """RMSNorm over the last ``len(normalized_shape)`` dims.

    Gives the same result as ``torch.nn.functional.rms_norm``, using
    :class:`RMSNormFunction`'s hand-written backward. As in torch,
    ``eps=None`` means ``torch.finfo(x.dtype).eps``. (For float16 and
    bfloat16, torch computes in float32 and uses float32's eps. We compute in
    the input dtype, so results can differ for those dtypes.)
    """
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    return RMSNormFunction.apply(x, _as_shape(normalized_shape), weight, float(eps))
