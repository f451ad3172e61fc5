"""A declared-keys table's plan: its groups (the cells of its ``by`` keys), bounds from the
declared columns, its partition and unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from dppub.dp.axes import Axis, numeric_axis
from dppub.dp.engine.folds.table_sums import TableSumsAggregate
from dppub.dp.engine.row_filter import RowFilter, parse_filter
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import declared_columns, declared_hierarchy, histogram_axis
from dppub.dp.pipeline.kinds.base import (
    JSON,
)
from dppub.dp.pipeline.kinds.tables.item import QUANTILE_BINS, KeyModel, QuantileModel, TableModel
from dppub.dp.pipeline.units import Bounding
from dppub.dp.schema import DROP
from dppub.dp.tables.joint import (
    Joint,
)
from dppub.dp.tables.keys import KeyRule
from dppub.dp.tables.margins import STAR, Dimension
from dppub.dp.tables.office import Presentation
from dppub.dp.tables.split import Component, Measure
from dppub.dp.tables.spread import distinct_bound
from dppub.dp.tables.table import (
    TableDesign,
)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TableSpec:
    """What publishing a table needs, known before any data is read."""

    design: TableDesign
    axes: tuple[Axis, ...]
    grids: tuple[Axis, ...]
    """One fine grid per quantile column, in the order of the design's CDF components."""
    keys: str
    """The key policy (``declared`` or ``private``)."""
    selection: KeyRule | None = None
    """``keys: private``: the selection rule (its labels are a placeholder until selected)."""
    joint: Joint | None = None
    """``joint: <group>``: the group this table is measured with."""
    presentation: Presentation = field(default_factory=Presentation)
    """How its rows are flagged and withheld (``quality:``, ``suppress:``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Groups:
    """A table's groups: the cells' axes (one per key column, its finest level), their
    dimensions (with any coarser levels of a nested hierarchy) and the published key names."""

    axes: tuple[Axis, ...]
    dims: tuple[Dimension, ...]
    keys: tuple[str, ...]


def table_groups(cfg: PipelineConfig, item: TableModel) -> Groups:
    """The table's groups under its key policy (``keys: private`` plugs in here)."""
    if item.key_policy != "declared":
        raise ConfigError(f"table {item.name!r}: keys: private has no declared groups")
    by_column: dict[str, list[KeyModel]] = {}
    for k in item.key_models():
        by_column.setdefault(k.column, []).append(k)
    axes: list[Axis] = []
    dims: list[Dimension] = []
    keys: list[str] = []
    for column, models in by_column.items():
        if len(models) == 1:
            k = models[0]
            axis = histogram_axis(cfg, item.name, column, bins=k.bins, level=k.level)
            axes.append(axis)
            dims.append(Dimension(axis.labels))
            keys.append(column)
            continue
        levels = sorted(k.level or 0 for k in models)
        if any(k.bins is not None for k in models) or len(set(levels)) != len(levels):
            raise ConfigError(
                f"table {item.name!r}: {column!r} is a key twice; give distinct hierarchy "
                "levels ({column, level}) to nest them"
            )
        axis, dim = _nested(cfg, item, column, levels)
        axes.append(axis)
        dims.append(dim)
        keys.extend(f"{column}_level{level}" for level in levels)
    for axis, dim in zip(axes, dims, strict=True):
        if STAR in dim.labels or any(STAR in level for level in dim.coarser):
            raise ConfigError(
                f"table {item.name!r}: {axis.column!r} has a group named {STAR!r}, the mark "
                "of a summed-out key in answers.csv; rename that category or level label"
            )
    return Groups(axes=tuple(axes), dims=tuple(dims), keys=tuple(keys))


def _nested(
    cfg: PipelineConfig, item: TableModel, column: str, levels: list[int]
) -> tuple[Axis, Dimension]:
    """A column's finest level as the cells' axis, ordered so that each coarser level's
    children are contiguous, and the parent of each cell at every coarser level."""
    if column not in cfg.hierarchies:
        raise ConfigError(f"table {item.name!r}: {column!r} has levels but no hierarchy")
    hierarchy = declared_hierarchy(cfg, column)
    leaves = pd.Series(hierarchy.labels(0))
    at = {lv: hierarchy.generalize(leaves, lv).astype(str).tolist() for lv in levels}
    fine, coarser = levels[0], levels[1:]
    parent = {lv: dict(zip(at[fine], at[lv], strict=True)) for lv in coarser}
    rank = {lv: {v: i for i, v in enumerate(hierarchy.labels(lv))} for lv in levels}
    labels = sorted(
        hierarchy.labels(fine),
        key=lambda v: (*(rank[lv][parent[lv][v]] for lv in reversed(coarser)), rank[fine][v]),
    )
    axis = Axis(column=column, labels=tuple(labels), hierarchy=hierarchy, level=fine)
    dim = Dimension(tuple(labels), tuple(tuple(parent[lv][v] for v in labels) for lv in coarser))
    return axis, dim


def column_bounds(cfg: PipelineConfig, item: TableModel, column: str) -> tuple[float, float]:
    declared_columns(cfg, [column])
    spec = cfg.table_schema[column]
    if not spec.is_numeric or spec.bounds is None:
        raise ConfigError(
            f"table {item.name!r}: measure column {column!r} must be numeric with declared bounds"
        )
    lo, hi = float(spec.bounds[0]), float(spec.bounds[1])
    if not hi > lo:
        raise ConfigError(f"table {item.name!r}: {column!r} has bounds [{lo:g}, {hi:g}]")
    return lo, hi


def column_grid(cfg: PipelineConfig, item: TableModel, column: str) -> Axis:
    """A quantile column's fine grid over its declared bounds."""
    spec = cfg.table_schema[column]
    chosen = next(
        (m.bins for m in item.measures if isinstance(m, QuantileModel) and m.quantile == column),
        None,
    )
    lo, hi = column_bounds(cfg, item, column)
    if chosen is None and spec.type == "int" and hi - lo + 1 <= QUANTILE_BINS:
        return numeric_axis(spec)
    return numeric_axis(spec, bins=chosen or QUANTILE_BINS)


def per_integer(cfg: PipelineConfig, column: str, grid: Axis) -> bool:
    """Whether an int column's grid has one bin per integer (each bin holds one value), from
    its size alone: never one value per integer of the bounds (they may span 2^64)."""
    spec = cfg.table_schema[column]
    if spec.type != "int" or spec.bounds is None or grid.edges is None:
        return False
    lo, hi = spec.bounds
    return grid.size == int(hi) - int(lo) + 1 and grid.edges[1] - grid.edges[0] == 1.0


def table_partition(cfg: PipelineConfig, axes: Sequence[Axis]) -> str | None:
    """The column a unit's groups are bounded on: one text key (else the rows bound suffices:
    a unit's rows, at most ``m`` in all, bound every table's sensitivity)."""
    if len(axes) == 1 and cfg.table_schema[axes[0].column].type in ("category", "string"):
        return axes[0].column
    return None


def never_missing(cfg: PipelineConfig, columns: Sequence[str]) -> frozenset[str]:
    """The measured numeric columns no row lacks: their declared ``missing:`` maps a missing
    value (a text column's unknown values may still leave a row without it: never assumed)."""
    schema = cfg.table_schema
    return frozenset(c for c in columns if schema[c].is_numeric and schema[c].missing != DROP)


def measure_bounds(
    cfg: PipelineConfig, item: TableModel, measures: Sequence[Measure]
) -> dict[str, tuple[float, float]]:
    """The declared bounds of every column a measure sums, averages, spreads or ranks (a
    ``{count: col}`` column needs none: any declared column can be counted)."""
    declared_columns(cfg, [m.column for m in measures if m.column is not None])
    wanted = [m.column for m in measures if m.column is not None and m.kind != "count_present"]
    return {c: column_bounds(cfg, item, c) for c in dict.fromkeys(wanted)}


def table_filter(cfg: PipelineConfig, item: TableModel) -> RowFilter | None:
    """The table's ``where:`` filter, checked against the declared columns (one line if not)."""
    if item.where is None:
        return None
    try:
        return parse_filter(item.where, cfg.table_schema)
    except ConfigError as exc:
        raise ConfigError(f"table {item.name!r}: {exc}") from None


def distinct_group(cfg: PipelineConfig, item: TableModel, bounding: Bounding) -> int:
    """``count_distinct``'s sensitivity: the groups one unit's bounded rows reach
    (:func:`dp.tables.spread.distinct_bound`; 1 without the measure). Refused without a
    privacy unit (there are no units to count)."""
    if "count_distinct" not in item.measures:
        return 1
    if bounding.unit is None:
        raise ConfigError(
            f"table {item.name!r}: count_distinct counts privacy units; declare "
            "dataset.privacy_unit (or count rows with count)"
        )
    return distinct_bound(
        rows_per_unit=bounding.rows_per_unit, max_partitions=bounding.max_partitions
    )


def table_sums(
    components: Sequence[Component],
    bounds: Mapping[str, tuple[float, float]],
    axes: tuple[Axis, ...],
    grids: tuple[Axis, ...],
    bounding: Bounding,
) -> TableSumsAggregate:
    """The fold of what ``components`` read (:mod:`dp.engine.folds.table_sums`)."""

    def wanted(*kinds: str) -> list[str]:
        return list(dict.fromkeys(c.column for c in components if c.kind in kinds and c.column))

    return TableSumsAggregate(
        axes=axes,
        bounds=tuple((c, *bounds[c]) for c in wanted("centred_sum", "count_sum")),
        grids=grids,
        counted=tuple(wanted("count", "count_sum")),
        squared=tuple((c, *bounds[c]) for c in wanted("centred_square")),
        unit=bounding.unit if any(c.kind == "distinct" for c in components) else None,
        max_groups=bounding.max_partitions,
        where=bounding.where,
    )


def unit_statement(bounding: Bounding, joint: Joint | None = None) -> dict[str, JSON] | None:
    """What ``release.json`` says of the privacy unit (None without one)."""
    if bounding.unit is None:
        return None
    at = "the table's epsilon" if joint is None else f"the joint group's epsilon {joint.epsilon:g}"
    out: dict[str, JSON] = {
        "column": bounding.unit,
        "max_rows_per_unit": bounding.rows_per_unit,
        "note": (
            "every component's sensitivity and noise scale are for all the rows one unit may "
            f"contribute ({bounding.rows_per_unit}), at {at}"
        ),
    }
    if bounding.partition is not None:
        out["max_partitions_per_unit"] = bounding.max_partitions
    return out


def counted_rows(bounding: Bounding) -> str | None:
    """What a count counts under the privacy unit (``release.json``'s ``counted_rows``, the
    report beside the table; None without a unit)."""
    if bounding.unit is None:
        return None
    return (
        f"Under the privacy unit {bounding.unit!r}, a count counts the rows contribution "
        f"bounding kept: at most {bounding.rows_per_unit} rows of each unit"
        + (
            f" in at most {bounding.max_partitions} groups"
            if bounding.partition is not None
            else ""
        )
        + (", chosen among the rows the where: filter keeps" if bounding.where else "")
        + "; a unit's rows beyond the bound are left out, chosen at random (count_distinct "
        f"counts units, not rows, each in at most {bounding.max_partitions} groups)"
    )
