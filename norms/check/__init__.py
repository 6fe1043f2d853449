"""Grade a reader's own normalization layer against the torch.nn layer it imitates.

    >>> import torch, norms
    >>> from norms.check import grade
    >>> report = grade(norms.BatchNorm1d, torch.nn.BatchNorm1d)  # your class in place of norms'
    >>> report.ok, report.problems
    (True, [])

``candidate`` is a class (built with the same arguments as the reference:
``num_features``; ``normalized_shape``; ``num_groups, num_channels``, plus the
keyword arguments of a ``functools.partial`` reference such as
``partial(torch.nn.BatchNorm2d, affine=False)``) or a plain function of ``x``
(compared with the reference in training mode, without affine parameters).  The
grader runs both on several shapes, batch sizes and steps, in training and
evaluation mode, and when they disagree it tests hypotheses (unbiased variance,
eps outside the square root, wrong reduced dims, wrong momentum convention, ...)
to name the bug; an output with NaN, the input itself or an output that ignores
the input is named as such.  It never lets an exception from the reader's code
escape: crashes, endless loops and exits become problems in the report.

The parts, one module each:

* :mod:`~norms.check.scenarios`: which layers, constructor arguments and input shapes are run;
* :mod:`~norms.check.problems`: every problem code with its title and fix, and the collector;
* :mod:`~norms.check.report`: the :class:`Report` a reader sees (text and HTML);
* :mod:`~norms.check.hypotheses`: float64 re-implementations of the usual bugs, to name a mismatch;
* :mod:`~norms.check.explanations`: from a matching hypothesis (or a crash) to the words of a
problem;
* :mod:`~norms.check.inspection`: finding the candidate's eps, scale/shift and running statistics;
* :mod:`~norms.check.structure`, :mod:`~norms.check.running_stats`, :mod:`~norms.check.diagnosis`:
  the checks, mixed into :class:`~norms.check.grader._Grader`;
* :mod:`~norms.check.sandbox`: running the reader's code (a child process killed at the time
  limit, what it replaces in torch put back after every call);
* :mod:`~norms.check.grader`: the run itself and :func:`grade`.

Only torch is needed.
"""

from __future__ import annotations

from .grader import grade
from .problems import PROBLEM_CODES, Problem
from .report import Report

__all__ = ["grade", "Report", "Problem", "PROBLEM_CODES"]
