"""Independent copies of the reader's module: the grader runs copies, so that grading leaves
the reader's running statistics alone."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .helpers import fmt_exc


class Uncopyable(BaseException):
    pass


def copy_module(m):
    """An independent copy of the reader's module (running statistics included), never the module
    itself: ``copy.deepcopy``, else (tensors that are not graph leaves, a lock in an attribute) a
    copy of every submodule and tensor that shares the other attributes; :class:`Uncopyable`
    if neither works (:func:`grade` reports it)."""
    try:
        return copy.deepcopy(m)
    except Exception as exc:
        first = exc
    try:
        return _copy_tensors(m, {})
    except Exception:
        raise Uncopyable(fmt_exc(first)) from None


def _copy_tensors(obj, memo: dict):
    """``obj`` with every module, tensor, dict, list and tuple in it copied (a tensor by
    ``clone()``, which keeps its graph); anything else shared."""
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, nn.Parameter):
        new = nn.Parameter(obj.detach().clone(), requires_grad=obj.requires_grad)
    elif isinstance(obj, torch.Tensor):
        new = obj.clone()
    elif isinstance(obj, nn.Module):
        new = copy.copy(obj)
        memo[id(obj)] = new
        new.__dict__ = {k: _copy_tensors(v, memo) for k, v in vars(obj).items()}
        return new
    elif isinstance(obj, dict):
        new = type(obj)((k, _copy_tensors(v, memo)) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        new = type(obj)(_copy_tensors(v, memo) for v in obj)
    else:
        new = obj
    memo[id(obj)] = new
    return new
