"""Tiny transformer training runs for the chapter "Norms inside the transformer".

Small on purpose: a stack of :class:`norms.TransformerEncoderLayer` learns to reverse
sequences of random tokens generated on the fly (no download), a few hundred Adam steps
on two CPU cores. Also the measurement of Xiong et al. (2020): the gradient norm of every
layer at initialization, and DeepNorm's scaled residual (Wang et al., 2022).

Each run prints one summary line; nothing here draws (see :mod:`norms.plots.transformer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..modules.layernorm import LayerNorm
from ..modules.transformer import TransformerEncoderLayer
from .seeds import SEEDS
from .training import default_dtype

__all__ = [
    "reverse_batch",
    "DeepNormEncoderLayer",
    "TinyEncoder",
    "Run",
    "train_reverse",
    "train_seeds",
    "seeds_summary",
    "layer_grad_norms",
]


def reverse_batch(
    batch: int, length: int, vocab: int, gen: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Random token sequences ``(batch, length)`` and their reversals, the targets."""
    x = torch.randint(0, vocab, (batch, length), generator=gen)
    return x, x.flip(1)


class DeepNormEncoderLayer(TransformerEncoderLayer):
    r"""Post-LN with DeepNorm's up-weighted residual (Wang et al., 2022):
    :math:`x_{l+1} = \mathrm{LN}(\alpha x_l + G(x_l))`, and the value, output and MLP weights
    initialized with gain :math:`\beta`. For an encoder of ``N`` layers
    :math:`\alpha = (2N)^{1/4}`, :math:`\beta = (8N)^{-1/4}`."""

    def __init__(self, *args, alpha: float = 1.0, beta: float = 1.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.norm_first:
            raise ValueError("DeepNorm is a post-LN layer: norm_first must be False")
        self.alpha = alpha
        d = self.self_attn.embed_dim
        w = self.self_attn.in_proj_weight  # (3 d, d): q, k, v stacked
        with torch.no_grad():
            for i, gain in enumerate((1.0, 1.0, beta)):
                nn.init.xavier_normal_(w[i * d : (i + 1) * d], gain=gain)
        for lin in (self.self_attn.out_proj, self.linear1, self.linear2):
            nn.init.xavier_normal_(lin.weight, gain=beta)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = self.norm1(
            self.alpha * src + self._sa_block(src, src_mask, src_key_padding_mask, is_causal)
        )
        return self.norm2(self.alpha * x + self._ff_block(x))

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:.3g}"


class TinyEncoder(nn.Module):
    """Token and position embeddings, ``depth`` encoder layers, an optional final norm, a linear
    head.

    ``kind``: ``"post"`` (post-LN), ``"pre"`` (pre-LN with a final norm), ``"pre-nofinal"`` (pre-LN
    without it) or ``"deepnorm"`` (post-LN with DeepNorm's α and β).

    The parameters are float64 by default (``dtype``): a float32 run gives other losses on
    another CPU (SIMD width, thread count), a float64 run of this size does not."""

    def __init__(
        self,
        kind: str,
        depth: int,
        vocab: int = 10,
        length: int = 10,
        d_model: int = 32,
        nhead: int = 4,
        dim_feedforward: int = 64,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        with default_dtype(dtype):  # drawn in float64: the same initial values on every CPU
            self._build(kind, depth, vocab, length, d_model, nhead, dim_feedforward)

    def _build(self, kind, depth, vocab, length, d_model, nhead, dim_feedforward) -> None:
        self.kind = kind
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(length, d_model))
        kw = dict(dim_feedforward=dim_feedforward, dropout=0.0, batch_first=True)
        if kind == "deepnorm":
            alpha, beta = (2 * depth) ** 0.25, (8 * depth) ** -0.25
            layers = [
                DeepNormEncoderLayer(d_model, nhead, alpha=alpha, beta=beta, **kw)
                for _ in range(depth)
            ]
        elif kind in ("post", "pre", "pre-nofinal"):
            layers = [
                TransformerEncoderLayer(d_model, nhead, norm_first=kind != "post", **kw)
                for _ in range(depth)
            ]
        else:
            raise ValueError(f"kind must be post, pre, pre-nofinal or deepnorm, not {kind!r}")
        self.layers = nn.ModuleList(layers)
        self.norm = LayerNorm(d_model) if kind == "pre" else nn.Identity()
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]  # (B, T, D)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))  # (B, T, vocab)


def layer_grad_norms(model: TinyEncoder, tokens: Tensor, targets: Tensor) -> list[float]:
    """Gradient norm of each layer's second MLP weight (``linear2.weight``) for one batch, the
    quantity Xiong et al. (2020, Fig. 3) plot against the layer index."""
    model.zero_grad()
    loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
    loss.backward()
    return [float(layer.linear2.weight.grad.norm()) for layer in model.layers]


_NAMES = {
    "post": "post-LN",
    "pre": "pre-LN",
    "pre-nofinal": "pre-LN (no final norm)",
    "deepnorm": "DeepNorm",
}


@dataclass
class Run:
    """One training run: its settings, the loss every ``log_every`` steps, and the end result."""

    kind: str
    depth: int
    lr: float
    warmup: int
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    accuracy: float = float("nan")

    @property
    def final_loss(self) -> float:
        return self.losses[-1]

    @property
    def diverged(self) -> bool:
        return not math.isfinite(self.final_loss)

    def mean_loss(self, last: int = 20) -> float:
        """The mean of the last ``last`` logged losses: a final loss that no single minibatch
        decides (after warm-up the loss of one minibatch can swing tenfold from step to step)."""
        if last < 1 or last > len(self.losses):
            raise ValueError(
                f"last must be between 1 and the {len(self.losses)} logged losses, got {last}"
            )
        return sum(self.losses[-last:]) / last

    @property
    def trained(self) -> bool:
        """Whether the run learned the task: token accuracy of at least 90 % (chance is 1/vocab)."""
        return self.accuracy >= 0.9

    def summary(self) -> str:
        """One line: the settings, the first and last logged loss, the token accuracy."""
        name = _NAMES.get(self.kind, self.kind)
        return (
            f"{name:<8} {self.depth:2d} layers, lr {self.lr:.0e}, warm-up {self.warmup:2d} steps: "
            f"loss {self.losses[0]:.2f} -> {self.final_loss:.3f}, "
            f"token accuracy {self.accuracy:6.1%}"
        )


def train_reverse(
    kind: str,
    depth: int,
    lr: float,
    warmup: int = 0,
    steps: int = 300,
    batch: int = 64,
    length: int = 10,
    vocab: int = 10,
    seed: int = 0,
    log_every: int = 10,
    verbose: bool = True,
    **model_kwargs,
) -> Run:
    """Train a :class:`TinyEncoder` to reverse random sequences with Adam; the learning rate rises
    linearly from 0 over ``warmup`` steps, then stays at ``lr``. Prints one summary line.

    Adam runs with ``foreach=True`` (one call per operation for all parameters: the same numbers
    as the loop over parameters, in about half the time for these tiny models)."""
    torch.manual_seed(seed)
    model = TinyEncoder(kind, depth, vocab=vocab, length=length, **model_kwargs)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
    )
    gen = torch.Generator().manual_seed(seed + 1)
    run = Run(kind, depth, lr, warmup)
    for step in range(steps):
        x, y = reverse_batch(batch, length, vocab, gen)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps - 1:
            run.steps.append(step)
            run.losses.append(float(loss.detach()))
    with torch.no_grad():
        x, y = reverse_batch(512, length, vocab, torch.Generator().manual_seed(10_000 + seed))
        run.accuracy = float((model(x).argmax(-1) == y).float().mean())
    if verbose:
        print(run.summary())
    return run


def train_seeds(
    kind: str, depth: int, lr: float, warmup: int = 0, seeds=SEEDS, **kwargs
) -> list[Run]:
    """:func:`train_reverse` once for every seed (five by default), without printing; one line
    about them all is :func:`seeds_summary`."""
    return [train_reverse(kind, depth, lr, warmup, seed=s, verbose=False, **kwargs) for s in seeds]


def seeds_summary(runs: list[Run], last: int = 20) -> str:
    """One line for the runs of one configuration over several seeds: in how many the model
    learned the task (:attr:`Run.trained`), and for those the range over the seeds of the token
    accuracy and of the mean loss of the last ``last`` steps (:meth:`Run.mean_loss`).

    A run that did not learn is only counted: stuck at chance, its loss and accuracy wander with
    the rounding of its sums, so their digits differ from one CPU to another."""
    first = runs[0]
    name = _NAMES.get(first.kind, first.kind)
    ok = [r for r in runs if r.trained]
    line = (
        f"{name:<8} {first.depth:2d} layers, lr {first.lr:.0e}, warm-up {first.warmup:2d} steps: "
        f"learned in {len(ok)} of {len(runs)} seeds"
    )
    if ok:
        acc = [r.accuracy for r in ok]
        loss = [r.mean_loss(last) for r in ok]
        line += (
            f"; token accuracy {min(acc):.1%} to {max(acc):.1%}, "
            f"loss of the last {last} steps {min(loss):.3f} to {max(loss):.3f}"
        )
    return line
