"""norms.modules.llama (the LLaMA-style RMSNorm block), norms.lab.transformer (the chapter's tiny
training runs) and norms.plots.transformer (its figures)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as tnn

import norms
import norms.lab.transformer as ttrain
import norms.modules.llama as llama
import norms.plots.transformer as tplots
from norms.fast.passes import full_size_ops
from norms.plots.style import BookFigure


@pytest.mark.parametrize("causal", [False, True])
def test_attention_from_primitives_matches_torch(causal):
    torch.manual_seed(0)
    attn = llama.Attention(12, 3).double()
    mha = tnn.MultiheadAttention(12, 3, bias=False, batch_first=True).double()
    mha.load_state_dict(
        {
            "in_proj_weight": torch.cat([attn.wq.weight, attn.wk.weight, attn.wv.weight]),
            "out_proj.weight": attn.wo.weight,
        }
    )
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = (
        tnn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64) if causal else None
    )
    torch.testing.assert_close(
        attn(x, causal=causal), mha(x, x, x, attn_mask=mask, need_weights=False)[0]
    )


def test_qk_norm_normalizes_each_head():
    torch.manual_seed(0)
    attn = llama.Attention(16, 4, qk_norm=True)
    assert attn.q_norm.weight.shape == (4,) and isinstance(attn.q_norm, norms.RMSNorm)
    with torch.no_grad():
        attn.wq.weight.mul_(100)
        attn.wk.weight.mul_(100)
        x = torch.randn(2, 6, 16)
        q = attn.q_norm(attn.wq(x).view(2, 6, 4, 4).transpose(1, 2))
        k = attn.k_norm(attn.wk(x).view(2, 6, 4, 4).transpose(1, 2))
        logits = q @ k.transpose(-2, -1) / 2
    assert logits.abs().max() <= 2 + 1e-4  # sqrt(d_h) with gamma = 1
    with pytest.raises(AssertionError, match="d_model=10 must be divisible by nhead=4"):
        llama.Attention(10, 4)


def test_llama_block_structure():
    block = llama.LlamaBlock(16, 4, 40)
    assert sorted(k for k in block.state_dict() if "norm" in k) == [
        "attention_norm.weight",
        "ffn_norm.weight",
    ]
    assert all(not n.endswith("bias") for n, _ in block.named_parameters())
    stack = llama.LlamaStack(3, 16, 4, 40)
    assert isinstance(stack.norm, norms.RMSNorm)
    y = stack(torch.randn(2, 5, 16))
    torch.testing.assert_close(
        y.pow(2).mean(-1), torch.ones(2, 5), atol=1e-4, rtol=1e-4
    )  # the final norm
    # pre-norm: zero sublayer outputs leave the input unchanged
    with torch.no_grad():
        block.attention.wo.weight.zero_()
        block.feed_forward.w2.weight.zero_()
        x = torch.randn(2, 5, 16)
        torch.testing.assert_close(block(x), x)


def test_full_size_ops_counts_passes():
    x = torch.randn(3, 7, 16)
    g, b = torch.ones(16), torch.zeros(16)
    ln = full_size_ops(lambda t: norms.functional.layer_norm(t, [16], g, b), x)
    rms = full_size_ops(lambda t: norms.functional.rms_norm(t, [16], g, 1e-5), x)
    assert len(ln) == 6 and len(rms) == 4 and "sub" in ln and "sub" not in rms
    assert full_size_ops(lambda t: t.sum(), x) == ["sum"]


def test_reverse_batch():
    x, y = ttrain.reverse_batch(4, 6, 5, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 6) and torch.equal(y[:, 0], x[:, -1]) and int(x.max()) < 5


def test_tiny_encoder_kinds():
    for kind, final in [
        ("post", False),
        ("pre", True),
        ("pre-nofinal", False),
        ("deepnorm", False),
    ]:
        model = ttrain.TinyEncoder(kind, 2, vocab=5, length=6)
        assert isinstance(model.norm, norms.LayerNorm) == final
        assert model(torch.zeros(3, 6, dtype=torch.long)).shape == (3, 6, 5)
    with pytest.raises(ValueError, match="kind must be"):
        ttrain.TinyEncoder("sandwich", 2)


def test_deepnorm_layer():
    torch.manual_seed(0)
    layer = ttrain.DeepNormEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, alpha=2.0, beta=0.5
    )
    x = torch.randn(2, 3, 8)
    h = layer.norm1(2.0 * x + layer.self_attn(x, x, x, need_weights=False)[0])
    want = layer.norm2(2.0 * h + layer.linear2(torch.relu(layer.linear1(h))))
    torch.testing.assert_close(layer(x), want)
    with pytest.raises(ValueError, match="post-LN"):
        ttrain.DeepNormEncoderLayer(8, 2, norm_first=True)


def test_train_reverse_and_grad_norms(capsys):
    run = ttrain.train_reverse(
        "pre", 1, 1e-2, warmup=2, steps=4, batch=4, length=4, vocab=4, log_every=2
    )
    assert run.steps == [0, 2, 3] and all(math.isfinite(v) for v in run.losses) and not run.diverged
    assert capsys.readouterr().out.strip() == run.summary().strip() and run.summary().startswith(
        "pre-LN    1 layers"
    )
    again = ttrain.train_reverse(
        "pre", 1, 1e-2, warmup=2, steps=4, batch=4, length=4, vocab=4, log_every=2, verbose=False
    )
    assert again.losses == run.losses  # seeded
    x, y = ttrain.reverse_batch(8, 4, 4, torch.Generator().manual_seed(1))
    g = ttrain.layer_grad_norms(ttrain.TinyEncoder("post", 3, vocab=4, length=4), x, y)
    assert len(g) == 3 and all(v > 0 for v in g)


def test_plots_return_figures():
    fig = tplots.plot_blocks()
    assert isinstance(fig, BookFigure) and len(fig.axes) == 3
    fig = tplots.plot_grad_norms({("post", 2): [0.3, 0.2], ("pre", 2): [0.1, 0.1]})
    assert isinstance(fig, BookFigure) and fig.axes[0].get_yscale() == "log"
    runs = [
        ttrain.Run("post", 2, 1e-2, 0, [0, 1], [2.0, float("nan")]),
        ttrain.Run("pre", 2, 1e-2, 0, [0, 1], [2.0, 1.0]),
    ]
    fig = tplots.plot_loss_curves(runs, title="t")
    assert isinstance(fig, BookFigure) and len(fig.axes[0].get_legend().texts) == 2
    assert runs[0].diverged and not runs[1].diverged


def test_mean_loss_trained_and_seeds_summary():
    learned = ttrain.Run("pre", 2, 1e-2, 0, steps=[0, 1, 2], losses=[2.0, 0.3, 0.1], accuracy=0.95)
    stuck = ttrain.Run("pre", 2, 1e-2, 0, steps=[0, 1, 2], losses=[2.1, 2.0, 2.2], accuracy=0.12)
    assert learned.mean_loss(2) == pytest.approx(0.2)
    assert learned.trained and not stuck.trained
    with pytest.raises(ValueError, match="last must be between 1 and the 3 logged losses"):
        learned.mean_loss(4)
    line = ttrain.seeds_summary([learned, stuck], last=2)
    assert "learned in 1 of 2 seeds" in line and "95.0% to 95.0%" in line and "0.200" in line
    assert ttrain.seeds_summary([stuck]).endswith("learned in 0 of 1 seeds")


def test_train_seeds_runs_each_seed_quietly(capsys):
    runs = ttrain.train_seeds("pre", 1, 1e-2, seeds=(0, 1), steps=3, batch=4, log_every=1)
    assert [len(r.losses) for r in runs] == [3, 3] and capsys.readouterr().out == ""
    assert runs[0].losses != runs[1].losses
