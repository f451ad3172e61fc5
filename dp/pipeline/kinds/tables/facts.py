"""What ``dppub plan`` shows of a planned table (:meth:`TableKind.describe`): its groups, key
policy and filter, each measure's epsilon and expected error; a joint group's, each table's.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dppub.dp import matrix
from dppub.dp.pipeline.kinds.base import ReleasePlan
from dppub.dp.pipeline.kinds.plan_facts import PlanFacts
from dppub.dp.pipeline.kinds.release_file import Stated
from dppub.dp.pipeline.kinds.tables.planning import TableSpec
from dppub.dp.tables.quantiles import joint_rank_errors, quantile_method
from dppub.dp.tables.table import TableDesign, table_strategy

__all__ = [
    "JointGroupFacts",
    "JointTableFacts",
    "KeySelectionFacts",
    "MeasureFacts",
    "TableFacts",
    "expected_errors",
    "table_facts",
]


class MeasureFacts(Stated):
    """One measure's share of epsilon and its expected noise error, before any data
    (:func:`dp.pipeline.kinds.tables.result.expected_errors`)."""

    measure: str
    """Its label (``mean(income)``, ``quantile(hours, 0.5/0.9)``)."""
    epsilon: float
    """The epsilon of the components it is read off."""
    expected_rmse: float
    """Its expected RMSE per published row, as a number (jointly, for a joint table)."""
    error: str
    """The same in words, with its unit."""
    separate_rmse: float | None = None
    """A joint table's: its expected RMSE had it been measured alone."""


class KeySelectionFacts(Stated):
    """``keys: private``: the rule selecting the published keys
    (:meth:`dp.tables.keys.KeyRule.describe`)."""

    rule: str
    """``threshold``, ``gaussian`` or ``policy``."""
    epsilon: float
    delta: float
    max_partitions_per_unit: int
    sigma: float | None = None
    """The Gaussian rules' noise."""
    threshold: float | None = None
    """The Gaussian rules' threshold."""
    weight_grid: int | None = None
    """The Gaussian rule's weight grid."""
    cutoff: float | None = None
    """The policy rule's weight cutoff."""
    l2_sensitivity: float | None = None
    """The policy rule's declared L2 sensitivity."""
    always_released_from_units: int | None = None
    """The threshold rule's: from this many units a key is always released."""


class TableFacts(PlanFacts):
    """A planned table, as ``dppub plan`` shows it."""

    groups: int | Literal["private"]
    """Its declared groups (cells), or ``private``: selected from the data."""
    keys: str
    """The key policy (``declared`` or ``private``)."""
    selection: KeySelectionFacts | None = None
    """``keys: private``: the selection rule."""
    where: str | None = None
    """Its ``where:`` filter, as written."""
    measures: tuple[MeasureFacts, ...]


class JointTableFacts(Stated):
    """One table of a joint group, as ``dppub plan`` shows it: its own epsilon (what the
    ledger charges it) and its facts, each measure's error measured jointly beside alone."""

    name: str
    epsilon: float
    facts: TableFacts


class JointGroupFacts(PlanFacts):
    """A joint group planned as one release (:mod:`dp.pipeline.kinds.tables.group`)."""

    group: str
    strategy: str
    """The group's one measurement: its tables' strategies, stacked."""
    tables: tuple[JointTableFacts, ...]


def table_facts(plan: ReleasePlan[TableSpec]) -> TableFacts:
    """What ``dppub plan`` shows of one planned table."""
    spec, where = plan.spec, plan.bounding.where
    return TableFacts(
        groups="private" if spec.keys == "private" else math.prod(a.size for a in spec.axes),
        keys=spec.keys,
        selection=None
        if spec.selection is None
        else KeySelectionFacts.model_validate(spec.selection.describe()),
        where=None if where is None else where.text,
        measures=expected_errors(spec.design),
    )


def expected_errors(design: TableDesign) -> tuple[MeasureFacts, ...]:
    """Each measure's epsilon and expected noise error, before any data (``dppub plan``):
    per published row, the least-squares RMSE of its components (a mean's for a group of
    ``n`` rows whose mean is uniform over the bounds, as the split assumes, times ``n``; a
    quantile's in rows of rank): ``expected_rmse`` as a number, ``error`` in words."""
    m = design.group
    workload = design.rows().workload()
    strategy = table_strategy(design)

    def rmse(kind: str, column: str | None = None) -> tuple[float, float]:
        c = next((c for c in design.components if c.measures(kind, column)), None)
        if c is None:
            return 0.0, 0.0
        # a count and a centred sum measured together: each as if alone at epsilon / sqrt(2)
        # (the count from a pair and its missing rows: as if alone at epsilon / sqrt(3))
        alone = 3.0 if c.rest and column is None else 2.0 if c.kind == "count_sum" else 1.0
        eps = c.epsilon / math.sqrt(alone)
        # Laplace noise scales as m / eps: the RMSE at epsilon 1 scaled (no floor on eps / m,
        # which no mechanism runs at)
        group = design.distinct_group if kind == "distinct" else m
        return c.epsilon, group / eps * float(matrix.expected_rmse(workload, strategy, 1.0))

    out: list[MeasureFacts] = []
    for measure in design.measures:
        label, column = measure.labels()[0], measure.column or ""
        eps_n, count = rmse("count", measure.column if measure.kind != "count" else None)
        if measure.kind in ("count", "count_present", "count_distinct"):
            eps, value = rmse("distinct") if measure.kind == "count_distinct" else (eps_n, count)
            error = f"RMSE {value:.3g} " + ("units" if measure.kind == "count_distinct" else "rows")
        elif measure.kind in ("variance", "std"):
            eps, unit = rmse("centred_sum", column)
            eps_q, squares = rmse("centred_square", column)
            lo, hi = design.bounds[column]
            h2 = ((hi - lo) / 2.0) ** 2
            # the delta method (dp.tables.spread) for a centred mean uniform over the bounds
            value = math.hypot(
                h2 / 2.0 * squares, 2.0 * h2 / math.sqrt(3.0) * unit, h2 / 2.0 * count
            )
            eps += eps_q + (0.0 if eps_n == eps else eps_n)
            error = f"RMSE about {value:.4g} / n of the variance for a group of n rows"
            if measure.kind == "std":
                error += " (a std's: that / (2 std))"
        elif measure.kind == "quantile":
            cdf = design.component("cdf", column)
            assert cdf is not None
            eps, bins = cdf.epsilon, len(design.edges[column]) - 1
            label = f"quantile({column}, {'/'.join(f'{p:g}' for p in measure.at)})"
            if design.margins:
                rank = joint_rank_errors(workload, strategy, bins, eps, m)[0]
                value = float(np.sqrt(np.mean(rank**2)))
                error = (
                    f"rank RMSE {value:.3g} rows at the worst CDF point (of a group's n; the "
                    f"worst row {rank.max():.3g}), hierarchical CDF of cells and margins jointly"
                )
            else:
                method, value = quantile_method(bins, measure.at, eps, m)
                how = "exponential mechanism" if method == "exponential" else "hierarchical CDF"
                error = f"rank RMSE {value:.3g} rows (of a group's n), {how}"
        else:
            eps, unit = rmse("centred_sum", column)
            lo, hi = design.bounds[column]
            mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
            if measure.kind == "sum":
                value = math.hypot(half * unit, mid * count)
                error = f"RMSE {value:.4g}"
            else:
                value = math.hypot(half * unit, half * count / math.sqrt(3.0))
                error = f"RMSE about {value:.4g} / n for a group of n rows"
        out.append(MeasureFacts(measure=label, epsilon=eps, expected_rmse=value, error=error))
    return tuple(out)
