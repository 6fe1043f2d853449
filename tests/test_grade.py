"""``make grade`` (tools/grade.py): every submission graded in its own process with a time
and a memory limit; a hanging, exiting, crashing or file-writing submission gets a zero with
a reason naming what it did and does not stop the others; grades.csv and one feedback file
per submission.

The grading of reference, untouched and buggy submissions of every assignment through
``tools/grade.py`` (and of one that writes only into its own folder, as torch, matplotlib
and temporary files do: full marks) is in ``tests/test_assignments.py``; this file grades
the hostile ones."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from .notebooks import ROOT
from .test_assignments import grade_class, make_grade, read_grades, solutions, write_class

sys.path.insert(0, str(ROOT / "tools"))
import grade  # noqa: E402
import grade_watch  # noqa: E402

NAME = "batchnorm-channels-last"


@pytest.mark.courses
def test_grade_a_class_with_hostile_submissions(tmp_path):
    reference = solutions(NAME)
    elsewhere = tmp_path / "elsewhere"  # an absolute path outside every grading folder
    elsewhere.mkdir()
    subs = tmp_path / "the class"  # where grade_class puts them
    first = {
        # sorted first, so that its time limit runs while the others are graded; no CPU
        "a-hangs.ipynb": "import time\ntime.sleep(3600)",
        "c-os-exit.ipynb": "import os\nos._exit(3)",
        # libc's _exit through ctypes: no Python sees it, the kernel dies
        "c-ctypes-exit.ipynb": "import ctypes\nctypes.CDLL(None)._exit(4)",
        "d-sys-exit.ipynb": "import sys\nsys.exit(0)",
        # absolute paths elsewhere, its home's parent, /etc, and a Python it starts
        "e-writes.ipynb": textwrap.dedent(
            f"""\
            import os, subprocess, sys
            for path in [{str(elsewhere / "x.txt")!r}, os.path.expanduser("~/../outside.txt"),
                         "/etc/hosts"]:
                try:
                    open(path, "a").close()
                except PermissionError:
                    pass
            subprocess.run([sys.executable, "-c",
                            "open({str(elsewhere / "child.txt")!r}, 'w')"])"""
        ),
        # a shell command (no Python audit hook sees it) into the submissions folder: caught by
        # comparing the watched folders, and re-graded alone to find who wrote it
        "f-shell.ipynb": f"import os\nos.system(\"echo x > '{subs / 'planted.txt'}'\")",
        # 12 GB of address space: a MemoryError under the limit, so the class is never defined
        "g-memory.ipynb": "big = bytearray(12 * 2**30)",
    }
    cases = {name: [code + "\n" + reference[0], *reference[1:]] for name, code in first.items()}
    raw = {"h-not-a-notebook.ipynb": "print('hello')\n"}  # not graded at all: no otter run
    rows, feedback = grade_class(NAME, cases, tmp_path, timeout=60, raw=raw)
    assert set(rows) == set(cases) | set(raw)
    # the maximum is the autograder's, also in the rows of a zero; a column per question
    possible = {float(r["possible"]) for r in rows.values()}
    assert len(possible) == 1 and possible.pop() > 0
    for row in rows.values():
        assert [k for k in row if k.startswith("q")] == ["q1", "q2", "q3"]
        assert float(row["total"]) == 0 and row["reason"], row
    assert "stopped after 60 s" in rows["a-hangs.ipynb"]["reason"]
    assert "called os._exit(3)" in rows["c-os-exit.ipynb"]["reason"]
    assert "kernel died" in rows["c-ctypes-exit.ipynb"]["reason"]
    assert "called sys.exit(0)" in rows["d-sys-exit.ipynb"]["reason"]
    assert "called sys.exit(0)" in feedback("d-sys-exit.ipynb")
    writes = rows["e-writes.ipynb"]["reason"]
    assert "wrote files outside its folder" in writes
    for path in [elsewhere / "x.txt", "/outside.txt", "/etc/hosts", elsewhere / "child.txt"]:
        assert str(path) in writes, writes
    assert not list(elsewhere.iterdir())  # refused, not only reported
    shell = rows["f-shell.ipynb"]["reason"]
    assert "wrote files outside its folder" in shell and "planted.txt" in shell
    assert "ran out of memory" in rows["g-memory.ipynb"]["reason"]
    assert "not a readable notebook" in rows["h-not-a-notebook.ipynb"]["reason"]
    assert not (tmp_path / "grades" / "work").exists()


def test_snapshot_sees_a_new_a_changed_and_a_removed_file(tmp_path):
    (tmp_path / "a").write_text("1")
    (tmp_path / "b").write_text("1")
    before = grade.snapshot([tmp_path])
    assert grade.changed(before, grade.snapshot([tmp_path])) == []
    (tmp_path / "a").write_text("22")
    (tmp_path / "b").unlink()
    (tmp_path / "c").write_text("1")
    (tmp_path / "__pycache__").mkdir()  # not watched: Python writes there at any time
    (tmp_path / "__pycache__" / "m.pyc").write_text("1")
    assert grade.changed(before, grade.snapshot([tmp_path])) == [str(tmp_path / n) for n in "abc"]


def test_a_dead_kernel_and_recorded_events_get_their_reasons(tmp_path):
    """The reasons read from the audit hook's report and from otter's log: a kernel that died
    without a recorded os._exit (ctypes, a segfault, a signal) is named as such."""
    report = tmp_path / "report"
    stopped, writes = grade.reasons(report, "nbclient.exceptions.DeadKernelError: Kernel died", 1)
    assert writes == [] and len(stopped) == 1 and "kernel died" in stopped[0]
    report.write_text(
        "exit\t7\t2\nwrite\t7\topen\t/tmp/x\nwrite\t8\tos.mkdir\t/tmp/x\nmemory\t7\t\n"
    )
    stopped, writes = grade.reasons(report, "DeadKernelError", 100)
    assert writes == ["/tmp/x"]
    assert "called os._exit(2)" in stopped[0] and "100 MB" in stopped[1] and len(stopped) == 2
    assert grade.reasons(tmp_path / "none", "", 1) == ([], [])


HOOK_PROBE = """
import os, shutil, sqlite3, subprocess, sys, tempfile
outside = sys.argv[1]
probes = {
    "open": lambda: open(os.path.join(outside, "a"), "w"),
    "os.open": lambda: os.open(os.path.join(outside, "b"), os.O_CREAT | os.O_WRONLY),
    "mkdir": lambda: os.mkdir(os.path.join(outside, "c")),
    "rename": lambda: os.rename("mine.txt", os.path.join(outside, "d")),
    "remove": lambda: os.remove(os.path.join(outside, "keep")),
    "chmod": lambda: os.chmod(os.path.join(outside, "keep"), 0o600),
    "copy": lambda: shutil.copyfile("mine.txt", os.path.join(outside, "e")),
    "rmtree": lambda: shutil.rmtree(outside),
    "sqlite": lambda: sqlite3.connect(os.path.join(outside, "f.db")),
    "through a symlink": lambda: open("link", "a"),
    "the grader's report": lambda: open(os.environ["GRADER_REPORT"], "w"),
    "bytecode": lambda: open(os.path.join(outside, "__pycache__", "m.cpython-311.pyc.1"), "w"),
}
open("mine.txt", "w").write("mine")  # inside: allowed
tempfile.mkstemp()  # TMPDIR is inside: allowed
open(os.devnull, "w").close()
os.makedirs(outside, exist_ok=True)  # exists already: no write
os.symlink(os.path.join(outside, "keep"), "link")  # a link inside: allowed, not followed
for name, probe in probes.items():
    try:
        probe()
        print("allowed", name)
    except PermissionError:
        print("refused", name)
"""


def test_the_audit_hook_refuses_and_records_writes_outside_the_folder(tmp_path):
    """``tools/grade_watch.py`` in a plain Python (no otter, no torch), as ``sitecustomize``
    puts it in every Python process of a grading."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / ".grader").mkdir(parents=True)
    (work / "tmp").mkdir()
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (work / ".grader" / "_grader_watch.py").write_text(
        (ROOT / "tools" / "grade_watch.py").read_text()
    )
    (work / ".grader" / "sitecustomize.py").write_text(grade.SITECUSTOMIZE)
    (work / "probe.py").write_text(HOOK_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in grade.ELSEWHERE}
    env.update(
        PYTHONPATH=str(work / ".grader"),
        GRADER_ROOT=str(work),
        GRADER_REPORT=str(work / ".grader" / "report"),
        HOME=str(work),
        TMPDIR=str(work / "tmp"),
    )
    run = subprocess.run(
        [sys.executable, "probe.py", str(outside)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 12 and all(line.startswith("refused ") for line in lines), lines
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert (outside / "keep").read_text() == "keep"
    events = grade_watch.read(work / ".grader" / "report")
    written = {detail.split("\t")[1] for kind, _, detail in events if kind == "write"}
    assert {str(outside / n) for n in ["a", "b", "c", "d", "keep", "e", "f.db"]} <= written
    assert str(outside) in written and str(work / ".grader" / "report") in written
    assert not any(str(work / n) in written for n in ["mine.txt", "tmp", "link"])
    assert not any("__pycache__" in path for path in written)  # refused, not recorded


NAMES = "batchnorm-channels-last, groupnorm-channels-last, layernorm-rmsnorm"


@pytest.mark.parametrize(
    "name, folder, message",
    [
        (
            "no-such-assignment",
            "subs",
            f"no assignment 'no-such-assignment': the assignments are {NAMES}",
        ),
        ("", "subs", "no assignment given"),
        (NAME, "", "no submissions folder given"),
        (NAME, "no such folder", "the submissions folder {tmp}/no such folder does not exist"),
        (NAME, "empty class", "no .ipynb in {tmp}/empty class nor in its subfolders"),
        (NAME, "subs/a.ipynb", "{tmp}/subs/a.ipynb is not a folder"),
    ],
)
def test_usage_errors_at_once(name, folder, message, tmp_path):
    """make grade's usage errors, before anything is built or graded: an unknown assignment
    lists the names; a folder that does not exist is told from one without notebooks."""
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    (tmp_path / "subs" / "a.ipynb").write_text("{}")
    (tmp_path / "empty class" / "alice").mkdir(parents=True)
    (tmp_path / "empty class" / "alice" / "notes.txt").write_text("not a notebook")
    subs = tmp_path / folder if folder else ""
    command = make_grade(name, subs, tmp_path / "grades")  # "": make grade without it
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and message.format(tmp=tmp_path) in run.stderr, run.stderr
    assert "assignment" not in run.stdout and not (tmp_path / "grades").exists(), run.stdout


def test_the_language_of_the_explanations_reaches_the_grading(tmp_path, monkeypatch):
    """--language zh (make grade LANGUAGE=zh): the grading's environment sets NORMS_LANG, which
    the notebook's kernel inherits (norms.get_language); without it, this process's."""
    monkeypatch.delenv("NORMS_LANG", raising=False)
    assert grade._environment(tmp_path, "zh")["NORMS_LANG"] == "zh"
    assert "NORMS_LANG" not in grade._environment(tmp_path)
    monkeypatch.setenv("NORMS_LANG", "zh")
    assert grade._environment(tmp_path, "en")["NORMS_LANG"] == "en"
    assert grade._environment(tmp_path)["NORMS_LANG"] == "zh"


def test_an_unknown_language_is_a_usage_error(tmp_path):
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    (tmp_path / "subs" / "alice" / "a.ipynb").write_text("{}")
    command = make_grade(NAME, tmp_path / "subs", tmp_path / "grades", "--language", "fr")
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "invalid choice: 'fr'" in run.stderr, run.stderr
    assert not (tmp_path / "grades").exists()


def test_a_folder_that_make_grade_did_not_write_is_never_replaced(tmp_path):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "a.ipynb").write_text("{}")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep")
    run = subprocess.run(
        make_grade(NAME, tmp_path / "subs", tmp_path / "mine"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "is not a folder of grades written by make grade" in run.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["thesis.tex"]


@pytest.mark.courses
def test_feedback_of_a_removed_submission_is_not_kept(tmp_path):
    """Graded again after a submission left the class: its feedback and its row are gone
    (files that are not notebooks: a zero each, without a kernel)."""
    subs, out = tmp_path / "the class", tmp_path / "grades"
    raw = {"alice/hw.ipynb": "not json", "bob/hw.ipynb": "not json"}
    for _ in range(2):
        write_class(NAME, {}, subs, raw)
        run = subprocess.run(
            make_grade(NAME, subs, out), cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, run.stdout + run.stderr
        rows, feedback = read_grades(out)
        assert set(rows) == set(raw) and "not a readable notebook" in feedback("alice/hw.ipynb")
        (subs / "bob" / "hw.ipynb").unlink(missing_ok=True)  # bob leaves after the first
        raw.pop("bob/hw.ipynb", None)
    assert not (out / "feedback" / "bob").exists()
    assert {p.name for p in out.iterdir()} - {p.name for p in out.glob("*.zip")} == {
        ".make-grade",
        "feedback",
        "grades.csv",
    }


def notebook_of(*cells: str):
    import nbformat

    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])


def test_diagnose_names_a_syntax_error_an_undefined_name_and_the_template():
    """What grade.py reads in a submission's code, without running it, to explain lost points."""
    setup = "%matplotlib inline\nimport torch\nfrom torch import nn\ngrader = None"
    template = (
        "class Layer(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        ...\n\n    def forward(self, x):\n        ...\n"
    )
    needs = {"q1": {"Layer"}, "q2": {"Layer", "helper"}}
    nb = notebook_of(
        setup, template, 'grader.check("q1")', "def helper(x):\n    y = x\n", 'grader.check("q2")'
    )
    found = grade.diagnose(nb, needs)
    assert found["q1"] == [
        "Layer.__init__ is not implemented yet",
        "Layer.forward is not implemented yet",
    ]
    assert found["q2"] == [  # its own answer's, then the class of q1 its tests use
        "helper returns nothing (None): not implemented yet?",
        "Layer.__init__ is not implemented yet",
        "Layer.forward is not implemented yet",
    ]
    broken = template.replace(
        "        ...\n\n    def forward", "        x = = 1\n\n    def forward"
    )
    nb = notebook_of(
        setup,
        broken,
        'grader.check("q1")',
        "def helper(x):\n    return Other(x)\n",
        'grader.check("q2")',
    )
    found = grade.diagnose(nb, needs)
    assert found["q1"] == ["SyntaxError in your answer to q1, line 4 (invalid syntax)"]
    assert found["q2"] == [
        "Layer is not defined: SyntaxError in your answer to q1, line 4 (invalid syntax)",
        "Other is not defined (the tests of q2 need it)",
    ]
    solved = template.replace(
        "        ...\n\n    def forward", "        self.n = n\n\n    def forward"
    )
    solved = solved.replace(
        "    def forward(self, x):\n        ...", "    def forward(self, x):\n        return x"
    )
    nb = notebook_of(
        setup, solved, 'grader.check("q1")', "def helper(x):\n    return x\n", 'grader.check("q2")'
    )
    assert grade.diagnose(nb, needs) == {}
