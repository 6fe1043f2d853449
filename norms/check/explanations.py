"""From what was observed (a matching hypothesis, a crash) to the words of a problem."""

from __future__ import annotations

import math

from norms.i18n import join, tr

#: the right reshape for GroupNorm's groups, in each layout
_GROUP_RESHAPE = {
    "channels_first": tr(
        "channels first (N, C, *): x.reshape(N, G, C // G, *spatial), statistics "
        "over dims 2 and beyond"
    ),
    "channels_last": tr(
        "channels last (N, *, C): x.reshape(N, *spatial, G, C // G), statistics "
        "over the spatial dims and the last dim (C // G)"
    ),
}


def explain(h, spec, shape, eps, told_apart=True, layout=None):
    """Problems (code, detail) that a matching hypothesis stands for. ``layout``: the layout the
    candidate computes in, when known ("channels_last" for a channels-last layer seen through
    torch's channels-first layout)."""
    return [
        *_dims_problems(h, spec, shape, layout),
        *_centering_problems(h, spec),
        *_divisor_problems(h, spec),
        *_eps_problems(h, spec, eps, told_apart),
        *_affine_problems(h),
    ]


def _dims_problems(h, spec, shape, layout):
    """Statistics over the wrong dims, or GroupNorm's groups interleaved."""
    if h.dims == "interleaved":
        G = spec.groups
        where = (
            tr("your {layout} layout", layout=layout.replace("_", "-"))
            if layout
            else tr("the layout you use")
        )
        right = join(
            [_GROUP_RESHAPE[k] for k in ([layout] if layout else _GROUP_RESHAPE)],
            tr("; "),
        )
        return [
            (
                "wrong_groups",
                tr(
                    "Your output matches GroupNorm with interleaved groups (channels g, g + {G}, "
                    "g + {G2}, ... in group g) instead of adjacent channels: in {where} the "
                    "channel dim was split as (C // G, G) = ({per}, {G}) instead of (G, C // G) "
                    "= ({G}, {per}). Right: {right}.",
                    G=G,
                    G2=2 * G,
                    where=where,
                    per=spec.channels // G,
                    right=right,
                ),
            )
        ]
    if h.dims is None:
        return []
    moved = ""
    if layout == "channels_last":
        nd = len(shape)
        last = tuple(sorted(0 if d == 0 else nd - 1 if d == 1 else d - 1 for d in h.dims))
        moved = tr(
            " (Dims of the channels-first input the grader passes; your layer moves the "
            "channels last, where they are dims {last} of the (N, *, C) tensor.)",
            last=last,
        )
    return [
        (
            "wrong_dims",
            tr(
                "Your output matches statistics over dims {dims} of an input of shape {shape}; "
                "{layer} uses {right}.{moved}",
                dims=h.dims,
                shape=shape,
                layer=spec.name,
                right=spec.describe_dims(shape),
                moved=moved,
            ),
        )
    ]


def _centering_problems(h, spec):
    """The mean subtracted where it should not be, or not where it should."""
    if not h.center_flip:
        return []
    if spec.center:
        return [
            (
                "no_mean_subtraction",
                tr(
                    "Your output matches dividing by the root mean square "
                    "without subtracting the mean (that is RMSNorm)."
                ),
            )
        ]
    return [
        (
            "subtracts_mean",
            tr("Your output matches LayerNorm-style centering (x - mean); RMSNorm only rescales."),
        )
    ]


def _divisor_problems(h, spec):
    """A sum instead of a mean, or the unbiased variance."""
    if h.divisor == "1":
        if spec.center:
            return [
                (
                    "sum_instead_of_mean",
                    tr(
                        "Your output matches dividing by the square root of the sum "
                        "of squared deviations instead of their mean (the variance)."
                    ),
                )
            ]
        return [
            (
                "sum_instead_of_mean",
                tr(
                    "Your output matches dividing by the L2 norm sqrt(sum(x²)) "
                    "(x.norm(dim=-1)), which is sqrt(n) times the root mean square "
                    "(n = {n} here).",
                    n=math.prod(spec.normalized_shape),
                ),
            )
        ]
    if h.divisor == "n-1":
        return [
            (
                "unbiased_variance",
                tr(
                    "Your output matches normalizing with the unbiased variance "
                    "(divided by n - 1) instead of the biased one (divided by n)."
                ),
            )
        ]
    return []


def _eps_problems(h, spec, eps, told_apart):
    """eps outside the square root, missing, or of another value."""
    out = []
    small = tr("a small variance") if spec.center else tr("small values")
    if h.eps_mode in ("outside", "none") and not told_apart:
        form = "(x - mean) / (sqrt(var) + eps)" if spec.center else "x / (sqrt(mean(x²)) + eps)"
        bare = "sqrt(var)" if spec.center else "sqrt(mean(x²))"
        out.append(
            (
                "eps_outside_sqrt" if h.eps_mode == "outside" else "eps_missing",
                tr(
                    "Your output matches both {form} with eps={eps:g} and dividing by {bare} with "
                    "no eps: at eps={eps:g} the two cannot be told apart on these inputs (they "
                    "differ by less than the tolerance). Either way eps belongs inside the square "
                    "root.",
                    form=form,
                    eps=eps,
                    bare=bare,
                ),
            )
        )
    elif h.eps_mode == "outside":
        form = "(x - mean) / (sqrt(var) + eps)" if spec.center else "x / (sqrt(mean(x²)) + eps)"
        out.append(
            (
                "eps_outside_sqrt",
                tr(
                    "Your output matches {form} with eps={eps:g}; the difference shows on inputs "
                    "with {small}.",
                    form=form,
                    eps=eps,
                    small=small,
                ),
            )
        )
    elif h.eps_mode == "none":
        form = "sqrt(var)" if spec.center else "sqrt(mean(x²))"
        const = tr("constant inputs") if spec.center else tr("all-zero inputs")
        out.append(
            (
                "eps_missing",
                tr(
                    "Your output matches dividing by {form} with no eps; the difference shows on "
                    "inputs with {small} (and it divides by zero on {const}).",
                    form=form,
                    small=small,
                    const=const,
                ),
            )
        )
    if h.eps is not None:
        out.append(
            (
                "eps_value",
                tr(
                    "Your output matches eps={found:g}, but the layer's eps is {eps:g} "
                    "(taken from your .eps attribute, or torch's default if there is none).",
                    found=h.eps,
                    eps=eps,
                ),
            )
        )
    return out


def _affine_problems(h):
    """γ and β not applied, or swapped."""
    if h.affine == "none":
        return [
            (
                "affine_not_applied",
                tr(
                    "Your output matches the normalized input without the scale and "
                    "shift, although the layer has (non-trivial) parameters."
                ),
            )
        ]
    if h.affine == "swapped":
        return [("affine_swapped", tr("Your output matches x̂·β + γ instead of γ·x̂ + β."))]
    return []
