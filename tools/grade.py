"""Grade a whole class without Docker (``make grade ASSIGNMENT=NAME SUBMISSIONS=FOLDER``).

Every ``*.ipynb`` of the submissions folder and of its subfolders (one folder per student,
as a learning platform exports them; ``.ipynb_checkpoints`` left out) is graded by
``otter run`` with the assignment's autograder (``_build/assignments/NAME/autograder/``,
built first, and only, when its sources changed: ``tools/assignments.py``), each in its
own process, in a fresh temporary folder that is also its ``HOME`` and
``TMPDIR`` (the cache and configuration folders of torch, matplotlib, Jupyter and IPython
fall back there), with a time limit and a memory limit (``RLIMIT_AS`` of the process and
its kernel), two at a time (``--jobs``). Student code is not trusted: a submission that
hangs is killed with its whole process group at the time limit; one that calls
``sys.exit`` (or raises ``SystemExit``) or ``os._exit``, crashes its kernel, runs out of
memory, or writes files outside its own folder gets a zero with the reason, in
``grades.csv`` and its feedback file; none stops the others.

Writes are watched two ways. (1) An audit hook (``tools/grade_watch.py``, installed by a
``sitecustomize`` in every Python process of the grading: ``otter run``, the notebook's
kernel and any Python the notebook starts) refuses every write outside the submission's
folder, wherever it points (``/tmp``, ``~``, ``/etc``, another submission), and names the
path in the reason. (2) The submissions folder and the grader's own folders are compared
before and after each submission; those that ran while a change was seen are re-graded
alone to find which (except those that have a zero with a reason already). The hook does
not see writes by native code (``ctypes``, C extensions) or by programs that are not Python
(a shell command such as ``!cp``, ``os.system``): those are caught only when they change a
watched folder. This is not a sandbox: for that, run the grading as a user who may write
nothing else of value, or in a container.

Writes, in ``--out`` (default ``_build/grades/NAME``), replaced whole at the end (the
grading writes into a fresh folder next to it, put in its place under a lock: two gradings
at once never mix their files, and the feedback of a submission that is gone is not kept):

- ``grades.csv``: one row per submission (its path in the submissions folder), one column
  per question, the total, the maximum and the reason of a zero or of lost points that
  the grader can name without the tests (a SyntaxError in the answer to a question, a
  name the tests need that is not defined, a function still the template's:
  ``tools/grade_feedback.py``);
- ``feedback/<submission>.txt``: what the student gets back after grading: for each
  question its score, what explains lost points, and the output of its tests, hidden
  tests included (the grader's explanation of a bug and how to fix it).

Usage errors are reported at once, before anything is built or graded: an unknown
assignment (the names are listed), a submissions folder that does not exist, one without
notebooks, an ``--out`` folder that ``make grade`` did not write.

``--language zh`` (``make grade ... LANGUAGE=zh``): the grader's explanations of the bugs in
the feedback are in Chinese (``NORMS_LANG=zh`` in the grading; the rest of the feedback stays
English).

Usage: ``python tools/grade.py NAME FOLDER [--out DIR] [--timeout S] [--memory MB] [--jobs N]
[--language en|zh]``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grade_watch
from grade_feedback import diagnose, tested_names

import assignments

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / "_build" / "assignments"
TIMEOUT = 300  # seconds a submission may take (against a hang; a normal one takes ~20 s)
MEMORY = 6144  # MB of address space a submission may map (torch maps ~2 GB at import)


def usage(message: str) -> SystemExit:
    return SystemExit(f"grade: {message}")


def check_name(name: str) -> None:
    """SystemExit listing the assignments when ``name`` is not one."""
    known = assignments.names()
    if name not in known:
        said = f"no assignment {name!r}" if name else "no assignment given"
        raise usage(
            f"{said}: the assignments are {', '.join(known)} "
            "(make grade ASSIGNMENT=<name> SUBMISSIONS=<folder>)"
        )


def submissions(folder: Path | None) -> list[Path]:
    """Every notebook in ``folder`` and its subfolders (one folder per student), sorted;
    SystemExit when the folder does not exist or holds none."""
    if folder is None:
        raise usage("no submissions folder given (make grade SUBMISSIONS=<folder>)")
    if not folder.exists():
        raise usage(f"the submissions folder {folder} does not exist")
    if not folder.is_dir():
        raise usage(f"{folder} is not a folder (make grade SUBMISSIONS=<folder of .ipynb>)")
    found = sorted(
        p
        for p in folder.rglob("*.ipynb")
        if not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    if not found:
        raise usage(f"no .ipynb in {folder} nor in its subfolders")
    return found


#: the file that marks a folder of grades written by this tool (the only kind it replaces)
MARK = ".make-grade"


def check_out(out: Path) -> None:
    """SystemExit when ``out`` exists and is not a folder of grades this tool wrote (it
    replaces the folder whole)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARK).exists())):
        raise usage(
            f"{out} exists and is not a folder of grades written by make grade (it would be "
            "replaced): choose another GRADES=/--out"
        )


def autograder(name: str, dest: Path) -> Path:
    """The autograder of ``name``, built first when its sources changed, copied into
    ``dest`` (a build that runs meanwhile replaces it: the copy is read under the lock
    that builds take to put a new one in place)."""
    assignments.ensure([assignments.MASTERS / f"{name}.ipynb"], BUILT, log=print)
    with assignments.locked(BUILT, name, shared=True):
        zips = sorted((BUILT / name / "autograder").glob(f"{name}-autograder_*.zip"))
        if not zips:
            raise SystemExit(f"grade: the build of {name!r} made no autograder")
        return Path(shutil.copyfile(zips[-1], dest / zips[-1].name))


@contextlib.contextmanager
def _lock(path: Path):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def put_in_place(new: Path, out: Path) -> None:
    """Replace ``out`` with the folder ``new`` (same parent), under a lock."""
    with _lock(out.parent / f".{out.name}.lock"):
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
        if out.exists():
            out.rename(old / "out")
        new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def questions(zip_path: Path) -> list[str]:
    """The question names of an autograder (its test files), in order."""
    with zipfile.ZipFile(zip_path) as z:
        names = [Path(n).stem for n in z.namelist() if n.startswith("tests/") and n.endswith(".py")]
    return sorted(names, key=lambda q: (len(q), q))


#: the cell put first in the copy that is graded: it makes sure the audit hook of
#: :mod:`grade_watch` is in the kernel (``sitecustomize`` put it there already), records a
#: call of ``os._exit``, and records a ``SystemExit`` raised in any cell (by ``sys.exit`` or
#: ``raise SystemExit``; IPython catches it and runs on) or a ``MemoryError``, so that the
#: grade says why the notebook stopped
EXIT_CELL = """\
import sys as _grader_sys
_grader_sys.path.insert(0, {folder!r})
import _grader_watch
_grader_sys.path.remove({folder!r})
_grader_watch.install({root!r}, {report!r})
_grader_watch.kernel()


def _grader_exit_seen(result, _note=_grader_watch.note):
    if isinstance(result.error_in_exec, SystemExit):
        _note("sys.exit", repr(result.error_in_exec.code))
    elif isinstance(result.error_in_exec, MemoryError):
        _note("memory", "")


get_ipython().events.register("post_run_cell", _grader_exit_seen)
del _grader_sys, _grader_watch
"""

#: the folder, inside each submission's folder, of the grader's hook and report
GRADER = ".grader"

#: ``sitecustomize`` of every Python process of the grading: the audit hook first, then the
#: ``sitecustomize`` this one hides, if there is one
SITECUSTOMIZE = """\
import _grader_watch

_grader_watch.install()


def _next():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_next()
del _next
"""

#: environment variables that would put caches or configuration outside the submission's
#: folder (without them, each falls back to a folder under HOME or TMPDIR)
ELSEWHERE = (
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTER_RUNTIME_DIR",
    "JUPYTER_PLATFORM_DIRS",
    "IPYTHONDIR",
    "MPLCONFIGDIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR",
    "TORCH_HOME",
    "TRITON_CACHE_DIR",
    "NORMS_KERNEL_CACHE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONSTARTUP",
)


def snapshot(folders) -> dict:
    """path -> (size, mtime) of every file under ``folders`` (skipping ``work/`` and
    ``__pycache__/``, which Python processes outside the grading may write at any time)."""
    seen = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [
                d
                for d in dirnames
                if Path(dirpath, d) != Path(folder, "work") and d != "__pycache__"
            ]
            for f in filenames:
                path = Path(dirpath, f)
                try:
                    st = path.stat()
                except OSError:
                    continue
                seen[str(path)] = (st.st_size, st.st_mtime_ns)
    return seen


def changed(before: dict, after: dict) -> list[str]:
    """The files created, changed or deleted between two snapshots."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def possible_points(zip_path: Path) -> float:
    """The points of an autograder: the sum of its test cases' ``points``."""

    with zipfile.ZipFile(zip_path) as z:
        return sum(
            float(p)
            for n in z.namelist()
            if n.startswith("tests/") and n.endswith(".py")
            for p in re.findall(r"@test_case\(points=([\d.]+)", z.read(n).decode())
        )


def _limits(memory_mb: int):
    def apply():
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _environment(work: Path, language: str | None = None) -> dict:
    """The environment of ``otter run`` for the submission graded in ``work``; ``language``
    (``"en"``, ``"zh"``): the one the grader's explanations speak (``NORMS_LANG``), else
    this process's."""
    env = {k: v for k, v in os.environ.items() if k not in ELSEWHERE}
    if language is not None:
        env["NORMS_LANG"] = language
    folder = work / GRADER
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        HOME=str(work),
        TMPDIR=str(work / "tmp"),
        PYTHONDONTWRITEBYTECODE="1",  # no .pyc written next to the installed packages
        PYTHONPATH=os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])),
        GRADER_ROOT=str(work),
        GRADER_REPORT=str(folder / "report"),
    )
    return env


def reasons(report: Path, log: str, memory: int) -> tuple[list[str], list[str]]:
    """(why the notebook stopped, the paths it tried to write outside its folder), from the
    report of :mod:`grade_watch` and the log of ``otter run``."""
    events = grade_watch.read(report)
    stopped = []
    exits = [d for k, _, d in events if k == "exit"]
    if exits:
        stopped.append(
            f"the notebook called os._exit({exits[0]}): a graded notebook must run to its end"
        )
    elif "DeadKernelError" in log or "Kernel died" in log:
        stopped.append(
            "the notebook's kernel died (a crash of native code, a signal, or an exit the "
            "grader could not see)"
        )
    sys_exits = [d for k, _, d in events if k == "sys.exit"]
    if sys_exits:
        stopped.append(
            f"the notebook called sys.exit({sys_exits[0]}): a graded notebook must run to its end"
        )
    if any(k == "memory" for k, _, _ in events):
        stopped.append(
            f"ran out of memory (the limit is {memory} MB of address space per submission)"
        )
    writes = []
    for kind, _, detail in events:
        path = detail.partition("\t")[2]
        if kind == "write" and path not in writes:
            writes.append(path)
    return stopped, writes


def grade_one(
    zip_path: Path,
    notebook: Path,
    work: Path,
    timeout: float,
    memory: int,
    language: str | None = None,
) -> dict:
    """Grade one submission in ``work`` (a fresh temporary folder, its HOME and TMPDIR too),
    the grader's explanations in ``language``; return {question: score, ...} with 'reason'
    and 'feedback'."""
    import nbformat

    shutil.rmtree(work, ignore_errors=True)
    (work / "results").mkdir(parents=True)
    (work / "tmp").mkdir()
    folder = work / GRADER
    folder.mkdir()
    shutil.copyfile(Path(grade_watch.__file__), folder / "_grader_watch.py")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    report = folder / "report"
    report.touch()
    copy = work / notebook.name
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception as exc:  # not a notebook
        reason = f"not a readable notebook ({type(exc).__name__})"
        return {"seconds": 0.0, "reason": reason, "feedback": f"Zero: {reason}."}
    first = EXIT_CELL.format(folder=str(folder), root=str(work), report=str(report))
    nb.cells.insert(0, nbformat.v4.new_code_cell(first))
    nbformat.write(nb, copy)
    otter = Path(sys.executable).with_name("otter")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(otter), "run", "-a", str(zip_path), "-o", str(work / "results"), str(copy)],
        cwd=work,
        env=_environment(work, language),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: killed whole, kernel included
        preexec_fn=_limits(memory),
    )
    try:
        log, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        timed_out = True
    seconds = time.perf_counter() - start
    stopped, writes = reasons(report, log or "", memory)
    if not report.exists():
        stopped.append("the grader's record of the notebook's actions was removed")
    why = []
    if timed_out:
        why.append(f"stopped after {timeout:g} s (a cell that does not end?)")
    why += stopped
    if writes:
        shown = ", ".join(writes[:5]) + (", ..." if len(writes) > 5 else "")
        why.append(f"wrote files outside its folder: {shown} (refused)")
    if not why and proc.returncode != 0:
        why.append(f"the grader exited with code {proc.returncode}")
    results = work / "results" / "results.json"
    if not why and not results.exists():
        why.append("the grader wrote no results (the notebook exited or crashed?)")
    reason = "; ".join(why)
    scores: dict = {"seconds": seconds}
    if not reason:
        data = json.loads(results.read_text())
        for test in data.get("tests", []):
            # otter's first entry, "Public Tests", repeats the public tests' output unlabelled
            # (and says "All test cases passed!" above a question's lost hidden points): left out
            if "max_score" in test:
                scores[test["name"]] = test.get("score", 0)
                scores["max:" + test["name"]] = test["max_score"]
                scores["output:" + test["name"]] = (test.get("output") or "").rstrip()
    else:
        scores["feedback"] = f"Zero: {reason}.\n\n{(log or '')[-3000:]}"
    scores["reason"] = reason
    return scores


def feedback(name: str, s: dict, qs: list[str], notes: dict[str, list[str]]) -> str:
    """The feedback file of one graded submission: its total, then each question's score,
    what explains its lost points and its tests' output."""
    total = sum(s.get(q, 0) for q in qs)
    possible = sum(s.get("max:" + q, 0) for q in qs)
    if "feedback" in s:  # a zero with a reason
        return f"{name}: {total:g} points\n\n{s['feedback']}\n"
    parts = [f"{name}: {total:g} / {possible:g} points"]
    for q in qs:
        lines = [f"{q}: {s.get(q, 0):g} / {s.get('max:' + q, 0):g} points"]
        lines += [f"  {note}" for note in notes.get(q, [])]
        if s.get("output:" + q):
            lines.append(s["output:" + q])
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name")
    parser.add_argument("submissions")  # a str: Path("") would be the current folder
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--memory", type=int, default=MEMORY, help="MB per submission")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--language",
        choices=("en", "zh"),
        help="the language of the grader's explanations in the feedback (default: "
        "NORMS_LANG, else English)",
    )
    args = parser.parse_args(argv)
    # usage errors first, before anything is built
    check_name(args.name)
    folder = Path(args.submissions).resolve() if args.submissions else None
    notebooks = submissions(folder)
    out = (args.out or ROOT / "_build" / "grades" / args.name).resolve()
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # everything is written into a fresh folder, put in place of ``out`` at the end
    new = assignments.fresh_folder(f".{out.name}-new-", out.parent)
    try:
        return _grade(args, folder, notebooks, out, new)
    finally:
        shutil.rmtree(new, ignore_errors=True)


def _grade(args, folder: Path, notebooks: list[Path], out: Path, new: Path) -> int:
    import nbformat

    (new / MARK).write_text("grades written by make grade (tools/grade.py)\n")
    (new / "feedback").mkdir()
    zip_path = autograder(args.name, new)
    qs = questions(zip_path)
    needs = tested_names(zip_path)
    start = time.perf_counter()
    # what no submission may change: the submissions, the grader's output, its tools
    watched = [folder, new, ROOT / "tools"]
    scratch = Path(tempfile.mkdtemp(prefix="grade-"))  # each submission's fresh folder
    lock = threading.Lock()
    running: set[int] = set()
    suspects: set[int] = set()

    def shown(nb: Path) -> str:
        return nb.relative_to(folder).as_posix()

    def run(item):
        i, nb = item
        with lock:
            running.add(i)
            before = snapshot(watched)
        s = grade_one(zip_path, nb, scratch / str(i), args.timeout, args.memory, args.language)
        with lock:
            if changed(before, snapshot(watched)):
                suspects.update(running)  # who wrote it? re-graded alone below
            running.discard(i)
        total = sum(s.get(q, 0) for q in qs)
        print(f"graded {shown(nb)}: {total:g} in {s['seconds']:.1f} s {s['reason']}", flush=True)
        return i, nb, s

    def alone(i, nb):
        before = snapshot(watched)
        s = grade_one(zip_path, nb, scratch / str(i), args.timeout, args.memory, args.language)
        wrote = changed(before, snapshot(watched))
        if wrote:
            paths = ", ".join(wrote[:5]) + (", ..." if len(wrote) > 5 else "")
            s["reason"] = f"wrote files outside its folder: {paths}"
            s["feedback"] = f"Zero: {s['reason']}."
            for q in qs:
                s[q] = 0
        return s

    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            graded = list(pool.map(run, enumerate(notebooks)))
        # a suspect that has a zero with a reason already (it hung, exited, ...) keeps it: its
        # grade cannot get lower, and re-grading a hanging one alone would take its time
        # limit again
        again = {i for i, _, s in graded if i in suspects and not s["reason"]}
        if suspects:
            kept = ", ".join(shown(nb) for i, nb, _ in graded if i in suspects - again)
            print(
                f"grade: files changed outside the submissions' folders while {len(suspects)} "
                f"ran; {len(again)} re-graded alone"
                + (f" (not re-graded, a zero already: {kept})" if kept else "")
            )
        graded = [(nb, alone(i, nb) if i in again else s) for i, nb, s in graded]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    maximum = possible_points(zip_path)
    rows = []
    for nb, s in graded:
        notes = {}
        if not s["reason"]:
            try:
                found = diagnose(nbformat.read(nb, as_version=4), needs)
            except Exception:  # read by otter already; a diagnosis is only a help
                found = {}
            # what explains lost points, only where points were lost
            notes = {q: found[q] for q in qs if q in found and s.get(q, 0) < s.get("max:" + q, 0)}
        reason = s["reason"] or "; ".join(f"{q}: {', '.join(m)}" for q, m in notes.items())
        rows.append([shown(nb), *[s.get(q, 0) for q in qs], sum(s.get(q, 0) for q in qs)])
        rows[-1] += [maximum, reason]
        path = new / "feedback" / Path(shown(nb)).with_suffix(".txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(feedback(shown(nb), s, qs, notes))
    with open(new / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", *qs, "total", "possible", "reason"])
        w.writerows(rows)
    put_in_place(new, out)
    print(
        f"grade: {len(rows)} submissions in {time.perf_counter() - start:.0f} s: "
        f"{out / 'grades.csv'}, {out / 'feedback'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
