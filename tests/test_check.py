"""norms.check.grade: silent on correct layers, names each deliberate bug, never raises."""

import functools

import pytest
import torch
from torch import nn

from norms.check import PROBLEM_CODES, Report, grade

# ----------------------------------------------------------------------------
# A correct reader implementation (gamma/beta names, extra constructor arguments)
# and one subclass per bug.
# ----------------------------------------------------------------------------


class ReaderBatchNorm(nn.Module):
    def __init__(
        self, num_features, eps=1e-5, momentum=0.1, affine=True, verbose=False, *, tag="mine"
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum, self.verbose, self.tag = (
            num_features,
            eps,
            momentum,
            verbose,
            tag,
        )
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def dims(self, x):
        return [0] + list(range(2, x.dim()))

    def view(self, t, x):
        return t.reshape([1, -1] + [1] * (x.dim() - 2))

    def norm_stats(self, x):
        return x.mean(self.dims(x)), x.var(self.dims(x), unbiased=False)

    def update(self, x):
        mean, var = x.mean(self.dims(x)), x.var(self.dims(x), unbiased=True)
        m = self.momentum
        with torch.no_grad():
            self.running_mean.mul_(1 - m).add_(m * mean)
            self.running_var.mul_(1 - m).add_(m * var)

    def scale(self, x, mean, var):
        return (x - self.view(mean, x)) / torch.sqrt(self.view(var, x) + self.eps)

    def use_batch_stats(self):
        return self.training

    def forward(self, x):
        if self.training:
            self.update(x)
        if self.use_batch_stats():
            mean, var = self.norm_stats(x)
        else:
            mean, var = self.running_mean, self.running_var
        return self.scale(x, mean, var) * self.view(self.gamma, x) + self.view(self.beta, x)


class UnbiasedNormBN(ReaderBatchNorm):
    def norm_stats(self, x):
        return x.mean(self.dims(x)), x.var(self.dims(x), unbiased=True)


class BiasedRunningVarBN(ReaderBatchNorm):
    def update(self, x):
        mean, var = x.mean(self.dims(x)), x.var(self.dims(x), unbiased=False)
        m = self.momentum
        with torch.no_grad():
            self.running_mean.mul_(1 - m).add_(m * mean)
            self.running_var.mul_(1 - m).add_(m * var)


class EpsOutsideBN(ReaderBatchNorm):
    def scale(self, x, mean, var):
        return (x - self.view(mean, x)) / (torch.sqrt(self.view(var, x)) + self.eps)


class NoEpsBN(ReaderBatchNorm):
    def scale(self, x, mean, var):
        return (x - self.view(mean, x)) / torch.sqrt(self.view(var, x))


class Dim0OnlyBN(ReaderBatchNorm):
    """Right for (N, C) inputs, wrong for (N, C, L): reduces over dim 0 only."""

    def norm_stats(self, x):
        return x.mean(0, keepdim=True), x.var(0, unbiased=False, keepdim=True)

    def view(self, t, x):
        return t if t.dim() == x.dim() else super().view(t, x)


class PlainAttrBN(ReaderBatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, eps, momentum)
        del self.running_mean, self.running_var
        self.running_mean = torch.zeros(num_features)
        self.running_var = torch.ones(num_features)

    def update(self, x):
        mean, var = x.detach().mean(self.dims(x)), x.detach().var(self.dims(x), unbiased=True)
        m = self.momentum
        self.running_mean = (1 - m) * self.running_mean + m * mean
        self.running_var = (1 - m) * self.running_var + m * var


class GraphRunningBN(ReaderBatchNorm):
    def update(self, x):  # no torch.no_grad(), no detach
        mean, var = x.mean(self.dims(x)), x.var(self.dims(x), unbiased=True)
        m = self.momentum
        self.running_mean = (1 - m) * self.running_mean + m * mean
        self.running_var = (1 - m) * self.running_var + m * var


class LazyParamsBN(ReaderBatchNorm):
    def __init__(self, num_features):
        super().__init__(num_features)
        del self.gamma, self.beta

    def forward(self, x):
        if not hasattr(self, "gamma"):
            self.gamma = nn.Parameter(torch.ones(x.shape[1]))
            self.beta = nn.Parameter(torch.zeros(x.shape[1]))
        return super().forward(x)


class EvalBatchStatsBN(ReaderBatchNorm):
    def use_batch_stats(self):
        return True


class GradEnabledModeBN(ReaderBatchNorm):
    """d2l.ai's bug: batch statistics whenever gradients are on."""

    def forward(self, x):
        if torch.is_grad_enabled():
            self.update(x)
            mean, var = self.norm_stats(x)
        else:
            mean, var = self.running_mean, self.running_var
        return self.scale(x, mean, var) * self.view(self.gamma, x) + self.view(self.beta, x)


class KerasMomentumBN(ReaderBatchNorm):
    def update(self, x):
        mean, var = x.mean(self.dims(x)), x.var(self.dims(x), unbiased=True)
        m = self.momentum
        with torch.no_grad():
            self.running_mean.mul_(m).add_((1 - m) * mean)
            self.running_var.mul_(m).add_((1 - m) * var)


class ParamRunningBN(ReaderBatchNorm):
    def __init__(self, num_features):
        super().__init__(num_features)
        del self.running_mean, self.running_var
        self.running_mean = nn.Parameter(torch.zeros(num_features), requires_grad=False)
        self.running_var = nn.Parameter(torch.ones(num_features), requires_grad=False)

    def update(self, x):
        mean, var = x.mean(self.dims(x)), x.var(self.dims(x), unbiased=True)
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(0.1 * mean)
            self.running_var.mul_(0.9).add_(0.1 * var)


class NoUpdateBN(ReaderBatchNorm):
    def update(self, x):
        pass


class DetachedStatsBN(ReaderBatchNorm):
    def norm_stats(self, x):
        mean, var = super().norm_stats(x)
        return mean.detach(), var.detach()


class SwappedAffineBN(ReaderBatchNorm):
    def forward(self, x):
        y = super().forward(x)
        xhat = (y - self.view(self.beta, x)) / self.view(self.gamma, x)
        return xhat * self.view(self.beta, x) + self.view(self.gamma, x)


class NoAffineApplyBN(ReaderBatchNorm):
    def forward(self, x):
        return (super().forward(x) - self.view(self.beta, x)) / self.view(self.gamma, x)


class ModifiesInputBN(ReaderBatchNorm):
    def forward(self, x):
        y = super().forward(x)
        if not x.requires_grad:
            x.mul_(0)
        return y


class NoAffineBN(ReaderBatchNorm):
    def __init__(self, num_features):
        super().__init__(num_features)
        del self.gamma, self.beta
        self.register_buffer("gamma", torch.ones(num_features))
        self.register_buffer("beta", torch.zeros(num_features))


class WeirdEpsBN(ReaderBatchNorm):
    """Hard-codes eps=1e-3 and exposes no eps attribute."""

    def __init__(self, num_features):
        super().__init__(num_features)
        del self.eps

    def scale(self, x, mean, var):
        return (x - self.view(mean, x)) / torch.sqrt(self.view(var, x) + 1e-3)


class MomentVarBN2d(nn.Module):
    """Correct, written differently: (1, C, 1, 1) parameters, epsilon, lerp_, momentum kept as
    0.1."""

    def __init__(self, C, epsilon=1e-5):
        super().__init__()
        self.epsilon = epsilon
        self.g = nn.Parameter(torch.ones(1, C, 1, 1))
        self.b = nn.Parameter(torch.zeros(1, C, 1, 1))
        self.register_buffer("moving_mean", torch.zeros(1, C, 1, 1))
        self.register_buffer("moving_var", torch.ones(1, C, 1, 1))
        self.register_buffer("steps", torch.tensor(0))

    def forward(self, x):
        if self.training:
            mean = x.mean((0, 2, 3), keepdim=True)
            var = self.variance(x, mean)
            n = x.numel() / x.shape[1]
            with torch.no_grad():
                self.moving_mean.lerp_(mean, 0.1)
                self.moving_var.lerp_(var * n / (n - 1), 0.1)
                self.steps += 1
        else:
            mean, var = self.moving_mean, self.moving_var
        return self.g * (x - mean) * torch.rsqrt(var + self.epsilon) + self.b

    def variance(self, x, mean):
        return (x - mean).square().mean((0, 2, 3), keepdim=True)


class CancellingVarBN2d(MomentVarBN2d):
    """Right on ordinary inputs; var = E[x²] - E[x]² cancels when the mean is large."""

    def variance(self, x, mean):
        return (x * x).mean((0, 2, 3), keepdim=True) - mean**2


def layernorm_fn_cancelling(x, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.pow(2).mean(-1, keepdim=True) - mean.pow(2)
    return (x - mean) / torch.sqrt(var + eps)


class ReaderLayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, dtype=None):
        super().__init__()
        self.shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(self.shape))
        self.beta = nn.Parameter(torch.zeros(self.shape))

    def dims(self, x):
        return tuple(range(-len(self.shape), 0))

    def forward(self, x):
        mean = x.mean(self.dims(x), keepdim=True)
        var = x.var(self.dims(x), keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.gamma + self.beta


class Dim1LayerNorm(ReaderLayerNorm):
    """Right for (N, D) inputs only: reduces over dim 1 instead of the last dim."""

    def dims(self, x):
        return (1,)


class IntOnlyLayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class ReaderRMSNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__()
        self.shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(self.shape))

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        return x / torch.sqrt(x.pow(2).mean(dims, keepdim=True) + self.eps) * self.scale


class L2RMSNorm(ReaderRMSNorm):
    """Divides by the L2 norm: sqrt(n) times the root mean square."""

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        return x / torch.sqrt(x.pow(2).sum(dims, keepdim=True) + self.eps) * self.scale


class EpsOutsideRMSNorm(ReaderRMSNorm):
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        return x / (torch.sqrt(x.pow(2).mean(dims, keepdim=True)) + self.eps) * self.scale


class CenteringRMSNorm(ReaderRMSNorm):
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        x = x - x.mean(dims, keepdim=True)
        return x / torch.sqrt(x.pow(2).mean(dims, keepdim=True) + self.eps) * self.scale


class ReaderGroupNorm(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        self.G, self.eps = num_groups, eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def group(self, x):
        return x.reshape(x.shape[0], self.G, -1)

    def ungroup(self, xr, x):
        return xr.reshape(x.shape)

    def forward(self, x):
        xr = self.group(x)
        dims = tuple(range(2, xr.dim()))
        mean = xr.mean(dims, keepdim=True)
        var = xr.var(dims, keepdim=True, unbiased=False)
        y = self.ungroup((xr - mean) / torch.sqrt(var + self.eps), x)
        v = [1, -1] + [1] * (x.dim() - 2)
        return y * self.weight.view(v) + self.bias.view(v)


class InterleavedGroupNorm(ReaderGroupNorm):
    def group(self, x):
        return x.reshape(x.shape[0], -1, self.G, x[0, 0].numel()).transpose(1, 2)

    def ungroup(self, xr, x):
        return xr.transpose(1, 2).reshape(x.shape)


class Hardcoded4dGroupNorm(ReaderGroupNorm):
    def group(self, x):
        N, C, H, W = x.shape  # only images
        return x.reshape(N, self.G, C // self.G, H, W)


class ReaderInstanceNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        dims = tuple(range(2, x.dim()))
        mean = x.mean(dims, keepdim=True)
        var = x.var(dims, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps)


class CrashInit(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        raise RuntimeError("oops in init")


class NeedsTwoArgs(nn.Module):
    def __init__(self, num_features, something):
        super().__init__()


class CrashForward(ReaderBatchNorm):
    def forward(self, x):
        return x @ torch.ones(2, 2, 2)


class TupleOut(ReaderBatchNorm):
    def forward(self, x):
        return super().forward(x), self.running_mean


class NumpyOut(ReaderBatchNorm):
    def forward(self, x):
        return super().forward(x).detach().numpy()


class NoKeepdim(ReaderBatchNorm):
    def forward(self, x):
        return super().forward(x).mean(0)


class Float64Out(ReaderBatchNorm):
    def forward(self, x):
        return super().forward(x).double()


class NotAModule:
    def __init__(self, num_features):
        pass

    def __call__(self, x):
        return x


# ----------------------------------------------------------------------------
# Plain functions
# ----------------------------------------------------------------------------


def batchnorm_fn(x, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps)


def batchnorm_fn_unbiased(x, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    mean = x.mean(dims, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dims, keepdim=True) + eps)


def layernorm_fn(x, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)


def groupnorm_fn(x, num_groups, eps=1e-5):
    xr = x.reshape(x.shape[0], num_groups, -1)
    mean = xr.mean(-1, keepdim=True)
    var = xr.var(-1, keepdim=True, unbiased=False)
    return ((xr - mean) / torch.sqrt(var + eps)).reshape(x.shape)


def rmsnorm_fn(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps)


ALL_REFS = [
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.LayerNorm,
    nn.RMSNorm,
    nn.GroupNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
]


# ----------------------------------------------------------------------------
# Silent on correct implementations
# ----------------------------------------------------------------------------


def _assert_ok(report):
    assert isinstance(report, Report)
    assert report.ok, str(report)
    assert report.checks


@pytest.mark.parametrize("ref", ALL_REFS, ids=lambda c: c.__name__)
def test_torch_itself_passes(ref):
    _assert_ok(grade(ref, ref))


@pytest.mark.parametrize("ref", ALL_REFS, ids=lambda c: c.__name__)
def test_norms_classes_pass(ref):
    norms = pytest.importorskip("norms")
    cls = getattr(norms, ref.__name__, None)
    if cls is None:
        pytest.skip(f"norms.{ref.__name__} not available yet")
    _assert_ok(grade(cls, ref))


@pytest.mark.parametrize(
    "ref", [nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d], ids=lambda c: c.__name__
)
def test_reader_batchnorm_with_gamma_beta_and_extra_args_passes(ref):
    _assert_ok(grade(ReaderBatchNorm, ref))


def test_differently_written_correct_batchnorm_passes():
    _assert_ok(grade(MomentVarBN2d, nn.BatchNorm2d))


@pytest.mark.parametrize(
    "cand,ref",
    [
        (ReaderLayerNorm, nn.LayerNorm),
        (IntOnlyLayerNorm, nn.LayerNorm),
        (ReaderRMSNorm, nn.RMSNorm),
        (ReaderGroupNorm, nn.GroupNorm),
        (ReaderInstanceNorm, nn.InstanceNorm1d),
        (ReaderInstanceNorm, nn.InstanceNorm2d),
        (ReaderInstanceNorm, nn.InstanceNorm3d),
    ],
)
def test_reader_implementations_pass(cand, ref):
    _assert_ok(grade(cand, ref))


def test_int_only_layernorm_gets_a_note_not_a_problem():
    r = grade(IntOnlyLayerNorm, nn.LayerNorm)
    assert r.ok and any("tuple" in n for n in r.notes)


class AffineInstanceNorm2d(nn.InstanceNorm2d):
    def __init__(self, C):
        super().__init__(C, affine=True)


class TrackingInstanceNorm1d(nn.InstanceNorm1d):
    def __init__(self, C):
        super().__init__(C, affine=True, track_running_stats=True)


class BiasedTrackingInstanceNorm(nn.Module):
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("running_mean", torch.zeros(C))
        self.register_buffer("running_var", torch.ones(C))

    def forward(self, x):
        d = tuple(range(2, x.dim()))
        mean, var = x.mean(d), x.var(d, unbiased=False)
        if self.training:
            with torch.no_grad():
                self.running_mean.lerp_(mean.mean(0), 0.1)
                self.running_var.lerp_(var.mean(0), 0.1)  # bug: biased
        else:
            mean, var = self.running_mean.expand_as(mean), self.running_var.expand_as(var)
        view = mean.shape + (1,) * (x.dim() - 2)
        return (x - mean.reshape(view)) / torch.sqrt(var.reshape(view) + self.eps)


@pytest.mark.parametrize(
    "cand,ref",
    [(AffineInstanceNorm2d, nn.InstanceNorm2d), (TrackingInstanceNorm1d, nn.InstanceNorm1d)],
)
def test_instance_norm_variants_pass(cand, ref):
    _assert_ok(grade(cand, ref))


def test_instance_norm_running_var_bug_is_named():
    assert grade(BiasedTrackingInstanceNorm, nn.InstanceNorm1d).codes == ["running_var_biased"]


@pytest.mark.parametrize(
    "fn,ref",
    [
        (torch.nn.functional.layer_norm, nn.LayerNorm),
        (torch.nn.functional.batch_norm, nn.BatchNorm2d),
        (torch.nn.functional.group_norm, nn.GroupNorm),
        (torch.nn.functional.rms_norm, nn.RMSNorm),
        ("layer_norm", nn.LayerNorm),
        ("batch_norm", nn.BatchNorm1d),
        ("group_norm", nn.GroupNorm),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_functional_apis_pass(fn, ref):
    if isinstance(fn, str):
        fn = getattr(pytest.importorskip("norms.functional"), fn)
    _assert_ok(grade(fn, ref))


@pytest.mark.parametrize(
    "fn,ref",
    [
        (batchnorm_fn, nn.BatchNorm1d),
        (batchnorm_fn, nn.BatchNorm2d),
        (layernorm_fn, nn.LayerNorm),
        (groupnorm_fn, nn.GroupNorm),
        (rmsnorm_fn, nn.RMSNorm),
    ],
)
def test_correct_plain_functions_pass(fn, ref):
    _assert_ok(grade(fn, ref))


# ----------------------------------------------------------------------------
# Each bug is named
# ----------------------------------------------------------------------------

BUGS = [
    (UnbiasedNormBN, nn.BatchNorm1d, "unbiased_variance"),
    (BiasedRunningVarBN, nn.BatchNorm1d, "running_var_biased"),
    (EpsOutsideBN, nn.BatchNorm2d, "eps_outside_sqrt"),
    (NoEpsBN, nn.BatchNorm1d, "eps_missing"),
    (WeirdEpsBN, nn.BatchNorm1d, "eps_value"),
    (Dim0OnlyBN, nn.BatchNorm1d, "wrong_dims"),
    (Dim1LayerNorm, nn.LayerNorm, "wrong_dims"),
    (InterleavedGroupNorm, nn.GroupNorm, "wrong_groups"),
    (CenteringRMSNorm, nn.RMSNorm, "subtracts_mean"),
    (PlainAttrBN, nn.BatchNorm1d, "running_stats_not_buffers"),
    (ParamRunningBN, nn.BatchNorm1d, "running_stats_parameters"),
    (GraphRunningBN, nn.BatchNorm2d, "running_stats_autograd"),
    (LazyParamsBN, nn.BatchNorm1d, "params_created_in_forward"),
    (NoAffineBN, nn.BatchNorm1d, "params_missing"),
    (EvalBatchStatsBN, nn.BatchNorm1d, "eval_uses_batch_stats"),
    (GradEnabledModeBN, nn.BatchNorm2d, "mode_from_grad_enabled"),
    (KerasMomentumBN, nn.BatchNorm1d, "momentum_convention"),
    (NoUpdateBN, nn.BatchNorm1d, "running_stats_not_updated"),
    (DetachedStatsBN, nn.BatchNorm1d, "backward_term"),
    (SwappedAffineBN, nn.BatchNorm1d, "affine_swapped"),
    (NoAffineApplyBN, nn.BatchNorm1d, "affine_not_applied"),
    (ModifiesInputBN, nn.BatchNorm1d, "modifies_input"),
    (Hardcoded4dGroupNorm, nn.GroupNorm, "forward_failed"),
    (batchnorm_fn_unbiased, nn.BatchNorm1d, "unbiased_variance"),
    (CancellingVarBN2d, nn.BatchNorm2d, "variance_cancellation"),
    (L2RMSNorm, nn.RMSNorm, "sum_instead_of_mean"),
    (EpsOutsideRMSNorm, nn.RMSNorm, "eps_outside_sqrt"),
    (layernorm_fn_cancelling, nn.LayerNorm, "variance_cancellation"),
]


@pytest.mark.parametrize("cand,ref,code", BUGS, ids=[b[0].__name__ for b in BUGS])
def test_bug_is_named(cand, ref, code):
    r = grade(cand, ref)
    assert not r.ok
    assert code in r.codes, str(r)
    # the named problem explains itself and says how to fix it
    p = r.problems[r.codes.index(code)]
    assert p.detail and p.fix and p.title == PROBLEM_CODES[code][0]
    assert code in str(r) and code in r._repr_html_()


def test_specific_bugs_have_no_unrelated_findings():
    assert grade(UnbiasedNormBN, nn.BatchNorm1d).codes == ["unbiased_variance"]
    assert grade(BiasedRunningVarBN, nn.BatchNorm1d).codes == ["running_var_biased"]
    assert grade(EpsOutsideBN, nn.BatchNorm2d).codes == ["eps_outside_sqrt"]
    assert grade(KerasMomentumBN, nn.BatchNorm1d).codes == ["momentum_convention"]
    assert grade(EvalBatchStatsBN, nn.BatchNorm2d).codes == ["eval_uses_batch_stats"]
    assert grade(PlainAttrBN, nn.BatchNorm1d).codes == ["running_stats_not_buffers"]
    assert grade(LazyParamsBN, nn.BatchNorm1d).codes == ["params_created_in_forward"]
    assert grade(WeirdEpsBN, nn.BatchNorm1d).codes == ["eps_value"]
    assert grade(NoEpsBN, nn.BatchNorm1d).codes == ["eps_missing"]
    assert grade(Dim1LayerNorm, nn.LayerNorm).codes == ["wrong_dims"]
    assert grade(InterleavedGroupNorm, nn.GroupNorm).codes == ["wrong_groups"]
    assert grade(CancellingVarBN2d, nn.BatchNorm2d).codes == ["variance_cancellation"]
    assert grade(layernorm_fn_cancelling, nn.LayerNorm).codes == ["variance_cancellation"]


def test_shape_specific_bug_mentions_the_shape_it_got_right():
    r = grade(Dim1LayerNorm, nn.LayerNorm)
    p = r.problems[r.codes.index("wrong_dims")]
    assert "right for input (4, 5)" in p.detail
    r = grade(Dim0OnlyBN, nn.BatchNorm1d)
    detail = r.problems[r.codes.index("wrong_dims")].detail
    assert "(0,)" in detail and "right for input (8, 3)" in detail


def test_plain_attributes_report_state_dict_and_to():
    p = grade(PlainAttrBN, nn.BatchNorm1d).problems[0]
    assert "state_dict" in p.detail and "float64" in p.detail


# ----------------------------------------------------------------------------
# Bad candidates give reports, not tracebacks
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cand,code,text",
    [
        (CrashInit, "constructor_failed", "oops in init"),
        (NeedsTwoArgs, "constructor_failed", "something"),
        (CrashForward, "forward_failed", "RuntimeError"),
        (TupleOut, "wrong_type", "tuple"),
        (lambda x: x.tolist(), "wrong_type", "list"),
        (NumpyOut, "wrong_type", "ndarray"),
        (NoKeepdim, "wrong_shape", "shape"),
        (Float64Out, "wrong_dtype", "float64"),
        (NotAModule, "not_a_module", "NotAModule"),
        (42, "not_gradeable", "int"),
        (lambda x: 1 / 0, "forward_failed", "ZeroDivisionError"),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_bad_candidates_give_reports(cand, code, text):
    r = grade(cand, nn.BatchNorm1d)
    assert code in r.codes, str(r)
    assert text in str(r)


def test_crash_message_points_at_reader_line():
    r = grade(CrashForward, nn.BatchNorm1d)
    assert "in forward" in r.problems[0].detail and "torch.ones(2, 2, 2)" in r.problems[0].detail


def test_instance_is_accepted_with_a_note():
    r = grade(ReaderBatchNorm(3), nn.BatchNorm1d)
    assert r.ok and r.notes


def test_unknown_reference_is_a_value_error():
    with pytest.raises(ValueError):
        grade(ReaderBatchNorm, nn.Linear)


def test_report_rendering_and_determinism():
    r = grade(UnbiasedNormBN, nn.BatchNorm1d)
    s = str(r)
    assert s.startswith("✗") and "Fix:" in s
    h = r._repr_html_()
    assert h.startswith("<div") and "http" not in h
    assert str(grade(UnbiasedNormBN, nn.BatchNorm1d)) == s
    ok = grade(nn.LayerNorm, nn.LayerNorm)
    assert str(ok).startswith("✓") and "<details>" in ok._repr_html_()


class OffByOnePercent(ReaderBatchNorm):
    def forward(self, x):
        return super().forward(x) * 1.01


def test_unexplained_mismatch_gets_generic_message_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = grade(OffByOnePercent, nn.BatchNorm2d)
    assert r.codes[0] == "output_mismatch"
    assert "max abs error" in r.problems[0].detail and "(4, 3, 5, 7)" in r.problems[0].detail


def test_global_rng_is_left_alone():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    grade(ReaderBatchNorm, nn.BatchNorm1d)
    assert torch.equal(torch.rand(3), a)


def test_rmsnorm_problems_speak_of_rmsnorm():
    """RMSNorm has no mean and no running statistics: its reports must not suggest either."""
    for cand, code in ((L2RMSNorm, "sum_instead_of_mean"), (EpsOutsideRMSNorm, "eps_outside_sqrt")):
        r = grade(cand, nn.RMSNorm)
        assert r.codes == [code], str(r)
        p = r.problems[0]
        assert (
            "x.pow(2).mean" in p.fix
            and "x - mean" not in p.fix + p.detail
            and "running_" not in str(r)
        )
    assert "sqrt(n)" in grade(L2RMSNorm, nn.RMSNorm).problems[0].detail


def test_layer_without_running_stats_gets_no_running_stats_advice():
    class EvalOnlyBug(ReaderLayerNorm):
        def forward(self, x):
            y = super().forward(x)
            return y if self.training else y * 1.5

    r = grade(EvalOnlyBug, nn.LayerNorm)
    assert r.codes == ["eval_mismatch"], str(r)
    assert "running_" not in r.problems[0].fix and "self.training" in r.problems[0].fix


def test_scenario_shapes_never_repeat_the_channel_size():
    """The grader's inputs keep the channel (or normalized) size unique within each
    shape, as norms.check and the grade-your-own chapter claim."""
    from norms.check.scenarios import SCENARIOS

    clashes = []
    for name, scenarios in SCENARIOS.items():
        for sc in scenarios:
            if name.startswith(("LayerNorm", "RMSNorm")):
                normalized = sc.args[0] if isinstance(sc.args[0], tuple) else (sc.args[0],)
                n_last = len(normalized)
                size, where = normalized, lambda s, k=n_last: (s[:-k], s[-k:])
            else:
                size = (sc.args[1] if name == "GroupNorm" else sc.args[0],)
                where = lambda s: (s[:1] + s[2:], s[1:2])  # noqa: E731
            for shape in sc.train + sc.eval:
                others, own = where(shape)
                assert tuple(own) == tuple(size), (name, shape)
                if set(others) & set(size):
                    clashes.append((name, shape))
    assert clashes == []


# ----------------------------------------------------------------------------
# Issue 17: every observable bug in one run; torch as the reference at every step;
# eps cases told apart; crashes explained by the dims reduced; partial references.
# ----------------------------------------------------------------------------


class D2lStyleBN(nn.Module):
    """Three bugs at once, as in a well-known textbook layer: mode from torch.is_grad_enabled(),
    variance as E[x²] − E[x]², running statistics in a dict (plain tensors) updated with the
    biased variance."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.stats = {
            "moving_mean": torch.zeros(num_features),
            "moving_var": torch.ones(num_features),
        }

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        view = [1, -1] + [1] * (x.dim() - 2)
        if torch.is_grad_enabled():
            mean = x.mean(dims)
            var = (x * x).mean(dims) - mean * mean
            with torch.no_grad():
                m = self.momentum
                self.stats["moving_mean"] = (1 - m) * self.stats["moving_mean"] + m * mean
                self.stats["moving_var"] = (1 - m) * self.stats["moving_var"] + m * var
        else:
            mean, var = self.stats["moving_mean"], self.stats["moving_var"]
        x_hat = (x - mean.reshape(view)) / torch.sqrt(var.reshape(view) + self.eps)
        return x_hat * self.weight.reshape(view) + self.bias.reshape(view)


def test_every_observable_bug_is_reported_in_one_run():
    codes = grade(D2lStyleBN, nn.BatchNorm2d).codes
    for code in (
        "mode_from_grad_enabled",
        "variance_cancellation",
        "running_var_biased",
        "running_stats_not_buffers",
    ):
        assert code in codes, codes


class ZeroRunningVarBN(ReaderBatchNorm):
    """A common assignment skeleton: running_var starts at zeros, every update is right."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, eps, momentum)
        self.running_var.zero_()


def test_running_var_starting_at_zeros_is_caught():
    r = grade(ZeroRunningVarBN, nn.BatchNorm1d)
    assert "running_stats_init" in r.codes, str(r)
    assert "ones" in r.problems[r.codes.index("running_stats_init")].detail


def test_later_running_stat_bug_is_judged_against_torch_not_its_own_history():
    """A wrong start and a biased update: both named, each at its own step."""

    class Both(BiasedRunningVarBN):
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__(num_features, eps, momentum)
            self.running_var.zero_()

    codes = grade(Both, nn.BatchNorm1d).codes
    assert "running_stats_init" in codes and "running_var_biased" in codes, codes


class NoEpsRMSNorm(ReaderRMSNorm):
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        return x / torch.sqrt(x.pow(2).mean(dims, keepdim=True)) * self.scale


def test_rmsnorm_without_eps_is_not_called_eps_outside():
    r = grade(NoEpsRMSNorm, nn.RMSNorm)
    assert "eps_missing" in r.codes and "eps_outside_sqrt" not in r.codes, str(r)
    r = grade(EpsOutsideRMSNorm, nn.RMSNorm)
    assert "eps_outside_sqrt" in r.codes and "eps_missing" not in r.codes, str(r)


def test_eps_cases_that_cannot_be_told_apart_say_so():
    """A function gives the grader no copy to probe with a second input... it still has one: itself.
    Without a probe (explanations only), the words say the two cannot be told apart."""
    from norms.check.explanations import explain
    from norms.check.hypotheses import Hypothesis, Spec

    spec = Spec("RMSNorm", (5,))
    ((code, detail),) = explain(Hypothesis(eps_mode="none"), spec, (4, 5), 1.2e-7, told_apart=False)
    assert code == "eps_missing" and "cannot be told apart" in detail


class MeanOverDim0BN2d(ReaderBatchNorm):
    """Statistics over dim 0 only, reshaped as if they were per channel: crashes on (N, C, H, W)."""

    def norm_stats(self, x):
        return x.mean(0).reshape(-1), x.var(0, unbiased=False).reshape(-1)


def test_crash_from_statistics_of_the_wrong_shape_names_the_dims():
    r = grade(MeanOverDim0BN2d, nn.BatchNorm2d)
    assert "forward_failed" in r.codes, str(r)
    detail = r.problems[r.codes.index("wrong_dims")].detail
    assert "over dims (0,)" in detail and "(0, 2, 3)" in detail and "(1, 3, 1, 1)" in detail, detail


class ShapeBoundBN2d(ReaderBatchNorm):
    """The study notes' bug: dims written from sizes, right only at B=2, C=3."""

    def norm_stats(self, x):
        B, C, H, W = x.shape
        dims = (0, B, C)
        return x.mean(dim=dims), x.var(dim=dims, unbiased=False)

    def update(self, x):
        B, C, H, W = x.shape
        mean, var = x.mean(dim=(0, B, C)), x.var(dim=(0, B, C), unbiased=True)
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)


def test_right_only_for_one_shape_bug_is_explained():
    x = torch.randn(2, 3, 4, 5)
    torch.testing.assert_close(ShapeBoundBN2d(3)(x), nn.BatchNorm2d(3)(x))  # right at B=2, C=3
    r = grade(ShapeBoundBN2d, nn.BatchNorm2d)
    assert not r.ok and "wrong_dims" in r.codes, str(r)
    detail = r.problems[r.codes.index("wrong_dims")].detail
    assert "(0, 4, 3)" in detail and "(0, 2, 3)" in detail, detail


class ShiftedRMSNorm(ReaderRMSNorm):
    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__(normalized_shape, eps)
        self.bias = nn.Parameter(torch.zeros(self.shape))

    def forward(self, x):
        return super().forward(x) + self.bias


def test_extra_shift_in_rmsnorm_is_named():
    r = grade(ShiftedRMSNorm, nn.RMSNorm)
    assert r.codes == ["extra_shift"], str(r)
    assert "no shift" in r.problems[0].detail


class KwLayerNorm(nn.Module):
    def __init__(
        self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, ignore_bias=False
    ):
        super().__init__()
        self.shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.shape)) if elementwise_affine else None
        use_bias = elementwise_affine and (bias or ignore_bias)
        self.bias = nn.Parameter(torch.zeros(self.shape)) if use_bias else None

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        y = (x - x.mean(dims, keepdim=True)) / torch.sqrt(
            x.var(dims, unbiased=False, keepdim=True) + self.eps
        )
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


@pytest.mark.parametrize(
    "ref",
    [
        functools.partial(nn.LayerNorm, bias=False),
        functools.partial(nn.LayerNorm, elementwise_affine=False),
        functools.partial(nn.LayerNorm, eps=1e-3),
    ],
    ids=["bias=False", "elementwise_affine=False", "eps=1e-3"],
)
def test_partial_reference_builds_the_candidate_with_the_same_keywords(ref):
    r = grade(KwLayerNorm, ref)
    _assert_ok(r)
    assert "=" in r.reference  # the keywords are shown


def test_partial_reference_catches_a_candidate_that_ignores_a_keyword():
    r = grade(
        functools.partial(KwLayerNorm, ignore_bias=True),
        functools.partial(nn.LayerNorm, bias=False),
    )
    assert "extra_shift" in r.codes, str(r)


@pytest.mark.parametrize(
    "cls,kw",
    [
        (nn.BatchNorm2d, dict(affine=False)),
        (nn.BatchNorm2d, dict(track_running_stats=False)),
        (nn.BatchNorm1d, dict(momentum=0.3, eps=1e-3)),
        (nn.InstanceNorm2d, dict(affine=True, track_running_stats=True)),
        (nn.GroupNorm, dict(affine=False)),
        (nn.RMSNorm, dict(eps=1e-6, elementwise_affine=False)),
    ],
)
def test_partial_references_pass_torch_and_norms(cls, kw):
    import norms

    _assert_ok(grade(functools.partial(cls, **kw), functools.partial(cls, **kw)))
    _assert_ok(grade(getattr(norms, cls.__name__), functools.partial(cls, **kw)))


def test_partial_reference_momentum_is_used():
    class FixedMomentumBN(ReaderBatchNorm):  # ignores the momentum it is given
        def __init__(self, num_features, eps=1e-5, momentum=0.1):
            super().__init__(num_features, eps, 0.1)

    assert not grade(FixedMomentumBN, functools.partial(nn.BatchNorm1d, momentum=0.3)).ok


def test_partial_reference_with_unknown_keyword_is_a_value_error():
    with pytest.raises(ValueError, match="bias"):
        grade(nn.BatchNorm1d, functools.partial(nn.BatchNorm1d, bias=False))


class BareNoEpsRMSNorm(nn.Module):
    """No eps anywhere (torch's default eps=None applies: float32's machine epsilon)."""

    def __init__(self, normalized_shape):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True)) * self.weight


class BareEpsOutsideRMSNorm(BareNoEpsRMSNorm):
    def forward(self, x):
        eps = torch.finfo(x.dtype).eps
        return x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + eps) * self.weight


def test_rmsnorm_with_torch_default_eps_cases_are_told_apart():
    r = grade(BareNoEpsRMSNorm, nn.RMSNorm)
    assert "eps_missing" in r.codes and "eps_outside_sqrt" not in r.codes, str(r)
    r = grade(BareEpsOutsideRMSNorm, nn.RMSNorm)
    assert "eps_outside_sqrt" in r.codes and "eps_missing" not in r.codes, str(r)


class _HandBackward(torch.autograd.Function):
    """A hand-written normalization backward with one of the three terms of dx dropped or
    scaled: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = γ·dy, means over ``dims``."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, dims, view, factors):
        mean = x.mean(dims, keepdim=True)
        xc = x - mean
        rstd = 1 / torch.sqrt((xc * xc).mean(dims, keepdim=True) + eps)
        x_hat = xc * rstd
        ctx.save_for_backward(x_hat, rstd, weight)
        ctx.dims, ctx.view, ctx.factors = dims, view, factors
        return x_hat * weight.view(view) + bias.view(view)

    @staticmethod
    def backward(ctx, dy):
        x_hat, rstd, weight = ctx.saved_tensors
        dims, view, (a, b, c) = ctx.dims, ctx.view, ctx.factors
        g = dy * weight.view(view)
        dx = rstd * (
            a * g
            - b * g.mean(dims, keepdim=True)
            - c * x_hat * (g * x_hat).mean(dims, keepdim=True)
        )
        keep = [d for d in range(dy.dim()) if view[d] != 1]
        lead = tuple(d for d in range(dy.dim()) if d not in keep)
        return dx, (dy * x_hat).sum(lead), dy.sum(lead), None, None, None, None


def _hand_layer(kind, factors):
    class Hand(nn.Module):
        def __init__(self, size, eps=1e-5, **kw):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(size))
            self.bias = nn.Parameter(torch.zeros(size))
            if kind == "batch":
                self.momentum = kw.get("momentum", 0.1)
                self.register_buffer("running_mean", torch.zeros(size))
                self.register_buffer("running_var", torch.ones(size))
                self.register_buffer("num_batches_tracked", torch.tensor(0))

        def forward(self, x):
            if kind == "layer":
                dims, view = (-1,), (1,) * (x.dim() - 1) + (-1,)
            else:
                dims, view = (0, *range(2, x.dim())), (1, -1) + (1,) * (x.dim() - 2)
                if self.training:
                    with torch.no_grad():
                        n = x.numel() // x.shape[1]
                        m = self.momentum
                        mean, var = x.mean(dims), x.var(dims, unbiased=False) * n / (n - 1)
                        self.running_mean.mul_(1 - m).add_(m * mean)
                        self.running_var.mul_(1 - m).add_(m * var)
                        self.num_batches_tracked += 1
                else:
                    x_hat = (x - self.running_mean.view(view)) / torch.sqrt(
                        self.running_var.view(view) + self.eps
                    )
                    return x_hat * self.weight.view(view) + self.bias.view(view)
            return _HandBackward.apply(x, self.weight, self.bias, self.eps, dims, view, factors)

    return Hand


@pytest.mark.parametrize(
    "factors, named",
    [
        ((0, 1, 1), "the γ·dy/σ term is missing"),
        ((1, 0, 1), "the mean-of-dy term (−mean(g)/σ) is missing"),
        ((1, 1, 0), "the x̂·mean(dy·x̂) term (−x̂·mean(g·x̂)/σ) is missing"),
        ((1, 1, 2), "the x̂·mean(dy·x̂) term (−x̂·mean(g·x̂)/σ) has a factor 2 instead of 1"),
    ],
)
@pytest.mark.parametrize("kind, reference", [("layer", nn.LayerNorm), ("batch", nn.BatchNorm2d)])
def test_hand_written_backward_is_told_which_term_is_missing(kind, reference, factors, named):
    """The three terms are fitted against the candidate's dx: the report names the one that
    is missing (or scaled), not "do not detach the statistics"."""
    report = grade(_hand_layer(kind, factors), reference)
    codes = [p.code for p in report.problems]
    assert "backward_term" in codes and "gradient_mismatch" not in codes, str(report)
    assert named in str(report), str(report)
    others = [t for t in ("γ·dy/σ term", "mean-of-dy term", "x̂·mean(dy·x̂) term") if t not in named]
    detail = next(p for p in report.problems if p.code == "backward_term").detail
    assert not any(t in detail.split(" where ", 1)[1] for t in others), detail


def test_detached_statistics_are_named_as_such():
    r = grade(DetachedStatsBN, nn.BatchNorm1d)
    detail = r.problems[r.codes.index("backward_term")].detail
    assert "mean-of-dy term (−mean(g)/σ) is missing" in detail
    assert "x̂·mean(dy·x̂) term (−x̂·mean(g·x̂)/σ) is missing" in detail
    assert "the mean and variance were detached" in detail


def test_hand_written_backward_that_is_right_passes():
    assert grade(_hand_layer("layer", (1, 1, 1)), nn.LayerNorm).ok
    assert grade(_hand_layer("batch", (1, 1, 1)), nn.BatchNorm2d).ok


# ----------------------------------------------------------------------------
# Outputs that are no normalization at all: named as such, never given a diagnosis
# ----------------------------------------------------------------------------


class AffineOnlyLayerNorm(ReaderLayerNorm):
    def forward(self, x):
        return x * self.gamma + self.beta


class ReturnsItsBias(ReaderLayerNorm):
    def forward(self, x):
        return self.beta.expand(x.shape) * 1.0


def _nan_in_the_last_feature(x):
    y = torch.nn.functional.layer_norm(x, x.shape[-1:])
    return torch.cat([y[..., :-1], y[..., -1:] * float("nan")], -1)


@pytest.mark.parametrize(
    "candidate, ref, code, text",
    [
        (lambda x: x, nn.LayerNorm, "output_is_input", "your output is the input x itself"),
        (lambda x: x, nn.BatchNorm2d, "output_is_input", "your output is the input x itself"),
        (AffineOnlyLayerNorm, nn.LayerNorm, "output_is_input", "your output is γ·x + β"),
        (torch.zeros_like, nn.LayerNorm, "output_ignores_input", "0 everywhere"),
        (ReturnsItsBias, nn.LayerNorm, "output_ignores_input", "same for two different inputs"),
        (lambda x: x * float("nan"), nn.LayerNorm, "output_nan", "has NaN everywhere"),
        (lambda x: x * float("nan"), nn.GroupNorm, "output_nan", "at (0, 0, 0, 0), (0, 0, 0, 1)"),
        (_nan_in_the_last_feature, nn.LayerNorm, "output_nan", "NaN at 4 of 20 positions"),
        (_nan_in_the_last_feature, nn.LayerNorm, "output_nan", "at (0, 4), (1, 4), (2, 4), ..."),
    ],
)
def test_an_output_that_is_no_normalization_is_named_and_nothing_else(candidate, ref, code, text):
    """The identity used to be told "the variance is computed as E[x²] − E[x]²" and a NaN output
    "eps_missing" and "wrong_dims" (NaN matched every hypothesis that gives NaN)."""
    report = grade(candidate, ref)
    assert report.codes == [code], report
    assert text in report.problems[0].detail, report


def test_a_hypothesis_that_gives_nan_is_never_the_diagnosis():
    """Unbiased variance over one element is 0/0: such a hypothesis explains no output."""
    from norms.check.hypotheses import Spec, diagnose

    spec = Spec("LayerNorm", (5,))
    x = torch.randn(1, 5)  # unbiased variance over dim 0: 0/0
    y = torch.full_like(x, float("nan"))
    assert diagnose(y, x, spec, 1e-5, None, None, 1e-4, 1e-4) is None


# ----------------------------------------------------------------------------
# Advice that fits the layout and the quantity that differs (issue 40)
# ----------------------------------------------------------------------------


class ChannelsLastGroupNorm(nn.Module):
    """GroupNorm of an (N, *, C) input; ``interleaved`` splits C as (C // G, G), ``unbiased``
    divides by n - 1."""

    interleaved = unbiased = False

    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.G, self.C, self.eps = num_groups, num_channels, eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x):
        N, G, C = x.shape[0], self.G, self.C
        split = (C // G, G) if self.interleaved else (G, C // G)
        xr = x.reshape(N, -1, *split)
        dims = (1, 2) if self.interleaved else (1, 3)
        mean = xr.mean(dims, keepdim=True)
        var = xr.var(dims, keepdim=True, unbiased=self.unbiased)
        y = ((xr - mean) / torch.sqrt(var + self.eps)).reshape(x.shape)
        return y * self.weight + self.bias


def _seen_channels_first(**flags):
    """The assignments' wrapper: the grader's (N, C, *) input moved to (N, *, C) and back."""

    class SeenChannelsFirst(ChannelsLastGroupNorm):
        def forward(self, x):
            return super().forward(x.movedim(1, -1).contiguous()).movedim(-1, 1)

    for name, value in flags.items():
        setattr(SeenChannelsFirst, name, value)
    return SeenChannelsFirst


def test_a_channels_last_groupnorm_with_interleaved_groups_gets_the_channels_last_reshape():
    """It used to be told the channels-first reshape x.reshape(N, G, C // G, *spatial)."""
    report = grade(_seen_channels_first(interleaved=True), nn.GroupNorm)
    assert report.codes == ["wrong_groups"], report
    assert "x.reshape(N, *spatial, G, C // G)" in str(report), report
    assert "channels-last layout" in str(report), report
    assert "x.reshape(N, G, C // G, *spatial)" not in str(report), report


def test_a_channels_first_groupnorm_with_interleaved_groups_gets_the_channels_first_reshape():
    report = grade(InterleavedGroupNorm, nn.GroupNorm)
    assert "x.reshape(N, G, C // G, *spatial)" in str(report), report
    assert "x.reshape(N, *spatial, G, C // G)" not in str(report), report


class UnbiasedGroupNorm(ReaderGroupNorm):
    def forward(self, x):
        xr = self.group(x)
        dims = tuple(range(2, xr.dim()))
        y = (xr - xr.mean(dims, keepdim=True)) / torch.sqrt(xr.var(dims, keepdim=True) + self.eps)
        v = [1, -1] + [1] * (x.dim() - 2)
        return self.ungroup(y, x) * self.weight.view(v) + self.bias.view(v)


class UnbiasedLayerNorm(ReaderLayerNorm):
    def forward(self, x):
        mean, var = x.mean(self.dims(x), keepdim=True), x.var(self.dims(x), keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.gamma + self.beta


@pytest.mark.parametrize(
    "candidate, ref",
    [
        (_seen_channels_first(unbiased=True), nn.GroupNorm),
        (UnbiasedGroupNorm, nn.GroupNorm),
        (UnbiasedLayerNorm, nn.LayerNorm),
        (
            lambda x: (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5) ** 0.5,
            nn.LayerNorm,
        ),
    ],
)
def test_unbiased_variance_is_named_as_such_not_as_the_layout_or_the_dims(candidate, ref):
    report = grade(candidate, ref)
    assert report.codes == ["unbiased_variance"], report


class _ParamGradientBackward(_HandBackward):
    """The right dx, and dγ, dβ computed by ``param_grads(dy, x_hat, lead)``."""

    param_grads = None

    @staticmethod
    def backward(ctx, dy):
        dx, *_ = _HandBackward.backward(ctx, dy)
        x_hat, _, _ = ctx.saved_tensors
        keep = [d for d in range(dy.dim()) if ctx.view[d] != 1]
        lead = tuple(d for d in range(dy.dim()) if d not in keep)
        dweight, dbias = ctx.param_grads(dy, x_hat, lead)
        return dx, dweight, dbias, None, None, None, None


def _param_gradient_layer(param_grads):
    class Fn(torch.autograd.Function):
        forward = staticmethod(lambda ctx, *args: _ParamGradientBackward.forward(ctx, *args))

        @staticmethod
        def backward(ctx, dy):
            ctx.param_grads = param_grads
            return _ParamGradientBackward.backward(ctx, dy)

    class Hand(_hand_layer("layer", (1, 1, 1))):
        def forward(self, x):
            view = (1,) * (x.dim() - 1) + (-1,)
            return Fn.apply(x, self.weight, self.bias, self.eps, (-1,), view, (1, 1, 1))

    return Hand


@pytest.mark.parametrize(
    "param_grads, named",
    [
        (lambda dy, xh, lead: (dy.sum(lead), dy.sum(lead)), "weight (γ) 'weight'"),
        (lambda dy, xh, lead: (dy.sum(lead), dy.sum(lead)), "the factor x̂ is missing"),
        (lambda dy, xh, lead: ((dy * xh).mean(lead), dy.sum(lead)), "a mean over the 4 elements"),
        (lambda dy, xh, lead: ((dy * xh).sum(lead), (dy * xh).sum(lead)), "bias (β) 'bias'"),
        (lambda dy, xh, lead: ((dy * xh).sum(lead), (dy * xh).sum(lead)), "which is the weight's"),
    ],
)
def test_a_wrong_parameter_gradient_is_explained_as_that_gradient_not_dx(param_grads, named):
    """A wrong dweight used to be a gradient_mismatch whose advice was the three terms of dx."""
    report = grade(_param_gradient_layer(param_grads), nn.LayerNorm)
    assert report.codes == ["param_gradient"], report
    assert named in report.problems[0].detail, report
    assert "dx" not in str(report), report


class ChannelsLastBatchNormOverTwoDims(nn.Module):
    """BatchNorm of an (N, H, W, C) input whose statistics forget W: dims (0, 1)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        x = x.movedim(1, -1)
        mean, var = x.mean((0, 1), keepdim=True), x.var((0, 1), keepdim=True, unbiased=False)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
        return y.movedim(-1, 1)


def test_wrong_dims_of_a_channels_last_layer_are_also_given_in_its_layout():
    report = grade(ChannelsLastBatchNormOverTwoDims, nn.BatchNorm2d)
    wrong = report.problems[report.codes.index("wrong_dims")].detail
    assert "statistics over dims (0, 2)" in wrong, report
    assert "where they are dims (0, 1) of the (N, *, C) tensor" in wrong, report
