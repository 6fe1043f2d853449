"""Hostile input and faults around the layers: a bad eps, FrozenBatchNorm's device and dtype,
the lab's BatchNorm helpers on torch.nn layers and on errors, fused GroupNorm on an empty batch.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import norms
import norms.fast.fused
from norms.lab.pitfalls import freeze_batchnorm
from norms.lab.training import evaluate, recalibrate_batchnorm
from norms.modules.frozen_batchnorm import FrozenBatchNorm


@pytest.mark.parametrize(
    "layer, x",
    [
        (lambda: norms.LayerNorm(5, eps="abc"), torch.randn(2, 5)),
        (lambda: norms.GroupNorm(2, 4, eps="abc"), torch.randn(2, 4, 3)),
    ],
)
def test_a_bad_eps_is_named_and_a_type_error_as_in_torch(layer, x):
    with pytest.raises(TypeError, match=r"argument 'eps' must be a float.*not str 'abc'"):
        layer()(x)


@pytest.mark.parametrize("source", [nn.BatchNorm2d, norms.BatchNorm2d])
def test_frozen_batchnorm_keeps_the_device_and_dtype_of_the_statistics(source):
    bn = source(3, dtype=torch.float64)
    bn.running_mean.fill_(1 / 3)
    frozen = FrozenBatchNorm.from_batchnorm(bn)
    assert all(b.dtype == torch.float64 for b in frozen.buffers())
    assert torch.equal(frozen.running_mean, bn.running_mean)
    meta = FrozenBatchNorm.from_batchnorm(source(3, device="meta"))
    assert all(b.device.type == "meta" for b in meta.buffers())


@pytest.mark.parametrize("source", [nn.BatchNorm2d, norms.BatchNorm2d, nn.BatchNorm1d])
def test_frozen_batchnorm_loads_a_batchnorm_state_dict(source):
    """Issue 38, item 10: num_batches_tracked was an unexpected key (torchvision's
    FrozenBatchNorm2d drops it); the frozen layer then computes the BatchNorm's eval mode."""
    torch.manual_seed(0)
    bn = source(3)
    bn(torch.randn(8, 3, 4, 4) if source is not nn.BatchNorm1d else torch.randn(8, 3))
    with torch.no_grad():
        bn.weight.uniform_(0.5, 2.0)
        bn.bias.uniform_(-1.0, 1.0)
    frozen = FrozenBatchNorm(3)
    frozen.load_state_dict(bn.state_dict(), strict=True)
    assert "num_batches_tracked" not in frozen.state_dict()
    x = torch.randn(2, 3, 5, 5)
    torch.testing.assert_close(frozen(x), nn.functional.batch_norm(
        x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False
    ))  # fmt: skip
    with pytest.raises(RuntimeError, match="Missing key"):
        FrozenBatchNorm(3).load_state_dict({"weight": torch.ones(3)}, strict=True)


def _model(bn):
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 3), bn(3), nn.Dropout(0.5), nn.Linear(3, 2))


def test_freeze_batchnorm_freezes_torch_nn_batchnorms():
    model = freeze_batchnorm(_model(nn.BatchNorm1d))
    assert isinstance(model[2], FrozenBatchNorm)


def test_recalibrate_and_evaluate_work_on_torch_nn_batchnorms():
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    model = _model(nn.BatchNorm1d).eval()
    recalibrate_batchnorm(model, x)
    features = model[1](model[0](x))
    torch.testing.assert_close(model[2].running_mean, features.mean(0))
    train_model = _model(nn.BatchNorm1d).eval()
    before = train_model[2].running_mean.clone()
    eval_loss = evaluate(train_model, x, y)
    batch_loss = evaluate(train_model, x, y, batch_stats=True)
    assert eval_loss != batch_loss  # batch statistics were used: the BatchNorm was found
    assert torch.equal(train_model[2].running_mean, before)


class Fails(nn.Module):
    def forward(self, x):
        raise RuntimeError("the model fails")


@pytest.mark.parametrize("bn", [nn.BatchNorm1d, norms.BatchNorm1d])
def test_recalibrate_and_evaluate_restore_modes_and_momentum_when_the_model_raises(bn):
    model = nn.Sequential(nn.Linear(4, 3), bn(3, momentum=0.3), Fails())
    model.train()
    model[0].eval()  # modes differ between modules
    modes = [m.training for m in model.modules()]
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    with pytest.raises(RuntimeError, match="the model fails"):
        recalibrate_batchnorm(model, x)
    assert model[1].momentum == 0.3
    assert [m.training for m in model.modules()] == modes
    for batch_stats in (False, True):
        with pytest.raises(RuntimeError, match="the model fails"):
            evaluate(model, x, y, batch_stats=batch_stats)
        assert [m.training for m in model.modules()] == modes


def test_fused_group_norm_on_an_empty_batch_is_empty_as_in_torch():
    layer, x = norms.fast.fused.GroupNorm(2, 4), torch.randn(0, 4, 5, requires_grad=True)
    y = layer(x)
    assert y.shape == torch.nn.GroupNorm(2, 4)(x).shape == (0, 4, 5)
    y.sum().backward()
    assert x.grad.shape == x.shape
