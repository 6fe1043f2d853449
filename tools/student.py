"""Build the student edition (``make student``): the site and the notebooks without solutions.

- ``_build/student/html``: the same Jupyter Book site, built with sphinx-exercise's
  ``hide_solutions`` (every ``solution`` directive, gated code included, is left out).
  Notebook execution is served from ``make book``'s cache (same notebooks, same cache).
- ``_build/student/notebooks``: every chapter notebook with its solutions removed (the
  ``solution-start`` ... ``solution-end`` cells, their code and outputs, and ``solution``
  directives), an empty "your solution" cell in place of each gated solution, and
  every other cell executed anew, top to bottom. A cell that needed a solution's
  variables fails here, naming the notebook and the cell.

Nothing in the student site leads to a solution: its download button serves the student
notebooks (they replace the full notebooks Sphinx copies into ``_sources``), and it has
no launch button (Colab, Binder) and no repository button, since those open the full
notebooks of the repository. ``tests/test_student.py`` scans every file under
``_build/student``, and every link of its pages, for solution code and outputs.

Usage: ``python tools/student.py [--no-html] [--no-notebooks] [--out DIR] [NOTEBOOK ...]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exercises import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "student"
CELL_TIMEOUT = (
    600  # seconds: only against a hang; speed is measured by `make bench-book`, never enforced
)

#: what a student finds where a solution was
YOUR_SOLUTION = "# Your solution to {label}.\n"


def strip(nb, path="notebook"):
    """Return a copy of ``nb`` without solutions (exercises checked first)."""
    nb = nbformat.from_dict(nb)  # a deep copy
    found = check(nb, path)
    drop = {i for ex in found for i in ex.solution_cells}
    first = {ex.solution_cells[0]: ex for ex in found}
    cells = []
    for i, cell in enumerate(nb.cells):
        if i in first and first[i].solution_kind == "gated":
            blank = nbformat.v4.new_code_cell(YOUR_SOLUTION.format(label=first[i].label))
            blank["id"] = f"{first[i].label}-your-solution"
            blank.metadata["tags"] = ["your-solution"]
            cells.append(blank)
        if i not in drop:
            cells.append(cell)
    nb.cells = cells
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def student_notebook(args) -> tuple[str, float]:
    """Strip and execute one notebook; write it to ``out``; return (name, seconds)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path, out = Path(args[0]), Path(args[1])
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    nb = strip(nbformat.read(path, as_version=4), shown)
    start = time.perf_counter()
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        store_widget_state=False,
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        index = next(
            (
                i
                for i, c in enumerate(nb.cells)
                if c.cell_type == "code"
                and any(o.get("output_type") == "error" for o in c.get("outputs", []))
            ),
            "?",
        )
        raise RuntimeError(
            f"student edition of {shown}: cell {index} fails without the solutions "
            f"(does it use a solution's variables?):\n{str(exc)[-1500:]}"
        ) from None
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, out / path.name)
    return str(shown), time.perf_counter() - start


def chapters() -> list[Path]:
    """Every notebook the book's table of contents lists."""
    import re

    toc = (ROOT / "_toc.yml").read_text()
    names = re.findall(r"(?:file|root):\s*(\S+)", toc)
    return [ROOT / f"{n}.ipynb" for n in names if (ROOT / f"{n}.ipynb").exists()]


def build_notebooks(paths, out: Path, jobs: int = 2, fresh: bool = True) -> None:
    if fresh and out.exists():
        shutil.rmtree(out)  # no notebook of an earlier build may hide a missing one
    out.mkdir(parents=True, exist_ok=True)
    # images the notebooks show by relative path
    if (ROOT / "book" / "images").exists():
        shutil.copytree(ROOT / "book" / "images", out / "images", dirs_exist_ok=True)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for name, seconds in pool.map(student_notebook, [(p, out) for p in paths]):
            print(f"student notebook {name} in {seconds:.1f} s")


def student_theme_options() -> dict:
    """The site's theme options without a way to the full notebooks: no launch buttons
    (Colab and Binder open the notebooks of the repository, solutions included) and no
    repository, edit or issues button. The download button stays: it serves the student
    notebooks that :func:`replace_sources` puts in ``_sources``."""
    from jupyter_book.config import get_final_config

    config, _ = get_final_config(
        user_yaml=ROOT / "_config.yml",
        cli_config={"latex_individualpages": False},
        sourcedir=ROOT,
        use_external_toc=True,
    )
    options = dict(config.get("html_theme_options", {}))
    # jupyter-book merges these into the site's options key by key: each launcher's URL is
    # emptied rather than the key left out
    options["launch_buttons"] = {
        key: "" for key in ("colab_url", "binderhub_url", "jupyterhub_url", "deepnote_url")
    } | {"thebe": False}
    options.update(use_repository_button=False, use_edit_page_button=False, use_issues_button=False)
    return options


def replace_sources(html: Path, notebooks: Path | None) -> list[str]:
    """Put a student notebook in place of every ``_sources/**/*.ipynb`` (the page's download
    button serves that file, and Sphinx copies the full notebook there): the executed one of
    ``notebooks`` when it was built, otherwise the chapter stripped of its solutions."""
    replaced = []
    for target in sorted((html / "_sources").rglob("*.ipynb")):
        rel = target.relative_to(html / "_sources")
        built = notebooks / rel.name if notebooks is not None else None
        source = ROOT / rel
        if built is not None and built.exists() and built.stat().st_mtime >= source.stat().st_mtime:
            shutil.copyfile(built, target)
        else:
            nbformat.write(strip(nbformat.read(source, as_version=4), rel), target)
        replaced.append(str(rel))
    return replaced


def build_html(out: Path, notebooks: Path | None = None) -> None:
    """The site with hide_solutions, warnings as errors, like make book.

    Sphinx and myst-nb write next to the output folder (``jupyter_execute``: every notebook
    and output image, solutions included; the doctrees): the site is built in
    ``_build/student-build`` and only its HTML folder is moved to ``out``, so nothing under
    ``_build/student`` holds a solution."""
    from jupyter_book.sphinx import build_sphinx

    work = ROOT / "_build" / "student-build"
    shutil.rmtree(work / "html", ignore_errors=True)
    if out.exists():
        shutil.rmtree(out)
    for left in ("jupyter_execute", ".doctrees", ".png_cache"):  # from a build before this one
        shutil.rmtree(out.parent / left, ignore_errors=True)
    result = build_sphinx(
        ROOT,
        work / "html",
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides={
            "external_toc_path": (ROOT / "_toc.yml").as_posix(),
            "latex_individualpages": False,
            "hide_solutions": True,
            "html_theme_options": student_theme_options(),
        },
        doctreedir=work / ".doctrees",
        warningiserror=True,
        keep_going=True,
        quiet=True,
    )
    if result:
        raise SystemExit(f"student site: the build failed ({result})")
    replace_sources(work / "html", notebooks)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(work / "html", out)
    print(
        "student site built: "
        f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/index.html"
    )


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-html", action="store_true")
    parser.add_argument("--no-notebooks", action="store_true")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or chapters()
    if not args.no_notebooks:
        build_notebooks(paths, args.out / "notebooks", fresh=not args.notebooks)
    if not args.no_html:
        build_html(args.out / "html", args.out / "notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
