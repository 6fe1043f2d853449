"""The build's own guarantees: pinned inputs, a self-contained site, a build that fails
on a raising notebook, a cache that cannot serve stale outputs, clear set-up errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import stored_outputs  # noqa: E402


def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_requirements_are_pinned_and_torch_is_the_local_wheel():
    lines = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    unpinned = [line for line in lines if "==" not in line]
    assert unpinned == [], f"unpinned requirements: {unpinned}"
    assert "torch==2.13.0" in lines


def test_make_lets_python_keep_its_bytecode_caches(tmp_path):
    """A recipe of the Makefile runs Python without PYTHONDONTWRITEBYTECODE, even when the
    caller sets it (make test's processes then compile norms and the tests once, not each)."""
    probe = tmp_path / "probe.mk"
    probe.write_text(
        "include Makefile\nprobe-bytecode:\n"
        "\t@python3 -c 'import sys; print(sys.flags.dont_write_bytecode)'\n"
    )
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", str(probe), "probe-bytecode"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", done.stdout


def test_the_installer_make_uses_is_the_one_requirements_pin(tmp_path):
    """make installs uv with pip next to torch, then requirements.txt with that uv, and the
    Colab-like venv the same: both take requirements.txt's pin (requirements.txt's install would
    replace another version)."""
    from colab_venv import pinned

    probe = tmp_path / "probe.mk"
    probe.write_text("include Makefile\nprobe-uv:\n\t@echo '$(UV_PIN)'\n")
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", str(probe), "probe-uv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"uv==[\d.]+", pinned("uv")), pinned("uv")
    assert done.stdout.strip() == pinned("uv"), done.stdout


def test_npm_assets_are_pinned_and_locked():
    package = json.loads((ROOT / "package.json").read_text())
    loose = {
        k: v for k, v in package["dependencies"].items() if not re.fullmatch(r"\d+\.\d+\.\d+", v)
    }
    assert loose == {}, f"npm dependencies must be exact versions: {loose}"
    lock = json.loads((ROOT / "package-lock.json").read_text())
    for name, version in package["dependencies"].items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def test_no_static_folder_that_jupyter_book_would_inject():
    # jupyter-book 1.x adds a <script> to every page for each .js under <root>/_static.
    assert not (ROOT / "_static").exists()
    assert not (ROOT / "book" / "_static").exists()


#: The project's own scripts, inlined into notebook outputs (never under _static/).
PROJECT_JS = {"norms/explore/web/explorer.js", "norms/quiz/score.js"}


def test_no_third_party_javascript_is_committed():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    js = [f for f in tracked.stdout.split() if f.endswith(".js")]
    assert set(js) <= PROJECT_JS, f"committed JavaScript: {sorted(set(js) - PROJECT_JS)}"
    for name in js:
        text = (ROOT / name).read_text()
        assert "project code" in text.split("*/")[0].lower(), (
            f"{name} must say in its header that it is project code"
        )
        assert "_static" not in Path(name).parts


def test_site_loads_scripts_from_itself():
    sphinx = config()["sphinx"]["config"]
    urls = [sphinx["mathjax_path"], *sphinx["nb_ipywidgets_js"]]
    assert not [u for u in urls if "//" in u], f"scripts from other hosts: {urls}"


def test_site_shows_the_stored_outputs_that_nbval_checks():
    """The site does not execute: nbval (make test) proves the stored outputs current."""
    assert config()["execute"]["execute_notebooks"] == "off"
    makefile = (ROOT / "Makefile").read_text()
    assert "tools/stored_outputs.py" in makefile.split("\nstored-outputs:")[1].split("\n\n")[0]
    # both sites are built after the check (by the targets that run their builds)
    for site, command in (("site", "jupyter-book build"), ("student-site", "tools/student.py")):
        rule = makefile.split(f"\n{site}:")[1].split("\n\n")[0]
        assert "stored-outputs" in rule.split("\n")[0] and command in rule, site
    assert "--nbval" in makefile and "book $(NBVAL)" in makefile


def test_stored_output_check_names_what_is_wrong():
    nb = nbformat.v4.new_notebook()
    ok = nbformat.v4.new_code_cell("1 + 1", execution_count=1)
    raised = nbformat.v4.new_code_cell("1 / 0", execution_count=2)
    raised.outputs = [
        nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="", traceback=[])
    ]
    nb.cells = [ok, raised]
    assert stored_outputs.problems(nb, "x") == [
        "x: code cell 2 stores an error but is not tagged raises-exception"
    ]
    raised.metadata["tags"] = ["raises-exception"]
    assert stored_outputs.problems(nb, "x") == []
    ok.execution_count = None
    assert "never executed" in stored_outputs.problems(nb, "x")[0]
    ok.execution_count = 3
    assert "top to bottom" in stored_outputs.problems(nb, "x")[0]


def _fresh_make_env(env: dict | None = None) -> dict:
    """The environment for a make started by a test: without the MAKEFLAGS of the make that
    runs the tests (its jobserver's pipes are not passed on; the child would warn)."""
    env = dict(os.environ if env is None else env)
    for key in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(key, None)
    return env


def _make(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_fresh_make_env(env),
        timeout=60,
    )


def test_missing_python_is_one_clear_line():
    result = _make("prereqs", "PYTHON=python3.11-that-does-not-exist")
    assert result.returncode != 0
    assert result.stdout == ""
    assert re.fullmatch(
        r"Makefile:\d+: \*\*\* python3.11-that-does-not-exist not found: install Python 3.11 "
        r"\(Debian: apt-get install python3.11 python3.11-venv\) or run make "
        r"PYTHON=/path/to/python3.11.  Stop.\n",
        result.stderr,
    ), result.stderr


def _prereqs_with_only(tmp_path, tools) -> subprocess.CompletedProcess:
    """`make prereqs` with a PATH of python3.11 and ``tools`` (symlinks) only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_python = subprocess.run(
        ["python3.11", "-c", "import sys; print(sys._base_executable)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (bin_dir / "python3.11").symlink_to(real_python)
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = _fresh_make_env({**os.environ, "PATH": str(bin_dir)})
    return subprocess.run(
        [shutil.which("make"), "--no-print-directory", "prereqs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )


def test_missing_npm_is_one_clear_line(tmp_path):
    result = _prereqs_with_only(tmp_path, ("bash", "sh"))
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "*** npm not found: install Node.js and npm" in result.stderr


def test_missing_cxx_is_one_clear_line(tmp_path):
    result = _prereqs_with_only(tmp_path, ("bash", "sh", "npm"))
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "*** g++ not found: install it (Debian: apt-get install g++)" in result.stderr


BROKEN_BOOK = {
    "_config.yml": """
        title: broken
        only_build_toc_files: true
        execute:
          execute_notebooks: force
          raise_on_error: true
    """,
    "_toc.yml": """
        format: jb-book
        root: index
    """,
    "index.md": """
        ---
        kernelspec:
          name: python3
          display_name: Python 3
        jupytext:
          text_representation:
            format_name: myst
        ---
        # Broken
        ```{code-cell} python3
        raise RuntimeError("this notebook fails")
        ```
    """,
}


def test_a_notebook_that_raises_fails_the_build(tmp_path):
    for name, text in BROKEN_BOOK.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    jb = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run(
        [str(jb), "build", str(tmp_path), "--warningiserror", "--keep-going", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0, "a raising notebook built without error"
    assert "this notebook fails" in result.stdout + result.stderr


def test_every_asset_a_built_page_links_to_exists():
    """Stylesheets, scripts and images the pages name must be in the site (the browser
    test sees the same as a 404; this says which file and which page at once)."""
    site = ROOT / "_build" / "html"
    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts]
    if not pages:
        pytest.skip("no built site (make book builds it before make test runs this)")
    attr = re.compile(r'<(?:link|script|img)\b[^>]*?\b(?:href|src)="([^"#?]+)', re.I)
    missing = []
    for page in pages:
        for url in attr.findall(page.read_text(errors="ignore")):
            if "//" in url or url.startswith(("data:", "mailto:")):
                continue
            if not (page.parent / url).resolve().exists():
                missing.append(f"{page.relative_to(site)} -> {url}")
    assert missing == [], "pages link to files the site does not have:\n" + "\n".join(missing[:20])


def test_every_link_of_a_built_page_leads_to_a_file_of_the_site():
    """A relative link (``<a href>``) that leads nowhere is a control that does nothing; the
    instructors' page links the slide decks, which `make book` copies into the site."""
    site = ROOT / "_build" / "html"
    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts]
    if not pages:
        pytest.skip("no built site (make book builds it before make test runs this)")
    instructors = (site / "book" / "instructors.html").read_text()
    assert 'href="../slides/index.html"' in instructors
    assert (site / "slides" / "index.html").exists(), "make book copies _build/slides into the site"
    href = re.compile(r'<a\b[^>]*?\bhref="([^"#?]+)', re.I)
    missing = []
    for page in pages:
        for url in href.findall(page.read_text(errors="ignore")):
            if ":" in url or url.startswith("//") or "$" in url:
                continue  # another host, mailto:, javascript:, a template inside a script
            if not (page.parent / url).resolve().exists():
                missing.append(f"{page.relative_to(site)} -> {url}")
    assert missing == [], "pages link to files the site does not have:\n" + "\n".join(missing[:20])


def test_bibliography_labels_read_like_the_citations():
    """The text cites "[Ioffe and Szegedy, 2015]"; the reference list must use the same
    label (pybtex's default would be "[IS15]"), and LaTeX in names must not leak."""
    sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
    import bib_style
    from pybtex.database import parse_file

    entries = parse_file(str(ROOT / "references.bib")).entries
    labels = dict(zip(entries, bib_style.labels(list(entries.values())), strict=True))
    assert labels["ioffe2015batch"] == "Ioffe and Szegedy, 2015"
    assert labels["santurkar2018how"] == "Santurkar et al., 2018"
    pattern = r"[^\W\d][\w\- ]*( and [\w\- ]+| et al\.)?, \d{4}[a-z]?"  # 2021a: same authors, year
    assert all(re.fullmatch(pattern, v) for v in labels.values()), labels
    assert len(set(labels.values())) == len(labels), "two entries would share a label"

    site = ROOT / "_build" / "html" / "book"
    if not (site / "references.html").exists():
        pytest.skip("no built site (make book builds it before make test runs this)")
    refs = (site / "references.html").read_text()
    listed = dict(
        re.findall(
            r'<div class="citation" id="([^"]+)"[^>]*>\s*<span class="label">'
            r'<span class="fn-bracket">\[</span>(.*?)<span',
            refs,
        )
    )
    assert sorted(listed.values()) == sorted(labels.values())
    mismatched = []
    for page in site.glob("*.html"):
        for target, text in re.findall(
            r'<a class="reference internal" href="references.html#([^"]+)"[^>]*>(.*?)</a>',
            page.read_text(),
        ):
            text = re.sub(r"<[^>]+>", "", text)
            if ", " in text and text != listed.get(target):  # parenthetical: the whole label
                mismatched.append(f"{page.name}: {text!r} -> {listed.get(target)!r}")
    assert mismatched == []


def _root_conftest():
    import importlib.util

    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_longest_files_run_first():
    """make test hands out the files in conftest.py's order, longest first (by the table of a
    recent run); the cells of a notebook and the tests of a file keep their order."""
    conftest = _root_conftest()
    table = json.loads(conftest.FILE_DURATIONS.read_text())
    gone = [name for name in table if not (ROOT / name).exists()]
    assert not gone, f"{conftest.FILE_DURATIONS.name} lists files that are gone: {gone}"
    makefile = (ROOT / "Makefile").read_text()
    test_line = re.search(r"^test:[^=\n]*##.*\n\t(.*)$", makefile, re.M).group(1)  # its recipe
    assert "--dist loadfile --no-loadscope-reorder" in test_line

    class Item:  # what the hook reads of a test
        def __init__(self, nodeid):
            self.nodeid = nodeid

    longest, shortest = max(table, key=table.get), min(table, key=table.get)
    names = [f"{shortest}::a", "tests/test_not_in_the_table.py::b", f"{longest}::c"]
    names += [f"{shortest}::d", f"{longest}::e"]
    items = [Item(n) for n in names]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        f"{longest}::c",
        f"{longest}::e",
        f"{shortest}::a",
        f"{shortest}::d",
        "tests/test_not_in_the_table.py::b",
    ]
