"""Release kind tables (section ``tables:``): counts, sums, means and quantiles by group.

Each item is one table: its groups are the cells of its ``by`` keys (declared categories, int
values, bins of a float column, or a hierarchy level), its measures are read off noisy
components whose epsilon split minimises their noise (:mod:`dp.tables.split`), and with
``margins: true`` every sub-total is estimated jointly with the cells by the matrix mechanism
(:mod:`dp.tables.linear`), so cells add up exactly to every margin; ``round: integer`` (or
``{base: N}``) makes counts and sums multiples of the base that still add up
(:mod:`dp.tables.rounding`). Bounds come from
the declared columns only (values are clamped on read). The exact per-group counts, centred
fixed-point sums and the quantile columns' fine histograms are folded in the run's one shared
scan (:mod:`dp.engine.table_sums`: one aggregate, so every measure sees the same rows).

Key policy: ``keys: declared`` (the default) publishes every declared group, present in the
data or not. ``keys: private`` (one ``by`` column, e.g. a ``type: string`` one) publishes only
groups present in the data, selected under ``(epsilon_select, delta)`` by
:mod:`dp.tables.keys` from the per-key unit counts and weights
(:mod:`dp.engine.key_weights`), with ``epsilon_select = epsilon / (1 + measures)``; the
measures share the rest and are read off per-key exact sums (:mod:`dp.engine.keyed_sums`),
all in the same shared scan and on the same rows (those with all the table's columns).

Joint tables: declared-key tables naming the same ``joint`` group are measured once over their
finest cells and each publishes its rows of the one estimate (:mod:`dp.tables.joint`); the
ledger records every member's draw before the group's one draw (``ReleasePlan.joint``).

Published: ``answers.parquet`` and ``answers.csv`` (one column per key, ``*`` where a margin
sums it out, then ``measure``, ``answer``, ``std_error``, ``ci_low``, ``ci_high``, ``quality``),
every value rounded to the digits its noise supports, flagged and, with ``suppress:``, small
cells withheld (:mod:`dp.tables.office`); the same values wide in ``answers_wide.csv`` and
``answers.xlsx`` (:mod:`dp.tables.wide`, :mod:`dp.tables.workbook`); and the split, the bounds,
the key policy, the interval method and the rounding, precision and quality rules in
``release.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from dppub.dp import matrix
from dppub.dp.axes import Axis, numeric_axis
from dppub.dp.budget import PlannedCost, PrivacyCost
from dppub.dp.engine import TableSource
from dppub.dp.engine.key_weights import KeyWeightsAggregate
from dppub.dp.engine.keyed_sums import KeyedSums, KeyedSumsAggregate
from dppub.dp.engine.table_sums import GroupSums, TableSumsAggregate
from dppub.dp.engine.unit_bounding import UnitBound
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.reconstruct import check_reconstruction
from dppub.dp.pipeline.config import Cost, Flag, Integer, Model, Name, Number, PipelineConfig
from dppub.dp.pipeline.domains import declared_columns, declared_hierarchy, histogram_axis
from dppub.dp.pipeline.kinds.base import (
    JSON,
    Executed,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
    as_float,
    as_int,
    as_list,
    as_object,
    as_object_or_none,
    as_str,
    as_strs,
    scan_one,
)
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_TABLE_ANSWERS, check_at_most
from dppub.dp.pipeline.units import Bounding, bounding_for
from dppub.dp.publication import Staging
from dppub.dp.tables.joint import (
    MAX_JOINT_CELLS,
    Joint,
    Member,
    finest_axes,
    joint_group,
    measure_group,
    member_rows,
    row_variances,
)
from dppub.dp.tables.keys import KeyRule, KeyWeights, key_rule, select_keys, selection_budget
from dppub.dp.tables.margins import STAR, Dimension, published_rows
from dppub.dp.tables.office import OfficeTable, Presentation, office_table
from dppub.dp.tables.precision import PRECISION_RULE
from dppub.dp.tables.quality import CAUTION, UNRELIABLE, quality_rule
from dppub.dp.tables.quantiles import joint_rank_errors, quantile_method
from dppub.dp.tables.rounding import GAP, MAX_ROUNDED_CELLS, NODE_LIMIT, sum_base
from dppub.dp.tables.split import Measure, split_epsilon
from dppub.dp.tables.table import (
    INTERVAL_LEVEL,
    TableDesign,
    TableRelease,
    component_facts,
    release_table,
    table_mechanism,
    table_strategy,
)
from dppub.dp.tables.wide import wide_blocks, wide_csv
from dppub.dp.tables.workbook import write_workbook
from dppub.dp.validation import MIN_EPSILON

if TYPE_CHECKING:
    from dppub.dp.pipeline.html.sections import Section

__all__ = ["TableKind", "TableModel", "TableResult", "TableSpec"]

QUANTILE_BINS = 1024
"""A quantile column's grid by default: one bin per integer of an int column with at most
this many values, else this many equal-width bins over the declared bounds."""


class KeyModel(Model):
    """One ``by`` key: a column (categories, int values, ``bins`` of a float) or a level."""

    column: str = Field(min_length=1)
    level: Integer | None = Field(default=None, ge=0)
    bins: Integer | None = Field(default=None, ge=1, le=MAX_DOMAIN_CELLS)


class SumModel(Model):
    sum: str = Field(min_length=1)


class MeanModel(Model):
    mean: str = Field(min_length=1)


class QuantileModel(Model):
    quantile: str = Field(min_length=1)
    at: list[Number] = Field(min_length=1, max_length=99)
    bins: Integer | None = Field(default=None, ge=2, le=65536)
    """The fine grid (default :data:`QUANTILE_BINS`)."""

    @field_validator("at")
    @classmethod
    def _probabilities(cls, at: list[float]) -> list[float]:
        bad = [p for p in at if not 0.0 < p < 1.0]
        if bad:
            raise ValueError(f"quantile probabilities must lie in (0, 1), got {bad}")
        return at


MeasureModel = Literal["count"] | SumModel | MeanModel | QuantileModel
_MEASURE_MODELS: dict[str, type[Model]] = {
    "sum": SumModel,
    "mean": MeanModel,
    "quantile": QuantileModel,
}


MAX_BASE = 1_000_000_000
"""The largest ``round: {base: N}``."""


class RoundModel(Model):
    """``round: {base: b}``: counts and sums as multiples of ``b`` that still add up."""

    base: Integer = Field(ge=1, le=MAX_BASE)


class QualityModel(Model):
    """``quality:``: the relative standard errors above which a value is flagged."""

    caution: Number = Field(default=CAUTION, gt=0)
    unreliable: Number = Field(default=UNRELIABLE, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> QualityModel:
        if not self.caution < self.unreliable:
            raise ValueError(
                f"quality: caution ({self.caution:g}) must be below unreliable "
                f"({self.unreliable:g})"
            )
        return self


class SuppressModel(Model):
    """``suppress: {below: N}``: withhold cells whose published count is below ``N``."""

    below: Integer = Field(ge=1)


class TableModel(Cost):
    """One ``tables:`` item (module doc)."""

    name: Name
    by: list[str | KeyModel] = Field(min_length=1, max_length=8)
    measures: list[MeasureModel] = Field(min_length=1)
    margins: Flag = False
    round: Literal["none", "integer"] | RoundModel = "none"
    """Controlled rounding of counts and sums (:mod:`dp.tables.rounding`)."""
    quality: QualityModel = QualityModel()
    suppress: SuppressModel | None = None
    # Not a field named ``keys``: Prefect walks a pydantic model with ``dict(model)``, which calls
    # ``model.keys()`` -- a str there (every table run failed with "'str' object is not callable").
    key_policy: Literal["declared", "private"] = Field(default="declared", alias="keys")
    joint: Name | None = None
    """Tables naming the same group are measured once, together (:mod:`dp.tables.joint`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("measures", mode="before")
    @classmethod
    def _each_measure(cls, value: object) -> object:
        """A mapping measure checked against the model its key names, so a refusal says why
        (the union's error named its first alternative: "Input should be 'count'")."""
        if not isinstance(value, list):
            return value
        out: list[object] = []
        for i, m in enumerate(value):
            kind = next((k for k in _MEASURE_MODELS if isinstance(m, dict) and k in m), None)
            if kind is None:
                out.append(m)
                continue
            try:
                out.append(_MEASURE_MODELS[kind].model_validate(m))
            except ValidationError as exc:
                first = exc.errors()[0]
                if first["type"] == "extra_forbidden":  # the loader names it and what is allowed
                    out.append(m)
                    continue
                where = ".".join(str(p) for p in first["loc"])
                reason = str(first["msg"]).removeprefix("Value error, ")
                raise ValueError(f"measure {i} ({kind}): {where}: {reason}") from None
        return out

    @field_validator("round", mode="before")
    @classmethod
    def _round(cls, value: object) -> object:
        """One clear message for every wrong ``round:`` (not one per form it could take)."""
        base = value.get("base") if isinstance(value, dict) and set(value) == {"base"} else None
        if value in ("none", "integer") or (
            isinstance(base, int) and not isinstance(base, bool) and 1 <= base <= MAX_BASE
        ):
            return value
        raise ValueError(
            f"round must be integer, none or {{base: N}} with a whole N from 1 to {MAX_BASE:,}, "
            f"got {value!r}"
        )

    @model_validator(mode="after")
    def _options(self) -> TableModel:
        if self.key_policy == "declared" and self.delta > 0:
            raise ValueError("delta is spent only by keys: private; declared keys use epsilon")
        if self.key_policy == "private" and self.delta <= 0:
            raise ValueError(f"keys: private needs a delta > 0, got {self.delta!r}")
        if self.key_policy == "private" and self.joint is not None:
            raise ValueError(f"joint: {self.joint} is for declared keys, not keys: private")
        if self.suppress is not None and "count" not in self.measures:
            raise ValueError(
                f"suppress: {{below: {self.suppress.below}}} withholds cells by their published "
                "count; add count to the measures"
            )
        if self.rounding_base is not None and not any(
            m == "count" or isinstance(m, SumModel) for m in self.measures
        ):
            raise ValueError(
                f"round: {self.round_label} rounds counts and sums, and this table has neither "
                "(means and quantiles are rounded to their precision anyway)"
            )
        return self

    @property
    def rounding_base(self) -> int | None:
        """The controlled rounding's base (None: no ``round:``)."""
        if isinstance(self.round, RoundModel):
            return self.round.base
        return 1 if self.round == "integer" else None

    @property
    def round_label(self) -> str:
        """``round:`` as written: ``integer``, ``{base: 5}`` or ``none``."""
        return self.round if isinstance(self.round, str) else f"{{base: {self.round.base}}}"

    def presentation(self) -> Presentation:
        return Presentation(
            caution=self.quality.caution,
            unreliable=self.quality.unreliable,
            suppress_below=None if self.suppress is None else self.suppress.below,
        )

    def key_models(self) -> list[KeyModel]:
        return [KeyModel(column=k) if isinstance(k, str) else k for k in self.by]

    def measure_list(self) -> tuple[Measure, ...]:
        out: list[Measure] = []
        for m in self.measures:
            if m == "count":
                out.append(Measure("count"))
            elif isinstance(m, SumModel):
                out.append(Measure("sum", m.sum))
            elif isinstance(m, MeanModel):
                out.append(Measure("mean", m.mean))
            elif isinstance(m, QuantileModel):
                out.append(Measure("quantile", m.quantile, tuple(m.at)))
        if len(set(out)) != len(out):
            raise ConfigError(f"table {self.name!r}: a measure is listed twice")
        return tuple(out)


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


def _bounds(cfg: PipelineConfig, item: TableModel, column: str) -> tuple[float, float]:
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


def _grid(cfg: PipelineConfig, item: TableModel, column: str) -> Axis:
    """A quantile column's fine grid over its declared bounds."""
    spec = cfg.table_schema[column]
    chosen = next(
        (m.bins for m in item.measures if isinstance(m, QuantileModel) and m.quantile == column),
        None,
    )
    lo, hi = _bounds(cfg, item, column)
    if chosen is None and spec.type == "int" and hi - lo + 1 <= QUANTILE_BINS:
        return numeric_axis(spec)
    return numeric_axis(spec, bins=chosen or QUANTILE_BINS)


def _per_integer(cfg: PipelineConfig, column: str, grid: Axis) -> bool:
    """Whether an int column's grid has one bin per integer (each bin holds one value), from
    its size alone: never one value per integer of the bounds (they may span 2^64)."""
    spec = cfg.table_schema[column]
    if spec.type != "int" or spec.bounds is None or grid.edges is None:
        return False
    lo, hi = spec.bounds
    return grid.size == int(hi) - int(lo) + 1 and grid.edges[1] - grid.edges[0] == 1.0


def _partition(cfg: PipelineConfig, axes: Sequence[Axis]) -> str | None:
    """The column a unit's groups are bounded on: one text key (else the rows bound suffices:
    a unit's rows, at most ``m`` in all, bound every table's sensitivity)."""
    if len(axes) == 1 and cfg.table_schema[axes[0].column].type in ("category", "string"):
        return axes[0].column
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateExact:
    """A ``keys: private`` table's exact aggregates: per-key weights and sums (never published)."""

    keys: KeyWeights
    sums: KeyedSums


class TableKind(ReleaseKind[TableModel, TableSpec, GroupSums | PrivateExact]):
    """See the module docstring."""

    section = "tables"
    label = "table"
    many = True
    model = TableModel

    def plan(self, cfg: PipelineConfig, item: TableModel) -> ReleasePlan[TableSpec]:
        if item.key_policy == "private":
            return _plan_private(cfg, item)
        groups = table_groups(cfg, item)
        axes = groups.axes
        measures = item.measure_list()
        columns = [m.column for m in measures if m.column is not None]
        bounds = {c: _bounds(cfg, item, c) for c in columns}
        shape = tuple(a.size for a in axes)
        cells = math.prod(shape)
        check_at_most(f"table {item.name!r}: the groups", cells, MAX_DOMAIN_CELLS)
        answers = cells * sum(len(m.labels()) for m in measures)
        check_at_most(f"table {item.name!r}: groups x measures", answers, MAX_TABLE_ANSWERS)
        quantiled = [m.column for m in measures if m.kind == "quantile" and m.column is not None]
        if len(set(quantiled)) != len(quantiled):
            raise ConfigError(f"table {item.name!r}: give all of a column's quantiles in one 'at'")
        if item.rounding_base is not None:
            check_at_most(f"table {item.name!r}: the rounded cells", cells, MAX_ROUNDED_CELLS)
        check_reconstruction(published_rows(groups.dims, item.margins).workload(), "nonneg-l1")
        grids = tuple(_grid(cfg, item, c) for c in quantiled)
        for g in grids:
            check_at_most(f"table {item.name!r}: groups x bins", cells * g.size, MAX_DOMAIN_CELLS)
        bounding = bounding_for(cfg, _partition(cfg, axes))
        joint = None
        if item.joint is not None:
            joint, bounding = _joint_group(cfg, item, bounds)
        design = TableDesign(
            keys=groups.keys,
            dims=groups.dims,
            measures=measures,
            components=split_epsilon(measures, bounds, item.epsilon),
            bounds=bounds,
            edges={c: g.edges or () for c, g in zip(quantiled, grids, strict=True)},
            integer_grids=frozenset(
                c for c, g in zip(quantiled, grids, strict=True) if _per_integer(cfg, c, g)
            ),
            margins=item.margins,
            integer=item.rounding_base is not None,
            base=item.rounding_base or 1,
            group=bounding.rows_per_unit,
        )
        # a joint group's components are at the sum of its members' epsilons: above these
        _check_floor(f"table {item.name!r}", item.epsilon, _runs_at(design))
        return ReleasePlan(
            name=item.name,
            kind=self.label,
            mechanism=table_mechanism(design),
            cost=item.cost,
            is_dp=True,
            bounding=bounding,
            columns=declared_columns(
                cfg, [*(a.column for a in (joint.axes if joint else axes)), *columns]
            ),
            joint=() if joint is None else _joint_costs(joint),
            spec=TableSpec(
                design=design,
                axes=axes,
                grids=grids,
                keys=item.key_policy,
                joint=joint,
                presentation=item.presentation(),
            ),
            facts={"groups": cells, "keys": item.key_policy},
        )

    def scan(self, plan: ReleasePlan[TableSpec]) -> Scan[GroupSums | PrivateExact]:
        spec = plan.spec
        if spec.selection is not None:
            return _scan_private(plan)
        bounds = tuple(
            (c.column, *spec.design.bounds[c.column])
            for c in spec.design.components
            if c.kind in ("centred_sum", "count_sum") and c.column is not None
        )
        axes = spec.axes if spec.joint is None else spec.joint.axes
        return scan_one(TableSumsAggregate(axes=axes, bounds=bounds, grids=spec.grids))

    def describe(self, plan: ReleasePlan[TableSpec]) -> dict[str, JSON]:
        measures = expected_errors(plan.spec.design)
        joint = plan.spec.joint
        if joint is None:
            return {**plan.facts, "measures": measures}
        together, alone = row_variances(joint, joint.index)
        ratio = math.sqrt(float(np.mean(together)) / float(np.mean(alone)))
        for m in measures:
            separately = as_float(m["expected_rmse"])
            m["separate_rmse"], m["expected_rmse"] = separately, separately * ratio
            m["error"] = f"{m['error']} separately; jointly {ratio:.3g} x that"
        return {**plan.facts, "measures": measures, "joint": _joint_facts(joint)}

    def plan_text(self, described: Mapping[str, JSON]) -> str:
        lines = [f"  {described['groups']} groups, keys {described['keys']}"]
        if "selection" in described:
            rule = as_object(described["selection"])
            lines[0] = (
                f"  groups selected from the data (keys private: {rule['rule']} rule at "
                f"epsilon {as_float(rule['epsilon']):.4g}, delta {as_float(rule['delta']):.3g})"
            )
        if "joint" in described:
            joint = as_object(described["joint"])
            tables = ", ".join(as_strs(joint["tables"]))
            lines.append(
                f"    estimated jointly (group {joint['group']}: {tables}; epsilon "
                f"{as_float(joint['epsilon']):.4g} together)"
            )
        for measure in as_list(described["measures"]):
            m = as_object(measure)
            lines.append(
                f"    {m['measure']}: epsilon {as_float(m['epsilon']):.4g}, expected {m['error']}"
            )
        return "\n".join(lines)

    def execute(
        self,
        plan: ReleasePlan[TableSpec],
        exact: GroupSums | PrivateExact,
        data: TableSource,
        out: Staging,
    ) -> Executed:
        design = plan.spec.design
        selection = None
        if isinstance(exact, PrivateExact):
            design, exact, selection = _select(plan.spec, exact)
        joint = plan.spec.joint
        if design.shape == (0,):  # no key selected: nothing to measure, an empty table
            released = _no_groups(design)
        elif joint is not None:
            sums = exact
            estimates = out.shared(
                f"table-{joint.group}", lambda: measure_group(joint, sums.counts, sums.centred)
            )
            rows = member_rows(joint, estimates)
            measured = (rows, component_facts(joint.components, rows))
            released = release_table(design, (), {}, {}, measured=measured)
        else:
            released = release_table(design, exact.counts, exact.centred, exact.histograms)
        published = office_table(released.answers, design, plan.spec.presentation)
        result = TableResult(
            keys=design.keys,
            key_policy=plan.spec.keys,
            dimensions=len(design.dims),
            groups=int(np.prod(design.shape)),
            rows=len(released.answers),
            measures=tuple(label for m in design.measures for label in m.labels()),
            split={c.name: c.epsilon for c in (design if joint is None else joint).components},
            split_rule=SPLIT_RULE,
            components=cast("Mapping[str, JSON]", released.facts),  # numbers and strings only
            bounds={c: list(b) for c, b in design.bounds.items()},
            margins=design.margins,
            rounding=_rounding(design, released.answers),
            interval_method=INTERVAL_METHOD,
            interval_level=INTERVAL_LEVEL,
            privacy_unit=_unit(plan.bounding, joint),
            key_selection=selection,
            joint=None if joint is None else _joint_facts(joint),
            precision=PRECISION_RULE,
            quality=quality_rule(plan.spec.presentation.caution, plan.spec.presentation.unreliable),
            suppression=_suppression(plan.spec.presentation),
        )
        _write(out, plan, design, published, result)
        # One number says the sensitivity only for a one-component table (release.json has each).
        sens = [float(f["sensitivity"]) for f in released.facts.values()]  # type: ignore[index]
        return Executed.of(result, sensitivity=sens[0] if len(sens) == 1 else None)

    def guarantee(self, summary: ReleaseSummary) -> str:
        joint = as_object_or_none(summary.details.get("joint"))
        if joint is None:
            return super().guarantee(summary)
        return (
            f"differential privacy, jointly: epsilon {as_float(joint['epsilon']):g} with "
            f"{', '.join(t for t in as_strs(joint['tables']) if t != summary.name)}"
        )

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = TableResult.from_json(summary.details)
        split = ", ".join(f"{k} {v:.4g}" for k, v in r.split.items())
        extra = ""
        if r.margins:
            extra += " Every margin down to the grand total is estimated jointly with the cells."
        if r.rounding != "none":
            extra += (
                " Counts and sums are rounded under control: every margin is the sum of its "
                "published cells (`release.json` states each base)."
            )
        if r.joint is not None:
            extra += f" {r.joint['guarantee']}"
        withheld = f" {r.suppression[0].upper()}{r.suppression[1:]}." if r.suppression else ""
        return [
            f"A table of {', '.join(r.measures)} by {', '.join(f'`{k}`' for k in r.keys)} "
            f"({r.groups} groups, keys {r.key_policy}, {r.rows} rows in `answers.csv`; wide "
            f"in `answers_wide.csv` and `answers.xlsx`).{extra}",
            f"Epsilon split: {split} (it minimises the measures' summed noise variance; "
            "`release.json` states the rule).",
            f"{100 * r.interval_level:g}% intervals: {r.interval_method}.",
            "Every value carries only the digits its noise supports (rounded to the power of "
            "ten at or below a tenth of its standard error, counts to integers; post-processing, "
            f"no privacy cost). `quality`: {r.quality}.{withheld}",
        ]

    def plot(self, summary: ReleaseSummary, folder: Path) -> Section:
        from dppub.dp.pipeline.html.table_plots import table_plot  # matplotlib: only for a report

        section: Section = table_plot(summary, TableResult.from_json(summary.details), folder)
        return section


SPLIT_RULE = (
    "minimises the sum of the measures' noise variances: each component gets epsilon in "
    "proportion to the cube root of its weight; a mean weighs 1 on its centred sum and 1/3 on "
    "the count; with one sum or mean column, the count and its centred sum are one component "
    "(weight twice theirs) measured together as the sums of v - lo and hi - v when that lowers "
    "the variance (a mean alone: all of epsilon, each as if alone at epsilon / sqrt(2))"
)
INTERVAL_METHOD = (
    "noise only (not clamping or sampling): exact least-squares noise variances of counts and "
    "centred sums with the Laplace-safe multiplier; sums and means combine them (a mean by the "
    "delta method); quantiles read off a hierarchical CDF invert its noise band, those drawn "
    "by the exponential mechanism have none (empty; their rank bound is in components)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableResult:
    """A published table's public account: its ``release.json`` details."""

    keys: tuple[str, ...]
    key_policy: str
    dimensions: int
    """Key columns of the cells (a nested hierarchy's levels are one)."""
    groups: int
    rows: int
    measures: tuple[str, ...]
    split: Mapping[str, float]
    split_rule: str
    components: Mapping[str, JSON]
    bounds: Mapping[str, list[float]]
    margins: bool
    rounding: str
    """``none``, or the controlled rounding: each rounded measure's base."""
    interval_method: str
    interval_level: float
    privacy_unit: Mapping[str, JSON] | None = None
    key_selection: Mapping[str, JSON] | None = None
    """``keys: private``: the rule, its (epsilon, delta) and the keys it released."""
    joint: Mapping[str, JSON] | None = None
    """``joint: <group>``: the group, its tables, its epsilon and the guarantee."""
    precision: str = PRECISION_RULE
    """How many digits each published value carries (post-processing)."""
    quality: str = ""
    """What the ``quality`` column says and from what."""
    suppression: str | None = None
    """``suppress:``: which cells are withheld."""

    def to_json(self) -> dict[str, JSON]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["keys"], out["measures"] = list(self.keys), list(self.measures)
        out["split"], out["components"] = dict(self.split), dict(self.components)
        out["bounds"] = dict(self.bounds)
        if self.privacy_unit is None:
            del out["privacy_unit"]
        if self.key_selection is None:
            del out["key_selection"]
        if self.joint is None:
            del out["joint"]
        if self.suppression is None:
            del out["suppression"]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> TableResult:
        def floats(value: JSON) -> list[float]:
            return [as_float(v) for v in as_list(value)]

        return cls(
            keys=as_strs(data["keys"]),
            key_policy=as_str(data["key_policy"]),
            dimensions=as_int(data["dimensions"]),
            groups=as_int(data["groups"]),
            rows=as_int(data["rows"]),
            measures=as_strs(data["measures"]),
            split={k: as_float(v) for k, v in as_object(data["split"]).items()},
            split_rule=as_str(data["split_rule"]),
            components=as_object(data["components"]),
            bounds={k: floats(v) for k, v in as_object(data["bounds"]).items()},
            margins=bool(data["margins"]),
            rounding=as_str(data["rounding"]),
            interval_method=as_str(data["interval_method"]),
            interval_level=as_float(data["interval_level"]),
            privacy_unit=as_object_or_none(data.get("privacy_unit")),
            key_selection=as_object_or_none(data.get("key_selection")),
            joint=as_object_or_none(data.get("joint")),
            precision=as_str(data.get("precision", PRECISION_RULE)),
            quality=as_str(data.get("quality", "")),
            suppression=None if data.get("suppression") is None else as_str(data["suppression"]),
        )


def _rounding(design: TableDesign, answers: pd.DataFrame) -> str:
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


def _suppression(presentation: Presentation) -> str | None:
    below = presentation.suppress_below
    if below is None:
        return None
    return (
        f"cells whose published count is below {below} are withheld (blank numbers, quality "
        "'suppressed'; the row stays); margins are kept. Post-processing: the guarantee "
        "holds without it, and a withheld cell can be derived from its margin and siblings"
    )


def _write(
    out: Staging,
    plan: ReleasePlan[TableSpec],
    design: TableDesign,
    published: OfficeTable,
    result: TableResult,
) -> None:
    """The published files: ``answers.parquet`` (rounded floats), ``answers.csv`` (the same
    digits as text), ``answers_wide.csv`` and ``answers.xlsx`` (:mod:`dp.tables.wide`)."""
    out.write_frame(plan.name, "answers.parquet", published.answers)
    folder = out.release_dir(plan.name)
    out.write_csv(plan.name, "answers.csv", published.text())
    blocks = wide_blocks(published, design.keys)
    (folder / "answers_wide.csv").write_text(wide_csv(blocks))
    cost = plan.cost
    guarantee = f"epsilon {cost.epsilon:g}, delta {cost.delta:g}: differential privacy"
    if result.joint is not None:  # not claimed at its own epsilon (_joint_facts)
        guarantee = (
            f"epsilon {as_float(result.joint['epsilon']):g} (its joint group's), delta "
            f"{cost.delta:g}: differential privacy. {result.joint['guarantee']}"
        )
    methods = [
        f"{name}: {as_str(as_object(fact)['method'])}"
        for name, fact in result.components.items()
        if "method" in as_object(fact)
    ]
    method = "counts and sums: the Laplace mechanism (the matrix mechanism with margins)"
    notes = [
        ("Table", plan.name),
        ("Guarantee", guarantee),
        ("Neighbours", f"add/remove {plan.bounding.neighbours}"),
        ("Method", "; ".join([method, *methods])),
        ("Epsilon split", f"{dict(result.split)}: {SPLIT_RULE}"),
        ("Intervals", f"{100 * INTERVAL_LEVEL:g}%: {INTERVAL_METHOD}"),
        ("Rounding", result.rounding),
        ("Precision", result.precision),
        ("Quality", result.quality),
    ]
    if result.key_selection is not None:
        notes.append(("Keys", f"selected from the data: {json.dumps(result.key_selection)}"))
    if result.suppression is not None:
        notes.append(("Suppression", result.suppression))
    write_workbook(folder / "answers.xlsx", blocks, notes)


def _unit(bounding: Bounding, joint: Joint | None = None) -> dict[str, JSON] | None:
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


def _joint_group(
    cfg: PipelineConfig, item: TableModel, bounds: Mapping[str, tuple[float, float]]
) -> tuple[Joint, Bounding]:
    """The group ``item`` is measured with (:mod:`dp.tables.joint`): every published table
    naming the same ``joint`` group, in config order, and the group's privacy-unit bound (the
    one its finest cells get: every member is bounded alike, one neighbour relation)."""
    members = [
        t
        for t in cast("list[TableModel]", cfg.section("tables"))
        if t.joint == item.joint and getattr(t, "publish", True)
    ]
    where = f"table {item.name!r}: joint group {item.joint!r}"
    if len(members) < 2:
        raise ConfigError(f"{where} has no other table; name it in at least two tables")
    measures = item.measure_list()
    if any(m.kind == "quantile" for m in measures):
        raise ConfigError(f"{where}: joint tables publish count, sum and mean, not quantiles")
    own: list[Member] = []
    for t in members:
        if t.rounding_base is not None:
            raise ConfigError(
                f"{where}: {t.name!r} has round: {t.round_label}; joint tables are not rounded "
                "(each rounded apart would break their additivity)"
            )
        if t.measure_list() != measures:
            raise ConfigError(
                f"{where}: every member needs the same measures; {t.name!r} has "
                f"{[m.labels()[0] for m in t.measure_list()]}, {item.name!r} "
                f"{[m.labels()[0] for m in measures]}"
            )
        groups = table_groups(cfg, t)
        design = TableDesign(
            keys=groups.keys, dims=groups.dims, measures=(), components=(), margins=t.margins
        )
        rows, strategy = design.rows().matrix, table_strategy(design)
        own.append(
            Member(name=t.name, epsilon=t.epsilon, axes=groups.axes, rows=rows, strategy=strategy)
        )
    finest = finest_axes(own)
    bounding = bounding_for(cfg, _partition(cfg, finest))
    check_at_most(f"{where}: the finest cells", math.prod(a.size for a in finest), MAX_JOINT_CELLS)
    joint = joint_group(
        item.joint or "",
        own,
        [t.name for t in members].index(item.name),
        components=split_epsilon(measures, bounds, float(sum(t.epsilon for t in members))),
        bounds=bounds,
        group_rows=bounding.rows_per_unit,
    )
    check_reconstruction(joint.workload, "nonneg-l1")
    return joint, bounding


def _joint_costs(joint: Joint) -> tuple[PlannedCost, ...]:
    """Each member's own cost: what the ledger records for the group's one draw."""
    return tuple(
        PlannedCost(name=n, cost=PrivacyCost(epsilon=e))
        for n, e in zip(joint.members, joint.epsilons, strict=True)
    )


def _joint_facts(joint: Joint) -> dict[str, JSON]:
    """What ``release.json`` and ``dppub plan`` say of a joint table (module doc of
    :mod:`dp.tables.joint`: what was proven)."""
    others = [n for n in joint.members if n != joint.members[joint.index]]
    eps, own = joint.epsilon, joint.epsilons[joint.index]
    return {
        "group": joint.group,
        "tables": list(joint.members),
        "epsilon": eps,
        "epsilons": dict(zip(joint.members, joint.epsilons, strict=True)),
        "strategy": joint.strategy.name,
        "guarantee": (
            f"Estimated jointly with {', '.join(others)} (group {joint.group}) from one "
            f"measurement at epsilon {eps:g}, the sum of the tables' epsilons; the ledger "
            f"charges each table its own, so the run's total is unchanged. Together the "
            f"group's tables are {eps:g}-DP. This table alone is not claimed {own:g}-DP: "
            f"its answers use the whole measurement, so on its own it is {eps:g}-DP."
        ),
    }


def _runs_at(design: TableDesign) -> dict[str, float]:
    """Every epsilon a mechanism of the table runs at, by what runs at it: each component's,
    and a quantile drawn by the exponential mechanism's per probability (``epsilon / len(at)``,
    :mod:`dp.tables.quantiles`: the method does not depend on epsilon's scale, so it is chosen
    at 1 here)."""
    out = {f"the {c.name} component": c.epsilon for c in design.components}
    for m in () if design.margins else design.measures:
        cdf = design.component("cdf", m.column) if m.kind == "quantile" else None
        if cdf is None:
            continue
        bins = len(design.edges[m.column or ""]) - 1
        if quantile_method(bins, m.at, 1.0, design.group)[0] == "exponential":
            what = f"each of the {len(m.at)} quantile({m.column}) draws (exponential mechanism)"
            out[what] = cdf.epsilon / len(m.at)
    return out


def _check_floor(where: str, epsilon: float, epsilons: Mapping[str, float]) -> None:
    """Refuse, naming the table, a split that runs a mechanism below
    :data:`dp.validation.MIN_EPSILON` (each runs at a fixed share of ``epsilon``, so the
    smallest sufficient ``epsilon`` is known before any data)."""
    what, low = min(epsilons.items(), key=lambda kv: kv[1])
    if low < MIN_EPSILON:
        need = epsilon * MIN_EPSILON / low
        raise ConfigError(
            f"{where}: epsilon {epsilon:g} is split so that {what} runs at epsilon {low:.3g}, "
            f"below the floor of {MIN_EPSILON:g}; give it epsilon >= {need * (1 + 1e-9):.4g} "
            "or fewer measures"
        )


PRIVATE_PLACEHOLDER = "(selected from the data)"
"""A private-keys table's one group label before the selection (plan and expected errors)."""


def _plan_private(cfg: PipelineConfig, item: TableModel) -> ReleasePlan[TableSpec]:
    """A ``keys: private`` table: one key column, count / sum / mean (module doc)."""
    keys = item.key_models()
    if len(keys) != 1 or keys[0].level is not None or keys[0].bins is not None:
        raise ConfigError(
            f"table {item.name!r}: keys: private takes one by column (no level or bins), "
            f"got {[k.model_dump(exclude_none=True) for k in keys]}"
        )
    column = keys[0].column
    measures = item.measure_list()
    if item.margins or any(m.kind == "quantile" for m in measures):
        raise ConfigError(
            f"table {item.name!r}: keys: private publishes count, sum and mean without margins"
        )
    columns = [m.column for m in measures if m.column is not None]
    bounds = {c: _bounds(cfg, item, c) for c in columns}
    declared_columns(cfg, [column])
    text = cfg.table_schema[column].type in ("category", "string")
    bounding = bounding_for(cfg, column if text else None)
    # A unit has rows in at most max_partitions keys when bounded on them, else in max_rows.
    per_unit = 1
    if bounding.unit is not None:
        per_unit = bounding.max_partitions if text else bounding.rows_per_unit
    eps_select, delta, eps_measures = selection_budget(item.epsilon, item.delta, len(measures))
    design = TableDesign(
        keys=(column,),
        dims=(Dimension((PRIVATE_PLACEHOLDER,)),),
        measures=measures,
        components=split_epsilon(measures, bounds, eps_measures),
        bounds=bounds,
        integer=item.rounding_base is not None,
        base=item.rounding_base or 1,
        group=bounding.rows_per_unit,
    )
    _check_floor(
        f"table {item.name!r}",
        item.epsilon,
        {"the key selection": eps_select / per_unit, **_runs_at(design)},
    )
    rule = key_rule(eps_select, delta, per_unit)
    return ReleasePlan(
        name=item.name,
        kind="table",
        mechanism=table_mechanism(design, rule.mechanism),
        cost=item.cost,
        is_dp=True,
        bounding=bounding,
        columns=declared_columns(cfg, [column, *columns]),
        spec=TableSpec(
            design=design,
            axes=(),
            grids=(),
            keys="private",
            selection=rule,
            presentation=item.presentation(),
        ),
        facts={"groups": "private", "keys": "private", "selection": rule.describe()},
    )


def _scan_private(plan: ReleasePlan[TableSpec]) -> Scan[GroupSums | PrivateExact]:
    design, b = plan.spec.design, plan.bounding
    bounds = tuple(
        (c.column, *design.bounds[c.column])
        for c in design.components
        if c.kind in ("centred_sum", "count_sum") and c.column is not None
    )
    # Units are told apart by their ids; rows come bounded, and a unit counts in at most the
    # rule's keys. Both aggregates read the same rows: those with every column of the table.
    limit = 1 if plan.spec.selection is None else plan.spec.selection.max_partitions
    unit = (
        None
        if b.unit is None
        else UnitBound(column=b.unit, max_rows=b.rows_per_unit, max_partitions=limit)
    )
    weights = KeyWeightsAggregate(design.keys, unit, complete=tuple(c for c, _, _ in bounds))
    sums = KeyedSumsAggregate(by=design.keys, bounds=bounds)

    def assemble(results: Sequence[object]) -> GroupSums | PrivateExact:
        keys, keyed = results
        assert isinstance(keys, KeyWeights) and isinstance(keyed, KeyedSums)
        return PrivateExact(keys=keys, sums=keyed)

    return Scan((weights, sums), assemble)


def _select(spec: TableSpec, exact: PrivateExact) -> tuple[TableDesign, GroupSums, dict[str, JSON]]:
    """The released keys (one draw), and the design and exact sums restricted to them."""
    assert spec.selection is not None
    chosen = select_keys(exact.keys, spec.selection)
    labels = tuple(exact.keys.labels[i] for i in np.flatnonzero(chosen))
    design = replace(spec.design, dims=(Dimension(labels),))
    return (
        design,
        exact.sums.take(labels),
        {**spec.selection.describe(), "released_keys": len(labels)},
    )


def _no_groups(design: TableDesign) -> TableRelease:
    """A private-keys table whose selection released no key: the header only, no noise drawn."""
    columns = [*design.keys, "measure", "answer", "std_error", "ci_low", "ci_high"]
    answers = pd.DataFrame(
        {c: pd.Series([], dtype=str if c in design.keys else float) for c in columns}
    )
    answers["measure"] = answers["measure"].astype(str)
    return TableRelease(answers=answers, facts={})


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
        eps = c.epsilon / (math.sqrt(2.0) if c.kind == "count_sum" else 1.0)
        # Laplace noise scales as m / eps: the RMSE at epsilon 1 scaled (no floor on eps / m,
        # which no mechanism runs at)
        return c.epsilon, m / eps * float(matrix.expected_rmse(workload, strategy, 1.0))

    eps_n, count = rmse("count")
    out: list[dict[str, JSON]] = []
    for measure in design.measures:
        label, column = measure.labels()[0], measure.column or ""
        if measure.kind == "count":
            eps, value = eps_n, count
            error = f"RMSE {count:.3g} rows"
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
