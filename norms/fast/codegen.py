"""Read the code ``torch.compile`` writes: the kernels, their loops, one line each.

The speed chapter shows what Inductor emits for a layer of :mod:`norms.fast.fused`:
:func:`recompile_and_get_code` collects the kernels (C++ on a CPU, Triton on a GPU),
:func:`loop_outline` and :func:`loop_headers` shorten one to its loops.
"""

from __future__ import annotations

import re

import torch

from .. import compat

__all__ = ["loop_headers", "loop_outline", "recompile_and_get_code"]


def recompile_and_get_code(fn, *args, **kwargs) -> list[str]:
    """The kernels ``torch.compile`` generates when ``fn(*args, **kwargs)`` runs: C++ on a CPU,
    Triton on a GPU.

    ``fn`` must call compiled code (e.g. a layer of :mod:`norms.fast.fused`). Returns
    the source of every kernel, in the order the compiler wrote them.

    This changes the process, as its name says: it calls ``torch.compiler.reset()``
    first, so that the code is produced even when ``fn`` ran before, and every
    function compiled so far in this process compiles again on its next call.
    """
    torch.compiler.reset()
    _, modules = compat.run_and_get_code(fn, *args, **kwargs)
    kernels = []
    for module in modules:
        kernels += re.findall(
            r"cpp_pybinding\(.*?r'''\n(.*?)'''\)", module, flags=re.S
        )  # C++ (CPU)
        kernels += re.findall(r"(@triton\.jit\ndef .*?)'''", module, flags=re.S)  # Triton (GPU)
    return kernels


def loop_outline(source: str, max_lines: int = 40) -> str:
    """A kernel's loops, loads, arithmetic and stores, without declarations, guards and braces.

    Shortens :func:`recompile_and_get_code`'s output to what a reader needs: which loops
    there are and what each reads, computes and writes.
    """
    keep = []
    for line in source.splitlines():
        text = line.rstrip()
        bare = text.strip()
        if (
            not bare
            or bare in ("{", "}")
            or bare.startswith(
                (
                    "#include",
                    "extern",
                    "std::atomic",
                    "inductor_cpu",
                    "const ",
                    "float* ",
                    "int tid",
                    "if(C10_LIKELY",
                    "CascadeSumHelper",
                    "#pragma",
                )
            )
        ):
            continue
        if "masked_" in bare or "scalar_cascade" in bare:
            continue
        text = text.replace("static_cast<int64_t>", "").replace("at::vec::Vectorized<float>", "Vec")
        keep.append(text.replace("        ", "  ", 1))
    # nested blocks indent by 4 or 8 spaces in the generated code: show 2 per level of what is left
    indents = sorted({len(t) - len(t.lstrip()) for t in keep})
    level = {n: i for i, n in enumerate(indents)}
    keep = ["  " * level[len(t) - len(t.lstrip())] + t.lstrip() for t in keep]
    if len(keep) > max_lines:
        keep = keep[: max_lines - 1] + [f"    ... ({len(keep) - max_lines + 1} more lines)"]
    return "\n".join(keep)


def _plain(expr: str) -> str:
    """A generated C++ expression without casts, ``L`` suffixes and parentheses around one name."""
    expr = expr.replace("static_cast<int64_t>", "").replace("c10::", "")
    expr = re.sub(r"\b(\d+)L\b", r"\1", expr)
    while True:  # (x1) -> x1, but never f(x1) -> fx1
        shorter = re.sub(r"(?<![\w)])\(\s*([\w.]+)\s*\)", r"\1", expr).strip()
        if shorter.startswith("(") and shorter.endswith(")") and _balanced(shorter[1:-1]):
            shorter = shorter[1:-1]  # (ks0*ks1) -> ks0*ks1
        if shorter == expr:
            return expr
        expr = shorter


def _balanced(text: str) -> bool:
    level = 0
    for ch in text:
        level += {"(": 1, ")": -1}.get(ch, 0)
        if level < 0:
            return False
    return level == 0


def loop_headers(source: str) -> str:
    """Only the loops of a generated C++ kernel, one line each, indented by nesting.

    ``for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(512L);
    x1+=static_cast<int64_t>(16L))`` becomes ``for x1 in range(0, 512, 16):``; bounds that are
    expressions (symbolic sizes such as ``ks0``, vector tails) are kept, without casts. Shows at a
    glance how many sweeps a kernel makes and in which order it walks the data (rows or columns).
    """
    lines, depth, open_loops = [], 0, []  # open_loops: brace depths of the loops we are inside
    for line in source.splitlines():
        at = line.find("for(")
        if at >= 0:
            header = line[at + 4 :].rstrip()  # the generated code puts a loop's header on one line
            parts = header[:-1].split(";") if header.endswith(")") else []
            m = (
                [
                    re.fullmatch(r"\s*(?:int64_t\s+)?(\w+)\s*=(.*)", parts[0]),
                    re.fullmatch(r"\s*\w+\s*<(.*)", parts[1]),
                    re.fullmatch(r"\s*\w+\s*\+=(.*)", parts[2]),
                ]
                if len(parts) == 3
                else [None]
            )
            while open_loops and open_loops[-1] >= depth:
                open_loops.pop()
            if all(m):
                var, start, stop, step = m[0][1], _plain(m[0][2]), _plain(m[1][1]), _plain(m[2][1])
                args = (
                    stop
                    if (start, step) == ("0", "1")
                    else f"{start}, {stop}" + ("" if step == "1" else f", {step}")
                )
                text = f"for {var} in range({args}):"
            else:
                text = _plain(line.strip())  # a loop we cannot parse: shown as written
            lines.append("  " * len(open_loops) + text)
            open_loops.append(depth)
        depth += line.count("{") - line.count("}")
    return "\n".join(lines)
