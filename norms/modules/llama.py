"""The RMSNorm block of LLaMA-style decoders, built from :mod:`norms`.

From `LLaMA: Open and Efficient Foundation Language Models
<https://arxiv.org/abs/2302.13971>`__ (Touvron et al., 2023): pre-norm, :class:`norms.RMSNorm`
(Zhang & Sennrich, 2019) instead of LayerNorm, no bias anywhere, a SwiGLU MLP, and a final
norm after the last block. ``qk_norm=True`` adds an RMSNorm on every head's queries and keys
(QK-norm, as in later models). The module names follow Meta's reference code
(``attention.wq``, ``feed_forward.w1``, ``attention_norm``, ``ffn_norm``, ``norm``). Rotary
position embeddings are left out: they do not touch the norms.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.functional import silu

from .rmsnorm import RMSNorm
from .transformer import check_heads

__all__ = ["Attention", "SwiGLU", "LlamaBlock", "LlamaStack"]


class Attention(nn.Module):
    r"""Causal multi-head self-attention from primitives, without biases.

    .. math::

        \mathrm{softmax}\!\left(\frac{q k^\top}{\sqrt{d_h}} + M\right) v, \quad
        q = x W_q^\top,\ k = x W_k^\top,\ v = x W_v^\top, \text{ per head}

    With ``qk_norm=True``, ``q`` and ``k`` of every head go through an RMSNorm over the head's
    ``d_h = d_model // nhead`` features (γ of shape ``(d_h,)``, shared by the heads) before the
    dot product.

    Shape:
        - Input: :math:`(B, T, d_{model})`; Output: the same

    Example::

        >>> import torch
        >>> from norms.modules.llama import Attention
        >>> attn = Attention(16, 4, qk_norm=True)
        >>> x = torch.randn(2, 5, 16)
        >>> attn(x).shape, attn.logits(x).shape  # logits: (B, heads, T, T)
        (torch.Size([2, 5, 16]), torch.Size([2, 4, 5, 5]))
        >>> y = attn(x)
        >>> torch.allclose(attn(x[:, :3]), y[:, :3])  # causal: token t sees tokens <= t only
        True
    """

    def __init__(self, d_model: int, nhead: int, qk_norm: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        check_heads(d_model, nhead)
        self.nhead, self.head_dim = nhead, d_model // nhead
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.q_norm = RMSNorm(self.head_dim, eps=eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, eps=eps) if qk_norm else None

    def _heads(self, t: Tensor) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.nhead, self.head_dim).transpose(1, 2)  # (B, H, T, d_h)

    def logits(self, x: Tensor) -> Tensor:
        r"""The attention logits :math:`q k^\top / \sqrt{d_h}` of every head, before the mask
        and the softmax: shape :math:`(B, H, T, T)`."""
        q, k = self._heads(self.wq(x)), self._heads(self.wk(x))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # per head, over d_h
        return q @ k.transpose(-2, -1) / self.head_dim**0.5  # (B, H, T, T)

    def forward(self, x: Tensor, causal: bool = True) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != self.wq.in_features:
            raise ValueError(
                f"Attention expects input of shape (B, T, d_model) = (B, T, "
                f"{self.wq.in_features}), got input of shape {tuple(x.shape)}"
            )
        B, T, D = x.shape
        scores, v = self.logits(x), self._heads(self.wv(x))
        if causal:
            scores = scores.masked_fill(
                torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf")
            )
        out = scores.softmax(-1) @ v  # (B, H, T, d_h)
        return self.wo(out.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class SwiGLU(nn.Module):
    r"""LLaMA's MLP: :math:`W_2(\mathrm{SiLU}(W_1 x) \odot W_3 x)`, no biases.

    Example::

        >>> import torch
        >>> from norms.modules.llama import SwiGLU
        >>> mlp = SwiGLU(16, 48)
        >>> mlp(torch.randn(2, 5, 16)).shape, sorted(mlp.state_dict())
        (torch.Size([2, 5, 16]), ['w1.weight', 'w2.weight', 'w3.weight'])
    """

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d_model, bias=False)
        self.w3 = nn.Linear(d_model, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    r"""Pre-norm block with RMSNorm:
    :math:`h = x + \mathrm{Attn}(\mathrm{RMSNorm}_1(x))`,
    :math:`y = h + \mathrm{MLP}(\mathrm{RMSNorm}_2(h))`.

    Example::

        >>> import torch
        >>> from norms.modules.llama import LlamaBlock
        >>> block = LlamaBlock(16, 4, 48)
        >>> block(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
        >>> [name for name, _ in block.named_children()]  # Meta's names
        ['attention_norm', 'attention', 'ffn_norm', 'feed_forward']
    """

    def __init__(
        self, d_model: int, nhead: int, hidden: int, qk_norm: bool = False, eps: float = 1e-5
    ) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(d_model, eps=eps)
        self.attention = Attention(d_model, nhead, qk_norm=qk_norm, eps=eps)
        self.ffn_norm = RMSNorm(d_model, eps=eps)
        self.feed_forward = SwiGLU(d_model, hidden)

    def forward(self, x: Tensor) -> Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class LlamaStack(nn.Module):
    """``depth`` :class:`LlamaBlock` s and the final RMSNorm.

    Example::

        >>> import torch
        >>> from norms.modules.llama import LlamaStack
        >>> stack = LlamaStack(2, 16, 4, 48)
        >>> stack(torch.randn(2, 5, 16)).shape, type(stack.norm).__name__
        (torch.Size([2, 5, 16]), 'RMSNorm')
    """

    def __init__(
        self,
        depth: int,
        d_model: int,
        nhead: int,
        hidden: int,
        qk_norm: bool = False,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            LlamaBlock(d_model, nhead, hidden, qk_norm, eps) for _ in range(depth)
        )
        self.norm = RMSNorm(d_model, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)
