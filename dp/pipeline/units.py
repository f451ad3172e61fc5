"""What a declared privacy unit means for a release: its neighbours, its bound, its noise.

Without ``dataset.privacy_unit`` neighbours differ by one row. With it they differ by every row
of one unit; each release reads at most ``max_rows_per_unit`` rows of a unit (and a partitioned
release at most ``max_partitions_per_unit`` partitions of it), chosen by the data-independent
rule of :mod:`dp.engine.unit_bounding`.

The accounting is group privacy over the bound (Dwork & Roth 2014, Thm 2.2; for approximate DP
e.g. Vadhan 2017, Lemma 2.2): a mechanism that is ``(e, d)``-DP for one row is
``(m e, m e^((m-1) e) d)``-DP for ``m`` rows. So a release declared at a unit-level ``(epsilon,
delta)`` runs its mechanism at the row-level ``(epsilon / m, delta / (m e^((m-1) epsilon / m)))``
on the bounded rows: for Laplace noise this is exactly a noise scale ``m`` times larger, i.e. a
sensitivity ``m`` times the row sensitivity, which is what the manifest declares. Rows of one
unit spread over several partitions still total at most ``m``, so the same bound covers a
partitioned release's parallel composition. Regressions and k-means run this way
(:func:`unit_statement`). Workloads, tables and synthetic data instead calibrate at the unit
level: they are measured at the unit-level cost with ``m`` times the row sensitivity (the
bounded tables of two unit-neighbours differ by at most ``m`` rows). With Laplace noise the
result is the same; with Gaussian noise it is tighter than group privacy; AIM runs at the
unit-level rho with sensitivity ``m`` and states a row-level figure only as the conversion of
``rho / m^2`` (:func:`zcdp_unit_statement`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dppub.dp.budget import PrivacyCost
from dppub.dp.engine import TableSource
from dppub.dp.engine.row_filter import RowFilter
from dppub.dp.engine.unit_bounding import (
    Bounded,
    BoundedBackend,
    BoundingAggregate,
    UnitBound,
    UnitFilter,
)
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.synthetic.accounting import cdp_epsilon

if TYPE_CHECKING:
    from dppub.dp.pipeline.kinds.base import JSON

__all__ = [
    "Bounded",
    "Bounding",
    "bounded_source",
    "bounding_for",
    "row_level_cost",
    "unit_filters",
    "unit_statement",
    "zcdp_unit_statement",
]


def row_level_cost(cost: PrivacyCost, rows_per_unit: int) -> PrivacyCost:
    """The row-level cost whose group-privacy bound over ``rows_per_unit`` rows is ``cost``.

    >>> row_level_cost(PrivacyCost(epsilon=1.0), 4)
    PrivacyCost(epsilon=0.25, delta=0.0)
    """
    m = rows_per_unit
    if m == 1:
        return cost
    eps = cost.epsilon / m
    if cost.delta == 0.0:
        return PrivacyCost(epsilon=eps)
    # delta / (m e^((m-1) eps)), in logs: no overflow for a large epsilon
    return PrivacyCost(
        epsilon=eps, delta=math.exp(math.log(cost.delta) - math.log(m) - (m - 1) * eps)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounding:
    """A release's privacy unit: the neighbouring relation and, with a unit, its bound."""

    rows_per_unit: int = 1
    """``m``: at most this many rows of a unit are read (1 without a unit)."""
    unit: str | None = None
    """The unit column (None: neighbours differ by one row)."""
    max_partitions: int = 1
    partition: str | None = None
    """The partition column a partitioned release bounds per unit."""
    bounded: bool = True
    """False: neighbours differ by all rows of one unit, and the release reads them all (it
    counts each unit once whatever its rows: the rows-per-unit histogram)."""
    where: RowFilter | None = None
    """A table's ``where:`` filter: only the rows it keeps are bounded (and read), so a unit's
    bound is spent on the rows the release uses; removing a unit still changes only its rows."""

    @property
    def neighbours(self) -> str:
        """The neighbouring relation, in words (manifest, report, ledger, audit)."""
        if self.unit is None:
            return "one row"
        if not self.bounded:
            return f"all rows of one {self.unit} (all read; each {self.unit} counted once)"
        text = f"all rows of one {self.unit} (at most {self.rows_per_unit} read"
        if self.partition is not None:
            text += f", in at most {self.max_partitions} {self.partition} partition(s)"
        return text + ")"

    def cost(self, unit_level: PrivacyCost) -> PrivacyCost:
        """What the mechanism runs at, on the bounded rows."""
        return row_level_cost(unit_level, self.rows_per_unit)

    @property
    def key(self) -> tuple[str | None, ...]:
        """Releases with the same key share one row selection (an unbounded one: none)."""
        if not self.bounded:
            return None, None, None
        return self.unit, self.partition, None if self.where is None else self.where.text


def bounding_for(
    cfg: PipelineConfig, partition: str | None = None, where: RowFilter | None = None
) -> Bounding:
    """The bounding a release of ``cfg`` gets (``partition``: its partition column;
    ``where``: its row filter, applied before the bound)."""
    ds = cfg.dataset
    if ds.privacy_unit is None:
        return Bounding(where=where)
    return Bounding(
        rows_per_unit=ds.max_rows_per_unit or 1,
        unit=ds.privacy_unit,
        max_partitions=ds.max_partitions_per_unit,
        partition=partition,
        where=where,
    )


def unit_filters(
    boundings: list[Bounding], source: TableSource, columns: Sequence[str]
) -> dict[tuple[str | None, ...], UnitFilter]:
    """One bounding pass over ``source`` for every distinct row selection the releases need;
    ``columns``: the run's columns, whose values key each row's priority."""
    from dppub.dp.engine import Fused

    wanted: dict[tuple[str | None, ...], UnitBound] = {}
    for b in boundings:
        if b.unit is not None and b.bounded and b.key not in wanted:
            wanted[b.key] = UnitBound(
                column=b.unit,
                max_rows=b.rows_per_unit,
                max_partitions=b.max_partitions,
                partition=b.partition,
                content=tuple(columns),
                where=b.where,
            )
    if not wanted:
        return {}
    parts = tuple(BoundingAggregate(bound) for bound in wanted.values())
    done = source.backend.run(Fused(parts), source.path, source.schema)
    return dict(zip(wanted, done, strict=True))


def bounded_source(source: TableSource, unit_filter: UnitFilter | None) -> TableSource:
    """``source`` as a bounded release reads it."""
    if unit_filter is None:
        return source
    backend = BoundedBackend(inner=source.backend, filter=unit_filter)
    return TableSource(path=source.path, schema=source.schema, backend=backend)


def unit_statement(bounding: Bounding, cost: PrivacyCost) -> dict[str, JSON]:
    """What a release states about its guarantee in its own files (``model.json``, the
    tables' metadata, ``release.json``): the unit-level ``cost`` for its neighbours and, with
    a unit, the unit, its bound and the row-level cost its mechanism ran at (group privacy
    over the bound gives ``cost``; the model's sensitivities and noise scales are per row)."""
    out: dict[str, JSON] = {"epsilon": cost.epsilon, "delta": cost.delta}
    if bounding.unit is None:
        return out  # the estimators' own statement ("add/remove one record") holds
    out["neighbours"] = "add/remove " + bounding.neighbours
    row = bounding.cost(cost)
    out["privacy_unit"] = {
        "column": bounding.unit,
        "max_rows_per_unit": bounding.rows_per_unit,
        "max_partitions_per_unit": bounding.max_partitions,
        "row_level_epsilon": row.epsilon,
        "row_level_delta": row.delta,
        "note": (
            f"the mechanism runs at the row-level cost on at most {bounding.rows_per_unit} "
            "rows per unit (its sensitivities and noise scales are per row); group privacy "
            "over them gives epsilon and delta for one unit"
        ),
    }
    return out


def zcdp_unit_statement(bounding: Bounding, cost: PrivacyCost, rho: float) -> dict[str, JSON]:
    """What a release calibrated at the unit level under rho-zCDP states (synthetic data: AIM
    runs at the unit-level ``rho`` with sensitivity ``m``, never at a row-level cost). Its
    row-level figure is only the zCDP conversion of ``rho / m^2`` (a row moves each measured
    count by 1, not ``m``), at the unit-level delta -- not ``epsilon / m``, which AIM never
    ran at and which group privacy does not give back.

    >>> b = Bounding(rows_per_unit=3, unit="zip")
    >>> s = zcdp_unit_statement(b, PrivacyCost(epsilon=1.0, delta=1e-9), 0.014973)
    >>> row = s["privacy_unit"]
    >>> round(row["row_level_rho"], 6), round(row["row_level_epsilon"], 4)
    (0.001664, 0.3191)
    """
    out: dict[str, JSON] = {"epsilon": cost.epsilon, "delta": cost.delta, "zcdp_rho": rho}
    if bounding.unit is None:
        return out
    m = bounding.rows_per_unit
    row_rho = rho / (m * m)
    out["neighbours"] = "add/remove " + bounding.neighbours
    out["privacy_unit"] = {
        "column": bounding.unit,
        "max_rows_per_unit": m,
        "max_partitions_per_unit": bounding.max_partitions,
        "sensitivity": float(m),
        "row_level_rho": row_rho,
        "row_level_epsilon": cdp_epsilon(row_rho, cost.delta),
        "row_level_delta": cost.delta,
        "note": (
            f"the mechanism runs at the unit-level rho = {rho:.6g} with sensitivity {m} (all "
            f"the rows one unit may contribute); for one row it is rho / {m}^2-zCDP, whose "
            "conversion gives the row-level epsilon at the same delta"
        ),
    }
    return out
