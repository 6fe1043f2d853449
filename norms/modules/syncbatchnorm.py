r"""Synchronized Batch Normalization, from scratch on :mod:`torch.distributed`.

:class:`SyncBatchNorm` is drop-in for :class:`torch.nn.SyncBatchNorm`, but it
runs on any device the process group's backend can reduce, CPU with ``gloo``
included (torch's own refuses CPU tensors). In training each process holds a
slice of the batch; the layer normalizes with the statistics of the *global*
batch, the union of the slices.

What is communicated, per training step: as many collectives as
:class:`torch.nn.SyncBatchNorm` (one in forward, one in backward), each a
packet of a 15-number header and 2 numbers per channel per process:

* forward: an all-gather of the header (what the process is doing, with
  which settings and which input: shape, device, dtype, count) and each
  process's mean and centred sum of squares. Every process checks every
  header, so processes that disagree (on eps, momentum, the parameters'
  ``requires_grad``, train/eval mode, the input) raise the same error naming
  the ranks, in the same collective and at no extra cost. Every process
  combines the statistics with Chan et al.'s parallel formula, in the same
  order, so every process gets bit-identical statistics;
* backward: an all-gather of the same size and layout carrying
  :math:`\sum \mathrm{d}y` and :math:`\sum \mathrm{d}y\,\hat x` (torch
  all-reduces these two), added up in rank order on every process. A process
  that skipped backward meets the others here with its next forward's header,
  and every process says so.

In eval mode, without an initialized process group, or with a group of one
process, it is plain :class:`norms.BatchNorm1d`/``2d``/``3d`` and
communicates nothing.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import functional as F
from .batchnorm import _BatchNorm

__all__ = ["SyncBatchNorm", "SyncBatchNormFunction", "combine_stats"]

# dtypes the header can name; anything else is "not floating point"
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Fields of the header that leads every packet a process sends (float64; small integers and
# eps/momentum are exact). The packet is the header, then 2 numbers per channel.
(
    _PHASE,  # 1: forward (mean, M2 follow), 2: backward (sum dy, sum dy*x_hat follow)
    _STEP,  # this layer's synchronized forwards before this one, on this process
    _EVALS,  # this layer's eval-mode forwards in a group since its last synchronized one
    _EPS,
    _MOMENTUM,  # -1 for None (cumulative average)
    _TRACK,  # track_running_stats
    _WEIGHT_RG,  # weight.requires_grad (-1: no weight)
    _BIAS_RG,  # bias.requires_grad (-1: no bias)
    _BACKWARD,  # 1 if the input needs a gradient: a backward collective follows
    _NUM_FEATURES,
    _NDIM,
    _CHANNELS,
    _COUNT,
    _DEVICE_OK,
    _DTYPE,
) = range(15)
_HEADER = 15
_FWD, _BWD = 1.0, 2.0

# What this process's SyncBatchNorm layers did, for the message a peer shows when this
# process left while the peer waited in a collective (see norms.distributed.launch).
_ACTIVITY = {"training forwards": 0, "eval-mode forwards": 0, "backward passes": 0}


def activity() -> dict[str, int]:
    """Counts of this process's synchronized forwards, eval-mode forwards in a group of several
    processes, and backward collectives, over every SyncBatchNorm layer."""
    return dict(_ACTIVITY)


def _peers_that_left(group, what: str) -> str:
    """The activity of the peers that returned from their function (published in the store by
    :func:`norms.distributed.launch`), compared with this process's: empty if none did."""
    try:
        store = dist.distributed_c10d._get_default_store()
        me = dist.get_rank()
        ranks = dist.get_process_group_ranks(group)
    except Exception:  # noqa: BLE001 - only a better message is at stake
        return ""
    mine = activity()
    lines = []
    for r in ranks:
        key = f"norms-sbn-finished/{r}"
        try:
            if r == me or not store.check([key]):
                continue
            theirs = json.loads(store.get(key).decode())
        except Exception:  # noqa: BLE001
            continue
        why = ""
        if theirs["eval-mode forwards"] > mine["eval-mode forwards"] and (
            theirs["training forwards"] < mine["training forwards"]
        ):
            why = (
                f" The processes disagree on train/eval mode: rank {r} ran SyncBatchNorm in "
                f"eval mode where rank {me} trained (call model.train() or model.eval() on "
                "every process)."
            )
        elif theirs["backward passes"] < mine["backward passes"]:
            why = (
                f" Rank {r} skipped backward: every process must call backward after a "
                "training forward, or none."
            )
        lines.append(
            f"rank {r} returned from its function while rank {me} waited in the {what} "
            f"collective of SyncBatchNorm (rank {r}: "
            + ", ".join(f"{v} {k}" for k, v in theirs.items())
            + f"; rank {me}: "
            + ", ".join(f"{v} {k}" for k, v in mine.items())
            + ")."
            + why
        )
    return " ".join(lines)


@contextlib.contextmanager
def _collective(what: str, group=None):
    """Name the likely cause when a collective fails: the processes did not run the same steps."""
    try:
        yield
    except RuntimeError as error:
        said = (str(error).strip().splitlines() or [""])[0][:300]
        left = _peers_that_left(group, what)
        raise RuntimeError(
            (f"SyncBatchNorm: {left} " if left else "SyncBatchNorm: ")
            + f"The {what} all_gather failed on this process ({type(error).__name__}: {said}). "
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
# the packet: a header (what this process is doing, with which settings and input) and
# 2 numbers per channel, all-gathered once in forward and once in backward
# --------------------------------------------------------------------------


def _device_types(group) -> list[str]:
    types = getattr(group, "_device_types", None)
    if types:
        return [torch.device(t).type for t in types]
    backend = str(dist.get_backend(group))
    return list(dist.Backend.backend_capability.get(backend, ["cpu"]))


def _comm_device(device_types: list[str], input: Tensor) -> torch.device:
    """Where the packet lives: the input's device if the backend reduces it, else the
    backend's own."""
    if input.device.type in device_types:
        return input.device
    kind = "cpu" if "cpu" in device_types else device_types[0]
    if kind == "cpu":
        return torch.device("cpu")
    return torch.device(kind, getattr(torch, kind).current_device())


def _fmt(shape) -> str:
    return str(tuple(int(s) for s in shape))


def _input_fields(input: Tensor, device_ok: bool) -> dict[int, float]:
    ndim = input.dim()
    c = input.shape[1] if ndim >= 2 else 0
    return {
        _NDIM: ndim,
        _CHANNELS: c,
        _COUNT: input.numel() // c if c > 0 else 0,
        _DEVICE_OK: int(device_ok),
        _DTYPE: _DTYPES.index(input.dtype) if input.dtype in _DTYPES else -1,
    }


def _input_ok(fields: dict[int, float], num_features: int) -> bool:
    return (
        fields[_NDIM] >= 2
        and fields[_DEVICE_OK] == 1
        and fields[_DTYPE] >= 0
        and fields[_CHANNELS] == num_features
    )


def _gather(header: list[float], body: Tensor, device, group, world_size: int, what: str):
    """All-gather ``header + body`` (float64) from every process: the one collective of a
    forward or a backward pass. Returns the headers on the host ``(P, H)`` and the bodies
    ``(P, 2, C)`` on ``device``."""
    mine = torch.cat([torch.tensor(header, dtype=torch.float64, device=device), body.reshape(-1)])
    gathered = [torch.empty_like(mine) for _ in range(world_size)]
    with _collective(what, group):
        dist.all_gather(gathered, mine, group=group)
    table = torch.stack(gathered)  # (P, H + 2C)
    return table[:, :_HEADER].cpu(), table[:, _HEADER:].reshape(world_size, 2, -1)


def _where(heads: Tensor, r: int) -> str:
    phase = "forward" if heads[r, _PHASE] == _FWD else "backward"
    evals = int(heads[r, _EVALS])
    after = f", after {evals} eval-mode forward(s) of it with gradients" if evals else ""
    return f"rank {r}: {phase} of training step {int(heads[r, _STEP])}{after}"


def _order_problem(heads: Tensor, phase: float, step: int) -> str | None:
    """Why the processes are not all in the same pass (forward or backward) of the same step of
    this layer, naming the ranks; None if they are."""
    same = (heads[:, _PHASE] == phase) & (heads[:, _STEP] == step)
    same &= heads[:, _EVALS] == heads[0, _EVALS]
    if bool(same.all()):
        return None
    where = "; ".join(_where(heads, r) for r in range(heads.shape[0]))
    evals = [r for r in range(heads.shape[0]) if heads[r, _EVALS] > 0]
    forward = [r for r in range(heads.shape[0]) if heads[r, _PHASE] == _FWD]
    backward = [r for r in range(heads.shape[0]) if heads[r, _PHASE] == _BWD]
    if evals:
        cause = (
            f"the processes disagree on train/eval mode: rank(s) {evals} ran this layer in "
            "eval mode with gradients enabled where the others trained (call model.train() "
            "or model.eval() on every process; evaluate under torch.no_grad() when only some "
            "processes evaluate)"
        )
    elif backward and forward:
        cause = (
            f"rank(s) {forward} skipped backward of a training step that rank(s) {backward} "
            "are running backward for (call backward on every process after a training "
            "forward, or on none)"
        )
    else:
        cause = "the processes ran this layer a different number of times"
    return f"{cause}. Where each process is: {where}"


_CONFIG = (
    (_EPS, "eps", float),
    (_MOMENTUM, "momentum (-1: None)", float),
    (_TRACK, "track_running_stats", bool),
    (_WEIGHT_RG, "weight.requires_grad (-1: no weight)", int),
    (_BIAS_RG, "bias.requires_grad (-1: no bias)", int),
    (_BACKWARD, "whether the input requires grad (a backward pass follows)", bool),
    (_NUM_FEATURES, "num_features", int),
)


def _config_problem(heads: Tensor) -> str | None:
    """The first setting on which the processes disagree, with every rank's value."""
    for field, name, kind in _CONFIG:
        values = heads[:, field]
        if bool((values != values[0]).any()):
            each = ", ".join(f"rank {r}: {kind(v.item())}" for r, v in enumerate(values))
            return f"the processes disagree on {name}: {each}"
    return None


def _input_problem(heads: Tensor, num_features: int, group, device_types) -> str | None:
    if (heads[:, _NDIM] < 2).any():
        return "expected input of shape (N, C, *) with at least 2 dims on every process"
    if (heads[:, _DEVICE_OK] == 0).any():
        return (
            f"every input must be on a device the {dist.get_backend(group)} backend can "
            f"reduce ({', '.join(device_types)})"
        )
    if (heads[:, _DTYPE] < 0).any():
        return "every input must be floating point (convert it first, e.g. x.float())"
    if (heads[:, _CHANNELS] != num_features).any():
        return (
            f"the processes must agree on the number of channels: every input must have "
            f"num_features={num_features} channels in dim 1, shape (N, {num_features}, *)"
        )
    if (heads[:, _DTYPE] != heads[0, _DTYPE]).any():
        return "the processes must agree on the input dtype"
    if int(heads[:, _COUNT].sum()) <= 1:
        return (
            "Expected more than 1 value per channel when training, got 1 value per channel "
            "in the global batch"
        )
    if heads[0, _EPS] <= 0:
        return f"batch_norm eps must be positive during training, but got {heads[0, _EPS].item()}"
    return None


def _describe_inputs(input: Tensor, group, world_size: int) -> str:
    """Every process's input shape, device and dtype (only on the error path, where every
    process takes it: a second collective is safe there)."""
    described = [None] * world_size
    dist.all_gather_object(
        described, (_fmt(input.shape), str(input.device), str(input.dtype)), group=group
    )
    return "; ".join(
        f"rank {r}: input of shape {s} on {d} ({t})" for r, (s, d, t) in enumerate(described)
    )


# --------------------------------------------------------------------------
# the autograd Function
# --------------------------------------------------------------------------


class SyncBatchNormFunction(torch.autograd.Function):
    r"""Training-mode BatchNorm over the union of every process's slice.

    ``apply(input, weight, bias, running_mean, running_var, eps, momentum,
    group, world_size, num_features, header)``, where ``header`` is the
    layer's part of the packet header (see :meth:`SyncBatchNorm.forward`).
    ``input`` is ``(N_p, C, *S)`` on process ``p``; the slices may differ in
    ``N_p`` (even 0) and in ``S``.

    **Forward: one all-gather.** Each process computes its slice's count
    :math:`n_p`, mean and centred sum of squares :math:`M_{2,p}`, and
    all-gathers them in one packet, after a header that says what the process
    is doing (forward of its k-th training step of this layer) with which
    settings (eps, momentum, ``requires_grad`` of the parameters and the input)
    and which input (shape, device, dtype). Every process checks every header
    and raises the same error, naming the ranks, when they disagree; else it
    combines the statistics with :func:`combine_stats` into the global
    :math:`n`, :math:`\mu` and :math:`\sigma^2 = M_2/n`. The running variance
    gets :math:`M_2/(n-1)`, unbiased with the *global* count.

    **Backward: one all-gather.** With :math:`\hat x = (x-\mu)/\sigma` and
    :math:`g = \mathrm{d}y\,\gamma`, BatchNorm's input gradient over the
    global batch is

    .. math::

        \mathrm{d}x = \frac{\gamma}{\sigma}\Big(\mathrm{d}y
            - \frac{1}{n}\sum_{\text{all}} \mathrm{d}y
            - \frac{\hat x}{n}\sum_{\text{all}} \mathrm{d}y\,\hat x\Big),

    where :math:`\sum_{\text{all}}` runs over every process. So each process
    sends its two per-channel sums :math:`\sum \mathrm{d}y` and
    :math:`\sum \mathrm{d}y\,\hat x` in a packet of the same size and layout
    as forward's (torch all-reduces them instead); every process adds them up
    in rank order. A process that skipped backward and went on to the next
    forward therefore meets the others' backward packets in the same
    collective, and every process raises an error that says so. Before the
    sum these two are the process's own :math:`\mathrm{d}\beta` and
    :math:`\mathrm{d}\gamma`: the parameter gradients returned are those local
    parts, and their sum over processes (what DistributedDataParallel reduces)
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
        device_types = _device_types(group)
        device = _comm_device(device_types, input)
        fields = _input_fields(input, input.device.type in device_types)
        step = int(header[_STEP])
        header = list(header)
        for k, v in fields.items():
            header[k] = float(v)
        header[_BACKWARD] = float(ctx.needs_input_grad[0])
        dtype = F.opmath(input.dtype) if fields[_DTYPE] >= 0 else torch.float64
        if _input_ok(fields, num_features):
            x = input.to(dtype)  # (N_p, C, *S)
            mean_p, m2_p = _local_stats(x)  # (C,), (C,)
            body = torch.stack([mean_p, m2_p]).to(device, torch.float64)  # (2, C), exact
        else:  # nothing to compute: the headers carry the problem to every process
            x = None
            body = torch.zeros(2, num_features, dtype=torch.float64, device=device)
        _ACTIVITY["training forwards"] += 1
        heads, stats = _gather(header, body, device, group, world_size, "forward")

        problem = _order_problem(heads, _FWD, step)
        if problem is not None:
            raise RuntimeError(f"SyncBatchNorm({num_features}): {problem}")
        problem = _config_problem(heads)
        if problem is not None:
            raise ValueError(f"SyncBatchNorm({num_features}): {problem}")
        problem = _input_problem(heads, num_features, group, device_types)
        if problem is not None:
            # Every process takes this branch (they all see the same headers).
            got = _describe_inputs(input, group, world_size)
            raise ValueError(f"SyncBatchNorm: {problem}. Got {got}")

        counts = heads[:, _COUNT]  # (P,) float64, exact
        stats = stats.to(input.device)  # (P, 2, C)
        # combined in float64: P * C numbers, and counts beyond 2**24 stay exact
        n, mean, m2 = combine_stats(counts.to(stats.device), stats[:, 0], stats[:, 1])
        n_total = float(counts.sum())
        mean, m2 = mean.to(dtype), m2.to(dtype)
        var = m2 / n_total  # (C,) biased
        invstd = torch.rsqrt(var + eps)  # (C,)

        if running_mean is not None:
            F._update_running(running_mean, mean, momentum)
            F._update_running(running_var, m2 / (n_total - 1), momentum)

        ndim = input.dim()
        scale = F._channel_view(invstd, ndim, dtype)  # (1, C, 1, ...)
        if weight is not None:
            scale = scale * F._channel_view(weight, ndim, dtype)
        shift = None if bias is None else F._channel_view(bias, ndim, dtype)
        y = F._affine(x - F._channel_view(mean, ndim, dtype), scale, shift)

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
            # Same packet size and layout as forward's, so a process that went on to the next
            # forward instead shows up in the headers instead of in a mismatched collective.
            header = list(ctx.header)
            header[_PHASE] = _BWD
            body = torch.stack([sum_dy, sum_dy_xhat]).to(ctx.device, torch.float64)  # (2, C)
            _ACTIVITY["backward passes"] += 1
            heads, parts = _gather(header, body, ctx.device, ctx.group, ctx.world_size, "backward")
            problem = _order_problem(heads, _BWD, ctx.step)
            if problem is not None:
                raise RuntimeError(f"SyncBatchNorm({input.shape[1]}): {problem}")
            parts = parts.to(input.device, dtype)  # (P, 2, C), exact: they were dtype
            sums = parts[0]
            for r in range(1, ctx.world_size):  # in rank order: the same sum on every process
                sums = sums + parts[r]
            n = ctx.n_total
            # the means of g = dy * weight over the global batch: the summed sums / n
            w = torch.ones_like(invstd) if weight is None else weight.to(dtype)  # (C,)
            grad_input = F.normalization_backward(
                dy * F._channel_view(w, ndim, dtype),
                x_hat,
                F._channel_view(invstd, ndim, dtype),
                F._channel_view(sums[0] / n * w, ndim, dtype),
                F._channel_view(sums[1] / n * w, ndim, dtype),
            )
            grad_input = grad_input.to(input.dtype)
        return grad_input, grad_weight, grad_bias, *([None] * 8)


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
            if not self.training and dist.is_available() and dist.is_initialized():
                # No collective, but remembered: a peer that trains meanwhile is told. Only
                # with gradients enabled (a training step in eval mode): evaluating under
                # torch.no_grad() on some processes only is fine.
                _ACTIVITY["eval-mode forwards"] += 1
                if torch.is_grad_enabled():
                    self._evals_since_sync = getattr(self, "_evals_since_sync", 0) + 1
            self._check_input_dim(input)
            self._check_non_zero_input_channels(input)
            return super().forward(input)  # plain BatchNorm, nothing communicated
        # No local raise from here on: a process that raised before a collective would
        # leave the others hanging. Every check is made on the gathered headers.

        # momentum=None: cumulative average, factor 1/k at the k-th batch. The counter
        # moves only once the step succeeded, the same on every process.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.momentum is None:
            factor = 1.0 / (float(self.num_batches_tracked) + 1)
        # this layer's part of the header; SyncBatchNormFunction adds the input's part
        header = [0.0] * _HEADER
        header[_PHASE] = _FWD
        header[_STEP] = float(getattr(self, "_sync_steps", 0))
        header[_EVALS] = float(getattr(self, "_evals_since_sync", 0))
        header[_EPS] = float(self.eps)
        header[_MOMENTUM] = -1.0 if self.momentum is None else float(self.momentum)
        header[_TRACK] = float(self.track_running_stats)
        header[_WEIGHT_RG] = -1.0 if self.weight is None else float(self.weight.requires_grad)
        header[_BIAS_RG] = -1.0 if self.bias is None else float(self.bias.requires_grad)
        header[_NUM_FEATURES] = float(self.num_features)
        # every process reaches the collective: the step moves on every process alike
        self._sync_steps = getattr(self, "_sync_steps", 0) + 1
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
            tuple(header),
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
