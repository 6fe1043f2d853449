"""What ``make grade`` (tools/grade.py) can tell a student about lost points without the
tests: read in the submission's code, not run.

:func:`diagnose` maps each question to what explains its lost points: a SyntaxError in the
answer to that question (with its line), a name its tests use that the notebook does not
define (or defines in a cell that does not parse), a function or method that is still the
template's (only ``...``) or returns nothing. A question's answer cells are the code cells
before its ``grader.check("qN")`` cell; a question's tests use the names of
:func:`tested_names`, and everything those names' code reads in turn.
"""

from __future__ import annotations

import ast
import builtins
import re
import zipfile
from pathlib import Path


def _answers_and_questions(nb) -> list[tuple[str | None, int, str]]:
    """(question, cell number, source) of every code cell of a submission: the question is
    the one of the next ``grader.check("qN")`` cell (None after the last)."""
    cells = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    out, pending = [], []
    for i, source in cells:
        check = _CHECK.search(source)
        if check:
            out += [(check.group(1), j, s) for j, s in pending]
            pending = []
        else:
            pending.append((i, source))
    return out + [(None, j, s) for j, s in pending]


#: a cell that checks a question (otter's student notebook has one after each question)
_CHECK = re.compile(r"""grader\.check\(\s*["'](\w+)["']\s*\)""")
#: names a notebook has without defining them (Python's builtins, IPython's)
_GIVEN = set(dir(builtins)) | {"get_ipython", "display", "In", "Out", "exit", "quit"}


def _python(source: str) -> str:
    """A cell's source as Python (IPython's magics and shell escapes turned into calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # IPython could not read it: parse it as it is
        return source


def _bound(node) -> set[str]:
    """The names a statement (or a function's body) binds, not looking into nested scopes."""
    names: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            if n is not node:
                continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names |= set(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        if isinstance(n, ast.Lambda) and n is not node:
            continue
        todo.extend(ast.iter_child_nodes(n))
    return names


def _uses(node) -> set[str]:
    """The global names a function or a class reads (those it does not bind itself)."""
    loads = {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    inner = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner |= {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
            inner |= _bound(n) if not isinstance(n, ast.Lambda) else set()
        elif isinstance(n, ast.comprehension):
            inner |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
    return loads - inner


def _stub(fn) -> bool:
    """Is a function still the template's: its body only ``...``, ``pass``, a docstring,
    ``raise NotImplementedError`` (and, in ``__init__``, ``super().__init__()``)?"""
    for stmt in fn.body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring or ``...``
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.unparse(stmt):
            continue
        if (
            fn.name == "__init__"
            and isinstance(stmt, ast.Expr)
            and ast.unparse(stmt.value).startswith("super().__init__(")
        ):
            continue
        return False
    return True


def _returns_nothing(fn) -> bool:
    """A function (not ``__init__``, not a generator) without a ``return`` of a value."""
    if fn.name.startswith("__") and fn.name != "__call__":
        return False
    own = list(ast.walk(fn))  # nested functions' returns count too: good enough
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own):
        return False
    return not any(
        isinstance(n, ast.Return)
        and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None)
        for n in own
    )


def tested_names(zip_path: Path) -> dict[str, set[str]]:
    """question -> the names its tests use (the parameters of its test functions that their
    bodies read), from the autograder's test files."""
    out = {}
    with zipfile.ZipFile(zip_path) as z:
        for n in z.namelist():
            if n.startswith("tests/") and n.endswith(".py"):
                tree = ast.parse(z.read(n).decode())
                out[Path(n).stem] = {
                    a.arg
                    for f in tree.body
                    if isinstance(f, ast.FunctionDef)
                    for a in f.args.args
                    if a.arg in _reads(f)
                }
    return out


def _reads(fn) -> set[str]:
    """Every name a function's code reads."""
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def diagnose(nb, needs: dict[str, set[str]]) -> dict[str, list[str]]:
    """question -> what, in the submission ``nb``, explains lost points there, read from
    its code without running it: a SyntaxError in the answer to a question (its line), a
    name the tests need that the notebook does not define (or defines in a cell that does
    not parse), a function that is still the template's (``...``) or returns nothing.
    ``needs``: question -> the names its tests take (:func:`tested_names`)."""
    cells = _answers_and_questions(nb)
    out: dict[str, list[str]] = {q: [] for q in needs}
    defined: set[str] = set()
    broken: dict[str, str] = {}  # name -> the SyntaxError that leaves it undefined
    uses: dict[str, set[str]] = {}  # a function's or class's name -> the globals it reads
    star = False
    parsed = []
    unfinished: dict[str, list[str]] = {}  # a function's or class's name -> what is missing
    for question, _, source in cells:
        try:
            tree = ast.parse(_python(source))
        except SyntaxError as exc:
            where = f"your answer to {question}" if question else "a cell after the last question"
            error = f"SyntaxError in {where}, line {exc.lineno} ({exc.msg})"
            if question in out:
                out[question].append(error)
            for name in re.findall(r"^\s*(?:def|class)\s+(\w+)", source, re.M):
                broken.setdefault(name, error)
            continue
        parsed.append((question, tree))
        for stmt in tree.body:
            defined |= _bound(stmt)
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                star = True  # names that cannot be known: no name is said to be undefined
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                uses[stmt.name] = _uses(stmt)
    for question, tree in parsed:
        if question not in out:
            continue
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fns = [(stmt.name, stmt)]
            elif isinstance(stmt, ast.ClassDef):
                fns = [
                    (f"{stmt.name}.{f.name}", f)
                    for f in stmt.body
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                ]
            else:
                continue
            for name, fn in fns:
                if _stub(fn):
                    missing = f"{name} is not implemented yet"
                elif _returns_nothing(fn):
                    missing = f"{name} returns nothing (None): not implemented yet?"
                else:
                    continue
                out[question].append(missing)
                unfinished.setdefault(stmt.name, []).append(missing)
    for question, roots in needs.items():
        mine = {n for q, t in parsed if q == question for s in t.body for n in _bound(s)}
        seen, todo = set(), list(roots | mine)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(uses.get(name, ()))
        for name in sorted(seen & set(unfinished)):  # another question's, used by this one's
            out[question] += unfinished[name]
        for name in sorted(seen - defined - _GIVEN):
            if name in broken:
                if broken[name] not in out[question]:
                    out[question].append(f"{name} is not defined: {broken[name]}")
            elif not star:
                out[question].append(f"{name} is not defined (the tests of {question} need it)")
    return {q: list(dict.fromkeys(m)) for q, m in out.items() if m}
