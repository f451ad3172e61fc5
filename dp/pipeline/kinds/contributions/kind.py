"""Release kind contributions (section ``contributions:``): the DP distribution of rows per
privacy unit, and the share of rows each candidate ``max_rows_per_unit`` would drop.

One release, its own declared epsilon, one ledger row (mechanism ``laplace``): units per bin of
their row counts (declared bins up to a declared ``cap``; :mod:`dp.contributions`), folded in
the run's shared scan over *every* row (no unit bounding: a unit counts once whatever its
rows), Laplace noise at the sensitivity derived from the neighbour relation (add/remove one
unit: 1; without a privacy unit, rows counted per value of ``unit:`` and neighbours one row:
2). From the published counts alone (post-processing), per candidate bound, the share of units
with more rows and the share of rows it would drop, each with the noise's 95% range: an office
chooses ``max_rows_per_unit`` from a released figure, not from looking at the data.

Published: ``histogram.parquet`` / ``.csv`` (``bin``, ``rows_low``, ``rows_high``, ``units``,
``std_error``, ``ci_low``, ``ci_high``) and ``bounds.parquet`` / ``.csv`` (per candidate
``max_rows_per_unit``: ``units_over``, ``rows_dropped`` and their ranges); the rule, the
sensitivity and the shares in ``release.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.calibration import laplace_half_width
from dppub.dp.contributions import (
    INTERVAL_LEVEL,
    Relation,
    bin_labels,
    check_edges,
    default_edges,
    dropped_shares,
    histogram_sensitivity,
    noise_range,
)
from dppub.dp.engine.folds.unit_rows import UnitRowsAggregate
from dppub.dp.errors import ConfigError
from dppub.dp.mechanisms import laplace
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
from dppub.dp.pipeline.kinds.contributions.facts import ContributionsFacts
from dppub.dp.pipeline.kinds.contributions.item import ContributionsModel
from dppub.dp.pipeline.kinds.contributions.result import Candidate, ContributionsResult
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, check_at_most
from dppub.dp.pipeline.units import Bounding
from dppub.dp.publication import Staging
from dppub.dp.tables.precision import as_text, exponents, round_at

if TYPE_CHECKING:
    pass

__all__ = ["ContributionsKind", "ContributionsSpec"]

RELATION: Relation = "add-remove"
"""dppub's neighbours: one unit (or, without a unit, one row) added or removed."""

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContributionsSpec:
    column: str
    per_unit: bool
    edges: tuple[int, ...]
    cap: int
    sensitivity: int


def _rule(spec: ContributionsSpec) -> str:
    if spec.per_unit:
        return (
            f"add/remove one {spec.column} adds or removes all its rows: it enters or leaves "
            f"exactly one bin, so L1 = {spec.sensitivity}"
        )
    return (
        f"add/remove one row moves one {spec.column}'s count by one: between two adjacent bins "
        f"(from zero rows, into the first), so L1 = {spec.sensitivity}"
    )


def _share_digits(
    values: np.ndarray, low: np.ndarray, high: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray]:
    """The shares rounded as a table's values (:mod:`dp.tables.precision`): at the power of
    ten at or below a tenth of their range's standard-error equivalent (width / 3.92), to
    0.001 at the coarsest; and those powers."""
    e = exponents((high - low) / 3.92, counts=np.zeros(len(values), dtype=bool))
    e = np.where(np.isfinite(e), np.minimum(e, -3.0), -3.0)
    return [np.clip(round_at(v, e), 0.0, 1.0) for v in (values, low, high)], e


def _write(out: Staging, name: str, stem: str, frame: pd.DataFrame, digits: pd.DataFrame) -> None:
    """``stem.parquet`` (rounded floats) and ``stem.csv`` (the same digits as text, RFC 4180
    line ends), as a table's answers are written."""
    out.write_frame(name, f"{stem}.parquet", frame)
    out.write_csv(name, f"{stem}.csv", digits, lineterminator="\r\n")


class ContributionsKind(ReleaseKind[ContributionsModel, ContributionsSpec, IntArray]):
    """See the module docstring."""

    section = "contributions"
    label = "contributions"
    many = True
    model = ContributionsModel
    result = ContributionsResult
    facts = ContributionsFacts
    plots = "contributions_plot"

    def plan(self, cfg: PipelineConfig, item: ContributionsModel) -> ReleasePlan[ContributionsSpec]:
        unit = cfg.dataset.privacy_unit
        column = item.unit or unit
        where = f"contributions {item.name!r}"
        if column is None:
            raise ConfigError(
                f"{where}: the dataset has no privacy_unit: name the column whose rows per "
                "value to count (unit: <column>; neighbours then differ by one row)"
            )
        if unit is not None and column != unit:
            raise ConfigError(
                f"{where}: unit {column!r} is not the dataset's privacy_unit {unit!r}: a unit "
                f"of {unit!r} may have rows under many {column!r} values (drop unit:)"
            )
        if item.delta != 0.0:
            raise ConfigError(f"{where}: the Laplace mechanism is pure: delta must be 0")
        declared_columns(cfg, [column])
        edges = check_edges(item.bins or default_edges(item.cap), item.cap)
        check_at_most(f"{where}: the bins", len(edges) + 1, MAX_DOMAIN_CELLS)
        per_unit = unit is not None
        spec = ContributionsSpec(
            column=column,
            per_unit=per_unit,
            edges=edges,
            cap=item.cap,
            sensitivity=histogram_sensitivity(relation=RELATION, per_unit=per_unit),
        )
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism="laplace",
            cost=item.cost,
            is_dp=True,
            columns=(column,),
            # every row read: a unit counts once whatever its rows (no bound to apply)
            bounding=Bounding(unit=unit, bounded=False) if per_unit else Bounding(),
            spec=spec,
        )

    def scan(self, plan: ReleasePlan[ContributionsSpec]) -> Scan[IntArray]:
        spec = plan.spec
        return scan_one(UnitRowsAggregate(spec.column, spec.edges, spec.cap))

    def describe(self, plan: ReleasePlan[ContributionsSpec]) -> ContributionsFacts:
        spec = plan.spec
        return ContributionsFacts(
            column=spec.column,
            bins=tuple(bin_labels(spec.edges, spec.cap)),
            sensitivity=spec.sensitivity,
            noise_scale=spec.sensitivity / plan.cost.epsilon,
        )

    def plan_text(self, facts: PlanFacts) -> str:
        f = facts_as(facts, ContributionsFacts)
        return (
            f"  {f.column} by rows: {len(f.bins)} bins ({', '.join(f.bins)}); "
            f"L1 sensitivity {f.sensitivity}, Laplace scale {f.noise_scale:.4g} per bin"
        )

    def execute(
        self, plan: ReleasePlan[ContributionsSpec], exact: IntArray, context: ExecuteContext
    ) -> Executed:
        spec, eps = plan.spec, plan.cost.epsilon
        scale = spec.sensitivity / eps
        noisy = laplace(exact.astype(np.float64), sensitivity=spec.sensitivity, epsilon=eps)
        # post-processing: integers; a negative count is kept (noise around an empty bin:
        # clamping would bias the shares upwards), its interval cut at 0 (a count is not)
        half = laplace_half_width(scale, INTERVAL_LEVEL)
        units = np.rint(noisy)
        std = math.sqrt(2.0) * scale
        e = exponents(np.full(len(units), std), counts=np.ones(len(units), dtype=bool))
        low = np.maximum(np.floor(noisy - half), 0.0)
        high = np.maximum(np.ceil(noisy + half), 0.0)
        uppers = [*(nxt - 1 for nxt in (*spec.edges[1:], spec.cap)), None]
        labels = bin_labels(spec.edges, spec.cap)
        histogram = pd.DataFrame(
            {
                "bin": labels,
                "rows_low": [*spec.edges, spec.cap],
                "rows_high": pd.array(uppers, dtype="Int64"),
                "units": units.astype(np.int64),
                "std_error": round_at(np.full(len(units), std), e),
                "ci_low": low.astype(np.int64),
                "ci_high": high.astype(np.int64),
            }
        )
        text = histogram.astype(str).replace("<NA>", "")
        text["std_error"] = as_text(histogram["std_error"], e)
        _write(context.out, plan.name, "histogram", histogram, text)
        shares = dropped_shares(units, spec.edges, spec.cap)
        o_lo, o_hi, d_lo, d_hi = noise_range(units, scale, spec.edges, spec.cap)
        (over, over_lo, over_hi), e_over = _share_digits(shares.units_over, o_lo, o_hi)
        (drop, drop_lo, drop_hi), e_drop = _share_digits(shares.rows_dropped, d_lo, d_hi)
        candidates = tuple(
            Candidate(
                bound=b,
                units_over=float(over[i]),
                units_over_low=float(over_lo[i]),
                units_over_high=float(over_hi[i]),
                rows_dropped=float(drop[i]),
                rows_dropped_low=float(drop_lo[i]),
                rows_dropped_high=float(drop_hi[i]),
            )
            for i, b in enumerate(shares.bounds)
        )
        bounds = pd.DataFrame([c.to_json() for c in candidates]).rename(
            columns={"bound": "max_rows_per_unit"}
        )
        digits = bounds.astype(str)
        for column in bounds.columns[1:]:
            at = e_over if column.startswith("units") else e_drop
            digits[column] = as_text(bounds[column], at)
        _write(context.out, plan.name, "bounds", bounds, digits)
        result = ContributionsResult(
            column=spec.column,
            per_unit=spec.per_unit,
            cap=spec.cap,
            bins=tuple(labels),
            units=tuple(int(u) for u in units),
            sensitivity=spec.sensitivity,
            noise_scale=scale,
            sensitivity_rule=_rule(spec),
            candidates=candidates,
            rows_dropped_is_lower_bound=shares.rows_dropped_is_lower_bound,
        )
        return Executed(result=result, sensitivity=float(spec.sensitivity))

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = summary.result_as(ContributionsResult)
        what = (
            f"{r.column}s by their number of rows"
            if r.per_unit
            else f"values of `{r.column}` by their number of rows (row-level neighbours)"
        )
        lower = (
            f" Some units have {r.cap} rows or more, counted at {r.cap}: the rows dropped are "
            "lower bounds."
            if r.rows_dropped_is_lower_bound
            else ""
        )
        lines = [
            f"The distribution of {what}: {len(r.bins)} bins up to {r.cap} or more, Laplace "
            f"noise of scale {r.noise_scale:.4g} per bin (L1 sensitivity {r.sensitivity}; "
            f"{r.sensitivity_rule}). Files: `histogram.csv`, `bounds.csv`.",
            "",
            "| rows | units |",
            "|---|---|",
            *(f"| {b} | {u} |" for b, u in zip(r.bins, r.units, strict=True)),
            "",
            "What each candidate `max_rows_per_unit` would do, from the published counts only "
            f"(post-processing; in brackets the noise's 95% range).{lower}",
            "",
            "| max_rows_per_unit | units with more rows | rows dropped |",
            "|---|---|---|",
        ]
        for c in r.candidates:
            lines.append(
                f"| {c.bound} | {100 * c.units_over:.3g}% ({100 * c.units_over_low:.3g}-"
                f"{100 * c.units_over_high:.3g}%) | {100 * c.rows_dropped:.3g}% "
                f"({100 * c.rows_dropped_low:.3g}-{100 * c.rows_dropped_high:.3g}%) |"
            )
        return lines
