"""A ``keys: private`` table: planned with its key selection's budget, scanned for per-key
weights and sums, its keys selected from the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from dppub.dp.engine.folds.table_sums import GroupSums
from dppub.dp.engine.key_weights import KeyWeightsAggregate
from dppub.dp.engine.keyed_sums import KeyedSums, KeyedSumsAggregate
from dppub.dp.engine.unit_bounding import UnitBound
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import declared_columns
from dppub.dp.pipeline.kinds.base import (
    JSON,
    ReleaseKind,
    ReleasePlan,
    Scan,
)
from dppub.dp.pipeline.kinds.tables.item import TableModel
from dppub.dp.pipeline.kinds.tables.joint_planning import check_floor, runs_at
from dppub.dp.pipeline.kinds.tables.planning import (
    TableSpec,
    measure_bounds,
    never_missing,
    table_filter,
)
from dppub.dp.pipeline.units import bounding_for
from dppub.dp.tables.keys import KeyWeights, key_rule, select_keys, selection_budget
from dppub.dp.tables.margins import Dimension
from dppub.dp.tables.split import split_epsilon
from dppub.dp.tables.table import (
    TableDesign,
    TableRelease,
    table_mechanism,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateExact:
    """A ``keys: private`` table's exact aggregates: per-key weights and sums (never published)."""

    keys: KeyWeights
    sums: KeyedSums


PRIVATE_PLACEHOLDER = "(selected from the data)"
"""A private-keys table's one group label before the selection (plan and expected errors)."""


def plan_private(
    kind: ReleaseKind[TableModel, Any, GroupSums | PrivateExact],
    cfg: PipelineConfig,
    item: TableModel,
) -> ReleasePlan[TableSpec]:
    """A ``keys: private`` table: one key column, count / sum / mean (module doc)."""
    keys = item.key_models()
    if len(keys) != 1 or keys[0].level is not None or keys[0].bins is not None:
        raise ConfigError(
            f"table {item.name!r}: keys: private takes one by column (no level or bins), "
            f"got {[k.model_dump(exclude_none=True) for k in keys]}"
        )
    column = keys[0].column
    measures = item.measure_list()
    if item.margins or any(m.kind in ("quantile", "variance", "std") for m in measures):
        raise ConfigError(
            f"table {item.name!r}: keys: private publishes count, sum and mean without margins"
        )
    columns = [m.column for m in measures if m.column is not None]
    bounds = measure_bounds(cfg, item, measures)
    declared_columns(cfg, [column])
    text = cfg.table_schema[column].type in ("category", "string")
    row_filter = table_filter(cfg, item)
    bounding = bounding_for(cfg, column if text else None, row_filter)
    # A unit counts in at most min(max_partitions, max_rows) keys, text or int: its bounded rows
    # reach at most max_rows keys, and the key weights' finish keeps it in at most
    # max_partitions of them, by label, whatever the rows (dp.engine.key_weights). (Old code used
    # max_rows for an int column, over-noising the selection when max_partitions is smaller.)
    per_unit = 1
    if bounding.unit is not None:
        per_unit = min(bounding.max_partitions, bounding.rows_per_unit)
    eps_select, delta, eps_measures = selection_budget(item.epsilon, item.delta, len(measures))
    design = TableDesign(
        keys=(column,),
        dims=(Dimension((PRIVATE_PLACEHOLDER,)),),
        measures=measures,
        components=split_epsilon(measures, bounds, eps_measures, never_missing(cfg, columns)),
        bounds=bounds,
        integer=item.rounding_base is not None,
        base=item.rounding_base or 1,
        group=bounding.rows_per_unit,
    )
    check_floor(
        f"table {item.name!r}",
        item.epsilon,
        {"the key selection": eps_select / per_unit, **runs_at(design)},
    )
    rule = key_rule(eps_select, delta, per_unit, item.selection)
    return ReleasePlan(
        name=item.name,
        release_kind=kind,
        mechanism=table_mechanism(design, rule.mechanism),
        cost=item.cost,
        is_dp=True,
        bounding=bounding,
        columns=declared_columns(
            cfg, [column, *columns, *(row_filter.columns if row_filter else ())]
        ),
        spec=TableSpec(
            design=design,
            axes=(),
            grids=(),
            keys="private",
            selection=rule,
            presentation=item.presentation(),
        ),
    )


def scan_private(plan: ReleasePlan[TableSpec]) -> Scan[GroupSums | PrivateExact]:
    design, b = plan.spec.design, plan.bounding
    bounds = tuple(
        (c.column, *design.bounds[c.column])
        for c in design.components
        if c.kind in ("centred_sum", "count_sum") and c.column is not None
    )
    counted = tuple(
        c.column for c in design.components if c.kind == "count" and c.column is not None
    )
    # Units are told apart by their ids; rows come bounded, and a unit counts in at most the
    # rule's keys. Both aggregates read the same rows: those with the key (a missing measured
    # value leaves its row in the count).
    limit = 1 if plan.spec.selection is None else plan.spec.selection.max_partitions
    unit = (
        None
        if b.unit is None
        else UnitBound(column=b.unit, max_rows=b.rows_per_unit, max_partitions=limit)
    )
    weights = KeyWeightsAggregate(design.keys, unit, where=b.where)
    sums = KeyedSumsAggregate(by=design.keys, bounds=bounds, counted=counted, where=b.where)

    def assemble(results: Sequence[object]) -> GroupSums | PrivateExact:
        keys, keyed = results
        assert isinstance(keys, KeyWeights) and isinstance(keyed, KeyedSums)
        return PrivateExact(keys=keys, sums=keyed)

    return Scan((weights, sums), assemble)


def choose_keys(
    spec: TableSpec, exact: PrivateExact
) -> tuple[TableDesign, GroupSums, dict[str, JSON]]:
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


def no_groups(design: TableDesign) -> TableRelease:
    """A private-keys table whose selection released no key: the header only, no noise drawn."""
    columns = [*design.keys, "measure", "answer", "std_error", "ci_low", "ci_high"]
    answers = pd.DataFrame(
        {c: pd.Series([], dtype=str if c in design.keys else float) for c in columns}
    )
    answers["measure"] = answers["measure"].astype(str)
    return TableRelease(answers=answers, facts={})
