"""Workers for tests/test_syncbatchnorm.py, run in spawned processes by norms.distributed.launch.

Kept apart from the test module so that each spawned process imports torch and
norms only (not pytest, not hypothesis). One launch runs every scenario, so the
processes are started once per world size.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn

import norms
from norms.distributed import global_batch, record_collectives, slice_of
from norms.lab.sync import compare_with_batchnorm

#: name -> (sizes per world size, channels, spatial, mean, layer kwargs)
CASES = {
    "2d-uneven": ({2: [1, 5], 3: [4, 1, 3]}, 3, (), 0.0, {}),
    "3d": ({2: [3, 2], 3: [2, 2, 1]}, 4, (7,), 0.0, {}),
    "4d-single-sample": ({2: [1, 2], 3: [1, 2, 1]}, 3, (5, 4), 0.0, {}),
    "5d": ({2: [2, 1], 3: [1, 1, 1]}, 2, (3, 4, 2), 0.0, {}),
    "empty-slice": ({2: [0, 4], 3: [3, 0, 2]}, 3, (5,), 0.0, {}),
    "mean-3000": ({2: [2, 3], 3: [1, 3, 2]}, 3, (6, 5), 3000.0, {}),
    "cumulative-no-bias": (
        {2: [2, 2], 3: [2, 1, 2]},
        5,
        (4,),
        0.0,
        {"momentum": None, "bias": False},
    ),
    "float64": ({2: [3, 1], 3: [1, 2, 2]}, 3, (2, 3), 0.0, {"dtype": torch.float64, "eps": 1e-3}),
    "bfloat16": ({2: [2, 3], 3: [2, 2, 1]}, 3, (4,), 0.0, {"dtype": torch.bfloat16}),
}

DDP_SIZES = {2: [3, 5], 3: [2, 5, 1]}
DDP_STEPS = 3


def ddp_model(seed: int) -> nn.Module:
    """A small model with a torch.nn and a norms BatchNorm, the same in every process for
    ``seed``."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv1d(2, 4, 3, padding=1),
        nn.BatchNorm1d(4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 6, 5),
        norms.BatchNorm1d(5),
        nn.Tanh(),
        nn.Linear(5, 2),
    )


def ddp_data(seed: int, sizes, step: int):
    g = torch.Generator().manual_seed(seed * 100 + step)
    n = sum(sizes)
    return torch.randn(n, 2, 6, generator=g) + 1.5, torch.randn(n, 2, generator=g)


def ddp_reference(seed: int, sizes) -> list:
    """Single-process training on the full batch: (grads, params, buffers) after every step."""
    model = ddp_model(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for step in range(DDP_STEPS):
        x, t = ddp_data(seed, sizes, step)
        opt.zero_grad()
        loss = ((model(x) - t) ** 2).sum() / sum(sizes)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        out.append(
            (
                grads,
                [p.detach().clone() for p in model.parameters()],
                {
                    k: v.clone()
                    for k, v in model.state_dict().items()
                    if "running" in k or "num_" in k
                },
            )
        )
    return out


def _ddp(rank, world_size, seed):
    sizes = DDP_SIZES[world_size]
    model = norms.SyncBatchNorm.convert_sync_batchnorm(ddp_model(seed))
    types = [type(m).__name__ for m in model]
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    out = []
    for step in range(DDP_STEPS):
        x, t = ddp_data(seed, sizes, step)
        x, t = slice_of(x, sizes, rank), slice_of(t, sizes, rank)
        opt.zero_grad()
        # DDP averages the gradients over the processes: scale by world_size so the
        # average is the gradient of the full batch's loss.
        loss = ((ddp(x) - t) ** 2).sum() * world_size / sum(sizes)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        out.append(
            (
                grads,
                [p.detach().clone() for p in model.parameters()],
                {
                    k: v.clone()
                    for k, v in model.state_dict().items()
                    if "running" in k or "num_" in k
                },
            )
        )
    return {"types": types, "steps": out}


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported
        return (type(e).__name__, str(e))
    return None


def _errors(rank, world_size):
    last = world_size - 1
    out = {}
    layer = norms.SyncBatchNorm(3)
    # processes disagree on the number of channels
    x = torch.randn(4, 3 if rank != last else 4, 5)
    out["channels"] = _error(lambda: layer(x))
    # an input on a device gloo cannot reduce ("meta" stands in for one here)
    x = torch.randn(4, 3, 5) if rank != last else torch.empty(4, 3, 5, device="meta")
    out["device"] = _error(lambda: layer(x))
    # one value per channel in the global batch
    x = torch.randn(1 if rank == 0 else 0, 3)
    out["one-value"] = _error(lambda: layer(x))
    # integer input on one process
    x = torch.randn(2, 3) if rank != last else torch.ones(2, 3, dtype=torch.long)
    out["dtype"] = _error(lambda: layer(x))
    # a 1-D input on one process
    x = torch.randn(2, 3) if rank != last else torch.randn(3)
    out["rank-1"] = _error(lambda: layer(x))
    # the group is still usable after the errors
    x = slice_of(global_batch(5, [2] * world_size, 3), [2] * world_size, rank)
    out["after"] = layer(x).detach()
    out["num_batches_tracked"] = int(layer.num_batches_tracked)
    return out


def _collectives(rank, world_size):
    """How many collectives one training step, and one eval forward, makes."""
    layer = norms.SyncBatchNorm(3)
    x = torch.randn(4, 3, 5, requires_grad=True)
    with record_collectives() as train:
        layer(x).sum().backward()
    layer.eval()
    with record_collectives() as evaluation:
        layer(x).sum().backward()
    layer.train()
    x.grad = None
    with record_collectives() as frozen_input:
        layer(x.detach()).sum().backward()
    return {"train": train, "eval": evaluation, "input-without-grad": frozen_input}


def _subgroup(rank, world_size):
    """A process_group smaller than the world: statistics are shared inside it only."""
    members = list(range(world_size - 1))  # every rank but the last
    group = dist.new_group(members)
    sizes = [2] * world_size
    x = slice_of(global_batch(11, sizes, 3, (4,)), sizes, rank)
    if rank not in members:
        return None
    layer = norms.SyncBatchNorm(3, process_group=group)
    return layer(x).detach()


def scenarios(rank: int, world_size: int, seed: int) -> dict:
    """Every check of the test file that needs processes, in one launch."""
    out = {}
    for name, (sizes, channels, spatial, mean, kwargs) in CASES.items():
        out[name] = compare_with_batchnorm(
            rank,
            world_size,
            seed,
            sizes[world_size],
            channels,
            spatial,
            steps=3,
            mean=mean,
            layer_kwargs=kwargs,
        )
    out["ddp"] = _ddp(rank, world_size, seed)
    out["errors"] = _errors(rank, world_size)
    out["collectives"] = _collectives(rank, world_size)
    out["subgroup"] = _subgroup(rank, world_size)
    out["interface"] = os.environ.get("GLOO_SOCKET_IFNAME")
    return out


def hang(rank: int, world_size: int) -> None:
    """Rank 0 waits in a collective that rank 1 never joins."""
    if rank == 0:
        dist.barrier()
    else:
        import time

        time.sleep(600)


def fail_on_rank_one(rank: int, world_size: int) -> int:
    dist.barrier()  # both ranks are past init_process_group before rank 1 leaves
    if rank == 1:
        raise ValueError("rank one fails on purpose")
    return rank


def key_error_on_rank_one(rank: int, world_size: int) -> int:
    """Rank 1 raises; rank 0 waits for it in a collective and fails after it (a peer error)."""
    if rank == 1:
        raise KeyError("rank one's own error")
    dist.barrier()
    dist.barrier()
    return rank


def sleep_reporting_pid(rank: int, world_size: int, folder: str) -> None:
    """Write this process's id to ``folder/rank<r>.pid``, then sleep (until killed)."""
    import time

    with open(os.path.join(folder, f"rank{rank}.pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(folder, f"rank{rank}.pid.tmp"), os.path.join(folder, f"rank{rank}.pid"))
    time.sleep(600)


def eval_on_rank_one(rank: int, world_size: int) -> None:
    """Rank 1 runs the layer in eval mode (no collective); rank 0 in training mode waits for it."""
    layer = norms.SyncBatchNorm(3)
    if rank == 1:
        layer.eval()
    layer(torch.randn(4, 3))


def _step(layer, x):
    layer(x).sum().backward()


def disagreements(rank: int, world_size: int) -> dict:
    """Processes that disagree, each case with fresh layers; every process reports its error.

    Each case ends inside the collective both processes make, so the group stays usable."""
    last = world_size - 1
    out = {}

    def fresh(**kwargs):
        torch.manual_seed(0)
        return norms.SyncBatchNorm(3, **kwargs), torch.randn(4, 3, 2, requires_grad=True)

    layer, x = fresh(eps=1e-5 if rank != last else 1e-3)
    out["eps"] = _error(lambda: _step(layer, x))
    layer, x = fresh(momentum=0.1 if rank != last else None)
    out["momentum"] = _error(lambda: _step(layer, x))
    layer, x = fresh()
    layer.weight.requires_grad_(rank != last)
    out["weight-requires-grad"] = _error(lambda: _step(layer, x))
    layer, x = fresh()
    layer.bias.requires_grad_(rank != last)
    out["bias-requires-grad"] = _error(lambda: _step(layer, x))
    layer, x = fresh()
    x = x.detach().requires_grad_(rank != last)  # the last has no backward to make
    out["input-requires-grad"] = _error(lambda: _step(layer, x))

    # the last rank skips backward at step 0 and goes on to step 1's forward
    layer, x = fresh()

    def skip():
        y = layer(x)
        if rank != last:
            y.sum().backward()
        _step(layer, x)

    out["skip-backward"] = _error(skip)

    # the last rank runs one step in eval mode, then trains again: its step-1 forward meets
    # the others' step-0 backward
    layer, x = fresh()

    def eval_once():
        if rank == last:
            layer.eval()
            _step(layer, x)
            layer.train()
        _step(layer, x)
        _step(layer, x)

    out["eval-once"] = _error(eval_once)
    # the group is still usable: one good step
    layer, x = fresh()
    out["after"] = _error(lambda: _step(layer, x))
    return out


def skip_backward_and_return_on_rank_one(rank: int, world_size: int) -> None:
    """Rank 1 runs forward only and returns; rank 0 waits for it in backward."""
    torch.manual_seed(0)
    layer = norms.SyncBatchNorm(3)
    y = layer(torch.randn(4, 3, requires_grad=True))
    if rank != 1:
        y.sum().backward()
