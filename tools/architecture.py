"""The parts of norms/, what each is for and what it may import: the README's diagram.

``tests/test_structure.py`` holds the code to this table (an import the table does not
allow fails there), and checks that the README shows the diagram this prints.

Usage: ``python tools/architecture.py`` prints the diagram.
"""

from __future__ import annotations

#: part of norms/ -> (what it is for, the parts it may import). Listed bottom-up: a part
#: imports only parts listed above it.
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "compat": ("every private torch API norms uses, each with a fallback", ()),
    "axes": ("which axes each norm reduces over; the list of the norms", ()),
    "stats": ("batch statistics: mean, variance, running averages, Chan", ("axes", "compat")),
    "functional": ("the forward passes and the one backward formula", ("axes", "stats", "compat")),
    "autograd": (
        "hand-derived backward passes (autograd.Function)",
        ("axes", "stats", "functional"),
    ),
    "modules": (
        "every layer: the five families, SyncBatchNorm, transformer, LLaMA block ...",
        ("axes", "stats", "compat", "functional", "autograd"),
    ),
    "glue": ("numbers from a cell into the prose (myst-nb glue)", ()),
    "fast": (
        "torch.compile'd layers, C++ kernels and their loader, passes, make bench",
        ("axes", "stats", "compat", "functional", "autograd", "modules"),
    ),
    "distributed": (
        "several processes: launcher, recorders, the chapter's workers",
        ("axes", "stats", "compat", "functional", "modules"),
    ),
    "lab": (
        "data, models, training loops, simulations, the seeds' rule",
        ("axes", "stats", "functional", "modules", "glue"),
    ),
    "plots": (
        "one module per figure family, one style",
        ("axes", "stats", "functional", "modules", "lab"),
    ),
    "explore": (
        "explorers: state, ipywidgets front end, website front end",
        ("axes", "stats", "functional", "modules", "lab", "plots"),
    ),
    "check": ("the grader for a reader's own layer", ("axes", "functional", "modules")),
    "quiz": (
        "quizzes whose answers norms computes",
        ("axes", "functional", "autograd", "modules", "fast", "distributed", "lab"),
    ),
}

#: What ``import norms`` loads; the other parts load on first use.
EAGER = ("compat", "axes", "stats", "functional", "autograd", "modules")


def diagram() -> str:
    """The parts, bottom-up, each with what it is for and what it imports."""
    width = max(len(p) for p in PARTS) + len("norms/") + 1
    lines = []
    for name, (what, imports) in PARTS.items():
        kind = "" if name in EAGER else " (lazy)"
        path = f"norms/{name}" + (
            "/"
            if name not in ("compat", "axes", "stats", "functional", "autograd", "glue")
            else ".py"
        )
        lines.append(f"{path:<{width + 4}}{what}{kind}")
        lines.append(f"{'':<{width + 4}}  imports: {', '.join(imports) or 'no other part'}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(diagram())
