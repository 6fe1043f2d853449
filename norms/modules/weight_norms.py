"""Normalizing the weights instead of the activations: weight normalization, spectral
normalization (both as ``torch.nn.utils.parametrize`` parametrizations, with torch's
layout) and adaptive gradient clipping."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor
from torch.nn import Module
from torch.nn.utils import parametrize

__all__ = ["weight_norm", "spectral_norm", "adaptive_clip_grad_", "unitwise_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """‖v‖ over every dim but ``dim``, keeping ``dim`` (``dim=-1``: over the whole tensor).

    The shape of ``torch.norm_except_dim(v, 2, dim)``: ``(1, …, v.shape[dim], …, 1)``,
    or a 0-dim tensor for ``dim=-1``.
    """
    if dim == -1:
        return v.norm()
    others = tuple(d for d in range(v.dim()) if d != dim)
    return torch.linalg.vector_norm(v, dim=others, keepdim=True)  # (1, ..., C_dim, ..., 1)


class _WeightNorm(Module):
    r"""``w = g · v / ‖v‖``, the norm over every dim but ``dim`` (Salimans & Kingma, 2016).

    ``forward(g, v)`` gives the weight; ``right_inverse(w)`` splits a weight into
    ``g = ‖w‖`` and ``v = w``, so that assigning a weight keeps it as it is.
    """

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    r"""Reparametrize ``module.<name>`` as :math:`w = g\,v/\lVert v\rVert`.

    From `Weight Normalization: A Simple Reparameterization to Accelerate Training of
    Deep Neural Networks <https://arxiv.org/abs/1602.07868>`__ (Salimans & Kingma,
    2016). The direction ``v`` and the length ``g`` are learned separately; the norm is
    taken over every dim but ``dim`` (one length per output unit for ``dim=0``; over the
    whole tensor for ``dim=None``). Built on :mod:`torch.nn.utils.parametrize` with the
    layout of :func:`torch.nn.utils.parametrizations.weight_norm`:
    ``parametrizations.<name>.original0`` is ``g`` and ``original1`` is ``v``, so
    state dicts load both ways.

    Args:
        module: the module whose parameter to reparametrize.
        name: the parameter's name. Default: ``"weight"``
        dim: the dim that keeps one length per index; negative dims count from the end, but
            ``-1``, like ``None``, means the whole tensor (as in torch). Default: 0

    Returns:
        ``module``, with the parametrization registered.

    Example::

        >>> import torch, norms
        >>> m = norms.weight_norm(torch.nn.Linear(5, 3))
        >>> m.parametrizations.weight.original0.shape, m.parametrizations.weight.original1.shape
        (torch.Size([3, 1]), torch.Size([3, 5]))
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    ndim = weight.dim()
    if dim is not None and not -ndim <= dim < ndim:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got "
            f"{dim}): weight_norm's dim for a weight of shape {tuple(weight.shape)}"
        )
    if dim is not None and dim < -1:
        dim += ndim  # as torch: -1 means the whole tensor, other negative dims count from the end
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    r"""``w / σ(w)``, σ the largest singular value estimated by power iteration.

    Buffers ``_u`` (left) and ``_v`` (right singular vector estimates), as torch's. The
    weight is viewed as a matrix ``(w.shape[dim], rest)``. In training mode every
    forward pass runs ``n_power_iterations`` steps ``u ← Wv/‖Wv‖, v ← Wᵀu/‖Wᵀu‖``;
    :math:`\sigma = u^\top W v` in either mode. A 1-dim weight is divided by its norm.
    """

    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                "Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            w = self._as_matrix(weight)  # (h, rest)
            h, rest = w.shape
            # random unit vectors, then 15 steps so the first forward starts near σ
            u = w.new_empty(h).normal_(0, 1)
            v = w.new_empty(rest).normal_(0, 1)
            self.register_buffer("_u", self._unit(u))
            self.register_buffer("_v", self._unit(v))
            self._power_iteration(w, 15)

    def _unit(self, t: Tensor) -> Tensor:
        return t / t.norm().clamp_min(self.eps)

    def _as_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:  # the chosen dim first
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)  # (weight.shape[dim], rest)

    @torch.no_grad()
    def _power_iteration(self, w: Tensor, steps: int) -> None:
        for _ in range(steps):
            self._u.copy_(self._unit(torch.mv(w, self._v)))
            self._v.copy_(self._unit(torch.mv(w.H, self._u)))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return self._unit(weight)
        w = self._as_matrix(weight)
        if self.training:
            self._power_iteration(w, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # constants for autograd
        sigma = torch.vdot(u, torch.mv(w, v))  # uᵀ W v ≈ largest singular value
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    r"""Divide ``module.<name>`` by its largest singular value, estimated by power iteration.

    From `Spectral Normalization for Generative Adversarial Networks
    <https://arxiv.org/abs/1802.05957>`__ (Miyato et al., 2018):
    :math:`W_{SN} = W / \sigma(W)` with :math:`\sigma(W) = \max_{h \ne 0}
    \lVert W h\rVert / \lVert h\rVert`, so the layer is 1-Lipschitz. The layout is
    :func:`torch.nn.utils.parametrizations.spectral_norm`'s (``original``, and the
    buffers ``_u`` and ``_v``), and so are the numbers: from the same seed both give the
    same ``_u``, ``_v`` and weight.

    Args:
        module: the module. name: the parameter's name. Default: ``"weight"``
        n_power_iterations: power-iteration steps per forward pass in training. Default: 1
        eps: floor of the norms in the iteration. Default: 1e-12
        dim: the output dim (0, or 1 for ``ConvTranspose``). Default: ``None``

    Example::

        >>> import torch, norms
        >>> m = norms.spectral_norm(torch.nn.Linear(6, 4))
        >>> for _ in range(50):
        ...     w = m.weight
        >>> round(float(torch.linalg.matrix_norm(w.detach(), 2)), 4)
        1.0
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        transposed = (
            torch.nn.ConvTranspose1d,
            torch.nn.ConvTranspose2d,
            torch.nn.ConvTranspose3d,
        )
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module


def unitwise_norm(t: Tensor) -> Tensor:
    """The norm of each output unit (over all dims but the first) of a tensor with more than
    one dim, kept broadcastable ``(out, 1, ...)``; of a 0- or 1-dim tensor, over all of it."""
    if t.dim() <= 1:
        return torch.linalg.vector_norm(t)
    return torch.linalg.vector_norm(t, dim=tuple(range(1, t.dim())), keepdim=True)


@torch.no_grad()
def adaptive_clip_grad_(
    parameters: Tensor | Iterable[Tensor], clip_factor: float = 0.01, eps: float = 1e-3
) -> None:
    r"""Unit-wise adaptive gradient clipping, in place (Brock et al., 2021, NFNets).

    From `High-Performance Large-Scale Image Recognition Without Normalization
    <https://arxiv.org/abs/2102.06171>`__. For each unit (see :func:`unitwise_norm`)
    with weight :math:`w` and gradient :math:`g`, with
    :math:`m = \lambda \max(\lVert w\rVert, \epsilon)`:

    .. math::
        g \leftarrow \begin{cases} g\, m / \lVert g\rVert & \lVert g\rVert \ge m \\
        g & \text{otherwise} \end{cases}

    (:math:`\lVert g\rVert` floored at 1e-6). Parameters without a gradient are skipped.

    Args:
        parameters: a tensor or an iterable of tensors (as
            :func:`torch.nn.utils.clip_grad_norm_`).
        clip_factor: :math:`\lambda`, the largest allowed ratio ‖g‖/‖w‖ (≥ 0).
            Default: 0.01
        eps: :math:`\epsilon`, the floor of ‖w‖ (so zero-initialized weights still move).
            Default: 1e-3

    Example::

        >>> import torch, norms
        >>> layer = torch.nn.Linear(4, 2)
        >>> layer(torch.randn(8, 4)).pow(2).sum().mul(1e4).backward()  # a huge gradient
        >>> norms.adaptive_clip_grad_(layer.parameters(), clip_factor=0.01)
        >>> ratio = norms.modules.weight_norms.unitwise_norm(layer.weight.grad) / (
        ...     norms.modules.weight_norms.unitwise_norm(layer.weight.detach())
        ... )
        >>> torch.allclose(ratio, torch.full((2, 1), 0.01))  # every unit's ‖g‖/‖w‖ cut to λ
        True
    """
    if not clip_factor >= 0:
        raise ValueError(f"clip_factor must be non-negative, got {clip_factor}")
    if not eps >= 0:
        raise ValueError(f"eps must be non-negative, got {eps}")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    for p in parameters:
        if p.grad is None:
            continue
        w_norm = unitwise_norm(p.detach())
        g_norm = unitwise_norm(p.grad)
        max_norm = clip_factor * w_norm.clamp_min(eps)
        clipped = p.grad * (max_norm / g_norm.clamp_min(1e-6))
        p.grad.copy_(torch.where(g_norm < max_norm, p.grad, clipped))
