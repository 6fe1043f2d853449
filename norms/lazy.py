"""Submodules that load on first use: the ``__getattr__`` of norms' package ``__init__`` files.

``import norms`` loads torch and the layers only; ``norms.plots``, ``norms.lab.training`` and
the other teaching tools load when first used. A package gets that with one line::

    __getattr__ = lazy_submodules(__name__)

This module imports nothing of norms, so every package can use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from types import ModuleType

__all__ = ["lazy_submodules"]


def lazy_submodules(
    package: str, names: Collection[str] | None = None
) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` (PEP 562) for the package named ``package``: ``package.x``
    imports the submodule ``package.x`` the first time it is read.

    Args:
        package: the package's ``__name__``.
        names: the submodules that load this way; ``None``: any submodule.

    Returns:
        the ``__getattr__`` function. A name that is not such a submodule raises
        ``AttributeError``, as for any module; an import error inside the submodule (a
        missing optional dependency) is raised as it is.

    Example::

        >>> import sys, norms
        >>> from norms.lazy import lazy_submodules
        >>> getattr_ = lazy_submodules("norms", ["glue"])
        >>> getattr_("glue") is sys.modules["norms.glue"]
        True
        >>> getattr_("nonsense")
        Traceback (most recent call last):
        ...
        AttributeError: module 'norms' has no attribute 'nonsense'
    """

    def __getattr__(name: str) -> ModuleType:
        if names is None or name in names:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":  # the submodule exists, one of its imports not
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    __getattr__.__qualname__ = f"{package}.__getattr__"
    return __getattr__
