"""SyncBatchNorm's checks on the gathered headers: every process raises the same error.

A process that raised before a collective would leave the others waiting in it. So
:class:`norms.SyncBatchNorm` raises nothing before its collective: every process reads every
header of :mod:`norms.distributed.packet` after it, and when the processes are out of step
(one skipped backward, or ran the layer in eval mode), disagree on a setting, or one has an
input the layer cannot take, every process raises the same error naming the ranks.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor

from .packet import (
    BIAS_RG,
    BWD,
    CHANNELS,
    COUNT,
    DEVICE_OK,
    DTYPE,
    EPS,
    EVALS,
    FWD,
    INPUT_RG,
    MOMENTUM,
    NDIM,
    NUM_FEATURES,
    PHASE,
    STEP,
    TRACK,
    WEIGHT_RG,
)

__all__ = ["check_backward", "check_forward", "config_problem", "input_problem", "order_problem"]


def check_forward(
    heads: Tensor, step: int, num_features: int, input: Tensor, group, world_size: int, types
) -> None:
    """Raise the same error on every process if the forward headers ``heads`` ``(P, HEADER)``
    show processes out of step, settings that differ, or an input the layer cannot take."""
    problem = order_problem(heads, FWD, step)
    if problem is not None:
        raise RuntimeError(f"SyncBatchNorm({num_features}): {problem}")
    problem = config_problem(heads)
    if problem is not None:
        raise ValueError(f"SyncBatchNorm({num_features}): {problem}")
    problem = input_problem(heads, num_features, group, types)
    if problem is not None:
        # Every process takes this branch (they all see the same headers).
        got = describe_inputs(input, group, world_size)
        raise ValueError(f"SyncBatchNorm: {problem}. Got {got}")


def check_backward(heads: Tensor, step: int, num_features: int) -> None:
    """Raise the same error on every process if a process is not in the backward of ``step``."""
    problem = order_problem(heads, BWD, step)
    if problem is not None:
        raise RuntimeError(f"SyncBatchNorm({num_features}): {problem}")


def _where(heads: Tensor, r: int) -> str:
    phase = "forward" if heads[r, PHASE] == FWD else "backward"
    evals = int(heads[r, EVALS])
    after = f", after {evals} eval-mode forward(s) of it with gradients" if evals else ""
    return f"rank {r}: {phase} of training step {int(heads[r, STEP])}{after}"


def order_problem(heads: Tensor, phase: float, step: int) -> str | None:
    """Why the processes are not all in the same pass (forward or backward) of the same step of
    this layer, naming the ranks; None if they are."""
    same = (heads[:, PHASE] == phase) & (heads[:, STEP] == step)
    same &= heads[:, EVALS] == heads[0, EVALS]
    if bool(same.all()):
        return None
    ranks = range(heads.shape[0])
    where = "; ".join(_where(heads, r) for r in ranks)
    evals = [r for r in ranks if heads[r, EVALS] > 0]
    forward = [r for r in ranks if heads[r, PHASE] == FWD]
    backward = [r for r in ranks if heads[r, PHASE] == BWD]
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


#: The settings every process must share: (field, name, how to print a value).
SETTINGS = (
    (EPS, "eps", float),
    (MOMENTUM, "momentum (-1: None)", float),
    (TRACK, "track_running_stats", bool),
    (WEIGHT_RG, "weight.requires_grad (-1: no weight)", int),
    (BIAS_RG, "bias.requires_grad (-1: no bias)", int),
    (INPUT_RG, "whether the input requires grad (a backward pass follows)", bool),
    (NUM_FEATURES, "num_features", int),
)


def config_problem(heads: Tensor) -> str | None:
    """The first setting on which the processes disagree, with every rank's value."""
    for field, name, kind in SETTINGS:
        values = heads[:, field]
        if bool((values != values[0]).any()):
            each = ", ".join(f"rank {r}: {kind(v.item())}" for r, v in enumerate(values))
            return f"the processes disagree on {name}: {each}"
    return None


def input_problem(heads: Tensor, num_features: int, group, types) -> str | None:
    """What is wrong with some process's input (or with the global batch), if anything."""
    if (heads[:, NDIM] < 2).any():
        return "expected input of shape (N, C, *) with at least 2 dims on every process"
    if (heads[:, DEVICE_OK] == 0).any():
        return (
            f"every input must be on a device the {dist.get_backend(group)} backend can "
            f"reduce ({', '.join(types)})"
        )
    if (heads[:, DTYPE] < 0).any():
        return "every input must be floating point (convert it first, e.g. x.float())"
    if (heads[:, CHANNELS] != num_features).any():
        return (
            f"the processes must agree on the number of channels: every input must have "
            f"num_features={num_features} channels in dim 1, shape (N, {num_features}, *)"
        )
    if (heads[:, DTYPE] != heads[0, DTYPE]).any():
        return "the processes must agree on the input dtype"
    if int(heads[:, COUNT].sum()) <= 1:
        return (
            "Expected more than 1 value per channel when training, got 1 value per channel "
            "in the global batch"
        )
    if heads[0, EPS] <= 0:
        return f"batch_norm eps must be positive during training, but got {heads[0, EPS].item()}"
    return None


def describe_inputs(input: Tensor, group, world_size: int) -> str:
    """Every process's input shape, device and dtype (only on the error path, where every
    process takes it: a second collective is safe there)."""
    described = [None] * world_size
    mine = (str(tuple(input.shape)), str(input.device), str(input.dtype))
    dist.all_gather_object(described, mine, group=group)
    return "; ".join(
        f"rank {r}: input of shape {s} on {d} ({t})" for r, (s, d, t) in enumerate(described)
    )
