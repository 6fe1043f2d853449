"""The Colab-like kernel every notebook is tested in.

`make colab-venv` (tools/colab_venv.py) builds a fresh venv with only what Colab has
(torch, numpy, matplotlib, ipywidgets and a kernel) and runs the notebooks' setup cell
in it, pointed at this checkout: the setup cell itself installs `norms[widgets,quiz]`.
nbval then runs every notebook in that kernel (`--nbval-kernel-name colab`), so each
notebook runs twice in `make test`: once for the site, once under nbval. These tests
check that kernel; `make test` and `make test-colab` point them at it with
NORMS_COLAB_DIR and JUPYTER_PATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from .notebooks import ROOT

pytestmark = pytest.mark.colab

NOT_ON_COLAB = ["jupyter_book", "sphinx", "pytest", "nbval", "hypothesis", "playwright"]


@pytest.fixture(scope="module")
def colab_python():
    where = os.environ.get("NORMS_COLAB_DIR")
    if not where:
        pytest.skip(
            "no Colab-like venv given: run `make test` or `make test-colab` (they set "
            "NORMS_COLAB_DIR)"
        )
    spec = Path(where) / "share" / "jupyter" / "kernels" / "colab" / "kernel.json"
    assert spec.exists(), f"{spec} is missing: `make colab-venv` builds it"
    return Path(json.loads(spec.read_text())["argv"][0]), json.loads(spec.read_text())


def run(python, code, tmp_path):
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path)


def test_setup_cell_installed_norms_with_its_extras(colab_python, tmp_path):
    python, _ = colab_python
    out = run(python, "import norms, ipywidgets, jupyterquiz; print(norms.__file__)", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "site-packages" in out.stdout and str(ROOT / "norms") not in out.stdout, out.stdout


def test_kernel_has_only_what_colab_has(colab_python, tmp_path):
    python, _ = colab_python
    for module in NOT_ON_COLAB:
        out = run(python, f"import {module}", tmp_path)
        assert out.returncode != 0, f"the Colab-like venv has {module}, which Colab does not"


def test_kernel_runs_the_torch_it_was_built_with(colab_python, tmp_path):
    python, spec = colab_python
    out = run(python, "import torch; print(torch.__version__)", tmp_path)
    assert out.stdout.startswith(spec["env"]["NORMS_COLAB_TORCH"]), (out.stdout, spec)


def test_portable_kernel_runs_generic_simd_and_one_thread(colab_python):
    """nbval runs the notebooks in ``colab-portable``: ATen's generic kernels and one thread,
    other settings than the native SIMD width and two threads the outputs were stored with."""
    from jupyter_client.manager import start_new_kernel

    # started with two threads asked for (make test's workers run with one): the kernel spec's
    # own settings must win
    env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    env.pop("ATEN_CPU_CAPABILITY", None)
    km, kc = start_new_kernel(kernel_name="colab-portable", startup_timeout=120, env=env)
    try:
        lines = []
        reply = kc.execute_interactive(
            "import torch; print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())",
            timeout=120,
            output_hook=lambda msg: lines.append(msg["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        assert "".join(lines).split() == ["DEFAULT", "1"], lines
        # its own Inductor cache (C++ generated for the native SIMD width does not build here),
        # the one norms.fast would give it: outside the checkout, kept as torch's own folder is
        lines.clear()
        reply = kc.execute_interactive(
            "import os, norms.fast\n"
            "print(os.environ['TORCHINDUCTOR_CACHE_DIR'])\n"
            "print(norms.fast.inductor_cache_for('default'))",
            timeout=120,
            output_hook=lambda msg: lines.append(msg["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        folder, expected = "".join(lines).split()
        assert folder == expected and not folder.startswith(str(ROOT)), lines
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_make_runs_nbval_in_the_colab_kernel_without_a_short_timeout():
    """Each notebook runs at most twice in `make test` (the site build, nbval in the Colab-like
    kernel), and no cell limit below several minutes: speed is `make bench-book`'s business."""
    makefile = (ROOT / "Makefile").read_text()
    nbval = re.search(r"^NBVAL = (.*)$", makefile, re.M).group(1)
    assert "--nbval-kernel-name $(NBVAL_KERNEL)" in nbval
    assert re.search(r"^NBVAL_KERNEL \?= colab-portable$", makefile, re.M), "make test: portable"
    timeouts = [int(t) for t in re.findall(r"--nbval-cell-timeout (\d+)", makefile)]
    assert timeouts and min(timeouts) >= 300, timeouts
    test_recipe = re.search(r"^test:.*\n\t(.*)$", makefile, re.M).group(1)
    assert "$(NBVAL)" in test_recipe and "$(COLAB_JUPYTER)" in test_recipe
