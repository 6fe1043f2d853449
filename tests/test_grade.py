"""``make grade`` (tools/grade.py): every submission graded in its own process with a time
and a memory limit; a hanging or exiting submission gets a zero with a reason and does not
stop the others; grades.csv and one feedback file per submission."""

from __future__ import annotations

import csv
import subprocess
import sys

import nbformat
import pytest

from .notebooks import ROOT
from .test_assignments import autograder, solutions

pytestmark = pytest.mark.courses


def write(folder, name, answers=None, first=None):
    nb = nbformat.read(autograder("batchnorm2d")[1], as_version=4)
    cells = [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    for cell, answer in zip(cells, answers or [], strict=False):
        cell.source = answer
    if first:
        cells[0].source = first + "\n" + cells[0].source
    nbformat.write(nb, folder / name)


def test_grade_a_class(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    reference = solutions("batchnorm2d")
    biased = [reference[0].replace("var * n / (n - 1)", "var")]
    write(subs, "alice (1).ipynb", reference)
    write(subs, "bob.ipynb", biased)
    write(subs, "carol.ipynb", reference, "import time\nwhile True:\n    time.sleep(1)")
    write(subs, "dave.ipynb", reference, "import os\nos._exit(1)")
    out = tmp_path / "grades"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "grade.py"), "batchnorm2d", str(subs)]
        + ["--out", str(out), "--timeout", "90"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice (1).ipynb", "bob.ipynb", "carol.ipynb", "dave.ipynb"}
    assert [k for k in rows["bob.ipynb"] if k.startswith("q")] == ["q1", "q2", "q3"]
    assert float(rows["alice (1).ipynb"]["total"]) == float(rows["alice (1).ipynb"]["possible"])
    assert 0 < float(rows["bob.ipynb"]["total"]) < float(rows["bob.ipynb"]["possible"])
    assert (
        float(rows["carol.ipynb"]["total"]) == 0
        and "stopped after" in rows["carol.ipynb"]["reason"]
    )
    assert float(rows["dave.ipynb"]["total"]) == 0 and rows["dave.ipynb"]["reason"]
    feedback = (out / "feedback" / "bob.txt").read_text()
    assert "[running_var_biased]" in feedback  # the hidden tests' explanation reaches the student
    assert not (out / "work").exists()
