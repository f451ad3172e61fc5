"""Release kind series (section ``series:``): a series published period by period under one
budget for its whole horizon (continual release; the numerics are :mod:`dp.series`).

Each run publishes the period due (or ``--period``) and any skipped before it: it measures the
strategy's rows those periods close, from the periods' rows read again from the source
(:mod:`.series_scan`), estimates each period consistently with everything published before
(:meth:`dp.series.SeriesRelease.figures`), and writes ``figures.csv`` (every figure due, with
standard errors and 95% intervals, rounded to the digits the noise supports) and ``state.json``
(the noisy measurements and published values at full precision: the only values kept between
runs). The ledger row ``<series>[<period>]`` charges the increase of the series' loss
(:mod:`.planning`) and seals the state (:mod:`.series_store`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dppub.dp.budget import PlannedCost
from dppub.dp.errors import InputError
from dppub.dp.pipeline.config import PipelineConfig
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
from dppub.dp.pipeline.kinds.series.facts import FigureFacts, SeriesFacts
from dppub.dp.pipeline.kinds.series.item import SeriesModel
from dppub.dp.pipeline.kinds.series.planning import (
    SeriesSpec,
    block_bounds,
    expected_rmse,
    plan_series,
)
from dppub.dp.pipeline.kinds.series.result import SeriesResult
from dppub.dp.pipeline.kinds.series.series_calendar import ordinal
from dppub.dp.pipeline.kinds.series.series_scan import SeriesAggregate, SeriesExact
from dppub.dp.pipeline.kinds.series.series_store import (
    LABEL,
    check_alone,
    record_name,
    save_copy,
)
from dppub.dp.pipeline.units import Bounding

if TYPE_CHECKING:
    pass

__all__ = ["SeriesBounding", "SeriesKind"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesBounding(Bounding):
    """A series bounds its units itself, per period (:mod:`.series_scan`): no run-level row
    selection (``unit`` is None), but its neighbours are stated as the series' relation."""

    relation: str = "one row"

    @property
    def neighbours(self) -> str:
        return self.relation


class SeriesKind(ReleaseKind[SeriesModel, SeriesSpec, SeriesExact]):
    section = "series"
    label = LABEL
    many = True
    model = SeriesModel
    result = SeriesResult
    facts = SeriesFacts
    plots = "series_plot"

    def plan(self, cfg: PipelineConfig, item: SeriesModel) -> ReleasePlan[SeriesSpec]:
        spec, cost = plan_series(cfg, item)
        unit = cfg.dataset.privacy_unit
        relation = spec.release.relation
        said = (
            "one row"
            if unit is None
            else f"all rows of one {unit} (at most {relation.max_rows_per_unit} read in each "
            f"of at most {relation.max_periods_per_unit} periods)"
        )
        columns = (
            item.period.column,
            *item.by,
            *(m.sum for m in item.measures if not isinstance(m, str)),
        )
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism=item.noise,
            cost=cost,
            is_dp=True,
            columns=tuple(dict.fromkeys(columns)),
            parts=(PlannedCost(name=record_name(item.name, spec.label(spec.period)), cost=cost),),
            bounding=SeriesBounding(relation=said),
            spec=spec,
        )

    def scan(self, plan: ReleasePlan[SeriesSpec]) -> Scan[SeriesExact]:
        spec = plan.spec
        item, relation = spec.item, spec.release.relation
        if spec.refusal is not None:  # nothing due: aborted at no cost, one line
            raise InputError(spec.refusal)
        # The run holds its reservation now: refuse (aborted, nothing drawn) if another run
        # of the series got in between its plan and here.
        check_alone(spec.ledger, spec.dataset, item.name, spec.config_hash, spec.published.periods)
        return scan_one(
            SeriesAggregate(
                name=item.name,
                date=item.period.column,
                per=item.period.per,
                first=ordinal(item.start, item.period.per),
                last=spec.period,
                keys=spec.keys,
                sums=tuple(
                    ("", 1.0) if isinstance(m, str) else (m.sum, s)
                    for m, s in zip(item.measures, spec.scales, strict=True)
                ),
                unit=spec.unit,
                max_periods=relation.max_periods_per_unit,
                max_rows=relation.max_rows_per_unit,
            )
        )

    def execute(
        self, plan: ReleasePlan[SeriesSpec], exact: SeriesExact, context: ExecuteContext
    ) -> Executed:
        from dppub.dp.pipeline.kinds.series.publishing import publish_run, write_figures

        spec = plan.spec
        folder = context.out.release_dir(plan.name)
        state, frame = publish_run(spec, exact)
        # The CSV files are rounded to the digits the noise supports; the state keeps full
        # precision (the next run reads it, never the CSV files).
        write_figures(folder, spec, frame)
        (folder / "state.json").write_text(state.to_json())
        # The staging area hashes the same files into the ledger's output_hash.
        save_copy(folder, spec.ledger, spec.dataset, spec.item.name)
        release = spec.release
        before = spec.after
        n = len(spec.item.measures)
        first = 0 if before is None else before + 1
        result = SeriesResult(
            series=spec.item.name,
            period=spec.label(spec.period),
            published=tuple(spec.label(p) for p in range(first, spec.period + 1)),
            periods=state.periods,
            horizon=spec.item.horizon,
            strategy=release.strategy.name,
            noise=spec.item.noise,
            std=release.std,
            sensitivity=release.sensitivity,
            relation=release.relation.describe,
            revisions=spec.item.revisions,
            budget=spec.item.budget,
            loss=spec.cumulative,
            figures=len(frame),
            state_digest=state.digest,
            zcdp_rho=(
                None
                if spec.item.noise == "laplace"
                else n * (release.loss(spec.period) - release.loss(before))
            ),
            accounting=(
                None
                if spec.item.noise == "laplace"
                else "zCDP: the series' rho converted to (epsilon, delta)"
            ),
        )
        return Executed(result=result, sensitivity=release.sensitivity)

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = summary.result_as(SeriesResult)
        caught = "" if len(r.published) == 1 else f" (caught up: {', '.join(r.published)})"
        return [
            f"Series `{r.series}`: period {r.period}{caught}, {len(r.periods)} of {r.horizon} "
            f"periods published so far under one budget ({r.noise} noise, strategy "
            f"{r.strategy}, {'revised' if r.revisions else 'never revised'}); the series has "
            f"spent {r.loss:.4g} of its {'rho' if r.noise == 'gaussian' else 'epsilon'} "
            f"{r.budget:g}. This run's figures with standard errors and 95% intervals in "
            "`figures.csv`, every figure published so far in `history.csv`, each rounded to "
            "the digits its noise supports (two significant digits of its standard error, "
            "counts to integers; `precision` in `release.json`); `state.json` keeps full "
            "precision for the next period's estimates."
        ]

    def describe(self, plan: ReleasePlan[SeriesSpec]) -> SeriesFacts:
        spec = plan.spec
        item = spec.item
        workload = spec.release.workload
        rmse = expected_rmse(spec.choice, spec.release, item)
        bounds = block_bounds(item, spec.release.relation)
        share = item.budget / len(item.measures)
        unit = 1.0 / (2.0 * share) if item.noise == "gaussian" else 1.0 / share**2
        figures = []
        for name, _ in workload.blocks:
            rows = rmse[workload.block(name)]
            figures.append(
                FigureFacts(
                    figure=name,
                    rmse=float(np.sqrt(np.mean(rows**2))),
                    bound_rmse=float(np.sqrt(bounds[name] * unit / len(rows))),
                )
            )
        return SeriesFacts(
            nothing_due=spec.refusal,
            series=item.name,
            period=spec.label(spec.period),
            last_published=None if spec.after is None else spec.label(spec.after),
            horizon=item.horizon,
            relation=spec.release.relation.describe,
            strategy=spec.choice.strategy.name,
            candidates={row.strategy: row.total for row in spec.choice.table},
            svd_bound=spec.choice.bound,
            budget=item.budget,
            spent_after=spec.cumulative,
            charge_epsilon=plan.cost.epsilon,
            figures=tuple(figures),
        )

    def plan_text(self, facts: PlanFacts) -> str:
        f = facts_as(facts, SeriesFacts)
        if f.nothing_due:
            return f"  nothing due: {f.nothing_due}"
        lines = [
            f"  series period {f.period} ({f.relation}), strategy {f.strategy} chosen by "
            f"expected error; after it the series has spent {f.spent_after:.4g} of {f.budget:g}"
        ]
        for figure in f.figures:
            lines.append(
                f"    {figure.figure}: expected RMSE {figure.rmse:.4g} over the horizon "
                f"(SVD bound {figure.bound_rmse:.4g})"
            )
        return "\n".join(lines)
