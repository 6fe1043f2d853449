"""SyncBatchNorm questions: what is communicated, Chan's combination, the global count, what stays
local.

Every key is computed: the combined variance by :func:`norms.modules.syncbatchnorm.combine_stats`,
the numbers communicated by the sizes of the tensors SyncBatchNorm sends.
"""

from __future__ import annotations

import torch

from ..i18n import tr
from ..modules.syncbatchnorm import combine_stats
from .builders import choice, num, numeric


def q_sync_numbers(rng, names=None):
    """How many numbers per step one process sends in forward or backward, for C channels."""
    c = rng.choice([16, 64, 128, 256, 512])
    p = rng.choice([2, 4, 8])
    where = rng.choice(["forward", "backward"])
    # forward: an all-gather of a 15-number header and (mean, centred sum of squares) per channel;
    # backward: an all-gather of the header and (sum dy, sum dy x̂) per channel
    value = 2 * c
    what = (
        tr("the statistics of the forward all-gather")
        if where == "forward"
        else tr("the gradient sums of the backward all-gather")
    )
    question = tr(
        "`norms.SyncBatchNorm({c})` trains on {p} processes. How many floating-point numbers does "
        "one process contribute to {what} in one step (besides the 15-number header)?",
        c=c,
        p=p,
        what=what,
    )
    explain = (
        tr("its mean and its centred sum of squares, per channel (the counts travel in the header)")
        if where == "forward"
        else tr("the two per-channel sums Σdy and Σdy·x̂ (its local dβ and dγ)")
    )
    return numeric(
        question,
        value,
        dict(kind="sync_numbers", channels=c, processes=p, where=where),
        correct_fb=tr(
            "Correct: 2 × {c}: {explain}. It does not grow with the batch or the image size.",
            c=c,
            explain=explain,
        ),
        wrong=[
            (c, tr("No: one number per channel is not enough: {explain}.", explain=explain)),
            (
                2 * c * p,
                tr(
                    "No: that is what each process receives in the forward all-gather (2C from "
                    "each of the {p} processes); it sends only its own 2C.",
                    p=p,
                ),
            ),
            (3 * c, tr("No: the count is one number per process, not per channel.")),
        ],
        default_fb=tr("No: count the per-channel statistics: {explain}.", explain=explain),
    )


def q_chan_variance(rng, names=None):
    """The biased variance of the union of two slices, from their counts, means and variances."""
    na, nb = rng.choice([(2, 2), (1, 3), (2, 6), (4, 4), (3, 1)])
    ma, mb = rng.choice([(0.0, 2.0), (1.0, 3.0), (-1.0, 1.0), (1.0, 2.0), (0.0, 4.0)])
    va, vb = rng.choice([(1.0, 1.0), (0.5, 2.0), (2.0, 0.0), (1.0, 3.0)])
    va, vb = (va if na > 1 else 0.0), (vb if nb > 1 else 0.0)  # one value has variance 0
    counts = torch.tensor([na, nb], dtype=torch.float64)
    means = torch.tensor([[ma], [mb]], dtype=torch.float64)
    m2s = torch.tensor([[va * na], [vb * nb]], dtype=torch.float64)
    n, _, m2 = combine_stats(counts, means, m2s)
    value = round(float(m2[0] / n), 4)
    pooled = round((na * va + nb * vb) / (na + nb), 4)
    plain = round((va + vb) / 2, 4)
    question = tr(
        "Process A holds {na} values of one channel with mean {ma} and (biased) variance "
        "{va}; process B holds {nb} values with mean {mb} and variance {vb}. "
        "What is the biased variance of all the values together? (Up to 2 decimals.)",
        na=na,
        ma=num(ma),
        va=num(va),
        nb=nb,
        mb=num(mb),
        vb=num(vb),
    )
    return numeric(
        question,
        value,
        dict(kind="chan_variance", counts=(na, nb), means=(ma, mb), variances=(va, vb)),
        correct_fb=tr(
            "Correct: Chan et al.: M2 = M2_A + M2_B + δ² n_A n_B / n with "
            "δ = {delta}, so the variance is {value}.",
            delta=num(mb - ma),
            value=num(value),
        ),
        wrong=[
            (
                pooled,
                tr(
                    "No: that is the count-weighted mean of the two variances. It misses the "
                    "spread between the two means, δ² n_A n_B / n."
                ),
            ),
            (
                round(pooled + (mb - ma) ** 2, 4),
                tr(
                    "No: the squared difference of the means enters weighted, "
                    "as δ² n_A n_B / n², not as δ²."
                ),
            ),
            (
                plain,
                tr(
                    "No: that is the plain average of the two variances: it ignores the counts "
                    "and the difference of the means."
                ),
            ),
        ],
        default_fb=tr(
            "No: add the two centred sums of squares and δ² n_A n_B / n, then divide by "
            "n = n_A + n_B."
        ),
        tol=0.01,
    )


def q_running_count(rng, names=None):
    """The factor that turns the biased global variance into the running variance's unbiased one."""
    sizes = rng.choice([[1, 3], [2, 2], [1, 1, 2], [3, 1, 4]])
    pixels = rng.choice([1, 4])
    shape = "(N, C)" if pixels == 1 else "(N, C, 2, 2)"
    n = sum(sizes) * pixels
    value = round(n / (n - 1), 4)
    local = sizes[0] * pixels
    wrong = [
        (
            round(local / (local - 1), 4) if local > 1 else 1.0,
            tr(
                "No: that corrects with the first process's own count; SyncBatchNorm uses the "
                "global one."
            ),
        )
    ]
    return numeric(
        tr(
            "`SyncBatchNorm` in training, inputs of shape {shape}, on {k} processes holding "
            "{sizes} samples. The running variance is updated with the biased "
            "global variance times what factor? (Up to 3 decimals.)",
            shape=shape,
            k=len(sizes),
            sizes=", ".join(map(str, sizes)),
        ),
        value,
        dict(kind="running_count", sizes=sizes, pixels=pixels),
        correct_fb=tr("Correct: n/(n−1) with the global count n = {n} values per channel.", n=n),
        wrong=wrong
        + [
            (1.0, tr("No: the running variance is the unbiased estimate, as in BatchNorm.")),
            (
                round((n - 1) / n, 4),
                tr(
                    "No: upside down. The unbiased variance is larger than the "
                    "biased one: multiply by n/(n−1)."
                ),
            ),
        ],
        default_fb=tr("No: n/(n−1) with n = {n}, the values per channel in the global batch.", n=n),
        tol=0.0005,
    )


def _local_or_global() -> list:
    """(quantity, local?, why) for :func:`q_local_or_global`."""
    return [
        (
            tr("the mean and variance used to normalize in training"),
            False,
            tr("No: it is global: the statistics of the union of every slice."),
        ),
        (
            tr("the gradient of the loss for the input x"),
            False,
            tr(
                "No: it is global: BatchNorm's gradient over the whole batch, from the "
                "all-reduced Σdy and Σdy·x̂."
            ),
        ),
        (
            tr("the running mean after a training step"),
            False,
            tr("No: it is global, and the same on every process."),
        ),
        (
            tr("the gradients of γ and β returned by backward"),
            True,
            tr(
                "Correct: each process returns its own part; DistributedDataParallel sums "
                "(averages) them."
            ),
        ),
    ]


def q_local_or_global(rng, names=None):
    """Which quantity is per-process (its sum over processes is the global one)?"""
    options = _local_or_global()
    options.append(
        (
            tr("the output y in eval mode"),
            False,
            tr(
                "No: in eval mode every process normalizes with its (identical) running statistics."
            ),
        )
    )
    rng.shuffle(options)
    return choice(
        tr(
            "In `norms.SyncBatchNorm` on several processes, which of these is each process's "
            "local part, whose sum over the processes is the value for the whole batch?"
        ),
        options,
        dict(kind="local_or_global"),
    )


def q_eval_communication(rng, names=None):
    """What an eval-mode forward communicates."""
    options = [
        (
            tr("nothing: it normalizes with the running statistics"),
            True,
            tr(
                "Correct: the running statistics are already the same on every process, so eval "
                "needs no collective."
            ),
        ),
        (
            tr("the means and variances of every slice, as in training"),
            False,
            tr("No: that is training mode. Eval mode uses the running statistics."),
        ),
        (
            tr("the two per-channel gradient sums"),
            False,
            tr("No: those are communicated in the backward pass of a training step."),
        ),
        (
            tr("the running statistics, to keep them equal"),
            False,
            tr(
                "No: they are updated with the same global statistics everywhere, so they are "
                "already equal."
            ),
        ),
    ]
    rng.shuffle(options)
    return choice(
        tr(
            "What does one forward pass of `norms.SyncBatchNorm` in eval mode (`model.eval()`) "
            "communicate between the processes?"
        ),
        options,
        dict(kind="eval_communication"),
    )
