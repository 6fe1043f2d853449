"""norms.lab.pitfalls: the fixes the pitfalls chapter teaches, each checked against torch.nn."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import norms
from norms import FrozenBatchNorm, MaskedBatchNorm1d
from norms.lab.pitfalls import freeze_batchnorm, param_groups


def test_param_groups_decay_only_matrices_and_kernels():
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), norms.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2), norms.LayerNorm(2)
    )
    model[3].bias.requires_grad_(False)
    decay, no_decay = param_groups(model, 0.05)
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert ids(decay["params"]) == {id(model[0].weight), id(model[3].weight)}
    assert ids(no_decay["params"]) == {
        id(model[0].bias),
        id(model[1].weight),
        id(model[1].bias),
        id(model[4].weight),
        id(model[4].bias),
    }  # the frozen bias is left out
    # the groups work with torch's optimizers: a zero gradient leaves γ alone but shrinks W
    opt = torch.optim.SGD([decay, no_decay], lr=0.1)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    w, g = model[3].weight.detach().clone(), model[1].weight.detach().clone()
    opt.step()
    torch.testing.assert_close(model[3].weight.detach(), w * (1 - 0.1 * 0.05))
    torch.testing.assert_close(model[1].weight.detach(), g)


@pytest.mark.parametrize("shape", [(6, 3), (6, 3, 5), (6, 3, 4, 5)])
def test_frozen_batchnorm_is_eval_batchnorm_in_both_modes(shape):
    C = shape[1]
    ref = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d}[len(shape)](C)
    with torch.no_grad():
        ref.running_mean.copy_(torch.randn(C))
        ref.running_var.copy_(torch.rand(C) + 0.5)
        ref.weight.copy_(torch.randn(C))
        ref.bias.copy_(torch.randn(C))
    frozen = FrozenBatchNorm.from_batchnorm(ref)
    x = torch.randn(shape) * 2 + 1
    want = ref.eval()(x)
    torch.testing.assert_close(frozen.train()(x), want)
    torch.testing.assert_close(frozen.eval()(x), want)
    assert list(frozen.parameters()) == []
    with pytest.raises(ValueError, match=r"expected input \(N, 3, \*\), got \(6, 4\)"):
        frozen(torch.randn(6, 4))


def test_frozen_batchnorm_keeps_the_dtype_of_the_batchnorm():
    ref = nn.BatchNorm1d(3, dtype=torch.float64)
    with torch.no_grad():
        ref.running_mean.copy_(torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64) / 3)
    frozen = FrozenBatchNorm.from_batchnorm(ref)
    assert {b.dtype for b in frozen.buffers()} == {torch.float64}
    assert torch.equal(frozen.running_mean, ref.running_mean)  # not rounded to float32
    x = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(frozen(x), ref.eval()(x), rtol=1e-15, atol=1e-15)


def test_freeze_batchnorm_survives_model_train():
    model = nn.Sequential(
        nn.Linear(4, 3),
        norms.BatchNorm1d(3),
        nn.ReLU(),
        nn.Sequential(nn.Linear(3, 3), norms.BatchNorm1d(3)),
    )
    x = torch.randn(16, 4)
    model.train()(x * 3 + 2)  # some statistics
    model.eval()
    want = model(x)
    freeze_batchnorm(model)
    assert isinstance(model[1], FrozenBatchNorm) and isinstance(model[3][1], FrozenBatchNorm)
    model.train()
    torch.testing.assert_close(model(x), want)  # still the evaluation-mode function
    model(torch.randn(16, 4) * 10)  # a training-mode pass changes nothing
    torch.testing.assert_close(model(x), want)
    with pytest.raises(ValueError, match="track_running_stats=False"):
        FrozenBatchNorm.from_batchnorm(norms.BatchNorm1d(3, track_running_stats=False))


def test_masked_batchnorm_uses_only_the_real_tokens():
    torch.manual_seed(0)
    B, T, D = 4, 6, 5
    x = torch.randn(B, T, D) * 2 + 1
    lengths = torch.tensor([6, 3, 2, 5])
    mask = torch.arange(T)[None, :] < lengths[:, None]
    padded = x.masked_fill(~mask[..., None], 0.0)
    layer = MaskedBatchNorm1d(D)
    out = layer(padded, mask)
    ref = nn.BatchNorm1d(D)
    want = ref(x[mask])  # (n_real, D): torch's BatchNorm over the real tokens
    torch.testing.assert_close(out[mask], want)
    assert torch.equal(out[~mask], torch.zeros(int((~mask).sum()), D))
    torch.testing.assert_close(layer.running_mean, ref.running_mean)
    torch.testing.assert_close(layer.running_var, ref.running_var)
    # whatever sits in the padding does not matter
    other = x.masked_fill(~mask[..., None], 1e3)
    torch.testing.assert_close(MaskedBatchNorm1d(D)(other, mask), out)
    # the unmasked layer over the padded tensor is different: the zeros enter the statistics
    assert not torch.allclose(MaskedBatchNorm1d(D)(padded)[mask], want, atol=1e-3)
    with pytest.raises(ValueError, match=r"\(B, T, 5\) with features last, got \(4, 5, 6\)"):
        layer(padded.transpose(1, 2), mask)
    with pytest.raises(ValueError, match="mask must be a bool tensor of shape"):
        layer(padded, mask.float())
