"""When a collective of SyncBatchNorm fails: what each process did, and the likely cause.

A process that returned from its function, raised or switched mode leaves its peers waiting
in a collective, which ends in a connection error or the timeout. This module keeps count of
what this process's SyncBatchNorm layers did (:func:`count`, :func:`activity`); the launcher
leaves those counts in the group's store when a worker returns (:func:`publish_activity`),
and a peer whose collective failed compares them with its own (:func:`collective`) to say
which rank left, and why.
"""

from __future__ import annotations

import contextlib
import json

import torch.distributed as dist

from .. import compat

__all__ = ["activity", "collective", "count", "peers_that_left", "publish_activity"]

# What this process's SyncBatchNorm layers did, over every layer.
_ACTIVITY = {"training forwards": 0, "eval-mode forwards": 0, "backward passes": 0}


def count(what: str) -> None:
    """One more of ``what``: ``"training forwards"``, ``"eval-mode forwards"`` (in a group of
    several processes) or ``"backward passes"``."""
    _ACTIVITY[what] += 1


def activity() -> dict[str, int]:
    """Counts of this process's synchronized forwards, eval-mode forwards in a group of several
    processes, and backward collectives, over every SyncBatchNorm layer."""
    return dict(_ACTIVITY)


def _key(rank: int) -> str:
    return f"norms-sbn-finished/{rank}"


def publish_activity(rank: int) -> None:
    """Leave :func:`activity` in the default group's store, under this rank: a peer still waiting
    in a collective names it in its error. Called by :func:`norms.distributed.launch` when the
    worker function of ``rank`` returned."""
    try:
        compat.default_store().set(_key(rank), json.dumps(activity()))
    except Exception:  # noqa: BLE001, S110 - only a peer's message is at stake
        pass


def _why(r: int, me: int, theirs: dict[str, int], mine: dict[str, int]) -> str:
    """The likely cause, from the counts of rank ``r`` (which returned) and of this rank."""
    if theirs["eval-mode forwards"] > mine["eval-mode forwards"] and (
        theirs["training forwards"] < mine["training forwards"]
    ):
        return (
            f" The processes disagree on train/eval mode: rank {r} ran SyncBatchNorm in "
            f"eval mode where rank {me} trained (call model.train() or model.eval() on "
            "every process)."
        )
    if theirs["backward passes"] < mine["backward passes"]:
        return (
            f" Rank {r} skipped backward: every process must call backward after a "
            "training forward, or none."
        )
    return ""


def _published(store, r: int) -> dict[str, int] | None:
    try:
        if not store.check([_key(r)]):
            return None
        return json.loads(store.get(_key(r)).decode())
    except Exception:  # noqa: BLE001 - only a better message is at stake
        return None


def peers_that_left(group, what: str) -> str:
    """The activity of the peers that returned from their function (published in the store by
    :func:`publish_activity`), compared with this process's: empty if none did."""
    try:
        store = compat.default_store()
        me = dist.get_rank()
        ranks = dist.get_process_group_ranks(group)
    except Exception:  # noqa: BLE001 - only a better message is at stake
        return ""
    mine = activity()
    lines = []
    for r in ranks:
        theirs = None if r == me else _published(store, r)
        if theirs is None:
            continue
        lines.append(
            f"rank {r} returned from its function while rank {me} waited in the {what} "
            f"collective of SyncBatchNorm (rank {r}: "
            + ", ".join(f"{v} {k}" for k, v in theirs.items())
            + f"; rank {me}: "
            + ", ".join(f"{v} {k}" for k, v in mine.items())
            + ")."
            + _why(r, me, theirs, mine)
        )
    return " ".join(lines)


@contextlib.contextmanager
def collective(what: str, group=None):
    """Name the likely cause when a collective fails: the processes did not run the same steps."""
    try:
        yield
    except RuntimeError as error:
        said = (str(error).strip().splitlines() or [""])[0][:300]
        left = peers_that_left(group, what)
        raise RuntimeError(
            (f"SyncBatchNorm: {left} " if left else "SyncBatchNorm: ")
            + f"The {what} all_gather failed on this process ({type(error).__name__}: {said}). "
            "Every process of the group must make the same calls in the same order: this layer "
            "in training mode on every process (not eval() on some), forward with an input that "
            "requires grad on all or none, backward on every process or on none. A process that "
            "raised, returned early or switched mode leaves the others in a collective "
            "(ending in a peer's connection error or the timeout)."
        ) from error
