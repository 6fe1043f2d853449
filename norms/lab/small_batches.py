"""The runs of the chapters on small batches and on normalizing the weights.

* :func:`small_batch_cnn`: the training chapter's :class:`~norms.lab.training.CNN` with
  one of the small-batch fixes in place of its norm (:data:`METHODS`);
* :func:`renorm_warmup`: the optimizer of :func:`~norms.lab.training.train` with Batch
  Renorm's r_max/d_max schedule (Ioffe, 2017) run after every step;
* :func:`agc_sgd`: SGD with adaptive gradient clipping before every step;
* :func:`frozen_finetune`: pre-train with BatchNorm at a large batch, then fine-tune at a
  small one with BatchNorm training or frozen;
* :class:`NFResNet`, :func:`residual_cnn`: a small residual CNN with BatchNorm, without
  norms (SkipInit), or normalizer-free (scaled weight standardization);
* :func:`accuracy_grid`: final test accuracy for every method, batch size and seed (to
  compare two of them seed by seed: :func:`norms.lab.seeds.compare`).

Everything runs in float64 so that the numbers do not depend on the CPU or the number
of threads; every run is seeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .. import axes, stats
from ..modules.batch_renorm import BatchRenorm2d
from ..modules.batchnorm import BatchNorm2d
from ..modules.filter_response_norm import FilterResponseNorm2d
from ..modules.frozen_batchnorm import FrozenBatchNorm
from ..modules.ghost_batchnorm import GhostBatchNorm2d
from ..modules.std_conv import ScaledStdConv2d, StdConv2d
from ..modules.weight_norms import adaptive_clip_grad_
from .training import CNN, Data, seeded, train

__all__ = [
    "METHODS",
    "subset",
    "small_batch_cnn",
    "renorm_warmup",
    "agc_sgd",
    "frozen_finetune",
    "accuracy_grid",
    "ResidualCNN",
    "residual_cnn",
    "small_batch_run",
    "statistic_noise",
]

#: The small-batch fixes :func:`small_batch_cnn` builds, and how the chapter names them.
METHODS: dict[str, str] = {
    "batch": "BatchNorm",
    "ghost": "Ghost BN (4)",
    "renorm": "Batch Renorm",
    "group": "GroupNorm",
    "group_ws": "GroupNorm + WS",
    "frn": "FRN + TLU",
}


def subset(data: Data, n_train: int, dtype: torch.dtype = torch.float64, start: int = 0) -> Data:
    """``n_train`` training images of ``data`` from index ``start`` on (the split is already
    shuffled) and the whole test set, images cast to ``dtype``."""
    if not (1 <= n_train and 0 <= start and start + n_train <= len(data.x_train)):
        raise ValueError(
            f"start + n_train must lie in [1, {len(data.x_train)}], got {start} + {n_train}"
        )
    rows = slice(start, start + n_train)
    return Data(
        data.x_train[rows].to(dtype), data.y_train[rows], data.x_test.to(dtype), data.y_test
    )


def _swap_conv(conv: nn.Conv2d, cls: type[nn.Conv2d]) -> nn.Conv2d:
    """A ``cls`` with ``conv``'s settings and weights."""
    new = cls(
        conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
        bias=conv.bias is not None, dtype=conv.weight.dtype,
    )  # fmt: skip
    new.load_state_dict(conv.state_dict(), strict=False)
    return new


def small_batch_cnn(
    method: str,
    channels: int = 8,
    seed: int = 0,
    virtual_batch_size: int = 4,
    dtype: torch.dtype = torch.float64,
) -> CNN:
    """The training chapter's CNN with the norm of ``method`` (a key of :data:`METHODS`).

    ``"ghost"``: :class:`~norms.GhostBatchNorm2d` with ``virtual_batch_size``;
    ``"renorm"``: :class:`~norms.BatchRenorm2d` starting at r_max = 1, d_max = 0 (raise
    them with :func:`renorm_warmup`); ``"group_ws"``: GroupNorm after
    :class:`~norms.StdConv2d`; ``"frn"``: :class:`~norms.FilterResponseNorm2d`, whose TLU
    replaces the block's ReLU. The convolutions start from the same weights for every
    method with the same seed.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    base = "group" if method.startswith("group") else "batch"
    model = CNN(base, channels=channels, seed=seed).to(dtype)
    for block in model.blocks:
        c = block.layer.out_channels
        if method == "ghost":
            block.norm = GhostBatchNorm2d(c, virtual_batch_size, dtype=dtype)
        elif method == "renorm":
            block.norm = BatchRenorm2d(c, r_max=1.0, d_max=0.0, dtype=dtype)
        elif method == "frn":
            block.norm, block.act = FilterResponseNorm2d(c, dtype=dtype), nn.Identity()
        elif method == "group_ws":
            block.layer = _swap_conv(block.layer, StdConv2d)
    model.norm_kind = method
    return model


def renorm_warmup(
    lr: float,
    total_steps: int,
    r_max: float = 3.0,
    d_max: float = 5.0,
    start: float = 0.1,
    end: float = 0.5,
    momentum: float = 0.9,
) -> Callable[[nn.Module], torch.optim.Optimizer]:
    """An ``optimizer`` argument for :func:`~norms.lab.training.train`: SGD, and after every
    step every :class:`~norms.BatchRenorm2d` of the model gets r_max and d_max of the
    schedule of Ioffe (2017): 1 and 0 (BatchNorm) for the first ``start`` of the steps,
    then rising linearly to ``r_max`` and ``d_max`` at ``end`` of the steps."""

    def make(model: nn.Module) -> torch.optim.Optimizer:
        layers = [m for m in model.modules() if isinstance(m, BatchRenorm2d)]
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, foreach=True)
        step = [0]

        def hook(*_):
            step[0] += 1
            t = (step[0] / total_steps - start) / (end - start)
            t = min(max(t, 0.0), 1.0)
            for m in layers:
                m.r_max = 1.0 + t * (r_max - 1.0)
                m.d_max = t * d_max

        opt.register_step_post_hook(hook)
        return opt

    return make


def agc_sgd(
    lr: float, clip_factor: float = 0.01, momentum: float = 0.9
) -> Callable[[nn.Module], torch.optim.Optimizer]:
    """An ``optimizer`` argument for :func:`~norms.lab.training.train`: SGD whose every step
    first clips the gradients with :func:`~norms.adaptive_clip_grad_` (all parameters but
    the final linear layer's, as Brock et al., 2021, do)."""

    def make(model: nn.Module) -> torch.optim.Optimizer:
        head = {id(p) for p in model.head.parameters()}
        clipped = [p for p in model.parameters() if id(p) not in head]
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, foreach=True)
        opt.register_step_pre_hook(lambda *_: adaptive_clip_grad_(clipped, clip_factor))
        return opt

    return make


def _lr(batch_size: int, base_lr: float) -> float:
    return base_lr * batch_size / 32  # the linear scaling rule (Goyal et al., 2017)


def _run(method: str, data: Data, batch_size: int, seed: int, epochs: int, base_lr: float,
         channels: int, keep: dict | None) -> float:  # fmt: skip
    model = small_batch_cnn(method, channels, seed)
    if keep is not None:
        keep[method, batch_size, seed] = model
    lr = _lr(batch_size, base_lr)
    steps = epochs * (len(data.x_train) // batch_size)
    opt = renorm_warmup(lr, steps) if method == "renorm" else None
    log = train(model, data, lr=lr, epochs=epochs, batch_size=batch_size, seed=seed,
                optimizer=opt, eval_batch_stats=False, record_every=10**9,
                accuracies="final test")  # fmt: skip
    return log.final_test_acc


def frozen_finetune(
    data: Data,
    pretrain: Data,
    batch_size: int,
    seed: int,
    freeze: bool,
    epochs: int = 1,
    base_lr: float = 0.1,
    channels: int = 8,
    finetune_factor: float = 0.1,
) -> float:
    """Pre-train the BatchNorm CNN on ``pretrain`` at batch 32 with ``base_lr``, then fine-tune
    it on ``data`` at ``batch_size`` with ``finetune_factor · base_lr · batch_size/32`` (a
    smaller learning rate, as fine-tuning does): with every BatchNorm training on, or
    frozen (replaced by :class:`~norms.FrozenBatchNorm` with its statistics, γ and β).
    Returns the final test accuracy."""
    model = small_batch_cnn("batch", channels, seed)
    train(model, pretrain, lr=base_lr, epochs=epochs, batch_size=32, seed=seed,
          eval_batch_stats=False, record_every=10**9, accuracies="final test")  # fmt: skip
    if freeze:
        for block in model.blocks:
            block.norm = FrozenBatchNorm.from_batchnorm(block.norm)
    lr = finetune_factor * _lr(batch_size, base_lr)
    log = train(model, data, lr=lr, epochs=epochs, batch_size=batch_size, seed=seed,
                eval_batch_stats=False, record_every=10**9, accuracies="final test")  # fmt: skip
    return log.final_test_acc


def accuracy_grid(
    methods: Sequence[str],
    batch_sizes: Sequence[int],
    seeds: Sequence[int],
    run: Callable[[str, int, int], float],
) -> Tensor:
    """``run(method, batch_size, seed)`` for every combination: a tensor
    ``(len(methods), len(batch_sizes), len(seeds))`` of accuracies."""
    return torch.tensor(
        [[[run(m, b, s) for s in seeds] for b in batch_sizes] for m in methods],
        dtype=torch.float64,
    )


def small_batch_run(
    data: Data, epochs: int = 1, base_lr: float = 0.1, channels: int = 8, keep: dict | None = None
):
    """The ``run`` of :func:`accuracy_grid` for the methods of :data:`METHODS`: train
    :func:`small_batch_cnn` on ``data`` with the learning rate ``base_lr · B/32``; the
    trained models go into ``keep[method, batch_size, seed]`` when ``keep`` is a dict."""
    return lambda method, b, seed: _run(method, data, b, seed, epochs, base_lr, channels, keep)


# --------------------------------------------------------------------------
# residual networks with and without norms
# --------------------------------------------------------------------------


class _ResBlock(nn.Module):
    """``x + α · f(x)``: two 3 × 3 convolutions with ReLUs; ``kind`` sets what normalizes.

    * ``"batch"``: conv → BatchNorm → ReLU → conv → BatchNorm, α = 1;
    * ``"skipinit"``: no norm, α a learned scalar starting at 0 (De & Smith, 2020);
    * ``"nf"``: scaled weight-standardized convs, the input scaled by 1/β with β the
      expected std of the stream, α = 0.2 (Brock, De & Smith, 2021).
    """

    def __init__(self, c: int, kind: str, beta: float = 1.0, alpha: float = 0.2) -> None:
        super().__init__()
        self.kind, self.beta = kind, beta
        conv = ScaledStdConv2d if kind == "nf" else nn.Conv2d
        self.conv1 = conv(c, c, 3, padding=1, bias=kind != "batch")
        self.conv2 = conv(c, c, 3, padding=1, bias=kind != "batch")
        self.norm1 = BatchNorm2d(c) if kind == "batch" else nn.Identity()
        self.norm2 = BatchNorm2d(c) if kind == "batch" else nn.Identity()
        if kind == "skipinit":
            self.alpha = nn.Parameter(torch.zeros(()))
        else:
            self.register_buffer("alpha", torch.tensor(alpha if kind == "nf" else 1.0))

    def forward(self, x: Tensor) -> Tensor:
        h = x / self.beta if self.kind == "nf" else x
        if self.kind == "nf":
            h = torch.relu(h)
        h = self.norm2(self.conv2(torch.relu(self.norm1(self.conv1(h)))))
        return x + self.alpha * h


class ResidualCNN(nn.Module):
    """A conv stem to ``channels`` at 8 × 8, ``depth`` residual blocks, global average
    pooling, a linear head. ``kind``: ``"batch"``, ``"skipinit"`` or ``"nf"``."""

    def __init__(self, kind: str = "batch", channels: int = 8, depth: int = 4,
                 num_classes: int = 10, alpha: float = 0.2, seed: int = 0) -> None:  # fmt: skip
        super().__init__()
        if kind not in ("batch", "skipinit", "nf"):
            raise ValueError(f"kind must be 'batch', 'skipinit' or 'nf', got {kind!r}")
        self.norm_kind = kind
        with seeded(seed):
            self.stem = nn.Conv2d(1, channels, 3, padding=1)
            blocks, var = [], 1.0
            for _ in range(depth):
                # NF: the variance of the stream grows by α² per block (Brock et al., 2021)
                blocks.append(_ResBlock(channels, kind, beta=var**0.5, alpha=alpha))
                var += alpha**2
            self.blocks = nn.ModuleList(blocks)
            self.head = nn.Linear(channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)  # (N, C, 8, 8)
        for block in self.blocks:
            x = block(x)
        return self.head(torch.relu(x).mean(dim=(2, 3)))  # (N, C) after pooling


def residual_cnn(kind: str, seed: int = 0, dtype: torch.dtype = torch.float64, **kw) -> ResidualCNN:
    """:class:`ResidualCNN` in ``dtype``."""
    return ResidualCNN(kind, seed=seed, **kw).to(dtype)


@torch.no_grad()
def statistic_noise(
    model: CNN, x: Tensor, batch_sizes: Sequence[int], trials: int = 200, seed: int = 0
) -> dict[str, list[float]]:
    """How far a batch's statistics fall from the statistics of all of ``x``.

    The input of the first block's norm (the first convolution's output) is computed for
    every image of ``x``; for each batch size ``b``, ``trials`` random batches of ``b``
    images give per-channel means and standard deviations (over the batch and the
    pixels, as BatchNorm computes them). Returned, per batch size: the root mean square
    over trials and channels of ``(μ_B − μ)/σ`` (``"mean"``) and of ``σ_B/σ − 1``
    (``"std"``), with μ, σ of all of ``x``.
    """
    h = model.blocks[0].layer(x)  # (n, C, H, W)
    dims = axes.batch_norm_dims(4)  # (0, 2, 3): BatchNorm's
    mu, sigma = stats.mean(h, dims).flatten(), stats.std(h, dims).flatten()  # (C,) each
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list[float]] = {"mean": [], "std": []}
    for b in batch_sizes:
        idx = torch.stack([torch.randperm(len(x), generator=gen)[:b] for _ in range(trials)])
        batches = h[idx]  # (trials, b, C, H, W)
        per_trial = tuple(d + 1 for d in dims)  # (1, 3, 4)
        mu_b = stats.mean(batches, per_trial).reshape(trials, -1)  # (trials, C)
        sigma_b = stats.std(batches, per_trial).reshape(trials, -1)  # (trials, C)
        out["mean"].append(float((((mu_b - mu) / sigma) ** 2).mean().sqrt()))
        out["std"].append(float(((sigma_b / sigma - 1) ** 2).mean().sqrt()))
    return out
