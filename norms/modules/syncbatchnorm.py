r"""Synchronized Batch Normalization, from scratch on :mod:`torch.distributed`.

:class:`SyncBatchNorm` is drop-in for :class:`torch.nn.SyncBatchNorm`, but it
runs on any device the process group's backend can reduce, CPU with ``gloo``
included (torch's own refuses CPU tensors). In training each process holds a
slice of the batch; the layer normalizes with the statistics of the *global*
batch, the union of the slices.

What is communicated, per training step and per channel:

* forward: one cheap shape check (6 integers per process), then an
  all-gather of each process's mean and centred sum of squares (2 numbers
  per channel per process). The counts come with the shape check. Every
  process combines them with Chan et al.'s parallel formula, in the same
  order, so every process gets bit-identical statistics;
* backward: an all-reduce of :math:`\sum \mathrm{d}y` and
  :math:`\sum \mathrm{d}y\,\hat x` (2 numbers per channel).

In eval mode, without an initialized process group, or with a group of one
process, it is plain :class:`norms.BatchNorm1d`/``2d``/``3d`` and
communicates nothing.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import functional as F
from .batchnorm import _BatchNorm

__all__ = ["SyncBatchNorm", "SyncBatchNormFunction", "combine_stats"]

# dtypes the check vector can name; anything else is "not floating point"
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# fields of the per-process check vector
_NDIM, _CHANNELS, _COUNT, _DEVICE_OK, _DTYPE, _MATCHES_LAYER = range(6)


@contextlib.contextmanager
def _collective(what: str):
    """Name the likely cause when a collective fails: the processes did not run the same steps."""
    try:
        yield
    except RuntimeError as error:
        said = (str(error).strip().splitlines() or [""])[0][:300]
        raise RuntimeError(
            f"SyncBatchNorm: the {what} failed on this process ({type(error).__name__}: {said}). "
            "Every process of the group must make the same calls in the same order: this layer "
            "in training mode on every process (not eval() on some), forward with an input that "
            "requires grad on all or none, backward on every process or on none. A process that "
            "raised, returned early or switched mode leaves the others in a collective "
            "(ending in a peer's connection error or the timeout)."
        ) from error


# --------------------------------------------------------------------------
# statistics: per slice, and combined (Chan et al.)
# --------------------------------------------------------------------------


def _local_stats(x: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and centred sum of squares :math:`M_2 = \\sum (x-\\bar x)^2` of each channel of ``x``.

    ``x`` is ``(N, C, *S)``; both results are ``(C,)``. Two passes (mean, then
    squared deviations), never ``E[x²] - E[x]²``. An empty slice gives 0 and 0.
    """
    c = x.shape[1]
    if x.numel() == 0:
        zeros = torch.zeros(c, dtype=x.dtype, device=x.device)
        return zeros, zeros.clone()
    dims = (0, *range(2, x.dim()))
    mean = F._batch_mean(x, dims)  # (1, C, 1, ...)
    xc = x - mean  # (N, C, *S)
    m2 = F._batch_mean(xc * xc, dims) * (x.numel() // c)  # (1, C, 1, ...)
    return mean.reshape(c), m2.reshape(c)


def combine_stats(counts: Tensor, means: Tensor, m2s: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""Combine per-slice statistics into those of the union (Chan, Golub & LeVeque).

    ``counts`` is ``(P,)`` (elements per channel in each of ``P`` slices),
    ``means`` and ``m2s`` are ``(P, C)``: each slice's mean and centred sum of
    squares. Returns the union's ``(n, mean, m2)`` with ``n`` a 0-dim tensor
    and ``mean``, ``m2`` of shape ``(C,)``:

    .. math::

        n = \sum_p n_p, \qquad
        \bar x = \sum_p \frac{n_p}{n}\,\bar x_p, \qquad
        M_2 = \sum_p M_{2,p} + \sum_p n_p\,(\bar x_p - \bar x)^2 .

    For two slices this is Chan et al.'s pairwise update
    :math:`M_2 = M_{2,a} + M_{2,b} + \delta^2\,n_a n_b / n` with
    :math:`\delta = \bar x_b - \bar x_a`. Only differences of means are
    squared, so a large common offset cancels before it is squared: no
    catastrophic cancellation, unlike :math:`\mathrm{E}[x^2]-\mathrm{E}[x]^2`.
    Slices with ``n_p = 0`` contribute nothing.
    """
    n = counts.sum()
    w = (counts / n).unsqueeze(1)  # (P, 1)
    mean = (w * means).sum(0)  # (C,)
    delta = means - mean  # (P, C)
    m2 = m2s.sum(0) + (counts.unsqueeze(1) * delta * delta).sum(0)  # (C,)
    return n, mean, m2


# --------------------------------------------------------------------------
# the shape check that precedes every collective
# --------------------------------------------------------------------------


def _device_types(group) -> list[str]:
    types = getattr(group, "_device_types", None)
    if types:
        return [torch.device(t).type for t in types]
    backend = str(dist.get_backend(group))
    return list(dist.Backend.backend_capability.get(backend, ["cpu"]))


def _comm_device(device_types: list[str], input: Tensor) -> torch.device:
    """Where the check vector lives: the input's device if the backend reduces it, else the
    backend's own."""
    if input.device.type in device_types:
        return input.device
    kind = "cpu" if "cpu" in device_types else device_types[0]
    if kind == "cpu":
        return torch.device("cpu")
    return torch.device(kind, getattr(torch, kind).current_device())


def _fmt(shape) -> str:
    return str(tuple(int(s) for s in shape))


def _check_vector(input: Tensor, num_features: int, device_ok: bool) -> list[int]:
    ndim = input.dim()
    c = input.shape[1] if ndim >= 2 else 0
    count = input.numel() // c if c > 0 else 0
    dtype = _DTYPES.index(input.dtype) if input.dtype in _DTYPES else -1
    return [ndim, c, count, int(device_ok), dtype, int(ndim >= 2 and c == num_features)]


def _sync_check(input: Tensor, num_features: int, group, world_size: int) -> Tensor:
    """All-gather a few integers describing every process's input; raise the same error on every
    process.

    Returns the ``(P,)`` counts (elements per channel of each process's slice).
    A process that raised before the collective would leave the others waiting
    in it forever, so every problem, local or not, is found from the gathered
    vectors, and every process raises.
    """
    device_types = _device_types(group)
    device = _comm_device(device_types, input)
    mine = torch.tensor(
        _check_vector(input, num_features, input.device.type in device_types),
        dtype=torch.long,
        device=device,
    )
    gathered = [torch.empty_like(mine) for _ in range(world_size)]
    with _collective("all_gather of the input shapes (forward pass)"):
        dist.all_gather(gathered, mine, group=group)
    table = torch.stack(gathered).cpu()  # (P, 6)

    problem = None
    if (table[:, _NDIM] < 2).any():
        problem = "expected input of shape (N, C, *) with at least 2 dims on every process"
    elif (table[:, _DEVICE_OK] == 0).any():
        problem = (
            f"every input must be on a device the {dist.get_backend(group)} backend can "
            f"reduce ({', '.join(device_types)})"
        )
    elif (table[:, _DTYPE] < 0).any():
        problem = "every input must be floating point (convert it first, e.g. x.float())"
    elif (table[:, _CHANNELS] != table[0, _CHANNELS]).any() or (
        table[:, _MATCHES_LAYER] == 0
    ).any():
        problem = (
            f"the processes must agree on the number of channels: every input must have "
            f"num_features={num_features} channels in dim 1, shape (N, {num_features}, *)"
        )
    elif (table[:, _DTYPE] != table[0, _DTYPE]).any():
        problem = "the processes must agree on the input dtype"
    elif int(table[:, _COUNT].sum()) <= 1:
        problem = (
            "Expected more than 1 value per channel when training, got 1 value per channel "
            "in the global batch"
        )
    if problem is not None:
        # Every process takes this branch (they all see the same table): safe to gather more.
        described = [None] * world_size
        dist.all_gather_object(
            described, (_fmt(input.shape), str(input.device), str(input.dtype)), group=group
        )
        got = "; ".join(
            f"rank {r}: input of shape {s} on {d} ({t})" for r, (s, d, t) in enumerate(described)
        )
        raise ValueError(f"SyncBatchNorm: {problem}. Got {got}")
    return table[:, _COUNT]


# --------------------------------------------------------------------------
# the autograd Function
# --------------------------------------------------------------------------


class SyncBatchNormFunction(torch.autograd.Function):
    r"""Training-mode BatchNorm over the union of every process's slice.

    ``apply(input, weight, bias, running_mean, running_var, eps, momentum,
    group, world_size, num_features)``. ``input`` is ``(N_p, C, *S)`` on process ``p``; the
    slices may differ in ``N_p`` (even 0) and in ``S``.

    **Forward.** Each process computes its slice's count :math:`n_p`, mean and
    centred sum of squares :math:`M_{2,p}`, all-gathers them, and combines them
    with :func:`combine_stats` into the global :math:`n`, :math:`\mu` and
    :math:`\sigma^2 = M_2/n`. The running variance gets
    :math:`M_2/(n-1)`, unbiased with the *global* count.

    **Backward.** With :math:`\hat x = (x-\mu)/\sigma` and
    :math:`g = \mathrm{d}y\,\gamma`, BatchNorm's input gradient over the
    global batch is

    .. math::

        \mathrm{d}x = \frac{\gamma}{\sigma}\Big(\mathrm{d}y
            - \frac{1}{n}\sum_{\text{all}} \mathrm{d}y
            - \frac{\hat x}{n}\sum_{\text{all}} \mathrm{d}y\,\hat x\Big),

    where :math:`\sum_{\text{all}}` runs over every process. So each process
    all-reduces its two per-channel sums :math:`\sum \mathrm{d}y` and
    :math:`\sum \mathrm{d}y\,\hat x`. Before the all-reduce these sums are the
    process's own :math:`\mathrm{d}\beta` and :math:`\mathrm{d}\gamma`: the
    parameter gradients returned are those local parts, and their sum over
    processes (what DistributedDataParallel reduces) is the global gradient.
    """

    @staticmethod
    def forward(
        ctx,
        input,
        weight,
        bias,
        running_mean,
        running_var,
        eps,
        momentum,
        group,
        world_size,
        num_features,
    ):
        counts = _sync_check(input, num_features, group, world_size)
        dtype = F._opmath(input.dtype)
        x = input.to(dtype)  # (N_p, C, *S)
        mean_p, m2_p = _local_stats(x)  # (C,), (C,)
        mine = torch.stack([mean_p, m2_p])  # (2, C)
        gathered = [torch.empty_like(mine) for _ in range(world_size)]
        with _collective("all_gather of the statistics (forward pass)"):
            dist.all_gather(gathered, mine, group=group)
        stats = torch.stack(gathered).double()  # (P, 2, C)
        # combined in float64: P * C numbers, and counts beyond 2**24 stay exact
        n, mean, m2 = combine_stats(counts.double(), stats[:, 0], stats[:, 1])
        mean, m2, n = mean.to(dtype), m2.to(dtype), n.item()
        var = m2 / n  # (C,) biased
        invstd = torch.rsqrt(var + eps)  # (C,)

        if running_mean is not None:
            n_total = int(counts.sum())
            F._update_running(running_mean, mean, momentum)
            F._update_running(running_var, m2 / (n_total - 1), momentum)

        ndim = input.dim()
        scale = F._channel_view(invstd, ndim, dtype)  # (1, C, 1, ...)
        if weight is not None:
            scale = scale * F._channel_view(weight, ndim, dtype)
        shift = None if bias is None else F._channel_view(bias, ndim, dtype)
        y = F._affine(x - F._channel_view(mean, ndim, dtype), scale, shift)

        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.n_total = float(counts.sum())
        ctx.group = group
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y.to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dtype = F._opmath(input.dtype)
        ndim = input.dim()
        dims = (0, *range(2, ndim))
        dy = grad_output.to(dtype)  # (N_p, C, *S)
        x_hat = (input.to(dtype) - F._channel_view(mean, ndim, dtype)) * F._channel_view(
            invstd, ndim, dtype
        )  # (N_p, C, *S)
        # The two per-channel sums: this process's dβ and dγ.
        sum_dy = dy.sum(dims)  # (C,)
        sum_dy_xhat = (dy * x_hat).sum(dims)  # (C,)

        grad_input = grad_weight = grad_bias = None
        if need_w:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if need_b:
            grad_bias = sum_dy.to(ctx.bias_dtype)
        if need_x:
            # The shapes were agreed on in forward: both sides send 2 * C numbers.
            sums = torch.stack([sum_dy, sum_dy_xhat])  # (2, C)
            with _collective("all_reduce of the gradient sums (backward pass)"):
                dist.all_reduce(sums, group=ctx.group)
            n = ctx.n_total
            # the means of g = dy * weight over the global batch: the all-reduced sums / n
            w = torch.ones_like(invstd) if weight is None else weight.to(dtype)  # (C,)
            grad_input = F.normalization_backward(
                dy * F._channel_view(w, ndim, dtype),
                x_hat,
                F._channel_view(invstd, ndim, dtype),
                F._channel_view(sums[0] / n * w, ndim, dtype),
                F._channel_view(sums[1] / n * w, ndim, dtype),
            )
            grad_input = grad_input.to(input.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None


# --------------------------------------------------------------------------
# the module
# --------------------------------------------------------------------------


class SyncBatchNorm(_BatchNorm):
    r"""Batch Normalization over an N-dimensional input, with the statistics of the batch of every
    process.

    From the paper `Batch Normalization: Accelerating Deep Network Training by
    Reducing Internal Covariate Shift <https://arxiv.org/abs/1502.03167>`__
    (Ioffe & Szegedy, 2015); synchronized across devices as in MegDet (Peng et
    al., 2018). Drop-in for :class:`torch.nn.SyncBatchNorm`, and it also runs on
    CPU with the ``gloo`` backend.

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} * \gamma + \beta

    In training, the mean and (biased) variance of each channel are those of
    the global batch: the union of the slices that the processes of
    :attr:`process_group` hold, over the batch and spatial dims. The slices may
    differ in size. Each process's count, mean and centred sum of squares are
    all-gathered and combined with Chan et al.'s parallel formula (see
    :func:`combine_stats`). The running variance is unbiased with the global
    count, so every process holds the same running statistics and
    ``num_batches_tracked``. In backward, the input gradient is BatchNorm's
    over the global batch (two per-channel sums are all-reduced); the
    parameter gradients are the process's local part, whose sum over
    processes is the global gradient (DistributedDataParallel averages them).

    In eval mode, without an initialized process group, or with a group of one
    process, it is plain BatchNorm and communicates nothing. Every collective
    is preceded by a cheap check of every process's input, so a channel count
    that differs between processes, an input on a device the backend cannot
    reduce, or a global batch with one value per channel raises the same
    ``ValueError`` on every process instead of hanging.

    Args:
        num_features: number of features or channels :math:`C` of an input
            :math:`(N, C, +)`
        eps: a value added to the variance for numerical stability. Default: 1e-5
        momentum: the value used for the running_mean and running_var
            computation. Can be set to ``None`` for a cumulative moving average
            (i.e. a simple average over all batches seen). Default: 0.1
        affine: if ``True``, this module has learnable affine parameters
            :math:`\gamma` (``weight``, init 1) and :math:`\beta` (``bias``, init 0).
            Default: ``True``
        track_running_stats: if ``True``, this module tracks the running mean
            and variance in buffers and normalizes with them in eval mode. If
            ``False``, the buffers are ``None`` and batch statistics are used in
            both training and eval modes (synchronized only in training).
            Default: ``True``
        process_group: the statistics are synchronized within this group.
            Default: ``None``, the whole world
        device, dtype: where and in what dtype to create parameters and buffers
            (``num_batches_tracked`` is always ``torch.long``).
        bias: if ``False``, no additive bias :math:`\beta` is learnt (only
            relevant if :attr:`affine` is ``True``). Default: ``True``

    Shape:
        - Input: :math:`(N, C, +)`: :math:`(N, C)`, :math:`(N, C, L)`,
          :math:`(N, C, H, W)`, ...; :math:`N` may differ between processes
        - Output: :math:`(N, C, +)` (same shape as input)

    Example::

        >>> import torch, norms
        >>> m = norms.SyncBatchNorm(3)          # no process group: plain BatchNorm
        >>> x = torch.randn(8, 3, 4, 4) + 5
        >>> torch.allclose(m(x), norms.BatchNorm2d(3)(x))
        True
        >>> m
        SyncBatchNorm(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)

    Across processes (run with ``norms.distributed.launch``, or ``torchrun``)::

        >>> # torch.distributed.init_process_group("gloo", ...)  # on every process
        >>> # model = norms.SyncBatchNorm.convert_sync_batchnorm(model)
        >>> # model = torch.nn.parallel.DistributedDataParallel(model)
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any | None = None,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features,
            eps,
            momentum,
            affine,
            track_running_stats,
            device=device,
            dtype=dtype,
            bias=bias,
        )
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(
                f"expected at least 2D input (got {input.dim()}D input): SyncBatchNorm wants "
                f"(N, C, *) with C={self.num_features}, got input of shape {_fmt(input.shape)}"
            )

    def _check_non_zero_input_channels(self, input: Tensor) -> None:
        if input.size(1) == 0:
            raise ValueError(
                f"SyncBatchNorm number of input channels should be non-zero, got input of "
                f"shape {_fmt(input.shape)}"
            )

    def _sync_group(self):
        """(group, world size) when training must synchronize, else None."""
        if not (self.training and dist.is_available() and dist.is_initialized()):
            return None
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        world_size = dist.get_world_size(group)
        return (group, world_size) if world_size > 1 else None

    def forward(self, input: Tensor) -> Tensor:
        sync = self._sync_group()
        if sync is None:
            self._check_input_dim(input)
            self._check_non_zero_input_channels(input)
            return super().forward(input)  # plain BatchNorm, nothing communicated
        # No local raise from here on: a process that raised before a collective would
        # leave the others hanging. Every check is made on the gathered shapes.

        if self.eps <= 0.0:
            raise ValueError(f"batch_norm eps must be positive during training, but got {self.eps}")
        # momentum=None: cumulative average, factor 1/k at the k-th batch. The counter
        # moves only once the step succeeded, the same on every process.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.momentum is None:
            factor = 1.0 / (float(self.num_batches_tracked) + 1)
        group, world_size = sync
        y = SyncBatchNormFunction.apply(
            input,
            self.weight,
            self.bias,
            self.running_mean if self.track_running_stats else None,
            self.running_var if self.track_running_stats else None,
            self.eps,
            factor,
            group,
            world_size,
            self.num_features,
        )
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)  # type: ignore[union-attr]
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module: torch.nn.Module, process_group=None) -> torch.nn.Module:
        r"""Replace every BatchNorm*d of ``module`` (``torch.nn`` or ``norms``) by a
        :class:`SyncBatchNorm`.

        Like :meth:`torch.nn.SyncBatchNorm.convert_sync_batchnorm`: the new
        layers share the old ones' ``weight`` and ``bias`` parameters and their
        running-statistics buffers, and keep the training flag (and
        ``qconfig``). InstanceNorm layers are left alone.

        Args:
            module: a module containing one or more BatchNorm*d layers
            process_group: the group to synchronize in. Default: the whole world

        Returns:
            ``module`` with its BatchNorm layers converted; if ``module`` itself
            is a BatchNorm layer, a new :class:`SyncBatchNorm`.

        Example::

            >>> import torch, norms
            >>> net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))
            >>> norms.SyncBatchNorm.convert_sync_batchnorm(net)[1]
            SyncBatchNorm(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        """  # noqa: E501 - doctest output, printed on one line
        module_output = module
        if isinstance(module, (torch.nn.modules.batchnorm._BatchNorm, _BatchNorm)):
            module_output = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
                bias=module.bias is not None,
            )
            if module.affine:
                with torch.no_grad():
                    module_output.weight = module.weight
                    module_output.bias = module.bias
            module_output.running_mean = module.running_mean
            module_output.running_var = module.running_var
            module_output.num_batches_tracked = module.num_batches_tracked
            module_output.training = module.training
            if hasattr(module, "qconfig"):
                module_output.qconfig = module.qconfig
        for name, child in module.named_children():
            module_output.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return module_output
