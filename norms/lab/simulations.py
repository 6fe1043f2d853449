"""The two small simulations the explorers and the BatchNorm chapter show.

* :func:`simulate_running_stats`: BatchNorm1d's running averages over training
  steps, on seeded synthetic data (:class:`RunningStatsTrace`).
* :func:`simulate_batch_noise`: how much one fixed sample's normalized value moves
  with the company it keeps in its batch (:class:`BatchNoise`).

They compute numbers only; the figures are :mod:`norms.plots.running_stats` and
:mod:`norms.plots.batch_noise`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from norms.axes import module_label
from norms.modules import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm

__all__ = [
    "BatchNoise",
    "DEFAULT_BATCH_SIZES",
    "RunningStatsTrace",
    "running_stats_batches",
    "running_stats_distribution",
    "simulate_batch_noise",
    "simulate_running_stats",
]

_TRUE_MEAN = (2.0, -1.0)
_TRUE_STD = (1.5, 0.5)


@dataclass(frozen=True)
class RunningStatsTrace:
    """BatchNorm1d's running statistics after every training step.

    Attributes:
        momentum: the momentum used (``None``: cumulative average).
        batch_size: samples per step.
        running_mean: ``(steps + 1, F)``; row 0 is the initial value (zeros).
        running_var: ``(steps + 1, F)``; row 0 is the initial value (ones).
        true_mean: ``(F,)`` mean of the distribution the data is drawn from.
        true_var: ``(F,)`` its variance.
        train_output: ``(batch_size, F)`` train-mode output on a fresh batch.
        eval_output: ``(batch_size, F)`` eval-mode output on the same batch.
    """

    momentum: float | None
    batch_size: int
    running_mean: np.ndarray
    running_var: np.ndarray
    true_mean: np.ndarray
    true_var: np.ndarray
    train_output: np.ndarray
    eval_output: np.ndarray

    @property
    def max_gap(self) -> float:
        """Largest ``|eval output - train output|`` on the fresh batch."""
        return float(np.abs(self.eval_output - self.train_output).max())


def running_stats_distribution(
    mean: Sequence[float] = _TRUE_MEAN, std: Sequence[float] = _TRUE_STD
) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-feature mean and std of :func:`simulate_running_stats`'s data, as float32 tensors."""
    return torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32)


def running_stats_batches(
    batch_size: int,
    seed: int = 0,
    mean: Sequence[float] = _TRUE_MEAN,
    std: Sequence[float] = _TRUE_STD,
):
    """The endless, seeded stream of ``(batch_size, F)`` batches :func:`simulate_running_stats`
    trains on.

    Batch ``k`` (from 0) is the one fed at training step ``k + 1``; after ``steps``
    steps, batch ``steps`` is the fresh batch on which train and eval outputs are compared.
    """
    mean_t, std_t = running_stats_distribution(mean, std)
    generator = torch.Generator().manual_seed(seed)
    # Drawn in float64 (the same numbers on every CPU: float32 draws take a SIMD path whose
    # last bits differ between CPUs), then stored in float32, as BatchNorm's input usually is.
    mean64, std64 = mean_t.double(), std_t.double()
    while True:
        draw = torch.randn(batch_size, mean_t.numel(), generator=generator, dtype=torch.float64)
        yield (mean64 + std64 * draw).float()


def simulate_running_stats(
    momentum: float | None = 0.1,
    batch_size: int = 16,
    steps: int = 100,
    seed: int = 0,
    mean: Sequence[float] = _TRUE_MEAN,
    std: Sequence[float] = _TRUE_STD,
) -> RunningStatsTrace:
    """Train a ``norms.BatchNorm1d`` on synthetic data and record its running statistics.

    Every step feeds a batch of ``batch_size`` samples drawn from a normal
    distribution with the given per-feature ``mean`` and ``std`` (seeded). At
    the end one more fresh batch goes through the layer in train mode (batch
    statistics) and in eval mode (running statistics).

    Args:
        momentum: BatchNorm's momentum, or ``None`` for a cumulative average.
        batch_size: samples per batch (BatchNorm1d rejects 1 in training).
        steps: number of training steps (forward passes).
        seed: seed of the data.
        mean: true mean per feature.
        std: true standard deviation per feature.

    Returns:
        a :class:`RunningStatsTrace`.

    Example:
        >>> trace = simulate_running_stats(momentum=0.1, steps=50)
        >>> trace.running_mean.shape
        (51, 2)
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    mean_t, std_t = running_stats_distribution(mean, std)
    batches = running_stats_batches(batch_size, seed, mean, std)
    layer = BatchNorm1d(mean_t.numel(), momentum=momentum)
    means, variances = [layer.running_mean.clone()], [layer.running_var.clone()]
    with torch.no_grad():
        for _ in range(steps):
            layer(next(batches))
            means.append(layer.running_mean.clone())
            variances.append(layer.running_var.clone())
        fresh = next(batches)
        train_out = copy.deepcopy(layer).train()(fresh)
        eval_out = layer.eval()(fresh)
    return RunningStatsTrace(
        momentum=momentum,
        batch_size=batch_size,
        running_mean=torch.stack(means).numpy(),
        running_var=torch.stack(variances).numpy(),
        true_mean=mean_t.numpy(),
        true_var=(std_t**2).numpy(),
        train_output=train_out.numpy(),
        eval_output=eval_out.numpy(),
    )


#: Batch sizes on the x axis of the batch-noise curve.
DEFAULT_BATCH_SIZES = (2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class BatchNoise:
    """The normalized value of one fixed element of one fixed sample, across random batches.

    Attributes:
        batch_sizes: the batch sizes tried.
        values: ``{label: array (len(batch_sizes), trials)}`` for BatchNorm2d,
            LayerNorm and GroupNorm; ``values[k][i, t]`` is the output at the
            fixed element when sample 0 is batched with ``batch_sizes[i] - 1``
            random other samples, in trial ``t``.
        labels: ``{key: module label}`` for the legend.
    """

    batch_sizes: tuple[int, ...]
    values: dict[str, np.ndarray]
    labels: dict[str, str]

    def spread(self, key: str) -> np.ndarray:
        """Standard deviation across trials, per batch size."""
        return self.values[key].std(axis=1)


def _normalize_trials(
    layer: torch.nn.Module, batches: torch.Tensor, batchwise: bool
) -> torch.Tensor:
    """Run ``layer`` on every trial's batch; return the outputs ``(trials, b, C, H, W)``.

    ``batchwise``: the layer mixes samples (BatchNorm), so each trial must be
    its own batch. Trials are stacked along channels instead of looping:
    BatchNorm2d treats every channel on its own, so T trials of C channels are
    one batch of T·C channels.
    """
    trials, b, c, h, w = batches.shape
    if batchwise:
        stacked = batches.transpose(0, 1).reshape(b, trials * c, h, w)
        return layer(stacked).reshape(b, trials, c, h, w).transpose(0, 1)
    return layer(batches.reshape(trials * b, c, h, w)).reshape(trials, b, c, h, w)


def simulate_batch_noise(
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    trials: int = 200,
    channels: int = 4,
    groups: int = 2,
    spatial: tuple[int, int] = (4, 4),
    seed: int = 0,
) -> BatchNoise:
    """Batch one fixed sample with random others; record its normalized value.

    Every sample is a per-channel offset, plus a random per-channel shift of its
    own, plus pixel noise. Sample 0 (fixed) is put in a batch with ``b - 1``
    fresh random samples,
    ``trials`` times per batch size ``b``, and normalized in training mode by
    ``norms.BatchNorm2d(C)``, ``norms.LayerNorm([C, H, W])`` and
    ``norms.GroupNorm(groups, C)``. The value recorded is the output at
    ``[0, 0, 0, 0]``. BatchNorm's statistics come from the batch, so the value
    moves with the company sample 0 keeps; the other two never look at other
    samples.

    Args:
        batch_sizes: batch sizes to try.
        trials: random batches per batch size.
        channels: ``C``.
        groups: GroupNorm's groups (must divide ``channels``).
        spatial: ``(H, W)``.
        seed: seed of the data.

    Returns:
        a :class:`BatchNoise`.

    Example:
        >>> noise = simulate_batch_noise(batch_sizes=(2, 32), trials=50)
        >>> bool(noise.spread("BatchNorm2d")[0] > noise.spread("BatchNorm2d")[1])
        True
    """
    h, w = spatial
    generator = torch.Generator().manual_seed(seed)
    # Computed in float64, so that the values are the same on every CPU (float32 draws and
    # sums round differently with the SIMD width), and stored in float32.
    offsets = torch.linspace(-1.0, 2.0, channels, dtype=torch.float64).view(channels, 1, 1)

    def samples(*lead: int) -> torch.Tensor:
        # Each sample has its own per-channel shift (images differ in brightness)
        # plus per-pixel noise.
        shift = torch.randn(*lead, channels, 1, 1, generator=generator, dtype=torch.float64)
        pixels = torch.randn(*lead, channels, h, w, generator=generator, dtype=torch.float64)
        return offsets + shift + 0.5 * pixels

    fixed = samples()
    layers = {
        "LayerNorm": LayerNorm([channels, h, w]).double(),
        "GroupNorm": GroupNorm(groups, channels).double(),
    }
    labels = {"BatchNorm2d": module_label(BatchNorm2d(channels))}
    labels.update({key: module_label(layer) for key, layer in layers.items()})
    values: dict[str, list[np.ndarray]] = {"BatchNorm2d": [], **{k: [] for k in layers}}
    with torch.no_grad():
        # LayerNorm and GroupNorm never look at the other samples: sample 0's output is
        # the same in every batch, so it is computed once. BatchNorm treats each channel
        # on its own, so only channel 0 (the recorded one) goes through it.
        alone = {key: float(layer(fixed[None])[0, 0, 0, 0]) for key, layer in layers.items()}
        for b in batch_sizes:
            others = samples(trials, b - 1)
            batches = torch.cat([fixed.expand(trials, 1, channels, h, w), others], dim=1)
            batch_norm = BatchNorm2d(trials).double()
            out = _normalize_trials(batch_norm, batches[:, :, :1], batchwise=True)
            values["BatchNorm2d"].append(out[:, 0, 0, 0, 0].float().numpy())
            for key in layers:
                values[key].append(np.full(trials, alone[key], dtype=np.float32))
    return BatchNoise(
        batch_sizes=tuple(int(b) for b in batch_sizes),
        values={k: np.stack(v) for k, v in values.items()},
        labels=labels,
    )
