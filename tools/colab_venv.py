"""Build the Colab-like environment the notebooks are tested in (``make colab-venv``).

A fresh virtual environment gets only what Colab has (torch, numpy, matplotlib,
scikit-learn, ipywidgets and a kernel), but not ``norms``. Then the notebooks' own setup cell runs
in it, pointed at this checkout instead of the git URL: the setup cell itself
installs ``norms`` with its extras (``[widgets,quiz]``), exactly as on Colab. The
script checks that it did (norms in the venv's site-packages, jupyterquiz and
ipywidgets importable) and writes a Jupyter kernel spec named ``colab`` under
``DIR/share/jupyter/kernels``, and a second one, ``colab-portable``, that runs the same
Python with ATen's generic (non-SIMD) kernels and one thread. nbval runs every notebook
in the portable kernel (``JUPYTER_PATH=DIR/share/jupyter pytest --nbval
--nbval-kernel-name colab-portable``): the outputs were stored with the machine's own SIMD
width and two threads, so a pass shows that they do not depend on either.

The venv is reused while its torch version matches; ``norms`` is uninstalled and
installed again by the setup cell on every run, so it is never stale.

Usage: ``python tools/colab_venv.py DIR [--torch VERSION] [--packages-only]`` (default: the
version requirements.txt pins). ``--packages-only`` makes the venv and installs Colab's packages
and stops there; it needs only the standard library, so ``make`` runs it with the system's
Python while the project's own venv is being installed (each takes torch from pip and the rest
from uv: about half a minute each). Any torch version other than the pinned CPU wheel is a full
CUDA build from PyPI (several GB): put DIR on a disk with room, and delete it after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What Colab has that the notebooks import (versions from requirements.txt, torch apart).
COLAB_PACKAGES = ["numpy", "matplotlib", "scikit-learn", "ipywidgets", "ipykernel"]
SETUP_SPEC = "norms[widgets,quiz] @ git+{url}"
#: Other CPU settings than ``make execute`` stores the outputs with (the machine's own SIMD
#: width, two threads): ATen's generic kernels and one thread. nbval in ``make test`` runs the
#: notebooks in the ``colab-portable`` kernel, so a pass means that no stored output depends on
#: the SIMD width or on the thread count (issue 22).
PORTABLE_CPU = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pinned(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.split("==")[0].strip().lower() == name.lower():
            return line
    raise SystemExit(f"colab_venv: {name} is not pinned in requirements.txt")


def setup_cell() -> str:
    """The first code cell of the first chapter, pointed at this checkout."""
    import nbformat
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    nb = nbformat.read(ROOT / "book" / "first-look.ipynb", as_version=4)
    source = next(c for c in nb.cells if c.cell_type == "code").source
    remote = SETUP_SPEC.format(url=url)
    if remote not in source:
        raise SystemExit(
            f"colab_venv: the setup cell of book/first-look.ipynb does not install {remote!r}"
        )
    return source.replace(remote, SETUP_SPEC.replace("git+{url}", ROOT.as_uri()))


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def install_packages(venv: Path, torch_version: str) -> None:
    """The venv with torch and Colab's packages (kept while its torch version matches)."""
    python = venv / "bin" / "python"
    stamp = venv / ".colab-torch"
    if not (python.exists() and stamp.exists() and stamp.read_text() == torch_version):
        shutil.rmtree(venv, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        run([base, "-m", "venv", venv])
        print(
            f"colab_venv: installing torch=={torch_version} and {', '.join(COLAB_PACKAGES)} into "
            f"{venv}"
        )
        # torch from pip (the machine's local file; uv does not look there), the rest from uv
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        run([*pip, f"torch=={torch_version}", pinned("uv")])
        uv = [venv / "bin" / "uv", "pip", "install", "-q", "--python", python, "--compile-bytecode"]
        run([*uv, *map(pinned, COLAB_PACKAGES)])
        stamp.write_text(torch_version)


def build(venv: Path, torch_version: str) -> Path:
    install_packages(venv, torch_version)
    python = venv / "bin" / "python"
    # norms comes only from the setup cell, every time
    run([python, "-m", "pip", "uninstall", "-q", "-y", "norms"], capture_output=True)
    with (
        tempfile.TemporaryDirectory() as away
    ):  # not the checkout: there `import norms` finds ./norms
        missing = subprocess.run([python, "-c", "import norms"], cwd=away, capture_output=True)
        if missing.returncode == 0:
            raise SystemExit("colab_venv: the venv still has norms before the setup cell ran")
        # torch stays the one Colab has (the setup cell must not replace it), and the extras get
        # the versions requirements.txt pins, so the notebooks' stored outputs still apply
        constraint = Path(away) / "colab-constraints.txt"
        pins = [
            line.split("#")[0].strip()
            for line in (ROOT / "requirements.txt").read_text().splitlines()
        ]
        pins = [p for p in pins if "==" in p and p.split("==")[0].strip().lower() != "torch"]
        constraint.write_text("\n".join([f"torch=={torch_version}", *pins]) + "\n")
        env = dict(os.environ, PIP_CONSTRAINT=str(constraint), PIP_DISABLE_PIP_VERSION_CHECK="1")
        print(
            "colab_venv: running the notebooks' setup cell in the venv (it installs "
            "norms[widgets,quiz])"
        )
        run([python, "-c", setup_cell()], cwd=away, env=env)
        where = run(
            [
                python,
                "-c",
                "import norms, ipywidgets, jupyterquiz, torch; print(norms.__file__); "
                "print(torch.__version__)",
            ],
            cwd=away,
            capture_output=True,
            text=True,
        ).stdout.split()
    if "site-packages" not in where[0]:
        raise SystemExit(
            f"colab_venv: the setup cell did not install norms into the venv ({where[0]})"
        )
    if not where[1].startswith(torch_version):
        raise SystemExit(f"colab_venv: the setup cell replaced torch {torch_version} by {where[1]}")
    kernels = venv / "share" / "jupyter" / "kernels"
    # torch.compile's cache does not key its C++ on the SIMD level: the portable kernel gets a
    # folder of its own (a parent process may pass its own folder on in the environment), the
    # one norms.fast gives a process with this ATEN_CPU_CAPABILITY: beside torch's own folder,
    # kept from one checkout to the next as torch's is (speed.ipynb: 65 s in nbval with a cold
    # cache, 29 s with a warm one). (Imported here: --packages-only runs in the system's Python.)
    from norms.fast import inductor_cache_for

    cache = inductor_cache_for(PORTABLE_CPU["ATEN_CPU_CAPABILITY"])
    portable = {**PORTABLE_CPU, "TORCHINDUCTOR_CACHE_DIR": cache}
    specs = {"colab": ({}, ""), "colab-portable": (portable, ", generic SIMD, one thread")}
    for name, (extra, label) in specs.items():
        kernel = kernels / name
        kernel.mkdir(parents=True, exist_ok=True)
        (kernel / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": f"Colab-like (torch {torch_version}{label})",
                    "language": "python",
                    # NORMS_GLUE_RECORD: norms.glue records glued values as myst-nb would, so
                    # nbval compares them
                    "env": {"NORMS_COLAB_TORCH": torch_version, "NORMS_GLUE_RECORD": "1", **extra},
                },
                indent=1,
            )
        )
    print(
        f"colab_venv: kernels {', '.join(specs)} (torch {where[1]}, norms from "
        f"the setup cell) in {kernels.parent}"
    )
    kernel = kernels / "colab"
    return kernel


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--torch", default=pinned("torch").split("==")[1])
    parser.add_argument(
        "--packages-only", action="store_true", help="only the venv and Colab's packages"
    )
    args = parser.parse_args(argv)
    if args.packages_only:
        install_packages(args.dir.resolve(), args.torch)
    else:
        build(args.dir.resolve(), args.torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
