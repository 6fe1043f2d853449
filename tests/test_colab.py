"""Every notebook runs where only Colab's packages are installed.

A fresh virtual environment gets torch, numpy, matplotlib and ipywidgets (what Colab
has) and a kernel, but not `norms`. Each notebook then runs top to bottom with its
setup cell pointed at this checkout instead of the git URL, so the setup cell itself
installs `norms` and its extras, exactly as it would on Colab.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .notebooks import BOOK, ROOT, SETUP_SPEC, notebooks, repository_url

pytestmark = pytest.mark.colab

# scikit-learn: Colab ships it, and the training chapters load its bundled digits (nothing is downloaded).
COLAB_PACKAGES = ["torch==2.13.0", "numpy", "matplotlib", "ipywidgets", "ipykernel", "scikit-learn"]


def pinned(requirement: str) -> str:
    """Use the version requirements.txt pins, so the venv matches the book's."""
    name = requirement.split("==")[0]
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.split("==")[0].strip().lower() == name.lower():
            return line.split("#")[0].strip()
    return requirement


@pytest.fixture(scope="module")
def colab_kernel(tmp_path_factory):
    """A kernel spec for a fresh venv that has Colab's packages and no norms."""
    root = tmp_path_factory.mktemp("colab")
    venv = root / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *map(pinned, COLAB_PACKAGES)],
        check=True, capture_output=True, text=True,
    )
    missing = subprocess.run([str(python), "-c", "import norms"], capture_output=True, cwd=root)
    assert missing.returncode != 0, "the fresh venv must not have norms"
    kernel_dir = root / "kernels" / "colab"
    kernel_dir.mkdir(parents=True)
    (kernel_dir / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab-like", "language": "python",
    }))
    return KernelSpecManager(kernel_dirs=[str(root / "kernels")]), python, root


def local_setup(nb, url: str) -> None:
    """Point the setup cell at this checkout instead of the git repository."""
    remote = SETUP_SPEC.format(url=url)
    local = SETUP_SPEC.replace("git+{url}", ROOT.as_uri())
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert remote in first.source
    first.source = first.source.replace(remote, local)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.relative_to(BOOK).as_posix())
def test_notebook_runs_with_only_colab_packages(colab_kernel, path):
    spec_manager, python, root = colab_kernel
    nb = nbformat.read(path, as_version=4)
    local_setup(nb, repository_url())
    km = KernelManager(kernel_name="colab", kernel_spec_manager=spec_manager)
    NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
    where = subprocess.run(
        [str(python), "-c", "import norms; print(norms.__file__)"], capture_output=True, text=True, check=True, cwd=root
    ).stdout
    assert "site-packages" in where, f"norms was not installed into the venv: {where}"
