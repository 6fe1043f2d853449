"""The otter-grader assignments (``make assignments``), graded locally with ``otter run``
(no Docker): the reference solution gets full marks, the untouched student notebook zero,
and a notebook with one of the grader's known bugs partial marks, with the grader's
explanation of that bug in the autograder's output.

The autograders are the ones ``make assignments`` built (``make test`` builds them first);
the tests fail, not skip, when they are missing or older than their master notebook."""

from __future__ import annotations

import csv
import json
import os
import re
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

#: assignment -> bug -> (replacements in the reference solution, the grader's problem code):
#: one known bug per assignment graded end to end by ``otter run`` (a kernel per submission);
#: every known bug, these included, is graded by the autograder's own tests in CATALOGUE below
BUGS = {
    "batchnorm-channels-last": {
        "running_var_biased": (
            [("x.var(dims, unbiased=True)", "x.var(dims, unbiased=False)")],
            "running_var_biased",
        ),
    },
    "layernorm-rmsnorm": {
        "layernorm_backward_drops_a_term": (
            [
                (
                    "g.mean(dims, keepdim=True) - x_hat * (g * x_hat).mean(dims, keepdim=True))",
                    "g.mean(dims, keepdim=True))",
                )
            ],
            "backward_term",
        ),
    },
    "groupnorm-channels-last": {
        "affine_not_applied": (
            [("return x_hat * self.weight + self.bias", "return x_hat")],
            "affine_not_applied",
        ),
    },
}


def autograder(name) -> tuple[Path, Path]:
    """(autograder zip, student notebook) built by make assignments."""
    master = ROOT / "assignments" / f"{name}.ipynb"
    zips = sorted((BUILT / name / "autograder").glob(f"{name}-autograder_*.zip"))
    student = BUILT / name / "student" / f"{name}.ipynb"
    if not zips or not student.exists():
        pytest.fail(
            f"no autograder for {name} in {BUILT.relative_to(ROOT)}: run `make assignments` first"
        )
    if master.stat().st_mtime > zips[-1].stat().st_mtime:
        pytest.fail(
            f"the autograder of {name} is older than its master notebook: run `make assignments`"
        )
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
    nb = nbformat.read(student, as_version=4)
    cells = [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    if answers is not None:
        assert len(cells) == len(answers), f"{len(cells)} answer cells, {len(answers)} answers"
        for cell, answer in zip(cells, answers, strict=True):
            cell.source = answer
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def grade_class(name, cases: dict, tmp_path, timeout=300, raw=None):
    """Grade the submissions ``cases`` (file name -> answers, None: untouched; ``raw``: file
    name -> text, written as it is) with ``tools/grade.py`` (each by ``otter run`` in its own
    process, two at a time); return (file name -> its row of grades.csv, file name -> its
    feedback file's text)."""
    subs, out = tmp_path / "subs", tmp_path / "grades"
    for file, answers in cases.items():
        notebook(name, subs / file, answers)
    for file, text in (raw or {}).items():
        (subs / file).write_text(text)
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "grade.py"), name, str(subs)]
        + ["--out", str(out), "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    return rows, lambda file: (out / "feedback" / f"{Path(file).stem}.txt").read_text()


def with_bug(name, replacements) -> list[str]:
    """The reference solution's answers with ``replacements`` (each in exactly one answer)."""
    answers = solutions(name)
    for old, new in replacements:
        hits = [i for i, a in enumerate(answers) if old in a]
        assert len(hits) == 1, f"{old!r} is not in the reference solution exactly once"
        answers[hits[0]] = answers[hits[0]].replace(old, new)
    return answers


#: a bug the hidden tests catch only on 3-D and 4-D inputs: means over the last dim only,
#: instead of the last ``weight.dim()``, are right for ``LayerNorm(6)`` only
LAST_DIM_ONLY = [("g - g.mean(dims, keepdim=True)", "g - g.mean(-1, keepdim=True)")]


def cases(name) -> dict:
    """Every submission of ``name`` that these tests grade by ``otter run``: the reference
    (under the student notebook's own name), the untouched notebook, one per known bug, the
    library-using one, and a renamed reference ("NAME (1).ipynb", as downloads get renamed)."""
    out = {f"{name}.ipynb": solutions(name), "untouched.ipynb": None}
    for bug, (replacements, _) in BUGS[name].items():
        out[f"bug {bug}.ipynb"] = with_bug(name, replacements)
    if name in LIBRARY:
        out["library.ipynb"] = LIBRARY[name]
    if name == "layernorm-rmsnorm":
        out["bug last dim only.ipynb"] = with_bug(name, LAST_DIM_ONLY)
    if name == "batchnorm-channels-last":
        reference = solutions(name)
        out[f"{name} (1).ipynb"] = [OWN_FOLDER + reference[0], *reference[1:]]
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


@pytest.fixture
def graded(tmp_path_factory):
    """name -> (rows, feedback) of :func:`grade_class` on :func:`cases`, one grading per
    assignment for all the tests of this file."""

    def get(name):
        if name not in _GRADED:
            _GRADED[name] = grade_class(name, cases(name), tmp_path_factory.mktemp(name))
        return _GRADED[name]

    return get


def result(graded, name, file) -> tuple[float, float, str, dict]:
    """(score, possible, feedback, row) of one graded submission, which ``otter run``
    graded to its end (no reason for a zero)."""
    rows, feedback = graded(name)
    row = rows[file]
    assert row["reason"] == "", (row, feedback(file))
    return float(row["total"]), float(row["possible"]), feedback(file), row


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_gets_full_marks(name, graded):
    score, possible, output, _ = result(graded, name, f"{name}.ipynb")
    assert possible > 0 and score == possible, output


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
    score, possible, output, _ = result(graded, name, "untouched.ipynb")
    assert possible > 0 and score == 0, output


@pytest.mark.parametrize("name, bug", [(n, b) for n in NAMES for b in BUGS[n]])
def test_known_bug_gets_partial_marks_and_its_explanation(name, bug, graded):
    score, possible, output, _ = result(graded, name, f"bug {bug}.ipynb")
    assert 0 < score < possible, output
    code = BUGS[name][bug][1]
    assert f"[{code}]" in output, output  # the grader's report: the bug's code, title and fix


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


#: more of the grader's known bugs: assignment -> bug code -> replacements in the reference
#: solution. Graded with the autograder's own test files, run by otter's ExceptionTestFile
#: in this process (the tests `otter run` runs, without a kernel per submission).
CATALOGUE = {
    "batchnorm-channels-last": {
        "unbiased_variance": [("x.var(dims, unbiased=False)", "x.var(dims, unbiased=True)")],
        "running_var_biased": BUGS["batchnorm-channels-last"]["running_var_biased"][0],
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
        "backward_term": BUGS["layernorm-rmsnorm"]["layernorm_backward_drops_a_term"][0],
    },
    "groupnorm-channels-last": {
        "unbiased_variance": [("groups.var((1, 3), unbiased=False)", "groups.var((1, 3))")],
        "eps_outside_sqrt": [
            ("torch.sqrt(var + self.eps)).reshape", "(torch.sqrt(var) + self.eps)).reshape")
        ],
        "affine_not_applied": BUGS["groupnorm-channels-last"]["affine_not_applied"][0],
        "affine_swapped": [
            (
                "return x_hat * self.weight + self.bias",
                "return x_hat * self.bias + self.weight",
            )
        ],
    },
}


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
def test_autograder_tests_give_each_known_bug_partial_marks_and_its_explanation(
    name, code, tmp_path
):
    files = autograder_tests(name, tmp_path)
    env = environment(name, CATALOGUE[name][code])
    for f in files:
        f.run(env)
    score, possible = sum(f.score for f in files), sum(f.possible for f in files)
    messages = "\n".join(
        r.message or "" for f in files for r in f.test_case_results if not r.passed
    )
    assert 0 < score < possible, messages
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
    score, possible, output, _ = result(graded, "layernorm-rmsnorm", "bug last dim only.ipynb")
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
    _, _, output, row = result(graded, name, "library.ipynb")
    layer = {"batchnorm-channels-last": {"q1", "q2", "q3"}, "groupnorm-channels-last": {"q2"}}[name]
    assert layer <= set(row) and [float(row[q]) for q in sorted(layer)] == [0] * len(layer), output
    assert "write the layer yourself" in output or "write the normalization yourself" in output


def test_a_renamed_submission_gets_full_marks(graded):
    """A student's download is often renamed ("batchnorm-channels-last (1).ipynb"). This one
    also writes into its own folder (:data:`OWN_FOLDER`): allowed, no reason for a zero."""
    name = "batchnorm-channels-last"
    score, possible, output, _ = result(graded, name, f"{name} (1).ipynb")
    assert possible > 0 and score == possible, output


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
