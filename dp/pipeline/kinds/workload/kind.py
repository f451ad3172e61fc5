"""Release kind workload (section ``workloads:``): linear-query workloads answered through
the matrix mechanism.

The histogram over the declared domain comes from the run's shared scan; the strategy is chosen
data-independently by expected error (or fixed in the config), measured with Laplace noise of
scale ``||A||_1 / epsilon`` -- or, with ``noise: gaussian`` (or a ``rho`` budget), the analytic
Gaussian mechanism on its L2 sensitivity at ``(epsilon, delta)`` -- and reconstructed
(post-processing only). The answers are published with their labels and 95% intervals
(:mod:`dp.matrix.intervals`, post-processing too) in ``answers.parquet`` and ``answers.csv``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp import matrix
from dppub.dp.axes import Axis
from dppub.dp.budget import PrivacyCost
from dppub.dp.calibration import zcdp_gaussian_sigma
from dppub.dp.engine import HistogramAggregate
from dppub.dp.errors import ConfigError
from dppub.dp.matrix.cache import cached_select_strategy
from dppub.dp.matrix.intervals import answer_intervals
from dppub.dp.matrix.labels import query_labels
from dppub.dp.matrix.least_squares_intervals import AnswerIntervals
from dppub.dp.matrix.reconstruct import check_reconstruction
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import histogram_axis
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
from dppub.dp.pipeline.kinds.workload.facts import WorkloadFacts
from dppub.dp.pipeline.kinds.workload.item import WorkloadModel
from dppub.dp.pipeline.kinds.workload.result import MAX_INTERVAL_CELLS, NO_INTERVALS, WorkloadResult
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_QUERIES, check_at_most
from dppub.dp.pipeline.units import bounding_for

__all__ = ["WorkloadKind", "WorkloadSpec"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class WorkloadSpec:
    """What answering a workload needs: its domain, queries and (optional fixed) strategy."""

    kind: str
    """The workload's name in the config (``identity``, ``prefix``, ``marginals``, ...)."""
    marginal_k: int
    axes: tuple[Axis, ...]
    workload: matrix.Workload
    strategy: matrix.Strategy | None
    """None: chosen by expected error (data-independent) when answering."""
    reconstruction: str
    noise: str = "laplace"
    rho: float | None = None
    """A zCDP budget: the Gaussian noise is calibrated to it (``sigma = m L2 / sqrt(2 rho)``)."""

    def chosen(self) -> matrix.Strategy:
        """The strategy to measure: the fixed one, or the best by expected error (remembered
        on disk across processes: it depends on the workload and the noise only)."""
        return self.strategy or cached_select_strategy(self.workload, noise=self.noise)

    def expected_rmse(
        self, cost: PrivacyCost, strategy: matrix.Strategy | None = None, group: int = 1
    ) -> float:
        """Expected per-query RMSE of the least-squares answers at ``cost`` when neighbours
        differ by up to ``group`` rows (``strategy``: :meth:`chosen`, if the caller has it)."""
        a = strategy or self.chosen()
        if self.rho is not None:
            sigma = zcdp_gaussian_sigma(l2_sensitivity=group * a.l2_sensitivity, rho=self.rho)
            return sigma * math.sqrt(a.squared_error_factor(self.workload) / self.workload.m)
        if self.noise == "gaussian":
            return matrix.expected_rmse_gaussian(
                self.workload, a, epsilon=cost.epsilon, delta=cost.delta, group=group
            )
        return matrix.expected_rmse(self.workload, a, cost.epsilon / group)


def workload_operator(w: WorkloadModel, axes: Sequence[Axis]) -> tuple[Any, Any | None]:
    """``(W, A)``: the workload and the strategy (None: chosen by expected error)."""
    sizes = [a.size for a in axes]
    n = int(np.prod(sizes))
    W: matrix.Workload
    if w.workload == "identity":
        W = matrix.identity(n)
    elif w.workload == "total":
        W = matrix.total(n)
    elif w.workload == "marginals":
        if w.marginal_k > len(axes):
            raise ConfigError(
                f"workload {w.name!r}: marginal_k={w.marginal_k} exceeds {len(axes)} attribute(s)"
            )
        W = matrix.marginals(tuple(sizes), w.marginal_k)
    else:
        make = {"prefix": matrix.prefix, "all_range": matrix.all_range}[w.workload]
        W = make(sizes[0]) if len(sizes) == 1 else matrix.kron(*(make(s) for s in sizes))
    if w.strategy == "auto":
        return W, None
    if len(sizes) != 1:
        raise ConfigError(
            f"workload {w.name!r}: strategy {w.strategy!r} is for one attribute; use 'auto'"
        )
    if w.strategy == "identity":
        return W, matrix.identity_strategy(n)
    return W, matrix.hierarchical(n, 2)


def _interval_notes(intervals: AnswerIntervals | None, n: int) -> list[str]:
    """Per answer: ``conservative`` where non-negativity moved it and its interval reaches the
    least-squares interval's end (covering more than its level), ``nominal`` for the other
    intervals, ``none`` without intervals (never empty: a CSV reader would read it as missing)."""
    if intervals is None:
        return ["none"] * n
    if intervals.widened is None:
        return ["nominal"] * n
    return ["conservative" if w else "nominal" for w in intervals.widened.tolist()]


def workload_intervals(spec: WorkloadSpec, result: matrix.WorkloadAnswer) -> AnswerIntervals | None:
    """The answers' 95% intervals, or None where they are not computed. Whether, how and with
    how many replicates follows from the workload's sizes only, never from a clock
    (:func:`dp.matrix.intervals.bootstrap_replicates`)."""
    if spec.workload.n > MAX_INTERVAL_CELLS:
        return None
    return answer_intervals(
        spec.workload,
        result.measured,
        result.estimate,
        noise_scale=result.noise_scale,
        reconstruction=spec.reconstruction,
        noise=spec.noise,
        least_squares=result.least_squares,
    )


Histogram = npt.NDArray[np.float64]
"""The exact counts over the workload's domain, flattened in C order."""


class WorkloadKind(ReleaseKind[WorkloadModel, WorkloadSpec, Histogram]):
    """See the module docstring."""

    section = "workloads"
    label = "workload"
    many = True
    model = WorkloadModel
    result = WorkloadResult
    facts = WorkloadFacts
    plots = "workload_plot"
    previews = (
        Preview(
            file="answers.csv",
            columns=("label", "answer", "std_error", "ci_low", "ci_high"),
            what=": the answers, with their standard errors and intervals",
            error=("std_error",),
            rounded=("answer", "std_error", "ci_low", "ci_high"),
        ),
    )

    def plan(self, cfg: PipelineConfig, item: WorkloadModel) -> ReleasePlan[WorkloadSpec]:
        axes = tuple(
            histogram_axis(cfg, item.name, a.column, bins=a.bins, level=a.level)
            for a in item.attributes
        )
        cells = math.prod(a.size for a in axes)
        check_at_most(f"workload {item.name!r}: the histogram's cells", cells, MAX_DOMAIN_CELLS)
        W, A = workload_operator(item, axes)
        check_at_most(f"workload {item.name!r}: the queries", int(W.shape[0]), MAX_QUERIES)
        check_reconstruction(W, item.reconstruction)  # a size it cannot do: refused now
        spec = WorkloadSpec(
            kind=item.workload,
            marginal_k=item.marginal_k,
            axes=axes,
            workload=W,
            strategy=A,
            reconstruction=item.reconstruction,
            noise=item.noise,
            rho=item.rho,
        )
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism=item.noise,
            cost=item.cost,
            is_dp=True,
            bounding=bounding_for(cfg),
            columns=tuple(a.column for a in axes),
            spec=spec,
        )

    def scan(self, plan: ReleasePlan[WorkloadSpec]) -> Scan[Histogram]:
        return scan_one(HistogramAggregate(tuple(plan.spec.axes)))

    def describe(self, plan: ReleasePlan[WorkloadSpec]) -> WorkloadFacts:
        """Data-independent accuracy: the strategy, the expected per-query RMSE of the
        least-squares answers, and the SVD lower bound for any strategy."""
        spec = plan.spec
        m = plan.bounding.rows_per_unit
        strategy = spec.chosen()
        queries, cells = spec.workload.shape
        return WorkloadFacts(
            queries=int(queries),
            cells=int(cells),
            strategy=strategy.name,
            noise=spec.noise,
            expected_rmse=spec.expected_rmse(plan.cost, strategy, group=m),
            svd_bound_rmse=matrix.svd_bound_rmse(spec.workload, plan.cost.epsilon / m),
            expected_rmse_one_row=None
            if plan.bounding.unit is None
            else spec.expected_rmse(plan.cost, strategy),
        )

    def plan_text(self, facts: PlanFacts) -> str:
        f = facts_as(facts, WorkloadFacts)
        text = (
            f"  {f.queries} queries, {f.strategy}, {f.noise} noise: expected RMSE "
            f"{f.expected_rmse:.4g} (SVD bound {f.svd_bound_rmse:.4g})"
        )
        if f.expected_rmse_one_row is not None:
            text += f"; {f.expected_rmse_one_row:.4g} if no unit had more than one row"
        return text

    def execute(
        self, plan: ReleasePlan[WorkloadSpec], exact: Histogram, context: ExecuteContext
    ) -> Executed:
        out = context.out
        spec = plan.spec
        # At the unit-level cost, with the sensitivity of m rows of one unit: for Laplace noise
        # the same scale as group privacy, for Gaussian noise less.
        result = matrix.answer(
            spec.workload,
            exact,
            epsilon=plan.cost.epsilon,
            delta=plan.cost.delta,
            noise=spec.noise,
            strategy=spec.chosen(),
            reconstruction=spec.reconstruction,
            group=plan.bounding.rows_per_unit,
            rho=spec.rho,
        )
        # Post-processing of the released estimate and public facts only.
        intervals = workload_intervals(spec, result)
        nan = np.full(len(result.answers), np.nan)
        answers = pd.DataFrame(
            {
                "query": np.arange(len(result.answers)),
                "label": query_labels(spec.kind, spec.axes, marginal_k=spec.marginal_k),
                "answer": result.answers,
                "std_error": nan if intervals is None else intervals.std_error,
                "ci_low": nan if intervals is None else intervals.ci_low,
                "ci_high": nan if intervals is None else intervals.ci_high,
                "interval": _interval_notes(intervals, len(result.answers)),
            }
        )
        out.write_table(plan.name, "answers", answers)
        cells = list(itertools.product(*(a.labels for a in spec.axes)))
        estimate = pd.DataFrame(cells, columns=[a.column for a in spec.axes])
        estimate["estimate"] = result.estimate
        out.write_frame(plan.name, "estimate.parquet", estimate)
        rho = None
        if spec.noise == "gaussian":  # the unit-level zCDP the Gaussian measurement satisfies
            rho = (result.sensitivity / result.noise_scale) ** 2 / 2.0
        accounting = None
        if spec.rho is not None:
            accounting = (
                f"zCDP: rho = {spec.rho:g} (Gaussian sigma = L2 sensitivity / sqrt(2 rho), "
                f"sigma = {result.noise_scale:.6g}); charged as its (epsilon, delta) conversion"
            )
        released = WorkloadResult(
            workload=spec.kind,
            strategy=result.strategy,
            reconstruction=spec.reconstruction,
            queries=len(result.answers),
            cells=len(result.estimate),
            expected_rmse=float(result.expected_rmse),
            svd_bound_rmse=float(result.svd_bound_rmse),
            noise=spec.noise,
            noise_scale=float(result.noise_scale),
            **(NO_INTERVALS if intervals is None else intervals.describe()),
            zcdp_rho=rho,
            accounting=accounting,
        )
        # The unit-level sensitivity: a unit moves up to m cells' counts by one each.
        return Executed(result=released, sensitivity=float(result.sensitivity))

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = summary.result_as(WorkloadResult)
        intervals = (
            f"Each answer has a {100 * r.interval_level:g}% interval ({r.interval_method})"
            if r.interval_level is not None
            else f"No intervals ({r.interval_method})"
        )
        return [
            f"{r.queries} queries over {r.cells} cells; strategy `{r.strategy}`, "
            f"{r.noise} noise, reconstruction `{r.reconstruction}`. "
            f"Expected per-query RMSE of the least-squares answers: {r.expected_rmse:.4g} "
            f"(SVD lower bound for any strategy: {r.svd_bound_rmse:.4g}). {intervals} in "
            "`answers.csv`."
        ]
