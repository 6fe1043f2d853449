r"""Synchronized Batch Normalization, from scratch on :mod:`torch.distributed`.

:class:`SyncBatchNorm` is drop-in for :class:`torch.nn.SyncBatchNorm`, and it also runs on
CPU with the ``gloo`` backend (torch's refuses CPU tensors). In training each process holds
a slice of the batch, and the layer normalizes with the statistics of the *global* batch,
the union of the slices. Per training step it makes two collectives, as torch's does:

* **forward**, one ``all_gather``: each process sends its count, and per channel its mean
  and centred sum of squares :math:`M_2`; every process combines them with Chan et al.'s
  formula (:func:`combine_stats`), in the same order, into bit-identical statistics;
* **backward**, one ``all_gather`` where torch all-reduces: each process sends its two
  per-channel sums :math:`\sum \mathrm{d}y` and :math:`\sum \mathrm{d}y\,\hat x`, and every
  process adds them up in rank order.

Each packet starts with a header (:mod:`norms.distributed.packet`): what the process is
doing, with which settings and which input. Every process checks every header after the
collective (:mod:`norms.distributed.checks`), so processes that disagree raise the same
error, naming the ranks, instead of hanging; gathering in backward too lets a process that
skipped backward meet the others there. In eval mode, without an initialized process group,
or with a group of one process, the layer is plain :class:`norms.BatchNorm2d` (or 1d, 3d)
and communicates nothing.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import axes, compat, stats
from .. import functional as F
from ..distributed import checks, forensics, packet
from ..stats import combine as combine_stats
from .batchnorm import BatchNormBase

__all__ = ["SyncBatchNorm", "SyncBatchNormFunction", "combine_stats", "local_stats"]


def local_stats(x: Tensor) -> tuple[Tensor, Tensor]:
    r"""Mean and centred sum of squares :math:`M_2 = \sum (x-\bar x)^2` of each channel of a
    slice ``x`` ``(N, C, *S)``: both ``(C,)``, what a process sends for
    :func:`combine_stats` (:func:`norms.stats.batch_moments`, two passes, never
    ``E[x²] - E[x]²``). An empty slice gives 0 and 0.
    """
    c = x.shape[1]
    if x.numel() == 0:
        zeros = torch.zeros(c, dtype=x.dtype, device=x.device)
        return zeros, zeros.clone()
    mean, _, var = stats.batch_moments(x)  # (1, C, 1, ...) each
    n = stats.count(x.shape, axes.batch_norm_dims(x.dim()))
    return mean.reshape(c), var.reshape(c) * n


class SyncBatchNormFunction(torch.autograd.Function):
    r"""Training-mode BatchNorm over the union of every process's slice.

    ``apply(input, weight, bias, running_mean, running_var, eps, momentum, group,
    world_size, num_features, header)``, where ``momentum`` is the running-average factor of
    this step and ``header`` the layer's part of the packet header
    (:func:`norms.distributed.packet.layer_header`). ``input`` is ``(N_p, C, *S)`` on
    process ``p``; the slices may differ in ``N_p`` (even 0) and in ``S``.

    **Forward: one all-gather.** Each process sends its slice's mean and centred sum of
    squares :math:`M_{2,p}` (its count :math:`n_p` is in the header). Every process checks
    every header, then combines the statistics with :func:`combine_stats` into the global
    :math:`n`, :math:`\mu` and :math:`\sigma^2 = M_2/n`. The running variance gets
    :math:`M_2/(n-1)`, unbiased with the *global* count.

    **Backward: one all-gather.** With :math:`\hat x = (x-\mu)/\sigma`, BatchNorm's input
    gradient over the global batch is

    .. math::

        \mathrm{d}x = \frac{\gamma}{\sigma}\Big(\mathrm{d}y
            - \frac{1}{n}\sum_{\text{all}} \mathrm{d}y
            - \frac{\hat x}{n}\sum_{\text{all}} \mathrm{d}y\,\hat x\Big),

    where :math:`\sum_{\text{all}}` runs over every process. Each process sends its two
    per-channel sums in a packet of forward's size and layout (torch all-reduces them), and
    every process adds them up in rank order. Before the sum they are the process's own
    :math:`\mathrm{d}\beta` and :math:`\mathrm{d}\gamma`: the parameter gradients returned
    are those local parts, whose sum over processes (what DistributedDataParallel reduces)
    is the global gradient.
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
        header,
    ):
        types = compat.group_device_types(group)
        device = packet.comm_device(types, input)
        header, ok = packet.with_input(header, input, ctx.needs_input_grad[0], types)
        dtype = F.opmath(input.dtype) if input.dtype in packet.DTYPES else torch.float64

        # this process's slice: mean and M2 per channel (nothing to compute for a bad input:
        # the headers carry the problem to every process)
        x = input.to(dtype) if ok else None  # (N_p, C, *S)
        mine = torch.stack(local_stats(x)) if ok else torch.zeros(2, num_features)  # (2, C)
        forensics.count("training forwards")
        heads, parts = packet.all_gather(
            header, mine.to(device, torch.float64), device, group, world_size, "forward"
        )  # (P, HEADER), (P, 2, C)
        step = int(header[packet.STEP])
        checks.check_forward(heads, step, num_features, input, group, world_size, types)

        # Chan et al., in float64: P * C numbers, and counts beyond 2**24 stay exact
        counts = heads[:, packet.COUNT]  # (P,)
        parts = parts.to(input.device)
        _, mean, m2 = combine_stats(counts.to(parts.device), parts[:, 0], parts[:, 1])
        n_total = int(counts.sum())
        mean, var = mean.to(dtype), (m2 / n_total).to(dtype)  # (C,), biased
        invstd = torch.rsqrt(var + eps)  # (C,)
        if running_mean is not None:  # unbiased with the global count
            stats.update_running_stats(running_mean, running_var, mean, var, n_total, momentum)

        ndim = input.dim()
        scale = stats.channel_view(invstd, ndim, dtype)  # (1, C, 1, ...)
        if weight is not None:
            scale = scale * stats.channel_view(weight, ndim, dtype)
        shift = None if bias is None else stats.channel_view(bias, ndim, dtype)
        y = F.affine(x - stats.channel_view(mean, ndim, dtype), scale, shift)

        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.n_total = n_total
        ctx.group, ctx.world_size, ctx.device = group, world_size, device
        ctx.header, ctx.step = header, step
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y.to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dtype = F.opmath(input.dtype)
        ndim = input.dim()
        dims = axes.batch_norm_dims(ndim)  # (0, 2, 3, ...)
        dy = grad_output.to(dtype)  # (N_p, C, *S)
        x_hat = (input.to(dtype) - stats.channel_view(mean, ndim, dtype)) * stats.channel_view(
            invstd, ndim, dtype
        )  # (N_p, C, *S)
        # the two per-channel sums: this process's dβ and dγ
        sum_dy = dy.sum(dims)  # (C,)
        sum_dy_xhat = (dy * x_hat).sum(dims)  # (C,)

        grad_input = grad_weight = grad_bias = None
        if need_w:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if need_b:
            grad_bias = sum_dy.to(ctx.bias_dtype)
        if need_x:
            sums = _sum_over_processes(ctx, torch.stack([sum_dy, sum_dy_xhat]), input, dtype)
            # the means of g = dy * weight over the global batch: the summed sums / n
            w = torch.ones_like(invstd) if weight is None else weight.to(dtype)  # (C,)
            grad_input = F.normalization_backward(
                dy * stats.channel_view(w, ndim, dtype),
                x_hat,
                stats.channel_view(invstd, ndim, dtype),
                stats.channel_view(sums[0] / ctx.n_total * w, ndim, dtype),
                stats.channel_view(sums[1] / ctx.n_total * w, ndim, dtype),
            ).to(input.dtype)
        return grad_input, grad_weight, grad_bias, *([None] * 8)


def _sum_over_processes(ctx, sums: Tensor, input: Tensor, dtype: torch.dtype) -> Tensor:
    """The sum of ``sums`` ``(2, C)`` over every process, in ``dtype`` on the input's device.

    An all-gather of a packet of forward's size and layout, so that a process that went on to
    its next forward instead shows up in the headers (not in a mismatched collective), then a
    sum in rank order: the same on every process."""
    header = list(ctx.header)
    header[packet.PHASE] = packet.BWD
    forensics.count("backward passes")
    heads, parts = packet.all_gather(
        header,
        sums.to(ctx.device, torch.float64),
        ctx.device,
        ctx.group,
        ctx.world_size,
        "backward",
    )  # (P, HEADER), (P, 2, C)
    checks.check_backward(heads, ctx.step, input.shape[1])
    parts = parts.to(input.device, dtype)  # exact: they were dtype
    total = parts[0]
    for r in range(1, ctx.world_size):
        total = total + parts[r]
    return total


class SyncBatchNorm(BatchNormBase):
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
    over the global batch (two per-channel sums added up over the processes); the
    parameter gradients are the process's local part, whose sum over
    processes is the global gradient (DistributedDataParallel averages them).

    In eval mode, without an initialized process group, or with a group of one
    process, it is plain BatchNorm and communicates nothing. Every collective
    carries a header describing each process's settings and input, checked on
    every process after the collective: a channel count that differs between
    processes, an input on a device the backend cannot reduce, a global batch
    with one value per channel, or settings that differ (eps, momentum,
    ``requires_grad`` of the parameters or of the input) raise the same
    ``ValueError`` on every process instead of hanging; processes out of step
    (one skipped backward, or ran the layer in eval mode) raise a
    ``RuntimeError`` that names the ranks.

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
        # Where this layer is, for the packet's header: its synchronized forwards so far, and
        # its eval-mode forwards with gradients in a group since the last one.
        self._sync_steps = 0
        self._evals_since_sync = 0

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(
                f"expected at least 2D input (got {input.dim()}D input): SyncBatchNorm wants "
                f"(N, C, *) with C={self.num_features}, got input of shape {tuple(input.shape)}"
            )

    def _check_non_zero_input_channels(self, input: Tensor) -> None:
        if input.size(1) == 0:
            raise ValueError(
                f"SyncBatchNorm number of input channels should be non-zero, got input of "
                f"shape {tuple(input.shape)}"
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
            if not self.training and dist.is_available() and dist.is_initialized():
                # No collective, but remembered: a peer that trains meanwhile is told. Only
                # with gradients enabled (a training step in eval mode): evaluating under
                # torch.no_grad() on some processes only is fine.
                forensics.count("eval-mode forwards")
                self._evals_since_sync += int(torch.is_grad_enabled())
            self._check_input_dim(input)
            self._check_non_zero_input_channels(input)
            return super().forward(input)  # plain BatchNorm, nothing communicated

        # No local raise from here on: a process that raised before a collective would
        # leave the others hanging. Every check is made on the gathered headers.
        # The counter moves only once the step succeeded, the same on every process: this
        # batch is its value plus one.
        batches = int(self.num_batches_tracked) + 1 if self.track_running_stats else None
        factor = stats.running_average_factor(self.momentum, batches)
        header = packet.layer_header(
            self._sync_steps,
            self._evals_since_sync,
            self.eps,
            self.momentum,
            self.track_running_stats,
            self.weight,
            self.bias,
            self.num_features,
        )
        # every process reaches the collective: the step moves on every process alike
        self._sync_steps += 1
        self._evals_since_sync = 0
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
            header,
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
        if isinstance(module, (*compat.torch_batchnorm_classes(), BatchNormBase)):
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
