"""Speed: the compiled layers, the C++ kernels and their loader, code inspection, the benchmark.

* :mod:`~norms.fast.fused`: the :mod:`norms` layers compiled with ``torch.compile``
  (``norms.fast.fused.LayerNorm`` ...), with hand-derived backward passes where
  that moves less data;
* :mod:`~norms.fast.cpu_kernels`: one-sweep C++ kernels for the CPU
  (``csrc/kernels.cpp``), compiled on first use, with a fallback without a compiler;
* :mod:`~norms.fast.codegen`: the code the compiler writes, shortened to its loops;
* :mod:`~norms.fast.passes`: what counts as a pass over memory, by recording ATen ops;
* :mod:`~norms.fast.bench`: ``make bench``.

Nothing here is imported by ``import norms``: ``norms.fast.fused`` loads on first use.
"""


def __getattr__(name: str):
    """A submodule loads on first use: ``norms.fast.x`` works after ``import norms``."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
