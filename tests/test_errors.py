"""Bad input: same exception type as torch, and a message naming the shapes.

Every case is run through torch too, so the expected type is whatever torch
really raises (our NotImplementedError for integer input is accepted where
torch raises its parent RuntimeError).
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import norms
from norms import functional as NF


def x(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=g).to(dtype)


def ints(*shape):
    return torch.ones(shape, dtype=torch.long)


# (id, call(lib_modules, lib_functional), fragments our message must contain)
CASES = [
    # wrong rank
    (
        "bn2d-rank",
        lambda nn, F: nn.BatchNorm2d(3)(x(3, 5, 6)),
        ["expected 4D input (got 3D input)", "(3, 5, 6)", "(N, C, H, W)"],
    ),
    (
        "bn1d-rank",
        lambda nn, F: nn.BatchNorm1d(3)(x(2, 3, 4, 5)),
        ["expected 2D or 3D input (got 4D input)", "(2, 3, 4, 5)"],
    ),
    (
        "bn3d-rank",
        lambda nn, F: nn.BatchNorm3d(3)(x(2, 3, 4, 5)),
        ["expected 5D input (got 4D input)", "(2, 3, 4, 5)"],
    ),
    (
        "in2d-rank",
        lambda nn, F: nn.InstanceNorm2d(3)(x(3, 5)),
        ["expected 3D or 4D input (got 2D input)", "(3, 5)"],
    ),
    ("gn-rank", lambda nn, F: nn.GroupNorm(1, 3)(x(3)), ["at least 2 dimensions", "(3,)"]),
    # one value per channel while training
    (
        "bn-one-value",
        lambda nn, F: nn.BatchNorm1d(3)(x(1, 3)),
        ["Expected more than 1 value per channel when training", "torch.Size([1, 3])"],
    ),
    (
        "bn-one-value-spatial",
        lambda nn, F: nn.BatchNorm2d(3)(x(1, 3, 1, 1)),
        ["more than 1 value per channel", "torch.Size([1, 3, 1, 1])"],
    ),
    (
        "bn-one-value-untracked-eval",
        lambda nn, F: nn.BatchNorm1d(3, track_running_stats=False).eval()(x(1, 3)),
        ["more than 1 value per channel", "[1, 3]"],
    ),
    (
        "gn-one-value",
        lambda nn, F: nn.GroupNorm(3, 3)(x(1, 3)),
        ["more than 1 value per channel", "[1, 3]"],
    ),
    (
        "in-one-spatial",
        lambda nn, F: nn.InstanceNorm1d(3)(x(4, 3, 1)),
        ["more than 1 spatial element", "torch.Size([4, 3, 1])"],
    ),
    # wrong channel count
    ("bn-channels", lambda nn, F: nn.BatchNorm2d(3)(x(4, 5, 6, 6)), ["3 channels", "(4, 5, 6, 6)"]),
    (
        "bn-channels-eval",
        lambda nn, F: nn.BatchNorm2d(3).eval()(x(4, 5, 6, 6)),
        ["3 channels", "(4, 5, 6, 6)"],
    ),
    (
        "bn-channels-untracked",
        lambda nn, F: nn.BatchNorm1d(3, track_running_stats=False)(x(4, 5)),
        ["3 channels", "(4, 5)"],
    ),
    (
        "in-channels-affine",
        lambda nn, F: nn.InstanceNorm2d(3, affine=True)(x(2, 4, 5, 5)),
        ["num_features (3)", "4", "(2, 4, 5, 5)"],
    ),
    (
        "in-channels-tracked",
        lambda nn, F: nn.InstanceNorm1d(3, track_running_stats=True)(x(2, 4, 5)),
        ["3 channels", "(2, 4, 5)"],
    ),
    ("gn-channels", lambda nn, F: nn.GroupNorm(2, 4)(x(3, 6, 5)), ["4", "(3, 6, 5)", "channels"]),
    (
        "gn-channels-indivisible",
        lambda nn, F: nn.GroupNorm(2, 4)(x(3, 5, 5)),
        ["divisible by num_groups", "(3, 5, 5)", "num_groups=2"],
    ),
    (
        "F.bn-weight",
        lambda nn, F: F.batch_norm(x(4, 3), None, None, torch.ones(5), training=True),
        ["5 channels", "weight", "(4, 3)"],
    ),
    (
        "F.in-bias",
        lambda nn, F: F.instance_norm(x(2, 3, 4), bias=torch.ones(5)),
        ["5 channels", "bias", "(2, 3, 4)"],
    ),
    # groups
    (
        "gn-ctor-indivisible",
        lambda nn, F: nn.GroupNorm(4, 6),
        ["num_channels (6) must be divisible by num_groups (4)"],
    ),
    ("F.gn-zero-groups", lambda nn, F: F.group_norm(x(2, 4, 3), 0), ["num_groups"]),
    ("F.gn-negative-groups", lambda nn, F: F.group_norm(x(2, 4, 3), -2), ["-2"]),
    # normalized_shape
    ("ln-shape", lambda nn, F: nn.LayerNorm([5, 7])(x(4, 3, 5, 6)), ["[5, 7]", "(4, 3, 5, 6)"]),
    ("ln-shape-rank", lambda nn, F: nn.LayerNorm([2, 3, 5])(x(3, 5)), ["[2, 3, 5]", "(3, 5)"]),
    ("rms-shape", lambda nn, F: nn.RMSNorm(4)(x(2, 3)), ["[4]", "(2, 3)"]),
    (
        "F.ln-weight-shape",
        lambda nn, F: F.layer_norm(x(2, 6), [6], torch.ones(5)),
        ["(5,)", "(6,)"],
    ),
    (
        "F.rms-weight-shape",
        lambda nn, F: F.rms_norm(x(2, 6), [6], torch.ones(2, 3)),
        ["(2, 3)", "(6,)"],
    ),
    ("F.ln-empty-shape", lambda nn, F: F.layer_norm(x(2, 6), []), ["at least 1-dimensional"]),
    ("F.ln-int-shape", lambda nn, F: F.layer_norm(x(2, 6), 6), ["normalized_shape", "int"]),
    # integer / non-float tensors
    (
        "F.bn-int",
        lambda nn, F: F.batch_norm(ints(4, 3), None, None, training=True),
        ["torch.int64", "(4, 3)"],
    ),
    ("F.ln-int", lambda nn, F: F.layer_norm(ints(4, 3), [3]), ["torch.int64"]),
    ("F.rms-int", lambda nn, F: F.rms_norm(ints(4, 3), [3]), ["torch.int64"]),
    ("F.gn-int", lambda nn, F: F.group_norm(ints(4, 3), 1), ["torch.int64"]),
    ("F.in-int", lambda nn, F: F.instance_norm(ints(4, 3, 2)), ["torch.int64"]),
    (
        "F.ln-bool",
        lambda nn, F: F.layer_norm(torch.ones(4, 3, dtype=torch.bool), [3]),
        ["torch.bool"],
    ),
    ("bn-int", lambda nn, F: nn.BatchNorm2d(3)(ints(4, 3, 2, 2)), ["torch.int64"]),
    ("ln-int", lambda nn, F: nn.LayerNorm(3)(ints(4, 3)), ["torch.int64"]),
    ("gn-int", lambda nn, F: nn.GroupNorm(1, 3)(ints(4, 3)), ["torch.int64"]),
    ("rms-int", lambda nn, F: nn.RMSNorm(3)(ints(4, 3)), ["torch.int64"]),
    ("in-int", lambda nn, F: nn.InstanceNorm1d(3)(ints(4, 3, 2)), ["torch.int64"]),
    # mixed dtypes, running stats, eps
    (
        "F.bn-mixed-dtype",
        lambda nn, F: F.batch_norm(
            x(4, 3), None, None, torch.ones(3, dtype=torch.float64), training=True
        ),
        ["torch.float64", "torch.float32"],
    ),
    (
        "F.ln-mixed-dtype",
        lambda nn, F: F.layer_norm(x(4, 3), [3], torch.ones(3, dtype=torch.float64)),
        ["torch.float64", "torch.float32"],
    ),
    ("F.bn-eval-no-stats", lambda nn, F: F.batch_norm(x(4, 3), None, None), ["running_mean"]),
    (
        "F.bn-one-stat",
        lambda nn, F: F.batch_norm(x(4, 3), torch.zeros(3), None, training=True),
        ["running_mean and running_var"],
    ),
    (
        "F.bn-eps-zero",
        lambda nn, F: F.batch_norm(x(4, 3), None, None, training=True, eps=0.0),
        ["eps", "0.0"],
    ),
    (
        "F.bn-eps-negative",
        lambda nn, F: F.batch_norm(x(4, 3), torch.zeros(3), torch.ones(3), eps=-1.0),
        ["eps", "-1.0"],
    ),
    # head counts (issue 38, item 14: an AssertionError where torch raises ValueError)
    (
        "tel-no-heads",
        lambda nn, F: nn.TransformerEncoderLayer(8, 0),
        ["embed_dim and num_heads must be greater than 0", "num_heads=0", "nhead=0"],
    ),
    (
        "tdl-negative-heads",
        lambda nn, F: nn.TransformerDecoderLayer(8, -2),
        ["embed_dim and num_heads must be greater than 0", "nhead=-2"],
    ),
    (
        "tel-no-features",
        lambda nn, F: nn.TransformerEncoderLayer(0, 2),
        ["embed_dim and num_heads must be greater than 0", "d_model=0"],
    ),
    (
        "tel-indivisible",
        lambda nn, F: nn.TransformerEncoderLayer(8, 3),
        ["embed_dim must be divisible by num_heads", "8 % 3 = 2"],
    ),
    (
        "F.in-no-stats",
        lambda nn, F: F.instance_norm(x(4, 3, 5), use_input_stats=False),
        ["running_mean and running_var"],
    ),
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("call,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_exception_as_torch_and_clear_message(call, fragments):
    with pytest.raises(Exception) as theirs:
        call(tnn, TF)
    with pytest.raises(Exception) as ours:
        call(norms, NF)
    # same type (or a subclass: NotImplementedError where torch's mixed-dtype
    # check fires first with its parent RuntimeError)
    assert issubclass(ours.type, theirs.type), (ours.type, theirs.type, str(ours.value))
    msg = str(ours.value)
    for frag in fragments:
        assert frag in msg, (frag, msg)


def test_no_silent_results_for_channels_nothing_depends_on():
    """Where torch accepts a channel mismatch (nothing is sized by C) we match its result."""
    a = x(4, 5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, args, kw in [
            ("BatchNorm1d", (3,), dict(affine=False, track_running_stats=False)),
            ("InstanceNorm1d", (3,), {}),
            ("GroupNorm", (1, 3), dict(affine=False)),
        ]:
            torch.testing.assert_close(
                getattr(norms, name)(*args, **kw)(a), getattr(tnn, name)(*args, **kw)(a)
            )


@pytest.mark.parametrize("d_model, nhead", [(8, 0), (8, -1), (0, 2), (8, 3)])
def test_llama_attention_rejects_head_counts_like_multihead_attention(d_model, nhead):
    """Issue 38, item 14: Attention(8, 0) raised ZeroDivisionError."""
    from norms.modules import Attention

    with pytest.raises(Exception) as theirs:
        tnn.MultiheadAttention(d_model, nhead)
    with pytest.raises(Exception) as ours:
        Attention(d_model, nhead)
    assert ours.type is theirs.type
    assert str(theirs.value) in str(ours.value) and f"nhead={nhead}" in str(ours.value)


@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 6), (1, 2, 5, 8)])
def test_llama_attention_names_an_input_of_the_wrong_shape(shape):
    """Issue 38, item 14: a 2-D input gave an unpacking ValueError."""
    from norms.modules import Attention

    with pytest.raises(
        ValueError, match=r"\(B, T, d_model\) = \(B, T, 8\).*" + re.escape(str(shape))
    ):
        Attention(8, 2)(torch.randn(shape))
