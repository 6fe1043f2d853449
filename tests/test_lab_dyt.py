"""The runs of the chapter "Transformers without normalization" (norms.lab.dyt) and their figures
(norms.plots.dyt): every run of a comparison follows its protocol, the CNN variants are the
networks they say, and the figures draw the min–max spread over the seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import norms
from norms.lab import dyt
from norms.lab.training import CNN
from norms.plots import dyt as dplots


def _record_fit(monkeypatch):
    """Replace dyt.fit by a recorder of the budget each run asks for (no training)."""
    seen = []

    def fake_fit(model, batches, steps, lr, warmup=10):
        x, _ = batches(0)
        seen.append((steps, lr, len(x)))
        return [0.0] * steps

    monkeypatch.setattr(dyt, "fit", fake_fit)
    return seen


def test_every_reversal_run_of_the_chapter_follows_the_protocol(monkeypatch):
    # The chapter's first run (its LayerNorm of seed 0, reused as the LayerNorm reference of the
    # comparison and of the α₀ figure) is called with the defaults; the text states one budget
    # for every reversal run. Before, the default was 150 steps and the other runs had 120.
    seen = _record_fit(monkeypatch)
    stated = 120  # the steps the chapter's text states for every reversal run
    first, _ = dyt.run_reverse("layer", seed=0, return_model=True)  # as the chapter calls it
    others = [dyt.run_reverse(k, seed=1, steps=stated) for k in dyt.KINDS]
    assert [steps for steps, _, _ in seen] == [stated] * 4
    # the protocol is that budget, the defaults follow it, and check_protocol accepts the runs
    protocol = dyt.REVERSAL
    assert protocol.steps == stated
    runs = [first, *others, *(dyt.run_reverse(k, seed=2) for k in dyt.KINDS)]
    assert seen[4:] == [(protocol.steps, protocol.lr, protocol.batch)] * 3
    dyt.check_protocol(runs, protocol)  # raises on a run with another budget
    assert [r.steps for r in runs] == [protocol.steps] * len(runs)


def test_check_protocol_names_a_run_with_another_step_count(monkeypatch):
    _record_fit(monkeypatch)
    good = [dyt.run_reverse("rms", seed=s) for s in range(2)]
    long = dyt.run_reverse("layer", seed=0, steps=dyt.REVERSAL.steps + 30)
    dyt.check_protocol({"rms": good}, dyt.REVERSAL)
    with pytest.raises(ValueError, match=r"LayerNorm seed 0: 150 steps"):
        dyt.check_protocol({"rms": good, "layer": [long]}, dyt.REVERSAL)
    # a run that ran the protocol's steps at another learning rate is another protocol too
    fast = dyt.run_reverse("dyt", seed=1, lr=1e-2)
    with pytest.raises(ValueError, match="DyT seed 1"):
        dyt.check_protocol(good + [fast], dyt.REVERSAL)
    # a Result whose losses were cut short does not pass for a full run
    short = dyt.Result("DyT", 2, [0.0] * 10, protocol=dyt.REVERSAL)
    with pytest.raises(ValueError, match="DyT seed 2: 10 steps"):
        dyt.check_protocol(good + [short], dyt.REVERSAL)
    with pytest.raises(ValueError, match="no runs"):
        dyt.check_protocol([], dyt.REVERSAL)


def test_vit_runs_follow_their_protocol(monkeypatch):
    seen = _record_fit(monkeypatch)
    d = dyt.digits64()
    data = type(d)(d.x_train[:64], d.y_train[:64], d.x_test[:16], d.y_test[:16])
    runs = [dyt.run_vit(k, data, seed=0) for k in dyt.KINDS]
    assert seen == [(dyt.VIT.steps, dyt.VIT.lr, dyt.VIT.batch)] * 3
    dyt.check_protocol(runs, dyt.VIT)


def test_dyt_runs_record_their_alphas(monkeypatch):
    _record_fit(monkeypatch)  # no training: α stays at α₀
    assert dyt.run_reverse("dyt", seed=0, alpha_init_value=0.3).alphas == (0.3,) * 5
    assert dyt.run_reverse("layer", seed=0).alphas == ()


def _conv_weights(model):
    return [b.layer.weight for b in model.blocks]


def test_cnn_model_variants():
    batch, dyn = dyt.cnn_model("batch", seed=3), dyt.cnn_model("dyt", seed=3, alpha_init_value=2)
    plain, bias_free = dyt.cnn_model("none", seed=3), dyt.cnn_model("none", 3, conv_bias=False)
    assert [type(b.norm).__name__ for b in dyn.blocks] == ["DynamicTanh"] * 3
    assert all(float(b.norm.alpha.detach()) == 2.0 and not b.norm.channels_last for b in dyn.blocks)
    assert [type(b.norm).__name__ for b in batch.blocks] == ["BatchNorm2d"] * 3
    assert all(isinstance(b.norm, torch.nn.Identity) for m in (plain, bias_free) for b in m.blocks)
    assert all(b.layer.bias is not None for b in plain.blocks)
    assert all(b.layer.bias is None for m in (batch, dyn, bias_free) for b in m.blocks)
    # without biases the three start from the same convolutions; drawing biases moves the
    # generator, so the default "none" network starts from other weights after its first layer
    for m in (dyn, bias_free):
        for w, want in zip(_conv_weights(m), _conv_weights(batch), strict=True):
            torch.testing.assert_close(w, want, rtol=0, atol=0)
    assert not torch.equal(_conv_weights(plain)[1], _conv_weights(batch)[1])
    # the default CNN of the training chapter is what "none" and "batch" were before
    for kind in ("none", "batch"):
        want = CNN(kind, channels=8, seed=3).double().state_dict()
        got = dyt.cnn_model(kind, seed=3).state_dict()
        assert list(got) == list(want)
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=0)
    with pytest.raises(ValueError, match="kind must be batch, none or dyt, got 'group'"):
        dyt.cnn_model("group")


def test_pooled_scale_is_the_rms_of_the_pooled_features():
    torch.manual_seed(0)
    images = torch.randn(64, 1, 8, 8, dtype=torch.float64)
    for kind in ("batch", "dyt", "none"):
        model = dyt.cnn_model(kind, seed=1).eval()
        x = images
        model.train()
        with torch.no_grad():
            for block in model.blocks:
                x = block(x)
        want = math.sqrt(float(x.mean(dim=(2, 3)).pow(2).mean()))
        model.eval()
        assert dyt.pooled_scale(model, images) == pytest.approx(want, rel=1e-12)
        assert not model.training  # restored


def test_dyt_at_alpha_half_halves_the_pooled_scale_per_block():
    # DyT starts as tanh(x/2) ≈ x/2: after three blocks the features are about 1/8 of those of
    # the same bias-free network without a norm (a little less: tanh bends below its tangent).
    images = dyt.digits64().x_train[:256]
    ratio = dyt.pooled_scale(dyt.cnn_model("dyt", seed=0), images) / dyt.pooled_scale(
        dyt.cnn_model("none", seed=0, conv_bias=False), images
    )
    assert 0.08 < ratio < 0.125


def _bars(ax):
    """The (x, y) data of the two-point vertical lines a plot_seeds column draws."""
    return [
        line.get_ydata()
        for line in ax.lines
        if len(line.get_xdata()) == 2 and line.get_xdata()[0] == line.get_xdata()[1]
    ]


def test_plot_seeds_draws_the_min_max_range_not_a_standard_deviation():
    groups = {"a": [0.1, 0.5, 0.9, 0.4, 0.3], "b": [0.2, 0.25, 0.3, 0.22, 0.28]}
    fig = dplots.plot_seeds(groups)
    bars = _bars(fig.axes[0])
    assert [tuple(np.round(b, 12)) for b in bars] == [(0.1, 0.9), (0.2, 0.3)]
    fig = dplots.plot_seeds(groups, paired=True)
    grey = [line for line in fig.axes[0].lines if line.get_color() == "0.75"]
    assert len(grey) == 5  # one line per seed between the two columns


def test_plot_sensitivity_error_bars_are_min_max():
    per_x = [[0.1, 0.5, 0.9], [0.4, 0.5, 0.6]]
    fig = dplots.plot_sensitivity([0.1, 1.0], {"DyT": per_x})
    ax = fig.axes[0]
    segments = ax.collections[0].get_segments()  # the vertical error bars, one per x
    lows_highs = sorted((round(s[0][1], 12), round(s[1][1], 12)) for s in segments)
    assert lows_highs == [(0.1, 0.9), (0.4, 0.6)]


def test_dynamic_tanh_of_the_cnn_is_channels_first():
    model = dyt.cnn_model("dyt", seed=0)
    x = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    assert model(x).shape == (2, 10)
    assert isinstance(model.blocks[0].norm, norms.DynamicTanh)


def test_fit_gives_the_numbers_of_adam_looping_over_the_parameters():
    """fit's Adam runs foreach (faster): the same losses and weights, bit for bit, as Adam's loop
    over the parameters with fit's warm-up, on a reversal model in float64."""

    def model():
        torch.manual_seed(0)
        return norms.lab.transformer.TinyEncoder("pre", 2, vocab=8, length=8, d_model=16, nhead=2)

    def batches(gen):
        return lambda step: norms.lab.transformer.reverse_batch(16, 8, 8, gen)

    fast = model()
    losses = dyt.fit(fast, batches(torch.Generator().manual_seed(1)), steps=30, lr=1e-2)
    slow = model()
    opt = torch.optim.Adam(slow.parameters(), lr=1e-2, betas=(0.9, 0.98), foreach=False)
    gen, expected = torch.Generator().manual_seed(1), []
    for step in range(30):
        opt.param_groups[0]["lr"] = 1e-2 * min(1.0, (step + 1) / 10)
        x, y = batches(gen)(step)
        loss = torch.nn.functional.cross_entropy(slow(x).reshape(-1, 8), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        expected.append(float(loss.detach()))
    assert losses == expected
    for (name, a), b in zip(fast.state_dict().items(), slow.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_the_bias_corrections_square_roots_agree_for_the_steps_fit_documents():
    # foreach Adam takes x**0.5, the loop math.sqrt: equal up to step 1798 for beta2 = 0.98
    corrections = [1 - 0.98**step for step in range(1, 1799)]
    assert all(math.sqrt(c) == c**0.5 for c in corrections)
