"""Runs of the chapter "Transformers without normalization" (Zhu et al., 2025).

Tiny on purpose, in float64 on one thread, so every number is the same on every CPU: the book's
reversal transformer (:class:`norms.lab.transformer.TinyEncoder`) and a tiny ViT on
``load_digits`` with LayerNorm, RMSNorm or Dynamic Tanh (:func:`with_norm`), the input-output map
of trained LayerNorms (:func:`layernorm_io`, :func:`fit_scaled_tanh`), and the CNN of the training
chapter with its BatchNorms replaced by Dynamic Tanh (:func:`run_cnn`).

Each run returns a :class:`Result`; nothing here draws (see :mod:`norms.plots.dyt`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn

from ..functional import layer_norm
from ..modules.batchnorm import BatchNorm2d
from ..modules.dynamic_tanh import DynamicTanh, convert_ln_to_dyt
from ..modules.layernorm import LayerNorm
from ..modules.rmsnorm import RMSNorm
from ..modules.transformer import TransformerEncoderLayer
from .training import CNN, Data, default_dtype, load_digits_data, seeded, train
from .transformer import TinyEncoder, reverse_batch

__all__ = [
    "KINDS",
    "Result",
    "TinyViT",
    "with_norm",
    "fit",
    "run_reverse",
    "run_vit",
    "run_cnn",
    "digits64",
    "layernorm_io",
    "fit_scaled_tanh",
]

#: The norms compared: LayerNorm, RMSNorm, Dynamic Tanh.
KINDS = ("layer", "rms", "dyt")
NAMES = {"layer": "LayerNorm", "rms": "RMSNorm", "dyt": "DyT", "batch": "BatchNorm", "none": "none"}


def with_norm(model: nn.Module, kind: str, alpha_init_value: float = 0.5) -> nn.Module:
    """``model`` with every LayerNorm kept (``"layer"``), replaced by an :class:`norms.RMSNorm`
    of the same shape and eps (``"rms"``) or by :class:`norms.DynamicTanh` (``"dyt"``, through
    :func:`norms.convert_ln_to_dyt`)."""
    if kind == "layer":
        return model
    if kind == "dyt":
        return convert_ln_to_dyt(model, alpha_init_value)
    if kind != "rms":
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    for name, child in model.named_children():
        if isinstance(child, (LayerNorm, nn.LayerNorm)):
            w = child.weight
            setattr(model, name, RMSNorm(child.normalized_shape, eps=child.eps, dtype=w.dtype))
        else:
            with_norm(child, "rms")
    return model


class TinyViT(nn.Module):
    """A pre-LN vision transformer for 8 × 8 digits: 16 patches of 2 × 2 pixels, a linear patch
    embedding and learned positions, ``depth`` :class:`norms.TransformerEncoderLayer` s, a final
    LayerNorm, mean pooling over the patches, a linear head."""

    def __init__(
        self, depth: int = 2, d_model: int = 16, nhead: int = 2, dim_feedforward: int = 32
    ) -> None:
        super().__init__()
        self.embed = nn.Linear(4, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(16, d_model))
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(
                d_model, nhead, dim_feedforward, dropout=0.0, batch_first=True, norm_first=True
            )
            for _ in range(depth)
        )
        self.norm = LayerNorm(d_model)
        self.head = nn.Linear(d_model, 10)

    def forward(self, images: Tensor) -> Tensor:
        n = images.shape[0]
        p = images.reshape(n, 4, 2, 4, 2).permute(0, 1, 3, 2, 4)  # (N, 4, 4, 2, 2): patch grid
        x = self.embed(p.reshape(n, 16, 4)) + self.pos  # (N, 16 patches, d_model)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(1))  # (N, 10)


@dataclass
class Result:
    """One run: its name, seed, the training loss every step and the held-out accuracy."""

    name: str
    seed: int
    losses: list[float] = field(default_factory=list)
    accuracy: float = float("nan")

    @property
    def diverged(self) -> bool:
        return not all(math.isfinite(v) for v in self.losses)


def fit(
    model: nn.Module,
    batches: Callable[[int], tuple[Tensor, Tensor]],
    steps: int,
    lr: float,
    warmup: int = 10,
) -> list[float]:
    """``steps`` Adam steps (β = (0.9, 0.98), the learning rate rising linearly over ``warmup``
    steps) on the cross-entropy of ``model(x)`` against ``y``, ``x, y = batches(step)``.
    Returns the loss of every step; stops early (filling with ``nan``) if it is not finite."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    losses = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / max(warmup, 1))
        x, y = batches(step)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        if not torch.isfinite(loss):
            return losses + [float("nan")] * (steps - step)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def run_reverse(
    kind: str,
    seed: int = 0,
    lr: float = 3e-3,
    steps: int = 150,
    depth: int = 2,
    alpha_init_value: float = 0.5,
    length: int = 8,
    vocab: int = 8,
    return_model: bool = False,
):
    """The transformer chapter's reversal task: a pre-LN :class:`TinyEncoder` (d_model 16, two
    heads) with ``kind`` norms (:func:`with_norm`), float64, ``steps`` steps of 32 sequences; the
    token accuracy on 512 held-out sequences. Returns a :class:`Result` (and the model)."""
    with seeded(seed):
        model = TinyEncoder(
            "pre", depth, vocab=vocab, length=length, d_model=16, nhead=2, dim_feedforward=32
        ).double()
        model = with_norm(model, kind, alpha_init_value)
    gen = torch.Generator().manual_seed(1000 + seed)
    res = Result(NAMES[kind], seed)
    res.losses = fit(model, lambda s: reverse_batch(32, length, vocab, gen), steps, lr)
    with torch.no_grad():
        x, y = reverse_batch(512, length, vocab, torch.Generator().manual_seed(10_000 + seed))
        res.accuracy = float((model(x).argmax(-1) == y).double().mean())
    return (res, model) if return_model else res


def digits64(seed: int = 0) -> Data:
    """:func:`norms.lab.training.load_digits_data` in float64."""
    d = load_digits_data(seed=seed)
    return Data(d.x_train.double(), d.y_train, d.x_test.double(), d.y_test)


def run_vit(
    kind: str,
    data: Data,
    seed: int = 0,
    lr: float = 3e-3,
    steps: int = 150,
    alpha_init_value: float = 0.5,
    batch: int = 64,
) -> Result:
    """A :class:`TinyViT` with ``kind`` norms on the digits, ``steps`` Adam steps of ``batch``
    images; the test accuracy."""
    with seeded(seed):
        with default_dtype(torch.float64):  # drawn in float64: the same on every CPU
            model = with_norm(TinyViT(), kind, alpha_init_value)
    gen = torch.Generator().manual_seed(2000 + seed)
    n = len(data.x_train)

    def batches(step):
        idx = torch.randint(0, n, (batch,), generator=gen)
        return data.x_train[idx], data.y_train[idx]

    res = Result(NAMES[kind], seed)
    res.losses = fit(model, batches, steps, lr)
    with torch.no_grad():
        res.accuracy = float((model(data.x_test).argmax(-1) == data.y_test).double().mean())
    return res


def run_cnn(
    kind: str, data: Data, seed: int = 0, lr: float = 0.05, epochs: int = 3, channels: int = 8
) -> Result:
    """The training chapter's :class:`~norms.lab.training.CNN` with BatchNorm (``"batch"``), no
    norm (``"none"``) or every BatchNorm2d replaced by a channels-first
    :class:`norms.DynamicTanh` (``"dyt"``), trained with SGD and momentum by
    :func:`norms.lab.training.train`; the test accuracy in eval mode."""
    model = CNN("none" if kind == "none" else "batch", channels=channels, seed=seed).double()
    if kind == "dyt":
        for block in model.blocks:
            if isinstance(block.norm, BatchNorm2d):
                block.norm = DynamicTanh(block.norm.num_features, channels_last=False).double()
    elif kind not in ("batch", "none"):
        raise ValueError(f"kind must be batch, none or dyt, got {kind!r}")
    log = train(
        model,
        data,
        lr=lr,
        epochs=epochs,
        batch_size=32,
        seed=seed,
        record_every=10**9,
        eval_batch_stats=False,
    )
    res = Result(NAMES[kind], seed, [float(v) for v in log.loss])
    res.accuracy = float(log.final_test_acc)
    return res


def layernorm_io(model: nn.Module, x: Tensor) -> list[tuple[Tensor, Tensor]]:
    """For every :class:`norms.LayerNorm` of ``model`` (in order), its input on ``x`` and its
    output before the affine step (``(x - mean) / std``), both flattened: what Zhu et al. (2025,
    Fig. 2) plot."""
    pairs: list[tuple[Tensor, Tensor]] = []

    def hook(module, args, out):
        inp = args[0].detach()
        y = layer_norm(inp, module.normalized_shape, None, None, module.eps)
        pairs.append((inp.flatten(), y.flatten()))

    lns = [m for m in model.modules() if isinstance(m, LayerNorm)]
    handles = [m.register_forward_hook(hook) for m in lns]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return pairs


def fit_scaled_tanh(x: Tensor, y: Tensor) -> tuple[float, float, float, float]:
    """The least-squares fit ``y ≈ a·tanh(b·x)`` (``b`` on a grid, ``a`` in closed form) and the
    line through the origin ``y ≈ c·x``. Returns ``(a, b, r2_tanh, r2_line)``, the two
    coefficients of determination."""
    x, y = x.double(), y.double()
    sst = float(((y - y.mean()) ** 2).sum())
    best = None
    for b in torch.logspace(-2, 1.5, 400, dtype=torch.float64):
        t = torch.tanh(b * x)
        a = float((t * y).sum() / (t * t).sum())
        sse = float(((y - a * t) ** 2).sum())
        if best is None or sse < best[2]:
            best = (a, float(b), sse)
    c = float((x * y).sum() / (x * x).sum())
    r2_line = 1.0 - float(((y - c * x) ** 2).sum()) / sst
    return best[0], best[1], 1.0 - best[2] / sst, r2_line
