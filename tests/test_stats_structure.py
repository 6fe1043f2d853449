"""Every statistic is computed in norms/stats.py: a reduction written anywhere else fails here.

The test reads the source (``ast``) of every module of norms/ but ``stats.py`` and finds the
calls that reduce a tensor (or an array) along some dims: ``.mean(dims)``, ``.sum(dims)``,
``.var(...)``, ``.std(...)``, ``torch.var_mean(...)``, ``np.nanmean(..., axis=)`` ... A
reduction to a scalar without dims (``loss.mean()``, ``(pred == y).sum()``) is a summary,
not a per-channel or per-row statistic, and is not counted; ``.var()`` and ``.std()``
count always. What remains is allowed only in the functions of :data:`ALLOWED`, each
with its reason: gradient sums, pooling, the grader's and the quizzes' independent
references, figures over seeds. A new mean or variance anywhere else belongs in
:mod:`norms.stats`.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "norms"

#: method or function names that reduce
REDUCTIONS = {"mean", "sum", "var", "std", "var_mean", "std_mean", "nanmean", "nansum"}
#: these are statistics even without dims
ALWAYS = {"var", "std", "var_mean", "std_mean"}

GRADIENT = "a gradient's sum or mean (dγ, dβ, ⟨g⟩, ⟨g x̂⟩), not a statistic of the input"
POOLING = "global average pooling of a model's features, not a normalization statistic"
GRADER = (
    "the grader's independent float64 reference: checking a reader's layer against "
    "norms.stats would share its mistakes"
)
QUIZ = "a quiz's answer computed independently of the code it asks about"
SEEDS = "a summary over seeds or trials for a figure or a table, not a normalization statistic"

#: "path relative to norms/:qualified function" -> why its reductions are not statistics
ALLOWED: dict[str, str] = {
    "functional.py:normalization_backward_over": GRADIENT,
    "autograd.py:_sum_leading": GRADIENT,
    "autograd.py:BatchNormFunction.backward": GRADIENT,
    "fast/fused.py:_sum_rows": GRADIENT,
    "fast/fused.py:_GroupNormFunction.backward": GRADIENT,
    "fast/cpu_kernels.py:backward_in_ops.sum_rows": GRADIENT,
    "modules/syncbatchnorm.py:SyncBatchNormFunction.backward": GRADIENT,
    "lab/dyt.py:TinyViT.forward": POOLING,
    "lab/dyt.py:pooled_scale": POOLING,
    "lab/small_batches.py:ResidualCNN.forward": POOLING,
    "lab/models.py:CNN.forward": POOLING,
    "lab/modern.py:_centre_rows": "centring a weight matrix's rows once, a re-parametrization",
    "lab/modern.py:pre_ln_to_pre_rms": "centring embeddings once, a re-parametrization",
    "lab/simulations.py:BatchNoise.spread": SEEDS,
    "lab/training.py:load_digits_data": "the data set's standardization, once, as torchvision's",
    "lab/training.py:_Recorder.record": (
        "a training record: the spread of activations and gradients"
    ),
    "lab/weights.py:stream_std": "a figure's measurement: the residual stream's spread",
    "plots/dyt.py:plot_sensitivity": SEEDS,
    "plots/dyt.py:plot_lines": SEEDS,
    "plots/small_batches.py:plot_seed_spread": SEEDS,
    "plots/training.py:plot_layer_histograms": "a histogram's caption: the spread of values",
    "check/diagnosis.py:_param_gradient_fit.total": GRADER,
    "check/hypotheses.py:_reduce": GRADER,
    "check/running_stats.py:_batch_statistics": GRADER,
    "quiz/computed.py:_counter_role": QUIZ,
    "quiz/pitfalls.py:q_dropout_shift": QUIZ,
    "quiz/running.py:_eps_formula": QUIZ,
    "quiz/running.py:q_keras_momentum": QUIZ,
    "quiz/running.py:q_biased_unbiased": QUIZ,
    "quiz/speed.py:_variances": QUIZ,
    "quiz/training.py:q_running_after_small_batches": QUIZ,
    "quiz/transformer.py:residual_growth": QUIZ,
    "quiz/why.py:_relu_rate": QUIZ,
}


def reductions(source: str) -> list[tuple[str, int, str]]:
    """``(function, line, call)`` for every reduction along dims in ``source``; ``function`` is
    the qualified name of the enclosing function or class (``""`` at module level)."""
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, (*scope, child.name))
                continue
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and ast.unparse(child.func.value).split(".")[-1] != "stats"  # norms.stats itself
            ):
                name = child.func.attr
                along = bool(child.args) or any(k.arg in ("dim", "axis") for k in child.keywords)
                if name in REDUCTIONS and (along or name in ALWAYS):
                    found.append((".".join(scope), child.lineno, ast.unparse(child)))
            visit(child, scope)

    visit(ast.parse(source), ())
    return found


def unlisted(package: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel == "stats.py":
            continue
        for scope, line, call in reductions(path.read_text()):
            if f"{rel}:{scope}" not in ALLOWED:
                out.append(f"norms/{rel}:{line} in {scope or 'module'}: {call}")
    return out


def test_statistics_are_computed_in_stats_only():
    found = unlisted()
    assert not found, (
        "reductions outside norms/stats.py (call norms.stats, or add the function to ALLOWED "
        "with the reason it is not a statistic):\n" + "\n".join(found)
    )


def test_every_allowed_function_still_reduces():
    """An entry whose function no longer reduces (moved, renamed, converted) goes."""
    seen = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        seen |= {f"{rel}:{scope}" for scope, _, _ in reductions(path.read_text())}
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"ALLOWED lists functions without a reduction: {stale}"


def test_the_scan_finds_a_statistic():
    snippet = textwrap.dedent(
        """
        import torch

        def my_batch_norm(x, eps=1e-5):
            mean = x.mean((0, 2, 3), keepdim=True)
            var, _ = torch.var_mean(x, dim=(0, 2, 3))
            loss = x.mean()  # a scalar summary: not a statistic
            ok = stats.mean(x, (0, 2, 3))  # norms.stats: where statistics belong
            return (x - mean) / (var + eps).sqrt(), x.var(), x.sum(dim=1), loss, ok

        class Layer:
            def forward(self, x):
                return x.std(-1)
        """
    )
    found = [(scope, call) for scope, _, call in reductions(snippet)]
    assert found == [
        ("my_batch_norm", "x.mean((0, 2, 3), keepdim=True)"),
        ("my_batch_norm", "torch.var_mean(x, dim=(0, 2, 3))"),
        ("my_batch_norm", "x.var()"),
        ("my_batch_norm", "x.sum(dim=1)"),
        ("Layer.forward", "x.std(-1)"),
    ]


def test_the_scan_fails_on_a_new_reduction(tmp_path):
    (tmp_path / "stats.py").write_text("def mean(x, d):\n    return x.mean(d)\n")
    (tmp_path / "layer.py").write_text("def forward(x):\n    return x - x.mean(0)\n")
    (tmp_path / "functional.py").write_text(
        "def normalization_backward_over(g, d):\n    return g.mean(d)\n"
    )
    assert unlisted(tmp_path) == ["norms/layer.py:2 in forward: x.mean(0)"]
