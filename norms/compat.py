r"""Every private torch API that :mod:`norms` uses, each in one place, with a fallback.

torch's names that start with an underscore may move or go in any release. Each one
``norms`` needs is looked up here, *when it is called* (not when this module loads), and
each lookup has a fallback for a torch where the name is gone: the same behaviour where a
public API gives it, otherwise the cautious choice (e.g. "the values may be symbolic", which
only costs a few extra ops) or an error that names what moved. ``tests/test_compat.py``
removes each private name and checks the fallback.

* :func:`dispatch_mode_active`: ``torch._C._TorchDispatchModeKey`` and
  ``torch._C._get_dispatch_mode``; fallback ``torch._C._len_torch_dispatch_stack``, then
  "a mode may be active";
* :func:`dispatch_stack_depth`: ``torch._C._len_torch_dispatch_stack``; fallback ``None``;
* :func:`functorch_wrapped`: ``torch._C._functorch.is_functorch_wrapped_tensor``; fallback
  ``None`` (unknown);
* :func:`values_known` (the three above): fallback ``False``;
* :func:`find_cpp_compiler`: ``torch._inductor.cpp_builder.get_cpp_compiler``; fallback
  ``$CXX`` or ``g++`` on the ``PATH``;
* :func:`inductor_cache_dir`: ``torch._inductor.runtime.cache_dir_utils.default_cache_dir``;
  fallback ``<temp dir>/torchinductor_<user>``;
* :func:`run_and_get_code`: ``torch._inductor.utils.run_and_get_code``; fallback an error
  that names it;
* :func:`canonical_mask`: ``torch.nn.functional._canonical_mask``; fallback the same rule
  written here.
* :func:`default_store`: ``torch.distributed.distributed_c10d._get_default_store``;
  fallback an error that names it;
* :func:`group_device_types`: ``ProcessGroup._device_types``; fallback the public
  ``torch.distributed.Backend.backend_capability``;
* :func:`torch_batchnorm_classes`: ``torch.nn.modules.batchnorm._BatchNorm``; fallback the
  public BatchNorm classes of ``torch.nn``.

Example::

    >>> import torch
    >>> from norms import compat
    >>> compat.values_known(torch.ones(3)), compat.values_known(torch.ones(3, device="meta"))
    (True, False)
"""

from __future__ import annotations

import getpass
import importlib
import os
import shutil
import tempfile
import warnings

import torch
from torch import Tensor

__all__ = [
    "dispatch_mode_active",
    "dispatch_stack_depth",
    "functorch_wrapped",
    "values_known",
    "find_cpp_compiler",
    "inductor_cache_dir",
    "run_and_get_code",
    "canonical_mask",
    "default_store",
    "group_device_types",
    "torch_batchnorm_classes",
]


def _private(owner: object, *path: str):
    """``owner.path[0].path[1]...``, or ``None`` when torch no longer has it."""
    for name in path:
        owner = getattr(owner, name, None)
        if owner is None:
            return None
    return owner


def _private_module(module: str, *path: str):
    """An attribute of a private torch module, or ``None`` when the module or name is gone."""
    try:
        owner = importlib.import_module(module)
    except ImportError:
        return None
    return _private(owner, *path)


# --------------------------------------------------------------------------
# dispatch modes and torch.func: may Python read a tensor's values?
# --------------------------------------------------------------------------

_MODE_KEYS: list = [None, ()]  # [the enum seen last, its members]


def _mode_keys() -> tuple | None:
    """The members of ``torch._C._TorchDispatchModeKey`` (the dispatch modes torch tracks by
    key: fake tensors, proxies of ``make_fx``, functionalization), or ``None`` without it."""
    enum = _private(torch._C, "_TorchDispatchModeKey")
    if enum is None:
        return None
    if enum is not _MODE_KEYS[0]:
        _MODE_KEYS[:] = [enum, tuple(enum.__members__.values())]
    return _MODE_KEYS[1]


def dispatch_stack_depth() -> int | None:
    """How many Python dispatch modes (``TorchDispatchMode``) are active, ``None`` if unknown.

    Private API: ``torch._C._len_torch_dispatch_stack``.
    """
    depth = _private(torch._C, "_len_torch_dispatch_stack")
    return None if depth is None else depth()


def dispatch_mode_active() -> bool:
    """Whether a dispatch mode under which tensors hold no readable values may be active.

    Private API: ``torch._C._TorchDispatchModeKey`` and ``torch._C._get_dispatch_mode`` (the
    modes torch tracks by key). Fallback: any Python dispatch mode on the stack
    (:func:`dispatch_stack_depth`); if that is gone too, ``True`` (the cautious answer).
    """
    keys, get_mode = _mode_keys(), _private(torch._C, "_get_dispatch_mode")
    if keys is not None and get_mode is not None:
        return any(get_mode(key) is not None for key in keys)
    depth = dispatch_stack_depth()
    return True if depth is None else depth > 0


def functorch_wrapped(t: Tensor) -> bool | None:
    """Whether ``t`` is wrapped by a ``torch.func`` transform (``vmap``, ``grad``), ``None``
    if this torch cannot tell.

    Private API: ``torch._C._functorch.is_functorch_wrapped_tensor``.
    """
    test = _private(torch._C, "_functorch", "is_functorch_wrapped_tensor")
    return None if test is None else bool(test(t))


def values_known(t: Tensor) -> bool:
    """Whether Python can read ``t``'s values: False while ``torch.compile`` or ``export``
    traces, under ``torch.func`` transforms (``vmap``, ``grad``), on the meta device, for a fake
    tensor (or another tensor subclass) and under a tracing dispatch mode (``make_fx``).

    Where this torch cannot tell (a private API gone), False: the caller then takes its
    branch-free path, which gives the same numbers.
    """
    if torch.compiler.is_compiling() or t.is_meta or type(t) is not Tensor:
        return False
    wrapped = functorch_wrapped(t)
    return wrapped is False and not dispatch_mode_active()


# --------------------------------------------------------------------------
# torch.compile's C++ back end (Inductor)
# --------------------------------------------------------------------------


def find_cpp_compiler() -> str:
    """The C++ compiler ``torch.compile`` will use on a CPU; raises if there is none.

    Private API: ``torch._inductor.cpp_builder.get_cpp_compiler`` (raises
    ``InvalidCxxCompiler``). Fallback: ``$CXX`` or ``g++`` found on the ``PATH``
    (``RuntimeError`` if neither is).
    """
    get = _private_module("torch._inductor.cpp_builder", "get_cpp_compiler")
    if get is not None:
        return get()
    name = os.environ.get("CXX", "g++")
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"no C++ compiler: {name!r} ($CXX or g++) is not on the PATH")
    return found


def inductor_cache_dir() -> str:
    """Inductor's default on-disk cache folder.

    Private API: ``torch._inductor.runtime.cache_dir_utils.default_cache_dir``. Fallback:
    ``<temp dir>/torchinductor_<user>``, the folder torch has used so far.
    """
    default = _private_module("torch._inductor.runtime.cache_dir_utils", "default_cache_dir")
    if default is not None:
        return default()
    user = getpass.getuser().replace("\\", "_")
    return os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")


def run_and_get_code(fn, *args, **kwargs):
    """``(result, sources)``: ``fn(*args, **kwargs)`` and the source of every module Inductor
    wrote while it ran.

    Private API: ``torch._inductor.utils.run_and_get_code``. No public API gives the
    generated code, so without it this raises a ``RuntimeError`` that says so.
    """
    run = _private_module("torch._inductor.utils", "run_and_get_code")
    if run is None:
        raise RuntimeError(
            "this torch has no torch._inductor.utils.run_and_get_code: the code torch.compile "
            "writes cannot be collected (set TORCH_LOGS=output_code to print it instead)"
        )
    return run(fn, *args, **kwargs)


# --------------------------------------------------------------------------
# attention masks (torch.nn.functional)
# --------------------------------------------------------------------------


def canonical_mask(
    mask: Tensor | None,
    mask_name: str,
    other_type: torch.dtype | None,
    other_name: str,
    target_type: torch.dtype,
    check_other: bool = True,
) -> Tensor | None:
    """An attention mask as torch's transformer layers take it: a bool mask (``True`` = may not
    attend) becomes an additive float mask of ``target_type`` (``-inf`` where ``True``, else 0),
    a float mask stays as it is, any other dtype is an ``AssertionError``; a dtype other than
    ``other_type`` (the other mask's) is a deprecation warning, as in torch.

    Private API: ``torch.nn.functional._canonical_mask``. Fallback: the same rule, written here.
    """
    torch_fn = _private(torch.nn.functional, "_canonical_mask")
    if torch_fn is not None:
        return torch_fn(
            mask=mask,
            mask_name=mask_name,
            other_type=other_type,
            other_name=other_name,
            target_type=target_type,
            check_other=check_other,
        )
    if mask is None:
        return None
    is_float = torch.is_floating_point(mask)
    if mask.dtype != torch.bool and not is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type "
            "for both instead.",
            stacklevel=2,
        )
    if is_float:
        return mask
    return torch.zeros_like(mask, dtype=target_type).masked_fill_(mask, float("-inf"))


# --------------------------------------------------------------------------
# torch.distributed and torch.nn (SyncBatchNorm)
# --------------------------------------------------------------------------


def default_store():
    """The key-value store of the default process group (what its processes met through).

    Private API: ``torch.distributed.distributed_c10d._get_default_store``. Fallback: an
    error that names it (only the message of a failed collective uses the store:
    :mod:`norms.distributed.forensics`).
    """
    get = _private_module("torch.distributed.distributed_c10d", "_get_default_store")
    if get is None:
        raise RuntimeError(
            "this torch has no torch.distributed.distributed_c10d._get_default_store: the "
            "default group's store cannot be reached"
        )
    return get()


def group_device_types(group) -> list[str]:
    """The device types (``"cpu"``, ``"cuda"``, ...) the backend of process group ``group``
    reduces.

    Private API: ``ProcessGroup._device_types``. Fallback: the public
    ``torch.distributed.Backend.backend_capability`` of the group's backend (``["cpu"]``
    for a backend it does not list).
    """
    import torch.distributed as dist

    types = _private(group, "_device_types")
    if types:
        return [torch.device(t).type for t in types]
    backend = str(dist.get_backend(group))
    return list(dist.Backend.backend_capability.get(backend, ["cpu"]))


def torch_batchnorm_classes() -> tuple[type, ...]:
    """The classes of ``torch.nn``'s BatchNorm layers, for ``isinstance``.

    Private API: ``torch.nn.modules.batchnorm._BatchNorm``, their base (what
    :meth:`torch.nn.SyncBatchNorm.convert_sync_batchnorm` looks for). Fallback: the public
    ``BatchNorm1d``/``2d``/``3d``, their lazy versions and ``SyncBatchNorm``.
    """
    base = _private_module("torch.nn.modules.batchnorm", "_BatchNorm")
    if base is not None:
        return (base,)
    nn = torch.nn
    return (
        nn.BatchNorm1d,
        nn.BatchNorm2d,
        nn.BatchNorm3d,
        nn.LazyBatchNorm1d,
        nn.LazyBatchNorm2d,
        nn.LazyBatchNorm3d,
        nn.SyncBatchNorm,
    )
