"""``make bench``: time every normalization layer (torch.nn, norms, fused) and write _build/bench/.

Usage: ``python tools/bench.py [--threads N] [--rounds R] [--tiny] [--device cuda] [--ops LayerNorm ...]``.
The benchmark itself is :mod:`norms.bench`; see its docstring for what is measured.
"""

from __future__ import annotations

import sys

from norms.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
