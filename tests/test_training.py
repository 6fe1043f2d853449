"""norms.lab.training: the data, the model factory and the training loop the training chapters use.

Each test can fail: the factory must put the requested norm where it promises, the loop
must give the same numbers for the same seed and different ones for another seed, and
its records must have the shapes the figures read."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import norms
from norms.lab import training
from norms.lab.training import (
    CNN,
    Block,
    DigitsMLP,
    ResidualMLP,
    load_digits_data,
    make_norm,
    train,
)


@pytest.fixture(scope="module")
def data():
    return load_digits_data()


@pytest.fixture(scope="module")
def small(data):
    """A small slice of the digits, so that the loop tests are quick."""
    return training.Data(data.x_train[:256], data.y_train[:256], data.x_test[:64], data.y_test[:64])


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one thread is faster, and a busy machine does not slow the loop down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_digits_split_is_disjoint_standardized_and_seeded(data):
    assert data.x_train.shape[1:] == (1, 8, 8) and data.x_test.shape[1:] == (1, 8, 8)
    assert len(data.x_train) + len(data.x_test) == 1797
    assert len(data.x_test) == round(0.2 * 1797)
    assert data.num_classes == 10
    assert abs(float(data.x_train.mean())) < 1e-5 and abs(float(data.x_train.std()) - 1) < 1e-5
    again = load_digits_data()
    torch.testing.assert_close(again.x_test, data.x_test, rtol=0, atol=0)
    other = load_digits_data(seed=1)
    assert not torch.equal(other.y_test, data.y_test)
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits_data(test_fraction=1.0)


@pytest.mark.parametrize(
    "kind, shape, cls",
    [
        ("none", (16,), nn.Identity),
        ("batch", (16,), norms.BatchNorm1d),
        ("batch", (16, 4, 4), norms.BatchNorm2d),
        ("layer", (16,), norms.LayerNorm),
        ("layer", (16, 4, 4), norms.LayerNorm),
        ("group", (16, 4, 4), norms.GroupNorm),
        ("rms", (16,), norms.RMSNorm),
    ],
)
def test_make_norm_gives_the_layer_and_statistics_asked_for(kind, shape, cls):
    layer = make_norm(kind, shape, groups=4)
    assert type(layer) is cls
    if kind == "layer":
        assert tuple(layer.normalized_shape) == shape
    if kind == "group":
        assert layer.num_groups == 4 and layer.num_channels == 16
    x = torch.randn(8, *shape) * 3 + 2
    y = layer(x)
    assert y.shape == x.shape
    if kind == "batch":  # per channel over the batch (and pixels): mean 0
        dims = (0,) if len(shape) == 1 else (0, 2, 3)
        assert y.mean(dims).abs().max() < 1e-5
    if kind == "layer":  # per sample over everything
        assert y.flatten(1).mean(1).abs().max() < 1e-5


def test_make_norm_rejects_unknown_names_and_shapes():
    with pytest.raises(ValueError, match="unknown norm 'weight'"):
        make_norm("weight", (8,))
    with pytest.raises(ValueError, match=r"\(C,\) or \(C, H, W\)"):
        make_norm("batch", (8, 4))


@pytest.mark.parametrize("kind", training.NORM_KINDS)
def test_mlp_puts_the_norm_between_every_linear_layer_and_relu(kind):
    model = DigitsMLP(kind, width=32, depth=3, groups=8)
    want = type(make_norm(kind, (32,), 8))
    assert [type(n) for n in model.norm_layers()] == [want] * 3
    for block in model.blocks:
        assert isinstance(block.layer, nn.Linear) and isinstance(block.act, nn.ReLU)
        assert (block.layer.bias is None) == (kind != "none")  # a bias only without a norm
    # the norm really is in the forward path: replacing it changes the output
    x = torch.randn(16, 1, 8, 8, dtype=torch.float64) * 5
    out = model(x)
    assert out.shape == (16, 10)
    # the last block's norm: a later RMSNorm would undo a scale change of the ReLU's input
    if kind != "none":
        model.blocks[-1].norm = nn.Identity()
        assert not torch.allclose(model(x), out)


@pytest.mark.parametrize("kind", training.NORM_KINDS)
def test_cnn_norms_see_the_promised_feature_maps(kind):
    model = CNN(kind, channels=8, groups=4)
    seen = []
    hooks = [
        n.register_forward_hook(lambda m, i, o: seen.append(tuple(i[0].shape)))
        for n in model.norm_layers()
    ]
    assert model(torch.randn(5, 1, 8, 8, dtype=torch.float64)).shape == (5, 10)
    for h in hooks:
        h.remove()
    assert seen == [(5, 8, 8, 8), (5, 16, 4, 4), (5, 16, 2, 2)]
    if kind == "batch":
        assert all(isinstance(n, norms.BatchNorm2d) for n in model.norm_layers())
    if kind == "layer":
        assert [tuple(n.normalized_shape) for n in model.norm_layers()] == [
            (8, 8, 8),
            (16, 4, 4),
            (16, 2, 2),
        ]
    with pytest.raises(ValueError, match=r"\(N, 1, 8, 8\), got \(5, 64\)"):
        model(torch.randn(5, 64, dtype=torch.float64))


@pytest.mark.parametrize("make", [DigitsMLP, CNN, ResidualMLP])
def test_models_are_float64_by_default_and_restore_the_default_dtype(make):
    # float64: a training run gives the same numbers whatever the SIMD width and thread count
    assert {p.dtype for p in make("batch").parameters()} == {torch.float64}
    assert {p.dtype for p in make("batch", dtype=torch.float32).parameters()} == {torch.float32}
    assert torch.get_default_dtype() == torch.float32
    assert load_digits_data().x_train.dtype == torch.float64


def test_models_are_initialized_from_their_seed_without_touching_the_global_generator():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a, b, c = DigitsMLP("batch", seed=0), DigitsMLP("batch", seed=0), DigitsMLP("batch", seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.blocks[0].layer.weight, b.blocks[0].layer.weight)
    assert not torch.equal(a.blocks[0].layer.weight, c.blocks[0].layer.weight)


def test_norm_after_activation_moves_the_norm_behind_relu():
    model = DigitsMLP("batch", width=16, depth=1, norm_after_activation=True)
    block = model.blocks[0]
    x = torch.randn(32, 64, dtype=torch.float64)
    h = torch.relu(block.layer(x))
    torch.testing.assert_close(block(x), block.norm(h))


def test_residual_mlp_zero_init_starts_every_block_as_identity():
    model = ResidualMLP("batch", width=16, depth=3, zero_init=True)
    x = torch.relu(torch.randn(8, 16, dtype=torch.float64))
    for block in model.blocks:
        assert torch.equal(block.norm2.weight, torch.zeros(16))
        torch.testing.assert_close(block(x), x)  # relu(x + 0) with x >= 0
    plain = ResidualMLP("batch", width=16, depth=3)
    assert not torch.allclose(plain.blocks[0](x), x)
    with pytest.raises(ValueError, match="learnable"):
        ResidualMLP("none", zero_init=True)


def test_training_is_deterministic_under_a_seed_and_depends_on_it(small):
    def run(seed, model_seed=0):
        return train(
            DigitsMLP("batch", width=32, depth=2, dropout=0.1, seed=model_seed),
            small,
            lr=0.05,
            epochs=2,
            batch_size=32,
            seed=seed,
        )

    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a.loss, b.loss) and torch.equal(a.test_acc, b.test_acc)
    assert torch.equal(a.act_sample, b.act_sample)
    assert not torch.equal(a.loss, c.loss)
    assert not torch.equal(run(0, model_seed=1).loss, a.loss)


def test_training_leaves_the_global_generator_alone(small):
    torch.manual_seed(5)
    state = torch.get_rng_state()
    train(DigitsMLP("none", width=16, depth=1, dropout=0.2), small, lr=0.05, epochs=1)
    assert torch.equal(torch.get_rng_state(), state)


def test_records_have_the_shapes_the_figures_read(small):
    log = train(
        CNN("group", channels=8),
        small,
        lr=0.05,
        epochs=3,
        batch_size=16,
        record_every=5,
        sample_size=64,
    )
    steps = 3 * (256 // 16)
    assert log.loss.shape == (steps,)
    assert log.test_acc.shape == log.train_acc.shape == log.test_acc_batch_stats.shape == (3,)
    R = len(range(0, steps, 5))
    assert log.record_steps.tolist() == list(range(0, steps, 5))
    for t in (log.act_mean, log.act_std, log.grad_std, log.update_ratio):
        assert t.shape == (R, 3)
        assert torch.isfinite(t).all()
    assert log.act_sample.shape == log.grad_sample.shape == (R, 3, 64)
    assert (log.update_ratio > 0).all() and (log.grad_std > 0).all()
    assert log.diverged_at is None
    assert "GroupNorm" in training.summary(log)


def test_final_test_accuracies_only_change_nothing_else(small):
    """accuracies="final test" skips the other evaluations: the same losses, records and final
    test accuracies as measuring every epoch, the test accuracies of the last epoch only, no
    training accuracy."""

    def run(accuracies):
        model = DigitsMLP("batch", width=32, depth=2, dropout=0.1, seed=3)
        kw = dict(lr=0.05, epochs=3, batch_size=32, seed=4, record_every=7, sample_size=16)
        return model, train(model, small, accuracies=accuracies, **kw)

    (m_all, every), (m_final, final) = run("every epoch"), run("final test")
    assert every.test_acc.shape == (3,) and final.test_acc.shape == (1,)
    assert final.test_acc_batch_stats.shape == (1,) and final.train_acc.shape == (0,)
    assert torch.equal(final.loss, every.loss) and final.final_test_acc == every.final_test_acc
    assert torch.equal(final.test_acc_batch_stats[-1], every.test_acc_batch_stats[-1])
    assert torch.equal(final.act_sample, every.act_sample)
    for (name, a), b in zip(m_all.state_dict().items(), m_final.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert "train acc" not in training.summary(final) and "test acc" in training.summary(final)
    with pytest.raises(ValueError, match="accuracies must be one of"):
        train(DigitsMLP("none", width=8, depth=1), small, lr=0.05, epochs=1, accuracies="last")


def test_the_default_sgd_gives_the_numbers_of_sgd_looping_over_the_parameters(small):
    """train's own SGD runs foreach (faster): the same losses and weights, bit for bit, as
    torch's loop over the parameters, with momentum and weight decay."""

    def run(optimizer=None):
        model = DigitsMLP("batch", width=32, depth=2, dropout=0.1, seed=5)
        kw = dict(lr=0.1, epochs=2, batch_size=32, seed=6, momentum=0.9, weight_decay=1e-3)
        return model, train(model, small, optimizer=optimizer, **kw)

    loop = lambda m: torch.optim.SGD(  # noqa: E731
        m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3, foreach=False
    )
    (m_default, default), (m_loop, looped) = run(), run(loop)
    assert torch.equal(default.loss, looped.loss) and torch.equal(default.test_acc, looped.test_acc)
    for (name, a), b in zip(
        m_default.state_dict().items(), m_loop.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_records_describe_the_pre_activation(small):
    """act_mean/std are those of the block's norm output: with fresh BatchNorm (γ = 1, β = 0) the
    first record has per-layer std 1 and mean 0."""
    log = train(DigitsMLP("batch", width=32, depth=3), small, lr=0.05, epochs=1, batch_size=64)
    assert log.act_mean[0].abs().max() < 1e-5
    torch.testing.assert_close(log.act_std[0], torch.ones(3), rtol=0, atol=0.01)
    plain = train(DigitsMLP("none", width=32, depth=3), small, lr=0.05, epochs=1, batch_size=64)
    assert (plain.act_std[0] - 1).abs().max() > 0.2


def test_training_learns_the_digits(data):
    log = train(
        DigitsMLP("batch", width=32, depth=2),
        data,
        lr=0.1,
        epochs=2,
        batch_size=64,
        eval_batch_stats=False,
    )
    assert log.final_test_acc > 0.85
    assert log.loss[-20:].mean() < log.loss[:20].mean() / 3


def test_divergence_is_detected_and_stops_training(small):
    # float64 overflows only at a learning rate far beyond any sensible one
    log = train(DigitsMLP("none", width=32, depth=3), small, lr=1e20, epochs=2, batch_size=32)
    assert log.diverged_at is not None and len(log.loss) == log.diverged_at
    assert log.final_test_acc == 0.1 and math.isnan(log.final_loss())
    assert "diverged at step" in training.summary(log)


def test_evaluate_with_batch_stats_leaves_running_statistics_alone(small):
    model = DigitsMLP("batch", width=16, depth=2)
    train(model, small, lr=0.05, epochs=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    _, acc_running = training.evaluate(model, small.x_test, small.y_test)
    _, acc_batch = training.evaluate(
        model, small.x_test, small.y_test, batch_size=2, batch_stats=True
    )
    assert model.training  # the mode is restored
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert 0 <= acc_running <= 1 and 0 <= acc_batch <= 1


def test_train_rejects_a_batch_larger_than_the_data(small):
    with pytest.raises(ValueError, match="batch_size 1000 is larger than the training set"):
        train(DigitsMLP("none"), small, lr=0.1, batch_size=1000)


def test_block_capture_keeps_the_activation_input_and_its_gradient():
    block = Block(nn.Linear(4, 3), norms.LayerNorm(3))
    block.capture = True
    out = block(torch.randn(5, 4))
    out.sum().backward()
    assert block.z.shape == (5, 3) and block.z.grad is not None
    torch.testing.assert_close(block.z.grad, (block.z > 0).float())


def test_plots_draw_one_line_per_run_and_per_layer(small):
    import matplotlib

    matplotlib.use("Agg")
    from norms.plots import training as tp
    from norms.plots.style import BookFigure

    logs = {
        "MLP no norm": train(
            DigitsMLP("none", width=16, depth=2), small, lr=0.05, epochs=2, batch_size=32
        ),
        "MLP BatchNorm": train(
            DigitsMLP("batch", width=16, depth=2), small, lr=0.05, epochs=2, batch_size=32
        ),
    }
    fig = tp.plot_curves(logs)
    assert isinstance(fig, BookFigure) and len(fig.axes) == 2
    assert [line.get_color() for line in fig.axes[1].lines] == [
        tp.NORM_COLORS["no norm"],
        tp.NORM_COLORS["BatchNorm"],
    ]
    fig = tp.plot_curves(logs, colors={"MLP no norm": "#123456"})
    assert fig.axes[0].lines[0].get_color() == "#123456"
    fig = tp.plot_layer_histograms(logs, which="grad", record=-1)
    assert len(fig.axes) == 2 and all(len(ax.lines) == 2 for ax in fig.axes)  # two layers per run
    fig = tp.plot_layer_stats(logs, "update_ratio")
    assert all(len(ax.lines) == 2 for ax in fig.axes)
    assert len(fig.axes[0].lines[0].get_xdata()) == len(logs["MLP no norm"].record_steps)
    fig.canvas.draw()  # a log axis labels its minor ticks no larger than its major ones
    sizes = {
        "major": {t.get_fontsize() for t in fig.axes[0].yaxis.get_majorticklabels()},
        "minor": {t.get_fontsize() for t in fig.axes[0].yaxis.get_minorticklabels()},
    }
    assert max(sizes["minor"], default=0) <= min(sizes["major"])
    with pytest.raises(ValueError, match="unknown statistic 'loss'"):
        tp.plot_layer_stats(logs, "loss")
    fig = tp.plot_lr_sweep([0.01, 0.1], {"BatchNorm": [0.5, 0.9]}, threshold=0.8)
    assert fig.axes[0].lines[0].get_ydata().tolist() == [50.0, 90.0]
    legend = fig.axes[0].get_legend().get_texts()[0].get_fontsize()
    assert legend >= fig.axes[0].xaxis.label.get_fontsize() - 1  # readable when shrunk
    fig = tp.plot_batch_size_sweep(
        [32, 2], {"GroupNorm": [0.05, 0.06]}, dashed={"BatchNorm": [0.04, 0.3]}
    )
    assert fig.axes[0].xaxis_inverted() and fig.axes[0].lines[1].get_linestyle() == "--"
    fig = tp.plot_batch_size_sweep(
        [32, 2], {"GroupNorm": [0.05, 0.06]}, ranges={"GroupNorm": [(0.04, 0.07), (0.05, 0.08)]}
    )
    bars = fig.axes[0].lines[:2]  # one vertical bar per batch size, in percent
    heights = [y for bar in bars for y in bar.get_ydata().tolist()]
    assert heights == pytest.approx([4.0, 7.0, 5.0, 8.0])
    assert all(len(set(bar.get_xdata().tolist())) == 1 for bar in bars)
    with pytest.raises(ValueError):  # one range per batch size
        tp.plot_batch_size_sweep([32, 2], {"GN": [0.05, 0.06]}, ranges={"GN": [(0, 1)]})
    digits = tp.plot_digits(small)
    png, shown = digits._repr_png_()  # the PNG at twice its shown width, and that width
    assert png[:4] == b"\x89PNG" and shown["width"] > 0 and len(digits.axes[0].get_xticks()) == 10


def test_recalibrate_batchnorm_sets_the_population_statistics_and_nothing_else(small):
    model = DigitsMLP("batch", width=16, depth=2, dropout=0.5)
    train(model, small, lr=0.05, epochs=1, batch_size=8)
    params = {k: v.clone() for k, v in model.named_parameters()}
    model.eval()
    training.recalibrate_batchnorm(model, small.x_train)
    assert not model.training and all(b.norm.momentum == 0.1 for b in model.blocks)
    # the first BatchNorm's input over the whole set, by hand (dropout off)
    h = model.blocks[0].layer(small.x_train.flatten(1))
    bn = model.blocks[0].norm
    torch.testing.assert_close(bn.running_mean, h.mean(0).detach())
    torch.testing.assert_close(bn.running_var, h.var(0, unbiased=True).detach())
    assert int(bn.num_batches_tracked) == 1
    for k, v in model.named_parameters():
        assert torch.equal(v, params[k]), k
    # in batches: the plain average of the batch means
    training.recalibrate_batchnorm(model, small.x_train[:64], batch_size=16)
    means = torch.stack(
        [
            model.blocks[0].layer(small.x_train[i : i + 16].flatten(1)).mean(0)
            for i in range(0, 64, 16)
        ]
    )
    torch.testing.assert_close(bn.running_mean, means.mean(0).detach())
    with pytest.raises(ValueError, match="no BatchNorm"):
        training.recalibrate_batchnorm(DigitsMLP("layer"), small.x_train)


def test_a_frozen_backbone_records_nan_gradients_and_zero_updates(small):
    model = DigitsMLP("batch", width=16, depth=2)
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("head"))
    opt = lambda m: torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.05)  # noqa: E731
    log = train(model, small, lr=0.05, epochs=1, optimizer=opt)
    assert torch.isnan(log.grad_std).all() and (log.update_ratio == 0).all()
    assert torch.isfinite(log.act_std).all()
