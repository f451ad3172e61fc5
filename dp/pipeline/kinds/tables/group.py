"""A joint group of tables (``joint: <group>``) planned, measured and published as one release.

The tables naming one group are planned together (:meth:`TableKind.plan_section`): one release
named after the group, at the position of its first table, costing the sum of its tables'
epsilons, with one ledger row per table at its own epsilon (its ``parts``, which add up). The
group is measured once over its tables' finest cells (:mod:`dp.tables.joint`) -- one draw, in
one execution -- and each table reads its rows off the one estimate.

Published layout: ``<group>/release.json`` states the group (its cost, its parts, the
guarantee and each table's own account, :class:`~dp.pipeline.kinds.tables.result.JointResult`);
each table's files are in ``<group>/<table>/``, the same files a table alone publishes
(``answers.parquet``, ``answers.csv``, ``answers_wide.csv``, ``answers.xlsx``), each stating the
group's guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

import numpy as np

from dppub.dp.budget import sequential
from dppub.dp.engine.folds.table_sums import GroupSums
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.pipeline.kinds.base import (
    Executed,
    ReleaseKind,
    ReleasePlan,
    Scan,
    scan_one,
)
from dppub.dp.pipeline.kinds.tables.answers import publish_table, table_sensitivity
from dppub.dp.pipeline.kinds.tables.facts import JointGroupFacts, JointTableFacts, table_facts
from dppub.dp.pipeline.kinds.tables.joint_planning import group_guarantee, joint_costs
from dppub.dp.pipeline.kinds.tables.planning import TableSpec, table_sums
from dppub.dp.pipeline.kinds.tables.result import JointResult, JointTable
from dppub.dp.publication import Staging
from dppub.dp.tables.joint import Joint, measure_group, member_rows, row_variances
from dppub.dp.tables.table import component_facts, release_table

__all__ = [
    "GroupSpec",
    "TablesSpec",
    "describe_group",
    "execute_group",
    "group_plan",
    "group_text",
    "is_group",
    "one_table",
    "scan_group",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSpec:
    """What publishing a joint group needs, known before any data is read."""

    joint: Joint
    """The group's one measurement (as its first table sees it)."""
    tables: tuple[ReleasePlan[TableSpec], ...]
    """Its tables as planned alone (each with its ``joint``: the group as it sees it)."""


TablesSpec = TableSpec | GroupSpec
"""A release of the tables kind: one table's, or a joint group's."""


def is_group(plan: ReleasePlan[TablesSpec]) -> TypeGuard[ReleasePlan[GroupSpec]]:
    """A joint group's release (else one table's)."""
    return isinstance(plan.spec, GroupSpec)


def one_table(plan: ReleasePlan[TablesSpec]) -> ReleasePlan[TableSpec]:
    """One table's release (not a joint group's)."""
    if is_group(plan):
        raise InvariantError(f"release {plan.name!r} is a joint group, not one table")
    return cast("ReleasePlan[TableSpec]", plan)


def group_plan(
    kind: ReleaseKind[Any, TablesSpec, Any], group: str, tables: Sequence[ReleasePlan[TableSpec]]
) -> ReleasePlan[TablesSpec]:
    """The one release of a joint group's ``tables`` (planned alone, in config order)."""
    first = tables[0]
    joint = first.spec.joint
    if joint is None:
        raise ConfigError(f"table {first.name!r} is not in a joint group")
    if group in joint.members:
        raise ConfigError(
            f"table {group!r}: joint group {group!r} has the name of one of its tables; name "
            "the group apart (it names the folder its tables are published in)"
        )
    plan: ReleasePlan[TablesSpec] = ReleasePlan(
        name=group,
        release_kind=kind,
        mechanism=first.mechanism,
        cost=sequential(t.cost for t in tables),
        is_dp=True,
        columns=tuple(dict.fromkeys(c for t in tables for c in t.columns)),
        parts=joint_costs(joint),
        bounding=first.bounding,
        spec=GroupSpec(joint=joint, tables=tuple(tables)),
    )
    return plan


def scan_group(plan: ReleasePlan[GroupSpec]) -> Scan[GroupSums]:
    """The group's exact sums over its finest cells."""
    joint = plan.spec.joint
    bounds = plan.spec.tables[0].spec.design.bounds
    return scan_one(table_sums(joint.components, bounds, joint.axes, (), plan.bounding))


def describe_group(plan: ReleasePlan[GroupSpec]) -> JointGroupFacts:
    """What ``dppub plan`` shows of the group: each table's facts with its expected errors
    measured jointly beside those measured alone (exact: :func:`row_variances`)."""
    joint = plan.spec.joint
    tables: list[JointTableFacts] = []
    for k, table in enumerate(plan.spec.tables):
        together, alone = row_variances(joint, k)
        ratio = math.sqrt(float(np.mean(together)) / float(np.mean(alone)))
        alone_facts = table_facts(table)
        measures = tuple(
            m.model_copy(
                update={
                    "expected_rmse": m.expected_rmse * ratio,
                    "error": f"{m.error} separately; jointly {ratio:.3g} x that",
                    "separate_rmse": m.expected_rmse,
                }
            )
            for m in alone_facts.measures
        )
        facts = alone_facts.model_copy(update={"measures": measures})
        tables.append(JointTableFacts(name=table.name, epsilon=table.cost.epsilon, facts=facts))
    return JointGroupFacts(group=plan.name, strategy=joint.strategy.name, tables=tuple(tables))


def group_text(facts: JointGroupFacts, table_text: Mapping[str, str]) -> str:
    """``dppub plan``'s lines for the group: a first line, then each table's (``table_text``:
    by name, as a table alone prints them), indented under its name and epsilon."""
    lines = [
        f"  joint group of {len(facts.tables)} tables measured once; the ledger charges each "
        "its own"
    ]
    for t in facts.tables:
        first, *rest = table_text[t.name].split("\n")
        lines.append(f"    {t.name}: epsilon {t.epsilon:.4g},{first[1:]}")
        lines += [f"  {line}" for line in rest]
    return "\n".join(lines)


def execute_group(plan: ReleasePlan[GroupSpec], sums: GroupSums, out: Staging) -> Executed:
    """Measure the group once and publish each table's rows of the one estimate into
    ``<group>/<table>/``."""
    estimates = measure_group(plan.spec.joint, sums.counts, sums.centred, extra=sums.vectors())
    tables: list[JointTable] = []
    sensitivity = None
    for table in plan.spec.tables:
        joint = table.spec.joint
        assert joint is not None  # planned in the group
        rows = member_rows(joint, estimates)
        design = table.spec.design
        released = release_table(
            design, (), {}, {}, measured=(rows, component_facts(joint.components, rows))
        )
        result = publish_table(out, table, design, released, folder=f"{plan.name}/{table.name}")
        tables.append(JointTable(name=table.name, table=result))
        sensitivity = table_sensitivity(result)  # the same components: the same for all
    joint = plan.spec.joint
    group = JointResult(
        group=plan.name,
        epsilon=joint.epsilon,
        strategy=joint.strategy.name,
        guarantee=group_guarantee(joint),
        tables=tuple(tables),
        privacy_unit=tables[0].table.privacy_unit,
    )
    return Executed(result=group, sensitivity=sensitivity)
