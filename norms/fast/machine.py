"""What the benchmark's numbers were measured on: the CPU, its SIMD level, the kernels' flags.

Ratios between implementations differ between CPUs (their SIMD width, caches and memory
bandwidth), so every record of :func:`norms.fast.bench.run` names the CPU and the thread
count (:func:`machine`), and the report prints it (:func:`machine_line`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

__all__ = ["cpu_model", "simd_level", "machine", "machine_line"]


def cpu_model() -> str:
    """The CPU's name from ``/proc/cpuinfo`` (``model name``, or ``CPU part`` on ARM), else
    :func:`platform.processor`."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "CPU part")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def simd_level(features: str, arch: str) -> str:
    """The widest SIMD instruction set in a ``/proc/cpuinfo`` feature line."""
    flags = set(features.split())
    if arch in ("aarch64", "arm64"):
        return "SVE" if "sve" in flags else "NEON" if "asimd" in flags else "none"
    for level, flag in (
        ("AVX-512", "avx512f"),
        ("AVX2", "avx2"),
        ("AVX", "avx"),
        ("SSE4.2", "sse4_2"),
    ):
        if flag in flags:
            return level
    return "unknown"


def machine(threads: int | None = None) -> dict:
    """What the numbers were measured on: ``cpu`` (the model), ``simd`` (its widest SIMD level),
    ``torch_simd`` (the level torch's own kernels use), ``kernel_flags`` (the
    instruction-set flags the C++ kernels are compiled with), ``cores`` and ``threads``."""
    # imported here: cpu_kernels registers its operators through torch.compile's machinery
    # (about 1 s of imports), which what only reads the benchmark cases does not need
    from . import cpu_kernels

    arch = platform.machine().lower()
    return {
        "cpu": cpu_model(),
        "simd": simd_level(cpu_kernels.cpu_features(), arch),
        "torch_simd": torch.backends.cpu.get_cpu_capability(),
        "kernel_flags": " ".join(
            f for f in cpu_kernels.FLAGS if f.startswith(("-march", "-mcpu", "-mprefer"))
        ),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads() if threads is None else threads,
    }


def machine_line(info: dict) -> str:
    """:func:`machine` in one line of text."""
    return (
        f"CPU: {info['cpu']} ({info['cores']} cores), SIMD: {info['simd']} "
        f"(torch uses {info['torch_simd']}; kernels: {info['kernel_flags'] or 'default flags'}), "
        f"{info['threads']} thread(s)"
    )
