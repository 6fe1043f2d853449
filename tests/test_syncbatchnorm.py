"""norms.SyncBatchNorm against torch.nn.SyncBatchNorm (interface) and against one BatchNorm on the
whole batch.

The multi-process checks start real processes (torch.multiprocessing, gloo on the
loopback interface) through norms.distributed.launch: once per world size (2 and 3),
each launch running every scenario of tests/_sbn_workers.py, bounded in time (the
processes are killed and the launch raises TimeoutError at the limit). The
processes meet through a FileStore in a fresh temporary directory, so parallel test
workers cannot collide on a port. The reference is computed here, in this process,
by norms.BatchNorm1d/2d/3d on the concatenated batch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.testing import assert_close

import norms
from norms import distributed
from norms.lab import sync as sync_runs
from norms.modules.syncbatchnorm import combine_stats, local_stats

from . import _sbn_workers as W

ROOT = Path(__file__).resolve().parents[1]

WORLD_SIZES = (2, 3)
SEED = 7
LAUNCH_TIMEOUT = 240  # a bound on a hang, not a speed target: the launch takes seconds


# --------------------------------------------------------------------------
# interface: constructor, parameters, buffers, state_dict, repr (no processes)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"affine": False},
        {"track_running_stats": False},
        {"momentum": None, "eps": 1e-3},
        {"bias": False},
        {"dtype": torch.float64},
    ],
)
def test_same_parameters_buffers_and_repr_as_torch(kwargs):
    ours, theirs = norms.SyncBatchNorm(6, **kwargs), nn.SyncBatchNorm(6, **kwargs)
    assert repr(ours) == repr(theirs)
    assert ours.process_group is None and theirs.process_group is None
    for mine, ref in (
        (dict(ours.named_parameters()), dict(theirs.named_parameters())),
        (dict(ours.named_buffers()), dict(theirs.named_buffers())),
    ):
        assert mine.keys() == ref.keys()
        for k in ref:
            assert mine[k].dtype == ref[k].dtype and mine[k].requires_grad == ref[k].requires_grad
            assert_close(mine[k], ref[k])
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())


def test_process_group_is_kept():
    sentinel = object()
    assert norms.SyncBatchNorm(3, 1e-5, 0.1, True, True, sentinel).process_group is sentinel


@settings(max_examples=25, deadline=None)
@given(
    rank=st.integers(2, 5),
    n=st.integers(2, 4),
    c=st.integers(1, 5),
    training=st.booleans(),
    momentum=st.sampled_from([0.1, 0.3, None]),
    seed=st.integers(0, 2**16),
)
def test_without_a_process_group_it_is_torch_syncbatchnorm(rank, n, c, training, momentum, seed):
    """No process group: plain BatchNorm, as torch.nn.SyncBatchNorm (which then runs on CPU too)."""
    assert not torch.distributed.is_initialized()
    g = torch.Generator().manual_seed(seed)
    shape = (n, c, *[3, 2, 4][: rank - 2])
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 1
    dy = torch.randn(shape, generator=g, dtype=torch.float64)
    ours, theirs = (
        m(c, momentum=momentum).double() for m in (norms.SyncBatchNorm, nn.SyncBatchNorm)
    )
    with torch.no_grad():
        for m in (ours, theirs):
            m.weight.copy_(torch.linspace(0.5, 2, c))
            m.bias.copy_(torch.linspace(-1, 1, c))
    for _ in range(2):
        for m in (ours, theirs):
            m.train(training)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = ours(xa), theirs(xb)
        ya.backward(dy)
        yb.backward(dy)
        assert_close(ya, yb)
        assert_close(xa.grad, xb.grad)
        assert_close(ours.weight.grad, theirs.weight.grad)
        assert_close(ours.running_mean, theirs.running_mean)
        assert_close(ours.running_var, theirs.running_var)
        assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked)


@pytest.mark.parametrize("shape", [(3,), ()])
def test_input_of_rank_below_two_names_the_shape(shape):
    with pytest.raises(ValueError, match=r"expected at least 2D input .*\(N, C, \*\) with C=3"):
        norms.SyncBatchNorm(3)(torch.randn(shape))


def test_zero_channels_is_an_error():
    with pytest.raises(ValueError, match=r"non-zero.*\(4, 0, 2\)"):
        norms.SyncBatchNorm(0)(torch.randn(4, 0, 2))


def test_one_value_per_channel_in_training_is_an_error_without_group():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        norms.SyncBatchNorm(3)(torch.randn(1, 3))


# --------------------------------------------------------------------------
# convert_sync_batchnorm (no processes)
# --------------------------------------------------------------------------


def _model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Sequential(
            norms.BatchNorm2d(4, momentum=None), nn.InstanceNorm2d(4), norms.InstanceNorm2d(4)
        ),
        nn.Flatten(2, 3),
        nn.BatchNorm1d(4, affine=False),
        norms.BatchNorm1d(4, bias=False, eps=1e-3),
        nn.Unflatten(2, (2, 2, 4)),
        nn.BatchNorm3d(4, track_running_stats=False),
    )


def test_convert_replaces_every_batchnorm_and_keeps_its_state():
    model = _model()
    x = torch.randn(5, 3, 6, 6)
    model(x)  # running statistics away from their initial values
    for m in model.modules():
        if hasattr(m, "running_mean") and m.running_mean is not None:
            m.running_mean.add_(0.25)
    model[3][0].eval()
    model[3][0].qconfig = "q"
    before = dict(model.named_modules())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    params = dict(model.named_parameters())
    converted = norms.SyncBatchNorm.convert_sync_batchnorm(model)
    reference = nn.SyncBatchNorm.convert_sync_batchnorm(_model())

    kinds = {name: type(m).__name__ for name, m in converted.named_modules()}
    # torch converts its own BatchNorms the same way; it leaves norms' (3.0 and 6) alone
    theirs = {name: type(m).__name__ for name, m in reference.named_modules()}
    assert {**theirs, "3.0": "SyncBatchNorm", "6": "SyncBatchNorm"} == kinds
    assert [k for k, v in kinds.items() if v == "SyncBatchNorm"] == ["1", "3.0", "5", "6", "8"]
    assert kinds["3.1"] == "InstanceNorm2d" and type(converted[3][2]) is norms.InstanceNorm2d
    for name, m in converted.named_modules():
        if isinstance(m, norms.SyncBatchNorm):
            old = before[name]
            assert isinstance(
                old, (nn.modules.batchnorm._BatchNorm, norms.modules.batchnorm.BatchNormBase)
            )
            assert repr(m).split("(", 1)[1] == repr(old).split("(", 1)[1]
            assert m.training == old.training
            assert m.weight is old.weight and m.bias is old.bias
            assert (
                m.running_mean is old.running_mean
                and m.num_batches_tracked is old.num_batches_tracked
            )
    assert converted[3][0].qconfig == "q" and not converted[3][0].training
    assert dict(converted.named_parameters()) == params
    assert converted.state_dict().keys() == state.keys()
    for k, v in converted.state_dict().items():
        assert_close(v, state[k])
    # without a process group the converted model computes what the original did
    converted.eval(), model.eval()
    assert_close(converted(x), _eval_like(state)(x))


def _eval_like(state):
    model = _model()
    model.load_state_dict(state)
    return model.eval()


def test_convert_a_bare_batchnorm_returns_a_new_layer():
    bn = norms.BatchNorm1d(3, momentum=0.2)
    sync = norms.SyncBatchNorm.convert_sync_batchnorm(bn, process_group="pg")
    assert type(sync) is norms.SyncBatchNorm and sync.process_group == "pg" and sync.momentum == 0.2
    assert sync.weight is bn.weight


# --------------------------------------------------------------------------
# Chan et al.'s combination (no processes)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[1, 5], [4, 1, 3], [3, 0, 2], [7]])
def test_combine_stats_is_the_statistics_of_the_union(sizes):
    g = torch.Generator().manual_seed(len(sizes))
    x = torch.randn(sum(sizes), 3, dtype=torch.float64, generator=g) * 3 + 2
    parts = torch.split(x, sizes)
    means = torch.stack([p.mean(0) if len(p) else torch.zeros(3, dtype=x.dtype) for p in parts])
    m2s = torch.stack(
        [((p - p.mean(0)) ** 2).sum(0) if len(p) else torch.zeros(3, dtype=x.dtype) for p in parts]
    )
    n, mean, m2 = combine_stats(torch.tensor(sizes, dtype=x.dtype), means, m2s)
    assert int(n) == sum(sizes)
    assert_close(mean, x.mean(0))
    assert_close(m2 / n, x.var(0, correction=0))


def test_combine_stats_survives_a_large_mean_where_one_pass_fails():
    """Mean 3000, std ~1, float32: Chan's combination keeps the variance; E[x²]−E[x]² loses it."""
    sizes = [3, 5, 2]
    x = distributed.global_batch(3, sizes, 4, (6, 5), mean=3000.0)  # float32
    truth = x.double().var((0, 2, 3), correction=0)
    parts = torch.split(x, sizes)
    stats = [local_stats(p) for p in parts]
    counts = torch.tensor([p.numel() // 4 for p in parts], dtype=torch.float32)
    n, _, m2 = combine_stats(
        counts, torch.stack([s[0] for s in stats]), torch.stack([s[1] for s in stats])
    )
    chan = m2 / n
    one_pass = (x * x).mean((0, 2, 3)) - x.mean((0, 2, 3)) ** 2
    assert ((chan.double() - truth).abs() / truth).max() < 1e-3
    assert ((one_pass.double() - truth).abs() / truth).max() > 1e-2  # the test can tell them apart


# --------------------------------------------------------------------------
# the packet's header and the checks on it (no processes: the headers are built here)
# --------------------------------------------------------------------------


def _header(x, eps=1e-5, momentum=0.1, step=0, evals=0, needs_grad=True, phase=None):
    """The header a process with ``norms.SyncBatchNorm(3)`` and input ``x`` sends."""
    from norms.distributed import packet

    layer = norms.SyncBatchNorm(3, eps=eps, momentum=momentum)
    header = packet.layer_header(
        step, evals, eps, momentum, True, layer.weight, layer.bias, layer.num_features
    )
    header, _ = packet.with_input(header, x, needs_grad, ["cpu"])
    if phase is not None:
        header[packet.PHASE] = phase
    return header


def _heads(*headers):
    """The headers as the all-gather returns them: float64, one row per rank."""
    return torch.tensor(headers, dtype=torch.float64)


def test_the_checks_read_every_process_header():
    from norms.distributed import checks, packet

    x = torch.randn(4, 3, 2)
    same = _heads(_header(x), _header(x[:1]))
    assert checks.order_problem(same, packet.FWD, 0) is None
    assert checks.config_problem(same) is None
    assert checks.input_problem(same, 3, None, ["cpu"]) is None
    eps = _heads(_header(x), _header(x, eps=1e-3))
    assert checks.config_problem(eps) == (
        "the processes disagree on eps: rank 0: 1e-05, rank 1: 0.001"
    )
    momentum = _heads(_header(x), _header(x, momentum=None))
    assert "momentum (-1: None): rank 0: 0.1, rank 1: -1.0" in checks.config_problem(momentum)
    channels = _heads(_header(x), _header(torch.randn(4, 4, 2)))
    assert "agree on the number of channels" in checks.input_problem(channels, 3, None, ["cpu"])
    one_value = _heads(_header(x[:1, :, :1]), _header(x[:0]))
    assert "more than 1 value per channel" in checks.input_problem(one_value, 3, None, ["cpu"])
    integer = _heads(_header(x), _header(x.long()))
    assert "floating point" in checks.input_problem(integer, 3, None, ["cpu"])
    skipped = _heads(_header(x, phase=packet.BWD), _header(x, step=1))
    problem = checks.order_problem(skipped, packet.BWD, 0)
    assert problem.startswith("rank(s) [1] skipped backward of a training step that rank(s) [0]")
    assert "rank 0: backward of training step 0; rank 1: forward of training step 1" in problem
    evaluated = _heads(_header(x), _header(x, evals=1))
    assert "rank(s) [1] ran this layer in eval mode" in checks.order_problem(
        evaluated, packet.FWD, 0
    )
    with pytest.raises(RuntimeError, match=r"^SyncBatchNorm\(3\): rank\(s\) \[1\] skipped"):
        checks.check_backward(skipped, 0, 3)


# --------------------------------------------------------------------------
# the launcher: time limit and errors
# --------------------------------------------------------------------------


def test_launch_kills_processes_that_hang():
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\]|ranks \[1\]|ranks \[0\]"):
        distributed.launch(W.hang, 2, timeout=8, grace=1)


def test_launch_reports_a_worker_error_and_stops_the_others():
    with pytest.raises(distributed.WorkerError, match="first rank 1: ValueError: rank one fails"):
        distributed.launch(W.fail_on_rank_one, 2, timeout=LAUNCH_TIMEOUT)
    results = distributed.launch(W.fail_on_rank_one, 2, timeout=LAUNCH_TIMEOUT, return_errors=True)
    assert results[0] == 0
    assert (
        results[1][:2] == ("ValueError", "rank one fails on purpose")
        and "Traceback" in results[1][2]
    )


def test_worker_error_reports_the_rank_that_failed_first_and_keeps_every_error():
    """Rank 1 raises KeyError; rank 0, left waiting in a barrier, fails after it with a peer error.
    The report names rank 1's KeyError, whatever the rank order."""
    with pytest.raises(distributed.WorkerError) as caught:
        distributed.launch(W.key_error_on_rank_one, 2, timeout=LAUNCH_TIMEOUT, grace=60)
    error = caught.value
    assert error.rank == 1
    assert str(error).startswith("2 worker(s) raised; first rank 1: KeyError"), str(error)
    assert "rank one's own error" in str(error).splitlines()[0]
    assert sorted(error.errors) == [0, 1] and error.errors[1][0] == "KeyError"


def test_a_rank_in_eval_mode_gives_the_others_an_error_that_names_the_disagreement():
    """Rank 1 runs the layer in eval mode and returns; rank 0 waits in the training forward. Its
    error names rank 1 and the train/eval disagreement (not only the peer's gloo error)."""
    results = distributed.launch(
        W.eval_on_rank_one, 2, timeout=LAUNCH_TIMEOUT, grace=60, return_errors=True
    )
    assert results[1] is None
    kind, message, _ = results[0]
    assert kind == "RuntimeError", message
    assert message.startswith(
        "SyncBatchNorm: rank 1 returned from its function while rank 0 "
        "waited in the forward collective"
    ), message
    assert "disagree on train/eval mode: rank 1 ran SyncBatchNorm in eval mode" in message


def test_a_rank_that_skips_backward_and_returns_is_named():
    results = distributed.launch(
        W.skip_backward_and_return_on_rank_one,
        2,
        timeout=LAUNCH_TIMEOUT,
        grace=60,
        return_errors=True,
    )
    assert results[1] is None
    kind, message, _ = results[0]
    assert kind == "RuntimeError", message
    assert "waited in the backward collective" in message, message
    assert "Rank 1 skipped backward" in message, message


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def disagreements(request):
    world = request.param
    return world, distributed.launch(
        W.disagreements, world, timeout=LAUNCH_TIMEOUT, grace=60, return_errors=True
    )


@pytest.mark.parametrize(
    "case, kind, wanted",
    [
        ("eps", "ValueError", r"disagree on eps: rank 0: 1e-05, .*rank {last}: 0.001"),
        ("momentum", "ValueError", r"disagree on momentum.*rank 0: 0.1, .*rank {last}: -1.0"),
        (
            "weight-requires-grad",
            "ValueError",
            r"disagree on weight.requires_grad.*rank 0: 1, .*rank {last}: 0",
        ),
        (
            "bias-requires-grad",
            "ValueError",
            r"disagree on bias.requires_grad.*rank 0: 1, .*rank {last}: 0",
        ),
        (
            "input-requires-grad",
            "ValueError",
            r"disagree on whether the input requires grad.*rank 0: True, .*rank {last}: False",
        ),
        (
            "skip-backward",
            "RuntimeError",
            r"rank\(s\) \[{last}\] skipped backward.*rank 0: backward of training step 0;"
            r".*rank {last}: forward of training step 1",
        ),
        (
            "eval-once",
            "RuntimeError",
            r"disagree on train/eval mode: rank\(s\) \[{last}\] ran this layer in eval mode.*"
            r"rank 0: forward of training step 0;.*rank {last}: forward of training step 0, "
            r"after 1 eval-mode forward\(s\) of it with gradients",
        ),
    ],
)
def test_processes_that_disagree_all_raise_an_error_naming_it_and_the_ranks(
    disagreements, case, kind, wanted
):
    """Every process raises (none is left waiting, no peer's gloo error, no timeout), with the
    same message, in the one collective of the pass."""
    import re

    world, results = disagreements
    errors = [r[case] for r in results]
    assert all(e is not None for e in errors), errors
    assert {k for k, _ in errors} == {kind}, errors
    assert len({m for _, m in errors}) == 1, errors
    assert re.search(wanted.format(last=world - 1), errors[0][1]), errors[0][1]
    assert "gloo" not in errors[0][1].lower()
    assert all(r["after"] is None for r in results)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return "\tZ" not in next(line for line in state.splitlines() if line.startswith("State:"))


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
def test_sigterm_to_the_launcher_kills_its_workers_and_removes_its_folder(tmp_path, request):
    pids = tmp_path / "pids"
    pids.mkdir()
    # a short folder: multiprocessing puts a Unix socket in TMPDIR, and a socket's path must
    # stay under 108 bytes (pytest's tmp_path under xdist can be longer)
    scratch = Path(tempfile.mkdtemp(prefix="sbn-", dir="/tmp" if os.path.isdir("/tmp") else None))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    code = (
        "import norms.distributed as d, tests._sbn_workers as W\n"
        f"d.launch(W.sleep_reporting_pid, 2, args=({str(pids)!r},), timeout=300)\n"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 240
        while len(list(pids.glob("*.pid"))) < 2 and launcher.poll() is None:
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        assert launcher.poll() is None, launcher.communicate(timeout=10)
        workers = [int(p.read_text()) for p in pids.glob("*.pid")]
        assert list(scratch.glob("norms-dist-*"))
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=60)
        assert launcher.returncode == -signal.SIGTERM, launcher.stderr.read()[-2000:]
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)], "orphaned workers"
        assert not list(scratch.glob("norms-dist-*"))
    finally:
        launcher.kill()
        launcher.wait(timeout=30)
        for pid_file in pids.glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


# --------------------------------------------------------------------------
# multi-process: one launch per world size runs every scenario
# --------------------------------------------------------------------------


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def run(request):
    world = request.param
    return world, distributed.launch(W.scenarios, world, args=(SEED,), timeout=LAUNCH_TIMEOUT)


def _concat(results, key):
    return torch.cat([r[key] for r in results])


@pytest.mark.parametrize("case", list(W.CASES))
def test_matches_one_batchnorm_on_the_whole_batch(run, case):
    world, results = run
    sizes, channels, spatial, mean, kwargs = W.CASES[case]
    sizes = sizes[world]
    mine = [r[case] for r in results]
    ref = sync_runs.reference_batchnorm(
        SEED, sizes, channels, spatial, steps=3, mean=mean, layer_kwargs=kwargs
    )
    tol = {"atol": 2e-5, "rtol": 1e-5} if mean == 0 else {"atol": 2e-3, "rtol": 1e-4}
    if kwargs.get("dtype") == torch.float64:
        tol = {"atol": 1e-12, "rtol": 1e-12}
    if kwargs.get("dtype") == torch.bfloat16:  # computed in float32, rounded to bfloat16 (8 bits)
        tol = {"atol": 3e-2, "rtol": 2e-2}
    if "dtype" in kwargs:
        dtypes = {
            ref["y"].dtype,
            mine[0]["y"].dtype,
            mine[0]["dx"].dtype,
            mine[0]["dweight"].dtype,
            mine[0]["running"][-1][1].dtype,
        }
        assert dtypes == {kwargs["dtype"]}
    # outputs and input gradients: each process has its rows of the global result
    assert_close(_concat(mine, "y"), ref["y"], **tol)
    assert_close(_concat(mine, "dx"), ref["dx"], **tol)
    # parameter gradients: each process has its part; their sum is the global gradient
    assert_close(sum(r["dweight"] for r in mine), ref["dweight"], **tol)
    if kwargs.get("bias", True):
        assert_close(sum(r["dbias"] for r in mine), ref["dbias"], **tol)
    # running statistics after every step: the global ones, identical on every process
    for step, (rm, rv, nbt) in enumerate(ref["running"]):
        for r in mine:
            assert_close(r["running"][step][0], rm, **tol)
            assert_close(r["running"][step][1], rv, **tol)
            assert r["running"][step][2] == nbt == step + 1
        for r in mine[1:]:
            assert torch.equal(r["running"][step][0], mine[0]["running"][step][0])
            assert torch.equal(r["running"][step][1], mine[0]["running"][step][1])


def test_large_mean_is_as_accurate_as_single_process_batchnorm(run):
    """Mean 3000 in float32: the synchronized output is as close to float64 as BatchNorm's own."""
    world, results = run
    sizes, channels, spatial, mean, kwargs = W.CASES["mean-3000"]
    sizes = sizes[world]
    exact = sync_runs.reference_batchnorm(
        SEED, sizes, channels, spatial, steps=3, mean=mean, dtype=torch.float64
    )
    single = sync_runs.reference_batchnorm(SEED, sizes, channels, spatial, steps=3, mean=mean)
    ours = _concat([r["mean-3000"] for r in results], "y").double()
    err_ours = (ours - exact["y"]).abs().max().item()
    err_single = (single["y"].double() - exact["y"]).abs().max().item()
    assert err_ours <= 4 * err_single + 1e-4, (err_ours, err_single)
    rv = results[0]["mean-3000"]["running"][-1][1].double()
    assert_close(rv, exact["running"][-1][1], atol=1e-3, rtol=1e-3)


def test_ddp_with_converted_model_trains_like_one_process(run):
    world, results = run
    assert results[0]["ddp"]["types"][1] == results[0]["ddp"]["types"][5] == "SyncBatchNorm"
    ref = W.ddp_reference(SEED, W.DDP_SIZES[world])
    for step, (grads, params, buffers) in enumerate(ref):
        for r in results:
            g, p, b = r["ddp"]["steps"][step]
            for mine, want in zip(g, grads, strict=True):
                assert_close(mine, want, atol=1e-5, rtol=1e-4)
            for mine, want in zip(p, params, strict=True):
                assert_close(mine, want, atol=1e-5, rtol=1e-4)
            assert b.keys() == buffers.keys()
            for k in buffers:
                assert_close(b[k], buffers[k], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "case, wanted",
    [
        ("channels", r"agree on the number of channels.*num_features=3.*\(4, 4, 5\)"),
        ("device", r"device the gloo backend can reduce.*on meta"),
        ("one-value", r"more than 1 value per channel.*global batch.*\(1, 3\).*\(0, 3\)"),
        ("dtype", r"floating point.*torch.int64"),
        ("rank-1", r"at least 2 dims.*input of shape \(3,\)"),
    ],
)
def test_bad_input_raises_the_same_clear_error_on_every_process(run, case, wanted):
    world, results = run
    errors = [r["errors"][case] for r in results]
    assert all(e is not None for e in errors), errors
    assert all(kind == "ValueError" for kind, _ in errors), errors
    assert len({msg for _, msg in errors}) == 1  # the same message everywhere
    assert f"rank {world - 1}:" in errors[0][1]
    import re

    assert re.search(wanted, errors[0][1]), errors[0][1]


def test_the_group_is_usable_after_the_errors(run):
    world, results = run
    sizes = [2] * world
    ref = norms.BatchNorm1d(3)(distributed.global_batch(5, sizes, 3))
    assert_close(torch.cat([r["errors"]["after"] for r in results]), ref.detach())
    assert [r["errors"]["num_batches_tracked"] for r in results] == [1] * world


def test_communication_per_step(run):
    """As many collectives as torch.nn.SyncBatchNorm (one all_gather in forward, one all_reduce in
    backward): here one all_gather in each, of the 15-number header and 2 numbers per channel;
    eval: nothing."""
    world, results = run
    packet = 15 + 2 * 3
    for r in results:
        c = r["collectives"]
        assert c["train"] == [("all_gather", packet), ("all_gather", packet)]
        assert c["eval"] == []
        assert c["input-without-grad"] == [("all_gather", packet)]


def test_gloo_listens_on_the_loopback_interface(run):
    world, results = run
    assert [r["interface"] for r in results] == [distributed.loopback_interface()] * world
    assert distributed.loopback_interface() in ("lo", "lo0")


def test_process_group_limits_the_synchronization(run):
    world, results = run
    members = world - 1
    x = distributed.global_batch(11, [2] * world, 3, (4,))
    ref = norms.BatchNorm1d(3)(x[: 2 * members]).detach()
    assert results[-1]["subgroup"] is None
    assert_close(torch.cat([r["subgroup"] for r in results[:members]]), ref)
