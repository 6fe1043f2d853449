r"""Batch statistics, in one place: every mean and variance :mod:`norms` normalizes with.

Which elements share a statistic is :mod:`norms.axes`; *how* a statistic is computed from
them is this module. The layers (:mod:`norms.functional`, :mod:`norms.modules`), the
hand-derived backward passes (:mod:`norms.autograd`), the fast paths (:mod:`norms.fast`)
and SyncBatchNorm all call it, and ``tests/test_stats_structure.py`` fails on a
reduction that makes a statistic anywhere else.

.. code-block:: text

    what                                  function                  maths
    mean, biased variance over dims       moments(x, dims)          μ = ⟨x⟩,  σ² = ⟨(x-μ)²⟩
    BatchNorm's, InstanceNorm's           batch_moments(x),         the same over axes'
                                          instance_moments(x)       dims, the mean kept finite
    mean square (RMSNorm, FRN)            mean_square(x, dims)      ν² = ⟨x²⟩
    elements per statistic                count(shape, dims)        n = ∏ shape[d]
    unbiased variance                     unbiased(var, n)          σ² · n/(n-1)
    running-average factor                running_average_factor    momentum, or 1/k
    running statistics                    update_running_stats      r ← (1-f) r + f s
    a (C,) vector against (N, C, *S)      channel_view(t, ndim)     (1, C, 1, ..., 1)
    partial statistics (count, μ, M2)     mean_m2(x, dim)           M2 = Σ (x-μ)²
    their union (Chan et al.)             combine(counts, μs, M2s)  see :func:`combine`

The variance is always the mean of squared deviations, two passes, never
``E[x²] - E[x]²``, which cancels catastrophically when ``|mean| >> std``.

Example::

    >>> import torch
    >>> from norms import stats
    >>> x = torch.tensor([[1.0, 2.0], [3.0, 6.0]])  # (N, C) = (2, 2)
    >>> mean, xc, var = stats.batch_moments(x)
    >>> mean, var
    (tensor([[2., 4.]]), tensor([[1., 4.]]))
    >>> stats.unbiased(var, stats.count(x.shape, (0,)))  # n / (n - 1) = 2
    tensor([[2., 8.]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from . import axes, compat

__all__ = [
    "channel_view",
    "mean",
    "batch_mean",
    "finite_mean",
    "moments",
    "batch_moments",
    "instance_moments",
    "mean_square",
    "var_mean",
    "std",
    "scaled_moments",
    "rstd_without_overflow",
    "all_finite",
    "count",
    "unbiased",
    "running_average_factor",
    "update_running",
    "update_running_stats",
    "mean_m2",
    "combine",
]

Dims = Sequence[int]


# --------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------


def channel_view(t: Tensor, ndim: int, dtype: torch.dtype | None = None) -> Tensor:
    """A per-channel vector ``(C,)`` viewed as ``(1, C, 1, ..., 1)``, to broadcast over an input
    ``(N, C, *S)`` of rank ``ndim`` (cast to ``dtype`` if given).

    >>> channel_view(torch.tensor([1.0, 2.0]), 4).shape
    torch.Size([1, 2, 1, 1])
    """
    if dtype is not None:
        t = t.to(dtype)
    return t.reshape(1, -1, *([1] * (ndim - 2)))


# --------------------------------------------------------------------------
# means and variances
# --------------------------------------------------------------------------


def mean(x: Tensor, dims: Dims) -> Tensor:
    """``x.mean(dims, keepdim=True)``: the reduced dims stay as size 1, ready to broadcast."""
    return x.mean(tuple(dims), keepdim=True)


def batch_mean(x: Tensor, dims: Dims) -> Tensor:
    """:func:`mean` for BatchNorm's ``dims = (0, 2, 3, ...)``, the spatial dims first.

    The same number (every ``(n, c)`` row has the same count, so the mean of the row means
    is the mean) but more accurate in float32: the big reduction runs over contiguous
    memory, which torch sums pairwise. Still a single pass.

    >>> x = torch.arange(12.0).view(2, 2, 3)
    >>> torch.equal(batch_mean(x, (0, 2)), x.mean((0, 2), keepdim=True))
    True
    """
    dims = tuple(dims)
    if len(dims) > 1:
        x = x.mean(dims[1:], keepdim=True)  # (N, C, 1, ...)
    return x.mean(dims[:1], keepdim=True)  # (1, C, 1, ...)


def all_finite(stat: Tensor) -> bool:
    """True when every value of ``stat`` (a few numbers per row) is known to be finite; False when
    one is not, or when its values cannot be read (:func:`norms.compat.values_known`).

    Why a branch on values here, where forwards never branch on them: the overflow-safe
    statistics (:func:`finite_mean`, :func:`rstd_without_overflow`, and
    ``norms.functional``'s normalization) select the rescaled result with ``torch.where``,
    which gives the same numbers whether or not this returns True. Only in eager mode,
    where the values are at hand, does a True skip the rescaled computation that
    ``torch.where`` would discard entirely: eager mode then runs the plain formula's ops
    and no more, as the speed and transformer chapters count them
    (:mod:`norms.fast.passes`). Traced, compiled, under ``vmap`` or on fake tensors it is
    False, and the branch-free path runs.

    >>> all_finite(torch.tensor([1.0, 2.0])), all_finite(torch.tensor([1.0, float("inf")]))
    (True, False)
    """
    return compat.values_known(stat) and bool(torch.isfinite(stat).all())


def finite_mean(x: Tensor, dims: Dims, mean=mean) -> Tensor:
    r"""``mean(x, dims)``; where the sum overflowed (``|x|`` near the dtype's largest value,
    e.g. ``1e38`` in float32) :math:`s \cdot \mathrm{mean}(x / s)` with :math:`s = \max|x|`,
    as torch's kernels keep it finite.

    ``mean`` is :func:`mean` or :func:`batch_mean`. Selected with ``torch.where``: ordinary
    means are exactly ``mean(x, dims)``, and a mean that is infinite because an input is
    stays so (see :func:`all_finite` for the eager-mode shortcut).

    >>> finite_mean(torch.full((4,), 3e38), (0,))
    tensor([3.0000e+38])
    """
    dims = tuple(dims)
    m = mean(x, dims)
    if x.numel() == 0 or all_finite(m):
        return m
    s = x.detach().abs().amax(dims, keepdim=True)
    plain = torch.isfinite(m) | ~torch.isfinite(s)  # no overflow, or a non-finite input
    s = torch.where(plain, 1.0, s)
    return torch.where(plain, m, mean(x / s, dims) * s)


def moments(x: Tensor, dims: Dims, mean=mean) -> tuple[Tensor, Tensor, Tensor]:
    r"""``(μ, x - μ, σ²)`` over ``dims``: the mean, the centred input and the *biased* variance
    :math:`\sigma^2 = \langle (x-\mu)^2 \rangle`, both statistics kept as size 1 on ``dims``.

    ``mean`` takes both means: :func:`mean` (LayerNorm, GroupNorm) or :func:`batch_mean`.
    BatchNorm and InstanceNorm keep the mean finite where the sum overflows:
    :func:`batch_moments`, :func:`instance_moments`.

    >>> mu, xc, var = moments(torch.tensor([[1.0, 3.0]]), (-1,))
    >>> mu, xc, var
    (tensor([[2.]]), tensor([[-1.,  1.]]), tensor([[1.]]))
    """
    dims = tuple(dims)
    mu = mean(x, dims)
    xc = x - mu
    return mu, xc, mean(xc * xc, dims)


def batch_moments(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """BatchNorm's training statistics of ``x`` ``(N, C, *S)`` over
    :func:`norms.axes.batch_norm_dims`: the mean ``(1, C, 1, ...)``, the centred input
    ``(N, C, *S)`` and the biased variance ``(1, C, 1, ...)``.

    The mean stays finite where the sum overflows (:func:`finite_mean`), as in torch; a
    variance beyond the dtype's range is ``inf``, as in torch.

    >>> mu, xc, var = batch_moments(torch.tensor([[1.0], [3.0]]))
    >>> mu, var
    (tensor([[2.]]), tensor([[1.]]))
    """
    dims = axes.batch_norm_dims(x.dim())  # (0, 2, 3, ...)
    mu = finite_mean(x, dims, batch_mean)  # (1, C, 1, ...)
    xc = x - mu  # (N, C, *S)
    return mu, xc, batch_mean(xc * xc, dims)  # (1, C, 1, ...) biased


def instance_moments(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """InstanceNorm's statistics of ``x`` ``(N, C, *S)`` over
    :func:`norms.axes.instance_norm_dims`: mean and biased variance ``(N, C, 1, ...)``, the
    mean kept finite like :func:`batch_moments`'s, and the centred input.

    >>> mu, xc, var = instance_moments(torch.tensor([[[1.0, 3.0]]]))
    >>> mu.flatten(), var.flatten()
    (tensor([2.]), tensor([1.]))
    """
    dims = axes.instance_norm_dims(x.dim())  # (2, 3, ...)
    mu = finite_mean(x, dims)  # (N, C, 1, ...)
    xc = x - mu  # (N, C, *S)
    return mu, xc, mean(xc * xc, dims)  # (N, C, 1, ...) biased


def mean_square(x: Tensor, dims: Dims) -> Tensor:
    r"""The mean square :math:`\langle x^2 \rangle` over ``dims`` (kept as size 1): RMSNorm's
    and Filter Response Normalization's statistic, no centring.

    >>> mean_square(torch.tensor([[3.0, 4.0]]), (-1,))
    tensor([[12.5000]])
    """
    return mean(x * x, dims)


def var_mean(x: Tensor, dims: Dims) -> tuple[Tensor, Tensor]:
    """``(σ², μ)`` over ``dims`` (biased, kept as size 1) by torch's one-pass kernel
    (``torch.var_mean``, Welford's update): what timm standardizes convolution weights with,
    so :class:`norms.StdConv2d` gives timm's numbers.

    >>> var_mean(torch.tensor([[1.0, 3.0]]), (1,))
    (tensor([[1.]]), tensor([[2.]]))
    """
    return torch.var_mean(x, dim=tuple(dims), correction=0, keepdim=True)


def std(x: Tensor, dims: Dims) -> Tensor:
    """The biased standard deviation over ``dims`` (kept as size 1) by torch's one-pass kernel
    (``torch.std``): for measuring how far batch statistics stray
    (:func:`norms.lab.small_batches.statistic_noise`), not for normalizing.

    >>> std(torch.tensor([[1.0, 3.0]]), (1,))
    tensor([[1.]])
    """
    return x.std(tuple(dims), correction=0, keepdim=True)


def scaled_moments(x: Tensor, dims: Dims, finite: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(s, x/s - mean(x/s), Var[x/s])`` over ``dims``, with ``s = max|x|`` where ``finite`` is
    False and 1 elsewhere: the moments of rows whose variance overflowed, rescaled.

    Where ``finite`` is True the local derivatives stay finite, so the zero gradient
    ``torch.where`` gives the rows it does not select stays zero. ``s`` is detached: the
    normalized values do not depend on it.

    >>> s, xsc, var = scaled_moments(torch.tensor([[-1e20, 1e20]]), (-1,), torch.tensor([[False]]))
    >>> s, var
    (tensor([[1.0000e+20]]), tensor([[1.]]))
    """
    dims = tuple(dims)
    s = torch.where(finite, 1.0, x.detach().abs().amax(dims, keepdim=True))
    _, xsc, var = moments(x / s, dims)
    return s, xsc, var


def rstd_without_overflow(x: Tensor, var: Tensor, dims: Dims, eps: float) -> Tensor:
    r"""``1 / sqrt(var + eps)``, ``var`` the biased variance of ``x`` over ``dims`` (kept as size
    1); where it overflowed, :math:`1/\sigma` from ``x / max|x|`` (:func:`scaled_moments`).

    >>> x = torch.tensor([[-1e20, 1e20]])
    >>> rstd_without_overflow(x, moments(x, (-1,))[2], (-1,), 1e-5)
    tensor([[1.0000e-20]])
    """
    rstd = torch.rsqrt(var + eps)
    if x.numel() == 0 or all_finite(var):
        return rstd
    finite = torch.isfinite(var)
    s, _, var_s = scaled_moments(x, dims, finite)
    return torch.where(finite, rstd, 1.0 / (s * torch.sqrt(var_s + eps / (s * s))))


# --------------------------------------------------------------------------
# running statistics
# --------------------------------------------------------------------------


def count(shape: Sequence[int], dims: Dims) -> int:
    """How many elements share one statistic: the product of ``shape`` over ``dims``.

    >>> count((8, 3, 4, 4), (0, 2, 3))
    128
    """
    return math.prod(shape[d] for d in dims)


def unbiased(var: Tensor, n: int) -> Tensor:
    r"""The unbiased variance from the biased one of ``n`` elements: :math:`\sigma^2 \cdot
    \frac{n}{n-1}` (Bessel's correction), what BatchNorm and InstanceNorm keep as running
    variance.

    >>> unbiased(torch.tensor(1.0), 4)
    tensor(1.3333)
    """
    return var * (n / (n - 1))


def running_average_factor(momentum: float | None, batches: int | Tensor | None = None) -> float:
    r"""The factor :math:`f` of the running-statistics update :math:`r \leftarrow (1-f)\,r +
    f\,s`: ``momentum``, or with ``momentum=None`` the cumulative average's :math:`1/k` at
    the :math:`k`-th batch.

    ``batches`` is :math:`k`, the number of batches seen *including the current one*
    (``num_batches_tracked`` after it was incremented for this batch; SyncBatchNorm, which
    increments it only once the step has succeeded on every process, passes the count
    before plus one). With ``momentum=None`` and no counter (``track_running_stats=False``)
    the factor is 0: nothing is updated.

    >>> running_average_factor(0.1, 5), running_average_factor(None, 4)
    (0.1, 0.25)
    """
    if momentum is not None:
        return momentum
    if batches is None:
        return 0.0
    return 1.0 / float(batches)


@torch.no_grad()
def update_running(buf: Tensor, new: Tensor, factor: float) -> None:
    """``buf <- (1 - factor) * buf + factor * new``, in place and without autograd history.

    >>> r = torch.zeros(2); update_running(r, torch.tensor([1.0, 2.0]), 0.5); r
    tensor([0.5000, 1.0000])
    """
    buf.copy_(buf.to(new.dtype) * (1 - factor) + new * factor)


@torch.no_grad()
def update_running_stats(
    running_mean: Tensor, running_var: Tensor, mean: Tensor, var: Tensor, n: int, factor: float
) -> None:
    """Update BatchNorm's / InstanceNorm's running statistics in place with a batch's.

    ``mean`` and ``var`` (biased) are ``(C,)``, one per channel (BatchNorm), or ``(N, C)``,
    one per instance, then averaged over the batch (InstanceNorm); ``n`` is the number of
    elements each was computed from (:func:`count`). The running variance gets the
    unbiased variance (:func:`unbiased`); ``factor`` is :func:`running_average_factor`'s.

    >>> rm, rv = torch.zeros(1), torch.ones(1)
    >>> update_running_stats(rm, rv, torch.tensor([2.0]), torch.tensor([1.0]), 2, 1.0)
    >>> rm, rv
    (tensor([2.]), tensor([2.]))
    """
    mean, var = mean.detach(), var.detach()
    if mean.dim() > 1:  # one per instance: their average over the batch
        mean, var = mean.mean(0), var.mean(0)
    update_running(running_mean, mean, factor)
    update_running(running_var, unbiased(var, n), factor)


# --------------------------------------------------------------------------
# partial statistics and their union
# --------------------------------------------------------------------------


def mean_m2(x: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    r"""The partial statistics of the slices of ``x`` along ``dim`` (reduced, not kept): each
    slice's mean and centred sum of squares :math:`M_2 = \sum (x - \bar x)^2`. Its count
    is ``x.shape[dim]``. Combine them with :func:`combine`.

    >>> mean_m2(torch.tensor([[1.0, 3.0], [0.0, 0.0]]), -1)
    (tensor([2., 0.]), tensor([2., 0.]))
    """
    mu = x.mean(dim, keepdim=True)
    return mu.squeeze(dim), (x - mu).square().sum(dim)


def combine(
    counts: Tensor | int, means: Tensor, m2s: Tensor, dim: int = 0
) -> tuple[Tensor | int, Tensor, Tensor]:
    r"""Combine partial statistics into those of their union (Chan, Golub & LeVeque).

    The ``P`` parts lie along ``dim`` of ``means`` and ``m2s`` (each part's mean and centred
    sum of squares, e.g. from :func:`mean_m2`); ``counts`` holds each part's number of
    elements, a ``(P,)`` tensor (parts along dim 0), or one int when all parts have as many.
    Returns the union's ``(n, mean, m2)``, ``dim`` reduced (kept as size 1 when the counts
    are an int, as the callers broadcast it; ``n`` a 0-dim tensor or an int):

    .. math::

        n = \sum_p n_p, \qquad
        \bar x = \sum_p \frac{n_p}{n}\,\bar x_p, \qquad
        M_2 = \sum_p M_{2,p} + \sum_p n_p\,(\bar x_p - \bar x)^2 .

    For two parts this is Chan et al.'s pairwise update
    :math:`M_2 = M_{2,a} + M_{2,b} + \delta^2\,n_a n_b / n` with
    :math:`\delta = \bar x_b - \bar x_a`. Only differences of means are squared, so a
    large common offset cancels before it is squared: no catastrophic cancellation, unlike
    :math:`\mathrm{E}[x^2]-\mathrm{E}[x]^2`. Parts with :math:`n_p = 0` contribute nothing.
    The variance of the union is ``m2 / n`` (biased) or ``m2 / (n - 1)`` (unbiased).

    >>> n, mu, m2 = combine(torch.tensor([2.0, 2.0]), torch.tensor([[2.0], [0.0]]),
    ...                     torch.tensor([[2.0], [0.0]]))
    >>> n, mu, m2
    (tensor(4.), tensor([1.]), tensor([6.]))
    """
    if not isinstance(counts, Tensor):  # equal parts (an int, or a SymInt when traced)
        mu = means.mean(dim, keepdim=True)
        m2 = m2s.sum(dim, keepdim=True) + counts * (means - mu).square().sum(dim, keepdim=True)
        return counts * means.shape[dim], mu, m2
    n = counts.sum()
    w = (counts / n).unsqueeze(1)  # (P, 1)
    mu = (w * means).sum(0)  # (C,)
    delta = means - mu  # (P, C)
    m2 = m2s.sum(0) + (counts.unsqueeze(1) * delta * delta).sum(0)  # (C,)
    return n, mu, m2
