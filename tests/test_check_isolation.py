"""norms.check.grade is isolated from the reader's code: a time limit, sys.exit() reported,
torch's global settings restored, copies only, configured candidates built as given.

The candidates that never finish run in a fresh process with a time limit of its own, so
that a broken time limit fails the test instead of hanging it.
"""

from __future__ import annotations

import collections
import functools
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from norms.check import grade

ROOT = Path(__file__).resolve().parents[1]


class GoodBatchNorm(nn.Module):
    """A correct BatchNorm with its own keyword for the affine switch."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, use_affine=True):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features)) if use_affine else None
        self.bias = nn.Parameter(torch.zeros(num_features)) if use_affine else None
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:
            mean, var = x.mean(dims), x.var(dims, unbiased=False)
            with torch.no_grad():
                n = x.numel() // x.shape[1]
                self.running_mean.lerp_(mean, self.momentum)
                self.running_var.lerp_(var * n / (n - 1), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        if self.weight is not None:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y


def codes(report):
    return [p.code for p in report.problems]


def test_the_good_candidate_passes():
    assert grade(GoodBatchNorm, nn.BatchNorm2d).ok


def _grade_in_a_process(candidate_source: str, timeout: float) -> subprocess.CompletedProcess:
    code = textwrap.dedent(
        """
        import torch
        from torch import nn
        from norms.check import grade
        {source}
        report = grade(Candidate, nn.BatchNorm1d, timeout={timeout})
        print("codes:", [p.code for p in report.problems])
        print("details:", [p.detail for p in report.problems])
        """
    ).format(source=textwrap.dedent(candidate_source), timeout=timeout)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("where", ["__init__", "forward"])
def test_an_endless_loop_is_stopped_and_reported(where):
    loop = "        while True:\n            pass\n"
    source = f"""
class Candidate(nn.BatchNorm1d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
{loop if where == "__init__" else ""}
    def forward(self, x):
{loop if where == "forward" else ""}        return super().forward(x)
"""
    done = _grade_in_a_process(source, timeout=3)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "codes: ['timed_out']" in done.stdout, done.stdout
    assert "timed out after 3 s" in done.stdout, done.stdout


class ExitsInForward(GoodBatchNorm):
    def forward(self, x):
        sys.exit(3)


class _ExitInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, dy):
        sys.exit("bye")


class ExitsInBackward(GoodBatchNorm):
    def forward(self, x):
        return _ExitInBackward.apply(super().forward(x))


@pytest.mark.parametrize("candidate", [ExitsInForward, ExitsInBackward])
def test_sys_exit_in_the_candidate_is_a_problem_not_an_exit(candidate):
    report = grade(candidate, nn.BatchNorm1d)
    assert "exited" in codes(report), report.problems


class ChangesTorch(GoodBatchNorm):
    def forward(self, x):
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_num_threads(1)
        torch.allclose = lambda *a, **k: True
        torch.nn.functional.layer_norm = None
        torch.Tensor.norms_was_here = True
        return super().forward(x)


def test_torch_global_settings_are_restored_after_grading():
    threads = 2 if torch.get_num_threads() == 1 else torch.get_num_threads()
    torch.set_num_threads(threads)
    allclose, layer_norm = torch.allclose, torch.nn.functional.layer_norm
    try:
        grade(ChangesTorch, nn.BatchNorm1d)
        assert torch.get_default_dtype() == torch.float32
        assert torch.is_grad_enabled()
        assert torch.get_num_threads() == threads
        assert torch.allclose is allclose
        assert torch.nn.functional.layer_norm is layer_norm
        assert not hasattr(torch.Tensor, "norms_was_here")
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        torch.allclose, torch.nn.functional.layer_norm = allclose, layer_norm
        if hasattr(torch.Tensor, "norms_was_here"):
            del torch.Tensor.norms_was_here


class Uncopyable(GoodBatchNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()  # copy.deepcopy cannot copy a lock


def test_a_module_deepcopy_refuses_is_still_graded_on_copies():
    """copy.deepcopy fails on a lock: the grader copies the modules and tensors itself and grades
    the copies (it used to grade the module in place, and its running statistics moved)."""
    from norms.check import grader

    module = Uncopyable(3)
    twin = grader._copy(module)
    assert twin is not module and twin.running_mean is not module.running_mean
    twin(torch.randn(4, 3))
    assert torch.equal(module.running_mean, torch.zeros(3))  # the original did not move
    report = grade(Uncopyable, nn.BatchNorm1d)
    assert report.ok, report.problems


class Unclonable(GoodBatchNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()  # no deepcopy, and a dict whose type cannot be rebuilt:
        self.table = collections.defaultdict(list, {"a": [torch.ones(1)]})


def test_a_module_that_cannot_be_copied_at_all_is_reported():
    from norms.check import grader

    module = Unclonable(3)
    with pytest.raises(grader._Uncopyable):
        grader._copy(module)


def test_a_configured_candidate_is_built_as_given():
    """partial(MyBN, use_affine=False) against partial(BatchNorm2d, affine=False): the candidate
    keeps its own keyword and does not get the reference's."""
    report = grade(
        functools.partial(GoodBatchNorm, use_affine=False),
        functools.partial(nn.BatchNorm2d, affine=False),
    )
    assert "constructor_failed" not in codes(report), report.problems
    assert report.ok, report.problems


class BnParamBatchNorm(nn.Module):
    """CS231n's batchnorm_forward in a module: running statistics in the bn_param dict, created
    by the first forward pass (zeros for both), updated with the biased variance."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))
        self.bn_param = {"mode": "train", "eps": eps, "momentum": 0.9}

    def train(self, mode=True):
        super().train(mode)
        self.bn_param["mode"] = "train" if mode else "test"
        return self

    def forward(self, x):
        p = self.bn_param
        d = x.shape[1]
        rm = p.get("running_mean", torch.zeros(d))
        rv = p.get("running_var", torch.zeros(d))
        dims, shape = [0, *range(2, x.dim())], [1, -1] + [1] * (x.dim() - 2)
        if p["mode"] == "train":
            mean, var = x.mean(dims), x.var(dims, unbiased=False)
            out = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + p["eps"])
            rm = p["momentum"] * rm + (1 - p["momentum"]) * mean.detach()
            rv = p["momentum"] * rv + (1 - p["momentum"]) * var.detach()
        else:
            out = (x - rm.view(shape)) / torch.sqrt(rv.view(shape) + p["eps"])
        p["running_mean"], p["running_var"] = rm, rv
        return self.gamma.view(shape) * out + self.beta.view(shape)


def test_running_statistics_kept_in_a_dict_and_created_lazily_are_graded():
    report = grade(BnParamBatchNorm, nn.BatchNorm1d)
    assert "running_stats_missing" not in codes(report), report.problems
    assert "running_var_biased" in codes(report), report.problems
