"""Issue 39, item 7: every docstring example of norms/ runs and prints what it shows.

Every module of the package (found from the files, so a new module is not forgotten) is
imported and its examples run with :mod:`doctest` (``ELLIPSIS``), each docstring from
``torch.manual_seed(0)``. A module that cannot be imported because an optional dependency is
missing is skipped with the dependency's name; any other import error fails. Every layer and
function of ``norms.modules`` shows an example.
"""

from __future__ import annotations

import doctest
import importlib
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import norms.modules

ROOT = Path(__file__).resolve().parents[1]


def module_names() -> list[str]:
    """Every module of norms/, as its dotted name."""
    names = []
    for path in sorted((ROOT / "norms").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = module_names()


def run_examples(module) -> tuple[int, list[str]]:
    """(examples run, failure reports) of every docstring of ``module``, each from seed 0."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    failures: list[str] = []
    for test in finder.find(module, module.__name__):
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        out: list[str] = []
        result = runner.run(test, out=out.append, clear_globs=True)
        if result.failed:
            failures.append("".join(out))
    return runner.tries, failures


def import_or_skip(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("norms"):
            pytest.skip(f"{name} needs the optional dependency {exc.name!r}, not installed")
        raise


def test_every_module_is_found():
    assert {"norms", "norms.modules.transformer", "norms.check.grader"} <= set(MODULES)
    assert len(MODULES) == len(list((ROOT / "norms").rglob("*.py")))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    tried, failures = run_examples(import_or_skip(name))
    assert not failures, f"{name}: {len(failures)} docstring(s) fail\n" + "\n".join(failures)


def test_a_failing_example_fails():
    """The runner reports a wrong output (so an empty or blind runner cannot pass)."""
    import types

    bad = types.ModuleType("bad_example")
    bad.__doc__ = ">>> 1 + 1\n3\n"
    tried, failures = run_examples(bad)
    assert tried == 1 and len(failures) == 1 and "Expected:\n    3" in failures[0]


@pytest.mark.parametrize("name", norms.modules.__all__)
def test_every_layer_shows_an_example(name):
    doc = getattr(norms.modules, name).__doc__ or ""
    assert ">>>" in doc, f"norms.modules.{name}'s docstring has no example"
