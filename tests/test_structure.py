"""The layout of norms/: imports point one way, no cycles, small modules, a light ``import norms``.

The import graph is read from the source (every ``import`` statement, those inside
functions included), so a cycle hidden in a function-level import fails here too.
Python imports a module's parent packages first; those implicit edges are not in the
graph. ``norms/__init__.py`` loads its lazy subpackages by name, so it has an edge to
each of them: a submodule that writes ``import norms`` then closes a cycle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "norms"
MAX_LINES = 800

sys.path.insert(0, str(ROOT / "tools"))
import architecture  # noqa: E402

#: What each part of norms/ may import from the others (tools/architecture.py, the README's
#: diagram): the maths at the bottom, the layers on it, the teaching tools on top.
ALLOWED = {name: set(imports) for name, (_, imports) in architecture.PARTS.items()}
LAYERS = set(architecture.EAGER)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(importer: str, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    is_package = MODULES[importer].name == "__init__.py"
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str) -> set[str]:
    """The norms modules ``name`` imports, anywhere in its source."""
    tree = ast.parse(MODULES[name].read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, node.level, node.module)
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in MODULES else target)
    if name == "norms":  # the lazy subpackages of norms/__init__.py
        tree_lazy = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
        for node in tree_lazy:
            if any(getattr(t, "id", "") == "_LAZY" for t in node.targets):
                found |= {f"norms.{c.value}" for c in node.value.elts}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def part(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_graph_is_read_from_the_source():
    """The reader of the graph finds the edges it must (so an empty graph cannot pass)."""
    assert "norms.functional" in GRAPH["norms.modules.layernorm"]
    assert "norms.modules.syncbatchnorm" in GRAPH["norms.quiz.syncbatchnorm"]
    assert "norms.quiz" in GRAPH["norms"] and "norms.modules" in GRAPH["norms"]


def test_no_import_cycle():
    assert find_cycle(GRAPH) is None, " -> ".join(find_cycle(GRAPH))


def test_cycle_finder_finds_a_cycle():
    graph = {**GRAPH, "norms.axes": GRAPH["norms.axes"] | {"norms"}}
    assert find_cycle(graph) is not None


def test_imports_point_one_way():
    wrong = []
    for name, targets in GRAPH.items():
        here = part(name)
        if here is None:
            continue
        for target in targets:
            there = part(target)
            if there is not None and there != here and there not in ALLOWED[here]:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_every_part_is_listed():
    assert {part(n) for n in MODULES if part(n)} == set(ALLOWED)


def test_the_two_explorer_front_ends_do_not_import_each_other():
    web = {n for n in MODULES if n.startswith("norms.explore.web")}
    assert not GRAPH["norms.explore.widgets"] & web
    assert all("norms.explore.widgets" not in GRAPH[n] for n in web)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines (at most {MAX_LINES})"


def test_import_norms_loads_torch_and_the_layers_only():
    code = (
        "import json, sys\n"
        "import norms\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'norms' or m.startswith(('norms.', "
        "'matplotlib', 'ipywidgets', 'jupyterquiz', 'IPython', 'sklearn')))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    loaded = json.loads(out.splitlines()[-1])
    heavy = [m for m in loaded if not m.startswith("norms")]
    assert not heavy, f"import norms loads {heavy}"
    assert {part(m) for m in loaded if part(m)} <= LAYERS, loaded
    assert "norms.modules.batchnorm" in loaded


def test_lazy_subpackages_load_on_first_use():
    code = "import norms, sys; norms.quiz.questions_for; print('norms.quiz' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "True"
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        import norms

        norms.nonsense  # noqa: B018


def test_readme_shows_the_architecture():
    readme = (ROOT / "README.md").read_text()
    assert architecture.diagram() in readme, "README.md: paste `python tools/architecture.py`"


def test_parts_are_listed_bottom_up():
    seen: set[str] = set()
    for name, (_, imports) in architecture.PARTS.items():
        assert set(imports) <= seen, f"{name} imports a part listed after it"
        seen.add(name)


LAZY_PACKAGES = (
    "norms",
    "norms.distributed",
    "norms.explore",
    "norms.fast",
    "norms.lab",
    "norms.plots",
)


def test_one_lazy_getattr():
    """Issue 39, item 8: the packages that load submodules on first use share one helper,
    ``norms.lazy.lazy_submodules``, instead of a copy of ``__getattr__`` each."""
    import importlib

    copies = [
        name
        for name, path in MODULES.items()
        if name != "norms.lazy" and "\ndef __getattr__(" in path.read_text()
    ]
    assert not copies, f"a module __getattr__ of its own in {copies}: use norms.lazy"
    for name in LAZY_PACKAGES:
        package = importlib.import_module(name)
        assert package.__getattr__.__module__ == "norms.lazy", name
        with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'nonsense'"):
            package.nonsense  # noqa: B018


# --- Short functions, private names kept private, one meaning for ``F`` (issue 39) -------

MAX_FUNCTION_LINES = 80

#: Functions over MAX_FUNCTION_LINES that someone is splitting now: (module, function) ->
#: who. Must be empty once they are done; a new entry is a new long function.
LONG_FUNCTIONS_BEING_SPLIT: dict[tuple[str, str], str] = {}

#: torch's own private base classes, kept under torch's names (``torch.nn.modules.batchnorm``
#: has ``_NormBase`` and ``_BatchNorm``, imported across its files the same way): a reader
#: who knows torch finds them where torch has them.
TORCH_PRIVATE_NAMES = {"_NormBase", "_BatchNorm"}

#: Modules that still use another module's underscore names, being fixed now: module -> who.
#: Must be empty once they are done.
PRIVATE_USE_BEING_FIXED: dict[str, str] = {}

#: Modules where ``F`` is still ``torch.nn.functional``, being renamed now: module -> who.
F_BEING_RENAMED: dict[str, str] = {}


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """The functions and methods of ``source`` longer than ``limit`` lines: (name, lines)."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > limit
    ]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(name: str, source: str, modules=None) -> list[str]:
    """Where module ``name`` uses another norms module's underscore names.

    Two ways: ``from .x import _y`` and ``x._y`` with ``x`` bound to a norms module
    (``from . import functional as F`` then ``F._channel_view``). ``modules`` is the set of
    norms module names (all of them by default).
    """
    modules = MODULES if modules is None else modules
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> the norms module it is
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(name, node.level, node.module)
            if not target.startswith("norms"):
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                if child in modules:
                    bound[alias.asname or alias.name] = child
                elif _is_private(alias.name) and alias.name not in TORCH_PRIVATE_NAMES:
                    found.append(f"line {node.lineno}: from {target} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("norms.") and alias.asname:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and _is_private(node.attr)
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def f_bindings(source: str) -> list[str]:
    """What the name ``F`` is bound to by the imports of ``source`` (dotted module names)."""
    bound = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bound += [a.name for a in node.names if a.asname == "F"]
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            for alias in node.names:
                if (alias.asname or alias.name) == "F":
                    bound.append(f"{prefix}.{alias.name}" if node.module else prefix + alias.name)
    return bound


def _means_norms_functional(name: str, binding: str) -> bool:
    if not binding.startswith("."):
        return binding == "norms.functional"
    level = len(binding) - len(binding.lstrip("."))
    rest = binding[level:]
    module, _, attr = rest.rpartition(".") if "." in rest else ("", "", rest)
    return _resolve(name, level, module or None) + f".{attr}" == "norms.functional"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_functions_are_short(name):
    long = [
        f"{fn} ({n} lines)"
        for fn, n in long_functions(MODULES[name].read_text())
        if (name, fn) not in LONG_FUNCTIONS_BEING_SPLIT
    ]
    assert not long, f"{MODULES[name]}: over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


def test_the_long_function_rule_can_fail():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions(f"class C:\n  def m(self):\n{body}\n") == [("m", 81)]
    assert long_functions("def f():\n    return 1\n") == []


def test_long_function_allow_list_is_current():
    """An entry that is no longer long (or gone) leaves the list: it can only shrink."""
    for (name, fn), who in LONG_FUNCTIONS_BEING_SPLIT.items():
        still = [f for f, _ in long_functions(MODULES[name].read_text())] if name in MODULES else []
        assert fn in still, f"{name}.{fn} ({who}) is short now: drop it from the list"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_use_of_another_modules_private_names(name):
    if name in PRIVATE_USE_BEING_FIXED:
        return
    found = private_uses(name, MODULES[name].read_text())
    assert not found, f"{MODULES[name]} uses private names of other modules:\n" + "\n".join(found)


def test_the_private_name_rule_can_fail():
    modules = {"norms.functional", "norms.modules", "norms.modules.layernorm", "norms"}
    uses = private_uses(
        "norms.modules.layernorm",
        "from .. import functional as F\nfrom ..functional import _affine, affine\n"
        "y = F._channel_view(x)\nz = F.layer_norm(x)\n",
        modules,
    )
    assert uses == [
        "line 2: from norms.functional import _affine",
        "line 3: F._channel_view",
    ]
    assert private_uses("norms.modules.layernorm", "import torch\ntorch._C\n", modules) == []


def test_private_name_allow_list_is_current():
    for name, who in PRIVATE_USE_BEING_FIXED.items():
        assert name in MODULES and private_uses(name, MODULES[name].read_text()), (
            f"{name} ({who}) uses no private names now: drop it from the list"
        )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_f_means_norms_functional(name):
    if name in F_BEING_RENAMED:
        return
    wrong = [
        b for b in f_bindings(MODULES[name].read_text()) if not _means_norms_functional(name, b)
    ]
    assert not wrong, f"{MODULES[name]} binds F to {wrong}; F means norms.functional"


def test_the_f_rule_can_fail():
    name = "norms.modules.layernorm"
    assert [
        _means_norms_functional(name, b) for b in f_bindings("from .. import functional as F\n")
    ] == [True]
    assert [
        _means_norms_functional(name, b)
        for b in f_bindings(
            "import torch.nn.functional as F\nfrom torch.nn import functional as F\n"
        )
    ] == [False, False]
    assert f_bindings("import norms.functional as F\n") == ["norms.functional"]


def test_f_allow_list_is_current():
    for name, who in F_BEING_RENAMED.items():
        bindings = f_bindings(MODULES[name].read_text())
        assert any(not _means_norms_functional(name, b) for b in bindings), (
            f"{name} ({who}) binds F to norms.functional now: drop it from the list"
        )
