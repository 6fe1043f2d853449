"""Issue 39, item 1: every norms layer that has a torch twin holds torch's names.

``named_parameters``, ``named_buffers``, ``named_modules`` (names and the class names of the
submodules) and the ``state_dict`` (keys, shapes, dtypes, in torch's order) equal torch's, built
with the same arguments, for every combination of the boolean arguments of torch's constructor
(``affine``, ``track_running_stats``, ``elementwise_affine``, ``bias``, ``norm_first``,
``batch_first``...) and every activation kind. Optimizer groups, LoRA targets and checkpoint code
select parameters by these names.

The layers are found, not listed: every class and function of ``norms.modules.__all__`` and of
``norms.fast.fused.__all__`` (the compiled layers). A class's twin is the ``torch.nn`` class of its
name, or else the twin of the nearest norms layer it subclasses (``CompiledLayerNorm`` is a
``norms.LayerNorm``); a function's twin is the function of its name in
``torch.nn.utils.parametrizations``. Whatever has no twin is in :data:`NO_TWIN`, with the reason, so
that a new layer cannot be forgotten: it either meets torch's names or is listed here.
"""

from __future__ import annotations

import inspect
import itertools

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations

import norms
import norms.modules
from norms.fast import fused

#: norms' public layers and functions without a torch twin, and why.
NO_TWIN = {
    "Attention": "LLaMA's attention from primitives (wq, wk, wv, wo: Meta's names)",
    "LlamaBlock": "LLaMA's block (Meta's names)",
    "LlamaStack": "LLaMA's stack (Meta's names)",
    "SwiGLU": "LLaMA's MLP (Meta's names)",
    "MLP": "torch has the block only inside its transformer layers (checked there)",
    "DynamicTanh": "the authors' module is the reference (tests/test_dynamic_tanh.py)",
    "FrozenBatchNorm": "torchvision's FrozenBatchNorm2d, not torch.nn",
    "MaskedBatchNorm1d": "no torch twin",
    "BatchRenorm2d": "no torch twin",
    "FilterResponseNorm2d": "no torch twin",
    "GhostBatchNorm2d": "no torch twin",
    "StdConv2d": "timm's, not torch.nn",
    "ScaledStdConv2d": "timm's, not torch.nn",
    "convert_ln_to_dyt": "not a layer",
    "adaptive_clip_grad_": "acts on gradients, not a layer",
}

#: the values of the constructors' required arguments, by name
REQUIRED = {
    "num_features": 4,
    "normalized_shape": (3, 4),
    "num_groups": 2,
    "num_channels": 4,
    "d_model": 8,
    "nhead": 2,
}
#: arguments with more than two values worth building
EXTRA_VALUES = {"activation": ("relu", "gelu", nn.GELU)}  # a module activation is a child
#: modules a parametrization is put on, and its arguments
PARAMETRIZED = {
    "Linear": lambda: nn.Linear(5, 3),
    "Conv2d": lambda: nn.Conv2d(2, 4, 3),
}
PARAMETRIZATION_ARGS = {"dim": (0, 1, None), "n_power_iterations": (1, 3)}


def _public(module) -> dict[str, object]:
    return {name: getattr(module, name) for name in module.__all__}


def _norms_layers() -> dict[str, type]:
    """Every public Module class of norms.modules and norms.fast.fused, by a unique label."""
    found = {}
    for prefix, module in (("norms", norms.modules), ("norms.fast.fused", fused)):
        for name, obj in _public(module).items():
            if isinstance(obj, type) and issubclass(obj, nn.Module):
                found[f"{prefix}.{name}"] = obj
    return found


def _norms_functions() -> dict[str, object]:
    return {
        name: obj
        for name, obj in _public(norms.modules).items()
        if callable(obj) and not isinstance(obj, type)
    }


def torch_twin(cls: type) -> type | None:
    """The torch.nn class of ``cls``'s name, or of the nearest norms class it subclasses (a class
    listed in NO_TWIN, or derived from one, has none: GhostBatchNorm2d is a BatchNorm2d with other
    arguments)."""
    for base in cls.__mro__:
        if not base.__module__.startswith("norms."):
            continue
        if base.__name__ in NO_TWIN:
            return None
        twin = getattr(nn, base.__name__, None)
        if isinstance(twin, type) and issubclass(twin, nn.Module):
            return twin
    return None


def _variants(params: dict[str, inspect.Parameter]) -> list[dict]:
    """The required arguments, and every combination of the boolean ones (and EXTRA_VALUES)."""
    missing = [
        n
        for n, p in params.items()
        if p.default is inspect.Parameter.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and n not in REQUIRED
    ]
    assert not missing, f"add a value for the required argument(s) {missing} to REQUIRED"
    base = {n: REQUIRED[n] for n in params if n in REQUIRED}
    choices = {n: (False, True) for n, p in params.items() if isinstance(p.default, bool)}
    choices.update({n: v for n, v in EXTRA_VALUES.items() if n in params})
    names = list(choices)
    return [
        dict(base, **dict(zip(names, combo, strict=True)))
        for combo in itertools.product(*choices.values())
    ]


def _build(factory, kwargs: dict):
    """``factory(**kwargs)``, with a fresh module for every module-class value."""
    return factory(**{k: v() if isinstance(v, type) else v for k, v in kwargs.items()})


def layout(module: nn.Module) -> dict[str, list]:
    """The four name listings, in order, with what each name holds."""
    return {
        "named_parameters": [(n, tuple(p.shape), p.dtype) for n, p in module.named_parameters()],
        "named_buffers": [(n, tuple(b.shape), b.dtype) for n, b in module.named_buffers()],
        # the root is the layer under test (a compiled subclass has its own class name)
        "named_modules": [(n, type(m).__name__) for n, m in module.named_modules() if n],
        "state_dict": [(k, tuple(v.shape), v.dtype) for k, v in module.state_dict().items()],
    }


def assert_same_layout(ours: nn.Module, theirs: nn.Module, what: str) -> None:
    a, b = layout(ours), layout(theirs)
    for key in b:
        assert a[key] == b[key], (
            f"{what}: {key} differ from torch's\n  norms: {a[key]}\n  torch: {b[key]}"
        )


LAYERS = _norms_layers()
TWINS = {label: torch_twin(cls) for label, cls in LAYERS.items()}
FUNCTIONS = _norms_functions()


def test_every_layer_and_function_has_a_twin_or_a_reason():
    """A public norms layer with no torch twin must be listed in NO_TWIN; a listed one must not
    have a twin (the list is not stale)."""
    names = {label.rsplit(".", 1)[1] for label in LAYERS} | set(FUNCTIONS)
    unlisted = sorted(
        label
        for label, twin in TWINS.items()
        if twin is None and label.rsplit(".", 1)[1] not in NO_TWIN
    )
    assert not unlisted, f"no torch twin found for {unlisted}: add them to NO_TWIN with the reason"
    unlisted_fns = sorted(
        n for n in FUNCTIONS if not hasattr(parametrizations, n) and n not in NO_TWIN
    )
    assert not unlisted_fns, f"no torch twin found for {unlisted_fns}: add them to NO_TWIN"
    stale = sorted(
        n for n in NO_TWIN if hasattr(nn, n) or hasattr(parametrizations, n) or n not in names
    )
    assert not stale, f"NO_TWIN lists {stale}, which have a torch twin or are not in norms"
    # the enumeration found the layers it is about
    assert {"norms.TransformerEncoderLayer", "norms.BatchNorm2d", "norms.SyncBatchNorm"} <= {
        label for label, twin in TWINS.items() if twin is not None
    }
    assert {"weight_norm", "spectral_norm"} <= {n for n in FUNCTIONS if n not in NO_TWIN}


@pytest.mark.parametrize("label", sorted(label for label, twin in TWINS.items() if twin))
def test_layer_names_are_torch_s(label):
    ours_cls, theirs_cls = LAYERS[label], TWINS[label]
    params = inspect.signature(theirs_cls).parameters
    for kwargs in _variants(dict(params)):
        torch.manual_seed(0)
        ours = _build(ours_cls, kwargs)
        theirs = _build(theirs_cls, kwargs)
        assert_same_layout(ours, theirs, f"{label}({kwargs})")


@pytest.mark.parametrize("name", sorted(n for n in FUNCTIONS if n not in NO_TWIN))
@pytest.mark.parametrize("on", sorted(PARAMETRIZED))
def test_parametrization_names_are_torch_s(name, on):
    ours_fn, theirs_fn = FUNCTIONS[name], getattr(parametrizations, name)
    params = inspect.signature(theirs_fn).parameters
    options = {n: PARAMETRIZATION_ARGS[n] for n in params if n in PARAMETRIZATION_ARGS}
    for combo in itertools.product(*options.values()):
        kwargs = dict(zip(options, combo, strict=True))
        ours = ours_fn(PARAMETRIZED[on](), **kwargs)
        theirs = theirs_fn(PARAMETRIZED[on](), **kwargs)
        assert_same_layout(ours, theirs, f"{name}({on}, {kwargs})")
