"""The globally optimal k-anonymous (optionally l-diverse) full-domain generalization.

:func:`search` runs the lattice search (:mod:`dp.anonymity.search`) on a table's base rows and
reports the chosen node; :func:`anonymize_counts` is the release's entry (distinct leaf-code rows
and their counts, from :mod:`dp.engine.folds.k_anonymous_table`), which then writes the released
table (:mod:`dp.anonymity.released_rows`). :func:`dp.reference.frame_anonymity.anonymize` is the
same on a frame. Record suppression follows ARX: every record of a class smaller than k (or
violating l) is removed, and a node is admissible only if that is at most ``floor(sigma * n)``
records.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.anonymity.classes import CodedTable, LDiversity, NodeClasses
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.anonymity.metrics import (
    ARX_METRICS,
    METRICS,
    MetricTables,
    RankBounds,
    class_size_summary,
    wsum,
)
from dppub.dp.anonymity.result import (
    Generalization,
    empty_generalization,
)
from dppub.dp.anonymity.search import Outcome, greedy, optimal
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.validation import check_probability

__all__ = [
    "EXACT_MAX_NODES",
    "EXACT_MAX_QIS",
    "Generalization",
    "anonymize_counts",
    "check_search",
    "search",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

EXACT_MAX_QIS = 10
"""Above this many QIs the search is a bounded greedy heuristic (reported in ``metrics``)."""
EXACT_MAX_NODES = 500_000
"""Above this lattice size, likewise."""


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


def check_search(
    k: object,
    max_suppression: float,
    metric: str,
    hierarchies: Mapping[str, Hierarchy],
    quasi_identifiers: Sequence[str] | None,
) -> tuple[int, float, dict[str, Hierarchy]]:
    k = _check_k(k)
    sigma = check_probability(max_suppression, name="max_suppression")
    if metric not in METRICS + ARX_METRICS:
        raise ConfigError(f"metric must be one of {list(METRICS + ARX_METRICS)}, got {metric!r}")
    qis = list(hierarchies) if quasi_identifiers is None else list(quasi_identifiers)
    for col in qis:
        if col not in hierarchies:
            raise ConfigError(f"quasi-identifier {col!r} has no hierarchy")
    if len(set(qis)) != len(qis):
        raise ConfigError(f"quasi_identifiers must be distinct, got {qis}")
    return k, sigma, {col: hierarchies[col] for col in qis}


def anonymize_counts(
    rows: IntArray,
    counts: IntArray,
    hierarchies: Mapping[str, Hierarchy],
    *,
    k: int,
    max_suppression: float,
    metric: str = "loss",
    suppress_if_impossible: bool = False,
) -> Generalization:
    """The search on distinct leaf-code rows and their counts (no records).

    ``rows`` and ``counts`` are what :func:`dp.engine.leaf_counts_stream` returns, so a table of
    any size is searched in memory bounded by its leaf domain. Given in first-appearance order
    (as :func:`dp.reference.frame_anonymity.anonymize` numbers its base rows), the chosen node and
    every metric equal those of that reference on the same records bit for bit; the caller writes
    the release (:func:`release_rows` per chunk) and finishes the report with the input's
    :class:`InputDigest`. No l-diversity here (it needs the sensitive values per base row).

    Raises:
        ConfigError: invalid k, sigma or metric.
        InputError: an empty table or no admissible node (unless ``suppress_if_impossible``).
    """
    started = time.perf_counter()
    k, sigma, hier = check_search(k, max_suppression, metric, hierarchies, None)
    table = CodedTable.from_counts(rows, counts, list(hier.values()))
    return search(
        table,
        hier,
        k=k,
        sigma=sigma,
        metric=metric,
        ldiv=None,
        started=started,
        suppress_if_impossible=suppress_if_impossible,
    )


def search(
    table: CodedTable,
    hier: Mapping[str, Hierarchy],
    *,
    k: int,
    sigma: float,
    metric: str,
    ldiv: tuple[str, LDiversity] | None,
    started: float,
    suppress_if_impossible: bool,
) -> Generalization:
    """Search the lattice of ``table`` and report the chosen node (see the module docstring)."""
    qis = list(hier)
    n = table.n
    if n == 0:
        if not suppress_if_impossible:
            raise InputError("the table to anonymize is empty")
        return empty_generalization(hier, k=k, sigma=sigma, metric=metric, started=started)
    tables = MetricTables.build(table)
    limit = math.floor(Fraction(repr(sigma)) * n)
    check = ldiv[1] if ldiv is not None else None
    sensitive = table.pair_value

    # Scores are floats, or tuples compared lexicographically for ARX's rank aggregate.
    rank = metric == "loss_rank"

    def evaluate(levels: tuple[int, ...]) -> tuple[int, Any]:
        nc = table.classes(levels, k, check)
        if nc.suppressed > limit:
            return nc.suppressed, None
        if rank:
            return nc.suppressed, tables.rank(levels, nc, table.counts)
        return nc.suppressed, tables.score(metric, levels, nc, table.counts)

    def refine(levels: list[int], bound: float, suppressed: int) -> Any:
        if rank:
            return tables.rank_refine(levels, suppressed)
        return tables.refine(metric, levels, bound, suppressed, k)

    heights = tuple(h.height for h in hier.values())
    size = math.prod(heights)
    exact = len(qis) <= EXACT_MAX_QIS and size <= EXACT_MAX_NODES
    hopeless = check is not None and sensitive is not None and check.l > len(np.unique(sensitive))
    outcome: Outcome[Any]
    if hopeless and limit < n:
        # No class can hold l distinct values (nor entropy >= log l) when the whole table has
        # fewer: every record would be suppressed. Say so without searching the lattice.
        outcome = Outcome(levels=None, score=None, checked=0, optimal=True)
    elif exact:
        bounds = _bounds(metric, table, tables)
        outcome = optimal(
            heights,
            evaluate,
            bounds,
            limit=limit,
            monotone=check is None or check.kind == "distinct",
            refine=refine,
            cutoff=bounds.cutoff if isinstance(bounds, RankBounds) else float,
        )
    else:
        outcome = greedy(heights, evaluate)[0]
    searched = time.perf_counter()
    admissible = outcome.levels is not None and outcome.score is not None
    if outcome.levels is not None and outcome.score is not None:
        best = outcome.levels
        score = float(outcome.score[0]) if rank else float(outcome.score)
        nc = table.classes(best, k, check)
    elif not suppress_if_impossible:
        lpart = f", l={check.l} ({check.kind})" if check is not None else ""
        raise InputError(
            f"no generalization satisfies k={k}{lpart} with at most {limit} suppressed records "
            f"(max_suppression={sigma}); raise max_suppression or lower k"
        )
    else:
        # Nothing satisfies k (n < k, or l-diversity is out of reach) within the limit: release
        # the top node with every record suppressed -- an empty table, never a refused run, so
        # one record more or less (n = k - 1 or k) does not change what the run does.
        best = tuple(h - 1 for h in heights)
        nc = table.classes(best, k, check)
        every = np.arange(len(nc.bad), dtype=nc.bad_rows.dtype)
        nc = replace(nc, bad=np.ones_like(nc.bad), bad_rows=every, suppressed=n)
        score = 1.0
    metrics = _report(table, tables, hier, best, nc, k=k, limit=limit)
    if rank and admissible:
        metrics["score_vector"] = list(outcome.score or ())
    metrics.update(
        metric=metric,
        score=score,
        k=k,
        max_suppression=sigma,
        l_diversity=None
        if check is None or ldiv is None
        else f"{check.kind}-{check.l} on {ldiv[0]!r}",
        search=(
            "optimal"
            if outcome.optimal
            else "heuristic (greedy descent from the top node; not proven optimal)"
        )
        if admissible
        else f"no node satisfies k with at most {limit} suppressed records: all suppressed",
        optimal=outcome.optimal,
        nodes_checked=outcome.checked,
        lattice_size=size,
        search_seconds=searched - started,
        input_sha256="",
        hierarchy_sha256={col: h.digest() for col, h in hier.items()},
        differentially_private=False,
    )
    return Generalization(
        levels=best,
        suppress=nc.bad,
        suppressed=nc.suppressed,
        score=score,
        metrics=metrics,
        qis=tuple(qis),
        started=started,
    )


def _bounds(
    metric: str, table: CodedTable, tables: MetricTables
) -> Callable[[IntArray], FloatArray]:
    """Lower bounds that never decrease along lattice edges.

    Loss and entropy: the exact unsuppressed score. DM and DM*: ``DM >= DM* >= DM*(m)`` for any
    finer node ``m``; we use the nodes that keep one attribute at its level and the rest at 0.
    """
    if metric == "loss_rank":
        return RankBounds.build(tables)
    if metric in ("loss", "entropy", "entropy_monotone"):
        return lambda nodes: tables.lower_bounds(metric, nodes)  # type: ignore[return-value]
    d = len(table.hierarchies)
    single = []
    for i, h in enumerate(table.hierarchies):
        per_level = []
        for lvl in range(h.height):
            node = tuple(lvl if j == i else 0 for j in range(d))
            nc = table.classes(node, 1, None)
            per_level.append(wsum(table.counts, nc.class_size))
        single.append(np.maximum.accumulate(np.array(per_level)))

    def bound(nodes: IntArray) -> FloatArray:
        out = np.zeros(len(nodes))
        for i, values in enumerate(single):
            out = np.maximum(out, values[nodes[:, i]])
        return out

    return bound


def _risk(sizes: FloatArray, records: float) -> dict[str, float]:
    # Prosecutor model: a record in class E is re-identified with probability 1/|E|.
    if len(sizes) == 0:
        return {"max": 0.0, "avg": 0.0}
    return {"max": float(1.0 / sizes.min()), "avg": float(len(sizes) / records)}


def _report(
    table: CodedTable,
    tables: MetricTables,
    hier: Mapping[str, Hierarchy],
    levels: Sequence[int],
    nc: NodeClasses,
    *,
    k: int,
    limit: int,
) -> dict[str, Any]:
    n = table.n
    good = ~nc.bad
    _, first = np.unique(nc.class_id[good], return_index=True)
    sizes = nc.class_size[good][first]
    released = n - nc.suppressed
    summary = tables.summary(levels, nc, table.counts)
    per_qi = tables.loss_per_qi(levels, nc, table.counts)
    cols = list(hier)
    return {
        "levels": {c: int(lvl) for c, lvl in zip(cols, levels, strict=True)},
        "labels_per_qi": {c: len(hier[c].labels(lvl)) for c, lvl in zip(cols, levels, strict=True)},
        "k_achieved": int(sizes.min()) if len(sizes) else 0,
        "records": n,
        "released_records": released,
        "suppressed": nc.suppressed,
        "suppression_rate": nc.suppressed / n if n else 0.0,
        "suppression_limit": limit,
        "class_size": class_size_summary(sizes, k),
        "avg_class_size": released / len(sizes) if len(sizes) else 0.0,
        # LeFevre et al. 2006: (records / classes) / k; 1.0 is ideal.
        "c_avg": released / len(sizes) / k if len(sizes) else 0.0,
        "loss": summary["loss"],
        "loss_per_qi": {c: float(x) for c, x in zip(cols, per_qi, strict=True)},
        "dm": summary["dm"],
        "dm_star": summary["dm_star"],
        "entropy": summary["entropy"],
        "prosecutor_risk_before": _risk(table.counts.astype(np.float64), n),
        "prosecutor_risk_after": _risk(sizes, released),
    }
