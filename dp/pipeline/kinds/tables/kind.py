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

Joint tables: declared-key tables naming the same ``joint`` group are one release, measured
once over their finest cells, each table publishing its rows of the one estimate in
``<group>/<table>/`` (:mod:`dp.pipeline.kinds.tables.group`, :mod:`dp.tables.joint`).

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
from collections.abc import Sequence
from pathlib import Path
from typing import cast

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
from dppub.dp.pipeline.kinds.previews import Preview, preview_lines
from dppub.dp.pipeline.kinds.tables.answers import publish_table, table_sensitivity
from dppub.dp.pipeline.kinds.tables.facts import JointGroupFacts, TableFacts, table_facts
from dppub.dp.pipeline.kinds.tables.group import (
    TablesSpec,
    describe_group,
    execute_group,
    group_plan,
    group_text,
    is_group,
    one_table,
    scan_group,
)
from dppub.dp.pipeline.kinds.tables.item import TableModel
from dppub.dp.pipeline.kinds.tables.joint_planning import (
    check_floor,
    plan_joint_group,
    runs_at,
)
from dppub.dp.pipeline.kinds.tables.planning import (
    TableSpec,
    column_grid,
    distinct_group,
    measure_bounds,
    never_missing,
    per_integer,
    table_filter,
    table_groups,
    table_partition,
    table_sums,
)
from dppub.dp.pipeline.kinds.tables.private_keys import (
    PrivateExact,
    choose_keys,
    no_groups,
    plan_private,
    scan_private,
)
from dppub.dp.pipeline.kinds.tables.result import (
    JointResult,
    TableResult,
)
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_TABLE_ANSWERS, check_at_most
from dppub.dp.pipeline.units import bounding_for
from dppub.dp.tables.margins import published_rows
from dppub.dp.tables.rounding import MAX_ROUNDED_CELLS
from dppub.dp.tables.split import split_epsilon
from dppub.dp.tables.table import (
    TableDesign,
    release_table,
    table_mechanism,
)

__all__ = ["TableKind"]


class TableKind(ReleaseKind[TableModel, TablesSpec, GroupSums | PrivateExact]):
    """See the module docstring."""

    section = "tables"
    label = "table"
    many = True
    model = TableModel
    result = TableResult | JointResult
    facts = TableFacts | JointGroupFacts
    plots = "table_plot"
    previews = (Preview(file="answers.csv", rows=8, what=": the published cells"),)

    def plan(self, cfg: PipelineConfig, item: TableModel) -> ReleasePlan[TablesSpec]:
        return cast("ReleasePlan[TablesSpec]", self.plan_table(cfg, item))

    def plan_table(self, cfg: PipelineConfig, item: TableModel) -> ReleasePlan[TableSpec]:
        """One table's release (a joint group's table: as planned alone, with its group)."""
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
        plan: ReleasePlan[TablesSpec] = ReleasePlan(
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
            spec=TableSpec(
                design=design,
                axes=axes,
                grids=grids,
                keys=item.key_policy,
                joint=joint,
                presentation=item.presentation(),
            ),
        )
        return one_table(plan)

    def plan_section(
        self, cfg: PipelineConfig, items: Sequence[TableModel]
    ) -> list[ReleasePlan[TablesSpec]]:
        """One release per table, but one per joint group: its tables planned together, at
        the position of its first (:mod:`dp.pipeline.kinds.tables.group`)."""
        out: list[ReleasePlan[TablesSpec]] = []
        for item in items:
            if item.joint is None:
                out.append(self.plan(cfg, item))
            elif item.joint not in {r.name for r in out if is_group(r)}:
                tables = [self.plan_table(cfg, t) for t in items if t.joint == item.joint]
                out.append(group_plan(self, item.joint, tables))
        return out

    def scan(self, plan: ReleasePlan[TablesSpec]) -> Scan[GroupSums | PrivateExact]:
        if is_group(plan):
            return cast("Scan[GroupSums | PrivateExact]", scan_group(plan))
        table = one_table(plan)
        spec = table.spec
        if spec.selection is not None:
            return scan_private(table)
        design = spec.design
        sums = table_sums(design.components, design.bounds, spec.axes, spec.grids, plan.bounding)
        return scan_one(sums)

    def describe(self, plan: ReleasePlan[TablesSpec]) -> TableFacts | JointGroupFacts:
        if is_group(plan):
            return describe_group(plan)
        return table_facts(one_table(plan))

    def plan_text(self, facts: PlanFacts) -> str:
        if isinstance(facts, JointGroupFacts):
            return group_text(facts, {t.name: self.plan_text(t.facts) for t in facts.tables})
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
        for m in f.measures:
            lines.append(f"    {m.measure}: epsilon {m.epsilon:.4g}, expected {m.error}")
        return "\n".join(lines)

    def execute(
        self,
        plan: ReleasePlan[TablesSpec],
        exact: GroupSums | PrivateExact,
        context: ExecuteContext,
    ) -> Executed:
        if is_group(plan):
            assert isinstance(exact, GroupSums)
            return execute_group(plan, exact, context.out)
        table = one_table(plan)
        design = table.spec.design
        selection = None
        if isinstance(exact, PrivateExact):
            design, exact, selection = choose_keys(table.spec, exact)
        if design.shape == (0,):  # no key selected: nothing to measure, an empty table
            released = no_groups(design)
        else:
            released = release_table(
                design, exact.counts, exact.centred, exact.histograms, extra=exact.vectors()
            )
        result = publish_table(context.out, table, design, released, selection, folder=plan.name)
        return Executed(result=result, sensitivity=table_sensitivity(result))

    def guarantee(self, summary: ReleaseSummary) -> str:
        if not isinstance(summary.result, JointResult):
            return super().guarantee(summary)
        r = summary.result
        return (
            f"differential privacy, jointly: epsilon {r.epsilon:g} for "
            f"{', '.join(t.name for t in r.tables)}"
        )

    def report(self, summary: ReleaseSummary) -> list[str]:
        if not isinstance(summary.result, JointResult):
            return table_report(summary.result_as(TableResult))
        r = summary.result
        lines = [
            f"A joint group of {len(r.tables)} tables measured once, each in its own folder "
            f"`{summary.name}/<table>/`. {r.guarantee}"
        ]
        for t in r.tables:
            first, *rest = table_report(t.table)
            lines += ["", f"**{t.name}**: {first}", *rest]
        return lines

    def results(self, summary: ReleaseSummary, folder: Path) -> list[str]:
        if not isinstance(summary.result, JointResult):
            return super().results(summary, folder)
        lines: list[str] = []
        for t in summary.result.tables:
            shown = preview_lines(f"{summary.name}/{t.name}", folder, self.previews)
            lines += [*([""] if lines else []), f"**{t.name}**", "", *shown]
        return lines


def table_report(r: TableResult) -> list[str]:
    """A table's lines in ``report.md`` (a joint group's: each table's)."""
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
