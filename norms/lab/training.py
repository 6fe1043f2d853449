r"""Small models and a training loop for experiments with normalization on real data.

The chapters on training (``book/training.ipynb``, ``book/pitfalls.ipynb``) train the
same few networks many times: with no normalization, BatchNorm, LayerNorm, GroupNorm
or RMSNorm, at several learning rates and batch sizes. This module holds what they
share, so that each run in a notebook is one call and the lesson stays visible:

* :func:`load_digits_data`: scikit-learn's ``load_digits`` (1797 images of 8 × 8
  pixels, shipped with scikit-learn, nothing downloaded) as standardized tensors,
  split into a training and a test set by a seeded permutation.
* the models (:mod:`norms.lab.models`, re-exported here): :func:`make_norm` (a norm by
  name), :class:`Block`, :class:`DigitsMLP`, :class:`CNN`, :class:`ResidualMLP`, each a
  stack of blocks *weight layer → norm → activation* whose normalization is an
  argument. Each block can capture its pre-activation (the input of its
  nonlinearity) and that tensor's gradient for :func:`train` to record.
* :func:`train`: minibatch SGD with momentum (or any optimizer), seeded: the same
  arguments give the same numbers on every run. It returns a :class:`TrainLog` with
  the loss of every step, accuracies after every epoch (evaluation mode, and with
  batch statistics), and per-layer activation and gradient statistics at regular
  steps (means, stds, update-to-weight ratios and a fixed sample of values for
  histograms).
* :func:`recalibrate_batchnorm`: re-estimate the running statistics of every BatchNorm
  of a trained model from data, with ``momentum=None`` (a plain average).
* :func:`evaluate`: loss and accuracy of a model on a data set, in evaluation mode or
  with every BatchNorm using the statistics of each test batch.

Example (``train(model, load_digits_data(), lr=0.1, epochs=1, batch_size=64, seed=0)``
then records 22 losses, one a step: 1438 training images in full batches of 64)::

    >>> model = DigitsMLP("batch", seed=0)
    >>> model(torch.zeros(5, 1, 8, 8, dtype=torch.float64)).shape  # 5 digits -> 10 logits each
    torch.Size([5, 10])
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .. import compat
from ..modules.batchnorm import BatchNormBase
from .models import (
    CNN,
    DTYPE,
    NORM_KINDS,
    NORM_LABELS,
    Block,
    DigitsMLP,
    ResidualBlock,
    ResidualMLP,
    default_dtype,
    make_norm,
    seeded,
)

__all__ = [
    "NORM_KINDS",
    "NORM_LABELS",
    "DTYPE",
    "Data",
    "load_digits_data",
    "make_norm",
    "Block",
    "DigitsMLP",
    "CNN",
    "ResidualMLP",
    "ResidualBlock",
    "TrainLog",
    "train",
    "evaluate",
    "summary",
    "seeded",
    "default_dtype",
    "recalibrate_batchnorm",
]

# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """A training and a test set of images ``(n, 1, 8, 8)`` with integer labels."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor

    @property
    def num_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def load_digits_data(
    test_fraction: float = 0.2, seed: int = 0, dtype: torch.dtype = torch.float64
) -> Data:
    """scikit-learn's digits as tensors: images ``(n, 1, 8, 8)``, labels 0 to 9.

    Pixel values (0 to 16) are standardized with the mean and the std of the training
    pixels (one number each, so every pixel keeps its meaning). The split is a
    permutation drawn from ``torch.Generator().manual_seed(seed)``.

    The images are float64 by default, as are the models of this module (:data:`DTYPE`):
    a float32 run depends on the SIMD width the CPU kernels pick and on the thread count
    (sums taken in another order round differently, and training amplifies that into
    other accuracies), a float64 run of these small models gives the same numbers on
    every CPU, at about the same speed.

    Args:
        test_fraction: share of the 1797 images held out as the test set.
        seed: seed of the split.
        dtype: of the images, and of the standardization (float64: the same images to
            the last bits of float32 on every CPU).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    from sklearn.datasets import load_digits  # ships with scikit-learn: nothing is downloaded

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=dtype).unsqueeze(1)  # (1797, 1, 8, 8)
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    n_test = round(test_fraction * len(x))
    test, tr = order[:n_test], order[n_test:]
    mean, std = x[tr].mean(), x[tr].std()
    x = (x - mean) / std
    return Data(x[tr], y[tr], x[test], y[test])


# --------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------


@dataclass
class TrainLog:
    """What one run of :func:`train` recorded.

    Per step (``S`` steps run): ``loss`` ``(S,)``, the training loss in training mode.
    Per epoch (``E`` epochs): ``test_acc`` (evaluation mode: running statistics),
    ``test_acc_batch_stats`` (every BatchNorm with the statistics of each test batch of
    the training batch size), ``train_acc`` (evaluation mode, on the training set).
    With ``train(..., accuracies="final test")`` only the test accuracies after the last
    epoch: ``test_acc`` and ``test_acc_batch_stats`` ``(1,)``, ``train_acc`` empty.
    Per record (``R`` records, every ``record_every`` steps, step 0 included; ``L``
    blocks): ``record_steps`` ``(R,)``; ``act_mean``, ``act_std`` ``(R, L)``, of each
    block's pre-activation ``z``; ``grad_std`` ``(R, L)``, of ``∂loss/∂z`` (nan where no
    gradient reaches ``z``, in a frozen block);
    ``update_ratio`` ``(R, L)``, ``‖ΔW‖/‖W‖`` of each block's weight over that step;
    ``act_sample``, ``grad_sample`` ``(R, L, sample_size)``: the same evenly spaced
    elements of ``z`` and of its gradient, for histograms.
    ``diverged_at`` is the step at which the loss stopped being finite (training stops
    there), else ``None``.
    """

    name: str
    lr: float
    batch_size: int
    epochs: int
    loss: Tensor
    test_acc: Tensor
    test_acc_batch_stats: Tensor
    train_acc: Tensor
    record_steps: Tensor
    act_mean: Tensor
    act_std: Tensor
    grad_std: Tensor
    update_ratio: Tensor
    act_sample: Tensor
    grad_sample: Tensor
    diverged_at: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def final_test_acc(self) -> float:
        """Test accuracy after the last epoch (evaluation mode); 0.1 (chance) if diverged."""
        if self.diverged_at is not None or len(self.test_acc) == 0:
            return 0.1
        return float(self.test_acc[-1])

    def final_loss(self, last: int = 20) -> float:
        """Mean training loss over the last ``last`` steps (nan if the run diverged)."""
        if self.diverged_at is not None:
            return float("nan")
        return float(self.loss[-last:].mean())


#: What :func:`train` measures after the epochs (its ``accuracies``).
ACCURACIES = ("every epoch", "final test")

#: The BatchNorm classes of norms and of torch.nn (and their subclasses, SyncBatchNorm included).
_BATCHNORMS = (BatchNormBase, *compat.torch_batchnorm_classes())


def _batch_stats_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in evaluation mode except its BatchNorms, which use batch statistics."""
    twin = copy.deepcopy(model).eval()
    for m in twin.modules():
        if isinstance(m, _BATCHNORMS):
            m.train()
    return twin


def _restore_modes(modes: list[tuple[nn.Module, bool]]) -> None:
    """Set each module's ``training`` flag back (``model.train(flag)`` would set them all alike)."""
    for m, training in modes:
        m.training = training


@torch.no_grad()
def evaluate(
    model: nn.Module, x: Tensor, y: Tensor, batch_size: int | None = None, batch_stats: bool = False
) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on ``(x, y)``.

    Evaluation mode (BatchNorm uses its running statistics), in batches of ``batch_size``
    (all at once if ``None``). With ``batch_stats=True`` every BatchNorm normalizes each
    batch with that batch's own statistics instead (a copy of the model is used, so the
    model's running statistics do not change), which is what it did during training.
    Every module's own mode is restored, also when the model raises. BatchNorms are those
    of :mod:`norms` and of :mod:`torch.nn`.
    """
    modes = [(m, m.training) for m in model.modules()]
    try:
        net = _batch_stats_copy(model) if batch_stats else model.eval()
        n = len(x)
        size = n if batch_size is None else int(batch_size)
        total_loss, correct = 0.0, 0
        for start in range(0, n, size):
            out = net(x[start : start + size])
            total_loss += float(
                nn.functional.cross_entropy(out, y[start : start + size], reduction="sum")
            )
            correct += int((out.argmax(1) == y[start : start + size]).sum())
    finally:
        _restore_modes(modes)
    return total_loss / n, correct / n


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, x: Tensor, batch_size: int | None = None) -> nn.Module:
    """Re-estimate the running statistics of every BatchNorm in ``model`` from the inputs ``x``.

    Every BatchNorm's running statistics are reset and its ``momentum`` set to ``None``
    (a cumulative average over the batches, :doc:`batchnorm`); the model runs over ``x``
    in batches of ``batch_size`` (all at once if ``None``) with only its BatchNorms in
    training mode (dropout stays off), without gradients; then momentum and mode are
    restored. With one batch (``batch_size=None``) the running mean and variance are
    exactly the mean and the unbiased variance of each BatchNorm's input over ``x``.
    Nothing else in the model changes (momentum and modes are restored also when the model
    raises). BatchNorms are those of :mod:`norms` and of :mod:`torch.nn`. Returns ``model``.
    """
    layers = [m for m in model.modules() if isinstance(m, _BATCHNORMS)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no BatchNorm layer to recalibrate")
    if not all(m.track_running_stats for m in layers):
        raise ValueError("every BatchNorm must have track_running_stats=True to be recalibrated")
    modes, momenta = [(m, m.training) for m in model.modules()], [m.momentum for m in layers]
    try:
        model.eval()
        for m in layers:
            m.reset_running_stats()
            m.momentum = None
            m.train()
        size = len(x) if batch_size is None else int(batch_size)
        for start in range(0, len(x), size):
            model(x[start : start + size])
    finally:  # also when the model raises: momentum and every module's mode as they were
        for m, momentum in zip(layers, momenta, strict=True):
            m.momentum = momentum
        _restore_modes(modes)
    return model


def _blocks(model: nn.Module) -> list[Block]:
    return [m for m in model.modules() if isinstance(m, Block)]


def _sample(t: Tensor, size: int) -> Tensor:
    """``size`` evenly spaced elements of ``t`` (flattened); padded with nan if ``t`` is smaller."""
    flat = t.detach().flatten()
    if flat.numel() >= size:
        idx = torch.arange(size) * (flat.numel() // size)
        return flat[idx].clone()
    return torch.cat([flat, torch.full((size - flat.numel(),), float("nan"))])


def train(
    model: nn.Module,
    data: Data,
    *,
    lr: float,
    epochs: int = 5,
    batch_size: int = 32,
    seed: int = 0,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    optimizer: Callable[[nn.Module], torch.optim.Optimizer] | None = None,
    record_every: int | None = None,
    sample_size: int = 1024,
    eval_batch_stats: bool = True,
    accuracies: str = "every epoch",
    name: str | None = None,
) -> TrainLog:
    """Train ``model`` on ``data`` with minibatch SGD; deterministic in ``seed``.

    Every epoch visits the training set in a new order drawn from
    ``torch.Generator().manual_seed(seed)``; dropout draws from torch's global generator,
    seeded with ``seed`` for the run and restored afterwards. A last batch smaller than
    ``batch_size`` is dropped (so BatchNorm never sees a batch of one by accident).

    Args:
        model: a module mapping ``(N, 1, 8, 8)`` to logits.
        data: a :class:`Data`.
        lr, momentum, weight_decay: of ``torch.optim.SGD`` (ignored with ``optimizer``).
        epochs, batch_size: the budget: every run sees the same number of samples.
        seed: seed of the data order and dropout.
        optimizer: a function ``model -> optimizer`` to use instead of SGD (for
            parameter groups, say).
        record_every: record per-layer statistics of the :class:`Block` s of ``model``
            every this many steps (and at step 0); ``None``: about 10 records per run.
        sample_size: values of ``z`` and its gradient kept per block and record.
        eval_batch_stats: also measure the test accuracy with batch statistics.
        accuracies: ``"every epoch"``: the test and training accuracies after every epoch;
            ``"final test"``: only the test accuracies after the last epoch, all that
            :attr:`TrainLog.final_test_acc` reads (evaluating changes nothing in the
            model: the same losses and the same final accuracy, without the other passes).
        name: a label for :func:`summary` (default: the model's class and norm).

    Returns:
        a :class:`TrainLog`.
    """
    steps_per_epoch = _steps_per_epoch(len(data.x_train), batch_size, epochs)
    if accuracies not in ACCURACIES:
        raise ValueError(f"accuracies must be one of {ACCURACIES}, got {accuracies!r}")
    every = record_every or max(1, steps_per_epoch * epochs // 10)
    opt = _optimizer(model, optimizer, lr, momentum, weight_decay)
    recorder = _Recorder(_blocks(model), sample_size)
    gen = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    measured: dict[str, list[float]] = {"test": [], "test_batch_stats": [], "train": []}
    diverged = None
    with seeded(seed):
        for epoch in range(epochs):
            model.train()
            order = torch.randperm(len(data.x_train), generator=gen)
            batches = order[: steps_per_epoch * batch_size].split(batch_size)
            diverged = _run_epoch(model, data, opt, batches, recorder, every, losses)
            if diverged is not None:
                break
            if accuracies == "every epoch" or epoch == epochs - 1:
                _measure_epoch(model, data, batch_size, eval_batch_stats, measured, accuracies)
    recorder.release()
    model.train()
    return TrainLog(
        name=name or _label(model),
        lr=lr,
        batch_size=batch_size,
        epochs=epochs,
        loss=torch.tensor(losses),
        test_acc=torch.tensor(measured["test"]),
        test_acc_batch_stats=torch.tensor(measured["test_batch_stats"]),
        train_acc=torch.tensor(measured["train"]),
        diverged_at=diverged,
        **recorder.fields(),
    )


def _label(model: nn.Module) -> str:
    """The model's class and the name of its norm (``"DigitsMLP BatchNorm"``)."""
    return f"{type(model).__name__} {NORM_LABELS.get(getattr(model, 'norm_kind', ''), '')}".strip()


def _optimizer(model, optimizer, lr, momentum, weight_decay) -> torch.optim.Optimizer:
    """``optimizer(model)``, or SGD with ``foreach=True``: torch's kernels of the loop over the
    parameters, the same numbers, with less Python per step."""
    if optimizer is not None:
        return optimizer(model)
    return torch.optim.SGD(
        model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay, foreach=True
    )


def _steps_per_epoch(n: int, batch_size: int, epochs: int) -> int:
    """The full batches of ``batch_size`` in ``n`` samples; a clear error for a bad budget."""
    if batch_size < 1 or epochs < 1:
        raise ValueError(f"batch_size and epochs must be positive, got {batch_size} and {epochs}")
    if batch_size > n:
        raise ValueError(f"batch_size {batch_size} is larger than the training set ({n} samples)")
    return n // batch_size


def _run_epoch(model, data, opt, batches, recorder, every, losses) -> int | None:
    """One pass of SGD steps over ``batches`` (index tensors), appending to ``losses``.

    Records the blocks' statistics every ``every`` steps (counted over the run, from
    ``len(losses)``). Returns the step at which the loss stopped being finite, else None.
    """
    for idx in batches:
        step = len(losses)
        record = recorder.capture(step % every == 0)
        loss = nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
        if not math.isfinite(loss.item()):
            return step
        opt.zero_grad(set_to_none=True)
        loss.backward()
        before = recorder.weights() if record else None
        opt.step()
        if record:
            recorder.record(step, before)
        losses.append(loss.item())
    return None


def _measure_epoch(model, data, batch_size, eval_batch_stats, measured, accuracies) -> None:
    """Append the epoch's accuracies: test (running statistics, then batch statistics), and
    train unless ``accuracies`` is ``"final test"``."""
    measured["test"].append(evaluate(model, data.x_test, data.y_test)[1])
    if eval_batch_stats:
        measured["test_batch_stats"].append(
            evaluate(model, data.x_test, data.y_test, batch_size, batch_stats=True)[1]
        )
    if accuracies == "every epoch":
        measured["train"].append(evaluate(model, data.x_train, data.y_train)[1])


class _Recorder:
    """The per-layer statistics :func:`train` keeps of the blocks' pre-activations ``z``.

    At a recorded step each :class:`Block` keeps its ``z`` (and, after ``backward``, its
    gradient); :meth:`record` reads them with the weights from before the optimizer step,
    then lets the blocks drop them. :meth:`fields` gives the :class:`TrainLog` fields.
    """

    KEYS = ("steps", "mean", "std", "grad", "ratio", "act", "gsample")

    def __init__(self, blocks: list[Block], sample_size: int):
        self.blocks, self.sample_size = blocks, sample_size
        self.rec: dict[str, list] = {k: [] for k in self.KEYS}

    def capture(self, due: bool) -> bool:
        """Tell every block whether to keep its ``z`` at this step; True if it is recorded."""
        record = bool(self.blocks) and due
        for b in self.blocks:
            b.capture = record
        return record

    def weights(self) -> list[Tensor]:
        return [b.layer.weight.detach().clone() for b in self.blocks]

    def record(self, step: int, before: list[Tensor]) -> None:
        zs, rec, size = [b.z for b in self.blocks], self.rec, self.sample_size
        rec["steps"].append(step)
        rec["mean"].append([float(z.detach().mean()) for z in zs])
        rec["std"].append([float(z.detach().std()) for z in zs])
        rec["grad"].append([float(z.grad.std()) if z.grad is not None else math.nan for z in zs])
        rec["ratio"].append(
            [
                float((b.layer.weight.detach() - w).norm() / w.norm())
                for b, w in zip(self.blocks, before, strict=True)
            ]
        )
        rec["act"].append(torch.stack([_sample(z, size) for z in zs]))
        rec["gsample"].append(
            torch.stack(
                [
                    _sample(z.grad, size) if z.grad is not None else torch.full((size,), math.nan)
                    for z in zs
                ]
            )
        )
        self.release()

    def release(self) -> None:
        """The blocks stop capturing and drop what they kept."""
        for b in self.blocks:
            b.capture, b.z = False, None

    def fields(self) -> dict[str, Tensor]:
        rec, n_blocks = self.rec, len(self.blocks)

        def table(key):
            return torch.tensor(rec[key], dtype=torch.float32).reshape(len(rec["steps"]), n_blocks)

        def samples(key):
            if not rec[key]:
                return torch.empty(0, n_blocks, self.sample_size)
            return torch.stack(rec[key])

        return {
            "record_steps": torch.tensor(rec["steps"], dtype=torch.long),
            "act_mean": table("mean"),
            "act_std": table("std"),
            "grad_std": table("grad"),
            "update_ratio": table("ratio"),
            "act_sample": samples("act"),
            "grad_sample": samples("gsample"),
        }


def summary(log: TrainLog) -> str:
    """One line per run: name, learning rate, batch size, final loss and accuracies."""
    head = f"{log.name:<22s} lr={log.lr:<6g} batch={log.batch_size:<3d}"
    if log.diverged_at is not None:
        return f"{head} diverged at step {log.diverged_at}"
    text = f"{head} loss {log.final_loss():.3f}"
    if len(log.train_acc):  # none with accuracies="final test"
        text += f"  train acc {float(log.train_acc[-1]):6.1%}"
    text += f"  test acc {float(log.test_acc[-1]):6.1%}"
    if len(log.test_acc_batch_stats):
        text += f" (batch stats {float(log.test_acc_batch_stats[-1]):6.1%})"
    return text
