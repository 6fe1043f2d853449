r"""One experiment over several seeds, and its spread: no claim smaller than its noise.

A single training run is one draw: another seed (of the initialization, of the data order)
gives another accuracy, often by more than the difference between two settings. The
chapters therefore run every comparison over several seeds and show the spread. Two
settings run with the same seed share their initialization and data order, so the runs are
*paired*, and the pairs say more than the two ranges: "higher in 5 of 5 seeds". This module
holds the one rule every chapter uses:

* :func:`over_seeds`: run ``fn(seed)`` for every seed and keep the results, a :class:`Spread`;
* :class:`Spread`: the values with their seeds, ``mean``, ``lo``, ``hi`` (min and max over
  the seeds), a printable summary, :meth:`Spread.overlaps` and :meth:`Spread.wins` (the
  paired count);
* :func:`compare`: the :class:`Comparison` of two paired spreads, whose text is the sentence
  the prose may say: ``"higher in 5 of 5 seeds"`` when the min–max ranges are apart, and
  ``"five seeds do not separate them (higher in 3 of 5)"`` when they overlap. Overlapping
  ranges never mean "no difference": five seeds cannot show a null result;
* :func:`verdict`: that sentence;
* :func:`glue_comparison`: glue both spreads, the paired count (with a claim that
  ``tests/test_claims.py`` re-checks from the stored values) and the sentence.

The figure of a set of spreads is :func:`norms.plots.seeds.plot_spreads`.

Example:
    >>> a = over_seeds(lambda s: 0.90 + 0.01 * s, seeds=range(5))
    >>> b = over_seeds(lambda s: 0.92 + 0.01 * s, seeds=range(5))
    >>> f"{a:.1%}", verdict(b, a)
    ('92.0% (90.0%–94.0%, 5 seeds)', 'five seeds do not separate them (higher in 5 of 5)')
    >>> verdict(over_seeds(lambda s: 0.5 + 0.01 * s, seeds=range(5)), a)
    'lower in 5 of 5 seeds'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from norms.glue import glue

__all__ = ["SEEDS", "Comparison", "Spread", "compare", "glue_comparison", "over_seeds", "verdict"]

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_ZH_NUMBERS = ("零", "一", "两", "三", "四", "五", "六", "七", "八", "九")

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

    def wins(self, other: Spread) -> int:
        """In how many seeds this value is higher than ``other``'s for the same seed (the runs
        of one seed share initialization and data order: they are paired)."""
        if self.seeds != other.seeds:
            raise ValueError(
                f"a paired count needs the same seeds on both sides, got {self.seeds} and "
                f"{other.seeds}"
            )
        return sum(a > b for a, b in zip(self.values, other.values, strict=True))

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


@dataclass(frozen=True)
class Comparison:
    """Two paired spreads ``a`` and ``b`` compared seed by seed.

    Attributes:
        wins: seeds where ``a`` is higher than ``b``.
        losses: seeds where ``a`` is lower than ``b``.
        n: the number of seeds (pairs).
        apart: whether the min–max ranges do not overlap (then ``a`` is on the same side of
            ``b`` in every seed).
    """

    wins: int
    losses: int
    n: int
    apart: bool

    def __str__(self) -> str:
        higher = self.wins >= self.losses
        count = f"{'higher' if higher else 'lower'} in {max(self.wins, self.losses)} of {self.n}"
        if self.apart:
            return f"{count} seeds"
        n = _NUMBER_WORDS[self.n] if self.n < len(_NUMBER_WORDS) else str(self.n)
        return f"{n} seed{'s' if self.n != 1 else ''} do not separate them ({count})"

    @property
    def zh(self) -> str:
        """The same sentence in Chinese, for the Chinese edition's text."""
        direction = "更高" if self.wins >= self.losses else "更低"
        count = f"{self.n} 个随机种子中有 {max(self.wins, self.losses)} 个{direction}"
        if self.apart:
            return count
        n = _ZH_NUMBERS[self.n] if self.n < len(_ZH_NUMBERS) else str(self.n)
        return f"{n}个随机种子不足以区分二者（{count}）"


def compare(a: Spread, b: Spread) -> Comparison:
    """How ``a`` compares with ``b``, paired by seed (both must have the same seeds).

    Example:
        >>> a, b = Spread((0.9, 0.8, 0.7), (0, 1, 2)), Spread((0.85, 0.75, 0.72), (0, 1, 2))
        >>> c = compare(a, b)
        >>> c.wins, c.losses, c.apart, str(c)
        (2, 1, False, 'three seeds do not separate them (higher in 2 of 3)')
    """
    return Comparison(a.wins(b), b.wins(a), a.n, not a.overlaps(b))


def verdict(a: Spread, b: Spread) -> str:
    """The sentence for ``a`` against ``b``: ``"higher in 5 of 5 seeds"`` (or ``"lower …"``)
    when the min–max ranges are apart, else ``"five seeds do not separate them (higher in k
    of 5)"``: never "no difference", which five seeds cannot show."""
    return str(compare(a, b))


def glue_comparison(name: str, a: Spread, b: Spread, digits: int = 4) -> Comparison:
    """Glue a paired comparison for the prose, with its claim; return it.

    Glues ``name.a`` and ``name.b`` (the per-seed values, ``digits`` significant digits
    each), ``name.wins`` (seeds where ``a`` is higher; its claim, re-checked from the two
    stored tuples by :func:`norms.glue.check_claims`, says so and whether the ranges are
    apart), ``name.losses``, ``name`` (the sentence of :func:`verdict`, from the rounded
    values) and ``name.zh`` (that sentence in Chinese). The text then writes e.g.
    ``LayerNorm is {glue:text}`ln-dyt```, and its Chinese translation ``{glue:text}`ln-dyt.zh```.
    """
    a, b = (Spread(tuple(float(f"{v:.{digits}g}") for v in s.values), s.seeds) for s in (a, b))
    result = compare(a, b)
    glue(f"{name}.a", a.values)
    glue(f"{name}.b", b.values)
    pair = (f"{name}.a", f"{name}.b")
    glue(f"{name}.wins", result.wins, paired=pair, apart=result.apart)
    glue(f"{name}.losses", result.losses, paired=pair[::-1], apart=result.apart)
    glue(name, str(result))
    glue(f"{name}.zh", result.zh)  # the Chinese edition's text shows this one
    return result
