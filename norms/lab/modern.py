"""Runs of the chapter "Norms in today's transformers": tiny models, float64, one thread.

* QK-norm (Henry et al., 2020; Dehghani et al., 2023): a causal :class:`norms.modules.LlamaStack`
  learns to copy a sequence at a sweep of learning rates, with and without an RMSNorm on every
  head's queries and keys; :func:`run_copy` records the largest attention logit and the loss.
* Where the norms sit: post-LN, pre-LN, Peri-LN (a norm after each sub-layer's output too; Kim et
  al., 2025), LayerScale (Touvron et al., 2021), ReZero (Bachlechner et al., 2021) and DeepNorm
  (Wang et al., 2022) as layers of one :class:`DeepStack`, trained on the reversal task of the
  transformer chapter by :func:`run_stack`, with the size of the residual stream after every layer.
* Pre-LN ≡ pre-RMSNorm (Jiang et al., 2023): :func:`pre_ln_to_pre_rms` converts a pre-LN
  :class:`~norms.lab.transformer.TinyEncoder` into a pre-RMSNorm one that computes the same
  function.
* Conditioning through the norm: :class:`AdaLNZeroBlock` (Peebles & Xie, 2023) in a tiny
  class-conditional denoiser of the digits, :func:`run_denoiser`.

Nothing here draws (see :mod:`norms.plots.dyt`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..modules.layernorm import LayerNorm
from ..modules.llama import LlamaStack
from ..modules.rmsnorm import RMSNorm
from ..modules.transformer import MLP, TransformerEncoderLayer
from .dyt import Result, fit
from .training import Data, default_dtype, seeded
from .transformer import DeepNormEncoderLayer, TinyEncoder, reverse_batch

__all__ = [
    "copy_batch",
    "CopyLM",
    "run_copy",
    "PeriLNEncoderLayer",
    "LayerScaleEncoderLayer",
    "ReZeroEncoderLayer",
    "DeepStack",
    "STACK_KINDS",
    "run_stack",
    "pre_ln_to_pre_rms",
    "AdaLNZeroBlock",
    "Denoiser",
    "run_denoiser",
]


# --------------------------------------------------------------------------
# QK-norm: attention logit growth
# --------------------------------------------------------------------------


def copy_batch(batch: int, half: int, vocab: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Sequences ``a b c ... a b c`` (a random half, then the same half again) of shape
    ``(batch, 2·half)``, and the next-token targets: ``-100`` (ignored) on the first half, the
    token to copy on the second."""
    a = torch.randint(0, vocab, (batch, half), generator=gen)
    x = torch.cat([a, a], 1)  # (batch, 2 half)
    y = torch.full_like(x, -100)
    y[:, half - 1 : -1] = a  # after reading token i of the copy, predict token i + 1
    return x, y


class CopyLM(nn.Module):
    """Token and learned position embeddings, a causal :class:`norms.modules.LlamaStack` (with
    ``qk_norm``), a linear head."""

    def __init__(
        self,
        qk_norm: bool,
        depth: int = 2,
        vocab: int = 16,
        length: int = 16,
        d_model: int = 32,
        nhead: int = 2,
        hidden: int = 64,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(length, d_model))
        self.stack = LlamaStack(depth, d_model, nhead, hidden, qk_norm=qk_norm)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]  # (B, T, D)
        return self.head(self.stack(x))  # (B, T, vocab)

    @torch.no_grad()
    def max_logit(self, tokens: Tensor) -> float:
        """The largest attention logit ``|q·k|/√d_h`` over every layer, head and pair of
        positions (Wortsman et al., 2024, track the same quantity)."""
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        top = 0.0
        for layer in self.stack.layers:
            top = max(top, float(layer.attention.logits(layer.attention_norm(x)).abs().max()))
            x = layer(x)
        return top

    @torch.no_grad()
    def logit_bound(self) -> float:
        r"""What QK-norm bounds every attention logit by: :math:`\sqrt{d_h}\,\max_f |\gamma_{q,f}
        \gamma_{k,f}|`, the largest over the layers (``inf`` without QK-norm). It is
        :math:`\sqrt{d_h}` at initialization (:math:`\gamma = 1`) and moves as the γs learn."""
        top = 0.0
        for layer in self.stack.layers:
            attn = layer.attention
            if attn.q_norm is None:
                return float("inf")
            gain = (attn.q_norm.weight * attn.k_norm.weight).abs().max()
            top = max(top, attn.head_dim**0.5 * float(gain))
        return top


def run_copy(
    qk_norm: bool,
    lr: float,
    seed: int = 0,
    steps: int = 100,
    half: int = 8,
    vocab: int = 16,
    log_every: int = 10,
) -> Result:
    """Train a :class:`CopyLM` with Adam at ``lr`` (10 warm-up steps). The :class:`Result` holds
    the losses; ``logits`` (added) the largest attention logit every ``log_every`` steps,
    ``bound`` (added) :meth:`CopyLM.logit_bound` after training, and ``accuracy`` the share of
    copied tokens right on 256 held-out sequences."""
    with seeded(seed):
        with default_dtype(torch.float64):  # drawn in float64: the same on every CPU
            model = CopyLM(qk_norm, vocab=vocab, length=2 * half)
    gen = torch.Generator().manual_seed(3000 + seed)
    probe = copy_batch(64, half, vocab, torch.Generator().manual_seed(7))[0]
    res = Result("QK-norm" if qk_norm else "no QK-norm", seed)
    res.logits = []

    def batches(step):
        if step % log_every == 0:
            res.logits.append(model.max_logit(probe))
        return copy_batch(32, half, vocab, gen)

    res.losses = fit(model, batches, steps, lr)
    logged = -(-steps // log_every) + 1  # every log_every steps, and after the last
    if res.diverged:
        res.logits += [float("nan")] * (logged - len(res.logits))
        res.accuracy = res.bound = float("nan")
        return res
    res.logits.append(model.max_logit(probe))
    res.bound = model.logit_bound()
    with torch.no_grad():
        x, y = copy_batch(256, half, vocab, torch.Generator().manual_seed(20_000 + seed))
        keep = y >= 0
        res.accuracy = float((model(x).argmax(-1)[keep] == y[keep]).double().mean())
    return res


# --------------------------------------------------------------------------
# where the norms sit, and residual branches that start small
# --------------------------------------------------------------------------


class PeriLNEncoderLayer(TransformerEncoderLayer):
    r"""Peri-LN (Kim et al., 2025), the sandwich norm of CogView (Ding et al., 2021): pre-LN plus a
    LayerNorm on each sub-layer's output before it joins the residual stream,
    :math:`x + \mathrm{LN}_{out}(F(\mathrm{LN}_{in}(x)))`."""

    def __init__(self, d_model: int, *args, **kwargs) -> None:
        super().__init__(d_model, *args, norm_first=True, **kwargs)
        self.norm1_out = LayerNorm(d_model)
        self.norm2_out = LayerNorm(d_model)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src + self.norm1_out(self._sa_block(self.norm1(src), src_mask, None, is_causal))
        return x + self.norm2_out(self._ff_block(self.norm2(x)))


class LayerScaleEncoderLayer(TransformerEncoderLayer):
    r"""Pre-LN with LayerScale (Touvron et al., 2021): each branch is multiplied by a learned
    per-channel vector started at ``init_value``:
    :math:`x + \mathrm{diag}(\lambda) F(\mathrm{LN}(x))`."""

    def __init__(self, d_model: int, *args, init_value: float = 0.1, **kwargs) -> None:
        super().__init__(d_model, *args, norm_first=True, **kwargs)
        self.scale1 = nn.Parameter(torch.full((d_model,), init_value))
        self.scale2 = nn.Parameter(torch.full((d_model,), init_value))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src + self.scale1 * self._sa_block(self.norm1(src), src_mask, None, is_causal)
        return x + self.scale2 * self._ff_block(self.norm2(x))


class ReZeroEncoderLayer(TransformerEncoderLayer):
    r"""ReZero (Bachlechner et al., 2021): no norm at all; each branch is multiplied by one
    learned scalar that starts at zero, :math:`x + \alpha F(x)`, so the layer starts as the
    identity."""

    def __init__(self, d_model: int, *args, **kwargs) -> None:
        super().__init__(d_model, *args, **kwargs)
        self.norm1, self.norm2 = nn.Identity(), nn.Identity()
        self.resweight = nn.Parameter(torch.zeros(1))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src + self.resweight * self._sa_block(src, src_mask, None, is_causal)
        return x + self.resweight * self._ff_block(x)


#: The layers of :class:`DeepStack`, and whether the stack ends in a final LayerNorm.
STACK_KINDS = {
    "post": False,
    "pre": True,
    "peri": True,
    "layerscale": True,
    "rezero": False,
    "deepnorm": False,
}
STACK_NAMES = {
    "post": "post-LN",
    "pre": "pre-LN",
    "peri": "Peri-LN",
    "layerscale": "LayerScale",
    "rezero": "ReZero",
    "deepnorm": "DeepNorm",
}


class DeepStack(nn.Module):
    """Token and position embeddings, ``depth`` layers of one ``kind`` (:data:`STACK_KINDS`),
    the final LayerNorm where the kind has one, a linear head. ``forward(tokens, trace=list)``
    appends the RMS size of the residual stream after the embedding and after every layer."""

    def __init__(
        self,
        kind: str,
        depth: int,
        vocab: int = 8,
        length: int = 8,
        d_model: int = 16,
        nhead: int = 2,
        dim_feedforward: int = 32,
    ) -> None:
        super().__init__()
        if kind not in STACK_KINDS:
            raise ValueError(f"kind must be one of {list(STACK_KINDS)}, got {kind!r}")
        self.kind = kind
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(length, d_model))
        kw = dict(dim_feedforward=dim_feedforward, dropout=0.0, batch_first=True)
        if kind == "deepnorm":
            a, b = (2 * depth) ** 0.25, (8 * depth) ** -0.25
            make = lambda: DeepNormEncoderLayer(d_model, nhead, alpha=a, beta=b, **kw)  # noqa: E731
        elif kind in ("post", "pre"):
            make = lambda: TransformerEncoderLayer(d_model, nhead, norm_first=kind == "pre", **kw)  # noqa: E731
        else:
            cls = {
                "peri": PeriLNEncoderLayer,
                "layerscale": LayerScaleEncoderLayer,
                "rezero": ReZeroEncoderLayer,
            }[kind]
            make = lambda: cls(d_model, nhead, **kw)  # noqa: E731
        self.layers = nn.ModuleList(make() for _ in range(depth))
        self.norm = LayerNorm(d_model) if STACK_KINDS[kind] else nn.Identity()
        self.head = nn.Linear(d_model, vocab)

    def stream(self, tokens: Tensor, trace: list | None = None) -> Tensor:
        """The residual stream after the last layer (before the final norm), ``(B, T, D)``."""
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]  # (B, T, D)
        if trace is not None:
            trace.append(float(x.detach().pow(2).mean().sqrt()))
        for layer in self.layers:
            x = layer(x)
            if trace is not None:
                trace.append(float(x.detach().pow(2).mean().sqrt()))
        return x

    def forward(self, tokens: Tensor, trace: list | None = None) -> Tensor:
        return self.head(self.norm(self.stream(tokens, trace)))


def run_stack(
    kind: str,
    depth: int = 6,
    seed: int = 0,
    lr: float = 3e-3,
    steps: int = 100,
    length: int = 8,
    vocab: int = 8,
) -> Result:
    """Train a :class:`DeepStack` on the reversal task in float64. The :class:`Result` holds the
    losses and the token accuracy; ``rms_init`` and ``rms_trained`` (added) the size of the
    residual stream after every layer, at initialization and after training, and ``peak``
    (added) its largest feature after the last layer, trained, in units of its RMS (the
    "massive activations" of Sun et al., 2024, are thousands)."""
    with seeded(seed):
        with default_dtype(torch.float64):  # drawn in float64: the same on every CPU
            model = DeepStack(kind, depth, vocab=vocab, length=length)
    probe = reverse_batch(64, length, vocab, torch.Generator().manual_seed(5))[0]
    res = Result(STACK_NAMES[kind], seed)
    res.rms_init = []
    with torch.no_grad():
        model(probe, trace=res.rms_init)
    gen = torch.Generator().manual_seed(1000 + seed)
    res.losses = fit(model, lambda s: reverse_batch(32, length, vocab, gen), steps, lr)
    res.rms_trained = []
    with torch.no_grad():
        last = model.stream(probe, trace=res.rms_trained)
        res.peak = float(last.abs().max()) / res.rms_trained[-1]
        x, y = reverse_batch(512, length, vocab, torch.Generator().manual_seed(10_000 + seed))
        res.accuracy = float((model(x).argmax(-1) == y).double().mean())
    return res


# --------------------------------------------------------------------------
# pre-LN ≡ pre-RMSNorm (Jiang et al., 2023)
# --------------------------------------------------------------------------


def _centre_rows(weight: Tensor, bias: Tensor | None = None) -> None:
    """Subtract the mean over the output features (dim 0) of a layer writing to the residual
    stream, so that what it writes has zero mean over d_model."""
    weight.sub_(weight.mean(0, keepdim=True))
    if bias is not None:
        bias.sub_(bias.mean())


def _fold_beta(norm: LayerNorm, weight: Tensor, bias: Tensor) -> None:
    """``W(γ·x̂ + β) + b = W(γ·x̂) + (Wβ + b)``: move the norm's β into the next layer's bias."""
    bias.add_(weight @ norm.bias)


@torch.no_grad()
def pre_ln_to_pre_rms(model: TinyEncoder) -> TinyEncoder:
    """A pre-LN :class:`~norms.lab.transformer.TinyEncoder` (kind ``"pre"``), converted in place
    into a pre-RMSNorm model that computes the same function (Jiang et al., 2023):

    1. everything that writes to the residual stream (token and position embeddings, attention's
       output projection, the MLP's second layer) is centred over d_model, so the stream has
       zero mean at every token; LayerNorm removes that mean anyway, so nothing downstream sees a
       difference;
    2. each LayerNorm's β is folded into the bias of the linear layer it feeds;
    3. each LayerNorm becomes an :class:`norms.RMSNorm` with the same γ and eps: on a zero-mean
       input the two agree.
    """
    if model.kind != "pre":
        raise ValueError(f"only a pre-LN TinyEncoder (kind 'pre') converts, got {model.kind!r}")
    model.embed.weight.sub_(model.embed.weight.mean(1, keepdim=True))
    model.pos.sub_(model.pos.mean(1, keepdim=True))
    for layer in model.layers:
        attn = layer.self_attn
        _centre_rows(attn.out_proj.weight, attn.out_proj.bias)
        _centre_rows(layer.linear2.weight, layer.linear2.bias)
        _fold_beta(layer.norm1, attn.in_proj_weight, attn.in_proj_bias)
        _fold_beta(layer.norm2, layer.linear1.weight, layer.linear1.bias)
    _fold_beta(model.norm, model.head.weight, model.head.bias)

    def rms(ln: LayerNorm) -> RMSNorm:
        r = RMSNorm(ln.normalized_shape, eps=ln.eps, dtype=ln.weight.dtype)
        r.weight.copy_(ln.weight)
        return r

    for layer in model.layers:
        layer.norm1, layer.norm2 = rms(layer.norm1), rms(layer.norm2)
    model.norm = rms(model.norm)
    return model


# --------------------------------------------------------------------------
# conditioning through the norm: AdaLN-Zero
# --------------------------------------------------------------------------


class AdaLNZeroBlock(nn.Module):
    r"""A DiT block with AdaLN-Zero (Peebles & Xie, 2023): LayerNorms without their own γ, β; a
    linear layer maps the condition ``c`` to a shift, a scale and a gate for each of the two
    branches (six vectors of d_model), initialized to zero, so the block starts as the identity:

    .. math::

        x \leftarrow x + g_1 \odot \mathrm{Attn}(\mathrm{LN}(x)(1 + s_1) + b_1), \quad
        x \leftarrow x + g_2 \odot \mathrm{MLP}(\mathrm{LN}(x)(1 + s_2) + b_2)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int) -> None:
        super().__init__()
        self.norm1 = LayerNorm(d_model, elementwise_affine=False)
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.norm2 = LayerNorm(d_model, elementwise_affine=False)
        self.mlp = MLP(d_model, dim_feedforward, dropout=0.0)
        self.modulation = nn.Linear(d_model, 6 * d_model)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        # c: (B, d_model) -> six (B, 1, d_model) vectors
        b1, s1, g1, b2, s2, g2 = self.modulation(c).unsqueeze(1).chunk(6, dim=-1)
        h = self.norm1(x) * (1 + s1) + b1
        x = x + g1 * self.attn(h, h, h, need_weights=False)[0]
        return x + g2 * self.mlp(self.norm2(x) * (1 + s2) + b2)


class Denoiser(nn.Module):
    """A tiny class-conditional denoiser of 8 × 8 digits: 16 patches of 2 × 2 pixels, ``depth``
    :class:`AdaLNZeroBlock` s conditioned on a class embedding (``conditioned=False``: on a
    learned constant instead, the same model without the label), a linear read-out per patch."""

    def __init__(
        self,
        conditioned: bool = True,
        depth: int = 2,
        d_model: int = 16,
        nhead: int = 2,
        dim_feedforward: int = 32,
    ) -> None:
        super().__init__()
        self.conditioned = conditioned
        self.embed = nn.Linear(4, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(16, d_model))
        self.label = nn.Embedding(10, d_model)
        self.blocks = nn.ModuleList(
            AdaLNZeroBlock(d_model, nhead, dim_feedforward) for _ in range(depth)
        )
        self.out = nn.Linear(d_model, 4)

    def forward(self, noisy: Tensor, labels: Tensor) -> Tensor:
        n = noisy.shape[0]
        p = noisy.reshape(n, 4, 2, 4, 2).permute(0, 1, 3, 2, 4).reshape(n, 16, 4)  # patches
        x = self.embed(p) + self.pos  # (N, 16, d_model)
        c = self.label(labels if self.conditioned else torch.zeros_like(labels))  # (N, d_model)
        for block in self.blocks:
            x = block(x, c)
        y = self.out(x).reshape(n, 4, 4, 2, 2).permute(0, 1, 3, 2, 4)  # (N, 4, 2, 4, 2)
        return noisy + y.reshape(n, 1, 8, 8)  # predicts the clean image as a correction


def run_denoiser(
    conditioned: bool,
    data: Data,
    seed: int = 0,
    lr: float = 3e-3,
    steps: int = 150,
    noise: float = 1.0,
    batch: int = 32,
) -> Result:
    """Train a :class:`Denoiser` (mean squared error to the clean digit, noise of std ``noise``)
    with Adam; ``accuracy`` of the :class:`Result` holds the test error instead (mean squared,
    fixed noise)."""
    with seeded(seed):
        with default_dtype(torch.float64):  # drawn in float64: the same on every CPU
            model = Denoiser(conditioned)
    gen = torch.Generator().manual_seed(4000 + seed)
    n = len(data.x_train)
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)  # the same numbers, faster
    res = Result("AdaLN-Zero, label" if conditioned else "AdaLN-Zero, no label", seed)
    for _ in range(steps):
        idx = torch.randint(0, n, (batch,), generator=gen)
        x = data.x_train[idx]
        noisy = x + noise * torch.randn(x.shape, generator=gen, dtype=x.dtype)
        loss = (model(noisy, data.y_train[idx]) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.losses.append(float(loss.detach()))
    tgen = torch.Generator().manual_seed(99)
    with torch.no_grad():
        noisy = data.x_test + noise * torch.randn(
            data.x_test.shape, generator=tgen, dtype=data.x_test.dtype
        )
        res.accuracy = float((model(noisy, data.y_test) - data.x_test).pow(2).mean())
    return res
