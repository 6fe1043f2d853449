"""Speed: the compiled layers, the C++ kernels and their loader, code inspection, the benchmark.

* :mod:`~norms.fast.fused`: the :mod:`norms` layers compiled with ``torch.compile``
  (``norms.fast.fused.LayerNorm`` ...), with hand-derived backward passes where
  that moves less data;
* :mod:`~norms.fast.cpu_kernels`: one-sweep C++ kernels for the CPU
  (``csrc/kernels.cpp``), compiled on first use, with a fallback without a compiler;
* :mod:`~norms.fast.codegen`: the code the compiler writes, shortened to its loops;
* :mod:`~norms.fast.passes`: what counts as a pass over memory, by recording ATen ops;
* :mod:`~norms.fast.bench`: ``make bench``: the timing (what it times is in
  :mod:`~norms.fast.cases`, its tables in :mod:`~norms.fast.report`);
* :mod:`~norms.fast.machine`: what its numbers were measured on (CPU, SIMD level, flags).

Nothing here is imported by ``import norms``: ``norms.fast.fused`` loads on first use.
"""

import os

from ..lazy import lazy_submodules


def inductor_cache_for(capability: str) -> str:
    """The Inductor cache folder of a process with ``ATEN_CPU_CAPABILITY=capability``:
    ``<Inductor's default folder>_<capability>`` (the Colab-like portable kernel of
    tools/colab_venv.py is given the same folder)."""
    from ..compat import inductor_cache_dir

    return f"{inductor_cache_dir()}_{capability}"


def _inductor_cache_per_capability() -> None:
    """Give a process that sets ``ATEN_CPU_CAPABILITY`` an Inductor cache folder of its own.

    Inductor's on-disk cache does not key its generated C++ on ``ATEN_CPU_CAPABILITY``:
    code generated with vector instructions (``at::vec``) in a process with the machine's own
    SIMD level, found again by one with ``ATEN_CPU_CAPABILITY=default``, is compiled without
    them and fails (``'at::vec' has not been declared``). So, unless
    ``TORCHINDUCTOR_CACHE_DIR`` names another folder than the default one, such a process
    uses ``<default folder>_<capability>``.
    Inductor reads the variable on its first use (``norms.fast.cpu_kernels`` registers
    its operators through it), so this runs before any submodule loads.
    """
    capability = os.environ.get("ATEN_CPU_CAPABILITY")
    if not capability:
        return
    from ..compat import inductor_cache_dir as default_cache_dir

    # Inductor writes the default folder into the variable on first use, so a parent process
    # that compiled something passes it on: that one counts as unset too.
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR", default_cache_dir()) == default_cache_dir():
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_for(capability)


_inductor_cache_per_capability()


# a submodule loads on first use: ``norms.fast.x`` works after ``import norms``
__getattr__ = lazy_submodules(__name__)
