"""A table's measures, the noisy components they are read from, and the split of epsilon.

A table publishes *measures* per group: ``count``, ``count(col)``, ``count_distinct``,
``sum(col)``, ``mean(col)``, ``variance(col)``, ``std(col)`` and ``quantile(col, p)``. They
are read off fewer noisy *components*, each a vector over the table's cells:

* ``count``: every row of the cell (L1 sensitivity 1 per row);
* ``count(col)``: the cell's rows where ``col`` is present (a row adds 0 or 1: sensitivity 1);
* ``centred_sum(col)``: the sum of ``v - mid`` over the cell's rows where ``col`` is present,
  each value clamped to the column's declared ``[lo, hi]`` (``mid = (lo + hi) / 2``;
  sensitivity ``half = (hi - lo) / 2`` per row). ``sum(col) = centred_sum + mid * count(col)``
  and ``mean(col) = centred_sum / count(col) + mid``: a sum and a mean of one column share one
  component, and both share ``count(col)``;
* ``centred_square(col)``: the sum of ``(v - mid)^2 - half^2 / 2`` over the same rows (each in
  ``[-half^2 / 2, half^2 / 2]``: sensitivity ``half^2 / 2``), for ``variance(col)`` and
  ``std(col)`` (:mod:`dp.tables.spread`);
* ``distinct``: the privacy units with a row in the cell (``count_distinct``; sensitivity the
  number of cells a unit's bounded rows can reach, :func:`dp.tables.spread.distinct_bound`);
* ``cdf(col)``: a histogram of the column's present values over a fine declared grid per cell,
  measured as a hierarchical CDF (every ``quantile(col, p)`` of the table is read off it, so
  several quantiles cost one).

**Missing values.** ``count`` counts every row of the group; every measure of a column ``x``
uses the rows where ``x`` is present, and ``count(x)`` publishes how many those are
(:data:`MISSING_RULE`). A row changes ``count`` by 1, ``count(x)`` by at most 1, a centred sum
by at most ``half`` whether ``x`` is present or not (a missing value adds 0), so the
sensitivities above hold with missing values.

The components compose sequentially: their epsilons add up to the table's. The split minimises
the sum of the measures' noise variances, each in its natural unit (a count in rows, a centred
sum and a mean in ``half`` and ``half / n``, a CDF in rows), with the unknown mean of a column
taken uniform over its bounds (``E[(mean - mid)^2] = half^2 / 3``): component ``j`` enters
with weight ``w_j``, and minimising ``sum_j w_j / e_j^2`` subject to ``sum_j e_j = epsilon``
gives (Lagrange) ``e_j = epsilon w_j^(1/3) / sum_k w_k^(1/3)``. The weights:

* ``count`` adds 1 to the count, ``count(col)`` 1 to ``count(col)``, ``count_distinct`` 1 to
  ``distinct``;
* ``mean(col)``: its error is ``(noise_S - (mean - mid) noise_N) / n``, so 1 to the centred sum
  and ``1/3`` to ``count(col)`` (measured apart, a mean alone would split 59.1% / 40.9%; it is
  measured together, below);
* ``sum(col)``: ``noise_S + mid noise_N``, so 1 to the centred sum and ``(mid / half)^2`` to
  ``count(col)``;
* ``variance(col)``, ``std(col)``: 1 to each of ``count(col)``, the centred sum and the centred
  square (a plain choice: the three enter the variance with comparable weight);
* ``quantile(col, ...)``: 1 to the column's CDF.

**The count and a centred sum measured together.** A row adds ``(1, v - mid)`` to (count,
centred sum): measured apart, the count's noise is calibrated to the 1 and the sum's to the
``half``, at their own epsilons. Measured together they are one vector ``(a, b) = (sum of
v - lo, sum of hi - v)``: a row adds ``v - lo`` and ``hi - v``, both ``>= 0`` and adding up to
``2 half`` exactly, so Laplace noise of scale ``2 half / e`` on both is ``e``-DP, and
``count = (a + b) / (2 half)``, ``centred sum = (a - b) / 2`` carry noise variances
``(2 / e)^2`` and ``(2 half / e)^2``: each as if measured alone at ``e / sqrt(2)`` with the
*whole* ``e`` (apart, they share it: at most ``e / 2`` each for an equal split). The pair is
one component of weight ``2 (w_count + w_sum)`` in the cube-root split; it is used, for each
column, when it lowers the summed variance, ``(2 (w_n + w_s))^(1/3) < w_n^(1/3) +
w_s^(1/3)`` (a mean alone: half the variance of the equal split, 0.55 of the separate
cube-root split). Here ``count`` is ``count(col)``: a row with ``col`` missing adds nothing;
for a column that is never missing (``never_missing``: its declared ``missing:`` maps a missing
value, so no row lacks it) ``count(col)`` is the table's ``count``, one component.

**The count from a pair, in parallel.** A table's ``count`` (every row) is ``count(col) +
missing(col)``, ``missing(col)`` the rows where ``col`` is missing. A row adds to the pair
``(a, b)`` (``col`` present) or to ``missing(col)`` (missing), never to both: measured at the
pair's ``e``, with Laplace noise of scale ``2 half / e`` on ``a`` and ``b`` and ``1 / e`` on
``missing(col)``, a row's privacy loss is ``2 half / (2 half / e) = e`` or ``1 / (1 / e) = e``
(parallel composition over disjoint rows; a unit's ``m`` rows, split between the two in any
way, lose at most ``m e`` against noise scaled by ``m``). So the count costs no epsilon of its
own; its noise variance is ``(4 + 2) / e^2``: weight 3 in the cube-root split, as if alone at
``e / sqrt(3)``. It is folded into the table's first pair when that lowers the summed variance,
``(w_pair + 3 w_count)^(1/3) < w_pair^(1/3) + w_count^(1/3)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from dppub.dp.errors import ConfigError

__all__ = ["MISSING_RULE", "Component", "Measure", "split_epsilon"]

MeasureKind = Literal[
    "count", "count_present", "count_distinct", "sum", "mean", "variance", "std", "quantile"
]

MISSING_RULE = (
    "count counts every row of the group (rows with a missing key are in no group); sum, "
    "mean, variance, std and quantile of a column use the rows where that column is present, "
    "and count(column) publishes how many those are"
)
"""How a table treats missing values (``release.json``, the report)."""


@dataclass(frozen=True, slots=True)
class Measure:
    """One measure of a table (``quantile`` carries its probabilities)."""

    kind: MeasureKind
    column: str | None = None
    at: tuple[float, ...] = ()

    def labels(self) -> list[str]:
        """Its ``measure`` values in ``answers.csv`` (one per probability for a quantile)."""
        if self.kind in ("count", "count_distinct"):
            return [self.kind]
        if self.kind == "count_present":
            return [f"count({self.column})"]
        if self.kind == "quantile":
            return [f"quantile({self.column}, {p:g})" for p in self.at]
        return [f"{self.kind}({self.column})"]


@dataclass(frozen=True, slots=True)
class Component:
    """One noisy vector over the table's cells, and its share of the table's epsilon."""

    kind: Literal["count", "centred_sum", "count_sum", "centred_square", "distinct", "cdf"]
    """``count_sum``: ``count(column)`` and ``column``'s centred sum measured together (module
    doc); ``count`` with a column: the rows where it is present."""
    column: str | None
    weight: float
    epsilon: float
    whole: bool = False
    """A pair whose column is never missing (its declared ``missing:`` maps a missing value):
    its count is the table's ``count`` as well as ``count(column)``."""
    rest: bool = False
    """A pair that also measures, at its epsilon, the rows where ``column`` is missing (its
    ``missing(column)``), so that ``count = count(column) + missing(column)`` (module doc)."""

    @property
    def name(self) -> str:
        if self.kind == "count_sum":
            whole = self.rest or self.whole
            return f"count{'' if whole else f'({self.column})'}+centred_sum({self.column})"
        return self.kind if self.column is None else f"{self.kind}({self.column})"

    def measures(self, kind: str, column: str | None = None) -> bool:
        """Whether this component gives the ``kind`` (``count`` or ``centred_sum``) vector."""
        if self.kind == "count_sum":
            if (self.rest or self.whole) and (kind, column) == ("count", None):
                return True
            return kind in ("count", "centred_sum") and column == self.column
        return (self.kind, self.column) == (kind, column)


def split_epsilon(
    measures: Sequence[Measure],
    bounds: Mapping[str, tuple[float, float]],
    epsilon: float,
    never_missing: frozenset[str] = frozenset(),
) -> tuple[Component, ...]:
    """The components ``measures`` need and their epsilons (module doc), in a fixed order:
    the count, then each column's count (or its count and centred sum together), centred sums,
    centred squares, the distinct units, then CDFs, each in the order of first use."""
    weights: dict[tuple[str, str | None], float] = {}
    spread: dict[str | None, None] = {}

    def add(kind: str, column: str | None, w: float) -> None:
        if kind == "count" and column in never_missing:
            column = None  # count(column) is the count itself
        weights[(kind, column)] = weights.get((kind, column), 0.0) + w

    for m in measures:
        if m.kind == "count":
            add("count", None, 1.0)
        elif m.kind == "count_present":
            add("count", m.column, 1.0)
        elif m.kind == "count_distinct":
            add("distinct", None, 1.0)
        elif m.kind in ("sum", "mean"):
            lo, hi = bounds[m.column or ""]
            add("centred_sum", m.column, 1.0)
            mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
            add("count", m.column, 1.0 / 3.0 if m.kind == "mean" else (mid / half) ** 2)
        elif m.kind in ("variance", "std"):
            spread.setdefault(m.column, None)  # once for a column's variance and std
        else:
            add("cdf", m.column, 1.0)
    for column in spread:
        for kind in ("count", "centred_sum", "centred_square"):
            add(kind, column, 1.0)
    if not weights:
        raise ConfigError("a table needs at least one measure")
    whole: str | None = None
    sums = [k for k in weights if k[0] == "centred_sum"]
    for key in sums:
        count = ("count", None if key[1] in never_missing else key[1])
        if count[1] is None and len(sums) > 1:
            continue  # the one count of several columns: measured alone
        w_n, w_s = weights.get(count, 0.0), weights[key]
        if w_n > 0 and (2.0 * (w_n + w_s)) ** (1.0 / 3.0) < w_n ** (1.0 / 3.0) + w_s ** (1.0 / 3.0):
            del weights[count], weights[key]
            weights[("count_sum", key[1])] = 2.0 * (w_n + w_s)
            whole = key[1] if count[1] is None else whole
    rest = _count_in_a_pair(weights)
    order = {"count": 0, "count_sum": 1, "centred_sum": 2, "centred_square": 3, "distinct": 4}
    order["cdf"] = 5
    # A zero weight (only sums of columns centred on 0: no count needed) is not measured.
    keys = sorted(
        (k for k in weights if weights[k] > 0), key=lambda k: (order[k[0]], k[1] is not None)
    )
    roots = [weights[k] ** (1.0 / 3.0) for k in keys]
    total = sum(roots)
    return tuple(
        Component(
            kind=k[0],  # type: ignore[arg-type]
            column=k[1],
            weight=weights[k],
            epsilon=epsilon * r / total,
            rest=k == ("count_sum", rest),
            whole=k == ("count_sum", whole),
        )
        for k, r in zip(keys, roots, strict=True)
    )


def _count_in_a_pair(weights: dict[tuple[str, str | None], float]) -> str | None:
    """Fold the count into the first pair when that lowers the summed variance (module doc):
    its column, or None."""
    w_c = weights.get(("count", None), 0.0)
    pair = next((k for k in weights if k[0] == "count_sum"), None)
    if pair is None or w_c <= 0:
        return None
    w_p = weights[pair]
    if not (w_p + 3.0 * w_c) ** (1.0 / 3.0) < w_p ** (1.0 / 3.0) + w_c ** (1.0 / 3.0):
        return None
    del weights[("count", None)]
    weights[pair] = w_p + 3.0 * w_c
    return pair[1]
