"""The parts of norms/, what each is for and what it may import: the README's diagram.

``tests/test_structure.py`` holds the code to this table (an import the table does not
allow fails there), and checks that the README shows the diagram this prints.

Usage: ``python tools/architecture.py`` prints the diagram.
"""

from __future__ import annotations

#: part of norms/ -> (what it is for, the parts it may import). Listed bottom-up: a part
#: imports only parts listed above it.
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "i18n": ("the reader's language (set_language) and the text norms computes (tr)", ()),
    "lazy": ("the packages' submodules that load on first use (their __getattr__)", ()),
    "compat": ("every private torch API norms uses, each with a fallback", ("i18n",)),
    "axes": ("which axes each norm reduces over; the list of the norms", ("i18n",)),
    "stats": (
        "batch statistics: mean, variance, running averages, Chan",
        ("i18n", "axes", "compat"),
    ),
    "functional": (
        "the forward passes and the one backward formula",
        ("i18n", "axes", "stats", "compat"),
    ),
    "autograd": (
        "hand-derived backward passes (autograd.Function)",
        ("i18n", "axes", "stats", "functional"),
    ),
    "distributed": (
        "several processes: SyncBatchNorm's packet and checks, launcher, recorders",
        ("i18n", "lazy", "compat"),
    ),
    "modules": (
        "every layer: the five families, SyncBatchNorm, transformer, LLaMA block ...",
        ("i18n", "axes", "stats", "compat", "functional", "autograd", "distributed"),
    ),
    "glue": ("numbers from a cell into the prose (myst-nb glue)", ("i18n",)),
    "fast": (
        "torch.compile'd layers, C++ kernels and their loader, passes, make bench",
        ("i18n", "lazy", "axes", "stats", "compat", "functional", "autograd", "modules"),
    ),
    "lab": (
        "data, models, training loops, simulations, the seeds' rule",
        ("i18n", "lazy", "axes", "stats", "compat", "functional", "modules", "distributed", "glue"),
    ),
    "plots": (
        "one module per figure family, one style",
        ("i18n", "lazy", "axes", "stats", "functional", "modules", "lab"),
    ),
    "explore": (
        "explorers: state, ipywidgets front end, website front end",
        ("i18n", "lazy", "axes", "stats", "functional", "modules", "lab", "plots"),
    ),
    "check": ("the grader for a reader's own layer", ("i18n", "axes", "functional", "modules")),
    "quiz": (
        "quizzes whose answers norms computes",
        ("i18n", "axes", "functional", "autograd", "modules", "fast", "distributed", "lab"),
    ),
}

#: What ``import norms`` loads; the other parts load on first use.
EAGER = (
    "i18n",
    "lazy",
    "compat",
    "axes",
    "stats",
    "functional",
    "autograd",
    "distributed",
    "modules",
)

#: The parts that are one file (``norms/<part>.py``); the others are folders.
FILES = ("i18n", "lazy", "compat", "axes", "stats", "functional", "autograd", "glue")


def diagram() -> str:
    """The parts, bottom-up, each with what it is for and what it imports."""
    width = max(len(p) for p in PARTS) + len("norms/") + 1
    lines = []
    for name, (what, imports) in PARTS.items():
        kind = "" if name in EAGER else " (lazy)"
        path = f"norms/{name}" + (".py" if name in FILES else "/")
        lines.append(f"{path:<{width + 4}}{what}{kind}")
        lines.append(f"{'':<{width + 4}}  imports: {', '.join(imports) or 'no other part'}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(diagram())
