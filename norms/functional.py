r"""Normalization functions written from tensor primitives.

Drop-in replacements for ``torch.nn.functional.{batch_norm, layer_norm,
rms_norm, group_norm, instance_norm}``: same signatures, defaults, results
(to floating-point rounding), gradients (through ordinary autograd), running
statistics updates and exception types. None of them calls a fused torch
normalization kernel; each is a handful of ``mean``/``rsqrt``/``reshape``
calls: *which* dims they reduce comes from :mod:`norms.axes`, *how* the statistics
are computed from :mod:`norms.stats`.

All of them follow the same recipe::

    mean, xc, var = stats.moments(x, dims)       # mean, centred input, biased variance
    y = xc * rsqrt(var + eps)                    # the centred input reused for the output
    y = y * weight + bias                        # per-channel / per-element affine

The variance is always the mean of squared deviations, never
``E[x²] - E[x]²``, which cancels catastrophically when ``|mean| >> std``.
``float16``/``bfloat16`` inputs are computed in ``float32`` and cast back, as
torch's kernels do.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import Tensor

from . import axes, stats

__all__ = [
    "batch_norm",
    "instance_norm",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "normalization_backward",
    "normalization_backward_over",
    "dynamic_tanh",
]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype we compute in: float32 for half/bfloat16, else the input's own."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def _check_buffers_without_grad(fname: str, **buffers: Tensor | None) -> None:
    """torch's error for a running-statistics buffer that requires grad (it gets no gradient)."""
    if not torch.is_grad_enabled():
        return
    for name, t in buffers.items():
        if t is not None and t.requires_grad:
            raise RuntimeError(
                f"{fname}: the running statistics get no gradient, but {name} has "
                f"requires_grad=True. This input cannot have requires_grad True (as torch's "
                f"'native_batch_norm'); detach it or call {name}.requires_grad_(False)"
            )


def _normalize_rows(xc: Tensor, x: Tensor, var: Tensor, dims, eps: float) -> Tensor:
    r"""``xc * rsqrt(var + eps)``; where the variance overflowed to ``inf`` (inputs near the
    square root of the dtype's largest value, e.g. ``1e20`` in float32) a scaled computation.

    Scaled: with :math:`s = \max|x|` over ``dims``, :math:`y = (x/s - \overline{x/s})\,/
    \sqrt{\mathrm{Var}[x/s] + \epsilon/s^2}` (:func:`norms.stats.scaled_moments`), the same
    value without squaring ``x``, and ``torch.where`` takes it for the rows whose variance is
    not finite: every ordinary row gives exactly the plain result. A non-finite input still
    gives NaN. No result depends on a branch on the values (see
    :func:`norms.stats.all_finite` for the eager-mode shortcut).
    """
    y = xc * torch.rsqrt(var + eps)
    if x.numel() == 0 or stats.all_finite(var):
        return y
    finite = torch.isfinite(var)
    s, xsc, var_s = stats.scaled_moments(x, dims, finite)
    return torch.where(finite, y, xsc * torch.rsqrt(var_s + eps / (s * s)))


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _check_eps(eps, fname: str) -> None:
    # torch: TypeError: layer_norm(): argument 'eps' (position 5) must be float, not str
    if isinstance(eps, bool) or not isinstance(eps, (numbers.Real, Tensor)):
        raise TypeError(
            f"{fname}(): argument 'eps' must be a float (a small positive number such as "
            f"1e-5), not {type(eps).__name__} {eps!r}"
        )


def check_floating(input: Tensor, fname: str) -> None:
    """torch's error for a tensor that is not floating point, naming its dtype and shape."""
    # torch: NotImplementedError: "batch_norm" not implemented for 'Long'
    # (NotImplementedError is a subclass of RuntimeError.)
    if not input.is_floating_point():
        raise NotImplementedError(
            f'"{fname}" not implemented for input of dtype {input.dtype} '
            f"(shape {_shape(input)}): normalization needs a floating-point "
            "tensor, convert it first, e.g. x.float()"
        )


def check_param_dtypes(input: Tensor, fname: str, **params: Tensor | None) -> None:
    """Parameters must share the input's dtype; half/bfloat16 input may use float32 ones.

    That is torch's CPU rule ("mixed dtype (CPU): expect parameter to have
    scalar type of Float"), a RuntimeError.
    """
    for name, p in params.items():
        if p is None or p.dtype == input.dtype:
            continue
        if input.dtype in _LOW_PRECISION and p.dtype == torch.float32:
            continue
        raise RuntimeError(
            f"{fname}: mixed dtype: {name} has dtype {p.dtype} but input has dtype "
            f"{input.dtype}; parameters must have the input's dtype (or float32 "
            "for float16/bfloat16 input)"
        )


def check_channels(input: Tensor, fname: str, **params: Tensor | None) -> None:
    """Per-channel tensors must have one element per channel of ``input`` (dim 1)."""
    c = input.shape[1]
    for name, p in params.items():
        if p is not None and p.numel() != c:
            raise RuntimeError(
                f"{fname}: expected input with {p.numel()} channels in dim 1 "
                f"(the size of {name}), got input of shape {_shape(input)} "
                f"with {c} channels"
            )


def affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """``y * weight + bias``, in one pass when both are present (either may be ``None``)."""
    if weight is not None and bias is not None:
        return torch.addcmul(bias, y, weight)
    if weight is not None:
        return y * weight
    if bias is not None:
        return y + bias
    return y


def check_batch_norm_eps(eps: float, training: bool, fname: str = "batch_norm") -> None:
    """torch's errors for BatchNorm's eps: positive in training (the batch variance of a
    constant channel is 0), non-negative in eval mode."""
    if training and eps <= 0.0:
        raise ValueError(f"{fname} eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"{fname} eps must be non-negative, but got {eps}")


def verify_batch_size(size: Sequence[int]) -> None:
    # Same check and message as torch.nn.functional._verify_batch_size:
    # one value per channel means a variance of 0 and a meaningless update.
    size_prods = size[0] * math.prod(size[2:])
    if size_prods == 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size {size}"
        )


def _verify_spatial_size(size: Sequence[int]) -> None:
    if math.prod(size[2:]) == 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {size}"
        )


def normalized_shape_tuple(normalized_shape: Sequence[int], fname: str) -> tuple[int, ...]:
    if isinstance(normalized_shape, (int, torch.SymInt)) or not isinstance(
        normalized_shape, Sequence
    ):
        # torch.nn.functional (unlike the modules) does not accept a bare int.
        raise TypeError(
            f"{fname}(): argument 'normalized_shape' (position 2) must be tuple of ints, "
            f"not {type(normalized_shape).__name__}"
        )
    ns = tuple(int(s) for s in normalized_shape)
    if len(ns) == 0:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
            "least one element, but got normalized_shape = []"
        )
    return ns


def check_normalized_shape(input: Tensor, ns: tuple[int, ...], fname: str, **params) -> None:
    k = len(ns)
    if fname == "rms_norm" and input.dim() < k:
        # torch's rms_norm checks the rank first, with a ValueError
        raise ValueError(
            f"Input tensor must have at least {k} dimensions, but got {input.dim()}: "
            f"rms_norm with normalized_shape={ns} needs input of shape "
            f"(*, {', '.join(map(str, ns))}), got input of shape {_shape(input)}"
        )
    if input.dim() < k or _shape(input)[input.dim() - k :] != ns:
        raise RuntimeError(
            f"{fname}: given normalized_shape={list(ns)}, expected input with shape "
            f"(*, {', '.join(map(str, ns))}) (its last {k} dim{'s' if k > 1 else ''} "
            f"equal to {ns}), but got input of shape {_shape(input)}"
        )
    for name, p in params.items():
        if p is not None and _shape(p) != ns:
            raise RuntimeError(
                f"{fname}: expected {name} to be of same shape as normalized_shape, "
                f"but got {name} of shape {_shape(p)} and normalized_shape = {ns}"
            )


# --------------------------------------------------------------------------
# batch_norm
# --------------------------------------------------------------------------


def batch_norm_no_channel_dim(
    input: Tensor, training: bool, **per_channel: Tensor | None
) -> Tensor:
    """batch_norm of an input with fewer than 2 dims, as torch does it.

    Without a dim 1, torch takes the channel count to be 0: every per-channel
    tensor must then be empty (RuntimeError otherwise). An empty 1-D input
    gives an empty output; any other 1-D input raises IndexError (it has no
    dim 1), a 0-D one RuntimeError in eval mode and IndexError in training.
    """
    for name, t in per_channel.items():
        if t is not None and t.numel() != 0:
            raise RuntimeError(
                f"batch_norm: input of shape {_shape(input)} has no channel dim (N, C, *), so "
                f"{name} must be empty (C = 0); got {name} of shape {_shape(t)}"
            )
    if input.dim() == 1 and input.numel() == 0:
        return input.clone()  # (0,): nothing to normalize
    error = IndexError if input.dim() == 1 or training else RuntimeError
    raise error(
        f"batch_norm: expected input of shape (N, C, *) with at least 2 dims, "
        f"got input of shape {_shape(input)}"
    )


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    r"""Batch Normalization for each channel across a batch, like
    :func:`torch.nn.functional.batch_norm`.

    ``input`` is ``(N, C, *S)``. With ``training=True`` the mean and biased
    variance of each channel are computed over dims ``(0, 2, 3, ...)`` and, if
    given, ``running_mean``/``running_var`` are updated in place with
    ``(1 - momentum) * running + momentum * batch_stat``, using the *unbiased*
    variance (times ``n / (n - 1)``). With ``training=False`` the running
    statistics are used instead.
    """
    check_batch_norm(input, running_mean, running_var, training, eps)
    if input.dim() < 2:
        return batch_norm_no_channel_dim(
            input,
            training,
            running_mean=running_mean,
            running_var=running_var,
            weight=weight,
            bias=bias,
        )
    per_channel = dict(running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    check_param_dtypes(input, "batch_norm", **per_channel)
    check_channels(input, "batch_norm", **per_channel)
    x = input.to(opmath(input.dtype))  # (N, C, *S); no copy unless half/bfloat16
    if training:
        mean, xc, var = stats.batch_moments(x)  # (1, C, 1, ...), (N, C, *S), (1, C, 1, ...)
        if running_mean is not None and input.numel() > 0:
            n = stats.count(input.shape, axes.batch_norm_dims(input.dim()))  # per channel
            stats.update_running_stats(
                running_mean, running_var, mean.view(-1), var.view(-1), n, momentum
            )
    else:
        mean = stats.channel_view(running_mean, x.dim(), x.dtype)  # (1, C, 1, ...)
        var = stats.channel_view(running_var, x.dim(), x.dtype)  # (1, C, 1, ...)
        xc = x - mean  # (N, C, *S)
    return _scale_and_shift(xc, var, eps, weight, bias).to(input.dtype)


def check_batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    eps: float,
) -> None:
    """The checks of :func:`batch_norm` before it looks at the channels, with torch's
    exceptions in torch's order: dtype, buffers, batch size, eps, which buffers are given."""
    check_floating(input, "batch_norm")
    _check_buffers_without_grad("batch_norm", running_mean=running_mean, running_var=running_var)
    if training and input.dim() >= 2:
        verify_batch_size(input.size())
    check_batch_norm_eps(eps, training)
    if (running_mean is None) != (running_var is None):
        if training:
            raise ValueError(
                "running_mean and running_var must either both be None or neither be None"
            )
        missing = "running_mean" if running_mean is None else "running_var"
        raise RuntimeError(f"{missing} must be defined in evaluation mode")
    if not training and running_mean is None:
        raise RuntimeError("running_mean must be defined in evaluation mode")


def _scale_and_shift(
    xc: Tensor,
    var: Tensor,
    eps: float,
    weight: Tensor | None,
    bias: Tensor | None,
    zero_if_constant: bool = False,
) -> Tensor:
    """``xc / sqrt(var + eps) * weight + bias`` for per-channel statistics and parameters,
    with 1/std and gamma folded into one per-channel scale: a single pass over ``xc``.
    With ``zero_if_constant`` a variance of 0 gives the scale 0 (not inf)."""
    ndim, dtype = xc.dim(), xc.dtype
    scale = torch.rsqrt(var + eps)  # (1, C, 1, ...) or (N, C, 1, ...)
    if zero_if_constant:
        scale = torch.where(var == 0, torch.zeros_like(scale), scale)
    if weight is not None:
        scale = scale * stats.channel_view(weight, ndim, dtype)
    shift = None if bias is None else stats.channel_view(bias, ndim, dtype)
    return affine(xc, scale, shift)


# --------------------------------------------------------------------------
# instance_norm
# --------------------------------------------------------------------------


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    r"""Instance Normalization, like :func:`torch.nn.functional.instance_norm`.

    ``input`` is ``(N, C, *S)``; each ``(sample, channel)`` pair is normalized
    over its spatial dims ``(2, 3, ...)``. With ``use_input_stats=True`` and
    running statistics given, they are updated in place with the per-instance
    statistics *averaged over the batch* (unbiased variance). With
    ``use_input_stats=False`` the running statistics are used instead.
    """
    check_floating(input, "instance_norm")
    _check_buffers_without_grad("instance_norm", running_mean=running_mean, running_var=running_var)
    if use_input_stats:
        _verify_spatial_size(input.size())
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if not use_input_stats and running_mean is None:
        raise RuntimeError(
            "Expected running_mean and running_var to be defined when use_input_stats is false"
        )
    if input.dim() < 2:
        raise RuntimeError(
            f"instance_norm: expected input of shape (N, C, *), got input of shape {_shape(input)}"
        )
    per_channel = dict(running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    check_param_dtypes(input, "instance_norm", **per_channel)
    check_channels(input, "instance_norm", **per_channel)
    x = input.to(opmath(input.dtype))  # (N, C, *S)
    if use_input_stats:
        mean, xc, var = stats.instance_moments(x)  # (N, C, 1, ...), (N, C, *S), (N, C, 1, ...)
        if running_mean is not None and input.numel() > 0:
            n = stats.count(input.shape, axes.instance_norm_dims(input.dim()))  # per instance
            nc = input.shape[:2]
            stats.update_running_stats(
                running_mean, running_var, mean.view(nc), var.view(nc), n, momentum
            )
    else:
        mean = stats.channel_view(running_mean, x.dim(), x.dtype)  # (1, C, 1, ...)
        var = stats.channel_view(running_var, x.dim(), x.dtype)  # (1, C, 1, ...)
        xc = x - mean
    # torch's inverse std: 0 (not inf) for a constant instance with eps=0, so y = beta
    zero = use_input_stats and eps == 0
    return _scale_and_shift(xc, var, eps, weight, bias, zero_if_constant=zero).to(input.dtype)


# --------------------------------------------------------------------------
# layer_norm
# --------------------------------------------------------------------------


def check_layer_norm(
    input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None, bias: Tensor | None
) -> tuple[int, ...]:
    """The checks of :func:`layer_norm` (torch's exceptions, with the shapes): ``normalized_shape``
    as a tuple.

    Shared with kernels that take the same arguments (:mod:`norms.fast.cpu_kernels`).
    """
    ns = normalized_shape_tuple(normalized_shape, "layer_norm")
    check_floating(input, "layer_norm")
    check_normalized_shape(input, ns, "layer_norm", weight=weight, bias=bias)
    check_param_dtypes(input, "layer_norm", weight=weight, bias=bias)
    return ns


def layer_norm(
    input: Tensor,
    normalized_shape: list[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    r"""Layer Normalization over the last ``len(normalized_shape)`` dims, like
    :func:`torch.nn.functional.layer_norm`.

    ``weight`` and ``bias`` (if given) have shape ``normalized_shape`` and are
    applied element-wise.
    """
    ns = check_layer_norm(input, normalized_shape, weight, bias)
    _check_eps(eps, "layer_norm")
    dtype = opmath(input.dtype)
    x = input.to(dtype)  # (*, *normalized_shape)
    dims = axes.layer_norm_dims(input.dim(), len(ns))  # the last k dims
    _, xc, var = stats.moments(x, dims)  # (*, 1, ..., 1), (*, *normalized_shape), biased var
    y = _normalize_rows(xc, x, var, dims, eps)  # (*, *normalized_shape)
    y = affine(
        y,
        None if weight is None else weight.to(dtype),  # (*normalized_shape), broadcasts
        None if bias is None else bias.to(dtype),
    )
    return y.to(input.dtype)


# --------------------------------------------------------------------------
# rms_norm
# --------------------------------------------------------------------------


def rms_norm(
    input: Tensor,
    normalized_shape: list[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    r"""Root Mean Square Layer Normalization, like :func:`torch.nn.functional.rms_norm`.

    ``y = x / sqrt(mean(x², last k dims) + eps) * weight``. No centring, no bias.
    ``eps=None`` means ``torch.finfo(dtype).eps`` of the computation dtype
    (float32 for float16/bfloat16 input). The weight may have any floating
    dtype; it is applied in the computation dtype and the result has the
    input's dtype, as in torch.
    """
    ns = normalized_shape_tuple(normalized_shape, "rms_norm")
    check_floating(input, "rms_norm")
    check_normalized_shape(input, ns, "rms_norm", weight=weight)

    dtype = opmath(input.dtype)
    if eps is None:
        eps = torch.finfo(dtype).eps
    x = input.to(dtype)  # (*, *normalized_shape); float32 for half: 300² fits
    dims = axes.layer_norm_dims(input.dim(), len(ns))  # the last k dims
    ms = stats.mean_square(x, dims)  # (*, 1, ..., 1)
    y = x * torch.rsqrt(ms + eps)  # (*, *normalized_shape)
    if weight is not None:
        y = y * weight.to(dtype)  # (*normalized_shape), broadcasts
    return y.to(input.dtype)


# --------------------------------------------------------------------------
# group_norm
# --------------------------------------------------------------------------


def check_group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None, bias: Tensor | None
) -> None:
    """The checks of :func:`group_norm` (torch's exceptions, with the shapes).

    Shared with kernels that take the same arguments (:mod:`norms.fast.cpu_kernels`).
    """
    check_floating(input, "group_norm")
    if input.dim() < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.dim()} "
            f"(input of shape {_shape(input)}; group_norm wants (N, C, *))"
        )
    n, c = input.shape[0], input.shape[1]
    if num_groups == 0:
        raise ZeroDivisionError("group_norm: num_groups must be positive, got 0")
    if num_groups < 0:
        raise RuntimeError(f"Expected num groups to be greater than 0, got {num_groups}")
    if c % num_groups != 0:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got "
            f"input of shape {_shape(input)} ({c} channels) and num_groups={num_groups}"
        )
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (p.dim() != 1 or p.numel() != c):
            raise RuntimeError(
                f"group_norm: expected {name} to be a vector of size equal to the number of "
                f"channels in input, but got {name} of shape {_shape(p)} and input of shape "
                f"{_shape(input)} ({c} channels)"
            )
    verify_batch_size([n * c // num_groups, num_groups] + list(input.shape[2:]))
    check_param_dtypes(input, "group_norm", weight=weight, bias=bias)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    r"""Group Normalization, like :func:`torch.nn.functional.group_norm`.

    ``input`` is ``(N, C, *S)``; its channels are split into ``num_groups``
    blocks of ``C // num_groups`` consecutive channels, and each
    ``(sample, group)`` is normalized over its channels and spatial positions.
    ``weight``/``bias`` are per channel, shape ``(C,)``.
    """
    check_group_norm(input, num_groups, weight, bias)
    _check_eps(eps, "group_norm")
    ndim = input.dim()
    dtype = opmath(input.dtype)
    x = input.to(dtype).reshape(axes.group_norm_shape(input.shape, num_groups))
    # x: (N, G, C//G * prod(S))
    _, xc, var = stats.moments(x, (-1,))  # (N, G, 1), (N, G, C//G * prod(S)), (N, G, 1) biased
    y = _normalize_rows(xc, x, var, (-1,), eps).view(input.shape)  # (N, C, *S)
    y = affine(
        y,
        None if weight is None else stats.channel_view(weight, ndim, dtype),  # (1, C, 1, ...)
        None if bias is None else stats.channel_view(bias, ndim, dtype),
    )
    return y.to(input.dtype)


# --------------------------------------------------------------------------
# the backward pass, one formula for every norm
# --------------------------------------------------------------------------


def normalization_backward(
    g: Tensor, x_hat: Tensor, rstd: Tensor, mean_g: Tensor | None, mean_g_x_hat: Tensor
) -> Tensor:
    r"""The input gradient of a normalization, given the two means its statistic needs.

    .. math::

        \mathrm{d}x = \frac{1}{\sigma}\Big(g - \langle g \rangle
            - \hat x\,\langle g\,\hat x \rangle\Big), \qquad g = \mathrm{d}y \cdot \gamma,

    where :math:`\langle\cdot\rangle` is the mean over the elements that share one
    statistic. RMSNorm does not centre, so it has no :math:`\langle g \rangle` term:
    pass ``mean_g=None``. Every backward pass in :mod:`norms` ends here: the
    hand-derived ones of :mod:`norms.autograd`, the compiled ones and the C++
    kernel's second derivative (:mod:`norms.fast`) and SyncBatchNorm's, whose means
    run over the batches of every process. Each computes the two means its own way
    (over local dims, from all-reduced sums, from per-channel sums) and calls this.

    Args:
        g: ``dy * weight`` (or ``dy`` without a weight), the input's shape.
        x_hat: the normalized input, the input's shape.
        rstd: ``1/σ``, broadcastable to the input (size 1 on the reduced dims).
        mean_g: :math:`\langle g \rangle`, broadcastable like ``rstd``; ``None`` for RMSNorm.
        mean_g_x_hat: :math:`\langle g\,\hat x \rangle`, broadcastable like ``rstd``.
    """
    centred = g if mean_g is None else g - mean_g
    return rstd * (centred - x_hat * mean_g_x_hat)


def normalization_backward_over(
    g: Tensor, x_hat: Tensor, rstd: Tensor, dims: Sequence[int], centred: bool = True
) -> Tensor:
    """:func:`normalization_backward` with both means taken over ``dims`` of this tensor."""
    dims = tuple(dims)
    mean_g = g.mean(dims, keepdim=True) if centred else None
    return normalization_backward(g, x_hat, rstd, mean_g, (g * x_hat).mean(dims, keepdim=True))


# --------------------------------------------------------------------------
# dynamic_tanh (Zhu et al., 2025): no statistics at all
# --------------------------------------------------------------------------


def dynamic_tanh(
    input: Tensor,
    alpha: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    channels_last: bool = True,
) -> Tensor:
    r"""Dynamic Tanh, :math:`y = \tanh(\alpha x)\,\gamma + \beta`, element by element.

    ``alpha`` has one element. With ``channels_last=True`` ``weight`` and ``bias`` have the
    shape of the input's trailing dims; with ``channels_last=False`` they have shape ``(C,)``
    and the input is ``(N, C, H, W)``. Unlike the authors' module, which broadcasts whatever
    it is given, a shape that does not fit is an error naming both shapes.
    """
    params = [p for p in (weight, bias) if p is not None]
    if params:
        ns = _shape(params[0])
        if channels_last:
            k = len(ns)
            if input.dim() < k or _shape(input)[input.dim() - k :] != ns:
                raise RuntimeError(
                    f"dynamic_tanh: normalized_shape={ns} needs input of shape "
                    f"(*, {', '.join(map(str, ns))}), but got input of shape {_shape(input)}"
                )
        else:
            if len(ns) != 1 or input.dim() != 4 or input.shape[1] != ns[0]:
                raise RuntimeError(
                    f"dynamic_tanh with channels_last=False: normalized_shape={ns} needs input "
                    f"of shape (N, {ns[0] if len(ns) == 1 else ns}, H, W), but got input of "
                    f"shape {_shape(input)}"
                )
    y = torch.tanh(alpha * input)
    if not channels_last:
        weight = None if weight is None else weight[:, None, None]  # (C, 1, 1)
        bias = None if bias is None else bias[:, None, None]  # (C, 1, 1)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y
