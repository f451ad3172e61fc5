"""Planning a joint table: the group measured once over its members' finest cells
(:mod:`dp.tables.joint`), its costs and plan facts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import cast

from dppub.dp.budget import PlannedCost, PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.reconstruct import check_reconstruction
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.kinds.base import (
    JSON,
)
from dppub.dp.pipeline.kinds.tables.item import TableModel
from dppub.dp.pipeline.kinds.tables.planning import never_missing, table_groups, table_partition
from dppub.dp.pipeline.limits import check_at_most
from dppub.dp.pipeline.units import Bounding, bounding_for
from dppub.dp.tables.joint import (
    MAX_JOINT_CELLS,
    Joint,
    Member,
    finest_axes,
    joint_group,
)
from dppub.dp.tables.quantiles import quantile_method
from dppub.dp.tables.split import split_epsilon
from dppub.dp.tables.table import (
    TableDesign,
    table_strategy,
)
from dppub.dp.validation import MIN_EPSILON


def plan_joint_group(
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
    bounding = bounding_for(cfg, table_partition(cfg, finest))
    check_at_most(f"{where}: the finest cells", math.prod(a.size for a in finest), MAX_JOINT_CELLS)
    joint = joint_group(
        item.joint or "",
        own,
        [t.name for t in members].index(item.name),
        components=split_epsilon(
            measures,
            bounds,
            float(sum(t.epsilon for t in members)),
            never_missing(cfg, list(bounds)),
        ),
        bounds=bounds,
        group_rows=bounding.rows_per_unit,
    )
    check_reconstruction(joint.workload, "nonneg-l1")
    return joint, bounding


def joint_costs(joint: Joint) -> tuple[PlannedCost, ...]:
    """Each member's own cost: what the ledger records for the group's one draw."""
    return tuple(
        PlannedCost(name=n, cost=PrivacyCost(epsilon=e))
        for n, e in zip(joint.members, joint.epsilons, strict=True)
    )


def joint_facts(joint: Joint) -> dict[str, JSON]:
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


def group_guarantee(joint: Joint) -> str:
    """What the group's ``release.json`` states of it (module doc of :mod:`dp.tables.joint`)."""
    eps = joint.epsilon
    return (
        f"Its tables ({', '.join(joint.members)}) are estimated from one measurement at "
        f"epsilon {eps:g}, the sum of their epsilons; the ledger charges each table its own, so "
        f"the run's total is unchanged. Together they are {eps:g}-DP. A table alone is not "
        f"claimed DP at its own epsilon: its answers use the whole measurement, so on its own it "
        f"is {eps:g}-DP."
    )


def runs_at(design: TableDesign) -> dict[str, float]:
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


def check_floor(where: str, epsilon: float, epsilons: Mapping[str, float]) -> None:
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
