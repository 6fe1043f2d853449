"""Build the student edition (``make student``): the site and the notebooks without solutions.

- ``_build/student/html``: the same Jupyter Book site, built with sphinx-exercise's
  ``hide_solutions`` (every ``solution`` directive, gated code included, is left out).
- ``--language zh``: the Chinese student edition, ``_build/student/html/zh`` and
  ``_build/student/notebooks/zh``, from the Chinese notebooks (``zh/``) and the Chinese
  edition's catalogs (``tools/i18n.py``): a build step, not a second copy of the text.
- ``_build/student/notebooks``: every chapter notebook with its solutions removed (the
  ``solution-start`` ... ``solution-end`` cells, their code and outputs, and ``solution``
  directives), an empty "your solution" cell in place of each gated solution, and every
  other cell with the chapter's stored outputs, numbered anew from 1.

Those stored outputs are what the cells print without the solutions: ``make execute``
stores them and nbval (``make test``) re-checks them with every solution cell isolated
(``tools/solution_isolation.py``: the cells after a solution see nothing it did, and a cell
that needs a solution's names fails there, naming it). So the student notebooks run top to
bottom and print what they show, and no notebook is executed a second time for them.

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
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import toc  # noqa: E402
from exercises import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "student"
#: what a student finds where a solution was
YOUR_SOLUTION = "# Your solution to {label}.\n"


def strip(nb, path="notebook", keep_outputs=False):
    """Return a copy of ``nb`` without solutions (exercises checked first); the other cells
    keep their outputs if ``keep_outputs`` (numbered anew from 1), else are left unexecuted."""
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
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        if keep_outputs and "your-solution" not in cell.metadata.get("tags", []):
            count += 1
            cell.execution_count = count
            for out in cell.outputs:
                if "execution_count" in out:
                    out["execution_count"] = count
        else:
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    return nb


def student_notebook(path: Path, out: Path) -> str:
    """Write the student edition of one executed chapter to ``out``; return its name."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    nb = nbformat.read(path, as_version=4)
    unrun = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and c.source.strip() and c.execution_count is None
    ]
    if unrun:
        raise SystemExit(
            f"student edition of {shown}: cells {unrun} were never executed (make execute)"
        )
    student = strip(nb, shown, keep_outputs=True)
    for cell in student.cells:  # a Chinese notebook finds the images from zh/book/
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace("](../../book/images/", "](images/")
    nbformat.write(student, out / path.name)
    return str(shown)


def chapters() -> list[Path]:
    """Every notebook the book's table of contents lists."""
    return toc.notebooks()


def build_notebooks(paths, out: Path, fresh: bool = True) -> None:
    if fresh and out.exists():
        shutil.rmtree(out)  # no notebook of an earlier build may hide a missing one
    out.mkdir(parents=True, exist_ok=True)
    # images the notebooks show by relative path
    if (ROOT / "book" / "images").exists():
        shutil.copytree(ROOT / "book" / "images", out / "images", dirs_exist_ok=True)
    for path in paths:
        student_notebook(path, out)
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"student notebooks: {len(paths)} in {shown}")


def site_theme_options() -> dict:
    """The theme options jupyter-book gives the site (from _config.yml): a build that
    changes some of them passes all of them (a Sphinx override replaces the whole dict)."""
    from jupyter_book.config import get_final_config

    config, _ = get_final_config(
        user_yaml=ROOT / "_config.yml",
        cli_config={"latex_individualpages": False},
        sourcedir=ROOT,
        use_external_toc=True,
    )
    return dict(config.get("html_theme_options", {}))


def student_theme_options() -> dict:
    """The site's theme options without a way to the full notebooks: no launch buttons
    (Colab and Binder open the notebooks of the repository, solutions included) and no
    repository, edit or issues button. The download button stays: it serves the student
    notebooks that :func:`replace_sources` puts in ``_sources``."""
    options = site_theme_options()
    # jupyter-book merges these into the site's options key by key: each launcher's URL is
    # emptied rather than the key left out
    options["launch_buttons"] = {
        key: "" for key in ("colab_url", "binderhub_url", "jupyterhub_url", "deepnote_url")
    } | {"thebe": False}
    options.update(use_repository_button=False, use_edit_page_button=False, use_issues_button=False)
    return options


def replace_sources(html: Path, source: Path = ROOT) -> list[str]:
    """Put the student notebook in place of every ``_sources/**/*.ipynb`` (the page's download
    button serves that file, and Sphinx copies the full notebook there); ``source`` is where
    the notebooks are (``zh/`` for the Chinese edition)."""
    replaced = []
    for target in sorted((html / "_sources").rglob("*.ipynb")):
        rel = target.relative_to(html / "_sources")
        nb = nbformat.read(source / rel, as_version=4)
        nbformat.write(strip(nb, rel, keep_outputs=True), target)
        replaced.append(str(rel))
    return replaced


def language_overrides(language: str | None, work: Path) -> dict:
    """What a build in ``language`` adds to the student site's configuration: the Chinese
    catalogs (as the Chinese site is built, ``tools/i18n.py``), nothing for English."""
    if language is None:
        return {}
    import i18n

    return {
        "language": i18n.LANGUAGE,
        "locale_dirs": [str(i18n.pasted_catalogs(work / "locales"))],
        "gettext_compact": False,
        "html_theme_options": student_theme_options() | i18n.THEME_TEXT,
    }


def build_html(out: Path, language: str | None = None) -> None:
    """The site with hide_solutions, warnings as errors, like make book; in Chinese with
    ``language="zh"`` (from the same notebooks and the Chinese edition's catalogs).

    Sphinx and myst-nb write next to the output folder (``jupyter_execute``: every notebook
    and output image, solutions included; the doctrees): the site is built in
    ``_build/student-build`` and only its HTML folder is moved to ``out``, so nothing under
    ``_build/student`` holds a solution."""
    from jupyter_book.sphinx import build_sphinx

    work = ROOT / "_build" / ("student-build" + (f"-{language}" if language else ""))
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
            # the English and the Chinese student editions link to each other
            "html_theme_options": student_theme_options(),
        }
        | language_overrides(language, work),
        doctreedir=work / ".doctrees",
        warningiserror=True,
        keep_going=True,
        quiet=True,
    )
    if result:
        raise SystemExit(f"student site: the build failed ({result})")
    replace_sources(work / "html", ROOT / "zh" if language else ROOT)
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
    parser.add_argument(
        "--language",
        choices=["en", "zh"],
        default="en",
        help="zh: the Chinese student edition (_build/student/html/zh, notebooks/zh)",
    )
    args = parser.parse_args(argv)
    zh = args.language == "zh"
    paths = [p.resolve() for p in args.notebooks] or chapters()
    if zh:  # the Chinese notebooks (make translations), with the same cells
        paths = [ROOT / "zh" / p.relative_to(ROOT) for p in paths]
    if not args.no_notebooks:
        out = args.out / "notebooks" / ("zh" if zh else "")
        build_notebooks(paths, out, fresh=not args.notebooks and not zh)
    if not args.no_html:
        build_html(args.out / "html" / ("zh" if zh else ""), "zh" if zh else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
