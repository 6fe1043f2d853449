"""``make grade`` (tools/grade.py): every submission graded in its own process with a time
and a memory limit; a hanging, exiting or file-writing submission gets a zero with a reason
and does not stop the others; grades.csv and one feedback file per submission."""

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
    nb = nbformat.read(autograder("batchnorm-channels-last")[1], as_version=4)
    cells = [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    for cell, answer in zip(cells, answers or [], strict=False):
        cell.source = answer
    if first:
        cells[0].source = first + "\n" + cells[0].source
    nbformat.write(nb, folder / name)


def test_grade_a_class(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    reference = solutions("batchnorm-channels-last")
    biased = [reference[0].replace("var * n / (n - 1)", "var")]
    write(subs, "alice (1).ipynb", reference)
    write(subs, "bob.ipynb", biased)
    write(subs, "carol.ipynb", reference, "import time\nwhile True:\n    time.sleep(1)")
    write(subs, "dave.ipynb", reference, "import os\nos._exit(1)")
    write(subs, "erin.ipynb", reference, "import sys\nsys.exit(0)")
    # outside its folder: into the submissions folder (the grader's input)
    write(subs, "frank.ipynb", reference, f"open({str(subs / 'planted.txt')!r}, 'w').write('x')")
    # 12 GB of address space: a MemoryError under the limit, so the class is never defined
    write(subs, "grace.ipynb", reference, "big = bytearray(12 * 2**30)")
    out = tmp_path / "grades"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "grade.py"), "batchnorm-channels-last", str(subs)]
        + ["--out", str(out), "--timeout", "90"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {
        "alice (1).ipynb",
        "bob.ipynb",
        "carol.ipynb",
        "dave.ipynb",
        "erin.ipynb",
        "frank.ipynb",
        "grace.ipynb",
    }
    assert [k for k in rows["bob.ipynb"] if k.startswith("q")] == ["q1", "q2", "q3"]
    assert float(rows["alice (1).ipynb"]["total"]) == float(rows["alice (1).ipynb"]["possible"])
    # the maximum is the autograder's, also in the rows of a zero
    assert {float(r["possible"]) for r in rows.values()} == {
        float(rows["alice (1).ipynb"]["total"])
    }
    assert 0 < float(rows["bob.ipynb"]["total"]) < float(rows["bob.ipynb"]["possible"])
    assert (
        float(rows["carol.ipynb"]["total"]) == 0
        and "stopped after" in rows["carol.ipynb"]["reason"]
    )
    assert float(rows["dave.ipynb"]["total"]) == 0 and rows["dave.ipynb"]["reason"]
    erin = rows["erin.ipynb"]
    assert float(erin["total"]) == 0 and "called sys.exit(0)" in erin["reason"]
    assert "called sys.exit(0)" in (out / "feedback" / "erin.txt").read_text()
    frank = rows["frank.ipynb"]
    assert float(frank["total"]) == 0 and "wrote files outside its folder" in frank["reason"]
    assert "planted.txt" in frank["reason"]
    grace = rows["grace.ipynb"]  # memory is bounded, and the reason says so
    assert float(grace["total"]) == 0 and "ran out of memory" in grace["reason"]
    feedback = (out / "feedback" / "bob.txt").read_text()
    assert "[running_var_biased]" in feedback  # the hidden tests' explanation reaches the student
    assert not (out / "work").exists()


def test_snapshot_sees_a_new_a_changed_and_a_removed_file(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    import grade

    (tmp_path / "a").write_text("1")
    (tmp_path / "b").write_text("1")
    before = grade.snapshot([tmp_path])
    assert grade.changed(before, grade.snapshot([tmp_path])) == []
    (tmp_path / "a").write_text("22")
    (tmp_path / "b").unlink()
    (tmp_path / "c").write_text("1")
    assert grade.changed(before, grade.snapshot([tmp_path])) == [str(tmp_path / n) for n in "abc"]
