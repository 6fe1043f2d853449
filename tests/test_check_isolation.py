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
import torch.nn.functional as F
from torch import nn

from norms.check import grade, grader, helpers

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


def _grade_in_a_process(
    candidate_source: str, timeout: float, child: bool = True
) -> subprocess.CompletedProcess:
    """Grade ``Candidate`` (defined in ``candidate_source``) in a fresh Python process; ``child``:
    in a forked child process (Linux's way), else in that process under the SIGALRM timer."""
    code = textwrap.dedent(
        """
        import os, signal, sys, time
        import torch
        from torch import nn
        from norms.check import grade, grader
        grader.CHILD_PROCESS = grader.CHILD_PROCESS and {child}
        {source}
        report = grade(Candidate, nn.BatchNorm1d, timeout={timeout})
        print("codes:", [p.code for p in report.problems])
        print("details:", [p.detail for p in report.problems])
        """
    ).format(source=textwrap.dedent(candidate_source), timeout=timeout, child=child)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


#: the time limit (s) given to the grading of a candidate that never finishes: what these tests
#: check (the grading stops it and says so) does not depend on its length, and a loop that
#: spins burns a core for the limit (and the child's two seconds of grace)
LIMIT = 1


def _candidate_source(where: str, body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body), " " * 8)
    return f"""
class Candidate(nn.BatchNorm1d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
{body if where == "__init__" else ""}
    def forward(self, x):
{body if where == "forward" else ""}        return super().forward(x)
"""


@pytest.mark.parametrize("child", [True, False], ids=["child process", "in process"])
@pytest.mark.parametrize("where", ["__init__", "forward"])
def test_an_endless_loop_is_stopped_and_reported(where, child):
    source = _candidate_source(where, "while True:\n    pass\n")
    done = _grade_in_a_process(source, timeout=LIMIT, child=child)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "codes: ['timed_out']" in done.stdout, done.stdout
    assert f"Candidate did not finish in {LIMIT} s" in done.stdout, done.stdout


_HOSTILE_LOOPS = {
    "catches the alarm": """
        while True:
            try:
                time.sleep(0.01)
            except BaseException:
                pass
        """,
    "cancels the timer": """
        signal.setitimer(signal.ITIMER_REAL, 0)
        while True:
            pass
        """,
    "ignores the alarm": """
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            time.sleep(0.01)
        """,
    "sleeps in C": """
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(10**6)
        """,
}


@pytest.mark.skipif(not grader.CHILD_PROCESS, reason="grading in a child process is Linux's")
@pytest.mark.parametrize("loop", list(_HOSTILE_LOOPS))
def test_a_loop_that_defeats_the_alarm_is_still_stopped(loop):
    """The time limit holds against code that catches the alarm, cancels the timer or ignores the
    signal (the SIGALRM fired once and was swallowed: grading never ended): the child process
    that grades is killed."""
    done = _grade_in_a_process(_candidate_source("forward", _HOSTILE_LOOPS[loop]), timeout=LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "codes: ['timed_out']" in done.stdout, done.stdout
    assert f"Candidate did not finish in {LIMIT} s" in done.stdout, done.stdout


def test_a_loop_that_catches_the_alarm_is_stopped_in_process_too():
    """Without a child process (macOS), the alarm repeats and, once caught, the next instruction
    of the reader's code raises too: the loop is left from its except clause."""
    source = _candidate_source("forward", _HOSTILE_LOOPS["catches the alarm"])
    done = _grade_in_a_process(source, timeout=LIMIT, child=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "codes: ['timed_out']" in done.stdout, done.stdout


@pytest.mark.skipif(not grader.CHILD_PROCESS, reason="grading in a child process is Linux's")
def test_os_exit_in_the_candidate_is_a_problem_not_the_end_of_the_process():
    done = _grade_in_a_process(_candidate_source("forward", "os._exit(3)\n"), timeout=30)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "codes: ['crashed']" in done.stdout, done.stdout
    assert "exit status 3" in done.stdout, done.stdout


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


def test_torch_global_settings_are_restored_after_grading(child):
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
    from norms.check import copying

    module = Uncopyable(3)
    twin = copying.copy_module(module)
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
    from norms.check import copying

    module = Unclonable(3)
    with pytest.raises(copying.Uncopyable):
        copying.copy_module(module)


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


def _replace_allclose():
    torch.allclose = lambda *args, **kwargs: True


def _replace_tensor_double():
    torch.Tensor.double = lambda self, *args, **kwargs: torch.zeros(self.shape, dtype=torch.float64)


def _replace_layer_norm():  # the reference's own function: torch.nn.LayerNorm calls it
    def affine_only(x, shape, weight=None, bias=None, eps=1e-5):
        return x * weight + bias if weight is not None else x

    torch.nn.functional.layer_norm = affine_only


def _replace_the_graders_comparison():
    from norms.check import diagnosis, running_stats

    for module in (grader, diagnosis, running_stats):
        module.close = lambda *args, **kwargs: True


class _Liar(torch.Tensor):
    """A tensor that says it is close to anything."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class ReplacesWhatTheGraderComparesWith(nn.Module):
    """No normalization at all (y = γ·x + β), and a forward that replaces ``replace``'s target."""

    replace = None

    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        y = x * self.weight + self.bias
        if self.replace is None:
            return y.as_subclass(_Liar)
        type(self).replace()
        return y


_REPLACEMENTS = {
    "torch.allclose": _replace_allclose,
    "torch.Tensor.double": _replace_tensor_double,
    "torch.nn.functional.layer_norm": _replace_layer_norm,
    "the grader's close": _replace_the_graders_comparison,
    "a Tensor subclass": None,
}


@pytest.fixture(params=[True, False], ids=["child process", "in process"])
def child(request, monkeypatch):
    if request.param and not grader.CHILD_PROCESS:
        pytest.skip("grading in a child process is Linux's")
    monkeypatch.setattr(grader, "CHILD_PROCESS", request.param)
    return request.param


@pytest.mark.parametrize("what", list(_REPLACEMENTS))
def test_a_forward_that_replaces_what_the_grader_compares_with_does_not_pass(what, child):
    """The grader used to compare with whatever torch.allclose was at the time (and compute the
    reference with whatever F.layer_norm was), so a wrong layer that replaced them passed."""
    allclose, double, layer_norm = torch.allclose, torch.Tensor.double, F.layer_norm
    candidate = type("Candidate", (ReplacesWhatTheGraderComparesWith,), {})
    candidate.replace = _REPLACEMENTS[what] and staticmethod(_REPLACEMENTS[what])
    try:
        report = grade(candidate, nn.LayerNorm)
        assert not report.ok, report
        assert {"output_mismatch", "output_is_input"} & set(report.codes), report
        assert torch.allclose is allclose and F.layer_norm is layer_norm
        assert torch.Tensor.double is double and grader.close is helpers.close
    finally:
        torch.allclose, torch.Tensor.double, F.layer_norm = allclose, double, layer_norm
        grader.close = helpers.close


class _ZeroGradientThatReplacesAllclose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y.clone()

    @staticmethod
    def backward(ctx, dy):
        torch.allclose = lambda *args, **kwargs: True
        return torch.zeros_like(dy)


class ReplacesAllcloseInBackward(nn.LayerNorm):
    def forward(self, x):
        return _ZeroGradientThatReplacesAllclose.apply(super().forward(x))


def test_a_backward_that_replaces_allclose_does_not_pass(child):
    allclose = torch.allclose
    try:
        report = grade(ReplacesAllcloseInBackward, nn.LayerNorm)
        assert {"gradient_mismatch", "backward_term"} & set(report.codes), report
        assert torch.allclose is allclose
    finally:
        torch.allclose = allclose


def test_when_no_child_process_can_be_made_the_grading_runs_here(monkeypatch):
    """os.fork() fails under a limit on processes: the grader grades in this process instead."""
    from norms.check import sandbox

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(grader, "CHILD_PROCESS", True)
    monkeypatch.setattr(sandbox.os, "fork", no_fork)
    assert grade(GoodBatchNorm, nn.BatchNorm2d).ok
    assert "exited" in grade(ExitsInForward, nn.BatchNorm1d).codes
