"""A table's typed result: the public facts ``release.json`` states about it (split, bounds,
key policy, intervals, rounding, precision, quality).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pydantic import Field, JsonValue

from dppub.dp import matrix
from dppub.dp.pipeline.kinds.base import JSON, Result
from dppub.dp.pipeline.kinds.release_file import Stated
from dppub.dp.tables.office import Presentation
from dppub.dp.tables.precision import PRECISION_RULE
from dppub.dp.tables.quantiles import joint_rank_errors, quantile_method
from dppub.dp.tables.rounding import GAP, NODE_LIMIT, sum_base
from dppub.dp.tables.table import (
    TableDesign,
    table_strategy,
)

SPLIT_RULE = (
    "minimises the sum of the measures' noise variances: each component gets epsilon in "
    "proportion to the cube root of its weight; a mean weighs 1 on its centred sum and 1/3 on "
    "its column's count (the rows where it is present); a column's count and centred sum are "
    "one component (weight twice theirs) measured together as the sums of v - lo and hi - v "
    "when that lowers the variance (a mean alone: all of epsilon, each as if alone at "
    "epsilon / sqrt(2)); a variance or std weighs 1 on its column's count, centred sum and "
    "centred square"
)


INTERVAL_METHOD = (
    "noise only (not clamping or sampling): exact least-squares noise variances of counts and "
    "centred sums with the Laplace-safe multiplier; sums and means combine them (a mean by the "
    "delta method, a variance too, a std the square root of its variance's interval); "
    "quantiles read off a hierarchical CDF invert its noise band, those drawn "
    "by the exponential mechanism have none (empty; their rank bound is in components)"
)


class JointFacts(Stated):
    """``joint: <group>``: what a table estimated jointly with others states
    (:func:`dp.pipeline.kinds.tables.joint_planning.joint_facts`)."""

    group: str
    tables: tuple[str, ...]
    """The group's tables, this one among them."""
    epsilon: float
    """The group's epsilon (the sum of its tables')."""
    epsilons: dict[str, float]
    """Each table's own epsilon, as the ledger charges it."""
    strategy: str
    guarantee: str
    """What is proven of the group, and of this table alone, in words."""


class TableResult(Result):
    """A published table's public account: its ``release.json`` details. Its
    ``privacy_unit`` is the whole unit statement (:func:`dp.pipeline.units.unit_statement`)."""

    key_columns: tuple[str, ...] = Field(alias="keys")
    """The key columns (``keys`` in the file; not an attribute ``keys``, which Prefect, walking
    a task's parameters, would take for a mapping's)."""
    key_policy: str
    dimensions: int
    """Key columns of the cells (a nested hierarchy's levels are one)."""
    groups: int
    rows: int
    measures: tuple[str, ...]
    split: dict[str, float]
    split_rule: str
    components: dict[str, dict[str, JsonValue]]
    """Each measured component's epsilon, sensitivity and noise (numbers and strings)."""
    bounds: dict[str, list[float]]
    margins: bool
    rounding: str
    """``none``, or the controlled rounding: each rounded measure's base."""
    interval_method: str
    interval_level: float
    key_selection: dict[str, JsonValue] | None = None
    """``keys: private``: the rule, its (epsilon, delta) and the keys it released."""
    joint: JointFacts | None = None
    """``joint: <group>``: the group, its tables, its epsilon and the guarantee."""
    precision: str = PRECISION_RULE
    """How many digits each published value carries (post-processing)."""
    quality: str = ""
    """What the ``quality`` column says and from what."""
    suppression: str | None = None
    """``suppress:``: which cells are withheld."""
    missing_values: str = ""
    """How missing values are counted and measured (:data:`dp.tables.split.MISSING_RULE`)."""
    where: str | None = None
    """``where:``: the row filter, as written."""
    counted_rows: str | None = None
    """Under a privacy unit: which rows a count counts (those contribution bounding kept)."""


class JointTable(Stated):
    """One table of a joint group, as the group's ``release.json`` states it: its name (its
    folder within the group's) and what it would state published alone (with ``joint``)."""

    name: str
    table: TableResult


class JointResult(Result):
    """A joint group of tables published as one release: the group's ``release.json``
    details (:mod:`dp.pipeline.kinds.tables.group`)."""

    group: str
    epsilon: float
    """The group's epsilon: the sum of its tables' (each charged its own in the ledger)."""
    strategy: str
    guarantee: str
    """What is proven of the group, and of a table alone, in words."""
    tables: tuple[JointTable, ...]
    """Its tables in config order, each published in ``<group>/<table>/``."""


def rounding_note(design: TableDesign, answers: pd.DataFrame) -> str:
    """What ``release.json`` says of ``round:``: each rounded measure's base (a sum's from its
    standard errors, public: :func:`dp.tables.rounding.sum_base`)."""
    if not design.integer:
        return "none"
    bases: list[str] = []
    for m in design.measures:
        label = m.labels()[0]
        if m.kind == "count":
            bases.append(f"{label} to multiples of {design.base}")
        elif m.kind == "sum":
            se = answers.loc[answers["measure"] == label, "std_error"].to_numpy(np.float64)
            base = sum_base(design.base, se) if len(se) else float(design.base)
            bases.append(f"{label} to multiples of {base:g}")
    return (
        "controlled rounding (post-processing): every cell rounded down or up to a multiple "
        "of its base by an integer program (HiGHS) for the smallest L1 distance of all "
        f"published rows to the released ones (it stops within {GAP:.0%} of it or after "
        f"{NODE_LIMIT} nodes, never worse than rounding each cell alone); every margin is the "
        "sum of its published cells: " + "; ".join(bases)
    )


def suppression_note(presentation: Presentation) -> str | None:
    below = presentation.suppress_below
    if below is None:
        return None
    return (
        f"cells whose published count is below {below} are withheld (blank numbers, quality "
        "'suppressed'; the row stays); margins are kept. Post-processing: the guarantee "
        "holds without it, and a withheld cell can be derived from its margin and siblings"
    )


def expected_errors(design: TableDesign) -> list[dict[str, JSON]]:
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

    out: list[dict[str, JSON]] = []
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
        out.append({"measure": label, "epsilon": eps, "expected_rmse": value, "error": error})
    return out
