"""Utility metrics of a full-domain generalization and the disclosure-review summary.

Metrics (lower is better), following the definitions used by ARX (Prasser et al. 2014, "A
benchmark of globally-optimal anonymization methods for biomedical data"):

- ``loss``: ARX "Loss". Per attribute, the mean over records of GenILoss
  ``(|leaves(g)| - 1) / (|D| - 1)`` (Iyengar 2002), a suppressed record costing 1; attributes are
  aggregated by the geometric mean ``prod_i (1 + loss_i)^(1/d) - 1``. ``|D|`` and ``|leaves(g)|``
  count rows of the hierarchy, as ARX's domain shares do (:func:`genil_loss`).
- ``dm``: discernibility (Bayardo & Agrawal 2005): ``sum |E|^2`` over released classes plus
  ``n`` per suppressed record.
- ``dm_star``: ARX's monotone DM*: ``sum |E|^2`` over all classes, suppressed ones included.
- ``entropy``: non-uniform entropy (Gionis & Tassa 2009), in bits: per attribute and record
  ``-log2(f(leaf) / f(group))``; a suppressed record costs ``-log2(f(leaf) / n)``.

Two ARX configurations are also offered, to reproduce ARX's own results (``ARX_METRICS``):

- ``loss_rank``: ARX's default ``Metric.createLossMetric()`` -- the same per-attribute Loss
  (gs-factor 0.5: a suppressed record costs 1), each value rounded to 10 decimals as ARX does,
  aggregated by ARX's ``RANK`` function: the vector sorted in descending order, compared
  lexicographically (minimize the worst attribute's loss first). Its score is that tuple.
- ``entropy_monotone``: ARX's ``Metric.createEntropyMetric(true)`` (``MetricMDNUEntropy*``):
  non-uniform entropy of the generalization over *all* records, suppression ignored, so the
  score is monotone along lattice edges.

ARX's non-monotonic entropy (``createEntropyMetric(false)``) charges a suppressed record its
generalization cost plus ``-log2(c / S)``, ``c`` the count of its generalized value among the
``S`` suppressed records; ``entropy`` charges ``-log2(f(leaf) / n)`` instead (suppression as
generalization to the root). The two agree without suppression.

Without suppression, ``loss`` and ``entropy`` of a node are functions of per-attribute, per-level
totals computed once: that exact value, known for every node without counting its classes, is the
monotone lower bound the search orders and prunes by. :meth:`MetricTables.refine` tightens it for
a node known to suppress at least some number of records.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.anonymity.classes import CodedTable, NodeClasses
from dppub.dp.anonymity.hierarchy import Hierarchy

__all__ = [
    "ARX_METRICS",
    "METRICS",
    "MetricTables",
    "RankBounds",
    "class_size_summary",
    "genil_loss",
    "wsum",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

METRICS = ("loss", "dm", "dm_star", "entropy")
ARX_METRICS = ("loss_rank", "entropy_monotone")
"""Metrics reproducing ARX configurations (module docstring); accepted by the search."""
_ARX_DIGITS = 10  # ARX rounds every per-attribute loss to 10 decimals before comparing


def wsum(weights: npt.NDArray[np.floating[Any] | np.integer[Any]], values: FloatArray) -> float:
    """``sum(weights * values)`` without BLAS: a 2-core box shared with other jobs makes
    OpenBLAS's thread pool orders of magnitude slower than a plain reduction here."""
    return float(np.multiply(weights, values).sum())


def genil_loss(h: Hierarchy, level: int) -> FloatArray:
    """GenILoss of each label of ``level``: ``(|leaves(g)| - 1) / (|D| - 1)`` (Iyengar 2002).

    As in ARX's ``DomainShareMaterialized``: ``|D|`` is the number of rows of the hierarchy and
    ``|leaves(g)|`` the rows labelled ``g`` at ``level``. Leaves absent from the data count; so
    does every copy of a row the hierarchy repeats, even at level 0 (a leaf listed twice costs
    ``1 / (|D| - 1)`` ungeneralized). ARX sums ``count * |leaves(g)| / |D|`` over the classes
    and rescales the total from ``[n / |D|, n]`` to ``[0, 1]``: per record, this value.

    >>> genil_loss(Hierarchy.from_levels({"a": ["ab"], "b": ["ab"], "c": ["c"]}), 1).tolist()
    [0.5, 0.0]
    """
    return (h.group_sizes(level) - 1.0) / max(h.domain_size - 1, 1)


def _geometric(per_qi: Sequence[FloatArray]) -> FloatArray:
    # Elementwise loop (not np.prod over an axis) so that one node and a batch of nodes round
    # identically: the bound of an unsuppressed node must equal its score bit for bit.
    acc = np.ones_like(per_qi[0])
    for col in per_qi:
        acc = acc * (1.0 + col)
    out: FloatArray = acc ** (1.0 / len(per_qi)) - 1.0
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricTables:
    """Per attribute and level: per-base-row costs and their record totals."""

    loss_row: tuple[tuple[FloatArray, ...], ...]
    loss_total: tuple[FloatArray, ...]
    ent_row: tuple[tuple[FloatArray, ...], ...]
    ent_total: tuple[FloatArray, ...]
    ent_top: tuple[FloatArray, ...]
    loss_max: tuple[FloatArray, ...]
    """Per level: the largest per-record loss (a suppressed record adds at least 1 - this)."""
    ent_gap: tuple[FloatArray, ...]
    """Per level: the smallest extra entropy cost of suppressing one record."""
    n: int

    @classmethod
    def build(cls, table: CodedTable) -> MetricTables:
        """Precompute every per-level constant once (O(levels * base rows))."""
        w = table.counts.astype(np.float64)
        loss_row, loss_total, ent_row, ent_total, ent_top = [], [], [], [], []
        loss_max: list[FloatArray] = []
        ent_gap: list[FloatArray] = []
        for i, h in enumerate(table.hierarchies):
            leaf_freq = np.bincount(table.rows[:, i], weights=w, minlength=len(h.leaves))
            f_leaf = leaf_freq[table.rows[:, i]]
            lr, er = [], []
            for lvl in range(h.height):
                g = table.group[i][lvl]
                lr.append(genil_loss(h, lvl)[g])
                er.append(-np.log2(f_leaf / np.bincount(g, weights=w)[g]))
            loss_row.append(tuple(lr))
            ent_row.append(tuple(er))
            # Running max keeps the per-level totals monotone despite float summation order.
            loss_total.append(np.maximum.accumulate(np.array([wsum(w, x) for x in lr])))
            ent_total.append(np.maximum.accumulate(np.array([wsum(w, x) for x in er])))
            ent_top.append(-np.log2(f_leaf / max(table.n, 1)))
            loss_max.append(np.array([x.max() for x in lr]))
            ent_gap.append(np.array([max(float((ent_top[-1] - x).min()), 0.0) for x in er]))
        return cls(
            loss_row=tuple(loss_row),
            loss_total=tuple(loss_total),
            ent_row=tuple(ent_row),
            ent_total=tuple(ent_total),
            ent_top=tuple(ent_top),
            loss_max=tuple(loss_max),
            ent_gap=tuple(ent_gap),
            n=table.n,
        )

    def lower_bounds(self, metric: str, nodes: IntArray) -> FloatArray | None:
        """Exact score of each node ``(N, d)`` if nothing were suppressed; ``None`` for DM/DM*."""
        if metric == "loss":
            return _geometric([t[nodes[:, i]] / self.n for i, t in enumerate(self.loss_total)])
        if metric in ("entropy", "entropy_monotone"):
            out = np.zeros(len(nodes))
            for i, t in enumerate(self.ent_total):
                out = out + t[nodes[:, i]]
            return out
        return None

    def refine(
        self, metric: str, levels: list[int], bound: float, suppressed: int, k: int
    ) -> float:
        """A lower bound on the score of a node known to suppress at least ``suppressed`` records.

        Loss: each suppressed record adds at least ``1 - max loss`` per QI. Entropy: at least the
        smallest suppression gap. DM: ``n`` per suppressed record and at least ``k`` per released
        one. The tiny relative slack keeps rounding from ever pruning an exact tie.
        """
        if metric == "loss":
            per = [
                np.array(
                    [
                        (self.loss_total[i][lvl] + suppressed * (1.0 - self.loss_max[i][lvl]))
                        / self.n
                    ]
                )
                for i, lvl in enumerate(levels)
            ]
            out = float(_geometric(per)[0])
        elif metric == "entropy":
            out = bound + suppressed * sum(
                float(self.ent_gap[i][lvl]) for i, lvl in enumerate(levels)
            )
        elif metric == "dm":
            out = max(bound, float(self.n * suppressed + min(k, self.n) * (self.n - suppressed)))
        else:  # DM* and entropy_monotone do not depend on suppression beyond the bound
            return bound
        return out - 1e-12 * abs(out)

    def loss_per_qi(self, levels: Sequence[int], nc: NodeClasses, counts: IntArray) -> FloatArray:
        """Per-QI GenILoss with suppressed records costing 1."""
        if nc.suppressed == 0:
            return np.array(
                [t[lvl] / self.n for t, lvl in zip(self.loss_total, levels, strict=True)]
            )
        rows = nc.bad_rows
        w = counts[rows].astype(np.float64)
        per = [
            (self.loss_total[i][lvl] + wsum(w, 1.0 - self.loss_row[i][lvl][rows])) / self.n
            for i, lvl in enumerate(levels)
        ]
        return np.array(per, dtype=np.float64)

    def rank_refine(self, levels: list[int], suppressed: int) -> tuple[float, ...]:
        """``loss_rank`` bound of a node suppressing at least ``suppressed`` records (as in
        :meth:`refine`; the slack keeps float rounding from ever exceeding the true value)."""
        per = [
            (self.loss_total[i][lvl] + suppressed * (1.0 - self.loss_max[i][lvl])) / self.n
            for i, lvl in enumerate(levels)
        ]
        return _rank(np.array(per) - 1e-12)

    def rank(self, levels: Sequence[int], nc: NodeClasses, counts: IntArray) -> tuple[float, ...]:
        """ARX's ``RANK`` aggregate of the per-QI Loss: rounded, sorted in descending order."""
        return _rank(self.loss_per_qi(levels, nc, counts))

    def score(self, metric: str, levels: Sequence[int], nc: NodeClasses, counts: IntArray) -> float:
        """The metric's value for a node whose classes are ``nc`` (``loss_rank``: the worst
        attribute's loss, the first component of :meth:`rank`)."""
        if metric == "loss_rank":
            return self.rank(levels, nc, counts)[0]
        if metric == "entropy_monotone":
            return float(np.sum([t[lvl] for t, lvl in zip(self.ent_total, levels, strict=True)]))
        if metric == "loss":
            per = self.loss_per_qi(levels, nc, counts)
            return float(_geometric([np.array([x]) for x in per])[0])
        if metric == "entropy":
            rows = nc.bad_rows
            w = counts[rows].astype(np.float64)
            total = np.zeros(1)
            for i, lvl in enumerate(levels):
                extra = wsum(w, self.ent_top[i][rows] - self.ent_row[i][lvl][rows])
                total = total + (self.ent_total[i][lvl] + extra)
            return float(total[0])
        weighted = counts * nc.class_size  # sum over a class of |E| is |E|^2
        if metric == "dm_star":
            return float(weighted.sum())
        return float(weighted[~nc.bad].sum()) + float(self.n) * nc.suppressed

    def summary(self, levels: Sequence[int], nc: NodeClasses, counts: IntArray) -> dict[str, float]:
        """All four metrics of one node (for the report)."""
        return {metric: self.score(metric, levels, nc, counts) for metric in METRICS}


def _rank(per_qi: FloatArray) -> tuple[float, ...]:
    values = np.maximum(np.round(per_qi, _ARX_DIGITS), 0.0)
    return tuple(float(x) for x in np.sort(values)[::-1])


@dataclass(frozen=True, slots=True)
class RankBounds:
    """Monotone bounds for ``loss_rank`` on the float scale the search needs.

    A node's bound is the rank vector of its unsuppressed per-QI losses; sorting preserves
    elementwise dominance, so these vectors never decrease (lexicographically) along lattice edges
    and never exceed the node's score. The search gets each vector's ordinal among the distinct
    bound vectors, and :meth:`cutoff` maps a score to "how many bound vectors lie below it".
    """

    tables: MetricTables
    sorted_bounds: list[tuple[float, ...]]

    @classmethod
    def build(cls, tables: MetricTables) -> RankBounds:
        return cls(tables, [])

    def __call__(self, nodes: IntArray) -> FloatArray:
        per = np.stack(
            [t[nodes[:, i]] / self.tables.n for i, t in enumerate(self.tables.loss_total)], axis=1
        )
        vectors = -np.sort(-np.maximum(np.round(per, _ARX_DIGITS), 0.0), axis=1)
        order = np.lexsort(vectors.T[::-1])  # primary key: the first (largest) component
        ranked = vectors[order]
        new = np.r_[True, np.any(ranked[1:] != ranked[:-1], axis=1)]
        ordinal = np.empty(len(nodes))
        ordinal[order] = np.cumsum(new) - 1
        self.sorted_bounds[:] = [tuple(float(x) for x in row) for row in ranked[new]]
        return ordinal

    def cutoff(self, score: tuple[float, ...]) -> float:
        return float(bisect.bisect_left(self.sorted_bounds, score))


def class_size_summary(sizes: FloatArray, k: int) -> dict[str, object]:
    """Distribution of released class sizes: quantiles and a histogram in multiples of k."""
    if len(sizes) == 0:
        return {"classes": 0}
    q = np.quantile(sizes, [0.0, 0.25, 0.5, 0.75, 1.0])
    edges = [k, 2 * k, 5 * k, 10 * k]
    hist = {
        f"{k}-{2 * k - 1}": int(np.count_nonzero(sizes < 2 * k)),
        f"{2 * k}-{5 * k - 1}": int(np.count_nonzero((sizes >= edges[1]) & (sizes < edges[2]))),
        f"{5 * k}-{10 * k - 1}": int(np.count_nonzero((sizes >= edges[2]) & (sizes < edges[3]))),
        f">={10 * k}": int(np.count_nonzero(sizes >= edges[3])),
    }
    return {
        "classes": len(sizes),
        "min": int(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "max": int(q[4]),
        "mean": float(sizes.mean()),
        "histogram": hist,
    }
