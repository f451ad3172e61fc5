"""Release kind tables (section ``tables:``): counts, sums, means and quantiles by group.

Each item is one table: its groups are the cells of its ``by`` keys (declared categories, int
values, bins of a float column, or a hierarchy level), its measures are read off noisy
components whose epsilon split minimises their noise (:mod:`dp.tables.split`), and with
``margins: true`` every sub-total is estimated jointly with the cells by the matrix mechanism
(:mod:`dp.tables.cells_and_margins`), so cells add up exactly to every margin; ``round: integer``
(or ``{base: N}``) makes counts and sums multiples of the base that still add up
(:mod:`dp.tables.rounding`). Bounds come from
the declared columns only (values are clamped on read). The exact per-group counts, centred
fixed-point sums and the quantile columns' fine histograms are folded in the run's one shared
scan (:mod:`dp.engine.folds.table_sums`: one aggregate, so every measure sees the same rows).

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

import math
from typing import cast

import numpy as np
from pydantic import JsonValue

from dppub.dp.engine.folds.table_sums import GroupSums
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.reconstruct import check_reconstruction
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import declared_columns
from dppub.dp.pipeline.kinds.base import (
    ExecuteContext,
    Executed,
    PlanFacts,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
    facts_as,
    scan_one,
)
from dppub.dp.pipeline.kinds.previews import Preview
from dppub.dp.pipeline.kinds.release_file import PrivacyUnit
from dppub.dp.pipeline.kinds.tables.answers import write_answers
from dppub.dp.pipeline.kinds.tables.facts import (
    KeySelectionFacts,
    MeasureFacts,
    TableFacts,
    expected_errors,
)
from dppub.dp.pipeline.kinds.tables.item import TableModel
from dppub.dp.pipeline.kinds.tables.joint_planning import (
    check_floor,
    joint_costs,
    joint_facts,
    plan_joint_group,
    runs_at,
)
from dppub.dp.pipeline.kinds.tables.planning import (
    TableSpec,
    column_grid,
    counted_rows,
    distinct_group,
    measure_bounds,
    never_missing,
    per_integer,
    table_filter,
    table_groups,
    table_partition,
    table_sums,
    unit_statement,
)
from dppub.dp.pipeline.kinds.tables.private_keys import (
    PrivateExact,
    choose_keys,
    no_groups,
    plan_private,
    scan_private,
)
from dppub.dp.pipeline.kinds.tables.result import (
    INTERVAL_METHOD,
    SPLIT_RULE,
    JointFacts,
    TableResult,
    rounding_note,
    suppression_note,
)
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_TABLE_ANSWERS, check_at_most
from dppub.dp.pipeline.units import bounding_for
from dppub.dp.tables.joint import (
    measure_group,
    member_rows,
    row_variances,
)
from dppub.dp.tables.margins import published_rows
from dppub.dp.tables.office import office_table
from dppub.dp.tables.precision import PRECISION_RULE
from dppub.dp.tables.quality import quality_rule
from dppub.dp.tables.rounding import MAX_ROUNDED_CELLS
from dppub.dp.tables.split import MISSING_RULE, split_epsilon
from dppub.dp.tables.table import (
    INTERVAL_LEVEL,
    TableDesign,
    component_facts,
    release_table,
    table_mechanism,
)

__all__ = ["TableKind"]


class TableKind(ReleaseKind[TableModel, TableSpec, GroupSums | PrivateExact]):
    """See the module docstring."""

    section = "tables"
    label = "table"
    many = True
    model = TableModel
    result = TableResult
    facts = TableFacts
    plots = "table_plot"
    previews = (Preview(file="answers.csv", rows=8, what=": the published cells"),)

    def plan(self, cfg: PipelineConfig, item: TableModel) -> ReleasePlan[TableSpec]:
        if item.key_policy == "private":
            return plan_private(self, cfg, item)
        groups = table_groups(cfg, item)
        axes = groups.axes
        measures = item.measure_list()
        columns = list(dict.fromkeys(m.column for m in measures if m.column is not None))
        bounds = measure_bounds(cfg, item, measures)
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
        grids = tuple(column_grid(cfg, item, c) for c in quantiled)
        for g in grids:
            check_at_most(f"table {item.name!r}: groups x bins", cells * g.size, MAX_DOMAIN_CELLS)
        row_filter = table_filter(cfg, item)
        bounding = bounding_for(cfg, table_partition(cfg, axes), row_filter)
        distinct = distinct_group(cfg, item, bounding)
        joint = None
        if item.joint is not None:
            joint, bounding = plan_joint_group(cfg, item, bounds)
        design = TableDesign(
            keys=groups.keys,
            dims=groups.dims,
            measures=measures,
            components=split_epsilon(measures, bounds, item.epsilon, never_missing(cfg, columns)),
            bounds=bounds,
            edges={c: g.edges or () for c, g in zip(quantiled, grids, strict=True)},
            integer_grids=frozenset(
                c for c, g in zip(quantiled, grids, strict=True) if per_integer(cfg, c, g)
            ),
            margins=item.margins,
            integer=item.rounding_base is not None,
            base=item.rounding_base or 1,
            group=bounding.rows_per_unit,
            distinct_group=distinct,
        )
        # a joint group's components are at the sum of its members' epsilons: above these
        check_floor(f"table {item.name!r}", item.epsilon, runs_at(design))
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism=table_mechanism(design),
            cost=item.cost,
            is_dp=True,
            bounding=bounding,
            columns=declared_columns(
                cfg,
                [
                    *(a.column for a in (joint.axes if joint else axes)),
                    *columns,
                    *(row_filter.columns if row_filter else ()),
                ],
            ),
            joint=() if joint is None else joint_costs(joint),
            spec=TableSpec(
                design=design,
                axes=axes,
                grids=grids,
                keys=item.key_policy,
                joint=joint,
                presentation=item.presentation(),
            ),
            facts={
                "groups": cells,
                "keys": item.key_policy,
                **({"where": row_filter.text} if row_filter else {}),
            },
        )

    def scan(self, plan: ReleasePlan[TableSpec]) -> Scan[GroupSums | PrivateExact]:
        spec = plan.spec
        if spec.selection is not None:
            return scan_private(plan)
        components = spec.design.components if spec.joint is None else spec.joint.components
        axes = spec.axes if spec.joint is None else spec.joint.axes
        return scan_one(table_sums(components, spec.design.bounds, axes, spec.grids, plan.bounding))

    def describe(self, plan: ReleasePlan[TableSpec]) -> TableFacts:
        spec = plan.spec
        measures = expected_errors(spec.design)
        joint = spec.joint
        if joint is not None:
            together, alone = row_variances(joint, joint.index)
            ratio = math.sqrt(float(np.mean(together)) / float(np.mean(alone)))
            measures = tuple(
                MeasureFacts(
                    measure=m.measure,
                    epsilon=m.epsilon,
                    expected_rmse=m.expected_rmse * ratio,
                    error=f"{m.error} separately; jointly {ratio:.3g} x that",
                    separate_rmse=m.expected_rmse,
                )
                for m in measures
            )
        where = plan.bounding.where
        return TableFacts(
            groups="private" if spec.keys == "private" else math.prod(a.size for a in spec.axes),
            keys=spec.keys,
            selection=None
            if spec.selection is None
            else KeySelectionFacts.model_validate(spec.selection.describe()),
            where=None if where is None else where.text,
            measures=measures,
            joint=None if joint is None else JointFacts.model_validate(joint_facts(joint)),
        )

    def plan_text(self, facts: PlanFacts) -> str:
        f = facts_as(facts, TableFacts)
        lines = [f"  {f.groups} groups, keys {f.keys}"]
        if f.where is not None:
            lines.append(f"    where {f.where} (each row, before any bound)")
        if f.selection is not None:
            rule = f.selection
            lines[0] = (
                f"  groups selected from the data (keys private: {rule.rule} rule at "
                f"epsilon {rule.epsilon:.4g}, delta {rule.delta:.3g})"
            )
        if f.joint is not None:
            lines.append(
                f"    estimated jointly (group {f.joint.group}: {', '.join(f.joint.tables)}; "
                f"epsilon {f.joint.epsilon:.4g} together)"
            )
        for m in f.measures:
            lines.append(f"    {m.measure}: epsilon {m.epsilon:.4g}, expected {m.error}")
        return "\n".join(lines)

    def execute(
        self, plan: ReleasePlan[TableSpec], exact: GroupSums | PrivateExact, context: ExecuteContext
    ) -> Executed:
        out = context.out
        design = plan.spec.design
        selection = None
        if isinstance(exact, PrivateExact):
            design, exact, selection = choose_keys(plan.spec, exact)
        joint = plan.spec.joint
        if design.shape == (0,):  # no key selected: nothing to measure, an empty table
            released = no_groups(design)
        elif joint is not None:
            sums = exact
            estimates = out.shared(
                f"table-{joint.group}",
                lambda: measure_group(joint, sums.counts, sums.centred, extra=sums.vectors()),
            )
            rows = member_rows(joint, estimates)
            measured = (rows, component_facts(joint.components, rows))
            released = release_table(design, (), {}, {}, measured=measured)
        else:
            released = release_table(
                design, exact.counts, exact.centred, exact.histograms, extra=exact.vectors()
            )
        published = office_table(released.answers, design, plan.spec.presentation)
        unit = unit_statement(plan.bounding, joint)
        result = TableResult(
            keys=design.keys,
            key_policy=plan.spec.keys,
            dimensions=len(design.dims),
            groups=int(np.prod(design.shape)),
            rows=len(released.answers),
            measures=tuple(label for m in design.measures for label in m.labels()),
            split={c.name: c.epsilon for c in (design if joint is None else joint).components},
            split_rule=SPLIT_RULE,
            components=cast(
                "dict[str, dict[str, JsonValue]]", released.facts
            ),  # numbers and strings only
            bounds={c: list(b) for c, b in design.bounds.items()},
            margins=design.margins,
            rounding=rounding_note(design, released.answers),
            interval_method=INTERVAL_METHOD,
            interval_level=INTERVAL_LEVEL,
            privacy_unit=None if unit is None else PrivacyUnit.model_validate(unit),
            key_selection=cast("dict[str, JsonValue] | None", selection),
            joint=None if joint is None else JointFacts.model_validate(joint_facts(joint)),
            precision=PRECISION_RULE,
            quality=quality_rule(plan.spec.presentation.caution, plan.spec.presentation.unreliable),
            suppression=suppression_note(plan.spec.presentation),
            missing_values=MISSING_RULE,
            where=None if plan.bounding.where is None else plan.bounding.where.text,
            counted_rows=counted_rows(plan.bounding),
        )
        write_answers(out, plan, design, published, result)
        # One number says the sensitivity only for a one-component table (release.json has each).
        facts = list(released.facts.values())
        sens = [float(f["sensitivity"]) for f in facts]  # type: ignore[index]
        one = len(sens) == 1 and "missing" not in facts[0]  # type: ignore[operator]
        return Executed(result=result, sensitivity=sens[0] if one else None)

    def guarantee(self, summary: ReleaseSummary) -> str:
        joint = summary.result_as(TableResult).joint
        if joint is None:
            return super().guarantee(summary)
        return (
            f"differential privacy, jointly: epsilon {joint.epsilon:g} with "
            f"{', '.join(t for t in joint.tables if t != summary.name)}"
        )

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = summary.result_as(TableResult)
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
            extra += f" {r.joint.guarantee}"
        withheld = f" {r.suppression[0].upper()}{r.suppression[1:]}." if r.suppression else ""
        rows = f"Rows: those where `{r.where}` holds. " if r.where else ""
        if r.counted_rows is not None:
            rows += f"{r.counted_rows}. "
        return [
            f"A table of {', '.join(r.measures)} by {', '.join(f'`{k}`' for k in r.key_columns)} "
            f"({r.groups} groups, keys {r.key_policy}, {r.rows} rows in `answers.csv`; wide "
            f"in `answers_wide.csv` and `answers.xlsx`).{extra}",
            f"Epsilon split: {split} (it minimises the measures' summed noise variance; "
            "`release.json` states the rule).",
            f"{rows}Missing values: {r.missing_values}.",
            f"{100 * r.interval_level:g}% intervals: {r.interval_method}.",
            "Every value carries only the digits its noise supports (rounded to the power of "
            "ten at or below a tenth of its standard error, counts to integers; post-processing, "
            f"no privacy cost). `quality`: {r.quality}.{withheld}",
        ]
