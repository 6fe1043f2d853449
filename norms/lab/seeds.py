r"""One experiment over several seeds, and its spread: no claim smaller than its noise.

A single training run is one draw: another seed (of the initialization, of the data order)
gives another accuracy, often by more than the difference between two settings. The
chapters therefore run every comparison over several seeds and show the spread, and a
sentence says "no difference at this scale" when two spreads overlap. This module holds the
one definition of that rule:

* :func:`over_seeds`: run ``fn(seed)`` for every seed and keep the results, a :class:`Spread`;
* :class:`Spread`: the values with their seeds, ``mean``, ``lo``, ``hi`` (min and max over
  the seeds), a printable summary, and :meth:`Spread.overlaps`;
* :func:`verdict`: ``"higher"``, ``"lower"`` or ``"no difference at this scale"`` for two
  spreads (min–max ranges that overlap give the last).

The figure of a set of spreads is :func:`norms.plots.seeds.plot_spreads`.

Example:
    >>> a = over_seeds(lambda s: 0.90 + 0.01 * s, seeds=range(5))
    >>> b = over_seeds(lambda s: 0.92 + 0.01 * s, seeds=range(5))
    >>> f"{a:.1%}", verdict(b, a)
    ('92.0% (90.0%–94.0%, 5 seeds)', 'no difference at this scale')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["SEEDS", "Spread", "over_seeds", "verdict"]

#: The seeds a comparison runs over unless a chapter says otherwise (at least five).
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Spread:
    """The results of one experiment over several seeds.

    Args:
        values: one result per seed (floats), in the order of ``seeds``.
        seeds: the seeds.
    """

    values: tuple[float, ...]
    seeds: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(self.seeds) or not self.values:
            raise ValueError(
                f"a Spread needs one value per seed and at least one seed, got "
                f"{len(self.values)} values for {len(self.seeds)} seeds"
            )

    @property
    def n(self) -> int:
        """Number of seeds."""
        return len(self.values)

    @property
    def mean(self) -> float:
        return sum(self.values) / self.n

    @property
    def lo(self) -> float:
        """Smallest value over the seeds."""
        return min(self.values)

    @property
    def hi(self) -> float:
        """Largest value over the seeds."""
        return max(self.values)

    @property
    def width(self) -> float:
        """``hi - lo``: the spread between seeds."""
        return self.hi - self.lo

    def overlaps(self, other: Spread) -> bool:
        """Whether the min–max ranges of the two spreads share a point."""
        return self.lo <= other.hi and other.lo <= self.hi

    def __format__(self, spec: str) -> str:
        """``mean (lo–hi, n seeds)``, each number formatted with ``spec``."""
        spec = spec or "g"
        return (
            f"{self.mean:{spec}} ({self.lo:{spec}}–{self.hi:{spec}}, "
            f"{self.n} seed{'s' if self.n != 1 else ''})"
        )

    def __str__(self) -> str:
        return format(self, "g")


def over_seeds(fn: Callable[[int], float], seeds: Iterable[int] = SEEDS) -> Spread:
    """Run ``fn(seed)`` for every seed; the results as a :class:`Spread`.

    Args:
        fn: one run of the experiment; returns a number (accuracy, loss, ...).
        seeds: the seeds (default :data:`SEEDS`, five).
    """
    seeds = tuple(int(s) for s in seeds)
    return Spread(tuple(float(fn(s)) for s in seeds), seeds)


def verdict(a: Spread, b: Spread) -> str:
    """How ``a`` compares with ``b``: ``"higher"``, ``"lower"``, or, when their min–max ranges
    overlap, ``"no difference at this scale"``."""
    if a.overlaps(b):
        return "no difference at this scale"
    return "higher" if a.mean > b.mean else "lower"
