"""Grade a whole class without Docker (``make grade ASSIGNMENT=NAME SUBMISSIONS=FOLDER``).

Every ``*.ipynb`` of the submissions folder is graded by ``otter run`` with the autograder
``make assignments`` built (``_build/assignments/NAME/autograder/NAME-autograder_*.zip``),
each in its own process, in its own empty folder, with a time limit and a memory limit,
two at a time (``--jobs``). Student code is not trusted: a submission that hangs is
killed with its whole process group at the time limit, one that exits, crashes or runs out
of memory leaves no results; each gets a zero with the reason, and none stops the others.

Writes, in ``--out`` (default ``_build/grades/NAME``):

- ``grades.csv``: one row per submission (the file name), one column per question, the
  total, the maximum and the reason of a zero;
- ``feedback/<submission>.txt``: what the student gets back after grading: the score of
  each question and the output of every test, hidden tests included (the grader's
  explanation of a bug and how to fix it).

Usage: ``python tools/grade.py NAME FOLDER [--out DIR] [--timeout S] [--memory MB] [--jobs N]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / "_build" / "assignments"
TIMEOUT = 300  # seconds a submission may take (against a hang; a normal one takes ~20 s)
MEMORY = 6144  # MB of address space a submission may map (torch maps ~2 GB at import)


def autograder(name: str) -> Path:
    zips = sorted((BUILT / name / "autograder").glob(f"{name}-autograder_*.zip"))
    if not zips:
        raise SystemExit(f"grade: no autograder for {name!r}: run `make assignments` first")
    return zips[-1]


def questions(zip_path: Path) -> list[str]:
    """The question names of an autograder (its test files), in order."""
    with zipfile.ZipFile(zip_path) as z:
        names = [Path(n).stem for n in z.namelist() if n.startswith("tests/") and n.endswith(".py")]
    return sorted(names, key=lambda q: (len(q), q))


def _limits(memory_mb: int):
    def apply():
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def grade_one(zip_path: Path, notebook: Path, work: Path, timeout: float, memory: int) -> dict:
    """Grade one submission in ``work``; return {question: score, ...} with 'reason' and
    'feedback'."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "results").mkdir(parents=True)
    copy = work / notebook.name
    shutil.copyfile(notebook, copy)
    otter = Path(sys.executable).with_name("otter")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HOME=str(work))
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(otter), "run", "-a", str(zip_path), "-o", str(work / "results"), str(copy)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: killed whole, kernel included
        preexec_fn=_limits(memory),
    )
    try:
        log, _ = proc.communicate(timeout=timeout)
        reason = "" if proc.returncode == 0 else f"the grader exited with code {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        reason = f"stopped after {timeout:g} s (a cell that does not end?)"
    seconds = time.perf_counter() - start
    results = work / "results" / "results.json"
    scores: dict = {"seconds": seconds}
    if results.exists() and not reason:
        data = json.loads(results.read_text())
        lines = []
        for test in data.get("tests", []):
            if "max_score" in test:
                scores[test["name"]] = test.get("score", 0)
                scores["max:" + test["name"]] = test["max_score"]
                lines.append(f"{test['name']}: {test.get('score', 0):g} / {test['max_score']:g}")
            if test.get("output"):
                lines.append(test["output"].rstrip() + "\n")
        scores["feedback"] = "\n".join(lines)
    else:
        reason = reason or "the grader wrote no results (the notebook exited or crashed?)"
        scores["feedback"] = f"Zero: {reason}.\n\n{(log or '')[-3000:]}"
    scores["reason"] = reason
    return scores


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name")
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--memory", type=int, default=MEMORY, help="MB per submission")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    zip_path = autograder(args.name)
    out = (args.out or ROOT / "_build" / "grades" / args.name).resolve()
    notebooks = sorted(args.submissions.glob("*.ipynb"))
    if not notebooks:
        raise SystemExit(f"grade: no .ipynb in {args.submissions}")
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    # a copy: `make assignments` during the grading replaces the autograder
    zip_path = Path(shutil.copyfile(zip_path, out / zip_path.name))
    qs = questions(zip_path)
    start = time.perf_counter()

    def run(item):
        i, nb = item
        return nb, grade_one(zip_path, nb, out / "work" / str(i), args.timeout, args.memory)

    rows = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for nb, s in pool.map(run, enumerate(notebooks)):
            total = sum(s.get(q, 0) for q in qs)
            possible = sum(s.get("max:" + q, 0) for q in qs)
            rows.append([nb.name, *[s.get(q, 0) for q in qs], total, possible, s["reason"]])
            (out / "feedback" / f"{nb.stem}.txt").write_text(
                f"{nb.name}: {total:g} points\n\n{s['feedback']}\n"
            )
            print(f"graded {nb.name}: {total:g} in {s['seconds']:.1f} s {s['reason']}")
    maximum = max((r[-2] for r in rows), default=0)
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", *qs, "total", "possible", "reason"])
        for r in rows:
            w.writerow([*r[:-2], maximum, r[-1]])
    shutil.rmtree(out / "work", ignore_errors=True)
    print(
        f"grade: {len(rows)} submissions in {time.perf_counter() - start:.0f} s: "
        f"{out / 'grades.csv'}, {out / 'feedback'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
