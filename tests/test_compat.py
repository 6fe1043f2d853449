"""norms.compat: each private torch API works today, and its fallback works when torch drops it.

Each test removes the private name (``monkeypatch``) and checks what the fallback gives;
and a source scan checks that no other module of norms/ names one of them.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import norms
from norms import compat, stats

ROOT = Path(__file__).resolve().parents[1]


def _fake_dispatch_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


# --------------------------------------------------------------------------
# dispatch modes, torch.func
# --------------------------------------------------------------------------


def test_values_known_today():
    x = torch.ones(3)
    assert compat.values_known(x)
    assert not compat.values_known(torch.ones(3, device="meta"))
    assert torch.vmap(lambda t: torch.tensor(compat.values_known(t)))(torch.ones(2, 3)).sum() == 0
    with _fake_dispatch_mode():
        assert compat.dispatch_mode_active()
    assert not compat.dispatch_mode_active()


class _Record(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_dispatch_mode_falls_back_to_the_stack_depth(monkeypatch):
    monkeypatch.delattr(torch._C, "_TorchDispatchModeKey")
    assert not compat.dispatch_mode_active()
    with _Record():
        assert compat.dispatch_mode_active()


def test_dispatch_mode_without_any_private_api_is_cautious(monkeypatch):
    monkeypatch.delattr(torch._C, "_TorchDispatchModeKey")
    monkeypatch.delattr(torch._C, "_len_torch_dispatch_stack")
    assert compat.dispatch_stack_depth() is None
    assert compat.dispatch_mode_active()
    assert not compat.values_known(torch.ones(3))


def test_functorch_test_gone_means_values_unknown(monkeypatch):
    monkeypatch.delattr(torch._C._functorch, "is_functorch_wrapped_tensor")
    assert compat.functorch_wrapped(torch.ones(2)) is None
    assert not compat.values_known(torch.ones(2))


def test_layer_norm_gives_the_same_numbers_without_the_private_apis(monkeypatch):
    # values unknown: the overflow-safe path runs with torch.where, the same numbers
    x = torch.randn(4, 8, dtype=torch.float64)
    x[0] *= 1e200  # a row whose variance overflows
    want = norms.functional.layer_norm(x, [8])
    monkeypatch.delattr(torch._C, "_TorchDispatchModeKey")
    monkeypatch.delattr(torch._C, "_len_torch_dispatch_stack")
    assert not stats.all_finite(torch.ones(1))
    torch.testing.assert_close(norms.functional.layer_norm(x, [8]), want, rtol=0, atol=0)
    scaled = x.clone()
    scaled[0] /= 1e200
    torch.testing.assert_close(want[0], torch.nn.functional.layer_norm(scaled, [8], eps=0.0)[0])
    torch.testing.assert_close(want[1:], torch.nn.functional.layer_norm(x[1:], [8]))


# --------------------------------------------------------------------------
# Inductor
# --------------------------------------------------------------------------


def test_cpp_compiler_fallback(monkeypatch, tmp_path):
    cpp_builder = importlib.import_module("torch._inductor.cpp_builder")
    monkeypatch.delattr(cpp_builder, "get_cpp_compiler")
    fake = tmp_path / "my-c++"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CXX", "my-c++")
    assert compat.find_cpp_compiler() == str(fake)
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(RuntimeError, match="'no-such-compiler'"):
        compat.find_cpp_compiler()


def test_inductor_cache_dir_fallback(monkeypatch):
    today = compat.inductor_cache_dir()
    utils = importlib.import_module("torch._inductor.runtime.cache_dir_utils")
    monkeypatch.delattr(utils, "default_cache_dir")
    assert compat.inductor_cache_dir() == today


def test_run_and_get_code_gone_is_a_clear_error(monkeypatch):
    utils = importlib.import_module("torch._inductor.utils")
    monkeypatch.delattr(utils, "run_and_get_code")
    with pytest.raises(RuntimeError, match="run_and_get_code"):
        compat.run_and_get_code(lambda: None)


# --------------------------------------------------------------------------
# attention masks
# --------------------------------------------------------------------------


def _masks():
    bool_mask = torch.tensor([[False, True, True], [False, False, True], [False, False, False]])
    return [
        (bool_mask, None, True),
        (bool_mask, torch.float32, True),  # another dtype than the other mask: a warning
        (bool_mask, torch.float32, False),  # not checked
        (torch.zeros(3, 3, dtype=torch.float64).masked_fill(bool_mask, -1e9), None, True),
        (None, torch.bool, True),
    ]


def _canonical(mask, other, check):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compat.canonical_mask(mask, "src_mask", other, "other_mask", torch.float32, check)
    return out, [str(w.message) for w in caught]


def test_canonical_mask_fallback_is_torch_s_rule(monkeypatch):
    today = [_canonical(*case) for case in _masks()]
    assert today[0][0].dtype == torch.float32 and today[0][0][0, 1] == float("-inf")
    assert today[1][1] and not today[2][1]  # the mismatch warning
    with pytest.raises(AssertionError, match="only bool and floating types of src_mask"):
        compat.canonical_mask(torch.ones(2, dtype=torch.long), "src_mask", None, "", torch.float32)
    monkeypatch.delattr(torch.nn.functional, "_canonical_mask")
    for case, (want, want_warnings) in zip(_masks(), today, strict=True):
        got, got_warnings = _canonical(*case)
        assert got_warnings == want_warnings
        if want is None:
            assert got is None
        else:
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(AssertionError, match="only bool and floating types of src_mask"):
        compat.canonical_mask(torch.ones(2, dtype=torch.long), "src_mask", None, "", torch.float32)
    # (the layers are not run here without the name: torch's own MultiheadAttention calls it,
    # so deleting it breaks torch, not norms)


# --------------------------------------------------------------------------
# nowhere else
# --------------------------------------------------------------------------

#: the private torch names that compat.py holds; no other module of norms/ may name them
PRIVATE = re.compile(
    r"_TorchDispatchModeKey|_get_dispatch_mode|_len_torch_dispatch_stack"
    r"|is_functorch_wrapped_tensor|torch\._inductor|_canonical_mask|_none_or_dtype"
    r"|_get_default_store|\._device_types"
)


def test_private_torch_apis_only_in_compat():
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sorted((ROOT / "norms").rglob("*.py"))
        if p.name != "compat.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if PRIVATE.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, "use norms.compat:\n" + "\n".join(found)


# --------------------------------------------------------------------------
# torch.distributed and torch.nn (SyncBatchNorm)
# --------------------------------------------------------------------------


def test_default_store_gone_is_a_clear_error(monkeypatch):
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    monkeypatch.delattr(c10d, "_get_default_store")
    with pytest.raises(RuntimeError, match="_get_default_store"):
        compat.default_store()


def test_group_device_types_fall_back_to_the_backend_capability(monkeypatch):
    class Group:  # a process group of this torch has _device_types; this one does not
        pass

    monkeypatch.setattr(torch.distributed, "get_backend", lambda group: "gloo")
    gloo = torch.distributed.Backend.backend_capability["gloo"]
    assert compat.group_device_types(Group()) == list(gloo) and "cpu" in gloo
    group = Group()
    group._device_types = [torch.device("cpu")]
    assert compat.group_device_types(group) == ["cpu"]


def test_torch_batchnorm_classes_without_the_private_base(monkeypatch):
    layers = [torch.nn.BatchNorm1d(2), torch.nn.BatchNorm3d(2), torch.nn.SyncBatchNorm(2)]
    assert all(isinstance(m, compat.torch_batchnorm_classes()) for m in layers)
    batchnorm = importlib.import_module("torch.nn.modules.batchnorm")
    monkeypatch.delattr(batchnorm, "_BatchNorm")
    classes = compat.torch_batchnorm_classes()
    assert all(isinstance(m, classes) for m in layers)
    assert not isinstance(torch.nn.InstanceNorm2d(2), classes)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2))
    assert type(norms.SyncBatchNorm.convert_sync_batchnorm(net)[1]) is norms.SyncBatchNorm
