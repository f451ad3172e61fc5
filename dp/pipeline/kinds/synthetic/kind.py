"""Release kind synthetic (section ``synthetic:``): DP synthetic microdata by AIM.

The declared columns become histogram axes (categories, numeric bins, or a fixed hierarchy
level; never from the data). The exact counts of every workload marginal -- and the one-way
marginal of each column no workload marginal covers -- come from the run's one shared scan
(:class:`dp.engine.MarginalsAggregate`); AIM's smaller candidates are sums of them
(:mod:`dp.synthetic`). AIM runs under rho-zCDP, ``rho = cdp_rho(epsilon, delta)``, and the
release is charged ``(epsilon, delta)``. With a privacy unit of at most ``m`` rows per unit a
neighbour moves each marginal by at most ``m`` (L1 and L2), so every sensitivity is ``m``.

Published: ``synthetic.parquet`` / ``.csv`` (the sampled rows, decoded to declared values:
categories, the integer of a one-per-integer bin, a numeric bin's midpoint, a hierarchy
level's label), ``measurements.parquet`` (the noisy marginals AIM measured, with their noise)
and ``utility.parquet`` / ``.csv``: per workload marginal, the synthetic table's normalized L1
error *estimated from public values only* (never from the data): a parametric bootstrap
(:mod:`dp.synthetic.utility`) of the noise's error through the model, the fit's and the
sampling error of the published rows, as a range and its middle; and, where a measurement
covers the marginal, the table's distance to it.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.axes import Axis
from dppub.dp.engine import MarginalsAggregate
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import declared_columns, histogram_axis
from dppub.dp.pipeline.kinds.base import (
    ExecuteContext,
    Executed,
    PlanFacts,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
    facts_as,
)
from dppub.dp.pipeline.kinds.previews import Preview
from dppub.dp.pipeline.kinds.release_file import UnitGuarantee
from dppub.dp.pipeline.kinds.synthetic.error_estimates import (
    BIAS,
    REPLICATES,
    FloatArray,
    estimated_errors,
    marginal_label,
    utility_frame,
)
from dppub.dp.pipeline.kinds.synthetic.facts import SyntheticFacts
from dppub.dp.pipeline.kinds.synthetic.item import (
    DEFAULT_MAX_ROWS,
    MarginalsWorkload,
    SyntheticModel,
    count_share,
)
from dppub.dp.pipeline.kinds.synthetic.result import SyntheticResult
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_SYNTHETIC_VALUES, check_at_most
from dppub.dp.pipeline.units import bounding_for, zcdp_unit_statement
from dppub.dp.synthetic import candidates, cdp_rho, run_aim, workload_cliques
from dppub.dp.synthetic.aim import Measurement
from dppub.dp.synthetic.pgm import Clique, check_installed
from dppub.dp.synthetic.utility import bootstrap_errors, table_marginal

__all__ = ["SyntheticKind", "SyntheticSpec"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SyntheticSpec:
    item: SyntheticModel
    axes: tuple[Axis, ...]
    workload: tuple[Clique, ...]
    scanned: tuple[Clique, ...]
    """The marginals the shared scan counts: the workload's, and the one-way marginal of each
    column no workload marginal covers (AIM measures every one-way marginal)."""
    rho: float
    count_share: float | None
    """The noisy row count's share of rho (:func:`count_share`); ``None`` with ``rows``."""

    @property
    def max_rows(self) -> int:
        """The most rows published."""
        return self.item.rows or self.item.max_rows or DEFAULT_MAX_ROWS

    @property
    def domain(self) -> dict[str, int]:
        return {a.column: a.size for a in self.axes}


Exact = dict[Clique, FloatArray]


def _decode(axis: Axis, codes: npt.NDArray[np.int64], column_type: str) -> pd.Series:
    """Codes along ``axis`` as declared values: a category, a level's label, the integer of a
    one-per-integer bin, or a numeric bin's midpoint (rounded down for an int column)."""
    if axis.edges is None:
        labels = np.asarray(axis.labels, dtype=object)[codes]
        if axis.hierarchy is None and column_type == "category":
            return pd.Series(pd.Categorical(labels, categories=list(axis.labels)))
        return pd.Series(labels, dtype=object)
    edges = np.asarray(axis.edges, dtype=np.float64)
    lows, highs = edges[codes], edges[codes + 1]
    if column_type == "int":
        one_per_integer = bool(np.all(np.diff(edges) == 1.0))
        ints = lows if one_per_integer else np.floor((lows + highs) / 2.0)
        return pd.Series(ints.astype(np.int64))
    return pd.Series((lows + highs) / 2.0)


class SyntheticKind(ReleaseKind[SyntheticModel, SyntheticSpec, Exact]):
    """See the module docstring."""

    section = "synthetic"
    label = "synthetic"
    many = True
    model = SyntheticModel
    result = SyntheticResult
    facts = SyntheticFacts
    plots = "synthetic_plot"
    previews = (
        Preview(
            file="utility.csv",
            columns=("marginal", "cells", "error", "error_low", "error_high"),
            what=": the estimated error per workload marginal",
        ),
        Preview(file="synthetic.csv", rows=3, what=": synthetic rows"),
    )

    def plan(self, cfg: PipelineConfig, item: SyntheticModel) -> ReleasePlan[SyntheticSpec]:
        check_installed(f"synthetic {item.name!r}")  # else the run is charged, nothing published
        columns = declared_columns(cfg, item.columns)
        if len(columns) != len(item.columns):
            raise ConfigError(f"synthetic {item.name!r}: a column is listed twice")
        if item.planned_rounds is not None and item.planned_rounds < len(columns):
            raise ConfigError(
                f"synthetic {item.name!r}: planned_rounds must be at least the "
                f"{len(columns)} columns, got {item.planned_rounds}"
            )
        stray = sorted((set(item.bins) | set(item.levels)) - set(columns))
        if stray:
            raise ConfigError(f"synthetic {item.name!r}: bins or levels of unlisted {stray}")
        axes = tuple(
            histogram_axis(cfg, item.name, c, bins=item.bins.get(c), level=item.levels.get(c))
            for c in columns
        )
        wl = item.workload
        workload = workload_cliques(
            columns, wl.marginals if isinstance(wl, MarginalsWorkload) else wl
        )
        domain = {a.column: a.size for a in axes}
        for cl in workload:
            check_at_most(
                f"synthetic {item.name!r}: the cells of marginal {marginal_label(cl)}",
                math.prod(domain[c] for c in cl),
                MAX_DOMAIN_CELLS,
            )
        covered = {c for cl in workload for c in cl}
        scanned = (*workload, *((c,) for c in columns if c not in covered))
        where = f"synthetic {item.name!r}"
        rho = cdp_rho(item.epsilon, item.delta)
        bounding = bounding_for(cfg)
        spec = SyntheticSpec(
            item=item,
            axes=axes,
            workload=workload,
            scanned=scanned,
            rho=rho,
            count_share=None
            if item.rows is not None
            else count_share(rho, bounding.rows_per_unit, item.max_rows or DEFAULT_MAX_ROWS, where),
        )
        # the sampled codes, the published frame and the bootstrap's samples hold rows x columns
        check_at_most(
            f"{where}: rows x columns", spec.max_rows * len(columns), MAX_SYNTHETIC_VALUES
        )
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism="aim",
            cost=item.cost,
            is_dp=True,
            bounding=bounding,
            columns=columns,
            spec=spec,
        )

    def scan(self, plan: ReleasePlan[SyntheticSpec]) -> Scan[Exact]:
        spec = plan.spec
        position = {a.column: i for i, a in enumerate(spec.axes)}
        agg = MarginalsAggregate(
            spec.axes, tuple(tuple(position[c] for c in cl) for cl in spec.scanned)
        )

        def assemble(results: Sequence[object]) -> Exact:
            counts = results[0]
            assert isinstance(counts, tuple)
            return dict(zip(spec.scanned, counts, strict=True))

        return Scan((agg,), assemble)

    def describe(self, plan: ReleasePlan[SyntheticSpec]) -> SyntheticFacts:
        """Data-independent: the workload and the noise part of its expected L1 error per
        marginal (in rows), from all of rho on one marginal to rho split evenly over every
        workload marginal; the model's own error comes on top."""
        spec = plan.spec
        m = plan.bounding.rows_per_unit
        cells = [math.prod(spec.domain[c] for c in cl) for cl in spec.workload]
        mean_cells = sum(cells) / len(cells)
        sigma_one = m / math.sqrt(2.0 * spec.rho)
        low = BIAS * sigma_one * mean_cells
        high = low * math.sqrt(len(spec.workload))
        return SyntheticFacts(
            workload=spec.workload,
            candidates=len(candidates(spec.workload)),
            rho=spec.rho,
            expected_l1_low=low,
            expected_l1_high=high,
            rows=spec.item.rows,
        )

    def plan_text(self, facts: PlanFacts) -> str:
        f = facts_as(facts, SyntheticFacts)
        shown = [marginal_label(cl) for cl in f.workload[:3]]
        more = len(f.workload) - len(shown)
        workload = ", ".join(shown) + (f", ... ({more} more)" if more else "")
        low, high = f.expected_l1_low, f.expected_l1_high
        text = (
            f"  AIM at rho {f.rho:.4g} over {len(f.workload)} workload marginal(s) "
            f"({workload}); {f.candidates} candidates. Expected noise L1 per marginal: "
            f"{low:.4g} to {high:.4g} rows"
        )
        if f.rows is not None:
            text += f" ({low / f.rows:.3g} to {high / f.rows:.3g} of {f.rows} rows)"
        return text

    def execute(
        self, plan: ReleasePlan[SyntheticSpec], exact: Exact, context: ExecuteContext
    ) -> Executed:
        data, out = context.data, context.out
        spec, item = plan.spec, plan.spec.item
        m = float(plan.bounding.rows_per_unit)
        result = run_aim(
            exact,
            spec.domain,
            spec.workload,
            spec.rho,
            sensitivity=m,
            rows=item.rows,
            count_share=spec.count_share or 0.0,
            max_rows=spec.max_rows,
            max_model_size=item.max_model_size,
            max_rounds=item.max_rounds,
            planned_rounds=item.planned_rounds,
            iters=item.iters,
            progress=context.progress,
            should_stop=context.should_stop,
        )
        # From here on: post-processing of the noisy measurements and the sampled rows only.
        types = {c.name: c.type for c in data.schema.columns}
        table = pd.DataFrame(
            {a.column: _decode(a, result.synthetic[a.column], types[a.column]) for a in spec.axes}
        )
        out.write_table(plan.name, "synthetic", table)
        out.write_frame(plan.name, "measurements.parquet", _measurements(spec, result.measurements))
        marginals = {w: table_marginal(result.synthetic, spec.domain, w) for w in spec.workload}
        estimates = estimated_errors(result.measurements, spec.domain, spec.workload, marginals)
        low, high = (
            bootstrap_errors(
                result.model,
                result.measurements,
                spec.domain,
                spec.workload,
                result.rows,
                iters=item.iters,
                replicates=REPLICATES,
                seed=secrets.randbits(32),
                surrogate=result.synthetic,
                warm=warm,
                should_stop=context.should_stop,  # it refits the model, slow for a large one
            )
            for warm in (True, False)
        )
        utility = utility_frame(
            spec.workload, spec.domain, low, high, estimates, float(result.rows)
        )
        out.write_table(plan.name, "utility", utility)
        accounting = (
            f"AIM under rho-zCDP, rho = {spec.rho:.6g} (Canonne-Kamath-Steinke conversion of "
            f"(epsilon, delta) = ({item.epsilon:g}, {item.delta:g})); spent {result.rho_used:.6g} "
            f"in {result.rounds} round(s): exponential-mechanism selections (epsilon^2/8 each) "
            f"and Gaussian measurements (sensitivity {m:g}, 1/(2 (sigma/{m:g})^2) each)"
            + (
                f", and a noisy row count (rho {result.count_rho:.3g})"
                if result.noisy_count is not None
                else ""
            )
        )
        released = SyntheticResult(
            rows=result.rows,
            columns=[a.column for a in spec.axes],
            workload=[list(w) for w in spec.workload],
            zcdp_rho=spec.rho,
            rho_used=result.rho_used,
            count_rho=result.count_rho,
            noisy_count=result.noisy_count,
            rounds=result.rounds,
            measured=[list(x.clique) for x in result.measurements],
            sensitivity=m,
            max_model_size=float(item.max_model_size),
            error=float(utility["error"].mean()),
            error_low=float(low.mean()),
            error_high=float(high.mean()),
            covered_marginals=sum(e is not None for e in estimates),
            accounting=accounting,
            guarantee=UnitGuarantee.model_validate(
                zcdp_unit_statement(plan.bounding, plan.cost, spec.rho)
            ),
        )
        return Executed(result=released, sensitivity=m)

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = summary.result_as(SyntheticResult)
        count = (
            f"a noisy row count ({r.noisy_count:.1f}, rho {r.count_rho:.3g})"
            if r.noisy_count is not None
            else "the configured row count"
        )
        error = (
            f"Mean normalized L1 error (0 exact, 2 disjoint) over the {len(r.workload)} "
            f"workload marginals, estimated from public values only (never the data): about "
            f"{r.error:.3g} ({r.error_low:.3g} to {r.error_high:.3g}). It is a parametric "
            "bootstrap: the published rows stand in for the data, AIM's measurements are "
            "redrawn with their noise, the model refitted and as many rows sampled; the range "
            "runs from the refit warm-started at the model to the refit from scratch, the "
            "estimate is its middle. It covers the noise's error through the model, the fit's "
            "and the sampling error of the rows, not data structure the measured marginals "
            "cannot express. "
            f"{r.covered_marginals} workload marginal(s) a measurement covers also get a "
            "check range in `utility.csv`."
        )
        return [
            f"{r.rows} synthetic rows over {len(r.columns)} columns ({', '.join(r.columns)}), "
            f"from {len(r.measured)} noisy marginals measured in {r.rounds} AIM round(s); rows "
            f"from {count}. Workload: {len(r.workload)} marginal(s). {error} "
            f"Accounting: {r.accounting}. Files: `synthetic.csv`, `utility.csv`, "
            "`measurements.parquet`."
        ]


def _measurements(spec: SyntheticSpec, measurements: Sequence[Measurement]) -> pd.DataFrame:
    """The noisy marginals, one row per cell: which measurement, its cell, count and noise."""
    labels = {a.column: a.labels for a in spec.axes}
    frames = []
    for i, m in enumerate(measurements):
        shape = [spec.domain[c] for c in m.clique]
        cells = np.unravel_index(np.arange(m.noisy.size), shape)
        cell = [
            " | ".join(labels[c][int(k[j])] for j, c in enumerate(m.clique))
            for k in zip(*cells, strict=True)
        ]
        frames.append(
            pd.DataFrame(
                {
                    "measurement": i,
                    "marginal": marginal_label(m.clique),
                    "round": m.round,
                    "cell": cell,
                    "noisy_count": m.noisy,
                    "sigma": m.sigma,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
