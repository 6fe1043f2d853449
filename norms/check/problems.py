"""Every problem the grader can report: code, title and fix; the collector that gathers them."""

from __future__ import annotations

from dataclasses import dataclass, field

from norms.i18n import Text, tr

from .helpers import current, places

# code -> (title, fix).  The observation (what was seen, where) is filled in per case.
PROBLEM_CODES = {
    "not_gradeable": (
        tr("Cannot grade this candidate"),
        tr("Pass a class (e.g. grade(MyBatchNorm, torch.nn.BatchNorm1d)) or a function of x."),
    ),
    "constructor_failed": (
        tr("The constructor raised an exception"),
        tr(
            "Accept the same positional arguments as the torch.nn layer and give every "
            "extra argument a default value."
        ),
    ),
    "not_a_module": (
        tr("The class is not a torch.nn.Module"),
        tr(
            "Subclass torch.nn.Module and call super().__init__() first, so that "
            "parameters, buffers, .train()/.eval() and .to() work."
        ),
    ),
    "forward_failed": (
        tr("The forward pass raised an exception"),
        tr(
            "Make forward work for every input shape the torch layer accepts; avoid "
            "hard-coded sizes and reshapes."
        ),
    ),
    "wrong_type": (
        tr("The output is not a tensor"),
        tr("Return just the normalized tensor (a torch.Tensor), not a tuple, list or array."),
    ),
    "wrong_shape": (
        tr("The output has the wrong shape"),
        tr(
            "Normalization keeps the input's shape: compute statistics with keepdim=True "
            "(or reshape back) so that they broadcast against x."
        ),
    ),
    "wrong_dtype": (
        tr("The output has the wrong dtype"),
        tr(
            "Create constants and statistics with x.dtype/x.device (e.g. "
            "torch.zeros_like) instead of default float64/NumPy values."
        ),
    ),
    "modifies_input": (
        tr("The forward pass modifies its input in place"),
        tr(
            "Use out-of-place operations (x - mean, not x -= mean) so the caller's tensor "
            "is left untouched."
        ),
    ),
    "unbiased_variance": (
        tr("Normalizes with the unbiased variance"),
        tr(
            "Normalize with the biased (population) variance: x.var(dim, unbiased=False), "
            "i.e. divide by n, not n - 1."
        ),
    ),
    "eps_outside_sqrt": (
        tr("eps is added outside the square root"),
        tr("Use (x - mean) / torch.sqrt(var + eps), not / (torch.sqrt(var) + eps)."),
    ),
    "sum_instead_of_mean": (
        tr("Divides by a sum of squares instead of their mean"),
        tr(
            "Divide by torch.sqrt(((x - mean) ** 2).mean(dims, keepdim=True) + eps): the "
            "mean of the squared deviations (the variance), not their sum."
        ),
    ),
    "eps_missing": (
        tr("eps is missing (or far smaller than it should be)"),
        tr(
            "Add eps inside the square root: torch.sqrt(var + eps), with eps=1e-5 by "
            "default (stored as self.eps)."
        ),
    ),
    "eps_value": (
        tr("eps has a different value than the layer says"),
        tr(
            "Take eps as a constructor argument with torch's default and store it as "
            "self.eps; use self.eps in forward."
        ),
    ),
    "wrong_dims": (
        tr("Statistics are computed over the wrong dims"),
        tr(
            "Reduce over exactly the dims the layer normalizes, derived from x.dim() (not "
            "from a hard-coded shape or a dim index that only works for one shape)."
        ),
    ),
    "wrong_groups": (
        tr("GroupNorm groups are made of the wrong channels"),
        tr(
            "A group is C // G adjacent channels (channel c is in group c // (C // G)): "
            "split the channel dim into (G, C // G), not (C // G, G), and take each "
            "group's statistics over its C // G channels at every position (the reshape "
            "for your layout is above)."
        ),
    ),
    "subtracts_mean": (
        tr("RMSNorm subtracts the mean"),
        tr(
            "RMSNorm does not re-center: divide x by sqrt(mean(x**2) + eps) without "
            "subtracting the mean."
        ),
    ),
    "no_mean_subtraction": (
        tr("The mean is not subtracted"),
        tr("Subtract the mean before dividing: (x - mean) / sqrt(var + eps)."),
    ),
    "affine_not_applied": (
        tr("The scale and shift are not applied"),
        tr(
            "Return x_hat * weight + bias (γ·x̂ + β), with the parameters broadcast along "
            "the normalized features."
        ),
    ),
    "affine_swapped": (
        tr("Scale and shift are swapped"),
        tr(
            "Multiply by the scale (initialized to ones) and add the shift (initialized "
            "to zeros): γ·x̂ + β."
        ),
    ),
    "variance_cancellation": (
        tr("The variance is computed as E[x²] − E[x]²"),
        tr(
            "Compute it as the mean of squared deviations, ((x - mean) ** 2).mean(dims) "
            "or x.var(dims, unbiased=False): the difference of two large, nearly equal "
            "numbers loses the variance's digits when the mean is large compared with the "
            "spread."
        ),
    ),
    "output_nan": (
        tr("The output has NaN (or inf) values"),
        tr(
            "Look for a division by zero or the square root of a negative number: eps "
            "belongs inside the square root, sqrt(var + eps); the variance is the mean of "
            "squared deviations (never negative, unlike E[x²] − E[x]²); an unbiased "
            "variance divides by n − 1 = 0 when a statistic has one element."
        ),
    ),
    "output_is_input": (
        tr("The output is the input, not normalized"),
        tr(
            "Normalize x before the scale and shift: x̂ = (x - mean) / sqrt(var + eps) "
            "with the statistics over the elements the layer normalizes together, then "
            "return γ·x̂ + β."
        ),
    ),
    "output_ignores_input": (
        tr("The output does not depend on the input"),
        tr(
            "Compute the output from forward's argument x (not from a stored tensor, a "
            "parameter alone or a constant): return γ·x̂ + β with x̂ the normalized x."
        ),
    ),
    "output_mismatch": (
        tr("The output differs from the torch layer"),
        tr("Compare your forward step by step with the torch layer on a small input."),
    ),
    "gradient_mismatch": (
        tr("Outputs agree but the input gradient does not"),
        tr(
            "With autograd, do not detach the statistics (no .detach(), .data, .item() or "
            "torch.no_grad() around the mean and variance used in the output). With a "
            "hand-written backward, dx has three terms, rstd·(g − mean(g) − "
            "x̂·mean(g·x̂)) with g = γ·dy and both means over the elements that share a "
            "statistic (RMSNorm: no mean(g) term): a missing x̂·mean(g·x̂) term, a "
            "missing mean(g) term or a mean over the wrong dims gives this."
        ),
    ),
    "backward_term": (
        tr("A term of the input gradient is missing or wrong"),
        tr(
            "dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = γ·dy and both means over "
            "the elements that share a statistic (RMSNorm: no mean(g) term). Add the term "
            "named above, with its sign and factor. With autograd, a missing mean or x̂ "
            "term means the statistics were detached (.detach(), .data, .item(), "
            "torch.no_grad())."
        ),
    ),
    "param_gradient": (
        tr("A parameter's gradient differs"),
        tr(
            "dγ = Σ dy·x̂ and dβ = Σ dy, each summed over the elements that share the "
            "parameter (every dim but the normalized ones for LayerNorm and RMSNorm, "
            "every dim but the channel dim for BatchNorm, GroupNorm and InstanceNorm), "
            "with x̂ the normalized input before the scale and shift. With autograd, use "
            "the parameters themselves in forward (no .detach() or .data, no copy made in "
            "__init__)."
        ),
    ),
    "backward_failed": (
        tr("Backpropagating through the layer raised an exception"),
        tr(
            "Avoid in-place changes to tensors autograd needs and keep the output "
            "connected to the input."
        ),
    ),
    "params_missing": (
        tr("No learnable scale/shift parameter found"),
        tr(
            "Create them in __init__ as nn.Parameter(torch.ones(shape)) (scale) and "
            "nn.Parameter(torch.zeros(shape)) (shift)."
        ),
    ),
    "param_shape": (
        tr("A parameter has the wrong shape"),
        tr("Give the scale and shift the same shape as the torch layer's weight and bias."),
    ),
    "params_not_registered": (
        tr("Scale/shift are plain tensors, not parameters"),
        tr(
            "Wrap them in nn.Parameter so that model.parameters() (and hence the "
            "optimizer) sees them."
        ),
    ),
    "params_created_in_forward": (
        tr("Parameters are created inside forward"),
        tr(
            "Create every nn.Parameter once, in __init__; an optimizer built before the "
            "first forward would never see (or would lose) them."
        ),
    ),
    "running_stats_missing": (
        tr("No running statistics found"),
        tr(
            "Register running_mean (zeros) and running_var (ones) buffers in __init__, "
            "update them in training and use them in eval mode."
        ),
    ),
    "running_stats_not_buffers": (
        tr("Running statistics are plain attributes, not buffers"),
        tr(
            "Use self.register_buffer('running_mean', torch.zeros(num_features)) (same "
            "for running_var), and assign to self.running_mean in forward."
        ),
    ),
    "running_stats_parameters": (
        tr("Running statistics are nn.Parameters"),
        tr(
            "They are not learned by gradient descent: register them as buffers "
            "(self.register_buffer) instead."
        ),
    ),
    "running_stats_autograd": (
        tr("Running statistics carry autograd history"),
        tr(
            "Update them without building a graph: inside `with torch.no_grad():` or from "
            "mean.detach() / var.detach()."
        ),
    ),
    "running_var_biased": (
        tr("running_var is updated with the biased variance"),
        tr(
            "PyTorch stores the unbiased variance in running_var: use var * n / (n - 1) "
            "(x.var(dim, unbiased=True)) for the update, while still normalizing with the "
            "biased one."
        ),
    ),
    "momentum_convention": (
        tr("Momentum follows the TensorFlow/Keras convention"),
        tr(
            "PyTorch's momentum weighs the new batch: running = (1 - momentum) * running "
            "+ momentum * batch_stat, with momentum=0.1 by default."
        ),
    ),
    "running_stats_not_updated": (
        tr("Running statistics are not updated in training"),
        tr(
            "In training mode update running_mean/running_var after computing the batch statistics."
        ),
    ),
    "running_stats_updated_in_eval": (
        tr("Running statistics change in eval mode"),
        tr("Only update them when self.training is True."),
    ),
    "running_stats_mismatch": (
        tr("Running statistics differ from the torch layer"),
        tr(
            "Update with running = (1 - momentum) * running + momentum * batch_stat, "
            "using the batch mean and the unbiased batch variance."
        ),
    ),
    "eval_uses_batch_stats": (
        tr("Eval mode still normalizes with batch statistics"),
        tr("When self.training is False, normalize with running_mean and running_var."),
    ),
    "mode_from_grad_enabled": (
        tr("Train/eval mode is chosen from torch.is_grad_enabled()"),
        tr(
            "Decide with self.training alone: model.eval() may run with gradients on "
            "(e.g. to compute input gradients), and training steps may run under "
            "torch.no_grad() (e.g. to recompute statistics)."
        ),
    ),
    "eval_mismatch": (
        tr("The eval-mode output differs from the torch layer"),
        tr("In eval mode compute (x - running_mean) / sqrt(running_var + eps) * weight + bias."),
    ),
    "extra_shift": (
        tr("A shift β that the torch layer does not have"),
        tr(
            "Remove it: torch.nn.RMSNorm (and a layer built with bias=False) has a scale "
            "γ only. A β would add a learnable offset the reference model does not have, "
            "and load_state_dict from torch would fail on the extra key."
        ),
    ),
    "extra_scale": (
        tr("A learnable scale that the torch layer does not have"),
        tr(
            "Create weight (and bias) only when the affine / elementwise_affine argument "
            "is True; otherwise register them as None (self.register_parameter('weight', "
            "None))."
        ),
    ),
    "running_stats_init": (
        tr("Running statistics start at the wrong values"),
        tr(
            "Start running_mean at zeros and running_var at ones "
            "(torch.ones(num_features)): with zeros, eval mode divides by sqrt(eps) until "
            "many updates have passed."
        ),
    ),
    "timed_out": (
        tr("Your code did not finish in time"),
        tr(
            "Look for a loop that never ends (a while loop whose condition never changes, "
            "a recursion without a base case) in __init__, forward or backward."
        ),
    ),
    "exited": (
        tr("Your code called sys.exit() (or raised SystemExit)"),
        tr("Raise an exception instead of exiting: in a notebook, exiting stops the kernel."),
    ),
    "crashed": (
        tr("Your code ended the process that graded it"),
        tr(
            "Look for os._exit(), os.kill() or a crash in C code (ctypes, an extension) "
            "in __init__, forward or backward: in a notebook, that ends the kernel."
        ),
    ),
    "not_copyable": (
        tr("Your module cannot be copied with copy.deepcopy"),
        tr(
            "The grader runs copies, so that grading leaves your module's running "
            "statistics alone; keep tensors, numbers and modules in attributes (no open "
            "files, locks or generators)."
        ),
    ),
    "grader_error": (
        tr("The grader itself failed"),
        tr("This is a bug in norms.check; please report it with your class."),
    ),
}


@dataclass
class Problem:
    """One thing the candidate does differently from the torch layer."""

    code: str
    title: str
    detail: str
    fix: str
    where: list = field(default_factory=list)

    def text(self) -> Text:
        """The problem in one paragraph, in every language."""
        where = ""
        if self.where:
            where = tr(" (seen at: {shown})", shown=places(self.where))
        return tr(
            "{title}{where}. {detail} Fix: {fix}",
            title=self.title,
            where=where,
            detail=self.detail,
            fix=self.fix,
        )

    def __str__(self):
        return str(self.text())


# Where the generic fix speaks of a mean and a variance, RMSNorm gets its own wording;
# where it speaks of running statistics, layers that have none get theirs.
_FIX_BY_KIND = {
    ("eps_outside_sqrt", "rms"): tr(
        "Use x / torch.sqrt(x.pow(2).mean(dims, keepdim=True) + eps), not x / "
        "(torch.sqrt(x.pow(2).mean(dims, keepdim=True)) + eps)."
    ),
    ("sum_instead_of_mean", "rms"): tr(
        "Divide by torch.sqrt(x.pow(2).mean(dims, keepdim=True) + eps): the mean of the "
        "squares, not their sum (x.norm(dim) is sqrt(n) times the RMS)."
    ),
    ("eps_missing", "rms"): tr(
        "Add eps inside the square root: torch.sqrt(x.pow(2).mean(dims, keepdim=True) + "
        "eps); torch's default eps=None means the machine epsilon of the dtype it "
        "computes in (float32 for float16, bfloat16 and float32 input)."
    ),
    ("output_is_input", "rms"): tr(
        "Normalize x before the scale: x / sqrt(mean(x²) + eps) over the normalized dims, "
        "then return γ times that."
    ),
    **{
        ("eval_mismatch", k): tr(
            "This layer has no running statistics: eval mode must compute exactly what "
            "training mode computes, so do not branch on self.training."
        )
        for k in ("layer", "rms", "group")
    },
}


class Collector:
    def __init__(self, kind=None):
        self.problems: dict = {}
        self.notes: list = []
        self.checks: list = []
        self.kind = kind

    def add(self, code, detail, where=None):
        title, fix = PROBLEM_CODES[code]
        fix = _FIX_BY_KIND.get((code, self.kind), fix)
        # in the language of the moment (the table was made when norms.check was imported)
        title, fix = current(title), current(fix)
        p = self.problems.get(code)
        if p is None:
            p = self.problems[code] = Problem(code, title, detail, fix)
        if where and where not in p.where:
            p.where.append(where)
        return p

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)


class Abort(Exception):
    """Stop grading this scenario (a problem has been recorded)."""
