"""Transformer encoder and decoder layers whose norms are :class:`norms.LayerNorm`.

Drop-in for :class:`torch.nn.TransformerEncoderLayer` and
:class:`torch.nn.TransformerDecoderLayer`: the same constructor arguments and
defaults, the same forward arguments, the same submodule, parameter and
``state_dict`` names, and the same numbers. As in torch, a layer holds the parts of
its feed-forward block (``linear1``, ``dropout``, ``linear2``, ``activation``) itself and
runs them in its method ``_ff_block``; the same block on its own is :class:`MLP`, and
:func:`feed_forward` is the computation both run. Attention is
:class:`torch.nn.MultiheadAttention`, as in torch; this module is about where the norms sit.

Post-LN (``norm_first=False``, the 2017 transformer)::

    x = norm1(x + _sa_block(x))  # _sa_block(x) = dropout1(self_attn(x))
    x = norm2(x + _ff_block(x))  # _ff_block(x) = dropout2(linear2(dropout(activation(linear1(x)))))

Pre-LN (``norm_first=True``)::

    x = x + _sa_block(norm1(x))
    x = x + _ff_block(norm2(x))
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.nn import Dropout, Linear, Module, MultiheadAttention
from torch.nn.functional import gelu, relu

from ..compat import canonical_mask
from .layernorm import LayerNorm

__all__ = ["MLP", "TransformerEncoderLayer", "TransformerDecoderLayer", "feed_forward"]

_Activation = str | Callable[[Tensor], Tensor]


def _get_activation_fn(activation: _Activation) -> Callable[[Tensor], Tensor]:
    """``"relu"``/``"gelu"`` to the function; a callable is returned as it is."""
    if not isinstance(activation, str):
        return activation
    if activation == "relu":
        return relu
    if activation == "gelu":
        return gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def check_heads(d_model: int, nhead: int) -> None:
    """torch.nn.MultiheadAttention's errors for the head count, with both numbers: ValueError
    when either is not positive, AssertionError when ``nhead`` does not divide ``d_model``."""
    if d_model <= 0 or nhead <= 0:
        raise ValueError(
            f"embed_dim and num_heads must be greater than 0, got embed_dim={d_model} and "
            f"num_heads={nhead} instead (d_model={d_model} features split into nhead={nhead} "
            "heads)"
        )
    if d_model % nhead != 0:
        raise AssertionError(
            f"embed_dim must be divisible by num_heads: d_model={d_model} must be divisible by "
            f"nhead={nhead} (each head gets d_model // nhead features), but "
            f"{d_model} % {nhead} = {d_model % nhead}"
        )


def _check_not_nested(*tensors: Tensor) -> None:
    if any(t.is_nested for t in tensors):
        raise RuntimeError(
            "norms' transformer layers take padded tensors, not nested tensors: pad the "
            "sequences and pass a key padding mask (torch accepts nested tensors only on its "
            "inference fast path)"
        )


def _check_masks(
    x: Tensor,
    mem: Tensor,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    nhead: int,
    batch_first: bool,
    what: str,
) -> None:
    """Shape checks of one attention call, with torch's exception types: RuntimeError for
    ``attn_mask`` and AssertionError for ``key_padding_mask`` (as in
    ``torch.nn.functional.multi_head_attention_forward``). Checked here so that the message names
    the input's shape and every code path (also torch's inference fast path) gets the same error."""
    if x.dim() not in (2, 3):
        raise AssertionError(
            f"{what}: expected a 2-D (unbatched) or 3-D input, got shape {tuple(x.shape)}"
        )
    batched = x.dim() == 3
    if batched:
        B = x.shape[0] if batch_first else x.shape[1]
        L = x.shape[1] if batch_first else x.shape[0]
        S = mem.shape[1] if batch_first else mem.shape[0]
    else:
        B, L, S = None, x.shape[0], mem.shape[0]
    layout = ("(B, T, D)" if batch_first else "(T, B, D)") if batched else "(T, D)"
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise RuntimeError(
                    f"{what}: the 2D attn_mask has shape {tuple(attn_mask.shape)}, but should be "
                    f"{(L, S)} (target length, source length) for input of shape "
                    f"{tuple(x.shape)} {layout}"
                )
        elif attn_mask.dim() == 3:
            want = ((B or 1) * nhead, L, S)
            if tuple(attn_mask.shape) != want:
                raise RuntimeError(
                    f"{what}: the 3D attn_mask has shape {tuple(attn_mask.shape)}, but should be "
                    f"{want} (batch * nhead, target length, source length) for input of shape "
                    f"{tuple(x.shape)} {layout}"
                )
        else:
            raise RuntimeError(
                f"{what}: attn_mask's dimension {attn_mask.dim()} is not supported "
                f"(shape {tuple(attn_mask.shape)}); use a 2-D {(L, S)} or 3-D mask"
            )
    if key_padding_mask is not None:
        want = (B, S) if batched else (S,)
        if tuple(key_padding_mask.shape) != want:
            raise AssertionError(
                f"{what}: key_padding_mask has shape {tuple(key_padding_mask.shape)}, but should "
                f"be {want} ({'batch, ' if batched else ''}source length) for keys of shape "
                f"{tuple(mem.shape)} {layout}"
            )


def feed_forward(block: Module, x: Tensor) -> Tensor:
    r"""The feed-forward computation :math:`W_2\, \mathrm{dropout}(\phi(W_1 x + b_1)) + b_2` of a
    module that holds torch's parts ``linear1``, ``activation``, ``dropout`` and ``linear2``:
    :class:`MLP`, and the ``_ff_block`` of :class:`TransformerEncoderLayer` and
    :class:`TransformerDecoderLayer` (which add their residual dropout)."""
    return block.linear2(block.dropout(block.activation(block.linear1(x))))


class MLP(Module):
    r"""The position-wise feed-forward block of a transformer layer.

    From `Attention Is All You Need <https://arxiv.org/abs/1706.03762>`__
    (Vaswani et al., 2017):

    .. math::

        \mathrm{MLP}(x) = W_2\, \mathrm{dropout}(\phi(W_1 x + b_1)) + b_2

    applied to every token on its own (the same weights at every position).

    Args:
        d_model: features per token (input and output)
        dim_feedforward: hidden width. Default: 2048
        dropout: dropout after the activation. Default: 0.1
        activation: ``"relu"``, ``"gelu"`` or a unary callable. Default: relu
        bias: if ``False``, the two ``Linear`` layers have no bias. Default: ``True``
        device, dtype: where and in what dtype to create the parameters

    Shape:
        - Input: :math:`(*, d_{model})`
        - Output: :math:`(*, d_{model})`

    Example::

        >>> import torch, norms
        >>> mlp = norms.MLP(16, 64, dropout=0.0)
        >>> mlp(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
        >>> sorted(mlp.state_dict())
        ['linear1.bias', 'linear1.weight', 'linear2.bias', 'linear2.weight']
    """

    def __init__(
        self,
        d_model: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: _Activation = relu,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory_kwargs)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory_kwargs)
        self.activation = _get_activation_fn(activation)

    def forward(self, x: Tensor) -> Tensor:
        return feed_forward(self, x)  # (*, d_model)

    def extra_repr(self) -> str:
        return f"activation={getattr(self.activation, '__name__', self.activation)}"


class TransformerEncoderLayer(Module):
    r"""Self-attention and an MLP, each wrapped in a residual connection and a LayerNorm.

    Drop-in for :class:`torch.nn.TransformerEncoderLayer`, with :class:`norms.LayerNorm` norms.
    From `Attention Is All You Need <https://arxiv.org/abs/1706.03762>`__ (Vaswani et al.,
    2017); ``norm_first=True`` is the Pre-LN layer of `On Layer Normalization in the
    Transformer Architecture <https://arxiv.org/abs/2002.04745>`__ (Xiong et al., 2020).

    .. math::

        \text{post-LN:}\quad h = \mathrm{LN}_1(x + \mathrm{SA}(x)),\;
        y = \mathrm{LN}_2(h + \mathrm{MLP}(h))

        \text{pre-LN:}\quad h = x + \mathrm{SA}(\mathrm{LN}_1(x)),\;
        y = h + \mathrm{MLP}(\mathrm{LN}_2(h))

    Each LayerNorm normalizes every token over its ``d_model`` features; its
    :math:`\gamma`, :math:`\beta` have shape ``(d_model,)``.

    Args:
        d_model: features per token
        nhead: attention heads (must divide ``d_model``)
        dim_feedforward: hidden width of the MLP. Default: 2048
        dropout: dropout probability (attention weights, MLP, residual branches). Default: 0.1
        activation: ``"relu"``, ``"gelu"`` or a unary callable. Default: relu
        layer_norm_eps: the norms' eps. Default: 1e-5
        batch_first: ``(B, T, D)`` input if ``True``, else ``(T, B, D)``. Default: ``False``
        norm_first: pre-LN if ``True``, post-LN if ``False``. Default: ``False``
        bias: if ``False``, no bias in the linear layers and no :math:`\beta` in the norms.
            Default: ``True``
        device, dtype: where and in what dtype to create the parameters

    Shape:
        - src: :math:`(T, B, D)`, or :math:`(B, T, D)` with ``batch_first``, or :math:`(T, D)`
        - src_mask: :math:`(T, T)` or :math:`(B \cdot nhead, T, T)`, bool (``True`` = may not
          attend) or float (added)
        - src_key_padding_mask: :math:`(B, T)`, ``True`` at padding
        - Output: the shape of src

    Unlike torch, this layer has no inference fast path: it always runs the
    documented computation, so ``is_causal=True`` without a mask is an error in
    every mode (as in torch's training mode), an ``nn.GELU(approximate="tanh")``
    activation is the tanh GELU also under ``no_grad`` in eval mode (torch's fused
    kernel computes the exact GELU there), and nested tensors are not accepted.

    Example::

        >>> import torch, norms
        >>> layer = norms.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> layer(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
        >>> layer.norm1
        LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
    """

    __constants__ = ["norm_first"]

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: _Activation = relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        check_heads(d_model, nhead)
        activation = _get_activation_fn(activation)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **factory_kwargs
        )
        # the feed-forward block's parts, under torch's names (the same as norms.MLP's)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory_kwargs)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory_kwargs)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        # torch keeps this flag for its fast path; kept so that code reading it works
        if activation is relu or isinstance(activation, torch.nn.ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is gelu or isinstance(activation, torch.nn.GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation  # last, as in torch (a module activation is its last child)

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "activation"):  # as torch: pickled without one, it gets relu
            self.activation = relu

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        _check_not_nested(src)
        src_key_padding_mask = canonical_mask(
            mask=src_key_padding_mask,
            mask_name="src_key_padding_mask",
            other_type=None if src_mask is None else src_mask.dtype,
            other_name="src_mask",
            target_type=src.dtype,
        )
        src_mask = canonical_mask(
            mask=src_mask,
            mask_name="src_mask",
            other_type=None,
            other_name="",
            target_type=src.dtype,
            check_other=False,
        )
        _check_masks(
            src,
            src,
            src_mask,
            src_key_padding_mask,
            self.self_attn.num_heads,
            self.self_attn.batch_first,
            "self-attention",
        )
        x = src
        if self.norm_first:
            x = x + self._sa_block(
                self.norm1(x), src_mask, src_key_padding_mask, is_causal=is_causal
            )
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(
                x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal=is_causal)
            )
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(
        self,
        x: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool = False,
    ) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        """The feed-forward block and its residual dropout: ``dropout2(MLP(x))``."""
        return self.dropout2(feed_forward(self, x))


class TransformerDecoderLayer(Module):
    r"""Causal self-attention, cross-attention to the encoder's output and an MLP, each wrapped in
    a residual connection and a LayerNorm (three norms).

    Drop-in for :class:`torch.nn.TransformerDecoderLayer`, with :class:`norms.LayerNorm` norms
    (Vaswani et al., 2017; pre-LN with ``norm_first=True``, Xiong et al., 2020).

    .. math::

        \text{post-LN:}\quad h_1 = \mathrm{LN}_1(x + \mathrm{SA}(x)),\;
        h_2 = \mathrm{LN}_2(h_1 + \mathrm{CA}(h_1, m)),\;
        y = \mathrm{LN}_3(h_2 + \mathrm{MLP}(h_2))

        \text{pre-LN:}\quad h_1 = x + \mathrm{SA}(\mathrm{LN}_1(x)),\;
        h_2 = h_1 + \mathrm{CA}(\mathrm{LN}_2(h_1), m),\;
        y = h_2 + \mathrm{MLP}(\mathrm{LN}_3(h_2))

    The memory :math:`m` (keys and values of the cross-attention) is not normalized here:
    in a pre-LN stack it is the output of the encoder's final norm.

    Args:
        d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
        norm_first, bias, device, dtype: as in :class:`TransformerEncoderLayer`

    Shape:
        - tgt: :math:`(T, B, D)` (or :math:`(B, T, D)` with ``batch_first``), memory:
          :math:`(S, B, D)`
        - tgt_mask: :math:`(T, T)` or :math:`(B \cdot nhead, T, T)`; memory_mask: :math:`(T, S)` or
          :math:`(B \cdot nhead, T, S)`
        - tgt_key_padding_mask: :math:`(B, T)`; memory_key_padding_mask: :math:`(B, S)`
        - Output: the shape of tgt

    Example::

        >>> import torch, norms
        >>> layer = norms.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> causal = torch.nn.Transformer.generate_square_subsequent_mask(5)
        >>> layer(torch.randn(2, 5, 16), torch.randn(2, 7, 16), tgt_mask=causal, tgt_is_causal=True).shape
        torch.Size([2, 5, 16])
    """  # noqa: E501 - doctest; a line break would change the example

    __constants__ = ["norm_first"]

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: _Activation = relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        check_heads(d_model, nhead)
        activation = _get_activation_fn(activation)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **factory_kwargs
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **factory_kwargs
        )
        # the feed-forward block's parts, under torch's names (the same as norms.MLP's)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory_kwargs)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory_kwargs)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation  # last, as in torch (a module activation is its last child)

    def __setstate__(self, state):
        if "activation" not in state:  # as torch: pickled without one, it gets relu
            state["activation"] = relu
        super().__setstate__(state)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        _check_not_nested(tgt, memory)
        nhead, bf = self.self_attn.num_heads, self.self_attn.batch_first
        _check_masks(tgt, tgt, tgt_mask, tgt_key_padding_mask, nhead, bf, "self-attention (tgt)")
        _check_masks(
            tgt, memory, memory_mask, memory_key_padding_mask, nhead, bf, "cross-attention (memory)"
        )
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(
                x
                + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            )
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(
        self,
        x: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool = False,
    ) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout1(x)

    def _mha_block(
        self,
        x: Tensor,
        mem: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool = False,
    ) -> Tensor:
        x = self.multihead_attn(
            x,
            mem,
            mem,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        """The feed-forward block and its residual dropout: ``dropout3(MLP(x))``."""
        return self.dropout3(feed_forward(self, x))
