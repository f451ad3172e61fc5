"""A table's measures, the noisy components they are read from, and the split of epsilon.

A table publishes *measures* per group: ``count``, ``sum(col)``, ``mean(col)`` and
``quantile(col, p)``. They are read off fewer noisy *components*, each a vector over the
table's cells:

* ``count``: the rows of each cell (L1 sensitivity 1 per row);
* ``centred_sum(col)``: the sum of ``v - mid`` over the cell's rows, each value clamped to the
  column's declared ``[lo, hi]`` (``mid = (lo + hi) / 2``; sensitivity ``half = (hi - lo) / 2``
  per row). ``sum(col) = centred_sum + mid * count`` and ``mean(col) = centred_sum / count +
  mid``: a sum and a mean of one column share one component, and both share the count;
* ``cdf(col)``: a histogram of the column over a fine declared grid per cell, measured as a
  hierarchical CDF (every ``quantile(col, p)`` of the table is read off it, so several
  quantiles cost one).

The components compose sequentially: their epsilons add up to the table's. The split minimises
the sum of the measures' noise variances, each in its natural unit (a count in rows, a centred
sum and a mean in ``half`` and ``half / n``, a CDF in rows), with the unknown mean of a column
taken uniform over its bounds (``E[(mean - mid)^2] = half^2 / 3``): component ``j`` enters
with weight ``w_j``, and minimising ``sum_j w_j / e_j^2`` subject to ``sum_j e_j = epsilon``
gives (Lagrange) ``e_j = epsilon w_j^(1/3) / sum_k w_k^(1/3)``. The weights:

* ``count`` adds 1 to the count;
* ``mean(col)``: its error is ``(noise_S - (mean - mid) noise_N) / n``, so 1 to the centred sum
  and ``1/3`` to the count (measured apart, a mean alone would split 59.1% / 40.9%; it is
  measured together, below);
* ``sum(col)``: ``noise_S + mid noise_N``, so 1 to the centred sum and ``(mid / half)^2`` to the
  count;
* ``quantile(col, ...)``: 1 to the column's CDF.

**The count and a centred sum measured together.** A row adds ``(1, v - mid)`` to (count,
centred sum): measured apart, the count's noise is calibrated to the 1 and the sum's to the
``half``, at their own epsilons. Measured together they are one vector ``(a, b) = (sum of
v - lo, sum of hi - v)``: a row adds ``v - lo`` and ``hi - v``, both ``>= 0`` and adding up to
``2 half`` exactly, so Laplace noise of scale ``2 half / e`` on both is ``e``-DP, and
``count = (a + b) / (2 half)``, ``centred sum = (a - b) / 2`` carry noise variances
``(2 / e)^2`` and ``(2 half / e)^2``: each as if measured alone at ``e / sqrt(2)`` with the
*whole* ``e`` (apart, they share it: at most ``e / 2`` each for an equal split). The pair is
one component of weight ``2 (w_count + w_sum)`` in the cube-root split; it is used when it
lowers the summed variance, ``(2 (w_n + w_s))^(1/3) < w_n^(1/3) + w_s^(1/3)`` (a mean alone:
half the variance of the equal split, 0.55 of the separate cube-root split), and only for a
table with one sum or mean column (with several, each column's centred sum is measured
alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from dppub.dp.errors import ConfigError

__all__ = ["Component", "Measure", "split_epsilon"]

MeasureKind = Literal["count", "sum", "mean", "quantile"]


@dataclass(frozen=True, slots=True)
class Measure:
    """One measure of a table (``quantile`` carries its probabilities)."""

    kind: MeasureKind
    column: str | None = None
    at: tuple[float, ...] = ()

    def labels(self) -> list[str]:
        """Its ``measure`` values in ``answers.csv`` (one per probability for a quantile)."""
        if self.kind == "count":
            return ["count"]
        if self.kind == "quantile":
            return [f"quantile({self.column}, {p:g})" for p in self.at]
        return [f"{self.kind}({self.column})"]


@dataclass(frozen=True, slots=True)
class Component:
    """One noisy vector over the table's cells, and its share of the table's epsilon."""

    kind: Literal["count", "centred_sum", "count_sum", "cdf"]
    """``count_sum``: the count and ``column``'s centred sum measured together (module doc)."""
    column: str | None
    weight: float
    epsilon: float

    @property
    def name(self) -> str:
        if self.kind == "count_sum":
            return f"count+centred_sum({self.column})"
        return self.kind if self.column is None else f"{self.kind}({self.column})"

    def measures(self, kind: str, column: str | None = None) -> bool:
        """Whether this component gives the ``kind`` (``count`` or ``centred_sum``) vector."""
        if self.kind == "count_sum":
            return kind == "count" or (kind == "centred_sum" and column == self.column)
        return (self.kind, self.column) == (kind, column)


def split_epsilon(
    measures: Sequence[Measure],
    bounds: Mapping[str, tuple[float, float]],
    epsilon: float,
) -> tuple[Component, ...]:
    """The components ``measures`` need and their epsilons (module doc), in a fixed order:
    the count (or the count and a centred sum together), then centred sums, then CDFs, each
    in the order of first use."""
    weights: dict[tuple[str, str | None], float] = {}

    def add(kind: str, column: str | None, w: float) -> None:
        weights[(kind, column)] = weights.get((kind, column), 0.0) + w

    for m in measures:
        if m.kind == "count":
            add("count", None, 1.0)
        elif m.kind in ("sum", "mean"):
            lo, hi = bounds[m.column or ""]
            add("centred_sum", m.column, 1.0)
            mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
            add("count", None, 1.0 / 3.0 if m.kind == "mean" else (mid / half) ** 2)
        else:
            add("cdf", m.column, 1.0)
    if not weights:
        raise ConfigError("a table needs at least one measure")
    sums = [k for k in weights if k[0] == "centred_sum"]
    w_n = weights.get(("count", None), 0.0)
    if len(sums) == 1 and w_n > 0:
        w_s = weights[sums[0]]
        if (2.0 * (w_n + w_s)) ** (1.0 / 3.0) < w_n ** (1.0 / 3.0) + w_s ** (1.0 / 3.0):
            del weights[("count", None)], weights[sums[0]]
            weights[("count_sum", sums[0][1])] = 2.0 * (w_n + w_s)
    order = {"count": 0, "count_sum": 0, "centred_sum": 1, "cdf": 2}
    # A zero weight (only sums of columns centred on 0: no count needed) is not measured.
    keys = sorted((k for k in weights if weights[k] > 0), key=lambda k: order[k[0]])
    roots = [weights[k] ** (1.0 / 3.0) for k in keys]
    total = sum(roots)
    return tuple(
        Component(kind=k[0], column=k[1], weight=weights[k], epsilon=epsilon * r / total)  # type: ignore[arg-type]
        for k, r in zip(keys, roots, strict=True)
    )
