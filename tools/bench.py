"""``make bench``: time every normalization layer (torch.nn, norms, fused) and write _build/bench/.

Usage: ``python tools/bench.py [--threads N ...] [--rounds R] [--tiny] [--device cuda] [--ops
LayerNorm ...]``.
The benchmark itself is :mod:`norms.fast.bench`; see its docstring for what is measured.
"""

from __future__ import annotations

import sys

from norms.fast.bench import main, steady_allocator_for_this_process

if __name__ == "__main__":
    steady_allocator_for_this_process()  # this process only runs the benchmark
    sys.exit(main(sys.argv[1:]))
