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

Around ``otter assign``: every test function that calls ``own_code(make, *shape)`` gets
:data:`OWN_CODE` (a layer that is, extends or calls torch's or norms' normalization scores
zero for that test), and the student notebook's setup cell writes the public tests next
to the notebook (otter 7 cannot read them from the notebook on Colab or under another
file name); each question's title gets its points.

An assignment is built only when its sources changed since its last build: its master,
the package ``norms`` (the autograder installs a wheel of it), ``pyproject.toml``,
``requirements.txt`` and this file (their digest is stored in ``NAME/.sources``);
``--force`` builds anyway; ``--no-run-tests`` builds without running the tests on the solution
(``make test`` passes it: tests/test_assignments.py grades the solution itself, through the
autograder's test files and through ``make grade``). Builds are safe to run at the same time as
other builds and as ``make grade``: the wheel is built from a copy of the tree in a fresh
temporary folder (never in the tree's ``build/``, which an interrupted build would leave
behind), each assignment is built into a fresh folder next to ``NAME/`` and then put in its
place (under a lock that readers, :func:`locked`, share), and two builds of one assignment run
one after the other (the second finds it up to date).

Each built assignment also gets its Chinese student notebook, ``NAME/student/zh/NAME.ipynb``
(:func:`write_chinese`): the markdown translated from ``locales/zh_CN/assignments/NAME.po``,
the code the same, so the same autograder grades it.

Usage: ``python tools/assignments.py [--out DIR] [--force] [--no-run-tests] [MASTER ...]``
(default: every ``assignments/*.ipynb``). Grade a class with ``make grade``
(``tools/grade.py``), or one submission locally, without Docker::

    cd _build/assignments/NAME/autograder && mkdir -p results
    otter run -a NAME-autograder_*.zip -o results path/to/submission.ipynb
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
MASTERS = ROOT / "assignments"
OUT = ROOT / "_build" / "assignments"

_RAW = re.compile(r"#\s*(BEGIN|END)\s+(QUESTION|SOLUTION|TESTS|PROMPT)\b", re.I)
_LINE = re.compile(r"^\s*#\s*(BEGIN|END)\s+SOLUTION\b", re.I)
_SUFFIX = re.compile(r"#\s*SOLUTION(\s+NO\s+PROMPT)?\s*$", re.I)


#: the check every test that calls ``own_code(make, *shape)`` runs first: a layer that is,
#: extends or calls torch's or norms' normalization scores zero for that test. Written once
#: here and put inside each such test function by :func:`prepare` (otter keeps only the
#: test function of a test cell).
OWN_CODE = '''
def own_code(make, *shape):
    """Zero for this part when the layer is, extends or calls torch's or norms' normalization."""
    import os
    import sys

    import norms
    import torch
    import torch.nn.functional as F

    layer = make()
    library = ("norms", "torch.nn.modules.batchnorm", "torch.nn.modules.normalization",
               "torch.nn.modules.instancenorm")
    for m in layer.modules():
        for k in type(m).__mro__:
            assert not (k.__module__ or "").startswith(library), (
                f"{type(m).__name__} is or extends {k.__module__}.{k.__name__}: write the layer "
                "yourself; a layer of torch.nn or norms scores zero for this part")
    names = ["batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm",
             "native_batch_norm", "native_layer_norm", "native_group_norm"]
    banned = {getattr(mod, n) for mod in (F, torch) for n in names if hasattr(mod, n)}
    package = os.path.dirname(norms.__file__)
    seen = set()

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in banned:
                seen.add(f"torch's {func.__name__}")
            return func(*args, **(kwargs or {}))

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            seen.add("norms." + frame.f_globals.get("__name__", "?").removeprefix("norms."))

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).requires_grad_()
    sys.setprofile(profile)
    try:
        with Spy():
            layer(x).sum().backward()
    finally:
        sys.setprofile(None)
    assert not seen, (
        f"your layer calls {', '.join(sorted(seen))}: write the normalization yourself; "
        "calling the library's scores zero for this part")
'''

#: where the student notebook's setup cell writes the public tests (next to the notebook)
TESTS_DIR = "{name}-tests"

#: the line of every master's setup cell that :func:`student_notebook` replaces
GRADER_LINE = re.compile(r'^grader = otter\.Notebook\("[^"]*"\)$', re.M)


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


def torch_pin() -> str:
    """The pinned torch of requirements.txt (``torch==X``)."""
    return re.search(r"^torch==\S+", (ROOT / "requirements.txt").read_text(), re.M).group(0)


def pins() -> list[str]:
    """What the autograders' environment installs besides otter-grader (which otter pins):
    the pinned torch, and every other dependency of ``norms`` (``pyproject.toml``) at its pin
    in requirements.txt, so that Gradescope grades with the versions tested here."""
    import tomllib

    pinned = dict(
        (m.group(1).lower(), m.group(0))
        for m in re.finditer(
            r"^([A-Za-z0-9_.-]+)==\S+", (ROOT / "requirements.txt").read_text(), re.M
        )
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower() for d in project["dependencies"]]
    missing = [n for n in names if n not in pinned]
    if missing:
        raise RuntimeError(
            f"requirements.txt pins no version of {', '.join(missing)} (norms needs it)"
        )
    return [pinned[n] for n in names]


#: what a wheel of norms is built from (copied into a fresh folder first)
PACKAGE = ("norms", "pyproject.toml", "README.md")
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info", "build")


def names() -> list[str]:
    """The assignments: the master notebooks of ``assignments/``."""
    return sorted(p.stem for p in MASTERS.glob("*.ipynb"))


def sources(master: Path) -> str:
    """A digest of everything an assignment's build depends on: the master, the package
    ``norms``, ``pyproject.toml``, ``requirements.txt``, this file and the Python version."""
    h = hashlib.sha256(f"python {sys.version_info[:2]}\n".encode())
    files = [Path(master), ROOT / "requirements.txt", Path(__file__).resolve()]
    for part in PACKAGE:
        path = ROOT / part
        files += sorted(
            p
            for p in (path.rglob("*") if path.is_dir() else [path])
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")
        )
    for f in files:
        name = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f.name
        h.update(f"{name}\n".encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


#: the file, in an assignment's folder, that holds the digest of its sources
STAMP = ".sources"


def up_to_date(master: Path, out: Path = OUT) -> bool:
    """Is ``out/NAME`` built from the sources of ``master`` as they are now?"""
    stamp = Path(out) / Path(master).stem / STAMP
    return stamp.exists() and stamp.read_text() == sources(master)


@contextlib.contextmanager
def locked(out: Path, name: str, shared: bool = False, what: str = "swap"):
    """Hold the lock ``what`` of the assignment ``name`` in ``out``: "swap" (shared by the
    readers of ``out/NAME``, exclusive while a build puts a new ``out/NAME`` in place) or
    "build" (one build of an assignment at a time)."""
    folder = Path(out) / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.{what}", "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_wheel(out: Path) -> Path:
    """A wheel of ``norms`` in the fresh folder ``out``, built from a copy of this tree (so
    that no build writes ``build/`` or ``*.egg-info`` into the tree, where an interrupted or
    concurrent build would make the next one fail), for the autograders' environment."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="norms-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for part in PACKAGE:
            if (ROOT / part).is_dir():
                shutil.copytree(ROOT / part, src / part, ignore=_NOT_SOURCE)
            else:
                shutil.copyfile(ROOT / part, src / part)
        run = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
            + ["-w", str(out), str(src)],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
    wheels = sorted(out.glob("norms-*.whl"))
    if run.returncode != 0 or not wheels:
        raise RuntimeError(f"could not build a wheel of norms:\n{run.stderr[-2000:]}")
    return wheels[0]


def prepare(nb, wheel: str | None = None):
    """A copy of a master with :data:`OWN_CODE` inside every test function that calls it,
    and (with ``wheel``, a file name) a configuration whose autograder environment has this
    venv's Python version and installs the pinned torch, norms' other dependencies at their
    pins (:func:`pins`) and that wheel of norms (otter puts the wheel in the zip's ``files/``;
    Gradescope builds the environment from the zip's ``environment.yml``)."""
    nb = nbformat.from_dict(nb)
    if wheel is not None:
        config = nb.cells[0].source
        config = re.sub(r"^files:.*$", f"files: [{wheel}]", config, flags=re.M)
        # the Python of this venv (otter's default is another one)
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        nb.cells[0].source = (
            config.rstrip("\n") + f'\nrequirements: requirements.txt\npython_version: "{python}"\n'
        )
    body = "".join("    " + line if line.strip() else line for line in OWN_CODE.splitlines(True))
    for cell in nb.cells:
        if cell.cell_type == "code" and "own_code(" in cell.source:
            cell.source = re.sub(
                r"^(def test_\w+\(.*\):\n)", lambda m: m.group(1) + body, cell.source, flags=re.M
            )
    return nb


def points(nb) -> dict[str, tuple[float, float]]:
    """question -> (public points, hidden points), from the tests' configs."""
    out, question = {}, None
    for cell in nb.cells:
        if cell.cell_type == "raw" and re.match(r"#\s*BEGIN QUESTION", cell.source):
            question = re.search(r"^name:\s*(\S+)", cell.source, re.M).group(1)
            out[question] = (0.0, 0.0)
        config = re.search(r"# BEGIN TEST CONFIG\n(.*?)\"\"\" # END TEST CONFIG", cell.source, re.S)
        if cell.cell_type == "code" and config and question:
            pts = float(re.search(r"points:\s*([\d.]+)", config.group(1)).group(1))
            hidden = re.search(r"hidden:\s*true", config.group(1)) is not None
            public, secret = out[question]
            out[question] = (public, secret + pts) if hidden else (public + pts, secret)
    return out


def student_notebook(path: Path, name: str, pts: dict) -> None:
    """Make otter's student notebook run where students work, under any file name.

    otter 7 reads the public tests from the notebook's own file (not found on Colab, which
    keeps notebooks in Drive, nor under another name): the setup cell writes them into
    ``NAME-tests/`` next to the notebook and opens the grader on that folder, which otter
    supports everywhere (Colab, Jupyter, JupyterHub). Each question's points are added to
    its title."""
    nb = nbformat.read(path, as_version=4)
    otter_metadata = nb.metadata.get("otter", {})
    tests = otter_metadata.pop("tests", {})
    otter_metadata.pop("OK_FORMAT", None)  # otter reads the two together
    folder = TESTS_DIR.format(name=name)
    block = (
        "# The public tests, written next to this notebook: otter finds them there on Colab,\n"
        "# Jupyter and JupyterHub, whatever this file is called.\n"
        "import pathlib\n\n"
        f"PUBLIC_TESTS = {tests!r}\n"
        f"pathlib.Path({folder!r}).mkdir(exist_ok=True)\n"
        "for _question, _source in PUBLIC_TESTS.items():\n"
        f"    (pathlib.Path({folder!r}) / f'{{_question}}.py').write_text(_source)\n"
        f"grader = otter.Notebook(tests_dir={folder!r})"
    )
    setup = [c for c in nb.cells if c.cell_type == "code" and GRADER_LINE.search(c.source)]
    if len(setup) != 1:
        raise RuntimeError(f"{path}: no setup cell with one '{GRADER_LINE.pattern}' line")
    setup[0].source = GRADER_LINE.sub(lambda _: block, setup[0].source)
    titles = [
        c for c in nb.cells if c.cell_type == "markdown" and re.match(r"\*\*Question \d+", c.source)
    ]
    for cell, (question, (public, hidden)) in zip(titles, pts.items(), strict=True):
        cell.source += (
            f"\n\n*{public + hidden:g} point{'s' * (public + hidden != 1)} ({question}): "
            f"{public:g} from the public tests "
            f"that `grader.check({question!r})` runs, {hidden:g} from hidden tests run after "
            "you submit.*"
        )
    nbformat.write(nb, path)


def fresh_folder(prefix: str, parent: Path) -> Path:
    """A new empty folder in ``parent``, readable as a folder made by ``mkdir`` would be
    (``tempfile.mkdtemp`` makes a private one)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    mask = os.umask(0)
    os.umask(mask)
    folder.chmod(0o777 & ~mask)
    return folder


def build(args) -> str:
    """Build one assignment into a fresh folder and put it in place of ``out/NAME``; return
    what was done, for the log. Skipped when another build made it up to date meanwhile
    (unless ``force``)."""
    master, out, wheel, force, run_tests = args
    master, out, wheel = Path(master), Path(out), Path(wheel)
    shown = master.relative_to(ROOT) if master.is_relative_to(ROOT) else master
    with locked(out, master.stem, what="build"):
        digest = sources(master)
        if not force and up_to_date(master, out):
            return f"assignment up to date: {shown}"
        new = fresh_folder(f".{master.stem}-new-", out)
        try:
            _build_into(master, shown, new, wheel, run_tests)
            (new / STAMP).write_text(digest)
            old = Path(tempfile.mkdtemp(prefix=f".{master.stem}-old-", dir=out))
            with locked(out, master.stem):  # no reader sees a half-swapped folder
                dest = out / master.stem
                if dest.exists():
                    dest.rename(old / master.stem)
                new.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(new, ignore_errors=True)
    where = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    return f"assignment built: {shown} -> {where}"


def _build_into(master: Path, shown, dest: Path, wheel: Path, run_tests: bool = True) -> None:
    """``otter assign`` of ``master`` into ``dest`` (which runs the tests on the solution, unless
    not ``run_tests``), then the student notebook's setup."""
    nb = nbformat.read(master, as_version=4)
    check_master(nb, shown)
    otter = Path(sys.executable).with_name("otter")
    with tempfile.TemporaryDirectory() as tmp:
        prepared = Path(tmp) / master.name
        nbformat.write(prepare(nb, wheel.name), prepared)
        shutil.copyfile(wheel, Path(tmp) / wheel.name)
        # relative to environment.yml in the zip, where the wheel is files/NAME
        (Path(tmp) / "requirements.txt").write_text(
            "".join(f"{p}\n" for p in [*pins(), f"files/{wheel.name}"])
        )
        flags = [] if run_tests else ["--no-run-tests"]
        run = subprocess.run(
            [str(otter), "assign", *flags, str(prepared), str(dest.resolve())],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
    if run.returncode != 0:
        raise RuntimeError(
            f"otter assign failed on {shown}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        )
    (dest / "student" / wheel.name).unlink(missing_ok=True)  # the reference: not for students
    student_notebook(dest / "student" / master.name, master.stem, points(nb))


def master_of(arg) -> Path:
    """The master notebook named by a path or by an assignment's name; SystemExit listing
    the assignments when there is none."""
    path = Path(arg)
    if path.suffix != ".ipynb" and str(arg) in names():
        path = MASTERS / f"{arg}.ipynb"
    if not path.is_file():
        raise SystemExit(
            f"assignments: no assignment {str(arg)!r}: the assignments are {', '.join(names())}"
        )
    return path.resolve()


def ensure(
    masters, out: Path = OUT, force: bool = False, log=print, run_tests: bool = True
) -> None:
    """Build every assignment of ``masters`` whose sources changed (all with ``force``); the
    wheel of norms only when one is built. ``run_tests``: otter assign runs the tests on the
    solution."""
    out = Path(out)
    todo = [m for m in masters if force or not up_to_date(m, out)]
    for master in masters:
        if master not in todo:
            log(f"assignment up to date: {master.stem}")
    if not todo:
        return
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="norms-wheel-out-") as tmp:
        wheel = build_wheel(Path(tmp))
        if len(todo) == 1:
            log(build((todo[0], out, wheel, force, run_tests)))
            return
        with ProcessPoolExecutor(max_workers=2) as pool:
            for done in pool.map(build, [(m, out, wheel, force, run_tests) for m in todo]):
                log(done)


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("masters", nargs="*", help="master notebooks or assignment names")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="only check the master notebooks")
    parser.add_argument("--force", action="store_true", help="build even when up to date")
    parser.add_argument(
        "--no-run-tests",
        dest="run_tests",
        action="store_false",
        help="do not run the tests on the solution (make test grades it itself)",
    )
    args = parser.parse_args(argv)
    masters = [master_of(m) for m in args.masters] or sorted(MASTERS.glob("*.ipynb"))
    for master in masters:  # every master is checked before any is built
        shown = master.relative_to(ROOT) if master.is_relative_to(ROOT) else master
        try:
            check_master(nbformat.read(master, as_version=4), shown)
        except MasterError as exc:
            print(f"assignments: {exc}", file=sys.stderr)
            return 2
    if args.check:
        return 0
    ensure(
        masters,
        args.out.resolve(),
        args.force,
        log=lambda s: print(s, flush=True),
        run_tests=args.run_tests,
    )
    for master in masters:
        write_chinese(master.stem, args.out.resolve())
    return 0


def write_chinese(name: str, out: Path = OUT) -> Path:
    """The Chinese student notebook of a built assignment, ``NAME/student/zh/NAME.ipynb``:
    the student notebook with its markdown from the assignment's catalog
    (``locales/zh_CN/assignments/NAME.po``, ``make translations``), the same code, so the
    same autograder grades it. Cheap: written on every run, never a reason to rebuild."""
    import i18n

    with locked(out, name):
        student = out / name / "student" / f"{name}.ipynb"
        target = student.parent / "zh" / student.name
        target.parent.mkdir(exist_ok=True)
        nbformat.write(i18n.chinese_assignment(student, name), target)
    return target


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
