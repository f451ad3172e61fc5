"""Privacy costs as immutable values, and their composition.

A :class:`PrivacyCost` is an ``(epsilon, delta)`` pair. Composition follows the two basic
theorems (Dwork & Roth 2014, Thm 3.16 and McSherry 2009, PINQ):

* sequential: releases computed on the same rows cost the *sum* of their epsilons and deltas;
* parallel: releases computed on *disjoint* row partitions cost the *maximum*.

A plan of releases is composed by :func:`compose`: releases that declare a ``partition`` (a
partitioning key and the part they read) are combined in parallel across parts of the same key
and sequentially within a part; everything else composes sequentially.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from dppub.dp.errors import ConfigError
from dppub.dp.validation import check_delta

__all__ = [
    "PlannedCost",
    "PrivacyCost",
    "compose",
    "parallel",
    "sequential",
    "zcdp_of_gaussian",
    "zcdp_of_pure",
    "zcdp_to_dp",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyCost:
    """An ``(epsilon, delta)`` differential-privacy cost.

    ``epsilon == 0`` is allowed only as the neutral element of composition (:meth:`zero`);
    a mechanism's own cost is validated with :func:`dp.validation.check_epsilon`.

    >>> PrivacyCost(epsilon=0.5) + PrivacyCost(epsilon=0.25, delta=1e-6)
    PrivacyCost(epsilon=0.75, delta=1e-06)
    """

    epsilon: float
    """Pure-DP parameter, finite and >= 0."""
    delta: float = 0.0
    """Approximate-DP parameter, in [0, 1)."""

    def __post_init__(self) -> None:
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, int | float):
            raise ConfigError(f"epsilon must be a number, got {eps!r}")
        if not math.isfinite(eps) or eps < 0.0:
            raise ConfigError(f"epsilon must be finite and >= 0, got {eps!r}")
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "delta", check_delta(self.delta))

    @classmethod
    def zero(cls) -> PrivacyCost:
        """The cost of releasing nothing."""
        return cls(epsilon=0.0, delta=0.0)

    def __add__(self, other: PrivacyCost) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon + other.epsilon, delta=self.delta + other.delta)

    def fits_within(self, budget: PrivacyCost, *, rel: float = 1e-9) -> bool:
        """True if this cost is at most ``budget`` in both epsilon and delta.

        ``rel`` absorbs float summation error only: a *relative* allowance, so a budget with
        delta 0 admits no delta at all.

        >>> PrivacyCost(epsilon=0.1, delta=1e-12).fits_within(PrivacyCost(epsilon=1.0))
        False
        >>> (PrivacyCost(epsilon=0.1) + PrivacyCost(epsilon=0.2)).fits_within(
        ...     PrivacyCost(epsilon=0.3))
        True
        """
        return self.epsilon <= budget.epsilon * (1.0 + rel) and self.delta <= budget.delta * (
            1.0 + rel
        )

    def __sub__(self, other: PrivacyCost) -> PrivacyCost:
        """What is left of ``self`` after spending ``other`` (floored at zero)."""
        return PrivacyCost(
            epsilon=max(0.0, self.epsilon - other.epsilon),
            delta=max(0.0, self.delta - other.delta),
        )


def sequential(costs: Iterable[PrivacyCost]) -> PrivacyCost:
    """Basic sequential composition: epsilons and deltas add."""
    total = PrivacyCost.zero()
    for c in costs:
        total = total + c
    return total


def parallel(costs: Iterable[PrivacyCost]) -> PrivacyCost:
    """Parallel composition over disjoint row partitions: the maximum epsilon and delta."""
    eps, delta = 0.0, 0.0
    for c in costs:
        eps, delta = max(eps, c.epsilon), max(delta, c.delta)
    return PrivacyCost(epsilon=eps, delta=delta)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedCost:
    """One release's cost as it enters composition."""

    name: str
    """Release name (unique within a run)."""
    cost: PrivacyCost
    """The release's own (epsilon, delta)."""
    partition: tuple[str, str] | None = None
    """``(key, part)``: the release reads only the rows of ``part`` of a disjoint partitioning
    ``key`` declared in config (e.g. ``("region", "north")``); ``None`` means all rows."""


def compose(planned: Iterable[PlannedCost]) -> PrivacyCost:
    """Compose a run's releases: parallel across parts of one partitioning, else sequential.

    >>> a = PlannedCost(name="n", cost=PrivacyCost(epsilon=1.0), partition=("region", "n"))
    >>> b = PlannedCost(name="s", cost=PrivacyCost(epsilon=0.5), partition=("region", "s"))
    >>> c = PlannedCost(name="all", cost=PrivacyCost(epsilon=0.25))
    >>> compose([a, b, c]).epsilon
    1.25
    """
    whole: list[PrivacyCost] = []
    parts: dict[str, dict[str, list[PrivacyCost]]] = defaultdict(lambda: defaultdict(list))
    names: set[str] = set()
    for p in planned:
        if p.name in names:
            raise ConfigError(f"release names must be unique, got {p.name!r} twice")
        names.add(p.name)
        if p.partition is None:
            whole.append(p.cost)
        else:
            key, part = p.partition
            parts[key][part].append(p.cost)
    per_key = [parallel(sequential(cs) for cs in by_part.values()) for by_part in parts.values()]
    return sequential([*whole, *per_key])


# zero-concentrated DP (Bun & Steinke, TCC 2016): rho-zCDP composes by adding rho, which is
# much tighter than adding epsilons when many Gaussian releases are made.


def zcdp_of_pure(epsilon: float) -> float:
    """An epsilon-DP release is (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4).

    >>> zcdp_of_pure(1.0)
    0.5
    """
    return 0.5 * epsilon * epsilon


def zcdp_of_gaussian(*, sigma_over_sensitivity: float) -> float:
    """The Gaussian mechanism with noise ``sigma = s * Delta_2`` is ``1 / (2 s^2)``-zCDP
    (Bun & Steinke 2016, Prop. 1.6)."""
    return 0.5 / (sigma_over_sensitivity * sigma_over_sensitivity)


def zcdp_to_dp(rho: float, delta: float) -> float:
    """The epsilon of ``(epsilon, delta)``-DP implied by rho-zCDP (Bun & Steinke 2016, Prop. 1.3).

    >>> round(zcdp_to_dp(0.5, 1e-6), 4)
    5.7565
    """
    if delta <= 0.0:
        raise ConfigError(f"converting zCDP to (epsilon, delta) needs delta > 0, got {delta!r}")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
