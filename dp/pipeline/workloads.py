"""Release kind ``workloads``: linear-query workloads answered through the matrix mechanism.

The histogram over the declared domain comes from the run's shared scan; the strategy is chosen
data-independently by expected error (or fixed in the config), measured with Laplace noise of
scale ``||A||_1 / epsilon`` and reconstructed (post-processing only).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from dp import matrix
from dp.engine import Aggregate, HistogramAggregate, TableSource
from dp.errors import ConfigError
from dp.histogram import Axis
from dp.matrix.cache import cached_select_strategy
from dp.matrix.reconstruct import check_reconstruction
from dp.pipeline.config import NAME_PATTERN, Cost, Model, PipelineConfig
from dp.pipeline.domains import histogram_axis
from dp.pipeline.kinds import JSON, Executed, ReleasePlan, ReleaseSummary
from dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_QUERIES, check_at_most
from dp.pipeline.units import bounding_for
from dp.publication import Staging

__all__ = ["AxisModel", "WorkloadKind", "WorkloadModel", "WorkloadSpec"]


class AxisModel(Model):
    """One histogram axis: bins of a numeric column, categories, or a fixed hierarchy level."""

    column: str
    bins: int | None = Field(default=None, ge=1, le=MAX_DOMAIN_CELLS)
    level: int | None = Field(default=None, ge=0)


class WorkloadModel(Cost):
    name: str = Field(pattern=NAME_PATTERN)
    attributes: list[AxisModel] = Field(min_length=1)
    workload: Literal["identity", "total", "prefix", "all_range", "marginals"] = "identity"
    marginal_k: int = Field(default=1, ge=1)
    strategy: Literal["auto", "identity", "hierarchical"] = "auto"
    reconstruction: Literal["nonneg-l1", "least-squares", "l1"] = "nonneg-l1"


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

    def chosen(self) -> matrix.Strategy:
        """The strategy to measure: the fixed one, or the best by expected error (remembered
        on disk across processes: it depends on the workload only)."""
        return self.strategy or cached_select_strategy(self.workload)


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


class WorkloadKind:
    """See the module docstring."""

    section = "workloads"
    label = "workload"
    many = True
    model = WorkloadModel

    def plan(self, cfg: PipelineConfig, item: WorkloadModel) -> ReleasePlan:
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
        )
        return ReleasePlan(
            name=item.name,
            kind=self.label,
            mechanism="laplace",
            cost=item.cost,
            is_dp=True,
            bounding=bounding_for(cfg),
            columns=tuple(a.column for a in axes),
            spec=spec,
            facts={"queries": int(W.shape[0]), "cells": int(W.shape[1])},
        )

    def aggregates(self, plan: ReleasePlan) -> Sequence[Aggregate[Any, Any]]:
        return [HistogramAggregate(tuple(plan.spec.axes))]

    def describe(self, plan: ReleasePlan) -> dict[str, JSON]:
        """Data-independent accuracy: the strategy, the expected per-query RMSE of the
        least-squares answers, and the SVD lower bound for any strategy."""
        spec: WorkloadSpec = plan.spec
        W = spec.workload
        strategy = spec.chosen()
        eps = plan.mechanism_cost.epsilon  # row-level: the unit bound's price is in the error
        out: dict[str, JSON] = {
            "strategy": strategy.name,
            "expected_rmse": matrix.expected_rmse(W, strategy, eps),
            "svd_bound_rmse": matrix.svd_bound_rmse(W, eps),
        }
        if plan.bounding.unit is not None:
            out["expected_rmse_one_row"] = matrix.expected_rmse(W, strategy, plan.cost.epsilon)
        return out

    def execute(
        self, plan: ReleasePlan, exact: Sequence[Any], data: TableSource, out: Staging
    ) -> Executed:
        spec: WorkloadSpec = plan.spec
        result = matrix.answer(
            spec.workload,
            exact[0],
            epsilon=plan.mechanism_cost.epsilon,
            strategy=spec.chosen(),
            reconstruction=spec.reconstruction,
        )
        answers = pd.DataFrame({"query": np.arange(len(result.answers)), "answer": result.answers})
        out.write_frame(plan.name, "answers.parquet", answers)
        cells = list(itertools.product(*(a.labels for a in spec.axes)))
        estimate = pd.DataFrame(cells, columns=[a.column for a in spec.axes])
        estimate["estimate"] = result.estimate
        out.write_frame(plan.name, "estimate.parquet", estimate)
        details = {
            "workload": spec.kind,
            "strategy": str(result.strategy),
            "reconstruction": spec.reconstruction,
            "queries": len(result.answers),
            "cells": len(result.estimate),
            "expected_rmse": float(result.expected_rmse),
            "svd_bound_rmse": float(result.svd_bound_rmse),
        }
        # The unit-level sensitivity: a unit moves up to m cells' counts by one each.
        unit_sensitivity = plan.bounding.rows_per_unit * float(result.sensitivity)
        return Executed(details=details, sensitivity=unit_sensitivity)

    def report(self, summary: ReleaseSummary) -> list[str]:
        d = summary.details
        return [
            f"{d['queries']} queries over {d['cells']} cells; strategy `{d['strategy']}`, "
            f"reconstruction `{d['reconstruction']}`. Expected per-query RMSE of the "
            f"least-squares answers: {d['expected_rmse']:.4g} (SVD lower bound for any "
            f"strategy: {d['svd_bound_rmse']:.4g})."
        ]
