"""norms.lab.weights and norms.plots.weights: the measurements and figures of the chapter on
normalizing the weights (issue 35: the He-init control drew every convolution from a new
generator seeded with 0, so all 24 started from the same weights)."""

from __future__ import annotations

import ast
import itertools
import json

import pytest
import torch
from torch import nn

import norms
from norms.lab import small_batches as sb
from norms.lab import weights as lab
from norms.lab.training import default_dtype, load_digits_data
from norms.plots import weights as plots
from norms.plots.style import BookFigure

from .notebooks import BOOK


def stored_glue(notebook: str) -> dict:
    """The glued values stored in a chapter's outputs, by key."""
    nb = json.loads((BOOK / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    return {
        out["metadata"]["scrapbook"]["name"]: ast.literal_eval(
            "".join(out["data"]["application/papermill.record/text/plain"])
        )
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
    }


def convs(model):
    return [conv for block in model.blocks for conv in (block.conv1, block.conv2)]


def test_he_init_gives_every_convolution_its_own_weights():
    """Fails on the old control (one ``Generator().manual_seed(0)`` per convolution): all 24
    convolutions started identical."""
    model = lab.he_init_(sb.residual_cnn("skipinit", seed=0, depth=12), seed=0)
    weights = [conv.weight.detach() for conv in convs(model)]
    for a, b in itertools.combinations(weights, 2):
        assert not torch.equal(a, b)
    assert all(float(block.alpha.detach()) == 1.0 for block in model.blocks)
    # He's scale: std sqrt(2 / fan_in), fan_in = 8 channels · 3 · 3 (24 · 576 draws)
    pooled = torch.cat([w.flatten() for w in weights])
    assert float(pooled.std()) == pytest.approx((2 / 72) ** 0.5, rel=0.03)
    # one seed, one network; another seed, another network
    again = lab.he_init_(sb.residual_cnn("skipinit", seed=0, depth=12), seed=0)
    other = lab.he_init_(sb.residual_cnn("skipinit", seed=0, depth=12), seed=1)
    torch.testing.assert_close(convs(again)[5].weight, convs(model)[5].weight, rtol=0, atol=0)
    assert not torch.equal(convs(other)[5].weight, convs(model)[5].weight)


def test_stream_std_follows_the_blocks():
    x = torch.randn(16, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    skip = sb.residual_cnn("skipinit", seed=0, depth=3)  # α = 0: every block is the identity
    stds = lab.stream_std(skip, x)
    assert len(stds) == 4 and stds == [stds[0]] * 4
    he = lab.he_init_(sb.residual_cnn("skipinit", seed=0, depth=3), seed=0)
    with torch.no_grad():
        h = he.blocks[0](he.stem(x))
    assert lab.stream_std(he, x)[1] == pytest.approx(float(h.std()))


def test_the_chapter_shows_the_growth_of_one_he_network():
    """The stored growth factor is that of he_init_'s network (131,979 with the old control)."""
    stored = stored_glue("normalizing-weights")
    data = sb.subset(load_digits_data(dtype=torch.float64), 1024)
    with default_dtype(torch.float64):  # the chapter's default dtype, in which it draws the weights
        model = lab.he_init_(sb.residual_cnn("skipinit", seed=0, depth=12), seed=0)
    stds = lab.stream_std(model, data.x_train[:256])
    assert stored["nw-growth-he"] == pytest.approx(stds[-1] / stds[0], rel=5e-3)
    assert stored["nw-growth-he-lo"] <= stored["nw-growth-he"] <= stored["nw-growth-he-hi"] < 1e3


def test_conv_operator_norm_is_the_largest_singular_value_of_the_map():
    gen = torch.Generator().manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1, dtype=torch.float64)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen, dtype=torch.float64))
    x = torch.zeros(1, 2, 5, 5, dtype=torch.float64)
    jacobian = torch.autograd.functional.jacobian(
        lambda t: nn.functional.conv2d(t, conv.weight, None, padding=1), x
    ).reshape(3 * 25, 2 * 25)
    op, kernel = lab.conv_operator_norm(conv, (5, 5))
    assert op == pytest.approx(float(torch.linalg.matrix_norm(jacobian, ord=2)), rel=1e-12)
    assert kernel == pytest.approx(
        float(torch.linalg.matrix_norm(conv.weight.detach().reshape(3, -1), ord=2)), rel=1e-12
    )
    assert op > kernel  # overlapping windows: the map stretches more than the kernel matrix
    # a 1 × 1 convolution is the kernel matrix applied at every pixel: the same σ
    one = nn.Conv2d(2, 3, 1, dtype=torch.float64)
    op1, kernel1 = lab.conv_operator_norm(one, (4, 4))
    assert op1 == pytest.approx(kernel1, rel=1e-10)


def test_counted_agc_sgd_steps_as_agc_sgd_and_counts_the_clipped_units():
    data = torch.randn(8, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    target = torch.arange(8) % 10

    def run(make):
        model = sb.residual_cnn("nf", seed=0, depth=2)
        opt = make(model)
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(data), target).backward()
            opt.step()
        return model

    count = lab.ClipCount()
    mine = run(lab.counted_agc_sgd(0.1, count, clip_factor=0.01))
    theirs = run(sb.agc_sgd(0.1, clip_factor=0.01))
    for a, b in zip(mine.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    model = sb.residual_cnn("nf", seed=0, depth=2)
    clipped = [p for name, p in model.named_parameters() if not name.startswith("head.")]
    units = sum(norms.modules.weight_norms.unitwise_norm(p).numel() for p in clipped)
    assert count.units == 3 * units and 0 < count.clipped < count.units
    assert count.fraction == count.clipped / count.units
    tight, loose = lab.ClipCount(), lab.ClipCount()
    run(lab.counted_agc_sgd(0.1, tight, clip_factor=1e-8))
    run(lab.counted_agc_sgd(0.1, loose, clip_factor=1e8))
    assert (tight.fraction, loose.fraction, lab.ClipCount().fraction) == (1.0, 0.0, 0.0)


def test_plots_take_an_axes_and_return_its_figure():
    stds = {"a": [1.0, 2.0, 4.0], "b": [1.0, 1.0, 1.0]}
    fig = plots.plot_stream_std(stds)
    assert isinstance(fig, BookFigure) and len(fig.axes[0].lines) == 2
    assert plots.plot_stream_std(stds, ax=fig.axes[0]) is fig
    fig = plots.plot_power_iteration([0.5, 0.9, 0.99], sigma=1.0)
    assert isinstance(fig, BookFigure) and len(fig.axes) == 2
    # the error panel draws σ − estimate, positive when the estimate is below σ
    assert list(fig.axes[1].lines[0].get_ydata()) == pytest.approx([0.5, 0.1, 0.01])
    fig = plots.plot_weight_norm_gradient([1.0, 0.5], [1.0, 2.0], [-0.8, 1.6], lr=0.5)
    assert isinstance(fig, BookFigure)
    assert "1.118 → 1.432" in fig.axes[0].get_title()
