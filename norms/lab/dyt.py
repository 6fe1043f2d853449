"""Runs of the chapter "Transformers without normalization" (Zhu et al., 2025).

Tiny on purpose, in float64 on one thread, so every number is the same on every CPU: the book's
reversal transformer (:class:`norms.lab.transformer.TinyEncoder`) and a tiny ViT on
``load_digits`` with LayerNorm, RMSNorm or Dynamic Tanh (:func:`with_norm`), the input-output map
of trained LayerNorms (:func:`layernorm_io`, :func:`fit_scaled_tanh`), and the CNN of the training
chapter with its BatchNorms replaced by Dynamic Tanh (:func:`run_cnn`, :func:`cnn_model`,
:func:`pooled_scale`).

Every run of one comparison trains with the same budget, its :class:`Protocol`
(:data:`REVERSAL`, :data:`VIT`): the run functions default to it, each :class:`Result` records the
one it ran with, and :func:`check_protocol` refuses a set of runs in which one differs.

Each run returns a :class:`Result`; nothing here draws (see :mod:`norms.plots.dyt`).
"""

from __future__ import annotations

import dataclasses
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
    "Protocol",
    "REVERSAL",
    "VIT",
    "Result",
    "check_protocol",
    "TinyViT",
    "with_norm",
    "fit",
    "run_reverse",
    "run_vit",
    "run_cnn",
    "cnn_model",
    "pooled_scale",
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


@dataclass(frozen=True)
class Protocol:
    """The budget every run of one comparison trains with: ``steps`` optimizer steps of
    ``batch`` examples, the learning rate ``lr`` (after the warm-up of :func:`fit`)."""

    steps: int
    lr: float
    batch: int


#: The reversal task of the chapter: 120 Adam steps of 32 sequences at a learning rate of 3e-3.
REVERSAL = Protocol(steps=120, lr=3e-3, batch=32)
#: The digits ViT of the chapter: 150 Adam steps of 32 images at a learning rate of 1e-2.
VIT = Protocol(steps=150, lr=1e-2, batch=32)


@dataclass
class Result:
    """One run: its name, seed, the training loss every step, the held-out accuracy, the
    :class:`Protocol` it trained with, and the learned α of each DyT layer after training (in
    the order of ``model.modules()``; empty without DyT)."""

    name: str
    seed: int
    losses: list[float] = field(default_factory=list)
    accuracy: float = float("nan")
    protocol: Protocol | None = None
    alphas: tuple[float, ...] = ()

    @property
    def diverged(self) -> bool:
        return not all(math.isfinite(v) for v in self.losses)

    @property
    def steps(self) -> int:
        """The number of steps the run trained for (a diverged run counts the steps it was
        given: :func:`fit` fills them with ``nan``)."""
        return len(self.losses)


def check_protocol(runs, protocol: Protocol) -> None:
    """Raise ``ValueError`` naming every run of ``runs`` (:class:`Result` s, or lists or dicts of
    them) that did not train with ``protocol``: another recorded protocol, or another number of
    steps than ``protocol.steps``. The runs one comparison summarizes must share one budget."""
    flat = []

    def collect(item):
        if isinstance(item, Result):
            flat.append(item)
        elif isinstance(item, dict):
            for v in item.values():
                collect(v)
        else:
            for v in item:
                collect(v)

    collect(runs)
    if not flat:
        raise ValueError("check_protocol got no runs")
    wrong = [
        f"{r.name} seed {r.seed}: {r.steps} steps with {r.protocol}"
        for r in flat
        if r.protocol != protocol or r.steps != protocol.steps
    ]
    if wrong:
        raise ValueError(f"runs that do not follow {protocol}: " + "; ".join(wrong))


def _alphas(model: nn.Module) -> tuple[float, ...]:
    return tuple(float(m.alpha.detach()) for m in model.modules() if isinstance(m, DynamicTanh))


def fit(
    model: nn.Module,
    batches: Callable[[int], tuple[Tensor, Tensor]],
    steps: int,
    lr: float,
    warmup: int = 10,
) -> list[float]:
    """``steps`` Adam steps (β = (0.9, 0.98), the learning rate rising linearly over ``warmup``
    steps) on the cross-entropy of ``model(x)`` against ``y``, ``x, y = batches(step)``.
    Returns the loss of every step; stops early (filling with ``nan``) if it is not finite.

    Adam runs with ``foreach=True``: on the CPU the same kernels per parameter as the loop
    over parameters, without its Python overhead; the one other difference, the bias
    correction's square root (``x**0.5`` instead of ``math.sqrt``), rounds alike for
    β₂ = 0.98 up to step 1798, so runs of up to that many steps give the same numbers."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), foreach=True)
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


def _protocol(protocol: Protocol, steps: int | None, lr: float | None) -> Protocol:
    """``protocol`` with the ``steps`` and ``lr`` given instead (``None``: keep its own)."""
    changes = {k: v for k, v in (("steps", steps), ("lr", lr)) if v is not None}
    return dataclasses.replace(protocol, **changes)


def run_reverse(
    kind: str,
    seed: int = 0,
    lr: float | None = None,
    steps: int | None = None,
    depth: int = 2,
    alpha_init_value: float = 0.5,
    length: int = 8,
    vocab: int = 8,
    return_model: bool = False,
    protocol: Protocol = REVERSAL,
):
    """The transformer chapter's reversal task: a pre-LN :class:`TinyEncoder` (d_model 16, two
    heads) with ``kind`` norms (:func:`with_norm`), float64, trained with ``protocol`` (default
    :data:`REVERSAL`; ``lr`` or ``steps`` replace its own); the token accuracy on 512 held-out
    sequences. Returns a :class:`Result` (and the model)."""
    protocol = _protocol(protocol, steps, lr)
    with seeded(seed):
        model = TinyEncoder(
            "pre", depth, vocab=vocab, length=length, d_model=16, nhead=2, dim_feedforward=32
        ).double()
        model = with_norm(model, kind, alpha_init_value)
    gen = torch.Generator().manual_seed(1000 + seed)
    res = Result(NAMES[kind], seed, protocol=protocol)
    res.losses = fit(
        model,
        lambda s: reverse_batch(protocol.batch, length, vocab, gen),
        protocol.steps,
        protocol.lr,
    )
    res.alphas = _alphas(model)
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
    lr: float | None = None,
    steps: int | None = None,
    alpha_init_value: float = 0.5,
    protocol: Protocol = VIT,
) -> Result:
    """A :class:`TinyViT` with ``kind`` norms on the digits, trained with ``protocol`` (default
    :data:`VIT`; ``lr`` or ``steps`` replace its own); the test accuracy."""
    protocol = _protocol(protocol, steps, lr)
    batch = protocol.batch
    with seeded(seed):
        with default_dtype(torch.float64):  # drawn in float64: the same on every CPU
            model = with_norm(TinyViT(), kind, alpha_init_value)
    gen = torch.Generator().manual_seed(2000 + seed)
    n = len(data.x_train)

    def batches(step):
        idx = torch.randint(0, n, (batch,), generator=gen)
        return data.x_train[idx], data.y_train[idx]

    res = Result(NAMES[kind], seed, protocol=protocol)
    res.losses = fit(model, batches, protocol.steps, protocol.lr)
    res.alphas = _alphas(model)
    with torch.no_grad():
        res.accuracy = float((model(data.x_test).argmax(-1) == data.y_test).double().mean())
    return res


def cnn_model(
    kind: str,
    seed: int = 0,
    channels: int = 8,
    conv_bias: bool | None = None,
    alpha_init_value: float = 0.5,
) -> nn.Module:
    """The training chapter's :class:`~norms.lab.training.CNN` (float64) with BatchNorm
    (``"batch"``), no norm (``"none"``) or every BatchNorm2d replaced by a channels-first
    :class:`norms.DynamicTanh` (``"dyt"``).

    ``conv_bias`` says whether the convolutions have a bias; by default only ``"none"`` has one,
    as in :class:`~norms.lab.training.CNN` (a bias before BatchNorm is cancelled by its mean).
    Drawing the biases moves the generator, so with ``conv_bias=False`` the ``"none"`` network
    starts from exactly the convolution weights of ``"batch"`` and ``"dyt"`` of the same seed,
    and with the default it does not."""
    if kind not in ("batch", "none", "dyt"):
        raise ValueError(f"kind must be batch, none or dyt, got {kind!r}")
    bias = kind == "none" if conv_bias is None else conv_bias
    model = CNN("none" if bias else "batch", channels=channels, seed=seed).double()
    for block in model.blocks:
        width = block.layer.out_channels
        if kind == "batch" and bias:
            block.norm = BatchNorm2d(width).double()
        elif kind == "none":
            block.norm = nn.Identity()
        elif kind == "dyt":
            block.norm = DynamicTanh(
                width, alpha_init_value=alpha_init_value, channels_last=False, dtype=torch.float64
            )
    return model


def pooled_scale(model: nn.Module, images: Tensor) -> float:
    """The root mean square of the features a :class:`~norms.lab.training.CNN` pools for its
    head (after the last block, averaged over the pixels) on ``images``, in training mode (a
    BatchNorm normalizes with the batch's statistics, as in the first training step). The
    gradient of the head's weights is proportional to these features."""
    was_training = model.training
    model.train()
    try:
        with torch.no_grad():
            x = images
            for block in model.blocks:
                x = block(x)
            pooled = x.mean(dim=(2, 3))
    finally:
        model.train(was_training)
    return float(pooled.pow(2).mean().sqrt())


def run_cnn(
    kind: str,
    data: Data,
    seed: int = 0,
    lr: float = 0.05,
    epochs: int = 2,
    channels: int = 8,
    conv_bias: bool | None = None,
    alpha_init_value: float = 0.5,
) -> Result:
    """:func:`cnn_model` trained with SGD and momentum by :func:`norms.lab.training.train`
    (``epochs`` epochs of 32 images at ``lr``); the test accuracy in eval mode. The
    :class:`Result` is named after the kind, with the conv bias and α₀ where they differ from the
    defaults."""
    model = cnn_model(kind, seed, channels, conv_bias, alpha_init_value)
    log = train(
        model,
        data,
        lr=lr,
        epochs=epochs,
        batch_size=32,
        seed=seed,
        record_every=10**9,
        eval_batch_stats=False,
        accuracies="final test",  # the final test accuracy is all a Result keeps
    )
    name = NAMES[kind]
    if conv_bias is not None and conv_bias != (kind == "none"):
        name += ", conv bias" if conv_bias else ", no conv bias"
    if kind == "dyt" and alpha_init_value != 0.5:
        name += f", α₀ = {alpha_init_value:g}"
    steps = len(log.loss)
    res = Result(name, seed, [float(v) for v in log.loss], protocol=Protocol(steps, lr, 32))
    res.accuracy = float(log.final_test_acc)
    res.alphas = _alphas(model)
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
