"""Experiments: data, small models, training loops and the chapters' runs.

* :mod:`~norms.lab.models`: the MLP/CNN/residual models whose normalization is an argument;
* :mod:`~norms.lab.training`: ``load_digits`` as tensors, :func:`~norms.lab.training.train`,
  :func:`~norms.lab.training.evaluate`, :func:`~norms.lab.training.recalibrate_batchnorm`;
* :mod:`~norms.lab.pitfalls`: parameter groups without weight decay, freezing BatchNorm;
* :mod:`~norms.lab.transformer`: the transformer chapter's tiny training runs;
* :mod:`~norms.lab.simulations`: the running-statistics and batch-noise simulations;
* :mod:`~norms.lab.sync`: SyncBatchNorm on several processes against one BatchNorm, and
  the cost of a synchronized step.

The figures of these runs are in :mod:`norms.plots`.
"""

from ..lazy import lazy_submodules
from .simulations import BatchNoise, RunningStatsTrace, simulate_batch_noise, simulate_running_stats

__all__ = ["BatchNoise", "RunningStatsTrace", "simulate_batch_noise", "simulate_running_stats"]


# a submodule loads on first use: ``norms.lab.x`` works after ``import norms``
__getattr__ = lazy_submodules(__name__)
