"""Build the otter-grader assignments (``make assignments``) from their master notebooks.

Each ``assignments/NAME.ipynb`` is an otter-grader master notebook (otter's v1 format:
raw cells ``# ASSIGNMENT CONFIG``, ``# BEGIN QUESTION`` ... ``# END QUESTION``,
``# BEGIN SOLUTION`` ... ``# END SOLUTION`` around solution cells, in which
``# BEGIN SOLUTION`` / ``# END SOLUTION`` comment lines mark the code students write,
``# BEGIN TESTS`` ... ``# END TESTS`` around exception-based tests). ``otter assign`` turns
it into ``_build/assignments/NAME/student/NAME.ipynb`` (public tests only) and
``_build/assignments/NAME/autograder/`` (the autograder zip with the hidden tests, and the
solution notebook), and runs the tests on the solution.

Before that, every master is checked, and a broken one stops the build with the file and
the cell named: unbalanced markers (raw or in code), a solution cell without a marker
(students would get the solution), a question with neither a solution nor tests, tests
of a question before any solution.

Usage: ``python tools/assignments.py [--out DIR] [MASTER ...]`` (default: every
``assignments/*.ipynb``). Grade a submission locally, without Docker::

    otter run -a _build/assignments/NAME/autograder/NAME-autograder_*.zip -o OUT submission.ipynb
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
MASTERS = ROOT / "assignments"
OUT = ROOT / "_build" / "assignments"

_RAW = re.compile(r"#\s*(BEGIN|END)\s+(QUESTION|SOLUTION|TESTS|PROMPT)\b", re.I)
_LINE = re.compile(r"^\s*#\s*(BEGIN|END)\s+SOLUTION\b", re.I)
_SUFFIX = re.compile(r"#\s*SOLUTION(\s+NO\s+PROMPT)?\s*$", re.I)


class MasterError(ValueError):
    """A master notebook is malformed; the message names the file and the cell."""


def check_master(nb, path="master") -> list[str]:
    """Check a master notebook; return its question names. Raises MasterError."""
    if not nb.cells or not (
        nb.cells[0].cell_type == "raw"
        and nb.cells[0].source.lstrip().startswith("# ASSIGNMENT CONFIG")
    ):
        raise MasterError(f"{path} cell 0: the first cell must be a raw cell '# ASSIGNMENT CONFIG'")
    stack: list[tuple[str, int]] = []  # open raw blocks: (kind, cell)
    questions: list[str] = []
    question: dict | None = None
    any_solution = False
    for i, cell in enumerate(nb.cells):
        where = f"{path} cell {i}"
        if cell.cell_type == "raw":
            m = _RAW.match(cell.source.strip())
            if not m:
                continue
            edge, kind = m.group(1).upper(), m.group(2).upper()
            if edge == "BEGIN":
                if kind == "QUESTION":
                    if stack:
                        raise MasterError(
                            f"{where}: BEGIN QUESTION inside {stack[-1][0]} opened at cell "
                            f"{stack[-1][1]}"
                        )
                    name = re.search(r"^name:\s*(\S+)", cell.source, re.M)
                    question = {
                        "name": name.group(1) if name else f"cell {i}",
                        "cell": i,
                        "solution": False,
                        "tests": 0,
                    }
                    questions.append(question["name"])
                elif not stack or stack[-1][0] != "QUESTION":
                    raise MasterError(f"{where}: BEGIN {kind} outside a question")
                stack.append((kind, i))
            else:
                if not stack or stack[-1][0] != kind:
                    opened = (
                        f"{stack[-1][0]} opened at cell {stack[-1][1]}" if stack else "nothing open"
                    )
                    raise MasterError(f"{where}: END {kind} does not close anything ({opened})")
                stack.pop()
                if kind == "QUESTION":
                    if not question["solution"] and not question["tests"]:
                        raise MasterError(
                            f"{path} cell {question['cell']}: question {question['name']!r} has "
                            "neither a solution nor tests"
                        )
                    if question["tests"] and not any_solution:
                        raise MasterError(
                            f"{path} cell {question['cell']}: question {question['name']!r} has "
                            "tests but no solution above it to grade"
                        )
                    question = None
            continue
        if cell.cell_type != "code":
            continue
        inside = stack[-1][0] if stack else None
        if inside == "SOLUTION":
            question["solution"] = any_solution = True
            depth, marked = 0, False
            for n, line in enumerate(cell.source.splitlines(), 1):
                m = _LINE.match(line)
                if m and m.group(1).upper() == "BEGIN":
                    if depth:
                        raise MasterError(
                            f"{where} line {n}: BEGIN SOLUTION inside another BEGIN SOLUTION"
                        )
                    depth, marked = 1, True
                elif m:
                    if not depth:
                        raise MasterError(f"{where} line {n}: END SOLUTION without BEGIN SOLUTION")
                    depth = 0
                elif _SUFFIX.search(line):
                    marked = True
            if depth:
                raise MasterError(f"{where}: BEGIN SOLUTION without END SOLUTION")
            if not marked:
                raise MasterError(
                    f"{where}: a solution cell without '# BEGIN SOLUTION' ... '# END SOLUTION' "
                    "(students would get the whole solution)"
                )
        elif inside == "TESTS":
            question["tests"] += 1
        elif _LINE.match(cell.source) or re.search(
            r"^\s*#\s*(BEGIN|END)\s+SOLUTION", cell.source, re.M | re.I
        ):
            raise MasterError(
                f"{where}: a solution marker outside a raw '# BEGIN SOLUTION' ... '# END SOLUTION' "
                "block (otter would leave it in the student notebook)"
            )
    if stack:
        raise MasterError(f"{path} cell {stack[-1][1]}: BEGIN {stack[-1][0]} is never ended")
    if not questions:
        raise MasterError(f"{path}: no question")
    return questions


def build(args) -> str:
    master, out = Path(args[0]), Path(args[1])
    shown = master.relative_to(ROOT) if master.is_relative_to(ROOT) else master
    check_master(nbformat.read(master, as_version=4), shown)
    dest = out / master.stem
    shutil.rmtree(dest, ignore_errors=True)
    otter = Path(sys.executable).with_name("otter")
    run = subprocess.run(
        [str(otter), "assign", str(master), str(dest)], capture_output=True, text=True
    )
    if run.returncode != 0:
        raise RuntimeError(
            f"otter assign failed on {shown}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        )
    return str(shown)


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("masters", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="only check the master notebooks")
    args = parser.parse_args(argv)
    masters = [m.resolve() for m in args.masters] or sorted(MASTERS.glob("*.ipynb"))
    for master in masters:  # every master is checked before any is built
        shown = master.relative_to(ROOT) if master.is_relative_to(ROOT) else master
        try:
            check_master(nbformat.read(master, as_version=4), shown)
        except MasterError as exc:
            print(f"assignments: {exc}", file=sys.stderr)
            return 2
    if args.check:
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=2) as pool:
        for shown in pool.map(build, [(m, args.out) for m in masters]):
            print(
                f"assignment built: {shown} -> "
                f"{args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
