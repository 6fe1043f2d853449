"""The otter-grader assignments (``make assignments``), graded locally with ``otter run``
(no Docker): the reference solution gets full marks, the untouched student notebook zero,
and a notebook with one of the grader's known bugs partial marks, with the grader's
explanation of that bug in the autograder's output.

Classes are graded the way ``make grade`` grades them (its command line, from ``make -n
grade``): one folder per student, a space in the path, two gradings at once while the
assignment is being built again. Every known bug costs points once, in its own question.

The autograders are the ones ``make assignments`` built (``make test`` builds them first);
the tests fail, not skip, when they are missing or built from other sources."""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from .notebooks import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import assignments  # noqa: E402

pytestmark = pytest.mark.courses

BUILT = ROOT / "_build" / "assignments"
NAMES = ["batchnorm-channels-last", "layernorm-rmsnorm", "groupnorm-channels-last"]


def autograder(name) -> tuple[Path, Path]:
    """(autograder zip, student notebook) built by make assignments."""
    master = ROOT / "assignments" / f"{name}.ipynb"
    zips = sorted((BUILT / name / "autograder").glob(f"{name}-autograder_*.zip"))
    student = BUILT / name / "student" / f"{name}.ipynb"
    if not zips or not student.exists():
        pytest.fail(
            f"no autograder for {name} in {BUILT.relative_to(ROOT)}: run `make assignments` first"
        )
    if not assignments.up_to_date(master, BUILT):
        pytest.fail(f"the autograder of {name} is built from other sources: run `make assignments`")
    return zips[-1], student


def solutions(name) -> list[str]:
    """The reference solution cells of a master notebook, markers removed."""
    return [code for inside, code in _code_cells(name, "SOLUTION") if inside]


def _code_cells(name, block):
    """(inside a ``# BEGIN block`` ... ``# END block`` pair of raw cells?, code without solution
    markers) for every code cell of a master notebook."""
    nb = nbformat.read(ROOT / "assignments" / f"{name}.ipynb", as_version=4)
    out, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "raw" and re.match(rf"#\s*BEGIN {block}", cell.source):
            inside = True
        elif cell.cell_type == "raw" and re.match(rf"#\s*END {block}", cell.source):
            inside = False
        elif cell.cell_type == "code":
            code = "\n".join(
                line
                for line in cell.source.splitlines()
                if not re.match(r"\s*#\s*(BEGIN|END) SOLUTION", line)
            )
            out.append((inside, code))
    return out


def notebook(name, path: Path, answers=None) -> Path:
    """The student notebook at ``path``, its answer cells replaced by ``answers`` (None:
    untouched)."""
    _, student = autograder(name)
    with assignments.locked(BUILT, name, shared=True):  # not while a build replaces it
        nb = nbformat.read(student, as_version=4)
    cells = [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    if answers is not None:
        assert len(cells) == len(answers), f"{len(cells)} answer cells, {len(answers)} answers"
        for cell, answer in zip(cells, answers, strict=True):
            cell.source = answer
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def make_grade(name, subs: Path, out: Path, *more: str) -> list[str]:
    """The command ``make grade ASSIGNMENT=name SUBMISSIONS=subs GRADES=out`` runs (from
    ``make -n``, with this Python), for ``bash -c`` in the project's folder, with ``more``
    options of tools/grade.py."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    run = subprocess.run(
        ["make", "-n", "-s", "grade", f"ASSIGNMENT={name}", f"SUBMISSIONS={subs}"]
        + [f"GRADES={out}", f"PY={sys.executable}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in run.stdout.splitlines() if "tools/grade.py" in line]
    assert run.returncode == 0 and len(lines) == 1, run.stdout + run.stderr
    return ["bash", "-c", " ".join([lines[0], *more])]


def write_class(name, cases: dict, subs: Path, raw=None) -> None:
    """The submissions ``cases`` (path in the class's folder -> answers, None: untouched;
    ``raw``: path -> text, written as it is) in the folder ``subs``."""
    for file, answers in cases.items():
        notebook(name, subs / file, answers)
    for file, text in (raw or {}).items():
        (subs / file).parent.mkdir(parents=True, exist_ok=True)
        (subs / file).write_text(text)


def read_grades(out: Path):
    """(path -> its row of grades.csv, path -> its feedback file's text) of a grading."""
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    return rows, lambda file: (out / "feedback" / Path(file).with_suffix(".txt")).read_text()


def grade_class(name, cases: dict, tmp_path, timeout=300, raw=None):
    """Grade the submissions ``cases`` (see :func:`write_class`) as ``make grade`` does
    (each by ``otter run`` in its own process, two at a time), in a folder whose name has a
    space; return :func:`read_grades`."""
    subs, out = tmp_path / "the class", tmp_path / "grades"
    write_class(name, cases, subs, raw)
    run = subprocess.run(
        make_grade(name, subs, out, "--timeout", str(timeout)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return read_grades(out)


def with_bug(name, replacements) -> list[str]:
    """The reference solution's answers with ``replacements`` (each in exactly one answer)."""
    answers = solutions(name)
    for old, new in replacements:
        hits = [i for i, a in enumerate(answers) if old in a]
        assert len(hits) == 1, f"{old!r} is not in the reference solution exactly once"
        answers[hits[0]] = answers[hits[0]].replace(old, new)
    return answers


#: the grader's known bugs: assignment -> bug code -> replacements in the reference solution.
#: Each is graded with the autograder's own test files, run by otter's ExceptionTestFile in this
#: process (points lost in its own question only, the explanation naming it), and those of
#: :data:`THROUGH_MAKE_GRADE` also through make grade (a submission of the class of :func:`cases`).
CATALOGUE = {
    "batchnorm-channels-last": {
        "unbiased_variance": [("x.var(dims, unbiased=False)", "x.var(dims, unbiased=True)")],
        "running_var_biased": [("x.var(dims, unbiased=True)", "x.var(dims, unbiased=False)")],
        "eps_outside_sqrt": [("torch.sqrt(var + self.eps)", "(torch.sqrt(var) + self.eps)")],
        "momentum_convention": [
            (
                "self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)",
                "self.running_mean.mul_(self.momentum).add_((1 - self.momentum) * mean)",
            ),
            (
                "self.running_var.mul_(1 - self.momentum).add_(self.momentum * unbiased)",
                "self.running_var.mul_(self.momentum).add_((1 - self.momentum) * unbiased)",
            ),
        ],
        "running_stats_autograd": [("with torch.no_grad():", "if True:")],
        "eval_uses_batch_stats": [("if self.training:", "if True:")],
        "affine_swapped": [
            (
                "return x_hat * self.weight + self.bias",
                "return x_hat * self.bias + self.weight",
            )
        ],
    },
    "layernorm-rmsnorm": {
        "unbiased_variance": [
            ("var = (xc * xc).mean(dims, keepdim=True)", "var = x.var(dims, keepdim=True)")
        ],
        "eps_outside_sqrt": [
            ("rstd = 1 / torch.sqrt(var + eps)", "rstd = 1 / (torch.sqrt(var) + eps)")
        ],
        "subtracts_mean": [
            (
                "    rrms = 1 / torch.sqrt(",
                "    x = x - x.mean(-1, keepdim=True)\n    rrms = 1 / torch.sqrt(",
            )
        ],
        "sum_instead_of_mean": [
            ("x.pow(2).mean(dims, keepdim=True) + eps", "x.pow(2).sum(dims, keepdim=True) + eps")
        ],
        "backward_term": [
            (
                "g.mean(dims, keepdim=True) - x_hat * (g * x_hat).mean(dims, keepdim=True))",
                "g.mean(dims, keepdim=True))",
            )
        ],
    },
    "groupnorm-channels-last": {
        "unbiased_variance": [("groups.var((1, 3), unbiased=False)", "groups.var((1, 3))")],
        "eps_outside_sqrt": [
            ("torch.sqrt(var + self.eps)).reshape", "(torch.sqrt(var) + self.eps)).reshape")
        ],
        "affine_not_applied": [("return x_hat * self.weight + self.bias", "return x_hat")],
        "affine_swapped": [
            (
                "return x_hat * self.weight + self.bias",
                "return x_hat * self.bias + self.weight",
            )
        ],
    },
}


#: one known bug per assignment, graded through make grade too: what make grade adds to the
#: test files' verdict (otter run in its own process, grades.csv, the feedback) is the same for
#: every bug, and each ``otter run`` costs seconds of CPU (a kernel, torch, the hidden tests)
THROUGH_MAKE_GRADE = {
    "batchnorm-channels-last": "momentum_convention",
    "layernorm-rmsnorm": "backward_term",
    "groupnorm-channels-last": "affine_swapped",
}

#: the question each known bug belongs to: it costs points there and nowhere else
QUESTION = {
    "batchnorm-channels-last": {
        "unbiased_variance": "q2",
        "eps_outside_sqrt": "q2",
        "affine_swapped": "q2",
        "running_var_biased": "q3",
        "momentum_convention": "q3",
        "running_stats_autograd": "q3",
        "eval_uses_batch_stats": "q3",
    },
    "layernorm-rmsnorm": {
        "unbiased_variance": "q1",
        "eps_outside_sqrt": "q1",
        "backward_term": "q1",
        "subtracts_mean": "q2",
        "sum_instead_of_mean": "q2",
    },
    "groupnorm-channels-last": {
        "unbiased_variance": "q1",
        "eps_outside_sqrt": "q2",
        "affine_not_applied": "q2",
        "affine_swapped": "q2",
    },
}


#: a bug the hidden tests catch only on 3-D and 4-D inputs: means over the last dim only,
#: instead of the last ``weight.dim()``, are right for ``LayerNorm(6)`` only
LAST_DIM_ONLY = [("g - g.mean(dims, keepdim=True)", "g - g.mean(-1, keepdim=True)")]


def cases(name) -> dict:
    """Every submission of ``name`` that these tests grade through make grade, one folder per
    student: the reference (under the student notebook's own name), the untouched notebook,
    one known bug (:data:`THROUGH_MAKE_GRADE`), the library-using one; for BatchNorm also a
    renamed reference ("NAME (1).ipynb", as downloads get renamed), a SyntaxError and an
    undefined name; for LayerNorm the means over the last dim only."""
    reference = solutions(name)
    out = {f"reference/{name}.ipynb": reference, "untouched/untouched.ipynb": None}
    bug = THROUGH_MAKE_GRADE[name]
    out[f"bug {bug}/{name}.ipynb"] = with_bug(name, CATALOGUE[name][bug])
    if name in LIBRARY:
        out["library/library.ipynb"] = LIBRARY[name]
    if name == "layernorm-rmsnorm":
        out["last dim only/last dim only.ipynb"] = with_bug(name, LAST_DIM_ONLY)
    if name == "batchnorm-channels-last":
        out[f"renamed/{name} (1).ipynb"] = [OWN_FOLDER + reference[0], *reference[1:]]
        out["syntax error/hw.ipynb"] = [reference[0].replace("dims = tuple(", "dims = = tuple(")]
        out["undefined/hw.ipynb"] = [
            reference[0].replace("class BatchNormChannelsLast", "class BN")
        ]
    return out


#: what the renamed reference also does: write only into its own folder, as torch,
#: matplotlib and temporary files do (make grade's audit hook must allow it)
OWN_FOLDER = """\
import os, pathlib, tempfile
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([0, 1])
plt.savefig("figure.png")
plt.savefig(os.path.expanduser("~/figure.png"))
torch.save(torch.ones(2), tempfile.mkstemp()[1])
pathlib.Path("notes.txt").write_text("mine")
"""


_GRADED: dict = {}


def grade_during_a_build(name, cases: dict, tmp_path):
    """Grade ``cases`` as two classes at once (two ``make grade`` commands) while the
    assignment is built again (``tools/assignments.py --force``, what ``make assignments``
    runs when a source changed); return :func:`read_grades` of both, merged, and the build's
    output."""
    files = sorted(cases)
    halves = [dict((f, cases[f]) for f in files[k::2]) for k in (0, 1)]
    commands = []
    for k, half in enumerate(halves):
        subs = tmp_path / f"class {k}"
        write_class(name, half, subs)
        commands.append(make_grade(name, subs, tmp_path / f"grades {k}"))
    build = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "assignments.py"), "--force", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    gradings = [
        subprocess.Popen(c, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for c in commands
    ]
    logs = [g.communicate(timeout=1800)[0] for g in gradings]
    built = build.communicate(timeout=1800)[0]
    assert build.returncode == 0, built
    for g, log in zip(gradings, logs, strict=True):
        assert g.returncode == 0, log[-3000:]
    rows, feedback = {}, {}
    for k in (0, 1):
        r, f = read_grades(tmp_path / f"grades {k}")
        rows.update(r)
        feedback.update({file: f for file in r})
    return rows, lambda file: feedback[file](file), built


@pytest.fixture
def graded(tmp_path_factory):
    """name -> (rows, feedback) of :func:`cases` graded through make grade, one grading per
    assignment for all the tests of this file (BatchNorm's: :func:`grade_during_a_build`)."""

    def get(name):
        if name not in _GRADED:
            tmp = tmp_path_factory.mktemp(name)
            if name == "batchnorm-channels-last":
                rows, feedback, built = grade_during_a_build(name, cases(name), tmp)
                _GRADED["build"] = built
                _GRADED[name] = rows, feedback
            else:
                _GRADED[name] = grade_class(name, cases(name), tmp)
        return _GRADED[name]

    return get


def result(graded, name, file) -> tuple[float, float, str, dict]:
    """(score, possible, feedback, row) of one graded submission."""
    rows, feedback = graded(name)
    row = rows[file]
    return float(row["total"]), float(row["possible"]), feedback(file), row


def scores(row) -> dict:
    return {q: float(v) for q, v in row.items() if re.fullmatch(r"q\d+", q)}


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_gets_full_marks(name, graded):
    score, possible, output, row = result(graded, name, f"reference/{name}.ipynb")
    assert possible > 0 and score == possible and row["reason"] == "", output
    # one result per question, labelled: otter's unlabelled "Public Tests" block is left out
    for q in scores(row):  # otter's results once, under the question's score
        assert output.count(f"\n{q}: ") == 1 and output.count(f"{q} results:") == 1, output
        assert output.index(f"\n{q}: ") < output.index(f"{q} results:"), output


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_gets_zero(name, graded):
    nb = nbformat.read(autograder(name)[1], as_version=4)
    student_code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "BEGIN SOLUTION" not in student_code and "hidden: true" not in student_code
    assert not any(
        line in student_code
        for s in solutions(name)
        for line in s.splitlines()
        if len(line.strip()) > 30
        and "def " not in line
        and '"""' not in line
        and not line.lstrip().startswith("class ")  # the given signature
    )
    score, possible, output, row = result(graded, name, "untouched/untouched.ipynb")
    assert possible > 0 and score == 0, output
    # each question's reason: its functions are the template's
    for q in scores(row):
        assert re.search(rf"{q}: [^;]*is not implemented yet", row["reason"]), row["reason"]
    assert "is not implemented yet" in output


@pytest.mark.parametrize("name, bug", list(THROUGH_MAKE_GRADE.items()))
def test_known_bug_is_charged_once_in_its_question_through_make_grade(name, bug, graded):
    """A known bug, in a submission graded by make grade: points lost in its own question
    only (every other question full), and the feedback names it (the grader's code). Every
    known bug: test_autograder_tests_charge_each_known_bug_once_with_its_explanation."""
    score, possible, output, row = result(graded, name, f"bug {bug}/{name}.ipynb")
    _, _, _, reference = result(graded, name, f"reference/{name}.ipynb")
    lost = {q for q, v in scores(row).items() if v < scores(reference)[q]}
    assert lost == {QUESTION[name][bug]}, (lost, output)
    assert f"[{bug}]" in output, output  # the grader's report: the bug's code, title and fix


def test_syntax_error_undefined_name_and_template_get_a_reason_naming_them(graded):
    """Zero, with a reason in grades.csv and the feedback that says what is wrong, where
    otter alone says "TypeError: 'NoneType' object is not callable"."""
    name = "batchnorm-channels-last"
    score, _, output, row = result(graded, name, "syntax error/hw.ipynb")
    line = 1 + solutions(name)[0].splitlines().index(
        next(x for x in solutions(name)[0].splitlines() if "dims = tuple(" in x)
    )
    assert score == 0 and f"q1: SyntaxError in your answer to q1, line {line}" in row["reason"]
    assert (
        "q2: BatchNormChannelsLast is not defined: SyntaxError in your answer to q1"
        in (row["reason"])
    )
    assert f"SyntaxError in your answer to q1, line {line}" in output
    score, _, output, row = result(graded, name, "undefined/hw.ipynb")
    assert score == 0 and "BatchNormChannelsLast is not defined" in row["reason"], row
    assert "BatchNormChannelsLast is not defined" in output


def test_two_gradings_at_once_during_a_build_give_every_grade(graded):
    """BatchNorm's class, graded as two classes at once while its assignment was built again
    (:func:`grade_during_a_build`): every submission graded to its end (no zero for a write
    by the grader's own build, none for a missing autograder), the reference full marks."""
    rows, _ = graded("batchnorm-channels-last")
    assert "assignment built" in _GRADED["build"], _GRADED["build"]
    assert set(rows) == set(cases("batchnorm-channels-last"))
    for row in rows.values():
        assert "wrote files" not in row["reason"] and "autograder" not in row["reason"], row
        assert not row["reason"].startswith(("stopped", "the grader")), row
    assert all(
        float(rows[f]["total"]) == float(rows[f]["possible"])
        for f in (
            "reference/batchnorm-channels-last.ipynb",
            "renamed/batchnorm-channels-last (1).ipynb",
        )
    )


@pytest.mark.parametrize(
    "source, message",
    [
        (
            [
                ("raw", "# ASSIGNMENT CONFIG\nname: t"),
                ("raw", "# BEGIN QUESTION\nname: q1"),
                ("raw", "# BEGIN SOLUTION"),
                ("code", "x = 1  # SOLUTION"),
                ("raw", "# BEGIN TESTS"),
            ],
            "t.ipynb cell 4: BEGIN TESTS outside a question",
        ),
        (
            [
                ("raw", "# ASSIGNMENT CONFIG\nname: t"),
                ("raw", "# BEGIN QUESTION\nname: q1"),
                ("raw", "# BEGIN SOLUTION"),
                ("code", "def f():\n    # BEGIN SOLUTION\n    return 1\n"),
                ("raw", "# END SOLUTION"),
                ("raw", "# END QUESTION"),
            ],
            "t.ipynb cell 3: BEGIN SOLUTION without END SOLUTION",
        ),
        (
            [
                ("raw", "# ASSIGNMENT CONFIG\nname: t"),
                ("raw", "# BEGIN QUESTION\nname: q1"),
                ("raw", "# BEGIN SOLUTION"),
                ("code", "def f():\n    return 1\n"),
                ("raw", "# END SOLUTION"),
                ("raw", "# END QUESTION"),
            ],
            "t.ipynb cell 3: a solution cell without",
        ),
        (
            [
                ("raw", "# ASSIGNMENT CONFIG\nname: t"),
                ("raw", "# BEGIN QUESTION\nname: q1"),
                ("markdown", "Do it."),
                ("raw", "# END QUESTION"),
            ],
            "t.ipynb cell 1: question 'q1' has neither a solution nor tests",
        ),
        (
            [
                ("raw", "# ASSIGNMENT CONFIG\nname: t"),
                ("raw", "# BEGIN QUESTION\nname: q1"),
                ("raw", "# BEGIN SOLUTION"),
                ("code", "x = 1  # SOLUTION"),
            ],
            "t.ipynb cell 2: BEGIN SOLUTION is never ended",
        ),
    ],
)
def test_broken_master_is_named_by_file_and_cell(source, message, tmp_path):
    make = {
        "raw": nbformat.v4.new_raw_cell,
        "code": nbformat.v4.new_code_cell,
        "markdown": nbformat.v4.new_markdown_cell,
    }
    nb = nbformat.v4.new_notebook(cells=[make[k](s) for k, s in source])
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(assignments.MasterError, match=re.escape(message)):
        assignments.check_master(nb, "t.ipynb")
    # and the build stops with it, before otter assign runs
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "assignments.py"),
            "--out",
            str(tmp_path / "out"),
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and message in run.stderr and not (tmp_path / "out").exists()


def test_masters_are_well_formed():
    for name in NAMES:
        questions = assignments.check_master(
            nbformat.read(ROOT / "assignments" / f"{name}.ipynb", as_version=4), name
        )
        assert len(questions) >= 2


def autograder_tests(name, tmp_path):
    import zipfile

    from otter.test_files.exception_test import ExceptionTestFile

    zip_path, _ = autograder(name)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(tmp_path / "ag")
    return [
        ExceptionTestFile.from_file(str(p))
        for p in sorted((tmp_path / "ag" / "tests").glob("*.py"))
    ]


def environment(name, replacements=()):
    """Run the master notebook's code (tests left out) with ``replacements``; return its globals."""
    code = [c for in_tests, c in _code_cells(name, "TESTS") if not in_tests]
    # no otter.Notebook here: it looks for the notebook file, and the tests do not use it
    source = re.sub(
        r"^grader = otter\.Notebook\(.*\)$", "grader = None", "\n\n".join(code), flags=re.M
    )
    for old, new in replacements:
        assert source.count(old) == 1, f"{old!r} is not in the reference solution exactly once"
        source = source.replace(old, new)
    env = {"__name__": "__main__"}
    exec(compile(source, f"{name}.ipynb", "exec"), env)
    return env


@pytest.mark.parametrize("name, code", [(n, c) for n in NAMES for c in CATALOGUE[n]])
def test_autograder_tests_charge_each_known_bug_once_with_its_explanation(name, code, tmp_path):
    files = autograder_tests(name, tmp_path)
    env = environment(name, CATALOGUE[name][code])
    for f in files:
        f.run(env)
    messages = "\n".join(
        r.message or "" for f in files for r in f.test_case_results if not r.passed
    )
    lost = {f.name for f in files if f.score < f.possible}
    assert lost == {QUESTION[name][code]}, messages  # once, in its own question
    assert f"[{code}]" in messages, messages


@pytest.mark.parametrize("name", NAMES)
def test_autograder_tests_pass_on_the_reference_solution(name, tmp_path):
    files = autograder_tests(name, tmp_path)
    env = environment(name)
    for f in files:
        f.run(env)
    assert all(f.passed_all for f in files), "\n".join(f.summary() for f in files)


#: classic bugs the PUBLIC tests must catch (so "All test cases passed!" means the basics are
#: right): assignment -> bug -> replacements in the reference solution
PUBLIC_CATCHES = {
    "batchnorm-channels-last": {
        "eps_outside_sqrt": CATALOGUE["batchnorm-channels-last"]["eps_outside_sqrt"],
        "running_var_biased": CATALOGUE["batchnorm-channels-last"]["running_var_biased"],
        "eval_uses_batch_stats": CATALOGUE["batchnorm-channels-last"]["eval_uses_batch_stats"],
        "statistics_over_torchs_layout": [
            ("dims = tuple(range(x.dim() - 1))", "dims = (0, 2, 3)"),
        ],
    },
    "groupnorm-channels-last": {
        "unbiased_variance": CATALOGUE["groupnorm-channels-last"]["unbiased_variance"],
        "eps_outside_sqrt": CATALOGUE["groupnorm-channels-last"]["eps_outside_sqrt"],
        "groups_of_torchs_layout": [
            (
                "groups = x.reshape(N, -1, num_groups, C // num_groups)",
                "groups = x.reshape(N, num_groups, -1, 1)",
            )
        ],
        "affine_not_applied": CATALOGUE["groupnorm-channels-last"]["affine_not_applied"],
        "interleaved_groups": [
            (
                "groups = x.reshape(N, -1, num_groups, C // num_groups)",
                "groups = x.reshape(N, -1, C // num_groups, num_groups).transpose(2, 3)",
            )
        ],
    },
    "layernorm-rmsnorm": {
        "eps_outside_sqrt": CATALOGUE["layernorm-rmsnorm"]["eps_outside_sqrt"],
        "backward_mean_over_the_last_dim_only": [
            ("g - g.mean(dims, keepdim=True)", "g - g.mean(-1, keepdim=True)"),
        ],
        "forward_over_the_last_dim_only": [
            (
                "dims = tuple(range(-weight.dim(), 0))                  "
                "# the normalized dims: the last k\n    mean",
                "dims = (-1,)\n    mean",
            ),
        ],
        "backward_drops_the_x_hat_term": CATALOGUE["layernorm-rmsnorm"]["backward_term"],
    },
}


def public_failures(name, replacements, tmp_path) -> list[str]:
    """The names of the public test cases that fail on the solution with ``replacements``."""
    files = autograder_tests(name, tmp_path)
    env = environment(name, replacements)
    for f in files:
        f.run(env)
    return [
        r.test_case.name
        for f in files
        for r in f.test_case_results
        if not r.passed and not r.test_case.hidden
    ]


@pytest.mark.parametrize("name, bug", [(n, b) for n in NAMES for b in PUBLIC_CATCHES[n]])
def test_public_tests_catch_each_classic_bug(name, bug, tmp_path):
    assert public_failures(name, PUBLIC_CATCHES[name][bug], tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_public_tests_pass_on_the_reference_solution(name, tmp_path):
    assert public_failures(name, [], tmp_path) == []


def test_layernorm_backward_over_the_last_dim_only_loses_points_by_otter_run(graded):
    """Means over the last dim only, instead of the last ``weight.dim()``, are right for
    ``LayerNorm(6)`` only: the tests with ``LayerNorm((4, 6))`` on 3-D and 4-D input catch
    it, through ``otter run``."""
    score, possible, output, _ = result(
        graded, "layernorm-rmsnorm", "last dim only/last dim only.ipynb"
    )
    assert 0 < score < possible, output
    assert "LayerNorm((4, 6)) on an input of shape (3, 4, 6)" in output, output


#: assignment -> (answers using the library's layer, the questions graded on the layer)
LIBRARY = {
    "batchnorm-channels-last": [
        "class BatchNormChannelsLast(nn.BatchNorm2d):\n    pass\n",
    ],
    "groupnorm-channels-last": [
        "import norms\n\ndef group_statistics(x, num_groups):\n"
        "    g = x.reshape(x.shape[0], -1, num_groups, x.shape[-1] // num_groups)\n"
        "    return g.mean((1, 3)), g.var((1, 3), unbiased=False)\n\n"
        "class GroupNormChannelsLast(nn.Module):\n"
        "    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):\n"
        "        super().__init__()\n"
        "        self.inner = nn.GroupNorm(num_groups, num_channels, eps, affine)\n"
        "        self.weight, self.bias = self.inner.weight, self.inner.bias\n\n"
        "    def forward(self, x):\n"
        "        y = torch.nn.functional.group_norm(x.movedim(-1, 1), self.inner.num_groups,"
        " self.weight, self.bias, self.inner.eps)\n"
        "        return y.movedim(1, -1)\n",
    ],
}


@pytest.mark.parametrize("name", list(LIBRARY))
def test_a_submission_using_the_library_layer_scores_zero_for_it(name, graded):
    """Subclassing torch's layer, or calling torch's normalization function, gets no point
    for the layer, and the output says why."""
    _, _, output, row = result(graded, name, "library/library.ipynb")
    layer = {"batchnorm-channels-last": {"q1", "q2", "q3"}, "groupnorm-channels-last": {"q2"}}[name]
    assert layer <= set(row) and [float(row[q]) for q in sorted(layer)] == [0] * len(layer), output
    assert "write the layer yourself" in output or "write the normalization yourself" in output


def test_a_renamed_submission_gets_full_marks(graded):
    """A student's download is often renamed ("batchnorm-channels-last (1).ipynb"). This one
    also writes into its own folder (:data:`OWN_FOLDER`): allowed, no reason for a zero."""
    name = "batchnorm-channels-last"
    score, possible, output, row = result(graded, name, f"renamed/{name} (1).ipynb")
    assert possible > 0 and score == possible and row["reason"] == "", output


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_carries_its_public_tests_and_points(name, tmp_path):
    """The setup cell writes the public tests next to the notebook (Colab keeps no notebook
    file otter could read them from; a renamed file breaks otter's notebook lookup). As on
    JupyterHub: the notebook, renamed, in a folder of a user's home, run in a Jupyter kernel
    whose working directory is the notebook's folder and whose HOME is the user's, started
    from another working directory, without otter's notebook metadata: every
    ``grader.check`` passes on the reference solution. Each question's title gives its
    points."""
    from nbclient import NotebookClient

    nb = nbformat.read(autograder(name)[1], as_version=4)
    assert "tests" not in nb.metadata.get("otter", {})
    titles = [c.source for c in nb.cells if c.source.startswith("**Question")]
    assert titles and all(re.search(r"\*[\d.]+ points? \(q\d+\)", t) for t in titles), titles
    assert "Time:" in nb.cells[0].source or any("**Time:**" in c.source for c in nb.cells[:3])
    home = tmp_path / "home" / "jovyan"
    path = notebook(name, home / "course work" / "copy of it (1).ipynb", solutions(name))
    nb = nbformat.read(path, as_version=4)
    checks = re.findall(r'grader\.check\("(q\d+)"\)', "\n".join(c.source for c in nb.cells))
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "\n".join(f"assert grader.check({q!r}).passed_all, {q!r}" for q in checks)
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "IPYTHON"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))  # the worktree's norms, as make test's
    other = tmp_path / "elsewhere"
    other.mkdir()
    cwd = os.getcwd()
    os.chdir(other)
    try:
        client = NotebookClient(
            nb,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        client.execute(env=env)  # raises CellExecutionError on a failing check
    finally:
        os.chdir(cwd)
    assert checks and (path.parent / f"{name}-tests" / "q1.py").exists()
    assert not (other / f"{name}-tests").exists()


def test_autograder_zip_grades_in_gradescopes_layout(tmp_path):
    """Gradescope, simulated without Docker or network: the zip unpacked into
    ``/autograder/source`` (here a temporary root), the submission in
    ``/autograder/submission``, and ``run_autograder``'s command (``python
    /autograder/source/run_otter.py``) run with this venv as the environment ``setup.sh``
    would build from the zip's ``environment.yml`` (checked by the test below); the reference
    gets full marks in ``/autograder/results/results.json``."""
    import zipfile

    name = "groupnorm-channels-last"
    zip_path, _ = autograder(name)
    ag = tmp_path / "root" / "autograder"
    for folder in ("source", "submission", "results"):
        (ag / folder).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(ag / "source")
    (ag / "submission_metadata.json").write_text("{}")  # Gradescope writes one
    notebook(name, ag / "submission" / f"{name}.ipynb", solutions(name))
    setup = (ag / "source" / "setup.sh").read_text()
    assert "env create -f /autograder/source/environment.yml" in setup, setup
    command = (ag / "source" / "run_autograder").read_text().strip().splitlines()[-1]
    assert command == "python /autograder/source/run_otter.py", command
    run_otter = (ag / "source" / "run_otter.py").read_text()
    assert run_otter.count('"/autograder"') == 1, run_otter
    (ag / "source" / "run_otter.py").write_text(run_otter.replace('"/autograder"', repr(str(ag))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "IPYTHON"))}
    env.update(HOME=str(tmp_path / "root"), PYTHONPATH=str(ROOT))
    run = subprocess.run(
        [sys.executable, str(ag / "source" / "run_otter.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    results = json.loads((ag / "results" / "results.json").read_text())
    scored = [t for t in results["tests"] if "max_score" in t]
    score, possible = sum(t["score"] for t in scored), sum(t["max_score"] for t in scored)
    assert possible > 0 and score == possible, results


@pytest.mark.parametrize("name", NAMES)
def test_autograder_environment_installs_torch_and_a_wheel_of_norms(name, tmp_path):
    """Gradescope builds the autograder's environment from the zip's environment.yml
    (``setup.sh``: ``mamba env create``, whose pip runs in the file's folder): it must have
    this venv's Python, install the pinned torch and norms' other dependencies at their pins
    of requirements.txt, and norms from a wheel inside the zip (the hidden tests import
    norms.check); the wheel (the reference) is not in the student's folder. ``pip install
    --dry-run --no-index`` of those requirements, in the unpacked zip, finds every one: the
    pins are the versions installed here, the wheel is where the file says (otter-grader's
    own pin, with the extras Gradescope needs, is otter's; it is not installed here whole)."""
    import zipfile

    import yaml

    zip_path, student = autograder(name)
    with zipfile.ZipFile(zip_path) as z:
        env = yaml.safe_load(z.read("environment.yml"))
        names = z.namelist()
        z.extractall(tmp_path / "source")
    assert f"python={sys.version_info.major}.{sys.version_info.minor}" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pinned = dict(
        re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    )
    wheels = [p for p in pip if p.endswith(".whl")]
    assert f"torch=={pinned['torch']}" in pip and len(wheels) == 1 and wheels[0] in names, pip
    ours = [p for p in pip if not p.startswith("otter-grader")]
    for requirement in ours:
        package, _, version = requirement.partition("==")
        assert requirement in wheels or pinned.get(package) == version, (requirement, pinned)
    with zipfile.ZipFile(zip_path) as z, zipfile.ZipFile(z.open(wheels[0])) as wheel:
        assert "norms/check/grader.py" in wheel.namelist()
    assert not list(student.parent.glob("*.whl"))
    report = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet"]
        + ["--report", str(report), *ours],
        cwd=tmp_path / "source",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    install = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    # everything else is here already, at its pin (norms too, where it is installed)
    assert set(install) <= {"norms"}, install


def public_tests(name) -> str:
    """The public tests of a handed-out notebook (what its setup cell writes next to it)."""
    nb = nbformat.read(autograder(name)[1], as_version=4)
    setup = next(c.source for c in nb.cells if "PUBLIC_TESTS = " in c.source)
    line = next(x for x in setup.splitlines() if x.startswith("PUBLIC_TESTS = "))
    return "\n".join(ast.literal_eval(line.removeprefix("PUBLIC_TESTS = ")).values())


def derived(name) -> set[str]:
    """The formulas an assignment asks students to derive: every product, sum or difference
    of two or more names in the reference's backward functions (``g * x_hat``,
    ``dy * weight``, ...), without spaces."""
    out = set()
    for code in solutions(name):
        for fn in ast.walk(ast.parse(code)):
            if isinstance(fn, ast.FunctionDef) and "backward" in fn.name:
                for node in ast.walk(fn):
                    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                    if isinstance(node, ast.BinOp) and len(names) >= 2:
                        out.add(ast.unparse(node).replace(" ", ""))
    return out


def test_public_tests_do_not_give_the_formulas_they_ask_for():
    """The handed-out public tests check the backward passes by their behaviour (against
    torch's autograd); none of the formulas the assignment asks to derive is in them, not
    even in a message."""
    name = "layernorm-rmsnorm"
    formulas = derived(name)
    assert {"g*x_hat", "dy*weight"} <= formulas, formulas
    text = public_tests(name).replace(" ", "")
    assert "autograd" in public_tests(name)
    assert not [f for f in formulas if f in text], [f for f in formulas if f in text]


def test_make_assignments_builds_only_what_changed(tmp_path):
    """Up to date: nothing is built again (one autograder each, the same); the digest of an
    assignment's sources changes with its master notebook."""
    before = {n: sorted((BUILT / n / "autograder").glob("*.zip")) for n in NAMES}
    assert all(len(z) == 1 for z in before.values()), before  # no zips piling up
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "assignments.py")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and "assignment built" not in run.stdout, run.stdout + run.stderr
    assert run.stdout.count("assignment up to date") == len(NAMES), run.stdout
    assert {n: sorted((BUILT / n / "autograder").glob("*.zip")) for n in NAMES} == before
    master = tmp_path / "batchnorm-channels-last.ipynb"
    shutil.copyfile(ROOT / "assignments" / master.name, master)
    digest = assignments.sources(master)
    master.write_text(master.read_text().replace("Question 1", "Question one"))
    assert assignments.sources(master) != digest


@pytest.mark.parametrize("run_tests", [True, False])
def test_otter_assign_runs_the_tests_on_the_solution_unless_told_not_to(
    run_tests, tmp_path, monkeypatch
):
    """``make assignments`` has otter assign run the tests on each solution; ``make test`` passes
    ``--no-run-tests`` (its own tests grade the solutions) and nothing else changes."""
    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, "", "stopped by the test")

    monkeypatch.setattr(assignments.subprocess, "run", fake_run)
    master = ROOT / "assignments" / "layernorm-rmsnorm.ipynb"
    (tmp_path / "w.whl").write_bytes(b"")  # copied next to the prepared master
    with pytest.raises(RuntimeError, match="stopped by the test"):
        assignments._build_into(
            master, master.name, tmp_path / "out", tmp_path / "w.whl", run_tests
        )
    (command,) = [c for c in commands if "assign" in c]
    assert command[1] == "assign" and command[-1] == str((tmp_path / "out").resolve())
    assert ("--no-run-tests" in command) == (not run_tests), command
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: ASSIGNMENTS_ARGS := --no-run-tests$", makefile, re.M)
    assert "tools/assignments.py $(ASSIGNMENTS_ARGS)" in makefile


def test_the_wheel_is_built_outside_the_tree(tmp_path, monkeypatch):
    """A build that was interrupted or ran at the same time left ``build/`` in the tree
    (setuptools' ``bdist.linux-x86_64/wheel/norms-*.dist-info``): the next build does not
    fail on it, and writes nothing into the tree."""
    tree = tmp_path / "tree"
    for part in assignments.PACKAGE:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            tree.mkdir(exist_ok=True)
            shutil.copyfile(src, tree / part)
    stale = tree / "build" / "bdist.linux-x86_64" / "wheel" / "norms-0.1.0.dist-info"
    stale.mkdir(parents=True)
    (stale / "METADATA").write_text("left by an interrupted build")
    listing = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    monkeypatch.setattr(assignments, "ROOT", tree)
    wheel = assignments.build_wheel(tmp_path / "wheel")
    assert wheel.exists() and wheel.name.startswith("norms-")
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == listing


def test_batchnorm_question_1_says_the_buffers_carry_no_autograd_history():
    """Question 3 charges running statistics that carry autograd history (the next backward
    fails): the handed-out question 1, which asks for them, says so."""
    nb = nbformat.read(autograder("batchnorm-channels-last")[1], as_version=4)
    q1 = next(c.source for c in nb.cells if c.source.startswith("**Question 1"))
    assert "carry no autograd\nhistory" in q1 or "carry no autograd history" in q1, q1
    assert "torch.no_grad()" in q1, q1


@pytest.mark.parametrize("name", NAMES)
def test_the_chinese_student_notebook_is_the_student_notebook_in_chinese(name):
    """NAME/student/zh/NAME.ipynb: every markdown message translated (no English paragraph
    left, the points in Chinese), every code cell the student notebook's, so the same
    autograder grades it."""
    import i18n

    _, student = autograder(name)
    chinese = student.parent / "zh" / student.name
    assert chinese.exists(), f"{chinese} is missing: run `make assignments`"
    english, zh = (nbformat.read(p, as_version=4) for p in (student, chinese))
    code = lambda nb: [c.source for c in nb.cells if c.cell_type == "code"]
    assert code(zh) == code(english)
    markdown = "\n".join(c.source for c in zh.cells if c.cell_type == "markdown")
    assert i18n.english_left(markdown) == [], i18n.english_left(markdown)[:3]
    assert "points" not in markdown and "分来自" in markdown
    assert i18n.chinese_assignment(student, name).cells == zh.cells, "stale: make assignments"
