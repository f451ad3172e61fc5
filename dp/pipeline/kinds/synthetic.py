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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import Field, model_validator

from dppub.dp.axes import Axis
from dppub.dp.engine import MarginalsAggregate, TableSource
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import Cost, Integer, Model, Name, Number, PipelineConfig
from dppub.dp.pipeline.domains import declared_columns, histogram_axis
from dppub.dp.pipeline.hooks import hooks
from dppub.dp.pipeline.kinds.base import (
    JSON,
    Executed,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
    as_float,
    as_float_or_none,
    as_int,
    as_list,
    as_object,
    as_str,
    as_strs,
)
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS, MAX_SYNTHETIC_VALUES, check_at_most
from dppub.dp.pipeline.units import bounding_for, zcdp_unit_statement
from dppub.dp.publication import Staging
from dppub.dp.synthetic import candidates, cdp_rho, project_answer, run_aim, workload_cliques
from dppub.dp.synthetic.aim import Measurement
from dppub.dp.synthetic.pgm import Clique, check_installed
from dppub.dp.synthetic.utility import bootstrap_errors, table_marginal

if TYPE_CHECKING:
    from dppub.dp.pipeline.html.sections import Section

__all__ = [
    "SyntheticKind",
    "SyntheticModel",
    "SyntheticResult",
    "SyntheticSpec",
    "estimated_errors",
    "utility_frame",
]

FloatArray = npt.NDArray[np.float64]
_BIAS = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|
MAX_SYNTHETIC_COLUMNS = 52
REPLICATES = 2
"""Bootstrap replicates per end of the error range (:mod:`dp.synthetic.utility`): one refit and
one sample each; the mean over the workload marginals varies little between them."""


DEFAULT_MAX_ROWS = 1_000_000
"""The most rows a synthetic table publishes from its noisy count unless ``max_rows`` says."""
COUNT_SHARES = (0.01, 0.1)
"""The noisy row count's share of rho: at least 1%, at most 10% (:func:`count_share`)."""
COUNT_ERROR = 0.01
"""The noisy row count's standard deviation is held to 1% of ``max_rows``."""


def count_share(rho: float, sensitivity: float, max_rows: int, where: str) -> float:
    """The noisy row count's share of rho: the smallest in :data:`COUNT_SHARES` at which its
    standard deviation ``m / sqrt(2 share rho)`` is at most :data:`COUNT_ERROR` of
    ``max_rows`` (the declared scale of the data), so the count's error is small against a
    table of that size; a one-line error if 10% is not enough (give ``rows``, public, or a
    larger epsilon). Public values only.

    >>> count_share(0.015, 1.0, 1_000_000, "s")
    0.01
    """
    low, high = COUNT_SHARES
    sigma = COUNT_ERROR * max_rows
    need = (sensitivity / sigma) ** 2 / (2.0 * rho)  # m / sqrt(2 share rho) = sigma
    if need > high:
        worst = sensitivity / math.sqrt(2.0 * high * rho)
        raise ConfigError(
            f"{where}: at rho {rho:.3g} the noisy row count's standard deviation would be "
            f"{worst:.3g} rows with {high:.0%} of the budget, more than {COUNT_ERROR:.0%} of "
            f"max_rows {max_rows:,}; give rows: (public), a larger max_rows or a larger epsilon"
        )
    return max(low, need)


class MarginalsWorkload(Model):
    """All ``k``-way marginals of the declared columns."""

    marginals: Integer = Field(ge=1)


class SyntheticModel(Cost):
    name: Name
    columns: list[str] = Field(min_length=1, max_length=MAX_SYNTHETIC_COLUMNS)
    bins: dict[str, Integer] = Field(default_factory=dict)
    """Equal-width bins of a numeric column over its declared bounds."""
    levels: dict[str, Integer] = Field(default_factory=dict)
    """A hierarchy level of a column, fixed here (never chosen from the data)."""
    workload: MarginalsWorkload | list[list[str]] = Field(
        default_factory=lambda: MarginalsWorkload(marginals=2)
    )
    """What the table must preserve: all k-way marginals, or a list of column sets."""
    rows: Integer | None = Field(default=None, ge=1, le=MAX_SYNTHETIC_VALUES)
    """Rows to publish (public); default: a noisy count paid from the release's budget."""
    max_rows: Integer | None = Field(default=None, ge=1, le=MAX_SYNTHETIC_VALUES)
    """With the noisy count: the most rows published (the count is clamped to it), and the
    scale its noise is held small against (:func:`count_share`). Default
    :data:`DEFAULT_MAX_ROWS`."""
    max_model_size: Number = Field(default=80.0, gt=0.0, le=4096.0)
    """The model's size limit in MB: bounds a run's memory and time."""
    max_rounds: Integer | None = Field(default=None, ge=1, le=10_000)
    """A cap on AIM's rounds (the last spends what is left); default AIM's own end."""
    planned_rounds: Integer | None = Field(default=None, ge=1, le=10_000)
    """AIM's ``T``: the first rounds spend ``rho / T`` each (until annealing raises it); at
    least the number of columns. Default: ``4 d`` (the paper's ``16 d`` takes more rounds for
    the same error)."""
    iters: Integer = Field(default=1000, ge=1, le=100_000)
    """Private-PGM's iterations per fit."""

    @model_validator(mode="after")
    def _delta(self) -> SyntheticModel:
        if not self.delta > 0.0:
            raise ValueError("synthetic data is accounted in zCDP: it needs delta > 0")
        if self.rows is not None and self.max_rows is not None:
            raise ValueError("max_rows bounds the noisy row count: give rows or max_rows")
        return self


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


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticResult:
    """A synthetic table's public account: its ``release.json`` details."""

    rows: int
    columns: list[str]
    workload: list[list[str]]
    zcdp_rho: float
    """The unit-level rho AIM ran at (sensitivity ``m``): the report's zCDP total reads it."""
    rho_used: float
    count_rho: float
    noisy_count: float | None
    rounds: int
    measured: list[list[str]]
    sensitivity: float
    max_model_size: float
    error: float
    """The published rows' mean normalized L1 error over the workload marginals, estimated
    from public values only: the middle of ``error_low`` and ``error_high``."""
    error_low: float
    """The bootstrap with its refit warm-started at the model (it starts at the answer)."""
    error_high: float
    """The bootstrap with its refit from scratch (:func:`dp.synthetic.utility.bootstrap_errors`)."""
    covered_marginals: int
    """How many workload marginals a measurement covers (``check_low``/``check_high`` in
    ``utility.csv``)."""
    accounting: str
    guarantee: dict[str, JSON]

    def to_json(self) -> dict[str, JSON]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> SyntheticResult:
        def cliques(value: JSON) -> list[list[str]]:
            return [list(as_strs(c)) for c in as_list(value)]

        return cls(
            rows=as_int(data["rows"]),
            columns=list(as_strs(data["columns"])),
            workload=cliques(data["workload"]),
            zcdp_rho=as_float(data["zcdp_rho"]),
            rho_used=as_float(data["rho_used"]),
            count_rho=as_float(data["count_rho"]),
            noisy_count=as_float_or_none(data["noisy_count"]),
            rounds=as_int(data["rounds"]),
            measured=cliques(data["measured"]),
            sensitivity=as_float(data["sensitivity"]),
            max_model_size=as_float(data["max_model_size"]),
            error=as_float(data["error"]),
            error_low=as_float(data["error_low"]),
            error_high=as_float(data["error_high"]),
            covered_marginals=as_int(data["covered_marginals"]),
            accounting=as_str(data["accounting"]),
            guarantee=dict(as_object(data["guarantee"])),
        )


def _label(clique: Sequence[str]) -> str:
    return " x ".join(clique)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A table's error on one workload marginal, bounded from a noisy measurement covering
    it: ``distance`` is the table's L1 distance to the measurement summed onto the marginal,
    ``noise`` the expected L1 of that measurement's noise there; the error lies about within
    ``distance -/+ noise`` (the triangle inequality, with the noise at its expected size)."""

    marginal: Clique
    source: Clique
    distance: float
    noise: float


def estimated_errors(
    measurements: Sequence[Measurement],
    domain: Mapping[str, int],
    workload: Sequence[Clique],
    table: Mapping[Clique, FloatArray],
) -> list[Estimate | None]:
    """Per workload marginal, from the public noisy measurements only (never the data): the
    :class:`Estimate` against the most precise measurement covering it (its noisy counts
    summed onto the marginal: Gaussian noise of std ``sigma sqrt(c)`` per cell, ``c`` cells
    summed), or None if no measurement covers it."""
    out: list[Estimate | None] = []
    for w in workload:
        best: Estimate | None = None
        for m in measurements:
            if not set(w) <= set(m.clique):
                continue
            noisy = project_answer({m.clique: m.noisy}, domain, w)
            noise = _BIAS * m.sigma * math.sqrt(m.noisy.size / noisy.size) * noisy.size
            if best is None or noise < best.noise:
                distance = float(np.abs(table[w] - noisy).sum())
                best = Estimate(w, m.clique, distance, noise)
        out.append(best)
    return out


MARGINAL_RANGE = (
    "bootstrap range, not a calibrated 95% interval: the lower and higher of the warm-started "
    "and from-scratch refits' mean errors, widened by the replicates' spread"
)
"""What ``utility.csv``'s per-marginal ``error_low``/``error_high`` are (its ``error_range``)."""


def marginal_error_range(low: FloatArray, high: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per workload marginal, a range for the published rows' error from the bootstrap's
    replicates (rows) of the warm-started (``low``) and from-scratch (``high``) refits.

    Either refit's mean can be the larger on one marginal (the old range, warm mean to scratch
    mean, had its ends reversed on about a quarter of the marginals), and a marginal's true
    error varies about its expectation by the sampling of the rows and the noise: the range is
    the lower of the two means times the 2.5% point of every replicate's error relative to its
    marginal's mean (all marginals pooled: two replicates per refit say little alone; the
    deviations stretched by ``sqrt((n + 1) / (n - 1))`` for ``n`` replicates, the spread of a
    new error about their mean), to the higher times the 97.5% point. ``error_low <=
    error_high`` always. On simulated replicates (each marginal's error gamma-distributed with
    relative sd 0.35, the warm refit's mean 0.9x and the scratch refit's 1.1x the truth's, 2
    replicates each, 10 marginals) the range held a new error 0.95 of the time; the old range
    (warm mean to scratch mean) 0.24, reversed on 0.30 of the marginals. With mbi the release's
    own coverage is measured by ``bench/coverage.py``.

    >>> lo, hi = marginal_error_range(np.array([[0.2, 0.1]]), np.array([[0.1, 0.3]]))
    >>> bool(np.all(lo <= hi)), lo.round(3).tolist(), hi.round(3).tolist()
    (True, [0.016, 0.016], [0.369, 0.553])
    """
    both = np.vstack([low, high])
    n, mean = both.shape[0], both.mean(axis=0)
    # A deviation from the mean of n replicates has variance (n - 1) / n of one replicate's,
    # a new error's from that mean (n + 1) / n: scaled, the spread is a prediction range.
    stretch = math.sqrt((n + 1) / (n - 1)) if n > 1 else 1.0
    relative = 1.0 + stretch * (both / np.where(mean > 0, mean, 1.0) - 1.0)[:, mean > 0]
    q_lo, q_hi = (
        (float(np.quantile(relative, 0.025)), float(np.quantile(relative, 0.975)))
        if relative.size
        else (1.0, 1.0)
    )
    warm, scratch = low.mean(axis=0), high.mean(axis=0)
    return (
        np.minimum(warm, scratch) * min(q_lo, 1.0),
        np.maximum(warm, scratch) * max(q_hi, 1.0),
    )


def utility_frame(
    workload: Sequence[Clique],
    domain: Mapping[str, int],
    low: FloatArray,
    high: FloatArray,
    estimates: Sequence[Estimate | None],
    total: float,
) -> pd.DataFrame:
    """``utility.parquet``: per workload marginal, the bootstrap's range ``error_low`` to
    ``error_high`` (:func:`marginal_error_range`), ``error`` the two refits' mean (the
    release's ``error`` is its mean over the marginals), ``error_range`` what
    the range is (:data:`MARGINAL_RANGE`), and where a measurement covers it the check
    ``[max(distance - noise, 0), distance + noise] / total`` (NaN where nothing covers it)."""
    scale = max(total, 1.0)
    nan = float("nan")
    lo, hi = marginal_error_range(low, high)
    return pd.DataFrame(
        {
            "marginal": [_label(w) for w in workload],
            "cells": [math.prod(domain[c] for c in w) for w in workload],
            "error": (low.mean(axis=0) + high.mean(axis=0)) / 2.0,
            "error_low": lo,
            "error_high": hi,
            "error_range": MARGINAL_RANGE,
            "check_low": [
                nan if e is None else max(e.distance - e.noise, 0.0) / scale for e in estimates
            ],
            "check_high": [nan if e is None else (e.distance + e.noise) / scale for e in estimates],
            "covered_by": ["not measured" if e is None else _label(e.source) for e in estimates],
        }
    )


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
                f"synthetic {item.name!r}: the cells of marginal {_label(cl)}",
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
            kind=self.label,
            mechanism="aim",
            cost=item.cost,
            is_dp=True,
            bounding=bounding,
            columns=columns,
            spec=spec,
            facts={
                "workload": [list(cl) for cl in workload],
                "candidates": len(candidates(workload)),
                "rho": rho,
            },
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

    def describe(self, plan: ReleasePlan[SyntheticSpec]) -> dict[str, JSON]:
        """Data-independent: the workload and the noise part of its expected L1 error per
        marginal (in rows), from all of rho on one marginal to rho split evenly over every
        workload marginal; the model's own error comes on top."""
        spec = plan.spec
        m = plan.bounding.rows_per_unit
        cells = [math.prod(spec.domain[c] for c in cl) for cl in spec.workload]
        mean_cells = sum(cells) / len(cells)
        sigma_one = m / math.sqrt(2.0 * spec.rho)
        low = _BIAS * sigma_one * mean_cells
        high = low * math.sqrt(len(spec.workload))
        out: dict[str, JSON] = {
            **plan.facts,
            "expected_l1_low": low,
            "expected_l1_high": high,
        }
        if spec.item.rows is not None:
            out["rows"] = spec.item.rows
        return out

    def plan_text(self, described: Mapping[str, JSON]) -> str:
        r = described
        cliques = [as_strs(c) for c in as_list(r["workload"])]
        shown = [_label(cl) for cl in cliques[:3]]
        more = len(cliques) - len(shown)
        workload = ", ".join(shown) + (f", ... ({more} more)" if more else "")
        low, high = as_float(r["expected_l1_low"]), as_float(r["expected_l1_high"])
        text = (
            f"  AIM at rho {as_float(r['rho']):.4g} over {len(cliques)} workload marginal(s) "
            f"({workload}); {r['candidates']} candidates. Expected noise L1 per marginal: "
            f"{low:.4g} to {high:.4g} rows"
        )
        if "rows" in r:
            n = as_float(r["rows"])
            text += f" ({low / n:.3g} to {high / n:.3g} of {int(n)} rows)"
        return text

    def execute(
        self, plan: ReleasePlan[SyntheticSpec], exact: Exact, data: TableSource, out: Staging
    ) -> Executed:
        spec, item = plan.spec, plan.spec.item
        m = float(plan.bounding.rows_per_unit)
        step = hooks()
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
            progress=step.progress,
            should_stop=step.should_stop,
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
                should_stop=step.should_stop,  # it refits the model, slow for a large one
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
            guarantee=zcdp_unit_statement(plan.bounding, plan.cost, spec.rho),
        )
        return Executed.of(released, sensitivity=m)

    def report(self, summary: ReleaseSummary) -> list[str]:
        r = SyntheticResult.from_json(summary.details)
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

    def plot(self, summary: ReleaseSummary, folder: Path) -> Section:
        from dppub.dp.pipeline.html.synthetic_plots import (
            synthetic_plot,  # matplotlib: only when a report is drawn
        )

        return synthetic_plot(summary, SyntheticResult.from_json(summary.details), folder)


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
                    "marginal": _label(m.clique),
                    "round": m.round,
                    "cell": cell,
                    "noisy_count": m.noisy,
                    "sigma": m.sigma,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
