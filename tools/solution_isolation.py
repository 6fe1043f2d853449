"""Run a notebook's solution cells so that the cells after them see nothing they did.

The student edition (``make student``) is each chapter without its solutions. For its
notebooks to run, and to print what the chapter prints, no later cell may depend on a
solution. That could be checked by running every notebook twice (with and without its
solutions); instead the one run that stores the outputs (``make execute``) and the one that
re-checks them (nbval in ``make test``) run each solution cell *isolated*, in the same kernel:

- before a solution cell, the kernel remembers the bindings of its namespace, the state of
  the random number generators (Python's, NumPy's and torch's), torch's default dtype and
  grad mode, and matplotlib's rcParams;
- after it, every name the solution bound is taken back (a new name is removed, a rebound
  one gets its old object) and every remembered setting is restored; a solution that changed
  in place a tensor or a module that existed before it (a tensor's version counter, a
  module's parameters, buffers, gradients or train/eval mode) raises, naming it, since that
  cannot be taken back;
- what a solution bound is kept aside for the solutions after it (one exercise may build on
  another's solution, as it does in the full chapter), unless a cell that is not a solution
  binds that name in between.

So the cells after a solution run exactly as they do in the student edition (a cell that
needs a solution's names raises ``NameError``), and the outputs stored in the chapter are the
student edition's too: ``tools/student.py`` copies them instead of executing the notebook a
second time. Not seen: a solution that changes a NumPy array or a plain Python object in
place, writes a file, or changes another module's global state; the chapters' solutions do
none of these (review them with this in mind).

The kernel side is the source :data:`KERNEL_SOURCE`, sent as silent execute requests
(``silent=True``: no output, no execution count): it lives in ``sys.modules`` as
``_solution_isolation``, so the notebook's namespace never shows it. ``conftest.py``
(nbval) and ``tools/execute.py`` (nbclient) call :data:`BEFORE` and :data:`AFTER`.
"""

from __future__ import annotations

#: the tag of every code cell of a gated solution (tools/exercises.py sets it)
SOLUTION_TAG = "solution"

KERNEL_SOURCE = r'''
import random as _random
import sys as _sys

_saved = None


def _tensors(torch, name, value):
    """(label, tensor) for what a later cell could read through a name: a tensor, a module's
    parameters and buffers, and the tensors of a list, tuple or dict (one level deep)."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, torch.nn.Module):
        for key, t in list(value.named_parameters()) + list(value.named_buffers()):
            yield f"{name}.{key}", t
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value[:1000]):
            if isinstance(item, torch.Tensor):
                yield f"{name}[{i}]", item
    elif isinstance(value, dict):
        for key, item in list(value.items())[:1000]:
            if isinstance(item, torch.Tensor):
                yield f"{name}[{key!r}]", item


def _fingerprint(namespace):
    """What in-place changes would show in: version counters, gradients, train/eval modes."""
    torch = _sys.modules.get("torch")
    found = {}
    if torch is None:
        return found
    for name, value in namespace.items():
        if name.startswith("_"):
            continue
        try:
            for label, t in _tensors(torch, name, value):
                grad = t.grad if t.requires_grad and t.is_leaf else None
                found[label] = (
                    t._version,
                    None if grad is None else (id(grad), grad._version),
                )
            if isinstance(value, torch.nn.Module):
                found[f"{name} (train/eval mode)"] = tuple(m.training for m in value.modules())
        except Exception:  # an object that breaks when asked: not ours to judge
            continue
    return found


def _settings():
    torch = _sys.modules.get("torch")
    numpy = _sys.modules.get("numpy")
    matplotlib = _sys.modules.get("matplotlib")
    return {
        "random": _random.getstate(),
        "numpy": numpy.random.get_state() if numpy is not None else None,
        "torch": torch.get_rng_state() if torch is not None else None,
        "dtype": torch.get_default_dtype() if torch is not None else None,
        "grad": torch.is_grad_enabled() if torch is not None else None,
        "rc": dict(matplotlib.rcParams) if matplotlib is not None else None,
    }


def _restore(settings):
    torch = _sys.modules.get("torch")
    numpy = _sys.modules.get("numpy")
    matplotlib = _sys.modules.get("matplotlib")
    _random.setstate(settings["random"])
    if numpy is not None and settings["numpy"] is not None:
        numpy.random.set_state(settings["numpy"])
    if torch is not None and settings["torch"] is not None:
        torch.set_rng_state(settings["torch"])
        torch.set_default_dtype(settings["dtype"])
        torch.set_grad_enabled(settings["grad"])
    if matplotlib is not None and settings["rc"] is not None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated keys warn when set back
            matplotlib.rcParams.update(settings["rc"])


_MISSING = object()
_stash = {}  # name -> (object a solution bound, the name's binding before that solution)


def before():
    """Remember the namespace, then give the solution what earlier solutions bound (a later
    solution may build on an earlier one, as in the full chapter), unless a cell that is not a
    solution has bound that name since."""
    global _saved
    namespace = get_ipython().user_ns  # noqa: F821 (the kernel's)
    bindings = dict(namespace)
    _saved = (bindings, _settings(), _fingerprint(bindings))
    for name, (value, was) in list(_stash.items()):
        if namespace.get(name, _MISSING) is was:
            namespace[name] = value
        else:
            del _stash[name]


def after():
    global _saved
    if _saved is None:
        raise RuntimeError("solution isolation: after() without before()")
    bindings, settings, fingerprint = _saved
    _saved = None
    namespace = get_ipython().user_ns  # noqa: F821
    now = _fingerprint(bindings)  # the objects that were there before the solution
    changed = sorted(k for k in fingerprint if now.get(k) != fingerprint[k])
    for name, value in namespace.items():
        was = bindings.get(name, _MISSING)
        if value is not was and not name.startswith("_"):
            _stash[name] = (value, was)
    for name in [n for n in namespace if n not in bindings]:
        del namespace[name]
    namespace.update(bindings)
    _restore(settings)
    if changed:
        raise RuntimeError(
            "this solution changes in place what the cells after it can see: "
            + ", ".join(changed[:8])
            + ". In the student edition (no solutions) they would see it unchanged. "
            "Let the solution work on its own copy (t.clone(), copy.deepcopy(model))."
        )
'''

_INSTALL = (
    "import sys, types\n"
    "if '_solution_isolation' not in sys.modules:\n"
    "    m = types.ModuleType('_solution_isolation')\n"
    "    m.get_ipython = get_ipython\n"
    "    exec(source, m.__dict__)\n"
    "    sys.modules['_solution_isolation'] = m\n"
)

#: silent code that installs the kernel side (once, in its own dict: the notebook's
#: namespace gets no name from it) and calls before()
BEFORE = (
    f"exec({_INSTALL!r}, {{'get_ipython': get_ipython, 'source': {KERNEL_SOURCE!r}}})\n"
    "__import__('sys').modules['_solution_isolation'].before()\n"
)

#: silent code that takes the solution's effects back (raises if it cannot)
AFTER = "__import__('sys').modules['_solution_isolation'].after()\n"


def is_solution(cell) -> bool:
    """Whether a notebook cell is a code cell of a gated solution."""
    return cell.get("cell_type") == "code" and SOLUTION_TAG in cell.get("metadata", {}).get(
        "tags", []
    )
