"""Release kind regression (section ``regressions:``): DP linear, logistic and multi-task
trace regression.

Every bound comes from the declared columns: numeric features from their bounds, category
features one-hot from their declared categories (a reference level dropped), so sensitivities
never depend on the data. Linear and trace models (and logistic with the functional mechanism)
fit from exact sufficient statistics folded in the run's shared scan; objective perturbation
evaluates its Newton iterates with one pass each through the engine.

Every model also publishes ``coefficients.parquet`` and ``coefficients.csv`` (``task`` for a
trace regression, ``feature``, ``coefficient``, ``std_error``, ``ci_low``, ``ci_high``): 95%
intervals by a parametric bootstrap of the noisy statistics the model released
(:mod:`dp.regression.uncertainty`), post-processing that spends no budget. Objective
perturbation releases only its minimiser: its table has the coefficients and empty intervals,
and the release details say why.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from pydantic import JsonValue

from dppub.dp.budget import PlannedCost, PrivacyCost
from dppub.dp.engine import StatisticsAggregate, logistic_sums_stream
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import declared_columns
from dppub.dp.pipeline.kinds.base import (
    JSON,
    EstimatorSpec,
    ExecuteContext,
    Executed,
    PlanFacts,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
    as_str,
    as_strs,
    facts_as,
    scan_each,
)
from dppub.dp.pipeline.kinds.previews import Preview
from dppub.dp.pipeline.kinds.regression.facts import RegressionFacts
from dppub.dp.pipeline.kinds.regression.item import RegressionModel
from dppub.dp.pipeline.kinds.regression.result import RegressionResult
from dppub.dp.pipeline.kinds.release_file import PrivacyUnit
from dppub.dp.pipeline.units import bounding_for, unit_statement
from dppub.dp.regression import (
    FeatureEncoding,
    LinearRegression,
    LogisticRegression,
    TraceRegression,
)
from dppub.dp.regression.linear import LinearFit
from dppub.dp.regression.statistics import SufficientStatistics
from dppub.dp.regression.uncertainty import (
    DEFAULT_REPLICATES,
    CoefficientTable,
    Fit,
    coefficient_table,
    point_table,
)

__all__ = ["RegressionKind"]

# Bootstrap replicates per model: a trace-regression replicate is a cvxpy solve (~50 ms), and
# 40 of them cover 0.94 on the demo (bench/intervals.py, bench/RESULTS.md); the others are
# closed-form solves (< 5 ms).
_REPLICATES = {"linear": DEFAULT_REPLICATES, "logistic": DEFAULT_REPLICATES, "trace": 40}
_MECHANISM = {
    "auto": "linear-auto",
    "functional": "functional-laplace",
    "adassp": "adassp-gaussian",
    "objective": "objective-perturbation",
}


Estimator = LinearRegression | LogisticRegression | TraceRegression


def _estimator(cfg: PipelineConfig, r: RegressionModel, cost: PrivacyCost) -> Estimator:
    """The configured estimator (not yet fitted) at the row-level ``cost``; every bound comes
    from the declaration."""
    declared_columns(cfg, [*r.features, r.target, r.tasks])
    schema = cfg.table_schema
    intercept = r.fit_intercept and r.model != "trace"
    encoding = FeatureEncoding.from_schema(schema, r.features, fit_intercept=intercept)
    y_bounds = schema[r.target].bounds
    if r.model in ("linear", "trace") and y_bounds is None:
        raise ConfigError(f"regression {r.name!r}: target {r.target!r} must be numeric")
    if r.model == "linear":
        return LinearRegression(
            cost.epsilon,
            encoding=encoding,
            bounds_y=y_bounds,
            fit_intercept=r.fit_intercept,
            method=r.resolved_method,
            delta=cost.delta,
        )
    if r.model == "logistic":
        cats = schema[r.target].categories
        if r.positive is not None and (not cats or r.positive not in cats):
            raise ConfigError(
                f"regression {r.name!r}: positive {r.positive!r} is not a category of {r.target!r}"
            )
        return LogisticRegression(
            cost.epsilon,
            encoding=encoding,
            fit_intercept=r.fit_intercept,
            method=r.resolved_method,
        )
    labels = _task_labels(cfg, r)
    return TraceRegression(cost.epsilon, n_tasks=len(labels), encoding=encoding, bounds_y=y_bounds)


def outcome(r: RegressionModel) -> dict[str, JSON]:
    """What ``y = 1`` means for a logistic model (every file and the report state it)."""
    if r.positive is not None:
        return {"column": r.target, "positive": r.positive, "y=1": f"{r.target} = {r.positive}"}
    return {"column": r.target, "threshold": r.threshold, "y=1": f"{r.target} > {r.threshold:g}"}


def _task_labels(cfg: PipelineConfig, r: RegressionModel) -> tuple[str, ...]:
    labels = cfg.table_schema[r.tasks or ""].categories
    if not labels:
        raise ConfigError(f"regression {r.name!r}: tasks column {r.tasks!r} needs categories")
    return labels


RegressionSpec = EstimatorSpec[RegressionModel, Estimator]
"""The item and its configured estimator (:class:`EstimatorSpec`)."""


Statistics = tuple[list[SufficientStatistics], ...]
"""The exact sufficient statistics (one per task), or nothing for objective perturbation (it
reads the data once per Newton iterate, in :meth:`RegressionKind.execute`)."""


class RegressionKind(ReleaseKind[RegressionModel, RegressionSpec, Statistics]):
    """See the module docstring."""

    section = "regressions"
    label = "regression"
    many = True
    model = RegressionModel
    result = RegressionResult
    facts = RegressionFacts
    plots = "regression_plot"
    previews = (
        Preview(
            file="coefficients.csv",
            rows=12,
            what=": the model's coefficients",
            error=("std_error", "surrogate_std_error"),
            rounded=(
                "coefficient",
                *(
                    f"{p}{c}"
                    for p in ("", "surrogate_")
                    for c in ("std_error", "ci_low", "ci_high")
                ),
            ),
        ),
    )

    def plan(self, cfg: PipelineConfig, item: RegressionModel) -> ReleasePlan[RegressionSpec]:
        bounding = bounding_for(cfg, item.tasks)
        estimator = _estimator(cfg, item, bounding.cost(item.cost))
        parts: tuple[PlannedCost, ...] = ()
        if item.tasks is not None:
            parts = tuple(
                PlannedCost(name=f"{item.name}[{t}]", cost=item.cost, partition=(item.tasks, t))
                for t in _task_labels(cfg, item)
            )
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism=_MECHANISM[item.resolved_method],
            cost=item.cost,
            is_dp=True,
            bounding=bounding,
            columns=declared_columns(cfg, [*item.features, item.target, item.tasks]),
            parts=parts,
            spec=RegressionSpec(item=item, estimator=estimator),
        )

    def describe(self, plan: ReleasePlan[RegressionSpec]) -> RegressionFacts:
        estimator = plan.spec.estimator
        if not isinstance(estimator, LinearRegression):
            return RegressionFacts()
        return RegressionFacts.model_validate(estimator.plan())

    def plan_text(self, facts: PlanFacts) -> str:
        method = facts_as(facts, RegressionFacts).method
        return "" if method is None else f"  method {method}"

    def scan(self, plan: ReleasePlan[RegressionSpec]) -> Scan[Statistics]:
        item, estimator = plan.spec.item, plan.spec.estimator
        if item.model == "logistic" and item.resolved_method == "objective":
            return scan_each([])  # one pass per Newton iterate, in execute
        response = None
        if item.threshold is not None or item.positive is not None:
            if not isinstance(estimator, LogisticRegression):
                raise ConfigError(
                    f"regression {item.name!r}: positive/threshold need a logistic model"
                )
            response = estimator.response
        labels = tuple(estimator_labels(plan)) if item.tasks is not None else ()
        return scan_each(
            [
                StatisticsAggregate(
                    features=tuple(item.features),
                    target=item.target,
                    design=estimator.design(),
                    response=response,
                    threshold=item.threshold,
                    positive=item.positive,
                    by=item.tasks,
                    labels=labels,
                )
            ]
        )

    def execute(
        self, plan: ReleasePlan[RegressionSpec], exact: Statistics, context: ExecuteContext
    ) -> Executed:
        data, out = context.data, context.out
        item, estimator = plan.spec.item, plan.spec.estimator
        fit: Fit
        if isinstance(estimator, TraceRegression):
            fit = estimator.fit_statistics(exact[0])
        elif exact:
            fit = estimator.fit_statistics(exact[0][0])
        elif isinstance(estimator, LogisticRegression):  # objective perturbation
            design = estimator.design()

            def sums(w: np.ndarray) -> Any:
                return logistic_sums_stream(
                    data.path,
                    data.schema,
                    features=list(item.features),
                    target=item.target,
                    design=design,
                    w=w,
                    threshold=item.threshold,
                    positive=item.positive,
                    backend=data.backend,
                )

            fit = estimator.fit_loss_sums(sums)
        else:
            raise InvariantError(f"regression {plan.name!r}: no statistics from the scan")
        # The estimator ran at the row-level cost on the bounded rows: the release states the
        # unit-level cost, its neighbours and the bound (group privacy) everywhere.
        statement = unit_statement(plan.bounding, plan.cost)
        model = {
            **fit.to_dict(),
            **statement,
            **_outcome_of(item),
            "target": item.target,
            "columns": list(item.features),
        }
        if item.tasks is not None:
            model["tasks"] = {"column": item.tasks, "labels": list(estimator_labels(plan))}
        out.write_json(plan.name, "model.json", model)
        features = list(as_strs(model.get("features", item.features)))
        table = _table(item, fit, features, plan)
        frame = table.to_frame()
        if item.model == "logistic":  # what y = 1 means, in the CSV too
            frame.insert(0, "outcome", as_str(outcome(item)["y=1"]))
        frame.attrs = {"dppub": {**statement, **_outcome_of(item), **table.describe()}}
        out.write_table(plan.name, "coefficients", frame)
        # zCDP's group privacy: m rows of a unit cost m^2 times the row-level rho.
        row_rho = fit.zcdp_rho if isinstance(fit, LinearFit) else None
        m = plan.bounding.rows_per_unit
        unit = statement.get("privacy_unit")
        result = RegressionResult(
            model=item.model,
            target=item.target,
            features=tuple(features),
            tasks=len(plan.parts),
            zcdp_rho=None if row_rho is None else m * m * float(row_rho),
            **table.describe(),
            outcome=cast("dict[str, JsonValue]", outcome(item))
            if item.model == "logistic"
            else None,
            privacy_unit=PrivacyUnit.model_validate(unit) if isinstance(unit, dict) else None,
        )
        return Executed(result=result)

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = summary.result_as(RegressionResult)
        features = ", ".join(f"`{f}`" for f in r.features)
        parts = f"; {r.tasks} disjoint tasks" if r.tasks else ""
        lines = [
            f"{r.model.capitalize()} regression of `{r.target}` on {features} "
            f"({summary.mechanism}{parts}); bounds from the config, parameters and per-part "
            "sensitivities in `model.json`."
        ]
        if r.outcome is not None:
            lines.append(f"Outcome: y = 1 means `{r.outcome['y=1']}` (else y = 0).")
        if r.interval_level is not None:
            columns = ", ".join(f"`{c}`" for c in r.interval_columns)
            n_dropped = r.bootstrap_replicates_dropped
            dropped = f" ({n_dropped} more left out: not solved exactly)" if n_dropped else ""
            lines.append(
                f"Coefficients with standard errors and {r.interval_level:.0%} intervals "
                f"({columns}) in `coefficients.csv` (and `.parquet`): {r.interval_method}, "
                f"{r.bootstrap_replicates} replicates{dropped}, no extra budget. The "
                f"intervals are for {r.interval_covers}."
            )
        else:
            lines.append(
                "Coefficients in `coefficients.csv` (and `.parquet`) without intervals "
                f"({r.interval_method}); method `functional` publishes intervals."
            )
        return lines


def _table(
    item: RegressionModel,
    fit: Fit,
    features: list[str],
    plan: ReleasePlan[RegressionSpec],
) -> CoefficientTable:
    """The fit's coefficient table, from the statistics it released (module doc)."""
    tasks = estimator_labels(plan) if item.tasks is not None else None
    if fit.released is None:  # objective perturbation: nothing but the minimiser
        return point_table(fit, features=features, tasks=tasks)
    return coefficient_table(
        fit,
        features=features,
        tasks=tasks,
        replicates=_REPLICATES[item.model],
    )


def _outcome_of(item: RegressionModel) -> dict[str, JSON]:
    return {"outcome": outcome(item)} if item.model == "logistic" else {}


def estimator_labels(plan: ReleasePlan[RegressionSpec]) -> list[str]:
    """A trace regression's task labels, in declared order (from its planned parts)."""
    return [str(p.partition[1]) for p in plan.parts if p.partition is not None]
